package pfcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/xupf/xupf/internal/sdf"
)

// recordBinary is the first byte of a session record in the compact binary form
// (encodeSession). Records of earlier versions are JSON objects (storedSession), which start
// with '{': decodeStored tells the two apart by this byte. A change to the layout below
// takes a new first byte, and the decoder keeps reading the older ones.
const recordBinary = 0x01

// encodeSession is s's record for the state file: every field of the model, the parsed SDF
// filters, which FARs were given a Destination Interface, and the digest of the
// establishment request. Integers are varints, strings and lists carry their length first,
// optional values (pointers, zero times) a presence byte. It costs a fraction of the JSON
// form, which a session's establishment pays on every request.
func encodeSession(s *Session) []byte {
	e := recordWriter(make([]byte, 0, 256))
	e = append(e, recordBinary)
	e.uint(s.SEID)
	e.uint(s.CPSEID)
	e.addr(s.CPAddress)
	e.string(s.Peer)
	e.time(s.Established)
	e = binary.BigEndian.AppendUint64(e, s.request)
	writeRules(&e, s.PDRs, (*recordWriter).pdr)
	writeRules(&e, s.FARs, (*recordWriter).far)
	writeRules(&e, s.QERs, (*recordWriter).qer)
	writeRules(&e, s.URRs, (*recordWriter).urr)
	writeRules(&e, s.BARs, (*recordWriter).bar)
	return e
}

// writeRules writes a count and the rules, in the map's order (the ids are in the rules).
func writeRules[K comparable, V any](e *recordWriter, m map[K]*V, rule func(*recordWriter, *V)) {
	e.uint(uint64(len(m)))
	for _, r := range m {
		rule(e, r)
	}
}

// recordWriter appends a record's fields.
type recordWriter []byte

func (e *recordWriter) uint(v uint64) { *e = binary.AppendUvarint(*e, v) }
func (e *recordWriter) int(v int64)   { *e = binary.AppendVarint(*e, v) }
func (e *recordWriter) byte(v uint8)  { *e = append(*e, v) }

func (e *recordWriter) bool(v bool) {
	if v {
		e.byte(1)
	} else {
		e.byte(0)
	}
}

func (e *recordWriter) string(v string) {
	e.uint(uint64(len(v)))
	*e = append(*e, v...)
}

func (e *recordWriter) bytes(v []byte) {
	e.uint(uint64(len(v)))
	*e = append(*e, v...)
}

// addr is an address as its length (0, 4 or 16) and bytes; a zone is not kept.
func (e *recordWriter) addr(a netip.Addr) {
	e.byte(uint8(a.BitLen() / 8))
	*e = append(*e, a.AsSlice()...)
}

func (e *recordWriter) prefix(p netip.Prefix) {
	e.addr(p.Addr())
	if p.IsValid() {
		e.byte(uint8(p.Bits()))
	}
}

// time is a presence byte and, for a non-zero time, its Unix seconds and nanoseconds.
func (e *recordWriter) time(t time.Time) {
	e.bool(!t.IsZero())
	if !t.IsZero() {
		e.int(t.Unix())
		e.uint(uint64(t.Nanosecond()))
	}
}

func (e *recordWriter) ids(ids []uint32) {
	e.uint(uint64(len(ids)))
	for _, id := range ids {
		e.uint(uint64(id))
	}
}

func (e *recordWriter) pdr(p *PDR) {
	e.uint(uint64(p.ID))
	e.uint(uint64(p.Precedence))
	e.byte(p.SourceInterface)
	e.bool(p.FTEID != nil)
	if f := p.FTEID; f != nil {
		e.uint(uint64(f.TEID))
		e.addr(f.Addr)
		e.bool(f.Chosen)
		e.byte(f.ChooseID)
	}
	e.addr(p.UE)
	e.bool(p.UEChosen)
	e.string(p.NetworkInstance)
	e.byte(p.QFI)
	e.uint(uint64(len(p.SDF)))
	for _, f := range p.SDF {
		e.sdf(f)
	}
	e.bool(p.OuterHeaderRemoval != nil)
	if p.OuterHeaderRemoval != nil {
		e.byte(*p.OuterHeaderRemoval)
	}
	e.uint(uint64(p.FAR))
	e.ids(p.QERs)
	e.ids(p.URRs)
}

func (e *recordWriter) sdf(f SDF) {
	e.string(f.FlowDescription)
	e.filter(f.Filter)
}

func (e *recordWriter) filter(f sdf.Filter) {
	e.int(int64(f.Protocol))
	e.prefix(f.Remote)
	e.prefix(f.Local)
	for _, ports := range [][]sdf.PortRange{f.RemotePorts, f.LocalPorts} {
		e.uint(uint64(len(ports)))
		for _, r := range ports {
			e.ports(r)
		}
	}
	e.byte(f.TOSValue)
	e.byte(f.TOSMask)
	e.uint(uint64(f.SPI))
	e.bool(f.HasSPI)
	e.uint(uint64(f.FlowLabel))
	e.bool(f.HasFlowLabel)
	e.bool(f.IPv6)
}

func (e *recordWriter) ports(r sdf.PortRange) {
	e.uint(uint64(r.First))
	e.uint(uint64(r.Last))
}

func (e *recordWriter) far(f *FAR) {
	e.uint(uint64(f.ID))
	e.byte(f.Apply)
	e.byte(f.DestinationInterface)
	e.string(f.NetworkInstance)
	e.bool(f.OHC != nil)
	if o := f.OHC; o != nil {
		e.uint(uint64(o.Description))
		e.uint(uint64(o.TEID))
		e.addr(o.Peer)
	}
	e.bool(f.TLM != nil)
	if f.TLM != nil {
		e.uint(uint64(*f.TLM))
	}
	e.bool(f.BARID != nil)
	if f.BARID != nil {
		e.byte(*f.BARID)
	}
	e.bool(f.hasDestination)
}

func (e *recordWriter) qer(q *QER) {
	e.uint(uint64(q.ID))
	e.byte(q.GateUL)
	e.byte(q.GateDL)
	for _, v := range []uint64{q.MBRUL, q.MBRDL, q.GBRUL, q.GBRDL} {
		e.uint(v)
	}
	e.byte(q.QFI)
}

func (e *recordWriter) urr(u *URR) {
	e.uint(uint64(u.ID))
	e.byte(u.Method)
	e.bytes(u.Triggers)
	e.byte(u.MeasurementInformation)
	for _, v := range []uint64{u.VolumeThreshold, u.VolumeQuota, u.VolumeThresholdUL, u.VolumeThresholdDL,
		u.VolumeQuotaUL, u.VolumeQuotaDL} {
		e.uint(v)
	}
	e.byte(u.VolumeQuotaFlags)
	for _, v := range []uint32{u.TimeThreshold, u.TimeQuota, u.MeasurementPeriod, u.QuotaHoldingTime,
		u.QuotaValidityTime, u.InactivityTime} {
		e.uint(uint64(v))
	}
	e.byte(u.DroppedThresholdFlags)
	e.uint(u.DroppedPackets)
	e.uint(u.DroppedBytes)
	e.ids(u.LinkedURRs)
	e.bool(u.QuotaFAR != nil)
	if u.QuotaFAR != nil {
		e.uint(uint64(*u.QuotaFAR))
	}
	e.uint(u.Grant)
	e.uint(u.QuotaUsedUp)
	e.time(u.MonitoringTime)
	e.subsequent(u.Subsequent)
	e.uint(uint64(len(u.Additional)))
	for _, m := range u.Additional {
		e.monitoring(m)
	}
}

func (e *recordWriter) monitoring(m Monitoring) {
	e.time(m.Time)
	e.subsequent(m.Subsequent)
}

func (e *recordWriter) subsequent(s Subsequent) {
	e.byte(s.VolumeThresholdFlags)
	e.uint(s.VolumeThreshold)
	e.uint(s.VolumeThresholdUL)
	e.uint(s.VolumeThresholdDL)
	e.byte(s.VolumeQuotaFlags)
	e.uint(s.VolumeQuota)
	e.uint(s.VolumeQuotaUL)
	e.uint(s.VolumeQuotaDL)
	e.uint(uint64(s.TimeThreshold))
	e.uint(uint64(s.TimeQuota))
}

func (e *recordWriter) bar(b *BAR) {
	e.byte(b.ID)
	e.byte(b.NotificationDelay)
	e.byte(b.SuggestedPackets)
	e.bool(b.BufferingDuration != nil)
	if b.BufferingDuration != nil {
		e.int(int64(*b.BufferingDuration))
	}
	e.bool(b.BufferingPackets != nil)
	if b.BufferingPackets != nil {
		e.uint(uint64(*b.BufferingPackets))
	}
	e.time(b.BufferingUntil)
}

// The fewest bytes each kind of list element takes in a record: its zero value's encoding,
// as every field's shortest form is its zero's. A count is bounded by the bytes left over
// these, so a hostile count allocates no more than a genuine record of that length would.
var (
	minPDR        = encodedLen(func(e *recordWriter) { e.pdr(&PDR{}) })
	minFAR        = encodedLen(func(e *recordWriter) { e.far(&FAR{}) })
	minQER        = encodedLen(func(e *recordWriter) { e.qer(&QER{}) })
	minURR        = encodedLen(func(e *recordWriter) { e.urr(&URR{}) })
	minBAR        = encodedLen(func(e *recordWriter) { e.bar(&BAR{}) })
	minSDF        = encodedLen(func(e *recordWriter) { e.sdf(SDF{}) })
	minPorts      = encodedLen(func(e *recordWriter) { e.ports(sdf.PortRange{}) })
	minID         = encodedLen(func(e *recordWriter) { e.uint(0) })
	minMonitoring = encodedLen(func(e *recordWriter) { e.monitoring(Monitoring{}) })
)

func encodedLen(write func(*recordWriter)) int {
	var e recordWriter
	write(&e)
	return len(e)
}

// errShortRecord is what a record cut short gives.
var errShortRecord = errors.New("record ends too early")

// decodeSession is the session a binary record (encodeSession, without its first byte)
// holds. Hostile bytes give an error, never a panic or an allocation out of proportion to
// the record: every count is checked against how many elements the bytes left can hold.
func decodeSession(b []byte) (*Session, error) {
	d := &recordReader{b: b}
	s := &Session{SEID: d.uint(math.MaxUint64), CPSEID: d.uint(math.MaxUint64), CPAddress: d.addr(),
		Peer: d.string(), Established: d.time()}
	if len(d.b) >= 8 && d.err == nil {
		s.request, d.b = binary.BigEndian.Uint64(d.b), d.b[8:]
	} else {
		d.fail(errShortRecord)
	}
	s.PDRs = rulesOf(d, "PDR", minPDR, (*recordReader).pdr, func(p *PDR) uint16 { return p.ID })
	s.FARs = rulesOf(d, "FAR", minFAR, (*recordReader).far, func(f *FAR) uint32 { return f.ID })
	s.QERs = rulesOf(d, "QER", minQER, (*recordReader).qer, func(q *QER) uint32 { return q.ID })
	s.URRs = rulesOf(d, "URR", minURR, (*recordReader).urr, func(u *URR) uint32 { return u.ID })
	s.BARs = rulesOf(d, "BAR", minBAR, (*recordReader).bar, func(b *BAR) uint8 { return b.ID })
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Errorf("%d bytes after the record", len(d.b)))
	}
	return s, d.err
}

// rulesOf reads a count and that many rules, each at least minLen bytes, into a map by
// their ids.
func rulesOf[K comparable, V any](d *recordReader, kind string, minLen int, rule func(*recordReader) *V, id func(*V) K) map[K]*V {
	n := d.count(minLen)
	m := make(map[K]*V, n)
	for range n {
		r := rule(d)
		if d.err != nil {
			return m
		}
		if _, dup := m[id(r)]; dup {
			d.fail(fmt.Errorf("%s %v: saved twice", kind, id(r)))
			return m
		}
		m[id(r)] = r
	}
	return m
}

// recordReader reads a record's fields; the first error sticks and makes every later read
// return zero.
type recordReader struct {
	b   []byte
	err error
}

func (d *recordReader) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

// uint is a varint no larger than limit.
func (d *recordReader) uint(limit uint64) uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShortRecord)
		return 0
	}
	d.b = d.b[n:]
	if v > limit {
		d.fail(fmt.Errorf("value %d out of range (at most %d)", v, limit))
		return 0
	}
	return v
}

func (d *recordReader) int() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShortRecord)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *recordReader) u32() uint32 { return uint32(d.uint(math.MaxUint32)) }
func (d *recordReader) u16() uint16 { return uint16(d.uint(math.MaxUint16)) }

func (d *recordReader) byte() uint8 {
	if len(d.b) == 0 {
		d.fail(errShortRecord)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *recordReader) bool() bool {
	switch v := d.byte(); v {
	case 0, 1:
		return v == 1
	default:
		d.fail(fmt.Errorf("flag %d is neither 0 nor 1", v))
		return false
	}
}

// next is the next n bytes.
func (d *recordReader) next(n uint64) []byte {
	if n > uint64(len(d.b)) {
		d.fail(errShortRecord)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

// count is the length of a list whose elements take at least minLen bytes each (the min*
// sizes above): a longer list than the bytes left can hold is damage, not a reason to
// allocate.
func (d *recordReader) count(minLen int) int { return int(d.uint(uint64(len(d.b) / minLen))) }

func (d *recordReader) string() string { return string(d.next(d.uint(math.MaxUint32))) }

func (d *recordReader) bytes() []byte {
	b := d.next(d.uint(math.MaxUint32))
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

func (d *recordReader) addr() netip.Addr {
	switch n := d.byte(); n {
	case 0:
		return netip.Addr{}
	case 4, 16:
		a, _ := netip.AddrFromSlice(d.next(uint64(n)))
		return a
	default:
		d.fail(fmt.Errorf("address of %d bytes", n))
		return netip.Addr{}
	}
}

func (d *recordReader) prefix() netip.Prefix {
	a := d.addr()
	if !a.IsValid() {
		return netip.Prefix{}
	}
	bits := int(d.byte())
	if bits > a.BitLen() {
		d.fail(fmt.Errorf("prefix %s/%d", a, bits))
		return netip.Prefix{}
	}
	return netip.PrefixFrom(a, bits)
}

func (d *recordReader) time() time.Time {
	if !d.bool() {
		return time.Time{}
	}
	sec, ns := d.int(), d.uint(999_999_999)
	return time.Unix(sec, int64(ns))
}

func (d *recordReader) ids() []uint32 {
	n := d.count(minID)
	if n == 0 {
		return nil
	}
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = d.u32()
	}
	return ids
}

// optional is a presence byte and, if present, the value read.
func optional[T any](d *recordReader, read func() T) *T {
	if !d.bool() {
		return nil
	}
	v := read()
	return &v
}

func (d *recordReader) pdr() *PDR {
	p := &PDR{ID: d.u16(), Precedence: d.u32(), SourceInterface: d.byte()}
	if d.bool() {
		p.FTEID = &FTEID{TEID: d.u32(), Addr: d.addr(), Chosen: d.bool(), ChooseID: d.byte()}
	}
	p.UE, p.UEChosen, p.NetworkInstance, p.QFI = d.addr(), d.bool(), d.string(), d.byte()
	if n := d.count(minSDF); n > 0 {
		p.SDF = make([]SDF, n)
		for i := range p.SDF {
			p.SDF[i] = SDF{FlowDescription: d.string(), Filter: d.filter()}
		}
	}
	p.OuterHeaderRemoval = optional(d, d.byte)
	p.FAR, p.QERs, p.URRs = d.u32(), d.ids(), d.ids()
	return p
}

func (d *recordReader) filter() sdf.Filter {
	f := sdf.Filter{Protocol: int(d.int()), Remote: d.prefix(), Local: d.prefix()}
	for _, ports := range []*[]sdf.PortRange{&f.RemotePorts, &f.LocalPorts} {
		if n := d.count(minPorts); n > 0 {
			*ports = make([]sdf.PortRange, n)
			for i := range *ports {
				(*ports)[i] = sdf.PortRange{First: d.u16(), Last: d.u16()}
			}
		}
	}
	f.TOSValue, f.TOSMask = d.byte(), d.byte()
	f.SPI, f.HasSPI = d.u32(), d.bool()
	f.FlowLabel, f.HasFlowLabel = d.u32(), d.bool()
	f.IPv6 = d.bool()
	return f
}

func (d *recordReader) far() *FAR {
	f := &FAR{ID: d.u32(), Apply: d.byte(), DestinationInterface: d.byte(), NetworkInstance: d.string()}
	if d.bool() {
		f.OHC = &OHC{Description: d.u16(), TEID: d.u32(), Peer: d.addr()}
	}
	f.TLM = optional(d, d.u16)
	f.BARID = optional(d, d.byte)
	f.hasDestination = d.bool()
	return f
}

func (d *recordReader) qer() *QER {
	return &QER{ID: d.u32(), GateUL: d.byte(), GateDL: d.byte(), MBRUL: d.u64(), MBRDL: d.u64(),
		GBRUL: d.u64(), GBRDL: d.u64(), QFI: d.byte()}
}

func (d *recordReader) u64() uint64 { return d.uint(math.MaxUint64) }

func (d *recordReader) urr() *URR {
	u := &URR{ID: d.u32(), Method: d.byte(), Triggers: d.bytes(), MeasurementInformation: d.byte(),
		VolumeThreshold: d.u64(), VolumeQuota: d.u64(), VolumeThresholdUL: d.u64(), VolumeThresholdDL: d.u64(),
		VolumeQuotaUL: d.u64(), VolumeQuotaDL: d.u64(), VolumeQuotaFlags: d.byte(),
		TimeThreshold: d.u32(), TimeQuota: d.u32(), MeasurementPeriod: d.u32(), QuotaHoldingTime: d.u32(),
		QuotaValidityTime: d.u32(), InactivityTime: d.u32(),
		DroppedThresholdFlags: d.byte(), DroppedPackets: d.u64(), DroppedBytes: d.u64(), LinkedURRs: d.ids()}
	u.QuotaFAR = optional(d, d.u32)
	u.Grant, u.QuotaUsedUp = d.u64(), d.u64()
	u.MonitoringTime, u.Subsequent = d.time(), d.subsequent()
	if n := d.count(minMonitoring); n > 0 {
		u.Additional = make([]Monitoring, n)
		for i := range u.Additional {
			u.Additional[i] = Monitoring{Time: d.time(), Subsequent: d.subsequent()}
		}
	}
	return u
}

func (d *recordReader) subsequent() Subsequent {
	return Subsequent{VolumeThresholdFlags: d.byte(), VolumeThreshold: d.u64(), VolumeThresholdUL: d.u64(),
		VolumeThresholdDL: d.u64(), VolumeQuotaFlags: d.byte(), VolumeQuota: d.u64(), VolumeQuotaUL: d.u64(),
		VolumeQuotaDL: d.u64(), TimeThreshold: d.u32(), TimeQuota: d.u32()}
}

func (d *recordReader) bar() *BAR {
	b := &BAR{ID: d.byte(), NotificationDelay: d.byte(), SuggestedPackets: d.byte()}
	b.BufferingDuration = optional(d, func() time.Duration { return time.Duration(d.int()) })
	b.BufferingPackets = optional(d, d.u16)
	b.BufferingUntil = d.time()
	return b
}
