package api

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// collector turns the backend's counters into Prometheus metrics at scrape time. Reading the
// datapath on each scrape (rather than mirroring it into prometheus.Counters on a timer)
// keeps the exported values exactly the datapath's, with no staleness and no second copy.
type collector struct {
	backend  Backend
	packets  *prometheus.Desc
	drops    *prometheus.Desc
	pfcpDrop *prometheus.Desc
	reports  *prometheus.Desc
	gtpu     *prometheus.Desc
	buffer   *prometheus.Desc
	sessions *prometheus.Desc
	assocs   *prometheus.Desc
	clsPkts  *prometheus.Desc
	clsBytes *prometheus.Desc
	polPkts  *prometheus.Desc
	polBytes *prometheus.Desc
	flows    *prometheus.Desc
	evicted  *prometheus.Desc
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
		pfcpDrop: prometheus.NewDesc("xupf_pfcp_drops_total",
			"PFCP datagrams left unanswered, by reason.",
			[]string{"reason"}, nil),
		reports: prometheus.NewDesc("xupf_pfcp_reports_total",
			"Session Report Requests sent to SMFs, by outcome.",
			[]string{"outcome"}, nil),
		gtpu: prometheus.NewDesc("xupf_gtpu_signalling_total",
			"GTP-U signalling xupfd received and sent itself (Error Indication, End Marker), by event.",
			[]string{"event"}, nil),
		buffer: prometheus.NewDesc("xupf_buffer_packets_total",
			"What became of the packets buffering FARs handed to xupfd, by outcome.",
			[]string{"outcome"}, nil),
		sessions: prometheus.NewDesc("xupf_sessions",
			"PDU sessions installed in the datapath, static and PFCP ones.",
			nil, nil),
		assocs: prometheus.NewDesc("xupf_pfcp_associations",
			"PFCP associations established with SMFs.",
			nil, nil),
		clsPkts: prometheus.NewDesc("xupf_class_packets_total",
			"Packets the traffic classifier matched to a class, by class id, summed over CPUs.",
			[]string{"class"}, nil),
		clsBytes: prometheus.NewDesc("xupf_class_bytes_total",
			"Bytes of the packets the traffic classifier matched to a class, by class id, summed over CPUs.",
			[]string{"class"}, nil),
		polPkts: prometheus.NewDesc("xupf_policer_packets_total",
			"Packets the policer let through (verdict passed) or dropped (verdict dropped), by contract: "+
				"its class id, 0 for the default contract. Summed over CPUs.",
			[]string{"class", "verdict"}, nil),
		polBytes: prometheus.NewDesc("xupf_policer_bytes_total",
			"Bytes of the packets the policer let through or dropped, by contract and verdict, summed over CPUs.",
			[]string{"class", "verdict"}, nil),
		flows: prometheus.NewDesc("xupf_flow_cache_entries",
			"Flows in the flow cache; its hits and misses are xupf_datapath_packets_total{counter=\"flow_hit\"} and {counter=\"flow_miss\"}.",
			nil, nil),
		evicted: prometheus.NewDesc("xupf_flow_cache_evictions_total",
			"Flows the daemon removed from the flow cache, by reason: aged, flushed, invalidated.",
			[]string{"reason"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.packets
	ch <- c.drops
	ch <- c.pfcpDrop
	ch <- c.reports
	ch <- c.gtpu
	ch <- c.buffer
	ch <- c.sessions
	ch <- c.assocs
	ch <- c.clsPkts
	ch <- c.clsBytes
	ch <- c.polPkts
	ch <- c.polBytes
	ch <- c.flows
	ch <- c.evicted
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	status := c.backend.Status()
	ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(status.Sessions))
	ch <- prometheus.MustNewConstMetric(c.assocs, prometheus.GaugeValue, float64(status.PFCPAssociations))

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
	for name, v := range st.PFCPDrops {
		ch <- prometheus.MustNewConstMetric(c.pfcpDrop, prometheus.CounterValue, float64(v), name)
	}
	for outcome, v := range st.PFCPReports {
		ch <- prometheus.MustNewConstMetric(c.reports, prometheus.CounterValue, float64(v), outcome)
	}
	for event, v := range st.GTPU {
		ch <- prometheus.MustNewConstMetric(c.gtpu, prometheus.CounterValue, float64(v), event)
	}
	for outcome, v := range st.Buffer {
		ch <- prometheus.MustNewConstMetric(c.buffer, prometheus.CounterValue, float64(v), outcome)
	}
	if fc := st.FlowCache; fc != nil {
		ch <- prometheus.MustNewConstMetric(c.flows, prometheus.GaugeValue, float64(fc.Entries))
		for reason, v := range fc.Evicted {
			ch <- prometheus.MustNewConstMetric(c.evicted, prometheus.CounterValue, float64(v), reason)
		}
	}

	c.collectClasses(ch)
	c.collectContracts(ch)
}

func (c *collector) collectClasses(ch chan<- prometheus.Metric) {
	classes, err := c.backend.Classes()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.clsPkts, fmt.Errorf("reading class counters: %w", err))
		return
	}
	for _, cl := range classes {
		id := strconv.FormatUint(uint64(cl.ID), 10)
		ch <- prometheus.MustNewConstMetric(c.clsPkts, prometheus.CounterValue, float64(cl.Counters.Packets), id)
		ch <- prometheus.MustNewConstMetric(c.clsBytes, prometheus.CounterValue, float64(cl.Counters.Bytes), id)
	}
}

func (c *collector) collectContracts(ch chan<- prometheus.Metric) {
	contracts, err := c.backend.Contracts()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.polPkts, fmt.Errorf("reading policer counters: %w", err))
		return
	}
	for _, ct := range contracts {
		id := strconv.FormatUint(uint64(ct.Class), 10)
		n := ct.Counters
		ch <- prometheus.MustNewConstMetric(c.polPkts, prometheus.CounterValue, float64(n.PassedPackets), id, "passed")
		ch <- prometheus.MustNewConstMetric(c.polPkts, prometheus.CounterValue, float64(n.DroppedPackets), id, "dropped")
		ch <- prometheus.MustNewConstMetric(c.polBytes, prometheus.CounterValue, float64(n.PassedBytes), id, "passed")
		ch <- prometheus.MustNewConstMetric(c.polBytes, prometheus.CounterValue, float64(n.DroppedBytes), id, "dropped")
	}
}
