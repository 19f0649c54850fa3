package testbed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/session"
)

// A UE started with StartUE is a real IP endpoint in the gnb namespace whose packets cross the
// UPF inside GTP-U, so that ordinary programs (iperf3, a TCP stack) can run over a session:
//
//	gnb ns                                                            upf ns
//	app bound to UE --> ue0 (TUN, UE/32) --> relay --> UEGNBAddr:2152 ---- N3Addr:2152
//	app <-------------- ue0 <-------------- relay <-- G-PDUs with the session's downlink TEID
//
// There is no gtp kernel module, so a user-space relay (a goroutine each way) plays the gNB: it
// reads IP packets from the TUN device and sends them as G-PDUs with the session's uplink TEID
// (and a PDU Session Container with its QFI), and writes the inner packets of the G-PDUs it
// receives with the session's downlink TEID to the TUN device.
//
// The relay has its own GTP-U socket on s.GNB:2152. It cannot share GNBAddr: the topology's
// gNB socket (openGNBConn) is bound there for SendUplink, ListenGNB and Echo, and a second
// socket on that port would split the traffic. Sessions meant for a UE therefore point their
// downlink at UEGNBAddr, a gNB address of its own that StartUE adds to gnb0 (GNB2Addr also
// works when no test listens on it with ListenGTPU). One relay socket serves one UE: a
// G-PDU with another TEID is counted in UEStats.Foreign and dropped.
//
// Routing: the UE's packets must leave through ue0 with the UE's address as source, and
// several UEs may exist at once. Each UE gets a policy rule "from UE lookup <its table>" and a
// table with the DN network on its TUN device (src UE). So a program must bind its sockets to
// the UE address (iperf3 -B, ping -I): unbound sockets use the main table, which has no route
// to the DN network in the gnb namespace.
//
// Checksums: a TUN device without TUNSETOFFLOAD has no checksum or segmentation offload, so
// the kernel finishes every checksum (and segments TCP) before the relay reads a packet; what
// the relay writes is checked by the kernel like a packet from a real NIC (CHECKSUM_NONE). The
// UPF thus only ever sees complete checksums, as from a real gNB. Topology.ChecksumErrors
// tells whether any end host received a bad one.
//
// Speed: one read and one send per packet, no batching. TCP through the relay and the UPF
// reached 719 Mbit/s uplink and 1.37 Gbit/s downlink on a 2-CPU VM (BenchmarkTCPThroughUPF),
// far above the rates the QoS tests limit to.

// UEGNBAddr is the gNB address of StartUE's relays (see above): the downlink of a session
// used with StartUE points here.
var UEGNBAddr = netip.MustParseAddr("10.100.3.5")

// UEMTU is the MTU of a UE's TUN device: the veth MTU (1500) less the outer IPv4, UDP and
// GTP-U headers with a PDU Session Container (20 + 8 + 16), so that no G-PDU needs
// fragmenting either way (TCP's MSS follows from it on both ends).
const UEMTU = 1500 - 20 - 8 - 16

// ueRulePriority is the priority of the UEs' policy rules: before the main table's (32766).
const ueRulePriority = 1000

// ueTableBase + the TUN device's ifindex is a UE's routing table.
const ueTableBase = 1000

// UE is a UE endpoint in the gnb namespace behind a user-space gNB relay. Create it with
// Topology.StartUE and Close it before the topology.
type UE struct {
	// Session is the session the relay tunnels: UplinkTEID and QFI uplink, DownlinkTEID
	// accepted downlink, GNB the relay's address, UE the TUN device's address.
	Session session.Session
	// Dev is the TUN device's name in the gnb namespace ("ue0", "ue1", ...).
	Dev string
	// Options are the ones the UE was started with.
	Options UEOptions

	t     *Topology
	tun   *os.File
	conn  *net.UDPConn
	nl    *netlink.Handle
	rule  *netlink.Rule
	stats ueCounters

	wg        sync.WaitGroup
	errMu     sync.Mutex
	relayErr  error // the first error that stopped a relay goroutine before Close
	closing   atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

type ueCounters struct {
	ulPackets, ulBytes, dlPackets, dlBytes, foreign, malformed, sendErrors, writeErrors, delayDrops atomic.Uint64
}

// UEStats are a UE relay's counters. Bytes count the inner IP packets.
type UEStats struct {
	UplinkPackets, UplinkBytes     uint64 // read from the TUN device and sent as G-PDUs
	DownlinkPackets, DownlinkBytes uint64 // received as G-PDUs and written to the TUN device
	Foreign                        uint64 // GTP-U datagrams for another TEID, or not G-PDUs
	Malformed                      uint64 // datagrams that do not parse as GTP-U
	SendErrors                     uint64 // G-PDUs the socket refused (e.g. ENOBUFS)
	WriteErrors                    uint64 // inner packets the TUN device refused
	DelayDrops                     uint64 // packets dropped because the delay queue was full
}

// UEOptions change how a UE's relay behaves.
type UEOptions struct {
	// Delay holds every packet this long in the relay, each way, like a radio link: the
	// round trip between the UE and the DN host grows by twice Delay. The testbed's own round
	// trip is a fraction of a millisecond, far from any real UE's, and TCP behaves
	// differently behind a rate limit when the round trip is that short (see the QoS tests).
	// 0: none.
	Delay time.Duration
}

// delayQueue is how many packets a relay with a Delay holds per direction; more are dropped
// (counted in UEStats.DelayDrops), like the tail of a full queue. 16384 full-size packets
// are 20 ms at 9 Gbit/s.
const delayQueue = 16384

// StartUE creates a TUN device in the gnb namespace with s.UE/32, routes the DN network
// through it for packets from s.UE, and starts the relay on s.GNB:2152 (see the comment at
// the top of this file). s.GNB must not be GNBAddr; UEGNBAddr is added to gnb0 on demand.
func (t *Topology) StartUE(s session.Session) (*UE, error) {
	return t.StartUEWith(s, UEOptions{})
}

// StartUEWith is StartUE with options.
func (t *Topology) StartUEWith(s session.Session, opts UEOptions) (u *UE, err error) {
	switch {
	case !s.UE.Is4() || !s.GNB.Is4():
		return nil, fmt.Errorf("testbed: StartUE: the session needs an IPv4 UE and gNB address, got %s and %s", s.UE, s.GNB)
	case s.GNB == GNBAddr:
		return nil, fmt.Errorf("testbed: StartUE: gNB %s is the topology's own GTP-U socket; point the session's downlink at UEGNBAddr (%s)", GNBAddr, UEGNBAddr)
	case s.UplinkTEID == 0 || s.DownlinkTEID == 0:
		return nil, fmt.Errorf("testbed: StartUE: uplink TEID 0x%x and downlink TEID 0x%x must both be set", s.UplinkTEID, s.DownlinkTEID)
	}
	h, ok := t.handles[t.GNBNS]
	if !ok {
		return nil, errors.New("testbed: StartUE: topology closed")
	}
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		return nil, fmt.Errorf("testbed: netlink in %s: %w", t.GNBNS, err)
	}
	u = &UE{Session: s, Options: opts, t: t, nl: nl}
	defer func() {
		if err != nil {
			err = errors.Join(err, u.teardown())
			u = nil
		}
	}()

	if s.GNB == UEGNBAddr {
		if err := addrUp(nl, GNBIf, UEGNBAddr); err != nil && !errors.Is(err, unix.EEXIST) {
			return u, fmt.Errorf("testbed: %s on %s: %w", UEGNBAddr, GNBIf, err)
		}
	}
	// The device belongs to the namespace of the thread that creates it.
	if err := t.Do(t.GNBNS, func() error {
		f, name, err := openTUN("ue%d")
		u.tun, u.Dev = f, name
		return err
	}); err != nil {
		return u, fmt.Errorf("testbed: TUN device in %s: %w", t.GNBNS, err)
	}
	if err := u.configureRouting(); err != nil {
		return u, fmt.Errorf("testbed: UE %s on %s: %w", s.UE, u.Dev, err)
	}
	conn, err := t.listenUDP(t.GNBNS, netip.AddrPortFrom(s.GNB, GTPUPort))
	if err != nil {
		return u, err
	}
	u.conn = conn
	if err := setSockopts(conn, func(fd int) error {
		return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, rcvBuf)
	}); err != nil {
		return u, fmt.Errorf("testbed: SO_SNDBUFFORCE on the relay socket: %w", err)
	}
	u.wg.Add(2)
	go u.uplink(u.delayed(u.sendGPDU))
	go u.downlink(u.delayed(u.writeInner))
	return u, nil
}

// openTUN creates a TUN device (IP packets, no packet information header) from the name
// pattern and returns it as a pollable file and its name.
func openTUN(pattern string) (*os.File, string, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, "", fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(pattern)
	if err != nil {
		unix.Close(fd)
		return nil, "", err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("TUNSETIFF %s: %w", pattern, err)
	}
	// Non-blocking, so os.File reads go through the runtime's poller and Close interrupts
	// them.
	return os.NewFile(uintptr(fd), "/dev/net/tun"), ifr.Name(), nil
}

// configureRouting sets the TUN device's MTU and address, brings it up and routes the DN
// network through it for packets from the UE.
func (u *UE) configureRouting() error {
	l, err := u.nl.LinkByName(u.Dev)
	if err != nil {
		return fmt.Errorf("find link: %w", err)
	}
	if err := u.nl.LinkSetMTU(l, UEMTU); err != nil {
		return fmt.Errorf("set MTU %d: %w", UEMTU, err)
	}
	ue := &net.IPNet{IP: u.Session.UE.AsSlice(), Mask: net.CIDRMask(32, 32)}
	if err := u.nl.AddrAdd(l, &netlink.Addr{IPNet: ue}); err != nil {
		return fmt.Errorf("add address %s: %w", ue, err)
	}
	if err := u.nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("set up: %w", err)
	}
	table := ueTableBase + l.Attrs().Index
	dn := netip.PrefixFrom(DNAddr, subnetBits).Masked()
	r := &netlink.Route{
		LinkIndex: l.Attrs().Index,
		Dst:       &net.IPNet{IP: dn.Addr().AsSlice(), Mask: net.CIDRMask(dn.Bits(), 32)},
		Src:       u.Session.UE.AsSlice(),
		Scope:     netlink.SCOPE_LINK,
		Table:     table,
	}
	if err := u.nl.RouteAdd(r); err != nil {
		return fmt.Errorf("add route %s in table %d: %w", dn, table, err)
	}
	rule := netlink.NewRule()
	rule.Family = unix.AF_INET
	rule.Src = ue
	rule.Table = table
	rule.Priority = ueRulePriority
	if err := u.nl.RuleAdd(rule); err != nil {
		return fmt.Errorf("add rule from %s lookup %d: %w", ue, table, err)
	}
	u.rule = rule
	return nil
}

// uplink relays packets from the TUN device to the UPF as G-PDUs, through send (which owns
// the packet only if it is a delay line: see delayed). The G-PDU header is written in front of
// the packet in the same buffer, so nothing is copied without a delay.
func (u *UE) uplink(send func([]byte) bool, stop func()) {
	defer u.wg.Done()
	defer stop()
	s := u.Session
	hdr := gtpuHeaderLen(s.QFI)
	buf := make([]byte, hdr+65536)
	for {
		n, err := u.tun.Read(buf[hdr:])
		if err != nil {
			u.fail(fmt.Errorf("read %s: %w", u.Dev, err))
			return
		}
		putGTPUHeader(buf, s.UplinkTEID, s.QFI, n)
		if !send(buf[:hdr+n]) {
			return
		}
	}
}

// sendGPDU sends a G-PDU to the UPF; false means the relay is closing.
func (u *UE) sendGPDU(pdu []byte) bool {
	if _, err := u.conn.WriteToUDPAddrPort(pdu, netip.AddrPortFrom(N3Addr, GTPUPort)); err != nil {
		if u.closing.Load() {
			return false
		}
		// ENOBUFS and the like: the packet is lost, as on a congested link.
		u.stats.sendErrors.Add(1)
		return true
	}
	u.stats.ulPackets.Add(1)
	u.stats.ulBytes.Add(uint64(len(pdu) - gtpuHeaderLen(u.Session.QFI)))
	return true
}

// downlink relays the inner packets of the G-PDUs for the session's downlink TEID to the TUN
// device through write (see uplink).
func (u *UE) downlink(write func([]byte) bool, stop func()) {
	defer u.wg.Done()
	defer stop()
	buf := make([]byte, 65536)
	for {
		n, err := u.conn.Read(buf)
		if err != nil {
			u.fail(fmt.Errorf("read the relay socket: %w", err))
			return
		}
		teid, inner, err := parseGPDU(buf[:n])
		switch {
		case errors.Is(err, errNotGPDU):
			u.stats.foreign.Add(1)
			continue
		case err != nil:
			u.stats.malformed.Add(1)
			continue
		case teid != u.Session.DownlinkTEID:
			u.stats.foreign.Add(1)
			continue
		}
		if !write(inner) {
			return
		}
	}
}

// writeInner writes an inner packet to the TUN device; false means the relay is closing.
func (u *UE) writeInner(pkt []byte) bool {
	if _, err := u.tun.Write(pkt); err != nil {
		if u.closing.Load() {
			return false
		}
		u.stats.writeErrors.Add(1)
		return true
	}
	u.stats.dlPackets.Add(1)
	u.stats.dlBytes.Add(uint64(len(pkt)))
	return true
}

// delayed returns out itself without a Delay. With one it returns a function that queues a
// copy of each packet and a goroutine that hands it to out once it is Delay old; stop ends
// that goroutine after the queue has drained.
func (u *UE) delayed(out func([]byte) bool) (in func([]byte) bool, stop func()) {
	d := u.Options.Delay
	if d <= 0 {
		return out, func() {}
	}
	type held struct {
		pkt []byte
		due time.Time
	}
	q := make(chan held, delayQueue)
	u.wg.Go(func() {
		for h := range q {
			if w := time.Until(h.due); w > 0 {
				time.Sleep(w)
			}
			if !out(h.pkt) {
				for range q { // closing: discard the rest
				}
				return
			}
		}
	})
	in = func(pkt []byte) bool {
		select {
		case q <- held{append([]byte(nil), pkt...), time.Now().Add(d)}:
		default:
			u.stats.delayDrops.Add(1)
		}
		return true
	}
	return in, func() { close(q) }
}

// fail records why a relay goroutine stopped, unless Close stopped it.
func (u *UE) fail(err error) {
	if u.closing.Load() {
		return
	}
	u.errMu.Lock()
	defer u.errMu.Unlock()
	if u.relayErr == nil {
		u.relayErr = err
	}
}

// Err returns the error that stopped the relay, if one did before Close.
func (u *UE) Err() error {
	u.errMu.Lock()
	defer u.errMu.Unlock()
	return u.relayErr
}

// Stats returns the relay's counters so far.
func (u *UE) Stats() UEStats {
	c := &u.stats
	return UEStats{
		UplinkPackets: c.ulPackets.Load(), UplinkBytes: c.ulBytes.Load(),
		DownlinkPackets: c.dlPackets.Load(), DownlinkBytes: c.dlBytes.Load(),
		Foreign: c.foreign.Load(), Malformed: c.malformed.Load(),
		SendErrors: c.sendErrors.Load(), WriteErrors: c.writeErrors.Load(), DelayDrops: c.delayDrops.Load(),
	}
}

// Close stops the relay, removes the TUN device (with its address and table) and the policy
// rule. It returns an error if the relay had stopped by itself. Calling it again returns the
// first result.
func (u *UE) Close() error {
	u.closeOnce.Do(func() {
		u.closeErr = errors.Join(u.teardown(), u.Err())
	})
	return u.closeErr
}

func (u *UE) teardown() error {
	u.closing.Store(true)
	var errs []error
	// Closing the file and the socket interrupts the goroutines' reads; a non-persistent
	// TUN device disappears with its last file.
	if u.tun != nil {
		errs = append(errs, u.tun.Close())
	}
	if u.conn != nil {
		errs = append(errs, u.conn.Close())
	}
	u.wg.Wait()
	if u.rule != nil {
		if err := u.nl.RuleDel(u.rule); err != nil {
			errs = append(errs, fmt.Errorf("testbed: delete the rule of UE %s: %w", u.Session.UE, err))
		}
	}
	u.nl.Close()
	return errors.Join(errs...)
}

// gtpuHeaderLen is the length of the G-PDU header putGTPUHeader writes.
func gtpuHeaderLen(qfi uint8) int {
	if qfi == 0 {
		return 8
	}
	return 16
}

// putGTPUHeader writes the header BuildGPDU would put before an inner packet of innerLen
// bytes into b[:gtpuHeaderLen(qfi)]: a G-PDU with teid and, when qfi is not 0, an uplink PDU
// Session Container with qfi.
func putGTPUHeader(b []byte, teid uint32, qfi uint8, innerLen int) {
	hdr := gtpuHeaderLen(qfi)
	b[0] = 0x30 // version 1, PT 1
	if qfi != 0 {
		b[0] |= 0x04 // E
	}
	b[1] = GTPUGPDU
	binary.BigEndian.PutUint16(b[2:], uint16(hdr-8+innerLen))
	binary.BigEndian.PutUint32(b[4:], teid)
	if qfi != 0 {
		// Sequence number, N-PDU number, next extension: PDU Session Container of 4 octets
		// (length 1): PDU type, QFI, next extension none.
		b[8], b[9], b[10], b[11] = 0, 0, 0, ExtPDUSessionContainer
		b[12], b[13], b[14], b[15] = 1, PDUTypeUL<<4, qfi&0x3f, 0
	}
}

var errNotGPDU = errors.New("not a G-PDU")

// parseGPDU returns the TEID and the inner packet of the G-PDU b (sharing b's memory), skipping
// the optional fields and every extension header. A valid GTP-U message of another type
// (Echo, Error Indication, End Marker) is errNotGPDU.
func parseGPDU(b []byte) (teid uint32, inner []byte, err error) {
	if len(b) < 8 {
		return 0, nil, fmt.Errorf("%d bytes, shorter than a GTP-U header", len(b))
	}
	if b[0]>>5 != 1 || b[0]&0x10 == 0 {
		return 0, nil, fmt.Errorf("flags 0x%02x: not GTPv1", b[0])
	}
	end := 8 + int(binary.BigEndian.Uint16(b[2:]))
	if end > len(b) {
		return 0, nil, fmt.Errorf("length field %d beyond the %d bytes received", end-8, len(b))
	}
	if b[1] != GTPUGPDU {
		return 0, nil, errNotGPDU
	}
	teid = binary.BigEndian.Uint32(b[4:])
	off := 8
	if b[0]&0x07 != 0 {
		if end < 12 {
			return 0, nil, errors.New("optional fields beyond the message")
		}
		next := b[11]
		off = 12
		if b[0]&0x04 == 0 {
			next = 0 // the field is only meaningful with E
		}
		for next != 0 {
			if off >= end || b[off] == 0 {
				return 0, nil, errors.New("truncated or empty extension header")
			}
			l := int(b[off]) * 4
			if off+l > end {
				return 0, nil, errors.New("extension header beyond the message")
			}
			next = b[off+l-1]
			off += l
		}
	}
	return teid, b[off:end], nil
}
