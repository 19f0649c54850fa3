package datapath

import (
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// mappedArray is an mmapable BPF array (BPF_F_MMAPABLE) mapped into this process, for tables
// the daemon writes word by word, each word with one store, while the program reads them: a
// map update would copy the value with memcpy, which a packet could see half done. The key
// tables and the route table are such arrays.
type mappedArray struct{ mem []byte }

// mapArray maps all of m for reading and writing.
func mapArray(m *ebpf.Map) (mappedArray, error) {
	size := int(m.MaxEntries()) * int(m.ValueSize())
	mem, err := unix.Mmap(m.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return mappedArray{}, fmt.Errorf("map %s into memory: %w", m, err)
	}
	return mappedArray{mem}, nil
}

// words64 and words32 are the mapping as words: it is page-aligned, so every word is aligned
// for the atomic stores.
func (a mappedArray) words64() []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(a.mem))), len(a.mem)/8)
}

func (a mappedArray) words32() []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(a.mem))), len(a.mem)/4)
}

func (a mappedArray) unmap() error {
	if a.mem == nil {
		return nil
	}
	return unix.Munmap(a.mem)
}
