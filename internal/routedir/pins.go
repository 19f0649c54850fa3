package routedir

import (
	"net/netip"
	"slices"
	"sync/atomic"
)

// Pins are addresses whose next hop the table keeps resolved in a word of its own, for the
// datapath to read instead of walking the words: a tunnel's peer (a gNB), which every packet
// of a FAR goes to. The datapath finds a pin's index in the FAR and reads one word, the
// address (as on the wire, the low half of the little-endian word) and the slot of its
// longest prefix (the high half); it uses the slot only if the address is the FAR's peer, so
// an index that was unpinned and given to another address, or left by an earlier run, sends
// it back to the words, never to another peer's next hop. Word 0 is never a pin.
//
// Put and Delete repoint the pins inside the prefix they change after its words and before
// its old slot is released, so a pin never names a slot that rests or is reused, and a
// change is in the pins when it is in the words.
type pins struct {
	words []uint64
	index map[uint32]uint32 // pinned address -> its word
	refs  map[uint32]int    // pinned address -> how many asked for it
	addrs []uint32          // the pinned addresses, sorted, to find those inside a prefix
	free  []uint32          // words unpinned
	next  uint32            // next word never used
}

// MaxPins bounds the pin words: an index fits in 16 bits (struct far's nh_pin).
const MaxPins = 1 << 16

// SetPins gives the table the pin words (the datapath's array, mapped). Their earlier
// contents are cleared: what an earlier run pinned is not known here, and a FAR whose pin no
// longer holds its peer reads the words instead.
func (t *Table) SetPins(words []uint64) {
	if len(words) > MaxPins {
		words = words[:MaxPins]
	}
	for i := range words {
		atomic.StoreUint64(&words[i], 0)
	}
	t.pins = pins{words: words, index: map[uint32]uint32{}, refs: map[uint32]int{}, next: 1}
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
	switch {
	case len(p.free) > 0:
		i, p.free = p.free[len(p.free)-1], p.free[:len(p.free)-1]
	case int(p.next) < len(p.words):
		i, p.next = p.next, p.next+1
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
	if at, found := slices.BinarySearch(p.addrs, x); found {
		p.addrs = slices.Delete(p.addrs, at, at+1)
	}
	atomic.StoreUint64(&p.words[i], 0)
	p.free = append(p.free, i)
}

// Pinned returns the slot a's pin word names, and false if a is not pinned.
func (t *Table) Pinned(a netip.Addr) (uint32, bool) {
	i, ok := t.pins.index[addrOf(netip.PrefixFrom(a, 32))]
	if !ok {
		return 0, false
	}
	return uint32(atomic.LoadUint64(&t.pins.words[i]) >> 32), true
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

// repinOne writes word i: address x and the slot the words give it.
func (t *Table) repinOne(x, i uint32) {
	s := t.Lookup(prefixOf(x, 32).Addr())
	// The address as on the wire, the first four bytes of the little-endian word.
	wire := uint64(x>>24) | uint64(x>>16&0xff)<<8 | uint64(x>>8&0xff)<<16 | uint64(x&0xff)<<24
	if w := wire | uint64(s)<<32; atomic.LoadUint64(&t.pins.words[i]) != w {
		atomic.StoreUint64(&t.pins.words[i], w)
	}
}
