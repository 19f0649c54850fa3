package datapath

import (
	"net/netip"
	"testing"
)

// TestGTPUFollowsTheN3Role: after a restart in which the interfaces swapped roles, GTP-U is
// accepted on the new n3 interface only; the old one's entries of the earlier run are gone.
func TestGTPUFollowsTheN3Role(t *testing.T) {
	e := newTestEnv(t, 4)
	if err := e.addSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	pin := e.dp.opts.PinPath
	if err := e.dp.Close(false); err != nil {
		t.Fatal(err)
	}
	next := e.load(t, Options{PinPath: pin, MaxSessions: 4, GTPUAddrs: []netip.Addr{addrN3}, N3Interfaces: []string{"n6"}})
	e.dp = next
	err := e.do(func() error {
		for _, name := range []string{"n3", "n6"} {
			if _, err := next.Attach(name, XDPNative, false); err != nil {
				return err
			}
		}
		return installSession(next, sessPlain)
	})
	if err != nil {
		t.Fatal(err)
	}
	gpdu := outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, ulInner(t, 64)), nil)
	runCase(t, e, pktCase{name: "G-PDU on the interface that lost the n3 role", in: gpdu, ifindex: n3,
		verdict: xdpDrop, drops: map[string]uint64{"gtpu_not_n3": 1}})
	runCase(t, e, pktCase{name: "G-PDU on the new n3 interface", in: gpdu, ifindex: n6,
		verdict: xdpRedirect, out: ulForwarded(t), counters: map[string]uint64{"ul_rx": 1, "ul_tx": 1}})
}
