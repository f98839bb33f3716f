// SPDX-License-Identifier: BSD-3-Clause
/*
 * region.c - a region's life, from its memory to its release.
 *
 *   alloc      a line of the arena (arena.c), its ext made by the miss
 *   publish    registered: one direct reference (the miss's), INVALID
 *   insert     in the cache: the index holds a reference, INVALID clear
 *   remove     out of the cache: INVALID, the index's reference dropped
 *   release    references and pins reached zero on an INVALID region:
 *              the one thread whose CAS added DEAD deregisters it and
 *              gives its memory back (never under cache->lock: a caller
 *              holding it passes a struct gdrc_defer instead)
 *
 * Also here: which memory a region was made for (its segments and
 * BUFFER_IDs against a request's), and the per-device accounting that
 * moves at publication and release.
 *
 * Locks: insert and remove need cache->lock for writing (asserted); the
 * word, accounting and release are atomics and need none.  The pools'
 * slab_lock is taken inside gdrc_region_free.
 * Callers: lru.c, inval.c, handle.c, lookup.c, miss.c, cache.c.
 */
#include <stdlib.h>
#include <string.h>

#include "cache_int.h"

/* A hit, its put and the user's key reads touch the region's one line
 * (arena.c aligns it); a direct reference is the magic word in it. */
_Static_assert(offsetof(struct gdrc_mr, magic) == 0 &&
		       offsetof(struct gdrc_handle, pub) == 0,
	       "an mr's magic is its first word, a handle's pub its start");

/* The small fields hold every value they are given. */
_Static_assert((GDRC_ACCESS_LOCAL_WRITE | GDRC_ACCESS_REMOTE_WRITE |
		GDRC_ACCESS_REMOTE_READ | GDRC_ACCESS_REMOTE_ATOMIC) <= 0xf,
	       "GDRC_ACCESS_* fit gdrc_region.access");
_Static_assert(GDRC_MEM_CUDA <= 1 && GDRC_PTR_MANAGED <= 7 &&
		       REGION_TAG_MANY <= 3 && GDRC_IX_LEVELS <= 7,
	       "enum gdrc_mem_type, gdrc_ptr_kind, the tag checks and the "
	       "index's levels fit gdrc_region's bits");
_Static_assert(GDRC_MR_INFO_KMOD <= 0x80 && GDRC_MR_INFO_TAG_CHECKED <= 0x80 &&
		       GDRC_MR_INFO_NO_SYNC_MEMOPS <= 0x80,
	       "GDRC_MR_INFO_* fit gdrc_region_ext.info_flags");

const struct gdrc_region_ext gdrc_region_ext_none = {
	.nseg = 1,
	.kslot = -1,
	.device = GDRC_DEVICE_HOST,
};
/* One owner writes a handle: it must not share a line with another. */
_Static_assert(sizeof(struct gdrc_handle) == GDRC_CACHELINE,
	       "a handle is one cache line");
/* gdrc_cache_put_fast compares a remembered handle with the mr given. */
_Static_assert(offsetof(struct gdrc_handle, pub) == 0,
	       "a handle's mr is its address");

/* A region never published reads as released to gdrc_cache_cleanup. */
void gdrc_region_init_free(struct gdrc_region *r)
{
	atomic_init(&r->word, REGION_DEAD | REGION_INVALID);
	atomic_init(&r->ext, REGION_EXT_NONE);
}

struct gdrc_region *gdrc_region_alloc(struct gdrc_cache *c)
{
	struct gdrc_region *r = gdrc_arena_get(c);

	if (r)
		r->cache = c;
	return r;
}

/* Free r's ext and its pin array, if it has its own.  Cleared before
 * they are freed: a fork child frees what is left (cache.c), and must
 * not find one freed already; there a region another thread was handing
 * out at the fork may not have been through gdrc_region_init_free yet
 * (ext NULL: the arena's pages are zero). */
void gdrc_region_ext_free(struct gdrc_region *r)
{
	struct gdrc_region_ext *x = atomic_load_explicit(&r->ext,
							 memory_order_relaxed);

	if (!x || x == REGION_EXT_NONE)
		return;
	atomic_store_explicit(&r->ext, REGION_EXT_NONE, memory_order_relaxed);
	free(x->kpins);
	free(x);
}

/* Return r and the handles hung on it to the arena and the pool. */
void gdrc_region_free(struct gdrc_cache *c, struct gdrc_region *r)
{
	struct gdrc_region_ext *x = atomic_load_explicit(&r->ext,
							 memory_order_acquire);
	struct gdrc_handle *h, *next;

	/* The list's head, before its ext goes (the handles are the
	 * pool's, and stay). */
	h = x ? atomic_load_explicit(&x->handles, memory_order_acquire) : NULL;
	r->self = 0;
	gdrc_region_ext_free(r);
	gdrc_slab_lock(c);
	for (; h; h = next) {
		next = h->next;
		h->pub.magic = 0;
		gdrc_pool_put_locked(c, &c->handles, h);
	}
	gdrc_arena_put_locked(c, r);
	gdrc_slab_unlock(c);
}

/* The accounting slot of device (host memory: 0), or NULL past
 * GDRC_MAX_DEVICES. */
struct gdrc_dev_acct *gdrc_dev_acct(struct gdrc_cache *c, int device)
{
	if (device < GDRC_DEVICE_HOST || device >= GDRC_MAX_DEVICES)
		return NULL;
	return &c->dev[device + 1];
}

/* Count r in (sign 1) or out of (sign -1) its device's totals. */
static void dev_account(struct gdrc_cache *c, const struct gdrc_region *r,
			int sign)
{
	struct gdrc_dev_acct *a = gdrc_dev_acct(c, gdrc_region_ext(r)->device);
	uint64_t len = gdrc_region_reg_len(r);

	if (!a)
		return;
	if (sign < 0)
		len = -len;
	atomic_fetch_add_explicit(&a->pinned_bytes, len, memory_order_relaxed);
	atomic_fetch_add_explicit(&a->regions, (uint64_t)sign,
				  memory_order_relaxed);
	if (gdrc_cache_ops_for(c, r->mem_type, NULL)->backend ==
	    GDRC_BACKEND_DMABUF)
		atomic_fetch_add_explicit(&a->dmabufs, (uint64_t)sign,
					  memory_order_relaxed);
}

/*
 * Make a freshly registered region reachable by its owner: one pin (the
 * miss's, which becomes its handle's, or a reference if it serves a
 * direct one), INVALID until inserted.
 */
void gdrc_region_publish(struct gdrc_cache *c, struct gdrc_region *r)
{
	uint64_t len = gdrc_region_reg_len(r);
	uint64_t pinned, max;

	r->self = GDRC_MR_SELF_MAGIC;
	atomic_store_explicit(&r->word, REGION_PIN_ONE | REGION_INVALID,
			      memory_order_release);
	pinned = atomic_fetch_add_explicit(&c->pinned_bytes, len,
					   memory_order_relaxed) + len;
	max = atomic_load_explicit(&c->pinned_bytes_max, memory_order_relaxed);
	while (pinned > max &&
	       !atomic_compare_exchange_weak_explicit(&c->pinned_bytes_max,
						      &max, pinned,
						      memory_order_relaxed,
						      memory_order_relaxed))
		;
	atomic_fetch_add_explicit(&c->nalive, 1, memory_order_relaxed);
	dev_account(c, r, 1);
}

/*
 * Try to become the one thread that releases r: no reference, no pin, and
 * invalid.  @return 1 if this thread must release it.
 */
static int region_claim_dead(struct gdrc_cache *c, struct gdrc_region *r)
{
	uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire);

	while (!(w & (REGION_REF_MASK | REGION_PIN_MASK)) &&
	       (w & REGION_INVALID) && !(w & REGION_DEAD)) {
		if (atomic_compare_exchange_weak_explicit(
			    &r->word, &w, w | REGION_DEAD,
			    memory_order_acq_rel, memory_order_acquire)) {
			atomic_fetch_sub_explicit(&c->pinned_bytes,
						  gdrc_region_reg_len(r),
						  memory_order_relaxed);
			atomic_fetch_sub_explicit(&c->nalive, 1,
						  memory_order_relaxed);
			dev_account(c, r, -1);
			return 1;
		}
	}
	return 0;
}

/* Give back what the kernel channel holds for a registration: its word
 * (slot: a GPU pin if pinned, else a watch; -1: none) and kmore further
 * GPU pins.  System calls: never under cache->lock. */
void gdrc_kern_give_back(struct gdrc_cache *c, int slot, int pinned,
			 uint64_t handle, uint32_t kmore,
			 const struct gdrc_kpin *kpins)
{
	if (slot >= 0 && pinned)
		c->p.kunpin(c->p.karg, handle);
	else if (slot >= 0 && c->p.watch->unsubscribe)
		c->p.watch->unsubscribe(c->p.watch_arg, handle);
	for (uint32_t i = 0; i < kmore; i++)
		c->p.kunpin(c->p.karg, kpins[i].handle);
}

/* Deregister and free a region this thread claimed.  Never under lock. */
void gdrc_region_release(struct gdrc_cache *c, struct gdrc_region *r)
{
	const struct gdrc_region_ext *x = gdrc_region_ext(r);
	struct gdrc_pin_reg reg = {
		.addr = gdrc_region_reg_start(r),
		.length = gdrc_region_reg_len(r),
		.access = r->access,
		.mem_type = r->mem_type,
		.handle = gdrc_region_cold(r)->obj,
	};
	void *be;

	gdrc_cache_ops_for(c, r->mem_type, &be)->dereg(be, &reg);
	gdrc_kern_give_back(c, x->kslot, x->kpinned, x->khandle, x->kmore,
			    x->kpins);
	gdrc_stat_add(c, GDRC_STAT_DEREGS, 1);
	gdrc_region_free(c, r);
}

/* w was just written: if it holds nothing, release r now, or, with d
 * (cache->lock held), once the lock is dropped. */
static void region_drop_done(struct gdrc_cache *c, struct gdrc_region *r,
			     uint64_t w, struct gdrc_defer *d)
{
	if ((w & (REGION_REF_MASK | REGION_PIN_MASK)) ||
	    !region_claim_dead(c, r))
		return;
	if (d) {
		r->link = gdrc_region_link_to(c, d->dead);
		d->dead = r;
	} else {
		gdrc_region_release(c, r);
	}
}

/* Drop a pin (a handle's, the index's, a lookup's or a miss's: no put
 * takes one); release r if that was the last of everything. */
void gdrc_region_unpin_defer(struct gdrc_cache *c, struct gdrc_region *r,
			     struct gdrc_defer *d)
{
	uint64_t w = atomic_fetch_sub_explicit(&r->word, REGION_PIN_ONE,
					       memory_order_acq_rel) -
		     REGION_PIN_ONE;

	region_drop_done(c, r, w, d);
}

void gdrc_region_unpin(struct gdrc_cache *c, struct gdrc_region *r)
{
	gdrc_region_unpin_defer(c, r, NULL);
}

/*
 * Give back a direct reference, unless there is none: a put of r->self
 * with none outstanding (or, racing with one, a lookup's that a misuse
 * took first) changes nothing.  One compare-and-swap.
 * @return 0; -1 none to give back.
 */
int gdrc_region_unref(struct gdrc_cache *c, struct gdrc_region *r)
{
	uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);

	do {
		if (!(w & REGION_REF_MASK))
			return -1;
	} while (!atomic_compare_exchange_weak_explicit(
		&r->word, &w, w - 1, memory_order_acq_rel,
		memory_order_relaxed));
	region_drop_done(c, r, w - 1, NULL);
	return 0;
}

void gdrc_region_let_go(struct gdrc_cache *c, struct gdrc_region *r,
			uint64_t hold)
{
	if (hold == REGION_PIN_ONE)
		gdrc_region_unpin(c, r);
	else
		gdrc_region_unref(c, r);
}

/* A pin that becomes a direct reference (a handle could not be made). */
void gdrc_region_pin_to_ref(struct gdrc_region *r)
{
	atomic_fetch_add_explicit(&r->word, 1 - REGION_PIN_ONE,
				  memory_order_relaxed);
}

void gdrc_cache_region_put(struct gdrc_cache *c, struct gdrc_region *r)
{
	gdrc_region_unpin(c, r);
}

void gdrc_defer_release(struct gdrc_cache *c, struct gdrc_defer *d)
{
	struct gdrc_region *r, *next;

	for (r = d->dead; r; r = next) {
		next = gdrc_region_linked(c, r->link);
		gdrc_region_release(c, r);
	}
	d->dead = NULL;
}

int gdrc_cache_kmore_stale(const struct gdrc_cache *c,
			   const struct gdrc_region *r)
{
	const struct gdrc_region_ext *x = gdrc_region_ext(r);

	for (uint32_t i = 0; i < x->kmore; i++)
		if (c->p.kgen[x->kpins[i].slot])
			return 1;
	return 0;
}

/* ====================================================================
 * Identity: which memory a region was made for
 * ==================================================================== */

/* Segment i of an array, or the one implicit segment when there is no
 * array (see gdrc_region.segs). */
static struct gdrc_seg seg_at(const struct gdrc_seg *segs, unsigned i,
			      uintptr_t start, uintptr_t end, uint64_t id)
{
	if (segs)
		return segs[i];
	return (struct gdrc_seg){ .start = start, .end = end,
				  .buffer_id = id };
}

struct gdrc_seg gdrc_region_seg(const struct gdrc_region *r, unsigned i)
{
	const struct gdrc_region_ext *x = gdrc_region_ext(r);

	return seg_at(x->segs, i, x->alloc_start, x->alloc_end, x->buffer_id);
}

struct gdrc_seg gdrc_req_seg(const struct gdrc_cache_req *q, unsigned i)
{
	return seg_at(q->segs, i, q->alloc_start, q->alloc_end, q->buffer_id);
}

unsigned gdrc_req_nseg(const struct gdrc_cache_req *q)
{
	return q->segs ? q->nseg : 1;
}

static int seg_eq(const struct gdrc_seg *a, const struct gdrc_seg *b)
{
	return a->start == b->start && a->end == b->end &&
	       a->buffer_id == b->buffer_id;
}

/*
 * Is r made for the memory the driver reports for q now, where both
 * cover some?  Host memory: the same BUFFER_ID (0, or the CUDA-pinned
 * allocation's).  GPU memory: every segment of one that overlaps a
 * segment of the other is that very segment (range and BUFFER_ID), so a
 * registration over mappings A and B agrees with a request over B and C
 * while B is unchanged, and not once B was remapped.
 */
int gdrc_same_memory(const struct gdrc_region *r,
		     const struct gdrc_cache_req *q)
{
	unsigned i = 0, j = 0, qn = gdrc_req_nseg(q);

	if (r->mem_type != q->mem_type)
		return 0;
	if (r->mem_type != GDRC_MEM_CUDA)
		return gdrc_region_ext(r)->buffer_id == q->buffer_id;
	while (i < gdrc_region_ext(r)->nseg && j < qn) {
		struct gdrc_seg a = gdrc_region_seg(r, i);
		struct gdrc_seg b = gdrc_req_seg(q, j);

		if (a.end <= b.start) {
			i++;
		} else if (b.end <= a.start) {
			j++;
		} else {
			if (!seg_eq(&a, &b))
				return 0;
			i++;
			j++;
		}
	}
	return 1;
}

/* Made for exactly q's memory: merging r into q's registration keeps it
 * inside q's segments. */
int gdrc_same_segments(const struct gdrc_region *r,
		       const struct gdrc_cache_req *q)
{
	if (r->mem_type != q->mem_type)
		return 0;
	if (r->mem_type != GDRC_MEM_CUDA)
		return gdrc_region_ext(r)->buffer_id == q->buffer_id;
	if (gdrc_region_ext(r)->nseg != gdrc_req_nseg(q))
		return 0;
	for (unsigned i = 0; i < gdrc_req_nseg(q); i++) {
		struct gdrc_seg a = gdrc_region_seg(r, i);
		struct gdrc_seg b = gdrc_req_seg(q, i);

		if (!seg_eq(&a, &b))
			return 0;
	}
	return 1;
}

/* Index of the first segment of r (with an array) ending past addr. */
static unsigned seg_search(const struct gdrc_region *r, uintptr_t addr)
{
	const struct gdrc_region_ext *x = gdrc_region_ext(r);
	unsigned lo = 0, hi = x->nseg;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (x->segs[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct gdrc_seg gdrc_cache_seg_of(const struct gdrc_region *r,
				  uintptr_t addr)
{
	const struct gdrc_region_ext *x = gdrc_region_ext(r);

	return x->segs ? x->segs[seg_search(r, addr)] : gdrc_region_seg(r, 0);
}

int gdrc_cache_segs_ok(const struct gdrc_cache *c,
		       const struct gdrc_region *r, uintptr_t start,
		       uintptr_t end)
{
	return gdrc_segs_check(c, &gdrc_region_ext(r)->segs[seg_search(r, start)],
			       end);
}

/* ====================================================================
 * Membership (under cache->lock, write)
 * ==================================================================== */

/*
 * Put a published region in the cache: findable in the index, on the
 * clock (unused), counted, and holding the index's own pin.  The INVALID
 * bit goes last (release): a reader that finds r valid finds it whole.
 * spare_p: as for gdrc_index_insert.  @return 0, or -1: the index had
 * no room (nothing changed: r stays uncached).
 */
int gdrc_region_insert(struct gdrc_cache *c, struct gdrc_region *r,
		       void **spare_p)
{
	const struct gdrc_region_ext *x = gdrc_region_ext(r);

	gdrc_assert_wrlocked(c);
	/* Before the index makes r findable: lookups without the lock read
	 * the bits beside it. */
	r->was_cached = 1;
	if (gdrc_index_insert(c, r, spare_p)) {
		r->was_cached = 0;
		return -1;
	}
	if (x->alloc_end > x->alloc_start &&
	    x->alloc_end - x->alloc_start + c->page_size > c->alloc_span_max)
		c->alloc_span_max = x->alloc_end - x->alloc_start +
				    c->page_size;
	gdrc_lru_list(c, r);
	c->nregions++;
	atomic_fetch_add_explicit(&r->word, REGION_PIN_ONE,
				  memory_order_relaxed);
	atomic_fetch_and_explicit(&r->word, ~REGION_INVALID,
				  memory_order_release);
	return 0;
}

/*
 * Take r, already off the clock (a collected region: gdrc_collect_push),
 * out of the index and drop the index's pin (held until the end, so that
 * nobody releases r while it is being taken out).  ghost: the miss cause
 * to remember for its range, or 0 for none.  A region nobody holds goes on
 * d->dead, to be released after the lock is dropped.
 */
void gdrc_region_take_out(struct gdrc_cache *c, struct gdrc_region *r,
			  int ghost, struct gdrc_defer *d)
{
	gdrc_assert_wrlocked(c);
	atomic_fetch_or_explicit(&r->word, REGION_INVALID,
				 memory_order_acq_rel);
	gdrc_index_remove(c, r);
	gdrc_cells_convert(c, r); /* after its bucket changed: cell.c */
	c->nregions--;
	/* After INVALID: a thread that sees the new stamp sees the mark. */
	atomic_store_explicit(&c->removal_stamp, gdrc_removal_stamp_new(),
			      memory_order_release);
	if (ghost)
		gdrc_ghost_add(c, r, ghost);
	gdrc_tls_drop_region_locked(c, r, d);
	gdrc_region_unpin_defer(c, r, d);
}

/* Take a cached region off the clock and out of the index (above). */
void gdrc_region_remove(struct gdrc_cache *c, struct gdrc_region *r,
			int ghost, struct gdrc_defer *d)
{
	gdrc_lru_unlist(c, r);
	gdrc_region_take_out(c, r, ghost, d);
}
