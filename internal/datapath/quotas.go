package datapath

import (
	"fmt"
	"maps"
	"slices"

	"github.com/xupf/xupf/internal/rules"
)

// ownedQuota is a quota slot an owner holds and the quota it was written with.
type ownedQuota struct {
	slot  uint32
	quota rules.Quota
}

func (q ownedQuota) slotIndex() uint32 { return q.slot }

// quotaEntry is q as a fresh xupf_quotas value: nothing used yet.
func quotaEntry(q rules.Quota) xupfQuota {
	var e xupfQuota
	e.Limit[xupfQuotaVolumeQUOTA_UL] = q.Uplink
	e.Limit[xupfQuotaVolumeQUOTA_DL] = q.Downlink
	e.Limit[xupfQuotaVolumeQUOTA_TOTAL] = q.Total
	return e
}

// assignQuotas gives every URR quota of sets its slot: the owner's existing one when the
// quota (grant included) did not change, so that its count carries on, a freshly written
// one otherwise (with the count of an earlier run's entry of the same quota). It returns the slots by URR id and those it took, which the caller releases
// if the install fails. The caller holds d.mu.
func (d *Datapath) assignQuotas(owner uint64, sets []rules.RuleSet) (map[uint32]ownedQuota, []uint32, error) {
	prev := d.quotas[owner]
	out := map[uint32]ownedQuota{}
	var taken []uint32
	fail := func(err error) (map[uint32]ownedQuota, []uint32, error) {
		d.releaseQuotas(taken)
		return nil, nil, err
	}
	for _, rs := range sets {
		for i, p := range rs.PDRs {
			for j, q := range p.Quotas {
				if done, ok := out[q.URR]; ok {
					if done.quota != q {
						return fail(fmt.Errorf("URR %d: PDRs give it different quotas", q.URR))
					}
					continue
				}
				if old, ok := prev[q.URR]; ok && old.quota == q {
					out[q.URR] = old
					continue
				}
				slot, err := d.quotaSlots.alloc()
				if err != nil {
					return fail(fmt.Errorf("URR %d: quota table full (limits.max_sessions): %w", q.URR, err))
				}
				taken = append(taken, slot)
				e := quotaEntry(q)
				e.Used = d.adoptedQuotaUsed(rs, i, j, e)
				if err := d.objs.XupfQuotas.Put(slot, e); err != nil {
					return fail(fmt.Errorf("URR %d: write quota: %w", q.URR, err))
				}
				out[q.URR] = ownedQuota{slot: slot, quota: q}
			}
		}
	}
	return out, taken, nil
}

func (d *Datapath) releaseQuotas(slots []uint32) {
	for _, s := range slots {
		d.quotaSlots.release(s)
	}
}

// pdrQuotas sets the quota fields of a PDR entry for its quotas (slots by URR id): one is
// read directly (PDR_U_QUOTA); several through a list written to a quota slot of its own
// (PDR_U_QUOTAS), which it returns (with list true) for the set to free with it.
func (d *Datapath) pdrQuotas(entry *xupfPdr, qs []rules.Quota, slots map[uint32]ownedQuota) (slot uint32, list bool, err error) {
	switch {
	case len(qs) == 0:
		return 0, false, nil
	case len(qs) == 1:
		entry.Usage |= uint8(xupfPdrUsagePDR_U_QUOTA)
		entry.Quota = slots[qs[0].URR].slot
		return 0, false, nil
	}
	var l xupfQuotaList
	if len(qs) > len(l.Slots) {
		return 0, false, fmt.Errorf("%d URRs with quotas; at most %d", len(qs), len(l.Slots))
	}
	for i, q := range qs {
		l.Slots[i] = slots[q.URR].slot
	}
	l.N = uint32(len(qs))
	slot, err = d.quotaSlots.alloc()
	if err != nil {
		return 0, false, fmt.Errorf("quota table full (limits.max_sessions): %w", err)
	}
	if err := d.objs.XupfQuotaLists.Put(slot, l); err != nil {
		d.quotaSlots.release(slot)
		return 0, false, fmt.Errorf("write quota list: %w", err)
	}
	entry.Usage |= uint8(xupfPdrUsagePDR_U_QUOTA | xupfPdrUsagePDR_U_QUOTAS)
	entry.Quota = slot
	return slot, true, nil
}

// QuotaUsed is what the datapath counted against each URR quota of owner, in URR id order:
// after a restart it is what the earlier run counted too (adoptedQuotaUsed), which usage
// reporting starts from.
func (d *Datapath) QuotaUsed(owner uint64) ([]rules.QuotaUse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []rules.QuotaUse
	for _, urr := range slices.Sorted(maps.Keys(d.quotas[owner])) {
		q := d.quotas[owner][urr]
		var e xupfQuota
		if err := d.objs.XupfQuotas.Lookup(q.slot, &e); err != nil {
			return nil, fmt.Errorf("session %d: URR %d: read quota: %w", owner, urr, err)
		}
		out = append(out, rules.QuotaUse{URR: urr, Grant: q.quota.Grant,
			Uplink: e.Used[xupfQuotaVolumeQUOTA_UL], Downlink: e.Used[xupfQuotaVolumeQUOTA_DL]})
	}
	return out, nil
}
