// Package router keeps the datapath's route table: every entry is a prefix with its next hop
// resolved down to the frame to send (out interface, MTU, MACs), so the datapath forwards a
// packet with one route table lookup (internal/routedir) instead of a FIB and a neighbour
// lookup.
//
// The routes, neighbours and interfaces come either from the kernel (Mirror: ip route, ARP and
// the links stay the source of truth) or from the configuration and the API (private mode:
// Router.AddRoute and friends). Either way Router.resolve turns them into entries and only the
// entries that changed are written.
package router

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
)

// Kind is what the datapath does with a packet an entry matches: bpf/lib/types.h enum
// nexthop_kind, value for value.
type Kind uint8

const (
	// Kernel: not forwarded here (a local or broadcast address, multicast, another route
	// type); the kernel delivers or refuses it. A missing entry means the same.
	Kernel Kind = iota
	// NoRoute: blackhole, unreachable or prohibit; dropped as no_route.
	NoRoute
	// Unresolved: the next hop has no valid neighbour entry; the kernel resolves it.
	Unresolved
	// Forward: rewrite the MACs and send out of Ifindex.
	Forward
)

var kindNames = [...]string{Kernel: "kernel", NoRoute: "no_route", Unresolved: "unresolved", Forward: "forward"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Nexthop is an entry's value: what a packet to the prefix becomes.
type Nexthop struct {
	Kind    Kind
	Ifindex int
	MTU     int
	Dst     [6]byte // the neighbour's MAC (Forward)
	Src     [6]byte // the out interface's MAC (Forward)
}

// Table is where the entries go: the datapath's route table (internal/routedir).
type Table interface {
	Put(netip.Prefix, Nexthop) error
	Delete(netip.Prefix) error
	Entries() (map[netip.Prefix]Nexthop, error)
}

// RouteType is what a route does.
type RouteType uint8

const (
	// Unicast forwards to Gateway, or with no gateway to the destination itself (on link).
	Unicast RouteType = iota
	// Drop is a blackhole, unreachable or prohibit route.
	Drop
	// Local is a route the kernel finishes: local, broadcast, multicast, throw, or one with
	// a lightweight tunnel encapsulation.
	Local
)

var routeTypeNames = [...]string{Unicast: "unicast", Drop: "blackhole", Local: "local"}

func (t RouteType) String() string {
	if int(t) < len(routeTypeNames) {
		return routeTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// ParseRouteType is RouteType's inverse for the private types, as the configuration and the
// API name them.
func ParseRouteType(s string) (RouteType, error) {
	switch s {
	case "", "unicast":
		return Unicast, nil
	case "blackhole":
		return Drop, nil
	}
	return 0, fmt.Errorf("type: %q is not a route type; use unicast or blackhole", s)
}

// Route is one route. Of several routes to the same prefix, a LocalTable one wins, then the
// lowest Priority: the kernel's order (its local table is looked up before the main one).
type Route struct {
	Prefix     netip.Prefix
	Type       RouteType
	Gateway    netip.Addr // invalid: the destination is on link
	Ifindex    int
	MTU        int // 0: the interface's
	Priority   int
	LocalTable bool
}

// Neighbour is a resolved neighbour entry: the MAC of Addr on the interface Ifindex.
type Neighbour struct {
	Addr    netip.Addr
	Ifindex int
	MAC     net.HardwareAddr
}

type neighKey struct {
	addr    netip.Addr
	ifindex int
}

// Link is what a next hop needs of an interface.
type Link struct {
	Index int
	Name  string
	MAC   net.HardwareAddr
	MTU   int
}

// fixed are entries every table has unless a route of the same prefix says otherwise: the
// datapath never sends multicast or the limited broadcast to a unicast next hop, nor what
// the kernel never routes off the host (loopback, "this network"), whether lo is up or not.
var fixed = map[netip.Prefix]Nexthop{
	netip.MustParsePrefix("0.0.0.0/8"):          {Kind: Kernel},
	netip.MustParsePrefix("127.0.0.0/8"):        {Kind: Kernel},
	netip.MustParsePrefix("224.0.0.0/4"):        {Kind: Kernel},
	netip.MustParsePrefix("255.255.255.255/32"): {Kind: Kernel},
}

// state is what the entries are resolved from.
type state struct {
	routes map[routeKey]Route
	neighs map[neighKey]net.HardwareAddr
	links  map[int]Link
	local  map[netip.Addr]bool // the UPF's own addresses: never forwarded
}

// routeKey tells routes apart as the kernel does within its main and local tables.
type routeKey struct {
	prefix     netip.Prefix
	priority   int
	localTable bool
}

func newState() state {
	return state{routes: map[routeKey]Route{}, neighs: map[neighKey]net.HardwareAddr{},
		links: map[int]Link{}, local: map[netip.Addr]bool{}}
}

func keyOf(r Route) routeKey {
	return routeKey{prefix: r.Prefix, priority: r.Priority, localTable: r.LocalTable}
}

// index is what a neighbour change needs of the last full resolution: the winning route of
// each prefix, and the prefixes of the routes via each gateway.
type index struct {
	best map[netip.Prefix]Route
	via  map[neighKey][]netip.Prefix
}

// resolve computes every entry of the table from s, and the index of the result.
func (s *state) resolve() (map[netip.Prefix]Nexthop, index) {
	idx := index{best: map[netip.Prefix]Route{}, via: map[neighKey][]netip.Prefix{}}
	for _, r := range s.routes {
		if b, ok := idx.best[r.Prefix]; !ok || r.LocalTable && !b.LocalTable ||
			r.LocalTable == b.LocalTable && r.Priority < b.Priority {
			idx.best[r.Prefix] = r
		}
	}
	out := maps.Clone(fixed)
	for p, r := range idx.best {
		out[p] = s.nexthop(r)
		if r.Type == Unicast && r.Gateway.IsValid() {
			k := neighKey{r.Gateway, r.Ifindex}
			idx.via[k] = append(idx.via[k], p)
		}
	}
	for k := range s.neighs {
		if nh, ok := s.hostEntry(idx.best, k.addr); ok {
			out[netip.PrefixFrom(k.addr, 32)] = nh
		}
	}
	for a := range s.local {
		out[netip.PrefixFrom(a, 32)] = Nexthop{Kind: Kernel}
	}
	return out, idx
}

// hostEntry is the /32 entry of a neighbour's address, if it has one. An on-link route's
// destinations each have their own neighbour entry: a /32 per known neighbour makes one
// lookup enough, but only where that route is the one the address's longest match finds,
// on the neighbour's interface, and the address is no local one, no route's and in no
// fixed prefix (those never are next hops).
func (s *state) hostEntry(best map[netip.Prefix]Route, a netip.Addr) (Nexthop, bool) {
	host := netip.PrefixFrom(a, 32)
	if _, ok := best[host]; ok || s.local[a] || inFixed(a) {
		return Nexthop{}, false
	}
	r, ok := longestMatch(best, a)
	if !ok || r.Type != Unicast || r.Gateway.IsValid() {
		return Nexthop{}, false
	}
	mac, ok := s.neighs[neighKey{a, r.Ifindex}]
	nh := s.nexthop(r)
	if !ok || nh.Kind != Unresolved {
		return Nexthop{}, false
	}
	nh.Kind, nh.Dst = Forward, [6]byte(mac)
	return nh, true
}

func inFixed(a netip.Addr) bool {
	for p := range fixed {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func longestMatch(routes map[netip.Prefix]Route, a netip.Addr) (Route, bool) {
	for bits := 32; bits >= 0; bits-- {
		p, _ := a.Prefix(bits)
		if r, ok := routes[p]; ok {
			return r, true
		}
	}
	return Route{}, false
}

// nexthop resolves one route.
func (s *state) nexthop(r Route) Nexthop {
	switch r.Type {
	case Drop:
		return Nexthop{Kind: NoRoute}
	case Local:
		return Nexthop{Kind: Kernel}
	}
	l, ok := s.links[r.Ifindex]
	if !ok || len(l.MAC) != 6 {
		// An interface without an Ethernet address (a tunnel, say): the kernel's.
		return Nexthop{Kind: Kernel}
	}
	nh := Nexthop{Kind: Unresolved, Ifindex: r.Ifindex, MTU: l.MTU, Src: [6]byte(l.MAC)}
	if r.MTU > 0 {
		nh.MTU = r.MTU
	}
	if r.Gateway.IsValid() {
		if mac, ok := s.neighs[neighKey{r.Gateway, r.Ifindex}]; ok {
			nh.Kind, nh.Dst = Forward, [6]byte(mac)
		}
	}
	return nh
}

// Router writes the entries resolved from its state into a Table, only those that changed.
type Router struct {
	mu        sync.Mutex
	table     Table
	log       *slog.Logger
	st        state
	installed map[netip.Prefix]Nexthop
	idx       index // of the last full resolution
	// private: routes and neighbours come from AddRoute and AddNeighbour, not the kernel.
	private bool
	watch   func(Change) // see Watch; nil: none
	// ready: the state is whole, and may be written: a mirroring router's once Follow has
	// listed the kernel's links, routes and neighbours, a private one's once its owner has
	// added its routes (Ready). Before, writing would remove what an earlier run left in the
	// table, which keeps forwarding across a restart.
	ready bool
}

// Change is what Follow saw change in the kernel's forwarding, for those that keep copies of
// the kernel's decisions (the flow cache): links, routes and neighbours, in either mode (a
// private router's own routes and neighbours are not the kernel's, and no change).
type Change struct {
	// Routes: routes (of any table), policy routing rules or links changed, or events were
	// lost: any decision may differ now.
	Routes bool
	// Gone are the neighbours whose MAC is no longer the one to send to (deleted, failed,
	// or changed): frames to that MAC out of that interface now go nowhere.
	Gone []GoneNeighbour
}

// GoneNeighbour is a neighbour's former MAC on interface Ifindex.
type GoneNeighbour struct {
	Ifindex int
	MAC     net.HardwareAddr
	// Collected: garbage collection deleted the entry, which the kernel no longer used, and
	// it would resolve the address afresh, most likely to the same MAC; else the MAC changed,
	// or the entry failed or was deleted live (the kernel now sends elsewhere, or drops).
	Collected bool
}

// Watch has fn called, from Follow's goroutine, after each change Follow applied (once as it
// starts: what was copied before may be stale). Call it before Follow.
func (r *Router) Watch(fn func(Change)) { r.watch = fn }

func (r *Router) notify(ch Change) {
	if r.watch != nil && (ch.Routes || len(ch.Gone) > 0) {
		r.watch(ch)
	}
}

// New returns a Router writing into table. It takes the table as it is: the entries of an
// earlier run keep forwarding until the first write (Follow's) replaces or deletes them.
func New(table Table, private bool, log *slog.Logger) (*Router, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	installed, err := table.Entries()
	if err != nil {
		return nil, err
	}
	return &Router{table: table, log: log, st: newState(), installed: installed, private: private}, nil
}

// update changes the state with fn, then writes the entries that changed. The caller holds
// no lock.
func (r *Router) update(fn func(*state) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := fn(&r.st); err != nil {
		return err
	}
	return r.write()
}

// list is update for Follow's listing of the kernel's state: a mirroring router writes nothing
// before the first one succeeds (SetLocal comes first at start-up).
func (r *Router) list(fn func(*state) error) error {
	return r.update(func(s *state) error {
		err := fn(s)
		if !r.private {
			r.ready = r.ready || err == nil
		}
		return err
	})
}

// Ready lets a private router write its routes and neighbours, which its owner has added,
// into the table, replacing what an earlier run left there in one pass; a private router
// writes nothing before. For a mirroring router it only writes what changed, if anything.
func (r *Router) Ready() error {
	return r.update(func(*state) error {
		r.ready = r.ready || r.private
		return nil
	})
}

// updateNeighs changes the neighbours only, with fn, which returns the keys it changed: only
// the entries those can change are resolved again (the routes via them and their /32s), not
// the whole table, so a neighbour change costs the same with 10 routes or 100,000. Before the
// router may write (see Ready and list) it only changes the state: the index is still empty,
// so every /32 would look gone and the earlier run's entries would be deleted.
func (r *Router) updateNeighs(fn func(*state) ([]neighKey, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys, err := fn(&r.st)
	if err != nil || !r.ready {
		return err
	}
	want := map[netip.Prefix]Nexthop{}
	var gone []netip.Prefix
	for _, k := range keys {
		for _, p := range r.idx.via[k] {
			want[p] = r.st.nexthop(r.idx.best[p])
		}
		host := netip.PrefixFrom(k.addr, 32)
		if _, ok := r.idx.best[host]; ok || r.st.local[k.addr] || inFixed(k.addr) {
			continue // the route's, local or fixed entry: no neighbour's
		}
		if nh, ok := r.st.hostEntry(r.idx.best, k.addr); ok {
			want[host] = nh
		} else {
			gone = append(gone, host)
		}
	}
	return r.apply(want, gone)
}

// write brings the whole table to the entries of the state. The caller holds r.mu.
func (r *Router) write() error {
	if !r.ready {
		return nil
	}
	want, idx := r.st.resolve()
	r.idx = idx
	var gone []netip.Prefix
	for p := range r.installed {
		if _, ok := want[p]; !ok {
			gone = append(gone, p)
		}
	}
	return r.apply(want, gone)
}

// apply writes the entries of want that differ from the installed ones, first, so a
// destination never falls back to a shorter prefix in between, then deletes gone. The
// caller holds r.mu.
func (r *Router) apply(want map[netip.Prefix]Nexthop, gone []netip.Prefix) error {
	var errs []error
	for p, nh := range want {
		if old, ok := r.installed[p]; ok && old == nh {
			continue
		}
		if err := r.table.Put(p, nh); err != nil {
			errs = append(errs, fmt.Errorf("route %s: %w", p, err))
			continue
		}
		r.installed[p] = nh
	}
	for _, p := range gone {
		if _, ok := r.installed[p]; !ok {
			continue
		}
		if err := r.table.Delete(p); err != nil {
			errs = append(errs, fmt.Errorf("delete route %s: %w", p, err))
			continue
		}
		delete(r.installed, p)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrTable, errors.Join(errs...))
	}
	return nil
}

// ErrTable marks a failed write to the Table (a full table, say), as against a change the
// router refused.
var ErrTable = errors.New("write the route table")

// Entries returns the entries the table holds.
func (r *Router) Entries() map[netip.Prefix]Nexthop {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.installed)
}

// SetLocal makes addrs the UPF's own addresses: a /32 each that the datapath never forwards
// (a UE's packet to one is then dropped as ue_to_upf, not sent to the kernel).
func (r *Router) SetLocal(addrs []netip.Addr) error {
	return r.update(func(s *state) error {
		clear(s.local)
		for _, a := range addrs {
			if a.Is4() {
				s.local[a] = true
			}
		}
		return nil
	})
}

// setLinks replaces what is known of the interfaces.
func (s *state) setLinks(links []Link) {
	clear(s.links)
	for _, l := range links {
		s.links[l.Index] = l
	}
}

// ErrMirror is returned by the route and neighbour changes of a router that mirrors the
// kernel: change the kernel's tables instead.
var ErrMirror = errors.New("routes and neighbours mirror the kernel's (router.mode: mirror): " +
	"change them with `ip route` and `ip neigh`, or set router.mode: private")

// ErrNotFound is returned for a route or neighbour the router does not have.
var ErrNotFound = errors.New("not found")

// Private reports whether routes and neighbours come from AddRoute and AddNeighbour.
func (r *Router) Private() bool { return r.private }

// LinkByName returns the interface of that name, as the router last listed the interfaces.
func (r *Router) LinkByName(name string) (Link, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.st.links {
		if l.Name == name {
			return l, true
		}
	}
	return Link{}, false
}

// LinkName is the name of the interface ifindex, or its number when the router does not know it.
func (r *Router) LinkName(ifindex int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.st.links[ifindex]; ok {
		return l.Name
	}
	return fmt.Sprintf("ifindex %d", ifindex)
}

// Check says what is wrong with rt as a private route, naming the field; nil when it is valid.
func (rt Route) Check() error {
	switch {
	case !rt.Prefix.IsValid() || !rt.Prefix.Addr().Is4():
		return fmt.Errorf("prefix: %s is not an IPv4 prefix; use e.g. 0.0.0.0/0 or 192.0.2.0/24", rt.Prefix)
	case rt.Prefix.Masked() != rt.Prefix:
		return fmt.Errorf("prefix: %s has host bits set; use %s", rt.Prefix, rt.Prefix.Masked())
	case rt.LocalTable || rt.Priority != 0:
		return errors.New("a private route has no table or priority")
	case rt.MTU < 0 || rt.MTU > 65535:
		return fmt.Errorf("mtu: %d is out of range; use 68 to 65535, or 0 for the interface's", rt.MTU)
	}
	switch rt.Type {
	case Drop:
		if rt.Gateway.IsValid() || rt.Ifindex != 0 || rt.MTU != 0 {
			return errors.New("a blackhole route has no via, interface or mtu")
		}
	case Unicast:
		if rt.Ifindex <= 0 {
			return errors.New("interface: missing; name the interface the route leaves by")
		}
		if rt.Gateway.IsValid() && (!rt.Gateway.Is4() || rt.Gateway.IsUnspecified() || rt.Gateway.IsMulticast()) {
			return fmt.Errorf("via: %s is not a unicast IPv4 address", rt.Gateway)
		}
		if rt.MTU != 0 && rt.MTU < 68 {
			return fmt.Errorf("mtu: %d is below IPv4's minimum; use 68 to 65535, or 0 for the interface's", rt.MTU)
		}
	default:
		return fmt.Errorf("type: %s routes are the kernel's; use unicast or blackhole", rt.Type)
	}
	return nil
}

// Check says what is wrong with n as a static neighbour; nil when it is valid.
func (n Neighbour) Check() error {
	switch {
	case !n.Addr.Is4() || n.Addr.IsUnspecified() || n.Addr.IsMulticast():
		return fmt.Errorf("address: %s is not a unicast IPv4 address", n.Addr)
	case n.Ifindex <= 0:
		return errors.New("interface: missing; name the interface the neighbour is on")
	case len(n.MAC) != 6:
		return fmt.Errorf("mac: %q is not an Ethernet address; use e.g. 02:00:00:00:02:02", n.MAC)
	case n.MAC[0]&1 != 0 || [6]byte(n.MAC) == [6]byte{}:
		return fmt.Errorf("mac: %s is not a unicast Ethernet address", n.MAC)
	}
	return nil
}

// AddRoute adds a private route or replaces the one to the same prefix.
func (r *Router) AddRoute(rt Route) error {
	if !r.private {
		return ErrMirror
	}
	if err := rt.Check(); err != nil {
		return err
	}
	return r.update(func(s *state) error {
		if rt.Type == Unicast {
			if _, ok := s.links[rt.Ifindex]; !ok {
				return fmt.Errorf("interface: ifindex %d does not exist", rt.Ifindex)
			}
		}
		s.routes[keyOf(rt)] = rt
		return nil
	})
}

// DeleteRoute deletes the private route to p; ErrNotFound when there is none.
func (r *Router) DeleteRoute(p netip.Prefix) error {
	if !r.private {
		return ErrMirror
	}
	return r.update(func(s *state) error {
		k := routeKey{prefix: p}
		if _, ok := s.routes[k]; !ok {
			return fmt.Errorf("route %s: %w", p, ErrNotFound)
		}
		delete(s.routes, k)
		return nil
	})
}

// Routes returns the routes the router resolves (private or mirrored), sorted by prefix.
func (r *Router) Routes() []Route {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Collect(maps.Values(r.st.routes))
	slices.SortFunc(out, func(a, b Route) int {
		if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
			return c
		}
		return a.Prefix.Bits() - b.Prefix.Bits()
	})
	return out
}

// AddNeighbour adds a static neighbour or replaces the one of the same address and interface.
func (r *Router) AddNeighbour(n Neighbour) error {
	if !r.private {
		return ErrMirror
	}
	if err := n.Check(); err != nil {
		return err
	}
	return r.updateNeighs(func(s *state) ([]neighKey, error) {
		if _, ok := s.links[n.Ifindex]; !ok {
			return nil, fmt.Errorf("interface: ifindex %d does not exist", n.Ifindex)
		}
		k := neighKey{n.Addr, n.Ifindex}
		s.neighs[k] = slices.Clone(n.MAC)
		return []neighKey{k}, nil
	})
}

// DeleteNeighbour deletes a static neighbour; ErrNotFound when there is none.
func (r *Router) DeleteNeighbour(addr netip.Addr, ifindex int) error {
	if !r.private {
		return ErrMirror
	}
	return r.updateNeighs(func(s *state) ([]neighKey, error) {
		k := neighKey{addr, ifindex}
		if _, ok := s.neighs[k]; !ok {
			return nil, fmt.Errorf("neighbour %s: %w", addr, ErrNotFound)
		}
		delete(s.neighs, k)
		return []neighKey{k}, nil
	})
}

// Neighbours returns the neighbours the router resolves with (static or mirrored), sorted.
func (r *Router) Neighbours() []Neighbour {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Neighbour, 0, len(r.st.neighs))
	for k, mac := range r.st.neighs {
		out = append(out, Neighbour{Addr: k.addr, Ifindex: k.ifindex, MAC: slices.Clone(mac)})
	}
	slices.SortFunc(out, func(a, b Neighbour) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		return a.Ifindex - b.Ifindex
	})
	return out
}
