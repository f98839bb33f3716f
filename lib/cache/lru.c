// SPDX-License-Identifier: BSD-3-Clause
/*
 * lru.c - recency, limits and eviction.
 *
 * Replacement is CLOCK (second chance), not exact LRU.  A hit marks its
 * region used: through the index or with every check, by setting the
 * region's used byte (gdrc_region_used, hit.h: a store only when it was
 * clear, so that hits on a region write nothing once it is marked); a
 * plain host hit through a thread's handle, which does not read the
 * region's line, by counting in the handle's uses, which the hand
 * compares with what it saw last (gdrc_handles_used); a hit through a
 * hazard cell, by a mark in its page-hash bucket, which the hand takes
 * (gdrc_index_used_take).  The clock hand
 * goes round the region arena in index order (arena.c; cached regions
 * are those listed, a bit set at insertion and cleared at removal, both
 * under the write lock): a listed region it finds used is cleared and
 * passed over,
 * one it finds unused and that nobody holds is the victim.  The contract,
 * which test_lru checks: a region used since the hand last passed it is
 * never evicted while an unused one that nobody holds is cached (the
 * hand clears it and goes on; it comes back to it only after a whole
 * round).  A region is inserted unused: a registration made and never
 * hit again goes before one that was.
 * Why not exact LRU: the sorted list it took cost a region 20 bytes of
 * links and tick, and every hit read the cache's tick, a line every
 * insertion wrote (docs/design.md, "Limits and replacement").
 * Regions in use are skipped: a victim is claimed (INVALID set) only
 * while its one direct reference is the index's and no handle has a get
 * outstanding.
 *
 * Limits: the context's (regions, bytes), and each device's (GPU
 * memory), counting registrations alive plus those being registered
 * (reserved).  Ghosts remember why recently removed ranges went, so that
 * a miss can be counted as cold, evicted or invalidated.
 *
 * Locks: everything here runs under cache->lock for writing (asserted),
 * but gdrc_lru_check (either mode), which takes slab_lock.  Callers:
 * region.c (list, unlist, ghosts), inval.c (unlist), miss.c (evict,
 * reserve), cache.c (release_unused, checks).
 */
#include "cache_int.h"

/* r, just inserted, is on the clock, unused. */
void gdrc_lru_list(struct gdrc_cache *c, struct gdrc_region *r)
{
	gdrc_assert_wrlocked(c);
	atomic_store_explicit(&r->used, 0, memory_order_relaxed);
	r->listed = 1;
}

/* r leaves the cache: the hand passes over it from now on. */
void gdrc_lru_unlist(struct gdrc_cache *c, struct gdrc_region *r)
{
	gdrc_assert_wrlocked(c);
	r->listed = 0;
}

/*
 * Claim an unused cached region for eviction: no direct reference, and
 * no handle has a get outstanding.  Pins stay (an idle handle's, the
 * index's, a lookup's): the region is released when the last goes.  A
 * lookup of the page hash may take r at the same time without the lock:
 * if its reference lands first the CAS here fails and r is in use; if
 * INVALID lands first the lookup's fails; a handle it is making from a
 * pin serves a registration that stays valid until its put, as any get
 * racing with an eviction does.
 */
static int region_claim_unused(struct gdrc_region *r)
{
	uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire);

	while (!(w & (REGION_REF_MASK | REGION_INVALID | REGION_DEAD))) {
		if (gdrc_region_held_aside(r))
			return 0;
		if (atomic_compare_exchange_weak_explicit(
			    &r->word, &w, w | REGION_INVALID,
			    memory_order_acq_rel, memory_order_acquire))
			return 1;
	}
	return 0;
}

/* Is arena region r a cached region (on the clock) of device (or any,
 * GDRC_DEVICE_ALL)? */
static int on_clock(const struct gdrc_region *r, int device)
{
	return r->listed && (device == GDRC_DEVICE_ALL ||
			     gdrc_region_ext(r)->device == device);
}

/* The region under the hand, the hand moved on: round the regions the
 * arena handed out (made of them), from the first again after the last.
 * Regions made meanwhile join the next round. */
static struct gdrc_region *clock_step(struct gdrc_cache *c, uint32_t made)
{
	uint32_t i = c->hand < made ? c->hand : 0;

	c->hand = i + 1;
	return gdrc_arena_at(&c->regions, i);
}

/*
 * The hand's next victim of device (or any, GDRC_DEVICE_ALL): a listed
 * region of it that is unused (its used byte clear, else cleared and
 * passed over) and that nobody holds, claimed for eviction (INVALID
 * set).  At most two rounds of the arena: the first may only clear used
 * bytes.  Other devices' regions are passed over as they are.
 */
static struct gdrc_region *lru_claim_victim(struct gdrc_cache *c, int device)
{
	uint32_t made = gdrc_arena_made(&c->regions);
	uint64_t steps = 2 * (uint64_t)made + 1;

	gdrc_assert_wrlocked(c);
	for (uint64_t i = 0; made && i < steps; i++) {
		struct gdrc_region *r = clock_step(c, made);

		if (!on_clock(r, device))
			continue;
		/* All asked, so that each mark is taken. */
		if (atomic_load_explicit(&r->used, memory_order_relaxed) |
		    gdrc_handles_used(r) | gdrc_index_used_take(c, r)) {
			atomic_store_explicit(&r->used, 0,
					      memory_order_relaxed);
			continue;
		}
		if (region_claim_unused(r))
			return r;
	}
	return NULL;
}

/* ====================================================================
 * Ghosts: why a range has no region (the miss-cause counters)
 * ==================================================================== */

void gdrc_ghost_add(struct gdrc_cache *c, struct gdrc_region *r, int cause)
{
	struct gdrc_ghost *g = &c->ghosts[c->ghost_next % GDRC_GHOSTS];

	if (!c->ghost_next || r->start < c->ghost_lo)
		c->ghost_lo = r->start;
	if (!c->ghost_next || r->end > c->ghost_hi)
		c->ghost_hi = r->end;
	c->ghost_next++;
	g->start = r->start;
	g->end = r->end;
	g->cause = cause;
}

/*
 * Why is there no region for [start, end)?  Most recent removal wins.
 * Every cold miss asks, under the write lock: a range outside all that
 * was ever removed, or a cache that removed nothing yet, is answered
 * without looking at the ring (its 256 entries cost a fresh context's
 * insert a quarter of its time).
 */
int gdrc_ghost_cause(struct gdrc_cache *c, uintptr_t start, uintptr_t end)
{
	unsigned n = c->ghost_next < GDRC_GHOSTS ? (unsigned)c->ghost_next :
						 GDRC_GHOSTS;

	if (!n || start >= c->ghost_hi || end <= c->ghost_lo)
		return GDRC_STAT_MISS_COLD;
	for (unsigned i = 1; i <= n; i++) {
		struct gdrc_ghost *g =
			&c->ghosts[(c->ghost_next - i) % GDRC_GHOSTS];

		if (g->start < end && g->end > start)
			return g->cause;
	}
	return GDRC_STAT_MISS_COLD;
}

/* ====================================================================
 * Limits and eviction
 * ==================================================================== */

static int over_limits(struct gdrc_cache *c, uint64_t regions,
		       uint64_t bytes)
{
	uint64_t pinned = atomic_load_explicit(&c->pinned_bytes,
					       memory_order_relaxed);

	return c->nregions + c->reserved_regions + regions >
		       c->p.max_regions ||
	       pinned + c->reserved_bytes + bytes > c->p.max_bytes ||
	       pinned + c->reserved_bytes + bytes < pinned;
}

/* Remove a claimed victim, counted as an eviction of its device. */
static void evict_one(struct gdrc_cache *c, struct gdrc_region *r,
		      struct gdrc_defer *d)
{
	struct gdrc_dev_acct *a = gdrc_dev_acct(c, gdrc_region_ext(r)->device);

	gdrc_region_remove(c, r, GDRC_STAT_MISS_EVICTED, d);
	gdrc_stat_add(c, GDRC_STAT_EVICTIONS, 1);
	if (a)
		atomic_fetch_add_explicit(&a->evictions, 1,
					  memory_order_relaxed);
}

/* Evict LRU-first until [regions, bytes] more fit.  @return 0 or -1. */
int gdrc_evict(struct gdrc_cache *c, uint64_t regions, uint64_t bytes,
	       struct gdrc_defer *d)
{
	struct gdrc_region *r;

	/* Refuse what could never fit rather than flush the cache for it. */
	if (regions > c->p.max_regions || bytes > c->p.max_bytes)
		return -1;
	while (over_limits(c, regions, bytes)) {
		r = lru_claim_victim(c, GDRC_DEVICE_ALL);
		if (!r)
			return -1;
		evict_one(c, r, d);
	}
	return 0;
}

/*
 * Evict device's unused regions, LRU first, until one more registration
 * of bytes fits its limits: each GPU's, and host memory's count of
 * registrations alive (an io_uring buffer table's slots).  The limits
 * count every registration alive; an evicted one that another thread's
 * idle handle still pins stays alive until that thread's next call, so
 * the loop stops once its victims cover the excess rather than when the
 * counts have dropped (which would flush the device and still refuse).
 * @return 0 or -1 (could not fit: nothing more to evict, or too large).
 */
int gdrc_evict_device(struct gdrc_cache *c, int device, uint64_t bytes,
		      struct gdrc_defer *d)
{
	struct gdrc_dev_acct *a = gdrc_dev_acct(c, device);
	uint64_t max_n = device < 0 ? c->p.host_max_regions :
				      c->p.gpu_max_regions;
	uint64_t max_b = device < 0 ? GDRC_LIMIT_NONE : c->p.gpu_max_bytes;
	uint64_t n, used, over_n = 0, over_b = 0;
	struct gdrc_region *r;

	if (!a || (device < 0 && max_n == GDRC_LIMIT_NONE))
		return 0;
	if (bytes > max_b || !max_n)
		return -1;
	n = atomic_load_explicit(&a->regions, memory_order_relaxed) +
	    a->reserved_regions + 1;
	used = atomic_load_explicit(&a->pinned_bytes, memory_order_relaxed) +
	       a->reserved_bytes;
	if (used + bytes < used)
		return -1;
	if (n > max_n)
		over_n = n - max_n;
	if (used + bytes > max_b)
		over_b = used + bytes - max_b;
	while (over_n || over_b) {
		uint64_t len;

		r = lru_claim_victim(c, device);
		if (!r)
			return -1;
		len = gdrc_region_reg_len(r);
		over_n -= over_n ? 1 : 0;
		over_b -= over_b < len ? over_b : len;
		evict_one(c, r, d);
	}
	return 0;
}

/* Under the lock: count (sign 1) or uncount (-1) a registration of
 * bytes of device's memory in progress. */
void gdrc_dev_reserve(struct gdrc_cache *c, int device, uint64_t bytes,
		      int sign)
{
	struct gdrc_dev_acct *a = gdrc_dev_acct(c, device);

	gdrc_assert_wrlocked(c);
	if (!a)
		return;
	a->reserved_bytes += sign > 0 ? bytes : -bytes;
	a->reserved_regions += (uint64_t)sign;
}

/* Remove every unused region of device, in one round of the hand.
 * @return how many. */
unsigned gdrc_evict_all_unused(struct gdrc_cache *c, int device,
			       struct gdrc_defer *d)
{
	uint32_t made = gdrc_arena_made(&c->regions);
	unsigned n = 0;

	gdrc_assert_wrlocked(c);
	for (uint32_t i = 0; i < made; i++) {
		struct gdrc_region *r = clock_step(c, made);

		if (!on_clock(r, device) || !region_claim_unused(r))
			continue;
		evict_one(c, r, d);
		n++;
	}
	return n;
}

/* gdrc_lru_check's look at one region of the arena. */
struct lru_check {
	uint64_t listed;
	int ret;
};

static void lru_check_fn(struct gdrc_region *r, void *arg)
{
	struct lru_check *k = arg;
	uint64_t w;

	if (!r->listed)
		return;
	k->listed++;
	w = atomic_load_explicit(&r->word, memory_order_relaxed);
	if ((w & (REGION_INVALID | REGION_DEAD)) || !(w & REGION_PIN_MASK))
		k->ret = -6;
}

/*
 * Codes: -5 the listed regions are not nregions, -6 a listed region is
 * invalid or without the index's pin.  Caller holds the lock (either
 * mode) or owns the cache.
 */
int gdrc_lru_check(struct gdrc_cache *c)
{
	struct lru_check k = { 0 };

	gdrc_slab_lock(c);
	gdrc_arena_each(&c->regions, lru_check_fn, &k);
	gdrc_slab_unlock(c);
	if (k.ret)
		return k.ret;
	return k.listed == c->nregions ? 0 : -5;
}
