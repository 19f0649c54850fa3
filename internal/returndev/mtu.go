package returndev

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/nlfollow"
	"github.com/xupf/xupf/internal/nlns"
)

// A veth is made with a 1500-byte MTU, and the kernel drops (or fragments) what it would
// send into the device beyond it: a reply that came in by an interface of a larger MTU would
// never reach its UE. So the pair takes the largest MTU of the interfaces the datapath is
// attached to, which every packet the kernel takes in fits, and keeps it as they change.
// But at most what each end takes: with an XDP program on the peer, a veth takes a frame of
// one page at most (about 3,500 bytes with 4 KiB pages), and the kernel says how much in
// the end's IFLA_MAX_MTU; beyond that a packet still goes to the kernel's fragmentation.

// FollowMTU gives the pair name and Peer(name) the MTU of the interfaces ifaces (the largest
// of those that exist, at most what either end takes) and keeps it in step with their
// changes until stop is called. In the calling thread's network namespace; log receives
// what a later change could not set.
func FollowMTU(name string, ifaces []string, log *slog.Logger) (stop func(), err error) {
	m, err := newMTUFollower(name, ifaces, log)
	if err != nil {
		return nil, err
	}
	updates, err := m.subscribe()
	if err == nil {
		err = m.set()
	}
	if err != nil {
		if updates != nil { // subscribed: end it, or its socket and goroutine stay
			close(m.stopSub)
			for range updates { // until netlink closes it
			}
		}
		m.close()
		return nil, fmt.Errorf("return device %q: %w", name, err)
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		m.run(updates)
	}()
	return func() {
		close(m.done)
		<-exited
		m.close()
	}, nil
}

// mtuFollower keeps a return device's MTU in step with the interfaces'.
type mtuFollower struct {
	name   string
	ifaces []string
	log    *slog.Logger
	// ns is the namespace FollowMTU was called in; h and sock are netlink sockets made
	// there, which the follower's goroutine uses from whatever thread it runs on.
	ns   netns.NsHandle
	h    *netlink.Handle
	sock *nl.SocketHandle
	done chan struct{}
	// stopSub ends the current subscription.
	stopSub chan struct{}
}

func newMTUFollower(name string, ifaces []string, log *slog.Logger) (*mtuFollower, error) {
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("return device %q: its network namespace: %w", name, err)
	}
	m := &mtuFollower{name: name, ifaces: slices.Clone(ifaces), log: log, ns: ns, done: make(chan struct{})}
	if m.h, err = netlink.NewHandle(unix.NETLINK_ROUTE); err == nil {
		var s *nl.NetlinkSocket
		if s, err = nl.GetNetlinkSocketAt(netns.None(), netns.None(), unix.NETLINK_ROUTE); err == nil {
			m.sock = &nl.SocketHandle{Socket: s}
		}
	}
	if err != nil {
		m.close()
		return nil, fmt.Errorf("return device %q: netlink: %w", name, err)
	}
	return m, nil
}

func (m *mtuFollower) close() {
	if m.sock != nil {
		m.sock.Close()
	}
	if m.h != nil {
		m.h.Close()
	}
	m.ns.Close()
}

// subscribe subscribes to the namespace's link changes.
func (m *mtuFollower) subscribe() (chan netlink.LinkUpdate, error) {
	stop := make(chan struct{})
	m.stopSub = stop
	updates := make(chan netlink.LinkUpdate, 64)
	onErr := func(err error) {
		select {
		case <-stop: // closed to stop: no news
		default:
			m.log.Warn("return device: link updates", "device", m.name, "err", err)
		}
	}
	err := netlink.LinkSubscribeWithOptions(updates, stop, netlink.LinkSubscribeOptions{
		Namespace: nlns.Subscription(m.ns), ErrorCallback: onErr})
	if err != nil {
		return nil, fmt.Errorf("subscribe to link changes: %w", err)
	}
	return updates, nil
}

// run sets the MTU again at each change of one of the interfaces, until done; a subscription
// that ends (a full socket buffer loses events) is replaced, and the MTU set anew, since
// changes may have been missed.
func (m *mtuFollower) run(updates chan netlink.LinkUpdate) {
	for {
		select {
		case <-m.done:
			close(m.stopSub)
			for range updates { // until netlink closes it
			}
			return
		case u, ok := <-updates:
			if ok && !slices.Contains(m.ifaces, u.Attrs().Name) {
				continue
			}
			if !ok {
				close(m.stopSub) // netlink's socket goes with it
				if updates, ok = nlfollow.Again(m.done, m.subscribe, func(err error) {
					m.log.Error("return device: link updates stopped; retrying", "device", m.name, "err", err)
				}); !ok {
					return
				}
			}
			if err := m.set(); err != nil {
				m.log.Error("return device: keep its MTU with the interfaces'", "device", m.name, "err", err)
			}
		}
	}
}

// set gives both ends of the pair the MTU the interfaces call for, where it differs.
func (m *mtuFollower) set() error {
	want := 0
	for _, name := range m.ifaces {
		l, err := m.h.LinkByName(name)
		var notFound netlink.LinkNotFoundError
		switch {
		case errors.As(err, &notFound):
			continue // not there (yet): attaching to it says so
		case err != nil:
			return fmt.Errorf("interface %q: %w", name, err)
		}
		want = max(want, l.Attrs().MTU)
	}
	if want == 0 {
		return nil
	}
	var ends []netlink.Link
	for _, name := range []string{m.name, Peer(m.name)} {
		l, err := m.h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		most, err := m.maxMTU(l.Attrs().Index)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		want = min(want, most)
		ends = append(ends, l)
	}
	for _, l := range ends {
		if l.Attrs().MTU == want {
			continue
		}
		if err := m.h.LinkSetMTU(l, want); err != nil {
			return fmt.Errorf("set the MTU of %s to %d: %w", l.Attrs().Name, want, err)
		}
		m.log.Info("return device MTU", "device", l.Attrs().Name, "mtu", want, "was", l.Attrs().MTU, "interfaces", m.ifaces)
	}
	return nil
}

// maxMTU is the largest MTU the link of index takes (IFLA_MAX_MTU), which netlink.Link
// does not carry.
func (m *mtuFollower) maxMTU(index int) (int, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_ACK)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: m.sock}
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(index)
	req.AddData(msg)
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
	if err != nil {
		return 0, fmt.Errorf("read its largest MTU: %w", err)
	}
	if len(msgs) != 1 || len(msgs[0]) < unix.SizeofIfInfomsg {
		return 0, fmt.Errorf("read its largest MTU: %d answers", len(msgs))
	}
	attrs, err := nl.ParseRouteAttr(msgs[0][unix.SizeofIfInfomsg:])
	if err != nil {
		return 0, fmt.Errorf("read its largest MTU: %w", err)
	}
	for _, a := range attrs {
		if a.Attr.Type == unix.IFLA_MAX_MTU && len(a.Value) == 4 {
			return int(nl.NativeEndian().Uint32(a.Value)), nil
		}
	}
	return 0, errors.New("read its largest MTU: the kernel gave none (IFLA_MAX_MTU)")
}
