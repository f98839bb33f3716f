/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cache_int.h - what the files of lib/cache/ share among themselves, and
 * nobody outside the folder sees.
 *
 * One file per concern (the rule of who calls whom is at the top of
 * cache.c); each group below is one file's, in the order the rule goes.
 * The types they share are types.h, the inline hit path hit.h, both
 * included through cache.h.
 *
 *   arena.c   where regions live: hit lines and cold records, by index
 *   pool.c    fixed-size objects (handles) carved from chunks freed with
 *             the cache
 *   region.c  a region's life: memory, publication, references, release,
 *             membership (index, clock, counts), what memory it was made for
 *   lru.c     recency, limits and eviction; the miss-cause ghosts
 *   index.c   the lookup structure: which regions cover or overlap a range
 *   handle.c  per-thread handles, remembered entries, parked tables
 *   shard.c   per-thread stats shards, the thread-exit hook
 *   inval.c   removal of what was freed: queued events, explicit calls
 *   lookup.c  the index path of a hit
 *   miss.c    the miss path: plan, evict, register, insert
 *   cache.c   the front door: registry, creation, stats, checks, fork
 *
 * Locks (see cache.h for the order):
 *   cache->lock       rwlock: the index, the clock, counts, ghosts,
 *                     inflight, reservations.  Taken through
 *                     gdrc_cache_wrlock/_rdlock/_unlock, which in debug
 *                     builds (no NDEBUG) note the holder, so that a
 *                     function that needs the lock can assert it.
 *   cache->slab_lock  mutex: the arena's and the pool's free lists, the
 *                     arena's growth, the pool's chunk list.
 *   shard_lock        (shard.c) the bitmap of owned stats shards.
 *   cache_registry_lock (cache.c) the registry of live caches.
 */
#ifndef GDRC_CACHE_INT_H
#define GDRC_CACHE_INT_H

#include <assert.h>

#include "cache.h"

#ifdef NDEBUG
#define GDRC_LOCKDEP 0
#else
#define GDRC_LOCKDEP 1
#endif

/* Debug builds: cache read locks this thread holds (any cache). */
extern __thread unsigned gdrc_rdlocks_held
	__attribute__((tls_model("initial-exec")));

static inline void gdrc_cache_wrlock(struct gdrc_cache *c)
{
	pthread_rwlock_wrlock(&c->lock);
	if (GDRC_LOCKDEP)
		c->lock_writer = &gdrc_tls_cur;
}

static inline void gdrc_cache_rdlock(struct gdrc_cache *c)
{
	pthread_rwlock_rdlock(&c->lock);
	if (GDRC_LOCKDEP)
		gdrc_rdlocks_held++;
}

static inline void gdrc_cache_unlock(struct gdrc_cache *c)
{
	if (GDRC_LOCKDEP) {
		if (c->lock_writer == &gdrc_tls_cur)
			c->lock_writer = NULL;
		else
			gdrc_rdlocks_held--;
	}
	pthread_rwlock_unlock(&c->lock);
}

/* cache->lock held for writing by this thread. */
#define gdrc_assert_wrlocked(c) \
	assert(!GDRC_LOCKDEP || (c)->lock_writer == &gdrc_tls_cur)
/* cache->lock held in either mode (a read lock: of some cache). */
#define gdrc_assert_locked(c)                                         \
	assert(!GDRC_LOCKDEP || (c)->lock_writer == &gdrc_tls_cur || \
	       gdrc_rdlocks_held)
/* cache->slab_lock held by this thread. */
#define gdrc_assert_slab_locked(c) \
	assert(!GDRC_LOCKDEP || (c)->slab_owner == &gdrc_tls_cur)

/* Work that must wait until cache->lock is dropped. */
struct gdrc_defer {
	struct gdrc_region *dead; /* regions to release, linked by link */
};

/* A registration in progress (on cache->inflight, under cache->lock). */
struct gdrc_inflight {
	struct gdrc_inflight *next;
	uintptr_t start;
	uintptr_t end;
	uintptr_t alloc_start; /* its CUDA allocation, or 0, 0 */
	uintptr_t alloc_end;
	int stale; /* an unmap or free overlapped it while registering */
};

static inline void gdrc_stat_add(struct gdrc_cache *c, int stat, uint64_t v)
{
	atomic_fetch_add_explicit(&c->stat[stat], v, memory_order_relaxed);
}

/* How a lookup of [start, ...) should hold a region it finds:
 * REGION_PIN_ONE or 1 (a direct reference).  Compares r's address only
 * (it is not held yet, and may be being reused). */
typedef uint64_t (*gdrc_hold_fn)(struct gdrc_cache *c,
				 const struct gdrc_region *r, uintptr_t start);

/* Called for each region a walk finds; nonzero stops the walk. */
typedef int (*gdrc_region_fn)(struct gdrc_region *r, void *arg);

/* ---- pool.c ---- */

int gdrc_pool_grow(struct gdrc_cache *c, struct gdrc_pool *pool);
void *gdrc_pool_get(struct gdrc_cache *c, struct gdrc_pool *pool);
void gdrc_pool_put_locked(struct gdrc_cache *c, struct gdrc_pool *pool,
			  void *obj);
/* fn(obj, arg) for every object ever handed out (in use or freed). */
void gdrc_pool_each(struct gdrc_pool *pool, void (*fn)(void *obj, void *arg),
		    void *arg);
void gdrc_pool_free_chunks(struct gdrc_pool *pool);
void gdrc_slab_lock(struct gdrc_cache *c);
void gdrc_slab_unlock(struct gdrc_cache *c);

/* ---- arena.c ---- */

/* Reserve room for a cache of at most max_regions cached registrations
 * (arena.c says how many may be alive).  @return 0, or -1 no memory. */
int gdrc_arena_init(struct gdrc_arena *a, uint64_t max_regions);
void gdrc_arena_destroy(struct gdrc_arena *a);
/* A free region (the one freed longest ago) or a fresh one (zero but
 * for gdrc_region_init_free's fields); NULL when the arena is full or
 * out of memory.  Takes slab_lock. */
struct gdrc_region *gdrc_arena_get(struct gdrc_cache *c);
/* Is every region of the arena alive (a get found none)?  Takes
 * slab_lock. */
int gdrc_arena_full(struct gdrc_cache *c);
/* Under slab_lock: give r back, last in line for reuse. */
void gdrc_arena_put_locked(struct gdrc_cache *c, struct gdrc_region *r);
/* fn(r, arg) for every region ever handed out (in use or freed). */
void gdrc_arena_each(struct gdrc_arena *a,
		     void (*fn)(struct gdrc_region *r, void *arg), void *arg);

/* Regions handed out so far, free ones included: the clock hand goes
 * round [0, this). */
static inline uint32_t gdrc_arena_made(const struct gdrc_arena *a)
{
	return atomic_load_explicit(&a->made, memory_order_acquire);
}

/* The region at arena index i. */
static inline struct gdrc_region *gdrc_arena_at(const struct gdrc_arena *a,
					       uint32_t i)
{
	return &a->hits[i];
}

/* r's index in its cache's arena (the page hash names regions so). */
static inline uint32_t gdrc_region_index(const struct gdrc_cache *c,
					 const struct gdrc_region *r)
{
	return (uint32_t)(r - c->regions.hits);
}

/* A list link naming r (or none), and the region a link names. */
static inline uint32_t gdrc_region_link_to(const struct gdrc_cache *c,
					   const struct gdrc_region *r)
{
	return r ? gdrc_region_index(c, r) + 1 : 0;
}

static inline struct gdrc_region *
gdrc_region_linked(const struct gdrc_cache *c, uint32_t link)
{
	return link ? &c->regions.hits[link - 1] : NULL;
}

/* ---- region.c ---- */

void gdrc_region_init_free(struct gdrc_region *r);
struct gdrc_region *gdrc_region_alloc(struct gdrc_cache *c);
void gdrc_region_free(struct gdrc_cache *c, struct gdrc_region *r);
void gdrc_region_ext_free(struct gdrc_region *r);
struct gdrc_dev_acct *gdrc_dev_acct(struct gdrc_cache *c, int device);
void gdrc_region_publish(struct gdrc_cache *c, struct gdrc_region *r);
void gdrc_kern_give_back(struct gdrc_cache *c, int slot, int pinned,
			 uint64_t handle, uint32_t kmore,
			 const struct gdrc_kpin *kpins);
void gdrc_region_release(struct gdrc_cache *c, struct gdrc_region *r);
void gdrc_region_unpin_defer(struct gdrc_cache *c, struct gdrc_region *r,
			     struct gdrc_defer *d);
void gdrc_region_unpin(struct gdrc_cache *c, struct gdrc_region *r);
int gdrc_region_unref(struct gdrc_cache *c, struct gdrc_region *r);
/* Drop what a lookup holds (hold: REGION_PIN_ONE or 1). */
void gdrc_region_let_go(struct gdrc_cache *c, struct gdrc_region *r,
			uint64_t hold);
void gdrc_region_pin_to_ref(struct gdrc_region *r);
void gdrc_defer_release(struct gdrc_cache *c, struct gdrc_defer *d);
int gdrc_region_insert(struct gdrc_cache *c, struct gdrc_region *r,
			void **spare_p);
void gdrc_region_remove(struct gdrc_cache *c, struct gdrc_region *r,
			int ghost, struct gdrc_defer *d);
void gdrc_region_take_out(struct gdrc_cache *c, struct gdrc_region *r,
			  int ghost, struct gdrc_defer *d);
struct gdrc_seg gdrc_region_seg(const struct gdrc_region *r, unsigned i);
struct gdrc_seg gdrc_req_seg(const struct gdrc_cache_req *q, unsigned i);
unsigned gdrc_req_nseg(const struct gdrc_cache_req *q);
int gdrc_same_memory(const struct gdrc_region *r,
		     const struct gdrc_cache_req *q);
int gdrc_same_segments(const struct gdrc_region *r,
		       const struct gdrc_cache_req *q);

/* ---- lru.c ---- */

void gdrc_lru_list(struct gdrc_cache *c, struct gdrc_region *r);
void gdrc_lru_unlist(struct gdrc_cache *c, struct gdrc_region *r);
void gdrc_ghost_add(struct gdrc_cache *c, struct gdrc_region *r, int cause);
int gdrc_ghost_cause(struct gdrc_cache *c, uintptr_t start, uintptr_t end);
int gdrc_evict(struct gdrc_cache *c, uint64_t regions, uint64_t bytes,
	       struct gdrc_defer *d);
int gdrc_evict_device(struct gdrc_cache *c, int device, uint64_t bytes,
		      struct gdrc_defer *d);
void gdrc_dev_reserve(struct gdrc_cache *c, int device, uint64_t bytes,
		      int sign);
unsigned gdrc_evict_all_unused(struct gdrc_cache *c, int device,
			       struct gdrc_defer *d);
int gdrc_lru_check(struct gdrc_cache *c);

/* ---- index.c ---- */

gdrc_status_t gdrc_index_init(struct gdrc_cache *c);
void gdrc_index_cleanup(struct gdrc_cache *c);
/* Outside the lock: larger tables if the next insertion may not fit
 * (for gdrc_index_insert), else NULL. */
void *gdrc_index_prepare(const struct gdrc_cache *c);
/* Free what gdrc_index_prepare made (NULL: nothing). */
void gdrc_index_table_free(void *table);
/* *spare_p (from gdrc_index_prepare, or NULL) has what replaces a full
 * table; the caller frees it, and what was replaced, after dropping the
 * lock (gdrc_index_table_free).  @return 0, or -1: no room (nothing
 * changed). */
int gdrc_index_insert(struct gdrc_cache *c, struct gdrc_region *r,
		      void **spare_p);
/* Is [start, end) too wide for the page hash (its region then needs an
 * ext, whose node puts it in the tree)? */
int gdrc_index_wide(uintptr_t start, uintptr_t end);
void gdrc_index_remove(struct gdrc_cache *c, struct gdrc_region *r);
/* A cell hit's look (without the lock): the region whose one-page,
 * plain entry is the first of start's page, if it has the rights; tk
 * says where, for gdrc_index_ticket_valid after the cell is stored.
 * NULL: none such; *absent then says that no entry of the page was
 * seen, no other level is in use and the tree is empty (a miss, for all
 * the page hash can tell: gdrc_index_find_fast's *absent). */
struct gdrc_ix_ticket {
	const void *table; /* the page hash it was read from (index.c's) */
	void *bucket;      /* where the entry was read */
	uint16_t seq;      /* its sequence, as read before the entry */
	unsigned way;
};
struct gdrc_region *gdrc_index_find_plain(struct gdrc_cache *c,
					  uintptr_t start, uintptr_t end,
					  uint32_t access,
					  struct gdrc_ix_ticket *tk,
					  int *absent);
/* Is the page hash still c's, and the bucket as it was (sequentially
 * consistent reads: cell.c)?  Then the hit is marked used in it.
 * @return 1 yes. */
int gdrc_index_ticket_valid(const struct gdrc_cache *c,
			    const struct gdrc_ix_ticket *tk);
/* Was r hit through a cell since the clock hand last asked (the mark
 * cleared)?  cache->lock held for writing. */
int gdrc_index_used_take(struct gdrc_cache *c, const struct gdrc_region *r);

/* ---- cell.c ---- */
struct gdrc_cell *gdrc_cell_take(struct gdrc_cache *c, struct gdrc_region *r);
void gdrc_cell_drop(struct gdrc_cache *c, struct gdrc_cell *cell);
void gdrc_cells_convert(struct gdrc_cache *c, struct gdrc_region *r);
int gdrc_cells_hold(const struct gdrc_region *r);
void gdrc_cells_forget(struct gdrc_cache *c);
void gdrc_cells_release(void);
void gdrc_cells_fork_child(void);

/* No lock: a cached region covering [start, end) with access, held as
 * hold_of says (*hold_p), or NULL: none, or not found this way (ask
 * again under the lock), unless *absent says that no entry of the
 * request's granules was seen at any level and the tree is empty (a
 * miss, for all it could tell: the miss path's own search under the
 * write lock is what is exact then). */
struct gdrc_region *gdrc_index_find_fast(struct gdrc_cache *c,
					 uintptr_t start, uintptr_t end,
					 uint32_t access, gdrc_hold_fn hold_of,
					 uint64_t *hold_p, int *absent);
/* fn for every region whose key overlaps [start, end), once each, in no
 * particular order; fn must not change the index.  @return 0, or fn's
 * nonzero value that stopped the walk. */
int gdrc_index_overlap(const struct gdrc_cache *c, uintptr_t start,
		       uintptr_t end, gdrc_region_fn fn, void *arg);
/* A region whose key covers [start, end) for which fn (NULL: any)
 * returns nonzero, or NULL. */
struct gdrc_region *gdrc_index_find_cover(const struct gdrc_cache *c,
					  uintptr_t start, uintptr_t end,
					  gdrc_region_fn fn, void *arg);
/* 0 if sound and holding nregions regions, else negative. */
int gdrc_index_check(const struct gdrc_cache *c);

/* ---- handle.c ---- */

/* This thread's stats shard, given on its first call (shard.c). */
static inline int gdrc_tls_shard(void)
{
	int shard = gdrc_tls_cur.shard;

	return gdrc_likely(shard >= 0) ? shard : gdrc_cache_tls_shard();
}

/* cache.c: a removal stamp no cache has had (cache.h, removal_stamp). */
uint64_t gdrc_removal_stamp_new(void);

/* May this thread keep handles?  Not without the exit hook that lets
 * them go (no_handles), nor in the shared last shard: the hit path
 * counts an entry's hits and puts with plain stores (e->stats). */
static inline int gdrc_tls_keeps_handles(const struct gdrc_tls *t)
{
	return !t->no_handles && t->shard != GDRC_SHARDS;
}

/* A hit served through the index, counted in this thread's shard. */
static inline void gdrc_tls_count_hit(struct gdrc_cache *c)
{
	int shard = gdrc_tls_shard();

	gdrc_shard_inc(&c->shards[shard].hits, shard);
}

void gdrc_tls_drop_region_locked(struct gdrc_cache *c, struct gdrc_region *r,
				 struct gdrc_defer *d);
void gdrc_tls_sweep(struct gdrc_cache *c);

/* Let go of this thread's handles on c's regions that left the cache
 * (gdrc_tls_sweep), unless c removed none since its last look: inline,
 * so that an index hit that finds nothing to look at makes no call. */
static inline void gdrc_tls_drop_invalid(struct gdrc_cache *c)
{
	const struct gdrc_tls *t = &gdrc_tls_cur;

	if (t->swept == atomic_load_explicit(&c->removal_stamp,
					     memory_order_acquire))
		return;
	gdrc_tls_sweep(c);
}
void gdrc_tls_forget(const struct gdrc_cache *c);
/* Thread exit: let go of every remembered and parked handle. */
void gdrc_tls_drop_all(void);

void gdrc_handle_retire(struct gdrc_cache *c, struct gdrc_handle *h,
			struct gdrc_defer *d);
int gdrc_handles_busy(struct gdrc_region *r);
int gdrc_handles_used(struct gdrc_region *r);

/* Is r held where its word does not count it: a live handle with a get
 * outstanding, or a hazard cell?  A hint (cache.h, eviction). */
static inline int gdrc_region_held_aside(struct gdrc_region *r)
{
	return gdrc_handles_busy(r) || gdrc_cells_hold(r);
}

struct gdrc_mr *gdrc_serve(struct gdrc_cache *c, struct gdrc_region *r);
struct gdrc_mr *gdrc_serve_direct(struct gdrc_region *r);
uint64_t gdrc_hold_for(struct gdrc_cache *c, const struct gdrc_region *r,
		       uintptr_t start);
/* Would gdrc_hold_for hold r directly, for a get none of this thread's
 * four entries covers (so none holds r: their rights are r's, their
 * range its key)?  The cell hit's question, without the four. */
int gdrc_hold_direct(struct gdrc_cache *c, const struct gdrc_region *r,
		     uintptr_t start);
void gdrc_hit_seen(const struct gdrc_region *r, uintptr_t start);
struct gdrc_mr *gdrc_serve_hit(struct gdrc_cache *c, struct gdrc_region *r,
			       uint64_t hold);

/* ---- shard.c ---- */

void gdrc_tls_fork_child(void);

/* ---- inval.c ---- */

/* Walks may not change the index: collect, then remove. */
struct gdrc_collect {
	struct gdrc_region *list; /* off the clock, linked by link */
	uintptr_t start;      /* subsume only: the new region's range */
	uintptr_t end;
	uint32_t access;
	int subsume;          /* collect only regions inside [start, end) */
	int alloc_match;      /* collect only regions whose allocation
			       * overlaps [start, end) */
	const struct gdrc_cache_req *req; /* subsume, stale: the memory */
	const struct gdrc_cache *c;       /* kstale: the cache */
};

int gdrc_collect_fn(struct gdrc_region *r, void *arg);
void gdrc_collect_push(struct gdrc_collect *col, struct gdrc_region *r);
unsigned gdrc_remove_collected(struct gdrc_cache *c, struct gdrc_collect *col,
			       int ghost, struct gdrc_defer *d);
/* Remember [start, end) as a run of private mappings (c->vmemo, under
 * the write lock), in place of the entry replaced next; an empty one is
 * nothing to remember. */
static inline void gdrc_vmemo_add(struct gdrc_cache *c, uintptr_t start,
				  uintptr_t end)
{
	if (start < end)
		c->vmemo[c->vmemo_next++ % GDRC_VMEMO] =
			(struct gdrc_vmemo){ .start = start, .end = end };
}

void gdrc_invalidate_locked(struct gdrc_cache *c, uintptr_t start,
			    uintptr_t end, int source, struct gdrc_defer *d);
void gdrc_drain(struct gdrc_cache *c, struct gdrc_defer *d);
void gdrc_invalidate_region(struct gdrc_cache *c, struct gdrc_region *r,
			    int source);

/* ---- lookup.c ---- */

struct gdrc_cover_arg {
	const struct gdrc_cache *c;
	uint32_t access;
	const struct gdrc_cache_req *req; /* the memory a region must have
					   * been made for (same_memory);
					   * NULL accepts any */
};

struct gdrc_region *gdrc_find_cover(struct gdrc_cache *c, uintptr_t start,
				    uintptr_t end,
				    const struct gdrc_cover_arg *a);
void gdrc_hit(struct gdrc_region *r, uint64_t hold);
struct gdrc_mr *gdrc_hit_done(struct gdrc_cache *c, struct gdrc_region *r,
			      uint64_t hold);

/* ---- cache.c ---- */

void gdrc_cache_unlock_release(struct gdrc_cache *c, struct gdrc_defer *d);
void gdrc_cache_retire_foreign(uint64_t uid, struct gdrc_handle *h);

#endif /* GDRC_CACHE_INT_H */
