package scenario

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/yamlerr"
)

// Defaults and limits.
const (
	DefaultDuration      = 10 * time.Second
	DefaultWarmup        = time.Second
	DefaultSampleEvery   = 1000
	DefaultLossTolerance = 0.001
	DefaultMaxIterations = 20

	MaxUsers            = 1 << 20
	MaxBaseStations     = 1 << 16
	MaxServers          = 1 << 20
	MaxFlowsPerUser     = 1024
	MaxPDRsPerUser      = 64
	MaxSDFFiltersPerPDR = 16
	MaxQERsPerUser      = 16
	MaxClassifierClass  = 65536
	// MaxFlows bounds the generated packet set (one prepared frame per flow).
	MaxFlows            = 1 << 20
	MinDuration         = 100 * time.Millisecond
	MaxDuration         = time.Hour
	MaxWarmup           = time.Minute
	MaxRepetitions      = 1000
	MaxGeneratorThreads = 64
	MaxEventRate        = 100000
	// MaxRate is the highest rate accepted anywhere (frames/s): far above any 100G link.
	MaxRate = 1e9
)

// Duration is a time.Duration written as text ("10s") in results.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d as "1m30s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// validator turns the raw parameters into axes and collects every problem.
type validator struct {
	axes []*axis
	errs []error
}

// axis is one parameter with its values; set applies value i to a point.
type axis struct {
	key    string
	line   int
	labels []string
	set    func(p *Point, i int)
}

func (v *validator) addf(n *yaml.Node, key, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if n != nil && n.Line > 0 {
		v.errs = append(v.errs, fmt.Errorf("line %d: %s: %s", n.Line, key, msg))
		return
	}
	v.errs = append(v.errs, fmt.Errorf("%s: %s", key, msg))
}

// param registers parameter key read from n: absent or null gives def, a scalar one value, a
// list several. parse converts one scalar and returns the fix as its error; label gives the
// canonical text of a value, used in point names and to find duplicates.
func param[T any](v *validator, key string, n *yaml.Node, def T, parse func(string) (T, error), label func(T) string, set func(*Point, T)) {
	var nodes []*yaml.Node
	switch {
	case yamlerr.IsNull(n):
	case n.Kind == yaml.ScalarNode:
		nodes = []*yaml.Node{n}
	case n.Kind == yaml.SequenceNode:
		if len(n.Content) == 0 {
			v.addf(n, key, "the list is empty; give one value or a list of values to sweep")
			return
		}
		nodes = n.Content
	case n.Kind == yaml.AliasNode && n.Alias != nil:
		param(v, key, n.Alias, def, parse, label, set)
		return
	default:
		v.addf(n, key, "a mapping is not valid here; give one value or a list of values to sweep, e.g. [1, 10, 100]")
		return
	}
	var vals []T
	var labels []string
	if nodes == nil {
		vals, labels = []T{def}, []string{label(def)}
	}
	seen := map[string]bool{}
	ok := true
	for i, e := range nodes {
		k := key
		if n.Kind == yaml.SequenceNode {
			k = fmt.Sprintf("%s[%d]", key, i)
		}
		if e.Kind != yaml.ScalarNode || e.ShortTag() == "!!null" {
			v.addf(e, k, "expected a single value here, not a list, a mapping or null")
			ok = false
			continue
		}
		val, err := parse(e.Value)
		if err != nil {
			v.addf(e, k, "%q: %v", e.Value, err)
			ok = false
			continue
		}
		l := label(val)
		if seen[l] {
			v.addf(e, k, "%q repeats an earlier value of the list (%s); remove it", e.Value, l)
			ok = false
			continue
		}
		seen[l] = true
		vals = append(vals, val)
		labels = append(labels, l)
	}
	if !ok {
		return
	}
	v.axes = append(v.axes, &axis{key: key, line: n.Line, labels: labels, set: func(p *Point, i int) { set(p, vals[i]) }})
}

// Parsers. Each returns the fix as its error.

func intIn(lo, hi int) func(string) (int, error) {
	return func(s string) (int, error) {
		x, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
		if err != nil || x < int64(lo) || x > int64(hi) {
			return 0, fmt.Errorf("use an integer from %d to %d", lo, hi)
		}
		return int(x), nil
	}
}

// perUsers is a count from 1 to hi, or "users/N": one per N users (rounded up), stored as
// −N until complete resolves it for the point's users.
func perUsers(hi int) func(string) (int, error) {
	return func(s string) (int, error) {
		if rest, ok := strings.CutPrefix(strings.ReplaceAll(s, " ", ""), "users/"); ok {
			n, err := strconv.Atoi(strings.ReplaceAll(rest, "_", ""))
			if err != nil || n < 1 || n > MaxUsers {
				return 0, fmt.Errorf("use users/N with N from 1 to %d (one per N users)", MaxUsers)
			}
			return -n, nil
		}
		n, err := intIn(1, hi)(s)
		if err != nil {
			return 0, fmt.Errorf("%w, or users/N (one per N users)", err)
		}
		return n, nil
	}
}

func perUsersLabel(n int) string {
	if n < 0 {
		return fmt.Sprintf("users/%d", -n)
	}
	return strconv.Itoa(n)
}

// packetSize is a frame size or "imix" (IMIX).
func packetSize(s string) (int, error) {
	if strings.EqualFold(s, "imix") {
		return IMIX, nil
	}
	n, err := intIn(64, 9018)(s)
	if err != nil {
		return 0, fmt.Errorf("%w, or imix", err)
	}
	return n, nil
}

func packetSizeLabel(n int) string {
	if n == IMIX {
		return "imix"
	}
	return strconv.Itoa(n)
}

func uintAny(s string) (uint64, error) {
	x, err := strconv.ParseUint(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("use a non-negative integer")
	}
	return x, nil
}

// oneOf parses one of allowed, the names of a string enumeration.
func oneOf[E ~string](allowed ...E) func(string) (E, error) {
	return func(s string) (E, error) {
		for _, a := range allowed {
			if s == string(a) {
				return a, nil
			}
		}
		names := make([]string, len(allowed))
		for i, a := range allowed {
			names[i] = string(a)
		}
		return "", fmt.Errorf("use one of %s", strings.Join(names, ", "))
	}
}

func boolean(s string) (bool, error) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("use true or false")
}

func durationIn(lo, hi time.Duration) func(string) (Duration, error) {
	return func(s string) (Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil || d < lo || d > hi {
			return 0, fmt.Errorf("use a duration from %v to %v, e.g. 10s or 500ms", lo, hi)
		}
		return Duration(d), nil
	}
}

// number parses a float with an optional unit suffix from units (longest match first by
// the caller's order), e.g. "2.5Mpps".
func number(s string, units []string, scale []float64) (float64, bool) {
	s = strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	mult := 1.0
	for i, u := range units {
		if strings.HasSuffix(s, u) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u)), scale[i]
			break
		}
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		return 0, false
	}
	return x * mult, true
}

// rate parses frames per second: a number or one with pps, kpps, Mpps, Gpps.
func rate(s string) (float64, error) {
	x, ok := number(s, []string{"Gpps", "Mpps", "kpps", "pps"}, []float64{1e9, 1e6, 1e3, 1})
	if !ok || x > MaxRate {
		return 0, fmt.Errorf("use a rate in frames per second up to 1Gpps, e.g. 1000000, 1Mpps or 250kpps")
	}
	return x, nil
}

func rateLabel(x float64) string {
	switch {
	case x >= 1e6 && math.Mod(x, 1e3) == 0:
		return strconv.FormatFloat(x/1e6, 'f', -1, 64) + "Mpps"
	case x >= 1e3 && math.Mod(x, 1) == 0:
		return strconv.FormatFloat(x/1e3, 'f', -1, 64) + "kpps"
	}
	return strconv.FormatFloat(x, 'f', -1, 64) + "pps"
}

// bitrate parses bit/s: an integer or a number with bps, kbps, Mbps, Gbps (SI units).
func bitrate(s string) (uint64, error) {
	x, ok := number(s, []string{"Gbps", "Mbps", "kbps", "bps"}, []float64{1e9, 1e6, 1e3, 1})
	if !ok || x > 1e13 || x != math.Trunc(x) {
		return 0, fmt.Errorf("use a whole number of bit/s, e.g. 0 (no MBR), 100Mbps, 1.5Gbps or 2000000")
	}
	return uint64(x), nil
}

// MaxContractRate is the policer's largest contract rate (the API's bound).
const MaxContractRate = 1_000_000_000_000

func contractRate(s string) (uint64, error) {
	x, err := bitrate(s)
	if err != nil || x > MaxContractRate || x%8 != 0 {
		return 0, fmt.Errorf("use 0 (no contract) or a multiple of 8 bit/s up to 1000Gbps, e.g. 1000Gbps")
	}
	return x, nil
}

// volumeQuota parses a URR volume quota in bytes.
func volumeQuota(s string) (uint64, error) {
	x, err := strconv.ParseUint(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("use a whole number of bytes, e.g. 0 (no quota) or 1_000_000_000_000")
	}
	return x, nil
}

func bitrateLabel(x uint64) string {
	switch {
	case x >= 1e9 && x%1e6 == 0:
		return strconv.FormatFloat(float64(x)/1e9, 'f', -1, 64) + "Gbps"
	case x >= 1e6 && x%1e3 == 0:
		return strconv.FormatFloat(float64(x)/1e6, 'f', -1, 64) + "Mbps"
	case x >= 1e3:
		return strconv.FormatFloat(float64(x)/1e3, 'f', -1, 64) + "kbps"
	}
	return strconv.FormatUint(x, 10) + "bps"
}

// fraction parses a loss fraction: a number in [0, 1) or a percentage "0.1%".
func fraction(s string) (float64, error) {
	x, ok := number(s, []string{"%"}, []float64{0.01})
	if !ok || x >= 1 {
		return 0, fmt.Errorf("use a fraction from 0 to below 1, e.g. 0.001, or a percentage, e.g. 0.1%%")
	}
	return x, nil
}

func perSecond(s string) (float64, error) {
	x, ok := number(s, nil, nil)
	if !ok || x > MaxEventRate {
		return 0, fmt.Errorf("use a number of events per second from 0 to %d, e.g. 10 or 0.5", MaxEventRate)
	}
	return x, nil
}

func floatLabel(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
func ident[T any](x T) string     { return fmt.Sprint(x) }

func (v *validator) params(r *rawScenario) {
	d := Default()
	pl, tr, te, rf, ev := &r.Pipeline, &r.Traffic, &r.Tester, &r.Tester.RFC2544, &r.Events

	param(v, "pipeline.users", &pl.Users, d.Pipeline.Users, intIn(1, MaxUsers), ident, func(p *Point, x int) { p.Pipeline.Users = x })
	param(v, "pipeline.base_stations", &pl.BaseStations, d.Pipeline.BaseStations, perUsers(MaxBaseStations), perUsersLabel, func(p *Point, x int) { p.Pipeline.BaseStations = x })
	param(v, "pipeline.servers", &pl.Servers, d.Pipeline.Servers, perUsers(MaxServers), perUsersLabel, func(p *Point, x int) { p.Pipeline.Servers = x })
	param(v, "pipeline.routes", &pl.Routes, d.Pipeline.Routes, perUsers(MaxServers), perUsersLabel, func(p *Point, x int) { p.Pipeline.Routes = x })
	param(v, "pipeline.flows_per_user", &pl.FlowsPerUser, d.Pipeline.FlowsPerUser, intIn(1, MaxFlowsPerUser), ident, func(p *Point, x int) { p.Pipeline.FlowsPerUser = x })
	param(v, "pipeline.pdrs_per_user", &pl.PDRsPerUser, d.Pipeline.PDRsPerUser, intIn(1, MaxPDRsPerUser), ident, func(p *Point, x int) { p.Pipeline.PDRsPerUser = x })
	param(v, "pipeline.sdf_filters_per_pdr", &pl.SDFFiltersPerPDR, d.Pipeline.SDFFiltersPerPDR, intIn(1, MaxSDFFiltersPerPDR), ident, func(p *Point, x int) { p.Pipeline.SDFFiltersPerPDR = x })
	param(v, "pipeline.qers_per_user", &pl.QERsPerUser, d.Pipeline.QERsPerUser, intIn(0, MaxQERsPerUser), ident, func(p *Point, x int) { p.Pipeline.QERsPerUser = x })
	param(v, "pipeline.mbr_uplink", &pl.MBRUplink, d.Pipeline.MBRUplink, bitrate, bitrateLabel, func(p *Point, x uint64) { p.Pipeline.MBRUplink = x })
	param(v, "pipeline.mbr_downlink", &pl.MBRDownlink, d.Pipeline.MBRDownlink, bitrate, bitrateLabel, func(p *Point, x uint64) { p.Pipeline.MBRDownlink = x })
	param(v, "pipeline.classifier_classes", &pl.ClassifierClasses, d.Pipeline.ClassifierClasses, intIn(0, MaxClassifierClass), ident, func(p *Point, x int) { p.Pipeline.ClassifierClasses = x })
	param(v, "pipeline.policer", &pl.Policer, d.Pipeline.Policer, oneOf(PolicerTokenBucket, PolicerSlidingWindow, PolicerFixedWindow), ident, func(p *Point, x string) { p.Pipeline.Policer = x })

	param(v, "pipeline.policer_contract", &pl.PolicerContract, d.Pipeline.PolicerContract, contractRate, bitrateLabel, func(p *Point, x uint64) { p.Pipeline.PolicerContract = x })
	param(v, "pipeline.volume_quota", &pl.VolumeQuota, d.Pipeline.VolumeQuota, volumeQuota, ident, func(p *Point, x uint64) { p.Pipeline.VolumeQuota = x })
	param(v, "pipeline.smf", &pl.SMF, d.Pipeline.SMF, oneOf(SMFOpen5GS, SMFFree5GC), ident, func(p *Point, x string) { p.Pipeline.SMF = x })
	param(v, "pipeline.ue_address", &pl.UEAddress, d.Pipeline.UEAddress, oneOf(UEBySMF, UEByUPF), ident, func(p *Point, x string) { p.Pipeline.UEAddress = x })
	param(v, "pipeline.uplink_spread", &pl.UplinkSpread, d.Pipeline.UplinkSpread, oneOf(config.SpreadOff, config.SpreadTEID, config.SpreadFlow), ident, func(p *Point, x config.SpreadMode) { p.Pipeline.UplinkSpread = x })
	param(v, "pipeline.uplink_spread_cpus", &pl.UplinkSpreadCPUs, d.Pipeline.UplinkSpreadCPUs, oneOf(SpreadCPUsAll, SpreadCPUsOthers), ident, func(p *Point, x string) { p.Pipeline.UplinkSpreadCPUs = x })

	param(v, "pipeline.datapath", &pl.Datapath, d.Pipeline.Datapath, oneOf(DatapathXUPF, DatapathXDPForwarder, DatapathGTPU, DatapathKernel, DatapathFlowCache,
		DatapathKernelNAT, DatapathXUPFKernelNAT, DatapathXUPFNATCache), ident, func(p *Point, x string) { p.Pipeline.Datapath = x })

	param(v, "traffic.direction", &tr.Direction, d.Traffic.Direction, oneOf(Uplink, Downlink, Bidirectional), ident, func(p *Point, x string) { p.Traffic.Direction = x })
	param(v, "traffic.packet_size", &tr.PacketSize, d.Traffic.PacketSize, packetSize, packetSizeLabel, func(p *Point, x int) { p.Traffic.PacketSize = x })
	param(v, "traffic.flows", &tr.Flows, d.Traffic.Flows, intIn(0, MaxFlows), ident, func(p *Point, x int) { p.Traffic.Flows = x })
	param(v, "traffic.active_users", &tr.ActiveUsers, d.Traffic.ActiveUsers, intIn(0, MaxUsers), ident, func(p *Point, x int) { p.Traffic.ActiveUsers = x })
	param(v, "traffic.seed", &tr.Seed, d.Traffic.Seed, uintAny, ident, func(p *Point, x uint64) { p.Traffic.Seed = x })
	param(v, "traffic.pdu_session_container", &tr.PDUSessionContainer, d.Traffic.PDUSessionContainer, boolean, ident, func(p *Point, x bool) { p.Traffic.PDUSessionContainer = x })

	param(v, "tester.mode", &te.Mode, d.Tester.Mode, oneOf(ModeMaxRate, ModeFixedRate, ModeRFC2544), ident, func(p *Point, x string) { p.Tester.Mode = x })
	param(v, "tester.duration", &te.Duration, d.Tester.Duration, durationIn(MinDuration, MaxDuration), Duration.String, func(p *Point, x Duration) { p.Tester.Duration = x })
	param(v, "tester.warmup", &te.Warmup, d.Tester.Warmup, durationIn(0, MaxWarmup), Duration.String, func(p *Point, x Duration) { p.Tester.Warmup = x })
	param(v, "tester.rate", &te.Rate, d.Tester.Rate, rate, rateLabel, func(p *Point, x float64) { p.Tester.Rate = x })
	param(v, "tester.repetitions", &te.Repetitions, d.Tester.Repetitions, intIn(1, MaxRepetitions), ident, func(p *Point, x int) { p.Tester.Repetitions = x })
	param(v, "tester.generator_threads", &te.GeneratorThreads, d.Tester.GeneratorThreads, intIn(1, MaxGeneratorThreads), ident, func(p *Point, x int) { p.Tester.GeneratorThreads = x })
	param(v, "tester.sample_every", &te.SampleEvery, d.Tester.SampleEvery, intIn(0, 1<<30), ident, func(p *Point, x int) { p.Tester.SampleEvery = x })

	param(v, "tester.rfc2544.loss_tolerance", &rf.LossTolerance, d.Tester.RFC2544.LossTolerance, fraction, floatLabel, func(p *Point, x float64) { p.Tester.RFC2544.LossTolerance = x })
	param(v, "tester.rfc2544.min_rate", &rf.MinRate, d.Tester.RFC2544.MinRate, rate, rateLabel, func(p *Point, x float64) { p.Tester.RFC2544.MinRate = x })
	param(v, "tester.rfc2544.max_rate", &rf.MaxRate, d.Tester.RFC2544.MaxRate, rate, rateLabel, func(p *Point, x float64) { p.Tester.RFC2544.MaxRate = x })
	param(v, "tester.rfc2544.resolution", &rf.Resolution, d.Tester.RFC2544.Resolution, rate, rateLabel, func(p *Point, x float64) { p.Tester.RFC2544.Resolution = x })
	param(v, "tester.rfc2544.max_iterations", &rf.MaxIterations, d.Tester.RFC2544.MaxIterations, intIn(1, 1000), ident, func(p *Point, x int) { p.Tester.RFC2544.MaxIterations = x })
	param(v, "tester.rfc2544.retries", &rf.Retries, d.Tester.RFC2544.Retries, intIn(0, 100), ident, func(p *Point, x int) { p.Tester.RFC2544.Retries = x })
	param(v, "tester.rfc2544.confirm", &rf.Confirm, d.Tester.RFC2544.Confirm, intIn(0, 100), ident, func(p *Point, x int) { p.Tester.RFC2544.Confirm = x })

	param(v, "events.session_add", &ev.SessionAdd, d.Events.SessionAdd, perSecond, floatLabel, func(p *Point, x float64) { p.Events.SessionAdd = x })
	param(v, "events.session_delete", &ev.SessionDelete, d.Events.SessionDelete, perSecond, floatLabel, func(p *Point, x float64) { p.Events.SessionDelete = x })
	param(v, "events.handover", &ev.Handover, d.Events.Handover, perSecond, floatLabel, func(p *Point, x float64) { p.Events.Handover = x })
}
