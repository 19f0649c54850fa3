package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
		{http.MethodGet, "/metrics", (*server).metrics},
	}
}

type server struct {
	backend        Backend
	log            *slog.Logger
	metricsHandler http.Handler
}

// NewHandler returns the daemon's HTTP API (see api/openapi.yaml) served from b. A nil log
// discards the request logs.
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
		mux.HandleFunc(rt.method+" "+rt.pattern, func(w http.ResponseWriter, r *http.Request) { h(s, w, r) })
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
	slices.SortFunc(list, func(a, b SessionInfo) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
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
