package returndev

import (
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// mtus are the MTUs of the pair name's two ends.
func mtus(t *testing.T, name string) [2]int {
	t.Helper()
	var out [2]int
	for i, n := range []string{name, Peer(name)} {
		l, err := netlink.LinkByName(n)
		if err != nil {
			t.Error(err)
			continue
		}
		out[i] = l.Attrs().MTU
	}
	return out
}

// waitMTU waits for both ends of the pair name to have the MTU want (the follower sets it
// from its own goroutine); it fails the test after a while.
func waitMTU(t *testing.T, name string, want int, why string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for mtus(t, name) != [2]int{want, want} {
		if time.Now().After(deadline) {
			t.Errorf("%s: MTUs %v, want %d on both ends", why, mtus(t, name), want)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFollowMTU: the return device and its peer take the largest MTU of the interfaces (one
// missing does not count), follow them when that changes either way, and never go above
// what a veth with an XDP program on its peer takes (the kernel's limit, below 9000 with
// 4 KiB pages), which would be refused.
func TestFollowMTU(t *testing.T) {
	inNS(t, func() {
		for name, mtu := range map[string]int{"a0": 1500, "a1": 2000} {
			veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}, PeerName: name + "p"}
			if err := netlink.LinkAdd(veth); err != nil {
				t.Error(err)
				return
			}
		}
		if err := Ensure("xr", t.TempDir()); err != nil {
			t.Error(err)
			return
		}
		// As xupfd does, the program is on the peer before the MTU is raised.
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}}) // XDP_PASS
		if err != nil {
			t.Error(err)
			return
		}
		defer prog.Close()
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: mustIndex(t, Peer("xr"))})
		if err != nil {
			t.Error(err)
			return
		}
		defer l.Close()
		if got := mtus(t, "xr"); got != [2]int{1500, 1500} {
			t.Errorf("a new pair's MTUs %v, want the veth default 1500", got)
		}
		stop, err := FollowMTU("xr", []string{"a0", "a1", "gone"}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Error(err)
			return
		}
		defer stop()
		if got := mtus(t, "xr"); got != [2]int{2000, 2000} {
			t.Errorf("MTUs %v when FollowMTU returns, want a1's 2000", got)
		}
		a1, _ := netlink.LinkByName("a1")
		if err := netlink.LinkSetMTU(a1, 9000); err != nil {
			t.Error(err)
			return
		}
		m, err := newMTUFollower("xr", nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Error(err)
			return
		}
		defer m.close()
		most, err := m.maxMTU(mustIndex(t, "xr"))
		if err != nil {
			t.Error(err)
			return
		}
		if most <= 2000 || most >= 9000 {
			t.Errorf("the device's largest MTU with XDP on its peer: %d; want between 2000 and 9000", most)
		}
		waitMTU(t, "xr", most, "a1 raised to 9000")
		if err := netlink.LinkSetMTU(a1, 1400); err != nil {
			t.Error(err)
			return
		}
		waitMTU(t, "xr", 1500, "a1 lowered to 1400, below a0's 1500")
	})
}

// makeLinks makes, in the test's namespace, the interface a0 (a veth of MTU 2000) and, with
// pair, the return device xr; false, the test failed, when it cannot.
func makeLinks(t *testing.T, pair bool) bool {
	t.Helper()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "a0", MTU: 2000}, PeerName: "a0p"}
	err := netlink.LinkAdd(veth)
	if err == nil && pair {
		err = Ensure("xr", t.TempDir())
	}
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// TestFollowMTUFailedStart: when FollowMTU fails after it subscribed (here the pair is
// missing), the subscription ends with it: no netlink goroutine stays behind.
func TestFollowMTUFailedStart(t *testing.T) {
	inNS(t, func() {
		if !makeLinks(t, false) {
			return
		}
		before := runtime.NumGoroutine()
		if _, err := FollowMTU("xr", []string{"a0"}, slog.New(slog.DiscardHandler)); err == nil {
			t.Error("FollowMTU of a missing pair: no error")
			return
		}
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				t.Errorf("%d goroutines 3s after FollowMTU failed, %d before: its subscription is left",
					runtime.NumGoroutine(), before)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// TestFollowMTUUndoesAReset: an end of the pair set back to 1500 (by an operator or a network
// manager) while the interfaces are larger gets their MTU again, with no change on them.
func TestFollowMTUUndoesAReset(t *testing.T) {
	inNS(t, func() {
		if !makeLinks(t, true) {
			return
		}
		stop, err := FollowMTU("xr", []string{"a0"}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Error(err)
			return
		}
		defer stop()
		waitMTU(t, "xr", 2000, "started")
		for _, end := range []string{"xr", Peer("xr")} {
			l, err := netlink.LinkByName(end)
			if err == nil {
				err = netlink.LinkSetMTU(l, 1500)
			}
			if err != nil {
				t.Error(err)
				return
			}
			waitMTU(t, "xr", 2000, end+" set back to 1500")
		}
	})
}

// TestFollowMTUResubscribe: when the link subscription ends (as it does on a receive error, a
// full socket buffer say), the MTU is still kept: a new subscription follows, and the MTU is
// worked out anew, for a change made while there was none.
func TestFollowMTUResubscribe(t *testing.T) {
	inNS(t, func() {
		if !makeLinks(t, true) {
			return
		}
		m, err := newMTUFollower("xr", []string{"a0"}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Error(err)
			return
		}
		defer m.close()
		ended := make(chan netlink.LinkUpdate)
		close(ended)
		done, exited := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(exited)
			// In the namespace, as every thread of xupfd is: nlns takes the test's thread,
			// which may be the process's main one, for the process's namespace. Never
			// unlocked: the runtime ends the thread.
			runtime.LockOSThread()
			if err := netns.Set(m.ns); err != nil {
				t.Error(err)
				return
			}
			m.events().Follow(done, ended, make(chan struct{}))
		}()
		defer func() { close(done); <-exited }()
		// The pair is still at 1500: only the MTU worked out anew after subscribing again
		// gives it a0's 2000.
		waitMTU(t, "xr", 2000, "after subscribing again")
		a0, _ := netlink.LinkByName("a0")
		if err := netlink.LinkSetMTU(a0, 2100); err != nil {
			t.Error(err)
			return
		}
		waitMTU(t, "xr", 2100, "a0 raised, with the new subscription")
	})
}
