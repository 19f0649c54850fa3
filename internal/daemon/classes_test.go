package daemon

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/session"
)

// fakeClassDatapath records the class sets applied and serves counters per class id; its
// fakePolicer keeps the policer's contracts.
type fakeClassDatapath struct {
	fakePolicer
	mu          sync.Mutex
	applied     []uint32 // the class ids of the last set applied, in priority order
	counters    map[uint32]session.Counters
	setErr      error // returned by SetClasses when set
	countersErr error // returned by ClassCounters when set
}

func (f *fakeClassDatapath) SetClasses(c classifier.Compiled) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.setErr != nil {
		return f.setErr
	}
	f.applied = slices.Clone(c.IDs)
	return nil
}

func (f *fakeClassDatapath) ClassCounters(id uint32) (session.Counters, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.countersErr != nil {
		return session.Counters{}, f.countersErr
	}
	if !slices.Contains(f.applied, id) {
		return session.Counters{}, errors.New("no counters: key does not exist")
	}
	return f.counters[id], nil
}

func newClassDaemon(t *testing.T) (*Daemon, *fakeClassDatapath, *api.Client) {
	t.Helper()
	dp := &fakeClassDatapath{counters: map[uint32]session.Counters{}, fakePolicer: newFakePolicer()}
	d := &Daemon{log: slog.New(slog.DiscardHandler)}
	d.initClassifier(dp)
	srv := httptest.NewServer(api.NewHandler(d, nil))
	t.Cleanup(srv.Close)
	return d, dp, api.NewClient(srv.URL, srv.Client())
}

func statusCode(err error) int {
	var re *api.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

func TestDaemonClasses(t *testing.T) {
	_, dp, c := newClassDaemon(t)
	ctx := t.Context()

	list, err := c.Classes(ctx)
	if err != nil || len(list) != 0 {
		t.Fatalf("Classes of a new daemon = %v, %v; want none", list, err)
	}

	sip := classifier.Class{ID: 3, Priority: 100, Direction: "ingress", SrcIP: "10.0.0.0/8", Protocol: "udp",
		SrcPort: "1000-2000", DstPort: "5060"}
	web := classifier.Class{ID: 1, Priority: 10, Protocol: "tcp", DstPort: "443"}
	for _, cl := range []classifier.Class{sip, web} {
		info, err := c.AddClass(ctx, cl)
		if err != nil {
			t.Fatalf("AddClass(%d): %v", cl.ID, err)
		}
		if want := (api.ClassInfo{Class: cl}); !reflect.DeepEqual(info, want) {
			t.Errorf("AddClass(%d) = %+v, want %+v", cl.ID, info, want)
		}
	}
	if want := []uint32{3, 1}; !slices.Equal(dp.applied, want) { // priority order
		t.Errorf("datapath classes = %v, want %v", dp.applied, want)
	}

	// Counters come from the datapath.
	dp.counters[3] = session.Counters{Packets: 10, Bytes: 1500}
	list, err = c.Classes(ctx)
	if err != nil {
		t.Fatalf("Classes: %v", err)
	}
	want := []api.ClassInfo{{Class: web}, {Class: sip, Counters: session.Counters{Packets: 10, Bytes: 1500}}}
	if !reflect.DeepEqual(list, want) {
		t.Errorf("Classes = %+v, want %+v", list, want)
	}
	one, err := c.Class(ctx, 3)
	if err != nil || !reflect.DeepEqual(one, want[1]) {
		t.Errorf("Class(3) = %+v, %v; want %+v", one, err, want[1])
	}

	if err := c.DeleteClass(ctx, 3); err != nil {
		t.Fatalf("DeleteClass(3): %v", err)
	}
	if want := []uint32{1}; !slices.Equal(dp.applied, want) {
		t.Errorf("datapath classes after delete = %v, want %v", dp.applied, want)
	}
	if _, err := c.Class(ctx, 3); statusCode(err) != http.StatusNotFound || err.Error() != "class 3 not found" {
		t.Errorf("Class(3) after delete: %v (code %d), want 404 class 3 not found", err, statusCode(err))
	}
}

func TestDaemonClassErrors(t *testing.T) {
	d, dp, c := newClassDaemon(t)
	ctx := t.Context()
	if _, err := c.AddClass(ctx, classifier.Class{ID: 3, Priority: 1, Protocol: "udp"}); err != nil {
		t.Fatal(err)
	}

	_, errDup := c.AddClass(ctx, classifier.Class{ID: 3, Priority: 2})
	_, errInvalid := c.AddClass(ctx, classifier.Class{ID: 4, SrcPort: "80"})
	_, errZero := c.AddClass(ctx, classifier.Class{Priority: 5})
	errDelete := c.DeleteClass(ctx, 7)
	_, errGet := c.Class(ctx, 7)
	dp.setErr = errors.New("swap program: operation not permitted")
	_, errApply := c.AddClass(ctx, classifier.Class{ID: 5, Protocol: "icmp"})
	errApplyDelete := c.DeleteClass(ctx, 3)
	dp.setErr = nil
	dp.countersErr = errors.New("class 3 counters: lookup: operation not permitted")
	_, errCounters := c.Classes(ctx)
	dp.countersErr = nil

	for _, tt := range []struct {
		name     string
		err      error
		wantCode int
		wantMsg  string
	}{
		{"duplicate", errDup, 409, "class 3 already exists; delete it first or use another id"},
		{"invalid", errInvalid, 400, "class 4: src_port: ports need protocol tcp, udp or sctp; set protocol too"},
		{"id 0", errZero, 400, "class 0: id: 0 is not a class id; use 1 to 4294967295"},
		{"delete unknown", errDelete, 404, "class 7 not found"},
		{"get unknown", errGet, 404, "class 7 not found"},
		// The datapath's failures are the daemon's, not the client's.
		{"apply fails on add", errApply, 500, "apply classes to the datapath: swap program: operation not permitted"},
		{"apply fails on delete", errApplyDelete, 500, "apply classes to the datapath: swap program: operation not permitted"},
		{"counters fail", errCounters, 500, "class 3 counters: lookup: operation not permitted"},
	} {
		if statusCode(tt.err) != tt.wantCode || tt.err.Error() != tt.wantMsg {
			t.Errorf("%s: error %v (code %d), want %d %q", tt.name, tt.err, statusCode(tt.err), tt.wantCode, tt.wantMsg)
		}
	}

	// Nothing that failed changed the class set.
	if got := d.classes.List(); len(got) != 1 || got[0].ID != 3 || got[0].Priority != 1 {
		t.Errorf("classes = %+v, want only class 3 with priority 1", got)
	}
	if want := []uint32{3}; !slices.Equal(dp.applied, want) {
		t.Errorf("datapath classes = %v, want %v", dp.applied, want)
	}
}

// The backend errors carry the sentinels api documents, with the Manager's text unprefixed.
func TestDaemonClassErrorKinds(t *testing.T) {
	d, _, _ := newClassDaemon(t)
	if _, err := d.AddClass(classifier.Class{ID: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := d.AddClass(classifier.Class{ID: 1})
	if !errors.Is(err, api.ErrConflict) || errors.Is(err, api.ErrInvalid) {
		t.Errorf("duplicate: %v is not ErrConflict only", err)
	}
	_, err = d.AddClass(classifier.Class{ID: 2, Protocol: "gre"})
	if !errors.Is(err, api.ErrInvalid) || err.Error() != `class 2: protocol: "gre" is not a protocol; use tcp, udp, sctp, icmp or a number 0-255` {
		t.Errorf("invalid: %v is not ErrInvalid with the Manager's message", err)
	}
	if err := d.DeleteClass(9); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("delete unknown: %v is not ErrNotFound", err)
	}
	if _, err := d.Class(9); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("get unknown: %v is not ErrNotFound", err)
	}
}

// Concurrent additions of one id: exactly one wins and the others are told the id is taken
// (409), never that the class is invalid, since the duplicate check and the Add are atomic.
func TestDaemonConcurrentAddSameID(t *testing.T) {
	d, _, _ := newClassDaemon(t)
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = d.AddClass(classifier.Class{ID: 42, Priority: uint32(i)})
		})
	}
	wg.Wait()
	var ok int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, api.ErrConflict):
			t.Errorf("error %v, want ErrConflict", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d additions succeeded, want 1", ok)
	}
}

// The configuration's classes and contracts are set at start-up through the API's code path,
// and the API lists them.
func TestConfiguredClasses(t *testing.T) {
	d, dp, client := newClassDaemon(t)
	d.cfg = &config.Config{
		Classes: []classifier.Class{{ID: 7, Priority: 1, Protocol: "udp"}, {ID: 9, Priority: 5}},
		Contracts: []config.Contract{{Class: 7, Contract: api.Contract{Action: "limit", RateBPS: 8000, BurstBytes: 1500}},
			{Class: 0, Contract: api.Contract{Action: "pass"}}},
	}
	if err := d.configureClasses(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dp.applied, []uint32{9, 7}) {
		t.Errorf("datapath classes %v, want [9 7] (by priority)", dp.applied)
	}
	classes, err := client.Classes(t.Context())
	if err != nil || len(classes) != 2 || classes[0].Class != d.cfg.Classes[0] {
		t.Errorf("API classes %+v, %v; want the configured ones", classes, err)
	}
	contracts, err := client.Contracts(t.Context())
	if err != nil || len(contracts) != 2 || contracts[0].Class != 0 || contracts[1].Contract != d.cfg.Contracts[0].Contract {
		t.Errorf("API contracts %+v, %v; want the configured ones", contracts, err)
	}

	// What the API refuses, the start-up refuses, naming the key.
	d, _, _ = newClassDaemon(t)
	d.cfg = &config.Config{Contracts: []config.Contract{{Class: 1, Contract: api.Contract{Action: "limit", RateBPS: 7}}}}
	if err := d.configureClasses(); err == nil || !strings.Contains(err.Error(), "policer_contracts: contract for class 1: rate_bps") {
		t.Errorf("bad contract: %v", err)
	}
}
