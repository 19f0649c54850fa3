package datapath

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/routedir"
)

// TestDownlinkPinnedNexthop: a downlink packet leaves by its gNB's pin, not by the route
// table: pointed at the DN router's next hop, the pin sends the packet there, whole and
// counted (from the copy of the next hop the pin's word names); a pin whose word holds another
// address is not used.
func TestDownlinkPinnedNexthop(t *testing.T) {
	e := newSessionsEnv(t)
	tab := e.dp.routes.table
	i := e.dp.routes.pin(addrGNB) // the sessions' pin, shared
	defer e.dp.routes.unpin(addrGNB)
	if i == 0 {
		t.Fatal("no pin for the gNB")
	}
	entry := e.dp.routes.pins.words64()[int(i)*routedir.PinWords:][:routedir.PinWords]
	// A pin made within grace of the load names a copy once the earlier run's copies rested.
	for deadline := time.Now().Add(time.Second); atomic.LoadUint64(&entry[0]) == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	addrHalf := func(a netip.Addr) uint64 {
		b := a.As4()
		return uint64(binary.LittleEndian.Uint32(b[:]))
	}
	if s, copied, _ := tab.Pinned(addrGNB); s != tab.Lookup(addrGNB) || copied != pinCopy(tab.Nexthop(s)) ||
		uint32(atomic.LoadUint64(&entry[0])) != uint32(addrHalf(addrGNB)) {
		t.Fatalf("pin entry %#x, want the gNB, its route's slot and a copy of its next hop", entry)
	}
	// setPin points the entry at address a and slot, with the next hop of slot from in copy
	// 0; no address clears it.
	setPin := func(a netip.Addr, slot, from uint32) {
		if !a.IsValid() {
			atomic.StoreUint64(&entry[0], 0)
			return
		}
		for k, v := range pinCopy(tab.Nexthop(from)) {
			atomic.StoreUint64(&entry[1+k], v)
		}
		atomic.StoreUint64(&entry[0], addrHalf(a)|uint64(slot)<<33)
	}
	dlOK := map[string]uint64{"dl_rx": 1, "dl_tx": 1}
	inner := innerUDP(t, addrDN, sessPlain.UE, 5000, 6000, 63, payload)
	toGNB := dlOuter(t, sessPlain, inner, 0x28)
	toDN := concat(ethBytes(macN6, macDN), toGNB[14:])
	saved := slices.Clone(entry)
	defer func() {
		for k := len(saved) - 1; k >= 0; k-- { // the word last
			atomic.StoreUint64(&entry[k], saved[k])
		}
	}()
	gnbSlot, dnSlot := tab.Lookup(addrGNB), tab.Lookup(addrDN)
	for _, c := range []struct {
		name       string
		addr       netip.Addr
		slot, from uint32
		out        []byte
	}{
		{"by the pin the router keeps", addrGNB, gnbSlot, gnbSlot, toGNB},
		{"by a pin pointed at the DN router", addrGNB, dnSlot, dnSlot, toDN},
		{"by the pin's copy, not its slot", addrGNB, gnbSlot, dnSlot, toDN},
		{"by the route table past a pin of another address", addrUPF, dnSlot, dnSlot, toGNB},
		{"by the route table past a cleared pin", netip.Addr{}, 0, 0, toGNB},
	} {
		t.Run(c.name, func(t *testing.T) {
			setPin(c.addr, c.slot, c.from)
			runCase(t, e, pktCase{in: dlIn(t, sessPlain, 64), ifindex: n6, verdict: xdpRedirect,
				out: c.out, fixSport: true, counters: dlOK})
		})
	}
}
