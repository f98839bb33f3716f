// SPDX-License-Identifier: BSD-3-Clause
/*
 * index.c - which cached regions cover or overlap a range.
 *
 * One open-addressing hash, changed under cache->lock for writing, holds
 * two kinds of entry:
 *
 *   Region entries answer the hit, without a lock.  A region is entered
 *   at the lowest level L whose granule (4 KiB, 64 KiB, 1 MiB, ... 4 GiB:
 *   1 << ix_shift(L)) it spans at most GDRC_IX_SPAN of, once per granule
 *   it touches, keyed by (granule, L).  A request starting in granule g
 *   of level L can only be covered by a region of that level that
 *   touches g, so probing (start's granule, L) at each level that holds
 *   regions finds every region that covers it.  A one-page region is one
 *   16-byte slot.
 *
 *   Summary entries make the hash answer for a range as well: what
 *   invalidation (an munmap of a gigabyte, or of everything) and the
 *   miss's plan ask, every region overlapping a range.  The summary of
 *   level L at tier k (1 to IX_TIERS) for block b holds a 64-bit map of
 *   which of b's 64 children (tier k - 1 blocks; tier 0: granules) hold
 *   anything; it exists while that map is not empty.  A range query
 *   starts at the lowest tier where the range spans at most two blocks
 *   and follows set bits down, so it costs a probe per level and tier
 *   plus one per granule that holds a region, whatever the range's size.
 *   They cost one entry per 64 occupied granules, about 2 % more entries
 *   for a dense million, and spare each region the tree links it needed
 *   before (docs/design.md, memory per registration).
 *
 * Regions wider than GDRC_IX_SPAN granules of the last level (more than
 * 64 GiB) go to the tree (itree/), through a node in their ext.  They
 * are found by both kinds of query like the rest.
 *
 * The lock-free read.  Slots are open addressing with linear probing;
 * a removal shifts later slots of the cluster back (no tombstones), and
 * a full table is replaced by one twice its size, the old one kept until
 * the cache goes (readers may still be in it) but, when mapped, emptied
 * of its pages (ph_retire_pages: a reader there then misses).  A reader
 * may therefore see a slot torn between two entries, an entry moved past
 * it, or a region released and reused for other memory since the slot
 * was written.  None of that can serve a wrong registration: a candidate
 * counts only once a compare-and-swap added a pin or a reference to a
 * word that was neither INVALID nor DEAD (region memory is type-stable,
 * pool.c), after which its key, rights and kernel word are checked and
 * cannot change.  A summary entry's key never equals a region entry's
 * (the tier is part of the key), so a reader never takes its map for a
 * region.  What the read can do is miss: the caller then asks again
 * under the lock, which is exact.  A region removed since a get's first
 * load of pending has INVALID set before pending clears (inval.c), so
 * the CAS refuses it.
 *
 * Room.  A table grows at three quarters full, with a larger one made
 * before the lock is taken (gdrc_index_prepare); an insertion that finds
 * no spare (another miss took the room, or the allocation failed) may
 * still fill it to fifteen sixteenths; past that it fails, and the miss
 * hands its registration out uncached.
 *
 * Locks: cache->lock.  Changes need it for writing (asserted), queries
 * either mode (asserted), gdrc_index_find_fast none.  A walk's callback
 * must not change the index.  No allocation under the lock.
 * Callers: region.c (insert, remove), lookup.c (find), miss.c and
 * inval.c (overlap, prepare, wide), cache.c (init, check, cleanup).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cache_int.h"

/* Granules a region may span at a level and still enter it. */
#define GDRC_IX_SPAN 16
/* Summary tiers: 64 children each, so that the top one's blocks at
 * level 0 (2^(12 + 6 * 8) bytes) leave at most 16 in the address
 * space. */
#define IX_TIERS 8
#define IX_FAN 6
/* Entries one insertion may add: its granules, and at each tier at most
 * two new summaries (16 consecutive granules touch two blocks at most). */
#define IX_INSERT_MAX (GDRC_IX_SPAN + 2 * IX_TIERS)
/* Slots of the first table; a table grows at 3/4 full. */
#define PH_MIN_SLOTS 1024

struct ph_slot {
	_Atomic uintptr_t key; /* ix_key(); 0: empty */
	_Atomic uintptr_t val; /* a region entry's region; a summary's map */
};

struct gdrc_phash {
	struct gdrc_phash *retired_next;
	size_t bytes;          /* mapped: its size; else 0 (calloc'ed) */
	unsigned bits;         /* slots = 1 << bits */
	_Atomic uint64_t used; /* written under the lock, read as a hint */
	struct ph_slot slot[];
};

static unsigned ix_shift(int level)
{
	return 12 + 4 * (unsigned)level;
}

/* tier 0: a region entry of granule g; else a summary of block g. */
static uintptr_t ix_key(uintptr_t g, int level, unsigned tier)
{
	return (g << 7 | (uintptr_t)tier << 3 | (uintptr_t)level) + 1;
}

static uint64_t ph_home(const struct gdrc_phash *t, uintptr_t key)
{
	return (key * 0x9e3779b97f4a7c15ULL) >> (64 - t->bits);
}

static uint64_t ph_mask(const struct gdrc_phash *t)
{
	return (1ULL << t->bits) - 1;
}

static uintptr_t slot_key(const struct gdrc_phash *t, uint64_t i)
{
	return atomic_load_explicit(&t->slot[i].key, memory_order_relaxed);
}

static uintptr_t slot_val(const struct gdrc_phash *t, uint64_t i)
{
	return atomic_load_explicit(&t->slot[i].val, memory_order_relaxed);
}

/* A table this large is mapped on its own, with transparent huge pages
 * asked for (a lookup that misses the TLB as well pays twice). */
#define PH_HUGE (2UL << 20)

static struct gdrc_phash *ph_new(unsigned bits)
{
	size_t bytes = sizeof(struct gdrc_phash) +
		       (sizeof(struct ph_slot) << bits);
	struct gdrc_phash *t;

	if (bytes < PH_HUGE) {
		/* Touched now, not left to calloc's fresh zero pages: the
		 * first table is made at gdrc_init, and a context's first
		 * insert should take no page fault. */
		t = malloc(bytes);
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
		t->bytes = bytes;
		t->bits = bits;
	}
	return t;
}

void gdrc_index_table_free(void *p)
{
	struct gdrc_phash *t = p;

	if (t && t->bytes)
		munmap(t, t->bytes);
	else
		free(t);
}

/* The granules of a level [start, end) touches. */
static uint64_t range_slots(uintptr_t start, uintptr_t end, int level)
{
	unsigned s = ix_shift(level);

	return ((end - 1) >> s) - (start >> s) + 1;
}

/* The level [start, end) enters, or -1: too wide for the hash. */
static int range_level(uintptr_t start, uintptr_t end)
{
	for (int level = 0; level < GDRC_IX_LEVELS; level++)
		if (range_slots(start, end, level) <= GDRC_IX_SPAN)
			return level;
	return -1;
}

int gdrc_index_wide(uintptr_t start, uintptr_t end)
{
	return range_level(start, end) < 0;
}

static void ph_put(struct gdrc_phash *t, uintptr_t key, uintptr_t val)
{
	uint64_t i = ph_home(t, key);

	while (slot_key(t, i))
		i = (i + 1) & ph_mask(t);
	/* val before key: a reader that sees the key sees val (or a later
	 * one, which it checks like any other). */
	atomic_store_explicit(&t->slot[i].val, val, memory_order_relaxed);
	atomic_store_explicit(&t->slot[i].key, key, memory_order_release);
}

/* The slot of key (and val, unless val is 0), or -1. */
static int64_t ph_find(const struct gdrc_phash *t, uintptr_t key,
		       uintptr_t val)
{
	uint64_t i = ph_home(t, key);
	uintptr_t k;

	for (; (k = slot_key(t, i)); i = (i + 1) & ph_mask(t))
		if (k == key && (!val || slot_val(t, i) == val))
			return (int64_t)i;
	return -1;
}

/* Is home h cyclically in (i, j]?  Then the entry at j must stay. */
static int ph_stays(uint64_t i, uint64_t j, uint64_t h)
{
	return i <= j ? (i < h && h <= j) : (i < h || h <= j);
}

/* Empty slot i, shifting the rest of its cluster back. */
static void ph_del_at(struct gdrc_phash *t, uint64_t i)
{
	uint64_t mask = ph_mask(t), j;
	uintptr_t k;

	for (j = i;;) {
		j = (j + 1) & mask;
		k = slot_key(t, j);
		if (!k)
			break;
		if (ph_stays(i, j, ph_home(t, k)))
			continue;
		atomic_store_explicit(&t->slot[i].val, slot_val(t, j),
				      memory_order_relaxed);
		atomic_store_explicit(&t->slot[i].key, k, memory_order_release);
		i = j;
	}
	atomic_store_explicit(&t->slot[i].key, 0, memory_order_relaxed);
	atomic_store_explicit(&t->slot[i].val, 0, memory_order_relaxed);
	atomic_fetch_sub_explicit(&t->used, 1, memory_order_relaxed);
}

static void ph_add(struct gdrc_phash *t, uintptr_t key, uintptr_t val)
{
	ph_put(t, key, val);
	atomic_fetch_add_explicit(&t->used, 1, memory_order_relaxed);
}

/* Granule g of level L now holds something: mark it in its summaries,
 * up to the first that already held something. */
static void sum_set(struct gdrc_phash *t, uintptr_t g, int level)
{
	for (unsigned k = 1; k <= IX_TIERS; k++, g >>= IX_FAN) {
		uintptr_t key = ix_key(g >> IX_FAN, level, k);
		uint64_t bit = 1ULL << (g & 63);
		int64_t i = ph_find(t, key, 0);

		if (i >= 0) {
			atomic_store_explicit(&t->slot[i].val,
					      slot_val(t, (uint64_t)i) | bit,
					      memory_order_relaxed);
			return;
		}
		ph_add(t, key, bit);
	}
}

/* Granule g of level L now holds nothing: clear it from its summaries,
 * removing those left empty. */
static void sum_clear(struct gdrc_phash *t, uintptr_t g, int level)
{
	for (unsigned k = 1; k <= IX_TIERS; k++, g >>= IX_FAN) {
		int64_t i = ph_find(t, ix_key(g >> IX_FAN, level, k), 0);
		uint64_t map;

		if (i < 0)
			return; /* cannot happen: gdrc_index_check says */
		map = slot_val(t, (uint64_t)i) & ~(1ULL << (g & 63));
		if (map) {
			atomic_store_explicit(&t->slot[i].val, map,
					      memory_order_relaxed);
			return;
		}
		ph_del_at(t, (uint64_t)i);
	}
}

static void ph_enter(struct gdrc_phash *t, struct gdrc_region *r)
{
	int level = r->ix_level;
	unsigned s = ix_shift(level);

	for (uintptr_t g = r->start >> s; g <= (r->end - 1) >> s; g++) {
		uintptr_t key = ix_key(g, level, 0);
		int fresh = ph_find(t, key, 0) < 0;

		ph_add(t, key, (uintptr_t)r);
		if (fresh)
			sum_set(t, g, level);
	}
}

static void ph_leave(struct gdrc_phash *t, struct gdrc_region *r)
{
	int level = r->ix_level;
	unsigned s = ix_shift(level);

	for (uintptr_t g = r->start >> s; g <= (r->end - 1) >> s; g++) {
		uintptr_t key = ix_key(g, level, 0);
		int64_t i = ph_find(t, key, (uintptr_t)r);

		if (i < 0)
			continue; /* cannot happen: gdrc_index_check says */
		ph_del_at(t, (uint64_t)i);
		if (ph_find(t, key, 0) < 0)
			sum_clear(t, g, level);
	}
}

/* Room for more entries: below 3/4 (soft) or 15/16 (hard) full. */
static int ph_fits(const struct gdrc_phash *t, uint64_t more, int hard)
{
	uint64_t slots = 1ULL << t->bits;

	return atomic_load_explicit(&t->used, memory_order_relaxed) + more <=
	       (hard ? slots - slots / 16 : 3 * slots / 4);
}

/* ------------------------------------------------------------------ */

gdrc_status_t gdrc_index_init(struct gdrc_cache *c)
{
	struct gdrc_phash *t = ph_new(__builtin_ctz(PH_MIN_SLOTS));

	gdrc_itree_init(&c->ix.tree);
	if (!t)
		return GDRC_ERR_NO_MEMORY;
	atomic_init(&c->ix.ph, t);
	return GDRC_OK;
}

void gdrc_index_cleanup(struct gdrc_cache *c)
{
	struct gdrc_phash *t, *next;

	gdrc_index_table_free(atomic_load_explicit(&c->ix.ph,
						   memory_order_relaxed));
	atomic_store_explicit(&c->ix.ph, NULL, memory_order_relaxed);
	for (t = c->ix.retired; t; t = next) {
		next = t->retired_next;
		gdrc_index_table_free(t);
	}
	c->ix.retired = NULL;
}

void *gdrc_index_prepare(const struct gdrc_cache *c)
{
	const struct gdrc_phash *t =
		atomic_load_explicit(&c->ix.ph, memory_order_acquire);

	if (!t || ph_fits(t, IX_INSERT_MAX, 0))
		return NULL;
	return ph_new(t->bits + 1);
}

/*
 * A retired table's slots are never written again, and a reader still in
 * it needs none of them: an empty slot ends its probe as a miss, which
 * the locked query answers.  So a mapped one gives its memory back now
 * (it would otherwise stay resident until the cache goes: as much again
 * as the current table) and keeps only its first page, where the header
 * lives that such a reader reads (bits: its mask); pages read again are
 * zero.  One system call per growth, under the lock; growths are
 * logarithmic.
 */
static void ph_retire_pages(struct gdrc_phash *t)
{
	long page = sysconf(_SC_PAGESIZE);

	if (t->bytes > (size_t)page)
		madvise((char *)t + page, t->bytes - (size_t)page,
			MADV_DONTNEED); /* a hint: the table stays valid */
}

/* Move every entry into the larger table spare, which replaces t. */
static void ph_grow(struct gdrc_cache *c, struct gdrc_phash *t,
		    struct gdrc_phash *spare)
{
	for (uint64_t i = 0; i <= ph_mask(t); i++) {
		uintptr_t k = slot_key(t, i);

		if (k)
			ph_put(spare, k, slot_val(t, i));
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

/* The ext of a wide region, whose node the index owns. */
static struct gdrc_region_ext *wide_ext(struct gdrc_region *r)
{
	return (struct gdrc_region_ext *)r->ext;
}

int gdrc_index_insert(struct gdrc_cache *c, struct gdrc_region *r,
		      void **spare_p)
{
	struct gdrc_phash *t = atomic_load_explicit(&c->ix.ph,
						    memory_order_relaxed);
	int level = range_level(r->start, r->end);

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
		return 0;
	}
	if (!ph_fits(t, IX_INSERT_MAX, 0) && spare_p && *spare_p &&
	    ph_fits(*spare_p, atomic_load_explicit(&t->used,
						   memory_order_relaxed) +
				      IX_INSERT_MAX, 0)) {
		ph_grow(c, t, *spare_p);
		t = *spare_p;
		*spare_p = NULL;
	}
	if (!ph_fits(t, IX_INSERT_MAX, 1))
		return -1;
	r->ix_level = (int8_t)level;
	ph_enter(t, r);
	atomic_fetch_add_explicit(&c->ix.level_regions[level], 1,
				  memory_order_relaxed);
	return 0;
}

void gdrc_index_remove(struct gdrc_cache *c, struct gdrc_region *r)
{
	struct gdrc_phash *t = atomic_load_explicit(&c->ix.ph,
						    memory_order_relaxed);

	gdrc_assert_wrlocked(c);
	if (r->ix_level < 0) {
		gdrc_itree_remove(&c->ix.tree, &wide_ext(r)->node);
		return;
	}
	ph_leave(t, r);
	atomic_fetch_sub_explicit(&c->ix.level_regions[r->ix_level], 1,
				  memory_order_relaxed);
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

struct gdrc_region *gdrc_index_find_fast(struct gdrc_cache *c,
					 uintptr_t start, uintptr_t end,
					 uint32_t access, gdrc_hold_fn hold_of,
					 uint64_t *hold_p)
{
	const struct gdrc_phash *t =
		atomic_load_explicit(&c->ix.ph, memory_order_acquire);

	if (!t)
		return NULL;
	for (int level = 0; level < GDRC_IX_LEVELS; level++) {
		uintptr_t key = ix_key(start >> ix_shift(level), level, 0);
		uint64_t mask = ph_mask(t), i = ph_home(t, key);

		if (!atomic_load_explicit(&c->ix.level_regions[level],
					  memory_order_relaxed))
			continue;
		for (uint64_t n = 0; n <= mask; n++, i = (i + 1) & mask) {
			uintptr_t k = atomic_load_explicit(
				&t->slot[i].key, memory_order_acquire);
			struct gdrc_region *r;

			if (!k)
				break;
			if (k != key)
				continue;
			r = (struct gdrc_region *)atomic_load_explicit(
				&t->slot[i].val, memory_order_relaxed);
			if (!r)
				continue;
			*hold_p = hold_of(c, r, start);
			if (region_try_get(c, r, start, end, access, *hold_p))
				return r;
		}
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Queries under the lock. */

struct visit {
	gdrc_region_fn fn;
	void *arg;
};

static struct gdrc_region *node_region(struct gdrc_itree_node *node)
{
	return gdrc_container_of(node, struct gdrc_region_ext, node)
		->node_region;
}

static int visit_fn(struct gdrc_itree_node *node, void *arg)
{
	const struct visit *v = arg;

	return v->fn(node_region(node), v->arg);
}

/* A range query at one level. */
struct ix_walk {
	const struct gdrc_phash *t;
	int level;
	unsigned s;
	uintptr_t start, end; /* the range */
	uintptr_t g0, g1;     /* its first and last granule */
	gdrc_region_fn fn;
	void *arg;
};

/* The regions entered at granule g that overlap the range, each visited
 * at the first of its granules in [g0, g1]. */
static int walk_granule(const struct ix_walk *w, uintptr_t g)
{
	uintptr_t key = ix_key(g, w->level, 0), k;
	uint64_t i = ph_home(w->t, key);
	int ret;

	for (; (k = slot_key(w->t, i)); i = (i + 1) & ph_mask(w->t)) {
		struct gdrc_region *r;
		uintptr_t first;

		if (k != key)
			continue;
		r = (struct gdrc_region *)slot_val(w->t, i);
		first = r->start >> w->s;
		if ((first > w->g0 ? first : w->g0) != g ||
		    r->start >= w->end || r->end <= w->start)
			continue;
		ret = w->fn(r, w->arg);
		if (ret)
			return ret;
	}
	return 0;
}

/* Block b of tier k: its children in the range that hold something. */
static int walk_block(const struct ix_walk *w, unsigned k, uintptr_t b)
{
	uintptr_t base = b << IX_FAN;
	uintptr_t lo = w->g0 >> (IX_FAN * (k - 1));
	uintptr_t hi = w->g1 >> (IX_FAN * (k - 1));
	int64_t i = ph_find(w->t, ix_key(b, w->level, k), 0);
	uint64_t map;
	int ret;

	if (i < 0)
		return 0;
	map = slot_val(w->t, (uint64_t)i);
	if (lo > base)
		map &= ~0ULL << (lo - base);
	if (hi < base + 63)
		map &= ~0ULL >> (63 - (hi - base));
	for (; map; map &= map - 1) {
		uintptr_t child = base | (uintptr_t)__builtin_ctzll(map);

		ret = k == 1 ? walk_granule(w, child) :
			       walk_block(w, k - 1, child);
		if (ret)
			return ret;
	}
	return 0;
}

static int walk_level(struct ix_walk *w)
{
	unsigned k = 0;
	int ret;

	w->s = ix_shift(w->level);
	w->g0 = w->start >> w->s;
	w->g1 = (w->end - 1) >> w->s;
	while (k < IX_TIERS &&
	       (w->g1 >> (IX_FAN * k)) - (w->g0 >> (IX_FAN * k)) > 1)
		k++;
	for (uintptr_t b = w->g0 >> (IX_FAN * k);; b++) {
		ret = k ? walk_block(w, k, b) : walk_granule(w, b);
		if (ret || b == w->g1 >> (IX_FAN * k))
			return ret;
	}
}

int gdrc_index_overlap(const struct gdrc_cache *c, uintptr_t start,
		       uintptr_t end, gdrc_region_fn fn, void *arg)
{
	struct ix_walk w = {
		.t = atomic_load_explicit(&c->ix.ph, memory_order_relaxed),
		.start = start, .end = end, .fn = fn, .arg = arg,
	};
	int ret = 0;

	gdrc_assert_locked(c);
	if (start >= end)
		return 0;
	for (w.level = 0; w.level < GDRC_IX_LEVELS && !ret; w.level++)
		if (atomic_load_explicit(&c->ix.level_regions[w.level],
					 memory_order_relaxed))
			ret = walk_level(&w);
	if (!ret && c->ix.tree.count)
		ret = gdrc_itree_overlap(&c->ix.tree, start, end, visit_fn,
					 &(struct visit){ fn, arg });
	return ret;
}

struct gdrc_region *gdrc_index_find_cover(const struct gdrc_cache *c,
					  uintptr_t start, uintptr_t end,
					  gdrc_region_fn fn, void *arg)
{
	const struct gdrc_phash *t =
		atomic_load_explicit(&c->ix.ph, memory_order_relaxed);
	struct visit v = { .fn = fn, .arg = arg };
	struct gdrc_itree_node *node;

	gdrc_assert_locked(c);
	for (int level = 0; level < GDRC_IX_LEVELS; level++) {
		uintptr_t key = ix_key(start >> ix_shift(level), level, 0), k;
		uint64_t i = ph_home(t, key);

		if (!atomic_load_explicit(&c->ix.level_regions[level],
					  memory_order_relaxed))
			continue;
		for (; (k = slot_key(t, i)); i = (i + 1) & ph_mask(t)) {
			struct gdrc_region *r =
				(struct gdrc_region *)slot_val(t, i);

			if (k == key && r->start <= start && end <= r->end &&
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
/* The check (tests, GDRC_CHECK=1). */

/* Is every region entry of r in t, once? */
static int ph_has_all(const struct gdrc_phash *t, const struct gdrc_region *r)
{
	unsigned s = ix_shift(r->ix_level);

	for (uintptr_t g = r->start >> s; g <= (r->end - 1) >> s; g++) {
		uintptr_t key = ix_key(g, r->ix_level, 0), k;
		uint64_t i = ph_home(t, key), found = 0;

		for (; (k = slot_key(t, i)); i = (i + 1) & ph_mask(t))
			if (k == key && slot_val(t, i) == (uintptr_t)r)
				found++;
		if (found != 1)
			return 0;
	}
	return 1;
}

/* Does the summary of the tier-k block holding child g (tier k - 1)
 * mark it, and is that summary entered once? */
static int sum_marks(const struct gdrc_phash *t, uintptr_t g, int level,
		     unsigned k)
{
	uintptr_t key = ix_key(g >> IX_FAN, level, k), kk;
	uint64_t i = ph_home(t, key), found = 0, map = 0;

	for (; (kk = slot_key(t, i)); i = (i + 1) & ph_mask(t))
		if (kk == key) {
			found++;
			map = slot_val(t, i);
		}
	return found == 1 && (map >> (g & 63) & 1);
}

/* Is child c of summary (b, level, tier k) there? */
static int sum_child_there(const struct gdrc_phash *t, uintptr_t b,
			   int level, unsigned k, unsigned c)
{
	return ph_find(t, ix_key(b << IX_FAN | c, level, k - 1), 0) >= 0;
}

/*
 * Codes: -1 the tree of wide regions unsound, -2 the count of regions
 * differs from nregions, -8 a region's entries missing, doubled or not
 * marked in their summary, or a summary marking an empty child or not
 * marked in its own, -9 the hash's counts differ from its entries.
 * Lock held or the cache owned.
 */
int gdrc_index_check(const struct gdrc_cache *c)
{
	const struct gdrc_phash *t =
		atomic_load_explicit(&c->ix.ph, memory_order_relaxed);
	uint64_t used = 0, regions[GDRC_IX_LEVELS] = { 0 }, all = 0;

	if (gdrc_itree_check(&c->ix.tree))
		return -1;
	for (uint64_t i = 0; i <= ph_mask(t); i++) {
		uintptr_t k = slot_key(t, i), v = slot_val(t, i);
		unsigned tier;
		uintptr_t g;
		int level;

		if (!k)
			continue;
		used++;
		k--;
		level = (int)(k & 7);
		tier = (unsigned)(k >> 3 & 15);
		g = k >> 7;
		if (level >= GDRC_IX_LEVELS || tier > IX_TIERS)
			return -8;
		if (tier < IX_TIERS && !sum_marks(t, g, level, tier + 1))
			return -8;
		if (tier) {
			if (!v)
				return -8;
			for (uint64_t m = v; m; m &= m - 1)
				if (!sum_child_there(t, g, level, tier,
						     (unsigned)__builtin_ctzll(m)))
					return -8;
		} else {
			const struct gdrc_region *r =
				(const struct gdrc_region *)v;
			unsigned s = ix_shift(level);

			if (!r || r->ix_level != level ||
			    g < r->start >> s || g > (r->end - 1) >> s)
				return -8;
			if (g == r->start >> s) {
				if (!ph_has_all(t, r))
					return -8;
				regions[level]++;
			}
		}
	}
	if (used != atomic_load_explicit(&t->used, memory_order_relaxed))
		return -9;
	for (int l = 0; l < GDRC_IX_LEVELS; l++) {
		if (regions[l] != atomic_load_explicit(
					 &c->ix.level_regions[l],
					 memory_order_relaxed))
			return -9;
		all += regions[l];
	}
	if (all + c->ix.tree.count != c->nregions)
		return -2;
	return 0;
}
