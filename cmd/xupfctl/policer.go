package main

import (
	"fmt"
	"io"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xupf/xupf/internal/api"
)

func newPolicerCmd(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "policer",
		Aliases: []string{"police"},
		Short:   "List, set or delete the policer's contracts: pass, drop or rate-limit a traffic class",
		Long: `The policer applies to every packet the contract of its traffic class, the class the
classifier put it in (see "xupfctl classifier"): pass it, drop it, or limit the class to a
rate with a burst. The default contract, class 0, applies to the packets that match no
class and to those of a class without a contract; without one they pass. The policer runs
right after the classifier, on the packets of a session, and only while at least one class
exists. A class need not exist to be given a contract.

Rates are in bits per second as tc writes them: 500kbit, 10mbit, 1.5gbit (k, m, g and t
are powers of 1000), or a plain number of bit/s; the policer meters whole bytes per second,
so a rate must be a multiple of 8 bit/s. Bursts are in bytes: 1500, 64kb, 1mb (kb, mb and
gb are powers of 1024, as in tc). A packet larger than the burst never passes.

Contracts set here live in the daemon's memory: a restarted daemon starts again with those
of its configuration file (policer_contracts; "xupfctl config show" prints the running
ones). The meters' algorithm and clock are shown by "xupfctl status".`,
		Example: `  xupfctl policer set --class 3 --limit --rate 10mbit --burst 64kb
  xupfctl policer set --class 4 --drop
  xupfctl policer default --pass
  xupfctl policer list
  xupfctl policer delete --class 3`,
		// Runnable with no arguments (showing help) so that a mistyped subcommand is an
		// error with exit code 1 rather than help and success.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q; use list, set, default or delete", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newPolicerListCmd(opts), newPolicerSetCmd(opts, false), newPolicerSetCmd(opts, true),
		newPolicerDeleteCmd(opts))
	return cmd
}

func newPolicerListCmd(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the contracts, by class, with what each let through and dropped",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			list, err := c.Contracts(ctx)
			if err != nil {
				return err
			}
			return opts.render(cmd.OutOrStdout(), list, func(w io.Writer) error { return renderContracts(w, list) })
		},
	}
}

// contractFlags are the flags that say what a contract does.
type contractFlags struct {
	pass, drop, limit bool
	rate, burst       uint64
}

func (f *contractFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.pass, "pass", false, "pass every packet of the class")
	fl.BoolVar(&f.drop, "drop", false, "drop every packet of the class")
	fl.BoolVar(&f.limit, "limit", false, "limit the class to --rate with bursts of --burst")
	fl.Var(&rateValue{&f.rate}, "rate", "with --limit: the rate in bits per second, e.g. 500kbit, 10mbit, 1gbit")
	fl.Var(&sizeValue{&f.burst}, "burst", "with --limit: the burst in bytes, at least the largest packet, e.g. 1500, 64kb, 1mb")
}

// contract is the contract the flags describe, or a usage error that says what to fix.
func (f *contractFlags) contract(cmd *cobra.Command) (api.Contract, error) {
	changed := cmd.Flags().Changed
	var chosen []string
	for _, a := range []struct {
		name string
		on   bool
	}{{"--pass", f.pass}, {"--drop", f.drop}, {"--limit", f.limit}} {
		if a.on {
			chosen = append(chosen, a.name)
		}
	}
	if len(chosen) > 1 {
		return api.Contract{}, fmt.Errorf("%s: choose one of --pass, --drop and --limit", strings.Join(chosen, " and "))
	}
	switch {
	case f.limit:
		switch {
		case !changed("rate"):
			return api.Contract{}, fmt.Errorf("--limit needs --rate, the rate in bits per second, e.g. --rate 10mbit")
		case !changed("burst"):
			return api.Contract{}, fmt.Errorf("--limit needs --burst, the burst in bytes, e.g. --burst 64kb")
		}
		return api.Contract{Action: api.ActionLimit, RateBPS: f.rate, BurstBytes: f.burst}, nil
	case f.pass || f.drop:
		action, does := api.ActionPass, "passes"
		if f.drop {
			action, does = api.ActionDrop, "drops"
		}
		for _, name := range []string{"rate", "burst"} {
			if changed(name) {
				return api.Contract{}, fmt.Errorf("--%s goes with --limit only; --%s %s every packet of the class", name, action, does)
			}
		}
		return api.Contract{Action: action}, nil
	}
	return api.Contract{}, fmt.Errorf("say what the contract does: --pass, --drop, or --limit with --rate and --burst")
}

// newPolicerSetCmd is "set", or with isDefault "default": set for class 0, without --class.
func newPolicerSetCmd(opts *options, isDefault bool) *cobra.Command {
	var (
		f     contractFlags
		class uint32
	)
	cmd := &cobra.Command{
		Use:   "set --class N (--pass | --drop | --limit --rate RATE --burst SIZE)",
		Short: "Create or replace the contract of a class",
		Long: `Create or replace the contract of a class. The new contract applies from the next
packet; a limit starts with its whole burst. Setting the very contract a class already has
changes nothing (its meter keeps its state). The counters of a class carry on when its
contract is replaced.

With the table output it prints a one-line summary; with -o json or yaml, the contract as
the daemon stored it, with its counters.`,
		Example: `  xupfctl policer set --class 3 --limit --rate 10mbit --burst 64kb
  xupfctl policer set --class 4 --drop
  xupfctl policer set --class 0 --limit --rate 1gbit --burst 1mb   # the default contract`,
	}
	if isDefault {
		cmd.Use = "default (--pass | --drop | --limit --rate RATE --burst SIZE)"
		cmd.Short = "Create or replace the default contract (class 0): for packets with no class or no contract"
		cmd.Long = `Create or replace the default contract, the contract of class 0: it applies to the
packets that match no class and to those of a class without a contract of its own. It is
"xupfctl policer set --class 0".`
		cmd.Example = `  xupfctl policer default --drop
  xupfctl policer default --limit --rate 100mbit --burst 256kb`
	}
	var contract api.Contract
	// The flag combinations are usage mistakes, so they are checked here, before the usage
	// text is silenced.
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if err := cobra.NoArgs(cmd, args); err != nil {
			return err
		}
		if !isDefault && !cmd.Flags().Changed("class") {
			return fmt.Errorf("--class is required: the class id from `xupfctl classifier list`, or 0 for the default contract, e.g. --class 3")
		}
		var err error
		contract, err = f.contract(cmd)
		return err
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, ctx, cancel := opts.client(cmd)
		defer cancel()
		info, err := c.SetContract(ctx, class, contract)
		if err != nil {
			return err
		}
		return opts.render(cmd.OutOrStdout(), info, func(w io.Writer) error {
			_, err := tprintf(w, "%s set: %s\n", api.ContractName(info.Class), contractSummary(info.Contract))
			return err
		})
	}
	if !isDefault {
		cmd.Flags().Var(&uint32Value{&class, "class id", "0 (the default contract) to 4294967295"}, "class",
			"the class id `N` from xupfctl classifier list; 0 is the default contract (required)")
		_ = cmd.RegisterFlagCompletionFunc("class", completeClasses(opts))
	}
	f.add(cmd)
	return cmd
}

func newPolicerDeleteCmd(opts *options) *cobra.Command {
	var class uint32
	cmd := &cobra.Command{
		Use:     "delete --class N",
		Aliases: []string{"del", "rm"},
		Short:   "Delete the contract of a class, and its counters",
		Long: `Delete the contract of a class, and its counters: the packets of the class then fall
under the default contract, if there is one. --class 0 deletes the default contract: the
packets without a contract then pass. With the table output it says so; with -o json or
yaml it prints nothing, and the exit code tells whether it worked.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return err
			}
			if !cmd.Flags().Changed("class") {
				return fmt.Errorf("--class is required: the class whose contract to delete, 0 for the default contract, e.g. --class 3")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			if err := c.DeleteContract(ctx, class); err != nil {
				return err
			}
			var err error
			if opts.output == "table" {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s deleted\n", api.ContractName(class))
			}
			return err
		},
	}
	cmd.Flags().Var(&uint32Value{&class, "class id", "0 (the default contract) to 4294967295"}, "class",
		"the class `N` whose contract to delete; 0 is the default contract (required)")
	_ = cmd.RegisterFlagCompletionFunc("class", completeContracts(opts))
	return cmd
}

// completeClasses completes --class with the default contract and the daemon's classes.
func completeClasses(opts *options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		comps := []cobra.Completion{cobra.CompletionWithDesc("0", "the default contract")}
		c, ctx, cancel := opts.client(cmd)
		defer cancel()
		list, err := c.Classes(ctx)
		if err != nil {
			cobra.CompDebugln(err.Error(), true)
			return comps, cobra.ShellCompDirectiveNoFileComp
		}
		for _, cl := range list {
			comps = append(comps, cobra.CompletionWithDesc(strconv.FormatUint(uint64(cl.ID), 10), classMatch(cl.Class)))
		}
		return comps, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeContracts completes --class with the classes that have a contract.
func completeContracts(opts *options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, ctx, cancel := opts.client(cmd)
		defer cancel()
		list, err := c.Contracts(ctx)
		if err != nil {
			cobra.CompDebugln(err.Error(), true)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		comps := make([]cobra.Completion, 0, len(list))
		for _, ct := range list {
			comps = append(comps, cobra.CompletionWithDesc(strconv.FormatUint(uint64(ct.Class), 10), cell(contractSummary(ct.Contract))))
		}
		return comps, cobra.ShellCompDirectiveNoFileComp
	}
}

func renderContracts(w io.Writer, list []api.ContractInfo) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "CLASS\tACTION\tRATE\tBURST\tPASSED-PKTS\tPASSED-BYTES\tDROPPED-PKTS\tDROPPED-BYTES")
	for _, c := range list {
		class := strconv.FormatUint(uint64(c.Class), 10)
		if c.Class == api.DefaultContractClass {
			class += " (default)"
		}
		rate, burst := "-", "-"
		if c.Action == api.ActionLimit {
			rate, burst = formatRate(c.RateBPS), formatSize(c.BurstBytes)
		}
		n := c.Counters
		tprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", class, c.Action, rate, burst,
			n.PassedPackets, n.PassedBytes, n.DroppedPackets, n.DroppedBytes)
	}
	return flush(tw)
}

// contractSummary is a contract on one line: "pass", "drop" or "limit 10mbit, burst 64kb".
func contractSummary(c api.Contract) string {
	if c.Action == api.ActionLimit {
		return fmt.Sprintf("limit %s, burst %s", formatRate(c.RateBPS), formatSize(c.BurstBytes))
	}
	return c.Action
}

// rateUnits are the rate units parseRate takes: bits per second, in powers of 1000 as tc.
var rateUnits = map[string]uint64{
	"": 1, "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
}

// sizeUnits are the size units parseSize takes: bytes, in powers of 1024 as tc.
var sizeUnits = map[string]uint64{
	"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
}

var quantityRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)([a-z]*)$`)

// parseQuantity parses a decimal number with a unit of units into a whole number of the
// base unit: "1.5mbit" is 1500000. The errors say what is wrong; the callers say what to
// write.
func parseQuantity(s string, units map[string]uint64, noun string) (uint64, string, error) {
	m := quantityRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return 0, "", fmt.Errorf("not a number with a unit")
	}
	unit := m[2]
	mul, ok := units[unit]
	if !ok {
		return 0, unit, fmt.Errorf("unknown unit %q", unit)
	}
	r, _ := new(big.Rat).SetString(m[1]) // matched a decimal number
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).SetUint64(mul)))
	if !r.IsInt() {
		return 0, unit, fmt.Errorf("not a whole number of %s", noun)
	}
	if !r.Num().IsUint64() {
		return 0, unit, fmt.Errorf("too large")
	}
	return r.Num().Uint64(), unit, nil
}

// parseRate parses a rate as tc writes it (bits per second: 10mbit, 1.5gbit, 64000) into
// bit/s.
func parseRate(s string) (uint64, error) {
	const what = "write bits per second, e.g. 500kbit, 10mbit or 1gbit (or a plain number of bit/s)"
	n, unit, err := parseQuantity(s, rateUnits, "bits per second")
	switch {
	case err != nil && strings.HasSuffix(unit, "bps"):
		return 0, fmt.Errorf("%q: tc reads %q as bytes per second, which is ambiguous; %s", s, unit, what)
	case err != nil && strings.HasSuffix(unit, "b"):
		return 0, fmt.Errorf("%q is a size in bytes, not a rate; %s", s, what)
	case err != nil:
		return 0, fmt.Errorf("%q: %v; %s", s, err, what)
	case n == 0:
		return 0, fmt.Errorf("%q: a limit needs a rate above 0; %s", s, what)
	}
	return n, nil
}

// parseSize parses a size as tc writes it (bytes: 1500, 64kb, 1mb, with kb = 1024 bytes) into
// bytes.
func parseSize(s string) (uint64, error) {
	const what = "write bytes, e.g. 1500, 64kb or 1mb (kb = 1024 bytes)"
	n, unit, err := parseQuantity(s, sizeUnits, "bytes")
	switch {
	case err != nil && strings.HasSuffix(unit, "bit"):
		return 0, fmt.Errorf("%q is in bits; %s", s, what)
	case err != nil:
		return 0, fmt.Errorf("%q: %v; %s", s, err, what)
	case n == 0:
		return 0, fmt.Errorf("%q: a burst must be above 0, at least the largest packet; %s", s, what)
	}
	return n, nil
}

// formatRate writes bit/s as parseRate reads them, exactly, in the largest unit that divides
// them: 10000000 is "10mbit", 1500000 "1500kbit", 1001 "1001bit".
func formatRate(bps uint64) string {
	for _, u := range []struct {
		name string
		mul  uint64
	}{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}} {
		if bps >= u.mul && bps%u.mul == 0 {
			return strconv.FormatUint(bps/u.mul, 10) + u.name
		}
	}
	return strconv.FormatUint(bps, 10) + "bit"
}

// formatSize writes bytes as parseSize reads them, exactly: 65536 is "64kb", 3000 "3000b".
func formatSize(b uint64) string {
	for _, u := range []struct {
		name string
		mul  uint64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}} {
		if b >= u.mul && b%u.mul == 0 {
			return strconv.FormatUint(b/u.mul, 10) + u.name
		}
	}
	return strconv.FormatUint(b, 10) + "b"
}

// rateValue is the --rate flag: a rate as parseRate reads it, in bit/s.
type rateValue struct{ p *uint64 }

func (v *rateValue) Set(s string) error {
	n, err := parseRate(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

func (v *rateValue) String() string {
	if *v.p == 0 {
		return ""
	}
	return formatRate(*v.p)
}
func (v *rateValue) Type() string { return "rate" }

// sizeValue is the --burst flag: a size as parseSize reads it, in bytes.
type sizeValue struct{ p *uint64 }

func (v *sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

func (v *sizeValue) String() string {
	if *v.p == 0 {
		return ""
	}
	return formatSize(*v.p)
}
func (v *sizeValue) Type() string { return "size" }
