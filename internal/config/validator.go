package config

import (
	"fmt"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/yamlerr"
)

// validator converts the raw configuration into cfg and collects every problem.
type validator struct {
	cfg  *Config
	errs []error
	// gtpuOK is set when gtpu_addresses is present and valid, so sessions can be checked
	// against it.
	gtpuOK bool
}

func (v *validator) addf(format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf(format, args...))
}

// duration parses raw, the value of key, as a duration from lo to hi; a problem is reported
// with the units the setting takes and hint (the range, in words, and an example).
func (v *validator) duration(key, raw, units, hint string, lo, hi time.Duration) (time.Duration, bool) {
	d, err := time.ParseDuration(raw)
	switch {
	case err != nil:
		v.addf("%s: %q is not a duration (a number with a unit: %s); %s", key, raw, units, hint)
	case d < lo || d > hi:
		v.addf("%s: %s is out of range; %s", key, raw, hint)
	default:
		return d, true
	}
	return 0, false
}

// intNode decodes an optional YAML integer (decimal, hex 0x.., octal 0o.., binary 0b..) that
// must lie in [lo, hi]. present is false when the key is absent or null.
func intNode(n *yaml.Node, lo, hi uint64) (value uint64, present bool, err error) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if yamlerr.IsNull(n) {
		return 0, false, nil
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		what := strconv.Quote(n.Value)
		if n.Kind != yaml.ScalarNode {
			what = yamlerr.Describe(n)
		}
		return 0, true, fmt.Errorf("%s is not an integer", what)
	}
	var x any
	if err := n.Decode(&x); err != nil {
		return 0, true, fmt.Errorf("%q is not an integer", n.Value)
	}
	inRange := false
	switch x := x.(type) {
	case int:
		inRange = x >= 0 && uint64(x) >= lo && uint64(x) <= hi
		value = uint64(x)
	case int64:
		inRange = x >= 0 && uint64(x) >= lo && uint64(x) <= hi
		value = uint64(x)
	case uint64:
		inRange = x >= lo && x <= hi
		value = x
	}
	if !inRange {
		return 0, true, fmt.Errorf("%s is out of range", n.Value)
	}
	return value, true, nil
}
