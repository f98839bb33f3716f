// SPDX-License-Identifier: BSD-3-Clause
/*
 * cache.c - the registration cache (see cache.h for the design).
 *
 * What each path may do:
 *   fast path (cache.h)  loads and plain stores to this thread's handle;
 *                        never locks, never calls out (but for the tag
 *                        check of a GPU hit).
 *   tree path            cache->lock for reading to find the region; a
 *                        handle (maybe a new pool chunk) after unlock.
 *   miss path            cache->lock for writing while it decides; the
 *                        lock is dropped around allocation, registration
 *                        and deregistration.
 *   release              (references and pins reached zero on an
 *                        invalidated region) runs in whichever thread
 *                        dropped the last one, never under cache->lock.
 *
 * Registrations in progress are listed on cache->inflight; a drain that
 * sees an unmap overlapping one marks it stale, and the miss path then
 * throws its registration away and starts over, so memory unmapped while
 * it was being registered is never cached.
 *
 * LRU.  cache->tick advances at each insertion (under the write lock);
 * a hit, fast or through the tree, stamps its region with the current
 * tick.  The LRU list is kept sorted by each region's stamp as of its
 * last placement (enq); the evictor walks from the head and moves
 * regions whose stamp moved on to their sorted place (lazy promotion),
 * so eviction order is exact LRU except that hits between two insertions
 * count as simultaneous.  Regions in use are skipped.
 *
 * Callers: api.c only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "log/log.h"

__thread struct gdrc_tls gdrc_tls_cur
	__attribute__((tls_model("initial-exec"))) = { .shard = -1 };

static _Atomic uint64_t cache_uid_next = 1;
static _Atomic uint64_t region_id_next = 1;

/* Work that must wait until cache->lock is dropped. */
struct cache_defer {
	struct gdrc_region *dead; /* regions to release, linked by lru_next */
};

struct gdrc_inflight {
	struct gdrc_inflight *next;
	uintptr_t start;
	uintptr_t end;
	uintptr_t alloc_start; /* its CUDA allocation, or 0, 0 */
	uintptr_t alloc_end;
	int stale; /* an unmap or free overlapped it while registering */
};

/* Objects per pool chunk. */
#define POOL_CHUNK 64

static inline void stat_add(struct gdrc_cache *c, int stat, uint64_t v)
{
	atomic_fetch_add_explicit(&c->stat[stat], v, memory_order_relaxed);
}

/* ====================================================================
 * The registry of live caches: the process's only one
 *
 * A thread's remembered handles may belong to any cache, also one that
 * was destroyed since.  Only code that holds cache_registry_lock and
 * finds the cache's uid here may touch such a handle: gdrc_cache_cleanup
 * takes its cache out first, under the same lock.  The API layer walks it
 * (gdrc_cache_each) and owns the fork protocol, which calls
 * gdrc_cache_fork_* (cache.h).
 * ==================================================================== */

static pthread_mutex_t cache_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gdrc_cache *cache_registry[GDRC_CACHES_MAX];
static pthread_mutex_t shard_lock; /* below, with the shards */

void gdrc_cache_each(void (*fn)(struct gdrc_cache *c, void *arg), void *arg)
{
	pthread_mutex_lock(&cache_registry_lock);
	for (int i = 0; i < GDRC_CACHES_MAX; i++)
		if (cache_registry[i])
			fn(cache_registry[i], arg);
	pthread_mutex_unlock(&cache_registry_lock);
}

void gdrc_cache_fork_prepare(void)
{
	pthread_mutex_lock(&cache_registry_lock);
}

void gdrc_cache_fork_parent(void)
{
	pthread_mutex_unlock(&cache_registry_lock);
}

void gdrc_cache_fork_child(void)
{
	for (int i = 0; i < GDRC_CACHES_MAX; i++)
		if (cache_registry[i])
			gdrc_cache_mark_forked(cache_registry[i]);
	pthread_mutex_unlock(&cache_registry_lock);
	/* A leaf lock another thread may have held at the fork (taking or
	 * giving back a stats shard): its bitmap is one word, whole. */
	pthread_mutex_init(&shard_lock, NULL);
}

/* Under cache_registry_lock.  @return the live cache with uid, or NULL. */
static struct gdrc_cache *registry_find(uint64_t uid)
{
	for (int i = 0; i < GDRC_CACHES_MAX; i++)
		if (cache_registry[i] && cache_registry[i]->uid == uid)
			return cache_registry[i];
	return NULL;
}

/* ====================================================================
 * Per-thread stats shards and the thread-exit hook
 * ==================================================================== */

static pthread_mutex_t shard_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t shard_used; /* bitmap of owned shards; under shard_lock */
static pthread_key_t shard_key;
static pthread_once_t shard_once = PTHREAD_ONCE_INIT;

static void tls_drop_all(void);
static void tls_drop_region_locked(struct gdrc_cache *c, struct gdrc_region *r,
				   struct cache_defer *d);

/*
 * Thread exit (pthread key destructor): let go of every handle, free
 * the shard.  Destructors of other keys may still call the library
 * after this one: from now on the thread keeps no handle (nothing would
 * let it go) and counts in the shared shard.
 */
static void shard_release(void *arg)
{
	int shard = (int)(intptr_t)arg - 1;

	gdrc_tls_cur.no_handles = 1;
	gdrc_tls_cur.shard = GDRC_SHARDS;
	tls_drop_all();
	if (shard >= GDRC_SHARDS)
		return;
	pthread_mutex_lock(&shard_lock);
	shard_used &= ~(1ULL << shard);
	pthread_mutex_unlock(&shard_lock);
}

static int shard_key_failed; /* set once, under shard_once */

static void shard_key_create(void)
{
	if (pthread_key_create(&shard_key, shard_release)) {
		shard_used = ~0ULL; /* share one shard */
		shard_key_failed = 1;
	}
}

int gdrc_cache_tls_shard(void)
{
	int shard = GDRC_SHARDS;

	pthread_once(&shard_once, shard_key_create);
	pthread_mutex_lock(&shard_lock);
	if (shard_used != ~0ULL) {
		shard = __builtin_ctzll(~shard_used);
		shard_used |= 1ULL << shard;
	}
	pthread_mutex_unlock(&shard_lock);
	/* Without the exit hook, handles this thread kept would never be
	 * let go: it keeps none. */
	if (shard_key_failed ||
	    pthread_setspecific(shard_key, (void *)(intptr_t)(shard + 1))) {
		if (shard < GDRC_SHARDS) {
			pthread_mutex_lock(&shard_lock);
			shard_used &= ~(1ULL << shard);
			pthread_mutex_unlock(&shard_lock);
		}
		shard = GDRC_SHARDS;
		gdrc_tls_cur.no_handles = 1;
	}
	gdrc_tls_cur.shard = shard;
	return shard;
}

static int tls_shard(void)
{
	int shard = gdrc_tls_cur.shard;

	return shard >= 0 ? shard : gdrc_cache_tls_shard();
}

static void tls_count_hit(struct gdrc_cache *c)
{
	int shard = tls_shard();

	gdrc_shard_inc(&c->shards[shard].hits, shard);
}

/* ====================================================================
 * Region memory: type-stable slab, freed only with the cache
 * ==================================================================== */

/* A fast-path hit touches one line of its region. */
_Static_assert(offsetof(struct gdrc_region, kmore) + sizeof(uint32_t) <=
		       GDRC_CACHELINE,
	       "the hit's fields of struct gdrc_region span two lines");
/* One owner writes a handle: it must not share a line with another. */
_Static_assert(sizeof(struct gdrc_handle) == GDRC_CACHELINE,
	       "a handle is one cache line");
/* gdrc_cache_put_fast compares a remembered handle with the mr given. */
_Static_assert(offsetof(struct gdrc_handle, pub) == 0,
	       "a handle's mr is its address");

/* The pointer at obj + link: its free-list link. */
static void **pool_link(const struct gdrc_pool *pool, void *obj)
{
	return (void **)((char *)obj + pool->link);
}

/* Object i of a chunk: the chunk's first line holds its next pointer. */
static void *pool_obj(const struct gdrc_pool *pool, void *chunk, int i)
{
	return (char *)chunk + GDRC_CACHELINE + (size_t)i * pool->size;
}

/*
 * Add a chunk of objects to the pool.  The chunk is zeroed and
 * cache-line aligned: each object is a line (or more) of its own, which
 * calloc's 16-byte alignment would not give, and two threads' handles on
 * one line would slow both.  Takes slab_lock.  @return 0, or -1 out of
 * memory.
 */
static int pool_grow(struct gdrc_cache *c, struct gdrc_pool *pool)
{
	size_t bytes = GDRC_CACHELINE + POOL_CHUNK * pool->size;
	void *chunk, *obj;

	if (posix_memalign(&chunk, GDRC_CACHELINE, bytes))
		return -1;
	memset(chunk, 0, bytes);
	pthread_mutex_lock(&c->slab_lock);
	*(void **)chunk = pool->chunks;
	pool->chunks = chunk;
	for (int i = 0; i < POOL_CHUNK; i++) {
		obj = pool_obj(pool, chunk, i);
		if (pool->init)
			pool->init(obj);
		*pool_link(pool, obj) = pool->free;
		if (!pool->free)
			pool->free_tail = obj;
		pool->free = obj;
	}
	pthread_mutex_unlock(&c->slab_lock);
	return 0;
}

/* Take an object, growing the pool by a chunk when it is empty. */
static void *pool_get(struct gdrc_cache *c, struct gdrc_pool *pool)
{
	void *obj;

	pthread_mutex_lock(&c->slab_lock);
	while (!pool->free) {
		pthread_mutex_unlock(&c->slab_lock);
		if (pool_grow(c, pool))
			return NULL;
		pthread_mutex_lock(&c->slab_lock);
	}
	obj = pool->free;
	pool->free = *pool_link(pool, obj);
	pthread_mutex_unlock(&c->slab_lock);
	return obj;
}

/* Under slab_lock: give obj back, last in line for reuse. */
static void pool_put_locked(struct gdrc_pool *pool, void *obj)
{
	*pool_link(pool, obj) = NULL;
	if (pool->free)
		*pool_link(pool, pool->free_tail) = obj;
	else
		pool->free = obj;
	pool->free_tail = obj;
}

static void pool_free_chunks(struct gdrc_pool *pool)
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

/* A region never published reads as released to gdrc_cache_cleanup. */
static void region_init_free(void *obj)
{
	struct gdrc_region *r = obj;

	atomic_init(&r->word, REGION_DEAD | REGION_INVALID);
}

static struct gdrc_region *slab_alloc(struct gdrc_cache *c)
{
	return pool_get(c, &c->regions);
}

/* Return r and the handles hung on it to the pools. */
static void slab_free(struct gdrc_cache *c, struct gdrc_region *r)
{
	struct gdrc_seg *segs = r->segs;
	struct gdrc_kpin *kpins = r->kpins;
	struct gdrc_handle *h, *next;

	/* Cleared before they are freed: a fork child frees what is left
	 * (free_chunks), and must not find one freed already. */
	r->segs = NULL;
	r->kpins = NULL;
	r->kmore = 0;
	free(segs);
	free(kpins);
	r->self.magic = 0;
	pthread_mutex_lock(&c->slab_lock);
	for (h = atomic_load_explicit(&r->handles, memory_order_acquire); h;
	     h = next) {
		next = h->next;
		h->pub.magic = 0;
		pool_put_locked(&c->handles, h);
	}
	atomic_store_explicit(&r->handles, NULL, memory_order_relaxed);
	pool_put_locked(&c->regions, r);
	pthread_mutex_unlock(&c->slab_lock);
}

static struct gdrc_handle *handle_alloc(struct gdrc_cache *c)
{
	return pool_get(c, &c->handles);
}

/* The accounting slot of device (host memory: 0), or NULL past
 * GDRC_MAX_DEVICES. */
static struct gdrc_dev_acct *dev_acct(struct gdrc_cache *c, int device)
{
	if (device < GDRC_DEVICE_HOST || device >= GDRC_MAX_DEVICES)
		return NULL;
	return &c->dev[device + 1];
}

/* Count r in (sign 1) or out of (sign -1) its device's totals. */
static void dev_account(struct gdrc_cache *c, const struct gdrc_region *r,
			int sign)
{
	struct gdrc_dev_acct *a = dev_acct(c, r->device);
	uint64_t len = r->reg_end - r->reg_start;

	if (!a)
		return;
	if (sign < 0)
		len = -len;
	atomic_fetch_add_explicit(&a->pinned_bytes, len, memory_order_relaxed);
	atomic_fetch_add_explicit(&a->regions, (uint64_t)sign,
				  memory_order_relaxed);
	if (r->ops->backend == GDRC_BACKEND_DMABUF)
		atomic_fetch_add_explicit(&a->dmabufs, (uint64_t)sign,
					  memory_order_relaxed);
}

/*
 * Make a freshly registered region reachable by its owner: one direct
 * reference (the caller's), INVALID until inserted.
 */
static void region_publish(struct gdrc_cache *c, struct gdrc_region *r)
{
	uint64_t len = r->reg_end - r->reg_start;
	uint64_t pinned, max;

	r->self.r = r;
	r->self.h = NULL;
	r->self.magic = GDRC_MR_MAGIC;
	atomic_store_explicit(&r->direct, 0, memory_order_relaxed);
	atomic_store_explicit(&r->handles, NULL, memory_order_relaxed);
	atomic_store_explicit(&r->word, 1 | REGION_INVALID,
			      memory_order_release);
	pinned = atomic_fetch_add_explicit(&c->pinned_bytes, len,
					   memory_order_relaxed) + len;
	max = atomic_load_explicit(&c->pinned_bytes_max, memory_order_relaxed);
	while (pinned > max &&
	       !atomic_compare_exchange_weak_explicit(&c->pinned_bytes_max,
						      &max, pinned,
						      memory_order_relaxed,
						      memory_order_relaxed))
		;
	atomic_fetch_add_explicit(&c->nalive, 1, memory_order_relaxed);
	dev_account(c, r, 1);
}

/*
 * Try to become the one thread that releases r: no reference, no pin, and
 * invalid.  @return 1 if this thread must release it.
 */
static int region_claim_dead(struct gdrc_cache *c, struct gdrc_region *r)
{
	uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire);

	while (!(w & (REGION_REF_MASK | REGION_PIN_MASK)) &&
	       (w & REGION_INVALID) && !(w & REGION_DEAD)) {
		if (atomic_compare_exchange_weak_explicit(
			    &r->word, &w, w | REGION_DEAD,
			    memory_order_acq_rel, memory_order_acquire)) {
			atomic_fetch_sub_explicit(&c->pinned_bytes,
						  r->reg_end - r->reg_start,
						  memory_order_relaxed);
			atomic_fetch_sub_explicit(&c->nalive, 1,
						  memory_order_relaxed);
			dev_account(c, r, -1);
			return 1;
		}
	}
	return 0;
}

/* Deregister and free a region this thread claimed.  Never under lock. */
static void region_release(struct gdrc_cache *c, struct gdrc_region *r)
{
	struct gdrc_pin_reg reg = {
		.addr = r->reg_start,
		.length = r->reg_end - r->reg_start,
		.access = r->access,
		.mem_type = r->mem_type,
		.handle = r->handle,
	};

	r->ops->dereg(r->be, &reg);
	if (r->kslot >= 0 && r->kpinned)
		c->p.kunpin(c->p.karg, r->khandle);
	else if (r->kslot >= 0)
		c->p.kunsub(c->p.karg, r->khandle);
	for (uint32_t i = 0; i < r->kmore; i++)
		c->p.kunpin(c->p.karg, r->kpins[i].handle);
	stat_add(c, GDRC_STAT_DEREGS, 1);
	slab_free(c, r);
}

/*
 * Subtract delta (a reference or a pin) from r's word; if that was the
 * last of both, release r now, or, with d (cache->lock held), once the
 * lock is dropped.
 */
static void region_drop_defer(struct gdrc_cache *c, struct gdrc_region *r,
			      uint64_t delta, struct cache_defer *d)
{
	uint64_t w = atomic_fetch_sub_explicit(&r->word, delta,
					       memory_order_acq_rel) - delta;

	if ((w & (REGION_REF_MASK | REGION_PIN_MASK)) ||
	    !region_claim_dead(c, r))
		return;
	if (d) {
		r->lru_next = d->dead;
		d->dead = r;
	} else {
		region_release(c, r);
	}
}

static void region_drop(struct gdrc_cache *c, struct gdrc_region *r,
			uint64_t delta)
{
	region_drop_defer(c, r, delta, NULL);
}

void gdrc_cache_region_put(struct gdrc_cache *c, struct gdrc_region *r)
{
	region_drop(c, r, 1);
}

static void defer_release(struct gdrc_cache *c, struct cache_defer *d)
{
	struct gdrc_region *r, *next;

	for (r = d->dead; r; r = next) {
		next = r->lru_next;
		region_release(c, r);
	}
	d->dead = NULL;
}

int gdrc_cache_kmore_stale(const struct gdrc_cache *c,
			   const struct gdrc_region *r)
{
	for (uint32_t i = 0; i < r->kmore; i++)
		if (c->p.kgen[r->kpins[i].slot])
			return 1;
	return 0;
}

/* ====================================================================
 * LRU list (under cache->lock)
 * ==================================================================== */

static void lru_unlink(struct gdrc_cache *c, struct gdrc_region *r)
{
	if (r->lru_prev)
		r->lru_prev->lru_next = r->lru_next;
	else
		c->lru_head = r->lru_next;
	if (r->lru_next)
		r->lru_next->lru_prev = r->lru_prev;
	else
		c->lru_tail = r->lru_prev;
	r->lru_prev = r->lru_next = NULL;
}

/* Insert after the last region whose enq is <= r->enq; usually the tail,
 * since r->enq is recent. */
static void lru_insert_sorted(struct gdrc_cache *c, struct gdrc_region *r)
{
	struct gdrc_region *p = c->lru_tail;

	while (p && p->enq > r->enq)
		p = p->lru_prev;
	r->lru_prev = p;
	r->lru_next = p ? p->lru_next : c->lru_head;
	if (r->lru_next)
		r->lru_next->lru_prev = r;
	else
		c->lru_tail = r;
	if (p)
		p->lru_next = r;
	else
		c->lru_head = r;
}

/* Does a live handle on r have a get outstanding?  A hint: see cache.h. */
static int handles_busy(struct gdrc_region *r)
{
	struct gdrc_handle *h;

	for (h = atomic_load_explicit(&r->handles, memory_order_acquire); h;
	     h = h->next) {
		uint64_t remote;

		if (atomic_load_explicit(&h->state, memory_order_acquire) !=
		    HANDLE_IN_USE)
			continue;
		remote = atomic_load_explicit(&h->remote, memory_order_acquire);
		if (remote & HANDLE_RETIRED ?
			    remote != HANDLE_RETIRED :
			    remote != atomic_load_explicit(
					      &h->held, memory_order_relaxed))
			return 1;
	}
	return 0;
}

/*
 * Claim an unused cached region for eviction: its only direct reference
 * is the tree's, and no handle has a get outstanding.  Pins stay; the
 * region is released when the last handle lets go.  Under the write lock,
 * so no handle is created meanwhile.
 */
static int region_claim_unused(struct gdrc_region *r)
{
	uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire);

	while ((w & (REGION_REF_MASK | REGION_INVALID | REGION_DEAD)) == 1) {
		if (handles_busy(r))
			return 0;
		if (atomic_compare_exchange_weak_explicit(
			    &r->word, &w, w | REGION_INVALID,
			    memory_order_acq_rel, memory_order_acquire))
			return 1;
	}
	return 0;
}

/*
 * Find the least recently used region nobody holds and claim it for
 * eviction (its word goes from "tree reference only" to INVALID).
 * The tick cannot move during the walk: it advances only under the
 * write lock, which the caller holds.
 */
static struct gdrc_region *lru_claim_victim(struct gdrc_cache *c, int device)
{
	struct gdrc_region *r = c->lru_head, *next;

	while (r) {
		uint64_t stamp = atomic_load_explicit(&r->stamp,
						      memory_order_relaxed);

		next = r->lru_next;
		if (stamp != r->enq) {
			lru_unlink(c, r);
			r->enq = stamp;
			lru_insert_sorted(c, r);
		} else if ((device == GDRC_DEVICE_ALL || r->device == device) &&
			   region_claim_unused(r)) {
			return r;
		}
		r = next;
	}
	return NULL;
}

/* ====================================================================
 * Tree membership (under cache->lock, write)
 * ==================================================================== */

static void ghost_add(struct gdrc_cache *c, struct gdrc_region *r, int cause)
{
	struct gdrc_ghost *g = &c->ghosts[c->ghost_next++ % GDRC_GHOSTS];

	g->start = r->start;
	g->end = r->end;
	g->cause = cause;
}

/* Why is there no region for [start, end)?  Most recent removal wins. */
static int ghost_cause(struct gdrc_cache *c, uintptr_t start, uintptr_t end)
{
	for (unsigned i = 1; i <= GDRC_GHOSTS; i++) {
		struct gdrc_ghost *g =
			&c->ghosts[(c->ghost_next - i) % GDRC_GHOSTS];

		if (g->start < end && g->end > start)
			return g->cause;
	}
	return GDRC_STAT_MISS_COLD;
}

static void region_insert(struct gdrc_cache *c, struct gdrc_region *r)
{
	uint64_t tick = atomic_fetch_add_explicit(&c->tick, 1,
						  memory_order_relaxed) + 1;

	r->node.start = r->start;
	r->node.end = r->end;
	gdrc_itree_insert(&c->tree, &r->node);
	if (r->alloc_end > r->alloc_start &&
	    r->alloc_end - r->alloc_start + c->page_size > c->alloc_span_max)
		c->alloc_span_max = r->alloc_end - r->alloc_start +
				    c->page_size;
	r->was_cached = 1;
	atomic_store_explicit(&r->stamp, tick, memory_order_relaxed);
	r->enq = tick;
	r->lru_prev = c->lru_tail;
	r->lru_next = NULL;
	if (c->lru_tail)
		c->lru_tail->lru_next = r;
	else
		c->lru_head = r;
	c->lru_tail = r;
	c->nregions++;
	atomic_fetch_add_explicit(&r->word, 1, memory_order_relaxed);
	atomic_fetch_and_explicit(&r->word, ~REGION_INVALID,
				  memory_order_release);
}

/*
 * Take r out of the tree and drop the tree's reference.  ghost: the miss
 * cause to remember for its range, or 0 for none.  A region nobody holds
 * goes on d->dead, to be released after the lock is dropped.
 */
static void region_remove(struct gdrc_cache *c, struct gdrc_region *r, int ghost,
			  struct cache_defer *d)
{
	uint64_t old;

	atomic_fetch_or_explicit(&r->word, REGION_INVALID,
				 memory_order_acq_rel);
	gdrc_itree_remove(&c->tree, &r->node);
	lru_unlink(c, r);
	c->nregions--;
	if (ghost)
		ghost_add(c, r, ghost);
	tls_drop_region_locked(c, r, d);
	old = atomic_fetch_sub_explicit(&r->word, 1, memory_order_acq_rel) - 1;
	if (!(old & (REGION_REF_MASK | REGION_PIN_MASK)) &&
	    region_claim_dead(c, r)) {
		r->lru_next = d->dead;
		d->dead = r;
	}
}

static int over_limits(struct gdrc_cache *c, uint64_t regions,
		       uint64_t bytes)
{
	uint64_t pinned = atomic_load_explicit(&c->pinned_bytes,
					       memory_order_relaxed);

	return c->nregions + c->reserved_regions + regions >
		       c->p.max_regions ||
	       pinned + c->reserved_bytes + bytes > c->p.max_bytes ||
	       pinned + c->reserved_bytes + bytes < pinned;
}

/* Remove a claimed victim, counted as an eviction of its device. */
static void evict_one(struct gdrc_cache *c, struct gdrc_region *r,
		      struct cache_defer *d)
{
	struct gdrc_dev_acct *a = dev_acct(c, r->device);

	region_remove(c, r, GDRC_STAT_MISS_EVICTED, d);
	stat_add(c, GDRC_STAT_EVICTIONS, 1);
	if (a)
		atomic_fetch_add_explicit(&a->evictions, 1,
					  memory_order_relaxed);
}

/* Evict LRU-first until [regions, bytes] more fit.  @return 0 or -1. */
static int evict(struct gdrc_cache *c, uint64_t regions, uint64_t bytes,
		 struct cache_defer *d)
{
	struct gdrc_region *r;

	/* Refuse what could never fit rather than flush the cache for it. */
	if (regions > c->p.max_regions || bytes > c->p.max_bytes)
		return -1;
	while (over_limits(c, regions, bytes)) {
		r = lru_claim_victim(c, GDRC_DEVICE_ALL);
		if (!r)
			return -1;
		evict_one(c, r, d);
	}
	return 0;
}

/*
 * Evict device's unused regions, LRU first, until one more registration
 * of bytes fits its limits (GPU memory only).  The limits count every
 * registration alive; an evicted one that another thread's idle handle
 * still pins stays alive until that thread's next call, so the loop
 * stops once its victims cover the excess rather than when the counts
 * have dropped (which would flush the device and still refuse).
 * @return 0 or -1 (could not fit: nothing more to evict, or too large).
 */
static int evict_device(struct gdrc_cache *c, int device, uint64_t bytes,
			struct cache_defer *d)
{
	struct gdrc_dev_acct *a = dev_acct(c, device);
	uint64_t n, used, over_n = 0, over_b = 0;
	struct gdrc_region *r;

	if (!a || device < 0)
		return 0;
	if (bytes > c->p.gpu_max_bytes || !c->p.gpu_max_regions)
		return -1;
	n = atomic_load_explicit(&a->regions, memory_order_relaxed) +
	    a->reserved_regions + 1;
	used = atomic_load_explicit(&a->pinned_bytes, memory_order_relaxed) +
	       a->reserved_bytes;
	if (used + bytes < used)
		return -1;
	if (n > c->p.gpu_max_regions)
		over_n = n - c->p.gpu_max_regions;
	if (used + bytes > c->p.gpu_max_bytes)
		over_b = used + bytes - c->p.gpu_max_bytes;
	while (over_n || over_b) {
		uint64_t len;

		r = lru_claim_victim(c, device);
		if (!r)
			return -1;
		len = r->reg_end - r->reg_start;
		over_n -= over_n ? 1 : 0;
		over_b -= over_b < len ? over_b : len;
		evict_one(c, r, d);
	}
	return 0;
}

/* Under the lock: count (sign 1) or uncount (-1) a registration of
 * bytes of device's memory in progress. */
static void dev_reserve(struct gdrc_cache *c, int device, uint64_t bytes,
			int sign)
{
	struct gdrc_dev_acct *a = dev_acct(c, device);

	if (!a)
		return;
	a->reserved_bytes += sign > 0 ? bytes : -bytes;
	a->reserved_regions += (uint64_t)sign;
}

/* Remove every unused region of device.  @return how many. */
static unsigned evict_all_unused(struct gdrc_cache *c, int device,
				 struct cache_defer *d)
{
	struct gdrc_region *r;
	unsigned n = 0;

	while ((r = lru_claim_victim(c, device))) {
		evict_one(c, r, d);
		n++;
	}
	return n;
}

/* ====================================================================
 * Identity: which memory a region was made for
 * ==================================================================== */

/* Segment i of an array, or the one implicit segment when there is no
 * array (see gdrc_region.segs). */
static struct gdrc_seg seg_at(const struct gdrc_seg *segs, unsigned i,
			      uintptr_t start, uintptr_t end, uint64_t id)
{
	if (segs)
		return segs[i];
	return (struct gdrc_seg){ .start = start, .end = end,
				  .buffer_id = id };
}

static struct gdrc_seg region_seg(const struct gdrc_region *r, unsigned i)
{
	return seg_at(r->segs, i, r->alloc_start, r->alloc_end, r->buffer_id);
}

static struct gdrc_seg req_seg(const struct gdrc_cache_req *q, unsigned i)
{
	return seg_at(q->segs, i, q->alloc_start, q->alloc_end, q->buffer_id);
}

static unsigned req_nseg(const struct gdrc_cache_req *q)
{
	return q->segs ? q->nseg : 1;
}

static int seg_eq(const struct gdrc_seg *a, const struct gdrc_seg *b)
{
	return a->start == b->start && a->end == b->end &&
	       a->buffer_id == b->buffer_id;
}

/*
 * Is r made for the memory the driver reports for q now, where both
 * cover some?  Host memory: the same BUFFER_ID (0, or the CUDA-pinned
 * allocation's).  GPU memory: every segment of one that overlaps a
 * segment of the other is that very segment (range and BUFFER_ID), so a
 * registration over mappings A and B agrees with a request over B and C
 * while B is unchanged, and not once B was remapped.
 */
static int same_memory(const struct gdrc_region *r,
		       const struct gdrc_cache_req *q)
{
	unsigned i = 0, j = 0, qn = req_nseg(q);

	if (r->mem_type != q->mem_type)
		return 0;
	if (r->mem_type != GDRC_MEM_CUDA)
		return r->buffer_id == q->buffer_id;
	while (i < r->nseg && j < qn) {
		struct gdrc_seg a = region_seg(r, i), b = req_seg(q, j);

		if (a.end <= b.start) {
			i++;
		} else if (b.end <= a.start) {
			j++;
		} else {
			if (!seg_eq(&a, &b))
				return 0;
			i++;
			j++;
		}
	}
	return 1;
}

/* Made for exactly q's memory: merging r into q's registration keeps it
 * inside q's segments. */
static int same_segments(const struct gdrc_region *r,
			 const struct gdrc_cache_req *q)
{
	if (r->mem_type != q->mem_type)
		return 0;
	if (r->mem_type != GDRC_MEM_CUDA)
		return r->buffer_id == q->buffer_id;
	if (r->nseg != req_nseg(q))
		return 0;
	for (unsigned i = 0; i < r->nseg; i++) {
		struct gdrc_seg a = region_seg(r, i), b = req_seg(q, i);

		if (!seg_eq(&a, &b))
			return 0;
	}
	return 1;
}

/* Index of the first segment of r (with an array) ending past addr. */
static unsigned seg_search(const struct gdrc_region *r, uintptr_t addr)
{
	unsigned lo = 0, hi = r->nseg;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (r->segs[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct gdrc_seg gdrc_cache_seg_of(const struct gdrc_region *r,
				  uintptr_t addr)
{
	return r->segs ? r->segs[seg_search(r, addr)] : region_seg(r, 0);
}

int gdrc_cache_segs_ok(const struct gdrc_cache *c,
		       const struct gdrc_region *r, uintptr_t start,
		       uintptr_t end)
{
	return gdrc_segs_check(c, &r->segs[seg_search(r, start)], end);
}

/* ====================================================================
 * Invalidation (under cache->lock, write)
 * ==================================================================== */

struct collect {
	struct gdrc_region *list; /* linked by free_next, unused while live */
	uintptr_t start;      /* subsume only: the new region's range */
	uintptr_t end;
	uint32_t access;
	int subsume;          /* collect only regions inside [start, end) */
	int alloc_match;      /* collect only regions whose allocation
			       * overlaps [start, end) */
	const struct gdrc_cache_req *req; /* subsume, stale: the memory */
	const struct gdrc_cache *c;       /* kstale: the cache */
};

/* Overlap walks may not change the tree: collect, then remove. */
static int collect_fn(struct gdrc_itree_node *node, void *arg)
{
	struct gdrc_region *r = gdrc_container_of(node, struct gdrc_region, node);
	struct collect *col = arg;

	if (col->subsume &&
	    (r->start < col->start || r->end > col->end ||
	     (r->access & ~col->access) || !same_memory(r, col->req)))
		return 0;
	if (col->alloc_match &&
	    !(r->alloc_start < col->end && r->alloc_end > col->start))
		return 0;
	r->free_next = col->list;
	col->list = r;
	return 0;
}

static unsigned remove_collected(struct gdrc_cache *c, struct collect *col,
				 int ghost, struct cache_defer *d)
{
	struct gdrc_region *r, *next;
	unsigned n = 0;

	for (r = col->list; r; r = next) {
		next = r->free_next;
		region_remove(c, r, ghost, d);
		n++;
	}
	col->list = NULL;
	return n;
}

static void inflight_mark_stale(struct gdrc_cache *c, uintptr_t start,
				uintptr_t end)
{
	for (struct gdrc_inflight *f = c->inflight; f; f = f->next)
		if (f->start < end && f->end > start)
			f->stale = 1;
}

static void invalidate_locked(struct gdrc_cache *c, uintptr_t start,
			      uintptr_t end, int source, struct cache_defer *d)
{
	struct collect col = { 0 };
	unsigned n;

	gdrc_itree_overlap(&c->tree, start, end, collect_fn, &col);
	n = remove_collected(c, &col, GDRC_STAT_MISS_INVALIDATED, d);
	inflight_mark_stale(c, start, end);
	stat_add(c, GDRC_STAT_INVALIDATIONS, n);
	stat_add(c, source, n);
}

/*
 * CUDA allocations overlapping [start, end) were freed (a free by base
 * address posts [base, base + 1)): drop every region made for one of
 * them, and only those.  A GPU region's key can reach past its own small
 * allocation into a neighbour's 64 KiB page, so keys are not compared;
 * allocation ranges are.  Each region's key lies within alloc_span_max
 * of its allocation, which bounds the tree walk.
 */
static void invalidate_allocs_locked(struct gdrc_cache *c, uintptr_t start,
				     uintptr_t end, struct cache_defer *d)
{
	struct collect col = { .alloc_match = 1, .start = start, .end = end };
	uintptr_t span = c->alloc_span_max;
	unsigned n;

	gdrc_itree_overlap(&c->tree, start > span ? start - span : 0,
			   end < UINTPTR_MAX - span ? end + span : UINTPTR_MAX,
			   collect_fn, &col);
	n = remove_collected(c, &col, GDRC_STAT_MISS_INVALIDATED, d);
	for (struct gdrc_inflight *f = c->inflight; f; f = f->next)
		if (f->alloc_start < end && f->alloc_end > start)
			f->stale = 1;
	stat_add(c, GDRC_STAT_INVALIDATIONS, n);
	stat_add(c, GDRC_STAT_INV_CUDA_HOOK, n);
}

/* Apply queued host unmaps.  Must run before any lookup under the write
 * lock, so that nothing unmapped before this call is found. */
static void drain(struct gdrc_cache *c, struct cache_defer *d)
{
	struct gdrc_invq_range q[GDRC_INVQ_SLOTS];
	uint64_t seen;
	unsigned n;
	int all;

	if (!atomic_load_explicit(&c->invq.pending, memory_order_acquire))
		return;
	n = gdrc_invq_take(&c->invq, q, &all, &seen);
	if (all)
		invalidate_locked(c, 0, UINTPTR_MAX, GDRC_STAT_INV_HOST_HOOK,
				  d);
	for (unsigned i = 0; i < n; i++) {
		if (q[i].cls == GDRC_INVQ_CUDA)
			invalidate_allocs_locked(c, q[i].start, q[i].end, d);
		else
			invalidate_locked(c, q[i].start, q[i].end,
					  GDRC_STAT_INV_HOST_HOOK, d);
	}
	gdrc_invq_done(&c->invq, seen);
}

static void check_or_die(struct gdrc_cache *c)
{
	int ret;

	if (!c->p.check)
		return;
	ret = gdrc_cache_check(c);
	if (ret) {
		gdrc_error("cache invariant %d broken", ret);
		abort();
	}
}

static void unlock_and_release(struct gdrc_cache *c, struct cache_defer *d)
{
	check_or_die(c);
	pthread_rwlock_unlock(&c->lock);
	defer_release(c, d);
}

/* ====================================================================
 * Handles (see cache.h)
 * ==================================================================== */

/* Drop h's pin and make h reusable: called once per life of h, by the
 * add that brought its remote count to HANDLE_RETIRED (cache.h).  d as
 * for region_drop. */
static void handle_release(struct gdrc_cache *c, struct gdrc_handle *h,
			   struct cache_defer *d)
{
	struct gdrc_region *r = h->pub.r; /* reuse keeps the region */

	atomic_store_explicit(&h->state, HANDLE_RELEASED,
			      memory_order_release);
	region_drop_defer(c, r, REGION_PIN_ONE, d);
}

/* Add n to h's remote count; release h if that completed it. */
static void handle_remote_add(struct gdrc_cache *c, struct gdrc_handle *h,
			      uint64_t n, struct cache_defer *d)
{
	uint64_t now = atomic_fetch_add_explicit(&h->remote, n,
						 memory_order_acq_rel) + n;

	if (now == HANDLE_RETIRED)
		handle_release(c, h, d);
}

/* The owner lets go of h; its entry is already cleared. */
static void handle_retire(struct gdrc_cache *c, struct gdrc_handle *h,
			  struct cache_defer *d)
{
	uint64_t held = atomic_load_explicit(&h->held, memory_order_relaxed);

	handle_remote_add(c, h, HANDLE_RETIRED - held, d);
}

/*
 * A put of h by anyone but its owner's live entry: one more in remote,
 * unless that would exceed the gets outstanding.  Read remote, then held:
 * every put already in remote is a release that follows its get's count
 * in held, so held is seen at least that far, and a put of a get still
 * outstanding always finds held > remote (before the retire), or remote
 * below HANDLE_RETIRED (after it).  The compare-and-swap keeps two
 * racing extra puts from both passing.
 */
static int handle_put_remote(struct gdrc_cache *c, struct gdrc_handle *h)
{
	uint64_t rem = atomic_load_explicit(&h->remote, memory_order_acquire);

	for (;;) {
		if (rem >= HANDLE_RETIRED)
			return GDRC_PUT_RELEASED;
		if (rem < HANDLE_RETIRED / 2 && /* not retired yet */
		    atomic_load_explicit(&h->held, memory_order_relaxed) <= rem)
			return GDRC_PUT_TOO_MANY;
		if (atomic_compare_exchange_weak_explicit(
			    &h->remote, &rem, rem + 1, memory_order_acq_rel,
			    memory_order_acquire))
			break;
	}
	if (rem + 1 == HANDLE_RETIRED)
		handle_release(c, h, NULL);
	return GDRC_PUT_OK;
}

/* A put of a direct reference: one of those handed out, else nothing. */
static int region_put_direct(struct gdrc_cache *c, struct gdrc_region *r)
{
	uint32_t n = atomic_load_explicit(&r->direct, memory_order_relaxed);

	do {
		if (!n)
			return GDRC_PUT_TOO_MANY;
	} while (!atomic_compare_exchange_weak_explicit(
		&r->direct, &n, n - 1, memory_order_relaxed,
		memory_order_relaxed));
	gdrc_cache_region_put(c, r);
	return GDRC_PUT_OK;
}

int gdrc_cache_put_slow(struct gdrc_cache *c, struct gdrc_mr *mr)
{
	int shard, fault;

	if (mr->magic != GDRC_MR_MAGIC)
		return GDRC_PUT_NOT_MR;
	if (mr->r->cache != c)
		return GDRC_PUT_OTHER_CTX;
	if (atomic_load_explicit(&c->forked, memory_order_relaxed))
		return GDRC_PUT_OK; /* the parent's are never released */
	if (mr->h && atomic_load_explicit(&mr->h->state,
					  memory_order_acquire) !=
			     HANDLE_IN_USE)
		return GDRC_PUT_RELEASED;
	fault = mr->h ? handle_put_remote(c, mr->h) :
			region_put_direct(c, mr->r);
	if (fault)
		return fault;
	shard = tls_shard();
	gdrc_shard_inc(&c->shards[shard].puts, shard);
	return GDRC_PUT_OK;
}

/* Clear entry e, then let go of its handle if its cache still lives. */
static void tls_entry_drop(struct gdrc_cache *c, struct gdrc_tls_entry *e)
{
	struct gdrc_handle *h = e->h;
	uint64_t uid = e->uid;
	struct gdrc_cache *owner;

	e->uid = 0;
	e->h = NULL;
	if (!uid)
		return;
	if (c && uid == c->uid) {
		handle_retire(c, h, NULL);
		return;
	}
	/* Another cache's handle: only while that cache surely lives. */
	pthread_mutex_lock(&cache_registry_lock);
	owner = registry_find(uid);
	if (owner && !atomic_load_explicit(&owner->forked,
					   memory_order_relaxed))
		handle_retire(owner, h, NULL);
	pthread_mutex_unlock(&cache_registry_lock);
}

/*
 * cache->lock held (write): r leaves the cache; let go of this thread's
 * handle on it now, so that its pinned bytes count as freed at once (the
 * evictor's arithmetic relies on it).  Other threads' handles go when
 * those threads next call, or exit.
 */
static void tls_drop_region_locked(struct gdrc_cache *c, struct gdrc_region *r,
				   struct cache_defer *d)
{
	struct gdrc_tls *t = &gdrc_tls_cur;

	for (int i = 0; i < GDRC_TLS_ENTRIES; i++) {
		struct gdrc_tls_entry *e = &t->e[i];
		struct gdrc_handle *h = e->h;

		if (e->uid != c->uid || h->pub.r != r)
			continue;
		e->uid = 0;
		e->h = NULL;
		handle_retire(c, h, d);
	}
}

/* Thread exit: let go of every remembered handle. */
static void tls_drop_all(void)
{
	for (int i = 0; i < GDRC_TLS_ENTRIES; i++)
		tls_entry_drop(NULL, &gdrc_tls_cur.e[i]);
}

/* Let go of this thread's handles on c's regions that left the cache,
 * so that they are released now rather than at the next replacement. */
static void tls_drop_invalid(struct gdrc_cache *c)
{
	struct gdrc_tls *t = &gdrc_tls_cur;

	for (int i = 0; i < GDRC_TLS_ENTRIES; i++) {
		struct gdrc_tls_entry *e = &t->e[i];

		if (e->uid == c->uid &&
		    (atomic_load_explicit(&e->h->pub.r->word,
					  memory_order_acquire) &
		     REGION_INVALID))
			tls_entry_drop(c, e);
	}
}

/* Remember h for this thread's fast path, in a free entry if any. */
static void tls_install(struct gdrc_cache *c, struct gdrc_handle *h)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_entry *e = NULL;
	struct gdrc_region *r = h->pub.r;

	tls_shard(); /* gdrc_cache_put_fast counts a live entry's puts there */
	tls_drop_invalid(c);
	for (int i = 0; i < GDRC_TLS_ENTRIES && !e; i++)
		if (!t->e[i].uid)
			e = &t->e[i];
	if (!e) {
		e = &t->e[t->next++ % GDRC_TLS_ENTRIES];
		tls_entry_drop(c, e);
	}
	e->start = r->start;
	e->end = r->end;
	e->access = r->access;
	e->h = h;
	e->r = r;
	e->uid = c->uid;
}

/* A released handle of r to reuse, claimed; or NULL. */
static struct gdrc_handle *handle_reuse(struct gdrc_region *r)
{
	struct gdrc_handle *h;

	for (h = atomic_load_explicit(&r->handles, memory_order_acquire); h;
	     h = h->next) {
		int expect = HANDLE_RELEASED;

		if (atomic_compare_exchange_strong_explicit(
			    &h->state, &expect, HANDLE_CLAIMED,
			    memory_order_acq_rel, memory_order_relaxed))
			return h;
	}
	return NULL;
}

/* Hand out r's own mr: the caller's direct reference becomes the get. */
static struct gdrc_mr *serve_direct(struct gdrc_region *r)
{
	atomic_fetch_add_explicit(&r->direct, 1, memory_order_relaxed);
	return &r->self;
}

/*
 * Serve r to this thread through its handle, turning the caller's direct
 * reference on r into a get counted in the handle: this thread's live
 * handle on r if it has one, else a released handle of r, else a new one.
 * Without memory for a handle, or in a thread that keeps none (its exit
 * hook ran or could not be set), r's own is served (a direct reference).
 */
static struct gdrc_mr *serve(struct gdrc_cache *c, struct gdrc_region *r)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_handle *h;

	tls_shard();
	if (t->no_handles)
		return serve_direct(r); /* the caller's reference is the get */
	for (int i = 0; i < GDRC_TLS_ENTRIES; i++) {
		h = t->e[i].h;
		if (t->e[i].uid == c->uid && h->pub.r == r) {
			gdrc_owned_add(&h->held, 1);
			region_drop(c, r, 1); /* the tree still holds r */
			return &h->pub;
		}
	}
	h = handle_reuse(r);
	if (!h) {
		h = handle_alloc(c);
		if (!h)
			return serve_direct(r);
		h->pub.r = r;
		h->pub.h = h;
		h->pub.magic = GDRC_MR_MAGIC;
		atomic_init(&h->state, HANDLE_CLAIMED);
		h->next = atomic_load_explicit(&r->handles,
					       memory_order_relaxed);
		while (!atomic_compare_exchange_weak_explicit(
			&r->handles, &h->next, h, memory_order_release,
			memory_order_relaxed))
			;
	}
	atomic_store_explicit(&h->held, 1, memory_order_relaxed);
	atomic_store_explicit(&h->remote, 0, memory_order_relaxed);
	atomic_fetch_add_explicit(&r->word, REGION_PIN_ONE - 1,
				  memory_order_acq_rel);
	atomic_store_explicit(&h->state, HANDLE_IN_USE, memory_order_release);
	tls_install(c, h);
	return &h->pub;
}

/* ====================================================================
 * Lookup
 * ==================================================================== */

struct cover_arg {
	const struct gdrc_cache *c;
	uint32_t access;
	const struct gdrc_cache_req *req; /* the memory a region must have
					   * been made for (same_memory);
					   * NULL accepts any */
};

static int cover_ok_fn(struct gdrc_itree_node *node, void *arg)
{
	const struct gdrc_region *r = gdrc_container_of(node, struct gdrc_region,
						    node);
	const struct cover_arg *a = arg;

	if ((a->access & ~r->access) || gdrc_region_kstale(a->c, r))
		return 0;
	return !a->req || same_memory(r, a->req);
}

static struct gdrc_region *find_cover(struct gdrc_cache *c, uintptr_t start,
				  uintptr_t end, const struct cover_arg *a)
{
	struct gdrc_itree_node *node;

	node = gdrc_itree_find_cover(&c->tree, start, end, cover_ok_fn,
				     (void *)a);
	return node ? gdrc_container_of(node, struct gdrc_region, node) : NULL;
}

/*
 * Take a reference on a region found in the tree (lock held), and stamp
 * it with the current tick as a fast hit does: the tick itself moves only
 * at insertions, so that a tree-path hit writes nothing shared (the
 * tick's line is the one every fast hit reads).
 */
static void hit(struct gdrc_cache *c, struct gdrc_region *r)
{
	atomic_fetch_add_explicit(&r->word, 1, memory_order_acquire);
	gdrc_region_stamp(c, r);
}

/* Count a hit and serve it through this thread's handle. */
static struct gdrc_mr *hit_done(struct gdrc_cache *c, struct gdrc_region *r)
{
	tls_count_hit(c);
	return serve(c, r);
}

/* Remove one region if it is still cached (tag check failed). */
static void invalidate_region(struct gdrc_cache *c, struct gdrc_region *r,
			      int source)
{
	struct cache_defer d = { 0 };

	pthread_rwlock_wrlock(&c->lock);
	drain(c, &d);
	if (!(atomic_load_explicit(&r->word, memory_order_acquire) &
	      REGION_INVALID)) {
		region_remove(c, r, GDRC_STAT_MISS_INVALIDATED, &d);
		stat_add(c, GDRC_STAT_INVALIDATIONS, 1);
		stat_add(c, source, 1);
	}
	unlock_and_release(c, &d);
}

/* Outside the lock: does a GPU region still hold its memory where
 * [start, end) touches it? */
static int tag_valid(struct gdrc_cache *c, struct gdrc_region *r,
		     uintptr_t start, uintptr_t end)
{
	int shard;

	if (!r->tag_check)
		return 1;
	shard = tls_shard();
	gdrc_shard_inc(&c->shards[shard].tag_checks, shard);
	if (gdrc_region_tags_ok(c, r, start, end))
		return 1;
	invalidate_region(c, r, GDRC_STAT_INV_TAG_CHECK);
	region_drop(c, r, 1);
	return 0;
}

void gdrc_cache_stat_add(struct gdrc_cache *c, int stat, uint64_t n)
{
	stat_add(c, stat, n);
}

/* The tree path's search: a direct reference on a valid covering region. */
static int tree_find(struct gdrc_cache *c, uintptr_t start, uintptr_t end,
		     uint32_t access, struct gdrc_region **r_p)
{
	struct cover_arg a = { .c = c, .access = access };
	struct gdrc_region *r;

	if (atomic_load_explicit(&c->forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	if (atomic_load_explicit(&c->invq.pending, memory_order_acquire))
		return 0; /* the miss path drains first */
	tls_drop_invalid(c);
	pthread_rwlock_rdlock(&c->lock);
	r = find_cover(c, start, end, &a);
	if (r)
		hit(c, r);
	pthread_rwlock_unlock(&c->lock);
	if (!r || !tag_valid(c, r, start, end))
		return 0;
	*r_p = r;
	return 1;
}

int gdrc_cache_peek(struct gdrc_cache *c, uintptr_t start, uintptr_t end,
		    struct gdrc_region **r_p)
{
	return tree_find(c, start, end, 0, r_p);
}

int gdrc_cache_lookup(struct gdrc_cache *c, uintptr_t start, uintptr_t end,
		      uint32_t access, struct gdrc_mr **mr_p)
{
	struct gdrc_region *r;
	int ret = tree_find(c, start, end, access, &r);

	if (ret == 1)
		*mr_p = hit_done(c, r);
	return ret;
}

/* ====================================================================
 * Miss
 * ==================================================================== */

struct miss_plan {
	uintptr_t start;  /* key range */
	uintptr_t end;
	uintptr_t reg_start; /* registered range */
	uintptr_t reg_end;
	uint32_t access;
	int cause;        /* GDRC_STAT_MISS_* */
	int cached;       /* insert into the tree */
	const struct gdrc_cache_req *req;
};

static int widen_fn(struct gdrc_itree_node *node, void *arg)
{
	const struct gdrc_region *r = gdrc_container_of(node, struct gdrc_region,
						    node);
	struct miss_plan *plan = arg;

	if (!same_segments(r, plan->req))
		return 0;
	if (r->start < plan->start)
		plan->start = r->start;
	if (r->end > plan->end)
		plan->end = r->end;
	plan->access |= r->access;
	return 0;
}

static int kstale_fn(struct gdrc_itree_node *node, void *arg)
{
	struct gdrc_region *r = gdrc_container_of(node, struct gdrc_region,
						  node);
	struct collect *col = arg;

	if (gdrc_region_kstale(col->c, r)) {
		r->free_next = col->list;
		col->list = r;
	}
	return 0;
}

static int stale_fn(struct gdrc_itree_node *node, void *arg)
{
	struct gdrc_region *r = gdrc_container_of(node, struct gdrc_region, node);
	struct collect *col = arg;

	if (same_memory(r, col->req))
		return 0;
	r->free_next = col->list;
	col->list = r;
	return 0;
}

static int overlap_any_fn(struct gdrc_itree_node *node, void *arg)
{
	(void)node;
	(void)arg;
	return 1;
}

/*
 * Decide what to register and why it missed.
 *
 * A cached region of other memory overlapping the request is stale:
 * allocations and mappings never overlap, so a region that disagrees
 * with what the driver reports here now (same_memory: memory type, and
 * the range and BUFFER_ID of every segment both cover) was made for
 * memory freed or remapped since (a free no hook saw).  It is dropped.
 *
 * A region of the same memory that covers the range with too few rights,
 * or overlaps without covering, is merged into the new one (ranges and
 * rights), and retired once the new one is in; only overlapping, never
 * merely adjacent, ranges merge, since one registration must not span two
 * allocations.  GPU merges stay inside the allocation: only regions of
 * exactly the request's segments merge.
 */
static void plan_miss(struct gdrc_cache *c, struct miss_plan *plan,
		      struct cache_defer *d)
{
	const struct gdrc_cache_req *req = plan->req;
	struct cover_arg any = { .c = c, .req = req };
	struct collect stale = { .req = req, .c = c };
	unsigned n, nk;

	gdrc_itree_overlap(&c->tree, plan->start, plan->end, kstale_fn,
			   &stale);
	nk = remove_collected(c, &stale, GDRC_STAT_MISS_INVALIDATED, d);
	stat_add(c, GDRC_STAT_INVALIDATIONS, nk);
	stat_add(c, GDRC_STAT_INV_KMOD, nk);
	gdrc_itree_overlap(&c->tree, plan->start, plan->end, stale_fn,
			   &stale);
	n = remove_collected(c, &stale, GDRC_STAT_MISS_INVALIDATED, d);
	stat_add(c, GDRC_STAT_INVALIDATIONS, n);
	stat_add(c, GDRC_STAT_INV_TAG_CHECK, n);
	if (!plan->cached) {
		plan->cause = GDRC_STAT_MISS_UNCACHED;
	} else if (find_cover(c, plan->start, plan->end, &any)) {
		plan->cause = GDRC_STAT_MISS_ACCESS;
	} else if (gdrc_itree_overlap(&c->tree, plan->start, plan->end,
				      overlap_any_fn, NULL)) {
		plan->cause = GDRC_STAT_MISS_TOO_SMALL;
	} else {
		plan->cause = n || nk ? GDRC_STAT_MISS_INVALIDATED :
				       ghost_cause(c, plan->start, plan->end);
	}
	if (plan->cached)
		gdrc_itree_overlap(&c->tree, plan->start, plan->end, widen_fn,
				   plan);
	if (req->mem_type == GDRC_MEM_HOST) {
		plan->reg_start = plan->start;
		plan->reg_end = plan->end;
	} else {
		plan->reg_start = gdrc_align_down(plan->start, req->reg_align);
		plan->reg_end = gdrc_align_up(plan->end, req->reg_align);
	}
}

/*
 * A registration of device's memory ran out (BAR1 space, GPU or pinnable
 * memory, fds): give back the device's unused registrations before the
 * one retry (host memory: every unused one, since the NIC's and the
 * memlock limit's resources are shared by all), this thread's idle
 * handles on them too, and say so the first time.
 */
static void oom_release(struct gdrc_cache *c, int device)
{
	struct gdrc_dev_acct *a = dev_acct(c, device);
	struct cache_defer d = { 0 };
	unsigned n;

	pthread_rwlock_wrlock(&c->lock);
	drain(c, &d);
	n = evict_all_unused(c, device < 0 ? GDRC_DEVICE_ALL : device, &d);
	unlock_and_release(c, &d);
	tls_drop_invalid(c);
	stat_add(c, GDRC_STAT_OOM_RETRIES, 1);
	if (a)
		atomic_fetch_add_explicit(&a->retries, 1, memory_order_relaxed);
	if (!atomic_flag_test_and_set(&c->oom_warned))
		gdrc_warn("%s ran out of registrable memory (BAR1, pinned "
			  "memory or fds): released %u unused registrations "
			  "of it and retried (stat oom_retries counts these; "
			  "said once)",
			  device < 0 ? "host memory" : "a cuda device", n);
}

static gdrc_status_t reg_with_retry(struct gdrc_cache *c,
				    const struct gdrc_pin_ops *ops, void *be,
				    struct gdrc_pin_reg *reg, int device)
{
	gdrc_status_t status;

	status = ops->reg(be, reg);
	if (status != GDRC_ERR_NO_MEMORY)
		return status;
	oom_release(c, device);
	return ops->reg(be, reg);
}

/* What the kernel channel holds for a registration being made. */
struct miss_kern {
	int slot;                /* -1: none */
	uint64_t handle;
	int pinned;              /* slot is a GPU pin, not a watch */
	uint32_t kmore;          /* further GPU pins, one per VMM mapping */
	struct gdrc_kpin *kpins;
};

/* Give back whatever k holds (a failed registration). */
static void kern_release(struct gdrc_cache *c, struct miss_kern *k)
{
	if (k->slot >= 0 && k->pinned)
		c->p.kunpin(c->p.karg, k->handle);
	else if (k->slot >= 0)
		c->p.kunsub(c->p.karg, k->handle);
	for (uint32_t i = 0; i < k->kmore; i++)
		c->p.kunpin(c->p.karg, k->kpins[i].handle);
	free(k->kpins);
	*k = (struct miss_kern){ .slot = -1 };
}

/*
 * GPU memory: pinned by the module, revoked by the driver.  nvidia_p2p
 * pins one allocation, so a registration over several VMM mappings
 * takes one pin per mapping, of the part of the registered range in it
 * (mappings are 2 MiB aligned, so each part is whole 64 KiB pages); any
 * of them revoked ends the registration.  One segment: the whole
 * registered range, as it may round past a small allocation.
 * @return 0, or the module's -errno (nothing held then).
 */
static int kern_pin_gpu(struct gdrc_cache *c, const struct miss_plan *plan,
			struct miss_kern *k)
{
	const struct gdrc_cache_req *req = plan->req;
	unsigned n = req_nseg(req);
	int err = 0;

	if (n > 1) {
		k->kpins = calloc(n - 1, sizeof(*k->kpins));
		if (!k->kpins)
			return -ENOMEM;
	}
	for (unsigned i = 0; i < n && !err; i++) {
		struct gdrc_seg g = req_seg(req, i);
		uintptr_t s = n > 1 && g.start > plan->reg_start ? g.start :
								    plan->reg_start;
		uintptr_t e = n > 1 && g.end < plan->reg_end ? g.end :
							       plan->reg_end;
		uint64_t handle;
		int slot;

		if (s >= e)
			continue; /* a key narrower than the mappings */
		err = c->p.kpin(c->p.karg, s, e - s, &slot, &handle);
		if (err)
			break;
		if (k->slot < 0) {
			k->slot = slot;
			k->handle = handle;
			k->pinned = 1;
		} else {
			k->kpins[k->kmore++] = (struct gdrc_kpin){
				.slot = slot, .handle = handle };
		}
	}
	if (err)
		kern_release(c, k);
	return err;
}

/*
 * Cached host memory is watched by the kernel channel when there is one:
 * subscribed before it is registered, so that an unmap racing with the
 * registration shows in the word.  Without a slot (the channel's words
 * are all taken) and without memory hooks, the registration is handed
 * out uncached: nothing would see its memory go.  GPU memory is pinned
 * (kern_pin_gpu).
 * @return 0, or the module's -errno when a GPU pin failed.
 */
static int miss_subscribe(struct gdrc_cache *c, struct miss_plan *plan,
			  struct miss_kern *k)
{
	int gpu = plan->req->mem_type != GDRC_MEM_HOST;

	*k = (struct miss_kern){ .slot = -1 };
	if (!c->p.kgen || (!plan->cached && !(gpu && c->p.gpu_kpin_required)))
		return 0;
	if (gpu)
		return c->p.kpin ? kern_pin_gpu(c, plan, k) : -EOPNOTSUPP;
	if (c->p.ksub(c->p.karg, plan->reg_start,
		      plan->reg_end - plan->reg_start, &k->slot, &k->handle))
		k->slot = -1;
	if (k->slot < 0 &&
	    !atomic_load_explicit(&c->cache_host, memory_order_relaxed))
		plan->cached = 0;
	return 0;
}

/*
 * The kmod backend's pin failed with err: when the module ran out
 * (ENOMEM from the provider, BAR1; ENOSPC, EDQUOT: its limits), give back
 * the device's unused registrations and try once more.
 * @return GDRC_OK pinned; GDRC_ERR_NO_MEMORY; GDRC_ERR_KMOD.
 */
static gdrc_status_t kpin_retry(struct gdrc_cache *c, struct miss_plan *plan,
				int err, struct miss_kern *k)
{
	int full = err == -ENOMEM || err == -ENOSPC || err == -EDQUOT;

	if (full) {
		oom_release(c, plan->req->device);
		err = miss_subscribe(c, plan, k);
		full = err == -ENOMEM || err == -ENOSPC || err == -EDQUOT;
	}
	if (!err)
		return GDRC_OK;
	gdrc_debug("gdrcache.ko pin of %#lx+%lu failed: %s",
		   (unsigned long)plan->reg_start,
		   (unsigned long)(plan->reg_end - plan->reg_start),
		   strerror(-err));
	return full ? GDRC_ERR_NO_MEMORY : GDRC_ERR_KMOD;
}

/* Register plan's range outside the lock.  @return status; *r_p set. */
static gdrc_status_t miss_register(struct gdrc_cache *c,
				   struct miss_plan *plan,
				   struct gdrc_region **r_p)
{
	const struct gdrc_cache_req *req = plan->req;
	struct gdrc_pin_reg reg = {
		.addr = plan->reg_start,
		.length = plan->reg_end - plan->reg_start,
		.access = plan->access,
		.mem_type = req->mem_type,
	};
	const struct gdrc_pin_ops *ops = c->p.ops;
	void *be = c->p.be;
	gdrc_status_t status;
	struct gdrc_region *r;
	struct miss_kern k;
	int kerr;

	if (req->mem_type == GDRC_MEM_CUDA && c->p.gpu_ops) {
		ops = c->p.gpu_ops;
		be = c->p.gpu_be;
	}
	r = slab_alloc(c);
	if (!r)
		return GDRC_ERR_NO_MEMORY;
	if (req->segs) {
		r->segs = malloc(req->nseg * sizeof(*r->segs));
		if (!r->segs) {
			slab_free(c, r);
			return GDRC_ERR_NO_MEMORY;
		}
		memcpy(r->segs, req->segs, req->nseg * sizeof(*r->segs));
	}
	r->nseg = req_nseg(req);
	kerr = miss_subscribe(c, plan, &k);
	if (req->mem_type == GDRC_MEM_CUDA && c->p.gpu_kpin_required &&
	    !k.pinned) {
		status = kpin_retry(c, plan, kerr, &k);
		if (status) {
			stat_add(c, GDRC_STAT_REG_FAILURES, 1);
			slab_free(c, r);
			return status;
		}
	}
	status = reg_with_retry(c, ops, be, &reg, req->device);
	if (status) {
		kern_release(c, &k);
		stat_add(c, GDRC_STAT_REG_FAILURES, 1);
		slab_free(c, r);
		return status;
	}
	r->kslot = k.slot;
	r->khandle = k.handle;
	r->kpinned = k.pinned;
	r->kmore = k.kmore;
	r->kpins = k.kpins;
	r->id = atomic_fetch_add_explicit(&region_id_next, 1,
					  memory_order_relaxed);
	r->start = plan->start;
	r->end = plan->end;
	r->reg_start = plan->reg_start;
	r->reg_end = plan->reg_end;
	r->access = plan->access;
	r->lkey = reg.lkey;
	r->rkey = reg.rkey;
	r->mem_type = req->mem_type;
	r->kind = req->kind;
	r->device = req->device;
	/* GDRC_VALIDATE=auto: the kernel's word replaces the tag query. */
	if (!req->tag_check || (req->tag_check_auto && k.slot >= 0))
		r->tag_check = REGION_TAG_NONE;
	else if (!r->segs)
		r->tag_check = REGION_TAG_ONE;
	else
		r->tag_check = r->nseg <= REGION_SEGS_WALK ? REGION_TAG_SEGS :
							     REGION_TAG_MANY;
	r->buffer_id = req->buffer_id;
	r->alloc_start = req->alloc_start;
	r->alloc_end = req->alloc_end;
	r->info_flags = req->info_flags | (k.slot >= 0 ? GDRC_MR_INFO_KMOD : 0);
	if (!r->tag_check)
		r->info_flags &= ~GDRC_MR_INFO_TAG_CHECKED;
	r->was_cached = 0;
	r->cache = c;
	r->ops = ops;
	r->be = be;
	r->handle = reg.handle;
	region_publish(c, r);
	*r_p = r;
	return GDRC_OK;
}

/* Retries when unmaps keep racing with the registration. */
#define MISS_STALE_RETRIES 3

static void plan_init(struct gdrc_cache *c, const struct gdrc_cache_req *req,
		      struct miss_plan *plan)
{
	*plan = (struct miss_plan){
		.access = req->access,
		.cached = !(req->flags & GDRC_GET_UNCACHED) &&
			  (req->mem_type != GDRC_MEM_HOST || c->p.kgen ||
			   atomic_load_explicit(&c->cache_host,
						memory_order_relaxed)),
		.req = req,
	};
	if (req->mem_type == GDRC_MEM_HOST) {
		plan->start = gdrc_align_down(req->start, c->page_size);
		plan->end = gdrc_align_up(req->end, c->page_size);
	} else {
		plan->start = req->key_start;
		plan->end = req->key_end;
	}
}

gdrc_status_t gdrc_cache_get_miss(struct gdrc_cache *c,
				  const struct gdrc_cache_req *req,
				  struct gdrc_mr **mr_p)
{
	struct cover_arg want = { .c = c, .access = req->access,
				  .req = req };
	struct gdrc_inflight inflight = { 0 };
	struct cache_defer d = { 0 };
	struct collect col = { 0 };
	struct miss_plan plan;
	struct gdrc_region *r = NULL, *found;
	gdrc_status_t status;
	int tries = 0, reserved;

	if (atomic_load_explicit(&c->forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	tls_drop_invalid(c);
again:
	plan_init(c, req, &plan);
	pthread_rwlock_wrlock(&c->lock);
	drain(c, &d);
	if (plan.cached) {
		found = find_cover(c, req->start, req->end, &want);
		if (found) {
			hit(c, found);
			unlock_and_release(c, &d);
			*mr_p = hit_done(c, found);
			return GDRC_OK;
		}
	}
	plan_miss(c, &plan, &d);
	if (evict(c, plan.cached, plan.reg_end - plan.reg_start, &d) ||
	    evict_device(c, req->device, plan.reg_end - plan.reg_start, &d)) {
		stat_add(c, GDRC_STAT_LIMIT_REJECTS, 1);
		unlock_and_release(c, &d);
		gdrc_debug("%#lx+%lu exceeds the cache limits",
			   (unsigned long)plan.reg_start,
			   (unsigned long)(plan.reg_end - plan.reg_start));
		return GDRC_ERR_LIMIT;
	}
	reserved = plan.cached; /* miss_register may uncache the plan */
	c->reserved_regions += reserved;
	c->reserved_bytes += plan.reg_end - plan.reg_start;
	dev_reserve(c, req->device, plan.reg_end - plan.reg_start, 1);
	inflight = (struct gdrc_inflight){
		.next = c->inflight, .start = plan.start, .end = plan.end,
		.alloc_start = req->alloc_start, .alloc_end = req->alloc_end,
	};
	c->inflight = &inflight;
	unlock_and_release(c, &d);

	status = miss_register(c, &plan, &r);

	pthread_rwlock_wrlock(&c->lock);
	drain(c, &d);
	for (struct gdrc_inflight **pp = &c->inflight; *pp;
	     pp = &(*pp)->next) {
		if (*pp == &inflight) {
			*pp = inflight.next;
			break;
		}
	}
	c->reserved_regions -= reserved;
	c->reserved_bytes -= plan.reg_end - plan.reg_start;
	dev_reserve(c, req->device, plan.reg_end - plan.reg_start, -1);
	if (status) {
		unlock_and_release(c, &d);
		return status;
	}
	/* Unmapped while being registered: seen by the hooks (drain marked
	 * it) or by the kernel channel (its word moved). */
	if (inflight.stale || gdrc_region_kstale(c, r)) {
		unlock_and_release(c, &d);
		region_drop(c, r, 1);
		if (++tries < MISS_STALE_RETRIES)
			goto again;
		gdrc_debug("%#lx+%lu kept being unmapped while registering",
			   (unsigned long)plan.start,
			   (unsigned long)(plan.end - plan.start));
		return GDRC_ERR_BUSY;
	}
	if (plan.cached) {
		/* Another thread may have cached the same range meanwhile:
		 * serve that (a hit) and drop ours. */
		found = find_cover(c, req->start, req->end, &want);
		if (found) {
			hit(c, found);
			unlock_and_release(c, &d);
			region_drop(c, r, 1);
			*mr_p = hit_done(c, found);
			return GDRC_OK;
		}
		col = (struct collect){ .start = plan.start, .end = plan.end,
					.access = plan.access, .subsume = 1,
					.req = req };
		gdrc_itree_overlap(&c->tree, plan.start, plan.end, collect_fn,
				   &col);
		remove_collected(c, &col, 0, &d);
		region_insert(c, r);
	}
	stat_add(c, GDRC_STAT_MISSES, 1);
	stat_add(c, plan.cause, 1);
	unlock_and_release(c, &d);
	*mr_p = plan.cached ? serve(c, r) : serve_direct(r);
	return GDRC_OK;
}

/* ====================================================================
 * Invalidation, events, fork
 * ==================================================================== */

gdrc_status_t gdrc_cache_invalidate(struct gdrc_cache *c, uintptr_t start,
				    uintptr_t end, int source)
{
	struct cache_defer d = { 0 };

	if (atomic_load_explicit(&c->forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	pthread_rwlock_wrlock(&c->lock);
	drain(c, &d);
	invalidate_locked(c, start, end, source, &d);
	unlock_and_release(c, &d);
	return GDRC_OK;
}

GDRC_HOOK_CONTEXT
void gdrc_cache_post_event(struct gdrc_cache *c, uintptr_t start,
			   uintptr_t end, int cls)
{
	gdrc_invq_post(&c->invq, start, end, cls);
}

void gdrc_cache_stop_host_caching(struct gdrc_cache *c)
{
	struct cache_defer d = { 0 };

	atomic_store_explicit(&c->cache_host, 0, memory_order_relaxed);
	/* A fork child releases none of its parent's registrations (and
	 * may find the locks held by threads it lacks). */
	if (atomic_load_explicit(&c->forked, memory_order_relaxed))
		return;
	pthread_rwlock_wrlock(&c->lock);
	drain(c, &d);
	invalidate_locked(c, 0, UINTPTR_MAX, GDRC_STAT_INV_HOST_HOOK, &d);
	unlock_and_release(c, &d);
}

void gdrc_cache_mark_forked(struct gdrc_cache *c)
{
	atomic_store_explicit(&c->forked, 1, memory_order_relaxed);
	gdrc_invq_poke(&c->invq);
	/* A tag-checked entry would not look at pending (get_fast). */
	for (int i = 0; i < GDRC_TLS_ENTRIES; i++)
		if (gdrc_tls_cur.e[i].uid == c->uid)
			gdrc_tls_cur.e[i].uid = 0;
}

/* ====================================================================
 * Statistics and checks
 * ==================================================================== */

gdrc_status_t gdrc_cache_release_unused(struct gdrc_cache *c, int device,
					uint64_t *released_p)
{
	struct cache_defer d = { 0 };
	unsigned n;

	if (atomic_load_explicit(&c->forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	pthread_rwlock_wrlock(&c->lock);
	drain(c, &d);
	n = evict_all_unused(c, device, &d);
	unlock_and_release(c, &d);
	tls_drop_invalid(c);
	if (released_p)
		*released_p = n;
	return GDRC_OK;
}

static uint64_t dev_value(struct gdrc_cache *c, const struct gdrc_dev_acct *a,
			  int device, int stat)
{
	switch (stat) {
	case GDRC_DEVICE_STAT_PINNED_BYTES:
		return atomic_load_explicit(&a->pinned_bytes,
					    memory_order_relaxed);
	case GDRC_DEVICE_STAT_REGIONS:
		return atomic_load_explicit(&a->regions, memory_order_relaxed);
	case GDRC_DEVICE_STAT_DMABUFS:
		return atomic_load_explicit(&a->dmabufs, memory_order_relaxed);
	case GDRC_DEVICE_STAT_EVICTIONS:
		return atomic_load_explicit(&a->evictions,
					    memory_order_relaxed);
	case GDRC_DEVICE_STAT_RETRIES:
		return atomic_load_explicit(&a->retries, memory_order_relaxed);
	case GDRC_DEVICE_STAT_MAX_BYTES:
		return device >= 0 ? c->p.gpu_max_bytes : GDRC_LIMIT_NONE;
	case GDRC_DEVICE_STAT_MAX_REGIONS:
		return device >= 0 ? c->p.gpu_max_regions : GDRC_LIMIT_NONE;
	}
	return 0;
}

uint64_t gdrc_cache_dev_stat(struct gdrc_cache *c, int device, int stat)
{
	uint64_t sum = 0;

	if (device != GDRC_DEVICE_ALL)
		return dev_value(c, dev_acct(c, device), device, stat);
	if (stat == GDRC_DEVICE_STAT_MAX_BYTES ||
	    stat == GDRC_DEVICE_STAT_MAX_REGIONS)
		return GDRC_LIMIT_NONE;
	for (int i = 0; i < GDRC_DEV_SLOTS; i++)
		sum += dev_value(c, &c->dev[i], i - 1, stat);
	return sum;
}

void gdrc_cache_stats(struct gdrc_cache *c, uint64_t *values)
{
	uint64_t tag_hits;

	for (int i = 0; i < GDRC_STAT_COUNT; i++)
		values[i] = atomic_load_explicit(&c->stat[i],
						 memory_order_relaxed);
	for (int i = 0; i <= GDRC_SHARDS; i++) {
		values[GDRC_STAT_HITS] += atomic_load_explicit(
			&c->shards[i].hits, memory_order_relaxed);
		values[GDRC_STAT_PUTS] += atomic_load_explicit(
			&c->shards[i].puts, memory_order_relaxed);
		values[GDRC_STAT_TAG_CHECKS] += atomic_load_explicit(
			&c->shards[i].tag_checks, memory_order_relaxed);
		tag_hits = atomic_load_explicit(&c->shards[i].tag_hits,
						memory_order_relaxed);
		values[GDRC_STAT_HITS] += tag_hits;
		values[GDRC_STAT_TAG_CHECKS] += tag_hits;
	}
	/* A fork child may find the lock held by a thread it lacks; it has
	 * no other thread to race with. */
	if (atomic_load_explicit(&c->forked, memory_order_relaxed)) {
		values[GDRC_STAT_REGIONS] = c->nregions;
	} else {
		pthread_rwlock_rdlock(&c->lock);
		values[GDRC_STAT_REGIONS] = c->nregions;
		pthread_rwlock_unlock(&c->lock);
	}
	values[GDRC_STAT_PINNED_BYTES] =
		atomic_load_explicit(&c->pinned_bytes, memory_order_relaxed);
	values[GDRC_STAT_PINNED_BYTES_MAX] = atomic_load_explicit(
		&c->pinned_bytes_max, memory_order_relaxed);
	values[GDRC_STAT_MEM_EVENTS] = atomic_load_explicit(
		&c->invq.events[GDRC_INVQ_HOST], memory_order_relaxed);
	values[GDRC_STAT_CUDA_EVENTS] = atomic_load_explicit(
		&c->invq.events[GDRC_INVQ_CUDA], memory_order_relaxed);
	values[GDRC_STAT_INVQ_MERGES] =
		atomic_load_explicit(&c->invq.merges, memory_order_relaxed);
}

/* GPU regions: segments in order, back to back, making up the
 * allocation range, which holds the key. */
static int check_segments(const struct gdrc_region *r)
{
	if (r->mem_type != GDRC_MEM_CUDA)
		return 0;
	if (!r->nseg || (r->nseg > 1) != !!r->segs ||
	    (r->tag_check >= REGION_TAG_SEGS) != (r->tag_check && r->segs) ||
	    r->start < r->alloc_start || r->end > r->alloc_end)
		return -1;
	for (unsigned i = 0; i < r->nseg; i++) {
		struct gdrc_seg g = region_seg(r, i);

		if (g.start >= g.end ||
		    g.start != (i ? region_seg(r, i - 1).end : r->alloc_start))
			return -1;
	}
	if (region_seg(r, r->nseg - 1).end != r->alloc_end ||
	    region_seg(r, 0).buffer_id != r->buffer_id)
		return -1;
	return 0;
}

/*
 * Codes: -1 tree unsound (itree check), -2 tree count differs from
 * nregions, -3 LRU links broken, -4 LRU not sorted by enq, -5 LRU length
 * differs from nregions, -6 a cached region is invalid or unreferenced,
 * -7 a cached GPU region's segments do not make up its allocation.
 * Caller holds the lock (either mode) or owns the cache.
 */
static int cache_check_locked(struct gdrc_cache *c)
{
	const struct gdrc_region *r, *prev = NULL;
	uint64_t n = 0;

	if (gdrc_itree_check(&c->tree))
		return -1;
	if (c->tree.count != c->nregions)
		return -2;
	for (r = c->lru_head; r; prev = r, r = r->lru_next) {
		uint64_t w = atomic_load_explicit(&r->word,
						  memory_order_relaxed);

		if (r->lru_prev != prev)
			return -3;
		if (prev && prev->enq > r->enq)
			return -4;
		if ((w & (REGION_INVALID | REGION_DEAD)) ||
		    !(w & REGION_REF_MASK))
			return -6;
		if (check_segments(r))
			return -7;
		n++;
	}
	if (prev != c->lru_tail)
		return -3;
	if (n != c->nregions)
		return -5;
	return 0;
}

int gdrc_cache_check(struct gdrc_cache *c)
{
	/* Called with the write lock held from check_or_die. */
	return cache_check_locked(c);
}

/* ====================================================================
 * Creation and destruction
 * ==================================================================== */

gdrc_status_t gdrc_cache_init(struct gdrc_cache *c,
			      const struct gdrc_cache_params *params)
{
	long page = sysconf(_SC_PAGESIZE);
	gdrc_status_t status;

	memset(c, 0, sizeof(*c));
	c->uid = atomic_fetch_add_explicit(&cache_uid_next, 1,
					   memory_order_relaxed);
	c->p = *params;
	atomic_init(&c->cache_host, params->cache_host);
	c->page_size = page > 0 ? (uintptr_t)page : 4096;
	atomic_flag_clear(&c->oom_warned);
	gdrc_invq_init(&c->invq);
	gdrc_itree_init(&c->tree);
	c->regions = (struct gdrc_pool){
		.size = sizeof(struct gdrc_region),
		.link = offsetof(struct gdrc_region, free_next),
		.init = region_init_free,
	};
	c->handles = (struct gdrc_pool){
		.size = sizeof(struct gdrc_handle),
		.link = offsetof(struct gdrc_handle, free_next),
	};
	if (pthread_rwlock_init(&c->lock, NULL))
		return GDRC_ERR_NO_MEMORY;
	if (pthread_mutex_init(&c->slab_lock, NULL)) {
		pthread_rwlock_destroy(&c->lock);
		return GDRC_ERR_NO_MEMORY;
	}
	/* The first chunk of each pool now, so that the first miss costs
	 * what later ones do (it cost twenty: a chunk's allocation and the
	 * first touch of its pages). */
	status = GDRC_ERR_NO_MEMORY;
	if (pool_grow(c, &c->regions) || pool_grow(c, &c->handles))
		goto err;
	c->registry_slot = -1;
	pthread_mutex_lock(&cache_registry_lock);
	for (int i = 0; i < GDRC_CACHES_MAX; i++) {
		if (!cache_registry[i]) {
			cache_registry[i] = c;
			c->registry_slot = i;
			break;
		}
	}
	pthread_mutex_unlock(&cache_registry_lock);
	status = GDRC_ERR_LIMIT;
	if (c->registry_slot < 0)
		goto err;
	return GDRC_OK;

err:
	pool_free_chunks(&c->regions);
	pool_free_chunks(&c->handles);
	pthread_mutex_destroy(&c->slab_lock);
	pthread_rwlock_destroy(&c->lock);
	return status;
}

/* After this, no thread touches c's handles from its remembered ones. */
static void registry_del(struct gdrc_cache *c)
{
	pthread_mutex_lock(&cache_registry_lock);
	cache_registry[c->registry_slot] = NULL;
	pthread_mutex_unlock(&cache_registry_lock);
}

static void free_chunks(struct gdrc_cache *c)
{
	for (void *ch = c->regions.chunks; ch; ch = *(void **)ch) {
		for (int i = 0; i < POOL_CHUNK; i++) {
			struct gdrc_region *r = pool_obj(&c->regions, ch, i);

			free(r->segs);
			free(r->kpins);
		}
	}
	pool_free_chunks(&c->regions);
	pool_free_chunks(&c->handles);
}

void gdrc_cache_cleanup(struct gdrc_cache *c)
{
	unsigned held = 0;

	registry_del(c);
	for (void *ch = c->regions.chunks; ch; ch = *(void **)ch) {
		for (int i = 0; i < POOL_CHUNK; i++) {
			struct gdrc_region *r = pool_obj(&c->regions, ch, i);
			uint64_t w = atomic_load(&r->word);

			if (w & REGION_DEAD)
				continue;
			if ((w & REGION_REF_MASK) > !(w & REGION_INVALID) ||
			    handles_busy(r))
				held++;
			region_release(c, r);
		}
	}
	if (held)
		gdrc_warn("%u registrations still held at fini; released",
			  held);
	free_chunks(c);
	pthread_mutex_destroy(&c->slab_lock);
	pthread_rwlock_destroy(&c->lock);
}

void gdrc_cache_cleanup_forked(struct gdrc_cache *c)
{
	/* The parent owns the registrations and possibly our locks; the
	 * registry lock was consistent at fork (taken by no other thread
	 * in the child). */
	registry_del(c);
	free_chunks(c);
}
