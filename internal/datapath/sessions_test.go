package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/session"
)

func TestSessionLifecycle(t *testing.T) {
	e := newTestEnv(t, 16)
	s := sessPlain
	if err := e.dp.AddSession(s); err != nil {
		t.Fatal(err)
	}
	ul := outerGTP(t, gtpHdr(0x30, 255, s.UplinkTEID, nil, ulInner(t, 64)), nil)
	for range 3 {
		if ret, _ := e.run(t, ul, e.n3); ret != xdpRedirect {
			t.Fatalf("uplink verdict %s", verdictNames[ret])
		}
	}
	if ret, _ := e.run(t, dlIn(t, s, 64), e.n6); ret != xdpRedirect {
		t.Fatalf("downlink verdict %s", verdictNames[ret])
	}
	innerLen := uint64(len(ulInner(t, 64)))
	wantUsage := session.Usage{
		Uplink:   session.Counters{Packets: 3, Bytes: 3 * innerLen},
		Downlink: session.Counters{Packets: 1, Bytes: innerLen},
	}
	if _, u, err := e.dp.Session(s.ID); err != nil || u != wantUsage {
		t.Fatalf("usage %+v, %v; want %+v", u, err, wantUsage)
	}

	// Modify: new downlink TEID and QFI, new uplink TEID. Counts carry on.
	m := s
	m.DownlinkTEID, m.QFI, m.UplinkTEID = 0x999, 7, 0x555
	if err := e.dp.ModifySession(m); err != nil {
		t.Fatal(err)
	}
	ret, out := e.run(t, dlIn(t, m, 64), e.n6)
	want := dlOuter(t, m, innerUDP(t, addrDN, m.UE, 5000, 6000, 63, payload), 0x28)
	copy(want[34:36], out[34:36])
	if ret != xdpRedirect || !bytes.Equal(out, want) {
		t.Fatalf("after modify: verdict %s\n%s\nwant\n%s", verdictNames[ret], dump(out), dump(want))
	}
	if ret, _ := e.run(t, ul, e.n3); ret != xdpDrop {
		t.Errorf("old uplink TEID still accepted after modify: %s", verdictNames[ret])
	}
	ulNew := outerGTP(t, gtpHdr(0x34, 255, m.UplinkTEID, optPSC(7), ulInner(t, 64)), nil)
	if ret, _ := e.run(t, ulNew, e.n3); ret != xdpRedirect {
		t.Errorf("new uplink TEID: %s", verdictNames[ret])
	}
	wantUsage.Uplink = session.Counters{Packets: 4, Bytes: 4 * innerLen}
	wantUsage.Downlink = session.Counters{Packets: 2, Bytes: 2 * innerLen}

	u, err := e.dp.DeleteSession(s.ID)
	if err != nil || u != wantUsage {
		t.Fatalf("delete returned %+v, %v; want %+v", u, err, wantUsage)
	}
	if ret, _ := e.run(t, ulNew, e.n3); ret != xdpDrop {
		t.Errorf("deleted session still forwards uplink: %s", verdictNames[ret])
	}
	if ret, _ := e.run(t, dlIn(t, m, 64), e.n6); ret != xdpPass {
		t.Errorf("deleted session still handles downlink: %s", verdictNames[ret])
	}
	if _, err := e.dp.DeleteSession(s.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}

	// A new session in freed slots starts from zero.
	if err := e.dp.AddSession(s); err != nil {
		t.Fatal(err)
	}
	if _, u, _ := e.dp.Session(s.ID); u != (session.Usage{}) {
		t.Errorf("re-added session starts with usage %+v", u)
	}
}

func TestSessionErrors(t *testing.T) {
	e := newTestEnv(t, 2)
	if err := e.dp.AddSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	other := netip.MustParseAddr("10.45.9.9")
	cases := []struct {
		name string
		s    session.Session
		want string
	}{
		{"duplicate id", sessPlain, "already exists"},
		{"TEID in use", session.Session{ID: 9, UE: other, UplinkTEID: sessPlain.UplinkTEID, GNB: addrGNB, DownlinkTEID: 1, GTPUAddr: addrN3},
			"uplink TEID 0x100 is used by session 1"},
		{"UE in use", session.Session{ID: 9, UE: sessPlain.UE, UplinkTEID: 7, GNB: addrGNB, DownlinkTEID: 1, GTPUAddr: addrN3},
			"UE address 10.45.0.2 is used by session 1"},
		{"foreign GTP-U address", session.Session{ID: 9, UE: other, UplinkTEID: 7, GNB: addrGNB, DownlinkTEID: 1,
			GTPUAddr: netip.MustParseAddr("10.9.9.9")}, "not a local GTP-U address"},
		{"invalid", session.Session{ID: 9, UE: other, GNB: addrGNB, DownlinkTEID: 1, GTPUAddr: addrN3}, "uplink_teid"},
	}
	for _, c := range cases {
		err := e.dp.AddSession(c.s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
	// The table holds two sessions (four rule slots): the third is refused, and the refusal
	// leaves the first two working.
	if err := e.dp.AddSession(sessQFI); err != nil {
		t.Fatal(err)
	}
	err := e.dp.AddSession(sessNoARP)
	if err == nil || !strings.Contains(err.Error(), "limits.max_sessions") {
		t.Errorf("third session in a table of two: %v", err)
	}
	full := sessQFI
	full.DownlinkTEID = 0x777
	if err := e.dp.ModifySession(full); err != nil {
		t.Errorf("modify with a full table: %v", err)
	}
	if err := e.dp.ModifySession(sessNoARP); !errors.Is(err, ErrNotFound) {
		t.Errorf("modify unknown session: %v", err)
	}
	ul := outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, ulInner(t, 64)), nil)
	if ret, _ := e.run(t, ul, e.n3); ret != xdpRedirect {
		t.Errorf("first session broken by refused ones: %s", verdictNames[ret])
	}
}

// TestDownlinkSourcePortSpreadsFlows checks that the outer UDP source port comes from the
// dynamic range, is the same for every packet of a flow and differs between flows, so that a
// gNB's receive-side scaling spreads them.
func TestDownlinkSourcePortSpreadsFlows(t *testing.T) {
	e := newTestEnv(t, 4)
	if err := e.dp.AddSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	sport := func(srcPort uint16) uint16 {
		pkt := concat(ethBytes(macDN, macN6), innerUDP(t, addrDN, sessPlain.UE, srcPort, 6000, 64, payload))
		ret, out := e.run(t, pkt, e.n6)
		if ret != xdpRedirect {
			t.Fatalf("verdict %s", verdictNames[ret])
		}
		return binary.BigEndian.Uint16(out[34:36])
	}
	seen := map[uint16]bool{}
	for p := uint16(1000); p < 1064; p++ {
		sp := sport(p)
		if sp < 0xC000 {
			t.Errorf("source port %d outside the dynamic range", sp)
		}
		if again := sport(p); again != sp {
			t.Errorf("flow %d: source port %d then %d", p, sp, again)
		}
		seen[sp] = true
	}
	if len(seen) < 48 { // 64 flows into 16384 ports: collisions are rare
		t.Errorf("64 flows used only %d source ports", len(seen))
	}
}

// TestDefaultTableHoldsManySessions fills a datapath of the default size (100,000 sessions)
// and checks that the last session forwards both ways.
func TestDefaultTableHoldsManySessions(t *testing.T) {
	const n = 100000
	e := newTestEnv(t, n)
	var last session.Session
	for i := range n {
		last = session.Session{
			ID: uint64(i + 1), UE: netip.AddrFrom4([4]byte{10, 60 + byte(i>>16), byte(i >> 8), byte(i)}),
			UplinkTEID: uint32(0x10000 + i), GNB: addrGNB, DownlinkTEID: uint32(i + 1), GTPUAddr: addrN3,
		}
		if err := e.dp.AddSession(last); err != nil {
			t.Fatalf("session %d: %v", i+1, err)
		}
	}
	ul := outerGTP(t, gtpHdr(0x30, 255, last.UplinkTEID, nil, innerUDP(t, last.UE, addrDN, 1, 2, 64, payload)), nil)
	if ret, _ := e.run(t, ul, e.n3); ret != xdpRedirect {
		t.Errorf("uplink of session %d: %s", n, verdictNames[ret])
	}
	if ret, _ := e.run(t, dlIn(t, last, 64), e.n6); ret != xdpRedirect {
		t.Errorf("downlink of session %d: %s", n, verdictNames[ret])
	}
}
