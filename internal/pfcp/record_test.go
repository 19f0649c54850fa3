package pfcp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/sdf"
	"github.com/xupf/xupf/internal/state"
)

// fullSession is a session with every field of the model set (allFieldsSet checks it), for
// the record's round trip.
func fullSession() *Session {
	u8, u16, u32, d := uint8(6), uint16(0xb8fc), uint32(3), 10*time.Second
	at := func(sec int64) time.Time { return time.Unix(1_790_000_000+sec, 123_456_789) }
	sub := Subsequent{VolumeThresholdFlags: 7, VolumeThreshold: 1, VolumeThresholdUL: 2, VolumeThresholdDL: 3,
		VolumeQuotaFlags: 7, VolumeQuota: 4, VolumeQuotaUL: 5, VolumeQuotaDL: 6, TimeThreshold: 7, TimeQuota: 8}
	return &Session{
		SEID: FirstSEID + 5, CPSEID: 0x11, CPAddress: netip.MustParseAddr("10.0.0.1"), Peer: "smf.example",
		Established: at(0), request: 0xfedcba9876543210,
		PDRs: map[uint16]*PDR{1: {ID: 1, Precedence: 200, SourceInterface: 1,
			FTEID: &FTEID{TEID: 0x1234, Addr: netip.MustParseAddr("10.0.0.2"), Chosen: true, ChooseID: 9},
			UE:    netip.MustParseAddr("10.45.0.7"), UEChosen: true, NetworkInstance: "internet", QFI: 9,
			SDF: []SDF{{FlowDescription: "permit out 17 from 10.1.0.0/16 1000-2000 to assigned", Filter: sdf.Filter{
				Protocol: 17, Remote: netip.MustParsePrefix("10.1.0.0/16"), Local: netip.MustParsePrefix("10.45.0.7/32"),
				RemotePorts: []sdf.PortRange{{First: 1000, Last: 2000}}, LocalPorts: []sdf.PortRange{{First: 5, Last: 5}},
				TOSValue: 0xb8, TOSMask: 0xfc, SPI: 77, HasSPI: true, FlowLabel: 0xfffff, HasFlowLabel: true, IPv6: true}}},
			OuterHeaderRemoval: &u8, FAR: 2, QERs: []uint32{1, 2}, URRs: []uint32{3}}},
		FARs: map[uint32]*FAR{2: {ID: 2, Apply: ApplyForward | ApplyBuffer, DestinationInterface: 1,
			NetworkInstance: "internet", OHC: &OHC{Description: 0x100, TEID: 0x99, Peer: netip.MustParseAddr("10.0.0.9")},
			TLM: &u16, BARID: &u8, hasDestination: true}},
		QERs: map[uint32]*QER{1: {ID: 1, GateUL: 1, GateDL: 1, MBRUL: 1e6, MBRDL: 2e6, GBRUL: 3, GBRDL: 4, QFI: 5}},
		URRs: map[uint32]*URR{3: {ID: 3, Method: 3, Triggers: []byte{1, 2, 3}, MeasurementInformation: 1,
			VolumeThreshold: 1, VolumeQuota: 2, VolumeThresholdUL: 3, VolumeThresholdDL: 4, VolumeQuotaUL: 5,
			VolumeQuotaDL: 6, VolumeQuotaFlags: 7, TimeThreshold: 8, TimeQuota: 9, MeasurementPeriod: 10,
			QuotaHoldingTime: 11, QuotaValidityTime: 12, InactivityTime: 13, DroppedThresholdFlags: 3,
			DroppedPackets: 14, DroppedBytes: 1 << 40, LinkedURRs: []uint32{4}, QuotaFAR: &u32, Grant: 2,
			QuotaUsedUp: 1, MonitoringTime: at(60), Subsequent: sub,
			Additional: []Monitoring{{Time: at(120), Subsequent: sub}}}},
		BARs: map[uint8]*BAR{6: {ID: 6, NotificationDelay: 2, SuggestedPackets: 10, BufferingDuration: &d,
			BufferingPackets: &u16, BufferingUntil: at(30)}},
	}
}

// allFieldsSet fails on a field left zero in v or what it holds, so that a field added to the
// model without being added to fullSession (and to the record) is noticed.
func allFieldsSet(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		allFieldsSet(t, path, v.Elem())
	case reflect.Map:
		for _, k := range v.MapKeys() {
			allFieldsSet(t, path+"["+fmt.Sprint(k)+"]", v.MapIndex(k))
		}
	case reflect.Slice:
		for i := range v.Len() {
			allFieldsSet(t, path+"[]", v.Index(i))
		}
	case reflect.Struct:
		if v.Type().PkgPath() != "github.com/xupf/xupf/internal/pfcp" {
			break // time.Time, netip, sdf.Filter: set as a whole
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Name == "epoch" { // not kept: a restore numbers the FARs afresh
				continue
			}
			if v.Field(i).IsZero() {
				t.Errorf("%s.%s is not set in fullSession", path, f.Name)
			}
			allFieldsSet(t, path+"."+f.Name, v.Field(i))
		}
	}
	if v.IsValid() && v.Type() == reflect.TypeFor[sdf.Filter]() {
		for i := range v.NumField() {
			if v.Field(i).IsZero() {
				t.Errorf("%s.%s is not set in fullSession", path, v.Type().Field(i).Name)
			}
		}
	}
}

// jsonRecord is s's record as versions before the binary form wrote it.
func jsonRecord(s *Session) []byte {
	st := storedSession{Session: *s, Filters: map[uint16][]sdf.Filter{}, Request: s.request}
	for id, p := range s.PDRs {
		for _, f := range p.SDF {
			st.Filters[id] = append(st.Filters[id], f.Filter)
		}
	}
	for _, id := range sortedKeys(s.FARs) {
		if s.FARs[id].hasDestination {
			st.Destinations = append(st.Destinations, id)
		}
	}
	return mustJSON(st)
}

// TestRecordRoundTrip: a session's binary record, and its JSON record of earlier versions,
// decode to the same session, every field included.
func TestRecordRoundTrip(t *testing.T) {
	want := fullSession()
	allFieldsSet(t, "Session", reflect.ValueOf(want))
	got, err := decodeStored(encodeSession(want))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("binary record decoded to\n%+v, want\n%+v", got, want)
	}
	// JSON keeps times with their zone offset, not their location: compare them apart.
	got, err = decodeStored(jsonRecord(want))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(encodeSession(got), encodeSession(want)) {
		t.Errorf("JSON record decoded to\n%+v, want\n%+v", got, want)
	}
}

// TestRestoreJSONRecord: a session saved in JSON by an earlier version is restored.
func TestRestoreJSONRecord(t *testing.T) {
	dir, seid := firstRun(t)
	st := openStore(t, dir)
	v, err := st.Get(bucketSessions, seidKey(seid))
	if err != nil || len(v) == 0 || v[0] != recordBinary {
		t.Fatalf("saved session: %q, %v; want a binary record", v, err)
	}
	saved, err := decodeStored(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Sync(state.Op{Bucket: bucketSessions, Key: seidKey(seid), Value: jsonRecord(saved)}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	n, _, res, err := restarted(t, dir)
	if err != nil || res.Sessions != 1 {
		t.Fatalf("Restore: %+v, %v", res, err)
	}
	if got := n.ss.byID[seid]; got == nil || got.request != saved.request || len(got.PDRs) != len(saved.PDRs) {
		t.Errorf("restored session %+v, want %+v", got, saved)
	}
}

// TestDamagedRecord: a binary record cut short anywhere, or with an unknown first byte, is
// an error.
func TestDamagedRecord(t *testing.T) {
	b := encodeSession(fullSession())
	for n := range len(b) {
		if _, err := decodeStored(b[:n]); err == nil {
			t.Errorf("record cut to %d of %d bytes decoded", n, len(b))
		}
	}
	if _, err := decodeStored(append(b, 0)); err == nil {
		t.Error("record with a byte after it decoded")
	}
	if _, err := decodeStored(append([]byte{0x7f}, b[1:]...)); err == nil {
		t.Error("record with an unknown first byte decoded")
	}
}

// TestRecordCountsBoundAllocation: a list's count is bounded by the elements the bytes left
// can hold, so a record claiming as many elements as it has bytes left is refused before
// anything is allocated, and one claiming as many as fit, all zeros, allocates what a
// genuine record that long would: for an SDF, about 12 times the record (a filter takes
// 13 bytes encoded, some 160 in memory). Counts were bounded by the bytes left alone,
// which had such a record allocate 160 times its size.
func TestRecordCountsBoundAllocation(t *testing.T) {
	// Each prefix is an encoded session cut just before one list's count: the record of
	// an empty session ends in the five rule counts; one of a PDR{} ends in its SDF count,
	// its four fields after it and the other four rule counts; one of a URR{} in its
	// Additional count and the BAR count.
	empty := encodeSession(&Session{})[1:]
	onePDR := encodeSession(&Session{PDRs: map[uint16]*PDR{0: {}}})[1:]
	oneURR := encodeSession(&Session{URRs: map[uint32]*URR{0: {}}})[1:]
	const pad = 1 << 20
	for _, c := range []struct {
		name   string
		prefix []byte
		minLen int
	}{
		{"PDRs", empty[:len(empty)-5], minPDR},
		{"SDF", onePDR[:len(onePDR)-1-4-4], minSDF},
		{"Additional", oneURR[:len(oneURR)-1-1], minMonitoring},
	} {
		for _, n := range []int{pad, pad / c.minLen} {
			b := binary.AppendUvarint(append([]byte(nil), c.prefix...), uint64(n))
			b = append(b, make([]byte, pad)...)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := decodeSession(b)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s: count %d, %d bytes: %v, allocated %d bytes (x%.1f)", c.name, n, len(b), err, alloc,
				float64(alloc)/float64(len(b)))
			if n == pad && err == nil {
				t.Errorf("%s: a count of %d over %d zero bytes decoded", c.name, n, pad)
			}
			if alloc > 16*uint64(len(b)) {
				t.Errorf("%s: count %d: a %d-byte record allocated %d bytes, more than 16 times its size",
					c.name, n, len(b), alloc)
			}
		}
	}
}

// FuzzDecodeRecord: hostile bytes in the state file give an error, never a panic, and a binary
// record that decodes encodes to one that decodes to the same session.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeSession(fullSession()))
	f.Add(jsonRecord(fullSession()))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeStored(b)
		if err != nil || b[0] != recordBinary {
			return
		}
		again, err := decodeStored(encodeSession(s))
		if err != nil {
			t.Fatalf("re-encoded record: %v", err)
		}
		if !reflect.DeepEqual(again, s) {
			t.Fatalf("re-encoded record decoded to\n%+v, want\n%+v", again, s)
		}
	})
}
