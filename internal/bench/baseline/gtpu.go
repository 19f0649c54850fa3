package baseline

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/xupf/xupf/internal/bench/pkt"
)

// encapLen is the outer headers' length with a PDU Session Container (ENCAP_LEN).
const encapLen = pkt.IPv4Len + pkt.UDPLen + pkt.GTPULen + pkt.GTPUOptLen + pkt.PSCLen

// Tunnel is the one GTP-U tunnel the minimal encapsulation puts every frame in: from Src to
// Dst with TEID and a PDU Session Container (downlink) carrying QFI.
type Tunnel struct {
	Src, Dst netip.Addr
	TEID     uint32
	QFI      uint8
}

// GTPUOptions configure the minimal GTP-U datapath (bpf/bench/gtpu.bpf.c): where frames go,
// and Encap's tunnel for the encapsulating program; nil Encap loads the decapsulating one.
type GTPUOptions struct {
	ForwardOptions
	Encap *Tunnel
}

// LoadGTPU loads the minimal GTP-U datapath without attaching it.
func LoadGTPU(opts GTPUOptions) (*Forwarder, error) {
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("minimal GTP-U: %w", err)
	}
	var hdr [encapLen]byte
	if opts.Encap != nil {
		var err error
		if hdr, err = encapHeader(*opts.Encap); err != nil {
			return nil, fmt.Errorf("minimal GTP-U: %w", err)
		}
	}
	var objs gtpuObjects
	if err := loadGtpuObjects(&objs, nil); err != nil {
		return nil, fmt.Errorf("minimal GTP-U: load: %w", err)
	}
	err := errors.Join(opts.configure(objs.FwdConfig, objs.FwdPorts), objs.GtpuConfig.Put(uint32(0), gtpuGtpuCfg{Hdr: hdr}))
	if err != nil {
		objs.Close()
		return nil, fmt.Errorf("minimal GTP-U: configure: %w", err)
	}
	prog := objs.XupfBenchDecap
	if opts.Encap != nil {
		prog = objs.XupfBenchEncap
	}
	return &Forwarder{prog: prog, objs: &objs}, nil
}

// encapHeader is the template of t's outer headers that gtpu_cfg holds: the headers
// internal/bench/pkt builds for a downlink frame of t, with the three lengths 0 and the
// IPv4 checksum of that header.
func encapHeader(t Tunnel) ([encapLen]byte, error) {
	var hdr [encapLen]byte
	mac := []byte{0, 0, 0, 0, 0, 0}
	f := pkt.Flow{SrcMAC: mac, DstMAC: mac, Src: netip.AddrPortFrom(t.Src, 1), Dst: netip.AddrPortFrom(t.Dst, 1),
		Tunnel: &pkt.Tunnel{Src: t.Src, Dst: t.Dst, TEID: t.TEID, PSC: true, QFI: t.QFI, PDUType: pkt.PDUTypeDownlink}}
	fr, err := pkt.Build(f, pkt.MinFrameSize(true, true))
	if err != nil {
		return hdr, err
	}
	copy(hdr[:], fr.Data[pkt.EthLen:])
	ip, udp, gtp := hdr[:pkt.IPv4Len], hdr[pkt.IPv4Len:], hdr[pkt.IPv4Len+pkt.UDPLen:]
	binary.BigEndian.PutUint16(ip[2:], 0)
	binary.BigEndian.PutUint16(ip[10:], 0)
	binary.BigEndian.PutUint16(ip[10:], pkt.Checksum(ip))
	binary.BigEndian.PutUint16(udp[4:], 0)
	binary.BigEndian.PutUint16(gtp[2:], 0)
	return hdr, nil
}
