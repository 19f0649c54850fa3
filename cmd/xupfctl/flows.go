package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/xupf/xupf/internal/api"
)

func newFlowsCmd(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "flows",
		Short: "List, show or flush the flow cache's entries",
		Long: `With the flow cache on (flow_cache.max_flows), the kernel forwards the first packet of a
transit IPv4 TCP or UDP flow, xupfd learns what it did, and the datapath does the same to the
flow's later packets. An entry goes when it is idle for flow_cache.idle_timeout, on a TCP FIN
or RST, when a route, neighbour, nftables rule or conntrack entry changes, or when flushed.

The filters select by either end's address or port, by the arrival or departure interface
and by protocol; every filter given must match.`,
		Example: `  xupfctl flows list
  xupfctl flows list --address 198.51.100.9 --port 443
  xupfctl flows show 10.0.0.1:40000 198.51.100.9:443
  xupfctl flows flush --interface n6
  xupfctl flows flush --all`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q; use list, show or flush", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newFlowsListCmd(opts), newFlowsShowCmd(opts), newFlowsFlushCmd(opts))
	return cmd
}

// flowFilterFlags are the filters of flows list and flows flush.
type flowFilterFlags struct{ address, port, iface, proto string }

func (f *flowFilterFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&f.address, "address", "", "either end's IPv4 address")
	fl.StringVar(&f.port, "port", "", "either end's port")
	fl.StringVar(&f.iface, "interface", "", "the arrival or the departure interface")
	fl.StringVar(&f.proto, "proto", "", "tcp or udp")
}

// query is the flags as the API's query parameters.
func (f *flowFilterFlags) query() url.Values {
	q := url.Values{}
	for name, v := range map[string]string{"address": f.address, "port": f.port, "interface": f.iface, "proto": f.proto} {
		if v != "" {
			q.Set(name, v)
		}
	}
	return q
}

// listFlows checks the filter q as the daemon does and asks the daemon for the flows it
// selects.
func listFlows(cmd *cobra.Command, opts *options, q url.Values) ([]api.CachedFlow, error) {
	f, err := api.ParseFlowFilter(q)
	if err != nil {
		return nil, err
	}
	c, ctx, cancel := opts.client(cmd)
	defer cancel()
	return c.Flows(ctx, f)
}

func newFlowsListCmd(opts *options) *cobra.Command {
	var ff flowFilterFlags
	cmd := &cobra.Command{
		Use:     "list [--address A] [--port P] [--interface IFACE] [--proto tcp|udp]",
		Aliases: []string{"ls"},
		Short:   "List the cached flows the filters select, most bytes first",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := listFlows(cmd, opts, ff.query())
			if err != nil {
				return err
			}
			return opts.render(cmd.OutOrStdout(), list, func(w io.Writer) error {
				tw := newTable(w)
				fmt.Fprintln(tw, "PROTO\tSRC\tDST\tIN\tOUT\tVLAN\tPACKETS\tBYTES")
				for _, fl := range list {
					tprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", fl.Proto, fl.Src, fl.Dst, arrival(fl), fl.OutInterface,
						vlanAction(fl), fl.Packets, fl.Bytes)
				}
				return flush(tw)
			})
		},
	}
	ff.add(cmd.Flags())
	return cmd
}

func newFlowsShowCmd(opts *options) *cobra.Command {
	var proto string
	cmd := &cobra.Command{
		Use:   "show SRC:PORT DST:PORT [--proto tcp|udp]",
		Short: "Show every field of the cached flows from SRC:PORT to DST:PORT",
		Long: `Show the cached flows from SRC:PORT to DST:PORT as their packets arrive: one per protocol,
arrival interface and VLAN.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return errors.New("give the flow's two ends, e.g. xupfctl flows show 10.0.0.1:40000 198.51.100.9:443")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{"src": {args[0]}, "dst": {args[1]}}
			if proto != "" {
				q.Set("proto", proto)
			}
			list, err := listFlows(cmd, opts, q)
			if err != nil {
				return err
			}
			if len(list) == 0 {
				return fmt.Errorf("no cached flow from %s to %s; see xupfctl flows list", args[0], args[1])
			}
			return opts.render(cmd.OutOrStdout(), list, func(w io.Writer) error {
				for i, fl := range list {
					if i > 0 {
						fmt.Fprintln(w)
					}
					if err := showFlow(w, fl); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&proto, "proto", "", "tcp or udp")
	return cmd
}

// showFlow writes every field of fl, one a line.
func showFlow(w io.Writer, fl api.CachedFlow) error {
	dscp := "kept"
	if fl.DSCP != nil {
		dscp = strconv.Itoa(*fl.DSCP)
	}
	ttl := "kept (bridged)"
	if fl.TTLDecrement {
		ttl = "decremented (routed)"
	}
	tw := newTable(w)
	rows := [][2]string{
		{"proto", fl.Proto}, {"src", fl.Src}, {"dst", fl.Dst}, {"in", arrival(fl)}, {"out", fl.OutInterface},
		{"src mac", fl.SrcMAC}, {"dst mac", fl.DstMAC}, {"vlan", vlanAction(fl)}, {"ttl", ttl}, {"dscp", dscp},
		{"mtu", strconv.Itoa(fl.MTU)}, {"packets", strconv.FormatUint(fl.Packets, 10)},
		{"bytes", strconv.FormatUint(fl.Bytes, 10)}, {"first seen", fl.FirstSeen.UTC().Format(time.RFC3339)},
		{"last seen", fl.LastSeen.UTC().Format(time.RFC3339)},
	}
	// A translated UE flow (flow_cache.kernel_n6): what it is given.
	if fl.SNAT != "" {
		rows = append(rows, [2]string{"snat", fl.SNAT})
	}
	if fl.ToUE != "" {
		rows = append(rows, [2]string{"to ue", fl.ToUE})
	}
	for _, kv := range rows {
		tprintf(tw, "%s\t%s\n", kv[0], kv[1])
	}
	return flush(tw)
}

// arrival is where a flow's packets arrive: the interface, and the VLAN when tagged.
func arrival(fl api.CachedFlow) string {
	if fl.InVLAN != 0 {
		return fmt.Sprintf("%s vlan %d", fl.InInterface, fl.InVLAN)
	}
	return fl.InInterface
}

// vlanAction is what becomes of a flow's tag: "-", "pop", "push 20", "rewrite 30".
func vlanAction(fl api.CachedFlow) string {
	switch fl.VLAN {
	case "none", "":
		return "-"
	case "push", "rewrite":
		return fmt.Sprintf("%s %d", fl.VLAN, fl.OutVLAN)
	}
	return fl.VLAN
}

func newFlowsFlushCmd(opts *options) *cobra.Command {
	var ff flowFilterFlags
	var all bool
	cmd := &cobra.Command{
		Use:   "flush (--all | [--address A] [--port P] [--interface IFACE] [--proto tcp|udp])",
		Short: "Remove the cached flows the filters select",
		Long: `Remove the cached flows the filters select, or every one with --all. Their next packets go
to the kernel, which decides afresh, and are learnt again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := api.ParseFlowFilter(ff.query())
			if err != nil {
				return err
			}
			if all != (f == api.FlowFilter{}) {
				return errors.New("give either --all or filters (--address, --port, --interface, --proto), not both, not neither")
			}
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			n, err := c.FlushFlows(ctx, f)
			if err != nil {
				return err
			}
			res := api.FlushResult{Flushed: n}
			return opts.render(cmd.OutOrStdout(), res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%d flows flushed\n", n)
				return err
			})
		},
	}
	ff.add(cmd.Flags())
	cmd.Flags().BoolVar(&all, "all", false, "remove every cached flow")
	return cmd
}
