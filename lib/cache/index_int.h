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

#ifdef __SSE2__
#include <emmintrin.h>
#endif

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
 * The page hash: 64-byte buckets (one line), each a sequence, a spill
 * count, used marks and six entries of 80 bits, so that a lookup reads
 * one line and an entry names its region, key and what a hit checks
 * without reading the region.  An entry is kv (0: empty) and lo:
 *   kv bits 0-38   the key: (granule << 3 | level) + 1 (ph_key);
 *          39-49   the region's arena index >> 16;
 *          50-53   the granule's offset in its region;
 *          54-57   the region's span in granules, less one;
 *          58-61   its rights (GDRC_ACCESS_*);
 *          62      plain: a host region without a tag check or kernel
 *                  word whose key is whole granules of its level;
 *   lo             the arena index's low 16 bits.
 * A bucket also holds: how many entries lie past it that a lookup
 * through it must go on to find (spill: it was full when they were put;
 * 255 sticks); the used marks of cell hits on its six ways (used, the
 * clock hand's, lru.c); and a sequence, odd while a writer changes the
 * bucket's entries (a reader without the lock reads an entry only
 * between two equal, even reads of it).  Each is a field of its own:
 * the marks are set without the lock (an atomic or), and the sequence
 * and the spill count, written only by writers, take plain stores (with
 * the marks in the same word, each step was a locked addition: sixteen
 * buckets changed for a GPU registration's miss and again for its
 * removal cost about 600 ns more a miss on the H200 host).
 */
#define PH_WAYS 6
#define PK_BITS 39
#define PK_MASK ((1ULL << PK_BITS) - 1)
#define PE_HI_SHIFT 39
#define PE_OFF_SHIFT 50
#define PE_SPAN_SHIFT 54
#define PE_ACCESS_SHIFT 58
#define PE_PLAIN (1ULL << 62)
#define PE_FIELD4 15u  /* offset, span less one, rights: 4 bits each */
#define PB_SPILL_MAX 255u

struct ph_bucket {
	_Atomic uint16_t seq;  /* odd while a writer changes the entries */
	_Atomic uint8_t spill; /* entries past it (255 sticks) */
	_Atomic uint8_t used;  /* bit w: way w's used mark (cell hits) */
	_Atomic uint16_t lo[PH_WAYS];
	_Atomic uint64_t kv[PH_WAYS];
};
_Static_assert(sizeof(struct ph_bucket) == 64, "a bucket is one line");

struct gdrc_phash {
	struct gdrc_phash *retired_next;
	struct gdrc_region *base; /* the arena's regions: indices name them */
	size_t bytes;             /* mapped: its size; else 0 (malloc'ed) */
	unsigned bits;            /* buckets = 1 << bits */
	_Atomic uint64_t used;    /* entries; written under the lock, read
				   * as a hint */
	struct ph_bucket b[] __attribute__((aligned(64)));
};

_Static_assert(GDRC_IX_SPAN - 1 == PE_FIELD4,
	       "an entry's offset and span fit their 4 bits");

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

static inline uint64_t ix_home(unsigned bits, uintptr_t key)
{
	return (key * 0x9e3779b97f4a7c15ULL) >> (64 - bits);
}

static inline uint64_t ph_mask(const struct gdrc_phash *t)
{
	return (1ULL << t->bits) - 1;
}

/* The page hash's key of granule g of level. */
static inline uint64_t ph_key(uintptr_t g, int level)
{
	return ((uint64_t)g << 3 | (uint64_t)level) + 1;
}

/* The key of the level's granule holding address a. */
static inline uint64_t ph_addr_key(uintptr_t a, int level)
{
	return ph_key(a >> ix_shift(level), level);
}

/* Does granule g of level fit a key? */
static inline int ph_key_fits(uintptr_t g)
{
	return g < (PK_MASK >> 3);
}

static inline uint64_t ph_home(const struct gdrc_phash *t, uint64_t key)
{
	return ix_home(t->bits, key);
}

static inline uint64_t pe_key(uint64_t kv)
{
	return kv & PK_MASK;
}

static inline uint32_t pe_index(uint64_t kv, uint16_t lo)
{
	return (uint32_t)(kv >> PE_HI_SHIFT & 0x7ff) << 16 | lo;
}

/* The granule of an entry in its region: 0 for the region's first. */
static inline unsigned pe_off(uint64_t kv)
{
	return (unsigned)(kv >> PE_OFF_SHIFT) & PE_FIELD4;
}

/* Its region's span in granules, less one. */
static inline unsigned pe_span1(uint64_t kv)
{
	return (unsigned)(kv >> PE_SPAN_SHIFT) & PE_FIELD4;
}

/* Its region's rights (GDRC_ACCESS_*). */
static inline uint32_t pe_access(uint64_t kv)
{
	return (uint32_t)(kv >> PE_ACCESS_SHIFT) & PE_FIELD4;
}

static inline struct gdrc_region *pe_region(const struct gdrc_phash *t,
					    uint64_t kv, uint16_t lo)
{
	return &t->base[pe_index(kv, lo)];
}

/* Writers' and queries' reads (under the lock): relaxed. */
static inline uint64_t pb_kv(const struct ph_bucket *b, unsigned w)
{
	return atomic_load_explicit(&b->kv[w], memory_order_relaxed);
}

static inline uint16_t pb_lo(const struct ph_bucket *b, unsigned w)
{
	return atomic_load_explicit(&b->lo[w], memory_order_relaxed);
}

static inline unsigned pb_spill(const struct ph_bucket *b)
{
	return atomic_load_explicit(&b->spill, memory_order_relaxed);
}

/*
 * The entries of key, one after the other (lock held, either mode):
 * start with it = { 0 }; each call finds the next, in it->b (its
 * bucket) and it->w (its way + 1).  @return 1 found; 0 no more.
 */
struct ph_iter {
	uint64_t b;     /* the bucket */
	uint64_t n;     /* buckets gone past */
	unsigned w;     /* the way found + 1 */
	unsigned left;  /* ways of b holding key not yet returned */
	int started;
};

/* The ways of bucket b holding key, as bits: all six compared without a
 * branch each (which way holds a key is anyone's guess). */
static inline unsigned pb_match(const struct ph_bucket *b, uint64_t key)
{
	unsigned m = 0;

#pragma GCC unroll 6
	for (unsigned w = 0; w < PH_WAYS; w++)
		m |= (unsigned)(pe_key(pb_kv(b, w)) == key) << w;
	return m;
}

/*
 * pb_match for a reader that holds cache->lock (ph_next's callers): no
 * writer can change the entries meanwhile, so they may be read as plain
 * memory, two ways to a compare where SSE2 is there (a locked insertion
 * or range walk scans several buckets: 18 instructions less each).  The
 * lock-free reader keeps pb_match's atomic loads.
 */
static inline unsigned pb_match_locked(const struct ph_bucket *b,
				       uint64_t key)
{
#ifdef __SSE2__
	const __m128i *kv = (const __m128i *)(const void *)b->kv;
	const __m128i mask = _mm_set1_epi64x((long long)PK_MASK);
	const __m128i k = _mm_set1_epi64x((long long)key);
	unsigned m = 0;

#pragma GCC unroll 3
	for (unsigned p = 0; p < PH_WAYS / 2; p++) {
		__m128i e = _mm_cmpeq_epi32(
			_mm_and_si128(_mm_loadu_si128(&kv[p]), mask), k);

		/* A way matches where both its halves do. */
		e = _mm_and_si128(e, _mm_shuffle_epi32(e, _MM_SHUFFLE(2, 3, 0,
								       1)));
		m |= (unsigned)_mm_movemask_pd(_mm_castsi128_pd(e)) << 2 * p;
	}
	return m;
#else
	return pb_match(b, key);
#endif
}

static inline int ph_next(const struct gdrc_phash *t, uint64_t key,
			  struct ph_iter *it)
{
	if (!it->started) {
		it->started = 1;
		it->b = ph_home(t, key);
		it->left = pb_match_locked(&t->b[it->b], key);
	}
	for (;;) {
		if (it->left) {
			unsigned w = (unsigned)__builtin_ctz(it->left);

			it->left &= it->left - 1;
			it->w = w + 1;
			return 1;
		}
		/* Nothing of key lies past a bucket that never spilled. */
		if (!pb_spill(&t->b[it->b]) || ++it->n > ph_mask(t))
			return 0;
		it->b = (it->b + 1) & ph_mask(t);
		it->left = pb_match_locked(&t->b[it->b], key);
	}
}

/* The kv of the entry ph_next found. */
static inline uint64_t ph_it_kv(const struct gdrc_phash *t,
				const struct ph_iter *it)
{
	return pb_kv(&t->b[it->b], it->w - 1);
}

static inline struct gdrc_region *ph_it_region(const struct gdrc_phash *t,
					       const struct ph_iter *it)
{
	const struct ph_bucket *b = &t->b[it->b];

	return pe_region(t, pb_kv(b, it->w - 1), pb_lo(b, it->w - 1));
}

/* The entry of key naming region idx at granule off, found by ph_next
 * (it): a writer's removal, the clock's used mark.  @return 1 found. */
static inline int ph_find(const struct gdrc_phash *t, uint64_t key,
			  uint32_t idx, unsigned off, struct ph_iter *it)
{
	while (ph_next(t, key, it)) {
		const struct ph_bucket *b = &t->b[it->b];
		uint64_t kv = pb_kv(b, it->w - 1);

		if (pe_index(kv, pb_lo(b, it->w - 1)) == idx &&
		    pe_off(kv) == off)
			return 1;
	}
	return 0;
}

/* Does a region start in key's granule (an entry of key, offset 0)? */
static inline int ph_has_first(const struct gdrc_phash *t, uint64_t key)
{
	struct ph_iter it = { 0 };

	while (ph_next(t, key, &it))
		if (!pe_off(ph_it_kv(t, &it)))
			return 1;
	return 0;
}

/* Is home h cyclically in (i, j]?  Then the entry at j must stay. */
static inline int ix_stays(uint64_t i, uint64_t j, uint64_t h)
{
	return i <= j ? (i < h && h <= j) : (i < h || h <= j);
}

/* Room for more: below 3/4 (soft) or 15/16 (hard) of slots full. */
static inline int ix_room(uint64_t slots, uint64_t used, uint64_t more,
			  int hard)
{
	return used + more <= (hard ? slots - slots / 16 : 3 * slots / 4);
}

/* The same for the summaries' 1 << bits slots. */
static inline int ix_fits(unsigned bits, uint64_t used, uint64_t more, int hard)
{
	return ix_room(1ULL << bits, used, more, hard);
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
