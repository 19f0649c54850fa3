package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/xupf/xupf/internal/api"
)

func newNeighCmd(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "neigh",
		Aliases: []string{"neighbour", "neighbor"},
		Short:   "List, add or delete the neighbour entries next hops are resolved with",
		Long: `A route's next hop (its gateway, or for an on-link prefix the destination itself) is sent
to the MAC of its neighbour entry on the route's interface; without one the packet goes to
the kernel. With router.mode: mirror these are the kernel's valid IPv4 entries (ARP, ip
neigh); with router.mode: private the static entries of router.neighbours and of "neigh add".`,
		Example: `  xupfctl neigh list
  xupfctl neigh add 203.0.113.1 --dev n6 --mac 02:00:00:00:02:02
  xupfctl neigh del 203.0.113.1 --dev n6`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q; use list, add or del", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newNeighListCmd(opts), newNeighAddCmd(opts), newNeighDelCmd(opts))
	return cmd
}

func newNeighListCmd(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls", "show"},
		Short:   "List the neighbour entries",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			list, err := c.Neighbours(ctx)
			if err != nil {
				return err
			}
			return opts.render(cmd.OutOrStdout(), list, func(w io.Writer) error {
				tw := newTable(w)
				fmt.Fprintln(tw, "ADDRESS\tDEV\tMAC")
				for _, n := range list {
					tprintf(tw, "%s\t%s\t%s\n", n.Address, n.Interface, n.MAC)
				}
				return flush(tw)
			})
		},
	}
}

// neighDev requires --dev: a neighbour is an address on one interface.
func neighDev(n *api.Neighbour, usage string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("give one address, e.g. %s", usage)
		}
		if n.Interface == "" {
			return fmt.Errorf("--dev is required: the interface the neighbour is on, e.g. %s", usage)
		}
		return nil
	}
}

func newNeighAddCmd(opts *options) *cobra.Command {
	var n api.Neighbour
	cmd := &cobra.Command{
		Use:   "add ADDRESS --dev IFACE --mac MAC",
		Short: "Add a static neighbour, or replace the one of ADDRESS on IFACE (private mode)",
		RunE: func(cmd *cobra.Command, args []string) error {
			n.Address = args[0]
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			added, err := c.AddNeighbour(ctx, n)
			if err != nil {
				return err
			}
			return opts.render(cmd.OutOrStdout(), added, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "neighbour %s on %s added\n", added.Address, added.Interface)
				return err
			})
		},
	}
	cmd.Args = neighDev(&n, "xupfctl neigh add 203.0.113.1 --dev n6 --mac 02:00:00:00:02:02")
	cmd.Flags().StringVar(&n.Interface, "dev", "", "the interface the neighbour is on, one xupfd is attached to")
	cmd.Flags().StringVar(&n.MAC, "mac", "", "the neighbour's Ethernet address, e.g. 02:00:00:00:02:02")
	return cmd
}

func newNeighDelCmd(opts *options) *cobra.Command {
	var n api.Neighbour
	cmd := &cobra.Command{
		Use:     "del ADDRESS --dev IFACE",
		Aliases: []string{"delete", "rm"},
		Short:   "Delete a static neighbour (private mode)",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			if err := c.DeleteNeighbour(ctx, n.Interface, args[0]); err != nil {
				return err
			}
			return deleted(cmd, opts, fmt.Sprintf("neighbour %s on %s", args[0], n.Interface))
		},
	}
	cmd.Args = neighDev(&n, "xupfctl neigh del 203.0.113.1 --dev n6")
	cmd.Flags().StringVar(&n.Interface, "dev", "", "the interface the neighbour is on")
	return cmd
}
