package testbed

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/xupf/xupf/internal/session"
)

// openGNBConn opens the gNB's one GTP-U socket, 10.100.3.2:2152. A gNB sends and receives
// GTP-U on the same port, and two sockets cannot share it without the kernel splitting the
// traffic between them, so uplink sending, downlink receiving and echo all use this one.
func (t *Topology) openGNBConn() error {
	c, err := t.listenUDP(t.GNBNS, netip.AddrPortFrom(GNBAddr, GTPUPort))
	if err != nil {
		return err
	}
	t.gnbConn = c
	return nil
}

// SendUplink sends n G-PDUs from the gNB to the UPF's GTP-U address with s.UplinkTEID. Each
// carries an IPv4/UDP packet from s.UE:40000 to the DN host's 10.100.6.2:5001 with
// payload(i); a qfi other than 0 adds an uplink PDU Session Container with that QFI.
func (t *Topology) SendUplink(s session.Session, n int, payload func(i int) []byte, qfi uint8) error {
	return t.SendUplinkFrom(s, UESrcPort, n, payload, qfi)
}

// SendUplinkFrom is SendUplink with the UE's source port uePort instead of UESrcPort, for
// packets that an SDF filter on the UE's ("assigned") port should select, or not.
func (t *Topology) SendUplinkFrom(s session.Session, uePort uint16, n int, payload func(i int) []byte, qfi uint8) error {
	t.gnbMu.Lock()
	defer t.gnbMu.Unlock()
	if t.gnbConn == nil {
		return errors.New("testbed: topology closed")
	}
	dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(N3Addr, GTPUPort))
	for i := range n {
		inner, err := BuildIPv4UDP(netip.AddrPortFrom(s.UE, uePort), netip.AddrPortFrom(DNAddr, DNPort), payload(i))
		if err != nil {
			return err
		}
		pdu, err := BuildGPDU(s.UplinkTEID, qfi, inner)
		if err != nil {
			return err
		}
		if _, err := t.gnbConn.WriteToUDP(pdu, dst); err != nil {
			return fmt.Errorf("testbed: send uplink packet %d of %d: %w", i+1, n, err)
		}
	}
	return nil
}

// SendFromGNB sends one datagram from the gNB's GTP-U socket to the UPF's GTP-U address:
// GTP-U signalling a test builds itself.
func (t *Topology) SendFromGNB(b []byte) error {
	t.gnbMu.Lock()
	defer t.gnbMu.Unlock()
	if t.gnbConn == nil {
		return errors.New("testbed: topology closed")
	}
	if _, err := t.gnbConn.WriteToUDP(b, net.UDPAddrFromAddrPort(netip.AddrPortFrom(N3Addr, GTPUPort))); err != nil {
		return fmt.Errorf("testbed: send from the gNB: %w", err)
	}
	return nil
}

// Receiver collects UDP datagrams on one socket of the topology.
type Receiver struct {
	conn   *net.UDPConn
	shared bool // the gNB socket: owned by the topology, not closed by Close
}

// Collect returns the datagrams received until n arrived or timeout passed (fewer than n on
// timeout, which is not an error).
func (r *Receiver) Collect(n int, timeout time.Duration) ([]Datagram, error) {
	return collect(r.conn, n, timeout, nil)
}

// Close stops receiving.
func (r *Receiver) Close() error {
	if r.shared {
		return nil
	}
	return r.conn.Close()
}

// ListenDN starts receiving uplink packets on the DN host at 10.100.6.2:5001. Call it before
// sending, and Close it.
func (t *Topology) ListenDN() (*Receiver, error) {
	c, err := t.listenUDP(t.DNNS, netip.AddrPortFrom(DNAddr, DNPort))
	if err != nil {
		return nil, err
	}
	return &Receiver{conn: c}, nil
}

// SendDownlink sends n UDP datagrams with payload(i) from the DN host (10.100.6.2:5002) to
// s.UE:6000, with TTL 64; the DN host routes the UE network through the UPF.
func (t *Topology) SendDownlink(s session.Session, n int, payload func(i int) []byte) error {
	return t.SendDownlinkTo(s, UEPort, n, payload)
}

// SendDownlinkTo is SendDownlink to the UE's port uePort instead of UEPort, for packets that
// an SDF filter on the UE's ("assigned") port should select, or not.
func (t *Topology) SendDownlinkTo(s session.Session, uePort uint16, n int, payload func(i int) []byte) error {
	return t.SendUDP(t.DNNS, netip.AddrPortFrom(DNAddr, DNSrcPort), netip.AddrPortFrom(s.UE, uePort), n, payload)
}

// ListenGNB starts receiving GTP-U on the gNB socket (10.100.3.2:2152), after discarding
// anything left from earlier exchanges. The socket is shared with SendUplink and Echo (see
// openGNBConn), so use one gNB receiver at a time.
func (t *Topology) ListenGNB() (*Receiver, error) {
	t.gnbMu.Lock()
	defer t.gnbMu.Unlock()
	if t.gnbConn == nil {
		return nil, errors.New("testbed: topology closed")
	}
	if err := drain(t.gnbConn); err != nil {
		return nil, err
	}
	return &Receiver{conn: t.gnbConn, shared: true}, nil
}

// ListenGTPU starts receiving GTP-U on addr:2152 in the gnb namespace: another gNB
// (GNB2Addr) or UPF (PeerUPFAddr) than the one ListenGNB serves. Close it.
func (t *Topology) ListenGTPU(addr netip.Addr) (*Receiver, error) {
	c, err := t.listenUDP(t.GNBNS, netip.AddrPortFrom(addr, GTPUPort))
	if err != nil {
		return nil, err
	}
	return &Receiver{conn: c}, nil
}

// ReceiveDownlink collects up to n GTP-U datagrams on r (from ListenGNB) and decodes them.
// A datagram that does not decode is an error: the UPF sent something malformed.
func ReceiveDownlink(r *Receiver, n int, timeout time.Duration) ([]GTPUPacket, error) {
	ds, err := r.Collect(n, timeout)
	out := make([]GTPUPacket, 0, len(ds))
	var errs []error
	for i, d := range ds {
		p, derr := DecodeGTPU(d)
		if derr != nil {
			errs = append(errs, fmt.Errorf("datagram %d from %s: %w", i, d.Src, derr))
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(append([]error{err}, errs...)...)
}

// Echo sends a GTP-U Echo Request with sequence number seq from the gNB to the UPF and
// returns the first Echo Response that arrives within timeout.
func (t *Topology) Echo(seq uint16, timeout time.Duration) (GTPUPacket, error) {
	req, err := BuildEchoRequest(seq)
	if err != nil {
		return GTPUPacket{}, err
	}
	r, err := t.ListenGNB()
	if err != nil {
		return GTPUPacket{}, err
	}
	defer r.Close()
	if _, err := r.conn.WriteToUDP(req, net.UDPAddrFromAddrPort(netip.AddrPortFrom(N3Addr, GTPUPort))); err != nil {
		return GTPUPacket{}, fmt.Errorf("testbed: send echo request: %w", err)
	}
	ds, err := collect(r.conn, 1, timeout, func(d Datagram) bool {
		p, err := DecodeGTPU(d)
		return err == nil && p.MsgType == GTPUEchoResponse
	})
	if err != nil {
		return GTPUPacket{}, err
	}
	if len(ds) == 0 {
		return GTPUPacket{}, fmt.Errorf("testbed: no GTP-U Echo Response within %s", timeout)
	}
	return DecodeGTPU(ds[0])
}
