package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// CachedFlow is an entry of the flow cache: a transit flow the kernel forwarded once, which the
// datapath forwards since as the kernel did.
type CachedFlow struct {
	// Proto is "tcp" or "udp".
	Proto string `json:"proto" yaml:"proto"`
	// Src and Dst are the flow's ends as its packets arrive, address:port.
	Src string `json:"src" yaml:"src"`
	Dst string `json:"dst" yaml:"dst"`
	// InInterface is where its packets arrive; InVLAN the VLAN ID they arrive with, 0
	// untagged.
	InInterface string `json:"in_interface" yaml:"in_interface"`
	InVLAN      uint16 `json:"in_vlan,omitempty" yaml:"in_vlan,omitempty"`
	// OutInterface is where they leave, from SrcMAC to DstMAC.
	OutInterface string `json:"out_interface" yaml:"out_interface"`
	SrcMAC       string `json:"src_mac" yaml:"src_mac"`
	DstMAC       string `json:"dst_mac" yaml:"dst_mac"`
	// VLAN is what becomes of the tag: "none", "push", "pop" or "rewrite"; OutVLAN is the
	// VLAN ID pushed or written.
	VLAN    string `json:"vlan" yaml:"vlan"`
	OutVLAN uint16 `json:"out_vlan,omitempty" yaml:"out_vlan,omitempty"`
	// TTLDecrement: routed (the TTL is decremented), not bridged.
	TTLDecrement bool `json:"ttl_decrement" yaml:"ttl_decrement"`
	// SNAT, for a UE's flow the kernel translates (flow_cache.kernel_n6), is the source
	// address:port it is given; ToUE, for the replies to it, the UE's address:port they are
	// given back before the session's downlink rules take them.
	SNAT string `json:"snat,omitempty" yaml:"snat,omitempty"`
	ToUE string `json:"to_ue,omitempty" yaml:"to_ue,omitempty"`
	// DSCP is the DSCP written, when the kernel changed it.
	DSCP *int `json:"dscp,omitempty" yaml:"dscp,omitempty"`
	// MTU is the out interface's: a longer packet goes to the kernel.
	MTU int `json:"mtu" yaml:"mtu"`
	// Packets and Bytes (of the IP packets) forwarded, the first one, the kernel's, included.
	Packets   uint64    `json:"packets" yaml:"packets"`
	Bytes     uint64    `json:"bytes" yaml:"bytes"`
	FirstSeen time.Time `json:"first_seen" yaml:"first_seen"`
	LastSeen  time.Time `json:"last_seen" yaml:"last_seen"`
}

// FlowFilter selects flows: every field set must match; the zero filter selects every flow.
type FlowFilter struct {
	// Address is either end's address; Port either end's port.
	Address netip.Addr
	Port    uint16
	// Interface is the arrival or the departure interface.
	Interface string
	// Proto is "tcp" or "udp".
	Proto string
	// Src and Dst are the ends exactly.
	Src, Dst netip.AddrPort
}

// FlushResult is the answer to DELETE /api/v1/flows.
type FlushResult struct {
	// Flushed is how many flows were removed.
	Flushed int `json:"flushed" yaml:"flushed"`
}

const flowsPath = "/api/v1/flows"

// ParseFlowFilter reads a filter from the query parameters address, port, interface, proto,
// src and dst. The error names the parameter and what to write.
func ParseFlowFilter(q url.Values) (FlowFilter, error) {
	var f FlowFilter
	for name, vals := range q {
		if len(vals) != 1 {
			return f, fmt.Errorf("query parameter %s: give it once", name)
		}
		v := vals[0]
		var err error
		switch name {
		case "address":
			if f.Address, err = netip.ParseAddr(v); err != nil || !f.Address.Is4() {
				return f, fmt.Errorf("address: %q is not an IPv4 address, e.g. 192.0.2.1", v)
			}
		case "port":
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil || n == 0 {
				return f, fmt.Errorf("port: %q is not a port, 1 to 65535", v)
			}
			f.Port = uint16(n)
		case "interface":
			f.Interface = v
		case "proto":
			if v != "tcp" && v != "udp" {
				return f, fmt.Errorf("proto: %q is not one the flow cache holds; use tcp or udp", v)
			}
			f.Proto = v
		case "src", "dst":
			ap, err := netip.ParseAddrPort(v)
			if err != nil || !ap.Addr().Is4() {
				return f, fmt.Errorf("%s: %q is not an IPv4 address and port, e.g. 192.0.2.1:443", name, v)
			}
			if name == "src" {
				f.Src = ap
			} else {
				f.Dst = ap
			}
		default:
			return f, fmt.Errorf("unknown query parameter %q; use address, port, interface, proto, src or dst", name)
		}
	}
	return f, nil
}

// Query is f as query parameters, for ParseFlowFilter.
func (f FlowFilter) Query() url.Values {
	q := url.Values{}
	set := func(name, v string, ok bool) {
		if ok {
			q.Set(name, v)
		}
	}
	set("address", f.Address.String(), f.Address.IsValid())
	set("port", strconv.Itoa(int(f.Port)), f.Port != 0)
	set("interface", f.Interface, f.Interface != "")
	set("proto", f.Proto, f.Proto != "")
	set("src", f.Src.String(), f.Src.IsValid())
	set("dst", f.Dst.String(), f.Dst.IsValid())
	return q
}

// Match reports whether f selects fl.
func (f FlowFilter) Match(fl CachedFlow) bool {
	src, _ := netip.ParseAddrPort(fl.Src)
	dst, _ := netip.ParseAddrPort(fl.Dst)
	return (!f.Address.IsValid() || src.Addr() == f.Address || dst.Addr() == f.Address) &&
		(f.Port == 0 || src.Port() == f.Port || dst.Port() == f.Port) &&
		(f.Interface == "" || fl.InInterface == f.Interface || fl.OutInterface == f.Interface) &&
		(f.Proto == "" || fl.Proto == f.Proto) &&
		(!f.Src.IsValid() || src == f.Src) && (!f.Dst.IsValid() || dst == f.Dst)
}

// byBytes orders flows by bytes, most first, then by their ends, so that listings are stable.
func byBytes(a, b CachedFlow) int {
	return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst),
		cmp.Compare(a.Proto, b.Proto), cmp.Compare(a.InInterface, b.InInterface), cmp.Compare(a.InVLAN, b.InVLAN))
}

func (s *server) flows(w http.ResponseWriter, r *http.Request) {
	f, err := ParseFlowFilter(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	list, err := s.backend.Flows()
	if err != nil {
		s.answer(w, r, err, nil)
		return
	}
	out := []CachedFlow{}
	for _, fl := range list {
		if f.Match(fl) {
			out = append(out, fl)
		}
	}
	slices.SortFunc(out, byBytes)
	writeJSON(w, http.StatusOK, out)
}

func (s *server) flushFlows(w http.ResponseWriter, r *http.Request) {
	f, err := ParseFlowFilter(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	n, err := s.backend.FlushFlows(f.Match)
	s.answer(w, r, err, func() { writeJSON(w, http.StatusOK, FlushResult{Flushed: n}) })
}

// Flows returns the cached flows f selects, most bytes first; never nil. The error satisfies
// errors.Is(err, ErrConflict) when the flow cache is off.
func (c *Client) Flows(ctx context.Context, f FlowFilter) ([]CachedFlow, error) {
	return listOf[CachedFlow](ctx, c, flowsPath+query(f))
}

// FlushFlows removes the cached flows f selects (every one for the zero filter) and returns
// how many: their next packets go to the kernel, which decides afresh.
func (c *Client) FlushFlows(ctx context.Context, f FlowFilter) (int, error) {
	var res FlushResult
	err := c.do(ctx, http.MethodDelete, flowsPath+query(f), nil, &res)
	return res.Flushed, err
}

func query(f FlowFilter) string {
	if q := f.Query().Encode(); q != "" {
		return "?" + q
	}
	return ""
}
