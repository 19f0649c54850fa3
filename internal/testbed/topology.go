// Package testbed builds a three-namespace topology, gnb — upf — dn, joined by veth pairs, and
// drives GTP-U and plain IP traffic through a real xupfd running in the upf namespace. The demo
// (cmd/xupf-demo) and the end-to-end tests (test/e2e) share it.
//
//	gnb ns                 upf ns                        dn ns
//	gnb0 10.100.3.2 ---- n3 10.100.3.1  n6 10.100.6.1 ---- dn0 10.100.6.2
//
// Every name that lives outside the namespaces (the namespaces themselves, the bpffs mount)
// carries a per-run suffix, so parallel runs and leftovers of crashed runs do not collide.
// Interface names need no suffix: they only exist inside the run's namespaces.
package testbed

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netns"
)

// Interface names. The daemon configuration refers to N3If and N6If.
const (
	GNBIf = "gnb0"
	N3If  = "n3"
	N6If  = "n6"
	DNIf  = "dn0"
)

// Ports used by the traffic helpers.
const (
	GTPUPort  = 2152  // GTP-U, on the gNB and on the UPF
	DNPort    = 5001  // where uplink packets go on the DN host
	DNSrcPort = 5002  // source port of downlink packets sent by the DN host
	UEPort    = 6000  // destination port of downlink packets (the UE's)
	UESrcPort = 40000 // source port of the UE's uplink packets
)

// Addresses of the topology. They are fixed: the namespaces isolate runs from each other.
var (
	GNBAddr = netip.MustParseAddr("10.100.3.2")
	// GNB2Addr is a second gNB on the gnb host, the target of handovers.
	GNB2Addr = netip.MustParseAddr("10.100.3.3")
	// PeerUPFAddr is another UPF on the gnb host, the far end of N9 forwarding.
	PeerUPFAddr = netip.MustParseAddr("10.100.3.4")
	N3Addr      = netip.MustParseAddr("10.100.3.1") // the UPF's GTP-U address
	N6Addr      = netip.MustParseAddr("10.100.6.1")
	DNAddr      = netip.MustParseAddr("10.100.6.2")
	// PFCPAddr is where the daemon listens for PFCP in the testbed.
	PFCPAddr = netip.AddrPortFrom(N3Addr, 8805)
	// UENet is routed by the DN host toward the UPF.
	UENet = netip.MustParsePrefix("10.45.0.0/16")
	// UEPool is the daemon's ue_pools: the addresses it chooses for PFCP sessions that ask.
	UEPool = netip.MustParsePrefix("10.45.128.0/20")
)

const subnetBits = 24

// Topology is one instance of gnb — upf — dn. Create it with New and always Close it.
type Topology struct {
	// Suffix is the per-run part of every global name.
	Suffix string
	// Namespace names, usable with `ip netns exec`.
	GNBNS, UPFNS, DNNS string
	// BPFFS is the daemon's pin directory written by WriteConfig, in a bpffs of the run's
	// own mounted under BPFFSRoot (see mountBPFFS).
	BPFFS string

	bpffsMount string // where this run's bpffs is mounted, once it is

	handles map[string]netns.NsHandle
	created []string             // namespaces to delete on Close, in creation order
	xdp     map[string]link.Link // the veth peers' XDP_PASS programs, by interface
	tcx     []link.Link          // TC programs a test attached (TagDNLink)
	queues  int
	stack   bool // Options.StackQueue

	gnbMu   sync.Mutex // guards gnbConn against Close
	gnbConn *net.UDPConn

	closeOnce sync.Once
	closeErr  error
}

// Options change the topology New builds.
type Options struct {
	// Queues gives every veth this many queues, each with its own NAPI context; 0 or 1 is
	// one. Traffic sent into a veth from several CPUs at once overflows a single queue's
	// 256-frame ring, so a generator using several CPUs needs as many queues.
	Queues int
	// StackQueue adds a queue after those on every veth and steers the kernel's own packets
	// (sockets, ARP) onto it with XPS. Frames sent by XDP go to the receiving queue of the
	// sending CPU's number, so each of the first Queues queues then carries only the frames
	// XDP sends from one CPU, and its ring is drained by that CPU alone: a generator's frames
	// never wait in a ring whose NAPI another CPU has taken for a socket's packet (and
	// overflow it when that CPU is busy).
	StackQueue bool
}

// New creates the namespaces, the veth pairs, addresses, routes and sysctls, and the XDP_PASS
// programs the veth peers need. prefix starts every namespace name ("xupf" gives
// xupf-gnb-XXXXXX). On error everything already created is removed.
func New(prefix string) (*Topology, error) {
	return NewWith(prefix, Options{})
}

// NewWith is New with options.
func NewWith(prefix string, opts Options) (t *Topology, err error) {
	suffix, err := randomSuffix()
	if err != nil {
		return nil, err
	}
	t = &Topology{
		Suffix:  suffix,
		GNBNS:   fmt.Sprintf("%s-gnb-%s", prefix, suffix),
		UPFNS:   fmt.Sprintf("%s-upf-%s", prefix, suffix),
		DNNS:    fmt.Sprintf("%s-dn-%s", prefix, suffix),
		BPFFS:   filepath.Join(BPFFSRoot, prefix+"-"+suffix, "xupf"),
		handles: make(map[string]netns.NsHandle, 3),
		xdp:     make(map[string]link.Link, 2),
		queues:  max(opts.Queues, 1),
		stack:   opts.StackQueue,
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, t.Close())
			t = nil
		}
	}()
	if err := t.mountBPFFS(); err != nil {
		return t, err
	}
	for _, name := range []string{t.GNBNS, t.UPFNS, t.DNNS} {
		if err := t.createNS(name); err != nil {
			return t, err
		}
	}
	if err := t.configure(); err != nil {
		return t, err
	}
	return t, nil
}

// randomSuffix is short enough to keep namespace names readable and random enough that runs
// started at the same moment (parallel test binaries) do not pick the same one.
func randomSuffix() (string, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("testbed: random suffix: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// createNS creates a named namespace. netns.NewNamed also moves the calling thread into it,
// so the thread is locked and moved back before it can run anything else.
func (t *Topology) createNS(name string) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("testbed: current netns: %w", err)
	}
	defer orig.Close()
	h, nsErr := netns.NewNamed(name)
	if err := netns.Set(orig); err != nil {
		// The thread is stuck in another namespace: keep it locked so that the runtime
		// discards it when this goroutine ends instead of reusing it.
		if nsErr == nil {
			t.created = append(t.created, name)
			t.handles[name] = h
		}
		return fmt.Errorf("testbed: return to the original netns after creating %s: %w", name, err)
	}
	runtime.UnlockOSThread()
	if nsErr != nil {
		return fmt.Errorf("testbed: create netns %s: %w", name, nsErr)
	}
	t.created = append(t.created, name)
	t.handles[name] = h
	return nil
}

// Do runs fn on a locked OS thread inside namespace ns (one of GNBNS, UPFNS, DNNS) and moves
// the thread back afterwards. Sockets created by fn stay in ns for their whole life.
// Handle returns the handle of the topology's namespace ns (GNBNS, UPFNS or DNNS), owned
// by the topology: do not close it.
func (t *Topology) Handle(ns string) (netns.NsHandle, error) {
	h, ok := t.handles[ns]
	if !ok {
		return netns.None(), fmt.Errorf("testbed: %q is not a namespace of this topology", ns)
	}
	return h, nil
}

func (t *Topology) Do(ns string, fn func() error) error {
	h, ok := t.handles[ns]
	if !ok {
		return fmt.Errorf("testbed: %q is not a namespace of this topology", ns)
	}
	return InNetns(h, fn)
}

// Interface returns the interface name of the topology's namespace ns.
func (t *Topology) Interface(ns, name string) (*net.Interface, error) {
	var ifc *net.Interface
	err := t.Do(ns, func() error {
		var err error
		ifc, err = net.InterfaceByName(name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testbed: %s in %s: %w", name, ns, err)
	}
	return ifc, nil
}

// NewNetns creates a network namespace; the calling thread stays in its own. InNetns runs
// code there.
func NewNetns() (netns.NsHandle, error) {
	self, err := netns.Get()
	if err != nil {
		return netns.None(), fmt.Errorf("testbed: current netns: %w", err)
	}
	defer self.Close()
	var ns netns.NsHandle
	err = InNetns(self, func() error {
		var err error
		ns, err = netns.New() // moves the thread, which InNetns moves back
		return err
	})
	if err != nil {
		return netns.None(), fmt.Errorf("testbed: create netns: %w", err)
	}
	return ns, nil
}

// InNetns runs fn on a locked OS thread inside the namespace target and moves the thread back
// afterwards.
func InNetns(target netns.NsHandle, fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("testbed: current netns: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("testbed: enter netns: %w", err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: the runtime then discards it with the goroutine
			// rather than running other goroutines in the wrong namespace.
			return
		}
		runtime.UnlockOSThread()
	}()
	return fn()
}

// Close releases the sockets and XDP programs and deletes the namespaces. Stop the daemon
// first: a process still inside the upf namespace keeps it (and its interfaces) alive.
func (t *Topology) Close() error {
	t.closeOnce.Do(func() {
		var errs []error
		t.gnbMu.Lock()
		if t.gnbConn != nil {
			errs = append(errs, t.gnbConn.Close())
			t.gnbConn = nil
		}
		t.gnbMu.Unlock()
		for _, l := range t.xdp {
			errs = append(errs, l.Close())
		}
		for _, l := range t.tcx {
			errs = append(errs, l.Close())
		}
		// Unpinning the links of a daemon that did not clean up (it was killed) detaches
		// XDP: the interfaces are then free to go with their namespace.
		errs = append(errs, t.unmountBPFFS())
		for _, h := range t.handles {
			errs = append(errs, h.Close())
		}
		for i := len(t.created) - 1; i >= 0; i-- {
			if err := netns.DeleteNamed(t.created[i]); err != nil {
				errs = append(errs, fmt.Errorf("testbed: delete netns %s: %w", t.created[i], err))
			}
		}
		t.closeErr = errors.Join(errs...)
	})
	return t.closeErr
}
