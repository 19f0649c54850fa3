# xupf: see README.md. Every target works from a clean clone once `make deps` has run.
# sudo often drops /usr/local/go/bin from PATH: look there too.
GO ?= $(or $(shell command -v go 2>/dev/null),/usr/local/go/bin/go)
BIN := bin

# Debian packages the build, the tests and the demo need.
DEB_PACKAGES := clang llvm libbpf-dev linux-libc-dev bpftool iproute2 tshark iperf3 nftables git make ca-certificates systemd

.PHONY: all build generate check-generate fmt-check vet test fuzz bench bench-full bench-micro bench-flowcache demo deps clean

all: build

# The commit goes into the binaries, for xupf-bench's result files (GOFLAGS may turn Go's own
# VCS stamping off).
COMMIT := $(shell git describe --always --dirty --abbrev=12 2>/dev/null)
build:
	$(GO) build -ldflags "-X github.com/xupf/xupf/internal/bench/result.BuildCommit=$(COMMIT)" -o $(BIN)/ ./cmd/...

# Regenerate the BPF object and its Go bindings from bpf/ (needs clang).
generate:
	$(GO) generate ./internal/datapath/
	$(GO) generate ./internal/bench/gen/
	$(GO) generate ./internal/bench/baseline/

# Fails when the committed BPF object or bindings do not match bpf/.
check-generate: generate
	@git diff --exit-code --stat -- '*_bpfel.go' '*_bpfel.o' || \
		{ echo "generated BPF files are stale: run 'make generate' and commit them"; exit 1; }

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed:"; echo "$$out"; exit 1; }

vet:
	$(GO) vet ./...

# Every test: unit, BPF_PROG_TEST_RUN datapath tables, end to end in namespaces (needs root).
test: deps fmt-check vet check-generate
	$(GO) test -count=1 ./...

# Explore the PFCP request path with the Go fuzzer for FUZZTIME (make test runs the committed
# seeds and crashers only). A crasher lands in internal/pfcp/testdata/fuzz/FuzzHandle: commit it
# with the fix.
FUZZTIME ?= 5m
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzHandle$$' -fuzztime $(FUZZTIME) ./internal/pfcp/

# The evaluation suite's quick profile (needs root; 11-13 minutes on the 2-vCPU VM): every
# scenario of bench/quick (the cost-* ones make the budget table), then docs/benchmarks.md
# and its plots; then the flow cache's Go benchmarks (bench-flowcache).
BENCH_OUT ?= bench-results
bench: deps build
	rm -rf $(BENCH_OUT)/quick
	$(BIN)/xupf-bench run --out $(BENCH_OUT)/quick bench/quick/*.yaml
	$(BIN)/xupf-bench report --command "make bench" $(BENCH_OUT)/quick
	$(MAKE) bench-flowcache

# The flow cache's daemon-side and latency figures, which traffic at the maximum rate does not
# show (needs root): a flow table of 1,000,000 entries (counting it at start, listing it, the
# stats, an invalidation scan, one aging pass), and a new flow's first and second datagram's
# one-way latency through the box, cache off and on. Numbers in docs/microbenchmarks.md.
bench-flowcache: deps
	$(GO) test -run '^$$' -bench 'FlowTable' -benchtime 3x ./internal/datapath/
	$(GO) test -run '^$$' -bench 'FlowCacheFirstPacket' -benchtime 1000x ./test/e2e/

# The full profile: longer trials, repetitions, up to 1,000,000 sessions; for a bigger machine.
bench-full: deps build
	rm -rf $(BENCH_OUT)/full
	$(BIN)/xupf-bench run --out $(BENCH_OUT)/full bench/full/*.yaml
	$(BIN)/xupf-bench report --command "make bench-full" $(BENCH_OUT)/full

# Go micro-benchmarks (needs root): ns/packet per path, PDR selection and classifier,
# program size, the time of one class change (a few runs only: tens of milliseconds each),
# the router's convergence (a netlink change to the route table, 100 of each kind),
# PFCP establishment, the meters, TCP through a QER, the flow cache's. Numbers in
# docs/microbenchmarks.md.
bench-micro: deps
	$(GO) test -run '^$$' -bench 'Datapath|PDRSelection|Classifier/packet' -benchtime 200000x ./internal/datapath/
	$(GO) test -run '^$$' -bench 'Classifier/change' -benchtime 10x ./internal/datapath/
	$(GO) test -run '^$$' -bench 'RouteConvergence' -benchtime 1x ./internal/datapath/
	$(GO) test -run '^$$' -bench 'PFCPEstablishment' -benchtime 1x -timeout 30m ./test/e2e/
	$(GO) test -run '^$$' -bench 'Meter' -benchtime 200000x ./internal/datapath/
	$(GO) test -run '^$$' -bench 'TCPThrough' -benchtime 1x ./test/e2e/
	$(MAKE) bench-flowcache

# Namespace topology + xupfd + real traffic both ways (needs root).
demo: deps build
	$(BIN)/xupf-demo --xupfd $(BIN)/xupfd --xupfctl $(BIN)/xupfctl

# Install what a fresh Debian machine lacks (needs root).
deps:
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@command -v $(GO) >/dev/null || { echo "Go 1.26 is needed: https://go.dev/dl/"; exit 1; }

clean:
	rm -rf $(BIN)
