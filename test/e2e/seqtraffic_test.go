package e2e

import (
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
	"github.com/xupf/xupf/internal/testbed/seqtraffic"
)

// TestSequenceTraffic checks the check the restart tests rely on (seqtraffic): through the
// two static sessions and a third that xupfd does not hold, every frame of the first two
// arrives once and every frame of the third is counted lost, each way. The generator sends
// the sessions' frames round robin and numbers them from 0, so the lost numbers are exactly
// those that are 2 modulo 3. The third session's downlink frames, which xupfd passes to the
// kernel, come back to the DN host by the upf namespace's default route: the uplink sink
// counts them as numbers outside its check (of the downlink generator's CPU), not as uplink
// frames.
func TestSequenceTraffic(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs: with one, both generators number their frames as CPU 0's")
	}
	e := newEnv(t)
	e.expectForwarding(t, sessQFI, "before the traffic")
	unknown := session.Session{ID: 3, UE: netip.MustParseAddr("10.45.0.99"), UplinkTEID: 0x999, GNB: testbed.GNBAddr}
	tr, err := seqtraffic.New(e.topo, []session.Session{sessQFI, sessNoQFI, unknown})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	}()
	res, err := tr.Run(e.ctx(), 20000, 200*time.Millisecond, func() {})
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]seqtraffic.Stats{"uplink": res.Uplink, "downlink": res.Downlink} {
		wantLost := int(st.Sent / 3) // 2, 5, 8, ... below Sent
		t.Logf("%s: %+v", name, st)
		if st.Sent < 3 || st.Lost != wantLost || !slices.Equal(st.FirstLost, []uint32{2, 5, 8, 11, 14, 17, 20, 23, 26, 29}) ||
			st.Dups != 0 || st.Arrived != st.Sent-uint64(st.Lost)+st.Out || name == "downlink" && st.Out != 0 {
			t.Errorf("%s: %+v; want the %d numbers that are 2 modulo 3 lost, the rest arrived once", name, st, wantLost)
		}
	}
	// The veth peers have their XDP_PASS programs back: packets of the kernel's arrive.
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	e.expectForwarding(t, sessNoQFI, "after the traffic")
}
