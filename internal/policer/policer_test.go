package policer

import (
	"testing"

	"github.com/xupf/xupf/internal/meter"
)

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		c    Contract
		want string
	}{
		{Contract{Class: 1, Action: Limit, Rate: 1000, Burst: 1500}, ""},
		{Contract{Class: 1, Action: Limit, Rate: meter.MaxRate, Burst: 1 << 20}, ""},
		{Contract{Action: Pass}, ""},
		{Contract{Action: Drop}, ""},
		{Contract{Class: 1, Action: Limit},
			"rate: a limit needs a rate in bytes/s\nburst: a limit needs a burst in bytes"},
		{Contract{Class: 1, Action: Limit, Rate: 1000}, "burst: a limit needs a burst in bytes"},
		{Contract{Class: 1, Action: Limit, Rate: meter.MaxRate + 1, Burst: 1},
			"rate 125000000001 bytes/s: use 1 to 125000000000 (1 Tbit/s)"},
		{Contract{Class: 1, Action: Limit, Rate: 1, Burst: meter.MaxBurst + 1},
			"burst 4611686019 bytes: use 1 to 4611686018"},
		{Contract{Class: 2, Action: Pass, Rate: 1000}, "rate: a pass contract has no rate; set one with Limit only"},
		{Contract{Action: Drop, Rate: 1, Burst: 1},
			"rate: a drop contract has no rate; set one with Limit only\nburst: a drop contract has no burst; set one with Limit only"},
		{Contract{Class: 3, Action: 7}, "action 7: use Pass, Drop or Limit"},
	} {
		got := ""
		if err := tt.c.Validate(); err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.c, got, tt.want)
		}
	}
}

func TestActionNames(t *testing.T) {
	for _, a := range []Action{Pass, Drop, Limit} {
		if got, ok := ParseAction(a.String()); !ok || got != a {
			t.Errorf("ParseAction(%q) = %v, %v", a.String(), got, ok)
		}
	}
	if _, ok := ParseAction("police"); ok {
		t.Error(`ParseAction("police") succeeded`)
	}
	if s := Action(7).String(); s != "Action(7)" {
		t.Errorf("Action(7) is %q", s)
	}
	if MaxRateBPS != 1_000_000_000_000 || MaxBurst != 4_611_686_018 {
		t.Errorf("bounds %d bit/s, %d bytes", uint64(MaxRateBPS), uint64(MaxBurst))
	}
}
