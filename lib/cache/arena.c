// SPDX-License-Identifier: BSD-3-Clause
/*
 * arena.c - where a cache's regions live.
 *
 * A region is one 64-byte line (struct gdrc_region: what a hit reads)
 * and a 16-byte cold record (struct gdrc_region_cold: what a miss, a
 * release and a query read) at the same index of a second array.  Both
 * arrays are address space reserved when the cache is made, for cap
 * regions, and made accessible a block at a time as regions are first
 * handed out; nothing goes back before the cache does.  So:
 *   - a reader holding a stale pointer to a region reads a region
 *     (dead, or reused: its word says), never memory given back;
 *   - hit lines lie side by side: the line pairs that CPUs fetch
 *     together (the adjacent-line prefetch) hold two hit lines, and a
 *     million regions' hit lines take 64 MB with no other field between
 *     them (docs/design.md, "Memory per registration");
 *   - 32 bits name a region: its index, which the lists of regions
 *     (collected, dead, free) link through (gdrc_region_link_to).
 *
 * How many: eight times the context's GDRC_MAX_REGIONS, at least
 * ARENA_MIN and at most ARENA_MAX (fewer under an address-space limit:
 * arena_cap), alive at once (cached, held, being registered or waiting
 * for release); a get that needs one more answers GDRC_ERR_LIMIT
 * (gdrc_arena_full; a block the system would not make accessible:
 * GDRC_ERR_NO_MEMORY).  The reservation is PROT_NONE (no memory is
 * committed, under strict overcommit too) and halved until the system
 * grants it; blocks become readable and writable as the bump index
 * reaches them.
 *
 * Reuse is first in, first out, so that a stale pointer finds a dead
 * region (magic word cleared) for as long as possible.
 *
 * Locks: cache->slab_lock guards free, free_tail, ready and the writes
 * of made (read by the clock hand under cache->lock); it is a leaf
 * under cache->lock.  Callers: region.c (get, put), miss.c (full),
 * cache.c (init, walks, destroy), lru.c (the hand's index).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cache_int.h"

/* LeakSanitizer looks for pointers in the heap, stacks and globals, not
 * in mappings of our own: the arena, which holds the only pointers to
 * exts and backend objects, is named to it as a root. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LSAN_ROOT(p, n) __lsan_register_root_region(p, n)
#define LSAN_UNROOT(p, n) __lsan_unregister_root_region(p, n)
#else
#define LSAN_ROOT(p, n) ((void)0)
#define LSAN_UNROOT(p, n) ((void)0)
#endif

#define ARENA_MIN (1u << 16)
#define ARENA_MAX (1u << 27)
/* Regions made accessible at first, and the most one step adds (2 MB of
 * hit lines: a huge page).  Each step is two mprotect calls, which cost
 * a context's first 100 inserts 60 ns each when the first block was 64
 * regions.  The first ARENA_TOUCH regions' pages are touched at once, so
 * that a context's first misses take no page fault (a first insert cost
 * 1.6x the hundredth on the H100 host when its pages were left to the
 * first get). */
#define ARENA_FIRST 1024u
#define ARENA_TOUCH 64u
#define ARENA_STEP (1u << 15)
/* Hit lines are aligned to a huge page, so that a large cache's blocks
 * of ARENA_STEP can be mapped on them (asked for, not required). */
#define ARENA_ALIGN (2UL << 20)

_Static_assert(sizeof(struct gdrc_region) == GDRC_CACHELINE,
	       "a region is one line");
_Static_assert(sizeof(struct gdrc_region_cold) == 16,
	       "a cold record is 16 bytes");

/* The system's page: mprotect's unit. */
static uintptr_t page_size(void)
{
	long page = sysconf(_SC_PAGESIZE);

	return page > 0 ? (uintptr_t)page : 4096;
}

/* PROT_NONE address space of bytes, aligned to align (a power of two,
 * a page or more); NULL if refused. */
static void *reserve(size_t bytes, size_t align)
{
	char *p = mmap(NULL, bytes + align, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uintptr_t a;

	if (p == MAP_FAILED)
		return NULL;
	a = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
	if (a > (uintptr_t)p)
		munmap(p, a - (uintptr_t)p);
	munmap((char *)a + bytes, (uintptr_t)p + align - a);
	return (void *)a;
}

static int arena_grow(struct gdrc_arena *a);

/* Eight times max_regions, a power of two in [ARENA_MIN, ARENA_MAX],
 * and under an address-space limit (RLIMIT_AS, which a reservation
 * counts against though it commits nothing) at most a sixteenth of it:
 * a context without a count limit must not take the program's room. */
static uint32_t arena_cap(uint64_t max_regions)
{
	const size_t each = sizeof(struct gdrc_region) +
			    sizeof(struct gdrc_region_cold);
	uint32_t cap = ARENA_MIN;
	struct rlimit rl;

	while (cap < ARENA_MAX && cap / 8 < max_regions)
		cap *= 2;
	if (!getrlimit(RLIMIT_AS, &rl) && rl.rlim_cur != RLIM_INFINITY)
		while (cap > ARENA_MIN && (uint64_t)cap * each > rl.rlim_cur / 16)
			cap /= 2;
	return cap;
}

int gdrc_arena_init(struct gdrc_arena *a, uint64_t max_regions)
{
	uint32_t cap = arena_cap(max_regions);

	*a = (struct gdrc_arena){ 0 };
	for (; cap >= ARENA_MIN / 16; cap /= 2) {
		a->hits_bytes = (size_t)cap * sizeof(struct gdrc_region);
		a->cold_bytes = (size_t)cap * sizeof(struct gdrc_region_cold);
		a->hits = reserve(a->hits_bytes, ARENA_ALIGN);
		if (!a->hits)
			continue;
		a->cold = reserve(a->cold_bytes, page_size());
		if (a->cold)
			break;
		munmap(a->hits, a->hits_bytes);
		a->hits = NULL;
	}
	if (!a->hits)
		return -1;
	a->cap = cap;
	LSAN_ROOT(a->hits, a->hits_bytes);
	LSAN_ROOT(a->cold, a->cold_bytes);
	if (arena_grow(a)) {
		gdrc_arena_destroy(a);
		return -1;
	}
	return 0;
}

void gdrc_arena_destroy(struct gdrc_arena *a)
{
	if (a->hits && a->cold) {
		LSAN_UNROOT(a->hits, a->hits_bytes);
		LSAN_UNROOT(a->cold, a->cold_bytes);
	}
	if (a->hits)
		munmap(a->hits, a->hits_bytes);
	if (a->cold)
		munmap(a->cold, a->cold_bytes);
	*a = (struct gdrc_arena){ 0 };
}

/* Make [p, p + bytes) readable and writable: its pages (the cold
 * records of a block start mid-page). */
static int open_up(void *p, size_t bytes)
{
	uintptr_t page = page_size();
	uintptr_t lo = (uintptr_t)p & ~(page - 1);
	uintptr_t hi = ((uintptr_t)p + bytes + page - 1) & ~(page - 1);

	return mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE);
}

/* Under slab_lock: make the next block of regions accessible.
 * @return 0, or -1 (full, or no memory). */
static int arena_grow(struct gdrc_arena *a)
{
	uint32_t n = a->ready ? a->ready : ARENA_FIRST;

	if (n > ARENA_STEP)
		n = ARENA_STEP;
	if (n > a->cap - a->ready)
		n = a->cap - a->ready;
	if (!n || open_up(a->hits + a->ready, (size_t)n * sizeof(a->hits[0])) ||
	    open_up(a->cold + a->ready, (size_t)n * sizeof(a->cold[0])))
		return -1;
	if (!a->ready) {
		memset(a->hits, 0, ARENA_TOUCH * sizeof(a->hits[0]));
		memset(a->cold, 0, ARENA_TOUCH * sizeof(a->cold[0]));
	}
	/* A whole huge page of hit lines: ask for one (a hint).  Not for
	 * the smaller first blocks: a small context would pay 2 MB. */
	if (n == ARENA_STEP)
		madvise(a->hits + a->ready, (size_t)n * sizeof(a->hits[0]),
			MADV_HUGEPAGE);
	a->ready += n;
	return 0;
}

struct gdrc_region *gdrc_arena_get(struct gdrc_cache *c)
{
	struct gdrc_arena *a = &c->regions;
	struct gdrc_region *r;
	uint32_t made;

	gdrc_slab_lock(c);
	if (a->free) {
		r = gdrc_region_linked(c, a->free);
		a->free = r->link;
		gdrc_slab_unlock(c);
		return r;
	}
	made = atomic_load_explicit(&a->made, memory_order_relaxed);
	if (made == a->ready && arena_grow(a)) {
		gdrc_slab_unlock(c);
		return NULL;
	}
	/* Never handed out: zero (fresh pages). */
	r = gdrc_arena_at(a, made);
	gdrc_region_init_free(r);
	atomic_store_explicit(&a->made, made + 1, memory_order_release);
	gdrc_slab_unlock(c);
	return r;
}

int gdrc_arena_full(struct gdrc_cache *c)
{
	struct gdrc_arena *a = &c->regions;
	int full;

	gdrc_slab_lock(c);
	full = !a->free &&
	       atomic_load_explicit(&a->made, memory_order_relaxed) == a->cap;
	gdrc_slab_unlock(c);
	return full;
}

void gdrc_arena_put_locked(struct gdrc_cache *c, struct gdrc_region *r)
{
	struct gdrc_arena *a = &c->regions;
	uint32_t link = gdrc_region_link_to(c, r);

	gdrc_assert_slab_locked(c);
	r->link = 0;
	if (a->free)
		gdrc_region_linked(c, a->free_tail)->link = link;
	else
		a->free = link;
	a->free_tail = link;
}

void gdrc_arena_each(struct gdrc_arena *a,
		     void (*fn)(struct gdrc_region *r, void *arg), void *arg)
{
	uint32_t made = gdrc_arena_made(a);

	for (uint32_t i = 0; i < made; i++)
		fn(gdrc_arena_at(a, i), arg);
}
