package datapath

import (
	"testing"

	"github.com/xupf/xupf/internal/classifier"
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
	if classifier.MaxClasses != len(xupfClsVec{}.W)*64 {
		t.Errorf("classifier.MaxClasses %d, datapath vectors hold %d", classifier.MaxClasses, len(xupfClsVec{}.W)*64)
	}
}
