package testbed

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// UDPStream is a paced stream of UDP datagrams, to measure what a rate limit lets through.
type UDPStream struct {
	// Rate is the offered rate in bit/s, counting whole IP packets (header included), the way
	// an MBR is counted.
	Rate float64
	// Size is the size of each IP packet in bytes (20 + 8 + payload, at least 44); 0 means
	// 1228 (1200 bytes of payload), below UEMTU.
	Size int
	// Duration is how long to send.
	Duration time.Duration
}

// RateResult is what MeasureUDP measured. Bytes are of IP packets.
type RateResult struct {
	Sent, Received           int
	SentBytes, ReceivedBytes uint64
	SendErrors               int // datagrams the sending socket refused (ENOBUFS)
	// Offered is the rate the sender achieved, in bit/s.
	Offered float64
	// Delivered is the rate that arrived, in bit/s: the bytes received after the first
	// datagram over the time from its arrival to the last one's. A token bucket's initial
	// burst adds Burst/Window to it.
	Delivered float64
	// Window is the time from the first arrival to the last.
	Window time.Duration
}

func (r RateResult) String() string {
	return fmt.Sprintf("offered %.2f Mbit/s (%d datagrams, %d refused), delivered %.2f Mbit/s (%d datagrams, %d bytes over %s)",
		r.Offered/1e6, r.Sent, r.SendErrors, r.Delivered/1e6, r.Received, r.ReceivedBytes, r.Window.Round(time.Millisecond))
}

const (
	defaultStreamSize = 20 + 8 + 1200
	streamHeader      = 16 // run id, sequence number
	// streamQuiet is how long the receiver waits for stragglers after the sender has finished.
	streamQuiet = 300 * time.Millisecond
)

// MeasureUDP sends st from src (a local address in namespace srcNS) to dst (in dstNS), paced
// to st.Rate, and measures on dst what arrives. Datagrams of other senders are ignored.
func (t *Topology) MeasureUDP(srcNS string, src netip.AddrPort, dstNS string, dst netip.AddrPort, st UDPStream) (RateResult, error) {
	size := st.Size
	if size == 0 {
		size = defaultStreamSize
	}
	if size < 28+streamHeader || st.Rate <= 0 || st.Duration <= 0 {
		return RateResult{}, fmt.Errorf("testbed: stream %+v: want a size of at least %d, a rate and a duration", st, 28+streamHeader)
	}
	rx, err := t.listenUDP(dstNS, dst)
	if err != nil {
		return RateResult{}, err
	}
	defer rx.Close()
	var tx *net.UDPConn
	if err := t.Do(srcNS, func() error {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(src))
		tx = c
		return err
	}); err != nil {
		return RateResult{}, fmt.Errorf("testbed: udp socket on %s in %s: %w", src, srcNS, err)
	}
	defer tx.Close()
	if err := setSockopts(tx, func(fd int) error {
		return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, rcvBuf)
	}); err != nil {
		return RateResult{}, fmt.Errorf("testbed: SO_SNDBUFFORCE: %w", err)
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return RateResult{}, err
	}

	var (
		res      RateResult
		sendDone = make(chan struct{})
		recvErr  error
		wg       sync.WaitGroup
	)
	wg.Go(func() { recvErr = receiveStream(rx, id, sendDone, st.Duration+5*time.Second, &res) })

	payload := make([]byte, size-28)
	copy(payload, id[:])
	interval := time.Duration(float64(size*8) / st.Rate * float64(time.Second))
	start := time.Now()
	end := start.Add(st.Duration)
	var sendErr error
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * interval)
		if !due.Before(end) {
			break
		}
		if d := time.Until(due); d > 0 {
			time.Sleep(d) // coarse; the schedule catches up with a few datagrams in a row
		}
		binary.BigEndian.PutUint64(payload[8:], uint64(i))
		if _, err := tx.WriteToUDPAddrPort(payload, dst); err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				res.SendErrors++
				continue
			}
			sendErr = fmt.Errorf("testbed: send datagram %d to %s: %w", i, dst, err)
			break
		}
		res.Sent++
	}
	elapsed := time.Since(start)
	close(sendDone)
	wg.Wait()
	res.SentBytes = uint64(res.Sent) * uint64(size)
	res.Offered = float64(res.SentBytes*8) / elapsed.Seconds()
	return res, errors.Join(sendErr, recvErr)
}

// receiveStream counts the datagrams of stream id on conn until the sender is done and
// nothing arrived for streamQuiet, or until limit.
func receiveStream(conn *net.UDPConn, id [8]byte, sendDone <-chan struct{}, limit time.Duration, res *RateResult) error {
	hard := time.Now().Add(limit)
	buf := make([]byte, 65536)
	var first, last time.Time
	var firstSize int
loop:
	for time.Now().Before(hard) {
		if err := conn.SetReadDeadline(time.Now().Add(streamQuiet)); err != nil {
			return err
		}
		n, err := conn.Read(buf)
		now := time.Now()
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			select {
			case <-sendDone:
				break loop
			default:
			}
		case err != nil:
			return fmt.Errorf("testbed: receive the stream: %w", err)
		case n >= streamHeader && [8]byte(buf[:8]) == id:
			if res.Received == 0 {
				first, firstSize = now, 28+n
			}
			last = now
			res.Received++
			res.ReceivedBytes += uint64(28 + n)
		}
	}
	res.Window = last.Sub(first)
	if res.Received > 1 && res.Window > 0 {
		res.Delivered = float64((res.ReceivedBytes-uint64(firstSize))*8) / res.Window.Seconds()
	}
	return nil
}

// MeasureUplinkUDP measures st from the UE (UE:40000, through its tunnel) to the DN host
// (10.100.6.2:5001).
func (u *UE) MeasureUplinkUDP(st UDPStream) (RateResult, error) {
	return u.t.MeasureUDP(u.t.GNBNS, netip.AddrPortFrom(u.Session.UE, UESrcPort),
		u.t.DNNS, netip.AddrPortFrom(DNAddr, DNPort), st)
}

// MeasureDownlinkUDP measures st from the DN host (10.100.6.2:5002) to the UE (UE:6000,
// through its tunnel).
func (u *UE) MeasureDownlinkUDP(st UDPStream) (RateResult, error) {
	return u.t.MeasureUDP(u.t.DNNS, netip.AddrPortFrom(DNAddr, DNSrcPort),
		u.t.GNBNS, netip.AddrPortFrom(u.Session.UE, UEPort), st)
}
