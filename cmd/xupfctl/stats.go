package main

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/xupf/xupf/internal/api"
)

func newStatsCmd(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Show the datapath's packet counters and drops by reason",
		Long: `Show the XDP datapath's counters summed over CPUs: packets seen per path, then
packets dropped per reason; then the PFCP datagrams left unanswered, per reason; with the
flow cache on, its entries and the flows removed from it, per reason. Every known name is
listed, zero or not.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			st, err := c.Stats(ctx)
			if err != nil {
				return err
			}
			return opts.render(cmd.OutOrStdout(), st, func(w io.Writer) error { return renderStats(w, st) })
		},
	}
}

func renderStats(w io.Writer, st api.Stats) error {
	tw := newTable(w)
	writeCounterSection(tw, "COUNTER", st.Counters)
	fmt.Fprintln(tw)
	writeCounterSection(tw, "DROP REASON", st.Drops)
	fmt.Fprintln(tw)
	writeCounterSection(tw, "PFCP DROP REASON", st.PFCPDrops)
	fmt.Fprintln(tw)
	writeCounterSection(tw, "PFCP REPORTS", st.PFCPReports)
	fmt.Fprintln(tw)
	writeCounterSection(tw, "GTP-U SIGNALLING", st.GTPU)
	fmt.Fprintln(tw)
	writeCounterSection(tw, "BUFFER", st.Buffer)
	if fc := st.FlowCache; fc != nil {
		// The entries, then the flows removed by reason.
		rows := map[string]uint64{"entries": uint64(fc.Entries)}
		for reason, n := range fc.Evicted {
			rows["evicted_"+reason] = n
		}
		fmt.Fprintln(tw)
		writeCounterSection(tw, "FLOW CACHE", rows)
	}
	return flush(tw)
}

func writeCounterSection(w io.Writer, title string, counters map[string]uint64) {
	fmt.Fprintf(w, "%s\tVALUE\n", title)
	// Sorted by name so that runs can be compared line by line.
	for _, name := range slices.Sorted(maps.Keys(counters)) {
		tprintf(w, "%s\t%d\n", name, counters[name])
	}
}
