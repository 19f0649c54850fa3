package api

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// collector turns the backend's counters into Prometheus metrics at scrape time. Reading the
// datapath on each scrape (rather than mirroring it into prometheus.Counters on a timer)
// keeps the exported values exactly the datapath's, with no staleness and no second copy.
type collector struct {
	backend  Backend
	packets  *prometheus.Desc
	drops    *prometheus.Desc
	sessions *prometheus.Desc
}

func newCollector(b Backend) *collector {
	return &collector{
		backend: b,
		packets: prometheus.NewDesc("xupf_datapath_packets_total",
			"Packets the XDP datapath counted, by counter, summed over CPUs.",
			[]string{"counter"}, nil),
		drops: prometheus.NewDesc("xupf_datapath_drops_total",
			"Packets the XDP datapath dropped, by drop reason, summed over CPUs.",
			[]string{"reason"}, nil),
		sessions: prometheus.NewDesc("xupf_sessions",
			"PDU sessions installed in the datapath.",
			nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.packets
	ch <- c.drops
	ch <- c.sessions
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(c.backend.Status().Sessions))

	st, err := c.backend.Stats()
	if err != nil {
		err = fmt.Errorf("reading datapath stats: %w", err)
		ch <- prometheus.NewInvalidMetric(c.packets, err)
		return
	}
	for name, v := range st.Counters {
		ch <- prometheus.MustNewConstMetric(c.packets, prometheus.CounterValue, float64(v), name)
	}
	for name, v := range st.Drops {
		ch <- prometheus.MustNewConstMetric(c.drops, prometheus.CounterValue, float64(v), name)
	}
}
