package pfcp

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xupf/xupf/internal/buffer"
	"github.com/xupf/xupf/internal/state"
)

// BenchmarkEstablishment is the node's own work for one Session Establishment (an uplink and
// a downlink PDR, a QER and a URR, in Open5GS's layout), as Serve does it on its one
// goroutine: decoding, checking, the rules, the fake datapath and queueing the record for the
// state file (its commits run on the store's writer), and the buffer's policies. Its
// allocations per establishment are what the garbage collector has to keep up with at
// thousands a second; heap-B/session is what each session keeps on the heap, which the
// collector marks again in every cycle while the sessions grow.
func BenchmarkEstablishment(b *testing.B) {
	st, err := state.Open(b.TempDir(), nil, StoreBuckets...)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	n := newSessionNode(newFakeDatapath(), func(o *Options) {
		o.Store = st
		o.MaxSessions = b.N + 1
		o.Buffers = buffer.New(nil, buffer.Limits{}, func(buffer.Key) {}, nil)
	})
	if _, got, _ := cause(b, n.Handle(smf, bytesOf(b, smfSetup(1)))); got != ie.CauseRequestAccepted {
		b.Fatalf("association setup: cause %d", got)
	}
	before := liveHeap()
	reqs := make([][]byte, b.N)
	for i := range reqs {
		var ue [4]byte
		binary.BigEndian.PutUint32(ue[:], 0x0a400000+uint32(i)+1) // 10.64.0.0/10
		reqs[i] = bytesOf(b, establishment(uint32(i)+2, uint64(i)+1, basicSession(netip.AddrFrom4(ue))...))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		n.Handle(smf, reqs[i])
	}
	b.StopTimer()
	if got := len(n.ss.byID); got != b.N { // each was accepted
		b.Fatalf("%d sessions established of %d", got, b.N)
	}
	reqs = nil // what the SMF sent is not the sessions' heap
	b.ReportMetric(float64(liveHeap()-before)/float64(b.N), "heap-B/session")
	runtime.KeepAlive(n)
}

// liveHeap is the bytes the heap holds after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkSessionRecord is the encoding and decoding of the state file's record of the
// session BenchmarkEstablishment establishes, in the binary form and in the JSON form of
// earlier versions: encoding is paid by every establishment and modification, decoding by
// every session a restart restores.
func BenchmarkSessionRecord(b *testing.B) {
	n := newSessionNode(newFakeDatapath())
	n.Handle(smf, bytesOf(b, smfSetup(1)))
	if _, got, _ := cause(b, n.Handle(smf, bytesOf(b, establishment(2, 1, basicSession(ue1)...)))); got != ie.CauseRequestAccepted {
		b.Fatalf("establishment: cause %d", got)
	}
	s := n.ss.byID[FirstSEID]
	for _, form := range []struct {
		name   string
		encode func(*Session) []byte
	}{{"binary", encodeSession}, {"json", jsonRecord}} {
		b.Run(form.name+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				form.encode(s)
			}
		})
		b.Run(form.name+"/decode", func(b *testing.B) {
			rec := form.encode(s)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeStored(rec); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(rec)), "record-bytes")
		})
	}
}
