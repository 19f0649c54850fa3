package datapath

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// names are the counter and drop-reason names, indexed by their values in the C enums. They
// are read from the object's BTF, so bpf/lib/drop_reasons.h and stats.h stay the one list.
type names struct {
	stats []string
	drops []string
}

func namesFromSpec(spec *ebpf.CollectionSpec) (names, error) {
	var n names
	var err error
	if n.stats, err = enumNames(spec, "stat", "STAT_"); err != nil {
		return n, err
	}
	if n.drops, err = enumNames(spec, "drop_reason", "DROP_"); err != nil {
		return n, err
	}
	return n, nil
}

// enumNames returns the lower-case names of enum typeName without prefix, indexed by value,
// up to (not including) the *_MAX value. Index 0 of drop_reason ("unspecified") is kept so
// that indexes match; callers skip it.
func enumNames(spec *ebpf.CollectionSpec, typeName, prefix string) ([]string, error) {
	var e *btf.Enum
	if err := spec.Types.TypeByName(typeName, &e); err != nil {
		return nil, fmt.Errorf("find enum %s in datapath BTF: %w", typeName, err)
	}
	var max uint64
	for _, v := range e.Values {
		if v.Name == prefix+"MAX" {
			max = v.Value
		}
	}
	if max == 0 {
		return nil, fmt.Errorf("enum %s has no %sMAX", typeName, prefix)
	}
	out := make([]string, max)
	for _, v := range e.Values {
		if v.Value < max {
			out[v.Value] = strings.ToLower(strings.TrimPrefix(v.Name, prefix))
		}
	}
	return out, nil
}
