// Package scenario reads benchmark scenario files (YAML) and expands their sweeps into points.
//
// A scenario describes, in the spirit of TIPSY, the pipeline the UPF is configured with
// (users, base stations, servers and routes, flows, PDRs and SDF filters, QERs and their MBRs,
// classifier classes, policer algorithm), the traffic offered (direction, frame size, flows,
// seed, PDU Session Container), the tester (mode: max rate, fixed rate or an RFC 2544 search;
// duration, repetitions) and the events injected per second during a run (session add and
// delete, handover). testdata/example.yaml is a complete, commented example.
//
// Every parameter takes one value or a list of values. A list makes the parameter an axis of
// the sweep: the points are the cartesian product of all axes, in a fixed order (the order of
// the parameters in this package's types, whatever their order in the file; the first axis
// varies slowest), and each point is named after the values of the swept parameters, e.g.
// "uplink/users=1000,packet_size=512".
//
// Parse reports every problem found, one per line, each naming the field by its path (e.g.
// "pipeline.users[2]"), the line, the bad value and the fix. Unknown keys are rejected.
package scenario

import (
	"fmt"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/yamlerr"
)

// Scenario is a parsed scenario file.
type Scenario struct {
	// Name names the scenario: the name key, else the file name without extension.
	Name string `json:"name" yaml:"name"`
	// Description is free text.
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	// Axes are the swept parameters, in expansion order.
	Axes []Axis `json:"axes" yaml:"axes"`
	// Points are the sweep's points in order; a scenario without lists has one.
	Points []Point `json:"points" yaml:"points"`
	// Source is the file as read, to be recorded with the results.
	Source []byte `json:"-" yaml:"-"`
}

// Axis is one swept parameter.
type Axis struct {
	// Key is the parameter's path, e.g. "pipeline.users".
	Key string `json:"key" yaml:"key"`
	// Values are the canonical forms of its values, in file order.
	Values []string `json:"values" yaml:"values"`
}

// Setting is the value a point gives to a swept parameter.
type Setting struct {
	Key   string `json:"key" yaml:"key"`
	Value string `json:"value" yaml:"value"`
}

// MaxPoints bounds the size of a sweep.
const MaxPoints = 10000

// Load reads and parses the scenario file at path. Every error line starts with
// "scenario: <path>: ".
func Load(path string) (*Scenario, error) {
	data, err := yamlerr.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	s, errs := parse(data, base)
	if len(errs) > 0 {
		return nil, yamlerr.Join("scenario: "+path+": ", errs)
	}
	return s, nil
}

// Parse parses a scenario; a scenario without a name key is named "scenario". The error, if
// any, has one line per problem, each starting with "scenario: ".
func Parse(data []byte) (*Scenario, error) {
	s, errs := parse(data, "scenario")
	if len(errs) > 0 {
		return nil, yamlerr.Join("scenario: ", errs)
	}
	return s, nil
}

// The raw file: every parameter is a yaml.Node holding one value or a list of values.
type rawScenario struct {
	Name        yaml.Node   `yaml:"name"`
	Description yaml.Node   `yaml:"description"`
	Pipeline    rawPipeline `yaml:"pipeline"`
	Traffic     rawTraffic  `yaml:"traffic"`
	Tester      rawTester   `yaml:"tester"`
	Events      rawEvents   `yaml:"events"`
}

type rawPipeline struct {
	Users             yaml.Node `yaml:"users"`
	BaseStations      yaml.Node `yaml:"base_stations"`
	Servers           yaml.Node `yaml:"servers"`
	Routes            yaml.Node `yaml:"routes"`
	FlowsPerUser      yaml.Node `yaml:"flows_per_user"`
	PDRsPerUser       yaml.Node `yaml:"pdrs_per_user"`
	SDFFiltersPerPDR  yaml.Node `yaml:"sdf_filters_per_pdr"`
	QERsPerUser       yaml.Node `yaml:"qers_per_user"`
	MBRUplink         yaml.Node `yaml:"mbr_uplink"`
	MBRDownlink       yaml.Node `yaml:"mbr_downlink"`
	ClassifierClasses yaml.Node `yaml:"classifier_classes"`
	Policer           yaml.Node `yaml:"policer"`
	PolicerContract   yaml.Node `yaml:"policer_contract"`
	VolumeQuota       yaml.Node `yaml:"volume_quota"`
	SMF               yaml.Node `yaml:"smf"`
	UEAddress         yaml.Node `yaml:"ue_address"`
	UplinkSpread      yaml.Node `yaml:"uplink_spread"`
	UplinkSpreadCPUs  yaml.Node `yaml:"uplink_spread_cpus"`
	Datapath          yaml.Node `yaml:"datapath"`
}

type rawTraffic struct {
	Direction           yaml.Node `yaml:"direction"`
	PacketSize          yaml.Node `yaml:"packet_size"`
	Flows               yaml.Node `yaml:"flows"`
	ActiveUsers         yaml.Node `yaml:"active_users"`
	Seed                yaml.Node `yaml:"seed"`
	PDUSessionContainer yaml.Node `yaml:"pdu_session_container"`
}

type rawTester struct {
	Mode             yaml.Node  `yaml:"mode"`
	Duration         yaml.Node  `yaml:"duration"`
	Warmup           yaml.Node  `yaml:"warmup"`
	Rate             yaml.Node  `yaml:"rate"`
	Repetitions      yaml.Node  `yaml:"repetitions"`
	GeneratorThreads yaml.Node  `yaml:"generator_threads"`
	SampleEvery      yaml.Node  `yaml:"sample_every"`
	RFC2544          rawRFC2544 `yaml:"rfc2544"`
}

type rawRFC2544 struct {
	LossTolerance yaml.Node `yaml:"loss_tolerance"`
	MinRate       yaml.Node `yaml:"min_rate"`
	MaxRate       yaml.Node `yaml:"max_rate"`
	Resolution    yaml.Node `yaml:"resolution"`
	MaxIterations yaml.Node `yaml:"max_iterations"`
	Retries       yaml.Node `yaml:"retries"`
	Confirm       yaml.Node `yaml:"confirm"`
}

type rawEvents struct {
	SessionAdd    yaml.Node `yaml:"session_add"`
	SessionDelete yaml.Node `yaml:"session_delete"`
	Handover      yaml.Node `yaml:"handover"`
}

// document names a scenario file in yamlerr's messages.
var document = yamlerr.Document{
	Empty:       `the file is empty; a scenario needs at least "traffic: {direction: uplink}" (see internal/bench/scenario/testdata/example.yaml)`,
	OneDocument: `keep the scenario in one document (remove the "---" separator) or split it into two files`,
}

func parse(data []byte, defaultName string) (*Scenario, []error) {
	var raw rawScenario
	if errs := yamlerr.Decode(data, &raw, document); len(errs) > 0 {
		return nil, errs
	}
	v := &validator{}
	s := &Scenario{Name: defaultName, Source: append([]byte(nil), data...)}
	if n := &raw.Name; !yamlerr.IsNull(n) {
		if n.Kind != yaml.ScalarNode || !validName(n.Value) {
			v.addf(n, "name", "%q is not a valid name; use 1 to 64 letters, digits, '.', '_' or '-'", n.Value)
		} else {
			s.Name = n.Value
		}
	}
	if n := &raw.Description; !yamlerr.IsNull(n) {
		if n.Kind != yaml.ScalarNode {
			v.addf(n, "description", "must be text")
		} else {
			s.Description = n.Value
		}
	}
	v.params(&raw)
	if len(v.errs) > 0 {
		return nil, v.errs
	}
	points, errs := expand(s.Name, v.axes)
	if len(errs) > 0 {
		return nil, errs
	}
	for _, a := range v.axes {
		if len(a.labels) > 1 {
			s.Axes = append(s.Axes, Axis{Key: a.key, Values: a.labels})
		}
	}
	s.Points = points
	return s, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
