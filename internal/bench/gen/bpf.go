package gen

// The BPF objects are generated from bpf/bench/ and committed, so `go build` needs no clang.
// `make generate` reruns this (run `go generate ./internal/bench/gen/` by hand otherwise).
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel -type gen_tmpl -type gen_slot trafficgen ../../../bpf/bench/trafficgen.bpf.c -- -I../../../bpf/include
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel -type sink_counters -type sink_sample sink ../../../bpf/bench/sink.bpf.c -- -I../../../bpf/include
