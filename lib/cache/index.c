// SPDX-License-Identifier: BSD-3-Clause
/*
 * index.c - which cached regions cover or overlap a range.
 *
 * Two structures, both changed under cache->lock for writing:
 *
 *   The tree (itree/: AVL keyed by start, each node holding its
 *   subtree's largest end) holds every cached region.  It answers what
 *   must be complete: every region whose key overlaps a range, in
 *   ascending start order (invalidation, the miss's plan), and covers
 *   under the lock.  Regions may overlap (a GPU key rounded to 64 KiB
 *   reaches into a neighbour's page; rights differ).
 *
 *   The page hash answers the hit, without a lock.  A region is entered
 *   at the lowest level L whose granule (4 KiB, 64 KiB, 1 MiB, ... 4 GiB:
 *   1 << ix_shift(L)) it spans at most GDRC_IX_SPAN of, once per granule
 *   it touches, keyed by (granule, L).  A request starting in granule g
 *   of level L can only be covered by a region of that level that
 *   touches g, so probing (start's granule, L) at each level that holds
 *   regions finds every region that covers it.  A one-page region is one
 *   16-byte slot.  Regions past the last level stay in the tree alone.
 *
 * The lock-free read.  Slots are open addressing with linear probing;
 * a removal shifts later slots of the cluster back (no tombstones), and
 * a full table is replaced by one twice its size, the old one kept until
 * the cache goes (readers may still be in it) but, when mapped, emptied
 * of its pages (ph_retire_pages: a reader there then misses).  A reader may therefore see a slot torn
 * between two entries, an entry moved past it, or a region released and
 * reused for other memory since the slot was written.  None of that can
 * serve a wrong registration: a candidate counts only once a
 * compare-and-swap added a pin or a reference to a word that was neither
 * INVALID nor DEAD (region memory is type-stable, pool.c), after which
 * its key, rights and kernel word are checked and cannot change.  What the
 * read can do is miss: the caller then asks the tree under the lock,
 * which is exact.  A region removed since a get's first load of pending
 * has INVALID set before pending clears (inval.c), so the CAS refuses it.
 *
 * Locks: cache->lock.  Changes need it for writing (asserted), the tree's
 * queries either mode (asserted), gdrc_index_find_fast none.  A walk's
 * callback must not change the index.  No allocation under the lock: a
 * larger table is made before it is taken (gdrc_index_prepare).
 * Callers: region.c (insert, remove), lookup.c (find), miss.c and
 * inval.c (overlap, prepare), cache.c (init, check, cleanup).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cache_int.h"

/* Granules a region may span at a level and still enter it. */
#define GDRC_IX_SPAN 16
/* Slots of the first table; a table grows at 3/4 full. */
#define PH_MIN_SLOTS 1024

struct ph_slot {
	_Atomic uintptr_t key; /* (granule << 3 | level) + 1; 0: empty */
	struct gdrc_region *_Atomic r;
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

static uintptr_t ix_key(uintptr_t granule, int level)
{
	return (granule << 3 | (uintptr_t)level) + 1;
}

static uint64_t ph_home(const struct gdrc_phash *t, uintptr_t key)
{
	return (key * 0x9e3779b97f4a7c15ULL) >> (64 - t->bits);
}

static uint64_t ph_mask(const struct gdrc_phash *t)
{
	return (1ULL << t->bits) - 1;
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

/* The granules of a level r touches: its entries there. */
static uint64_t region_slots(const struct gdrc_region *r, int level)
{
	unsigned s = ix_shift(level);

	return ((r->end - 1) >> s) - (r->start >> s) + 1;
}

/* The level r enters, or -1: too wide for the hash. */
static int region_level(const struct gdrc_region *r)
{
	for (int level = 0; level < GDRC_IX_LEVELS; level++)
		if (region_slots(r, level) <= GDRC_IX_SPAN)
			return level;
	return -1;
}

static void ph_put(struct gdrc_phash *t, uintptr_t key, struct gdrc_region *r)
{
	uint64_t i = ph_home(t, key);

	while (atomic_load_explicit(&t->slot[i].key, memory_order_relaxed))
		i = (i + 1) & ph_mask(t);
	/* r before key: a reader that sees the key sees r (or a later r,
	 * which it checks like any other). */
	atomic_store_explicit(&t->slot[i].r, r, memory_order_relaxed);
	atomic_store_explicit(&t->slot[i].key, key, memory_order_release);
}

/* Is home h cyclically in (i, j]?  Then the entry at j must stay. */
static int ph_stays(uint64_t i, uint64_t j, uint64_t h)
{
	return i <= j ? (i < h && h <= j) : (i < h || h <= j);
}

/* Remove key's entry for r, shifting the rest of its cluster back. */
static void ph_del(struct gdrc_phash *t, uintptr_t key,
		   struct gdrc_region *r)
{
	uint64_t mask = ph_mask(t), i = ph_home(t, key), j;
	uintptr_t k;

	while ((k = atomic_load_explicit(&t->slot[i].key,
					 memory_order_relaxed)) &&
	       (k != key || atomic_load_explicit(&t->slot[i].r,
						 memory_order_relaxed) != r))
		i = (i + 1) & mask;
	if (!k)
		return; /* not there: never entered (cannot happen) */
	for (j = i;;) {
		j = (j + 1) & mask;
		k = atomic_load_explicit(&t->slot[j].key, memory_order_relaxed);
		if (!k)
			break;
		if (ph_stays(i, j, ph_home(t, k)))
			continue;
		atomic_store_explicit(&t->slot[i].r,
				      atomic_load_explicit(&t->slot[j].r,
							   memory_order_relaxed),
				      memory_order_relaxed);
		atomic_store_explicit(&t->slot[i].key, k, memory_order_release);
		i = j;
	}
	atomic_store_explicit(&t->slot[i].key, 0, memory_order_relaxed);
	atomic_store_explicit(&t->slot[i].r, NULL, memory_order_relaxed);
}

static void ph_each_key(struct gdrc_phash *t, struct gdrc_region *r,
			void (*fn)(struct gdrc_phash *, uintptr_t,
				   struct gdrc_region *))
{
	unsigned s = ix_shift(r->ix_level);

	for (uintptr_t g = r->start >> s; g <= (r->end - 1) >> s; g++)
		fn(t, ix_key(g, r->ix_level), r);
}

static int ph_fits(const struct gdrc_phash *t, uint64_t more)
{
	return atomic_load_explicit(&t->used, memory_order_relaxed) + more <=
	       (3ULL << t->bits) / 4;
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

	if (!t || ph_fits(t, GDRC_IX_SPAN + 1))
		return NULL;
	return ph_new(t->bits + 1);
}

/*
 * A retired table's slots are never written again, and a reader still in
 * it needs none of them: an empty slot ends its probe as a miss, which
 * the tree answers.  So a mapped one gives its memory back now (it would
 * otherwise stay resident until the cache goes: as much again as the
 * current table) and keeps only its first page, where the header lives
 * that such a reader reads (bits: its mask); pages read again are zero.
 * One system call per growth, under the lock; growths are logarithmic.
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
		uintptr_t k = atomic_load_explicit(&t->slot[i].key,
						   memory_order_relaxed);

		if (k)
			ph_put(spare, k, atomic_load_explicit(
						 &t->slot[i].r,
						 memory_order_relaxed));
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

void gdrc_index_insert(struct gdrc_cache *c, struct gdrc_region *r,
		       void **spare_p)
{
	struct gdrc_phash *t = atomic_load_explicit(&c->ix.ph,
						    memory_order_relaxed);
	int level = region_level(r);
	uint64_t n;

	gdrc_assert_wrlocked(c);
	gdrc_itree_insert(&c->ix.tree, &r->node);
	r->ix_level = -1;
	if (level < 0 || !t)
		return;
	n = region_slots(r, level);
	if (!ph_fits(t, n) && spare_p && *spare_p &&
	    ph_fits(*spare_p, atomic_load_explicit(&t->used,
						   memory_order_relaxed) + n)) {
		ph_grow(c, t, *spare_p);
		t = *spare_p;
		*spare_p = NULL;
	}
	if (!ph_fits(t, n))
		return; /* the tree alone until a larger table is made */
	r->ix_level = level;
	ph_each_key(t, r, ph_put);
	atomic_fetch_add_explicit(&t->used, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->ix.level_regions[level], 1,
				  memory_order_relaxed);
}

void gdrc_index_remove(struct gdrc_cache *c, struct gdrc_region *r)
{
	struct gdrc_phash *t = atomic_load_explicit(&c->ix.ph,
						    memory_order_relaxed);

	gdrc_assert_wrlocked(c);
	gdrc_itree_remove(&c->ix.tree, &r->node);
	if (r->ix_level < 0)
		return;
	ph_each_key(t, r, ph_del);
	atomic_fetch_sub_explicit(&t->used, region_slots(r, r->ix_level),
				  memory_order_relaxed);
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
		uintptr_t key = ix_key(start >> ix_shift(level), level);
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
			r = atomic_load_explicit(&t->slot[i].r,
						 memory_order_relaxed);
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

struct visit {
	gdrc_region_fn fn;
	void *arg;
};

static struct gdrc_region *node_region(struct gdrc_itree_node *node)
{
	return gdrc_container_of(node, struct gdrc_region, node);
}

static int visit_fn(struct gdrc_itree_node *node, void *arg)
{
	const struct visit *v = arg;

	return v->fn(node_region(node), v->arg);
}

int gdrc_index_overlap(const struct gdrc_cache *c, uintptr_t start,
		       uintptr_t end, gdrc_region_fn fn, void *arg)
{
	struct visit v = { .fn = fn, .arg = arg };

	gdrc_assert_locked(c);
	return gdrc_itree_overlap(&c->ix.tree, start, end, visit_fn, &v);
}

struct gdrc_region *gdrc_index_find_cover(const struct gdrc_cache *c,
					  uintptr_t start, uintptr_t end,
					  gdrc_region_fn fn, void *arg)
{
	struct visit v = { .fn = fn, .arg = arg };
	struct gdrc_itree_node *node;

	gdrc_assert_locked(c);
	node = gdrc_itree_find_cover(&c->ix.tree, start, end,
				     fn ? visit_fn : NULL, &v);
	return node ? node_region(node) : NULL;
}

/* Is every page-hash entry of r in t, once? */
static int ph_has_all(const struct gdrc_phash *t, const struct gdrc_region *r)
{
	unsigned s = ix_shift(r->ix_level);

	for (uintptr_t g = r->start >> s; g <= (r->end - 1) >> s; g++) {
		uintptr_t key = ix_key(g, r->ix_level);
		uint64_t i = ph_home(t, key), found = 0;

		for (uintptr_t k; (k = atomic_load_explicit(
					   &t->slot[i].key,
					   memory_order_relaxed));
		     i = (i + 1) & ph_mask(t))
			if (k == key && atomic_load_explicit(
						&t->slot[i].r,
						memory_order_relaxed) == r)
				found++;
		if (found != 1)
			return 0;
	}
	return 1;
}

struct ix_count {
	const struct gdrc_phash *t;
	uint64_t slots;
	uint64_t regions[GDRC_IX_LEVELS];
	int bad;
};

static int ix_count_fn(struct gdrc_region *r, void *arg)
{
	struct ix_count *n = arg;

	if (r->ix_level < 0)
		return 0;
	if (r->ix_level >= GDRC_IX_LEVELS || !ph_has_all(n->t, r)) {
		n->bad = 1;
		return 1;
	}
	n->slots += region_slots(r, r->ix_level);
	n->regions[r->ix_level]++;
	return 0;
}

/*
 * Codes: -1 the tree unsound, -2 its count differs from nregions, -8 a
 * region's page-hash entries missing or doubled, -9 the hash's counts
 * differ from its regions'.  Lock held or the cache owned.
 */
int gdrc_index_check(const struct gdrc_cache *c)
{
	struct ix_count n = {
		.t = atomic_load_explicit(&c->ix.ph, memory_order_relaxed),
	};
	uint64_t used = 0;

	if (gdrc_itree_check(&c->ix.tree))
		return -1;
	if (c->ix.tree.count != c->nregions)
		return -2;
	gdrc_itree_walk(&c->ix.tree, visit_fn,
			&(struct visit){ .fn = ix_count_fn, .arg = &n });
	if (n.bad)
		return -8;
	for (uint64_t i = 0; i <= ph_mask(n.t); i++)
		used += !!atomic_load_explicit(&n.t->slot[i].key,
					       memory_order_relaxed);
	if (used != n.slots ||
	    used != atomic_load_explicit(&n.t->used, memory_order_relaxed))
		return -9;
	for (int l = 0; l < GDRC_IX_LEVELS; l++)
		if (n.regions[l] != atomic_load_explicit(
					    &c->ix.level_regions[l],
					    memory_order_relaxed))
			return -9;
	return 0;
}
