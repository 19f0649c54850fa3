package datapath

import (
	"encoding/binary"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xupf/xupf/internal/nlfollow"
	"github.com/xupf/xupf/internal/nlns"
)

// The datapath drops a UE's packet that no route forwards (it would go to the UPF's
// own sockets). xupf_local_addrs, every IPv4 and broadcast address of the namespace Load runs
// in, names such a drop ue_to_upf rather than no_route; xupf_ue_allowed lists the services a UE
// may reach on the UPF nonetheless (ue_to_upf_allowed).

// UEService is a service on the UPF itself that UEs may reach through their tunnels: a local
// address, an IP protocol and, for protocols with ports, the destination port (0 otherwise).
type UEService struct {
	Addr     netip.Addr
	Protocol uint8
	Port     uint16
}

// setUEAllowed makes services the only ones UEs may reach on the UPF.
func (d *Datapath) setUEAllowed(services []UEService) error {
	if err := clearMap(d.objs.XupfUeAllowed); err != nil {
		return fmt.Errorf("clear ue_to_upf_allowed: %w", err)
	}
	for _, s := range services {
		if !s.Addr.Is4() {
			return fmt.Errorf("ue_to_upf_allowed %s: only IPv4 is supported", s.Addr)
		}
		k := xupfUeAllowedKey{Addr: addrBE(s.Addr), Proto: s.Protocol, Port: be16(s.Port)}
		if err := d.objs.XupfUeAllowed.Put(k, uint8(1)); err != nil {
			return fmt.Errorf("add ue_to_upf_allowed %s/%d port %d: %w", s.Addr, s.Protocol, s.Port, err)
		}
	}
	return nil
}

func be16(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// watchLocalAddrs fills xupf_local_addrs from the namespace of the calling thread and keeps
// it up to date from netlink address events until stop is called.
func (d *Datapath) watchLocalAddrs() (stop func(), err error) {
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("local addresses: %w", err)
	}
	h, err := nlns.Handle(ns)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("local addresses: %w", err)
	}
	d.addrs.sync = d.syncAddrsWith(h)
	stopEvents, err := d.localAddrEvents(ns, h).Start()
	if err != nil {
		h.Close()
		ns.Close()
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			stopEvents()
			h.Close()
			ns.Close()
		})
	}, nil
}

// localAddrEvents resynchronises the table on every address event, and every localAddrsRetry
// while the last resynchronisation failed (a quiet host may send no event for long); when the
// subscription fails (a full socket buffer, say) it subscribes again and resynchronises, as
// events may have been lost.
func (d *Datapath) localAddrEvents(ns netns.NsHandle, h *netlink.Handle) nlfollow.Events[netlink.AddrUpdate] {
	return nlfollow.Events[netlink.AddrUpdate]{
		Subscribe: func(stop <-chan struct{}) (<-chan netlink.AddrUpdate, error) { return d.subscribeAddrs(ns, stop) },
		Sync:      d.syncAddrsWith(h),
		Retry:     localAddrsRetry,
		SubscribeFailed: func(err error) {
			d.log.Error("local address updates stopped; retrying", "err", err)
		},
		SyncFailed: func(err error) {
			d.log.Error("update the UPF's local addresses in the datapath; retrying", "err", err)
		},
	}
}

func (d *Datapath) subscribeAddrs(ns netns.NsHandle, stop <-chan struct{}) (<-chan netlink.AddrUpdate, error) {
	ch := make(chan netlink.AddrUpdate, 64)
	err := netlink.AddrSubscribeWithOptions(ch, stop, netlink.AddrSubscribeOptions{
		Namespace: nlns.Subscription(ns),
		ErrorCallback: func(err error) {
			select {
			case <-stop: // the socket was closed to stop: no news
			default:
				d.log.Warn("local address updates", "err", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("local addresses: subscribe to netlink: %w", err)
	}
	return ch, nil
}

// maxOwnAddrs is XUPF_MAX_OWN_ADDRS, the room of xupf_own_addrs: the UPF's own unicast
// addresses (loopback's left out), the attached interfaces' first (where the replies the
// kernel translates back arrive), then in the kernel's order (by interface), up to that many.
// A packet to one further on costs what it did without the array.
const maxOwnAddrs = len(xupfOwnAddrs{}.Addr)

// addrSync syncs xupf_local_addrs and xupf_own_addrs on demand: on netlink's address events,
// and when Attach adds an interface whose addresses come first.
type addrSync struct {
	mu   sync.Mutex   // one sync at a time
	sync func() error // syncAddrsWith the handle of the namespace Load ran in
	cut  string       // the addresses xupf_own_addrs had no room for, as last logged
}

// syncAddrsWith is syncLocalAddrs through h, one sync at a time.
func (d *Datapath) syncAddrsWith(h *netlink.Handle) func() error {
	return func() error {
		d.addrs.mu.Lock()
		defer d.addrs.mu.Unlock()
		return d.syncLocalAddrs(h)
	}
}

// resyncAddrs syncs the local addresses again after the attached interfaces changed, with
// kernel_n6 (without it the program does not read xupf_own_addrs). A failure is logged: the
// next address event or retry syncs again.
func (d *Datapath) resyncAddrs() {
	if d.addrs.sync == nil || !d.opts.FlowCache.KernelN6.Any() {
		return
	}
	if err := d.addrs.sync(); err != nil {
		d.log.Warn("update the UPF's local addresses in the datapath after an attachment changed", "err", err)
	}
}

// localAddrsRetry is how long after a failed update of xupf_local_addrs it is tried again.
const localAddrsRetry = 2 * time.Second

// IsLocal reports whether a is one of the UPF's own addresses (or broadcast addresses), as
// xupf_local_addrs holds them. It reads the copy syncLocalAddrs keeps rather than the map: a
// map lookup is a system call in every Session Establishment. While the table is not known
// (before its first update), every address counts as local: a caller refuses rather than lets
// a session claim the UPF's address.
func (d *Datapath) IsLocal(a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	local := d.localAddrs.Load()
	return local == nil || (*local)[addrBE(a)]
}

// syncLocalAddrs makes xupf_local_addrs the namespace's IPv4 addresses and broadcast addresses.
func (d *Datapath) syncLocalAddrs(h *netlink.Handle) error {
	addrs, err := h.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("list local addresses: %w", err)
	}
	attached, err := d.arrivals()
	if err != nil {
		return err
	}
	want := map[uint32]bool{}
	var local, first, rest []netip.Addr
	for _, a := range addrs {
		for i, ip := range []net.IP{a.IP, a.Broadcast} {
			if v, ok := netip.AddrFromSlice(ip.To4()); ok && !v.IsUnspecified() {
				want[addrBE(v)] = true
				local = append(local, v)
				switch {
				case i != 0 || v.IsLoopback(): // broadcast, loopback: no reply comes to it
				case slices.Contains(attached, uint32(a.LinkIndex)):
					first = append(first, v)
				default:
					rest = append(rest, v)
				}
			}
		}
	}
	// Before IsLocal's copy: an address the host gave up may be a UE's once that copy is
	// updated, and must no longer be taken for the UPF's by then.
	if err := d.objs.XupfOwnAddrs.Put(uint32(0), d.ownAddrs(append(first, rest...))); err != nil {
		return fmt.Errorf("update xupf_own_addrs: %w", err)
	}
	if err := setKeys(d.objs.XupfLocalAddrs, want); err != nil {
		// setKeys adds before it removes: the map now holds at most the earlier keys and
		// the wanted ones. Their union keeps IsLocal conservative without refusing every
		// address until the next update.
		if prev := d.localAddrs.Load(); prev != nil {
			union := maps.Clone(*prev)
			maps.Copy(union, want)
			d.localAddrs.Store(&union)
		}
		return err
	}
	d.localAddrs.Store(&want)
	// The router never forwards to them either: in private mode no local table says so.
	return d.router.SetLocal(local)
}

// ownAddrs is xupf_own_addrs' value for addrs, the first maxOwnAddrs of them. With kernel_n6
// it logs the others when they change: the replies to them pay the UE lookup, and one may be
// the address the kernel translates to.
func (d *Datapath) ownAddrs(addrs []netip.Addr) xupfOwnAddrs {
	var own xupfOwnAddrs
	for _, a := range addrs[:min(len(addrs), maxOwnAddrs)] {
		own.Addr[own.N] = addrBE(a)
		own.N++
	}
	cut := fmt.Sprint(addrs[own.N:])
	if len(addrs) > maxOwnAddrs && cut != d.addrs.cut && d.opts.FlowCache.KernelN6.Any() {
		d.log.Warn("xupf_own_addrs has no room for all of the UPF's own addresses (the attached interfaces' come "+
			"first): packets to the others, the replies the kernel translates back to one of them with kernel_n6, "+
			"pay a session lookup first", "room", maxOwnAddrs, "compared", addrs[:own.N], "left_out", addrs[own.N:])
	}
	d.addrs.cut = cut
	return own
}
