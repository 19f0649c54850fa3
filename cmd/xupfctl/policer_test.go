package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
)

func TestPolicerTables(t *testing.T) {
	checkTables(t, []tableCase{
		{
			args: []string{"policer", "list"},
			want: `
CLASS        ACTION  RATE    BURST  PASSED-PKTS  PASSED-BYTES  DROPPED-PKTS  DROPPED-BYTES
0 (default)  drop    -       -      0            0             12            720
3            limit   10mbit  64kb   900          1170000       100           130000
20           pass    -       -      7            9100          0             0
`,
		},
		{
			args: []string{"policer", "set", "--class", "7", "--limit", "--rate", "1.5mbit", "--burst", "3000"},
			want: "contract for class 7 set: limit 1500kbit, burst 3000b\n",
		},
		{
			args: []string{"policer", "set", "--class", "3", "--drop"},
			want: "contract for class 3 set: drop\n",
		},
		{
			args: []string{"policer", "default", "--pass"},
			want: "default contract set: pass\n",
		},
		{
			args: []string{"policer", "delete", "--class", "20"},
			want: "contract for class 20 deleted\n",
		},
		{
			args: []string{"policer", "delete", "--class", "0"},
			want: "default contract deleted\n",
		},
	})
}

func TestPolicerListEmpty(t *testing.T) {
	r, _ := runCLI(t, &apitest.Backend{}, nil, "policer", "list")
	if want := "CLASS  ACTION  RATE  BURST  PASSED-PKTS  PASSED-BYTES  DROPPED-PKTS  DROPPED-BYTES\n"; r.code != 0 || r.stdout != want {
		t.Errorf("exit %d, output %q, want %q; stderr %q", r.code, r.stdout, want, r.stderr)
	}
	r, _ = runCLI(t, &apitest.Backend{}, nil, "-o", "json", "policer", "list")
	if r.stdout != "[]\n" {
		t.Errorf("json of no contracts = %q, want %q", r.stdout, "[]\n")
	}
}

func TestPolicerJSONAndYAML(t *testing.T) {
	fixture := apitest.Contracts() // 20, 3, 0
	sorted := []api.ContractInfo{fixture[2], fixture[1], fixture[0]}
	replaced := fixture[1]
	replaced.Contract = api.Contract{Action: "limit", RateBPS: 1_000_000_000, BurstBytes: 1 << 20}
	added := api.ContractInfo{Class: 9, Contract: api.Contract{Action: "drop"}}
	def := fixture[2]
	def.Contract = api.Contract{Action: "pass"}
	checkDecoded(t, func() api.Backend { return newBackend() }, []decodedCase{
		{[]string{"policer", "list"}, func() any { return new([]api.ContractInfo) }, &sorted},
		{[]string{"policer", "set", "--class", "3", "--limit", "--rate", "1gbit", "--burst", "1mb"},
			func() any { return new(api.ContractInfo) }, &replaced},
		{[]string{"policer", "set", "--class", "9", "--drop"}, func() any { return new(api.ContractInfo) }, &added},
		{[]string{"policer", "default", "--pass"}, func() any { return new(api.ContractInfo) }, &def},
	})
}

// The JSON and YAML outputs use the API's field names, the contract's fields flat beside
// its class and counters.
func TestPolicerOutputShape(t *testing.T) {
	r, _ := runCLI(t, newBackend(), nil, "-o", "yaml", "policer", "set", "--class", "3", "--limit", "--rate", "10mbit", "--burst", "64kb")
	want := `class: 3
action: limit
rate_bps: 10000000
burst_bytes: 65536
counters:
  passed_packets: 900
  passed_bytes: 1170000
  dropped_packets: 100
  dropped_bytes: 130000
`
	if r.code != 0 || r.stdout != want {
		t.Errorf("exit %d, yaml output:\n%s\nwant:\n%s\nstderr %q", r.code, r.stdout, want, r.stderr)
	}
	r, _ = runCLI(t, newBackend(), nil, "-o", "json", "policer", "default", "--drop")
	if !strings.HasPrefix(r.stdout, "{\n  \"class\": 0,\n  \"action\": \"drop\",\n  \"counters\": {\n") {
		t.Errorf("json output is not the indented API object:\n%s", r.stdout)
	}
}

// What the daemon receives: the flags' rate and burst in bit/s and bytes, the class.
func TestPolicerSet(t *testing.T) {
	for _, tt := range []struct {
		args  []string
		class uint32
		want  api.Contract
	}{
		{[]string{"set", "--class", "4", "--limit", "--rate", "10mbit", "--burst", "64kb"}, 4,
			api.Contract{Action: "limit", RateBPS: 10_000_000, BurstBytes: 65536}},
		{[]string{"set", "--limit", "--burst", "1500", "--rate", "800", "--class", "4294967295"}, 4294967295,
			api.Contract{Action: "limit", RateBPS: 800, BurstBytes: 1500}},
		{[]string{"set", "--class", "5", "--limit", "--rate", "2.5Gbit", "--burst", "1.5MB"}, 5,
			api.Contract{Action: "limit", RateBPS: 2_500_000_000, BurstBytes: 1572864}},
		{[]string{"set", "--class", "0", "--pass"}, 0, api.Contract{Action: "pass"}},
		{[]string{"default", "--limit", "--rate", "1tbit", "--burst", "2g"}, 0,
			api.Contract{Action: "limit", RateBPS: 1_000_000_000_000, BurstBytes: 2 << 30}},
		{[]string{"default", "--drop"}, 0, api.Contract{Action: "drop"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			b := &apitest.Backend{}
			r, _ := runCLI(t, b, nil, append([]string{"policer"}, tt.args...)...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if want := []api.ContractInfo{{Class: tt.class, Contract: tt.want}}; !reflect.DeepEqual(b.ContractsData, want) {
				t.Errorf("the daemon has %+v, want %+v", b.ContractsData, want)
			}
		})
	}
}

func TestPolicerDelete(t *testing.T) {
	b := newBackend()
	// json and yaml print nothing: there is no object to show.
	for _, tt := range []struct {
		format string
		class  string
		left   []uint32
	}{{"json", "3", []uint32{20, 0}}, {"yaml", "0", []uint32{20}}} {
		r, _ := runCLI(t, b, nil, "-o", tt.format, "policer", "delete", "--class", tt.class)
		if r.code != 0 || r.stdout != "" || r.stderr != "" {
			t.Errorf("-o %s: exit %d, stdout %q, stderr %q", tt.format, r.code, r.stdout, r.stderr)
		}
		var left []uint32
		for _, c := range b.ContractsData {
			left = append(left, c.Class)
		}
		if !reflect.DeepEqual(left, tt.left) {
			t.Errorf("contracts left = %v, want %v", left, tt.left)
		}
	}
}

func TestPolicerErrors(t *testing.T) {
	const (
		rateHint  = "write bits per second, e.g. 500kbit, 10mbit or 1gbit (or a plain number of bit/s)\n"
		burstHint = "write bytes, e.g. 1500, 64kb or 1mb (kb = 1024 bytes)\n"
	)
	checkErrors(t, []errorCase{
		{
			name:       "set without --class",
			args:       []string{"policer", "set", "--drop"},
			wantStderr: "error: --class is required: the class id from `xupfctl classifier list`, or 0 for the default contract, e.g. --class 3\n",
			wantUsage:  true,
		},
		{
			name:       "set without an action",
			args:       []string{"policer", "set", "--class", "3"},
			wantStderr: "error: say what the contract does: --pass, --drop, or --limit with --rate and --burst\n",
			wantUsage:  true,
		},
		{
			name:       "default without an action",
			args:       []string{"policer", "default", "--pass=false"},
			wantStderr: "error: say what the contract does: --pass, --drop, or --limit with --rate and --burst\n",
			wantUsage:  true,
		},
		{
			name:       "two actions",
			args:       []string{"policer", "set", "--class", "3", "--pass", "--drop"},
			wantStderr: "error: --pass and --drop: choose one of --pass, --drop and --limit\n",
			wantUsage:  true,
		},
		{
			name:       "three actions",
			args:       []string{"policer", "default", "--limit", "--pass", "--drop", "--rate", "1mbit", "--burst", "1kb"},
			wantStderr: "error: --pass and --drop and --limit: choose one of --pass, --drop and --limit\n",
			wantUsage:  true,
		},
		{
			name:       "--limit without --rate",
			args:       []string{"policer", "set", "--class", "3", "--limit", "--burst", "64kb"},
			wantStderr: "error: --limit needs --rate, the rate in bits per second, e.g. --rate 10mbit\n",
			wantUsage:  true,
		},
		{
			name:       "--limit without --burst",
			args:       []string{"policer", "default", "--limit", "--rate", "10mbit"},
			wantStderr: "error: --limit needs --burst, the burst in bytes, e.g. --burst 64kb\n",
			wantUsage:  true,
		},
		{
			name:       "--rate with --pass",
			args:       []string{"policer", "set", "--class", "3", "--pass", "--rate", "10mbit"},
			wantStderr: "error: --rate goes with --limit only; --pass passes every packet of the class\n",
			wantUsage:  true,
		},
		{
			name:       "--burst with --drop",
			args:       []string{"policer", "default", "--drop", "--burst", "1kb"},
			wantStderr: "error: --burst goes with --limit only; --drop drops every packet of the class\n",
			wantUsage:  true,
		},
		{
			name:       "--class not a number",
			args:       []string{"policer", "set", "--class", "web", "--drop"},
			wantStderr: "error: invalid argument \"web\" for \"--class\" flag: not a class id; use a whole number from 0 (the default contract) to 4294967295\n",
			wantUsage:  true,
		},
		{
			name:       "--class on default",
			args:       []string{"policer", "default", "--class", "3", "--drop"},
			wantStderr: "error: unknown flag: --class\n",
			wantUsage:  true,
		},
		{
			name:       "--rate in bytes",
			args:       []string{"policer", "set", "--class", "3", "--limit", "--rate", "10mb", "--burst", "1kb"},
			wantStderr: "error: invalid argument \"10mb\" for \"--rate\" flag: \"10mb\" is a size in bytes, not a rate; " + rateHint,
			wantUsage:  true,
		},
		{
			name:       "--rate in tc's bytes per second",
			args:       []string{"policer", "set", "--class", "3", "--limit", "--rate", "10mbps", "--burst", "1kb"},
			wantStderr: "error: invalid argument \"10mbps\" for \"--rate\" flag: \"10mbps\": tc reads \"mbps\" as bytes per second, which is ambiguous; " + rateHint,
			wantUsage:  true,
		},
		{
			name:       "--rate with an unknown unit",
			args:       []string{"policer", "set", "--class", "3", "--limit", "--rate", "10m", "--burst", "1kb"},
			wantStderr: "error: invalid argument \"10m\" for \"--rate\" flag: \"10m\": unknown unit \"m\"; " + rateHint,
			wantUsage:  true,
		},
		{
			name:       "--rate not a number",
			args:       []string{"policer", "set", "--class", "3", "--limit", "--rate", "fast", "--burst", "1kb"},
			wantStderr: "error: invalid argument \"fast\" for \"--rate\" flag: \"fast\": not a number with a unit; " + rateHint,
			wantUsage:  true,
		},
		{
			name:       "--rate of a fraction of a bit",
			args:       []string{"policer", "set", "--class", "3", "--limit", "--rate", "1.0005kbit", "--burst", "1kb"},
			wantStderr: "error: invalid argument \"1.0005kbit\" for \"--rate\" flag: \"1.0005kbit\": not a whole number of bits per second; " + rateHint,
			wantUsage:  true,
		},
		{
			name:       "--rate 0",
			args:       []string{"policer", "set", "--class", "3", "--limit", "--rate", "0mbit", "--burst", "1kb"},
			wantStderr: "error: invalid argument \"0mbit\" for \"--rate\" flag: \"0mbit\": a limit needs a rate above 0; " + rateHint,
			wantUsage:  true,
		},
		{
			name:       "--rate beyond 64 bits",
			args:       []string{"policer", "set", "--class", "3", "--limit", "--rate", "20000000tbit", "--burst", "1kb"},
			wantStderr: "error: invalid argument \"20000000tbit\" for \"--rate\" flag: \"20000000tbit\": too large; " + rateHint,
			wantUsage:  true,
		},
		{
			name:       "--burst in bits",
			args:       []string{"policer", "set", "--class", "3", "--limit", "--rate", "1mbit", "--burst", "512kbit"},
			wantStderr: "error: invalid argument \"512kbit\" for \"--burst\" flag: \"512kbit\" is in bits; " + burstHint,
			wantUsage:  true,
		},
		{
			name:       "--burst negative",
			args:       []string{"policer", "set", "--class", "3", "--limit", "--rate", "1mbit", "--burst", "-1"},
			wantStderr: "error: invalid argument \"-1\" for \"--burst\" flag: \"-1\": not a number with a unit; " + burstHint,
			wantUsage:  true,
		},
		{
			name:       "--burst 0",
			args:       []string{"policer", "set", "--class", "3", "--limit", "--rate", "1mbit", "--burst", "0"},
			wantStderr: "error: invalid argument \"0\" for \"--burst\" flag: \"0\": a burst must be above 0, at least the largest packet; " + burstHint,
			wantUsage:  true,
		},
		{
			name:       "--burst of a fraction of a byte",
			args:       []string{"policer", "set", "--class", "3", "--limit", "--rate", "1mbit", "--burst", "1.5"},
			wantStderr: "error: invalid argument \"1.5\" for \"--burst\" flag: \"1.5\": not a whole number of bytes; " + burstHint,
			wantUsage:  true,
		},
		{
			name:       "a rate that is not whole bytes: the daemon's message as it is",
			args:       []string{"policer", "set", "--class", "3", "--limit", "--rate", "1001", "--burst", "1kb"},
			wantStderr: "error: contract for class 3: rate_bps: 1001 is not a multiple of 8 (the policer meters whole bytes per second); use 1000 or 1008\n",
		},
		{
			name:       "a rate beyond 1 Tbit/s: the daemon's message",
			args:       []string{"policer", "default", "--limit", "--rate", "2tbit", "--burst", "1kb"},
			wantStderr: "error: default contract: rate_bps: 2000000000000 is out of range; use 8 (1 byte/s) to 1000000000000 (1 Tbit/s)\n",
		},
		{
			name:       "delete without --class",
			args:       []string{"policer", "delete"},
			wantStderr: "error: --class is required: the class whose contract to delete, 0 for the default contract, e.g. --class 3\n",
			wantUsage:  true,
		},
		{
			name:       "delete a class without a contract",
			args:       []string{"policer", "delete", "--class", "7"},
			wantStderr: "error: class 7 has no contract\n",
		},
		{
			name:       "delete a class given as an argument",
			args:       []string{"policer", "delete", "3"},
			wantStderr: "error: unknown command \"3\" for \"xupfctl policer delete\"\n",
			wantUsage:  true,
		},
		{
			name:       "unknown policer subcommand",
			args:       []string{"policer", "add"},
			wantStderr: "error: unknown command \"add\" for \"xupfctl policer\"; use list, set, default or delete\n",
			wantUsage:  true,
		},
	})
}

func TestPolicerDaemonDown(t *testing.T) {
	b := apitest.NewBackend()
	b.Err = errorString("policer counters: operation not permitted")
	r, _ := runCLI(t, b, nil, "policer", "list")
	if r.code != 1 || r.stderr != "error: policer counters: operation not permitted\n" {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func TestParseRateAndSize(t *testing.T) {
	for in, want := range map[string]uint64{
		"8": 8, "800bit": 800, "500kbit": 500_000, "10mbit": 10_000_000, "10Mbit": 10_000_000,
		"1.5gbit": 1_500_000_000, "0.008kbit": 8, "1tbit": 1_000_000_000_000, " 64kbit ": 64_000,
	} {
		if got, err := parseRate(in); err != nil || got != want {
			t.Errorf("parseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]uint64{
		"1": 1, "1500": 1500, "1500b": 1500, "64kb": 65536, "64k": 65536, "64KiB": 65536, "1mb": 1 << 20,
		"0.5kb": 512, "2gb": 2 << 30, "1.5m": 1572864,
	} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1e6", "1/2", "0x10", "10 mbit", ".5mbit", "5.mbit", "+5"} {
		if _, err := parseRate(in); err == nil {
			t.Errorf("parseRate(%q) succeeded", in)
		}
	}
	// What the table shows reads back as the same value.
	for _, n := range []uint64{8, 1000, 1001, 1_500_000, 10_000_000, 1_000_000_000_000, 123_456_789_000} {
		if got, err := parseRate(formatRate(n)); err != nil || got != n {
			t.Errorf("parseRate(formatRate(%d) = %q) = %d, %v", n, formatRate(n), got, err)
		}
	}
	for _, n := range []uint64{1, 1000, 1024, 65536, 3 << 20, 5 << 30, 1<<30 + 1} {
		if got, err := parseSize(formatSize(n)); err != nil || got != n {
			t.Errorf("parseSize(formatSize(%d) = %q) = %d, %v", n, formatSize(n), got, err)
		}
	}
}

func TestPolicerCompletion(t *testing.T) {
	r, _ := runCLI(t, newBackend(), nil, "__complete", "policer", "set", "--class", "")
	for _, want := range []string{"0\tthe default contract\n", "3\tudp 10.0.0.0/8:1000-2000 -> any:5060\n", "20\t"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--class completion for set lacks %q:\n%s", want, r.stdout)
		}
	}
	r, _ = runCLI(t, newBackend(), nil, "__complete", "policer", "delete", "--class", "")
	for _, want := range []string{"0\tdrop\n", "3\tlimit 10mbit, burst 64kb\n", "20\tpass\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--class completion for delete lacks %q:\n%s", want, r.stdout)
		}
	}
}
