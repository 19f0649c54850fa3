package returndev

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/nlfollow"
	"github.com/xupf/xupf/internal/nlns"
)

// A veth is made with a 1500-byte MTU, and the kernel sends nothing larger into the device:
// a reply that came in by an interface of a larger MTU would be fragmented (without DF) or
// dropped, its sender answered ICMP fragmentation needed (with DF, as TCP sets it). So the
// pair takes the largest MTU of the interfaces the datapath is attached to, which every
// packet the kernel takes in fits, and keeps it as they change. But at most what each end
// takes: with an XDP program on the peer, a veth takes a frame of one page at most (about
// 3,500 bytes with 4 KiB pages), and the kernel says how much in the end's IFLA_MAX_MTU;
// beyond that a larger packet meets the same fragmentation or ICMP answer.

// FollowMTU gives the pair name and Peer(name) the MTU of the interfaces ifaces (the largest
// of those that exist, at most what either end takes) and keeps it in step with their
// changes, and with the pair's own (what resets it is undone), until stop is called. In the
// calling thread's network namespace; log receives what a later change could not set.
func FollowMTU(name string, ifaces []string, log *slog.Logger) (stop func(), err error) {
	m, err := newMTUFollower(name, ifaces, log)
	if err != nil {
		return nil, err
	}
	stopEvents, err := m.events().Start()
	if err != nil {
		m.close()
		return nil, fmt.Errorf("return device %q: %w", name, err)
	}
	return func() {
		stopEvents()
		m.close()
	}, nil
}

// mtuRetry is how long after a failed attempt to set the MTU it is tried again: the next
// event on an interface may be long in coming.
const mtuRetry = 2 * time.Second

// events sets the MTU again at each change of one of the interfaces or of the pair itself
// (an operator or a network manager setting the pair back to 1500 while the interfaces are
// larger is undone; set writes only what differs, so the events of its own writes end
// there), and every mtuRetry while the last attempt failed. A subscription that ends (a
// full socket buffer loses events) is replaced, and the MTU set anew.
func (m *mtuFollower) events() nlfollow.Events[netlink.LinkUpdate] {
	return nlfollow.Events[netlink.LinkUpdate]{
		Subscribe: m.subscribe,
		Wanted: func(u netlink.LinkUpdate) bool {
			name := u.Attrs().Name
			return name == m.name || name == Peer(m.name) || slices.Contains(m.ifaces, name)
		},
		Sync:  m.set,
		Retry: mtuRetry,
		SubscribeFailed: func(err error) {
			m.log.Error("return device: link updates stopped; retrying", "device", m.name, "err", err)
		},
		SyncFailed: func(err error) {
			m.log.Error("return device: keep its MTU with the interfaces'; retrying", "device", m.name, "err", err)
		},
	}
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
}

func newMTUFollower(name string, ifaces []string, log *slog.Logger) (*mtuFollower, error) {
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("return device %q: its network namespace: %w", name, err)
	}
	m := &mtuFollower{name: name, ifaces: slices.Clone(ifaces), log: log, ns: ns}
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

// subscribe subscribes to the namespace's link changes until stop is closed.
func (m *mtuFollower) subscribe(stop <-chan struct{}) (<-chan netlink.LinkUpdate, error) {
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
