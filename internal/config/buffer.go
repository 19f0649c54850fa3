package config

import (
	"time"

	"gopkg.in/yaml.v3"
)

// buffering checks the bounds of buffering.
func (v *validator) buffering(raw *rawConfig) {
	for _, b := range []struct {
		node   *yaml.Node
		name   string
		lo, hi uint64
		dst    *int
		what   string
	}{
		{&raw.BufPackets, "buffer_max_packets_per_session", 1, MaxBufferMaxPacketsPerSession, &v.cfg.BufferMaxPacketsPerSession, "packets"},
		{&raw.BufBytes, "buffer_max_bytes_per_session", 4096, MaxBufferMaxBytesPerSession, &v.cfg.BufferMaxBytesPerSession, "bytes"},
		{&raw.BufTotal, "buffer_max_bytes", 4096, MaxBufferMaxBytes, &v.cfg.BufferMaxBytes, "bytes"},
	} {
		n, present, err := intNode(b.node, b.lo, b.hi)
		switch {
		case err != nil:
			v.addf("%s: %w; use %d to %d %s", b.name, err, b.lo, b.hi, b.what)
		case present:
			*b.dst = int(n)
		}
	}
	const durationRange = `use a duration from 1s to 1h, e.g. "30s"`
	if d, err := time.ParseDuration(raw.BufDuration); err != nil {
		v.addf("buffer_max_duration: %q is not a duration (a number with a unit: s, m); %s", raw.BufDuration, durationRange)
	} else if d < time.Second || d > MaxBufferMaxDuration {
		v.addf("buffer_max_duration: %s is out of range; %s", raw.BufDuration, durationRange)
	} else {
		v.cfg.BufferMaxDuration = d
	}
}
