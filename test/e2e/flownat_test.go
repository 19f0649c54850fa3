package e2e

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// UE traffic the kernel treats on N6 (flow_cache.kernel_n6): nftables masquerades the UEs to
// the n6 address, and the flow cache takes over each flow once the kernel has translated its
// first packet.

// natSession is a UE behind the testbed's user-space gNB relay (testbed.StartUE).
var natSession = session.Session{ID: 1, UE: netip.MustParseAddr("10.45.0.2"), UplinkTEID: 0x100,
	DownlinkTEID: 0x200, GNB: testbed.UEGNBAddr}

// newNATEnv starts xupfd with kernel_n6 and natSession, masquerades the UE network out of n6,
// and starts the UE.
func newNATEnv(t *testing.T) (*env, *testbed.UE) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft (Debian package nftables; make deps installs it)")
	}
	e := newEnvConfig(t, func(c *config.Config) {
		c.FlowCache.MaxFlows = 64
		c.FlowCache.KernelN6 = true
	}, natSession)
	if _, err := e.topo.Run(e.ctx(), e.topo.UPFNS, "nft", "add table ip nat; "+
		"add chain ip nat post { type nat hook postrouting priority srcnat; }; "+
		"add rule ip nat post oifname "+testbed.N6If+" ip saddr "+testbed.UENet.String()+" masquerade"); err != nil {
		t.Fatal(err)
	}
	ue, err := e.topo.StartUE(natSession)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ue.Close(); err != nil {
			t.Error(err)
		}
	})
	return e, ue
}

// udpPeers are a UDP socket of the UE and one of the DN host.
type udpPeers struct {
	ue, dn         *net.UDPConn
	ueAddr, dnAddr netip.AddrPort
}

func (e *env) udpPeers(uePort uint16) udpPeers {
	e.t.Helper()
	p := udpPeers{ueAddr: netip.AddrPortFrom(natSession.UE, uePort), dnAddr: netip.AddrPortFrom(testbed.DNAddr, testbed.DNPort)}
	var err error
	if p.ue, err = e.topo.UDPConn(e.topo.GNBNS, p.ueAddr); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { p.ue.Close() })
	if p.dn, err = e.topo.UDPConn(e.topo.DNNS, p.dnAddr); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { p.dn.Close() })
	return p
}

// read reads one datagram from c within timeout.
func read(c *net.UDPConn, timeout time.Duration) ([]byte, netip.AddrPort, error) {
	buf := make([]byte, 2048)
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, netip.AddrPort{}, err
	}
	n, from, err := c.ReadFromUDPAddrPort(buf)
	return buf[:n], from, err
}

// exchange has the UE send msg to the DN host, which answers the address it sees with the
// same bytes reversed; it returns that address. The UE must get the answer from the DN host's
// own address and port.
func (p udpPeers) exchange(t *testing.T, msg []byte) netip.AddrPort {
	t.Helper()
	if _, err := p.ue.WriteToUDPAddrPort(msg, p.dnAddr); err != nil {
		t.Fatal(err)
	}
	got, seen, err := read(p.dn, recvTimeout)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("DN host: %q from %s (err %v), want %q", got, seen, err, msg)
	}
	answer := bytes.Clone(msg)
	for i, j := 0, len(answer)-1; i < j; i, j = i+1, j-1 {
		answer[i], answer[j] = answer[j], answer[i]
	}
	if _, err := p.dn.WriteToUDPAddrPort(answer, seen); err != nil {
		t.Fatal(err)
	}
	got, from, err := read(p.ue, recvTimeout)
	if err != nil || !bytes.Equal(got, answer) || from != p.dnAddr {
		t.Fatalf("UE: %q from %s (err %v), want %q from %s", got, from, err, answer, p.dnAddr)
	}
	return seen
}

// TestFlowCacheNATUDP: a UE's UDP flow through nftables masquerade. The first packet goes
// through the kernel, which translates it; the cache forwards the rest of the flow both ways,
// translated. The DN host sees the n6 address, the UE its peer's; the session's usage counts
// every packet once; a drop rule added mid-flow stops the flow.
func TestFlowCacheNATUDP(t *testing.T) {
	e, _ := newNATEnv(t)
	p := e.udpPeers(7200)
	const n = 50
	msg := func(i int) []byte { return []byte(fmt.Sprintf("nat datagram %04d", i)) }
	var first netip.AddrPort
	d := e.flowDeltas(func() {
		for i := range n {
			seen := p.exchange(t, msg(i))
			if i == 0 {
				first = seen
			}
			if seen.Addr() != testbed.N6Addr || seen != first {
				t.Fatalf("datagram %d reached the DN host from %s, want the n6 address %s and the port of the first, %s",
					i, seen, testbed.N6Addr, first)
			}
		}
	})
	// The first uplink packet through the kernel; its flow learnt both ways; then n-1 uplink
	// and n downlink hits.
	if want := map[string]uint64{"flow_miss": 1, "flow_learned": 2, "flow_hit": 2*n - 1}; !sameCounters(d, want) {
		t.Errorf("flow counters grew by %v, want %v", d, want)
	}
	var list []api.CachedFlow
	e.ctlJSON(t, &list, "flows", "list")
	got := map[string]api.CachedFlow{}
	for _, f := range list {
		got[f.Src+" "+f.Dst] = f
	}
	if f := got[p.ueAddr.String()+" "+p.dnAddr.String()]; f.SNAT != first.String() {
		t.Errorf("the UE's flow %+v, want it given %s", f, first)
	}
	if f := got[p.dnAddr.String()+" "+first.String()]; f.ToUE != p.ueAddr.String() {
		t.Errorf("the replies' flow %+v, want them given back to %s", f, p.ueAddr)
	}
	info, err := e.api.Session(e.ctx(), natSession.ID)
	if err != nil {
		t.Fatal(err)
	}
	ipBytes := uint64(n * (20 + 8 + len(msg(0))))
	want := session.Usage{Uplink: session.Counters{Packets: n, Bytes: ipBytes},
		Downlink: session.Counters{Packets: n, Bytes: ipBytes}}
	if info.Usage != want {
		t.Errorf("usage %+v, want %+v", info.Usage, want)
	}
	for _, ns := range []string{e.topo.GNBNS, e.topo.DNNS} {
		if udp, _, err := e.topo.ChecksumErrors(ns); err != nil || udp != 0 {
			t.Errorf("%s: %d UDP checksum errors (err %v)", ns, udp, err)
		}
	}

	// A drop rule: the flow leaves the cache and the kernel drops its next packets.
	if _, err := e.topo.Run(e.ctx(), e.topo.UPFNS, "nft", "add table ip xupf_test; "+
		"add chain ip xupf_test fw { type filter hook forward priority 0; }; "+
		"add rule ip xupf_test fw udp dport "+fmt.Sprint(testbed.DNPort)+" drop"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for _, ok := e.cachedFlow(protoUDP, p.ueAddr, p.dnAddr); ok; _, ok = e.cachedFlow(protoUDP, p.ueAddr, p.dnAddr) {
		if time.Now().After(deadline) {
			t.Fatal("the flow is still cached 2s after the drop rule was committed")
		}
		time.Sleep(100 * time.Microsecond)
	}
	for i := range 5 {
		if _, err := p.ue.WriteToUDPAddrPort(msg(n+i), p.dnAddr); err != nil {
			t.Fatal(err)
		}
	}
	if got, from, err := read(p.dn, 300*time.Millisecond); err == nil {
		t.Errorf("the DN host received %q from %s after the drop rule", got, from)
	}
}
