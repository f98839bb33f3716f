// SPDX-License-Identifier: BSD-3-Clause
/*
 * index.c - which cached regions cover or overlap a range.
 *
 * Two open-addressing hashes, changed under cache->lock for writing:
 *
 *   The page hash answers the hit, without a lock.  A region is entered
 *   at the lowest level L whose granule (4 KiB, 64 KiB, 1 MiB, ... 4 GiB:
 *   1 << ix_shift(L)) it spans at most IX_FIT (8) of (at the last level,
 *   GDRC_IX_SPAN: 16), once per granule it touches, keyed by (granule,
 *   L).  A request starting in granule g
 *   of level L can only be covered by a region of that level that
 *   touches g, so probing (start's granule, L) at each level that holds
 *   regions finds every region that covers it.  The table is of 64-byte
 *   buckets of six 80-bit entries (index_int.h): the exact key, the
 *   region's arena index, which granule of it this is, its span and
 *   rights, and whether the entry alone says all a hit checks (plain:
 *   the hazard cells' hit, cell.c, reads no more).  A one-page region is
 *   one entry, 10.7 bytes of a bucket.
 *
 *   The summaries answer for a range: what invalidation (an munmap of a
 *   gigabyte, or of everything) and the miss's plan ask, every region
 *   overlapping a range.  The summary of level L at tier k (1 to
 *   IX_TIERS) for block b holds a 64-bit map of which of b's 64 children
 *   (tier k - 1 blocks; at tier 1, granules where a region starts) hold
 *   anything; it exists while that map is not empty (at tiers of a
 *   gigabyte and more: once made, IX_KEEP_TIER).  A range query
 *   looks for regions starting from as many granules before the range
 *   as the level's widest region spans less one (ix.spans: 0 when all
 *   are one granule, GDRC_IX_SPAN - 1 at most) to the range's end: from
 *   the lowest tier where those span at most two
 *   blocks, down the set bits, so it costs a probe per level and tier
 *   plus one per region start, whatever the range's size, and finds
 *   each region once.  A dense million regions
 *   need about 16,650 summaries (16-byte slots, read only under the
 *   lock), and no region needs tree links (docs/design.md, memory per
 *   registration).
 *
 * Regions wider than GDRC_IX_SPAN granules of the last level (more than
 * 64 GiB) go to the tree (itree/), through a node in their ext.  They
 * are found by both kinds of query like the rest.
 *
 * The lock-free read.  An entry goes into the first bucket from its key's
 * home with a free way, and each full bucket it passes counts one more
 * spill, so that a lookup goes on past a bucket only while it has some;
 * a removal empties its way in place (no entry moves) and counts the
 * spills back.  A writer makes the bucket's sequence odd while it
 * changes it; a reader without the lock takes an entry only between two
 * equal, even reads of the sequence (never torn, never half-written).  A
 * full table is replaced by one twice its size, the old one kept until
 * the cache goes (readers may still be in it) but, when mapped, emptied
 * of its pages (ph_retire_pages: a reader there then misses).  An entry
 * read may still name a region released and reused for other memory
 * since.  That cannot serve a wrong registration: on the general path
 * (gdrc_index_find_fast) a candidate counts only once a compare-and-swap
 * added a pin or a reference to a word that was neither INVALID nor DEAD
 * (region memory is type-stable, arena.c), after which its key, rights
 * and kernel word are checked and cannot change.  What the read can do
 * is miss: the caller then asks again under the lock, which is exact.  A
 * region removed since a get's first load of pending has INVALID set
 * before pending clears (inval.c), so the CAS refuses it.  A cell hit
 * (gdrc_index_find_plain) takes no reference: it reads the sequence
 * again after storing its cell, and a removal looks at the cells after
 * changing the bucket (cell.c says why one of the two sees the other).
 *
 * Room.  A table grows at three quarters full, with a larger one made
 * before the lock is taken (gdrc_index_prepare); an insertion that finds
 * no spare (another miss took the room, or the allocation failed) may
 * still fill it to fifteen sixteenths; past that, or for a region whose
 * address does not fit an entry, it fails, and the miss hands its
 * registration out uncached.
 *
 * This file: the page hash, its growth, a region in and out, the
 * lock-free hit and the locked cover search; index_sum.c: the summaries,
 * range queries and the check; index_int.h what both read.
 *
 * Locks: cache->lock.  Changes need it for writing (asserted), queries
 * either mode (asserted), gdrc_index_find_fast none.  A walk's callback
 * must not change the index.  No allocation or free under the lock: what
 * a change needs is made before (gdrc_index_prepare), what it replaces
 * freed after (gdrc_index_table_free).
 * Callers: region.c (insert, remove), lookup.c (find), miss.c
 * (prepare, wide), cache.c (init, cleanup), the API layer (the prefetch
 * of a get the fast path did not serve, declared in cache.h).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "index_int.h"

/* Buckets of the first page hash (768 entries, 8 KiB), slots of the
 * first summaries; a table grows at 3/4 full. */
#define PH_MIN_BUCKETS 128
#define SUM_MIN_SLOTS 64

/* A table this large is mapped on its own, with transparent huge pages
 * asked for (a lookup that misses the TLB as well pays twice). */
#define PH_HUGE (2UL << 20)

static struct gdrc_phash *ph_new(struct gdrc_region *base, unsigned bits)
{
	size_t bytes = sizeof(struct gdrc_phash) +
		       (sizeof(struct ph_bucket) << bits);
	struct gdrc_phash *t;

	if (bytes < PH_HUGE) {
		/* Touched now, not left to fresh zero pages: the first
		 * table is made at gdrc_init, and a context's first insert
		 * should take no page fault. */
		void *p;

		t = posix_memalign(&p, 64, bytes) ? NULL : p;
		if (t)
			memset(t, 0, bytes);
		bytes = 0;
	} else {
		bytes = (bytes + PH_HUGE - 1) & ~(PH_HUGE - 1);
		t = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (t == MAP_FAILED)
			return NULL;
		madvise(t, bytes, MADV_HUGEPAGE); /* a hint: may fail */
	}
	if (t) {
		t->base = base;
		t->bytes = bytes;
		t->bits = bits;
	}
	return t;
}

static void ph_free(struct gdrc_phash *t)
{
	if (t && t->bytes)
		munmap(t, t->bytes);
	else
		free(t);
}

void gdrc_index_table_free(void *p)
{
	struct ix_spare *sp = p;

	if (!sp)
		return;
	ph_free(sp->ph);
	free(sp->sums);
	free(sp->old);
	free(sp);
}

/* The granules of a level [start, end) touches. */
static uint64_t range_slots(uintptr_t start, uintptr_t end, int level)
{
	unsigned s = ix_shift(level);

	return ((end - 1) >> s) - (start >> s) + 1;
}

/*
 * Granules a region spans at most at the level it enters, below the last
 * level's GDRC_IX_SPAN.  Eight, not sixteen: a GPU allocation of 1 MiB
 * (sixteen 64 KiB granules) is then one or two entries of 1 MiB, and its
 * miss and removal change two buckets instead of sixteen (on the H200
 * host its miss cost 100-300 ns more than the tree's with sixteen).
 * What it costs: a region of a level below the last then spans more than
 * seven sixteenths of its granule (not fifteen), so four disjoint ones,
 * not three, may touch one granule (a lookup there may try one more when
 * they are packed so).
 */
#define IX_FIT 8

/* The level [start, end) enters, or -1: too wide for the hash.  The
 * lowest it spans at most IX_FIT granules of, else (past the last one's
 * IX_FIT) the last one it spans at most GDRC_IX_SPAN of. */
static int range_level(uintptr_t start, uintptr_t end)
{
	int last = GDRC_IX_LEVELS - 1;

	for (int level = 0; level < GDRC_IX_LEVELS; level++)
		if (range_slots(start, end, level) <= IX_FIT)
			return level;
	return range_slots(start, end, last) <= GDRC_IX_SPAN ? last : -1;
}

int gdrc_index_wide(uintptr_t start, uintptr_t end)
{
	return range_level(start, end) < 0;
}

/* ---- the page hash (writers: under the lock for writing) ---- */

/* One more entry lies past b, or one fewer (255 sticks: never counted
 * back).  Only writers write it: a plain store. */
static void pb_spill_add(struct ph_bucket *b, int sign)
{
	unsigned n = pb_spill(b);

	if (n != PB_SPILL_MAX)
		atomic_store_explicit(&b->spill, (uint8_t)(n + sign),
				      memory_order_relaxed);
}

/* b's sequence one step on, stored with order mo.  Only writers write
 * it: a plain store. */
static void pb_seq_step(struct ph_bucket *b, memory_order mo)
{
	uint16_t s = atomic_load_explicit(&b->seq, memory_order_relaxed);

	atomic_store_explicit(&b->seq, (uint16_t)(s + 1), mo);
}

/* A writer's change of b's entries, between begin and end: the sequence
 * is odd in between (the fences order the entries' stores after the
 * first step and before the second, as a reader reads them). */
static void pb_begin(struct ph_bucket *b)
{
	pb_seq_step(b, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static void pb_end(struct ph_bucket *b)
{
	pb_seq_step(b, memory_order_release);
}

/* Put entry (kv, lo) of key in the first bucket from its home with a free
 * way, counting a spill in each full one it passes.  There is one: the
 * caller checked the room (ph_fits). */
static void ph_put(struct gdrc_phash *t, uint64_t kv, uint16_t lo,
		   int used)
{
	uint64_t i = ph_home(t, pe_key(kv));

	for (;; i = (i + 1) & ph_mask(t)) {
		struct ph_bucket *b = &t->b[i];

		for (unsigned w = 0; w < PH_WAYS; w++) {
			if (pb_kv(b, w))
				continue;
			pb_begin(b);
			atomic_store_explicit(&b->lo[w], lo,
					      memory_order_relaxed);
			atomic_store_explicit(&b->kv[w], kv,
					      memory_order_relaxed);
			if (used) /* a table not yet published: no reader */
				atomic_store_explicit(
					&b->used,
					(uint8_t)(atomic_load_explicit(
							  &b->used,
							  memory_order_relaxed) |
						  1u << w),
					memory_order_relaxed);
			pb_end(b);
			return;
		}
		pb_spill_add(b, 1);
	}
}

/* Empty the entry of key naming region idx at granule off, and count
 * back the spills of the buckets from its home to it.  @return 0, or -1:
 * not there. */
static int ph_del(struct gdrc_phash *t, uint64_t key, uint32_t idx,
		  unsigned off)
{
	uint64_t home = ph_home(t, key);
	struct ph_iter it = { 0 };
	struct ph_bucket *b;
	unsigned w;

	if (!ph_find(t, key, idx, off, &it))
		return -1;
	b = &t->b[it.b];
	w = it.w - 1;
	pb_begin(b);
	atomic_store_explicit(&b->kv[w], 0, memory_order_relaxed);
	atomic_store_explicit(&b->lo[w], 0, memory_order_relaxed);
	/* Its used mark (a locked and, only where a cell hit set one). */
	if (atomic_load_explicit(&b->used, memory_order_relaxed) & 1u << w)
		atomic_fetch_and_explicit(&b->used, (uint8_t)~(1u << w),
					  memory_order_relaxed);
	pb_end(b);
	for (uint64_t i = home; i != it.b; i = (i + 1) & ph_mask(t))
		pb_spill_add(&t->b[i], -1);
	return 0;
}

/* n entries more or fewer (a plain store: writers hold the lock). */
static void ph_used_add(struct gdrc_phash *t, int64_t n)
{
	atomic_store_explicit(&t->used,
			      atomic_load_explicit(&t->used,
						   memory_order_relaxed) +
				      (uint64_t)n,
			      memory_order_relaxed);
}

/* ---- a region in and out ---- */

/* What every entry of region r (span granules) says beside its key and
 * offset; *lo: their low bits of r's arena index. */
static uint64_t pe_common(const struct gdrc_cache *c,
			  const struct gdrc_region *r, unsigned span,
			  uint16_t *lo)
{
	uint32_t idx = gdrc_region_index(c, r);
	unsigned s = ix_shift(r->ix_level);
	/* What a hit through a cell may serve from the entry alone
	 * (cell.c): one page, whole, no tag check, no kernel word. */
	int plain = r->ix_level == 0 && span == 1 && !r->tag_check &&
		    !r->kern && !(r->start & ((1ULL << s) - 1)) &&
		    r->end == r->start + (1ULL << s);

	*lo = (uint16_t)idx;
	return (uint64_t)(idx >> 16) << PE_HI_SHIFT |
	       (uint64_t)(span - 1) << PE_SPAN_SHIFT |
	       (uint64_t)(r->access & PE_FIELD4) << PE_ACCESS_SHIFT |
	       (plain ? PE_PLAIN : 0);
}

/* An entry for each granule r touches; its first granule in the
 * summaries (range queries look for regions by their first granule). */
static void ix_enter(struct gdrc_cache *c, struct gdrc_phash *t,
		     struct gdrc_region *r)
{
	struct gdrc_index *ix = &c->ix;
	int level = r->ix_level;
	unsigned s = ix_shift(level), off = 0;
	uintptr_t first = r->start >> s;
	unsigned span = (unsigned)(((r->end - 1) >> s) - first + 1);
	int fresh = !ph_has_first(t, ph_key(first, level));
	uint16_t lo;
	uint64_t common = pe_common(c, r, span, &lo);

	for (uintptr_t g = first; g <= (r->end - 1) >> s; g++)
		ph_put(t, ph_key(g, level) | (uint64_t)off++ << PE_OFF_SHIFT |
				  common,
		       lo, 0);
	ph_used_add(t, off);
	if (fresh) {
		gdrc_ixsum_set(ix->sums, first, level);
		gdrc_ixsums_publish(ix);
	}
}

static void ix_leave(struct gdrc_cache *c, struct gdrc_phash *t,
		     struct gdrc_region *r)
{
	struct gdrc_index *ix = &c->ix;
	int level = r->ix_level;
	unsigned s = ix_shift(level), off = 0;
	uintptr_t first = r->start >> s;
	uint32_t idx = gdrc_region_index(c, r);
	int gone = 0;

	/* Every one is there: gdrc_index_check says. */
	for (uintptr_t g = first; g <= (r->end - 1) >> s; g++)
		gone += !ph_del(t, ph_key(g, level), idx, off++);
	ph_used_add(t, -gone);
	if (!ph_has_first(t, ph_key(first, level))) {
		gdrc_ixsum_clear(ix->sums, first, level);
		gdrc_ixsums_publish(ix);
	}
}

/* Room for more entries in a page hash of 1 << bits buckets (its ways
 * are its slots). */
static int ph_room(unsigned bits, uint64_t used, uint64_t more, int hard)
{
	return ix_room((uint64_t)PH_WAYS << bits, used, more, hard);
}

static int ph_fits(const struct gdrc_phash *t, uint64_t more, int hard)
{
	return ph_room(t->bits,
		       atomic_load_explicit(&t->used, memory_order_relaxed),
		       more, hard);
}

static int sums_fits(const struct gdrc_ixsums *s, uint64_t more, int hard)
{
	return ix_fits(s->bits, s->used, more, hard);
}

/* ------------------------------------------------------------------ */

gdrc_status_t gdrc_index_init(struct gdrc_cache *c)
{
	struct gdrc_phash *t = ph_new(c->regions.hits,
				      __builtin_ctz(PH_MIN_BUCKETS));

	gdrc_itree_init(&c->ix.tree);
	c->ix.sums = gdrc_ixsums_new(__builtin_ctz(SUM_MIN_SLOTS));
	if (!t || !c->ix.sums) {
		ph_free(t);
		free(c->ix.sums);
		c->ix.sums = NULL;
		return GDRC_ERR_NO_MEMORY;
	}
	atomic_init(&c->ix.ph, t);
	gdrc_ixsums_publish(&c->ix);
	return GDRC_OK;
}

void gdrc_index_cleanup(struct gdrc_cache *c)
{
	struct gdrc_phash *t, *next;

	ph_free(atomic_load_explicit(&c->ix.ph, memory_order_relaxed));
	atomic_store_explicit(&c->ix.ph, NULL, memory_order_relaxed);
	for (t = c->ix.retired; t; t = next) {
		next = t->retired_next;
		ph_free(t);
	}
	c->ix.retired = NULL;
	free(c->ix.sums);
	c->ix.sums = NULL;
}

/*
 * The tables' sizes are read without the lock, as hints (the insertion
 * checks again under it): the page hash's header (retired tables stay
 * until the cache goes), the summaries' through sums_size (their old
 * tables are freed).  A stale read only makes a spare that is not
 * needed, or none when one is (the insertion then fills to 15/16, or
 * fails).
 */
void *gdrc_index_prepare(const struct gdrc_cache *c)
{
	const struct gdrc_phash *t =
		atomic_load_explicit(&c->ix.ph, memory_order_acquire);
	uint64_t size = atomic_load_explicit(&c->ix.sums_size,
					     memory_order_relaxed);
	unsigned sbits = (unsigned)(size >> 32);
	struct ix_spare *sp;
	int grow_ph, grow_sums;

	if (!t || !sbits)
		return NULL;
	grow_ph = !ph_fits(t, GDRC_IX_SPAN, 0);
	grow_sums = !ix_fits(sbits, (uint32_t)size, IX_SUMS_MAX, 0);
	if (!grow_ph && !grow_sums)
		return NULL;
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return NULL;
	if (grow_ph)
		sp->ph = ph_new(t->base, t->bits + 1);
	if (grow_sums)
		sp->sums = gdrc_ixsums_new(sbits + 1);
	return sp;
}

/*
 * A retired table's slots are never written again, and a reader still in
 * it needs none of them: an empty slot ends its probe as a miss, which
 * the locked query answers.  So a table gives its memory back now (it
 * would otherwise stay resident until the cache goes: as much again as
 * the current table, mapped or malloc'ed) and keeps only the page where
 * the header lives that such a reader reads (bits: its mask); pages read
 * again are zero.  A malloc'ed table gives back only the whole pages
 * inside it, so that malloc's own words on either side stay.  One
 * system call per growth, under the lock; growths are logarithmic.
 */
static void ph_retire_pages(struct gdrc_phash *t)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	size_t size = t->bytes ? t->bytes :
				 sizeof(*t) + (sizeof(t->b[0]) << t->bits);
	uintptr_t lo = ((uintptr_t)t & ~(page - 1)) + page;
	uintptr_t hi = ((uintptr_t)t + size) & ~(page - 1);

	if (hi > lo)
		madvise((void *)lo, hi - lo,
			MADV_DONTNEED); /* a hint: the table stays valid */
}

/* Move every entry into the larger table spare, which replaces t. */
static void ph_grow(struct gdrc_cache *c, struct gdrc_phash *t,
		    struct gdrc_phash *spare)
{
	for (uint64_t i = 0; i <= ph_mask(t); i++)
		for (unsigned w = 0; w < PH_WAYS; w++) {
			uint64_t kv = pb_kv(&t->b[i], w);

			/* With its used mark: a region hit through cells
			 * only is not evicted a round early for the move. */
			if (kv)
				ph_put(spare, kv, pb_lo(&t->b[i], w),
				       atomic_load_explicit(&t->b[i].used,
							    memory_order_relaxed) >>
					       w & 1);
		}
	atomic_store_explicit(&spare->used,
			      atomic_load_explicit(&t->used,
						   memory_order_relaxed),
			      memory_order_relaxed);
	t->retired_next = c->ix.retired;
	c->ix.retired = t;
	atomic_store_explicit(&c->ix.ph, spare, memory_order_release);
	ph_retire_pages(t);
}

/* One region more or fewer at level, spanning span granules; the level's
 * widest span and the levels word follow. */
static void level_count(struct gdrc_index *ix, int level, unsigned span,
			int sign)
{
	uint32_t m = atomic_load_explicit(&ix->levels, memory_order_relaxed);
	uint64_t *by_span = ix->span_regions[level];
	unsigned widest = ix->spans[level];

	by_span[span - 1] += (uint64_t)(int64_t)sign;
	if (sign > 0 && span > widest)
		widest = span;
	while (widest && !by_span[widest - 1])
		widest--;
	ix->spans[level] = (uint8_t)widest;
	m = widest ? m | 1u << level : m & ~(1u << level);
	atomic_store_explicit(&ix->levels, m, memory_order_relaxed);
}

/* The tree changed (write lock): whether it holds any region, told to
 * lookups without the lock. */
static void ix_tree_told(struct gdrc_cache *c)
{
	atomic_store_explicit(&c->ix.wide, c->ix.tree.count != 0,
			      memory_order_relaxed);
}

/* The ext of a wide region, whose node the index owns. */
static struct gdrc_region_ext *wide_ext(struct gdrc_region *r)
{
	return atomic_load_explicit(&r->ext, memory_order_relaxed);
}

int gdrc_index_insert(struct gdrc_cache *c, struct gdrc_region *r,
		      void **spare_p)
{
	struct gdrc_phash *t = atomic_load_explicit(&c->ix.ph,
						    memory_order_relaxed);
	struct ix_spare *sp = spare_p ? *spare_p : NULL;
	int level = range_level(r->start, r->end);
	uint64_t used = atomic_load_explicit(&t->used, memory_order_relaxed);

	gdrc_assert_wrlocked(c);
	r->ix_level = -1;
	if (level < 0) {
		struct gdrc_region_ext *x = wide_ext(r);

		if (x == &gdrc_region_ext_none)
			return -1; /* cannot happen: ext_new made one */
		x->node.start = r->start;
		x->node.end = r->end;
		x->node_region = r;
		gdrc_itree_insert(&c->ix.tree, &x->node);
		ix_tree_told(c);
		c->ix.inserts++;
		return 0;
	}
	if (!ph_key_fits((r->end - 1) >> ix_shift(level)))
		return -1; /* an address above 2^48: cannot happen on x86-64
			    * unless asked for */
	if (!ph_fits(t, GDRC_IX_SPAN, 0) && sp && sp->ph &&
	    ph_room(sp->ph->bits, used, GDRC_IX_SPAN, 0)) {
		ph_grow(c, t, sp->ph);
		t = sp->ph;
		sp->ph = NULL;
	}
	if (!sums_fits(c->ix.sums, IX_SUMS_MAX, 0) && sp && sp->sums &&
	    ix_fits(sp->sums->bits, c->ix.sums->used, IX_SUMS_MAX, 0))
		gdrc_ixsums_grow(c, sp);
	if (!ph_fits(t, GDRC_IX_SPAN, 1) ||
	    !sums_fits(c->ix.sums, IX_SUMS_MAX, 1))
		return -1;
	r->ix_level = (int8_t)level;
	ix_enter(c, t, r);
	level_count(&c->ix, level,
		    (unsigned)range_slots(r->start, r->end, level), 1);
	c->ix.inserts++;
	return 0;
}

void gdrc_index_remove(struct gdrc_cache *c, struct gdrc_region *r)
{
	struct gdrc_phash *t = atomic_load_explicit(&c->ix.ph,
						    memory_order_relaxed);

	gdrc_assert_wrlocked(c);
	if (r->ix_level < 0) {
		gdrc_itree_remove(&c->ix.tree, &wide_ext(r)->node);
		ix_tree_told(c);
		return;
	}
	ix_leave(c, t, r);
	level_count(&c->ix, r->ix_level,
		    (unsigned)range_slots(r->start, r->end, r->ix_level), -1);
	r->ix_level = -1;
}

/*
 * Hold r (hold: a pin or a direct reference) if it is cached, neither
 * INVALID nor DEAD, then check it covers the request, which no longer
 * races with anything: r stays what it is while held.  One
 * compare-and-swap.  @return 1 held; 0 not.
 */
static int region_try_get(struct gdrc_cache *c, struct gdrc_region *r,
			  uintptr_t start, uintptr_t end, uint32_t access,
			  uint64_t hold)
{
	uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);

	do {
		if (w & (REGION_INVALID | REGION_DEAD))
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(
		&r->word, &w, w + hold, memory_order_acquire,
		memory_order_relaxed));
	if (r->start <= start && end <= r->end && !(access & ~r->access) &&
	    !gdrc_region_kstale(c, r))
		return 1;
	gdrc_region_let_go(c, r, hold);
	return 0;
}

/*
 * The next way of key in t for a reader without the lock, from bucket *i
 * way *w on (both advanced past it): its kv and lo as read, and the
 * bucket's sequence read before them (*s0), for the caller to check that
 * the sequence was even and did not move (what it checks after depends
 * on what it does with the entry).  @return 1 found; 0 no more.
 */
static inline __attribute__((always_inline)) int
ph_scan_unlocked(const struct gdrc_phash *t, uint64_t key, uint64_t *i,
		 unsigned *w, uint64_t *kv, uint16_t *lo, uint16_t *s0)
{
	for (uint64_t n = 0; n <= ph_mask(t); n++) {
		const struct ph_bucket *b = &t->b[*i];
		unsigned match;

		*s0 = atomic_load_explicit(&b->seq, memory_order_acquire);
		match = pb_match(b, key) & ~0u << *w;
		if (match) {
			unsigned k = (unsigned)__builtin_ctz(match);

			*kv = atomic_load_explicit(&b->kv[k],
						   memory_order_relaxed);
			*lo = atomic_load_explicit(&b->lo[k],
						   memory_order_relaxed);
			*w = k + 1;
			return 1;
		}
		if (!pb_spill(b))
			return 0;
		*i = (*i + 1) & ph_mask(t);
		*w = 0;
	}
	return 0;
}

/*
 * The next entry of key in t for a reader without the lock, as
 * ph_scan_unlocked finds it: its region, or NULL (no more, or a writer
 * was changing the bucket: the locked query answers).  An entry counts
 * only if its bucket's sequence was even and the same before and after
 * it was read.
 */
static struct gdrc_region *ph_next_unlocked(const struct gdrc_phash *t,
					    uint64_t key, uint64_t *i,
					    unsigned *w, int *seen)
{
	uint64_t kv;
	uint16_t lo, s0;

	if (!ph_scan_unlocked(t, key, i, w, &kv, &lo, &s0))
		return NULL;
	*seen = 1;
	atomic_thread_fence(memory_order_acquire);
	if ((s0 & 1) || pe_key(kv) != key ||
	    atomic_load_explicit(&t->b[*i].seq, memory_order_relaxed) != s0)
		return NULL;
	return pe_region(t, kv, lo);
}

struct gdrc_region *gdrc_index_find_fast(struct gdrc_cache *c,
					 uintptr_t start, uintptr_t end,
					 uint32_t access, gdrc_hold_fn hold_of,
					 uint64_t *hold_p, int *absent)
{
	const struct gdrc_phash *t =
		atomic_load_explicit(&c->ix.ph, memory_order_acquire);
	int seen = 0;

	*absent = 0;
	if (!t)
		return NULL;
	for (uint32_t m = atomic_load_explicit(&c->ix.levels,
					       memory_order_relaxed);
	     m; m &= m - 1) {
		uint64_t key = ph_addr_key(start, __builtin_ctz(m));
		uint64_t i = ph_home(t, key);
		unsigned w = 0;
		struct gdrc_region *r;

		while ((r = ph_next_unlocked(t, key, &i, &w, &seen))) {
			*hold_p = hold_of(c, r, start);
			if (region_try_get(c, r, start, end, access, *hold_p))
				return r;
		}
	}
	*absent = !seen && !atomic_load_explicit(&c->ix.wide,
						 memory_order_relaxed);
	return NULL;
}

void gdrc_index_prefetch(const struct gdrc_cache *c, uintptr_t start)
{
	/* Acquire, as the lock-free find: a new table's header (bits) is
	 * read after its publication, never before. */
	const struct gdrc_phash *t =
		atomic_load_explicit(&c->ix.ph, memory_order_acquire);
	uint32_t m = atomic_load_explicit(&c->ix.levels, memory_order_relaxed);
	int level;

	if (!t || !m)
		return;
	level = __builtin_ctz(m);
	__builtin_prefetch(&t->b[ph_home(t, ph_addr_key(start, level))]);
}

/* ------------------------------------------------------------------ */
/* Queries under the lock. */

struct gdrc_region *gdrc_index_find_cover(const struct gdrc_cache *c,
					  uintptr_t start, uintptr_t end,
					  gdrc_region_fn fn, void *arg)
{
	const struct gdrc_phash *t =
		atomic_load_explicit(&c->ix.ph, memory_order_relaxed);
	struct visit v = { .fn = fn, .arg = arg };
	struct gdrc_itree_node *node;

	gdrc_assert_locked(c);
	for (uint32_t m = atomic_load_explicit(&c->ix.levels,
					       memory_order_relaxed);
	     m; m &= m - 1) {
		int level = __builtin_ctz(m);
		uint64_t key = ph_addr_key(start, level);
		struct ph_iter it = { 0 };

		while (ph_next(t, key, &it)) {
			struct gdrc_region *r = ph_it_region(t, &it);

			if (r->start <= start && end <= r->end &&
			    (!fn || fn(r, arg)))
				return r;
		}
	}
	if (!c->ix.tree.count)
		return NULL;
	node = gdrc_itree_find_cover(&c->ix.tree, start, end,
				     fn ? visit_fn : NULL, &v);
	return node ? node_region(node) : NULL;
}

/* ------------------------------------------------------------------ */
/* The cell hit's look (cell.c, lookup.c): without the lock. */

struct gdrc_region *gdrc_index_find_plain(struct gdrc_cache *c,
					  uintptr_t start, uintptr_t end,
					  uint32_t access,
					  struct gdrc_ix_ticket *tk,
					  int *absent)
{
	const struct gdrc_phash *t =
		atomic_load_explicit(&c->ix.ph, memory_order_acquire);
	uint32_t levels = atomic_load_explicit(&c->ix.levels,
					       memory_order_relaxed);
	uint64_t key = ph_addr_key(start, 0), i, kv;
	unsigned w = 0;
	uint16_t lo, s0;

	*absent = 0;
	if (!t || !(levels & 1) ||
	    end > ((start >> ix_shift(0)) + 1) << ix_shift(0))
		return NULL;
	i = ph_home(t, key);
	/* The first entry of the page only: another (other rights) is the
	 * general lookup's.  The sequence is read again after the cell is
	 * stored (gdrc_index_ticket_valid). */
	if (!ph_scan_unlocked(t, key, &i, &w, &kv, &lo, &s0)) {
		/* No region of the page's level covers it, and no other
		 * level or tree holds one. */
		*absent = levels == 1 &&
			  !atomic_load_explicit(&c->ix.wide,
						memory_order_relaxed);
		return NULL;
	}
	if (!(kv & PE_PLAIN) || (s0 & 1) || pe_key(kv) != key ||
	    (access & ~pe_access(kv)))
		return NULL;
	tk->table = t;
	tk->bucket = (void *)&t->b[i];
	tk->seq = s0;
	tk->way = w - 1;
	return pe_region(t, kv, lo);
}

int gdrc_index_ticket_valid(const struct gdrc_cache *c,
			    const struct gdrc_ix_ticket *tk)
{
	struct ph_bucket *b = tk->bucket;
	uint8_t bit = (uint8_t)(1u << tk->way);

	/* The table first: a removal changes only the current one, so a
	 * hit read from a table replaced since (ph_grow) cannot see it in
	 * its bucket.  Seeing its table still current, the hit stored its
	 * cell before the fence of any removal made after the growth
	 * (whose publication came before that fence), which therefore sees
	 * the cell (cell.c). */
	if (atomic_load_explicit(&c->ix.ph, memory_order_seq_cst) !=
		    tk->table ||
	    atomic_load_explicit(&b->seq, memory_order_seq_cst) != tk->seq)
		return 0;
	/* The hit's used mark, in the line just read: a store only when
	 * the clock hand cleared it (gdrc_index_used_take). */
	if (!(atomic_load_explicit(&b->used, memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(&b->used, bit, memory_order_relaxed);
	return 1;
}

int gdrc_index_used_take(struct gdrc_cache *c, const struct gdrc_region *r)
{
	struct gdrc_phash *t = atomic_load_explicit(&c->ix.ph,
						    memory_order_relaxed);
	struct ph_iter it = { 0 };
	struct ph_bucket *b;
	uint8_t bit;

	gdrc_assert_wrlocked(c);
	/* Marks are a plain region's: one page, its first granule's entry. */
	if (r->ix_level != 0 ||
	    !ph_find(t, ph_addr_key(r->start, 0), gdrc_region_index(c, r), 0,
		     &it))
		return 0;
	b = &t->b[it.b];
	bit = (uint8_t)(1u << (it.w - 1));
	if (!(atomic_load_explicit(&b->used, memory_order_relaxed) & bit))
		return 0;
	atomic_fetch_and_explicit(&b->used, (uint8_t)~bit,
				  memory_order_relaxed);
	return 1;
}
