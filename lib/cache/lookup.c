// SPDX-License-Identifier: BSD-3-Clause
/*
 * lookup.c - a hit that the fast path (hit.h) could not serve: the
 * index path.
 *
 *   1. A queued event sends the get to the miss path, which drains the
 *      queue first (inval.c); a fork child gets GDRC_ERR_FORK.
 *   2. This thread's handles on regions that left the cache are let go
 *      (remembered and parked: handle.c).
 *   3. The index finds a region whose key covers the request with the
 *      rights asked and whose kernel word has not moved, and takes a
 *      direct reference on it, and marks it used: first the page hash,
 *      without a lock, then, if that found nothing, the index under
 *      cache->lock for reading (index.c says why both are exact); but
 *      where the page hash saw no entry of the request's granules and
 *      the tree is empty, a get goes straight to the miss path, whose
 *      own search under the write lock comes first.
 *   4. Outside the lock: a GPU region's tag check (BUFFER_ID of each
 *      segment the request touches); a failure removes it (write lock).
 *   5. The hit is counted and served (handle.c): through this thread's
 *      handle on the region, which the fast path then finds, if the
 *      thread hit it through the index lately; else as a direct
 *      reference, which costs no handle for an access that does not
 *      repeat.
 * Before all that, as soon as this thread's entries and parked table
 * missed, a plain one-page region it would hold directly is served
 * through a hazard cell (gdrc_cache_get_cell, cell.c): the
 * bucket's entry says all a hit checks, and the region's line is not
 * read.  Gets that reach the index step by the other ways (more checks,
 * flags) are served as below.
 *
 * No CUDA call, allocation or backend call under the lock.  The fast
 * path's own checks (gdrc_cache_hit_ok) and this path's agree: both
 * refuse a region that is INVALID, kernel-stale, or fails its tags.
 * Callers: the API layer (gdrc_cache_lookup, gdrc_cache_peek), miss.c
 * (gdrc_find_cover, gdrc_hit, gdrc_hit_done under its write lock).
 */
#include "cache_int.h"

/* Does r serve the request: enough rights, its kernel word unmoved, and
 * (a->req) made for the memory the driver reports there now? */
static int cover_ok_fn(struct gdrc_region *r, void *arg)
{
	const struct gdrc_cover_arg *a = arg;

	if ((a->access & ~r->access) || gdrc_region_kstale(a->c, r))
		return 0;
	return !a->req || gdrc_same_memory(r, a->req);
}

/* A region covering [start, end) that a accepts.  Lock held, either
 * mode. */
struct gdrc_region *gdrc_find_cover(struct gdrc_cache *c, uintptr_t start,
				    uintptr_t end,
				    const struct gdrc_cover_arg *a)
{
	gdrc_assert_locked(c);
	return gdrc_index_find_cover(c, start, end, cover_ok_fn, (void *)a);
}

/*
 * Hold a region found in the index (lock held: it is cached) as hold says
 * (a pin or a direct reference: gdrc_hold_for), and mark it used as a
 * fast hit does.
 */
void gdrc_hit(struct gdrc_region *r, uint64_t hold)
{
	atomic_fetch_add_explicit(&r->word, hold, memory_order_acquire);
	gdrc_region_used(r);
}

/* Count a hit and serve it as it is held. */
struct gdrc_mr *gdrc_hit_done(struct gdrc_cache *c, struct gdrc_region *r,
			      uint64_t hold)
{
	gdrc_tls_count_hit(c);
	return gdrc_serve_hit(c, r, hold);
}

/* gdrc_cache_peek's hold: a pin, never served. */
static uint64_t hold_pin(struct gdrc_cache *c, const struct gdrc_region *r,
			 uintptr_t start)
{
	(void)c;
	(void)r;
	(void)start;
	return REGION_PIN_ONE;
}

/* Outside the lock: does a GPU region still hold its memory where
 * [start, end) touches it? */
static int tag_valid(struct gdrc_cache *c, struct gdrc_region *r,
		     uintptr_t start, uintptr_t end, uint64_t hold)
{
	int shard;

	if (!r->tag_check)
		return 1;
	shard = gdrc_tls_shard();
	gdrc_shard_inc(&c->shards[shard].tag_checks, shard);
	if (gdrc_region_tags_ok(c, r, start, end))
		return 1;
	gdrc_invalidate_region(c, r, GDRC_STAT_INV_TAG_CHECK);
	gdrc_region_let_go(c, r, hold);
	return 0;
}

/*
 * A hit held through a hazard cell (cell.c), for a get none of this
 * thread's four entries covers: the first entry of start's page is a
 * plain one-page region with the rights, one this thread would hold as
 * a direct reference (gdrc_hold_direct: not one it takes again and
 * again, which a handle serves better), and its bucket did not change
 * while the cell was stored.  Nothing of the region is read.  The
 * caller asked host_ok first: the fast path's order (gdrc_cache_hit_ok),
 * no unmap in its window, then no event queued; a drain takes the
 * region out of its bucket before it clears pending, so the bucket read
 * after shows it gone.  The look finding nothing of the page at all is
 * told apart (-1): the caller's index step would only find nothing
 * again.
 */
int gdrc_cache_get_cell(struct gdrc_cache *c, uintptr_t start,
			uintptr_t end, uint32_t access, struct gdrc_mr **mr_p)
{
	struct gdrc_ix_ticket tk;
	struct gdrc_region *r;
	struct gdrc_cell *cell;
	int shard, absent;

	if (atomic_load_explicit(&c->invq.pending, memory_order_acquire) ||
	    atomic_load_explicit(&c->forked, memory_order_relaxed))
		return 0;
	/* The shard first: it decides whether this thread has the exit
	 * hook that gives its cells back. */
	shard = gdrc_tls_shard();
	r = gdrc_index_find_plain(c, start, end, access, &tk, &absent);
	if (!r)
		return -absent;
	if (!gdrc_hold_direct(c, r, start))
		return 0;
	cell = gdrc_cell_take(c, r);
	if (!cell)
		return 0;
	if (!gdrc_index_ticket_valid(c, &tk)) {
		gdrc_cell_drop(c, cell);
		return 0;
	}
	gdrc_hit_seen(r, start);
	gdrc_shard_inc(&c->shards[shard].hits, shard);
	*mr_p = &cell->pub;
	return 1;
}

/* The index path's search: a valid covering region, held as hold_of
 * says (*hold_p).  for_get: a miss goes on to the miss path, which
 * searches again under the write lock, so a page hash that saw nothing
 * there answers alone; a query (gdrc_cache_peek) has no second search,
 * and asks under the lock whatever the page hash answered. */
static int index_find(struct gdrc_cache *c, uintptr_t start, uintptr_t end,
		      uint32_t access, gdrc_hold_fn hold_of, int for_get,
		      struct gdrc_region **r_p, uint64_t *hold_p)
{
	struct gdrc_cover_arg a = { .c = c, .access = access };
	struct gdrc_region *r;
	uint64_t hold = 0;
	int absent;

	if (atomic_load_explicit(&c->forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	if (atomic_load_explicit(&c->invq.pending, memory_order_acquire))
		return 0; /* the miss path drains first */
	gdrc_tls_drop_invalid(c);
	r = gdrc_index_find_fast(c, start, end, access, hold_of, &hold,
				 &absent);
	if (r) {
		gdrc_region_used(r);
	} else if (absent && for_get) {
		/* Nothing there: the miss path looks again under the write
		 * lock before it registers (a region cached meanwhile, or
		 * one a table's growth hid from this read, is served
		 * there), so a look under the read lock would repeat it. */
		return 0;
	} else {
		gdrc_stat_add(c, GDRC_STAT_TREE_LOOKUPS, 1);
		gdrc_cache_rdlock(c);
		r = gdrc_find_cover(c, start, end, &a);
		if (r) {
			hold = hold_of(c, r, start);
			gdrc_hit(r, hold);
		}
		gdrc_cache_unlock(c);
	}
	if (!r || !tag_valid(c, r, start, end, hold))
		return 0;
	*r_p = r;
	*hold_p = hold;
	return 1;
}

int gdrc_cache_peek(struct gdrc_cache *c, uintptr_t start, uintptr_t end,
		    struct gdrc_region **r_p)
{
	uint64_t hold;

	return index_find(c, start, end, 0, hold_pin, 0, r_p, &hold);
}

int gdrc_cache_lookup(struct gdrc_cache *c, uintptr_t start, uintptr_t end,
		      uint32_t access, struct gdrc_mr **mr_p)
{
	struct gdrc_region *r;
	uint64_t hold;
	int ret = index_find(c, start, end, access, gdrc_hold_for, 1, &r,
			     &hold);

	if (ret == 1)
		*mr_p = gdrc_hit_done(c, r, hold);
	return ret;
}

int gdrc_cache_reget_checked(struct gdrc_cache *c, struct gdrc_region *r,
			     const struct gdrc_tls *t, uintptr_t start,
			     uintptr_t end, int (*host_ok)(void))
{
	_Atomic uint64_t *count =
		gdrc_cache_hit_ok(c, r, t, start, end, host_ok);

	if (!count)
		return 0;
	gdrc_cache_hit_count(c, r, t, count);
	return 1;
}
