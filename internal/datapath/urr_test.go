package datapath

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/xupf/xupf/internal/rules"
)

// Keys of the quota tests' session: one uplink and one downlink PDR naming URR 7.
var (
	ueQuota   = netip.MustParseAddr("10.45.0.20")
	ohcQuota  = rules.OuterHeader{TEID: 0x220, Peer: addrGNB, Local: addrN3}
	teidQuota = uint32(0x120)
)

const quotaOwner = 1 << 32

// quotaSets are a session's two rule sets with quota q on URR 7 in both PDRs, and QER 1
// closing the downlink gate when gateClosed (the downlink PDR measures before QoS too).
func quotaSets(q rules.Quota, gateClosed bool) []rules.RuleSet {
	pdr := func(far rules.FAR) []rules.PDR {
		return []rules.PDR{{ID: 1, Precedence: 1, URRs: []uint32{7}, Quotas: []rules.Quota{q}, FAR: far, BeforeQoS: true,
			QERs: []rules.QER{{ID: 1, DLClosed: gateClosed}}}}
	}
	return []rules.RuleSet{
		{Uplink: true, TEID: teidQuota, PDRs: pdr(rules.FAR{Action: rules.Forward})},
		{UE: ueQuota, PDRs: pdr(rules.FAR{Action: rules.Forward, OHC: &ohcQuota})},
	}
}

// TestQuota: a URR's volume quota lets through packets until their bytes reach it, then
// drops them as urr_quota, in both directions from one budget; a reinstall with the same
// grant keeps the count, a new grant starts it over; the counter before QoS counts what the
// QERs drop.
func TestQuota(t *testing.T) {
	e := newSessionsEnv(t)
	c := newQuotaCases(t)
	ulIn, dlIn, size, forwarded, blockedDL, blockedUL := c.ulIn, c.dlIn, c.size, c.forwarded, c.blockedDL, c.blockedUL

	// Two packets and one byte: the third starts below the limit and passes (the overrun
	// is less than one packet), the fourth finds it used up.
	q := rules.Quota{URR: 7, Grant: 1, Uplink: rules.NoLimit, Downlink: rules.NoLimit, Total: 2*size + 1}
	if err := e.dp.Install(quotaOwner, quotaSets(q, false)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		runCase(t, e, forwarded)
	}
	runCase(t, e, blockedDL)
	runCase(t, e, blockedUL)

	if err := e.dp.Install(quotaOwner, quotaSets(q, false)); err != nil {
		t.Fatal(err)
	}
	runCase(t, e, blockedDL) // the same grant: still used up
	q.Grant++
	if err := e.dp.Install(quotaOwner, quotaSets(q, false)); err != nil {
		t.Fatal(err)
	}
	runCase(t, e, forwarded) // a new grant counts from zero

	// A downlink limit leaves the uplink alone.
	q = rules.Quota{URR: 7, Grant: 3, Uplink: rules.NoLimit, Downlink: 0, Total: rules.NoLimit}
	if err := e.dp.Install(quotaOwner, quotaSets(q, false)); err != nil {
		t.Fatal(err)
	}
	runCase(t, e, blockedDL)
	runCase(t, e, pktCase{name: "uplink without a limit of its own", in: ulIn, ifindex: n3, verdict: xdpRedirect,
		out:      concat(ethBytes(macN6, macDN), innerUDP(t, ueQuota, addrDN, 1000, 2000, 63, payload)),
		counters: map[string]uint64{"ul_rx": 1, "ul_tx": 1}})

	// Before QoS: a closed gate drops, and only the counter before QoS has seen it.
	q = rules.Quota{URR: 7, Grant: 4, Uplink: rules.NoLimit, Downlink: rules.NoLimit, Total: rules.NoLimit}
	if err := e.dp.Install(quotaOwner, quotaSets(q, true)); err != nil {
		t.Fatal(err)
	}
	was := downlinkUsage(t, e)
	runCase(t, e, pktCase{name: "downlink gate closed", in: dlIn, ifindex: n6, verdict: xdpDrop,
		counters: map[string]uint64{"dl_rx": 1}, drops: map[string]uint64{"qer_gate_closed": 1}})
	now := downlinkUsage(t, e)
	if now.Packets != was.Packets || now.BeforeQoS.Packets != was.BeforeQoS.Packets+1 ||
		now.BeforeQoS.Bytes != was.BeforeQoS.Bytes+size {
		t.Errorf("usage went from %+v to %+v; want one more packet of %d bytes before QoS only", was, now, size)
	}
	if was.BeforeQoS != (rules.Counts{Packets: was.Packets, Bytes: was.Bytes}) {
		t.Errorf("before the gate closed: %+v; want the same counts before and after QoS", was)
	}

	if _, err := e.dp.Uninstall(quotaOwner); err != nil {
		t.Fatal(err)
	}
	if n := len(e.dp.quotas); n != 0 {
		t.Errorf("%d owners still hold quotas after uninstall", n)
	}
}

// quotaCases are the packets of the quota session and what becomes of them.
type quotaCases struct {
	ulIn, dlIn                      []byte
	size                            uint64 // of a downlink packet's inner IP packet
	forwarded, blockedDL, blockedUL pktCase
}

func newQuotaCases(t *testing.T) quotaCases {
	dlInner := func(ttl uint8) []byte { return innerUDP(t, addrDN, ueQuota, 5000, 6000, ttl, payload) }
	c := quotaCases{
		ulIn: outerGTP(t, gtpHdr(0x30, 255, teidQuota, nil, innerUDP(t, ueQuota, addrDN, 1000, 2000, 64, payload)), nil),
		dlIn: concat(ethBytes(macDN, macN6), dlInner(64)),
		size: uint64(len(dlInner(64))),
	}
	c.forwarded = pktCase{name: "downlink within the quota", in: c.dlIn, ifindex: n6, verdict: xdpRedirect,
		out: tunnelled(t, macGNB, ohcQuota, 0, 0x28, dlInner(63)), fixSport: true,
		counters: map[string]uint64{"dl_rx": 1, "dl_tx": 1}}
	c.blockedDL = pktCase{name: "downlink past the quota", in: c.dlIn, ifindex: n6, verdict: xdpDrop,
		counters: map[string]uint64{"dl_rx": 1}, drops: map[string]uint64{"urr_quota": 1}}
	c.blockedUL = pktCase{name: "uplink past the quota", in: c.ulIn, ifindex: n3, verdict: xdpDrop,
		counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"urr_quota": 1}}
	return c
}

// TestRestartKeepsQuota: a quota partly used before a restart, installed again with the same
// grant by the next run, carries its count on: the next run does not grant it anew.
func TestRestartKeepsQuota(t *testing.T) {
	e := newSessionsEnv(t)
	c := newQuotaCases(t)
	q := rules.Quota{URR: 7, Grant: 1, Uplink: rules.NoLimit, Downlink: rules.NoLimit, Total: 2*c.size + 1}
	if err := e.dp.Install(quotaOwner, quotaSets(q, false)); err != nil {
		t.Fatal(err)
	}
	runCase(t, e, c.forwarded)
	runCase(t, e, c.forwarded)
	if err := e.dp.Close(false); err != nil { // "crash": pins stay
		t.Fatal(err)
	}
	opts := e.dp.opts
	e.dp = e.load(t, opts)
	if err := e.dp.Install(quotaOwner, quotaSets(q, false)); err != nil {
		t.Fatal(err)
	}
	want := []rules.QuotaUse{{URR: 7, Grant: 1, Downlink: 2 * c.size}}
	if got, err := e.dp.QuotaUsed(quotaOwner); err != nil || !slices.Equal(got, want) {
		t.Errorf("quota used after the restart: %+v, %v; want %+v", got, err, want)
	}
	runCase(t, e, c.forwarded) // starts below the limit
	runCase(t, e, c.blockedDL)
	runCase(t, e, c.blockedUL)
}

// TestRestartKeepsQuotas: a PDR with several quotas (a quota list) carries every member's
// count across a restart, a used-up one staying used up: the next run grants none anew.
func TestRestartKeepsQuotas(t *testing.T) {
	e := newSessionsEnv(t)
	c := newQuotaCases(t)
	small := rules.Quota{URR: 7, Grant: 1, Uplink: rules.NoLimit, Downlink: rules.NoLimit, Total: 2*c.size + 1}
	large := rules.Quota{URR: 8, Grant: 1, Uplink: rules.NoLimit, Downlink: rules.NoLimit, Total: 100 * c.size}
	sets := quotaSets(small, false)
	for i := range sets {
		sets[i].PDRs[0].URRs = []uint32{7, 8}
		sets[i].PDRs[0].Quotas = []rules.Quota{large, small}
	}
	if err := e.dp.Install(quotaOwner, sets); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		runCase(t, e, c.forwarded)
	}
	runCase(t, e, c.blockedDL)                // the small quota is used up
	if err := e.dp.Close(false); err != nil { // "crash": pins stay
		t.Fatal(err)
	}
	opts := e.dp.opts
	e.dp = e.load(t, opts)
	if err := e.dp.Install(quotaOwner, sets); err != nil {
		t.Fatal(err)
	}
	want := []rules.QuotaUse{{URR: 7, Grant: 1, Downlink: 3 * c.size}, {URR: 8, Grant: 1, Downlink: 3 * c.size}}
	if got, err := e.dp.QuotaUsed(quotaOwner); err != nil || !slices.Equal(got, want) {
		t.Errorf("quotas used after the restart: %+v, %v; want %+v", got, err, want)
	}
	runCase(t, e, c.blockedDL)
	runCase(t, e, c.blockedUL)
}

func downlinkUsage(t *testing.T, e *testEnv) rules.Usage {
	t.Helper()
	us, err := e.dp.Usage(quotaOwner)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if !u.Uplink {
			return u
		}
	}
	t.Fatal("no downlink usage")
	return rules.Usage{}
}

// TestSeveralQuotas: a PDR whose two URRs have volume quotas stops at the first used up,
// whichever it is in the list, and charges every packet it forwards to both; its quota list
// goes with its rules.
func TestSeveralQuotas(t *testing.T) {
	e := newSessionsEnv(t)
	dlInner := innerUDP(t, addrDN, ueQuota, 5000, 6000, 64, payload)
	dlIn := concat(ethBytes(macDN, macN6), dlInner)
	size := uint64(len(dlInner))
	forwarded := pktCase{name: "downlink within both quotas", in: dlIn, ifindex: n6, verdict: xdpRedirect,
		out:      tunnelled(t, macGNB, ohcQuota, 0, 0x28, innerUDP(t, addrDN, ueQuota, 5000, 6000, 63, payload)),
		fixSport: true, counters: map[string]uint64{"dl_rx": 1, "dl_tx": 1}}
	blocked := pktCase{name: "downlink past one quota", in: dlIn, ifindex: n6, verdict: xdpDrop,
		counters: map[string]uint64{"dl_rx": 1}, drops: map[string]uint64{"urr_quota": 1}}
	free := e.dp.quotaSlots.n
	small := rules.Quota{URR: 7, Grant: 1, Uplink: rules.NoLimit, Downlink: rules.NoLimit, Total: 2*size + 1}
	large := rules.Quota{URR: 8, Grant: 1, Uplink: rules.NoLimit, Downlink: rules.NoLimit, Total: 100 * size}
	for i := range 2 {
		qs := []rules.Quota{small, large}
		if i == 1 {
			qs = []rules.Quota{large, small}
		}
		sets := []rules.RuleSet{{UE: ueQuota, PDRs: []rules.PDR{{ID: 1, Precedence: 1, URRs: []uint32{7, 8},
			Quotas: qs, FAR: rules.FAR{Action: rules.Forward, OHC: &ohcQuota}}}}}
		if err := e.dp.Install(quotaOwner, sets); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			runCase(t, e, forwarded)
		}
		runCase(t, e, blocked)
		var q xupfQuota
		e.dp.mu.Lock()
		err := e.dp.objs.XupfQuotas.Lookup(e.dp.quotas[quotaOwner][8].slot, &q)
		e.dp.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(i+1) * 3 * size; q.Used[xupfQuotaVolumeQUOTA_DL] != want {
			t.Errorf("order %d: the large quota was charged %d bytes, want %d (every packet forwarded)",
				i, q.Used[xupfQuotaVolumeQUOTA_DL], want)
		}
		small.Grant++ // the next install starts the small one over; the large one carries on
	}
	if _, err := e.dp.Uninstall(quotaOwner); err != nil {
		t.Fatal(err)
	}
	if e.dp.quotaSlots.n != free {
		t.Errorf("%d quota slots free after uninstall, want %d: a quota or a list leaked", e.dp.quotaSlots.n, free)
	}
}
