// SPDX-License-Identifier: BSD-3-Clause
/*
 * pool.c - fixed-size objects (regions, handles), a cache line each at
 * least, carved from chunks (each twice the last, up to POOL_MAX
 * objects; large ones on huge pages) that are freed only with the
 * cache.  Region memory is therefore type-stable: a reader holding a
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

/* Chunks are aligned to pairs of lines, which CPUs fetch together (the
 * adjacent-line prefetcher); objects, whole lines in size (a region is
 * two, a handle one), to lines. */
#define POOL_ALIGN (2 * GDRC_CACHELINE)
/* Objects in the first chunk, and the most in one. */
#define POOL_FIRST 64
#define POOL_MAX 65536
/* A chunk this large is mapped on its own, with transparent huge pages
 * asked for: a million regions span 400 MB, and a lookup that misses
 * the TLB as well as the cache pays twice. */
#define POOL_HUGE (2UL << 20)

/* A chunk's first POOL_ALIGN bytes. */
struct pool_chunk {
	struct pool_chunk *next;
	size_t count;  /* objects */
	size_t bytes;  /* the whole chunk */
	int mapped;    /* mmap'ed (else posix_memalign'ed) */
};

_Static_assert(sizeof(struct pool_chunk) <= POOL_ALIGN,
	       "a chunk's header fits its first line pair");

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
 * The object after obj in its chunk.  A paired pool's objects (two
 * lines each) lie two by two in blocks of four lines, aligned to line
 * pairs: the first object's line 0 and the second's, then the first
 * object's line 1 and the second's.  The first object of a block is
 * therefore at a line-pair boundary, the second a line after it.
 */
static char *pool_next(const struct gdrc_pool *pool, char *obj)
{
	if (!pool->paired)
		return obj + pool->size;
	return (uintptr_t)obj & GDRC_CACHELINE ? obj + 3 * GDRC_CACHELINE :
						 obj + GDRC_CACHELINE;
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
		count &= ~(size_t)pool->paired; /* whole blocks */
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

/* Take an object: the one freed longest ago, else a fresh one (zero,
 * set up by pool->init), growing the pool when both run out. */
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
	pool->bump = pool_next(pool, obj);
	if (pool->init)
		pool->init(obj);
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
		     obj = pool_next(pool, obj))
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

/* Under slab_lock: the end of chunk ch's handed-out objects. */
static char *chunk_end(const struct gdrc_pool *pool,
		       const struct pool_chunk *ch)
{
	if (ch == pool->chunks)
		return pool->bump; /* the newest: what was handed out */
	return chunk_objs((struct pool_chunk *)ch) + ch->count * pool->size;
}

/* Objects of a chunk before offset off of its objects (an object's
 * own offset, or the end's).  A paired pool's blocks of two take four
 * lines, and its second object starts a line into a block. */
static size_t objs_before(const struct gdrc_pool *pool, size_t off)
{
	size_t block = 2 * pool->size;

	if (!pool->paired)
		return off / pool->size;
	return 2 * (off / block) + (off % block != 0);
}

size_t gdrc_pool_count(struct gdrc_cache *c, struct gdrc_pool *pool)
{
	size_t n = 0;

	gdrc_slab_lock(c);
	for (struct pool_chunk *ch = pool->chunks; ch; ch = ch->next)
		n += objs_before(pool, (size_t)(chunk_end(pool, ch) -
						chunk_objs(ch)));
	gdrc_slab_unlock(c);
	return n;
}

/*
 * Chunks are only ever added at the head, and a chunk stops being the
 * head only once all of its objects were handed out: every chunk but the
 * head is full, and a position taken stays valid.  A chunk's end is read
 * under slab_lock (the bump pointer and the list move there) when the
 * walk comes to the end it read last; the head's may have moved on.
 */
void *gdrc_pool_walk(struct gdrc_cache *c, struct gdrc_pool *pool,
		     struct gdrc_pool_pos *pos)
{
	struct pool_chunk *ch = pos->chunk;
	char *obj = NULL;

	if (ch) {
		obj = pool_next(pool, pos->obj);
		if (obj >= pos->end) {
			gdrc_slab_lock(c);
			pos->end = chunk_end(pool, ch);
			gdrc_slab_unlock(c);
		}
		if (obj < pos->end)
			goto found;
	}
	/* The next chunk, or from the last back to the head.  Only the
	 * head can be empty (just made): then the one after it is full. */
	gdrc_slab_lock(c);
	for (int n = 0; n < 2; n++) {
		ch = ch && ch->next ? ch->next : pool->chunks;
		if (!ch)
			break;
		obj = chunk_objs(ch);
		pos->end = chunk_end(pool, ch);
		if (obj < pos->end) {
			gdrc_slab_unlock(c);
			goto found;
		}
	}
	gdrc_slab_unlock(c);
	return NULL;
found:
	pos->chunk = ch;
	pos->obj = obj;
	return obj;
}
