// SPDX-License-Identifier: BSD-3-Clause
/*
 * cache.c - the registration cache's front door: the registry of live
 * caches, creation and destruction, statistics, invariant checks, and
 * this module's part of the fork protocol.
 *
 * What the cache is (cache.h has the rules and the calls, types.h the
 * types, hit.h the fast path):
 *
 *   A region is one registration.  While cached it is in the index
 *   (index.c), on the clock (lru.c) and counted against the limits;
 *   its life, from publication to the release by whichever thread drops
 *   its last reference or pin, is region.c's.  What gdrc_mr_get hands
 *   out is a thread's handle on a region (handle.c) or, uncached, the
 *   region's own.
 *
 *   A get tries, in order: the fast path (hit.h: this thread's
 *   remembered and parked handles, no lock, no atomic
 *   read-modify-write), the index path (lookup.c: read lock), the miss
 *   path (miss.c: write lock, dropped around the registration).  Frees
 *   reach the cache as queued events that the next miss drains before
 *   it looks anything up (inval.c); a GPU hit also asks the driver
 *   (BUFFER_ID tags).
 *
 * Who calls whom, one way (each file's opening comment says more):
 *
 *   api*.c -> cache.c, lookup.c, miss.c, inval.c, handle.c (put, the
 *             parked table), cache.h, hit.h
 *   miss.c -> lookup.c, inval.c, lru.c, region.c, handle.c,
 *             index.c (prepare), index_sum.c (the plan's walk),
 *             arena.c (full)
 *   lookup.c -> inval.c, index.c, handle.c, region.c
 *   inval.c -> index_sum.c (overlap), region.c, lru.c (a collected
 *             region off the list)
 *   lru.c -> region.c, handle.c (busy), arena.c (the hand's round)
 *   region.c -> index.c, lru.c (list, unlist, ghosts), handle.c
 *             (this thread's handle on a removed region), arena.c, pool.c
 *   handle.c -> region.c (drop), pool.c, cache.c (a foreign cache's
 *             handle, through the registry), shard.c (a first shard)
 *   shard.c -> handle.c (thread exit)
 *   index.c -> index_sum.c (summaries), itree/
 *   index_sum.c -> itree/ (wide regions)
 *
 * Locks, in the order they nest:
 *   cache_registry_lock  here: the registry (a thread's remembered
 *                        handles may belong to a destroyed cache; only
 *                        code holding this lock and finding the uid may
 *                        touch them)
 *   cache->lock          rwlock: index, clock, counts, ghosts, inflight
 *   cache->slab_lock     arena.c, pool.c: the free lists, the arena's
 *                        growth, the pool's chunks
 *   invq.lock            invq.c: spinlock, innermost, never held across
 *                        a call
 *   shard_lock           shard.c: a leaf, taken alone
 * No allocation, backend call, system call or deregistration happens
 * under cache->lock.
 *
 * Callers: the API layer (api*.c) only.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_int.h"
#include "log/log.h"

__thread struct gdrc_tls gdrc_tls_cur
	__attribute__((tls_model("initial-exec"))) = { .shard = -1 };

static _Atomic uint64_t cache_uid_next = 1;

/* Removal stamps (cache.h): one counter for every cache of the process,
 * so that no two caches, nor two moments of one, show the same value;
 * 64 bits never wrap.  0 is never one (a thread's "none"). */
static _Atomic uint64_t removal_stamp_next = 1;

uint64_t gdrc_removal_stamp_new(void)
{
	return atomic_fetch_add_explicit(&removal_stamp_next, 1,
					 memory_order_relaxed);
}

/* Debug builds: cache read locks this thread holds (cache_int.h). */
__thread unsigned gdrc_rdlocks_held
	__attribute__((tls_model("initial-exec")));

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
	gdrc_tls_fork_child();
}

/* Under cache_registry_lock.  @return the live cache with uid, or NULL. */
static struct gdrc_cache *registry_find(uint64_t uid)
{
	for (int i = 0; i < GDRC_CACHES_MAX; i++)
		if (cache_registry[i] && cache_registry[i]->uid == uid)
			return cache_registry[i];
	return NULL;
}

/* A thread lets go of its handle h on the cache with uid, which may have
 * been destroyed since: only while that cache surely lives. */
void gdrc_cache_retire_foreign(uint64_t uid, struct gdrc_handle *h)
{
	struct gdrc_cache *owner;

	pthread_mutex_lock(&cache_registry_lock);
	owner = registry_find(uid);
	if (owner && !atomic_load_explicit(&owner->forked,
					   memory_order_relaxed))
		gdrc_handle_retire(owner, h, NULL);
	pthread_mutex_unlock(&cache_registry_lock);
}

/* ====================================================================
 * The write lock's exit: checks, then releases deferred under it
 * ==================================================================== */

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

void gdrc_cache_unlock_release(struct gdrc_cache *c, struct gdrc_defer *d)
{
	gdrc_assert_wrlocked(c);
	check_or_die(c);
	gdrc_cache_unlock(c);
	gdrc_defer_release(c, d);
}

/* ====================================================================
 * Statistics and checks
 * ==================================================================== */

gdrc_status_t gdrc_cache_release_unused(struct gdrc_cache *c, int device,
					uint64_t *released_p)
{
	struct gdrc_defer d = { 0 };
	unsigned n;

	if (atomic_load_explicit(&c->forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	gdrc_cache_wrlock(c);
	gdrc_drain(c, &d);
	n = gdrc_evict_all_unused(c, device, &d);
	gdrc_cache_unlock_release(c, &d);
	gdrc_tls_drop_invalid(c);
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
		return device >= 0 ? c->p.gpu_max_regions :
				     c->p.host_max_regions;
	}
	return 0;
}

uint64_t gdrc_cache_dev_stat(struct gdrc_cache *c, int device, int stat)
{
	uint64_t sum = 0;

	if (device != GDRC_DEVICE_ALL)
		return dev_value(c, gdrc_dev_acct(c, device), device, stat);
	if (stat == GDRC_DEVICE_STAT_MAX_BYTES ||
	    stat == GDRC_DEVICE_STAT_MAX_REGIONS)
		return GDRC_LIMIT_NONE;
	for (int i = 0; i < GDRC_DEV_SLOTS; i++)
		sum += dev_value(c, &c->dev[i], i - 1, stat);
	return sum;
}

void gdrc_cache_stat_add(struct gdrc_cache *c, int stat, uint64_t n)
{
	gdrc_stat_add(c, stat, n);
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
		gdrc_cache_rdlock(c);
		values[GDRC_STAT_REGIONS] = c->nregions;
		gdrc_cache_unlock(c);
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
	const struct gdrc_region_ext *x = gdrc_region_ext(r);

	if (r->mem_type != GDRC_MEM_CUDA)
		return 0;
	if (x == &gdrc_region_ext_none || !x->nseg ||
	    (x->nseg > 1) != !!x->segs ||
	    (r->tag_check >= REGION_TAG_SEGS) != (r->tag_check && x->segs) ||
	    r->start < x->alloc_start || r->end > x->alloc_end ||
	    r->kern != (x->kslot >= 0) || (x->kmore && !r->kern))
		return -1;
	for (unsigned i = 0; i < x->nseg; i++) {
		struct gdrc_seg g = gdrc_region_seg(r, i);

		if (g.start >= g.end ||
		    g.start != (i ? gdrc_region_seg(r, i - 1).end :
				    x->alloc_start))
			return -1;
	}
	if (gdrc_region_seg(r, x->nseg - 1).end != x->alloc_end ||
	    gdrc_region_seg(r, 0).buffer_id != x->buffer_id)
		return -1;
	return 0;
}

/* gdrc_cache_check's look at a region of the arena: a cached GPU
 * region's segments. */
static void check_segments_fn(struct gdrc_region *r, void *arg)
{
	int *ret = arg;

	if (r->listed && check_segments(r))
		*ret = -7;
}

/*
 * Codes: -1, -2 the index (index.c), -5 and -6 the clock (lru.c), -7 a
 * cached GPU region's segments do not make up its allocation.  Caller
 * holds the lock (either mode: check_or_die holds it for writing) or
 * owns the cache.
 */
int gdrc_cache_check(struct gdrc_cache *c)
{
	int ret = gdrc_index_check(c);

	if (!ret)
		ret = gdrc_lru_check(c);
	if (!ret) {
		gdrc_slab_lock(c);
		gdrc_arena_each(&c->regions, check_segments_fn, &ret);
		gdrc_slab_unlock(c);
	}
	return ret;
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
	atomic_init(&c->removal_stamp, gdrc_removal_stamp_new());
	c->p = *params;
	atomic_init(&c->cache_host, params->cache_host);
	c->page_size = page > 0 ? (uintptr_t)page : 4096;
	atomic_flag_clear(&c->oom_warned);
	gdrc_invq_init(&c->invq);
	/* The arena first: the index names regions by their place in it.
	 * Made now, so that the first miss costs what later ones do. */
	if (gdrc_arena_init(&c->regions, params->max_regions))
		return GDRC_ERR_NO_MEMORY;
	if (gdrc_index_init(c)) {
		gdrc_arena_destroy(&c->regions);
		return GDRC_ERR_NO_MEMORY;
	}
	c->handles = (struct gdrc_pool){
		.size = sizeof(struct gdrc_handle),
		.link = offsetof(struct gdrc_handle, free_next),
	};
	if (pthread_rwlock_init(&c->lock, NULL)) {
		gdrc_index_cleanup(c);
		gdrc_arena_destroy(&c->regions);
		return GDRC_ERR_NO_MEMORY;
	}
	if (pthread_mutex_init(&c->slab_lock, NULL)) {
		pthread_rwlock_destroy(&c->lock);
		gdrc_index_cleanup(c);
		gdrc_arena_destroy(&c->regions);
		return GDRC_ERR_NO_MEMORY;
	}
	/* The handle pool's first chunk now, as the arena (a first miss
	 * cost twenty: a chunk's allocation and the first touch of its
	 * pages). */
	status = GDRC_ERR_NO_MEMORY;
	if (gdrc_pool_grow(c, &c->handles))
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
	gdrc_arena_destroy(&c->regions);
	gdrc_pool_free_chunks(&c->handles);
	gdrc_index_cleanup(c);
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

static void free_exts(struct gdrc_region *r, void *arg)
{
	(void)arg;
	gdrc_region_ext_free(r);
}

static void free_chunks(struct gdrc_cache *c)
{
	gdrc_arena_each(&c->regions, free_exts, NULL);
	gdrc_arena_destroy(&c->regions);
	gdrc_pool_free_chunks(&c->handles);
	gdrc_index_cleanup(c);
}

struct cleanup {
	struct gdrc_cache *c;
	unsigned held;
};

/* Release a region not yet released, counting those still in use. */
static void cleanup_one(struct gdrc_region *r, void *arg)
{
	struct cleanup *cl = arg;
	uint64_t w = atomic_load(&r->word);

	if (w & REGION_DEAD)
		return;
	if ((w & REGION_REF_MASK) || gdrc_region_held_aside(r))
		cl->held++;
	gdrc_region_release(cl->c, r);
}

void gdrc_cache_cleanup(struct gdrc_cache *c)
{
	struct cleanup cl = { .c = c };
	unsigned held;

	registry_del(c);
	gdrc_arena_each(&c->regions, cleanup_one, &cl);
	gdrc_cells_forget(c);
	held = cl.held;
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
	gdrc_cells_forget(c);
	free_chunks(c);
}
