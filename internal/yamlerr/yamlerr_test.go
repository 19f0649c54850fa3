package yamlerr

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

type file struct {
	Name    string         `yaml:"name"`
	On      bool           `yaml:"on"`
	Count   int            `yaml:"count"`
	Every   time.Duration  `yaml:"every"`
	Tags    []string       `yaml:"tags"`
	Limits  limits         `yaml:"limits"`
	Items   []item         `yaml:"items"`
	ByName  map[string]int `yaml:"by_name"`
	Raw     yaml.Node      `yaml:"raw"`
	Extra   `yaml:",inline"`
	Ignored string            `yaml:"-"`
	Labels  map[string]string `yaml:"labels"`
	Nest    nest              `yaml:"nest"`
}

// nest is a list of lists of any depth.
type nest []nest

type limits struct {
	Max int `yaml:"max"`
}

type item struct {
	ID    int    `yaml:"id"`
	Rules []rule `yaml:"rules"`
}

type rule struct {
	Action string `yaml:"action"`
}

type Extra struct {
	Token string `yaml:"token"`
}

var doc = Document{Empty: "the file is empty; give a name", OneDocument: "keep one document"}

func TestDecode(t *testing.T) {
	got := file{Count: 7} // a default the file does not override
	in := "name: x\non: true\nevery: 10s\ntags: [a, b]\nlimits: {max: 3}\nitems: [{id: 1, rules: [{action: drop}]}]\n" +
		"by_name: {a: 1}\nraw: [1, {b: 2}]\ntoken: t\nbase: &b {action: pass}\n"
	// base is not a key of file: it is reported, and nothing is decoded.
	if errs := Decode([]byte(in), &got, doc); len(errs) != 1 || !strings.Contains(errs[0].Error(), `unknown key "base"`) {
		t.Fatalf("errors %v, want one about base", errs)
	}
	in = strings.TrimSuffix(in, "base: &b {action: pass}\n")
	if errs := Decode([]byte(in), &got, doc); errs != nil {
		t.Fatal(errs)
	}
	if got.Name != "x" || !got.On || got.Count != 7 || got.Every != 10*time.Second || len(got.Tags) != 2 ||
		got.Limits.Max != 3 || got.Items[0].Rules[0].Action != "drop" || got.ByName["a"] != 1 ||
		got.Raw.Kind != yaml.SequenceNode || got.Token != "t" {
		t.Errorf("decoded %+v", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       []string // one per error, in order
	}{
		{"empty", "", []string{"the file is empty; give a name"}},
		{"comments only", "# x\n", []string{"the file is empty; give a name"}},
		{"two documents", "name: a\n---\nname: b\n", []string{"line 2: a second YAML document starts here; keep one document"}},
		{"syntax", "tags: [\n", []string{"invalid YAML: line 1:", "from that line down"}},
		{"unknown anchor", "count: *x\n", []string{"invalid YAML: unknown anchor 'x' referenced"}},
		{"top level list", "- a\n", []string{"line 1: a list is not valid here; expected a mapping (key: value pairs)"}},
		{"unknown top key", "nam: x\n", []string{`line 1: unknown key "nam" at the top level; remove it or correct its spelling (valid keys: name, on, count, every, tags, limits, items, by_name, raw, token, labels, nest)`}},
		{"unknown section key", "limits:\n  maxx: 1\n", []string{`line 2: unknown key "maxx" under limits; remove it or correct its spelling (valid keys: max)`}},
		{"unknown entry key", "items: [{id: 1, idd: 2}]\n", []string{`line 1: unknown key "idd" in an items entry`}},
		{"unknown nested entry key", "items:\n- rules:\n  - {act: x}\n", []string{`line 3: unknown key "act" in a rules entry; remove it or correct its spelling (valid keys: action)`}},
		{"ignored field", "Ignored: x\n", []string{`unknown key "Ignored"`}},
		{"duplicate key", "name: a\nname: b\n", []string{`line 2: mapping key "name" already defined at line 1; give each key once`}},
		{"section not a mapping", "limits: 5\n", []string{"line 1: the section limits must be a mapping (key: value pairs), not 5"}},
		{"entry not a mapping", "items: [5]\n", []string{"line 1: 5 is not valid here; expected a mapping (key: value pairs)"}},
		{"list expected", "tags: a\n", []string{`line 1: a is not valid here; expected a list, e.g. [a, b] or one "- item" per line`}},
		{"scalar expected", "name: [a]\n", []string{"line 1: a list is not valid here; expected a single value"}},
		{"bool", "on: maybe\n", []string{"line 1: maybe is not valid here; expected true or false"}},
		{"int", "count: abc\n", []string{"line 1: abc is not valid here; expected an integer"}},
		{"duration", "every: soon\n", []string{`line 1: soon is not valid here; expected a duration, e.g. "10s"`}},
		{"map value", "by_name: {a: x}\n", []string{"line 1: x is not valid here; expected an integer"}},
		{"map not a mapping", "labels: [a]\n", []string{"line 1: a list is not valid here; expected a mapping (key: value pairs)"}},
		{"every problem at once", "nam: x\non: maybe\nlimits: {max: y}\n", []string{`line 1: unknown key "nam"`,
			"line 2: maybe is not valid here", "line 3: y is not valid here; expected an integer"}},
		{"alias to a bad value", "labels: &l {a: b}\ncount: *l\n", []string{"line 1: a mapping (key: value pairs) is not valid here; expected an integer"}},
		{"merge of an unknown key", "base: &b {x: 1}\n", []string{`unknown key "base"`}},
		{"merged unknown key", "items: [{id: 1, <<: {idd: 2}}]\n", []string{`line 1: unknown key "idd" in an items entry`}},
		{"merge of a scalar", "limits: {<<: 5}\n", []string{`line 1: 5 cannot be merged; "<<" takes a mapping or a list of them`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var f file
			errs := Decode([]byte(c.yaml), &f, doc)
			if len(errs) != len(c.want) && !(len(c.want) > 1 && len(errs) == 1) {
				t.Fatalf("errors %q, want %d", errs, len(c.want))
			}
			got := errors.Join(errs...).Error()
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("errors\n%s\ndo not contain\n%s", got, w)
				}
			}
		})
	}
}

// Merged keys are decoded as if written in place, and may be overridden.
func TestDecodeMerge(t *testing.T) {
	var f struct {
		A limits `yaml:"a"`
		B limits `yaml:"b"`
	}
	if errs := Decode([]byte("a: &a {max: 1}\nb: {<<: *a, max: 2}\n"), &f, doc); errs != nil {
		t.Fatal(errs)
	}
	if f.A.Max != 1 || f.B.Max != 2 {
		t.Errorf("decoded %+v", f)
	}
}

// FuzzDecode checks that Decode never panics and accepts a file exactly when yaml.v3, with
// unknown keys refused, decodes it.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"name: x\n", "items: [{id: 1, rules: [{action: a}]}]\n", "on: maybe\n", "limits: 5\n",
		"a: &x [*x]\n", "limits: &l {<<: *l}\n", "items: [&i {<<: [*i]}]\n", "tags: [\n", "count: 99999999999999999999\n", "by_name: {a: 1, a: 2}\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var a, b file
		errs := Decode([]byte(s), &a, doc)
		dec := yaml.NewDecoder(bytes.NewReader([]byte(s)))
		dec.KnownFields(true)
		err := dec.Decode(&b)
		if err != nil && errs == nil {
			// Decode is stricter only where yaml.v3 has no document: an empty file or
			// several documents.
			t.Errorf("Decode accepted %q, yaml.v3 did not: %v", s, err)
		}
	})
}

// Aliases of aliases are checked once each, and an alias inside its own anchor ends: hostile
// files cost time in proportion to their size.
func TestDecodeAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("nest:\n  - &a0 []\n")
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&b, "  - &a%d [*a%d, *a%d, *a%d, *a%d]\n", i, i-1, i-1, i-1, i-1)
	}
	var f file
	start := time.Now()
	Decode([]byte(b.String()), &f, doc)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Decode took %v", d)
	}
	Decode([]byte("nest: &n [*n]\n"), &f, doc)
	Decode([]byte("limits: &l {<<: *l}\n"), &f, doc)
	Decode([]byte("limits: &l {<<: [*l, *l]}\n"), &f, doc)
}

func TestReadFileAndJoin(t *testing.T) {
	_, err := ReadFile("/nonexistent/x.yaml")
	if err == nil || err.Error() != "cannot read /nonexistent/x.yaml: no such file or directory" {
		t.Errorf("ReadFile of a missing file: %v", err)
	}
	err = Join("config: f: ", []error{errors.New("a"), errors.New("b")})
	if err == nil || err.Error() != "config: f: a\nconfig: f: b" {
		t.Errorf("Join = %q", err)
	}
	if Join("x", nil) != nil {
		t.Error("Join of no errors is not nil")
	}
}
