package datapath

import (
	"errors"
	"fmt"
)

var errNoSlots = errors.New("no free slots")

// slots hands out array indexes first-in first-out: a freed index goes to the back of the
// queue, so it is reused only after every other free one. A packet that looked up the old
// rule just before it was replaced therefore never sees the slot rewritten for someone else.
type slots struct {
	free []uint32 // a ring: head is the next to hand out
	head int
	n    int // how many are free
}

func newSlots(size uint32) *slots {
	s := &slots{free: make([]uint32, size), n: int(size)}
	for i := range s.free {
		s.free[i] = uint32(i)
	}
	return s
}

func (s *slots) alloc() (uint32, error) {
	if s.n == 0 {
		return 0, errNoSlots
	}
	v := s.free[s.head]
	s.head = (s.head + 1) % len(s.free)
	s.n--
	return v, nil
}

// reserve takes the indexes in used out of a fresh allocator, where an earlier run's live
// entries hold them; release gives them back.
func (s *slots) reserve(used map[uint32]int) error {
	if s.n != len(s.free) {
		return errors.New("reserve on an allocator in use")
	}
	free := s.free[:0]
	for _, v := range s.free {
		if used[v] == 0 {
			free = append(free, v)
		}
	}
	if len(free)+len(used) != len(s.free) {
		return fmt.Errorf("%d of %d indexes in use are out of range (%d)", len(used)-(len(s.free)-len(free)), len(used), len(s.free))
	}
	// The ring keeps its size: released indexes go after the free ones.
	s.n, s.head = len(free), 0
	return nil
}

func (s *slots) release(v uint32) {
	s.free[(s.head+s.n)%len(s.free)] = v
	s.n++
}
