package datapath

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"testing"
)

// TestDownlinkPinnedNexthop: a downlink packet leaves by its gNB's pin, not by the route
// table: pointed at the DN router's next hop, the pin sends the packet there, whole and
// counted; a pin word that holds another address is not used.
func TestDownlinkPinnedNexthop(t *testing.T) {
	e := newSessionsEnv(t)
	tab := e.dp.routes.table
	i := e.dp.routes.pin(addrGNB) // the sessions' pin, shared
	defer e.dp.routes.unpin(addrGNB)
	if i == 0 {
		t.Fatal("no pin for the gNB")
	}
	word := &e.dp.routes.pins.words64()[i]
	pinWord := func(a netip.Addr, slot uint32) uint64 {
		b := a.As4()
		return uint64(binary.LittleEndian.Uint32(b[:])) | uint64(slot)<<32
	}
	if got, want := atomic.LoadUint64(word), pinWord(addrGNB, tab.Lookup(addrGNB)); got != want {
		t.Fatalf("pin word %#x, want %#x (the gNB and its route's slot)", got, want)
	}
	dlOK := map[string]uint64{"dl_rx": 1, "dl_tx": 1}
	inner := innerUDP(t, addrDN, sessPlain.UE, 5000, 6000, 63, payload)
	toGNB := dlOuter(t, sessPlain, inner, 0x28)
	toDN := concat(ethBytes(macN6, macDN), toGNB[14:])
	defer atomic.StoreUint64(word, atomic.LoadUint64(word))
	for _, c := range []struct {
		name string
		pin  uint64
		out  []byte
	}{
		{"by the pin the router keeps", pinWord(addrGNB, tab.Lookup(addrGNB)), toGNB},
		{"by a pin pointed at the DN router", pinWord(addrGNB, tab.Lookup(addrDN)), toDN},
		{"by the route table past a pin of another address", pinWord(addrUPF, tab.Lookup(addrDN)), toGNB},
		{"by the route table past a cleared pin", 0, toGNB},
	} {
		t.Run(c.name, func(t *testing.T) {
			atomic.StoreUint64(word, c.pin)
			runCase(t, e, pktCase{in: dlIn(t, sessPlain, 64), ifindex: n6, verdict: xdpRedirect,
				out: c.out, fixSport: true, counters: dlOK})
		})
	}
}
