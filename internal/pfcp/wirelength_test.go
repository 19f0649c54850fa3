package pfcp

import (
	"testing"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xupf/xupf/internal/pfcpclient"
)

// specLength says whether an IE's payload has a length TS 29.244 (V17, chapter 8.2) allows,
// for every IE type xupfd sends; ok is false for a type the table does not know.
func specLength(x *ie.IE) (valid, ok bool) {
	n := len(x.Payload)
	fixed := map[uint16]int{
		ie.Cause: 1, ie.RecoveryTimeStamp: 4, ie.OffendingIE: 2, ie.PDRID: 2, ie.URRID: 4,
		ie.URSEQN: 4, ie.PFCPASRspFlags: 1, ie.StartTime: 4, ie.EndTime: 4, ie.DurationMeasurement: 4,
		ie.TimeOfFirstPacket: 4, ie.TimeOfLastPacket: 4,
		ie.UsageReportTrigger: 3, // 8.2.41: octets 5 to 7
	}
	if want, found := fixed[x.Type]; found {
		return n == want, true
	}
	switch x.Type {
	case ie.NodeID: // 8.2.38: type, then 4 (IPv4), 16 (IPv6) or an FQDN
		if n < 2 {
			return false, true
		}
		switch x.Payload[0] & 0x0f {
		case 0:
			return n == 5, true
		case 1:
			return n == 17, true
		}
		return true, true
	case ie.FSEID: // 8.2.37: flags, SEID, then the addresses the flags announce
		return n >= 9 && n == 9+addrBytes(x.Payload[0]&0x02 != 0, x.Payload[0]&0x01 != 0), true
	case ie.FTEID: // 8.2.3: flags, TEID, addresses (no CHOOSE in what a UPF sends)
		return n >= 5 && x.Payload[0]&0x0c == 0 && n == 5+addrBytes(x.Payload[0]&0x01 != 0, x.Payload[0]&0x02 != 0), true
	case ie.UEIPAddress: // 8.2.62: flags, then the addresses V4 and V6 announce
		return n >= 1 && n == 1+addrBytes(x.Payload[0]&0x02 != 0, x.Payload[0]&0x01 != 0), true
	case ie.FailedRuleID: // 8.2.80: rule type, then a 2- (PDR), 4- (FAR, QER, URR) or 1-octet (BAR) id
		if n < 1 {
			return false, true
		}
		return n == 1+map[uint8]int{0: 2, 1: 4, 2: 4, 3: 4, 4: 1}[x.Payload[0]&0x0f], true
	case ie.UPFunctionFeatures: // 8.2.25: a variable number of feature octets, at least 2
		return n >= 2, true
	case ie.VolumeMeasurement: // 8.2.44: flags, then 8 octets per volume or count announced
		if n < 1 {
			return false, true
		}
		bits := 0
		for f := x.Payload[0] & 0x3f; f != 0; f &= f - 1 {
			bits++
		}
		return n == 1+8*bits, true
	case ie.CreatedPDR, ie.UsageReportWithinSessionDeletionResponse, ie.UsageReportWithinSessionModificationResponse,
		ie.UsageReportWithinSessionReportRequest:
		return true, true // grouped: their children are checked
	}
	return false, false
}

func addrBytes(v4, v6 bool) int {
	n := 0
	if v4 {
		n += 4
	}
	if v6 {
		n += 16
	}
	return n
}

// TestSentIELengths checks every IE of everything xupfd sends (the answers to both SMF
// styles' conversations, refusals, a usage report, its own requests) against the lengths
// TS 29.244 defines: a peer that checks them (free5GC's SMF does) rejects the whole message.
func TestSentIELengths(t *testing.T) {
	var sent [][]byte
	for _, style := range []pfcpclient.Style{pfcpclient.Open5GS, pfcpclient.Free5GC} {
		_, answers := recordConversation(t, style)
		sent = append(sent, answers...)
	}
	p := newPFCPTest(t)
	refused := basicSession(ue1)
	refused[0] = chosenULPDR(1, 1, 9, 7)                             // FAR 7 does not exist: Failed Rule ID
	for _, ies := range [][]*ie.IE{refused, basicSession(ue1)[2:]} { // the second has no Create PDR
		sent = append(sent, bytesOf(t, p.establish(0x70, ies...)))
	}
	chosen := basicSession(ue1)
	chosen[1] = ie.NewCreatePDR(ie.NewPDRID(2), ie.NewPrecedence(1), ie.NewPDI(ie.NewSourceInterface(ie.SrcInterfaceCore),
		ie.NewUEIPAddress(0x10|0x04, "", "", 0, 0)), ie.NewFARID(2)) // the UE address chosen: a Created PDR says which
	_, r := p.mustEstablish(0x72, chosen...)
	sent = append(sent, bytesOf(t, r))
	seid, _ := p.mustEstablish(0x71, basicSession(ue1)...)
	p.dp.usage[seid] = nil
	sent = append(sent, bytesOf(t, p.send(func(seq uint32) message.Message {
		return message.NewSessionDeletionRequest(0, 0, seid, seq, 0)
	})))
	p.n.Handle(smf, bytesOf(t, smfSetup(1)))
	hb, _ := p.n.beat()
	sent = append(sent, hb[0].msg, p.n.setupRequest(stranger))

	types := map[uint16]bool{}
	var walk func(where string, l []*ie.IE)
	walk = func(where string, l []*ie.IE) {
		for _, x := range l {
			valid, known := specLength(x)
			switch {
			case !known:
				t.Errorf("%s: IE type %d (%d octets) is not in the table: add its TS 29.244 length", where, x.Type, len(x.Payload))
			case !valid:
				t.Errorf("%s: IE type %d has %d octets, which TS 29.244 does not allow: % x", where, x.Type, len(x.Payload), x.Payload)
			}
			types[x.Type] = true
			walk(where, x.ChildIEs)
		}
	}
	for _, b := range sent {
		m, err := message.Parse(b)
		if err != nil {
			t.Fatalf("%x: %v", b, err)
		}
		g, err := message.ParseGeneric(b)
		if err != nil {
			t.Fatalf("%s: %v", m.MessageTypeName(), err)
		}
		walk(m.MessageTypeName(), g.IEs)
	}
	for _, want := range []uint16{ie.UsageReportTrigger, ie.VolumeMeasurement, ie.FailedRuleID, ie.OffendingIE, ie.CreatedPDR, ie.UEIPAddress} {
		if !types[want] {
			t.Errorf("nothing sent had IE type %d: the test misses a message", want)
		}
	}
}
