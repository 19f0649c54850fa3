package datapath

// The BPF object is generated from bpf/ and committed, so `go build` needs no clang. `make
// generate` reruns this; `make check-generate` fails when the committed output is stale.
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel -type nexthop -type nexthop_kind -type rule_ref -type pdr -type far -type counters -type far_action -type far_flag -type direction -type drop_reason -type stat -type sdf_field -type ruleset -type sdf_method -type sdf_rule -type sdf_key -type sdf_exact_key -type sdf_lpm_key -type cls_field -type cls_layout -type cls_vref -type cls_chunk -type cls_mac_key -type cls_class -type meter -type meter_algo -type meter_clock -type police_action -type police_counters -type pdr_usage -type quota -type quota_volume -type unknown_teid_event -type spread_mode -type flow_key -type flow -type flowcache_mode -type flow_vlan_action -type flow_flag xupf ../../bpf/xupf.bpf.c -- -I../../bpf/include
