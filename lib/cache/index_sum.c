// SPDX-License-Identifier: BSD-3-Clause
/*
 * index_sum.c - the index's summaries and what they answer: every cached
 * region overlapping a range (gdrc_index_overlap), and the index check.
 *
 * A summary of level L, tier k, block b is a 64-bit map of which of b's
 * children (tier k - 1 blocks; at tier 1, granules) hold a region's
 * first granule (index.c's opening comment says why, and how a query
 * uses them).  They live in their own table (struct gdrc_ixsums), read
 * and written only under cache->lock: no lock-free reader, so a table
 * replaced by a larger one is freed once the lock is dropped.
 *
 * Locks: cache->lock, for writing to change the summaries (index.c's
 * insert and remove), either mode for queries and the check (asserted).
 * Callers: index.c (set, clear, grow, publish), miss.c and inval.c
 * (overlap), cache.c (check).
 */
#include <stdlib.h>

#include "index_int.h"

static uint64_t sums_mask(const struct gdrc_ixsums *s)
{
	return (1ULL << s->bits) - 1;
}

static int64_t sums_find(const struct gdrc_ixsums *s, uintptr_t key)
{
	uint64_t i = ix_home(s->bits, key);

	for (; s->slot[i].key; i = (i + 1) & sums_mask(s))
		if (s->slot[i].key == key)
			return (int64_t)i;
	return -1;
}

/* The map of summary key, or 0: none. */
static uint64_t sum_map(const struct gdrc_ixsums *s, uintptr_t key)
{
	int64_t i = sums_find(s, key);

	return i < 0 ? 0 : s->slot[i].map;
}

struct gdrc_ixsums *gdrc_ixsums_new(unsigned bits)
{
	struct gdrc_ixsums *s = calloc(1, sizeof(*s) +
					     (sizeof(struct ix_sum) << bits));

	if (s)
		s->bits = bits;
	return s;
}

static void sums_put(struct gdrc_ixsums *s, uintptr_t key, uint64_t map)
{
	uint64_t i = ix_home(s->bits, key);

	while (s->slot[i].key)
		i = (i + 1) & sums_mask(s);
	s->slot[i] = (struct ix_sum){ .key = key, .map = map };
}

static void sums_del_at(struct gdrc_ixsums *s, uint64_t i)
{
	uint64_t mask = sums_mask(s), j;

	for (j = i;;) {
		j = (j + 1) & mask;
		if (!s->slot[j].key)
			break;
		if (ix_stays(i, j, ix_home(s->bits, s->slot[j].key)))
			continue;
		s->slot[i] = s->slot[j];
		i = j;
	}
	s->slot[i] = (struct ix_sum){ 0 };
	s->used--;
}

/* Tell gdrc_index_prepare, which reads no table, the summaries' size. */
void gdrc_ixsums_publish(struct gdrc_index *ix)
{
	atomic_store_explicit(&ix->sums_size,
			      (uint64_t)ix->sums->bits << 32 | ix->sums->used,
			      memory_order_relaxed);
}

/* Granule g of level L now holds a region's start: mark it in its
 * summaries, up to the first that already held something. */
void gdrc_ixsum_set(struct gdrc_ixsums *s, uintptr_t g, int level)
{
	for (unsigned k = 1; k <= IX_TIERS; k++, g >>= IX_FAN) {
		uintptr_t key = ix_key(g >> IX_FAN, level, k);
		uint64_t bit = 1ULL << (g & 63);
		int64_t i = sums_find(s, key);

		if (i >= 0) {
			s->slot[i].map |= bit;
			return;
		}
		sums_put(s, key, bit);
		s->used++;
	}
}

/* Granule g of level L no longer holds a region's start: clear it from
 * its summaries, removing those left empty below IX_KEEP_TIER. */
void gdrc_ixsum_clear(struct gdrc_ixsums *s, uintptr_t g, int level)
{
	for (unsigned k = 1; k <= IX_TIERS; k++, g >>= IX_FAN) {
		int64_t i = sums_find(s, ix_key(g >> IX_FAN, level, k));

		if (i < 0)
			return; /* cannot happen: gdrc_index_check says */
		s->slot[i].map &= ~(1ULL << (g & 63));
		if (s->slot[i].map || k >= IX_KEEP_TIER)
			return;
		sums_del_at(s, (uint64_t)i);
	}
}

/* Move every summary into the larger table sp->sums, which replaces the
 * current one; that goes to sp->old, freed after the lock is dropped (no
 * reader outside the lock). */
void gdrc_ixsums_grow(struct gdrc_cache *c, struct ix_spare *sp)
{
	struct gdrc_ixsums *s = c->ix.sums, *n = sp->sums;

	for (uint64_t i = 0; i <= sums_mask(s); i++)
		if (s->slot[i].key)
			sums_put(n, s->slot[i].key, s->slot[i].map);
	n->used = s->used;
	c->ix.sums = n;
	sp->sums = NULL;
	sp->old = s;
	gdrc_ixsums_publish(&c->ix);
}

/*
 * A range query at one level.  A region of the level overlapping the
 * range starts at most spans[level] - 1 granules before the range's
 * first (its widest region's span; GDRC_IX_SPAN at most): the query
 * looks for regions starting in [g0, g1], so widened, each found once,
 * at its first granule.  (Looking back always GDRC_IX_SPAN - 1 granules
 * cost a miss among one-page registrations of consecutive pages fifteen
 * visits of neighbours that cannot overlap it: 2,550 instructions of
 * the miss's 5,700.)
 */
struct ix_walk {
	const struct gdrc_phash *t;
	const struct gdrc_ixsums *sums;
	int level;
	unsigned back;        /* granules a region may start before it */
	uintptr_t start, end; /* the range */
	uintptr_t g0, g1;     /* the granules regions may start in */
	gdrc_region_fn fn;
	void *arg;
};

/* The regions starting in granule g that overlap the range. */
static int walk_granule(const struct ix_walk *w, uintptr_t g)
{
	uint64_t key = ph_key(g, w->level);
	struct ph_iter it = { 0 };
	int ret;

	while (ph_next(w->t, key, &it)) {
		struct gdrc_region *r;

		if (pe_off(ph_it_kv(w->t, &it)))
			continue;
		r = ph_it_region(w->t, &it);
		if (r->start >= w->end || r->end <= w->start)
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
	uint64_t map = sum_map(w->sums, ix_key(b, w->level, k));
	int ret;

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
	unsigned k = 0, s = ix_shift(w->level);
	int ret;

	w->g0 = w->start >> s;
	w->g0 = w->g0 > w->back ? w->g0 - w->back : 0;
	w->g1 = (w->end - 1) >> s;
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
		.sums = c->ix.sums,
		.start = start, .end = end, .fn = fn, .arg = arg,
	};
	int ret = 0;

	gdrc_assert_locked(c);
	if (start >= end)
		return 0;
	for (uint32_t m = atomic_load_explicit(&c->ix.levels,
					       memory_order_relaxed);
	     m && !ret; m &= m - 1) {
		w.level = __builtin_ctz(m);
		w.back = c->ix.spans[w.level] - 1u;
		ret = walk_level(&w);
	}
	if (!ret && c->ix.tree.count)
		ret = gdrc_itree_overlap(&c->ix.tree, start, end, visit_fn,
					 &(struct visit){ fn, arg });
	return ret;
}

/* Is every entry of r in t, once, where a lookup of its key finds it,
 * with r's offset, span and rights? */
static int ph_has_all(const struct gdrc_phash *t, const struct gdrc_region *r)
{
	unsigned s = ix_shift(r->ix_level), off = 0;
	uint64_t span = ((r->end - 1) >> s) - (r->start >> s) + 1;

	for (uintptr_t g = r->start >> s; g <= (r->end - 1) >> s; g++, off++) {
		struct ph_iter it = { 0 };
		uint64_t found = 0;

		while (ph_next(t, ph_key(g, r->ix_level), &it)) {
			uint64_t kv = ph_it_kv(t, &it);

			if (ph_it_region(t, &it) != r)
				continue;
			if (pe_off(kv) != off || pe_span1(kv) != span - 1 ||
			    pe_access(kv) != (r->access & PE_FIELD4))
				return 0;
			found++;
		}
		if (found != 1)
			return 0;
	}
	return 1;
}

/* Does the summary of the tier-k block holding child g (tier k - 1)
 * mark it, and is that summary entered once? */
static int sum_marks(const struct gdrc_ixsums *s, uintptr_t g, int level,
		     unsigned k)
{
	uintptr_t key = ix_key(g >> IX_FAN, level, k);
	uint64_t found = 0, map = 0;

	for (uint64_t i = ix_home(s->bits, key); s->slot[i].key;
	     i = (i + 1) & sums_mask(s))
		if (s->slot[i].key == key) {
			found++;
			map = s->slot[i].map;
		}
	return found == 1 && (map >> (g & 63) & 1);
}

/* Is child c of summary (b, level, tier k) there? */
static int sum_child_there(const struct gdrc_phash *t,
			   const struct gdrc_ixsums *s, uintptr_t b,
			   int level, unsigned k, unsigned c)
{
	uintptr_t child = b << IX_FAN | c;

	return k == 1 ? ph_has_first(t, ph_key(child, level)) :
			sums_find(s, ix_key(child, level, k - 1)) >= 0;
}

/* Every entry: its region cached at its level, found by its key, its
 * first granule marked in its summary.  @return 0, -8 or -9 (below). */
static int check_entries(const struct gdrc_cache *c,
			 const struct gdrc_phash *t)
{
	uint64_t used = 0;
	uint64_t spans[GDRC_IX_LEVELS][GDRC_IX_SPAN] = { { 0 } };
	uint32_t levels = 0;

	for (uint64_t i = 0; i < (ph_mask(t) + 1) * PH_WAYS; i++) {
		const struct ph_bucket *b = &t->b[i / PH_WAYS];
		uint64_t kv = pb_kv(b, i % PH_WAYS);
		const struct gdrc_region *r;
		unsigned off = pe_off(kv), s;

		if (!kv)
			continue;
		r = pe_region(t, kv, pb_lo(b, i % PH_WAYS));
		used++;
		if (r->ix_level < 0 || r->ix_level >= GDRC_IX_LEVELS)
			return -8;
		s = ix_shift(r->ix_level);
		if ((r->start >> s) + off > (r->end - 1) >> s)
			return -8;
		if (!off) {
			if (!ph_has_all(t, r) ||
			    !sum_marks(c->ix.sums, r->start >> s, r->ix_level,
				       1))
				return -8;
			spans[r->ix_level][((r->end - 1) >> s) -
					   (r->start >> s)]++;
		}
	}
	if (used != atomic_load_explicit(&t->used, memory_order_relaxed))
		return -9;
	for (int l = 0; l < GDRC_IX_LEVELS; l++) {
		unsigned widest = 0;

		for (unsigned n = 0; n < GDRC_IX_SPAN; n++) {
			if (spans[l][n] != c->ix.span_regions[l][n])
				return -9;
			if (spans[l][n])
				widest = n + 1;
		}
		if (widest != c->ix.spans[l])
			return -9;
		if (widest)
			levels |= 1u << l;
	}
	return levels == atomic_load_explicit(&c->ix.levels,
					      memory_order_relaxed) ?
		       0 :
		       -9;
}

/* Every summary: a map of children that are there, marked in its own
 * summary.  @return 0, -8 or -9. */
static int check_sums(const struct gdrc_cache *c, const struct gdrc_phash *t)
{
	const struct gdrc_ixsums *s = c->ix.sums;
	uint64_t used = 0;

	for (uint64_t i = 0; i <= sums_mask(s); i++) {
		uintptr_t k = s->slot[i].key;
		unsigned tier;
		uintptr_t b;
		int level;

		if (!k)
			continue;
		used++;
		k--;
		level = (int)(k & 7);
		tier = (unsigned)(k >> 3 & 15);
		b = k >> 7;
		if (level >= GDRC_IX_LEVELS || !tier || tier > IX_TIERS ||
		    (!s->slot[i].map && tier < IX_KEEP_TIER))
			return -8;
		if (tier < IX_TIERS && !sum_marks(s, b, level, tier + 1))
			return -8;
		for (uint64_t m = s->slot[i].map; m; m &= m - 1)
			if (!sum_child_there(t, s, b, level, tier,
					     (unsigned)__builtin_ctzll(m)))
				return -8;
	}
	return used == s->used ? 0 : -9;
}

/*
 * Codes: -1 the tree of wide regions unsound, -2 the count of regions
 * differs from nregions, -8 an entry or a summary wrong (a region's
 * entries missing, doubled, or not marked in their summary; a summary
 * marking an empty child, or not marked in its own), -9 a table's counts
 * differ from its entries (or a level's counts by span, its widest span
 * or the levels word, from its regions).  Lock held or the cache owned.
 */
int gdrc_index_check(const struct gdrc_cache *c)
{
	const struct gdrc_phash *t =
		atomic_load_explicit(&c->ix.ph, memory_order_relaxed);
	uint64_t all = c->ix.tree.count;
	int ret;

	if (gdrc_itree_check(&c->ix.tree))
		return -1;
	ret = check_entries(c, t);
	if (!ret)
		ret = check_sums(c, t);
	if (ret)
		return ret;
	for (int l = 0; l < GDRC_IX_LEVELS; l++)
		for (unsigned n = 0; n < GDRC_IX_SPAN; n++)
			all += c->ix.span_regions[l][n];
	return all == c->nregions ? 0 : -2;
}
