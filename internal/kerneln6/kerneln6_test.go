package kerneln6

import "testing"

// TestChoice: a named network instance takes its own treatment, any other the default; Any
// is true when either names the kernel; Overrides only where a named one differs.
func TestChoice(t *testing.T) {
	for _, c := range []struct {
		name                          string
		c                             Choice
		any, internet, ims, overrides bool // overrides: of internet
	}{
		{"off", Choice{}, false, false, false, false},
		{"default on", Choice{Default: true}, true, true, true, false},
		{"one on", Choice{Instances: map[string]bool{"internet": true}}, true, true, false, true},
		{"one off, default on", Choice{Default: true, Instances: map[string]bool{"internet": false}}, true, false, true, true},
		{"named as the default", Choice{Default: true, Instances: map[string]bool{"internet": true}}, true, true, true, false},
		{"all named off", Choice{Instances: map[string]bool{"internet": false, "ims": false}}, false, false, false, false},
	} {
		if got := c.c.Any(); got != c.any {
			t.Errorf("%s: Any %v, want %v", c.name, got, c.any)
		}
		if got := c.c.Kernel("internet"); got != c.internet {
			t.Errorf("%s: Kernel(internet) %v, want %v", c.name, got, c.internet)
		}
		if got := c.c.Kernel("ims"); got != c.ims {
			t.Errorf("%s: Kernel(ims) %v, want %v", c.name, got, c.ims)
		}
		if got := c.c.Overrides("internet"); got != c.overrides {
			t.Errorf("%s: Overrides(internet) %v, want %v", c.name, got, c.overrides)
		}
		if c.c.Overrides("") {
			t.Errorf("%s: a FAR naming no network instance overrides the default", c.name)
		}
	}
}
