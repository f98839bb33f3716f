// SPDX-License-Identifier: BSD-3-Clause
/*
 * pool.c - fixed-size objects (handles), a cache line each at
 * least, carved from chunks (each twice the last, up to POOL_MAX
 * objects; large ones on huge pages) that are freed only with the
 * cache.  Handle memory is therefore type-stable: a reader holding a
 * stale pointer to a handle reads a handle, never memory given back to
 * malloc, which is what lets the fast path and a put read a handle
 * without a lock.  (Regions are type-stable the same way in the arena,
 * arena.c.)
 *
 * Reuse is first in, first out, so that a stale pointer finds a dead
 * object (magic word cleared) for as long as possible.
 *
 * Locks: cache->slab_lock guards every pool's lists (free, free_tail,
 * chunks); it is a leaf under cache->lock, never held across a call out.
 * Callers: region.c, handle.c, cache.c.  slab_lock's functions are here;
 * the arena takes the same lock.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cache_int.h"

void gdrc_slab_lock(struct gdrc_cache *c)
{
	pthread_mutex_lock(&c->slab_lock);
	if (GDRC_LOCKDEP)
		c->slab_owner = &gdrc_tls_cur;
}

void gdrc_slab_unlock(struct gdrc_cache *c)
{
	if (GDRC_LOCKDEP)
		c->slab_owner = NULL;
	pthread_mutex_unlock(&c->slab_lock);
}

/* The pointer at obj + link: its free-list link. */
static void **pool_link(const struct gdrc_pool *pool, void *obj)
{
	return (void **)((char *)obj + pool->link);
}

/* Chunks and objects (whole lines: a handle is one) are aligned to
 * lines. */
#define POOL_ALIGN GDRC_CACHELINE
/* Objects in the first chunk, and the most in one. */
#define POOL_FIRST 64
#define POOL_MAX 65536
/* A chunk this large is mapped on its own, with transparent huge pages
 * asked for: a lookup that misses the TLB as well as the cache pays
 * twice. */
#define POOL_HUGE (2UL << 20)

/* A chunk's first POOL_ALIGN bytes. */
struct pool_chunk {
	struct pool_chunk *next;
	size_t count;  /* objects */
	size_t bytes;  /* the whole chunk */
	int mapped;    /* mmap'ed (else posix_memalign'ed) */
};

_Static_assert(sizeof(struct pool_chunk) <= POOL_ALIGN,
	       "a chunk's header fits its first line");

static void pool_chunk_free(struct pool_chunk *ch)
{
	if (ch->mapped)
		munmap(ch, ch->bytes);
	else
		free(ch);
}

static char *chunk_objs(struct pool_chunk *ch)
{
	return (char *)ch + POOL_ALIGN;
}

/*
 * A new chunk of pool->next_count objects, the next twice as many (up
 * to POOL_MAX), aligned to POOL_ALIGN: each object is a line (or more)
 * of its own, which malloc's 16-byte alignment would not give, and two
 * threads' handles on one line would slow both.  Its objects are handed
 * out from the bump pointer; a mapped (large) chunk's pages are touched
 * only then, so memory never used is never resident.  Takes slab_lock.
 * @return 0, or -1 out of memory.
 */
int gdrc_pool_grow(struct gdrc_cache *c, struct gdrc_pool *pool)
{
	size_t count, bytes;
	struct pool_chunk *ch;
	int mapped;
	void *p;

	/* Another thread growing the pool writes next_count under the
	 * lock (found by the remap stress over 1,024 pages under TSan). */
	gdrc_slab_lock(c);
	count = pool->next_count ? pool->next_count : POOL_FIRST;
	gdrc_slab_unlock(c);
	bytes = POOL_ALIGN + count * pool->size;
	mapped = bytes >= POOL_HUGE;

	if (mapped) {
		bytes = (bytes + POOL_HUGE - 1) & ~(POOL_HUGE - 1);
		p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -1;
		madvise(p, bytes, MADV_HUGEPAGE); /* a hint: may fail */
		count = (bytes - POOL_ALIGN) / pool->size;
	} else if (posix_memalign(&p, POOL_ALIGN, bytes)) {
		return -1;
	} else {
		/* Small chunks are touched now (the first at gdrc_init), so
		 * that a context's first misses take no page fault: a
		 * context's first insert cost 1.6x its hundredth on the H100
		 * host when its pages were left to the first get. */
		memset(p, 0, bytes);
	}
	ch = p;
	*ch = (struct pool_chunk){ .count = count, .bytes = bytes,
				   .mapped = mapped };
	gdrc_slab_lock(c);
	if (pool->bump != pool->bump_end) {
		/* Another thread grew it meanwhile: ours is not needed. */
		gdrc_slab_unlock(c);
		pool_chunk_free(ch);
		return 0;
	}
	ch->next = pool->chunks;
	pool->chunks = ch;
	pool->bump = chunk_objs(ch);
	pool->bump_end = pool->bump + count * pool->size;
	if (count < POOL_MAX)
		pool->next_count = count * 2;
	gdrc_slab_unlock(c);
	return 0;
}

/* Take an object: the one freed longest ago, else a fresh one (zero),
 * growing the pool when both run out. */
void *gdrc_pool_get(struct gdrc_cache *c, struct gdrc_pool *pool)
{
	void *obj;

	gdrc_slab_lock(c);
	while (!pool->free && pool->bump == pool->bump_end) {
		gdrc_slab_unlock(c);
		if (gdrc_pool_grow(c, pool))
			return NULL;
		gdrc_slab_lock(c);
	}
	obj = pool->free;
	if (obj) {
		pool->free = *pool_link(pool, obj);
		gdrc_slab_unlock(c);
		return obj;
	}
	/* Never handed out: zero already (a small chunk was cleared when
	 * made, a mapped one is fresh pages). */
	obj = pool->bump;
	pool->bump = obj + pool->size;
	gdrc_slab_unlock(c);
	return obj;
}

/* Under slab_lock: give obj back, last in line for reuse. */
void gdrc_pool_put_locked(struct gdrc_cache *c, struct gdrc_pool *pool,
			  void *obj)
{
	gdrc_assert_slab_locked(c);
	*pool_link(pool, obj) = NULL;
	if (pool->free)
		*pool_link(pool, pool->free_tail) = obj;
	else
		pool->free = obj;
	pool->free_tail = obj;
}

void gdrc_pool_each(struct gdrc_pool *pool, void (*fn)(void *obj, void *arg),
		    void *arg)
{
	for (struct pool_chunk *ch = pool->chunks; ch; ch = ch->next) {
		char *end = chunk_objs(ch) + ch->count * pool->size;

		if (ch == pool->chunks)
			end = pool->bump; /* the newest: what was handed out */
		for (char *obj = chunk_objs(ch); obj < end;
		     obj += pool->size)
			fn(obj, arg);
	}
}

void gdrc_pool_free_chunks(struct gdrc_pool *pool)
{
	struct pool_chunk *ch, *next;

	for (ch = pool->chunks; ch; ch = next) {
		next = ch->next;
		pool_chunk_free(ch);
	}
	pool->chunks = NULL;
	pool->free = NULL;
	pool->free_tail = NULL;
	pool->bump = pool->bump_end = NULL;
	pool->next_count = 0;
}
