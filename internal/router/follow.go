package router

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/nlfollow"
	"github.com/xupf/xupf/internal/nlns"
)

// Follow fills the router's state from the network namespace ns and keeps it up to date from
// netlink until stop is called: the interfaces always; the main and local routing tables and
// the IPv4 neighbours too unless the router is private. A private router with a Watch follows
// the kernel's routes and neighbours all the same, apart from its own, only to report their
// changes: what keeps copies of the kernel's decisions (the flow cache) copies the kernel's
// forwarding whatever the router's mode. It subscribes before it lists, so no
// change falls in between; when a subscription fails (a full socket buffer loses events) it
// subscribes again and lists everything anew. Follow owns ns: it is closed when Follow fails
// or stop returns.
func (r *Router) Follow(ns netns.NsHandle) (stop func(), err error) {
	h, err := nlns.Handle(ns)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("router: %w", err)
	}
	f := &follower{r: r, ns: ns, h: h, done: make(chan struct{}), kernel: newState()}
	s, err := f.subscribe()
	if err == nil {
		err = f.resync()
		if err != nil {
			s.close()
		}
	}
	if err != nil {
		h.Close()
		ns.Close()
		return nil, err
	}
	// What was copied of the kernel's decisions before (by an earlier run) may be stale.
	r.notify(Change{Routes: true})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		f.run(s)
		h.Close()
		ns.Close()
	}()
	var once sync.Once
	return func() { once.Do(func() { close(f.done); <-exited }) }, nil
}

type follower struct {
	r    *Router
	ns   netns.NsHandle
	h    *netlink.Handle
	done chan struct{}
	// kernel holds the kernel's routes and neighbours for a private router, which follows
	// them only to report changes (the router's state holds its own); only the follower's
	// goroutine uses it.
	kernel state
}

// followsKernel reports whether the kernel's routes and neighbours are followed: always when
// the router mirrors them, else only for a Watch.
func (f *follower) followsKernel() bool { return !f.r.private || f.r.watch != nil }

// kernelOf is where the kernel's routes and neighbours go: st, the router's state, when it
// mirrors them, else the follower's own copy.
func (f *follower) kernelOf(st *state) *state {
	if f.r.private {
		return &f.kernel
	}
	return st
}

// subscriptions are the netlink subscriptions of one round; close ends them. A nil channel
// is one the router does not follow (private mode): it never delivers.
type subscriptions struct {
	routes chan netlink.RouteUpdate
	neighs chan netlink.NeighUpdate
	links  chan netlink.LinkUpdate
	rules  <-chan struct{}
	stop   chan struct{}
	once   *sync.Once
}

// close closes the sockets, once, and drains the channels until netlink closes them: its
// receiving goroutines may be blocked sending an event no one reads any more.
func (s subscriptions) close() {
	s.once.Do(func() {
		close(s.stop)
		drain(s.routes)
		drain(s.neighs)
		drain(s.links)
		drain(s.rules)
	})
}

// drain reads ch until it is closed, in the background; nil is no subscription.
func drain[T any](ch <-chan T) {
	if ch != nil {
		go func() {
			for range ch {
			}
		}()
	}
}

// subscribeBuffer is each subscription's channel size; what netlink sends while the router
// writes waits in the socket's buffer, which a lost event shows up as an error in.
const subscribeBuffer = 256

func (f *follower) subscribe() (subscriptions, error) {
	s := subscriptions{stop: make(chan struct{}), once: &sync.Once{}}
	onErr := func(err error) {
		select {
		case <-s.stop: // closed to stop: no news
		default:
			f.r.log.Warn("router: netlink updates", "err", err)
		}
	}
	// A channel is kept only once its subscription works: only then does netlink close it.
	ns := nlns.Subscription(f.ns)
	links := make(chan netlink.LinkUpdate, subscribeBuffer)
	err := netlink.LinkSubscribeWithOptions(links, s.stop, netlink.LinkSubscribeOptions{Namespace: ns, ErrorCallback: onErr})
	if err == nil {
		s.links = links
	}
	if err == nil && f.followsKernel() {
		routes := make(chan netlink.RouteUpdate, subscribeBuffer)
		if err = netlink.RouteSubscribeWithOptions(routes, s.stop, netlink.RouteSubscribeOptions{Namespace: ns, ErrorCallback: onErr}); err == nil {
			s.routes = routes
		}
	}
	if err == nil && f.followsKernel() {
		neighs := make(chan netlink.NeighUpdate, subscribeBuffer)
		if err = netlink.NeighSubscribeWithOptions(neighs, s.stop, netlink.NeighSubscribeOptions{Namespace: ns, ErrorCallback: onErr}); err == nil {
			s.neighs = neighs
		}
	}
	if err == nil && f.r.watch != nil {
		s.rules, err = subscribeRules(f.ns, s.stop)
	}
	if err != nil {
		s.close()
		return subscriptions{}, fmt.Errorf("router: subscribe to netlink: %w", err)
	}
	return s, nil
}

// run follows s until stopped; a failed subscription is replaced (see nlfollow.Again) and
// everything is listed anew, as events may have been lost.
func (f *follower) run(s subscriptions) {
	for {
		f.follow(s)
		s.close()
		var ok bool
		if s, ok = nlfollow.Again(f.done, f.subscribe, func(err error) {
			f.r.log.Error("router: netlink updates stopped; retrying", "err", err)
		}); !ok {
			return
		}
		if err := f.resync(); err != nil {
			f.r.log.Error("router: resynchronise", "err", err)
		}
		f.r.notify(Change{Routes: true}) // events were lost
	}
}

// follow applies events until stopped or a subscription ends. Neighbour events are applied
// as they come; a route event has the routes listed again, a link event the links and the
// routes (the kernel removes a down link's routes without an event for each). Events already
// queued are taken together, so a burst costs one write.
func (f *follower) follow(s subscriptions) {
	for {
		b, stop := f.next(s)
		if stop {
			return
		}
		var err error
		var ch Change
		// applyNeighs applies the batch's neighbour events and returns the neighbours they
		// are about; a MAC that stops being valid is a change.
		applyNeighs := func(st *state) []neighKey {
			var keys []neighKey
			for _, u := range b.neighs {
				k, old, ok := applyNeigh(st, u)
				if !ok {
					continue
				}
				keys = append(keys, k)
				if old != nil && !bytes.Equal(old, st.neighs[k]) {
					ch.Gone = append(ch.Gone, GoneNeighbour{Ifindex: k.ifindex, MAC: old, Collected: collected(u)})
				}
			}
			return keys
		}
		switch {
		case !b.routes && !b.links && len(b.neighs) == 0:
			// Only what the router does not copy (b.policy): nothing to write.
		case f.r.private && !b.links:
			// Only the kernel's routes and neighbours, which a private router follows only to
			// report them: nothing of the router's changes, so nothing is written and its lock
			// is not taken (resolving its whole table would delay the report by seconds with a
			// million routes).
			routes := maps.Clone(f.kernel.routes)
			applyNeighs(&f.kernel)
			if b.routes {
				err = f.listRoutes(&f.kernel)
			}
			ch.Routes = !maps.Equal(routes, f.kernel.routes)
		case b.routes || b.links:
			err = f.r.update(func(st *state) error {
				kst := f.kernelOf(st)
				routes, links := maps.Clone(kst.routes), maps.Clone(st.links)
				// A link event that changes no route and no link as followed (an XDP
				// program attached, counters) changes no decision.
				defer func() { ch.Routes = !maps.Equal(routes, kst.routes) || !maps.EqualFunc(links, st.links, sameLink) }()
				applyNeighs(kst)
				if b.links {
					if err := f.listLinks(st); err != nil {
						return err
					}
				}
				return f.listRoutes(kst)
			})
		default:
			err = f.r.updateNeighs(func(st *state) ([]neighKey, error) { return applyNeighs(st), nil })
		}
		if err != nil {
			f.r.log.Error("router: update the route table", "err", err)
		}
		ch.Routes = ch.Routes || b.policy
		f.r.notify(ch)
		if b.closed {
			return
		}
	}
}

func sameLink(a, b Link) bool {
	return a.Index == b.Index && a.Name == b.Name && bytes.Equal(a.MAC, b.MAC) && a.MTU == b.MTU
}

// batch is what the events taken together call for; closed: a subscription ended. policy:
// policy routing changed, which the router does not copy but the kernel decides by (for the
// Watch only): an IPv4 rule, or a route of a table other than main and local.
type batch struct {
	routes, links, policy, closed bool
	neighs                        []netlink.NeighUpdate
}

// next waits for an event, then takes those already queued too; stop reports f.done.
func (f *follower) next(s subscriptions) (b batch, stop bool) {
	var queued <-chan struct{} // nil while waiting for the first event, then always ready
	for !b.closed {
		select {
		case <-f.done:
			return b, true
		case u, ok := <-s.routes:
			b.closed = !ok
			if ok && u.Family == netlink.FAMILY_V4 && u.Table != unix.RT_TABLE_MAIN && u.Table != unix.RT_TABLE_LOCAL {
				b.policy = true
			} else {
				b.routes = true
			}
		case _, ok := <-s.rules:
			b.policy, b.closed = true, !ok
		case _, ok := <-s.links:
			b.links, b.closed = true, !ok
		case u, ok := <-s.neighs:
			b.neighs, b.closed = append(b.neighs, u), !ok
		case <-queued:
			return b, false
		}
		queued = ready
	}
	return b, false
}

// ready is a channel that always receives: a select's default that can be switched on.
var ready = func() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// resync lists everything followed and rewrites what changed. A private router's copy of the
// kernel's routes and neighbours is listed outside its lock: none of it is the router's.
func (f *follower) resync() error {
	var kernel error
	if f.r.private {
		kernel = errors.Join(f.listRoutes(&f.kernel), f.listNeighs(&f.kernel))
	}
	return errors.Join(kernel, f.r.list(func(st *state) error {
		if f.r.private {
			return f.listLinks(st)
		}
		return errors.Join(f.listLinks(st), f.listRoutes(st), f.listNeighs(st))
	}))
}

// listLinks replaces the links of st by the kernel's.
func (f *follower) listLinks(st *state) error {
	links, err := f.h.LinkList()
	if err != nil {
		return fmt.Errorf("router: list links: %w", err)
	}
	st.setLinks(linksOf(links))
	return nil
}

// listRoutes replaces the routes of st by the kernel's main and local tables (none when the
// kernel's are not followed).
func (f *follower) listRoutes(st *state) error {
	if !f.followsKernel() {
		return nil
	}
	routes, err := f.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("router: list routes: %w", err)
	}
	clear(st.routes)
	for _, nr := range routes {
		r, ok := routeOf(nr)
		if !ok {
			continue
		}
		// Routes appended to one prefix and metric (ip route append) are listed in the
		// kernel's order, and the kernel uses the first.
		if _, dup := st.routes[keyOf(r)]; !dup {
			st.routes[keyOf(r)] = r
		}
	}
	return nil
}

// listNeighs replaces the neighbours of st by the kernel's (none when the kernel's are not
// followed).
func (f *follower) listNeighs(st *state) error {
	if !f.followsKernel() {
		return nil
	}
	list, err := f.h.NeighList(0, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("router: list neighbours: %w", err)
	}
	clear(st.neighs)
	for _, n := range list {
		applyNeigh(st, netlink.NeighUpdate{Type: unix.RTM_NEWNEIGH, Neigh: n})
	}
	return nil
}

func linksOf(links []netlink.Link) []Link {
	out := make([]Link, 0, len(links))
	for _, l := range links {
		a := l.Attrs()
		out = append(out, Link{Index: a.Index, Name: a.Name, MAC: a.HardwareAddr, MTU: a.MTU})
	}
	return out
}

// routeOf is the route the datapath follows for a kernel route, if it follows it: the main
// and local tables only, IPv4, no ToS selector, and of a multipath route the first next hop.
func routeOf(nr netlink.Route) (Route, bool) {
	if nr.Family != netlink.FAMILY_V4 || nr.Tos != 0 ||
		nr.Table != unix.RT_TABLE_MAIN && nr.Table != unix.RT_TABLE_LOCAL {
		return Route{}, false
	}
	r := Route{Prefix: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Ifindex: nr.LinkIndex, Gateway: addrOf(nr.Gw),
		MTU: nr.MTU, Priority: nr.Priority, LocalTable: nr.Table == unix.RT_TABLE_LOCAL}
	if nr.Dst != nil {
		ones, _ := nr.Dst.Mask.Size()
		r.Prefix = netip.PrefixFrom(addrOf(nr.Dst.IP), ones)
		if !r.Prefix.IsValid() {
			return Route{}, false
		}
	}
	if len(nr.MultiPath) > 0 {
		r.Ifindex, r.Gateway = nr.MultiPath[0].LinkIndex, addrOf(nr.MultiPath[0].Gw)
	}
	switch {
	case nr.Flags&unix.RTNH_F_DEAD != 0:
		return Route{}, false
	case nr.Type == unix.RTN_BLACKHOLE, nr.Type == unix.RTN_UNREACHABLE, nr.Type == unix.RTN_PROHIBIT:
		r.Type = Drop
	case nr.Type != unix.RTN_UNICAST, nr.Encap != nil:
		r.Type = Local
	}
	return r, true
}

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip.To4())
	return a
}

// collected tells whether u deletes an entry the kernel no longer confirmed (stale, delay,
// probe): garbage collection of an unused entry, after which the kernel would resolve the
// address afresh, most likely to the same MAC. The kernel sends a MAC replaced as the live
// entry deleted (then the new one added), and ip neigh del as the entry failed (then
// deleted): neither is collected.
func collected(u netlink.NeighUpdate) bool {
	const live = netlink.NUD_PERMANENT | netlink.NUD_NOARP | netlink.NUD_REACHABLE
	return u.Type == unix.RTM_DELNEIGH && u.State&live == 0
}

// applyNeigh applies one neighbour event and returns the neighbour it is about, if IPv4, and
// the MAC it had before (nil: none): an entry the kernel would send to (NUD_VALID: also
// stale, delay and probe, which it sends to while it checks) is a next hop; any other state,
// or a deletion, is none.
func applyNeigh(st *state, u netlink.NeighUpdate) (k neighKey, old net.HardwareAddr, ok bool) {
	if u.Family != netlink.FAMILY_V4 {
		return neighKey{}, nil, false
	}
	a := addrOf(u.IP)
	if !a.IsValid() {
		return neighKey{}, nil, false
	}
	k = neighKey{a, u.LinkIndex}
	old = st.neighs[k]
	const valid = netlink.NUD_PERMANENT | netlink.NUD_NOARP | netlink.NUD_REACHABLE |
		netlink.NUD_PROBE | netlink.NUD_STALE | netlink.NUD_DELAY
	if u.Type == unix.RTM_NEWNEIGH && u.State&valid != 0 && len(u.HardwareAddr) == 6 {
		st.neighs[k] = u.HardwareAddr
	} else {
		delete(st.neighs, k)
	}
	return k, old, true
}
