package datapath

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/xupf/xupf/internal/classifier"
)

var stageNames = map[stage]string{stageAttached: "on the interfaces", stageCPUMap: "in the CPU map"}

// TestProgramVariantsPassVerifier loads every load-time specialisation of the program the
// daemon may swap in: each uplink spreading mode, on the interfaces and (spreading off, the
// CPU map's attach type) in the CPU map, with SDF fields, classifier fields and words and
// the policer off and at their most. A variant the verifier refuses fails with its whole log.
func TestProgramVariantsPassVerifier(t *testing.T) {
	e := newTestEnv(t, 4)
	type knob struct {
		name string
		set  func(*progConfig)
	}
	spreads := []knob{
		{"spread off", func(c *progConfig) { c.spread = SpreadOff }},
		{"spread teid", func(c *progConfig) { c.spread = SpreadTEID }},
		{"spread flow", func(c *progConfig) { c.spread = SpreadFlow }},
	}
	sdf := []knob{
		{"no SDF fields", func(c *progConfig) {}},
		{"all SDF fields", func(c *progConfig) { c.sdfFields = 1<<xupfSdfFieldSDF_FIELD_MAX - 1 }},
	}
	cls := []knob{
		{"no classes", func(c *progConfig) {}},
		{"all class fields and words", func(c *progConfig) {
			c.clsFields, c.clsWords = 1<<xupfClsFieldCLS_FIELD_MAX-1, classifier.MaxClasses/64
		}},
	}
	policer := []knob{
		{"policer off", func(c *progConfig) {}},
		{"policer on", func(c *progConfig) { c.policer = true }},
	}
	for _, sp := range spreads {
		for _, s := range sdf {
			for _, c := range cls {
				for _, p := range policer {
					var cfg progConfig
					for _, k := range []knob{sp, s, c, p} {
						k.set(&cfg)
					}
					stages := []stage{stageAttached}
					if cfg.spread == SpreadOff {
						stages = append(stages, stageCPUMap) // the CPU map's program never spreads
					}
					for _, st := range stages {
						name := fmt.Sprintf("%s, %s, %s, %s, %s", sp.name, s.name, c.name, p.name, stageNames[st])
						prog, err := e.dp.loadProgram(cfg, st)
						if err != nil {
							t.Errorf("%s: %v", name, err)
							continue
						}
						insns, _ := programSize(t, prog)
						t.Logf("%s: %d instructions", name, insns)
						prog.Close()
					}
				}
			}
		}
	}
}

// TestProgConfigDirect: the direct caches are compiled into the program only where xupfd
// writes them (x86-64) and only in the variants without SDF fields or traffic classes, whose
// verification they would push past the verifier's limit.
func TestProgConfigDirect(t *testing.T) {
	on := uint32(0)
	if runtime.GOARCH == "amd64" {
		on = 1
	}
	for _, c := range []struct {
		cfg  progConfig
		want uint32
	}{
		{progConfig{}, on},
		{progConfig{policer: true, spread: SpreadFlow}, on},
		{progConfig{sdfFields: 1}, 0},
		{progConfig{clsFields: 1, clsWords: 1}, 0},
	} {
		if got := c.cfg.direct(); got != c.want {
			t.Errorf("%+v: cfg_direct %d, want %d", c.cfg, got, c.want)
		}
	}
}
