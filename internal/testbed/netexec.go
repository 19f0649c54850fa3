package testbed

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Command returns `ip netns exec <ns> name args...`: a program run inside namespace ns (one of
// GNBNS, UPFNS, DNNS). Go code uses Do instead.
func (t *Topology) Command(ctx context.Context, ns, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// Run runs Command and returns its standard output; on failure the error carries its standard
// error.
func (t *Topology) Run(ctx context.Context, ns, name string, args ...string) (string, error) {
	cmd := t.Command(ctx, ns, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("testbed: %s %s in %s: %w: %s", name, strings.Join(args, " "), ns,
			err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// TBF describes a token bucket filter qdisc (tc-tbf(8)): Rate in bit/s, Burst (the bucket) in
// bytes, Latency the longest a packet may wait in its queue, in milliseconds.
type TBF struct {
	Rate      uint64
	Burst     uint32
	LatencyMS uint32
}

// AddTBF installs t as the root qdisc of dev in namespace ns, replacing what was there. It
// shapes what dev sends: on dn0 the downlink before the UPF, on a UE's TUN device its uplink.
// The rate counts what the qdisc sees, link-layer header included (14 bytes on dn0, none on a
// TUN device).
func (t *Topology) AddTBF(ctx context.Context, ns, dev string, tbf TBF) error {
	_, err := t.Run(ctx, ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
		"rate", strconv.FormatUint(tbf.Rate, 10)+"bit",
		"burst", strconv.FormatUint(uint64(tbf.Burst), 10),
		"latency", strconv.FormatUint(uint64(tbf.LatencyMS), 10)+"ms")
	return err
}

// DelRootQdisc removes the root qdisc of dev in namespace ns (back to the default).
func (t *Topology) DelRootQdisc(ctx context.Context, ns, dev string) error {
	_, err := t.Run(ctx, ns, "tc", "qdisc", "del", "dev", dev, "root")
	return err
}

// ChecksumErrors returns the InCsumErrors counters of IPv4 UDP and TCP in namespace ns: the
// packets its stack dropped for a bad checksum. A rise means that someone on the way (a TUN
// relay, an XDP redirect of a packet with a partial checksum, the UPF) broke one.
func (t *Topology) ChecksumErrors(ns string) (udp, tcp uint64, err error) {
	stats, err := t.netStats(ns, "snmp")
	if err != nil {
		return 0, 0, fmt.Errorf("testbed: checksum counters in %s: %w", ns, err)
	}
	return stats["Udp"]["InCsumErrors"], stats["Tcp"]["InCsumErrors"], nil
}

// SynRetransmits returns how many TCP SYNs and SYN-ACKs namespace ns sent again
// (TcpExt TCPSynRetrans): a rise means that a handshake's packet or its answer was lost.
func (t *Topology) SynRetransmits(ns string) (uint64, error) {
	stats, err := t.netStats(ns, "netstat")
	if err != nil {
		return 0, fmt.Errorf("testbed: TCP counters in %s: %w", ns, err)
	}
	return stats["TcpExt"]["TCPSynRetrans"], nil
}

// netStats reads /proc/net/<file> (snmp or netstat) of namespace ns.
func (t *Topology) netStats(ns, file string) (stats map[string]map[string]uint64, err error) {
	err = t.Do(ns, func() error {
		// thread-self: /proc/net follows the thread group leader's namespace, not this
		// thread's.
		f, err := os.Open("/proc/thread-self/net/" + file)
		if err != nil {
			return err
		}
		defer f.Close()
		stats, err = parseSNMP(f)
		return err
	})
	return stats, err
}

// parseSNMP reads /proc/net/snmp or netstat: per protocol a line of names and a line of values.
func parseSNMP(f *os.File) (map[string]map[string]uint64, error) {
	out := make(map[string]map[string]uint64)
	sc := bufio.NewScanner(f)
	var header string // the protocol whose names line was the last line read
	var names []string
	for sc.Scan() {
		proto, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if proto != header {
			header, names = proto, fields
			continue
		}
		m := make(map[string]uint64, len(fields))
		for i, v := range fields {
			if i < len(names) {
				// Some counters (Tcp MaxConn) are signed; they do not matter here.
				n, _ := strconv.ParseUint(v, 10, 64)
				m[names[i]] = n
			}
		}
		out[proto] = m
		header = ""
	}
	return out, sc.Err()
}

// listening reports whether a TCP socket listens on port in the calling thread's namespace
// (call it inside Do).
func listening(port uint16) (bool, error) {
	want := fmt.Sprintf(":%04X", port)
	for _, file := range []string{"/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"} {
		data, err := os.ReadFile(file)
		if os.IsNotExist(err) {
			continue // no IPv6
		}
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st ...; st 0A is LISTEN.
			if len(f) > 3 && strings.HasSuffix(f[1], want) && f[3] == "0A" {
				return true, nil
			}
		}
	}
	return false, nil
}

// Masquerade has nftables in the upf namespace masquerade traffic from src out of n6 to n6's
// address, as an operator does to reach the Internet from the UE pools (needs nft).
func (t *Topology) Masquerade(ctx context.Context, src netip.Prefix) error {
	_, err := t.Run(ctx, t.UPFNS, "nft", "add table ip nat; "+
		"add chain ip nat post { type nat hook postrouting priority srcnat; }; "+
		"add rule ip nat post oifname "+N6If+" ip saddr "+src.String()+" masquerade")
	return err
}
