package api_test

import (
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
)

func TestRouterHandlers(t *testing.T) {
	routes := func() *apitest.Backend {
		return &apitest.Backend{
			RoutesData: []api.Route{
				{Prefix: "198.51.100.0/24", Type: "blackhole"},
				{Prefix: "0.0.0.0/0", Via: "203.0.113.1", Interface: "n6", Type: "unicast"},
			},
			NeighboursData: []api.Neighbour{{Address: "203.0.113.1", Interface: "n6", MAC: "02:00:00:00:02:02"}},
		}
	}
	const (
		defaultJSON = `{"prefix":"0.0.0.0/0","via":"203.0.113.1","interface":"n6","type":"unicast"}`
		neighJSON   = `{"address":"203.0.113.1","interface":"n6","mac":"02:00:00:00:02:02"}`
	)
	checkHandler(t, []handlerCase{
		{name: "routes sorted by prefix", backend: routes(), method: "GET", path: "/api/v1/router/routes", wantCode: 200,
			wantBody: `[` + defaultJSON + `,{"prefix":"198.51.100.0/24","type":"blackhole"}]`},
		{name: "no routes is an empty array", backend: &apitest.Backend{}, method: "GET", path: "/api/v1/router/routes",
			wantCode: 200, wantBody: `[]`},
		{name: "add a route", backend: routes(), method: "POST", path: "/api/v1/router/routes",
			body: `{"prefix":"192.0.2.0/24","interface":"n3"}`, wantCode: 201,
			wantBody: `{"prefix":"192.0.2.0/24","interface":"n3"}`},
		{name: "a route with an unknown field", backend: routes(), method: "POST", path: "/api/v1/router/routes",
			body: `{"prefix":"192.0.2.0/24","gateway":"192.0.2.1"}`, wantCode: 400,
			wantBody: `{"error":"unknown field \"gateway\" in the route; the fields are prefix, via, interface, type, mtu"}`},
		{name: "an mtu of the wrong type", backend: routes(), method: "POST", path: "/api/v1/router/routes",
			body: `{"prefix":"192.0.2.0/24","mtu":"big"}`, wantCode: 400,
			wantBody: `{"error":"field mtu: got a JSON string, want a whole number of bytes, 68 to 65535"}`},
		{name: "delete a route", backend: routes(), method: "DELETE", path: "/api/v1/router/routes/198.51.100.0/24", wantCode: 204},
		{name: "delete a route there is not", backend: routes(), method: "DELETE", path: "/api/v1/router/routes/10.0.0.0/8",
			wantCode: 404, wantBody: `{"error":"route 10.0.0.0/8: not found"}`},
		{name: "neighbours", backend: routes(), method: "GET", path: "/api/v1/router/neighbours", wantCode: 200,
			wantBody: `[` + neighJSON + `]`},
		{name: "add a neighbour", backend: routes(), method: "POST", path: "/api/v1/router/neighbours",
			body: neighJSON, wantCode: 201, wantBody: neighJSON},
		{name: "delete a neighbour", backend: routes(), method: "DELETE", path: "/api/v1/router/neighbours/n6/203.0.113.1", wantCode: 204},
	})
}
