package datapath

import "testing"

// TestDropReasonNames checks the names the API, the CLI and /metrics show, read from the
// object's BTF: every value up to DROP_MAX has one, and the "cannot happen" checks have a
// reason of their own (every packet test asserts it stays 0).
func TestDropReasonNames(t *testing.T) {
	spec, err := loadXupf()
	if err != nil {
		t.Fatal(err)
	}
	n, err := namesFromSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(n.drops) != int(xupfDropReasonDROP_MAX) {
		t.Fatalf("%d drop names, want DROP_MAX = %d", len(n.drops), xupfDropReasonDROP_MAX)
	}
	for i, name := range n.drops {
		if name == "" {
			t.Errorf("drop reason %d has no name", i)
		}
	}
	if got := n.drops[xupfDropReasonDROP_INTERNAL]; got != "internal" {
		t.Errorf("DROP_INTERNAL is named %q, want internal", got)
	}
}
