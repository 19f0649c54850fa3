package sockbuf

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestReceivePastRmemMax(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: CAP_NET_ADMIN forces the buffer past net.core.rmem_max")
	}
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	max, err := os.ReadFile("/proc/sys/net/core/rmem_max")
	if err != nil {
		t.Fatal(err)
	}
	// Ask for more than rmem_max: only the forced option gets it.
	rmemMax, err := strconv.Atoi(strings.TrimSpace(string(max)))
	if err != nil {
		t.Fatal(err)
	}
	want := 2 * rmemMax
	got, err := Receive(conn, want)
	if err != nil {
		t.Fatal(err)
	}
	if got != 2*want { // the kernel reports twice the size set
		t.Fatalf("receive buffer %d bytes, want %d (twice %d)", got, 2*want, want)
	}
}
