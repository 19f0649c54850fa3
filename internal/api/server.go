package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/pfcp"
)

// route is one endpoint. The table is the single source of what the server serves, so the
// OpenAPI test can check the spec against exactly what is registered.
type route struct {
	method  string
	pattern string // http.ServeMux path pattern, which is also the OpenAPI path template
	handler func(*server, http.ResponseWriter, *http.Request)
}

func routes() []route {
	return []route{
		{http.MethodGet, "/api/v1/status", (*server).status},
		{http.MethodGet, "/api/v1/sessions", (*server).sessions},
		{http.MethodGet, "/api/v1/sessions/{id}", (*server).session},
		{http.MethodGet, "/api/v1/stats", (*server).stats},
		{http.MethodGet, "/api/v1/classifier/classes", (*server).classes},
		{http.MethodPost, "/api/v1/classifier/classes", (*server).addClass},
		{http.MethodGet, "/api/v1/classifier/classes/{id}", (*server).class},
		{http.MethodDelete, "/api/v1/classifier/classes/{id}", (*server).deleteClass},
		{http.MethodGet, "/api/v1/policer/contracts", (*server).contracts},
		{http.MethodGet, "/api/v1/policer/contracts/{class}", (*server).contract},
		{http.MethodPut, "/api/v1/policer/contracts/{class}", (*server).setContract},
		{http.MethodDelete, "/api/v1/policer/contracts/{class}", (*server).deleteContract},
		{http.MethodGet, routesPath, (*server).routes},
		{http.MethodPost, routesPath, (*server).addRoute},
		{http.MethodDelete, routesPath + "/{address}/{bits}", (*server).deleteRoute},
		{http.MethodGet, neighboursPath, (*server).neighbours},
		{http.MethodPost, neighboursPath, (*server).addNeighbour},
		{http.MethodDelete, neighboursPath + "/{interface}/{address}", (*server).deleteNeighbour},
		{http.MethodGet, flowsPath, (*server).flows},
		{http.MethodDelete, flowsPath, (*server).flushFlows},
		{http.MethodGet, "/api/v1/pfcp/associations", (*server).associations},
		{http.MethodGet, "/api/v1/pfcp/sessions", (*server).pfcpSessions},
		{http.MethodGet, "/api/v1/pfcp/sessions/{seid}", (*server).pfcpSession},
		{http.MethodGet, "/api/v1/config", (*server).runningConfig},
		{http.MethodGet, MetricsPath, (*server).metrics},
	}
}

type server struct {
	backend        Backend
	log            *slog.Logger
	metricsHandler http.Handler
}

// NewHandler returns the daemon's HTTP API (see api/openapi.yaml) served from b, without
// access control: the daemon serves it behind Guard. A nil log discards the request logs.
func NewHandler(b Backend, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &server{backend: b, log: log}

	// A registry of our own rather than the global one: the handler then exposes only what
	// this backend reports, and several handlers (tests, several daemons in one process)
	// do not collide on registration.
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(b))
	s.metricsHandler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slogPromLogger{log},
		// A failed Stats read fails the scrape (500) instead of serving a partial set, so
		// Prometheus marks the target down rather than seeing counters vanish and reappear.
		ErrorHandling: promhttp.HTTPErrorOnError,
	})

	mux := http.NewServeMux()
	allowed := map[string][]string{}
	for _, rt := range routes() {
		h := rt.handler
		var handler http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(s, w, r) })
		if rt.method != http.MethodGet {
			handler = requireJSON(handler)
		}
		mux.Handle(rt.method+" "+rt.pattern, handler)
		allowed[rt.pattern] = append(allowed[rt.pattern], rt.method)
	}
	// The method-less patterns are less specific than the method ones, so they only catch
	// the methods not served. They exist because ServeMux's own 405 and 404 answers are
	// plain text, and every error of this API is an Error JSON body.
	for pattern, methods := range allowed {
		mux.Handle(pattern, methodNotAllowed(methods))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint at %s; the API is under /api/v1 (see api/openapi.yaml)", r.URL.Path))
	})
	return s.logRequests(mux)
}

func methodNotAllowed(methods []string) http.Handler {
	allow := slices.Clone(methods)
	if slices.Contains(allow, http.MethodGet) && !slices.Contains(allow, http.MethodHead) {
		allow = append(allow, http.MethodHead) // ServeMux serves HEAD with every GET pattern
	}
	allowHeader := strings.Join(allow, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allowHeader)
		writeError(w, http.StatusMethodNotAllowed,
			fmt.Sprintf("method %s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(methods, " or ")))
	})
}

// runningConfig serves the configuration as YAML, the file's format, so it can be saved and
// given back to xupfd as it is.
func (s *server) runningConfig(w http.ResponseWriter, r *http.Request) {
	data, err := s.backend.RunningConfig()
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data) // an error is the client gone; nothing to do
}

func (s *server) status(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.backend.Status())
}

func (s *server) sessions(w http.ResponseWriter, r *http.Request) {
	list, err := s.backend.Sessions()
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	// Sorted here rather than trusting the backend (a map walk in the daemon) so that
	// listings are stable between calls and diffable.
	list = slices.Clone(list)
	slices.SortFunc(list, func(a, b SessionInfo) int { return cmp.Compare(a.ID, b.ID) })
	if list == nil {
		list = []SessionInfo{} // "[]", not "null", so clients can always range over it
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *server) session(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("id")
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, BadSessionIDMessage(raw))
		return
	}
	info, err := s.backend.Session(id)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("session %d not found", id))
	case err != nil:
		s.internalError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, info)
	}
}

// BadSessionIDMessage is the error for a session id that is not a decimal uint64; xupfctl
// uses it too so the message is the same whether it checks the id itself or the server does.
func BadSessionIDMessage(raw string) string {
	return fmt.Sprintf("session id %q is not a number; use the id shown by `xupfctl session list`", raw)
}

func (s *server) stats(w http.ResponseWriter, r *http.Request) {
	st, err := s.backend.Stats()
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *server) classes(w http.ResponseWriter, r *http.Request) {
	list, err := s.backend.Classes()
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	list = slices.Clone(list) // sorted here, as sessions are
	slices.SortFunc(list, func(a, b ClassInfo) int { return cmp.Compare(a.ID, b.ID) })
	if list == nil {
		list = []ClassInfo{}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *server) class(w http.ResponseWriter, r *http.Request) {
	id, ok := classID(w, r)
	if !ok {
		return
	}
	info, err := s.backend.Class(id)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, classNotFound(id))
	case err != nil:
		s.internalError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, info)
	}
}

func (s *server) addClass(w http.ResponseWriter, r *http.Request) {
	c, code, msg := decodeClass(w, r)
	if msg != "" {
		writeError(w, code, msg)
		return
	}
	info, err := s.backend.AddClass(c)
	switch {
	case errors.Is(err, ErrConflict):
		writeError(w, http.StatusConflict,
			fmt.Sprintf("class %d already exists; delete it first or use another id", c.ID))
	case errors.Is(err, ErrInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		s.internalError(w, r, err)
	default:
		w.Header().Set("Location", "/api/v1/classifier/classes/"+strconv.FormatUint(uint64(info.ID), 10))
		writeJSON(w, http.StatusCreated, info)
	}
}

func (s *server) deleteClass(w http.ResponseWriter, r *http.Request) {
	id, ok := classID(w, r)
	if !ok {
		return
	}
	err := s.backend.DeleteClass(id)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, classNotFound(id))
	case err != nil:
		s.internalError(w, r, err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// classID parses the {id} of a class path, answering 400 itself when it is not a class id.
func classID(w http.ResponseWriter, r *http.Request) (uint32, bool) {
	raw := r.PathValue("id")
	id, err := ParseClassID(raw)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return 0, false
	}
	return id, true
}

// ParseClassID parses a class id as the API and xupfctl take it: decimal, 1 to 4294967295.
// The error is the message the server answers with, so xupfctl reports a bad id the same
// way whether it checks the id itself or the server does.
func ParseClassID(raw string) (uint32, error) {
	id, err := strconv.ParseUint(raw, 10, 32)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("class id %q is not a number from 1 to 4294967295; use the id shown by `xupfctl classifier list`", raw)
	}
	return uint32(id), nil
}

func classNotFound(id uint32) string { return fmt.Sprintf("class %d not found", id) }

// maxClassBody bounds a class request body; a class is a few hundred bytes.
const maxClassBody = 64 << 10

// classBody is what a class request body must be.
var classBody = bodySpec{
	noun:    "class",
	example: classExample,
	limit:   maxClassBody,
	fields:  jsonFieldNames(reflect.TypeFor[classifier.Class]()),
	want: func(_ string, t reflect.Type) string {
		if t.Kind() == reflect.Uint32 {
			return "a whole number from 0 to 4294967295"
		}
		return "a string"
	},
}

// decodeClass reads the Class of a request body. On failure it returns the status code and
// a message that says what is wrong with the body.
func decodeClass(w http.ResponseWriter, r *http.Request) (classifier.Class, int, string) {
	var c classifier.Class
	code, msg := decodeBody(w, r, classBody, &c)
	return c, code, msg
}

const classExample = `e.g. {"id": 3, "priority": 100, "protocol": "udp", "dst_port": "5060"}`

// bodySpec describes the one JSON object a request body must hold, for decodeBody's messages.
type bodySpec struct {
	noun    string   // what the object is, e.g. "class"
	example string   // e.g. `e.g. {"id": 3}`
	limit   int64    // the largest body, in bytes
	fields  []string // the object's fields, in their order
	// want says what a field of type t should hold, for a value of the wrong type.
	want func(field string, t reflect.Type) string
	// unknown, when set, may answer an unknown field with a message of its own ("" for the
	// default one).
	unknown func(field string) string
}

// decodeBody decodes the request body, one JSON object as spec describes, into v. On failure
// it returns the status code and a message that says what is wrong with the body.
func decodeBody(w http.ResponseWriter, r *http.Request, spec bodySpec, v any) (int, string) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, spec.limit))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// One object and nothing else: a second value is more likely a mistake (two
		// objects pasted together) than something to ignore.
		if _, terr := dec.Token(); terr != io.EOF {
			if msg, code := bodyReadError(terr, spec.noun); msg != "" {
				return code, msg
			}
			return http.StatusBadRequest, fmt.Sprintf("the request body has more after the %s; send one %s as one JSON object", spec.noun, spec.noun)
		}
		return 0, ""
	}
	if msg, code := bodyReadError(err, spec.noun); msg != "" {
		return code, msg
	}
	var (
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
	)
	switch {
	case errors.Is(err, io.EOF):
		return http.StatusBadRequest, fmt.Sprintf("the request body is empty; send a %s as a JSON object, %s", spec.noun, spec.example)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return http.StatusBadRequest, "the request body is not valid JSON: it ends in the middle of a value"
	case errors.As(err, &syntaxErr):
		return http.StatusBadRequest, fmt.Sprintf("the request body is not valid JSON: %v (at byte %d)", syntaxErr, syntaxErr.Offset)
	case errors.As(err, &typeErr):
		got := typeErr.Value
		if !strings.HasPrefix(got, "number ") {
			got = "a JSON " + got
		}
		if typeErr.Field == "" {
			return http.StatusBadRequest, fmt.Sprintf("the request body is %s; send a %s as a JSON object, %s", got, spec.noun, spec.example)
		}
		return http.StatusBadRequest, fmt.Sprintf("field %s: got %s, want %s", typeErr.Field, got, spec.want(typeErr.Field, typeErr.Type))
	}
	// encoding/json has no type for this one; its text is `json: unknown field "x"`.
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if spec.unknown != nil {
			if msg := spec.unknown(strings.Trim(field, `"`)); msg != "" {
				return http.StatusBadRequest, msg
			}
		}
		return http.StatusBadRequest, fmt.Sprintf("unknown field %s in the %s; the fields are %s",
			field, spec.noun, strings.Join(spec.fields, ", "))
	}
	return http.StatusBadRequest, fmt.Sprintf("the request body is not a %s: %v", spec.noun, err)
}

// bodyReadError turns a failure to read the body itself (rather than to decode it) into a
// message, or returns "".
func bodyReadError(err error, noun string) (string, int) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Sprintf("the request body is larger than %d bytes; send one %s", tooBig.Limit, noun), http.StatusRequestEntityTooLarge
	}
	return "", 0
}

// jsonFieldNames lists the JSON fields of struct type t, in their order.
func jsonFieldNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

func (s *server) associations(w http.ResponseWriter, _ *http.Request) {
	list := slices.Clone(s.backend.Associations()) // sorted here, as sessions are
	slices.SortFunc(list, func(a, b pfcp.Association) int { return cmp.Compare(a.NodeID, b.NodeID) })
	if list == nil {
		list = []pfcp.Association{}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *server) pfcpSessions(w http.ResponseWriter, r *http.Request) {
	list, err := s.backend.PFCPSessions()
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	list = slices.Clone(list) // sorted here, as sessions are
	slices.SortFunc(list, func(a, b PFCPSessionInfo) int { return cmp.Compare(a.SEID, b.SEID) })
	if list == nil {
		list = []PFCPSessionInfo{}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *server) pfcpSession(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("seid")
	seid, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, BadSEIDMessage(raw))
		return
	}
	info, err := s.backend.PFCPSession(seid)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("PFCP session %d not found", seid))
	case err != nil:
		s.internalError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, info)
	}
}

// BadSEIDMessage is the error for a PFCP SEID that is not a decimal uint64.
func BadSEIDMessage(raw string) string {
	return fmt.Sprintf("PFCP SEID %q is not a decimal number; use the seid shown by `xupfctl session list -o json`", raw)
}

func (s *server) metrics(w http.ResponseWriter, r *http.Request) {
	s.metricsHandler.ServeHTTP(w, r)
}

func (s *server) internalError(w http.ResponseWriter, r *http.Request, err error) {
	s.log.LogAttrs(r.Context(), slog.LevelError, "api backend error",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("error", err))
	writeError(w, http.StatusInternalServerError, err.Error())
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, Error{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	// Encoded into a buffer first so that an encoding failure can still become a clean 500
	// instead of a 200 with a truncated body.
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		code = http.StatusInternalServerError
		buf.Reset()
		_ = json.NewEncoder(&buf).Encode(Error{Error: fmt.Sprintf("encoding response: %v", err)})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// statusRecorder remembers the status code for the request log.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer (promhttp flushes).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Skip the timing and wrapping when nobody reads debug logs: /metrics is scraped
		// often and this runs on every request.
		if !s.log.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "api request",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", rec.code),
			slog.Duration("duration", time.Since(start)),
			slog.String("remote", r.RemoteAddr))
	})
}

// slogPromLogger adapts slog to promhttp's error logger.
type slogPromLogger struct{ log *slog.Logger }

func (l slogPromLogger) Println(v ...any) {
	l.log.Error("metrics scrape failed", slog.String("error", strings.TrimSuffix(fmt.Sprintln(v...), "\n")))
}
