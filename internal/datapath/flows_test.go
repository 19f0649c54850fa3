package datapath

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/conntrack"
	"github.com/xupf/xupf/internal/flowtable"
	"github.com/xupf/xupf/internal/kerneln6"
	"github.com/xupf/xupf/internal/nfwatch"
	"github.com/xupf/xupf/internal/returndev"
	"github.com/xupf/xupf/internal/router"
	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/session"
)

// Transit traffic through the box, no UPF session: a host behind n6 talks to a host behind n3.
var (
	transitSrc = addrDN  // behind the DN router, reached through n6
	transitDst = addrGNB // on n3's subnet
)

// transitTCP is a transit IPv4/TCP packet with the given ToS, TTL and flags.
func transitTCP(t testing.TB, tos, ttl uint8, tcp layers.TCP) []byte {
	ip := ipv4(transitSrc, transitDst, layers.IPProtocolTCP, ttl)
	ip.TOS = tos
	tcp.SrcPort, tcp.DstPort, tcp.Window = 40000, 443, 1000
	return serialize(t, ip, &tcp, gopacket.Payload("transit payload"))
}

// frame puts an Ethernet header (with a VLAN tag when vid is not 0) in front of ip.
func frame(src, dst []byte, vid uint16, ip []byte) []byte {
	if vid == 0 {
		return concat(dst, src, []byte{0x08, 0x00}, ip)
	}
	return concat(dst, src, []byte{0x81, 0x00, byte(vid >> 8), byte(vid), 0x08, 0x00}, ip)
}

var transitKey = FlowKey{Src: transitSrc, Dst: transitDst, SrcPort: 40000, DstPort: 443, Proto: 6}

func newFlowEnv(t *testing.T, maxFlows int) *testEnv {
	t.Helper()
	return newTestEnvOpts(t, Options{MaxSessions: 4, FlowCache: FlowCacheOptions{MaxFlows: maxFlows, ScanInterval: time.Hour}})
}

// putFlow caches a flow arriving on n6 (VLAN vid) leaving through n3 toward the gNB's MAC.
func (e *testEnv) putFlow(t testing.TB, vid uint16, v xupfFlow) {
	t.Helper()
	k := transitKey
	k.VLAN, k.Ifindex = vid, e.n6
	v.Ifindex, v.Dmac, v.Smac = uint32(e.n3), [6]byte(macGNB), [6]byte(macN3)
	if v.Mtu == 0 {
		v.Mtu = 1500
	}
	if err := e.putRaw(k.raw(), v); err != nil {
		t.Fatal(err)
	}
}

// putRaw caches v under k as learnt in the current epoch, in the place of any entry of k.
func (e *testEnv) putRaw(k xupfFlowKey, v xupfFlow) error {
	v.Epoch = e.dp.flowEpoch()
	e.dp.flows.Delete(k)
	return e.dp.flows.Insert(k, v)
}

// putAll caches vals[i] under keys[i], as they are.
func (e *testEnv) putAll(t testing.TB, keys []xupfFlowKey, vals []xupfFlow) {
	t.Helper()
	for i := range keys {
		if err := e.dp.flows.Insert(keys[i], vals[i]); err != nil {
			t.Fatalf("flow %d of %d: %v", i, len(keys), err)
		}
	}
}

// clearFlows empties the flow table and the learner's notes.
func (e *testEnv) clearFlows(t testing.TB) {
	t.Helper()
	for k := range e.dp.flows.All() {
		e.dp.flows.Delete(k)
	}
	if err := clearMap(e.dp.objs.XupfFlowSeen); err != nil {
		t.Fatal(err)
	}
}

// TestFlowCacheForward: a packet of a cached flow gets what the kernel did to the flow's first
// packet (TTL, DSCP, VLAN, MACs) and is redirected; what the cache must not take goes to the
// kernel as it came.
func TestFlowCacheForward(t *testing.T) {
	e := newFlowEnv(t, 16)
	ack := layers.TCP{ACK: true}
	in := func(vid uint16, tos, ttl uint8) []byte {
		return frame(macDN, macN6, vid, transitTCP(t, tos, ttl, ack))
	}
	out := func(vid uint16, tos, ttl uint8) []byte {
		return frame(macN3, macGNB, vid, transitTCP(t, tos, ttl, ack))
	}
	routed := xupfFlow{Flags: uint8(xupfFlowFlagFLOW_F_TTL)}
	hit := map[string]uint64{"flow_hit": 1}
	toKernel := map[string]uint64{"pass": 1}
	ended := map[string]uint64{"pass": 1, "flow_ended": 1}
	be := func(v uint16) uint16 { return be16(v) }
	ipLen := uint64(len(transitTCP(t, 0, 64, ack)))
	cases := []struct {
		name string
		vid  uint16 // the cached flow's arrival VLAN
		flow xupfFlow
		pktCase
	}{
		{name: "routed", flow: routed, pktCase: pktCase{in: in(0, 0x01, 64), verdict: xdpRedirect, out: out(0, 0x01, 63), counters: hit}},
		{name: "DSCP set, ECN kept", flow: xupfFlow{Flags: uint8(xupfFlowFlagFLOW_F_TTL | xupfFlowFlagFLOW_F_DSCP), Tos: 46 << 2},
			pktCase: pktCase{in: in(0, 0x01, 64), verdict: xdpRedirect, out: out(0, 46<<2|0x01, 63), counters: hit}},
		{name: "bridged: TTL kept", pktCase: pktCase{in: in(0, 0, 64), verdict: xdpRedirect, out: out(0, 0, 64), counters: hit}},
		{name: "VLAN pushed", flow: xupfFlow{Flags: routed.Flags, VlanAction: uint8(xupfFlowVlanActionFLOW_VLAN_PUSH),
			VlanProto: be(0x8100), VlanTci: be(20)},
			pktCase: pktCase{in: in(0, 0, 64), verdict: xdpRedirect, out: out(20, 0, 63), counters: hit}},
		{name: "VLAN popped", vid: 10, flow: xupfFlow{Flags: routed.Flags, VlanAction: uint8(xupfFlowVlanActionFLOW_VLAN_POP)},
			pktCase: pktCase{in: in(10, 0, 64), verdict: xdpRedirect, out: out(0, 0, 63), counters: hit}},
		{name: "VLAN rewritten", vid: 10, flow: xupfFlow{Flags: routed.Flags, VlanAction: uint8(xupfFlowVlanActionFLOW_VLAN_REWRITE),
			VlanProto: be(0x8100), VlanTci: be(30)},
			pktCase: pktCase{in: in(10, 0, 64), verdict: xdpRedirect, out: out(30, 0, 63), counters: hit}},
		{name: "other VLAN: miss", vid: 10, flow: routed, pktCase: pktCase{in: in(11, 0, 64), verdict: xdpPass,
			counters: map[string]uint64{"pass": 1, "flow_miss": 1}}},
		{name: "TTL expiring", flow: routed, pktCase: pktCase{in: in(0, 0, 1), verdict: xdpPass, counters: toKernel}},
		{name: "over the MTU", flow: xupfFlow{Flags: routed.Flags, Mtu: 40}, pktCase: pktCase{in: in(0, 0, 64), verdict: xdpPass, counters: toKernel}},
		{name: "FIN", flow: routed, pktCase: pktCase{in: frame(macDN, macN6, 0, transitTCP(t, 0, 64, layers.TCP{ACK: true, FIN: true})),
			verdict: xdpPass, counters: ended}},
		{name: "RST", flow: routed, pktCase: pktCase{in: frame(macDN, macN6, 0, transitTCP(t, 0, 64, layers.TCP{RST: true})),
			verdict: xdpPass, counters: ended}},
		{name: "ICMP", flow: routed, pktCase: pktCase{in: frame(macDN, macN6, 0, serialize(t, ipv4(transitSrc, transitDst, layers.IPProtocolICMPv4, 64),
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 1, Seq: 1})), verdict: xdpPass, counters: toKernel}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.clearFlows(t)
			e.putFlow(t, c.vid, c.flow)
			c.pktCase.name, c.pktCase.ifindex = c.name, n6
			runCase(t, e, c.pktCase)
			flows, err := e.dp.Flows()
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case c.name == "FIN" || c.name == "RST":
				if len(flows) != 0 {
					t.Errorf("the flow outlived its %s: %+v", c.name, flows)
				}
			case len(flows) != 1:
				t.Errorf("%d flows, want 1", len(flows))
			case c.verdict == xdpRedirect && (flows[0].Packets != 1 || flows[0].Bytes != ipLen):
				t.Errorf("flow statistics %d packets %d bytes, want 1 and %d", flows[0].Packets, flows[0].Bytes, ipLen)
			case c.verdict == xdpPass && flows[0].Packets != 0:
				t.Errorf("flow counted a packet it did not forward")
			}
		})
	}
}

// skbCtx is the head of struct __sk_buff, as BPF_PROG_TEST_RUN takes it for a TC program:
// only ingress_ifindex (the arrival interface) and ifindex (the departure one) are set.
type skbCtx struct {
	Len, PktType, Mark, QueueMapping, Protocol, VlanPresent, VlanTCI, VlanProto, Priority uint32
	IngressIfindex, Ifindex                                                               uint32
}

// learn runs the learner on pkt leaving through out after arriving on in.
func (e *testEnv) learn(t testing.TB, pkt []byte, in, out int) {
	t.Helper()
	err := e.do(func() error {
		ret, err := e.dp.objs.XupfFlowLearn.Run(&ebpf.RunOptions{Data: pkt,
			Context: skbCtx{IngressIfindex: uint32(in), Ifindex: uint32(out)}})
		// TCX_NEXT: the programs and tc filters after the learner still see the packet.
		if err == nil && int32(ret) != -1 {
			t.Errorf("learner returned %d, want TCX_NEXT (-1)", int32(ret))
		}
		return err
	})
	if err != nil {
		t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
}

// TestFlowCacheLearn: the learner records what the kernel did to a packet the XDP program
// handed it, and nothing else.
func TestFlowCacheLearn(t *testing.T) {
	e := newFlowEnv(t, 2)
	ack := layers.TCP{ACK: true}
	sent := transitTCP(t, 0x01, 64, ack)
	cases := []struct {
		name    string
		inVID   uint16
		outVID  uint16
		out     []byte // the IP packet as the kernel sends it
		handed  bool   // the XDP program handed the packet to the kernel
		want    *Flow  // nil: nothing learnt
		counter string
	}{
		{name: "routed, DSCP set", out: transitTCP(t, 10<<2|0x01, 63, ack), handed: true, counter: "flow_learned",
			want: &Flow{DecTTL: true, DSCP: 10, VLAN: VLANNone}},
		{name: "VLAN pushed", outVID: 20, out: transitTCP(t, 0x01, 63, ack), handed: true, counter: "flow_learned",
			want: &Flow{DecTTL: true, DSCP: -1, VLAN: VLANPush, VLANProto: 0x8100, VLANTCI: 20}},
		{name: "VLAN rewritten", inVID: 10, outVID: 30, out: transitTCP(t, 0x01, 63, ack), handed: true, counter: "flow_learned",
			want: &Flow{DecTTL: true, DSCP: -1, VLAN: VLANRewrite, VLANProto: 0x8100, VLANTCI: 30}},
		{name: "VLAN popped", inVID: 10, out: transitTCP(t, 0x01, 63, ack), handed: true, counter: "flow_learned",
			want: &Flow{DecTTL: true, DSCP: -1, VLAN: VLANPop}},
		{name: "not handed over by XDP", out: transitTCP(t, 0x01, 63, ack)},
		{name: "TTL set, not decremented", out: transitTCP(t, 0x01, 20, ack), handed: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.clearFlows(t)
			if c.handed {
				if ret, _ := e.run(t, frame(macDN, macN6, c.inVID, sent), e.n6); ret != xdpPass {
					t.Fatalf("first packet: %s, want XDP_PASS", verdictNames[ret])
				}
			}
			before, _ := e.dp.Stats()
			e.learn(t, frame(macN3, macGNB, c.outVID, c.out), e.n6, e.n3)
			after, _ := e.dp.Stats()
			want := map[string]uint64{}
			if c.counter != "" {
				want[c.counter] = 1
			}
			checkDeltas(t, "counter", before.Counters, after.Counters, want)
			flows, err := e.dp.Flows()
			if err != nil {
				t.Fatal(err)
			}
			if c.want == nil {
				if len(flows) != 0 {
					t.Fatalf("learnt %+v", flows)
				}
				return
			}
			if len(flows) != 1 {
				t.Fatalf("%d flows, want 1", len(flows))
			}
			f, w := flows[0], *c.want
			wantKey := transitKey
			wantKey.VLAN, wantKey.Ifindex = c.inVID, e.n6
			if f.Key != wantKey || f.OutIfindex != e.n3 || f.MTU != 1500 || f.DstMAC.String() != macGNB.String() ||
				f.SrcMAC.String() != macN3.String() || f.DecTTL != w.DecTTL || f.DSCP != w.DSCP || f.VLAN != w.VLAN ||
				f.VLANProto != w.VLANProto || f.VLANTCI != w.VLANTCI || f.Packets != 1 || f.Bytes != uint64(len(c.out)) {
				t.Errorf("learnt %+v", f)
			}
			if age := time.Since(f.FirstSeen); age < -time.Second || age > time.Second || f.LastSeen != f.FirstSeen {
				t.Errorf("first seen %v ago, last seen %v", age, f.LastSeen)
			}
		})
	}
}

// TestFlowCacheFull: a table holding max_flows flows refuses the next flow, which stays with
// the kernel, counted flow_full; so does a table with room whose two buckets for the flow are
// full.
func TestFlowCacheFull(t *testing.T) {
	ack := layers.TCP{ACK: true}
	t.Run("max_flows", func(t *testing.T) {
		e := newFlowEnv(t, 1)
		e.putFlow(t, 99, xupfFlow{})
		e.handOverAndLearn(t, "flow_full")
		if ret, _ := e.run(t, frame(macDN, macN6, 0, transitTCP(t, 0, 64, ack)), e.n6); ret != xdpPass {
			t.Errorf("next packet: %s, want XDP_PASS (the kernel keeps the flow)", verdictNames[ret])
		}
	})
	t.Run("buckets", func(t *testing.T) {
		e := newFlowEnv(t, 64)
		k := transitKey
		k.Ifindex = e.n6
		b1, b2 := e.dp.flows.Buckets(k.raw())
		in := func(b uint32) bool { return b == b1 || b == b2 }
		room := 2 * flowtable.BucketSlots
		if b1 == b2 {
			room = flowtable.BucketSlots
		}
		// Flows whose buckets are among the two, until both are full; one whose buckets
		// are the full one alone is refused on the way.
		for port, cached := 2000, 0; cached < room; port++ {
			other := k
			other.SrcPort = uint16(port)
			if o1, o2 := e.dp.flows.Buckets(other.raw()); !in(o1) || !in(o2) {
				continue
			}
			if err := e.putRaw(other.raw(), xupfFlow{Mtu: 1500}); err == nil {
				cached++
			} else if !errors.Is(err, flowtable.ErrFull) {
				t.Fatal(err)
			}
		}
		e.handOverAndLearn(t, "flow_full")
		if ret, _ := e.run(t, frame(macDN, macN6, 0, transitTCP(t, 0, 64, ack)), e.n6); ret != xdpPass {
			t.Errorf("next packet: %s, want XDP_PASS (the kernel keeps the flow)", verdictNames[ret])
		}
	})
}

// slotState returns the state word of the slot holding k, in any state.
func (e *testEnv) slotState(t *testing.T, k xupfFlowKey) *uint32 {
	t.Helper()
	mem := e.dp.flowMem.mem
	for off := 0; off+flowtable.SlotSize <= len(mem); off += flowtable.SlotSize {
		slot := (*xupfFlowSlot)(unsafe.Pointer(&mem[off]))
		if slot.Key == k {
			return &slot.State
		}
	}
	t.Fatalf("no slot holds %+v", k)
	return nil
}

// TestFlowCacheSlotStates: the XDP program uses a slot only while it is live: one being
// written (by a learner on another CPU) or freed is a miss, its packet handed to the kernel
// as it came and noted. A learner that finds its flow in a slot being written yields, so the
// flow is not cached twice, without counting the table full; once that slot is free, the flow
// is learnt.
func TestFlowCacheSlotStates(t *testing.T) {
	e := newFlowEnv(t, 16)
	ack := layers.TCP{ACK: true}
	in := frame(macDN, macN6, 0, transitTCP(t, 0, 64, ack))
	e.putFlow(t, 0, xupfFlow{Flags: uint8(xupfFlowFlagFLOW_F_TTL)})
	k := transitKey
	k.Ifindex = e.n6
	state := e.slotState(t, k.raw())
	live := atomic.LoadUint32(state)
	const writing, free = 1, 0 // enum flow_slot_state
	miss := map[string]uint64{"pass": 1, "flow_miss": 1}
	for _, c := range []struct {
		state uint32
		pktCase
	}{
		{live&^3 | writing, pktCase{name: "being written", in: in, verdict: xdpPass, counters: miss}},
		{live, pktCase{name: "live", in: in, verdict: xdpRedirect, out: frame(macN3, macGNB, 0, transitTCP(t, 0, 63, ack)),
			counters: map[string]uint64{"flow_hit": 1}}},
		{live&^3 | free, pktCase{name: "freed", in: in, verdict: xdpPass, counters: miss}},
	} {
		atomic.StoreUint32(state, c.state)
		c.pktCase.ifindex = n6
		runCase(t, e, c.pktCase)
	}

	atomic.StoreUint32(state, live&^3|writing)
	before, _ := e.dp.Stats()
	e.learn(t, frame(macN3, macGNB, 0, transitTCP(t, 0, 63, ack)), e.n6, e.n3)
	after, _ := e.dp.Stats()
	checkDeltas(t, "counter", before.Counters, after.Counters, map[string]uint64{})
	holders := 0
	for off := 0; off < len(e.dp.flowMem.mem); off += flowtable.SlotSize {
		slot := (*xupfFlowSlot)(unsafe.Pointer(&e.dp.flowMem.mem[off]))
		if slot.Key == k.raw() && slot.State&3 != free {
			holders++
		}
	}
	if holders != 1 {
		t.Errorf("%d slots hold the flow after a learner met it being written, want 1", holders)
	}
	atomic.StoreUint32(state, live&^3|free)
	e.handOverAndLearn(t, "flow_learned")
	if flows, err := e.dp.Flows(); err != nil || len(flows) != 1 {
		t.Errorf("flows %+v (err %v), want the one learnt", flows, err)
	}
}

// TestFlowCacheAging: idle flows go, busy ones stay, and one pass looks at ScanBatch entries
// at most.
func TestFlowCacheAging(t *testing.T) {
	e := newTestEnvOpts(t, Options{MaxSessions: 4, FlowCache: FlowCacheOptions{MaxFlows: 64, IdleTimeout: 10 * time.Second,
		ScanBatch: 8, ScanInterval: time.Hour}})
	now := monoNow()
	for i := range 40 {
		k := transitKey
		k.SrcPort = uint16(1000 + i)
		last := now // busy
		if i%2 == 0 {
			last = now - uint64(11*time.Second) // idle
		}
		if err := e.putRaw(k.raw(), xupfFlow{LastSeen: last}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.dp.countFlows(); err != nil { // put here, not learnt
		t.Fatal(err)
	}
	total := 0
	for range 40 {
		scanned, aged, err := e.dp.ageFlows(now)
		if err != nil {
			t.Fatal(err)
		}
		if scanned > 8 {
			t.Fatalf("one pass looked at %d entries, want at most 8", scanned)
		}
		total += aged
	}
	flows, _ := e.dp.Flows()
	if total != 20 || len(flows) != 20 {
		t.Fatalf("aged %d, %d left; want 20 and 20", total, len(flows))
	}
	for _, f := range flows {
		if f.Key.SrcPort%2 != 1 {
			t.Errorf("idle flow %d survived", f.Key.SrcPort)
		}
	}
	if st, _ := e.dp.FlowCacheStats(); st.Aged != 20 || st.Entries != 20 {
		t.Errorf("stats %+v", st)
	}
}

// BenchmarkFlowCache: ns/packet of a transit packet forwarded by the flow cache (a hit, with
// 100,000 other flows cached), of one it misses, and of the same packet with the cache off,
// beside the ARP baseline. The packet arrives on lo (benchPacket), so the flow is keyed there.
func BenchmarkFlowCache(b *testing.B) {
	const others = 100000
	for _, maxFlows := range []int{0, others + 1} {
		e := newTestEnvOpts(b, Options{MaxSessions: 2, FlowCache: FlowCacheOptions{MaxFlows: maxFlows, ScanInterval: time.Hour}})
		pkt := frame(macDN, macN6, 0, transitTCP(b, 0, 64, layers.TCP{ACK: true}))
		miss := frame(macDN, macN6, 0, serialize(b, ipv4(transitSrc, transitDst, layers.IPProtocolUDP, 64),
			&layers.UDP{SrcPort: 1, DstPort: 2}, gopacket.Payload(payload)))
		type benchCase struct {
			name    string
			pkt     []byte
			verdict uint32
		}
		cases := []benchCase{{"not-ours-baseline", notOursCases(b)[0].in, xdpPass}}
		if maxFlows == 0 {
			cases = append(cases, benchCase{"transit/cache-off", pkt, xdpPass})
		} else {
			for i := range others {
				k := transitKey
				k.Dst, k.Ifindex = netip.AddrFrom4([4]byte{10, 70, byte(i >> 8), byte(i)}), 1
				if err := e.putRaw(k.raw(), xupfFlow{Mtu: 1500}); err != nil {
					b.Fatal(err)
				}
			}
			k := transitKey
			k.Ifindex = 1
			v := xupfFlow{Ifindex: uint32(e.n3), Mtu: 1500, Dmac: [6]byte(macGNB), Smac: [6]byte(macN3), Flags: uint8(xupfFlowFlagFLOW_F_TTL)}
			if err := e.putRaw(k.raw(), v); err != nil {
				b.Fatal(err)
			}
			cases = append(cases, benchCase{"transit/hit", pkt, xdpRedirect}, benchCase{"transit/miss", miss, xdpPass})
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("%s/max_flows=%d", c.name, maxFlows), func(b *testing.B) { benchPacket(b, e, c.pkt, c.verdict) })
		}
	}
}

// waitFlows waits until the cached flows' destination ports are want, in any order.
func (e *testEnv) waitFlows(t *testing.T, what string, want ...uint16) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		flows, err := e.dp.Flows()
		if err != nil {
			t.Fatal(err)
		}
		got := make([]uint16, 0, len(flows))
		for _, f := range flows {
			got = append(got, f.Key.DstPort)
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: flows to ports %v after 3s, want %v", what, got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFlowCacheInvalidation: a neighbour's entry garbage-collected removes the flows sent to
// its MAC and only those, by a scan; a neighbour's MAC changing voids every flow at once, and
// so does a route change: the next packet of a void flow goes to the kernel as it came and
// removes it (flow_voided), and aging removes the void flows no packet came for. So does a
// policy routing rule added.
func TestFlowCacheInvalidation(t *testing.T) {
	e := newFlowEnv(t, 16)
	// Port 443 leaves through n3 to the gNB's MAC, port 444 through n6 to the DN router's.
	e.putFlow(t, 0, xupfFlow{})
	k := transitKey
	k.DstPort, k.Ifindex = 444, e.n3
	if err := e.putRaw(k.raw(), xupfFlow{Ifindex: uint32(e.n6), Mtu: 1500, Dmac: [6]byte(macDN), Smac: [6]byte(macN6)}); err != nil {
		t.Fatal(err)
	}
	e.waitFlows(t, "before the changes", 443, 444)

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Garbage collection cannot be had on demand: its report, as the router makes it.
	e.dp.invalidateFlows(router.Change{Gone: []router.GoneNeighbour{{Ifindex: e.n3, MAC: macGNB, Collected: true}}})
	e.waitFlows(t, "the gNB's entry collected", 444)

	must(e.do(func() error {
		return netlink.NeighSet(&netlink.Neigh{LinkIndex: e.n6, State: netlink.NUD_PERMANENT, IP: net.IP{10, 0, 2, 2},
			HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 2, 9}, Family: netlink.FAMILY_V4})
	}))
	e.waitFlows(t, "the DN router's MAC changed")
	in := frame(macGNB, macN3, 0, serialize(t, ipv4(transitSrc, transitDst, layers.IPProtocolTCP, 64),
		&layers.TCP{SrcPort: 40000, DstPort: 444, Window: 1000, ACK: true}, gopacket.Payload("transit payload")))
	runCase(t, e, pktCase{name: "void flow", in: in, ifindex: n3, verdict: xdpPass,
		counters: map[string]uint64{"pass": 1, "flow_miss": 1, "flow_voided": 1}})
	if st, err := e.dp.FlowCacheStats(); err != nil || st.Invalidated != 2 || st.Flushed != 0 {
		t.Errorf("flow cache stats %+v (err %v), want 2 invalidated, none flushed", st, err)
	}

	e.putFlow(t, 0, xupfFlow{})
	e.waitFlows(t, "a flow learnt again", 443)
	_, dst, _ := net.ParseCIDR("192.0.2.0/24")
	must(e.do(func() error {
		return netlink.RouteAdd(&netlink.Route{LinkIndex: e.n6, Dst: dst, Gw: net.ParseIP("10.0.2.2")})
	}))
	e.waitFlows(t, "a route added")
	if _, _, err := e.dp.ageFlows(monoNow()); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := e.dp.scanFlows(func(*xupfFlowKey, *xupfFlow) { n++ }); err != nil || n > 0 {
		t.Errorf("%d void flows left after aging (err %v), want none", n, err)
	}
	if st, err := e.dp.FlowCacheStats(); err != nil || st.Invalidated != 3 {
		t.Errorf("flow cache stats %+v (err %v), want 3 invalidated", st, err)
	}

	// Policy routing: the kernel may now route the flow by another table.
	e.putFlow(t, 0, xupfFlow{})
	e.waitFlows(t, "a flow learnt once more", 443)
	rule := netlink.NewRule()
	rule.Table, rule.Priority = 100, 100
	rule.Src = &net.IPNet{IP: transitSrc.AsSlice(), Mask: net.CIDRMask(32, 32)}
	must(e.do(func() error { return netlink.RuleAdd(rule) }))
	e.waitFlows(t, "a rule added")
}

// TestFlowCacheNetfilterInvalidation: conntrack removing a connection removes its UE flow
// and the replies' entry of its pair, and no other; a change of the nftables ruleset voids
// every flow.
func TestFlowCacheNetfilterInvalidation(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft (Debian package nftables; make deps installs it)")
	}
	e := newFlowEnv(t, 16)
	udp := func(src, dst netip.Addr, sport, dport uint16, ifindex int) FlowKey {
		return FlowKey{Src: src, Dst: dst, SrcPort: sport, DstPort: dport, Proto: 17, Ifindex: ifindex}
	}
	// A UE's flow translated to the n6 address and natPort, the replies' entry of its pair,
	// and another UE flow.
	orig, reply := udp(ueAddr, addrDN, 40000, 53, flowFromUE), udp(addrDN, addrN6, 53, natPort, e.n6)
	other := udp(ueAddr, addrDN, 40001, 54, flowFromUE)
	for _, f := range []struct {
		k FlowKey
		v xupfFlow
	}{
		{orig, xupfFlow{Ifindex: uint32(e.n6), Mtu: 1500, Flags: uint8(xupfFlowFlagFLOW_F_SNAT), NatAddr: addrBE(addrN6), NatPort: be16(natPort)}},
		{reply, xupfFlow{Flags: uint8(xupfFlowFlagFLOW_F_TO_UE), NatAddr: addrBE(ueAddr), NatPort: be16(40000)}},
		{other, xupfFlow{Ifindex: uint32(e.n6), Mtu: 1500}},
	} {
		if err := e.putRaw(f.k.raw(), f.v); err != nil {
			t.Fatal(err)
		}
	}
	e.waitFlows(t, "before the changes", 53, 54, natPort)

	tuple := func(k FlowKey) netlink.IPTuple {
		return netlink.IPTuple{SrcIP: k.Src.AsSlice(), DstIP: k.Dst.AsSlice(), SrcPort: k.SrcPort, DstPort: k.DstPort, Protocol: k.Proto}
	}
	err := e.do(func() error {
		ct := &netlink.ConntrackFlow{FamilyType: unix.AF_INET, Forward: tuple(orig), Reverse: tuple(reply), TimeOut: 60}
		if err := netlink.ConntrackCreate(netlink.ConntrackTable, netlink.FAMILY_V4, ct); err != nil {
			return fmt.Errorf("create a conntrack entry: %w", err)
		}
		return netlink.ConntrackTableFlush(netlink.ConntrackTable)
	})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFlows(t, "the connection gone", 54)

	// nft inherits the namespace of the locked thread that starts it.
	if err := e.do(func() error {
		out, err := exec.Command("nft", "add", "table", "ip", "xupf_test").CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft add table: %w: %s", err, out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.waitFlows(t, "the ruleset changed")
}

// handOverAndLearn has a transit TCP packet arrive on n6, checks that XDP hands it to the
// kernel, runs the learner on it leaving through n3 routed, and checks that of the counters
// only counter grew, by one.
func (e *testEnv) handOverAndLearn(t *testing.T, counter string) {
	t.Helper()
	ack := layers.TCP{ACK: true}
	if ret, _ := e.run(t, frame(macDN, macN6, 0, transitTCP(t, 0, 64, ack)), e.n6); ret != xdpPass {
		t.Fatalf("first packet: %s, want XDP_PASS", verdictNames[ret])
	}
	before, _ := e.dp.Stats()
	e.learn(t, frame(macN3, macGNB, 0, transitTCP(t, 0, 63, ack)), e.n6, e.n3)
	after, _ := e.dp.Stats()
	checkDeltas(t, "counter", before.Counters, after.Counters, map[string]uint64{counter: 1})
}

// TestFlowCacheLearnSkipsTracked: a flow conntrack tracks is not learnt (flow_tracked), in
// either direction: conntrack must go on seeing its packets.
func TestFlowCacheLearnSkipsTracked(t *testing.T) {
	tuple := func(src, dst netip.Addr, sport, dport uint16) netlink.IPTuple {
		return netlink.IPTuple{SrcIP: src.AsSlice(), DstIP: dst.AsSlice(), SrcPort: sport, DstPort: dport, Protocol: 6}
	}
	for _, c := range []struct {
		name       string
		orig, repl netlink.IPTuple
	}{
		{"original direction", tuple(transitSrc, transitDst, 40000, 443), tuple(transitDst, transitSrc, 443, 40000)},
		{"reply direction", tuple(transitDst, transitSrc, 443, 40000), tuple(transitSrc, transitDst, 40000, 443)},
	} {
		t.Run(c.name, func(t *testing.T) {
			// An environment of its own: a conntrack entry an earlier case left, flushed
			// here, would be a destroy event the datapath answers by moving the flow
			// generation on, at a time of its own, and the learner would then find this
			// case's note stale (flow_stale) rather than its flow tracked.
			e := newFlowEnv(t, 4)
			err := e.do(func() error {
				ct := &netlink.ConntrackFlow{FamilyType: unix.AF_INET, Forward: c.orig, Reverse: c.repl, TimeOut: 60,
					ProtoInfo: &netlink.ProtoInfoTCP{State: 3 /* TCP_CONNTRACK_ESTABLISHED */}}
				return netlink.ConntrackCreate(netlink.ConntrackTable, netlink.FAMILY_V4, ct)
			})
			if err != nil {
				t.Fatalf("conntrack entry: %v", err)
			}
			e.handOverAndLearn(t, "flow_tracked")
			if flows, err := e.dp.Flows(); err != nil || len(flows) != 0 {
				t.Errorf("flows %+v (err %v), want none", flows, err)
			}
		})
	}
}

// BenchmarkFlowTable: the daemon's work on a flow table of a million entries, per operation:
// counting it once (at start), listing it whole (the API), the stats (from counters), the scan of an invalidation that
// removes nothing (a neighbour collected), a connection's removal (by key), and one aging pass over ScanBatch entries (what each ScanInterval costs).
func BenchmarkFlowTable(b *testing.B) {
	const n = 1 << 20
	e := newTestEnvOpts(b, Options{MaxSessions: 4, FlowCache: FlowCacheOptions{MaxFlows: n, ScanInterval: time.Hour}})
	keys, vals := make([]xupfFlowKey, n), make([]xupfFlow, n)
	now := monoNow()
	for i := range keys {
		k := transitKey
		k.SrcPort, k.DstPort, k.Ifindex = uint16(i), uint16(i>>16), e.n6
		keys[i] = k.raw()
		vals[i] = xupfFlow{Ifindex: uint32(e.n3), Mtu: 1500, FirstSeen: now, LastSeen: now, Epoch: e.dp.flowEpoch()}
	}
	e.putAll(b, keys, vals)
	b.Run("recount", func(b *testing.B) { // at start; countFlows sets the base the stats count from
		for b.Loop() {
			if err := e.dp.countFlows(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("list", func(b *testing.B) {
		for b.Loop() {
			if flows, err := e.dp.Flows(); err != nil || len(flows) != n {
				b.Fatalf("%d flows (err %v), want %d", len(flows), err, n)
			}
		}
	})
	b.Run("count", func(b *testing.B) {
		for b.Loop() {
			if st, err := e.dp.FlowCacheStats(); err != nil || st.Entries != n {
				b.Fatalf("%d entries (err %v), want %d", st.Entries, err, n)
			}
		}
	})
	b.Run("invalidate-none", func(b *testing.B) {
		for b.Loop() {
			// A neighbour no flow is sent to: the scan and the comparisons, nothing removed.
			e.dp.invalidate(voided{macs: []router.GoneNeighbour{{Ifindex: e.n3, MAC: macUPF}}})
		}
	})
	b.Run("connection-gone", func(b *testing.B) {
		for b.Loop() {
			// conntrack's destroy event for a connection of no cached flow: its keys looked up.
			e.dp.invalidate(voided{gone: map[nfwatch.Tuple]bool{{Src: ueAddr, Dst: addrDN, SrcPort: 1, DstPort: 2, Proto: 17}: true}})
		}
	})
	b.Run("age-scan", func(b *testing.B) {
		for b.Loop() {
			// Nothing is idle: the pass reads and compares, as it does on a busy table.
			if _, aged, err := e.dp.ageFlows(now); err != nil || aged != 0 {
				b.Fatalf("aged %d (err %v), want none", aged, err)
			}
		}
	})
}

// TestFlowCacheLearnAfterChange: a packet the kernel decided on before a change's invalidation
// scan (handed over before it) is not learnt after the scan, whether the change voided its
// flow or not, nor when a later packet of the flow was handed over meanwhile (flow_stale);
// the flow's next packet, decided on after, is learnt.
func TestFlowCacheLearnAfterChange(t *testing.T) {
	e := newFlowEnv(t, 4)
	ack := layers.TCP{ACK: true}
	again := func() {
		if ret, _ := e.run(t, frame(macDN, macN6, 0, transitTCP(t, 0, 64, ack)), e.n6); ret != xdpPass {
			t.Fatalf("packet after the change: %s, want XDP_PASS", verdictNames[ret])
		}
	}
	for _, c := range []struct {
		name   string
		change func()
	}{
		{"routes changed", func() { e.dp.invalidate(voided{all: true}) }},
		// The flow's next packet, handed over after the change, does not renew the note of
		// the one still in the kernel.
		{"routes changed, the next packet handed over", func() { e.dp.invalidate(voided{all: true}); again() }},
		{"a neighbour no flow uses gone", func() {
			e.dp.invalidate(voided{macs: []router.GoneNeighbour{{Ifindex: e.n3, MAC: macUPF}}})
		}},
		{"flushed", func() {
			if _, err := e.dp.FlushFlows(nil); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.clearFlows(t)
			if ret, _ := e.run(t, frame(macDN, macN6, 0, transitTCP(t, 0, 64, ack)), e.n6); ret != xdpPass {
				t.Fatalf("first packet: %s, want XDP_PASS", verdictNames[ret])
			}
			c.change()
			before, _ := e.dp.Stats()
			e.learn(t, frame(macN3, macGNB, 0, transitTCP(t, 0, 63, ack)), e.n6, e.n3)
			after, _ := e.dp.Stats()
			checkDeltas(t, "counter", before.Counters, after.Counters, map[string]uint64{"flow_stale": 1})
			if flows, err := e.dp.Flows(); err != nil || len(flows) != 0 {
				t.Fatalf("flows %+v (err %v), want none", flows, err)
			}
			e.handOverAndLearn(t, "flow_learned")
			if flows, err := e.dp.Flows(); err != nil || len(flows) != 1 {
				t.Fatalf("flows %+v (err %v), want the one learnt after the change", flows, err)
			}
		})
	}
}

// UE traffic the kernel treats on N6 (FlowCacheOptions.KernelN6): a UE's flow masqueraded to
// the n6 address and port natPort, as nftables masquerade would.
const natPort = 61000

var addrN6 = netip.MustParseAddr("10.0.2.1")

func newNATEnv(t *testing.T) *testEnv {
	t.Helper()
	return newSessionsEnvOpts(t, Options{MaxSessions: 1024,
		FlowCache: FlowCacheOptions{MaxFlows: 16, ScanInterval: time.Hour, KernelN6: kerneln6.Choice{Default: true}}})
}

// newNATUDPEnv is newNATEnv with conntrack's entry for the UDP flow from the UE's ue to the DN
// host's dn, translated to nat (the n6 address and natPort).
func newNATUDPEnv(t *testing.T) (e *testEnv, ue, dn, nat netip.AddrPort) {
	t.Helper()
	e = newNATEnv(t)
	ue, dn = netip.AddrPortFrom(ueAddr, 1000), netip.AddrPortFrom(addrDN, 2000)
	e.natCT(t, unix.IPPROTO_UDP, ue, dn)
	return e, ue, dn, netip.AddrPortFrom(addrN6, natPort)
}

// natCT replaces the namespace's conntrack table with one entry: proto from the UE's address
// and port ue to dst, translated to natAddr:natPort.
func (e *testEnv) natCT(t testing.TB, proto uint8, ue, dst netip.AddrPort) {
	t.Helper()
	tuple := func(src, dst netip.AddrPort) netlink.IPTuple {
		return netlink.IPTuple{SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice(),
			SrcPort: src.Port(), DstPort: dst.Port(), Protocol: proto}
	}
	err := e.do(func() error {
		if err := netlink.ConntrackTableFlush(netlink.ConntrackTable); err != nil {
			return err
		}
		ct := &netlink.ConntrackFlow{FamilyType: unix.AF_INET, Forward: tuple(ue, dst),
			Reverse: tuple(dst, netip.AddrPortFrom(addrN6, natPort)), TimeOut: 60}
		if proto == unix.IPPROTO_TCP {
			ct.ProtoInfo = &netlink.ProtoInfoTCP{State: 3 /* TCP_CONNTRACK_ESTABLISHED */}
		}
		return netlink.ConntrackCreate(netlink.ConntrackTable, netlink.FAMILY_V4, ct)
	})
	if err != nil {
		t.Fatalf("conntrack entry: %v", err)
	}
}

// natUDP is an IPv4/UDP packet with valid checksums (the UDP one 0 when zeroCsum).
func natUDP(t testing.TB, src, dst netip.AddrPort, ttl uint8, zeroCsum bool) []byte {
	ip := ipv4(src.Addr(), dst.Addr(), layers.IPProtocolUDP, ttl)
	ip.TOS = 0x28
	b := serialize(t, ip, &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())},
		gopacket.Payload(payload))
	if zeroCsum {
		b[26], b[27] = 0, 0
	}
	return b
}

// natFirst has a UE's first packet of a flow, the G-PDU gpdu carrying inner, go to the kernel
// out of its tunnel (and charged); the kernel sends it translated as out, and the learner
// must learn learnt flows from it.
func (e *testEnv) natFirst(t *testing.T, gpdu, inner, out []byte, learnt uint64) {
	t.Helper()
	e.natHandOver(t, gpdu, inner)
	e.natLearn(t, out, map[string]uint64{"flow_learned": learnt})
}

// natHandOver has a UE's packet of no cached flow, the G-PDU gpdu carrying inner, go to the
// kernel out of its tunnel (and charged).
func (e *testEnv) natHandOver(t *testing.T, gpdu, inner []byte) {
	t.Helper()
	runCase(t, e, pktCase{name: "to the kernel", in: gpdu, ifindex: n3, verdict: xdpPass,
		out:      concat(ethBytes(macGNB, macN3), inner),
		counters: map[string]uint64{"ul_rx": 1, "ul_kernel": 1, "flow_miss": 1}})
}

// natLearn has the learner see out, a UE's packet as the kernel sends it translated, and
// checks the counters it moves.
func (e *testEnv) natLearn(t *testing.T, out []byte, counters map[string]uint64) {
	t.Helper()
	before, _ := e.dp.Stats()
	e.learn(t, concat(ethBytes(macN6, macDN), out), e.n3, e.n6)
	after, _ := e.dp.Stats()
	checkDeltas(t, "counter", before.Counters, after.Counters, counters)
}

// checkNATFlows checks that the flow cache holds the UE's flow from ue to dn, translated to
// the n6 address and natPort, and the replies' flow.
func (e *testEnv) checkNATFlows(t *testing.T, ue, dn netip.AddrPort) {
	t.Helper()
	nat := netip.AddrPortFrom(addrN6, natPort)
	flows, err := e.dp.Flows()
	if err != nil || len(flows) != 2 {
		t.Fatalf("flows %+v (err %v), want 2", flows, err)
	}
	for _, f := range flows {
		switch f.Key.Ifindex {
		case 0:
			if f.Key.Src != ue.Addr() || f.SNAT != nat || f.OutIfindex != e.n6 || !f.DecTTL {
				t.Errorf("the UE's flow: %+v", f)
			}
		case e.n6:
			if f.Key.Src != dn.Addr() || f.Key.DstPort != natPort || f.ToUE != ue {
				t.Errorf("the replies' flow: %+v", f)
			}
		default:
			t.Errorf("a flow arriving on %d: %+v", f.Key.Ifindex, f)
		}
	}
}

// natHits checks a cached UE flow's hits: the G-PDU gpdu leaves N6 as the IP packet up, and
// the reply down arriving on N6 reaches the gNB as downUE (outer ToS tos) in sessPlain's tunnel.
func (e *testEnv) natHits(t *testing.T, gpdu, up, down, downUE []byte, tos uint8) {
	t.Helper()
	runCase(t, e, pktCase{name: "uplink hit", in: gpdu, ifindex: n3, verdict: xdpRedirect,
		out:      concat(ethBytes(macN6, macDN), up),
		counters: map[string]uint64{"ul_rx": 1, "ul_tx": 1, "flow_hit": 1}})
	runCase(t, e, pktCase{name: "downlink hit", in: concat(ethBytes(macDN, macN6), down),
		ifindex: n6, verdict: xdpRedirect, fixSport: true, out: dlOuter(t, sessPlain, downUE, tos),
		counters: map[string]uint64{"dl_rx": 1, "dl_tx": 1, "flow_hit": 1}})
}

// TestFlowCacheNATUDP: a UE's UDP flow the kernel masquerades. The first packet goes to the
// kernel decapsulated and charged; the learner reads the translation from conntrack and caches
// both directions; later uplink packets leave translated from XDP and replies to the
// translated address reach the UE through its session's downlink rules. Whole packets are
// compared with ones serialised afresh, so the checksums patched by differences are checked
// against checksums summed from scratch.
func TestFlowCacheNATUDP(t *testing.T) {
	// One conntrack entry for both cases: replacing it would remove the flows it keys in a
	// scan (its destroy event), which also voids a note taken meanwhile (flow_stale).
	e, ue, dn, nat := newNATUDPEnv(t)
	for _, zero := range []bool{false, true} {
		name := "checksum"
		if zero {
			name = "zero checksum"
		}
		t.Run(name, func(t *testing.T) {
			e.clearFlows(t)
			gpdu := outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, natUDP(t, ue, dn, 64, zero)), nil)
			before, _ := e.usage(sessPlain.ID)
			e.natFirst(t, gpdu, natUDP(t, ue, dn, 64, zero), natUDP(t, nat, dn, 63, zero), 2)
			e.checkNATFlows(t, ue, dn)

			e.natHits(t, gpdu, natUDP(t, nat, dn, 63, zero), natUDP(t, dn, nat, 64, zero), natUDP(t, dn, ue, 63, zero), 0x28)

			// Each packet charged once, whichever way it went.
			now, err := e.usage(sessPlain.ID)
			if err != nil {
				t.Fatal(err)
			}
			ipLen := uint64(len(natUDP(t, ue, dn, 64, zero)))
			if got := now.Uplink.Packets - before.Uplink.Packets; got != 2 {
				t.Errorf("uplink usage rose by %d packets, want 2", got)
			}
			if got := now.Downlink.Bytes - before.Downlink.Bytes; got != ipLen {
				t.Errorf("downlink usage rose by %d bytes, want %d", got, ipLen)
			}
		})
	}
}

// TestFlowCacheNATVoid: a change that voids every flow voids a translated UE flow's pair as
// one: the first packet of either direction after it goes the way of a miss (the UE's to the
// kernel decapsulated and charged, the reply's to the kernel as it came) and removes both
// entries, and the UE's next packet is learnt again both ways.
func TestFlowCacheNATVoid(t *testing.T) {
	e, ue, dn, nat := newNATUDPEnv(t)
	inner, out := natUDP(t, ue, dn, 64, false), natUDP(t, nat, dn, 63, false)
	gpdu := outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, inner), nil)
	left := func(t *testing.T, want int) {
		t.Helper()
		n := 0
		if err := e.dp.scanFlows(func(*xupfFlowKey, *xupfFlow) { n++ }); err != nil || n != want {
			t.Fatalf("%d entries in the table (err %v), want %d", n, err, want)
		}
	}
	for _, c := range []struct {
		name  string
		first pktCase
	}{
		{"uplink first", pktCase{in: gpdu, ifindex: n3, verdict: xdpPass, out: concat(ethBytes(macGNB, macN3), inner),
			counters: map[string]uint64{"ul_rx": 1, "ul_kernel": 1, "flow_miss": 1, "flow_voided": 2}}},
		{"downlink first", pktCase{in: concat(ethBytes(macDN, macN6), natUDP(t, dn, nat, 64, false)), ifindex: n6,
			verdict: xdpPass, counters: map[string]uint64{"pass": 1, "flow_miss": 1, "flow_voided": 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.clearFlows(t)
			e.natFirst(t, gpdu, inner, out, 2)
			e.dp.invalidate(voided{all: true})
			if flows, err := e.dp.Flows(); err != nil || len(flows) != 0 {
				t.Fatalf("flows %+v (err %v) after the change, want none listed", flows, err)
			}
			left(t, 2)
			c.first.name = c.name
			runCase(t, e, c.first)
			left(t, 0)
			if c.first.ifindex(e) == e.n6 {
				e.natHandOver(t, gpdu, inner)
			}
			e.natLearn(t, out, map[string]uint64{"flow_learned": 2})
			e.checkNATFlows(t, ue, dn)
		})
	}
}

// TestFlowCacheNATLearnAfterChange: a UE's packet the kernel translated before a change's
// invalidation scan is not learnt after the scan, in either direction (flow_stale), nor when
// the flow's next packet left its tunnel meanwhile; the flow's next packet, decided on after,
// is learnt both ways, and the entry count follows.
func TestFlowCacheNATLearnAfterChange(t *testing.T) {
	e, ue, dn, nat := newNATUDPEnv(t)
	inner, out := natUDP(t, ue, dn, 64, false), natUDP(t, nat, dn, 63, false)
	gpdu := outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, inner), nil)
	learn := func(t *testing.T, counters map[string]uint64, entries int) {
		t.Helper()
		e.natLearn(t, out, counters)
		if flows, err := e.dp.Flows(); err != nil || len(flows) != entries {
			t.Fatalf("flows %+v (err %v), want %d", flows, err, entries)
		}
		if st, err := e.dp.FlowCacheStats(); err != nil || st.Entries != entries {
			t.Fatalf("stats %+v (err %v), want %d entries", st, err, entries)
		}
	}
	flush := func() {
		if _, err := e.dp.FlushFlows(nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		change func(t *testing.T)
	}{
		{"routes changed", func(*testing.T) { e.dp.invalidate(voided{all: true}) }},
		// The flow's next packet, out of its tunnel after the change, does not renew the
		// note of the one still in the kernel.
		{"routes changed, the next packet handed over", func(t *testing.T) {
			e.dp.invalidate(voided{all: true})
			e.natHandOver(t, gpdu, inner)
		}},
		{"flushed", func(*testing.T) { flush() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			flush()
			if err := clearMap(e.dp.objs.XupfFlowSeen); err != nil {
				t.Fatal(err)
			}
			e.natHandOver(t, gpdu, inner)
			c.change(t)
			learn(t, map[string]uint64{"flow_stale": 1}, 0)
			e.natHandOver(t, gpdu, inner)
			learn(t, map[string]uint64{"flow_learned": 2}, 2)
		})
	}
}

// TestFlowCacheEntryCount: the stats count the entries from the counters, without reading the
// table: a flow learnt adds one, a FIN, aging and a flush take one away; an entry put in the
// table behind the counters' back shows only once countFlows (at start) counted the table.
func TestFlowCacheEntryCount(t *testing.T) {
	e := newFlowEnv(t, 4)
	entries := func(what string, want int) {
		t.Helper()
		if st, err := e.dp.FlowCacheStats(); err != nil || st.Entries != want {
			t.Fatalf("%s: stats %+v (err %v), want %d entries", what, st, err, want)
		}
	}
	entries("start", 0)
	e.handOverAndLearn(t, "flow_learned")
	entries("learnt", 1)
	runCase(t, e, pktCase{name: "FIN", ifindex: n6, in: frame(macDN, macN6, 0, transitTCP(t, 0, 64, layers.TCP{ACK: true, FIN: true})),
		verdict: xdpPass, counters: map[string]uint64{"pass": 1, "flow_ended": 1}})
	entries("ended by a FIN", 0)
	e.handOverAndLearn(t, "flow_learned")
	if _, _, err := e.dp.ageFlows(monoNow() + uint64(DefaultFlowIdleTimeout)); err != nil {
		t.Fatal(err)
	}
	entries("aged", 0)
	e.handOverAndLearn(t, "flow_learned")
	if _, err := e.dp.FlushFlows(nil); err != nil {
		t.Fatal(err)
	}
	entries("flushed", 0)
	e.putFlow(t, 0, xupfFlow{})
	entries("put behind the counters' back", 0)
	if err := e.dp.countFlows(); err != nil {
		t.Fatal(err)
	}
	entries("counted", 1)
}

// TestFlowCacheCountAfterTakeOver: a flow the earlier run's programs learn between this run's
// Load and its take-over of their links, counted in counters this run does not read (as when
// an upgrade migrates xupf_stats), is in the entry count once the links are taken over.
func TestFlowCacheCountAfterTakeOver(t *testing.T) {
	e := newFlowEnv(t, 4)
	opts := e.dp.opts
	earlier := e.dp
	e.putFlow(t, 1, xupfFlow{})
	epoch := earlier.flowEpoch()
	next := e.load(t, opts)
	// The load voids every flow an earlier run cached, in the background (the take-over's
	// count removes it): this one is learnt after that.
	deadline := time.Now().Add(3 * time.Second)
	for next.flowEpoch() == epoch {
		if time.Now().After(deadline) {
			t.Fatal("the flows cached before the load are not removed 3s after it")
		}
		time.Sleep(time.Millisecond)
	}
	e.putFlow(t, 0, xupfFlow{}) // learnt by the earlier run, counted in no counter of next's
	if err := earlier.Close(false); err != nil {
		t.Fatal(err)
	}
	e.dp = next
	e.takeOver(t, next)
	if st, err := next.FlowCacheStats(); err != nil || st.Entries != 1 {
		t.Errorf("after the take-over: stats %+v (err %v), want 1 entry", st, err)
	}
}

// TestFlowsAfterClose: the API's listing and flush run without the datapath's lock (a flush
// of millions of flows takes seconds): one that comes, or goes on, after Close released the
// flow table's mapping returns an error instead of reading unmapped memory, which crashed the
// daemon when a listing outlived the API server's shutdown.
func TestFlowsAfterClose(t *testing.T) {
	e := newFlowEnv(t, 4)
	opts := e.dp.opts
	closed := e.dp
	e.putFlow(t, 0, xupfFlow{})
	var listers sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		listers.Add(1)
		go func() {
			defer listers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := closed.Flows(); err != nil && !errors.Is(err, errFlowsGone) {
					t.Errorf("Flows while the datapath closes: %v", err)
					return
				}
			}
		}()
	}
	time.Sleep(10 * time.Millisecond)
	if err := closed.Close(false); err != nil {
		t.Fatal(err)
	}
	if _, err := closed.Flows(); !errors.Is(err, errFlowsGone) {
		t.Errorf("Flows after Close: %v, want %v", err, errFlowsGone)
	}
	if _, err := closed.FlushFlows(nil); !errors.Is(err, errFlowsGone) {
		t.Errorf("FlushFlows after Close: %v, want %v", err, errFlowsGone)
	}
	close(stop)
	listers.Wait()
	e.dp = e.load(t, opts) // the environment's cleanup closes and unpins this one
	e.takeOver(t, e.dp)
}

// natTCP is an IPv4/TCP packet with valid checksums.
func natTCP(t testing.TB, src, dst netip.AddrPort, ttl uint8, tcp layers.TCP) []byte {
	ip := ipv4(src.Addr(), dst.Addr(), layers.IPProtocolTCP, ttl)
	tcp.SrcPort, tcp.DstPort, tcp.Window, tcp.Seq, tcp.Ack = layers.TCPPort(src.Port()), layers.TCPPort(dst.Port()), 1000, 0x1234, 0x5678
	return serialize(t, ip, &tcp, gopacket.Payload(payload))
}

// natTCPFlow has a UE's TCP flow to the DN host's HTTPS port learnt both ways, through
// conntrack's entry seeing the reply, and returns its ends and the G-PDU of its packets.
func (e *testEnv) natTCPFlow(t *testing.T) (ue, dn, nat netip.AddrPort, gpdu func(layers.TCP) []byte) {
	t.Helper()
	ue = netip.AddrPortFrom(ueAddr, 1000)
	dn = netip.AddrPortFrom(addrDN, 443)
	nat = netip.AddrPortFrom(addrN6, natPort)
	ack := layers.TCP{ACK: true}
	gpdu = func(tcp layers.TCP) []byte {
		return outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, natTCP(t, ue, dn, 64, tcp)), nil)
	}
	e.natCT(t, unix.IPPROTO_TCP, ue, dn)
	e.natFirst(t, gpdu(ack), natTCP(t, ue, dn, 64, ack), natTCP(t, nat, dn, 63, ack), 0)
	if flows, err := e.dp.Flows(); err != nil || len(flows) != 0 {
		t.Fatalf("flows %+v (err %v) before conntrack saw a reply, want none", flows, err)
	}

	err := e.do(func() error {
		c, err := conntrack.Open(e.ns)
		if err != nil {
			return err
		}
		defer c.Close()
		const seenReply, assured, confirmed = 1 << 1, 1 << 2, 1 << 3
		return c.Update(conntrack.Tuple{Src: ue, Dst: dn, Proto: unix.IPPROTO_TCP},
			conntrack.Change{Status: seenReply | assured | confirmed})
	})
	if err != nil {
		t.Fatalf("conntrack: the reply seen: %v", err)
	}
	e.natFirst(t, gpdu(ack), natTCP(t, ue, dn, 64, ack), natTCP(t, nat, dn, 63, ack), 2)
	e.checkNATFlows(t, ue, dn)
	return ue, dn, nat, gpdu
}

// tcpEnds are the TCP packets that end a connection, FIN and RST, by name.
var tcpEnds = []struct {
	name string
	tcp  layers.TCP
}{
	{"FIN", layers.TCP{ACK: true, FIN: true}},
	{"RST", layers.TCP{RST: true}},
}

// TestFlowCacheNATTCP: a UE's TCP flow is learnt only once conntrack has seen its reply (it
// must follow the handshake); then it is translated both ways like UDP, and a FIN or RST
// from the UE goes to the kernel and ends both entries of the flow, each counted: the
// closing connection's replies, and a later connection's given the same translated address
// and port, go to the kernel as they came.
func TestFlowCacheNATTCP(t *testing.T) {
	for _, c := range tcpEnds {
		t.Run(c.name, func(t *testing.T) {
			e := newNATEnv(t)
			ue, dn, nat, gpdu := e.natTCPFlow(t)
			ack := layers.TCP{ACK: true}
			e.natHits(t, gpdu(ack), natTCP(t, nat, dn, 63, ack), natTCP(t, dn, nat, 64, ack), natTCP(t, dn, ue, 63, ack), 0)
			runCase(t, e, pktCase{name: c.name, in: gpdu(c.tcp), ifindex: n3, verdict: xdpPass,
				out:      concat(ethBytes(macGNB, macN3), natTCP(t, ue, dn, 64, c.tcp)),
				counters: map[string]uint64{"ul_rx": 1, "ul_kernel": 1, "flow_ended": 2}})
			if flows, err := e.dp.Flows(); err != nil || len(flows) != 0 {
				t.Errorf("flows %+v (err %v) after the UE's %s, want none", flows, err, c.name)
			}
			if st, err := e.dp.FlowCacheStats(); err != nil || st.Entries != 0 {
				t.Errorf("stats %+v (err %v), want 0 entries", st, err)
			}
			fin := layers.TCP{ACK: true, FIN: true}
			runCase(t, e, pktCase{name: "the DN host's FIN", in: concat(ethBytes(macDN, macN6), natTCP(t, dn, nat, 64, fin)),
				ifindex: n6, verdict: xdpPass, counters: map[string]uint64{"pass": 1}})
			synACK := layers.TCP{SYN: true, ACK: true}
			runCase(t, e, pktCase{name: "another connection's SYN-ACK", in: concat(ethBytes(macDN, macN6), natTCP(t, dn, nat, 64, synACK)),
				ifindex: n6, verdict: xdpPass, counters: map[string]uint64{"pass": 1, "flow_miss": 1}})
		})
	}
}

// TestFlowCacheNATConnectionGone: conntrack removing a connection (nfwatch reports both of
// its tuples) removes a replies' entry left without its UE's entry (deleted here by hand): a
// later connection given the same translated address and port then has its replies go to
// the kernel, not to this UE.
func TestFlowCacheNATConnectionGone(t *testing.T) {
	e := newNATEnv(t)
	ue, dn, nat, _ := e.natTCPFlow(t)
	uek := FlowKey{Src: ue.Addr(), Dst: dn.Addr(), SrcPort: ue.Port(), DstPort: dn.Port(), Proto: unix.IPPROTO_TCP}.raw()
	if !e.dp.flows.Delete(uek) {
		t.Fatal("the UE's entry is not there to remove")
	}
	gone := map[nfwatch.Tuple]bool{
		{Src: ue.Addr(), Dst: dn.Addr(), SrcPort: ue.Port(), DstPort: dn.Port(), Proto: unix.IPPROTO_TCP}:   true, // original
		{Src: dn.Addr(), Dst: nat.Addr(), SrcPort: dn.Port(), DstPort: nat.Port(), Proto: unix.IPPROTO_TCP}: true, // reply
	}
	e.dp.invalidate(voided{gone: gone})
	if flows, err := e.dp.Flows(); err != nil || len(flows) != 0 {
		t.Errorf("flows %+v (err %v) after the connection's conntrack entry went, want none", flows, err)
	}
	if st, err := e.dp.FlowCacheStats(); err != nil || st.Invalidated != 1 {
		t.Errorf("stats %+v (err %v), want the replies' entry invalidated", st, err)
	}
	synACK := layers.TCP{SYN: true, ACK: true}
	runCase(t, e, pktCase{name: "another connection's SYN-ACK", in: concat(ethBytes(macDN, macN6), natTCP(t, dn, nat, 64, synACK)),
		ifindex: n6, verdict: xdpPass, counters: map[string]uint64{"pass": 1, "flow_miss": 1}})
}

// TestFlowCacheNATPairRemoved: a removal that selects the UE's entry of a translated flow
// alone removes its replies' entry too, both counted: the N6 gateway's neighbour
// garbage-collected (the UE's entry is sent to its MAC), and a flush whose filter selects
// it. The UE's next packet goes to the kernel and the flow is learnt again, both ways.
func TestFlowCacheNATPairRemoved(t *testing.T) {
	cases := []struct {
		name   string
		remove func(t *testing.T, e *testEnv)
		want   FlowCacheStats
	}{
		{"neighbour gone", func(t *testing.T, e *testEnv) {
			e.dp.invalidate(voided{macs: []router.GoneNeighbour{{Ifindex: e.n6, MAC: macDN, Collected: true}}})
		}, FlowCacheStats{Invalidated: 2}},
		{"flush", func(t *testing.T, e *testEnv) {
			if _, err := e.dp.FlushFlows(func(f Flow) bool { return f.Key.Ifindex == flowFromUE }); err != nil {
				t.Fatal(err)
			}
		}, FlowCacheStats{Flushed: 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, ue, dn, nat := newNATUDPEnv(t)
			inner, out := natUDP(t, ue, dn, 64, false), natUDP(t, nat, dn, 63, false)
			gpdu := outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, inner), nil)
			e.natFirst(t, gpdu, inner, out, 2)
			c.remove(t, e)
			if flows, err := e.dp.Flows(); err != nil || len(flows) != 0 {
				t.Errorf("flows %+v (err %v) after the removal, want none", flows, err)
			}
			if st, err := e.dp.FlowCacheStats(); err != nil || st != c.want {
				t.Errorf("stats %+v (err %v), want %+v", st, err, c.want)
			}
			e.natFirst(t, gpdu, inner, out, 2)
			e.checkNATFlows(t, ue, dn)
		})
	}
}

// TestFlowCacheNATEndFromDN: a FIN or RST from the DN host to a cached UE flow's translated
// address reaches the UE, translated back, through its session's downlink (the kernel could
// not deliver it), and ends both entries of the flow, each counted.
func TestFlowCacheNATEndFromDN(t *testing.T) {
	for _, c := range tcpEnds {
		t.Run(c.name, func(t *testing.T) {
			e := newNATEnv(t)
			ue, dn, nat, _ := e.natTCPFlow(t)
			runCase(t, e, pktCase{name: c.name, in: concat(ethBytes(macDN, macN6), natTCP(t, dn, nat, 64, c.tcp)),
				ifindex: n6, verdict: xdpRedirect, fixSport: true, out: dlOuter(t, sessPlain, natTCP(t, dn, ue, 63, c.tcp), 0),
				counters: map[string]uint64{"dl_rx": 1, "dl_tx": 1, "flow_hit": 1, "flow_ended": 2}})
			if flows, err := e.dp.Flows(); err != nil || len(flows) != 0 {
				t.Errorf("flows %+v (err %v) after the DN host's %s, want none", flows, err, c.name)
			}
			if st, err := e.dp.FlowCacheStats(); err != nil || st.Entries != 0 {
				t.Errorf("stats %+v (err %v), want 0 entries", st, err)
			}
		})
	}
}

// TestFlowCacheNATKeepsConntrack: aging gives the conntrack entry of an active UE flow the
// cache forwards a timeout that outlives the cache's entry, since conntrack no longer sees
// its packets.
func TestFlowCacheNATKeepsConntrack(t *testing.T) {
	e, ue, dn, nat := newNATUDPEnv(t) // the entry's timeout 60 s
	e.natFirst(t, outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, natUDP(t, ue, dn, 64, false)), nil),
		natUDP(t, ue, dn, 64, false), natUDP(t, nat, dn, 63, false), 2)
	if _, _, err := e.dp.ageFlows(monoNow()); err != nil {
		t.Fatal(err)
	}
	e.checkCTKept(t)
}

// checkCTKept checks that the namespace's one conntrack entry has the timeout aging gives a
// UDP flow in a NAT env.
func (e *testEnv) checkCTKept(t *testing.T) {
	t.Helper()
	o := e.dp.opts.FlowCache
	want := o.IdleTimeout + 2*(o.sweep()+o.ScanInterval) // the sysctl's 120 s is shorter
	var cts []*netlink.ConntrackFlow
	err := e.do(func() error {
		var err error
		cts, err = netlink.ConntrackTableList(netlink.ConntrackTable, netlink.FAMILY_V4)
		return err
	})
	if err != nil || len(cts) != 1 {
		t.Fatalf("conntrack entries %v (err %v), want 1", cts, err)
	}
	if got := time.Duration(cts[0].TimeOut) * time.Second; got < want-5*time.Second || got > want {
		t.Errorf("conntrack entry times out in %s, want %s", got, want)
	}
}

// stampReplies sets the last packet of the cached replies' flow to at (monotonic ns), as if
// forwarded then: the flow clock follows the real one.
func (e *testEnv) stampReplies(t *testing.T, at uint64) {
	t.Helper()
	flows, err := e.dp.Flows()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range flows {
		if f.Key.Ifindex != e.n6 {
			continue
		}
		v, ok := e.dp.flows.Lookup(f.Key.raw())
		if !ok {
			t.Fatalf("flow %+v listed but not found", f.Key)
		}
		v.LastSeen = at
		if err := e.putRaw(f.Key.raw(), v); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("flows %+v: no replies' flow", flows)
}

// TestFlowCacheNATAgesAsOne: the two entries of a UE's translated flow age as one. Replies
// only, with the UE silent for longer than the idle timeout and than conntrack's refresh
// period, keep both entries and refresh conntrack's entry, round after round; once both
// are idle, one pass removes both, each counted.
func TestFlowCacheNATAgesAsOne(t *testing.T) {
	e, ue, dn, nat := newNATUDPEnv(t)
	e.natFirst(t, outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, natUDP(t, ue, dn, 64, false)), nil),
		natUDP(t, ue, dn, 64, false), natUDP(t, nat, dn, 63, false), 2)
	o := e.dp.opts.FlowCache
	// Each round passes this long: the UE's entry idle, and past conntrack's refresh.
	silent := uint64(o.IdleTimeout + 2*(o.sweep()+o.ScanInterval))
	now := monoNow()
	age := func(t *testing.T) (aged int) {
		t.Helper()
		_, aged, err := e.dp.ageFlows(now)
		if err != nil {
			t.Fatal(err)
		}
		return aged
	}
	for round := range 3 {
		now += silent
		err := e.do(func() error {
			c, err := conntrack.Open(e.ns)
			if err != nil {
				return err
			}
			defer c.Close()
			return c.Update(conntrack.Tuple{Src: ue, Dst: dn, Proto: unix.IPPROTO_UDP}, conntrack.Change{Timeout: time.Minute})
		})
		if err != nil {
			t.Fatalf("conntrack: set the timeout: %v", err)
		}
		runCase(t, e, pktCase{name: "downlink hit", in: concat(ethBytes(macDN, macN6), natUDP(t, dn, nat, 64, false)),
			ifindex: n6, verdict: xdpRedirect, fixSport: true, out: dlOuter(t, sessPlain, natUDP(t, dn, ue, 63, false), 0x28),
			counters: map[string]uint64{"dl_rx": 1, "dl_tx": 1, "flow_hit": 1}})
		e.stampReplies(t, now)
		if aged := age(t); aged != 0 {
			t.Fatalf("round %d: aged %d entries of a flow with replies, want 0", round, aged)
		}
		e.checkNATFlows(t, ue, dn)
		e.checkCTKept(t)
	}
	now += silent
	if aged := age(t); aged != 2 {
		t.Errorf("aged %d entries of an idle flow, want 2", aged)
	}
	if st, err := e.dp.FlowCacheStats(); err != nil || st.Entries != 0 || st.Aged != 2 {
		t.Errorf("stats %+v (err %v), want 0 entries, 2 aged", st, err)
	}
}

// TestFlowCacheWarnsNoConntrackEvents: with kernel_n6, a namespace whose conntrack sends no
// events (the flows' entries would outlive conntrack's) is warned about, and only that one.
func TestFlowCacheWarnsNoConntrackEvents(t *testing.T) {
	e := newNATEnv(t)
	for _, c := range []struct {
		value string
		warn  bool
	}{{"0", true}, {"1", false}, {"2", false}} {
		var buf bytes.Buffer
		err := e.do(func() error {
			if err := os.WriteFile(conntrackEventsSysctl, []byte(c.value), 0o644); err != nil {
				return err
			}
			warnNoConntrackEvents(slog.New(slog.NewTextHandler(&buf, nil)))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(buf.String(), "nf_conntrack_events"); got != c.warn {
			t.Errorf("nf_conntrack_events %s: warned %v (%q), want %v", c.value, got, buf.String(), c.warn)
		}
	}
}

// TestFlowCacheNATToKernel: a reply the cache translates back that the session's downlink
// rules then hand to the kernel (the gNB's neighbour unresolved) is counted as the downlink's
// (dl_kernel), not as passed over as well.
func TestFlowCacheNATToKernel(t *testing.T) {
	e := newNATEnv(t)
	ue := netip.AddrPortFrom(sessNoARP.UE, 1000)
	dn := netip.AddrPortFrom(addrDN, 2000)
	nat := netip.AddrPortFrom(addrN6, natPort)
	e.natCT(t, unix.IPPROTO_UDP, ue, dn)
	e.natFirst(t, outerGTP(t, gtpHdr(0x30, 255, sessNoARP.UplinkTEID, nil, natUDP(t, ue, dn, 64, false)), nil),
		natUDP(t, ue, dn, 64, false), natUDP(t, nat, dn, 63, false), 2)
	out := dlOuter(t, sessNoARP, natUDP(t, dn, ue, 63, false), 0x28)
	copy(out[0:12], concat(macN6, macDN)) // MACs as they came: the kernel fills them in
	runCase(t, e, pktCase{name: "reply", in: concat(ethBytes(macDN, macN6), natUDP(t, dn, nat, 64, false)),
		ifindex: n6, verdict: xdpPass, fixSport: true, out: out,
		counters: map[string]uint64{"dl_rx": 1, "dl_kernel": 1, "fib_no_neigh": 1, "flow_hit": 1}})
}

// TestFlowCacheNATLearnRepliesNoRoom: in a table of one entry, where a UE flow's pair never
// fits, a reply through the kernel learns nothing: the replies' entry alone would hold the
// room its UE's entry needs. The room is checked first, before conntrack is asked and the
// note looked up, which every reply in a full table would otherwise pay: nothing is counted
// flow_full, and the note stays.
func TestFlowCacheNATLearnRepliesNoRoom(t *testing.T) {
	e := newSessionsEnvOpts(t, Options{MaxSessions: 1024,
		FlowCache: FlowCacheOptions{MaxFlows: 1, ScanInterval: time.Hour, KernelN6: kerneln6.Choice{Default: true}}})
	ue, dn := netip.AddrPortFrom(ueAddr, 1000), netip.AddrPortFrom(addrDN, 2000)
	e.natCT(t, unix.IPPROTO_UDP, ue, dn)
	e.replyThroughKernel(t, ue, dn, netip.AddrPortFrom(addrN6, natPort), "")
	if flows, err := e.dp.Flows(); err != nil || len(flows) != 0 {
		t.Errorf("flows %+v (err %v), want none", flows, err)
	}
	note := xupfFlowKey{Saddr: addrBE(dn.Addr()), Daddr: addrBE(addrN6), Sport: be16(dn.Port()), Dport: be16(natPort),
		Proto: unix.IPPROTO_UDP}
	var seen xupfFlowSeen
	if err := e.dp.objs.XupfFlowSeen.Lookup(note, &seen); err != nil {
		t.Errorf("the reply's note: %v, want it kept", err)
	}
}

// macRet is the return device's MAC in the frames the kernel sends into it.
var macRet = net.HardwareAddr{2, 0, 0, 0, 9, 1}

// replyThroughKernel attaches the return device with a route to the UE's address and has a
// reply of the UDP flow from ue to dn, translated to nat, come to N6 with no entry cached: to
// the kernel, noted; then, translated back, from the return device: forwarded in the UE's
// tunnel, counting learnt (flow_learned; nothing when "") once. It returns the return
// device's peer's index.
func (e *testEnv) replyThroughKernel(t *testing.T, ue, dn, nat netip.AddrPort, learnt string) func(*testEnv) int {
	t.Helper()
	counted := map[string]uint64{"dl_rx": 1, "dl_tx": 1}
	if learnt != "" {
		counted[learnt] = 1
	}
	ret := e.attachReturn(t, netip.PrefixFrom(ue.Addr(), 32))
	e.waitRoute(t, netip.PrefixFrom(ue.Addr(), 32), present)
	e.waitGenerationStill(t)
	for _, c := range []pktCase{
		{name: "a reply at N6: to the kernel", in: concat(ethBytes(macDN, macN6), natUDP(t, dn, nat, 64, false)),
			ifindex: n6, verdict: xdpPass, counters: map[string]uint64{"pass": 1, "flow_miss": 1}},
		{name: "translated back, forwarded", in: concat(ethBytes(macRet, macRet), natUDP(t, dn, ue, 63, false)),
			ifindex: ret, ret: true, verdict: xdpRedirect, fixSport: true,
			out:      dlOuter(t, sessPlain, natUDP(t, dn, ue, 63, false), 0x28),
			counters: counted},
	} {
		t.Run(c.name, func(t *testing.T) { runCase(t, e, c) })
	}
	return ret
}

// waitGenerationStill waits until the flow generation has not moved for 200 ms: the events of
// a change made just before (a device and its routes) move it on as they arrive, voiding
// what was learnt meanwhile.
func (e *testEnv) waitGenerationStill(t *testing.T) {
	t.Helper()
	w := e.dp.flowGenWord()
	gen, since := atomic.LoadUint32(w), time.Now()
	for deadline := time.Now().Add(5 * time.Second); time.Since(since) < 200*time.Millisecond; time.Sleep(10 * time.Millisecond) {
		if now := atomic.LoadUint32(w); now != gen {
			gen, since = now, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatal("the flow generation still moves 5s on")
		}
	}
}

// TestFlowCacheNATLearnReplies: a UDP flow carrying replies alone after its entries were
// flushed is learnt again from a reply. The reply arriving on N6 goes to the kernel, noted;
// translated back and forwarded by the session's rules from the return device, it leaves the
// replies' entry learnt, and the next reply hits it. Aging keeps conntrack's entry for the
// replies' entry while it is alone. The UE's next packet learns its own entry beside it (one
// learnt, the replies' kept), and both directions hit. A TCP reply is not learnt.
func TestFlowCacheNATLearnReplies(t *testing.T) {
	e, ue, dn, nat := newNATUDPEnv(t)
	ret := e.replyThroughKernel(t, ue, dn, nat, "flow_learned")
	fromKernel := func(ip []byte) []byte { return concat(ethBytes(macRet, macRet), ip) }
	miss := map[string]uint64{"pass": 1, "flow_miss": 1}
	for _, c := range []pktCase{
		{name: "the next reply: a hit", in: concat(ethBytes(macDN, macN6), natUDP(t, dn, nat, 64, false)),
			ifindex: n6, verdict: xdpRedirect, fixSport: true, out: dlOuter(t, sessPlain, natUDP(t, dn, ue, 63, false), 0x28),
			counters: map[string]uint64{"dl_rx": 1, "dl_tx": 1, "flow_hit": 1}},
	} {
		t.Run(c.name, func(t *testing.T) { runCase(t, e, c) })
	}
	if _, _, err := e.dp.ageFlows(monoNow()); err != nil {
		t.Fatal(err)
	}
	e.checkCTKept(t)

	gpdu := outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, natUDP(t, ue, dn, 64, false)), nil)
	e.natFirst(t, gpdu, natUDP(t, ue, dn, 64, false), natUDP(t, nat, dn, 63, false), 1)
	e.checkNATFlows(t, ue, dn)
	e.natHits(t, gpdu, natUDP(t, nat, dn, 63, false), natUDP(t, dn, nat, 64, false), natUDP(t, dn, ue, 63, false), 0x28)

	if _, err := e.dp.FlushFlows(nil); err != nil {
		t.Fatal(err)
	}
	e.natCT(t, unix.IPPROTO_TCP, ue, dn)
	ack := layers.TCP{ACK: true}
	for _, c := range []pktCase{
		{name: "a TCP reply at N6: to the kernel", in: concat(ethBytes(macDN, macN6), natTCP(t, dn, nat, 64, ack)),
			ifindex: n6, verdict: xdpPass, counters: miss},
		{name: "translated back, forwarded: not learnt", in: fromKernel(natTCP(t, dn, ue, 63, ack)), ifindex: ret, ret: true,
			verdict: xdpRedirect, fixSport: true, out: dlOuter(t, sessPlain, natTCP(t, dn, ue, 63, ack), 0),
			counters: map[string]uint64{"dl_rx": 1, "dl_tx": 1}},
	} {
		t.Run(c.name, func(t *testing.T) { runCase(t, e, c) })
	}
}

// TestFlowCacheNATLearnerFindsPair: what a UE flow's learner finds in the table where it
// inserts. The UE's entry another learner of the same note cached first (two of the flow's
// packets on two CPUs), translated as its own: the learner keeps its replies' entry beside
// it, counted learnt, rather than take it back and leave the UE's entry alone. A void
// replies' entry (an earlier epoch's, learnt from replies alone): removed, counted voided,
// and the pair learnt afresh in the current epoch, rather than kept for the next reply to
// void with the UE's entry just learnt.
func TestFlowCacheNATLearnerFindsPair(t *testing.T) {
	e, ue, dn, nat := newNATUDPEnv(t)
	gpdu := outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, natUDP(t, ue, dn, 64, false)), nil)
	up, down := natUDP(t, nat, dn, 63, false), natUDP(t, dn, nat, 64, false)
	e.natFirst(t, gpdu, natUDP(t, ue, dn, 64, false), up, 2)
	var ueKey, replyKey xupfFlowKey
	var ueFlow, replyFlow xupfFlow
	for k, v := range e.dp.flows.All() {
		if k.Ifindex == 0 {
			ueKey, ueFlow = k, v
		} else {
			replyKey, replyFlow = k, v
		}
	}
	if ueKey.Saddr == 0 || replyKey.Saddr == 0 {
		t.Fatalf("flows %+v and %+v, want the UE's and the replies'", ueKey, replyKey)
	}

	t.Run("the UE's entry there", func(t *testing.T) {
		e.clearFlows(t)
		e.natHandOver(t, gpdu, natUDP(t, ue, dn, 64, false))
		if err := e.putRaw(ueKey, ueFlow); err != nil {
			t.Fatal(err)
		}
		e.natLearn(t, up, map[string]uint64{"flow_learned": 1})
		e.checkNATFlows(t, ue, dn)
		e.natHits(t, gpdu, up, down, natUDP(t, dn, ue, 63, false), 0x28)
	})
	t.Run("a void replies' entry there", func(t *testing.T) {
		e.clearFlows(t)
		e.natHandOver(t, gpdu, natUDP(t, ue, dn, 64, false))
		void := replyFlow
		void.Epoch = e.dp.flowEpoch() - 1
		e.putAll(t, []xupfFlowKey{replyKey}, []xupfFlow{void})
		e.natLearn(t, up, map[string]uint64{"flow_learned": 2, "flow_voided": 1})
		e.checkNATFlows(t, ue, dn)
		e.natHits(t, gpdu, up, down, natUDP(t, dn, ue, 63, false), 0x28)
	})
}

// TestFlowCacheNATLoneRepliesEnd: a replies' entry learnt alone (flow_learn_reply) goes when
// conntrack removes its connection (removeConnections), although its UE's entry, which the
// removal looks up first, is not there: left, it would deliver to this UE the replies of the
// next connection conntrack gives the translated address and port.
func TestFlowCacheNATLoneRepliesEnd(t *testing.T) {
	e, ue, dn, nat := newNATUDPEnv(t)
	e.replyThroughKernel(t, ue, dn, nat, "flow_learned")
	if flows, err := e.dp.Flows(); err != nil || len(flows) != 1 || flows[0].ToUE != ue {
		t.Fatalf("flows %+v (err %v), want the replies' alone", flows, err)
	}
	gone := map[nfwatch.Tuple]bool{
		{Src: ue.Addr(), Dst: dn.Addr(), SrcPort: ue.Port(), DstPort: dn.Port(), Proto: unix.IPPROTO_UDP}:   true,
		{Src: dn.Addr(), Dst: nat.Addr(), SrcPort: dn.Port(), DstPort: nat.Port(), Proto: unix.IPPROTO_UDP}: true,
	}
	if n, err := e.dp.removeConnections(gone); err != nil || n != 1 {
		t.Errorf("removeConnections removed %d flows (err %v), want 1", n, err)
	}
	if flows, err := e.dp.Flows(); err != nil || len(flows) != 0 {
		t.Errorf("flows %+v (err %v) after the connection went, want none", flows, err)
	}
}

// TestFlowCacheOwnAddrs: with kernel_n6, xupf_own_addrs holds the UPF's own unicast
// addresses (loopback's left out) and follows them. A packet to one of them is the UPF's, as
// the replies the kernel's NAT translates back are: it skips the UE lookup and goes to the
// flow cache (here a miss, to the kernel), even with a session at that address, which PFCP
// refuses (unusableUE) and only the datapath's own API can install. A packet to a UE's address
// takes the session's downlink as before.
func TestFlowCacheOwnAddrs(t *testing.T) {
	e := newNATEnv(t)
	own := func() []netip.Addr { return e.ownAddrs(t) }
	if got, want := own(), []netip.Addr{addrN3, addrN6}; !slices.Equal(got, want) {
		t.Fatalf("xupf_own_addrs %v, want %v", got, want)
	}
	waitOwn := func(what string, want func([]netip.Addr) bool) {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Second); !want(own()); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("xupf_own_addrs %v 3s after %s", own(), what)
			}
		}
	}
	added := netip.MustParseAddr("203.0.113.7")
	e.addN6Addr(t, added)
	waitOwn(added.String()+" was added", func(a []netip.Addr) bool { return slices.Contains(a, added) })
	e.changeAddr(t, "n6", added, netlink.AddrDel)
	waitOwn(added.String()+" was removed", func(a []netip.Addr) bool { return !slices.Contains(a, added) })
	if !e.dp.IsLocal(addrN6) || e.dp.IsLocal(added) {
		t.Errorf("IsLocal %s %v, %s %v; want true and false", addrN6, e.dp.IsLocal(addrN6), added, e.dp.IsLocal(added))
	}

	if err := e.addSession(session.Session{ID: 9, UE: addrN6, UplinkTEID: 0x109, GNB: addrGNB,
		DownlinkTEID: 0x209, GTPUAddr: addrN3}); err != nil {
		t.Fatal(err)
	}
	dn := netip.AddrPortFrom(addrDN, 2000)
	ue := netip.AddrPortFrom(ueAddr, 1000)
	toN6 := pktCase{name: "to n6's address", in: concat(ethBytes(macDN, macN6), natUDP(t, dn, netip.AddrPortFrom(addrN6, natPort), 64, false)),
		ifindex: n6, verdict: xdpPass, counters: map[string]uint64{"pass": 1, "flow_miss": 1}}
	for _, c := range []pktCase{toN6,
		{name: "to a UE", in: concat(ethBytes(macDN, macN6), natUDP(t, dn, ue, 64, false)),
			ifindex: n6, verdict: xdpRedirect, fixSport: true, out: dlOuter(t, sessPlain, natUDP(t, dn, ue, 63, false), 0x28),
			counters: map[string]uint64{"dl_rx": 1, "dl_tx": 1}},
	} {
		t.Run(c.name, func(t *testing.T) { runCase(t, e, c) })
	}

	// A program swapped in reads the same addresses.
	e.swapForSDF(t)
	toN6.name += " after a program swap"
	t.Run(toN6.name, func(t *testing.T) { runCase(t, e, toN6) })
}

// swapForSDF swaps a program reading one more SDF field into the links, as the first session
// with such a filter does (ensureSDFFields).
func (e *testEnv) swapForSDF(t *testing.T) {
	t.Helper()
	e.dp.mu.Lock()
	cfg := e.dp.prog
	cfg.sdfFields |= 1
	err := e.dp.swapProgram(cfg)
	e.dp.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
}

// ownAddrs is what xupf_own_addrs holds.
func (e *testEnv) ownAddrs(t *testing.T) []netip.Addr {
	t.Helper()
	var v xupfOwnAddrs
	if err := e.dp.objs.XupfOwnAddrs.Lookup(uint32(0), &v); err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, a := range v.Addr[:min(int(v.N), len(v.Addr))] {
		out = append(out, addrFromBE(a))
	}
	return out
}

// TestFlowCacheOwnAddrsAttachedFirst: when the UPF has more addresses than xupf_own_addrs
// holds, the attached interfaces' come first, though the kernel lists another link's first
// (here lo, index 1, with eight): n6's, where the replies the kernel translates back arrive,
// is still compared.
func TestFlowCacheOwnAddrsAttachedFirst(t *testing.T) {
	e := newNATEnv(t)
	var many []netip.Addr
	for i := range maxOwnAddrs + 1 {
		a := netip.AddrFrom4([4]byte{198, 18, 0, byte(i + 1)})
		e.changeAddr(t, "lo", a, netlink.AddrAdd)
		many = append(many, a)
	}
	for deadline := time.Now().Add(3 * time.Second); !e.dp.IsLocal(many[len(many)-1]); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s not local 3s after it was added", many[len(many)-1])
		}
	}
	want := append([]netip.Addr{addrN3, addrN6}, many[:maxOwnAddrs-2]...)
	if got := e.ownAddrs(t); !slices.Equal(got, want) {
		t.Errorf("xupf_own_addrs %v, want %v", got, want)
	}
}

// BenchmarkFlowCacheNAT: ns/packet of a UE's UDP packet the cache translates (kernel_n6), each
// way, beside the same packet without NAT (kernel_n6 off: the datapath routes it), and the
// downlink one with kernel_n6 on. The
// benchmark runs packets without a context, so they arrive on lo: the replies' flow is
// keyed by lo's index.
func BenchmarkFlowCacheNAT(b *testing.B) {
	ue := netip.AddrPortFrom(ueAddr, 1000)
	dn := netip.AddrPortFrom(addrDN, 2000)
	nat := netip.AddrPortFrom(addrN6, natPort)
	gpdu := outerGTP(b, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, natUDP(b, ue, dn, 64, false)), nil)
	for _, kernelN6 := range []bool{false, true} {
		e := newSessionsEnvOpts(b, Options{MaxSessions: 1024,
			FlowCache: FlowCacheOptions{MaxFlows: 16, ScanInterval: time.Hour, KernelN6: kerneln6.Choice{Default: kernelN6}}})
		down := concat(ethBytes(macDN, macN6), natUDP(b, dn, ue, 64, false))
		name := "plain"
		if kernelN6 {
			name = "nat-hit"
			down = concat(ethBytes(macDN, macN6), natUDP(b, dn, nat, 64, false))
			e.natCT(b, unix.IPPROTO_UDP, ue, dn)
			if ret, _ := e.run(b, gpdu, e.n3); ret != xdpPass {
				b.Fatalf("first packet: %s", verdictNames[ret])
			}
			e.learn(b, concat(ethBytes(macN6, macDN), natUDP(b, nat, dn, 63, false)), e.n3, e.n6)
			for k, v := range maps.Collect(e.dp.flows.All()) {
				if k.Ifindex == uint32(e.n6) {
					k.Ifindex = 1 // lo
					if err := e.putRaw(k, v); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		b.Run("uplink/"+name, func(b *testing.B) { benchPacket(b, e, gpdu, xdpRedirect) })
		b.Run("downlink/"+name, func(b *testing.B) { benchPacket(b, e, down, xdpRedirect) })
		if kernelN6 {
			// A packet to the UE's own address, as without NAT, past the check of the UPF's
			// own addresses (xupf_own_addrs) that kernel_n6 adds before the UE lookup.
			plain := concat(ethBytes(macDN, macN6), natUDP(b, dn, ue, 64, false))
			b.Run("downlink/plain-kernel-n6", func(b *testing.B) { benchPacket(b, e, plain, xdpRedirect) })
		}
	}
}

// BenchmarkFlowCacheInvalidationDelay: with a million flows cached, the time from a route
// change's netlink event (a route added in the namespace) to the first packet of a cached flow
// no longer forwarded by the cache (it goes to the kernel, which decides afresh): what "a
// change takes effect once processed" costs. Each round puts the table back first.
func BenchmarkFlowCacheInvalidationDelay(b *testing.B) {
	const n = 1 << 20
	e := newTestEnvOpts(b, Options{MaxSessions: 4, FlowCache: FlowCacheOptions{MaxFlows: n + 1, ScanInterval: time.Hour}})
	keys, vals := make([]xupfFlowKey, n), make([]xupfFlow, n)
	now := monoNow()
	for i := range keys {
		k := transitKey
		k.SrcPort, k.DstPort, k.Ifindex = uint16(i), uint16(i>>16)+1000, e.n6
		keys[i] = k.raw()
		vals[i] = xupfFlow{Ifindex: uint32(e.n3), Mtu: 1500, FirstSeen: now, LastSeen: now}
	}
	pkt := frame(macDN, macN6, 0, transitTCP(b, 0, 64, layers.TCP{ACK: true}))
	_, dst, _ := net.ParseCIDR("192.0.2.0/24")
	route := &netlink.Route{LinkIndex: e.n6, Dst: dst, Gw: net.ParseIP("10.0.2.2")}
	var total time.Duration
	for i := range b.N {
		for j := range vals {
			vals[j].Epoch = e.dp.flowEpoch()
		}
		e.clearFlows(b)
		e.putAll(b, keys, vals)
		e.putFlow(b, 0, xupfFlow{Flags: uint8(xupfFlowFlagFLOW_F_TTL), FirstSeen: now, LastSeen: now})
		if ret, _ := e.run(b, pkt, e.n6); ret != xdpRedirect {
			b.Fatalf("before the change: %s, want XDP_REDIRECT", verdictNames[ret])
		}
		change := netlink.RouteAdd
		if i%2 == 1 {
			change = netlink.RouteDel
		}
		start := time.Now()
		if err := e.do(func() error { return change(route) }); err != nil {
			b.Fatal(err)
		}
		for {
			if ret, _ := e.run(b, pkt, e.n6); ret != xdpRedirect {
				break
			}
			if time.Since(start) > 10*time.Second {
				b.Fatal("the flow is still forwarded 10 s after the route changed")
			}
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/change")
}

// TestFlowCacheKernelN6PerInstance: the kernel's N6 treatment follows the network instance of
// the session's uplink FAR (FlowCacheOptions.KernelN6's Instances, its Default the default of the
// others): a UE's packet of a session in a network instance the kernel treats goes to the
// kernel decapsulated and charged (noted for the learner), while one of a session in another
// network instance is routed by the datapath as without the flow cache.
func TestFlowCacheKernelN6PerInstance(t *testing.T) {
	sessNI := session.Session{ID: 7, UE: netip.MustParseAddr("10.45.0.20"), UplinkTEID: 0x120, GNB: addrGNB,
		DownlinkTEID: 0x220, GTPUAddr: addrN3}
	dn := netip.AddrPortFrom(addrDN, 2000)
	for _, c := range []struct {
		name                string
		defaultOn, internet bool // KernelN6.Default; KernelN6.Instances["internet"]
	}{
		{"default off, internet the kernel's", false, true},
		{"default on, internet not the kernel's", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newSessionsEnvOpts(t, Options{MaxSessions: 1024, FlowCache: FlowCacheOptions{MaxFlows: 16,
				ScanInterval: time.Hour, KernelN6: kerneln6.Choice{Default: c.defaultOn, Instances: map[string]bool{"internet": c.internet}}}})
			sets, err := sessNI.RuleSets()
			if err != nil {
				t.Fatal(err)
			}
			for i := range sets[0].PDRs { // the uplink set's
				sets[0].PDRs[i].FAR.NetworkInstance = "internet"
			}
			if err := e.dp.Install(sessNI.ID, sets); err != nil {
				t.Fatal(err)
			}
			for _, s := range []struct {
				sess   session.Session
				kernel bool
			}{{sessPlain, c.defaultOn}, {sessNI, c.internet}} {
				ue := netip.AddrPortFrom(s.sess.UE, 1000)
				inner := natUDP(t, ue, dn, 64, false)
				gpdu := outerGTP(t, gtpHdr(0x30, 255, s.sess.UplinkTEID, nil, inner), nil)
				pc := pktCase{name: fmt.Sprintf("session %d routed", s.sess.ID), in: gpdu, ifindex: n3, verdict: xdpRedirect,
					out:      concat(ethBytes(macN6, macDN), natUDP(t, ue, dn, 63, false)),
					counters: map[string]uint64{"ul_rx": 1, "ul_tx": 1}}
				if s.kernel {
					pc = pktCase{name: fmt.Sprintf("session %d to the kernel", s.sess.ID), in: gpdu, ifindex: n3, verdict: xdpPass,
						out:      concat(ethBytes(macGNB, macN3), inner),
						counters: map[string]uint64{"ul_rx": 1, "ul_kernel": 1, "flow_miss": 1}}
				}
				before, _ := e.usage(s.sess.ID)
				runCase(t, e, pc)
				if now, _ := e.usage(s.sess.ID); now.Uplink.Packets != before.Uplink.Packets+1 {
					t.Errorf("%s: uplink usage %d packets, want %d", pc.name, now.Uplink.Packets, before.Uplink.Packets+1)
				}
			}
		})
	}
}

// TestFlowCacheKernelN6EarlierFAR: with kernel_n6 on, a FAR as a build without per-instance
// choice wrote it (no FAR_F_KERNEL_N6 nor FAR_F_ROUTED_N6, pinned, read by this program
// until Restore writes it again) still has its uplink go to the kernel decapsulated and
// charged, not routed untranslated; and a FAR of a network instance that follows the default
// is written just so.
func TestFlowCacheKernelN6EarlierFAR(t *testing.T) {
	e := newNATEnv(t)
	n6Bits := uint8(xupfFarFlagFAR_F_KERNEL_N6 | xupfFarFlagFAR_F_ROUTED_N6)
	var k uint32
	var r xupfRuleRef
	refs := 0
	for it := e.dp.objs.XupfRefs.Iterate(); it.Next(&k, &r); {
		if r.Far.Flags&n6Bits != 0 {
			t.Errorf("ref %d: FAR flags %#x, want no override of the default", k, r.Far.Flags)
		}
		refs++
	}
	if refs == 0 {
		t.Fatal("no rule_ref written")
	}
	ue, dn := netip.AddrPortFrom(sessPlain.UE, 1000), netip.AddrPortFrom(addrDN, 2000)
	inner := natUDP(t, ue, dn, 64, false)
	e.natHandOver(t, outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, inner), nil), inner)
}

// attachReturn makes the return device's veth pair in the test namespace, with its route to
// the UE pool pool, and attaches the datapath to its peer; it returns the peer's ifindex.
func (e *testEnv) attachReturn(t *testing.T, pool netip.Prefix) func(*testEnv) int {
	t.Helper()
	var a Attachment
	dir := t.TempDir()
	err := e.do(func() error {
		if err := returndev.Ensure("xret", dir); err != nil {
			return err
		}
		var err error
		if a, err = e.dp.AttachReturn(returndev.Peer("xret")); err != nil {
			return err
		}
		return returndev.Route("xret", []netip.Prefix{pool})
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(*testEnv) int { return a.Ifindex }
}

// TestFlowCacheNATReturn: a packet the kernel sends a UE, through the return device, takes its
// session's downlink rules: the reply the kernel translated back leaves in the UE's tunnel as a
// cached reply does (the TTL the kernel took given back, then taken by the downlink), charged
// once. What the downlink hands to the kernel goes there, unless the kernel would route it
// back into the return device; a packet to no session, or not IPv4, is dropped.
func TestFlowCacheNATReturn(t *testing.T) {
	e := newNATEnv(t)
	ret := e.attachReturn(t, netip.PrefixFrom(ueRouted, 32))
	e.waitRoute(t, netip.PrefixFrom(ueRouted, 32), present)
	fromKernel := func(ip []byte) []byte { return concat(ethBytes(macRet, macRet), ip) }
	ue, dn := netip.AddrPortFrom(ueAddr, 1000), netip.AddrPortFrom(addrDN, 443)
	synACK := func(ttl uint8) []byte { return natTCP(t, dn, ue, ttl, layers.TCP{SYN: true, ACK: true}) }
	reply := func(ttl uint8) []byte { return natUDP(t, dn, ue, ttl, false) }
	dlOK := map[string]uint64{"dl_rx": 1, "dl_tx": 1}
	noRoute := map[string]uint64{"no_route": 1}
	toRouted := innerUDP(t, addrDN, ueRouted, 5000, 6000, 63, payload)
	noARP := innerUDP(t, addrDN, sessNoARP.UE, 5000, 6000, 63, payload)
	noARPOut := dlOuter(t, sessNoARP, noARP, 0x28)
	copy(noARPOut[0:12], concat(macRet, macRet)) // MACs as they came: the kernel fills them in
	before, err := e.usage(sessPlain.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []pktCase{
		{name: "a SYN-ACK the kernel translated back", in: fromKernel(synACK(63)), ifindex: ret, ret: true, verdict: xdpRedirect,
			out: dlOuter(t, sessPlain, synACK(63), 0), fixSport: true, counters: dlOK},
		{name: "a UDP reply the kernel translated back", in: fromKernel(reply(63)), ifindex: ret, ret: true, verdict: xdpRedirect,
			out: dlOuter(t, sessPlain, reply(63), 0x28), fixSport: true, counters: dlOK},
		{name: "the host's own packet, TTL 255", in: fromKernel(reply(255)), ifindex: ret, ret: true, verdict: xdpRedirect,
			out: dlOuter(t, sessPlain, reply(254), 0x28), fixSport: true, counters: dlOK},
		{name: "the gNB's MAC not resolved: to the kernel encapsulated", in: fromKernel(noARP), ifindex: ret, ret: true,
			verdict: xdpPass, out: noARPOut, fixSport: true,
			counters: map[string]uint64{"dl_rx": 1, "dl_kernel": 1, "fib_no_neigh": 1}},
		{name: "without a tunnel, to a UE the kernel routes here", in: fromKernel(toRouted), ifindex: ret, ret: true,
			verdict: xdpDrop, out: fromKernel(innerUDP(t, addrDN, ueRouted, 5000, 6000, 64, payload)),
			counters: map[string]uint64{"dl_rx": 1}, drops: noRoute},
		{name: "to no session", in: fromKernel(innerUDP(t, addrDN, netip.MustParseAddr("10.45.9.9"), 5000, 6000, 63, payload)),
			ifindex: ret, ret: true, verdict: xdpDrop, drops: noRoute},
		{name: "not IPv4", in: concat(ethBytes(macRet, macRet)[:12], []byte{0x08, 0x06}, make([]byte, 28)), ifindex: ret, ret: true,
			verdict: xdpDrop, drops: noRoute},
	} {
		t.Run(c.name, func(t *testing.T) { runCase(t, e, c) })
	}
	after, err := e.usage(sessPlain.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := uint64(len(synACK(63)) + 2*len(reply(63)))
	if got := after.Downlink; got.Packets-before.Downlink.Packets != 3 || got.Bytes-before.Downlink.Bytes != want {
		t.Errorf("downlink usage %+v, was %+v: want 3 more packets, %d more bytes", got, before.Downlink, want)
	}
}

// TestFlowCacheReturnChargedOnce: a downlink packet whose FAR forwards without a tunnel, to a
// UE the kernel routes into the return device, is charged once: at N6, where the downlink
// hands it to the kernel, and not again when the kernel sends it into the return device,
// where its rules drop it (no_route) before they charge it: the kernel would only route it
// back.
func TestFlowCacheReturnChargedOnce(t *testing.T) {
	e := newNATEnv(t)
	const owner = 11
	ue := netip.MustParseAddr("10.45.0.11")
	pdrs := []rules.PDR{{ID: 1, FAR: rules.FAR{Action: rules.Forward}}}
	if err := e.dp.Install(owner, []rules.RuleSet{{UE: ue, PDRs: pdrs}}); err != nil {
		t.Fatal(err)
	}
	ret := e.attachReturn(t, netip.PrefixFrom(ue, 32))
	e.waitRoute(t, netip.PrefixFrom(ue, 32), present)
	down := func(ttl uint8) []byte { return innerUDP(t, addrDN, ue, 5000, 6000, ttl, payload) }
	for _, c := range []pktCase{
		{name: "at N6: charged, to the kernel", in: concat(ethBytes(macDN, macN6), down(64)), ifindex: n6, verdict: xdpPass,
			counters: map[string]uint64{"dl_rx": 1, "dl_kernel": 1, "fib_no_neigh": 1}},
		{name: "from the kernel into the return device: dropped uncharged", in: concat(ethBytes(macRet, macRet), down(63)),
			ifindex: ret, ret: true, verdict: xdpDrop, out: concat(ethBytes(macRet, macRet), down(64)),
			counters: map[string]uint64{"dl_rx": 1}, drops: map[string]uint64{"no_route": 1}},
	} {
		t.Run(c.name, func(t *testing.T) { runCase(t, e, c) })
	}
	u, err := e.usage(owner)
	if err != nil {
		t.Fatal(err)
	}
	if u.Downlink.Packets != 1 || u.Downlink.Bytes != uint64(len(down(64))) {
		t.Errorf("downlink usage %+v, want 1 packet of %d bytes", u.Downlink, len(down(64)))
	}
}

// TestReturnProgramSwapped: a program swap (a rule set needs another classification field)
// puts the return device's program, specialised alike, in its link too.
func TestReturnProgramSwapped(t *testing.T) {
	e := newNATEnv(t)
	e.attachReturn(t, netip.PrefixFrom(ueRouted, 32))
	linked := func() (link, want ebpf.ProgramID) {
		t.Helper()
		info, err := e.dp.links[returndev.Peer("xret")].link.Info()
		if err != nil {
			t.Fatal(err)
		}
		pi, err := e.dp.objs.XupfXdpReturn.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := pi.ID()
		return info.Program, id
	}
	before, _ := linked()
	e.swapForSDF(t)
	if got, want := linked(); got != want || got == before {
		t.Errorf("the return device's link runs program %d, want the swapped-in %d (was %d)", got, want, before)
	}
}

// TestFlowCacheArch: the flow cache is refused off x86-64, whose load ordering its readers
// rely on.
func TestFlowCacheArch(t *testing.T) {
	if err := flowCacheArch("amd64"); err != nil {
		t.Errorf("amd64: %v", err)
	}
	if err := flowCacheArch("arm64"); err == nil {
		t.Error("arm64: the flow cache taken, with readers that need x86-64's load ordering")
	}
}
