package pfcp

import (
	"maps"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xupf/xupf/internal/buffer"
	"github.com/xupf/xupf/internal/rules"
)

// fakeBuffers records what the node tells the buffer.
type fakeBuffers struct {
	mu      sync.Mutex
	set     map[uint64]map[buffer.Key]buffer.Policy
	removed []uint64
	dropped []uint64
	// discarded is what Dropped returns.
	discarded map[buffer.Key]rules.Counts
}

func (f *fakeBuffers) Dropped(uint64) map[buffer.Key]rules.Counts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.discarded)
}

func (f *fakeBuffers) Drop(owner uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropped = append(f.dropped, owner)
}

func (f *fakeBuffers) policy(owner uint64, k buffer.Key) buffer.Policy {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.set[owner][k]
}

func (f *fakeBuffers) Set(owner uint64, p map[buffer.Key]buffer.Policy) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set[owner] = p
}

func (f *fakeBuffers) Remove(owner uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, owner)
}

// TestBufferPolicies: a BUFF+NOCP downlink FAR with a BAR holds and notifies after the BAR's
// delay, within its suggested count; the uplink forwards and never notifies; an Update FAR to
// FORW flushes in a new epoch; DROP+NOCP discards and notifies; deletion removes the session's buffer.
func TestBufferPolicies(t *testing.T) {
	fb := &fakeBuffers{set: map[uint64]map[buffer.Key]buffer.Policy{}}
	dp := newFakeDatapath()
	n := newSessionNode(dp, func(o *Options) { o.Buffers = fb })
	cause(t, n.Handle(smf, bytesOf(t, smfSetup(1))))
	ies := append(basicSession(ue1)[:3:3],
		ie.NewCreateFAR(ie.NewFARID(2), ie.NewApplyAction(ApplyBuffer|ApplyNotifyCP), ie.NewBARID(1)),
		ie.NewCreateBAR(ie.NewBARID(1), ie.NewDownlinkDataNotificationDelay(100*time.Millisecond),
			ie.NewSuggestedBufferingPacketsCount(50)))
	ies = append(ies, basicSession(ue1)[4:]...)
	if _, c, _ := cause(t, n.Handle(smf, bytesOf(t, establishment(20, 0x51, ies...)))); c != ie.CauseRequestAccepted {
		t.Fatalf("establishment: cause %d", c)
	}
	dl, ul := buffer.Key{Owner: FirstSEID, PDR: 2}, buffer.Key{Owner: FirstSEID, Uplink: true, PDR: 1}
	pols := fb.set[FirstSEID]
	if p := pols[dl]; p.Mode != buffer.Hold || !p.Notify || p.NotifyDelay != 100*time.Millisecond || p.MaxPackets != 50 || p.Epoch == 0 {
		t.Errorf("downlink policy %+v, want Hold, notify after 100ms, 50 packets, an epoch", p)
	}
	if p := pols[ul]; p.Mode != buffer.Flush || p.Notify {
		t.Errorf("uplink policy %+v, want Flush without notification", p)
	}
	before := pols[dl].Epoch
	upd := message.NewSessionModificationRequest(0, 0, FirstSEID, 21, 0, ie.NewUpdateFAR(ie.NewFARID(2),
		ie.NewApplyAction(ApplyForward), ie.NewUpdateForwardingParameters(ie.NewDestinationInterface(ie.DstInterfaceAccess),
			ohc(0x500, gnb))))
	if _, c, _ := cause(t, n.Handle(smf, bytesOf(t, upd))); c != ie.CauseRequestAccepted {
		t.Fatalf("modification: cause %d", c)
	}
	if p := fb.set[FirstSEID][dl]; p.Mode != buffer.Flush || p.Epoch == before {
		t.Errorf("after FORW: policy %+v, want Flush in a new epoch (not %d)", p, before)
	}
	// DROP with NOCP: the datapath hands over the first packet (rules.DropNotify) for the
	// buffer to discard and notify.
	drop := message.NewSessionModificationRequest(0, 0, FirstSEID, 23, 0, ie.NewUpdateFAR(ie.NewFARID(2),
		ie.NewApplyAction(ApplyDrop|ApplyNotifyCP)))
	if _, c, _ := cause(t, n.Handle(smf, bytesOf(t, drop))); c != ie.CauseRequestAccepted {
		t.Fatalf("modification to DROP+NOCP: cause %d", c)
	}
	if p := fb.policy(FirstSEID, dl); p.Mode != buffer.Discard || !p.Notify {
		t.Errorf("after DROP+NOCP: policy %+v, want Discard with notification", p)
	}
	if a := dp.sets[FirstSEID][1].PDRs[0].FAR.Action; a != rules.DropNotify {
		t.Errorf("after DROP+NOCP: the datapath's FAR action %d, want DropNotify", a)
	}
	cause(t, n.Handle(smf, bytesOf(t, message.NewSessionDeletionRequest(0, 0, FirstSEID, 22, 0))))
	if len(fb.removed) != 1 || fb.removed[0] != FirstSEID {
		t.Errorf("removed %v, want [0x%x]", fb.removed, uint64(FirstSEID))
	}
}

// TestDownlinkDataReport: the buffer's notification becomes a Session Report Request with a
// Downlink Data Report (the PDR, its QFI); the SMF's answer with DROBU discards what is held
// and its Update BAR's DL Buffering Duration reaches the buffer, which notifies again only
// once it has run out.
func TestDownlinkDataReport(t *testing.T) {
	fb := &fakeBuffers{set: map[uint64]map[buffer.Key]buffer.Policy{}}
	r := newReportTest(t, func(o *Options) { o.Buffers = fb })
	k := buffer.Key{Owner: r.seid, PDR: 2}
	smfAddr := r.smf.LocalAddr().(*net.UDPAddr).AddrPort()
	idle := message.NewSessionModificationRequest(0, 0, r.seid, 3, 0, ie.NewUpdateFAR(ie.NewFARID(2),
		ie.NewApplyAction(ApplyBuffer|ApplyNotifyCP), ie.NewBARID(1)))
	if _, c, _ := cause(t, r.n.Handle(smfAddr, bytesOf(t, idle))); c != ie.CauseRequestAccepted {
		t.Fatalf("modification to BUFF: cause %d", c)
	}
	r.n.DownlinkData(k)
	req, from := r.receive()
	if req.ReportType == nil || req.ReportType.Payload[0] != byte(ReportDownlinkData) || req.DownlinkDataReport == nil {
		t.Fatalf("Report Type %v, DLDR %v: want a Downlink Data Report", req.ReportType, req.DownlinkDataReport)
	}
	id, err := req.DownlinkDataReport.PDRID()
	dsi, err2 := req.DownlinkDataReport.DownlinkDataServiceInformation()
	if err != nil || err2 != nil || id != 2 || string(dsi) != "\x02\x09" {
		t.Errorf("PDR ID %d %v, service information %x %v: want PDR 2, QFI 9", id, err, dsi, err2)
	}
	answered := time.Now()
	r.answer(from, req.SequenceNumber, ie.NewCause(ie.CauseRequestAccepted), ie.NewPFCPSRRspFlags(srrspDROBU),
		ie.NewUpdateBARWithinSessionReportResponse(ie.NewBARID(1), ie.NewDLBufferingDuration(20*time.Second)))
	eventually(t, "the answer was not applied", func() bool {
		fb.mu.Lock()
		defer fb.mu.Unlock()
		return len(fb.dropped) == 1 && fb.dropped[0] == r.seid
	})
	eventually(t, "the DL Buffering Duration did not reach the buffer", func() bool {
		p := fb.policy(r.seid, k)
		return p.Mode == buffer.Hold && p.Duration == 20*time.Second && p.MaxPackets == 10
	})
	if p := fb.policy(r.seid, k); p.NotifyAgain.Before(answered.Add(20*time.Second)) ||
		p.NotifyAgain.After(time.Now().Add(20*time.Second)) {
		t.Errorf("notify again at %s, want 20 s after the answer (%s)", p.NotifyAgain, answered)
	}
}
