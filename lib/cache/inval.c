// SPDX-License-Identifier: BSD-3-Clause
/*
 * inval.c - removing what was freed.
 *
 * Host hooks and the CUDA hooks post ranges to the cache's invq (hook
 * context: gdrc_cache_post_event, which only queues).  The queue's
 * pending word sends every get off the fast path and every lookup to the
 * miss path, which drains the queue under the write lock before it looks
 * anything up; pending is cleared only after the ranges were applied, so
 * nothing unmapped before a get's first load is ever served.  A host
 * range removes every region whose key overlaps it; a CUDA free removes
 * the regions made for that allocation (matched by allocation range,
 * since a GPU key may round into a neighbour's 64 KiB page).  A range
 * that overlaps a registration still in progress marks it stale, and
 * the miss throws that registration away.
 *
 * Locks: cache->lock for writing around every change (asserted in the
 * *_locked functions and gdrc_drain); invq has its own spinlock.
 * Callers: lookup.c (a failed tag check), miss.c, cache.c, and the API
 * layer (invalidate, post_event, stop_host_caching, mark_forked).
 */
#include "cache_int.h"

/* ====================================================================
 * Removal of overlapping regions (under cache->lock, write)
 * ==================================================================== */

/*
 * Walks may not change the index: collect, then remove.  A collected
 * region leaves the clock at once (it is found once), and its link makes
 * the list.
 */
void gdrc_collect_push(struct gdrc_collect *col, struct gdrc_region *r)
{
	gdrc_lru_unlist(r->cache, r);
	r->link = gdrc_region_link_to(r->cache, col->list);
	col->list = r;
}

int gdrc_collect_fn(struct gdrc_region *r, void *arg)
{
	struct gdrc_collect *col = arg;

	if (col->subsume &&
	    (r->start < col->start || r->end > col->end ||
	     (r->access & ~col->access) || !gdrc_same_memory(r, col->req)))
		return 0;
	if (col->alloc_match) {
		const struct gdrc_region_ext *x = gdrc_region_ext(r);

		if (!(x->alloc_start < col->end && x->alloc_end > col->start))
			return 0;
	}
	gdrc_collect_push(col, r);
	return 0;
}

unsigned gdrc_remove_collected(struct gdrc_cache *c, struct gdrc_collect *col,
			       int ghost, struct gdrc_defer *d)
{
	struct gdrc_region *r, *next;
	unsigned n = 0;

	for (r = col->list; r; r = next) {
		next = gdrc_region_linked(c, r->link);
		gdrc_region_take_out(c, r, ghost, d);
		n++;
	}
	col->list = NULL;
	return n;
}

static void inflight_mark_stale(struct gdrc_cache *c, uintptr_t start,
				uintptr_t end)
{
	for (struct gdrc_inflight *f = c->inflight; f; f = f->next)
		if (f->start < end && f->end > start)
			f->stale = 1;
}

/* [start, end) of the private runs remembered for misses (miss.c) is
 * no longer known to be private; the rest of each run still is.  A run
 * cut in two keeps its lower part in place and its upper part in the
 * entry replaced next. */
static void vmemo_forget(struct gdrc_cache *c, uintptr_t start,
			 uintptr_t end)
{
	for (unsigned i = 0; i < GDRC_VMEMO; i++) {
		struct gdrc_vmemo *m = &c->vmemo[i];
		uintptr_t top = m->end;

		if (!(m->start < end && start < top))
			continue;
		if (start <= m->start) {
			/* Nothing below the cut: the entry keeps what is
			 * above it, if anything. */
			m->start = end < top ? end : top;
			continue;
		}
		m->end = start;
		gdrc_vmemo_add(c, end, top);
	}
}

void gdrc_invalidate_locked(struct gdrc_cache *c, uintptr_t start,
			      uintptr_t end, int source, struct gdrc_defer *d)
{
	struct gdrc_collect col = { 0 };
	unsigned n;

	gdrc_assert_wrlocked(c);
	if (source != GDRC_STAT_INV_EXPLICIT ||
	    c->p.host_private_memo == GDRC_VMEMO_EXPLICIT)
		vmemo_forget(c, start, end);
	gdrc_index_overlap(c, start, end, gdrc_collect_fn, &col);
	n = gdrc_remove_collected(c, &col, GDRC_STAT_MISS_INVALIDATED, d);
	inflight_mark_stale(c, start, end);
	gdrc_stat_add(c, GDRC_STAT_INVALIDATIONS, n);
	gdrc_stat_add(c, source, n);
}

/*
 * CUDA allocations overlapping [start, end) were freed (a free by base
 * address posts [base, base + 1)): drop every region made for one of
 * them, and only those.  A GPU region's key can reach past its own small
 * allocation into a neighbour's 64 KiB page, so keys are not compared;
 * allocation ranges are.  Each region's key lies within alloc_span_max
 * of its allocation, which bounds the index walk.
 */
static void invalidate_allocs_locked(struct gdrc_cache *c, uintptr_t start,
				     uintptr_t end, struct gdrc_defer *d)
{
	struct gdrc_collect col = { .alloc_match = 1, .start = start,
				    .end = end };
	uintptr_t span = c->alloc_span_max;
	unsigned n;

	gdrc_assert_wrlocked(c);
	gdrc_index_overlap(c, start > span ? start - span : 0,
			   end < UINTPTR_MAX - span ? end + span : UINTPTR_MAX,
			   gdrc_collect_fn, &col);
	n = gdrc_remove_collected(c, &col, GDRC_STAT_MISS_INVALIDATED, d);
	for (struct gdrc_inflight *f = c->inflight; f; f = f->next)
		if (f->alloc_start < end && f->alloc_end > start)
			f->stale = 1;
	gdrc_stat_add(c, GDRC_STAT_INVALIDATIONS, n);
	gdrc_stat_add(c, GDRC_STAT_INV_CUDA_HOOK, n);
}

/* Apply queued host unmaps.  Must run before any lookup under the write
 * lock, so that nothing unmapped before this call is found. */
void gdrc_drain(struct gdrc_cache *c, struct gdrc_defer *d)
{
	struct gdrc_invq_range q[GDRC_INVQ_SLOTS];
	uint64_t seen;
	unsigned n;
	int all;

	gdrc_assert_wrlocked(c);
	if (!atomic_load_explicit(&c->invq.pending, memory_order_acquire))
		return;
	n = gdrc_invq_take(&c->invq, q, &all, &seen);
	if (all)
		gdrc_invalidate_locked(c, 0, UINTPTR_MAX,
				       GDRC_STAT_INV_HOST_HOOK, d);
	for (unsigned i = 0; i < n; i++) {
		if (q[i].cls == GDRC_INVQ_CUDA)
			invalidate_allocs_locked(c, q[i].start, q[i].end, d);
		else
			gdrc_invalidate_locked(c, q[i].start, q[i].end,
					       GDRC_STAT_INV_HOST_HOOK, d);
	}
	gdrc_invq_done(&c->invq, seen);
}

/* Remove one region if it is still cached (tag check failed). */
void gdrc_invalidate_region(struct gdrc_cache *c, struct gdrc_region *r,
			    int source)
{
	struct gdrc_defer d = { 0 };

	gdrc_cache_wrlock(c);
	gdrc_drain(c, &d);
	if (!(atomic_load_explicit(&r->word, memory_order_acquire) &
	      REGION_INVALID)) {
		gdrc_region_remove(c, r, GDRC_STAT_MISS_INVALIDATED, &d);
		gdrc_stat_add(c, GDRC_STAT_INVALIDATIONS, 1);
		gdrc_stat_add(c, source, 1);
	}
	gdrc_cache_unlock_release(c, &d);
}
/* ====================================================================
 * Entry points: explicit invalidation, hook events, fork
 * ==================================================================== */

gdrc_status_t gdrc_cache_invalidate(struct gdrc_cache *c, uintptr_t start,
				    uintptr_t end, int source)
{
	struct gdrc_defer d = { 0 };

	if (atomic_load_explicit(&c->forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	gdrc_cache_wrlock(c);
	gdrc_drain(c, &d);
	gdrc_invalidate_locked(c, start, end, source, &d);
	gdrc_cache_unlock_release(c, &d);
	return GDRC_OK;
}

gdrc_status_t gdrc_cache_drain_events(struct gdrc_cache *c)
{
	struct gdrc_defer d = { 0 };

	if (atomic_load_explicit(&c->forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	gdrc_cache_wrlock(c);
	gdrc_drain(c, &d);
	gdrc_cache_unlock_release(c, &d);
	return GDRC_OK;
}

GDRC_HOOK_CONTEXT
void gdrc_cache_post_event(struct gdrc_cache *c, uintptr_t start,
			   uintptr_t end, int cls)
{
	gdrc_invq_post(&c->invq, start, end, cls);
}

void gdrc_cache_stop_host_caching(struct gdrc_cache *c)
{
	struct gdrc_defer d = { 0 };

	atomic_store_explicit(&c->cache_host, 0, memory_order_relaxed);
	/* A fork child releases none of its parent's registrations (and
	 * may find the locks held by threads it lacks). */
	if (atomic_load_explicit(&c->forked, memory_order_relaxed))
		return;
	gdrc_cache_wrlock(c);
	gdrc_drain(c, &d);
	gdrc_invalidate_locked(c, 0, UINTPTR_MAX, GDRC_STAT_INV_HOST_HOOK, &d);
	gdrc_cache_unlock_release(c, &d);
}

void gdrc_cache_mark_forked(struct gdrc_cache *c)
{
	atomic_store_explicit(&c->forked, 1, memory_order_relaxed);
	gdrc_invq_poke(&c->invq);
	/* A tag-checked entry would not look at pending (get_fast). */
	gdrc_tls_forget(c);
}

