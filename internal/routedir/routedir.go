// Package routedir is the datapath's route table: the router's entries (prefix → next hop)
// compiled into a DIR-16-8-8 table of 32-bit words, laid out in the memory of a BPF array
// that the XDP program reads (bpf/lib/route.h) while this package writes it.
//
// The first L1Entries words are indexed by a destination's top 16 bits. A word is either the
// index of a next-hop slot (0: no entry) or, with ChunkFlag, the number of a chunk of
// ChunkEntries words indexed by the next 8 bits; a chunk's word is again a slot or a chunk,
// for the last 8 bits. So a lookup reads at most three words and a slot, whatever the number
// of routes, where an LPM trie walks a node per prefix length.
//
// Next-hop slots are immutable: a changed next hop is written to a fresh slot (a syscall,
// before any word points at it), the words are repointed, and the old slot rests before it
// is reused (see pool). A word is written with one aligned 32-bit store, which no Go target
// splits, so a packet reads it whole; plain stores, as an atomic store (a full barrier on
// amd64) costs ten times as much and a default route's change rewrites 65,536 words. A new
// chunk is filled before the word that points at it is stored, atomically: that store is
// the barrier that makes the filling visible first. So a packet sees each word before or
// after a change, never half a next hop or half a chunk.
//
// A chunk exists where a prefix longer than its parent word's granularity does (/17-/24
// under a first-level word, /25-/32 under a second-level one); a change rewrites only the
// words of its prefix's range, in place, and allocates or frees at most two chunks.
//
// This package knows nothing of BPF: the datapath hands it the mapped words and the slots.
package routedir

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/xupf/xupf/internal/router"
)

const (
	// L1Entries is the first level's size: one word per /16 (ROUTE_L1_ENTRIES).
	L1Entries = 1 << 16
	// ChunkEntries is a chunk's size: one word per value of the next 8 bits
	// (ROUTE_CHUNK_ENTRIES).
	ChunkEntries = 1 << 8
	// ChunkFlag marks a word that holds a chunk number, not a slot (ROUTE_CHUNK).
	ChunkFlag = 1 << 31
	// MaxChunks bounds the chunk count so that a chunk number never reaches ChunkFlag.
	MaxChunks = (1<<31 - L1Entries) / ChunkEntries
)

// levelEnd is the prefix length each level's words stand for: /16, /24, /32.
var levelEnd = [3]int{16, 24, 32}

// Words returns how many words a table of chunks chunks takes.
func Words(chunks int) int { return L1Entries + chunks*ChunkEntries }

// Slots is where next hops live: an array the datapath reads by slot index.
type Slots interface {
	// Put writes slot, which no word points at.
	Put(slot uint32, nh router.Nexthop) error
	// Get reads slot (for a table an earlier run filled).
	Get(slot uint32) (router.Nexthop, error)
}

// ErrFull is returned when a limit is reached; the message names the limit to raise.
var ErrFull = errors.New("route table full")

// Limits are a table's sizes, and the configuration keys that set them (for errors).
type Limits struct {
	Routes, Chunks, Slots          int
	RoutesKey, ChunksKey, SlotsKey string
}

// Table is a DIR-16-8-8 route table over words. Writers must be serialised by the caller;
// the datapath may read the words at any time.
type Table struct {
	words []uint32
	slots Slots
	lim   Limits

	prefixes [33]map[uint32]uint32 // by length: the masked address → its slot
	count    [33]int               // prefixes of each length
	total    int
	// own is, for each word, the slot of the prefix of the word's own length (/16, /24, /32
	// by level) where the table has one: what a walk reads instead of a map lookup per word.
	own    []uint32
	deep16 []int32          // prefixes longer than /16 in each /16
	deep24 map[uint32]int32 // prefixes longer than /24 in each /24 (by address >> 8)

	values []router.Nexthop // by slot
	refs   []int32          // prefixes using each slot
	slotOf map[router.Nexthop]uint32
	chunkp *pool
	slotp  *pool
	pins   pins
}

// New returns the table over words (Words(lim.Chunks) of them) and lim.Slots next-hop
// slots. It takes over what an earlier run left in them: the entries keep forwarding, and
// Entries returns them as prefixes (the fewest that give the same answers), for the router
// to replace or delete.
func New(words []uint32, slots Slots, lim Limits) (*Table, error) {
	if lim.Chunks < 0 || lim.Chunks > MaxChunks || len(words) < Words(lim.Chunks) {
		return nil, fmt.Errorf("route table of %d chunks needs %d words, got %d", lim.Chunks, Words(lim.Chunks), len(words))
	}
	if lim.Slots < 2 || lim.Slots >= ChunkFlag {
		return nil, fmt.Errorf("route table: %d next-hop slots; %s must be 2 to %d", lim.Slots, lim.SlotsKey, ChunkFlag-1)
	}
	t := &Table{
		words: words[:Words(lim.Chunks)], slots: slots, lim: lim,
		own: make([]uint32, Words(lim.Chunks)), deep16: make([]int32, L1Entries), deep24: map[uint32]int32{},
		values: make([]router.Nexthop, lim.Slots), refs: make([]int32, lim.Slots),
		slotOf: map[router.Nexthop]uint32{},
		chunkp: newPool(0, uint32(lim.Chunks)),
		slotp:  newPool(1, uint32(lim.Slots)), // slot 0: no entry
	}
	for i := range t.prefixes {
		t.prefixes[i] = map[uint32]uint32{}
	}
	if err := t.takeOver(); err != nil {
		return nil, err
	}
	return t, nil
}

// mask returns the mask of a prefix length.
func mask(bits int) uint32 { return ^uint32(0) << (32 - bits) }

func addrOf(p netip.Prefix) uint32 {
	b := p.Addr().As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func prefixOf(a uint32, bits int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), bits)
}

// index returns the word of a's entry at level lvl in the array starting at base.
func index(a uint32, lvl, base int) int {
	if lvl == 0 {
		return int(a >> 16)
	}
	return base + int(a>>(32-levelEnd[lvl])&(ChunkEntries-1))
}

func chunkBase(w uint32) int { return L1Entries + int(w&^ChunkFlag)*ChunkEntries }

// Lookup returns the slot the datapath finds for a, reading the words as it does.
func (t *Table) Lookup(a netip.Addr) uint32 {
	x := addrOf(netip.PrefixFrom(a, 32))
	w := atomic.LoadUint32(&t.words[index(x, 0, 0)])
	for lvl := 1; w&ChunkFlag != 0; lvl++ {
		w = atomic.LoadUint32(&t.words[index(x, lvl, chunkBase(w))])
	}
	return w
}

// Nexthop returns slot's next hop.
func (t *Table) Nexthop(slot uint32) router.Nexthop { return t.values[slot] }

func check(p netip.Prefix) error {
	if !p.IsValid() || !p.Addr().Is4() || p.Masked() != p {
		return fmt.Errorf("route table: %s is not a masked IPv4 prefix", p)
	}
	return nil
}

// Put points p at nh.
func (t *Table) Put(p netip.Prefix, nh router.Nexthop) error {
	if err := check(p); err != nil {
		return err
	}
	a, bits := addrOf(p), p.Bits()
	old, had := t.prefixes[bits][a]
	if had && t.values[old] == nh {
		return nil
	}
	if !had {
		if t.total >= t.lim.Routes {
			return fmt.Errorf("%w: %d routes and neighbours' /32s; raise %s", ErrFull, t.total, t.lim.RoutesKey)
		}
		if need := t.chunksFor(a, bits); t.chunkp.available() < need {
			return fmt.Errorf("%w: %s needs %d more chunks and all %d are in use; raise %s",
				ErrFull, p, need, t.lim.Chunks, t.lim.ChunksKey)
		}
	}
	s, err := t.slotFor(nh)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	t.prefixes[bits][a] = s
	if !had {
		t.count[bits]++
		t.total++
		t.deepen(a, bits, 1)
	}
	t.setOwn(a, bits, s)
	t.refresh(a, bits)
	t.repin(a, bits)
	if had {
		t.unref(old)
	}
	return nil
}

// Delete removes p; removing a prefix the table does not hold is no error.
func (t *Table) Delete(p netip.Prefix) error {
	if err := check(p); err != nil {
		return err
	}
	a, bits := addrOf(p), p.Bits()
	old, had := t.prefixes[bits][a]
	if !had {
		return nil
	}
	delete(t.prefixes[bits], a)
	t.count[bits]--
	t.total--
	t.deepen(a, bits, -1)
	t.setOwn(a, bits, 0)
	t.refresh(a, bits)
	t.repin(a, bits)
	t.unref(old)
	return nil
}

// Entries returns every prefix and its next hop.
func (t *Table) Entries() map[netip.Prefix]router.Nexthop {
	out := map[netip.Prefix]router.Nexthop{}
	for bits, m := range t.prefixes {
		for a, s := range m {
			out[prefixOf(a, bits)] = t.values[s]
		}
	}
	return out
}

// Usage reports the chunks and slots in use, for memory accounting.
func (t *Table) Usage() (chunks, slots int) {
	return t.lim.Chunks - t.chunkp.available(), t.lim.Slots - 1 - t.slotp.available()
}

// chunksFor is how many chunks a new prefix a/bits may need: one per level it goes below
// whose word is no chunk yet.
func (t *Table) chunksFor(a uint32, bits int) int {
	need := 0
	w, lvl, base := uint32(0), 0, 0
	for lvl < 2 && bits > levelEnd[lvl] {
		if need == 0 {
			w = t.words[index(a, lvl, base)]
		}
		if need > 0 || w&ChunkFlag == 0 {
			need++
		} else {
			base = chunkBase(w)
		}
		lvl++
	}
	return need
}

// slotFor returns a slot holding nh, taking a reference: the one already holding it, or a
// fresh one written now.
func (t *Table) slotFor(nh router.Nexthop) (uint32, error) {
	if s, ok := t.slotOf[nh]; ok {
		t.refs[s]++
		return s, nil
	}
	s, ok := t.slotp.alloc()
	if !ok {
		return 0, fmt.Errorf("%w: all %d next-hop slots are in use; raise %s", ErrFull, t.lim.Slots-1, t.lim.SlotsKey)
	}
	if err := t.slots.Put(s, nh); err != nil {
		t.slotp.release(s)
		return 0, fmt.Errorf("write next-hop slot %d: %w", s, err)
	}
	t.values[s], t.refs[s], t.slotOf[nh] = nh, 1, s
	return s, nil
}

// unref drops a reference to slot s; the last one frees it, once no word points at it.
func (t *Table) unref(s uint32) {
	if t.refs[s]--; t.refs[s] > 0 {
		return
	}
	if t.slotOf[t.values[s]] == s {
		delete(t.slotOf, t.values[s])
	}
	t.slotp.release(s)
}

// deepen counts a prefix a/bits in (d 1) or out (d -1) of the regions it is deeper than.
func (t *Table) deepen(a uint32, bits int, d int32) {
	if bits > 16 {
		t.deep16[a>>16] += d
	}
	if bits > 24 {
		if t.deep24[a>>8] += d; t.deep24[a>>8] == 0 {
			delete(t.deep24, a>>8)
		}
	}
}

// setOwn records s as the own slot of a/bits's word, if bits is a level's length and the
// word exists (else the chunk it will be in reads it when it is made).
func (t *Table) setOwn(a uint32, bits int, s uint32) {
	lvl, base := 0, 0
	for lvl < 2 && bits > levelEnd[lvl] {
		w := t.words[index(a, lvl, base)]
		if w&ChunkFlag == 0 {
			return
		}
		lvl, base = lvl+1, chunkBase(w)
	}
	if bits == levelEnd[lvl] {
		t.own[index(a, lvl, base)] = s
	}
}

// fillOwn records the own slots of the words of a new chunk for the range a/levelEnd[lvl-1].
func (t *Table) fillOwn(a uint32, lvl, base int) {
	end := levelEnd[lvl]
	own := t.own[base : base+ChunkEntries]
	for j := range own {
		own[j] = t.prefixes[end][a|uint32(j)<<(32-end)]
	}
}

// needsChunk reports whether the word at level lvl for a points at a chunk.
func (t *Table) needsChunk(a uint32, lvl int) bool {
	switch lvl {
	case 0:
		return t.deep16[a>>16] > 0
	case 1:
		return t.deep24[a>>8] > 0
	}
	return false
}

// covering returns the slot of a's longest prefix shorter than bits, 0 if none.
func (t *Table) covering(a uint32, bits int) uint32 {
	for b := bits - 1; b >= 0; b-- {
		if t.count[b] > 0 {
			if s, ok := t.prefixes[b][a&mask(b)]; ok {
				return s
			}
		}
	}
	return 0
}

// refresh brings the words of a/bits's range to what the prefixes say, after a/bits changed.
func (t *Table) refresh(a uint32, bits int) {
	lvl, base := 0, 0
	for bits > levelEnd[lvl] {
		i := index(a, lvl, base)
		w := t.words[i]
		if w&ChunkFlag == 0 || !t.needsChunk(a, lvl) {
			// The word turns from a slot into a chunk or back: its whole range again.
			end := levelEnd[lvl]
			t.set(i, lvl, a&mask(end), t.covering(a, end+1))
			return
		}
		lvl, base = lvl+1, chunkBase(w)
	}
	t.walk(a, bits, t.covering(a, bits), lvl, base)
}

// walk sets the words of the range a/bits at level lvl (whose array starts at base), best
// being the slot of its longest shorter prefix.
func (t *Table) walk(a uint32, bits int, best uint32, lvl, base int) {
	end := levelEnd[lvl]
	if bits == end {
		i := index(a, lvl, base)
		if s := t.own[i]; s != 0 {
			best = s
		}
		t.set(i, lvl, a, best)
		return
	}
	if t.count[bits] > 0 {
		if s, ok := t.prefixes[bits][a]; ok {
			best = s
		}
	}
	if t.noneIn(bits+1, end-1) {
		// No prefix between here and the words' length: every word of the range has its
		// own slot or best. A default route's change then loops over the words instead of
		// recursing to each; a first-level word with no chunk is stored at once.
		first, n := index(a, lvl, base), 1<<(end-bits)
		words, own := t.words[first:first+n], t.own[first:first+n]
		var deep []int32
		if lvl == 0 {
			deep = t.deep16[first : first+n]
		}
		// leaves: no word of this level needs a chunk (none below /24, or the last level).
		leaves := lvl == 1 && len(t.deep24) == 0 || lvl == 2
		for i, w := range words {
			v := best
			if own[i] != 0 {
				v = own[i]
			}
			if w&ChunkFlag == 0 && (leaves || deep != nil && deep[i] == 0) {
				words[i] = v
			} else {
				t.set(first+i, lvl, a+uint32(i)<<(32-end), v)
			}
		}
		return
	}
	t.walk(a, bits+1, best, lvl, base)
	t.walk(a|1<<(31-bits), bits+1, best, lvl, base)
}

// noneIn reports whether the table holds no prefix of a length from lo to hi.
func (t *Table) noneIn(lo, hi int) bool {
	for b := lo; b <= hi; b++ {
		if t.count[b] > 0 {
			return false
		}
	}
	return true
}

// set sets word i, at level lvl for the range a/levelEnd[lvl], whose longest prefix up to
// that length has slot best: to best, or to a chunk when a longer prefix is inside.
func (t *Table) set(i, lvl int, a uint32, best uint32) {
	end := levelEnd[lvl]
	w := t.words[i]
	if t.needsChunk(a, lvl) {
		if w&ChunkFlag != 0 { // rewritten in place, word by word
			t.walk(a, end+1, best, lvl+1, chunkBase(w))
			t.walk(a|1<<(31-end), end+1, best, lvl+1, chunkBase(w))
			return
		}
		c, ok := t.chunkp.alloc()
		if !ok {
			panic("routedir: no chunk, though Put counted them") // chunksFor is wrong
		}
		fresh := t.words[chunkBase(c) : chunkBase(c)+ChunkEntries]
		clear(fresh)
		t.fillOwn(a, lvl+1, chunkBase(c))
		t.walk(a, end+1, best, lvl+1, chunkBase(c))
		t.walk(a|1<<(31-end), end+1, best, lvl+1, chunkBase(c))
		atomic.StoreUint32(&t.words[i], ChunkFlag|c) // a barrier: the chunk is filled first
		return
	}
	if w != best {
		t.words[i] = best
	}
	if w&ChunkFlag != 0 {
		t.freeChunk(w)
	}
}

// freeChunk releases the chunk of word w and the chunks it points at.
func (t *Table) freeChunk(w uint32) {
	for _, x := range t.words[chunkBase(w) : chunkBase(w)+ChunkEntries] {
		if x&ChunkFlag != 0 {
			t.freeChunk(x)
		}
	}
	t.chunkp.release(w &^ ChunkFlag)
}

// takeOver reads the words an earlier run left: each maximal range of one slot becomes a
// prefix, the chunks and slots reached stay taken.
func (t *Table) takeOver() error {
	usedChunks := map[uint32]bool{}
	var err error
	var decode func(a uint32, bits, lvl, base int) (uint32, bool)
	// children decodes the two halves of a/bits; one slot for both is the range's slot.
	children := func(a uint32, bits, lvl, base int) (uint32, bool) {
		l, lu := decode(a, bits+1, lvl, base)
		r, ru := decode(a|1<<(31-bits), bits+1, lvl, base)
		if lu && ru && l == r {
			return l, true
		}
		if lu && l != 0 {
			t.adopt(a, bits+1, l)
		}
		if ru && r != 0 {
			t.adopt(a|1<<(31-bits), bits+1, r)
		}
		return 0, false
	}
	decode = func(a uint32, bits, lvl, base int) (uint32, bool) {
		if bits < levelEnd[lvl] {
			return children(a, bits, lvl, base)
		}
		w := t.words[index(a, lvl, base)]
		if w&ChunkFlag == 0 {
			if w >= uint32(t.lim.Slots) && err == nil {
				err = fmt.Errorf("route table left by an earlier run points at next-hop slot %d of %d", w, t.lim.Slots)
			}
			return w, err == nil
		}
		c := w &^ ChunkFlag
		if lvl == 2 || c >= uint32(t.lim.Chunks) || usedChunks[c] {
			if err == nil {
				err = fmt.Errorf("route table left by an earlier run has a bad chunk word %#x", w)
			}
			return 0, false
		}
		usedChunks[c] = true
		return children(a, bits, lvl+1, chunkBase(w))
	}
	if s, ok := decode(0, 0, 0, 0); ok && s != 0 {
		t.adopt(0, 0, s)
	}
	if err != nil {
		return fmt.Errorf("%w; stop every xupfd and remove the pinned maps", err)
	}
	for s := range t.refs {
		if t.refs[s] > 0 {
			if t.values[s], err = t.slots.Get(uint32(s)); err != nil {
				return fmt.Errorf("read next-hop slot %d: %w", s, err)
			}
			t.slotOf[t.values[s]] = uint32(s)
		}
	}
	for _, bits := range levelEnd {
		for a, s := range t.prefixes[bits] {
			t.setOwn(a, bits, s)
		}
	}
	t.chunkp.reserve(func(c uint32) bool { return usedChunks[c] })
	t.slotp.reserve(func(s uint32) bool { return t.refs[s] > 0 })
	return nil
}

// adopt records a prefix found in the words.
func (t *Table) adopt(a uint32, bits int, s uint32) {
	t.prefixes[bits][a] = s
	t.count[bits]++
	t.total++
	t.deepen(a, bits, 1)
	t.refs[s]++
}
