package modules

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/datapath"
	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// bench is one configuration at one stage: a network namespace of its own with an N3 and an
// N6 veth, its routes and neighbours, and a datapath attached to both veths (the datapath
// redirects only to interfaces it is attached to). bpf_fib_lookup in BPF_PROG_TEST_RUN
// resolves in the namespace of the calling thread, so every run happens inside it.
//
//	n3 10.0.1.1/24 -- gNBs 10.0.1.10 and up
//	n6 10.0.2.1/24 -- next hops 10.0.2.10 and up; remote routes 172.16.r.0/24 via them
//	UE pool 10.45.0.0/16 via the measured session's gNB (what routes the downlink of the
//	routing stage)
type bench struct {
	cfg   config
	stage int
	ns    netns.NsHandle
	dp    *datapath.Datapath
	cases []packetCase // uplink, then downlink
}

// packetCase is the measured frame of one direction and the frame the datapath must make
// of it.
type packetCase struct {
	name     string // Uplink or Downlink
	in, want []byte
	restore  *restorer // runs in over and over
}

var (
	macN3  = net.HardwareAddr{2, 0, 0, 0, 1, 1}
	macN6  = net.HardwareAddr{2, 0, 0, 0, 2, 1}
	addrN3 = netip.MustParseAddr("10.0.1.1")
)

func gnbAddr(g int) netip.Addr      { return netip.AddrFrom4([4]byte{10, 0, 1, byte(10 + g)}) }
func gnbMAC(g int) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 1, 0, byte(g)} }
func hopAddr(h int) netip.Addr      { return netip.AddrFrom4([4]byte{10, 0, 2, byte(10 + h)}) }
func hopMAC(h int) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 2, 0, byte(h)} }
func remoteNet(r int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 16, byte(r), 0}), 24)
}
func ueAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 45, byte((i + 1) >> 8), byte(i + 1)})
}
func (c config) hops() int          { return min(c.routes, 10) }
func (c config) measured() int      { return c.sessions - 1 }
func (c config) measuredGNB() int   { return c.measured() % c.gnbs }
func (c config) server() netip.Addr { return netip.AddrFrom4([4]byte{172, 16, byte(c.routes - 1), 10}) }
func (c config) serverHop() int     { return (c.routes - 1) % c.hops() }
func (c config) uePort() uint16     { return uint16(5000 + max(c.flows-1, 0)) }
func flowQFI(f int) uint8           { return uint8(5 + f) }
func uplinkTEID(i int) uint32       { return uint32(0x10000 + i) }
func downlinkTEID(i int) uint32     { return uint32(0x20000 + i) }

// measuredQFI is the QFI of the PDR the measured packet matches: the last flow's, else the
// session's.
func (c config) measuredQFI() uint8 {
	if c.flows > 0 {
		return flowQFI(c.flows - 1)
	}
	return sessionQFI
}

const (
	sessionQFI = 9
	serverPort = 8000
	// mbr is every QER's MBR, in kbit/s, and contractRate every contract's rate in bytes/s:
	// 10 Gbit/s, far above what the benchmark sends, so meters run but nothing drops.
	mbr           = 10_000_000
	contractRate  = 1_250_000_000
	contractBurst = contractRate / 10
	// routeOwner is the first owner id of the routing stage's entries, beyond any session's.
	routeOwner = 1 << 32
)

// payload fills the UE's packets to Ethernet's minimum frame (60 bytes without the FCS)
// downlink, the thesis's 64-byte frames.
var payload = []byte("xupf module bench!")

var benchSeq atomic.Int64

// newBench sets up cfg at stage in a namespace of its own.
func newBench(cfg config, stage int) (_ *bench, err error) {
	b := &bench{cfg: cfg, stage: stage, ns: netns.None()}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("current netns: %w", err)
	}
	defer func() {
		// On failure the thread stays locked, so that no other goroutine runs in the
		// wrong namespace.
		if serr := netns.Set(orig); serr != nil {
			err = errors.Join(err, fmt.Errorf("return to the original netns: %w", serr))
		} else {
			runtime.UnlockOSThread()
		}
		orig.Close()
		if err != nil {
			err = errors.Join(err, b.close())
		}
	}()
	ns, err := netns.New() // switches this thread into the new namespace
	if err != nil {
		return nil, fmt.Errorf("create netns: %w", err)
	}
	b.ns = ns
	if err := b.setupNetwork(); err != nil {
		return nil, err
	}
	b.dp, err = datapath.Load(datapath.Options{
		PinPath:     fmt.Sprintf("/sys/fs/bpf/xupf-modules-%d-%d", os.Getpid(), benchSeq.Add(1)),
		MaxSessions: 2*cfg.sessions + 16, // four PDRs per direction: twice the datapath's average
		MaxRuleSets: 2*cfg.sessions + 8,  // every session's two keys, and the routing entries
		// Each rule set's SDF entries; the tables are not preallocated.
		MaxSDFEntries: 32*cfg.sessions + 1024,
		GTPUAddrs:     []netip.Addr{addrN3},
		// BPF_PROG_TEST_RUN without a context delivers the frames on lo.
		N3Interfaces: []string{"n3", "lo"},
	})
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"n3", "n6"} {
		if _, err := b.dp.Attach(name, datapath.XDPNative, false); err != nil {
			return nil, err
		}
	}
	if err := b.install(); err != nil {
		return nil, err
	}
	b.cases = frames(cfg, stage)
	for i := range b.cases {
		if b.cases[i].restore, err = newRestorer(b.cases[i].in); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// install gives the datapath the rules, classes and contracts of the stage.
func (b *bench) install() error {
	c := b.cfg
	if b.stage == stageRouting {
		for i, key := range []netip.Addr{c.server(), ueAddr(c.measured())} {
			owner := uint64(routeOwner + i)
			rs := rules.RuleSet{UE: key, PDRs: []rules.PDR{{ID: 1, FAR: rules.FAR{Action: rules.Forward}}}}
			if err := b.dp.Install(owner, []rules.RuleSet{rs}); err != nil {
				return err
			}
			if err := b.dp.StopUsageCounting(owner); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range c.sessions {
		sets, err := sessionRuleSets(c, i, b.stage)
		if err != nil {
			return err
		}
		if err := b.dp.Install(uint64(i+1), sets); err != nil {
			return err
		}
	}
	// Only the measured session carries traffic: its counters are the ones that matter.
	if b.stage < stageUsage {
		if err := b.dp.StopUsageCounting(uint64(c.measured() + 1)); err != nil {
			return err
		}
	}
	if b.stage < stageClassifier {
		return nil
	}
	classes := c.classRules()
	compiled, err := classifier.Compile(classes)
	if err != nil {
		return err
	}
	if err := b.dp.SetClasses(compiled); err != nil {
		return err
	}
	if b.stage < stagePolicer {
		return nil
	}
	ids := []uint32{}
	if c.classes > 1 {
		ids = append(ids, datapath.DefaultContractClass)
	}
	for _, r := range classes {
		ids = append(ids, r.ID)
	}
	for _, id := range ids {
		err := b.dp.SetContract(datapath.Contract{Class: id, Action: datapath.PoliceLimit,
			Rate: contractRate, Burst: contractBurst})
		if err != nil {
			return err
		}
	}
	return nil
}

// sessionRuleSets are session i's rule sets: a static session's (with its flows), plus the
// QERs from the policer stage on.
func sessionRuleSets(c config, i, stage int) ([]rules.RuleSet, error) {
	s := session.Session{ID: uint64(i + 1), UE: ueAddr(i), UplinkTEID: uplinkTEID(i), GNB: gnbAddr(i % c.gnbs),
		DownlinkTEID: downlinkTEID(i), QFI: sessionQFI, GTPUAddr: addrN3}
	for f := range c.flows {
		s.Flows = append(s.Flows, session.Flow{Precedence: uint32(10 * (f + 1)), QFI: flowQFI(f),
			SDF: []string{fmt.Sprintf("permit out 17 from 172.16.0.0/16 to assigned %d", 5000+f)}})
	}
	sets, err := s.RuleSets()
	if err != nil || stage < stagePolicer {
		return sets, err
	}
	for _, rs := range sets {
		for j := range rs.PDRs {
			p := &rs.PDRs[j]
			p.QERs = []rules.QER{{ID: 1, MBRUL: mbr, MBRDL: mbr}} // the session AMBR
			if p.ID != 0 {                                        // a flow's PDR: its MBR too
				p.QERs = append(p.QERs, rules.QER{ID: 1 + p.ID, MBRUL: mbr, MBRDL: mbr})
			}
		}
	}
	return sets, nil
}

// classRules are the configuration's classes. One class matches UDP both ways. More are
// pairs, uplink on a UE's source address and downlink on its destination, with the remote
// port, in falling priority; the last pair is the measured session's.
func (c config) classRules() []classifier.Rule {
	if c.classes == 1 {
		return []classifier.Rule{mustParse(classifier.Class{ID: 1, Priority: 1, Protocol: "udp"})}
	}
	out := make([]classifier.Rule, 0, c.classes)
	for i := range c.classes {
		s := ((c.measured()-(c.classes-1)/2+i/2)%c.sessions + c.sessions) % c.sessions
		cl := classifier.Class{ID: uint32(i + 1), Priority: uint32(c.classes - i), Protocol: "udp"}
		if i%2 == 0 {
			cl.Direction, cl.SrcIP, cl.DstPort = "ingress", ueAddr(s).String(), "8000-8999"
		} else {
			cl.Direction, cl.DstIP, cl.SrcPort = "egress", ueAddr(s).String(), "8000-8999"
		}
		out = append(out, mustParse(cl))
	}
	return out
}

// mustParse parses a class written here, which is valid.
func mustParse(c classifier.Class) classifier.Rule {
	r, err := c.Parse()
	if err != nil {
		panic(err)
	}
	return r
}

func (b *bench) setupNetwork() error {
	// The datapath is attached to real veths: IPv6 neighbour discovery from their peers would
	// run through it and bump counters.
	for _, k := range []string{"all", "default"} {
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0o644); err != nil {
			return err
		}
	}
	ifindex := map[string]int{}
	for _, p := range []struct {
		name, peer string
		mac        net.HardwareAddr
		addr       string
	}{{"n3", "n3p", macN3, "10.0.1.1/24"}, {"n6", "n6p", macN6, "10.0.2.1/24"}} {
		idx, peerIdx, err := testbed.VethPair{Name: p.name, Peer: p.peer, MAC: p.mac}.Add()
		if err != nil {
			return err
		}
		ifindex[p.name], ifindex[p.peer] = idx, peerIdx
		addr, err := netlink.ParseAddr(p.addr)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: ifindex[p.name]}}, addr); err != nil {
			return fmt.Errorf("address %s: %w", p.addr, err)
		}
	}
	neigh := func(ip netip.Addr, mac net.HardwareAddr, dev string) error {
		err := netlink.NeighAdd(&netlink.Neigh{LinkIndex: ifindex[dev], State: netlink.NUD_PERMANENT,
			IP: ip.AsSlice(), HardwareAddr: mac, Family: netlink.FAMILY_V4})
		if err != nil {
			return fmt.Errorf("neighbour %s: %w", ip, err)
		}
		return nil
	}
	route := func(dst netip.Prefix, gw netip.Addr, dev string) error {
		err := netlink.RouteAdd(&netlink.Route{LinkIndex: ifindex[dev], Gw: gw.AsSlice(),
			Dst: &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), 32)}})
		if err != nil {
			return fmt.Errorf("route %s via %s: %w", dst, gw, err)
		}
		return nil
	}
	c := b.cfg
	for g := range c.gnbs {
		if err := neigh(gnbAddr(g), gnbMAC(g), "n3"); err != nil {
			return err
		}
	}
	for h := range c.hops() {
		if err := neigh(hopAddr(h), hopMAC(h), "n6"); err != nil {
			return err
		}
	}
	for r := range c.routes {
		if err := route(remoteNet(r), hopAddr(r%c.hops()), "n6"); err != nil {
			return err
		}
	}
	if err := route(netip.MustParsePrefix("10.45.0.0/16"), gnbAddr(c.measuredGNB()), "n3"); err != nil {
		return err
	}
	// bpf_fib_lookup does not route when forwarding is off.
	return os.WriteFile("/proc/sys/net/ipv4/conf/all/forwarding", []byte("1"), 0o644)
}

// do runs fn on a thread inside the bench's namespace.
func (b *bench) do(fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("current netns: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(b.ns); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter netns: %w", err)
	}
	defer func() {
		// On failure the thread stays locked: the runtime then discards it with the
		// goroutine rather than run other goroutines in the wrong namespace.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return fn()
}

// runOnce runs the datapath once on in and returns its verdict and output frame.
func (b *bench) runOnce(in []byte) (uint32, []byte, error) {
	opts := &ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+256)}
	var ret uint32
	err := b.do(func() error {
		var err error
		ret, err = b.dp.Program().Run(opts)
		return err
	})
	if err != nil {
		return 0, nil, fmt.Errorf("BPF_PROG_TEST_RUN: %w", err)
	}
	return ret, opts.DataOut, nil
}

// check runs c's frame through the datapath once on its own and once through the
// restoring wrapper (its second run, on a restored frame), and compares each whole output
// frame with the expected one.
func (b *bench) check(c packetCase) error {
	ret, out, err := b.runOnce(c.in)
	if err == nil {
		err = compare("alone", ret, out, c.want)
	}
	if err != nil {
		return err
	}
	err = b.do(func() error {
		ret, out, err := c.restore.output(b.dp.Program(), c.in)
		if err != nil {
			return err
		}
		return compare("after the wrapper restored the frame", ret, out, c.want)
	})
	if err != nil {
		return err
	}
	// The wrapper alone must hand the next program the frame as it came.
	ret, out, err = c.restore.output(c.restore.noop, c.in)
	if err == nil {
		err = compare("wrapper alone", ret, out, c.in)
	}
	return err
}

func compare(what string, ret uint32, out, want []byte) error {
	if ret != xdpRedirect {
		return fmt.Errorf("%s: verdict %d, want XDP_REDIRECT (%d)", what, ret, xdpRedirect)
	}
	if !bytes.Equal(out, want) {
		return fmt.Errorf("%s: output frame differs:\ngot:\n%swant:\n%s", what, hex.Dump(out), hex.Dump(want))
	}
	return nil
}

// time returns the datapath's mean ns per packet on c's frame over repeat runs in one
// BPF_PROG_TEST_RUN, less the restoring wrapper's own (measured right after, alone). It
// fails when any run did anything but redirect: the counters of drops and of packets
// handed to the kernel must not move.
func (b *bench) time(c packetCase, repeat int) (float64, error) {
	var full, wrapper time.Duration
	err := b.do(func() error {
		before, err := b.dp.Stats()
		if err != nil {
			return err
		}
		ret, d, err := c.restore.time(b.dp.Program(), c.in, repeat)
		if err != nil {
			return err
		}
		if ret != xdpRedirect {
			return fmt.Errorf("verdict %d, want XDP_REDIRECT (%d)", ret, xdpRedirect)
		}
		after, err := b.dp.Stats()
		if err != nil {
			return err
		}
		if err := onlyRedirects(before, after, repeat); err != nil {
			return err
		}
		full = d
		ret, wrapper, err = c.restore.time(c.restore.noop, c.in, repeat)
		if err == nil && ret != xdpRedirect {
			err = fmt.Errorf("wrapper alone: verdict %d, want XDP_REDIRECT (%d)", ret, xdpRedirect)
		}
		return err
	})
	return float64(full.Nanoseconds() - wrapper.Nanoseconds()), err
}

// onlyRedirects checks that between before and after at least runs packets were
// redirected, and none dropped or handed to the kernel.
func onlyRedirects(before, after datapath.Stats, runs int) error {
	for name, n := range after.Drops {
		if n != before.Drops[name] {
			return fmt.Errorf("%d packets dropped (%s) while timing", n-before.Drops[name], name)
		}
	}
	for _, name := range []string{"ul_kernel", "dl_kernel", "pass", "ul_tx", "dl_tx"} {
		if _, ok := after.Counters[name]; !ok {
			return fmt.Errorf("the datapath has no counter %q", name)
		}
	}
	for _, name := range []string{"ul_kernel", "dl_kernel", "pass"} {
		if n := after.Counters[name]; n != before.Counters[name] {
			return fmt.Errorf("%d packets counted %s while timing", n-before.Counters[name], name)
		}
	}
	tx := func(s datapath.Stats) uint64 { return s.Counters["ul_tx"] + s.Counters["dl_tx"] }
	if got := tx(after) - tx(before); got < uint64(runs) {
		return fmt.Errorf("%d of %d packets redirected while timing", got, runs)
	}
	return nil
}

// close unloads the datapath (removing its pins) and deletes the namespace with its veths.
func (b *bench) close() error {
	var err error
	for _, c := range b.cases {
		if c.restore != nil {
			err = errors.Join(err, c.restore.close())
		}
	}
	if b.dp != nil {
		err = b.dp.Close(true)
	}
	if b.ns.IsOpen() {
		err = errors.Join(err, b.ns.Close())
	}
	return err
}
