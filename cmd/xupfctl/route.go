package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/xupf/xupf/internal/api"
)

func newRouteCmd(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "route",
		Short: "List, add or delete the datapath's routes",
		Long: `The datapath forwards a packet by its route (longest prefix match) and the route's next
hop, resolved with the neighbour entries ("xupfctl neigh"); a packet whose next hop has no
entry goes to the kernel, which resolves it.

With router.mode: mirror (the default) the routes are the kernel's and "route list" shows
them as the datapath follows them: change them with ip route. With router.mode: private they
come from router.routes and from "route add" and "route del", and live in the daemon's
memory: a restarted daemon starts with router.routes again.`,
		Example: `  xupfctl route list
  xupfctl route add 0.0.0.0/0 --via 203.0.113.1 --dev n6
  xupfctl route add 198.51.100.0/24 --dev n3
  xupfctl route add 192.0.2.0/24 --blackhole
  xupfctl route del 192.0.2.0/24`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q; use list, add or del", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newRouteListCmd(opts), newRouteAddCmd(opts), newRouteDelCmd(opts))
	return cmd
}

func newRouteListCmd(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls", "show"},
		Short:   "List the routes, by prefix",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			list, err := c.Routes(ctx)
			if err != nil {
				return err
			}
			return opts.render(cmd.OutOrStdout(), list, func(w io.Writer) error {
				tw := newTable(w)
				fmt.Fprintln(tw, "PREFIX\tTYPE\tVIA\tDEV\tMTU")
				for _, r := range list {
					mtu := "-"
					if r.MTU > 0 {
						mtu = strconv.Itoa(r.MTU)
					}
					tprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Prefix, dash(r.Type), dash(r.Via), dash(r.Interface), mtu)
				}
				return flush(tw)
			})
		},
	}
}

func newRouteAddCmd(opts *options) *cobra.Command {
	var rt api.Route
	var blackhole bool
	cmd := &cobra.Command{
		Use:   "add PREFIX (--dev IFACE [--via GATEWAY] [--mtu N] | --blackhole)",
		Short: "Add a private route, or replace the one to PREFIX",
		Long: `Add a route to PREFIX out of --dev, through the gateway --via (without --via the prefix
is on link: each destination is its own next hop), or a --blackhole that drops its packets
as no_route. --dev must be an interface xupfd is attached to. Private mode only.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("give one prefix, e.g. xupfctl route add 0.0.0.0/0 --via 203.0.113.1 --dev n6")
			}
			if blackhole && (rt.Via != "" || rt.Interface != "" || rt.MTU != 0) {
				return fmt.Errorf("--blackhole takes no --via, --dev or --mtu: its packets are dropped")
			}
			if !blackhole && rt.Interface == "" {
				return fmt.Errorf("--dev is required: the interface the route leaves by, e.g. --dev n6 (or --blackhole)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			rt.Prefix = args[0]
			if blackhole {
				rt.Type = "blackhole"
			}
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			added, err := c.AddRoute(ctx, rt)
			if err != nil {
				return err
			}
			return opts.render(cmd.OutOrStdout(), added, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "route %s added\n", added.Prefix)
				return err
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&rt.Via, "via", "", "the gateway's IPv4 address; without: the prefix is on link")
	fl.StringVar(&rt.Interface, "dev", "", "the interface the route leaves by, one xupfd is attached to")
	fl.IntVar(&rt.MTU, "mtu", 0, "the route's MTU (68 to 65535); longer packets go to the kernel. Default: the interface's")
	fl.BoolVar(&blackhole, "blackhole", false, "drop the prefix's packets (no_route)")
	return cmd
}

func newRouteDelCmd(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:     "del PREFIX",
		Aliases: []string{"delete", "rm"},
		Short:   "Delete the private route to PREFIX",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			if err := c.DeleteRoute(ctx, args[0]); err != nil {
				return err
			}
			return deleted(cmd, opts, "route "+args[0])
		},
	}
}

// deleted reports a deletion: a line with the table output; nothing with -o json or yaml,
// where the exit code tells.
func deleted(cmd *cobra.Command, opts *options, what string) error {
	if opts.output != "table" {
		return nil
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s deleted\n", what)
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
