package scenario

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, doc string) *Scenario {
	t.Helper()
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func TestDefaults(t *testing.T) {
	s := mustParse(t, "traffic: {direction: uplink}\n")
	if s.Name != "scenario" || len(s.Points) != 1 || len(s.Axes) != 0 {
		t.Fatalf("%+v", s)
	}
	want := Default()
	want.Name = "scenario"
	want.Traffic.Flows, want.Traffic.ActiveUsers = 1, 1
	if got := s.Points[0]; !reflect.DeepEqual(got, want) {
		t.Fatalf("point\n got %+v\nwant %+v", got, want)
	}
}

func TestExample(t *testing.T) {
	s, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "example" || !strings.Contains(s.Description, "uplink") || len(s.Source) == 0 {
		t.Fatalf("%+v", s)
	}
	wantAxes := []Axis{
		{Key: "pipeline.users", Values: []string{"1", "1000"}},
		{Key: "traffic.packet_size", Values: []string{"128", "512", "1518"}},
	}
	if !reflect.DeepEqual(s.Axes, wantAxes) {
		t.Fatalf("axes %+v", s.Axes)
	}
	var names []string
	for i, p := range s.Points {
		if p.Index != i {
			t.Errorf("point %d has index %d", i, p.Index)
		}
		names = append(names, p.Name)
	}
	want := []string{
		"example/users=1,packet_size=128", "example/users=1,packet_size=512", "example/users=1,packet_size=1518",
		"example/users=1000,packet_size=128", "example/users=1000,packet_size=512", "example/users=1000,packet_size=1518",
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("names %q", names)
	}
	p := s.Points[4]
	if p.Pipeline.Users != 1000 || p.Traffic.PacketSize != 512 || p.Traffic.Flows != 1000 ||
		p.Pipeline.BaseStations != 2 || p.Pipeline.Routes != 2 || p.Pipeline.QERsPerUser != 1 ||
		p.Tester.RFC2544.LossTolerance != 0.001 || p.Tester.Duration.D() != 10*time.Second {
		t.Fatalf("point 4: %+v", p)
	}
	if !reflect.DeepEqual(p.Sweep, []Setting{{"pipeline.users", "1000"}, {"traffic.packet_size", "512"}}) {
		t.Fatalf("sweep %+v", p.Sweep)
	}
}

// TestExpansionOrder: the axes follow the parameters' order in the model, not the file's,
// the first varying slowest, and the file order of values is kept.
func TestExpansionOrder(t *testing.T) {
	a := mustParse(t, `
events: {session_add: [0, 5]}
traffic: {packet_size: [256, 128], direction: [uplink, downlink]}
pipeline: {users: [10, 1]}
`)
	b := mustParse(t, `
pipeline: {users: [10, 1]}
traffic: {direction: [uplink, downlink], packet_size: [256, 128]}
events: {session_add: [0, 5]}
`)
	if len(a.Points) != 16 {
		t.Fatalf("%d points", len(a.Points))
	}
	for i := range a.Points {
		if !reflect.DeepEqual(a.Points[i], b.Points[i]) {
			t.Fatalf("point %d differs:\n%+v\n%+v", i, a.Points[i], b.Points[i])
		}
	}
	first, second, last := a.Points[0], a.Points[1], a.Points[15]
	if first.Name != "scenario/users=10,direction=uplink,packet_size=256,session_add=0" ||
		second.Name != "scenario/users=10,direction=uplink,packet_size=256,session_add=5" ||
		last.Name != "scenario/users=1,direction=downlink,packet_size=128,session_add=5" {
		t.Fatalf("names %q %q %q", first.Name, second.Name, last.Name)
	}
	seen := map[string]bool{}
	for _, p := range a.Points {
		if seen[p.Name] {
			t.Fatalf("duplicate name %s", p.Name)
		}
		seen[p.Name] = true
	}
}

func TestUnits(t *testing.T) {
	s := mustParse(t, `
pipeline: {qers_per_user: 1, mbr_uplink: [1.5Gbps, 100Mbps, 64kbps, 2000000], mbr_downlink: 1_000}
tester:
  mode: fixed_rate
  rate: [2.5Mpps, 250kpps, 1000]
  duration: 500ms
  rfc2544: {loss_tolerance: 0.5%, max_rate: 10Mpps}
`)
	if len(s.Points) != 12 {
		t.Fatalf("%d points", len(s.Points))
	}
	p := s.Points[0]
	if p.Pipeline.MBRUplink != 1_500_000_000 || p.Pipeline.MBRDownlink != 1000 || p.Tester.Rate != 2_500_000 ||
		p.Tester.Duration.D() != 500*time.Millisecond || p.Tester.RFC2544.LossTolerance != 0.005 ||
		p.Tester.RFC2544.MaxRate != 1e7 {
		t.Fatalf("%+v", p)
	}
	if s.Points[11].Pipeline.MBRUplink != 2_000_000 || s.Points[11].Tester.Rate != 1000 {
		t.Fatalf("%+v", s.Points[11])
	}
	if got := s.Axes; got[0].Values[0] != "1.5Gbps" || got[0].Values[2] != "64kbps" || got[0].Values[3] != "2Mbps" ||
		got[1].Values[0] != "2.5Mpps" || got[1].Values[1] != "250kpps" || got[1].Values[2] != "1kpps" {
		t.Fatalf("labels %+v", got)
	}
}

// TestDatapathsAndIMIX: the baselines and IMIX are values like any other, and IMIX is not
// held to the single-size limits (each of its frames is raised to the direction's smallest).
func TestDatapathsAndIMIX(t *testing.T) {
	s := mustParse(t, `
pipeline: {datapath: [xupf, xdp_forwarder, kernel]}
traffic: {packet_size: [imix, 128], direction: downlink}
`)
	if len(s.Points) != 6 {
		t.Fatalf("%d points", len(s.Points))
	}
	p := s.Points[2]
	if p.Pipeline.Datapath != DatapathXDPForwarder || p.Traffic.PacketSize != IMIX || p.Name != "scenario/datapath=xdp_forwarder,packet_size=imix" {
		t.Fatalf("point 2: %+v", p)
	}
	if d := Default().Pipeline.Datapath; d != DatapathXUPF {
		t.Fatalf("default datapath %q", d)
	}
}

// TestSMFAndContract: the session layout and the policer contract are values like any other.
func TestSMFAndContract(t *testing.T) {
	s := mustParse(t, `
pipeline: {smf: [open5gs, free5gc], classifier_classes: 8, policer_contract: 1000Gbps, ue_address: upf}
`)
	if len(s.Points) != 2 {
		t.Fatalf("%d points", len(s.Points))
	}
	p := s.Points[1]
	if p.Pipeline.SMF != SMFFree5GC || p.Pipeline.PolicerContract != 1e12 || p.Pipeline.UEAddress != UEByUPF || p.Name != "scenario/smf=free5gc" {
		t.Fatalf("point 1: %+v", p)
	}
	if d := Default().Pipeline; d.SMF != SMFOpen5GS || d.PolicerContract != 0 || d.UEAddress != UEBySMF {
		t.Fatalf("defaults %q %d", d.SMF, d.PolicerContract)
	}
}

// TestUplinkSpread: xupfd's uplink_spread is swept like any value, off by default.
func TestUplinkSpread(t *testing.T) {
	s := mustParse(t, "pipeline: {uplink_spread: [off, flow], uplink_spread_cpus: others}\n")
	if len(s.Points) != 2 || s.Points[1].Pipeline.UplinkSpread != "flow" || s.Points[1].Name != "scenario/uplink_spread=flow" ||
		s.Points[1].Pipeline.UplinkSpreadCPUs != SpreadCPUsOthers {
		t.Fatalf("points %+v", s.Points)
	}
	if d := Default().Pipeline; d.UplinkSpread != "off" || d.UplinkSpreadCPUs != SpreadCPUsAll {
		t.Fatalf("defaults uplink_spread %q, uplink_spread_cpus %q", d.UplinkSpread, d.UplinkSpreadCPUs)
	}
}

// TestPerUsers: counts given per users follow the users of each point.
func TestPerUsers(t *testing.T) {
	s := mustParse(t, `
pipeline: {users: [1, 150, 1000000], base_stations: users/100, servers: users/10, routes: users/10}
`)
	want := [][3]int{{1, 1, 1}, {2, 15, 15}, {10000, 100000, 100000}}
	for i, p := range s.Points {
		pl := p.Pipeline
		if got := [3]int{pl.BaseStations, pl.Servers, pl.Routes}; got != want[i] {
			t.Errorf("users %d: base stations, servers, routes %v, want %v", pl.Users, got, want[i])
		}
	}
	// traffic.flows caps the packet set.
	capped := mustParse(t, "pipeline: {users: [2, 100]}\ntraffic: {flows: 50}\n")
	if a, b := capped.Points[0].Traffic.Flows, capped.Points[1].Traffic.Flows; a != 2 || b != 50 {
		t.Errorf("flows capped to %d and %d, want 2 and 50", a, b)
	}
	// traffic.active_users narrows the flows to the first users, and caps the set too.
	active := mustParse(t, "pipeline: {users: [10, 100], flows_per_user: 4}\ntraffic: {active_users: 64}\n")
	for i, want := range [][2]int{{10, 40}, {64, 256}} {
		if tr := active.Points[i].Traffic; tr.ActiveUsers != want[0] || tr.Flows != want[1] {
			t.Errorf("point %d: active users %d, flows %d, want %v", i, tr.ActiveUsers, tr.Flows, want)
		}
	}
	if _, err := Parse([]byte("pipeline: {base_stations: users/0}\n")); err == nil || !strings.Contains(err.Error(), "use users/N") {
		t.Errorf("users/0: %v", err)
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      []string
	}{
		{"empty", "", []string{"the file is empty"}},
		{"two documents", "traffic: {}\n---\ntraffic: {}\n", []string{"line 2: a second YAML document"}},
		{"syntax", "traffic: [\n", []string{"invalid YAML"}},
		{"unknown top", "trafic: {}\n", []string{`unknown key "trafic" at the top level`, "valid keys: name, description, pipeline, traffic, tester, events"}},
		{"unknown nested", "tester:\n  rfc2544: {tolerance: 1}\n", []string{`line 2: unknown key "tolerance" under tester.rfc2544`, "loss_tolerance"}},
		{"section not mapping", "pipeline: [1]\n", []string{"pipeline must be a mapping"}},
		{"range", "pipeline: {users: 0}\n", []string{`line 1: pipeline.users: "0": use an integer from 1 to 1048576`}},
		{"list element", "pipeline:\n  users: [1, x, 3]\n", []string{`line 2: pipeline.users[1]: "x": use an integer`}},
		{"empty list", "pipeline: {users: []}\n", []string{"pipeline.users: the list is empty"}},
		{"duplicate", "tester: {mode: fixed_rate, rate: [1Mpps, 1000000]}\n", []string{`tester.rate[1]: "1000000" repeats an earlier value of the list (1Mpps)`}},
		{"nested list", "traffic: {packet_size: [[1]]}\n", []string{"traffic.packet_size[0]: expected a single value"}},
		{"mapping value", "traffic: {seed: {a: 1}}\n", []string{"traffic.seed: a mapping is not valid here"}},
		{"enum", "traffic: {direction: up}\n", []string{`traffic.direction: "up": use one of uplink, downlink, bidirectional`}},
		{"bool", "traffic: {pdu_session_container: yes}\n", []string{"use true or false"}},
		{"duration", "tester: {duration: 10}\n", []string{"tester.duration", "e.g. 10s"}},
		{"rate", "tester: {mode: fixed_rate, rate: fast}\n", []string{"tester.rate", "1Mpps"}},
		{"fraction", "tester: {rfc2544: {loss_tolerance: 100%}}\n", []string{"loss_tolerance", "0.1%"}},
		{"name", "name: a/b\n", []string{`name: "a/b" is not a valid name`}},
		{"several at once", "pipeline: {users: -1, servers: 0}\n", []string{"pipeline.users", "pipeline.servers"}},
		// Rules between parameters.
		{"routes", "pipeline: {routes: 3, servers: 2}\n", []string{"pipeline.routes (3) exceeds pipeline.servers (2)"}},
		{"mbr without qer", "pipeline: {mbr_uplink: 1Mbps}\n", []string{"qers_per_user is 0"}},
		{"too many qers", "pipeline: {qers_per_user: 3}\n", []string{"qers_per_user (3) exceeds the user's 2 PDRs"}},
		{"packet too small", "traffic: {packet_size: 64}\n", []string{"traffic.packet_size (64) is below the 102 bytes that uplink frames", "use 102 or more"}},
		{"packet too small no psc", "traffic: {packet_size: 64, pdu_session_container: false}\n", []string{"below the 94 bytes"}},
		{"downlink too big", "traffic: {packet_size: 1518, direction: downlink}\n", []string{"use 1474 or less"}},
		{"fixed without rate", "tester: {mode: fixed_rate}\n", []string{"tester.rate is missing"}},
		{"rate without fixed", "tester: {rate: 1Mpps}\n", []string{"tester.rate (1Mpps) is only used with mode fixed_rate"}},
		{"rfc bounds", "tester: {rfc2544: {min_rate: 2Mpps, max_rate: 1Mpps}}\n", []string{"max_rate (1Mpps) is not above min_rate (2Mpps)"}},
		{"handover", "events: {handover: 1}\n", []string{"events.handover needs a second gNB"}},
		{"datapath", "pipeline: {datapath: dpdk}\n", []string{`pipeline.datapath: "dpdk": use one of xupf, xdp_forwarder, gtpu_minimal, kernel`}},
		{"contract rate", "pipeline: {classifier_classes: 1, policer_contract: 1001bps}\n", []string{"pipeline.policer_contract", "multiple of 8"}},
		{"contract without classes", "pipeline: {policer_contract: 1Gbps}\n", []string{"pipeline.policer_contract needs classifier classes"}},
		{"smf", "pipeline: {smf: oai}\n", []string{`pipeline.smf: "oai": use one of open5gs, free5gc`}},
		{"smf on a baseline", "pipeline: {smf: free5gc, datapath: xdp_forwarder}\n", []string{"smf, ue_address and uplink_spread(_cpus) configure xupf, not the xdp_forwarder baseline"}},
		{"uplink_spread", "pipeline: {uplink_spread: rss}\n", []string{`pipeline.uplink_spread: "rss": use one of off, teid, flow`}},
		{"uplink_spread_cpus", "pipeline: {uplink_spread_cpus: 1}\n", []string{`pipeline.uplink_spread_cpus: "1": use one of all, others`}},
		{"uplink_spread on a baseline", "pipeline: {uplink_spread: teid, datapath: gtpu_minimal}\n", []string{"uplink_spread(_cpus) configure xupf, not the gtpu_minimal baseline"}},
		{"packet size word", "traffic: {packet_size: mix}\n", []string{"traffic.packet_size", "or imix"}},
		{"events on a baseline", "pipeline: {datapath: kernel, base_stations: 2}\nevents: {handover: 1}\n", []string{"events need sessions, which only pipeline.datapath xupf has (it is kernel)"}},
		{"NAT shares servers", "pipeline: {users: 4, flows_per_user: 2, servers: 4, datapath: xupf_nat_cache}\n", []string{"pipeline.datapath xupf_nat_cache needs a server per flow (servers 4, users × flows_per_user 8)", "set servers to 8"}},
		{"delete", "events: {session_delete: 1}\ntester: {duration: 10s}\n", []string{"deletes more sessions than there are"}},
		{"sweep point named", "traffic: {packet_size: [64, 65, 128]}\n", []string{"point scenario/packet_size=64: traffic.packet_size (64)", "point scenario/packet_size=65: traffic.packet_size (65)"}},
		{"sweep same problem", "pipeline: {users: [1, 2, 3]}\nevents: {handover: 1}\n", []string{"point scenario/users=1 (and 2 more): events.handover"}},
		{"sweep many problems", "traffic: {packet_size: [64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85]}\n", []string{"2 more problems like these"}},
		{"too many points", "pipeline: {users: [1,2,3,4,5,6,7,8,9,10], servers: [1,2,3,4,5,6,7,8,9,10], routes: [1,2,3,4,5,6,7,8,9,10], flows_per_user: [1,2,3,4,5,6,7,8,9,10], pdrs_per_user: [1,2]}\n", []string{"more than 10000 points"}},
	} {
		_, err := Parse([]byte(c.doc))
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error\n%v\nlacks %q", c.name, err, w)
			}
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.HasPrefix(line, "scenario: ") {
				t.Errorf("%s: line %q lacks the prefix", c.name, line)
			}
		}
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load("testdata/missing.yaml")
	if err == nil || !strings.Contains(err.Error(), "scenario: cannot read testdata/missing.yaml: no such file or directory") {
		t.Fatalf("%v", err)
	}
}

// TestPointJSON: a point records in a result file and reads back.
func TestPointJSON(t *testing.T) {
	s, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s.Points[5])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"duration":"10s"`) {
		t.Errorf("duration not as text: %s", b)
	}
	var back Point
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s.Points[5]) {
		t.Fatalf("round trip\n got %+v\nwant %+v", back, s.Points[5])
	}
}

// TestEveryKeyIsAParameter: each key of the file model is registered as a parameter with
// its full path, so none is silently ignored.
func TestEveryKeyIsAParameter(t *testing.T) {
	var want []string
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			key := prefix + f.Tag.Get("yaml")
			if f.Type.Kind() == reflect.Struct && f.Type.Name() != "Node" {
				walk(key+".", f.Type)
				continue
			}
			if key != "name" && key != "description" {
				want = append(want, key)
			}
		}
	}
	walk("", reflect.TypeOf(rawScenario{}))
	v := &validator{}
	v.params(&rawScenario{})
	var got []string
	for _, a := range v.axes {
		got = append(got, a.key)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parameters\n got %q\nwant %q", got, want)
	}
}

// TestProfiles: every scenario of the quick and full profiles (bench/) is valid.
func TestProfiles(t *testing.T) {
	paths, err := filepath.Glob("../../../bench/*/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no profile scenarios found: %v", err)
	}
	for _, p := range paths {
		if _, err := Load(p); err != nil {
			t.Error(err)
		}
	}
}
