package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xupf/xupf/internal/pfcpclient"
)

// defaultPFCPPort is the port --upf means when it gives none.
const defaultPFCPPort = 8805

func newPFCPSessionCmd(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Act as an SMF: create, modify and delete PFCP sessions on a UPF",
		Long: `Act as a minimal SMF toward a UPF's PFCP (N4) endpoint, --upf, rather than through
xupfd's HTTP API: associate, then establish, modify or delete PDU sessions the way Open5GS
or free5GC do. Useful to drive xupfd, or any UPF, without a 5G core.

The rules of every session have fixed ids, so that a later xupfctl can change a session
knowing only its UP SEID: uplink PDR 1 and FAR 1, downlink PDR 2 and FAR 2, QER 1, URR 1
and BAR 1.

Each command associates first, with --node-id (by default the address it sends from),
asking the UPF to keep the sessions of an earlier association with that Node ID (PFCP
Session Retention Information): a UPF deletes them otherwise. Only "create --hold" releases
the association when it ends, which makes a UPF delete every session of the Node ID: give
it a --node-id of its own to keep the sessions of other runs.

--timeout bounds each request: it is sent again every second (or every --timeout, if
shorter) until answered or --timeout has passed.`,
		Example: `  xupfctl pfcp session create --upf 192.0.2.1 --count 10 --ue-pool 10.45.0.0/16 \
      --gnb 192.0.2.100 --gnb-teid-base 0x1000
  xupfctl pfcp session modify --upf 192.0.2.1 --seid 0x5000 --gnb 192.0.2.101 --gnb-teid 0x2000
  xupfctl pfcp session delete --upf 192.0.2.1 --seid 0x5000`,
		// Runnable with no arguments (showing help) so that a mistyped subcommand is an
		// error with exit code 1 rather than help and success.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q; use create, modify or delete", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newPFCPSessionCreateCmd(opts), newPFCPSessionModifyCmd(opts), newPFCPSessionDeleteCmd(opts))
	return cmd
}

// smfFlags are the flags every pfcp session command has: where the UPF is and who we are.
type smfFlags struct {
	upf    netip.AddrPort
	nodeID string
}

func (f *smfFlags) register(cmd *cobra.Command) {
	cmd.Flags().Var(&upfValue{&f.upf}, "upf", "the UPF's PFCP address, IPv4[:port] (port 8805 unless given; required)")
	cmd.Flags().StringVar(&f.nodeID, "node-id", "", "this SMF's PFCP Node ID, an IPv4 address or FQDN (default: the address sent from)")
}

// requireUPF is the Args check of the pfcp session commands: no arguments, --upf given.
func requireUPF(cmd *cobra.Command, args []string) error {
	if err := cobra.NoArgs(cmd, args); err != nil {
		return err
	}
	if !cmd.Flags().Changed("upf") {
		return errors.New("--upf is required: give the UPF's PFCP address, e.g. --upf 192.0.2.1:8805")
	}
	return nil
}

// associate dials the UPF and sets up the association, asking the UPF to retain the
// sessions of the Node ID's earlier association, e.g. an earlier xupfctl's. Each request is
// retried every second, or every --timeout if shorter, until --timeout has passed.
func (f *smfFlags) associate(cmd *cobra.Command, opts *options) (*pfcpclient.Client, error) {
	t1 := min(time.Second, opts.timeout)
	c, err := pfcpclient.Dial(f.upf, pfcpclient.Options{NodeID: f.nodeID, Timeout: t1,
		Tries: max(1, int(opts.timeout/t1)), RetainSessions: true})
	if err != nil {
		return nil, err
	}
	if _, err := c.Associate(cmd.Context()); err != nil {
		c.Close()
		return nil, fmt.Errorf("associating with the UPF at %s: %w", f.upf, err)
	}
	return c, nil
}

// createFlags are the flags of "pfcp session create".
type createFlags struct {
	smfFlags
	count           uint32
	uePool          netip.Prefix
	ueChoose        bool
	gnb             netip.Addr
	gnbTEIDBase     uint32
	style           pfcpclient.Style
	n3              netip.Addr
	teidBase        uint32
	qfi             uint32
	networkInstance string
	hold            bool
}

// pfcpSessionRow is one created session as the table, JSON and YAML show it.
type pfcpSessionRow struct {
	CPSEID       uint64     `json:"cp_seid" yaml:"cp_seid"`
	UPSEID       uint64     `json:"up_seid" yaml:"up_seid"`
	UE           netip.Addr `json:"ue_ipv4" yaml:"ue_ipv4"`
	UplinkTEID   uint32     `json:"uplink_teid" yaml:"uplink_teid"`
	GTPUAddr     netip.Addr `json:"gtpu_address" yaml:"gtpu_address"` // the UPF's N3 address for uplink
	GNB          netip.Addr `json:"gnb_ipv4" yaml:"gnb_ipv4"`         // the zero Addr ("") while buffering
	DownlinkTEID uint32     `json:"downlink_teid" yaml:"downlink_teid"`
}

func newPFCPSessionCreateCmd(opts *options) *cobra.Command {
	f := &createFlags{count: 1, teidBase: 1, gnbTEIDBase: 1, qfi: 1}
	cmd := &cobra.Command{
		Use:   "create --upf ADDR (--ue-pool CIDR | --ue-choose) [--count N] [--gnb IPV4 --gnb-teid-base N]",
		Short: "Associate with a UPF and establish PDU sessions, as Open5GS or free5GC would",
		Long: `Associate with the UPF at --upf and establish --count PDU sessions, one after the
other, then show them: CP and UP SEIDs, UE address, uplink TEID and the UPF's N3 address,
gNB and downlink TEID.

UE addresses come from --ue-pool, counting up from the first address after the prefix's
own (10.45.0.1, 10.45.0.2, ... for 10.45.0.0/16), or, with --ue-choose, from the UPF's own
pool (the UE IP Address IE asks it to choose, CHV4).

--style sets how the sessions are laid out:
  open5gs  the UPF chooses the uplink F-TEID (CHOOSE, CHOOSE ID 5); the UE address is on
           the downlink PDR only; Outer Header Removal GTP-U/UDP/IP; the network instance
           in DNS label encoding
  free5gc  the SMF chooses the uplink F-TEID: TEIDs from --teid-base at --n3, the UPF's N3
           address; the UE address is on both PDRs; Outer Header Removal GTP-U/UDP/IPv4;
           the network instance as a plain string

With --gnb, downlink traffic is forwarded to it in GTP-U, with TEIDs from --gnb-teid-base;
without, the UPF buffers it (an SMF's state before the gNB has answered), until
"xupfctl pfcp session modify" gives a gNB.

Without --hold xupfctl exits at once and leaves the sessions and the association on the
UPF: nobody answers the UPF's heartbeats any more, and a UPF keeps forwarding the sessions
of a peer that has gone quiet. Change or remove them with "xupfctl pfcp session modify" and
"delete". With --hold it stays, answering heartbeats, until SIGINT (Ctrl-C) or SIGTERM, then
deletes its sessions and releases the association (a UPF then deletes every session of the
Node ID, those of other runs too: give --hold a --node-id of its own).`,
		Example: `  xupfctl pfcp session create --upf 192.0.2.1 --ue-pool 10.45.0.0/16
  xupfctl pfcp session create --upf 192.0.2.1:8805 --count 100 --ue-choose \
      --gnb 192.0.2.100 --gnb-teid-base 0x1000 --qfi 9 --hold
  xupfctl pfcp session create --upf 192.0.2.1 --style free5gc --n3 192.0.2.1 --teid-base 0x100 \
      --ue-pool 10.60.0.0/24 -o json`,
		Args: requireUPF,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(cmd); err != nil {
				return err
			}
			return f.run(cmd, opts)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.Var(&uint32Value{&f.count, "session count", "1 to 4294967295"}, "count", "how many sessions to establish")
	fl.Var(&prefixValue{&f.uePool}, "ue-pool", "IPv4 prefix the UE addresses are taken from, e.g. 10.45.0.0/16")
	fl.BoolVar(&f.ueChoose, "ue-choose", false, "let the UPF choose the UE addresses from its pool (CHV4)")
	fl.Var(&ipv4Value{&f.gnb}, "gnb", "the gNB's N3 IPv4 address downlink is tunnelled to (default: none, the UPF buffers)")
	fl.Var(&teidValue{&f.gnbTEIDBase}, "gnb-teid-base", "the gNB's downlink TEID of the first session, counting up (needs --gnb)")
	fl.Var(&styleValue{&f.style}, "style", "how sessions are laid out: open5gs or free5gc")
	fl.Var(&ipv4Value{&f.n3}, "n3", "the UPF's N3 IPv4 address in the uplink F-TEIDs (--style free5gc, required there)")
	fl.Var(&teidValue{&f.teidBase}, "teid-base", "the uplink TEID of the first session, counting up (--style free5gc)")
	fl.Var(&uint32Value{&f.qfi, "QFI", "0 to 63"}, "qfi", "QFI of the sessions' QoS flow, 0 for none")
	fl.StringVar(&f.networkInstance, "network-instance", "internet", "network instance (DNN) of the PDRs and FARs; empty for none")
	fl.BoolVar(&f.hold, "hold", false, "stay, answering heartbeats, until SIGINT or SIGTERM; then delete the sessions and release the association")
	_ = cmd.RegisterFlagCompletionFunc("style", cobra.FixedCompletions(pfcpclient.Styles, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// check reports the first flag that is wrong in combination with the others.
func (f *createFlags) check(cmd *cobra.Command) error {
	changed := cmd.Flags().Changed
	switch {
	case f.ueChoose && changed("ue-pool"):
		return errors.New("--ue-pool and --ue-choose exclude each other; give one")
	case !f.ueChoose && !changed("ue-pool"):
		return errors.New("give the UE addresses: --ue-pool 10.45.0.0/16, or --ue-choose to let the UPF choose them")
	case f.count == 0:
		return errors.New("--count 0: give how many sessions to create, 1 or more")
	case f.qfi > 63:
		return fmt.Errorf("--qfi %d is not a QFI; use 0 (none) to 63", f.qfi)
	case changed("gnb-teid-base") && !f.gnb.IsValid():
		return errors.New("--gnb-teid-base needs --gnb, the gNB the TEIDs belong to")
	case f.style == pfcpclient.Open5GS && (changed("n3") || changed("teid-base")):
		return errors.New("--n3 and --teid-base are for --style free5gc, where the SMF chooses the uplink F-TEID; with open5gs the UPF chooses it")
	case f.style == pfcpclient.Free5GC && !f.n3.IsValid():
		return errors.New("--style free5gc needs --n3, the UPF's N3 address the SMF puts in the uplink F-TEIDs, e.g. --n3 192.0.2.1")
	}
	if changed("ue-pool") {
		if n := poolSize(f.uePool); n < uint64(f.count) {
			return fmt.Errorf("--ue-pool %s has %d UE addresses, fewer than --count %d; use a shorter prefix", f.uePool, n, f.count)
		}
	}
	if f.gnb.IsValid() && uint64(f.gnbTEIDBase)+uint64(f.count)-1 > 0xffffffff {
		return fmt.Errorf("--gnb-teid-base %#x leaves no room for %d TEIDs; use a lower base", f.gnbTEIDBase, f.count)
	}
	if f.style == pfcpclient.Free5GC && uint64(f.teidBase)+uint64(f.count)-1 > 0xffffffff {
		return fmt.Errorf("--teid-base %#x leaves no room for %d TEIDs; use a lower base", f.teidBase, f.count)
	}
	return nil
}

// poolSize is how many UE addresses a prefix gives: all but the prefix's own address.
func poolSize(p netip.Prefix) uint64 {
	if p.Bits() == 32 {
		return 1
	}
	return 1<<(32-p.Bits()) - 1
}

// spec returns the SessionSpec of the i-th session.
func (f *createFlags) spec(i uint32) pfcpclient.SessionSpec {
	s := pfcpclient.SessionSpec{Style: f.style, QFI: uint8(f.qfi), NetworkInstance: f.networkInstance}
	if !f.ueChoose {
		first := f.uePool.Addr()
		if f.uePool.Bits() < 32 {
			first = first.Next()
		}
		a := first.As4()
		n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
		n += i
		s.UE = netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	}
	if f.style == pfcpclient.Free5GC {
		s.UplinkTEID, s.N3 = f.teidBase+i, f.n3
	}
	if f.gnb.IsValid() {
		s.GNB, s.GNBTEID = f.gnb, f.gnbTEIDBase+i
	}
	return s
}

func (f *createFlags) run(cmd *cobra.Command, opts *options) error {
	c, err := f.associate(cmd, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := cmd.Context()
	var sessions []*pfcpclient.Session
	var failed error
	for i := range f.count {
		s, err := c.Establish(ctx, f.spec(i))
		if err != nil {
			failed = fmt.Errorf("session %d of %d: %w", i+1, f.count, err)
			break
		}
		sessions = append(sessions, s)
	}
	rows := make([]pfcpSessionRow, len(sessions))
	for i, s := range sessions {
		rows[i] = pfcpSessionRow{CPSEID: s.CPSEID, UPSEID: s.UPSEID, UE: s.UE, UplinkTEID: s.UplinkTEID,
			GTPUAddr: s.N3, GNB: s.GNB, DownlinkTEID: s.GNBTEID}
	}
	if len(rows) > 0 {
		if err := opts.render(cmd.OutOrStdout(), rows, func(w io.Writer) error { return renderPFCPSessions(w, rows) }); err != nil {
			return errors.Join(failed, err)
		}
	}
	if !f.hold {
		if failed != nil && len(sessions) > 0 {
			failed = fmt.Errorf("%w; the %d sessions shown were created and are left on the UPF", failed, len(sessions))
		}
		return failed
	}
	if failed == nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "holding %d sessions with the UPF at %s; Ctrl-C or SIGTERM deletes them and releases the association\n",
			len(sessions), f.upf)
		hold, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		<-hold.Done()
		stop()
	}
	// The wait ended with ctx: clean up under a context of our own.
	return errors.Join(failed, f.cleanUp(context.WithoutCancel(ctx), cmd, c, sessions))
}

// cleanUp deletes the sessions and releases the association.
func (f *createFlags) cleanUp(ctx context.Context, cmd *cobra.Command, c *pfcpclient.Client, sessions []*pfcpclient.Session) error {
	var errs []error
	for _, s := range sessions {
		if err := c.Delete(ctx, s); err != nil {
			errs = append(errs, fmt.Errorf("deleting session %#x: %w", s.UPSEID, err))
		}
	}
	if err := c.Release(ctx); err != nil {
		errs = append(errs, fmt.Errorf("releasing the association: %w", err))
	}
	if len(errs) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "deleted %d sessions and released the association\n", len(sessions))
	}
	return errors.Join(errs...)
}

func renderPFCPSessions(w io.Writer, rows []pfcpSessionRow) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "CP-SEID\tUP-SEID\tUE\tUL-TEID\tUPF-N3\tGNB\tDL-TEID")
	for _, r := range rows {
		gnb, dl := "-", "-"
		if r.GNB.IsValid() {
			gnb, dl = r.GNB.String(), fmt.Sprintf("0x%x", r.DownlinkTEID)
		}
		fmt.Fprintf(tw, "0x%x\t0x%x\t%s\t0x%x\t%s\t%s\t%s\n", r.CPSEID, r.UPSEID, r.UE, r.UplinkTEID, r.GTPUAddr, gnb, dl)
	}
	return flush(tw)
}

// sessionFlags are the flags of the commands that act on one existing session.
type sessionFlags struct {
	smfFlags
	seid uint64
}

func (f *sessionFlags) register(cmd *cobra.Command) {
	f.smfFlags.register(cmd)
	cmd.Flags().Var(&seidValue{&f.seid}, "seid", "the session's UP SEID, as \"pfcp session create\" shows it (required)")
}

// args checks --upf and --seid are given.
func (f *sessionFlags) args(cmd *cobra.Command, args []string) error {
	if err := requireUPF(cmd, args); err != nil {
		return err
	}
	if !cmd.Flags().Changed("seid") {
		return errors.New("--seid is required: give the session's UP SEID, the UP-SEID column of `xupfctl pfcp session create`")
	}
	return nil
}

// explain turns the UPF's "Session context not found" into what to do about it.
func (f *sessionFlags) explain(err error) error {
	var ce *pfcpclient.CauseError
	if errors.As(err, &ce) && ce.Cause == ie.CauseSessionContextNotFound {
		return fmt.Errorf("the UPF at %s has no session with UP SEID %#x (%s); use an UP-SEID shown by `xupfctl pfcp session create`",
			f.upf, f.seid, pfcpclient.CauseName(ce.Cause))
	}
	return err
}

// modifyFlags are the flags of "pfcp session modify".
type modifyFlags struct {
	sessionFlags
	gnb             netip.Addr
	gnbTEID         uint32
	buffer, drop    bool
	style           pfcpclient.Style
	networkInstance string
}

func newPFCPSessionModifyCmd(opts *options) *cobra.Command {
	f := &modifyFlags{}
	cmd := &cobra.Command{
		Use:   "modify --upf ADDR --seid SEID (--gnb IPV4 --gnb-teid N | --buffer | --drop)",
		Short: "Change where a session's downlink goes: to a gNB (also a handover), buffered or dropped",
		Long: `Change the downlink FAR (FAR 2) of the session with UP SEID --seid:
  --gnb and --gnb-teid  forward in GTP-U to that gNB with that TEID: once the gNB has
                        answered, or at a handover to another gNB
  --buffer              buffer (BUFF and NOCP, with BAR 1), as when the UE goes idle
  --drop                drop

The session must have been created with the fixed rule ids of "pfcp session create". With
table output it says what it did; with -o json or yaml it prints nothing, and the exit code
tells whether it worked.`,
		Example: `  xupfctl pfcp session modify --upf 192.0.2.1 --seid 0x5000 --gnb 192.0.2.101 --gnb-teid 0x2000
  xupfctl pfcp session modify --upf 192.0.2.1 --seid 0x5000 --buffer`,
		Args: f.args,
		RunE: func(cmd *cobra.Command, _ []string) error {
			changed := cmd.Flags().Changed
			actions := 0
			for _, on := range []bool{f.gnb.IsValid(), f.buffer, f.drop} {
				if on {
					actions++
				}
			}
			switch {
			case changed("gnb-teid") && !f.gnb.IsValid():
				return errors.New("--gnb-teid needs --gnb, the gNB the TEID belongs to")
			case actions != 1:
				return errors.New("give one change: --gnb with --gnb-teid (forward to a gNB), --buffer or --drop")
			case f.gnb.IsValid() && !changed("gnb-teid"):
				return errors.New("--gnb needs --gnb-teid, the gNB's downlink TEID, e.g. --gnb-teid 0x2000")
			}
			c, err := f.associate(cmd, opts)
			if err != nil {
				return err
			}
			defer c.Close()
			s := &pfcpclient.Session{UPSEID: f.seid,
				Spec: pfcpclient.SessionSpec{Style: f.style, NetworkInstance: f.networkInstance}}
			var did string
			switch {
			case f.buffer:
				err, did = c.SetDownlinkBuffering(cmd.Context(), s), "buffered"
			case f.drop:
				err, did = c.DropDownlink(cmd.Context(), s), "dropped"
			default:
				err, did = c.SetDownlink(cmd.Context(), s, f.gnb, f.gnbTEID), fmt.Sprintf("forwarded to gNB %s, TEID 0x%x", f.gnb, f.gnbTEID)
			}
			if err != nil {
				return f.explain(err)
			}
			if opts.output == "table" {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "session 0x%x: downlink %s\n", f.seid, did)
			}
			return err
		},
	}
	f.sessionFlags.register(cmd)
	fl := cmd.Flags()
	fl.Var(&ipv4Value{&f.gnb}, "gnb", "forward downlink to this gNB N3 IPv4 address (needs --gnb-teid)")
	fl.Var(&teidValue{&f.gnbTEID}, "gnb-teid", "the gNB's downlink TEID")
	fl.BoolVar(&f.buffer, "buffer", false, "buffer downlink (BUFF, NOCP)")
	fl.BoolVar(&f.drop, "drop", false, "drop downlink")
	fl.Var(&styleValue{&f.style}, "style", "the style the session was created in, which sets the network instance's encoding: open5gs or free5gc")
	fl.StringVar(&f.networkInstance, "network-instance", "internet", "network instance (DNN) of the downlink forwarding parameters; empty for none")
	_ = cmd.RegisterFlagCompletionFunc("style", cobra.FixedCompletions(pfcpclient.Styles, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func newPFCPSessionDeleteCmd(opts *options) *cobra.Command {
	f := &sessionFlags{}
	cmd := &cobra.Command{
		Use:     "delete --upf ADDR --seid SEID",
		Aliases: []string{"del", "rm"},
		Short:   "Delete a session",
		Long: `Delete the session with UP SEID --seid. With table output it says so; with -o json or
yaml it prints nothing, and the exit code tells whether it worked.`,
		Example: `  xupfctl pfcp session delete --upf 192.0.2.1 --seid 0x5000`,
		Args:    f.args,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.associate(cmd, opts)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.Delete(cmd.Context(), &pfcpclient.Session{UPSEID: f.seid}); err != nil {
				return f.explain(err)
			}
			if opts.output == "table" {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "session 0x%x deleted\n", f.seid)
			}
			return err
		},
	}
	f.register(cmd)
	return cmd
}

// upfValue is --upf: an IPv4 address with an optional port.
type upfValue struct{ p *netip.AddrPort }

func (v *upfValue) Set(s string) error {
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Is4() && ap.Port() != 0 {
		*v.p = ap
		return nil
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
		*v.p = netip.AddrPortFrom(a, defaultPFCPPort)
		return nil
	}
	return errors.New("not a PFCP address; use an IPv4 address with an optional port, e.g. 192.0.2.1 or 192.0.2.1:8805")
}

func (v *upfValue) String() string {
	if !v.p.IsValid() {
		return ""
	}
	return v.p.String()
}
func (v *upfValue) Type() string { return "addr" }

// ipv4Value is an IPv4 address flag.
type ipv4Value struct{ p *netip.Addr }

func (v *ipv4Value) Set(s string) error {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return errors.New("not an IPv4 address; use e.g. 192.0.2.10")
	}
	*v.p = a
	return nil
}

func (v *ipv4Value) String() string {
	if !v.p.IsValid() {
		return ""
	}
	return v.p.String()
}
func (v *ipv4Value) Type() string { return "ipv4" }

// prefixValue is an IPv4 prefix flag without host bits.
type prefixValue struct{ p *netip.Prefix }

func (v *prefixValue) Set(s string) error {
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() {
		return errors.New("not an IPv4 prefix; use e.g. 10.45.0.0/16")
	}
	if p != p.Masked() {
		return fmt.Errorf("has host bits set; did you mean %s", p.Masked())
	}
	*v.p = p
	return nil
}

func (v *prefixValue) String() string {
	if !v.p.IsValid() {
		return ""
	}
	return v.p.String()
}
func (v *prefixValue) Type() string { return "cidr" }

// teidValue is a TEID flag, decimal or 0x-hexadecimal as the tables show TEIDs.
type teidValue struct{ p *uint32 }

func (v *teidValue) Set(s string) error {
	n, err := parseID(s, 32)
	if err != nil || n == 0 {
		return errors.New("not a TEID; use a number from 1 to 0xffffffff, e.g. 0x1000 or 4096")
	}
	*v.p = uint32(n)
	return nil
}

func (v *teidValue) String() string { return hexOrEmpty(uint64(*v.p)) }
func (v *teidValue) Type() string   { return "teid" }

// seidValue is a SEID flag, decimal or 0x-hexadecimal as the tables show SEIDs.
type seidValue struct{ p *uint64 }

func (v *seidValue) Set(s string) error {
	n, err := parseID(s, 64)
	if err != nil || n == 0 {
		return errors.New("not a SEID; use the UP-SEID column of `xupfctl pfcp session create`, e.g. 0x5000")
	}
	*v.p = n
	return nil
}

func (v *seidValue) String() string { return hexOrEmpty(*v.p) }
func (v *seidValue) Type() string   { return "seid" }

// styleValue is --style.
type styleValue struct{ p *pfcpclient.Style }

func (v *styleValue) Set(s string) error {
	st, err := pfcpclient.ParseStyle(strings.ToLower(s))
	if err != nil {
		return errors.New("not a session style; use open5gs or free5gc")
	}
	*v.p = st
	return nil
}

func (v *styleValue) String() string { return v.p.String() }
func (v *styleValue) Type() string   { return "style" }

// hexOrEmpty shows a flag's value in hexadecimal, and 0, which no TEID or SEID flag takes,
// as nothing, so that help shows no default for it.
func hexOrEmpty(n uint64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("0x%x", n)
}
