/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * index_int.h - what index.c (the page hash, the lock-free hit, changes)
 * and index_sum.c (the summaries, range queries, the check) share: the
 * tables' layout, keys and entries.  Private to
 * those two files; index.c's opening comment is the design.
 */
#ifndef GDRC_INDEX_INT_H
#define GDRC_INDEX_INT_H

#include "cache_int.h"

/* Summary tiers: 64 children each, so that the top one's blocks at
 * level 0 (2^(12 + 6 * 8) bytes) leave at most 16 in the address
 * space. */
#define IX_TIERS 8
#define IX_FAN 6

/* Summaries of this tier and above stay when they empty (their blocks
 * are a gigabyte or more at level 0, so there are few, and a lone
 * registration made and dropped over and over would otherwise make and
 * remove the whole chain each time): kept with an empty map, marked in
 * their parent. */
#define IX_KEEP_TIER 3

/* Summaries one insertion may add: at each tier at most two (16
 * consecutive granules touch two blocks at most). */
#define IX_SUMS_MAX (2 * IX_TIERS)

/*
 * A page-hash entry: bits 0-40 the region's address >> 6, 41-44 the
 * granule's offset in the region (0 to GDRC_IX_SPAN - 1), 45-63 a
 * fingerprint of the key; 0: empty.
 */
#define E_PTR_BITS 41
#define E_OFF_SHIFT 41
#define E_FP_SHIFT 45

struct gdrc_phash {
	struct gdrc_phash *retired_next;
	size_t bytes;          /* mapped: its size; else 0 (malloc'ed) */
	unsigned bits;         /* slots = 1 << bits */
	_Atomic uint64_t used; /* written under the lock, read as a hint */
	_Atomic uint64_t slot[];
};

struct ix_sum {
	uintptr_t key; /* ix_key(block, level, tier); 0: empty */
	uint64_t map;  /* children that hold something */
};

struct gdrc_ixsums {
	unsigned bits;
	uint64_t used;
	struct ix_sum slot[];
};

/* What gdrc_index_prepare makes and gdrc_index_table_free frees. */
struct ix_spare {
	struct gdrc_phash *ph;     /* a larger page hash, or NULL */
	struct gdrc_ixsums *sums;  /* larger summaries, or NULL */
	struct gdrc_ixsums *old;   /* summaries replaced under the lock */
};

static inline unsigned ix_shift(int level)
{
	return 12 + 4 * (unsigned)level;
}

/* tier 0: a region entry of granule g; else a summary of block g. */
static inline uintptr_t ix_key(uintptr_t g, int level, unsigned tier)
{
	return (g << 7 | (uintptr_t)tier << 3 | (uintptr_t)level) + 1;
}

/* The key of the level's granule holding address a. */
static inline uintptr_t ix_addr_key(uintptr_t a, int level)
{
	return ix_key(a >> ix_shift(level), level, 0);
}

static inline uint64_t ix_home(unsigned bits, uintptr_t key)
{
	return (key * 0x9e3779b97f4a7c15ULL) >> (64 - bits);
}

/* 19 bits of the key, from another multiplier than the home's (keys of
 * one cluster share their home's bits). */
static inline uint64_t ix_fp(uintptr_t key)
{
	return (key * 0xd6e8feb86659fd93ULL) >> E_FP_SHIFT;
}

static inline uint64_t ph_mask(const struct gdrc_phash *t)
{
	return (1ULL << t->bits) - 1;
}

static inline uint64_t ph_get(const struct gdrc_phash *t, uint64_t i)
{
	return atomic_load_explicit(&t->slot[i], memory_order_relaxed);
}

static inline struct gdrc_region *e_region(uint64_t e)
{
	return (struct gdrc_region *)(uintptr_t)((e & ((1ULL << E_PTR_BITS) -
						       1)) << 6);
}

static inline uint64_t e_make(const struct gdrc_region *r, uintptr_t key,
			      unsigned off)
{
	return ix_fp(key) << E_FP_SHIFT | (uint64_t)off << E_OFF_SHIFT |
	       (uintptr_t)r >> 6;
}

/* Does r fit an entry? */
static inline int e_fits(const struct gdrc_region *r)
{
	return !((uintptr_t)r >> (E_PTR_BITS + 6)) && !((uintptr_t)r & 63);
}

/* The granule of e in its region: 0 for the region's first. */
static inline unsigned e_off(uint64_t e)
{
	return (unsigned)(e >> E_OFF_SHIFT) & (GDRC_IX_SPAN - 1);
}

/* The key of entry e (under the lock: its region is cached). */
static inline uintptr_t e_key(uint64_t e)
{
	const struct gdrc_region *r = e_region(e);
	int level = r->ix_level;

	return ix_key((r->start >> ix_shift(level)) + e_off(e), level, 0);
}

/* Does e (non-zero) hold key? */
static inline int e_is(uint64_t e, uintptr_t key)
{
	return e >> E_FP_SHIFT == ix_fp(key) && e_key(e) == key;
}

/* Does a region start in key's granule (an entry of key, offset 0)? */
static inline int ph_has_first(const struct gdrc_phash *t, uintptr_t key)
{
	uint64_t i = ix_home(t->bits, key), x;

	for (; (x = ph_get(t, i)); i = (i + 1) & ph_mask(t))
		if (!e_off(x) && e_is(x, key))
			return 1;
	return 0;
}

/* Is home h cyclically in (i, j]?  Then the entry at j must stay. */
static inline int ix_stays(uint64_t i, uint64_t j, uint64_t h)
{
	return i <= j ? (i < h && h <= j) : (i < h || h <= j);
}

/* Room for more: below 3/4 (soft) or 15/16 (hard) of slots full. */
static inline int ix_fits(unsigned bits, uint64_t used, uint64_t more, int hard)
{
	uint64_t slots = 1ULL << bits;

	return used + more <= (hard ? slots - slots / 16 : 3 * slots / 4);
}

struct visit {
	gdrc_region_fn fn;
	void *arg;
};

static inline struct gdrc_region *node_region(struct gdrc_itree_node *node)
{
	return gdrc_container_of(node, struct gdrc_region_ext, node)
		->node_region;
}

static inline int visit_fn(struct gdrc_itree_node *node, void *arg)
{
	const struct visit *v = arg;

	return v->fn(node_region(node), v->arg);
}

/* index_sum.c: the summaries' changes (under cache->lock for writing,
 * but _new). */
struct gdrc_ixsums *gdrc_ixsums_new(unsigned bits);
void gdrc_ixsums_publish(struct gdrc_index *ix);
void gdrc_ixsum_set(struct gdrc_ixsums *s, uintptr_t g, int level);
void gdrc_ixsum_clear(struct gdrc_ixsums *s, uintptr_t g, int level);
void gdrc_ixsums_grow(struct gdrc_cache *c, struct ix_spare *sp);

#endif /* GDRC_INDEX_INT_H */
