package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
)

func newClassifierCmd(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "classifier",
		Aliases: []string{"class", "classes"},
		Short:   "List, show, add or delete traffic classes",
		Long: `The traffic classifier matches packets against classes (MACs, ethertype, IPv4
prefixes, protocol, ports, direction) and counts, for each class, the packets it was the
best match for: the highest priority wins, and among equal priorities the lower id.

The daemon checks every class it is given and answers with what is wrong, naming the
field; xupfctl shows that message as it is.`,
		Example: `  xupfctl classifier add --id 3 --priority 100 --direction ingress \
      --protocol udp --src-ip 10.0.0.0/8 --src-port 1000-2000 --dst-port 5060
  xupfctl classifier list
  xupfctl classifier show 3 -o yaml
  xupfctl classifier delete 3`,
		// Runnable with no arguments (showing help) so that a mistyped subcommand is an
		// error with exit code 1 rather than help and success.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q; use list, show, add or delete", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newClassListCmd(opts), newClassShowCmd(opts), newClassAddCmd(opts), newClassDeleteCmd(opts))
	return cmd
}

func newClassListCmd(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List traffic classes with what they match and their counters, by id",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			list, err := c.Classes(ctx)
			if err != nil {
				return err
			}
			return opts.render(cmd.OutOrStdout(), list, func(w io.Writer) error { return renderClassList(w, list) })
		},
	}
}

func newClassShowCmd(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:               "show ID",
		Short:             "Show one traffic class, field by field, with its counters",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeClassIDs(opts),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Checked here too, not only by the server, so the mistake is reported even when
			// the daemon is down.
			id, err := api.ParseClassID(args[0])
			if err != nil {
				return err
			}
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			info, err := c.Class(ctx, id)
			if err != nil {
				return err
			}
			return opts.render(cmd.OutOrStdout(), info, func(w io.Writer) error { return renderClass(w, info) })
		},
	}
}

func newClassDeleteCmd(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:     "delete ID",
		Aliases: []string{"del", "rm"},
		Short:   "Delete a traffic class",
		Long: `Delete a traffic class. With the table output it says so; with -o json or yaml it
prints nothing, and the exit code tells whether it worked.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeClassIDs(opts),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := api.ParseClassID(args[0])
			if err != nil {
				return err
			}
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			if err := c.DeleteClass(ctx, id); err != nil {
				return err
			}
			if opts.output == "table" {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "class %d deleted\n", id)
			}
			return err
		},
	}
}

func newClassAddCmd(opts *options) *cobra.Command {
	var c classifier.Class
	cmd := &cobra.Command{
		Use:   "add --id N [--priority P]",
		Short: "Add a traffic class",
		Long: `Add a traffic class. --id is required; every match flag left out matches anything.
Among the classes a packet matches, the one with the highest --priority wins (0, the
default, is the lowest); equal priorities go to the lower id.

With the table output it prints a one-line summary of the class; with -o json or yaml,
the class as the daemon stored it.`,
		Example: `  xupfctl classifier add --id 3 --priority 100 --direction ingress \
      --protocol udp --src-ip 10.0.0.0/8 --src-port 1000-2000 --dst-port 5060
  xupfctl classifier add --id 4 --ethertype 0x0806
  xupfctl classifier add --id 5 --priority 10 --protocol tcp --dst-ip 198.51.100.7 --dst-port 443`,
		// The missing --id is a usage mistake, so it is checked here, before the usage
		// text is silenced.
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return err
			}
			if !cmd.Flags().Changed("id") {
				return fmt.Errorf("--id is required: give the class a number from 1 to 4294967295, e.g. --id 10")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, ctx, cancel := opts.client(cmd)
			defer cancel()
			info, err := client.AddClass(ctx, c)
			if err != nil {
				return err
			}
			return opts.render(cmd.OutOrStdout(), info, func(w io.Writer) error {
				_, err := tprintf(w, "class %d added: %s (%s, priority %d)\n",
					info.ID, classMatch(info.Class), classDirection(info.Direction), info.Priority)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.Var(&uint32Value{&c.ID, "class id", "1 to 4294967295"}, "id", "class id, 1 to 4294967295 (required)")
	f.Var(&uint32Value{&c.Priority, "priority", "0 to 4294967295"}, "priority", "priority among overlapping classes; the highest wins (default 0, the lowest)")
	f.StringVar(&c.Direction, "direction", "", "ingress (uplink, from the UE), egress (downlink, toward the UE) or both (default both)")
	f.StringVar(&c.SrcMAC, "src-mac", "", "source MAC of the received frame, e.g. 02:00:00:00:01:02")
	f.StringVar(&c.DstMAC, "dst-mac", "", "destination MAC of the received frame")
	f.StringVar(&c.EtherType, "ethertype", "", "ethertype of the received frame, e.g. 0x0800")
	f.StringVar(&c.SrcIP, "src-ip", "", "source IPv4 address or prefix of the user packet, e.g. 10.0.0.0/8")
	f.StringVar(&c.DstIP, "dst-ip", "", "destination IPv4 address or prefix of the user packet")
	f.StringVar(&c.Protocol, "protocol", "", "tcp, udp, sctp, icmp or a protocol number 0-255")
	f.StringVar(&c.SrcPort, "src-port", "", "source port or range, e.g. 80 or 1000-2000 (needs --protocol tcp, udp or sctp)")
	f.StringVar(&c.DstPort, "dst-port", "", "destination port or range (needs --protocol tcp, udp or sctp)")
	_ = cmd.RegisterFlagCompletionFunc("direction",
		cobra.FixedCompletions([]string{"ingress", "egress", "both"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("protocol",
		cobra.FixedCompletions([]string{"tcp", "udp", "sctp", "icmp"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// uint32Value is a uint32 flag whose parse error says what to write, where pflag's own would
// show strconv's message.
type uint32Value struct {
	p           *uint32
	what, valid string
}

func (v *uint32Value) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return fmt.Errorf("not a %s; use a whole number from %s", v.what, v.valid)
	}
	*v.p = uint32(n)
	return nil
}

func (v *uint32Value) String() string { return strconv.FormatUint(uint64(*v.p), 10) }
func (v *uint32Value) Type() string   { return "uint32" }

// completeClassIDs completes the class ids the daemon has, labelled with what they match.
func completeClassIDs(opts *options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, ctx, cancel := opts.client(cmd)
		defer cancel()
		list, err := c.Classes(ctx)
		if err != nil {
			cobra.CompDebugln(err.Error(), true)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		comps := make([]cobra.Completion, 0, len(list))
		for _, cl := range list {
			comps = append(comps, cobra.CompletionWithDesc(strconv.FormatUint(uint64(cl.ID), 10), cell(classMatch(cl.Class))))
		}
		return comps, cobra.ShellCompDirectiveNoFileComp
	}
}

func renderClassList(w io.Writer, list []api.ClassInfo) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tPRIORITY\tDIRECTION\tMATCH\tPACKETS\tBYTES")
	for _, c := range list {
		tprintf(tw, "%d\t%d\t%s\t%s\t%d\t%d\n",
			c.ID, c.Priority, classDirection(c.Direction), classMatch(c.Class), c.Counters.Packets, c.Counters.Bytes)
	}
	return flush(tw)
}

func renderClass(w io.Writer, c api.ClassInfo) error {
	tw := newTable(w)
	tprintf(tw, "ID:\t%d\n", c.ID)
	tprintf(tw, "Priority:\t%d\n", c.Priority)
	tprintf(tw, "Direction:\t%s\n", classDirection(c.Direction))
	tprintf(tw, "Source MAC:\t%s\n", orAny(c.SrcMAC))
	tprintf(tw, "Destination MAC:\t%s\n", orAny(c.DstMAC))
	tprintf(tw, "EtherType:\t%s\n", orAny(c.EtherType))
	tprintf(tw, "Source IP:\t%s\n", orAny(c.SrcIP))
	tprintf(tw, "Destination IP:\t%s\n", orAny(c.DstIP))
	tprintf(tw, "Protocol:\t%s\n", orAny(c.Protocol))
	tprintf(tw, "Source port:\t%s\n", orAny(c.SrcPort))
	tprintf(tw, "Destination port:\t%s\n", orAny(c.DstPort))
	tprintf(tw, "Matched:\t%d packets, %d bytes\n", c.Counters.Packets, c.Counters.Bytes)
	return flush(tw)
}

// classMatch summarises what a class matches on one line, in the order of a packet's
// headers: "mac SRC -> DST", "ethertype E", then "PROTO SRC-IP:PORT -> DST-IP:PORT", each
// part present only when the class constrains it, and "any" for a class that matches
// everything. E.g. "udp 10.0.0.0/8:1000-2000 -> any:5060".
func classMatch(c classifier.Class) string {
	var parts []string
	if c.SrcMAC != "" || c.DstMAC != "" {
		parts = append(parts, "mac "+orAny(c.SrcMAC)+" -> "+orAny(c.DstMAC))
	}
	if c.EtherType != "" {
		parts = append(parts, "ethertype "+c.EtherType)
	}
	var l34 []string
	if c.Protocol != "" {
		l34 = append(l34, strings.ToLower(c.Protocol))
	}
	if c.SrcIP != "" || c.DstIP != "" || c.SrcPort != "" || c.DstPort != "" {
		l34 = append(l34, endpoint(c.SrcIP, c.SrcPort)+" -> "+endpoint(c.DstIP, c.DstPort))
	}
	if len(l34) > 0 {
		parts = append(parts, strings.Join(l34, " "))
	}
	if len(parts) == 0 {
		return "any"
	}
	return strings.Join(parts, ", ")
}

func endpoint(ip, port string) string {
	if port == "" {
		return orAny(ip)
	}
	return orAny(ip) + ":" + port
}

// classDirection shows the default direction, which the class leaves empty, by its name.
func classDirection(d string) string {
	if d == "" {
		return "both"
	}
	return strings.ToLower(d)
}

func orAny(s string) string {
	if s == "" {
		return "any"
	}
	return s
}
