package datapath

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/router"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// addSession installs a static session in e's datapath.
func (e *testEnv) addSession(s session.Session) error { return installSession(e.dp, s) }

// installSession installs a static session's rule sets under its id, as the daemon does.
func installSession(dp *Datapath, s session.Session) error {
	sets, err := s.RuleSets()
	if err != nil {
		return err
	}
	return dp.Install(s.ID, sets)
}

// usage is what the datapath counted for owner, per direction.
func (e *testEnv) usage(owner uint64) (session.Usage, error) {
	u, err := e.dp.Usage(owner)
	return session.UsageOf(u), err
}

// testEnv is a network namespace with an N3 and an N6 veth, static neighbours and routes, and
// the datapath loaded and attached there: Load has the router mirror this namespace's routes
// and neighbours into the route table, so packets run through the program see this network.
//
//	n3 10.0.1.1/24 (02:00:00:00:01:01) -- n3p  gNB 10.0.1.2 at 02:00:00:00:01:02
//	                                             another UPF (N9) 10.0.1.4 at 02:00:00:00:01:04
//	n6 10.0.2.1/24 (02:00:00:00:02:01) -- n6p  DN router 10.0.2.2 at 02:00:00:00:02:02
//	default via 10.0.2.2; 198.51.100.0/24 blackholed; 10.0.1.3 has no neighbour entry.
type testEnv struct {
	ns     netns.NsHandle
	dp     *Datapath
	n3, n6 int // ifindexes
}

var (
	macN3  = net.HardwareAddr{2, 0, 0, 0, 1, 1}
	macGNB = net.HardwareAddr{2, 0, 0, 0, 1, 2}
	macUPF = net.HardwareAddr{2, 0, 0, 0, 1, 4}
	macN6  = net.HardwareAddr{2, 0, 0, 0, 2, 1}
	macDN  = net.HardwareAddr{2, 0, 0, 0, 2, 2}

	addrN3       = netip.MustParseAddr("10.0.1.1")
	addrGNB      = netip.MustParseAddr("10.0.1.2")
	addrGNBNoARP = netip.MustParseAddr("10.0.1.3")
	addrUPF      = netip.MustParseAddr("10.0.1.4") // the far end of an N9 tunnel
	addrDN       = netip.MustParseAddr("192.0.2.10")
	addrBlackhol = netip.MustParseAddr("198.51.100.7")
)

// envSeq numbers test environments so each pins its maps in a directory of its own.
var envSeq int

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: BPF programs, XDP and network namespaces")
	}
}

func newTestEnv(t testing.TB, maxSessions int) *testEnv {
	t.Helper()
	return newTestEnvOpts(t, Options{MaxSessions: maxSessions})
}

// newTestEnvOpts is newTestEnv with opts (its PinPath and GTPUAddrs are set here).
func newTestEnvOpts(t testing.TB, opts Options) *testEnv {
	t.Helper()
	requireRoot(t)
	e := &testEnv{}
	envSeq++
	var err error
	if e.ns, err = testbed.NewNetns(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.ns.Close() })
	err = e.do(func() error {
		if err := e.setupNetwork(); err != nil {
			return err
		}
		opts.PinPath = fmt.Sprintf("/sys/fs/bpf/xupf-test-%d-%d", os.Getpid(), envSeq)
		opts.GTPUAddrs = []netip.Addr{addrN3}
		// The benchmarks' BPF_PROG_TEST_RUN, without a context, delivers packets on lo.
		opts.N3Interfaces = []string{"n3", "lo"}
		dp, err := Load(opts)
		if err != nil {
			return err
		}
		e.dp = dp
		t.Cleanup(func() {
			if err := e.dp.Close(true); err != nil {
				t.Errorf("close datapath: %v", err)
			}
		})
		for _, name := range []string{"n3", "n6"} {
			if _, err := e.dp.Attach(name, XDPNative, false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *testEnv) setupNetwork() error {
	// The datapath is attached to real veths: IPv6 neighbour discovery from their peers would
	// run through it and bump counters in the middle of a case.
	for _, k := range []string{"all", "default"} {
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0o644); err != nil {
			return err
		}
	}
	pairs := []struct {
		name, peer string
		mac, pmac  net.HardwareAddr
		addr       string
	}{
		{"n3", "n3p", macN3, macGNB, "10.0.1.1/24"},
		{"n6", "n6p", macN6, macDN, "10.0.2.1/24"},
	}
	for _, p := range pairs {
		if _, _, err := (testbed.VethPair{Name: p.name, Peer: p.peer, MAC: p.mac, PeerMAC: p.pmac}).Add(); err != nil {
			return err
		}
		l, _ := netlink.LinkByName(p.name)
		addr, _ := netlink.ParseAddr(p.addr)
		if err := netlink.AddrAdd(l, addr); err != nil {
			return fmt.Errorf("address %s: %w", p.addr, err)
		}
		switch p.name {
		case "n3":
			e.n3 = l.Attrs().Index
		case "n6":
			e.n6 = l.Attrs().Index
		}
	}
	neighs := []struct {
		ip      string
		mac     net.HardwareAddr
		ifindex int
	}{{"10.0.1.2", macGNB, e.n3}, {"10.0.1.4", macUPF, e.n3}, {"10.0.2.2", macDN, e.n6}}
	for _, n := range neighs {
		err := netlink.NeighAdd(&netlink.Neigh{
			LinkIndex: n.ifindex, State: netlink.NUD_PERMANENT, IP: net.ParseIP(n.ip),
			HardwareAddr: n.mac, Family: netlink.FAMILY_V4,
		})
		if err != nil {
			return fmt.Errorf("neighbour %s: %w", n.ip, err)
		}
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: e.n6, Gw: net.ParseIP("10.0.2.2")}); err != nil {
		return fmt.Errorf("default route: %w", err)
	}
	_, bh, _ := net.ParseCIDR("198.51.100.0/24")
	if err := netlink.RouteAdd(&netlink.Route{Dst: bh, Type: 6 /* RTN_BLACKHOLE */}); err != nil {
		return fmt.Errorf("blackhole route: %w", err)
	}
	return os.WriteFile("/proc/sys/net/ipv4/conf/all/forwarding", []byte("1"), 0o644)
}

// run runs the datapath once on pkt as if it arrived on ifindex, inside the namespace.
func (e *testEnv) run(t testing.TB, pkt []byte, ifindex int) (uint32, []byte) {
	t.Helper()
	return e.runOn(t, anyCPU, pkt, ifindex)
}

// anyCPU is runOn's cpu for wherever the scheduler puts the test.
const anyCPU = -1

// runOn is run on CPU cpu: uplink spreading compares its choice with the CPU it runs on.
func (e *testEnv) runOn(t testing.TB, cpu int, pkt []byte, ifindex int) (uint32, []byte) {
	t.Helper()
	return e.runProgramOn(t, e.dp.Program(), cpu, pkt, ifindex)
}

// runProgramOn is runOn with prog, e.g. the program an earlier run left in a pinned link.
func (e *testEnv) runProgramOn(t testing.TB, prog *ebpf.Program, cpu int, pkt []byte, ifindex int) (uint32, []byte) {
	t.Helper()
	var ret uint32
	opts := &ebpf.RunOptions{
		Data:    pkt,
		DataOut: make([]byte, len(pkt)+512),
		Context: xdpMD{DataEnd: uint32(len(pkt)), IngressIfindex: uint32(ifindex)},
	}
	run := func() (err error) { ret, err = prog.Run(opts); return err }
	err := e.do(func() error {
		if cpu == anyCPU {
			return run()
		}
		return onCPU(cpu, run)
	})
	if err != nil {
		t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
	return ret, opts.DataOut
}

// onCPU runs fn on a thread bound to cpu, then gives the thread its CPUs back.
func onCPU(cpu int, fn func() error) error {
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return err
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("bind to CPU %d: %w", cpu, err)
	}
	defer unix.SchedSetaffinity(0, &old)
	return fn()
}

func (e *testEnv) do(fn func() error) error { return testbed.InNetns(e.ns, fn) }

// takeOver attaches dp to n3 and n6, taking over the links an earlier datapath pinned there.
func (e *testEnv) takeOver(t testing.TB, dp *Datapath) {
	t.Helper()
	err := e.do(func() error {
		for _, name := range []string{"n3", "n6"} {
			if _, err := dp.Attach(name, XDPNative, false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("take over the pinned links: %v", err)
	}
}

// load loads another datapath over the environment's pins, inside its namespace (whose
// interfaces the n3 ones are).
func (e *testEnv) load(t testing.TB, opts Options) *Datapath {
	t.Helper()
	var dp *Datapath
	if err := e.do(func() (err error) { dp, err = Load(opts); return err }); err != nil {
		t.Fatal(err)
	}
	return dp
}

// waitRoute waits until the router's entry for p (found or not) satisfies ok: the router
// follows netlink events, so a change made in the namespace takes effect a moment later.
func (e *testEnv) waitRoute(t testing.TB, p netip.Prefix, ok func(nh router.Nexthop, found bool) bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		nh, found := e.dp.Router().Entries()[p]
		if ok(nh, found) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("route %s: %+v (found %v) after 3s", p, nh, found)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func present(_ router.Nexthop, found bool) bool { return found }
func absent(_ router.Nexthop, found bool) bool  { return !found }
