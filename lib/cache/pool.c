// SPDX-License-Identifier: BSD-3-Clause
/*
 * pool.c - fixed-size objects (regions, handles), a cache line each at
 * least, carved from chunks of GDRC_POOL_CHUNK that are freed only with
 * the cache.  Region memory is therefore type-stable: a reader holding a
 * stale pointer to a region or a handle reads an object of the same
 * type, never memory given back to malloc, which is what lets the fast
 * path and a put read a handle without a lock.
 *
 * Reuse is first in, first out, so that a stale pointer finds a dead
 * object (magic word cleared) for as long as possible.
 *
 * Locks: cache->slab_lock guards every pool's lists (free, free_tail,
 * chunks); it is a leaf under cache->lock, never held across a call out.
 * Callers: region.c, handle.c, cache.c.
 */
#include <stdlib.h>
#include <string.h>

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

/* Chunks and objects are aligned to pairs of lines, which CPUs fetch
 * together (the adjacent-line prefetcher). */
#define POOL_ALIGN (2 * GDRC_CACHELINE)

/* Object i of a chunk: the chunk's first pair holds its next pointer. */
void *gdrc_pool_obj(const struct gdrc_pool *pool, void *chunk, int i)
{
	return (char *)chunk + POOL_ALIGN + (size_t)i * pool->size;
}

/*
 * Add a chunk of objects to the pool.  The chunk is zeroed and aligned
 * to POOL_ALIGN: each object is a line (or more) of its own, which
 * calloc's 16-byte alignment would not give, and two threads' handles on
 * one line would slow both.  Takes slab_lock.  @return 0, or -1 out of
 * memory.
 */
int gdrc_pool_grow(struct gdrc_cache *c, struct gdrc_pool *pool)
{
	size_t bytes = POOL_ALIGN + GDRC_POOL_CHUNK * pool->size;
	void *chunk, *obj;

	if (posix_memalign(&chunk, POOL_ALIGN, bytes))
		return -1;
	memset(chunk, 0, bytes);
	gdrc_slab_lock(c);
	*(void **)chunk = pool->chunks;
	pool->chunks = chunk;
	for (int i = 0; i < GDRC_POOL_CHUNK; i++) {
		obj = gdrc_pool_obj(pool, chunk, i);
		if (pool->init)
			pool->init(obj);
		*pool_link(pool, obj) = pool->free;
		if (!pool->free)
			pool->free_tail = obj;
		pool->free = obj;
	}
	gdrc_slab_unlock(c);
	return 0;
}

/* Take an object, growing the pool by a chunk when it is empty. */
void *gdrc_pool_get(struct gdrc_cache *c, struct gdrc_pool *pool)
{
	void *obj;

	gdrc_slab_lock(c);
	while (!pool->free) {
		gdrc_slab_unlock(c);
		if (gdrc_pool_grow(c, pool))
			return NULL;
		gdrc_slab_lock(c);
	}
	obj = pool->free;
	pool->free = *pool_link(pool, obj);
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

void gdrc_pool_free_chunks(struct gdrc_pool *pool)
{
	void *chunk, *next;

	for (chunk = pool->chunks; chunk; chunk = next) {
		next = *(void **)chunk;
		free(chunk);
	}
	pool->chunks = NULL;
	pool->free = NULL;
	pool->free_tail = NULL;
}

