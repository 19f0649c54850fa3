package datapath

import (
	"strings"
	"testing"
)

func TestAttachErrorsAndFallback(t *testing.T) {
	e := newTestEnv(t, 4)
	err := e.do(func() error {
		if _, err := e.dp.Attach("nosuchif0", XDPNative, true); err == nil ||
			!strings.Contains(err.Error(), "no such interface") {
			t.Errorf("missing interface: %v", err)
		}
		if _, err := e.dp.Attach("n3", XDPNative, true); err == nil ||
			!strings.Contains(err.Error(), "already attached") {
			t.Errorf("second attach: %v", err)
		}
		// The loopback driver has no native XDP.
		if _, err := e.dp.Attach("lo", XDPNative, false); err == nil ||
			!strings.Contains(err.Error(), "native XDP is not supported") {
			t.Errorf("native on lo without fallback: %v", err)
		}
		a, err := e.dp.Attach("lo", XDPNative, true)
		if err != nil {
			t.Fatalf("native on lo with fallback: %v", err)
		}
		if a.Mode != XDPGeneric {
			t.Errorf("fell back to %s, want generic", a.Mode)
		}
		return e.dp.Detach("lo")
	})
	if err != nil {
		t.Fatal(err)
	}
}
