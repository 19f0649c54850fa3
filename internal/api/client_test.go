package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
	"github.com/xupf/xupf/internal/pfcp"
)

func newTestClient(t *testing.T, b api.Backend) *api.Client {
	t.Helper()
	h, tokenFile := apitest.Guarded(t, b)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// A trailing slash, as users type it, must not produce "//api".
	return api.NewClient(srv.URL+"/", srv.Client()).WithTokenFile(tokenFile)
}

func TestClient(t *testing.T) {
	b := apitest.NewBackend()
	c := newTestClient(t, b)
	ctx := t.Context()

	st, err := c.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if !reflect.DeepEqual(st, b.StatusData) {
		t.Errorf("Status = %+v, want %+v", st, b.StatusData)
	}

	list, err := c.Sessions(ctx)
	if err != nil {
		t.Fatalf("Sessions: %v", err)
	}
	want := []api.SessionInfo{b.SessionsData[1], b.SessionsData[0]} // sorted by id
	if !reflect.DeepEqual(list, want) {
		t.Errorf("Sessions = %+v, want %+v", list, want)
	}

	one, err := c.Session(ctx, 9)
	if err != nil {
		t.Fatalf("Session: %v", err)
	}
	if !reflect.DeepEqual(one, b.SessionsData[0]) {
		t.Errorf("Session(9) = %+v, want %+v", one, b.SessionsData[0])
	}

	stats, err := c.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if !reflect.DeepEqual(stats, b.StatsData) {
		t.Errorf("Stats = %+v, want %+v", stats, b.StatsData)
	}

	pfcpList, err := c.PFCPSessions(ctx)
	if err != nil {
		t.Fatalf("PFCPSessions: %v", err)
	}
	wantPFCP := []api.PFCPSessionInfo{b.PFCPSessionsData[1], b.PFCPSessionsData[0]} // sorted by SEID
	if !reflect.DeepEqual(pfcpList, wantPFCP) {
		t.Errorf("PFCPSessions = %+v, want %+v", pfcpList, wantPFCP)
	}

	pfcpOne, err := c.PFCPSession(ctx, pfcp.FirstSEID+2)
	if err != nil {
		t.Fatalf("PFCPSession: %v", err)
	}
	if !reflect.DeepEqual(pfcpOne, b.PFCPSessionsData[0]) {
		t.Errorf("PFCPSession(0x100000002) = %+v, want %+v", pfcpOne, b.PFCPSessionsData[0])
	}

	assocs, err := c.Associations(ctx)
	if err != nil {
		t.Fatalf("Associations: %v", err)
	}
	wantAssocs := []pfcp.Association{b.AssociationsData[1], b.AssociationsData[0]} // sorted by Node ID
	if !reflect.DeepEqual(assocs, wantAssocs) {
		t.Errorf("Associations = %+v, want %+v", assocs, wantAssocs)
	}
}

func TestClientNoAssociationsIsEmptyNotNil(t *testing.T) {
	list, err := newTestClient(t, &apitest.Backend{}).Associations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if list == nil || len(list) != 0 {
		t.Errorf("Associations = %#v, want an empty non-nil slice", list)
	}
}

func TestClientAssociationsUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := api.NewClient(url, nil).Associations(t.Context())
	if err == nil || !strings.Contains(err.Error(), "not reachable at "+url) {
		t.Errorf("Associations error = %v, want the daemon to be unreachable", err)
	}
}

func TestClientNoSessionsIsEmptyNotNil(t *testing.T) {
	list, err := newTestClient(t, &apitest.Backend{}).Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if list == nil || len(list) != 0 {
		t.Errorf("Sessions = %#v, want an empty non-nil slice", list)
	}
}

func TestClientNoPFCPSessionsIsEmptyNotNil(t *testing.T) {
	list, err := newTestClient(t, &apitest.Backend{}).PFCPSessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if list == nil || len(list) != 0 {
		t.Errorf("PFCPSessions = %#v, want an empty non-nil slice", list)
	}
}

func TestClientPFCPSessionErrors(t *testing.T) {
	failing := apitest.NewBackend()
	failing.Err = errors.New("reading rule counters: operation not permitted")
	tests := []struct {
		name         string
		backend      *apitest.Backend
		call         func(*api.Client) error
		wantMsg      string
		wantCode     int
		wantNotFound bool
	}{
		{
			name:    "unknown seid",
			backend: apitest.NewBackend(),
			call: func(c *api.Client) error {
				_, err := c.PFCPSession(t.Context(), pfcp.FirstSEID+7)
				return err
			},
			wantMsg: "PFCP session 4294967303 not found", wantCode: http.StatusNotFound, wantNotFound: true,
		},
		{
			name:    "backend error on one",
			backend: failing,
			call: func(c *api.Client) error {
				_, err := c.PFCPSession(t.Context(), pfcp.FirstSEID+1)
				return err
			},
			wantMsg: "reading rule counters: operation not permitted", wantCode: http.StatusInternalServerError,
		},
		{
			name:    "backend error on the list",
			backend: failing,
			call: func(c *api.Client) error {
				_, err := c.PFCPSessions(t.Context())
				return err
			},
			wantMsg: "reading rule counters: operation not permitted", wantCode: http.StatusInternalServerError,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(newTestClient(t, tt.backend))
			if err == nil {
				t.Fatal("succeeded, want an error")
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("error = %q, want %q", err, tt.wantMsg)
			}
			if errors.Is(err, api.ErrNotFound) != tt.wantNotFound {
				t.Errorf("errors.Is(%v, ErrNotFound) = %v, want %v", err, !tt.wantNotFound, tt.wantNotFound)
			}
			var re *api.ResponseError
			if !errors.As(err, &re) || re.StatusCode != tt.wantCode {
				t.Errorf("error %#v is not a *ResponseError with code %d", err, tt.wantCode)
			}
		})
	}
}

func TestClientNotFound(t *testing.T) {
	_, err := newTestClient(t, apitest.NewBackend()).Session(t.Context(), 7)
	if err == nil {
		t.Fatal("Session(7) succeeded, want an error")
	}
	if err.Error() != "session 7 not found" {
		t.Errorf("error = %q, want the server's message", err)
	}
	if !errors.Is(err, api.ErrNotFound) {
		t.Errorf("errors.Is(%v, ErrNotFound) = false", err)
	}
	var re *api.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusNotFound {
		t.Errorf("error %#v is not a *ResponseError with code 404", err)
	}
}

func TestClientServerError(t *testing.T) {
	b := apitest.NewBackend()
	b.Err = errors.New("reading stats map: operation not permitted")
	_, err := newTestClient(t, b).Stats(t.Context())
	if err == nil || err.Error() != "reading stats map: operation not permitted" {
		t.Fatalf("Stats error = %v, want the server's message", err)
	}
	if errors.Is(err, api.ErrNotFound) {
		t.Errorf("a 500 must not read as not found")
	}
}

func TestClientNonAPIErrorBody(t *testing.T) {
	// Something other than xupfd answers, e.g. a proxy.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	defer srv.Close()
	_, err := api.NewClient(srv.URL, nil).Status(t.Context())
	if err == nil {
		t.Fatal("Status succeeded, want an error")
	}
	for _, want := range []string{"502 Bad Gateway", "upstream down", srv.URL + "/api/v1/status"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestClientNotJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("<html>hello</html>"))
	}))
	defer srv.Close()
	_, err := api.NewClient(srv.URL, nil).Stats(t.Context())
	if err == nil || !strings.Contains(err.Error(), "is --server the xupfd API address?") {
		t.Fatalf("error = %v, want a hint about --server", err)
	}
}

func TestClientUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now

	_, err := api.NewClient(url, nil).Status(t.Context())
	if err == nil {
		t.Fatal("Status succeeded against a closed server")
	}
	for _, want := range []string{"not reachable at " + url, "xupfd runs", "--server", "XUPF_SERVER"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestClientTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // hang until the client gives up
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := api.NewClient(srv.URL, nil).Status(ctx)
	if err == nil {
		t.Fatal("Status succeeded, want a timeout")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "--timeout") {
		t.Errorf("error = %v, want a deadline error that mentions --timeout", err)
	}
}

func TestClientBadURL(t *testing.T) {
	_, err := api.NewClient("http://[::1", nil).Status(t.Context())
	if err == nil || !strings.Contains(err.Error(), "is not a valid URL") {
		t.Errorf("error = %v, want a bad URL error", err)
	}
}
