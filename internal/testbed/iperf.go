package testbed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Iperf3Port is the port StartIperf3Server listens on unless told otherwise: iperf3's own.
const Iperf3Port = 5201

// Iperf3Path returns the iperf3 binary, or an error that says how to install it.
func Iperf3Path() (string, error) {
	p, err := exec.LookPath("iperf3")
	if err != nil {
		return "", fmt.Errorf("testbed: iperf3 is not installed (%w): run make deps", err)
	}
	return p, nil
}

// Iperf3Server is `iperf3 -s` running in one of the topology's namespaces. It serves one test
// at a time, as many as asked, until Close.
type Iperf3Server struct {
	Addr netip.AddrPort

	cmd     *exec.Cmd
	log     *tailBuffer
	done    chan struct{}
	waitErr error
}

// StartIperf3Server runs `iperf3 -s -B addr -p port` in namespace ns and returns once it
// listens.
func (t *Topology) StartIperf3Server(ns string, addr netip.AddrPort) (*Iperf3Server, error) {
	bin, err := Iperf3Path()
	if err != nil {
		return nil, err
	}
	s := &Iperf3Server{Addr: addr, log: newTailBuffer(4096), done: make(chan struct{})}
	s.cmd = exec.Command("ip", "netns", "exec", ns, bin, "-s", "-B", addr.Addr().String(),
		"-p", strconv.Itoa(int(addr.Port())))
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("testbed: start iperf3 server in %s: %w", ns, err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var up bool
		if err := t.Do(ns, func() error {
			var err error
			up, err = listening(addr.Port())
			return err
		}); err != nil {
			return nil, errors.Join(fmt.Errorf("testbed: iperf3 server: %w", err), s.Close())
		}
		if up {
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("testbed: iperf3 server in %s exited: %v\n%s", ns, s.waitErr, s.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(fmt.Errorf("testbed: iperf3 server in %s does not listen on %s after 5s\n%s", ns, addr, s.Log()), s.Close())
		}
	}
}

// Log returns the last lines the server wrote.
func (s *Iperf3Server) Log() string { return s.log.String() }

// Close stops the server (SIGTERM, then SIGKILL after 5 s).
func (s *Iperf3Server) Close() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("testbed: stop iperf3 server: %w", err)
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(5 * time.Second):
	}
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("testbed: kill iperf3 server: %w", err)
	}
	<-s.done
	return nil
}

// Iperf3Options is one iperf3 client run.
type Iperf3Options struct {
	// Server is the iperf3 server's address and port.
	Server netip.AddrPort
	// Bind is the client's source address (-B): a UE's address, so that its packets take the
	// UE's tunnel.
	Bind netip.Addr
	// Reverse makes the server send (-R): the downlink, when the server is on the DN host.
	Reverse bool
	// Duration is the measured time (-t); Omit is the time before it that is left out of the
	// results (-O): TCP's slow start, and a token bucket's initial burst.
	Duration, Omit time.Duration
	// UDP sends UDP (-u) at Bitrate bit/s instead of TCP. For TCP a Bitrate other than 0 paces
	// the sender.
	UDP     bool
	Bitrate uint64
	// Length is the size of the writes (-l); 0 leaves iperf3's default.
	Length int
	// Congestion is the TCP congestion control algorithm (-C), e.g. "cubic" or "bbr"; empty
	// leaves the namespace's default (net.ipv4.tcp_congestion_control, inherited from the
	// host's).
	Congestion string
}

// Iperf3Result is what a run measured. Rates and bytes are of application data (TCP or UDP
// payload), so they fall short of the IP rate by the headers: with the UE MTU (1456) a TCP
// segment with timestamps carries 1404 bytes of 1456, 96.4%.
type Iperf3Result struct {
	// SentBps and ReceivedBps are the sender's and the receiver's rates in bit/s over the
	// measured time. The receiver's is what went through.
	SentBps, ReceivedBps     float64
	SentBytes, ReceivedBytes uint64
	Seconds                  float64 // the receiver's measured time
	Retransmits              int     // TCP retransmissions by the sender
	LostPercent              float64 // UDP: datagrams lost
	JSON                     []byte  // iperf3's whole report
}

// iperf3Report is the part of `iperf3 -J` the result needs.
type iperf3Report struct {
	End struct {
		SumSent     iperf3Sum `json:"sum_sent"`
		SumReceived iperf3Sum `json:"sum_received"`
		Sum         iperf3Sum `json:"sum"` // UDP
	} `json:"end"`
	Error string `json:"error"`
}

type iperf3Sum struct {
	Seconds       float64 `json:"seconds"`
	Bytes         uint64  `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
	Retransmits   int     `json:"retransmits"`
	LostPercent   float64 `json:"lost_percent"`
}

// RunIperf3 runs an iperf3 client in namespace ns with JSON output and parses its report.
func (t *Topology) RunIperf3(ctx context.Context, ns string, o Iperf3Options) (Iperf3Result, error) {
	bin, err := Iperf3Path()
	if err != nil {
		return Iperf3Result{}, err
	}
	if o.Duration <= 0 {
		o.Duration = 5 * time.Second
	}
	args := []string{"-c", o.Server.Addr().String(), "-p", strconv.Itoa(int(o.Server.Port())), "-J",
		"-t", secs(o.Duration), "--connect-timeout", "3000"}
	if o.Omit > 0 {
		args = append(args, "-O", secs(o.Omit))
	}
	if o.Bind.IsValid() {
		args = append(args, "-B", o.Bind.String())
	}
	if o.Reverse {
		args = append(args, "-R")
	}
	if o.UDP {
		args = append(args, "-u")
	}
	if o.Bitrate > 0 || o.UDP {
		args = append(args, "-b", strconv.FormatUint(o.Bitrate, 10))
	}
	if o.Length > 0 {
		args = append(args, "-l", strconv.Itoa(o.Length))
	}
	if o.Congestion != "" {
		args = append(args, "-C", o.Congestion)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Duration+o.Omit+20*time.Second)
	defer cancel()
	cmd := t.Command(ctx, ns, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var rep iperf3Report
	jsonErr := json.Unmarshal(stdout.Bytes(), &rep)
	what := fmt.Sprintf("iperf3 %s in %s", strings.Join(args, " "), ns)
	switch {
	case rep.Error != "":
		return Iperf3Result{JSON: stdout.Bytes()}, fmt.Errorf("testbed: %s: %s", what, rep.Error)
	case runErr != nil:
		return Iperf3Result{JSON: stdout.Bytes()}, fmt.Errorf("testbed: %s: %w: %s", what, runErr, strings.TrimSpace(stderr.String()))
	case jsonErr != nil:
		return Iperf3Result{JSON: stdout.Bytes()}, fmt.Errorf("testbed: %s: decode its report: %w", what, jsonErr)
	}
	r := Iperf3Result{JSON: stdout.Bytes()}
	sent, recv := rep.End.SumSent, rep.End.SumReceived
	if o.UDP && recv.Seconds == 0 {
		// Older iperf3 versions report UDP in one sum, from the receiver's side.
		sent, recv = rep.End.Sum, rep.End.Sum
	}
	r.SentBps, r.SentBytes, r.Retransmits = sent.BitsPerSecond, sent.Bytes, sent.Retransmits
	r.ReceivedBps, r.ReceivedBytes, r.Seconds = recv.BitsPerSecond, recv.Bytes, recv.Seconds
	r.LostPercent = rep.End.Sum.LostPercent
	if r.Seconds == 0 {
		return r, fmt.Errorf("testbed: %s: the report has no receiver summary", what)
	}
	return r, nil
}

// secs is d in whole seconds, rounded up: iperf3 takes no fractions.
func secs(d time.Duration) string {
	return strconv.Itoa(int(math.Ceil(d.Seconds())))
}

// Iperf3 runs an iperf3 client on the UE (bound to its address, in the gnb namespace) against
// o.Server: the uplink, or with o.Reverse the downlink, of the UE's session.
// o.Bind is set to the UE's address.
func (u *UE) Iperf3(ctx context.Context, o Iperf3Options) (Iperf3Result, error) {
	o.Bind = u.Session.UE
	return u.t.RunIperf3(ctx, u.t.GNBNS, o)
}
