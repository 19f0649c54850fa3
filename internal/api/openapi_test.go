package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/pfcp"
	"github.com/xupf/xupf/internal/session"
)

// These tests keep api/openapi.yaml honest: every registered route and every JSON field of
// the contract types must be in the spec, and the spec must describe nothing else.

func loadSpec(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatalf("reading the spec: %v", err)
	}
	var spec map[string]any
	if err := yaml.Unmarshal(raw, &spec); err != nil {
		t.Fatalf("parsing the spec: %v", err)
	}
	if v, _ := spec["openapi"].(string); v != "3.0.3" {
		t.Errorf("openapi = %q, want 3.0.3", v)
	}
	return spec
}

func mapAt(t *testing.T, m map[string]any, keys ...string) map[string]any {
	t.Helper()
	cur := m
	for i, k := range keys {
		next, ok := cur[k].(map[string]any)
		if !ok {
			t.Fatalf("spec has no object at %s", strings.Join(keys[:i+1], "."))
		}
		cur = next
	}
	return cur
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func TestSpecPathsMatchRoutes(t *testing.T) {
	paths := mapAt(t, loadSpec(t), "paths")

	registered := map[string]bool{}
	for _, rt := range routes() {
		key := strings.ToLower(rt.method) + " " + rt.pattern
		registered[key] = true
		item, ok := paths[rt.pattern].(map[string]any)
		if !ok {
			t.Errorf("route %s %s is not documented: api/openapi.yaml has no path %q", rt.method, rt.pattern, rt.pattern)
			continue
		}
		if _, ok := item[strings.ToLower(rt.method)]; !ok {
			t.Errorf("route %s %s is not documented: path %q has no %q operation", rt.method, rt.pattern, rt.pattern, strings.ToLower(rt.method))
		}
	}

	for path, v := range paths {
		item, _ := v.(map[string]any)
		for method := range item {
			if !slices.Contains(httpMethods, method) {
				continue // summary, parameters, ...
			}
			if !registered[method+" "+path] {
				t.Errorf("api/openapi.yaml documents %s %s, which the server does not serve", strings.ToUpper(method), path)
			}
		}
	}
}

func TestSpecSchemasMatchTypes(t *testing.T) {
	schemas := mapAt(t, loadSpec(t), "components", "schemas")
	for name, typ := range map[string]reflect.Type{
		"Status":          reflect.TypeFor[Status](),
		"Interface":       reflect.TypeFor[Interface](),
		"SessionInfo":     reflect.TypeFor[SessionInfo](),
		"Usage":           reflect.TypeFor[session.Usage](),
		"Counters":        reflect.TypeFor[session.Counters](),
		"Stats":           reflect.TypeFor[Stats](),
		"Class":           reflect.TypeFor[classifier.Class](),
		"ClassInfo":       reflect.TypeFor[ClassInfo](),
		"Contract":        reflect.TypeFor[Contract](),
		"Route":           reflect.TypeFor[Route](),
		"CachedFlow":      reflect.TypeFor[CachedFlow](),
		"FlushResult":     reflect.TypeFor[FlushResult](),
		"FlowCacheStats":  reflect.TypeFor[FlowCacheStats](),
		"Neighbour":       reflect.TypeFor[Neighbour](),
		"ContractInfo":    reflect.TypeFor[ContractInfo](),
		"PoliceCounters":  reflect.TypeFor[PoliceCounters](),
		"Association":     reflect.TypeFor[pfcp.Association](),
		"PFCPSessionInfo": reflect.TypeFor[PFCPSessionInfo](),
		"PDR":             reflect.TypeFor[pfcp.PDR](),
		"FTEID":           reflect.TypeFor[pfcp.FTEID](),
		"SDF":             reflect.TypeFor[pfcp.SDF](),
		"FAR":             reflect.TypeFor[pfcp.FAR](),
		"OHC":             reflect.TypeFor[pfcp.OHC](),
		"QER":             reflect.TypeFor[pfcp.QER](),
		"URR":             reflect.TypeFor[pfcp.URR](),
		"URRSubsequent":   reflect.TypeFor[pfcp.Subsequent](),
		"URRMonitoring":   reflect.TypeFor[pfcp.Monitoring](),
		"BAR":             reflect.TypeFor[pfcp.BAR](),
		"PDRUsage":        reflect.TypeFor[PDRUsage](),
		"Error":           reflect.TypeFor[Error](),
	} {
		t.Run(name, func(t *testing.T) {
			schema := mapAt(t, schemas, name)
			props := mapAt(t, schema, "properties")

			fields := jsonFields(typ)
			var wantFields, wantRequired []string
			for _, f := range fields {
				wantFields = append(wantFields, f.name)
				if !f.omitempty {
					wantRequired = append(wantRequired, f.name)
				}
			}
			gotFields := sortedKeys(props)
			sort.Strings(wantFields)
			if !slices.Equal(gotFields, wantFields) {
				t.Errorf("schema %s properties = %v, but %s has JSON fields %v", name, gotFields, typ, wantFields)
			}

			// A Go map is a JSON object keyed by strings: the spec must say what its values
			// are (additionalProperties), or its keys would read as fixed property names.
			for _, f := range fields {
				if p, ok := props[f.name].(map[string]any); ok && f.isMap {
					if p["type"] != "object" || p["additionalProperties"] == nil {
						t.Errorf("schema %s property %s is a map in %s: want type object with additionalProperties", name, f.name, typ)
					}
				}
			}

			// A field the server always sends is required; an omitempty or omitzero one is
			// not.
			var gotRequired []string
			if req, ok := schema["required"].([]any); ok {
				for _, r := range req {
					s, _ := r.(string)
					gotRequired = append(gotRequired, s)
				}
			}
			sort.Strings(gotRequired)
			sort.Strings(wantRequired)
			if !slices.Equal(gotRequired, wantRequired) {
				t.Errorf("schema %s required = %v, want %v (the non-omitempty fields of %s)", name, gotRequired, wantRequired, typ)
			}
		})
	}
}

type jsonField struct {
	name      string
	omitempty bool // omitempty or omitzero: the server may leave the field out
	isMap     bool
}

// jsonFields lists the JSON object keys encoding/json produces for struct type t, with the
// fields of embedded structs promoted as encoding/json does.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		optList := strings.Split(opts, ",")
		omit := slices.Contains(optList, "omitempty") || slices.Contains(optList, "omitzero")
		out = append(out, jsonField{name: name, omitempty: omit, isMap: f.Type.Kind() == reflect.Map})
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// The jsonFields walk must see the embedded session.Session, or the SessionInfo check above
// would pass vacuously for its fields.
func TestJSONFieldsPromotesEmbedded(t *testing.T) {
	var names []string
	for _, f := range jsonFields(reflect.TypeFor[SessionInfo]()) {
		names = append(names, f.name)
	}
	for _, want := range []string{"id", "ue_ipv4", "uplink_teid", "qfi", "usage"} {
		if !slices.Contains(names, want) {
			t.Errorf("jsonFields(SessionInfo) = %v, lacks %q", names, want)
		}
	}
	names = nil
	for _, f := range jsonFields(reflect.TypeFor[ClassInfo]()) {
		names = append(names, f.name)
	}
	for _, want := range []string{"id", "priority", "src_port", "counters"} {
		if !slices.Contains(names, want) {
			t.Errorf("jsonFields(ClassInfo) = %v, lacks %q", names, want)
		}
	}
	names = nil
	for _, f := range jsonFields(reflect.TypeFor[PFCPSessionInfo]()) {
		names = append(names, f.name)
	}
	for _, want := range []string{"seid", "cp_seid", "pdrs", "bars", "usage"} {
		if !slices.Contains(names, want) {
			t.Errorf("jsonFields(PFCPSessionInfo) = %v, lacks %q", names, want)
		}
	}
	names = nil
	for _, f := range jsonFields(reflect.TypeFor[ContractInfo]()) {
		names = append(names, f.name)
	}
	for _, want := range []string{"class", "action", "rate_bps", "burst_bytes", "counters"} {
		if !slices.Contains(names, want) {
			t.Errorf("jsonFields(ContractInfo) = %v, lacks %q", names, want)
		}
	}
}

// The spec documents the access control as the server enforces it: the bearer scheme on
// every operation but /metrics (where it is optional), the refusals each operation may
// answer, and the very messages of those refusals.
func TestSpecSecurity(t *testing.T) {
	spec := loadSpec(t)
	if sec, _ := spec["security"].([]any); len(sec) != 1 || !reflect.DeepEqual(sec[0], map[string]any{"bearerToken": []any{}}) {
		t.Errorf("top-level security = %v, want [{bearerToken: []}]", spec["security"])
	}
	scheme := mapAt(t, spec, "components", "securitySchemes", "bearerToken")
	if scheme["type"] != "http" || scheme["scheme"] != "bearer" {
		t.Errorf("securitySchemes.bearerToken = %v, want type http, scheme bearer", scheme)
	}

	paths := mapAt(t, spec, "paths")
	for _, rt := range routes() {
		op := mapAt(t, paths, rt.pattern, strings.ToLower(rt.method))
		responses := mapAt(t, op, "responses")
		want := []string{"401", "403"}
		if rt.method != "GET" {
			want = append(want, "415")
		}
		for _, code := range want {
			if _, ok := responses[code]; !ok {
				t.Errorf("%s %s does not document its %s answer", rt.method, rt.pattern, code)
			}
		}
		sec, hasOwn := op["security"].([]any)
		switch {
		case rt.pattern == MetricsPath && (len(sec) != 2 || !reflect.DeepEqual(sec[0], map[string]any{})):
			t.Errorf("%s security = %v, want [{}, {bearerToken: []}]: open unless api_metrics_auth", rt.pattern, sec)
		case rt.pattern != MetricsPath && hasOwn:
			t.Errorf("%s %s overrides the top-level security", rt.method, rt.pattern)
		}
	}

	// Refused requests never reach the backend, so none is needed.
	h := Guard(NewHandler(nil, nil), Access{Token: strings.Repeat("a", 64)}, nil)
	example := func(response, name string) string {
		r := mapAt(t, spec, "components", "responses", response, "content", "application/json")
		if name == "" {
			return mapAt(t, r, "example")["error"].(string)
		}
		return mapAt(t, r, "examples", name, "value")["error"].(string)
	}
	for _, c := range []struct {
		response, example string
		req               *http.Request
	}{
		{"Unauthorized", "missing", request("GET", "/api/v1/status", "127.0.0.1", nil)},
		{"Unauthorized", "wrong", request("GET", "/api/v1/status", "127.0.0.1", map[string]string{"Authorization": "Bearer " + strings.Repeat("b", 64)})},
		{"Forbidden", "host", request("GET", "/api/v1/status", "attacker.example:8080", nil)},
		{"Forbidden", "crossOrigin", request("POST", "/api/v1/classifier/classes", "127.0.0.1", map[string]string{"Sec-Fetch-Site": "cross-site"})},
		{"UnsupportedMediaType", "", request("POST", "/api/v1/classifier/classes", "127.0.0.1",
			map[string]string{"Authorization": "Bearer " + strings.Repeat("a", 64), "Content-Type": "text/plain"})},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, c.req)
		var e Error
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if want := example(c.response, c.example); e.Error != want {
			t.Errorf("%s example %q:\n spec: %s\nserver: %s", c.response, c.example, want, e.Error)
		}
	}
}

func request(method, path, host string, headers map[string]string) *http.Request {
	r := httptest.NewRequest(method, path, strings.NewReader("{}"))
	r.Host = host
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	return r
}
