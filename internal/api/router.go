package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"slices"
)

// Route is a route of the datapath's route table (the body of POST /api/v1/router/routes).
// In mirror mode the list shows the kernel's routes as the datapath follows them.
type Route struct {
	// Prefix is the IPv4 destination, e.g. "0.0.0.0/0" or "192.0.2.0/24".
	Prefix string `json:"prefix" yaml:"prefix"`
	// Via is the gateway; empty: the prefix is on link.
	Via string `json:"via,omitempty" yaml:"via,omitempty"`
	// Interface is the interface the route leaves by (empty for a blackhole).
	Interface string `json:"interface,omitempty" yaml:"interface,omitempty"`
	// Type is "unicast" (the default) or "blackhole"; a listing also shows "local".
	Type string `json:"type,omitempty" yaml:"type,omitempty"`
	// MTU is the route's; 0 takes the interface's.
	MTU int `json:"mtu,omitempty" yaml:"mtu,omitempty"`
}

// Neighbour is a neighbour entry the datapath resolves next hops with (the body of POST
// /api/v1/router/neighbours).
type Neighbour struct {
	Address   string `json:"address" yaml:"address"`
	Interface string `json:"interface" yaml:"interface"`
	MAC       string `json:"mac" yaml:"mac"`
}

const (
	routesPath     = "/api/v1/router/routes"
	neighboursPath = "/api/v1/router/neighbours"
	maxRouteBody   = 4 << 10 // a route or neighbour is a few dozen bytes
)

var routeBody = bodySpec{
	noun:    "route",
	example: `e.g. {"prefix": "0.0.0.0/0", "via": "203.0.113.1", "interface": "n6"}`,
	limit:   maxRouteBody,
	fields:  jsonFieldNames(reflect.TypeFor[Route]()),
	want: func(field string, _ reflect.Type) string {
		if field == "mtu" {
			return "a whole number of bytes, 68 to 65535"
		}
		return "a string"
	},
}

var neighbourBody = bodySpec{
	noun:    "neighbour",
	example: `e.g. {"address": "203.0.113.1", "interface": "n6", "mac": "02:00:00:00:02:02"}`,
	limit:   maxRouteBody,
	fields:  jsonFieldNames(reflect.TypeFor[Neighbour]()),
	want:    func(string, reflect.Type) string { return "a string" },
}

func (s *server) routes(w http.ResponseWriter, r *http.Request) {
	serveList(s, w, r, s.backend.Routes, func(a, b Route) int { return comparePrefixes(a.Prefix, b.Prefix) })
}

func comparePrefixes(a, b string) int {
	pa, erra := netip.ParsePrefix(a)
	pb, errb := netip.ParsePrefix(b)
	if erra != nil || errb != nil {
		return cmp.Compare(a, b)
	}
	if c := pa.Addr().Compare(pb.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(pa.Bits(), pb.Bits())
}

func (s *server) addRoute(w http.ResponseWriter, r *http.Request) {
	serveAdd(s, w, r, routeBody, s.backend.AddRoute)
}

func (s *server) deleteRoute(w http.ResponseWriter, r *http.Request) {
	s.deleted(w, r, s.backend.DeleteRoute(r.PathValue("address")+"/"+r.PathValue("bits")))
}

func (s *server) neighbours(w http.ResponseWriter, r *http.Request) {
	serveList(s, w, r, s.backend.Neighbours, func(a, b Neighbour) int {
		return cmp.Or(cmp.Compare(a.Interface, b.Interface), cmp.Compare(a.Address, b.Address))
	})
}

func (s *server) addNeighbour(w http.ResponseWriter, r *http.Request) {
	serveAdd(s, w, r, neighbourBody, s.backend.AddNeighbour)
}

func (s *server) deleteNeighbour(w http.ResponseWriter, r *http.Request) {
	s.deleted(w, r, s.backend.DeleteNeighbour(r.PathValue("interface"), r.PathValue("address")))
}

// serveList answers with what list returns, sorted by compare (listings are stable between
// calls and diffable), "[]" rather than "null" for none.
func serveList[T any](s *server, w http.ResponseWriter, r *http.Request, list func() ([]T, error), compare func(a, b T) int) {
	out, err := list()
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	out = slices.Clone(out)
	slices.SortFunc(out, compare)
	if out == nil {
		out = []T{}
	}
	writeJSON(w, http.StatusOK, out)
}

// serveAdd decodes a T as spec says and answers with what add makes of it.
func serveAdd[T any](s *server, w http.ResponseWriter, r *http.Request, spec bodySpec, add func(T) (T, error)) {
	var v T
	if code, msg := decodeBody(w, r, spec, &v); msg != "" {
		writeError(w, code, msg)
		return
	}
	added, err := add(v)
	s.answer(w, r, err, func() { writeJSON(w, http.StatusCreated, added) })
}

// answer answers a route or neighbour change: 404, 400 or 409 for the backend's marked
// errors (ErrConflict: the router mirrors the kernel), 500 for any other, else done.
func (s *server) answer(w http.ResponseWriter, r *http.Request, err error, done func()) {
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, ErrConflict):
		writeError(w, http.StatusConflict, err.Error())
	case err != nil:
		s.internalError(w, r, err)
	default:
		done()
	}
}

func (s *server) deleted(w http.ResponseWriter, r *http.Request, err error) {
	s.answer(w, r, err, func() { w.WriteHeader(http.StatusNoContent) })
}

// Routes returns the datapath's routes, sorted by prefix; never nil.
func (c *Client) Routes(ctx context.Context) ([]Route, error) {
	return listOf[Route](ctx, c, routesPath)
}

// AddRoute adds a private route, or replaces the one to its prefix. The error satisfies
// errors.Is(err, ErrInvalid) for a route the daemon rejects (its text names the field) and
// errors.Is(err, ErrConflict) when the daemon mirrors the kernel's routes.
func (c *Client) AddRoute(ctx context.Context, rt Route) (Route, error) {
	return postFor(ctx, c, routesPath, rt)
}

// DeleteRoute deletes the private route to prefix.
func (c *Client) DeleteRoute(ctx context.Context, prefix string) error {
	return c.do(ctx, http.MethodDelete, routesPath+"/"+prefix, nil, nil)
}

// Neighbours returns the neighbour entries the datapath resolves with; never nil.
func (c *Client) Neighbours(ctx context.Context) ([]Neighbour, error) {
	return listOf[Neighbour](ctx, c, neighboursPath)
}

// AddNeighbour adds a static neighbour, or replaces the one of its address and interface.
func (c *Client) AddNeighbour(ctx context.Context, n Neighbour) (Neighbour, error) {
	return postFor(ctx, c, neighboursPath, n)
}

// DeleteNeighbour deletes the static neighbour address on interface iface.
func (c *Client) DeleteNeighbour(ctx context.Context, iface, address string) error {
	return c.do(ctx, http.MethodDelete, neighboursPath+"/"+url.PathEscape(iface)+"/"+url.PathEscape(address), nil, nil)
}

func listOf[T any](ctx context.Context, c *Client, path string) ([]T, error) {
	var list []T
	if err := c.get(ctx, path, &list); err != nil {
		return nil, err
	}
	if list == nil {
		list = []T{}
	}
	return list, nil
}

// postFor posts in and returns the T the daemon answers with.
func postFor[T any](ctx context.Context, c *Client, path string, in T) (T, error) {
	var out T
	body, err := json.Marshal(in)
	if err != nil {
		return out, fmt.Errorf("encoding the request: %w", err)
	}
	err = c.do(ctx, http.MethodPost, path, body, &out)
	return out, err
}
