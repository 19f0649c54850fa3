package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/xupf/xupf/internal/api"
)

func newSessionCmd(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "session",
		Aliases: []string{"sessions"},
		Short:   "List PDU sessions or show one",
		// Runnable with no arguments (showing help) so that a mistyped subcommand is an
		// error with exit code 1 rather than help and success.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q; use list or show", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newSessionListCmd(opts), newSessionShowCmd(opts))
	return cmd
}

func newSessionListCmd(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List sessions with their TEIDs and packet counts, by id",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			list, err := c.Sessions(ctx)
			if err != nil {
				return err
			}
			return opts.render(cmd.OutOrStdout(), list, func(w io.Writer) error { return renderSessionList(w, list) })
		},
	}
}

func newSessionShowCmd(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one session with its usage in packets and bytes",
		Args:  cobra.ExactArgs(1),
		// Completes the ids the daemon has, labelled with the UE address.
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			list, err := c.Sessions(ctx)
			if err != nil {
				cobra.CompDebugln(err.Error(), true)
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			comps := make([]cobra.Completion, 0, len(list))
			for _, s := range list {
				comps = append(comps, cobra.CompletionWithDesc(strconv.FormatUint(s.ID, 10), "UE "+s.UE.String()))
			}
			return comps, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// Checked here too, not only by the server, so the mistake is reported even when
			// the daemon is down.
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return errors.New(api.BadSessionIDMessage(args[0]))
			}
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			s, err := c.Session(ctx, id)
			if err != nil {
				return err
			}
			return opts.render(cmd.OutOrStdout(), s, func(w io.Writer) error { return renderSession(w, s) })
		},
	}
}

func renderSessionList(w io.Writer, list []api.SessionInfo) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tUE\tUL-TEID\tGNB\tDL-TEID\tQFI\tUL-PKTS\tDL-PKTS")
	for _, s := range list {
		fmt.Fprintf(tw, "%d\t%s\t0x%x\t%s\t0x%x\t%s\t%d\t%d\n",
			s.ID, s.UE, s.UplinkTEID, s.GNB, s.DownlinkTEID, qfiCell(s.QFI),
			s.Usage.Uplink.Packets, s.Usage.Downlink.Packets)
	}
	return flush(tw)
}

func renderSession(w io.Writer, s api.SessionInfo) error {
	tw := newTable(w)
	qfi := "none (no PDU Session Container)"
	if s.QFI != 0 {
		qfi = strconv.Itoa(int(s.QFI))
	}
	fmt.Fprintf(tw, "ID:\t%d\n", s.ID)
	fmt.Fprintf(tw, "UE:\t%s\n", s.UE)
	fmt.Fprintf(tw, "Uplink TEID:\t0x%x\n", s.UplinkTEID)
	fmt.Fprintf(tw, "gNB:\t%s\n", s.GNB)
	fmt.Fprintf(tw, "Downlink TEID:\t0x%x\n", s.DownlinkTEID)
	fmt.Fprintf(tw, "QFI:\t%s\n", qfi)
	fmt.Fprintf(tw, "GTP-U address:\t%s\n", s.GTPUAddr)
	fmt.Fprintf(tw, "Uplink usage:\t%d packets, %d bytes\n", s.Usage.Uplink.Packets, s.Usage.Uplink.Bytes)
	fmt.Fprintf(tw, "Downlink usage:\t%d packets, %d bytes\n", s.Usage.Downlink.Packets, s.Usage.Downlink.Bytes)
	return flush(tw)
}

// qfiCell shows QFI 0, which means no PDU Session Container, as "-" rather than a number
// that looks like a real QoS flow.
func qfiCell(qfi uint8) string {
	if qfi == 0 {
		return "-"
	}
	return strconv.Itoa(int(qfi))
}
