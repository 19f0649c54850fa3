package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/xupf/xupf/internal/pfcp"
)

func newPFCPCmd(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pfcp",
		Short: "Show the PFCP (N4) associations with SMFs; act as an SMF to manage sessions",
		Long: `xupfd answers SMFs on its PFCP (N4) endpoint, pfcp_listen: an SMF sets up an
association, and xupfd then sends it a heartbeat every pfcp_heartbeat_interval. An SMF that
leaves pfcp_heartbeat_retries heartbeats in a row unanswered is declared lost and its
association removed.

"pfcp associations" asks xupfd's HTTP API; "pfcp session" speaks PFCP to a UPF itself, as
a minimal SMF, to create, modify and delete PDU sessions.`,
		Example: `  xupfctl pfcp associations
  xupfctl pfcp associations -o json
  xupfctl pfcp session create --upf 192.0.2.1 --count 10 --ue-pool 10.45.0.0/16 --gnb 192.0.2.100`,
		// Runnable with no arguments (showing help) so that a mistyped subcommand is an
		// error with exit code 1 rather than help and success.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q; use associations or session", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newPFCPAssociationsCmd(opts), newPFCPSessionCmd(opts))
	return cmd
}

func newPFCPAssociationsCmd(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:     "associations",
		Aliases: []string{"association", "assoc"},
		Short:   "List the established PFCP associations, by Node ID",
		Long: `List the SMFs that have a PFCP association with xupfd, by Node ID: the address they
send from, when they last started (their Recovery Time Stamp), when the association was set
up and how many heartbeats in a row they have left unanswered.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			list, err := c.Associations(ctx)
			if err != nil {
				return err
			}
			return opts.render(cmd.OutOrStdout(), list, func(w io.Writer) error { return renderAssociations(w, list) })
		},
	}
}

func renderAssociations(w io.Writer, list []pfcp.Association) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NODE ID\tADDRESS\tRECOVERY\tESTABLISHED\tMISSED")
	for _, a := range list {
		tprintf(tw, "%s\t%s\t%s\t%s\t%d\n", orDash(a.NodeID), a.Address,
			timeCell(a.Recovery), timeCell(a.Established), a.Missed)
	}
	return flush(tw)
}

// timeCell shows a time as RFC 3339, or "-" when it is not set.
func timeCell(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339)
}
