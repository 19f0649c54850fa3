package main

import (
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/xupf/xupf/internal/api"
)

func newStatusCmd(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's version, uptime, interfaces, session and PFCP association counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			st, err := c.Status(ctx)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			return opts.render(w, st, func(w io.Writer) error { return renderStatus(w, st) })
		},
	}
}

func renderStatus(w io.Writer, st api.Status) error {
	tw := newTable(w)
	uptime := time.Duration(st.UptimeSeconds * float64(time.Second)).Round(time.Second)
	tprintf(tw, "Version:\t%s\n", st.Version)
	tprintf(tw, "Started:\t%s (up %s)\n", st.StartedAt.Format(time.RFC3339), uptime)
	tprintf(tw, "Sessions:\t%d/%d\n", st.Sessions, st.MaxSessions)
	tprintf(tw, "GTP-U addresses:\t%s\n", orDash(strings.Join(st.GTPUAddresses, ", ")))
	tprintf(tw, "PFCP address:\t%s\n", orDash(st.PFCPAddress))
	tprintf(tw, "PFCP associations:\t%d\n", st.PFCPAssociations)
	tprintf(tw, "QoS meters:\t%s, clock %s\n", orDash(st.QoSAlgorithm), orDash(st.QoSClock))
	tprintf(tw, "BPF FS path:\t%s\n", orDash(st.BPFFSPath))
	if len(st.Interfaces) == 0 {
		tprintf(tw, "Interfaces:\tnone\n")
		return flush(tw)
	}
	// The blank line ends the key/value block, so the interface table aligns on its own.
	tprintf(tw, "\nINTERFACE\tIFINDEX\tROLES\tXDP MODE\n")
	for _, ifc := range st.Interfaces {
		tprintf(tw, "%s\t%d\t%s\t%s\n", ifc.Name, ifc.Ifindex, orDash(strings.Join(ifc.Roles, ",")), orDash(ifc.XDPMode))
	}
	return flush(tw)
}

// orDash shows an empty value as "-" so a table cell is never blank and columns stay
// readable (and splittable by awk).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
