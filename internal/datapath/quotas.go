package datapath

import (
	"fmt"

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
// one otherwise. It returns the slots by URR id and those it took, which the caller releases
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
		for _, p := range rs.PDRs {
			q := p.Quota
			if q == nil {
				continue
			}
			if done, ok := out[q.URR]; ok {
				if done.quota != *q {
					return fail(fmt.Errorf("URR %d: PDRs give it different quotas", q.URR))
				}
				continue
			}
			if old, ok := prev[q.URR]; ok && old.quota == *q {
				out[q.URR] = old
				continue
			}
			slot, err := d.quotaSlots.alloc()
			if err != nil {
				return fail(fmt.Errorf("URR %d: quota table full (limits.max_sessions): %w", q.URR, err))
			}
			taken = append(taken, slot)
			if err := d.objs.XupfQuotas.Put(slot, quotaEntry(*q)); err != nil {
				return fail(fmt.Errorf("URR %d: write quota: %w", q.URR, err))
			}
			out[q.URR] = ownedQuota{slot: slot, quota: *q}
		}
	}
	return out, taken, nil
}

func (d *Datapath) releaseQuotas(slots []uint32) {
	for _, s := range slots {
		d.quotaSlots.release(s)
	}
}
