package nfwatch

import (
	"encoding/binary"
	"net/netip"
	"reflect"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// tupleAttr is a CTA_TUPLE_ORIG or CTA_TUPLE_REPLY (typ) of t, as conntrack sends it.
func tupleAttr(typ int, t Tuple) *nl.RtAttr {
	port := func(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }
	a := nl.NewRtAttr(typ|int(nl.NLA_F_NESTED), nil)
	ip := a.AddRtAttr(nl.CTA_TUPLE_IP|int(nl.NLA_F_NESTED), nil)
	ip.AddRtAttr(nl.CTA_IP_V4_SRC, t.Src.AsSlice())
	ip.AddRtAttr(nl.CTA_IP_V4_DST, t.Dst.AsSlice())
	proto := a.AddRtAttr(nl.CTA_TUPLE_PROTO|int(nl.NLA_F_NESTED), nil)
	proto.AddRtAttr(nl.CTA_PROTO_NUM, []byte{t.Proto})
	proto.AddRtAttr(nl.CTA_PROTO_SRC_PORT, port(t.SrcPort))
	proto.AddRtAttr(nl.CTA_PROTO_DST_PORT, port(t.DstPort))
	return a
}

// ctDestroy is the conntrack event of a connection going, of family family.
func ctDestroy(family byte, orig, reply Tuple) syscall.NetlinkMessage {
	data := []byte{family, nl.NFNETLINK_V0, 0, 0}
	data = append(data, tupleAttr(nl.CTA_TUPLE_ORIG, orig).Serialize()...)
	data = append(data, tupleAttr(nl.CTA_TUPLE_REPLY, reply).Serialize()...)
	return syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: ctDelete}, Data: data}
}

func TestParse(t *testing.T) {
	a, b, nat := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("192.0.2.1")
	orig := Tuple{Src: a, Dst: b, SrcPort: 40000, DstPort: 443, Proto: unix.IPPROTO_TCP}
	reply := Tuple{Src: b, Dst: nat, SrcPort: 443, DstPort: 1024, Proto: unix.IPPROTO_TCP}
	icmp := Tuple{Src: a, Dst: b, Proto: unix.IPPROTO_ICMP}
	nft := syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWGEN}}
	for _, c := range []struct {
		name string
		msgs []syscall.NetlinkMessage
		want Events
	}{
		{"a connection gone", []syscall.NetlinkMessage{ctDestroy(unix.AF_INET, orig, reply)}, Events{Gone: []Tuple{orig, reply}}},
		{"ruleset changed", []syscall.NetlinkMessage{nft}, Events{Ruleset: true}},
		{"both", []syscall.NetlinkMessage{ctDestroy(unix.AF_INET, orig, reply), nft}, Events{Ruleset: true, Gone: []Tuple{orig, reply}}},
		{"ICMP: nothing cached", []syscall.NetlinkMessage{ctDestroy(unix.AF_INET, icmp, icmp)}, Events{}},
		{"IPv6: nothing cached", []syscall.NetlinkMessage{ctDestroy(unix.AF_INET6, orig, reply)}, Events{}},
	} {
		if got := parse(c.msgs); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestParseCutShort: every prefix of a message parses without a panic, and yields no tuple
// with a missing address.
func TestParseCutShort(t *testing.T) {
	m := ctDestroy(unix.AF_INET, Tuple{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: unix.IPPROTO_UDP},
		Tuple{Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.0.0.1"), Proto: unix.IPPROTO_UDP})
	full := m.Data
	for n := range len(full) {
		m.Data = full[:n]
		for _, tu := range parse([]syscall.NetlinkMessage{m}).Gone {
			if !tu.Src.IsValid() || !tu.Dst.IsValid() {
				t.Errorf("%d bytes: tuple %+v without an address", n, tu)
			}
		}
	}
}
