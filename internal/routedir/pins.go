package routedir

import (
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/xupf/xupf/internal/router"
)

// Pins are addresses whose next hop the table keeps resolved in an entry of its own, for the
// datapath to read instead of walking the words: a tunnel's peer (a gNB), which every packet
// of a FAR goes to. An entry is PinWords words, one cache line (struct nh_pin): its word and
// two copies of a next hop. The word holds the address (as on the wire, the low half of the
// little-endian word) and, in its high half, the slot of the address's longest prefix and which
// copy holds that slot's next hop; the datapath reads the word, then the copy it names, and
// uses it only if the address is the FAR's peer, so an entry that was unpinned and given to
// another address, or left by an earlier run, sends it back to the words, never to another
// peer's next hop. Entry 0 is never a pin.
//
// A changed next hop is written to the copy the word does not name, then the word is stored
// with one atomic store that names it: a packet reads the copy its word named, whole. A copy
// is written only once grace has passed since the word last named it, as a slot rests before
// reuse (pool), so a packet that read the word before the change has long finished with it.
// A change within grace never waits, as it runs under the lock PFCP installs and the router's
// netlink reader take: the word is stored 0 (the packets walk the words, which already hold
// the change) and the entry is due; SettlePins, which the table's owner runs once the wait
// given to wake has passed, writes the rested copy and names it.
//
// Put and Delete repoint the pins inside the prefix they change after its words and before
// its old slot is released, so a change is in the pins when it is in the words.
type pins struct {
	words   []uint64
	encode  func(router.Nexthop) [CopyWords]uint64
	named   []uint8           // per entry: the copy its word names, or last named
	changed []time.Time       // per entry: when its word last changed
	index   map[uint32]uint32 // pinned address -> its entry
	refs    map[uint32]int    // pinned address -> how many asked for it
	addrs   []uint32          // the pinned addresses, sorted, to find those inside a prefix
	free    []uint32          // entries unpinned
	next    uint32            // next entry never used
	due     map[uint32]bool   // pinned addresses whose word is 0 until a copy rests
	armed   bool              // wake was called and SettlePins has not run since
	wake    func(time.Duration)
	now     func() time.Time
}

// The layout of a pin entry in words (struct nh_pin): the word, then two copies of a next hop
// of CopyWords words each (struct nexthop), then padding to a cache line.
const (
	PinWords  = 8
	CopyWords = 3
)

// MaxPins bounds the pin entries: an index fits in 16 bits (struct far's nh_pin).
const MaxPins = 1 << 16

// SetPins gives the table the pin entries (the datapath's array, mapped, PinWords words
// each), how a next hop is laid out in a copy (struct nexthop) and wake, which must have
// SettlePins run (under the table's lock, not from within wake) after the wait it is given.
// Their earlier contents are cleared: what an earlier run pinned is not known here, and a
// FAR whose pin no longer holds its peer reads the words instead. Only the words are
// cleared: the copies rest from then on like any copy a word stopped naming, as the earlier
// run's program may still be reading one.
func (t *Table) SetPins(words []uint64, encode func(router.Nexthop) [CopyWords]uint64, wake func(time.Duration)) {
	n := min(len(words)/PinWords, MaxPins)
	words = words[:n*PinWords]
	for i := range n {
		atomic.StoreUint64(&words[i*PinWords], 0)
	}
	t.pins = pins{words: words, encode: encode, named: make([]uint8, n), changed: make([]time.Time, n),
		index: map[uint32]uint32{}, refs: map[uint32]int{}, next: 1, due: map[uint32]bool{}, wake: wake, now: time.Now}
	t.pins.rest(time.Now())
}

// rest counts every entry's copies as named until at.
func (p *pins) rest(at time.Time) {
	for i := range p.changed {
		p.changed[i] = at
	}
}

// Pin returns the index of a's pin word, pinning it if it is not yet (each Pin is matched
// by an Unpin). It returns 0, no pin, when a is not IPv4 or all words are in use: the
// datapath then reads the words for a, which costs a few nanoseconds more and is as correct.
func (t *Table) Pin(a netip.Addr) uint32 {
	p := &t.pins
	if !a.Is4() || p.words == nil {
		return 0
	}
	x := addrOf(netip.PrefixFrom(a, 32))
	if i, ok := p.index[x]; ok {
		p.refs[x]++
		return i
	}
	var i uint32
	switch { // entries never used first: a freed one's copies may have to rest (repinOne)
	case int(p.next) < len(p.named):
		i, p.next = p.next, p.next+1
	case len(p.free) > 0:
		i, p.free = p.free[len(p.free)-1], p.free[:len(p.free)-1]
	default:
		return 0
	}
	p.index[x], p.refs[x] = i, 1
	at, _ := slices.BinarySearch(p.addrs, x)
	p.addrs = slices.Insert(p.addrs, at, x)
	t.repinOne(x, i)
	return i
}

// Unpin drops one Pin of a; the last one frees its word.
func (t *Table) Unpin(a netip.Addr) {
	p := &t.pins
	if !a.Is4() {
		return
	}
	x := addrOf(netip.PrefixFrom(a, 32))
	i, ok := p.index[x]
	if !ok {
		return
	}
	if p.refs[x]--; p.refs[x] > 0 {
		return
	}
	delete(p.index, x)
	delete(p.refs, x)
	delete(p.due, x)
	if at, found := slices.BinarySearch(p.addrs, x); found {
		p.addrs = slices.Delete(p.addrs, at, at+1)
	}
	atomic.StoreUint64(&p.words[i*PinWords], 0)
	p.changed[i] = p.now()
	p.free = append(p.free, i)
}

// Pinned returns the slot a's pin word names and the copy of its next hop the datapath
// reads, and false if a is not pinned.
func (t *Table) Pinned(a netip.Addr) (uint32, [CopyWords]uint64, bool) {
	var c [CopyWords]uint64
	i, ok := t.pins.index[addrOf(netip.PrefixFrom(a, 32))]
	if !ok {
		return 0, c, false
	}
	e := t.pins.words[i*PinWords : (i+1)*PinWords]
	w := atomic.LoadUint64(&e[0])
	for k := range c {
		c[k] = atomic.LoadUint64(&e[1+int(w>>32&1)*CopyWords+k])
	}
	return uint32(w >> 33), c, true
}

// repin brings the pins inside a/bits to the words, after a/bits changed.
func (t *Table) repin(a uint32, bits int) {
	p := &t.pins
	if len(p.addrs) == 0 {
		return
	}
	first, _ := slices.BinarySearch(p.addrs, a)
	last := a | ^mask(bits)
	for _, x := range p.addrs[first:] {
		if x > last {
			break
		}
		t.repinOne(x, p.index[x])
	}
}

// repinOne writes entry i: address x, the slot the words give it and a copy of its next hop.
func (t *Table) repinOne(x, i uint32) {
	p := &t.pins
	s := t.Lookup(prefixOf(x, 32).Addr())
	// The address as on the wire, the first four bytes of the little-endian word.
	wire := uint64(x>>24) | uint64(x>>16&0xff)<<8 | uint64(x>>8&0xff)<<16 | uint64(x&0xff)<<24
	e := p.words[i*PinWords : (i+1)*PinWords]
	if atomic.LoadUint64(&e[0]) == wire|uint64(s)<<33|uint64(p.named[i])<<32 {
		delete(p.due, x)
		return
	}
	c := p.named[i] ^ 1
	if rest := grace - p.now().Sub(p.changed[i]); rest > 0 {
		// A packet may still read copy c: it was named less than grace ago.
		atomic.StoreUint64(&e[0], 0)
		p.due[x] = true
		if !p.armed {
			p.armed = true
			p.wake(rest)
		}
		return
	}
	for k, v := range p.encode(t.values[s]) {
		atomic.StoreUint64(&e[1+int(c)*CopyWords+k], v)
	}
	atomic.StoreUint64(&e[0], wire|uint64(s)<<33|uint64(c)<<32)
	p.named[i], p.changed[i] = c, p.now()
	delete(p.due, x)
}

// SettlePins names a rested copy in the words of due entries, and has wake called again
// for those whose copy has not rested yet.
func (t *Table) SettlePins() {
	p := &t.pins
	p.armed = false
	for x := range p.due {
		t.repinOne(x, p.index[x])
	}
}
