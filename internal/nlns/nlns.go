// Package nlns opens netlink sockets in a network namespace the way xupfd can: in its own
// namespace without setns (which takes CAP_SYS_ADMIN, a capability xupfd runs without), in
// another one (tests load the datapath from a thread in a namespace of their own) with it.
package nlns

import (
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// InProcess reports whether ns is the process's own network namespace (its main thread's,
// where xupfd runs).
func InProcess(ns netns.NsHandle) bool {
	self, err := netns.GetFromPath("/proc/self/ns/net")
	if err != nil {
		return false
	}
	defer self.Close()
	return ns.Equal(self)
}

// Handle returns a netlink handle in ns.
func Handle(ns netns.NsHandle) (*netlink.Handle, error) {
	if InProcess(ns) {
		return netlink.NewHandle()
	}
	return netlink.NewHandleAt(ns)
}

// Subscription is the Namespace option of netlink's Subscribe functions for ns: nil (the
// calling thread's, which is the process's) when ns is the process's own.
func Subscription(ns netns.NsHandle) *netns.NsHandle {
	if InProcess(ns) {
		return nil
	}
	return &ns
}
