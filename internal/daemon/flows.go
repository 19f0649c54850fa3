package daemon

import (
	"errors"
	"net/netip"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/datapath"
)

// The flow cache through the API: its entries listed and flushed, its counters in the stats.

// Flows implements api.Backend.
func (d *Daemon) Flows() ([]api.CachedFlow, error) {
	flows, err := d.dp.Flows()
	if err != nil {
		return nil, flowError(err)
	}
	out := make([]api.CachedFlow, 0, len(flows))
	for _, f := range flows {
		out = append(out, d.flowOf(f))
	}
	return out, nil
}

// FlushFlows implements api.Backend.
func (d *Daemon) FlushFlows(match func(api.CachedFlow) bool) (int, error) {
	n, err := d.dp.FlushFlows(func(f datapath.Flow) bool { return match(d.flowOf(f)) })
	return n, flowError(err)
}

// flowCacheStats is the flow cache's part of the stats: nil when the cache is off.
func (d *Daemon) flowCacheStats() (*api.FlowCacheStats, error) {
	st, err := d.dp.FlowCacheStats()
	if errors.Is(err, datapath.ErrFlowCacheOff) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &api.FlowCacheStats{Entries: st.Entries,
		Evicted: map[string]uint64{"aged": st.Aged, "flushed": st.Flushed, "invalidated": st.Invalidated}}, nil
}

// flowError marks the cache being off as a conflict (409): the request is fine, the
// configuration does not allow it.
func flowError(err error) error {
	if errors.Is(err, datapath.ErrFlowCacheOff) {
		return api.WithKind(api.ErrConflict, err)
	}
	return err
}

func (d *Daemon) flowOf(f datapath.Flow) api.CachedFlow {
	r := d.dp.Router()
	proto := map[uint8]string{6: "tcp", 17: "udp"}[f.Key.Proto]
	a := api.CachedFlow{Proto: proto, Src: netip.AddrPortFrom(f.Key.Src, f.Key.SrcPort).String(),
		Dst: netip.AddrPortFrom(f.Key.Dst, f.Key.DstPort).String(), InInterface: r.LinkName(f.Key.Ifindex),
		InVLAN: f.Key.VLAN, OutInterface: r.LinkName(f.OutIfindex), SrcMAC: f.SrcMAC.String(), DstMAC: f.DstMAC.String(),
		VLAN: string(f.VLAN), TTLDecrement: f.DecTTL, MTU: f.MTU, Packets: f.Packets, Bytes: f.Bytes,
		FirstSeen: f.FirstSeen, LastSeen: f.LastSeen}
	if f.VLAN == datapath.VLANPush || f.VLAN == datapath.VLANRewrite {
		a.OutVLAN = f.VLANTCI & 0x0fff
	}
	if f.DSCP >= 0 {
		a.DSCP = &f.DSCP
	}
	if f.SNAT.IsValid() {
		a.SNAT = f.SNAT.String()
	}
	if f.ToUE.IsValid() {
		a.ToUE = f.ToUE.String()
	}
	return a
}
