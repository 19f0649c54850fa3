package datapath

import (
	"reflect"
	"testing"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/meter"
	"github.com/xupf/xupf/internal/policer"
)

// TestClassifierFieldOrder: internal/classifier numbers its fields as enum cls_field does in
// bpf/lib/classifier.h, and its directions as enum direction; the tables it compiles are
// written by those numbers.
func TestClassifierFieldOrder(t *testing.T) {
	pairs := []struct {
		goIndex int
		c       xupfClsField
	}{
		{classifier.FieldDirection, xupfClsFieldCLS_DIRECTION},
		{classifier.FieldSrcMAC, xupfClsFieldCLS_SRC_MAC},
		{classifier.FieldDstMAC, xupfClsFieldCLS_DST_MAC},
		{classifier.FieldEtherType, xupfClsFieldCLS_ETHERTYPE},
		{classifier.FieldProtocol, xupfClsFieldCLS_PROTO},
		{classifier.FieldSrcIP, xupfClsFieldCLS_SRC_IP},
		{classifier.FieldDstIP, xupfClsFieldCLS_DST_IP},
		{classifier.FieldSrcPort, xupfClsFieldCLS_SRC_PORT},
		{classifier.FieldDstPort, xupfClsFieldCLS_DST_PORT},
		{classifier.NumFields, xupfClsFieldCLS_FIELD_MAX},
	}
	for _, p := range pairs {
		if p.goIndex != int(p.c) {
			t.Errorf("classifier field %d is %d in classifier.h", p.goIndex, p.c)
		}
	}
	if classifier.DirUplink != int(xupfDirectionDIR_UPLINK) || classifier.DirDownlink != int(xupfDirectionDIR_DOWNLINK) {
		t.Errorf("classifier directions %d/%d, enum direction %d/%d", classifier.DirUplink, classifier.DirDownlink,
			xupfDirectionDIR_UPLINK, xupfDirectionDIR_DOWNLINK)
	}
	if n := int(xupfClsLayoutCLS_CHUNKS) * clsChunkWords * 64; classifier.MaxClasses != n {
		t.Errorf("classifier.MaxClasses %d, datapath vectors hold %d", classifier.MaxClasses, n)
	}
}

// TestMeterMatchesC: internal/meter's algorithms are enum meter_algo's and internal/policer's
// actions enum police_action's; meter.State is struct meter's fields but the lock and the
// policer's action, each of which meterEntry copies.
func TestMeterMatchesC(t *testing.T) {
	for _, p := range []struct {
		algo meter.Algo
		c    xupfMeterAlgo
	}{
		{meter.TokenBucket, xupfMeterAlgoMETER_TOKEN_BUCKET},
		{meter.SlidingWindow, xupfMeterAlgoMETER_SLIDING_WINDOW},
		{meter.FixedWindow, xupfMeterAlgoMETER_FIXED_WINDOW},
	} {
		if uint32(p.algo) != uint32(p.c) {
			t.Errorf("meter algo %d is %d in meter.h", p.algo, p.c)
		}
	}
	for _, p := range []struct {
		a policer.Action
		c xupfPoliceAction
	}{
		{policer.Pass, xupfPoliceActionPOLICE_PASS},
		{policer.Drop, xupfPoliceActionPOLICE_DROP},
		{policer.Limit, xupfPoliceActionPOLICE_LIMIT},
	} {
		if uint32(p.a) != uint32(p.c) {
			t.Errorf("policer action %v is %d in policer.h", p.a, p.c)
		}
	}
	st := reflect.TypeOf(meter.State{})
	var c []string
	for f := range reflect.TypeOf(xupfMeter{}).Fields() {
		if f.Name != "_" && f.Name != "Lock" && f.Name != "Action" {
			c = append(c, f.Name)
		}
	}
	if st.NumField() != len(c) {
		t.Fatalf("meter.State has %d fields, struct meter %d: %v", st.NumField(), len(c), c)
	}
	// Every field set to a distinct value comes through meterEntry.
	var s meter.State
	sv := reflect.ValueOf(&s).Elem()
	for i := range sv.NumField() {
		if sv.Field(i).Kind() == reflect.Int64 {
			sv.Field(i).SetInt(int64(i + 1))
		} else {
			sv.Field(i).SetUint(uint64(i + 1))
		}
	}
	e := reflect.ValueOf(meterEntry(s))
	for i := range sv.NumField() {
		name := st.Field(i).Name
		if got, want := e.FieldByName(name).Interface(), sv.Field(i).Interface(); got != want {
			t.Errorf("meterEntry: %s is %v, want %v", name, got, want)
		}
	}
}
