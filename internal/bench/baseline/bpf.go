package baseline

// The BPF object is generated from bpf/bench/ and committed, so `go build` needs no clang.
// `make generate` reruns this.
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -type fwd_cfg fwd ../../../bpf/bench/fwd.bpf.c -- -I../../../bpf/include
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -type fwd_cfg -type gtpu_cfg gtpu ../../../bpf/bench/gtpu.bpf.c -- -I../../../bpf/include
