package daemon

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// localAddrRefresh is how old the list of local addresses may be: an address added to an
// interface counts as the UPF's within this time.
const localAddrRefresh = time.Second

// localAddrs tells whether an address is one of this host's, on any interface of xupfd's
// network namespace, from the kernel's list read again when it is older than
// localAddrRefresh (session establishments come thousands a second).
type localAddrs struct {
	mu   sync.Mutex
	read time.Time
	set  map[netip.Addr]bool
}

// has reports whether a is a local address. When the list cannot be read, every address
// counts as local: a session is refused rather than let claim the UPF's own address.
func (l *localAddrs) has(a netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); l.set == nil || now.Sub(l.read) > localAddrRefresh {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return true
		}
		l.set, l.read = make(map[netip.Addr]bool, len(addrs)), now
		for _, x := range addrs {
			if p, err := netip.ParsePrefix(x.String()); err == nil {
				l.set[p.Addr().Unmap()] = true
			}
		}
	}
	return l.set[a.Unmap()]
}
