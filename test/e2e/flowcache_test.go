package e2e

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// Transit traffic through the box with the flow cache on and no UPF session: the gnb host
// and the DN host talk to each other in plain IP, routed by the upf namespace's kernel.

// newFlowCacheEnv starts xupfd with the flow cache on (maxFlows, idle timeout idle or, when
// 0, the default) and no session, and routes the gnb and DN hosts to each other through the box.
func newFlowCacheEnv(t *testing.T, maxFlows int, idle time.Duration) *env {
	t.Helper()
	e := newEnvConfig(t, func(c *config.Config) {
		c.FlowCache.MaxFlows = maxFlows
		c.FlowCache.IdleTimeout = cmp.Or(idle, c.FlowCache.IdleTimeout)
	})
	if err := e.topo.AddTransitRoutes(); err != nil {
		t.Fatal(err)
	}
	return e
}

// flowCounters are the flow cache's counters of the datapath.
var flowCounters = []string{"flow_hit", "flow_miss", "flow_learned", "flow_full", "flow_tracked"}

// flowDeltas runs fn and returns how much each flow cache counter grew meanwhile.
func (e *env) flowDeltas(fn func()) map[string]uint64 {
	e.t.Helper()
	before := e.stats().Counters
	fn()
	after := e.stats().Counters
	d := map[string]uint64{}
	for _, k := range flowCounters {
		d[k] = after[k] - before[k]
	}
	return d
}

// transit sends n datagrams from src in namespace srcNS to dst in dstNS and returns what
// arrived.
func (e *env) transit(srcNS string, src netip.AddrPort, dstNS string, dst netip.AddrPort, n int, payload func(int) []byte) []testbed.Datagram {
	e.t.Helper()
	rx, err := e.topo.ListenUDP(dstNS, dst)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rx.Close()
	if err := e.topo.SendUDP(srcNS, src, dst, n, payload); err != nil {
		e.t.Fatal(err)
	}
	got, err := rx.Collect(n, recvTimeout)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// checkTransit checks that the n datagrams sent arrived from src, in order, routed once (TTL
// one less than sent).
func checkTransit(t *testing.T, what string, got []testbed.Datagram, src netip.AddrPort, n int, payload func(int) []byte) {
	t.Helper()
	if len(got) != n {
		t.Errorf("%s: %d of %d datagrams arrived", what, len(got), n)
	}
	for i, d := range got {
		if d.Src != src || string(d.Data) != string(payload(i)) || d.TTL != testbed.InnerTTL-1 {
			t.Errorf("%s: datagram %d from %s TTL %d %q, want from %s TTL %d %q", what, i, d.Src, d.TTL, d.Data,
				src, testbed.InnerTTL-1, payload(i))
			return
		}
	}
}

// cachedFlow returns the cache's entry of the UDP or TCP flow from src to dst, if any.
func (e *env) cachedFlow(proto uint8, src, dst netip.AddrPort) (testbed.CachedFlow, bool) {
	e.t.Helper()
	flows, err := e.topo.CachedFlows()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range flows {
		if f.Proto == proto && f.Src == src && f.Dst == dst {
			return f, true
		}
	}
	return testbed.CachedFlow{}, false
}

const (
	protoTCP = 6
	protoUDP = 17
)

// flowTransit sends a flow's first datagram, which the kernel forwards and the learner
// learns, then the rest, which the cache forwards, and checks all arrived and the counters.
func (e *env) flowTransit(t *testing.T, what, srcNS string, src netip.AddrPort, dstNS string, dst netip.AddrPort, n int) {
	t.Helper()
	payload := testbed.Payload(what)
	d := e.flowDeltas(func() {
		checkTransit(t, what+", first packet", e.transit(srcNS, src, dstNS, dst, 1, payload), src, 1, payload)
	})
	if want := map[string]uint64{"flow_miss": 1, "flow_learned": 1}; !sameCounters(d, want) {
		t.Errorf("%s, first packet: flow counters grew by %v, want %v", what, d, want)
	}
	rest := func(i int) []byte { return payload(i + 1) }
	d = e.flowDeltas(func() {
		checkTransit(t, what, e.transit(srcNS, src, dstNS, dst, n-1, rest), src, n-1, rest)
	})
	if want := map[string]uint64{"flow_hit": uint64(n - 1)}; !sameCounters(d, want) {
		t.Errorf("%s, after the first packet: flow counters grew by %v, want %v", what, d, want)
	}
	if f, ok := e.cachedFlow(protoUDP, src, dst); !ok || f.Packets != uint64(n) {
		t.Errorf("%s: cached flow %+v (found %t), want one of %d packets", what, f, ok, n)
	}
}

// sameCounters compares counter deltas, taking a missing counter for 0.
func sameCounters(got, want map[string]uint64) bool {
	for _, k := range flowCounters {
		if got[k] != want[k] {
			return false
		}
	}
	return true
}

// TestFlowCacheTransit: UDP between the gnb host and the DN host, both ways, with no UPF
// session: the kernel routes each flow's first packet, the cache every later one, all of
// them arrive routed (TTL one less), and the cached flow counts them all.
func TestFlowCacheTransit(t *testing.T) {
	e := newFlowCacheEnv(t, 64, 0)
	gnb := netip.AddrPortFrom(testbed.GNBAddr, 7100)
	dn := netip.AddrPortFrom(testbed.DNAddr, testbed.DNPort)
	e.flowTransit(t, "gnb to dn", e.topo.GNBNS, gnb, e.topo.DNNS, dn, packets)
	e.flowTransit(t, "dn to gnb", e.topo.DNNS, dn, e.topo.GNBNS, gnb, packets)
}

// TestFlowCacheVLAN: the link to the DN host is on VLAN 10. Toward it the cache pushes the
// tag the kernel's side added; from it the cache pops the tag the flow arrived with, and keys
// the flow by that VLAN. The DN host takes only tagged frames, so a datagram that arrives
// was tagged.
func TestFlowCacheVLAN(t *testing.T) {
	e := newFlowCacheEnv(t, 64, 0)
	const vid = 10
	if err := e.topo.TagDNLink(vid); err != nil {
		t.Fatal(err)
	}
	gnb := netip.AddrPortFrom(testbed.GNBAddr, 7100)
	dn := netip.AddrPortFrom(testbed.DNAddr, testbed.DNPort)
	e.flowTransit(t, "gnb to dn, tag pushed", e.topo.GNBNS, gnb, e.topo.DNNS, dn, packets)
	e.flowTransit(t, "dn to gnb, tag popped", e.topo.DNNS, dn, e.topo.GNBNS, gnb, packets)
	if f, _ := e.cachedFlow(protoUDP, dn, gnb); f.VLAN != vid {
		t.Errorf("the flow from the DN host is cached with VLAN %d, want %d", f.VLAN, vid)
	}
	if f, _ := e.cachedFlow(protoUDP, gnb, dn); f.VLAN != 0 {
		t.Errorf("the flow from the gnb host is cached with VLAN %d, want 0 (untagged)", f.VLAN)
	}
}

// tcpPair is a TCP connection from the gnb host to the DN host through the box: client is
// the gnb end, server the DN end.
type tcpPair struct {
	client, server *net.TCPConn
}

// dialTransit connects the gnb host to the DN host at port, through the box.
func (e *env) dialTransit(port uint16) tcpPair {
	e.t.Helper()
	dst := netip.AddrPortFrom(testbed.DNAddr, port)
	var ln *net.TCPListener
	err := e.topo.Do(e.topo.DNNS, func() (err error) {
		ln, err = net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(dst))
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	defer ln.Close()
	var p tcpPair
	err = e.topo.Do(e.topo.GNBNS, func() (err error) {
		p.client, err = net.DialTCP("tcp4", nil, net.TCPAddrFromAddrPort(dst))
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { p.client.Close() })
	if err := ln.SetDeadline(time.Now().Add(recvTimeout)); err != nil {
		e.t.Fatal(err)
	}
	if p.server, err = ln.AcceptTCP(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { p.server.Close() })
	return p
}

// addrs are the connection's ends as the gnb host (client) and the DN host (server) see them.
func (p tcpPair) addrs() (client, server netip.AddrPort) {
	return p.client.LocalAddr().(*net.TCPAddr).AddrPort(), p.server.LocalAddr().(*net.TCPAddr).AddrPort()
}

// exchange has the client send n messages, each echoed by the server, one at a time, so that
// both directions carry packets after the handshake.
func (p tcpPair) exchange(t *testing.T, n int) {
	t.Helper()
	msg, buf := []byte("transit tcp"), make([]byte, 64)
	deadline := time.Now().Add(recvTimeout)
	if err := errors.Join(p.client.SetDeadline(deadline), p.server.SetDeadline(deadline)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := p.client.Write(msg); err != nil {
			t.Fatalf("message %d: client write: %v", i, err)
		}
		if _, err := io.ReadFull(p.server, buf[:len(msg)]); err != nil {
			t.Fatalf("message %d: server read: %v", i, err)
		}
		if _, err := p.server.Write(buf[:len(msg)]); err != nil {
			t.Fatalf("message %d: server write: %v", i, err)
		}
		if _, err := io.ReadFull(p.client, buf[:len(msg)]); err != nil {
			t.Fatalf("message %d: client read: %v", i, err)
		}
	}
}

// TestFlowCacheTCPEnd: both directions of a TCP connection through the box are cached and
// forwarded by the cache; a RST, and a FIN, go to the kernel, which delivers them, and the
// entry of the direction they were sent in goes.
func TestFlowCacheTCPEnd(t *testing.T) {
	e := newFlowCacheEnv(t, 64, 0)
	const exchanges = 20

	cached := func(p tcpPair) (up, down bool) {
		client, server := p.addrs()
		_, up = e.cachedFlow(protoTCP, client, server)
		_, down = e.cachedFlow(protoTCP, server, client)
		return up, down
	}
	open := func(t *testing.T, port uint16) tcpPair {
		p := e.dialTransit(port)
		d := e.flowDeltas(func() { p.exchange(t, exchanges) })
		// Each exchange is at least a segment each way; ACKs may come on their own.
		if d["flow_hit"] < 2*exchanges || d["flow_miss"] != 0 {
			t.Errorf("connection on port %d: flow counters grew by %v, want at least %d hits and no miss",
				port, d, 2*exchanges)
		}
		if up, down := cached(p); !up || !down {
			t.Errorf("connection on port %d: cached to the DN host %t, from it %t; want both", port, up, down)
		}
		return p
	}

	t.Run("RST", func(t *testing.T) {
		p := open(t, 7201)
		if err := p.client.SetLinger(0); err != nil { // close sends a RST
			t.Fatal(err)
		}
		p.client.Close()
		buf := make([]byte, 1)
		if _, err := p.server.Read(buf); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("the DN host's read after the client's RST: %v, want %v", err, syscall.ECONNRESET)
		}
		if up, _ := cached(p); up {
			t.Error("the flow toward the DN host outlived its RST")
		}
	})
	t.Run("FIN", func(t *testing.T) {
		p := open(t, 7202)
		if err := p.client.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1)
		if _, err := p.server.Read(buf); err != io.EOF {
			t.Fatalf("the DN host's read after the client's FIN: %v, want EOF", err)
		}
		if err := p.server.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := p.client.Read(buf); err != io.EOF {
			t.Errorf("the gnb host's read after the server's FIN: %v, want EOF", err)
		}
		// The client's FIN removed the entry toward the DN host, but its last ACK (no
		// FIN) is learnt afresh; nothing follows the server's FIN.
		if _, down := cached(p); down {
			t.Error("the flow from the DN host outlived its FIN")
		}
	})
}

// TestFlowCacheAging: a flow idle for the idle timeout leaves the cache; its next packet
// goes to the kernel and is learnt again.
func TestFlowCacheAging(t *testing.T) {
	const idle = time.Second
	e := newFlowCacheEnv(t, 64, idle)
	gnb := netip.AddrPortFrom(testbed.GNBAddr, 7100)
	dn := netip.AddrPortFrom(testbed.DNAddr, testbed.DNPort)
	e.flowTransit(t, "before aging", e.topo.GNBNS, gnb, e.topo.DNNS, dn, 10)
	start := time.Now()
	// Aging looks every second: an idle flow goes between idle and idle + 2 s after its last
	// packet (the coarse clock adds a tick).
	for {
		if _, ok := e.cachedFlow(protoUDP, gnb, dn); !ok {
			break
		}
		if time.Since(start) > idle+3*time.Second {
			t.Fatalf("the flow is still cached %s after its last packet (idle timeout %s)", time.Since(start), idle)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if gone := time.Since(start); gone < idle-100*time.Millisecond {
		t.Errorf("the flow went %s after its last packet, before the idle timeout %s", gone, idle)
	}
	e.flowTransit(t, "after aging", e.topo.GNBNS, gnb, e.topo.DNNS, dn, 10)
}

// TestFlowCacheFull: with room for two flows, the third and fourth stay with the kernel:
// every packet of theirs arrives through the kernel, and the learner counts flow_full for
// those it tries to add (one per packet, unless a burst's notes overlap).
func TestFlowCacheFull(t *testing.T) {
	const room, flows, n = 2, 4, 10
	e := newFlowCacheEnv(t, room, 0)
	dn := netip.AddrPortFrom(testbed.DNAddr, testbed.DNPort)
	for i := range flows {
		src := netip.AddrPortFrom(testbed.GNBAddr, uint16(7100+i))
		what := fmt.Sprintf("flow %d", i+1)
		if i < room {
			e.flowTransit(t, what, e.topo.GNBNS, src, e.topo.DNNS, dn, n)
			continue
		}
		payload := testbed.Payload(what)
		d := e.flowDeltas(func() {
			checkTransit(t, what, e.transit(e.topo.GNBNS, src, e.topo.DNNS, dn, n, payload), src, n, payload)
		})
		if d["flow_miss"] != n || d["flow_hit"] != 0 || d["flow_learned"] != 0 || d["flow_full"] == 0 {
			t.Errorf("%s, with the cache full: flow counters grew by %v, want %d misses, flow_full, nothing else", what, d, n)
		}
	}
	if got, err := e.topo.CachedFlows(); err != nil || len(got) != room {
		t.Errorf("the cache holds %d flows (err %v), want %d", len(got), err, room)
	}
}

// TestFlowCacheDropRuleMidFlow: a UDP flow of one datagram a millisecond is cached; an
// nftables rule that drops it is added mid-flow. Once the daemon has processed the ruleset
// event (the flow has left the cache), no datagram sent after that arrives: the kernel now
// decides for every packet, and drops them. The test logs how long the invalidation took.
func TestFlowCacheDropRuleMidFlow(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft (Debian package nftables; make deps installs it)")
	}
	e := newFlowCacheEnv(t, 64, 0)
	gnb := netip.AddrPortFrom(testbed.GNBAddr, 7100)
	dn := netip.AddrPortFrom(testbed.DNAddr, testbed.DNPort)
	rx, err := e.topo.ListenUDP(e.topo.DNNS, dn)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()

	const n, ruleAt = 1000, 300
	sent := make([]time.Time, n)
	reached := make(chan struct{})
	senderDone := make(chan error, 1)
	go func() {
		for i := range n {
			if i == ruleAt {
				close(reached)
			}
			sent[i] = time.Now()
			seq := []byte(fmt.Sprintf("seq %06d", i))
			if err := e.topo.SendUDP(e.topo.GNBNS, gnb, dn, 1, func(int) []byte { return seq }); err != nil {
				senderDone <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
		senderDone <- nil
	}()
	<-reached
	if _, ok := e.cachedFlow(protoUDP, gnb, dn); !ok {
		t.Fatal("the flow is not cached before the rule")
	}
	if _, err := e.topo.Run(e.ctx(), e.topo.UPFNS, "nft", "add table ip xupf_test; "+
		"add chain ip xupf_test fw { type filter hook forward priority 0; }; "+
		"add rule ip xupf_test fw udp dport "+fmt.Sprint(testbed.DNPort)+" drop"); err != nil {
		t.Fatal(err)
	}
	committed := time.Now() // nft returns once the transaction is committed
	var removed time.Time
	for {
		if _, ok := e.cachedFlow(protoUDP, gnb, dn); !ok {
			removed = time.Now()
			break
		}
		if time.Since(committed) > 2*time.Second {
			t.Fatal("the flow is still cached 2s after the drop rule was committed")
		}
		time.Sleep(100 * time.Microsecond)
	}
	if err := <-senderDone; err != nil {
		t.Fatal(err)
	}
	got, err := rx.Collect(n, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	last := -1
	for _, d := range got {
		var seq int
		if _, err := fmt.Sscanf(string(d.Data), "seq %d", &seq); err != nil || seq < 0 || seq >= n {
			t.Fatalf("unexpected datagram %q", d.Data)
		}
		if sent[seq].After(removed) {
			t.Errorf("datagram %d, sent %s after the flow left the cache, arrived", seq, sent[seq].Sub(removed))
		}
		last = max(last, seq)
	}
	if last < ruleAt || len(got) >= n {
		t.Errorf("%d of %d datagrams arrived, the last sent %d; want all until the rule and none after", len(got), n, last)
	}
	t.Logf("drop rule committed → flow out of the cache: %s (seen by polling every 100µs); "+
		"last datagram forwarded was sent %s after the commit; %d of %d arrived",
		removed.Sub(committed), sent[max(last, 0)].Sub(committed), len(got), n)
}

// TestFlowCacheThroughXupfctl: the cached flows through xupfctl, as the API gives them:
// listed most bytes first with what the kernel did, filtered, shown, counted in the stats,
// flushed; with the cache off, the commands say so.
func TestFlowCacheThroughXupfctl(t *testing.T) {
	e := newFlowCacheEnv(t, 64, 0)
	gnb := netip.AddrPortFrom(testbed.GNBAddr, 7100)
	dn := netip.AddrPortFrom(testbed.DNAddr, testbed.DNPort)
	e.flowTransit(t, "gnb to dn", e.topo.GNBNS, gnb, e.topo.DNNS, dn, packets)
	e.flowTransit(t, "dn to gnb", e.topo.DNNS, dn, e.topo.GNBNS, gnb, packets/2)

	var list []api.CachedFlow
	e.ctlJSON(t, &list, "flows", "list")
	if len(list) != 2 {
		t.Fatalf("flows list: %+v, want the two directions", list)
	}
	up, down := list[0], list[1] // most bytes first
	if up.Src != gnb.String() || up.Dst != dn.String() || up.Proto != "udp" || up.InInterface != testbed.N3If ||
		up.OutInterface != testbed.N6If || !up.TTLDecrement || up.VLAN != "none" || up.Packets != packets ||
		up.LastSeen.Before(up.FirstSeen) || time.Since(up.LastSeen) > time.Minute {
		t.Errorf("the flow toward the DN host: %+v", up)
	}
	if down.Src != dn.String() || down.InInterface != testbed.N6If || down.Packets != packets/2 {
		t.Errorf("the flow from the DN host: %+v", down)
	}
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"--address", testbed.DNAddr.String(), "--interface", testbed.N6If, "--proto", "udp"}, 2},
		{[]string{"--port", "7100", "--interface", testbed.N3If}, 2},
		{[]string{"--port", "9"}, 0},
		{[]string{"--proto", "tcp"}, 0},
	} {
		var got []api.CachedFlow
		e.ctlJSON(t, &got, append([]string{"flows", "list"}, c.args...)...)
		if len(got) != c.want {
			t.Errorf("flows list %v: %d flows, want %d", c.args, len(got), c.want)
		}
	}
	if out := e.ctl(t, "flows", "show", gnb.String(), dn.String()); !strings.Contains(out, "ttl         decremented (routed)") {
		t.Errorf("flows show:\n%s", out)
	}
	if fc := e.stats().FlowCache; fc == nil || fc.Entries != 2 {
		t.Errorf("stats flow_cache %+v, want 2 entries", fc)
	}
	if out := e.ctl(t, "flows", "flush", "--port", "7100"); out != "2 flows flushed\n" {
		t.Errorf("flows flush: %q", out)
	}
	if got, err := e.topo.CachedFlows(); err != nil || len(got) != 0 {
		t.Errorf("after the flush the cache holds %+v (err %v)", got, err)
	}
	if fc := e.stats().FlowCache; fc == nil || fc.Entries != 0 || fc.Evicted["flushed"] != 2 {
		t.Errorf("stats flow_cache %+v, want no entry, 2 flushed", fc)
	}

	off := newEnvWith(t)
	for _, args := range [][]string{{"flows", "list"}, {"flows", "flush", "--all"}} {
		if msg := off.xupfctlFails(t, args...); !strings.Contains(msg, "the flow cache is off (flow_cache.max_flows is 0)") {
			t.Errorf("xupfctl %v with the cache off: %s", args, msg)
		}
	}
	if fc := off.stats().FlowCache; fc != nil {
		t.Errorf("stats with the cache off have flow_cache %+v", fc)
	}
}

// statefulRuleset is a forward filter as operators write it: connections from the gnb host's
// subnet may start, replies follow them, and packets conntrack finds invalid are counted and
// dropped.
const statefulRuleset = `add table ip xupf_fw
add chain ip xupf_fw fw { type filter hook forward priority 0; policy drop; }
add rule ip xupf_fw fw ct state invalid counter drop
add rule ip xupf_fw fw ct state established,related accept
add rule ip xupf_fw fw ip saddr 10.100.3.0/24 ct state new accept
`

// TestFlowCacheStatefulFirewall: behind a stateful nftables ruleset a TCP connection is
// tracked by conntrack, so the cache leaves it to the kernel (flow_tracked): conntrack sees
// every segment, a megabyte later the client's FIN is valid and reaches the server, and no
// packet is judged invalid. Cached, the FIN would lie far past the TCP window conntrack last
// saw and be dropped as invalid.
func TestFlowCacheStatefulFirewall(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft (Debian package nftables; make deps installs it)")
	}
	e := newFlowCacheEnv(t, 64, 0)
	if _, err := e.topo.Run(e.ctx(), e.topo.UPFNS, "sh", "-c", `printf '%s' "$0" | nft -f -`, statefulRuleset); err != nil {
		t.Fatal(err)
	}
	var p tcpPair
	d := e.flowDeltas(func() {
		p = e.dialTransit(7301)
		p.exchange(t, 20)
		buf := make([]byte, 1<<20)
		go p.client.Write(buf)
		if _, err := io.ReadFull(p.server, buf); err != nil {
			t.Fatalf("server read: %v", err)
		}
	})
	if d["flow_hit"] != 0 || d["flow_learned"] != 0 || d["flow_tracked"] == 0 {
		t.Errorf("flow counters grew by %v, want flow_tracked and no flow learnt or hit", d)
	}
	if err := p.client.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.server.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the DN host's read after the client's FIN: %v, want EOF", err)
	}
	out, err := e.topo.Run(e.ctx(), e.topo.UPFNS, "nft", "list", "chain", "ip", "xupf_fw", "fw")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`invalid counter packets (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no invalid counter in the ruleset:\n%s", out)
	}
	if n, _ := strconv.Atoi(m[1]); n != 0 {
		t.Errorf("conntrack judged %d packets invalid:\n%s", n, out)
	}
}

// UE traffic the kernel treats on N6 (flow_cache.kernel_n6): nftables masquerades the UEs to
// the n6 address, and the flow cache takes over each flow once the kernel has translated its
// first packet.

// natSession is a UE behind the testbed's user-space gNB relay (testbed.StartUE).
var natSession = session.Session{ID: 1, UE: netip.MustParseAddr("10.45.0.2"), UplinkTEID: 0x100,
	DownlinkTEID: 0x200, GNB: testbed.UEGNBAddr}

// newNATEnv starts xupfd with kernel_n6 and natSession, masquerades the UE network out of n6,
// removes the DN host's route to it, and starts the UE.
func newNATEnv(t *testing.T) (*env, *testbed.UE) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft (Debian package nftables; make deps installs it)")
	}
	e := newEnvConfig(t, func(c *config.Config) {
		c.FlowCache.MaxFlows = 64
		c.FlowCache.KernelN6.Default = true
		c.UEPools = []netip.Prefix{testbed.UENet}
	}, natSession)
	e.masqueradeUEs()
	// Behind NAT the data network has no route to the UEs: a packet the UPF's kernel sent
	// there for a UE would not come back.
	if _, err := e.topo.Run(e.ctx(), e.topo.DNNS, "ip", "route", "del", testbed.UENet.String()); err != nil {
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

// masqueradeUEs has nftables masquerade the UE network out of n6.
func (e *env) masqueradeUEs() {
	e.t.Helper()
	if err := e.topo.Masquerade(e.ctx(), testbed.UENet); err != nil {
		e.t.Fatal(err)
	}
}

// udpPeers are a UDP socket of the UE and one of the DN host.
type udpPeers struct {
	ue, dn         *net.UDPConn
	ueAddr, dnAddr netip.AddrPort
}

// udpPeers are natSession's UE's socket on uePort and the DN host's.
func (e *env) udpPeers(uePort uint16) udpPeers { return e.udpPeersOf(natSession.UE, uePort) }

// udpPeersOf are the socket of the UE ue on uePort and the DN host's.
func (e *env) udpPeersOf(ue netip.Addr, uePort uint16) udpPeers {
	e.t.Helper()
	p := udpPeers{ueAddr: netip.AddrPortFrom(ue, uePort), dnAddr: netip.AddrPortFrom(testbed.DNAddr, testbed.DNPort)}
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

// TestFlowCacheNATPerInstance: with the kernel's N6 treatment for the internet network
// instance only (flow_cache.kernel_n6_instances; kernel_n6 off), a UE of a session the SMF
// puts in internet reaches the DN host masqueraded behind the n6 address, through the cache
// after its first datagram; a UE of an ims session reaches it with its own address, routed by
// the datapath, which the kernel's NAT never sees.
func TestFlowCacheNATPerInstance(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft (Debian package nftables; make deps installs it)")
	}
	e := newEnvConfig(t, func(c *config.Config) {
		c.FlowCache.MaxFlows = 64
		c.FlowCache.KernelN6.Instances = map[string]bool{"internet": true}
		c.UEPools = []netip.Prefix{testbed.UENet}
	})
	e.masqueradeUEs()
	c, ctx := e.smfClient("smf.nat.test")
	for i, ni := range []string{"internet", "ims"} {
		teid := uint32(0x300 + i)
		a, err := c.Establish(ctx, pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, NetworkInstance: ni,
			GNB: testbed.UEGNBAddr, GNBTEID: teid})
		if err != nil {
			t.Fatalf("establish %s: %v\n%s", ni, err, e.daemon.LogTail())
		}
		ue, err := e.topo.StartUEWith(testbed.PFCPView(a, testbed.UEGNBAddr, teid, 0), testbed.UEOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := e.udpPeersOf(a.UE, 7300)
		const n = 5
		d := e.flowDeltas(func() {
			for j := range n {
				seen := p.exchange(t, []byte(fmt.Sprintf("%s datagram %d", ni, j)))
				if want := map[bool]netip.Addr{true: testbed.N6Addr, false: a.UE}[ni == "internet"]; seen.Addr() != want {
					t.Errorf("%s: datagram %d reached the DN host from %s, want %s", ni, j, seen, want)
				}
			}
		})
		want := map[string]uint64{} // routed by the datapath: no flow of the cache's
		if ni == "internet" {
			want = map[string]uint64{"flow_miss": 1, "flow_learned": 2, "flow_hit": 2*n - 1}
		}
		if !sameCounters(d, want) {
			t.Errorf("%s: flow counters grew by %v, want %v", ni, d, want)
		}
		// The next session's peers bind the same DN port (the cleanups' second Close is a no-op).
		p.ue.Close()
		p.dn.Close()
		if err := ue.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestFlowCacheNATTCP: TCP from a UE through nftables masquerade to an iperf3 server on the DN
// host, each way. The handshake's reply, which the kernel translates back to the UE, reaches
// the session through the return device; once conntrack has seen it, the UE's next packet
// has the pair learnt, and the cache carries the rest both ways. The DN host sees the n6
// address, the UE the DN host's; the session's usage is what the UE's relay carried, every
// packet charged once whichever path it took.
func TestFlowCacheNATTCP(t *testing.T) {
	e, ue := newNATEnv(t)
	srv := e.iperf3Server()
	for _, d := range directions {
		t.Run(d.name, func(t *testing.T) {
			before, err := e.api.Session(e.ctx(), natSession.ID)
			if err != nil {
				t.Fatal(err)
			}
			relayed := ue.Stats()
			synRetrans, err := e.topo.SynRetransmits(e.topo.GNBNS)
			if err != nil {
				t.Fatal(err)
			}
			var r testbed.Iperf3Result
			c := e.flowDeltas(func() {
				r, err = ue.Iperf3(context.Background(), testbed.Iperf3Options{Server: srv.Addr, Reverse: d.reverse,
					Duration: time.Second, Congestion: qosCongestion})
			})
			if err != nil {
				t.Fatalf("iperf3 through NAT: %v", err)
			}
			t.Logf("TCP %s through NAT: %.1f Mbit/s, flow counters %v", d.name, r.ReceivedBps/1e6, c)
			if r.ReceivedBytes == 0 {
				t.Fatal("iperf3 moved no data")
			}
			// The server's SYN-ACKs reached the UE at once: without the return device each
			// was lost until the UE sent its SYN again, and that had the pair learnt.
			if n, err := e.topo.SynRetransmits(e.topo.GNBNS); err != nil || n != synRetrans {
				t.Errorf("the UE sent %d SYNs again (err %v), want none", n-synRetrans, err)
			}
			// Two connections (iperf3's control and data), each learnt both ways.
			if c["flow_learned"] < 4 || c["flow_hit"] < 10*c["flow_miss"] {
				t.Errorf("flow counters grew by %v, want at least 4 flows learnt and the cache carrying most packets", c)
			}
			// Translated on both sides: the DN host sees the n6 address, the UE's socket the DN
			// host's (the replies reach it translated back). The server's output reaches its
			// log when iperf3 flushes it, a moment after the test.
			accepted := "Accepted connection from " + testbed.N6Addr.String()
			for deadline := time.Now().Add(2 * time.Second); !strings.Contains(srv.Log(), accepted); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Errorf("the iperf3 server saw no connection from the n6 address %s:\n%s", testbed.N6Addr, srv.Log())
					break
				}
			}
			if !strings.Contains(string(r.JSON), `"remote_host":	"`+testbed.DNAddr.String()+`"`) &&
				!strings.Contains(string(r.JSON), `"remote_host": "`+testbed.DNAddr.String()+`"`) {
				t.Errorf("the UE's iperf3 was not connected to the DN host's address %s", testbed.DNAddr)
			}
			time.Sleep(100 * time.Millisecond) // the connections' last packets, relayed, reach the UPF
			after, err := e.api.Session(e.ctx(), natSession.ID)
			if err != nil {
				t.Fatal(err)
			}
			now := ue.Stats()
			ul, dl := after.Usage.Uplink.Packets-before.Usage.Uplink.Packets, after.Usage.Downlink.Packets-before.Usage.Downlink.Packets
			if sent := now.UplinkPackets - relayed.UplinkPackets; ul != sent {
				t.Errorf("uplink usage rose by %d packets, the UE sent %d", ul, sent)
			}
			if got := now.DownlinkPackets - relayed.DownlinkPackets; dl != got {
				t.Errorf("downlink usage rose by %d packets, the UE received %d", dl, got)
			}
			for _, ns := range []string{e.topo.GNBNS, e.topo.DNNS} {
				if _, tcp, err := e.topo.ChecksumErrors(ns); err != nil || tcp != 0 {
					t.Errorf("%s: %d TCP checksum errors (err %v)", ns, tcp, err)
				}
			}
		})
	}
}

// TestFlowCacheNATUDPReplyAfterFlush: a UDP flow's cached pair is flushed; the DN host's next
// datagram goes through the kernel, which translates it back and sends it through the return
// device to the UE's session: it arrives, charged once, before the UE sends again.
func TestFlowCacheNATUDPReplyAfterFlush(t *testing.T) {
	e, _ := newNATEnv(t)
	e.replyAfterFlush(t, e.udpPeers(7300))
}

// replyAfterFlush has the UE's flow of p learnt, flushes it, and has the DN host answer: the
// answer must reach the UE through the kernel and the return device, charged once, and
// leave the replies' entry learnt, which the next answer hits; the UE's next packet learns
// its own entry beside it, with the same translation.
func (e *env) replyAfterFlush(t *testing.T, p udpPeers) {
	t.Helper()
	seen := p.exchange(t, []byte("learn the pair"))
	if _, ok := e.cachedFlow(protoUDP, p.ueAddr, p.dnAddr); !ok {
		t.Fatal("the UE's flow is not cached after a round trip")
	}
	e.ctl(t, "flows", "flush", "--all")
	before, err := e.api.Session(e.ctx(), natSession.ID)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("reply after the flush")
	stats := e.stats()
	reply := func() {
		if _, err := p.dn.WriteToUDPAddrPort(msg, seen); err != nil {
			t.Fatal(err)
		}
		got, from, err := read(p.ue, recvTimeout)
		if err != nil || !bytes.Equal(got, msg) || from != p.dnAddr {
			t.Fatalf("UE: %q from %s (err %v), want %q from %s", got, from, err, msg, p.dnAddr)
		}
	}
	if d, want := e.flowDeltas(reply), map[string]uint64{"flow_miss": 1, "flow_learned": 1}; !sameCounters(d, want) {
		t.Errorf("flow counters grew by %v, want %v (the reply through the kernel, its entry learnt)", d, want)
	}
	if d, want := e.flowDeltas(reply), map[string]uint64{"flow_hit": 1}; !sameCounters(d, want) {
		t.Errorf("flow counters grew by %v, want %v (the next reply a hit)", d, want)
	}
	if got := e.stats().Counters["dl_rx"] - stats.Counters["dl_rx"]; got != 2 {
		t.Errorf("dl_rx rose by %d, want 2: each reply through its session's downlink once", got)
	}
	after, err := e.api.Session(e.ctx(), natSession.ID)
	if err != nil {
		t.Fatal(err)
	}
	ipLen := uint64(20 + 8 + len(msg))
	if got := after.Usage.Downlink; got.Packets-before.Usage.Downlink.Packets != 2 || got.Bytes-before.Usage.Downlink.Bytes != 2*ipLen {
		t.Errorf("downlink usage %+v, was %+v: want two more packets of %d bytes", got, before.Usage.Downlink, ipLen)
	}
	var again netip.AddrPort
	if d, want := e.flowDeltas(func() { again = p.exchange(t, []byte("learn it again")) }),
		map[string]uint64{"flow_miss": 1, "flow_learned": 1, "flow_hit": 1}; !sameCounters(d, want) {
		t.Errorf("flow counters grew by %v, want %v (the UE's entry learnt beside the replies', the answer a hit)", d, want)
	}
	if again != seen {
		t.Errorf("the DN host saw %s after the flush, %s before", again, seen)
	}
	if _, ok := e.cachedFlow(protoUDP, p.ueAddr, p.dnAddr); !ok {
		t.Error("the UE's flow is not cached again after its next packet")
	}
}

// TestFlowCacheNATReturnDeviceLifecycle: xupfd makes the return device with the UE pool routed
// into it; its two ends follow n6's MTU raised; a restart keeps it (the same interface) and it
// carries the kernel's packets to UEs across; `xupfd --stop` removes it.
func TestFlowCacheNATReturnDeviceLifecycle(t *testing.T) {
	e, _ := newNATEnv(t)
	dev := config.DefaultReturnDevice
	show := func() string {
		out, err := e.topo.Run(e.ctx(), e.topo.UPFNS, "ip", "-o", "link", "show", dev)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(out)[0] // its ifindex
	}
	made := show()
	if _, err := e.topo.Run(e.ctx(), e.topo.UPFNS, "ip", "link", "set", testbed.N6If, "mtu", "2000"); err != nil {
		t.Fatal(err)
	}
	for _, end := range []string{dev, dev + "-xdp"} {
		deadline := time.Now().Add(3 * time.Second)
		for {
			out, err := e.topo.Run(e.ctx(), e.topo.UPFNS, "ip", "-o", "link", "show", end)
			if err == nil && strings.Contains(out, " mtu 2000 ") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s after n6's MTU went to 2000: %q (err %v), want mtu 2000", end, out, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if out, err := e.topo.Run(e.ctx(), e.topo.UPFNS, "ip", "route", "show", testbed.UENet.String()); err != nil ||
		!strings.Contains(out, "dev "+dev) {
		t.Fatalf("the UE pool's route: %q (err %v), want it into %s", out, err, dev)
	}
	e.restart(t, e.daemon.Stop)
	if kept := show(); kept != made {
		t.Errorf("the return device is interface %s after the restart, %s before: want it kept", kept, made)
	}
	e.replyAfterFlush(t, e.udpPeers(7400))

	out, err := e.topo.Command(e.ctx(), e.topo.UPFNS, xupfdBin, "--config", e.daemon.ConfigPath, "--stop").CombinedOutput()
	if err != nil {
		t.Fatalf("xupfd --stop: %v\n%s", err, out)
	}
	if out, err := e.topo.Run(e.ctx(), e.topo.UPFNS, "ip", "link", "show", dev); err == nil {
		t.Errorf("the return device is left by xupfd --stop: %s", out)
	}
}

// TestFlowCacheNATReturnDeviceOwnership: xupfd removes the return device it made by the name
// it recorded, whatever the configuration names now. A renamed return_device replaces the
// earlier one; a start without kernel_n6 removes one whose link was never pinned (a crash
// between making it and attaching to it); a start whose pool the main table routes elsewhere
// is refused, leaving that route; `xupfd --stop` removes the recorded device after a rename.
func TestFlowCacheNATReturnDeviceOwnership(t *testing.T) {
	e, _ := newNATEnv(t)
	cfg, err := config.Load(e.daemon.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	reconfigure := func(edit func(*config.Config)) {
		t.Helper()
		edit(cfg)
		if err := e.topo.WriteConfigFile(e.daemon.ConfigPath, cfg); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(dev string) bool {
		_, err := e.topo.Run(e.ctx(), e.topo.UPFNS, "ip", "link", "show", dev)
		return err == nil
	}
	poolRoute := func() string {
		out, err := e.topo.Run(e.ctx(), e.topo.UPFNS, "ip", "route", "show", "exact", testbed.UENet.String())
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}

	const renamed = "xupfret2"
	reconfigure(func(c *config.Config) { c.FlowCache.ReturnDevice = renamed })
	e.restart(t, e.daemon.Stop)
	if exists(config.DefaultReturnDevice) {
		t.Errorf("%s is left after return_device was renamed %s", config.DefaultReturnDevice, renamed)
	}
	if r := poolRoute(); !strings.Contains(r, "dev "+renamed) {
		t.Errorf("the UE pool's route after the rename: %q, want it into %s", r, renamed)
	}
	e.replyAfterFlush(t, e.udpPeers(7500))

	// As a crash between making the device and pinning its link leaves it: no program there.
	reconfigure(func(c *config.Config) { c.FlowCache.KernelN6.Default = false })
	e.restart(t, func() error {
		return errors.Join(e.daemon.Stop(), os.Remove(filepath.Join(e.topo.BPFFS, "link_"+renamed+"-xdp")))
	})
	if exists(renamed) {
		t.Errorf("%s, never attached, is left by a start without kernel_n6", renamed)
	}
	if r := poolRoute(); r != "" {
		t.Errorf("the UE pool is routed after a start without kernel_n6: %q", r)
	}

	if err := e.daemon.Stop(); err != nil {
		t.Fatal(err)
	}
	foreign := []string{"route", "add", "blackhole", testbed.UENet.String()}
	if _, err := e.topo.Run(e.ctx(), e.topo.UPFNS, "ip", foreign...); err != nil {
		t.Fatal(err)
	}
	cfg.FlowCache.KernelN6.Default = true
	out := startFails(t, e.topo, cfg)
	for _, w := range []string{"ue_pools " + testbed.UENet.String(), "ip route del"} {
		if !strings.Contains(out, w) {
			t.Errorf("the start over the operator's route does not say %q:\n%s", w, out)
		}
	}
	if r := poolRoute(); !strings.HasPrefix(r, "blackhole") {
		t.Errorf("the UE pool's route after the refused start: %q, want the operator's blackhole", r)
	}
	foreign[1] = "del"
	if _, err := e.topo.Run(e.ctx(), e.topo.UPFNS, "ip", foreign...); err != nil {
		t.Fatal(err)
	}

	reconfigure(func(c *config.Config) {})
	e.restart(t, func() error { return nil })
	if r := poolRoute(); !strings.Contains(r, "dev "+renamed) {
		t.Errorf("the UE pool's route once the operator's is gone: %q, want it into %s", r, renamed)
	}
	reconfigure(func(c *config.Config) { c.FlowCache.ReturnDevice = "xupfret3" })
	out2, err := e.topo.Command(e.ctx(), e.topo.UPFNS, xupfdBin, "--config", e.daemon.ConfigPath, "--stop").CombinedOutput()
	if err != nil {
		t.Fatalf("xupfd --stop: %v\n%s", err, out2)
	}
	if exists(renamed) {
		t.Errorf("%s is left by xupfd --stop with return_device renamed since", renamed)
	}
}
