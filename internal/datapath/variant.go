//go:build !xupf_upgrade_probe

package datapath

import "github.com/cilium/ebpf"

// varyPrograms leaves the programs as bpf/ compiled them; the upgrade test's second build
// (variant_probe.go) changes them.
func varyPrograms(*ebpf.CollectionSpec) error { return nil }
