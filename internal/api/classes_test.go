package api_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/session"
)

const (
	class3JSON = `{"id":3,"priority":100,"direction":"ingress","src_ip":"10.0.0.0/8","protocol":"udp",
		"src_port":"1000-2000","dst_port":"5060","counters":{"packets":1042,"bytes":208400}}`
	class5JSON = `{"id":5,"priority":0,"src_mac":"02:00:00:00:00:01","ethertype":"0x0806",
		"counters":{"packets":0,"bytes":0}}`
	class20JSON = `{"id":20,"priority":10,"direction":"egress","src_ip":"198.51.100.0/24","protocol":"tcp",
		"src_port":"443","counters":{"packets":7,"bytes":9100}}`
)

func TestClassHandlers(t *testing.T) {
	failing := apitest.NewBackend()
	failing.Err = errors.New("class counters: operation not permitted")
	const badID = "use the id shown by `xupfctl classifier list`"

	tests := []handlerCase{
		{
			name: "list sorted by id", method: "GET", path: "/api/v1/classifier/classes", wantCode: 200,
			wantBody: "[" + class3JSON + "," + class5JSON + "," + class20JSON + "]",
		},
		{
			name: "no classes is an empty array", backend: &apitest.Backend{},
			method: "GET", path: "/api/v1/classifier/classes", wantCode: 200, wantBody: `[]`,
		},
		{
			name: "one class", method: "GET", path: "/api/v1/classifier/classes/3", wantCode: 200,
			wantBody: class3JSON,
		},
		{
			name: "unknown class", method: "GET", path: "/api/v1/classifier/classes/7", wantCode: 404,
			wantBody: `{"error":"class 7 not found"}`,
		},
		{
			name: "class id not a number", method: "GET", path: "/api/v1/classifier/classes/abc", wantCode: 400,
			wantBody: `{"error":"class id \"abc\" is not a number from 1 to 4294967295; ` + badID + `"}`,
		},
		{
			name: "class id 0", method: "GET", path: "/api/v1/classifier/classes/0", wantCode: 400,
			wantBody: `{"error":"class id \"0\" is not a number from 1 to 4294967295; ` + badID + `"}`,
		},
		{
			name: "class id beyond 32 bits", method: "DELETE", path: "/api/v1/classifier/classes/4294967296", wantCode: 400,
			wantBody: `{"error":"class id \"4294967296\" is not a number from 1 to 4294967295; ` + badID + `"}`,
		},
		{
			name: "add", method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"id":7,"priority":1,"protocol":"icmp","dst_ip":"192.0.2.0/24"}`,
			wantCode: 201, wantBody: `{"id":7,"priority":1,"protocol":"icmp","dst_ip":"192.0.2.0/24","counters":{"packets":0,"bytes":0}}`,
			wantLocation: "/api/v1/classifier/classes/7",
			wantClasses:  []uint32{20, 3, 5, 7},
		},
		{
			name: "add to none", backend: &apitest.Backend{}, method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"id":1,"priority":0}`,
			wantCode: 201, wantBody: `{"id":1,"priority":0,"counters":{"packets":0,"bytes":0}}`,
			wantLocation: "/api/v1/classifier/classes/1",
			wantClasses:  []uint32{1},
		},
		{
			name: "add a duplicate", method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"id":3,"priority":1}`,
			wantCode: 409, wantBody: `{"error":"class 3 already exists; delete it first or use another id"}`,
			wantClasses: []uint32{20, 3, 5},
		},
		{
			name: "a duplicate is reported before the class is checked", method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"id":3,"priority":1,"src_port":"80"}`,
			wantCode: 409, wantBody: `{"error":"class 3 already exists; delete it first or use another id"}`,
		},
		{
			name: "add an invalid class: the Manager's message", method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"id":8,"priority":1,"src_port":"80"}`,
			wantCode: 400, wantBody: `{"error":"class 8: src_port: ports need protocol tcp, udp or sctp; set protocol too"}`,
			wantClasses: []uint32{20, 3, 5},
		},
		{
			name: "add id 0", method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"priority":1}`,
			wantCode: 400, wantBody: `{"error":"class 0: id: 0 is not a class id; use 1 to 4294967295"}`,
		},
		{
			name: "add with an unknown field", method: "POST", path: "/api/v1/classifier/classes",
			body:        `{"id":8,"priority":1,"protocol":"udp","dport":"53"}`,
			wantCode:    400,
			wantBody:    `{"error":"unknown field \"dport\" in the class; the fields are id, priority, direction, src_mac, dst_mac, ethertype, src_ip, dst_ip, protocol, src_port, dst_port"}`,
			wantClasses: []uint32{20, 3, 5},
		},
		{
			name: "add with counters", method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"id":8,"priority":1,"counters":{"packets":1,"bytes":1}}`,
			wantCode: 400,
			wantBody: `{"error":"unknown field \"counters\" in the class; the fields are id, priority, direction, src_mac, dst_mac, ethertype, src_ip, dst_ip, protocol, src_port, dst_port"}`,
		},
		{
			name: "add malformed JSON", method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"id":8,}`,
			wantCode: 400,
			wantBody: `{"error":"the request body is not valid JSON: invalid character '}' looking for beginning of object key string (at byte 9)"}`,
		},
		{
			name: "add truncated JSON", method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"id":8`,
			wantCode: 400, wantBody: `{"error":"the request body is not valid JSON: it ends in the middle of a value"}`,
		},
		{
			name: "add with no body", method: "POST", path: "/api/v1/classifier/classes",
			wantCode: 400,
			wantBody: `{"error":"the request body is empty; send a class as a JSON object, e.g. {\"id\": 3, \"priority\": 100, \"protocol\": \"udp\", \"dst_port\": \"5060\"}"}`,
		},
		{
			name: "add an array", method: "POST", path: "/api/v1/classifier/classes",
			body:     `[{"id":8}]`,
			wantCode: 400,
			wantBody: `{"error":"the request body is a JSON array; send a class as a JSON object, e.g. {\"id\": 3, \"priority\": 100, \"protocol\": \"udp\", \"dst_port\": \"5060\"}"}`,
		},
		{
			name: "add a string id", method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"id":"8"}`,
			wantCode: 400, wantBody: `{"error":"field id: got a JSON string, want a whole number from 0 to 4294967295"}`,
		},
		{
			name: "add a negative priority", method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"id":8,"priority":-1}`,
			wantCode: 400, wantBody: `{"error":"field priority: got number -1, want a whole number from 0 to 4294967295"}`,
		},
		{
			name: "add a numeric port", method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"id":8,"protocol":"udp","dst_port":53}`,
			wantCode: 400, wantBody: `{"error":"field dst_port: got a JSON number, want a string"}`,
		},
		{
			name: "add two classes at once", method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"id":8} {"id":9}`,
			wantCode: 400, wantBody: `{"error":"the request body has more after the class; send one class as one JSON object"}`,
			wantClasses: []uint32{20, 3, 5},
		},
		{
			name: "add with trailing garbage", method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"id":8} x`,
			wantCode: 400, wantBody: `{"error":"the request body has more after the class; send one class as one JSON object"}`,
		},
		{
			name: "add with trailing whitespace", method: "POST", path: "/api/v1/classifier/classes",
			body:     "{\"id\":8}\n\n",
			wantCode: 201, wantBody: `{"id":8,"priority":0,"counters":{"packets":0,"bytes":0}}`,
			wantLocation: "/api/v1/classifier/classes/8",
		},
		{
			name: "add a body too large", method: "POST", path: "/api/v1/classifier/classes",
			body:     `{"id":8,"src_ip":"` + strings.Repeat(" ", 70000) + `"}`,
			wantCode: 413, wantBody: `{"error":"the request body is larger than 65536 bytes; send one class"}`,
		},
		{
			name: "delete", method: "DELETE", path: "/api/v1/classifier/classes/3", wantCode: 204,
			wantClasses: []uint32{20, 5},
		},
		{
			name: "delete an unknown class", method: "DELETE", path: "/api/v1/classifier/classes/7", wantCode: 404,
			wantBody: `{"error":"class 7 not found"}`, wantClasses: []uint32{20, 3, 5},
		},
		{
			name: "delete a bad id", method: "DELETE", path: "/api/v1/classifier/classes/x", wantCode: 400,
			wantBody: `{"error":"class id \"x\" is not a number from 1 to 4294967295; ` + badID + `"}`,
		},
		{
			name: "wrong method on classes", method: "PUT", path: "/api/v1/classifier/classes", wantCode: 405,
			wantBody:  `{"error":"method PUT is not allowed on /api/v1/classifier/classes; use GET or POST"}`,
			wantAllow: "GET, POST, HEAD",
		},
		{
			name: "wrong method on a class", method: "POST", path: "/api/v1/classifier/classes/3", wantCode: 405,
			wantBody:  `{"error":"method POST is not allowed on /api/v1/classifier/classes/3; use GET or DELETE"}`,
			wantAllow: "GET, DELETE, HEAD",
		},
		{
			name: "backend error on list", backend: failing, method: "GET", path: "/api/v1/classifier/classes", wantCode: 500,
			wantBody: `{"error":"class counters: operation not permitted"}`,
		},
		{
			name: "backend error on one class", backend: failing, method: "GET", path: "/api/v1/classifier/classes/3", wantCode: 500,
			wantBody: `{"error":"class counters: operation not permitted"}`,
		},
		{
			name: "backend error on add", backend: failing, method: "POST", path: "/api/v1/classifier/classes",
			body: `{"id":8}`, wantCode: 500, wantBody: `{"error":"class counters: operation not permitted"}`,
		},
		{
			name: "backend error on delete", backend: failing, method: "DELETE", path: "/api/v1/classifier/classes/3", wantCode: 500,
			wantBody: `{"error":"class counters: operation not permitted"}`,
		},
	}
	checkHandler(t, tests)
}

// The backend's stored class is the one the body described, field by field.
func TestAddClassPassesEveryField(t *testing.T) {
	b := &apitest.Backend{}
	body := `{"id":9,"priority":4,"direction":"both","src_mac":"02:00:00:00:00:01","dst_mac":"02:00:00:00:00:02",
		"ethertype":"0x0800","src_ip":"10.0.0.1","dst_ip":"10.1.0.0/16","protocol":"sctp","src_port":"1-2","dst_port":"3"}`
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/api/v1/classifier/classes", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	api.NewHandler(b, nil).ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("status code = %d; body %s", rec.Code, rec.Body)
	}
	want := classifier.Class{ID: 9, Priority: 4, Direction: "both", SrcMAC: "02:00:00:00:00:01", DstMAC: "02:00:00:00:00:02",
		EtherType: "0x0800", SrcIP: "10.0.0.1", DstIP: "10.1.0.0/16", Protocol: "sctp", SrcPort: "1-2", DstPort: "3"}
	if len(b.ClassesData) != 1 || b.ClassesData[0].Class != want {
		t.Errorf("backend classes = %+v, want %+v", b.ClassesData, want)
	}
}

// An error a backend marks invalid is sent as its own text, without a prefix from the mark.
func TestWithKind(t *testing.T) {
	cause := errors.New("class 3: protocol: \"x\" is not a protocol")
	err := api.WithKind(api.ErrInvalid, cause)
	if err.Error() != cause.Error() {
		t.Errorf("text = %q, want %q", err, cause)
	}
	if !errors.Is(err, api.ErrInvalid) || !errors.Is(err, cause) || errors.Is(err, api.ErrConflict) {
		t.Errorf("errors.Is does not see exactly ErrInvalid and the cause in %v", err)
	}
}

func TestClassMetrics(t *testing.T) {
	rec := httptest.NewRecorder()
	api.NewHandler(apitest.NewBackend(), nil).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		"# TYPE xupf_class_packets_total counter",
		`xupf_class_packets_total{class="3"} 1042`,
		`xupf_class_packets_total{class="5"} 0`,
		`xupf_class_packets_total{class="20"} 7`,
		"# TYPE xupf_class_bytes_total counter",
		`xupf_class_bytes_total{class="3"} 208400`,
		`xupf_class_bytes_total{class="5"} 0`,
		`xupf_class_bytes_total{class="20"} 9100`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack line %q; got:\n%s", want, body)
		}
	}

	// Classes added later appear at the next scrape; none means no series.
	b := &apitest.Backend{}
	h := api.NewHandler(b, nil)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if strings.Contains(rec.Body.String(), "xupf_class_") {
		t.Errorf("metrics with no classes have class series:\n%s", rec.Body)
	}
	b.ClassesData = []api.ClassInfo{{Class: classifier.Class{ID: 4}, Counters: session.Counters{Packets: 2, Bytes: 3}}}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`xupf_class_packets_total{class="4"} 2`, `xupf_class_bytes_total{class="4"} 3`} {
		if !strings.Contains(rec.Body.String(), want+"\n") {
			t.Errorf("metrics lack line %q; got:\n%s", want, rec.Body)
		}
	}
}

func TestClientClasses(t *testing.T) {
	b := apitest.NewBackend()
	c := newTestClient(t, b)
	ctx := t.Context()
	fixture := apitest.Classes() // 20, 3, 5

	list, err := c.Classes(ctx)
	if err != nil {
		t.Fatalf("Classes: %v", err)
	}
	want := []api.ClassInfo{fixture[1], fixture[2], fixture[0]}
	if !reflect.DeepEqual(list, want) {
		t.Errorf("Classes = %+v, want %+v", list, want)
	}

	one, err := c.Class(ctx, 20)
	if err != nil {
		t.Fatalf("Class: %v", err)
	}
	if !reflect.DeepEqual(one, fixture[0]) {
		t.Errorf("Class(20) = %+v, want %+v", one, fixture[0])
	}

	add := classifier.Class{ID: 11, Priority: 2, Direction: "egress", Protocol: "udp", DstIP: "10.45.0.0/16", DstPort: "53"}
	info, err := c.AddClass(ctx, add)
	if err != nil {
		t.Fatalf("AddClass: %v", err)
	}
	if want := (api.ClassInfo{Class: add}); !reflect.DeepEqual(info, want) {
		t.Errorf("AddClass = %+v, want %+v", info, want)
	}
	if got := b.ClassesData[len(b.ClassesData)-1].Class; got != add {
		t.Errorf("the backend stored %+v, want %+v", got, add)
	}

	if err := c.DeleteClass(ctx, 3); err != nil {
		t.Fatalf("DeleteClass: %v", err)
	}
	if _, err := c.Class(ctx, 3); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Class(3) after DeleteClass: error %v, want not found", err)
	}
}

func TestClientClassesEmptyNotNil(t *testing.T) {
	list, err := newTestClient(t, &apitest.Backend{}).Classes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if list == nil || len(list) != 0 {
		t.Errorf("Classes = %#v, want an empty non-nil slice", list)
	}
}

func TestClientClassErrors(t *testing.T) {
	c := newTestClient(t, apitest.NewBackend())
	ctx := t.Context()
	failing := apitest.NewBackend()
	failing.Err = errors.New("class counters: operation not permitted")
	cf := newTestClient(t, failing)

	_, errGet := c.Class(ctx, 7)
	errDelete := c.DeleteClass(ctx, 7)
	_, errDup := c.AddClass(ctx, classifier.Class{ID: 3})
	_, errInvalid := c.AddClass(ctx, classifier.Class{ID: 8, Protocol: "icmp", DstPort: "1"})
	_, errList := cf.Classes(ctx)
	errDeleteFailing := cf.DeleteClass(ctx, 3)

	for _, tt := range []struct {
		name     string
		err      error
		wantMsg  string
		wantCode int
		wantIs   error // nil: none of the sentinels
	}{
		{"unknown class", errGet, "class 7 not found", 404, api.ErrNotFound},
		{"delete unknown class", errDelete, "class 7 not found", 404, api.ErrNotFound},
		{"duplicate", errDup, "class 3 already exists; delete it first or use another id", 409, api.ErrConflict},
		{"invalid", errInvalid, "class 8: dst_port: ports need protocol tcp, udp or sctp; set protocol too", 400, api.ErrInvalid},
		{"server error on list", errList, "class counters: operation not permitted", 500, nil},
		{"server error on delete", errDeleteFailing, "class counters: operation not permitted", 500, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil {
				t.Fatal("no error")
			}
			if tt.err.Error() != tt.wantMsg {
				t.Errorf("error = %q, want %q", tt.err, tt.wantMsg)
			}
			var re *api.ResponseError
			if !errors.As(tt.err, &re) || re.StatusCode != tt.wantCode {
				t.Errorf("error %#v is not a *ResponseError with code %d", tt.err, tt.wantCode)
			}
			for _, sentinel := range []error{api.ErrNotFound, api.ErrConflict, api.ErrInvalid} {
				if got, want := errors.Is(tt.err, sentinel), sentinel == tt.wantIs; got != want {
					t.Errorf("errors.Is(err, %v) = %v, want %v", sentinel, got, want)
				}
			}
		})
	}
}
