package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/pfcp"
)

func newSessionCmd(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "session",
		Aliases: []string{"sessions"},
		Short:   "List PDU sessions (static and PFCP) or show one",
		Long: `List or show the daemon's PDU sessions: the static ones of its configuration, with
ids below 4294967296, and those SMFs established over PFCP, named by the UPF's SEID
(0x100000000 and up) with their PDRs, FARs, QERs, URRs and BARs.`,
		Example: `  xupfctl session list
  xupfctl session list -o json
  xupfctl session show 7
  xupfctl session show 0x100000001`,
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
		Short:   "List sessions with their TEIDs and packet counts: static ones by id, then PFCP ones by SEID",
		Long: `List the static sessions by id, then, when there are any, the PFCP sessions by SEID:
their SMF (PEER, CP-SEID), UE address, local uplink TEIDs, where downlink packets go (the
gNB and TEID of the downlink PDRs' FAR, or BUFF or DROP) and the packets their uplink and
downlink PDRs counted.

With -o json or -o yaml the output is an object {"static": [...], "pfcp": [...]}, both
always arrays, of the API's objects.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			static, err := c.Sessions(ctx)
			if err != nil {
				return err
			}
			pfcpList, err := c.PFCPSessions(ctx)
			if err != nil {
				return err
			}
			lists := sessionLists{Static: static, PFCP: pfcpList}
			return opts.render(cmd.OutOrStdout(), lists, func(w io.Writer) error { return renderSessionLists(w, lists) })
		},
	}
}

func newSessionShowCmd(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one session with its usage in packets and bytes",
		Long: `Show one session. An ID from 4294967296 (0x100000000) on is a PFCP session's SEID:
its SMF and its rules are shown, each PDR with the packets and bytes it counted. The ID is
decimal, or hexadecimal with 0x as "session list" shows SEIDs.`,
		Args: cobra.ExactArgs(1),
		// Completes the ids the daemon has: static ones labelled with the UE address, then
		// PFCP SEIDs (decimal, as the API takes them) with their SMF and UE.
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
			pfcpList, err := c.PFCPSessions(ctx)
			if err != nil {
				cobra.CompDebugln(err.Error(), true)
				return comps, cobra.ShellCompDirectiveNoFileComp
			}
			for _, s := range pfcpList {
				desc := fmt.Sprintf("PFCP 0x%x of %s, UE %s", s.SEID, cell(orDash(s.Peer)), pfcpUEs(s.Session))
				comps = append(comps, cobra.CompletionWithDesc(strconv.FormatUint(s.SEID, 10), desc))
			}
			return comps, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// Checked here too, not only by the server, so the mistake is reported even when
			// the daemon is down.
			id, err := parseSessionID(args[0])
			if err != nil {
				return err
			}
			c, ctx, cancel := opts.client(cmd)
			defer cancel()
			if id >= pfcp.FirstSEID {
				s, err := c.PFCPSession(ctx, id)
				if err != nil {
					return err
				}
				return opts.render(cmd.OutOrStdout(), s, func(w io.Writer) error { return renderPFCPSessionDetail(w, s) })
			}
			s, err := c.Session(ctx, id)
			if err != nil {
				return err
			}
			return opts.render(cmd.OutOrStdout(), s, func(w io.Writer) error { return renderSession(w, s) })
		},
	}
}

// parseSessionID reads a session id as decimal, or as hexadecimal after 0x (as session list
// shows PFCP SEIDs). A leading 0 alone does not mean octal: "010" is 10.
func parseSessionID(raw string) (uint64, error) {
	id, err := parseID(raw, 64)
	if err != nil {
		return 0, errors.New(api.BadSessionIDMessage(raw))
	}
	return id, nil
}

// parseID reads an id (session, SEID, TEID) of bits bits as the tables print them: decimal,
// or hexadecimal after 0x. A leading 0 is decimal, not octal.
func parseID(raw string, bits int) (uint64, error) {
	if hex, ok := strings.CutPrefix(strings.ToLower(raw), "0x"); ok {
		return strconv.ParseUint(hex, 16, bits)
	}
	return strconv.ParseUint(raw, 10, bits)
}

// sessionLists is the -o json/yaml output of session list.
type sessionLists struct {
	Static []api.SessionInfo     `json:"static" yaml:"static"`
	PFCP   []api.PFCPSessionInfo `json:"pfcp" yaml:"pfcp"`
}

// renderSessionLists prints the static sessions' table and the PFCP sessions' one; an empty
// table is left out, unless both are (then the static header shows there are none).
func renderSessionLists(w io.Writer, lists sessionLists) error {
	if len(lists.Static) > 0 || len(lists.PFCP) == 0 {
		if err := renderSessionList(w, lists.Static); err != nil {
			return err
		}
	}
	if len(lists.PFCP) == 0 {
		return nil
	}
	if len(lists.Static) > 0 {
		if _, err := fmt.Fprintln(w); err != nil {
			return fmt.Errorf("writing output: %w", err)
		}
	}
	return renderPFCPSessionTable(w, lists.PFCP)
}

func renderSessionList(w io.Writer, list []api.SessionInfo) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tUE\tUL-TEID\tGNB\tDL-TEID\tQFI\tUL-PKTS\tDL-PKTS")
	for _, s := range list {
		tprintf(tw, "%d\t%s\t0x%x\t%s\t0x%x\t%s\t%d\t%d\n",
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
	tprintf(tw, "ID:\t%d\n", s.ID)
	tprintf(tw, "UE:\t%s\n", s.UE)
	tprintf(tw, "Uplink TEID:\t0x%x\n", s.UplinkTEID)
	tprintf(tw, "gNB:\t%s\n", s.GNB)
	tprintf(tw, "Downlink TEID:\t0x%x\n", s.DownlinkTEID)
	tprintf(tw, "QFI:\t%s\n", qfi)
	tprintf(tw, "GTP-U address:\t%s\n", s.GTPUAddr)
	tprintf(tw, "Uplink usage:\t%d packets, %d bytes\n", s.Usage.Uplink.Packets, s.Usage.Uplink.Bytes)
	tprintf(tw, "Downlink usage:\t%d packets, %d bytes\n", s.Usage.Downlink.Packets, s.Usage.Downlink.Bytes)
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

func renderPFCPSessionTable(w io.Writer, list []api.PFCPSessionInfo) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "SEID\tPEER\tCP-SEID\tUE\tUL-TEIDS\tDL-PEER\tPDRS\tUL-PKTS\tDL-PKTS")
	for _, s := range list {
		ul, dl := pfcpDirectionPackets(s)
		tprintf(tw, "0x%x\t%s\t0x%x\t%s\t%s\t%s\t%d\t%d\t%d\n",
			s.SEID, orDash(s.Peer), s.CPSEID, pfcpUEs(s.Session), pfcpULTEIDs(s.Session),
			pfcpDLPeers(s.Session), len(s.PDRs), ul, dl)
	}
	return flush(tw)
}

func renderPFCPSessionDetail(w io.Writer, s api.PFCPSessionInfo) error {
	tw := newTable(w)
	tprintf(tw, "SEID:\t0x%x\n", s.SEID)
	tprintf(tw, "CP F-SEID:\t0x%x at %s\n", s.CPSEID, s.CPAddress)
	tprintf(tw, "Peer:\t%s\n", orDash(s.Peer))
	tprintf(tw, "Established:\t%s\n", timeCell(s.Established))

	// Each blank line ends a block, so every table aligns on its own.
	usage := map[uint16]api.PDRUsage{}
	for _, u := range s.Usage {
		usage[u.PDR] = u
	}
	fmt.Fprintln(tw, "\nPDR ID\tPRECEDENCE\tSOURCE\tMATCH\tQFI\tSDF\tFAR\tQERS\tURRS\tPACKETS\tBYTES")
	for _, id := range slices.Sorted(maps.Keys(s.PDRs)) {
		p := s.PDRs[id]
		var sdfs []string
		for _, f := range p.SDF {
			sdfs = append(sdfs, f.FlowDescription)
		}
		u := usage[id]
		tprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\n",
			id, p.Precedence, pfcpInterface(p.SourceInterface), pfcpMatch(p), qfiCell(p.QFI),
			orDash(strings.Join(sdfs, "; ")), p.FAR, pfcpIDs(p.QERs), pfcpIDs(p.URRs), u.Packets, u.Bytes)
	}

	fmt.Fprintln(tw, "\nFAR ID\tACTION\tDEST\tOHC\tTLM\tBAR")
	for _, id := range slices.Sorted(maps.Keys(s.FARs)) {
		f := s.FARs[id]
		ohc, tlm, bar := "-", "-", "-"
		if f.OHC != nil {
			ohc = fmt.Sprintf("%s 0x%x", f.OHC.Peer, f.OHC.TEID)
		}
		if f.TLM != nil {
			tlm = fmt.Sprintf("DSCP %d", *f.TLM>>8>>2)
		}
		if f.BARID != nil {
			bar = strconv.Itoa(int(*f.BARID))
		}
		tprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", id, pfcpApplyAction(f.Apply),
			pfcpInterface(f.DestinationInterface), ohc, tlm, bar)
	}

	if len(s.QERs) > 0 {
		fmt.Fprintln(tw, "\nQER ID\tGATE UL/DL\tMBR UL/DL (KBIT/S)\tGBR UL/DL (KBIT/S)\tQFI")
		for _, id := range slices.Sorted(maps.Keys(s.QERs)) {
			q := s.QERs[id]
			tprintf(tw, "%d\t%s/%s\t%s\t%s\t%s\n", id, pfcpGate(q.GateUL), pfcpGate(q.GateDL),
				pfcpRates(q.MBRUL, q.MBRDL), pfcpRates(q.GBRUL, q.GBRDL), qfiCell(q.QFI))
		}
	}

	if len(s.URRs) > 0 {
		fmt.Fprintln(tw, "\nURR ID\tMETHOD\tTHRESHOLD\tQUOTA")
		for _, id := range slices.Sorted(maps.Keys(s.URRs)) {
			u := s.URRs[id]
			tprintf(tw, "%d\t%s\t%s\t%s\n", id, pfcpMeasurementMethod(u.Method),
				pfcpVolumeTime(u.VolumeThreshold, u.TimeThreshold), pfcpVolumeTime(u.VolumeQuota, u.TimeQuota))
		}
	}

	if len(s.BARs) > 0 {
		fmt.Fprintln(tw, "\nBAR ID\tDDN DELAY\tSUGGESTED PACKETS")
		for _, id := range slices.Sorted(maps.Keys(s.BARs)) {
			b := s.BARs[id]
			delay, pkts := "-", "-"
			if b.NotificationDelay != 0 {
				delay = (time.Duration(b.NotificationDelay) * 50 * time.Millisecond).String()
			}
			if b.SuggestedPackets != 0 {
				pkts = strconv.Itoa(int(b.SuggestedPackets))
			}
			tprintf(tw, "%d\t%s\t%s\n", id, delay, pkts)
		}
	}
	return flush(tw)
}

// pfcpDirectionPackets sums the packets of a PFCP session's uplink PDRs (those on an F-TEID)
// and of its downlink ones.
func pfcpDirectionPackets(s api.PFCPSessionInfo) (ul, dl uint64) {
	for _, u := range s.Usage {
		p := s.PDRs[u.PDR]
		switch {
		case p == nil:
		case p.FTEID != nil:
			ul += u.Packets
		default:
			dl += u.Packets
		}
	}
	return ul, dl
}

// pfcpUEs lists the UE addresses a PFCP session's PDRs match, or "-".
func pfcpUEs(s pfcp.Session) string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(s.PDRs)) {
		if ue := s.PDRs[id].UE; ue.IsValid() && !slices.Contains(out, ue.String()) {
			out = append(out, ue.String())
		}
	}
	return orDash(strings.Join(out, ","))
}

// pfcpULTEIDs lists the local TEIDs of a PFCP session's uplink PDRs, in increasing order.
func pfcpULTEIDs(s pfcp.Session) string {
	var teids []uint32
	for _, p := range s.PDRs {
		if p.FTEID != nil && !slices.Contains(teids, p.FTEID.TEID) {
			teids = append(teids, p.FTEID.TEID)
		}
	}
	slices.Sort(teids)
	out := make([]string, len(teids))
	for i, t := range teids {
		out[i] = fmt.Sprintf("0x%x", t)
	}
	return orDash(strings.Join(out, ","))
}

// pfcpDLPeers says where the downlink PDRs of a PFCP session send packets: their FARs'
// tunnel peer and TEID, or what the FARs do instead (BUFF, DROP).
func pfcpDLPeers(s pfcp.Session) string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(s.PDRs)) {
		p := s.PDRs[id]
		f := s.FARs[p.FAR]
		if p.FTEID != nil || f == nil {
			continue
		}
		var dest string
		switch {
		case f.Apply&pfcp.ApplyForward != 0 && f.OHC != nil:
			dest = fmt.Sprintf("%s:0x%x", f.OHC.Peer, f.OHC.TEID)
		case f.Apply&pfcp.ApplyForward != 0:
			dest = "FORW"
		case f.Apply&pfcp.ApplyBuffer != 0:
			dest = "BUFF"
		case f.Apply&pfcp.ApplyDrop != 0:
			dest = "DROP"
		default:
			dest = pfcpApplyAction(f.Apply)
		}
		if !slices.Contains(out, dest) {
			out = append(out, dest)
		}
	}
	return orDash(strings.Join(out, ","))
}

// pfcpMatch is what a PDR's PDI matches: its local TEID (uplink) or UE address (downlink),
// and whether this UPF chose them.
func pfcpMatch(p *pfcp.PDR) string {
	var parts []string
	if f := p.FTEID; f != nil {
		m := fmt.Sprintf("TEID 0x%x", f.TEID)
		switch {
		case f.Chosen && f.ChooseID != 0:
			m += fmt.Sprintf(" (chosen, choose id %d)", f.ChooseID)
		case f.Chosen:
			m += " (chosen)"
		}
		parts = append(parts, m)
	}
	if p.UE.IsValid() || p.UEChosen {
		m := "UE " + p.UE.String()
		if !p.UE.IsValid() {
			m = "UE"
		}
		if p.UEChosen {
			m += " (chosen)"
		}
		parts = append(parts, m)
	}
	return orDash(strings.Join(parts, ", "))
}

// pfcpInterface names a source or destination interface value (TS 29.244 8.2.2, 8.2.24).
func pfcpInterface(v uint8) string {
	switch v {
	case 0:
		return "access"
	case 1:
		return "core"
	case 2:
		return "n6-lan"
	case 3:
		return "cp-function"
	case 4:
		return "li-function"
	}
	return strconv.Itoa(int(v))
}

// pfcpApplyAction names the bits of an apply action's first octet (TS 29.244 8.2.26).
func pfcpApplyAction(a uint8) string {
	var names []string
	for i, name := range []string{"DROP", "FORW", "BUFF", "NOCP", "DUPL", "IPMA", "IPMD", "DFRT"} {
		if a&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return orDash(strings.Join(names, "+"))
}

// pfcpMeasurementMethod names the bits of a URR's measurement method (TS 29.244 8.2.40).
func pfcpMeasurementMethod(m uint8) string {
	var names []string
	for i, name := range []string{"DURAT", "VOLUM", "EVENT"} {
		if m&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	if rest := m &^ 0x07; rest != 0 {
		names = append(names, fmt.Sprintf("0x%02x", rest))
	}
	return orDash(strings.Join(names, "+"))
}

// pfcpVolumeTime shows a URR's volume (bytes) and time (seconds) threshold or quota, 0 for
// none.
func pfcpVolumeTime(bytes uint64, seconds uint32) string {
	var parts []string
	if bytes != 0 {
		parts = append(parts, fmt.Sprintf("%d bytes", bytes))
	}
	if seconds != 0 {
		parts = append(parts, fmt.Sprintf("%d s", seconds))
	}
	return orDash(strings.Join(parts, ", "))
}

func pfcpGate(g uint8) string {
	if g == 0 {
		return "open"
	}
	return "closed"
}

// pfcpRates shows an uplink/downlink pair of bit rates, "-" when neither is set.
func pfcpRates(ul, dl uint64) string {
	if ul == 0 && dl == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", ul, dl)
}

// pfcpIDs lists rule ids, or "-".
func pfcpIDs(ids []uint32) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatUint(uint64(id), 10)
	}
	return orDash(strings.Join(out, ","))
}
