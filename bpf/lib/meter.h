/* Rate meters: the arithmetic shared by QER enforcement (qos.h) and the policer (policer.h).
 * A meter admits packets at a rate (bytes/s) with a burst (bytes), by one of three algorithms
 * chosen at load time (cfg_meter_algo), on one of three clocks (cfg_clock).
 *
 * Exactness. Rates up to 1 Tbit/s (1.25e11 bytes/s; QER MBRs from 1 kbit/s) and bursts up to
 * 4.6 GB (MaxBurst, internal/meter) are computed without overflow or rounding drift:
 *  - token bucket: tokens are kept in byte-nanoseconds (bytes x 1e9), so a refill adds
 *    elapsed_ns x rate exactly and a packet takes len x 1e9: no division on either path, and
 *    the refill is clamped to the room left before multiplying;
 *  - sliding window: times are kept in 1/1024 ns, so a packet's transmission time
 *    (len x 1e9 x 1024 / rate) loses less than 1/1024 ns to truncation (0.02 % of the 5 ns a
 *    64-byte packet takes at 100 Gbit/s); the origin moves forward now and then (rebase) so
 *    the scaled times stay far from 2^63;
 *  - fixed window: byte counts against a per-window budget of burst bytes over windows of
 *    burst / rate.
 *
 * Concurrency. One meter may be hit from every CPU (a per-CPU meter would multiply the rate by
 * the number of CPUs). A token bucket's packets are paid from a per-CPU credit (struct
 * meter_credit) that takes tokens from the shared bucket a chunk (a 64th of the burst) at a
 * time: a packet the credit covers costs no clock read and no atomic on the shared line, which
 * here cost about 15 and 20 ns a packet. The price is a bound, not a drift: each CPU may hold
 * less than a chunk, so over any interval a meter passes at most burst + rate x time + one
 * chunk per CPU, and credit a CPU holds while idle waits for that CPU's next packet. A packet
 * of a 64th of the burst or more takes just what it misses, so a burst of a few packets stays
 * exact packet by packet. The take is an atomic add, undone when it overdraws. The bucket
 * refills without the lock: the CPU whose compare-and-swap moves the refill time adds the
 * tokens of the time it moved over, so no time is counted twice. The windows' atomic add is
 * per packet, and their realignment and rebase happen under the meter's spin lock. */
#ifndef XUPF_METER_H
#define XUPF_METER_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

enum meter_algo {
	METER_TOKEN_BUCKET = 0,
	METER_SLIDING_WINDOW = 1,
	METER_FIXED_WINDOW = 2,
};

enum meter_clock {
	CLOCK_KTIME = 0,   /* bpf_ktime_get_ns */
	CLOCK_COARSE = 1,  /* bpf_ktime_get_coarse_ns: cheaper, advances once per tick */
	CLOCK_USER = 2,    /* xupf_clock[0], written by the daemon (or a test) */
};

/* Load-time settings: the verifier drops the algorithms and clocks not chosen. */
volatile const __u32 cfg_meter_algo = METER_TOKEN_BUCKET;
volatile const __u32 cfg_clock = CLOCK_KTIME;

#define NSEC_PER_SEC 1000000000ULL
/* Sliding-window times are in 1/2^SW_SHIFT ns; the origin moves when it is SW_REBASE_NS old. */
#define SW_SHIFT 10
#define SW_REBASE_NS (1ULL << 40)

/* The user clock: one u64 of nanoseconds. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_clock SEC(".maps");

/* One meter. Go writes rate and burst, the derived fields and a full bucket; the datapath the
 * rest. Every algorithm's state is here so that the algorithm is a load-time choice. */
struct meter {
	struct bpf_spin_lock lock;
	__u32 action;     /* policer contracts only: enum police_action (policer.h) */
	__u64 rate;       /* bytes per second, at least 1 */
	__u64 burst;      /* bytes */
	/* token bucket */
	__s64 tokens;     /* byte-nanoseconds; at most burst x 1e9 */
	__u64 last;       /* clock of the last refill */
	/* The least time between refills, a 64th of burst / rate within [1 us, 1 ms] (Go
	 * computes it): a refill is an atomic compare-and-swap and add beside the credit's own
	 * atomic take, so a meter drawn on more often than this refills once per interval, not
	 * once per take. No token is lost (a refill adds the whole time since the last);
	 * tokens just come in steps of at most a 64th of the burst. */
	__u64 refill;
	__s64 chunk;      /* byte-nanoseconds a CPU's credit takes at once: burst x 1e9 / 64 */
	/* sliding window (the papers' algorithm: the window's start moves by each packet's
	 * transmission time and may lag the clock by at most the window, burst / rate) */
	__u64 base;       /* clock origin of start */
	__s64 start;      /* window start, (clock - base) << SW_SHIFT */
	__u64 window;     /* burst / rate, << SW_SHIFT; Go computes it */
	/* fixed window */
	__u64 wstart;     /* clock at which the current window began */
	__u64 wlen;       /* window length in ns, burst / rate; Go computes it */
	__s64 count;      /* bytes admitted in the current window */
};

/* One CPU's credit of a token bucket: byte-nanoseconds taken from the bucket, not spent yet.
 * Go zeroes it with every fresh meter. */
struct meter_credit {
	__s64 tokens;
};

/* A packet reads the clock once, when its first meter needs it: meter_time on a u64 that
 * starts as METER_NO_TIME (no clock gives it: it is 584 years of nanoseconds). */
#define METER_NO_TIME (~0ULL)

static __always_inline __u64 meter_now(void)
{
	if (cfg_clock == CLOCK_USER) {
		__u32 key = 0;
		__u64 *t = bpf_map_lookup_elem(&xupf_clock, &key);

		return t ? *t : 0;
	}
	if (cfg_clock == CLOCK_COARSE)
		return bpf_ktime_get_coarse_ns();
	return bpf_ktime_get_ns();
}

static __always_inline __u64 meter_time(__u64 *now)
{
	if (*now == METER_NO_TIME)
		*now = meter_now();
	return *now;
}

/* tb_refill adds the tokens earned since the last refill, capped at the burst, when the
 * meter's refill interval has passed. Of the CPUs that get here at once, the one whose
 * compare-and-swap moves last to now adds the tokens of [last, now); the others go on with the
 * tokens there are. A clock that went backwards restarts the count from now. */
static __always_inline void tb_refill(struct meter *m, __u64 now)
{
	__u64 last = m->last, add, elapsed;
	__s64 room;

	if (now >= last && now - last < m->refill)
		return;
	if (__sync_val_compare_and_swap(&m->last, last, now) != last || now < last)
		return;
	elapsed = now - last;
	room = (__s64)(m->burst * NSEC_PER_SEC) - m->tokens;
	if (room > 0) {
		/* elapsed x rate only when it cannot exceed the room (so cannot overflow) */
		add = elapsed >= (__u64)room / m->rate + 1 ? (__u64)room : elapsed * m->rate;
		__sync_fetch_and_add(&m->tokens, (__s64)add);
	}
}

/* meter_spend pays a packet of len bytes from c, when c holds enough: 1 if it did. This is a
 * token bucket's whole per-packet cost while the credit lasts. */
static __always_inline int meter_spend(struct meter_credit *c, __u32 len)
{
	__s64 need = (__s64)len * (__s64)NSEC_PER_SEC;

	if (c->tokens < need)
		return 0;
	c->tokens -= need;
	return 1;
}

/* tb_pass pays a packet of len bytes from c, topping c up from the bucket when it falls
 * short: by a chunk while the bucket holds one, else by just what the packet misses (a
 * bucket near empty is shared packet by packet, as without credits). */
static __always_inline int tb_pass(struct meter *m, struct meter_credit *c, __u32 len, __u64 *now)
{
	__s64 need = (__s64)len * (__s64)NSEC_PER_SEC, miss, take;

	if (meter_spend(c, len))
		return 1;
	miss = need - c->tokens;
	tb_refill(m, meter_time(now));
	take = miss;
	/* A plain read: it only picks the amount; the atomic add below decides. */
	if (m->chunk > miss && m->tokens >= m->chunk)
		take = m->chunk;
	if (__sync_fetch_and_add(&m->tokens, -take) < take) {
		__sync_fetch_and_add(&m->tokens, take);
		return 0;
	}
	c->tokens += take - need;
	return 1;
}

/* sw_tx is a packet's transmission time at the meter's rate, in 1/2^SW_SHIFT ns. */
static __always_inline __s64 sw_tx(const struct meter *m, __u32 len)
{
	return (__s64)(((__u64)len * NSEC_PER_SEC << SW_SHIFT) / m->rate);
}

static __always_inline int sw_pass(struct meter *m, __u32 len, __u64 now)
{
	__s64 tx = sw_tx(m, len), t, start;

	if (now < m->base || now - m->base >= SW_REBASE_NS) {
		/* Move the origin to now, keeping start where it is in absolute time (a start more
		 * than a window behind is as good as a window behind). */
		bpf_spin_lock(&m->lock);
		if (now < m->base) {
			m->base = now;
			m->start = -(__s64)m->window;
		} else if (now - m->base >= SW_REBASE_NS) {
			__u64 delta = now - m->base;

			/* A whole window (or more) since the origin: the start is a window behind now
			 * either way, and delta may be too large to shift (a fresh meter's origin is
			 * 0, and the clock is the time since boot). */
			if (delta >= (m->window >> SW_SHIFT))
				m->start = -(__s64)m->window;
			else
				m->start -= (__s64)(delta << SW_SHIFT);
			if (m->start < -(__s64)m->window)
				m->start = -(__s64)m->window;
			m->base = now;
		}
		bpf_spin_unlock(&m->lock);
	}
	t = (__s64)((now - m->base) << SW_SHIFT);
	start = m->start;
	if (start > t) {
		/* Only a clock that went backwards puts the start after now: no credit until the
		 * clock passes the start again would starve the meter, so the start comes back to
		 * now (no burst either, as the token bucket keeps its tokens). */
		bpf_spin_lock(&m->lock);
		if (m->start > t)
			m->start = t;
		bpf_spin_unlock(&m->lock);
		start = t;
	}
	if (start + tx > t)
		return 0; /* not enough time left of the window's start for this packet */
	if (start + (__s64)m->window < t) {
		/* The window fell behind: it restarts ending at now (the burst is available). */
		bpf_spin_lock(&m->lock);
		if (m->start + (__s64)m->window < t)
			m->start = t - (__s64)m->window;
		bpf_spin_unlock(&m->lock);
	}
	if (__sync_fetch_and_add(&m->start, tx) + tx > t) {
		__sync_fetch_and_add(&m->start, -tx);
		return 0;
	}
	return 1;
}

static __always_inline int fw_pass(struct meter *m, __u32 len, __u64 now)
{
	if (now < m->wstart || now - m->wstart >= m->wlen) {
		bpf_spin_lock(&m->lock);
		if (now < m->wstart) {
			m->wstart = now;
			m->count = 0;
		} else if (now - m->wstart >= m->wlen) {
			/* Windows stay aligned to the first one: a late packet does not shift them. */
			m->wstart = now - (now - m->wstart) % m->wlen;
			m->count = 0;
		}
		bpf_spin_unlock(&m->lock);
	}
	if (__sync_fetch_and_add(&m->count, len) + len > (__s64)m->burst) {
		__sync_fetch_and_add(&m->count, -(__s64)len);
		return 0;
	}
	return 1;
}

/* meter_pass charges a packet of len bytes to m, on this CPU's credit c of it (token bucket
 * only), at the packet's clock *now (meter_time), and says whether it conforms (1) or not (0,
 * nothing charged). */
static __always_inline int meter_pass(struct meter *m, struct meter_credit *c, __u32 len, __u64 *now)
{
	if (cfg_meter_algo == METER_SLIDING_WINDOW)
		return sw_pass(m, len, meter_time(now));
	if (cfg_meter_algo == METER_FIXED_WINDOW)
		return fw_pass(m, len, meter_time(now));
	return tb_pass(m, c, len, now);
}

/* meter_refund gives back what meter_pass charged, for a packet another meter refused: a token
 * bucket's to the bucket, which every CPU sees (refunds are rare, credits are per CPU). */
static __always_inline void meter_refund(struct meter *m, __u32 len)
{
	if (cfg_meter_algo == METER_SLIDING_WINDOW)
		__sync_fetch_and_add(&m->start, -sw_tx(m, len));
	else if (cfg_meter_algo == METER_FIXED_WINDOW)
		__sync_fetch_and_add(&m->count, -(__s64)len);
	else
		__sync_fetch_and_add(&m->tokens, (__s64)len * (__s64)NSEC_PER_SEC);
}

#endif
