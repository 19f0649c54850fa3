package daemon

import (
	"net"
	"net/netip"
	"testing"
)

func TestLocalAddrs(t *testing.T) {
	var l localAddrs
	if !l.has(netip.MustParseAddr("127.0.0.1")) {
		t.Error("127.0.0.1 is not local")
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range addrs {
		p := netip.MustParsePrefix(x.String())
		if !l.has(p.Addr()) {
			t.Errorf("%s (an interface address) is not local", p.Addr())
		}
	}
	if l.has(netip.MustParseAddr("192.0.2.254")) {
		t.Error("192.0.2.254, a documentation address, is local")
	}
}
