/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cache.h - the registration cache: regions, handles, lookup, reference
 * counts, eviction and invalidation.
 *
 * Regions (struct gdrc_region, one per registration) live in the index
 * (index.c; overlaps allowed), and on the replacement's clock (lru.c),
 * both under the cache's rwlock.  What gdrc_mr_get hands out (struct
 * gdrc_mr, the public opaque type) is either a region's own handle (a
 * direct reference on the region) or a thread's handle on it:
 *
 *   fast path   each thread remembers its handles on its last
 *               GDRC_TLS_ENTRIES regions (range, access, handle).  A get
 *               that falls in one checks that the region is still valid
 *               and counts the get in the handle, in memory only this
 *               thread writes; a put by the same thread undoes it.  No
 *               lock, no atomic read-modify-write, no shared cache line
 *               written: threads hitting one region do not contend.
 *   index path  read lock, index lookup (lookup.c), then a handle for this
 *               thread (reused if it has one).
 *   miss path   write lock to drain queued invalidations, decide what to
 *               register and evict, then the lock is dropped while the
 *               backend registers, and retaken to insert.
 *
 * Region word.  One 64-bit atomic: in the low 32 bits the direct
 * references handed out (r->self: uncached gets, index hits that do not
 * repeat), which a put gives back; REGION_INVALID (not findable: out of
 * the index, or never in it); REGION_DEAD (released); from bit 40, pins:
 * one per live handle, the index's own while the region is cached, and
 * those of lookups and misses in progress.  Nothing but a put of r->self
 * takes a reference away, and no put takes a pin, so a put more than
 * was got finds the references at zero, however it races (a misuse,
 * refused), and never takes what a lookup holds.  A lookup that will
 * serve a direct reference takes the reference itself (one
 * compare-and-swap), one that will serve a handle a pin, which becomes
 * the handle's; a pin may become a reference (a handle could not be
 * made), never the other way.  Whoever sees references and pins reach
 * zero on an INVALID region and wins the CAS that adds DEAD releases it:
 * exactly one thread does.  Region memory is a per-cache slab freed only
 * with the cache.
 *
 * Handles.  A handle pins its region while it lives.  Its owner counts
 * gets and its own puts in "held" (a plain store, read by others only as
 * a hint); any other put, and any put after the owner let go of the
 * handle, adds one to the atomic "remote".  The owner lets go (retires)
 * when it replaces the entry, finds the region invalidated, or exits: it
 * adds HANDLE_RETIRED - held to remote in one atomic add.  From then on
 * remote counts up to HANDLE_RETIRED as the last outstanding gets are
 * put, and the one add, the owner's or a putter's, whose result is
 * exactly HANDLE_RETIRED releases the handle, dropping the pin: exactly
 * one, since before the retire remote is at most held, far below
 * HANDLE_RETIRED, and after it remote only rises.  (Deciding by a
 * store and a load on each side instead let both sides see the other;
 * the loser's late release then hit the handle's next life.)  Handles of
 * a region hang off it (a list only ever pushed, freed with the region)
 * and are reused once released.
 *
 * Misuse.  Every mr carries a magic word while it lives; a put checks
 * it, its cache, the handle's state and its counts (no more puts than
 * gets: gdrc_cache_put_fast, handle_put_remote, region_put_direct) and
 * names what it found to the API layer (enum gdrc_put_fault) without
 * changing anything.  Pools hand objects out first in, first out, so a
 * stale pointer finds a dead object for as long as possible.
 *
 * Eviction treats a region as unused when it has no direct reference,
 * no live handle has a get outstanding (held - remote) and no hazard
 * cell names it (cell.c): hints read without stopping the owner (a get
 * racing with the eviction still gets a registration that stays valid
 * until its put).  An evicted
 * or invalidated region pinned by another thread's idle handle stays
 * registered until that thread's next call on the cache or its exit.
 *
 * Invalidation.  Host hooks post ranges to the cache's invq (hook-safe);
 * the queue's pending flag sends every get to the miss path, which
 * drains the queue under the write lock before looking anything up.
 * pending is cleared only after the ranges were applied.
 *
 * Lock order: cache_registry_lock, then cache->lock, then
 * cache->slab_lock; the invq spinlock is innermost and never held across
 * a call.  No backend call, allocation or deregistration happens under
 * cache->lock.
 *
 * Depends on itree/, invq, config values (passed in), log/ and pin.h.
 *
 * Where things are.  This header is what the API layer (api*.c) and req/
 * use: the parameters a cache is made with, the request a miss
 * registers, struct gdrc_cache, and the calls.  The objects a cache is
 * made of (regions, handles, a thread's entries and parked table, the
 * pools, the index) are in types.h; the inline hit path (the fast get,
 * the parked get, the reget, the fast put, and the checks they make) is
 * hit.h, included at the end of this one.  What the folder's files share
 * and nobody else sees is cache_int.h.
 */
#ifndef GDRC_CACHE_H
#define GDRC_CACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <gdrcache.h>

#include "cache/invq.h"
#include "cache/types.h"
#include "gdrc_int.h"
#include "pin/pin.h"

/*
 * What a put found wrong (gdrc_cache_put_slow); the API layer reports it
 * under the misuse policy.  Nothing was changed.
 */
enum gdrc_put_fault {
	GDRC_PUT_OK = 0,
	GDRC_PUT_NOT_MR,     /* no live registration or handle there */
	GDRC_PUT_OTHER_CTX,  /* a registration of another context */
	GDRC_PUT_RELEASED,   /* a handle already let go of: a double put */
	GDRC_PUT_TOO_MANY,   /* more puts than gets: a double put */
};

/*
 * A monitor that watches cached host memory range by range (docs/hooks.md,
 * "Event sources"): each cached host range is subscribed before it is
 * registered and unsubscribed when its registration goes.  Its events
 * reach the cache one of two ways: a generation word that moves (the
 * kernel channel: kgen[slot], checked by every hit), or
 * gdrc_cache_post_event, as the hooks' do (userfaultfd: no slot).
 * Monitors that watch all of memory (the glibc hooks, UCX's UCM) need no
 * subscription and have no ops here.  Both calls are system calls, made
 * without any cache lock.
 */
struct gdrc_watch_ops {
	const char *name;
	/* Watch [start, start + len).  @return 0 watched, with *slot_p the
	 * word that moves when it goes, or -1 if its events come through
	 * the queue; else not watched (the registration is handed out
	 * uncached unless the hooks watch everything). */
	int (*subscribe)(void *arg, uintptr_t start, size_t len, int *slot_p,
			 uint64_t *handle_p);
	/* Stop watching what subscribe returned with a slot (NULL: a
	 * watch without one is never undone: it ends with the mapping). */
	void (*unsubscribe)(void *arg, uint64_t handle);
};

struct gdrc_cache_params {
	uint64_t max_regions;          /* GDRC_LIMIT_NONE: none */
	uint64_t max_bytes;            /* GDRC_LIMIT_NONE: none */
	uint64_t gpu_max_regions;      /* each device's; GDRC_LIMIT_NONE */
	uint64_t gpu_max_bytes;        /* each device's; GDRC_LIMIT_NONE */
	/* Host registrations alive, cached or in use (an io_uring buffer
	 * table's slots); GDRC_LIMIT_NONE: none. */
	uint64_t host_max_regions;
	const struct gdrc_pin_ops *ops;
	void *be;                      /* backend argument (the PD) */
	/* GPU memory's backend (mem_type GDRC_MEM_CUDA); NULL: ops. */
	const struct gdrc_pin_ops *gpu_ops;
	void *gpu_be;
	int cache_host;                /* 0: host registrations uncached */
	int check;                     /* invariant checks after changes */
	/* Tag check of a GPU hit (regions with tag_check): r's allocation
	 * is still there while tag_query(&tag, tag_what, r->start) returns
	 * 0 with tag == the region's buffer_id.  The signature is the driver's
	 * cuPointerGetAttribute, so a validated hit makes exactly one call
	 * and no wrapper's (the 1.15x budget is a few ns).  Called
	 * without any cache lock. */
	int (*tag_query)(void *tag, int what, unsigned long long addr);
	int tag_what;
	/* The monitor that watches cached host memory range by range
	 * (gdrcache.ko's notifier, or userfaultfd), or NULL (the hooks
	 * watch everything, or nothing does): struct gdrc_watch_ops. */
	const struct gdrc_watch_ops *watch;
	void *watch_arg;
	/* The kernel invalidation channel's generation words (gdrcache.ko),
	 * or NULL: one word per slot, nonzero once the slot's range was
	 * invalidated (a watch's, or a GPU pin's). */
	const volatile uint64_t *kgen;
	/* GPU pins through the same channel (64 KiB aligned ranges); the
	 * word moves when the driver revokes the pin. */
	int (*kpin)(void *arg, uintptr_t va, size_t len, int *slot_p,
		    uint64_t *handle_p);
	void (*kunpin)(void *arg, uint64_t handle);
	void *karg;
	/* GPU registrations must be pinned by the module (the kmod backend:
	 * the pin is the registration); otherwise it is an extra. */
	int gpu_kpin_required;
	/* Every get is a direct reference; no thread keeps a handle.  An
	 * idle handle keeps its region registered past an invalidation
	 * until its thread calls again (see "Eviction" above), and a cuFile
	 * registration must be gone when the free that invalidated it
	 * returns (the cufile backend). */
	int direct_refs;
	/* Is host memory [start, end) privately mapped, the kind whose
	 * pages only calls on its own mapping take?  1, with the run
	 * of private mappings around it in [*lo_p, *hi_p); 0 not (shared,
	 * or not known).  Set where the sources in
	 * force see no more than such calls (all but gdrcache.ko): a miss
	 * caches plain host memory only where it says 1, and registers the
	 * rest for that get alone (docs/design.md, "What takes the pages").
	 * NULL: every kind is seen.  Called under the write lock; never
	 * allocates. */
	int (*host_private)(uintptr_t start, uintptr_t end, uintptr_t *lo_p,
			    uintptr_t *hi_p);
	/* enum gdrc_vmemo_mode: whether a run found private is remembered
	 * (c->vmemo) until what overlaps it. */
	int host_private_memo;
};

/*
 * A run of private mappings stays private until something changes the
 * mappings there, and every such change is an event where the sources
 * see the whole address space: glibc's hooks and UCM post one (a
 * gdrc_invalidate from the caller changes no mapping and leaves the
 * run alone), and with GDRC_MEM_HOOKS=none the caller's gdrc_invalidate
 * is the event.  Userfaultfd reports only the ranges it watches: there
 * nothing is remembered, and every miss asks.
 */
enum gdrc_vmemo_mode {
	GDRC_VMEMO_OFF = 0,    /* asked at every miss */
	GDRC_VMEMO_EVENTS,     /* remembered until a queued event */
	GDRC_VMEMO_EXPLICIT,   /* ... or an explicit invalidation */
};

/*
 * What a miss registers.  Host memory: the cache rounds [start, end) to
 * pages and merges overlapping host registrations itself (key and reg
 * fields ignored).  GPU memory: the caller classified the pointer and
 * chose both ranges.
 */
struct gdrc_cache_req {
	uintptr_t start;     /* requested range */
	uintptr_t end;
	uint32_t access;     /* normalised GDRC_ACCESS_* */
	uint32_t flags;      /* GDRC_GET_* */
	int mem_type;        /* enum gdrc_mem_type */
	int kind;            /* enum gdrc_ptr_kind */
	int device;          /* -1 for host memory */
	int tag_check;       /* validate hits with tag_query */
	uint64_t buffer_id;  /* GPU allocation identity, else 0 */
	/* GPU: the segments [alloc_start, alloc_end) is made of, in
	 * address order; NULL with nseg 1: the allocation is one (its
	 * BUFFER_ID is buffer_id).  Copied by the miss. */
	const struct gdrc_seg *segs;
	unsigned nseg;
	uint32_t info_flags; /* GDRC_MR_INFO_SYNC_MEMOPS* */
	uintptr_t key_start; /* GPU: the allocation, or the request */
	uintptr_t key_end;   /*      rounded to 64 KiB within it */
	uintptr_t alloc_start; /* GPU, CUDA-pinned host: the allocation
				* (VMM: the mappings the request covers) */
	uintptr_t alloc_end;
	uintptr_t reg_align; /* GPU: registrations round out to this */
	int tag_check_auto;  /* GPU: tag checks only if the kernel channel
			      * does not cover the registration */
};

struct gdrc_cache {
	/* Read by every fast-path get: */
	uint64_t uid;                  /* fixed: unique per cache */
	uintptr_t key;                 /* the owner's, read and written by
					* it alone (the API layer: the
					* pointer it handed out, 0 once
					* finished): in the line every call
					* reads first */
	struct gdrc_invq invq;         /* pending: read by fast hits */
	_Atomic int forked;            /* set in a fork child */
	_Atomic int cache_host;        /* from p.cache_host; may drop to 0 */

	struct gdrc_cache_params p;    /* fixed */
	uintptr_t page_size;           /* fixed */

	pthread_rwlock_t lock;
	/* Under lock: */
	const void *lock_writer;       /* debug builds: &gdrc_tls_cur of the
					* thread holding lock for writing */
	struct gdrc_index ix;          /* cached regions (index.c) */
	uint32_t hand;                 /* the clock hand: the arena index
					* of the next region the evictor
					* looks at (lru.c) */
	uint64_t nregions;             /* in the index */
	/* Changed by every removal of a region, to a value no cache of
	 * the process ever had (gdrc_removal_stamp_new): a thread whose
	 * last look over its handles for removed regions saw this value
	 * looked at this cache, and none was removed since (handle.c,
	 * gdrc_tls_live). */
	_Atomic uint64_t removal_stamp;
	/* Longest allocation of a region ever inserted, plus a page: each
	 * key lies within this of its allocation (CUDA frees' index walk). */
	uintptr_t alloc_span_max;
	uint64_t reserved_regions;     /* being registered */
	uint64_t reserved_bytes;
	struct gdrc_inflight *inflight; /* registrations in progress */
	struct gdrc_ghost ghosts[GDRC_GHOSTS];
	uint64_t ghost_next; /* ghosts ever added */
	uintptr_t ghost_lo; /* every ghost ever added lies in [lo, hi) */
	uintptr_t ghost_hi;
	/* Runs of private mappings host_private reported, each
	 * dropped when an event overlaps it (gdrc_invalidate_locked). */
	struct gdrc_vmemo {
		uintptr_t start, end; /* empty: start == end */
	} vmemo[GDRC_VMEMO];
	unsigned vmemo_next;           /* the entry replaced next */

	/* Per device (gdrc_dev_acct); ordinals past GDRC_MAX_DEVICES are
	 * neither counted nor limited. */
	struct gdrc_dev_acct dev[GDRC_DEV_SLOTS];
	atomic_flag oom_warned;        /* the first retry after running out */

	/* Registered bytes: atomic because releases happen unlocked. */
	_Atomic uint64_t pinned_bytes;
	_Atomic uint64_t pinned_bytes_max;
	_Atomic uint64_t nalive;        /* regions not yet released */

	/* Slow-path counters (indexed by enum gdrc_stat), relaxed atomics. */
	_Atomic uint64_t stat[GDRC_STAT_COUNT];
	struct gdrc_shard shards[GDRC_SHARDS + 1];

	pthread_mutex_t slab_lock;
	/* Under slab_lock: */
	const void *slab_owner;        /* debug builds: its holder */
	struct gdrc_arena regions;     /* struct gdrc_region (arena.c) */
	struct gdrc_pool handles;      /* struct gdrc_handle */
	int registry_slot;             /* in the cache registry, or -1 */
};

/* r's cold record. */
static inline struct gdrc_region_cold *
gdrc_region_cold(const struct gdrc_region *r)
{
	const struct gdrc_arena *a = &r->cache->regions;

	return &a->cold[r - a->hits];
}

/* Caches alive at once in the process (the registry's size). */
#define GDRC_CACHES_MAX 64

/* Set up c (embedded by the caller, cache-line aligned) and enter it in
 * the registry.  @return GDRC_OK; GDRC_ERR_NO_MEMORY; GDRC_ERR_LIMIT
 * with GDRC_CACHES_MAX alive. */
gdrc_status_t gdrc_cache_init(struct gdrc_cache *c,
			      const struct gdrc_cache_params *params);

/* fn(c, arg) for every live cache, under the registry's lock (which
 * comes before any cache's own: fn may take those, never the registry's
 * again). */
void gdrc_cache_each(void (*fn)(struct gdrc_cache *c, void *arg), void *arg);

/* The fork protocol's part here, called by its one owner (api.c's
 * pthread_atfork handlers): prepare holds the registry across fork(), the
 * parent lets it go, the child marks every cache forked
 * (gdrc_cache_mark_forked), lets it go and makes the shard lock usable
 * again. */
void gdrc_cache_fork_prepare(void);
void gdrc_cache_fork_parent(void);
void gdrc_cache_fork_child(void);

/* Release every region, held or not; the caller guarantees no other
 * call on this cache runs.  Logs how many were still held. */
void gdrc_cache_cleanup(struct gdrc_cache *c);

/* In a fork child: free memory only, touching no lock or registration. */
void gdrc_cache_cleanup_forked(struct gdrc_cache *c);

/*
 * Start loading the page-hash line where the index path will look for
 * start first (its lowest occupied level): a hint, no lock, nothing
 * read but the table's address and size.  Made as soon as the fast path
 * did not serve a get, so that the line is on its way while the get's
 * other steps run: a thread getting buffers in no order it repeats
 * misses that line and then the region's on every get, and a core
 * overlaps one get's misses with the next one's only when few
 * instructions lie between them (docs/design.md, "Why UCX stays
 * ahead").  (index.c)
 */
void gdrc_index_prefetch(const struct gdrc_cache *c, uintptr_t start);

/*
 * The index path: a cached region whose key range covers [start, end)
 * with access, validated by its tag check, served through this thread's
 * handle.  No CUDA call under the lock.
 * @return 1 with the handle in *mr_p; 0 if none; GDRC_ERR_FORK.
 */
int gdrc_cache_lookup(struct gdrc_cache *c, uintptr_t start, uintptr_t end,
		      uint32_t access, struct gdrc_mr **mr_p);

/* As lookup, counting no hit and remembering nothing: a pin on the
 * region, dropped with gdrc_cache_region_put. */
int gdrc_cache_peek(struct gdrc_cache *c, uintptr_t start, uintptr_t end,
		    struct gdrc_region **r_p);

/* Drop gdrc_cache_peek's pin (and release as for a put). */
void gdrc_cache_region_put(struct gdrc_cache *c, struct gdrc_region *r);

/* Count n events under a slow-path counter (enum gdrc_stat). */
void gdrc_cache_stat_add(struct gdrc_cache *c, int stat, uint64_t n);

/* The miss path: see gdrc_mr_get for the statuses. */
gdrc_status_t gdrc_cache_get_miss(struct gdrc_cache *c,
				  const struct gdrc_cache_req *req,
				  struct gdrc_mr **mr_p);

/* Any put gdrc_cache_put_fast leaves (nothing is released in a fork
 * child).  @return GDRC_PUT_OK, or the fault found (nothing done). */
int gdrc_cache_put_slow(struct gdrc_cache *c, struct gdrc_mr *mr);

/*
 * A put of mr, a direct reference (its magic says so: the caller read
 * it), without gdrc_cache_put_slow's other checks: c owns it, c is not a
 * fork child's, and one of its references is outstanding; the put is
 * counted.  @return 1 put; 0 not done (nothing changed: the slow path
 * finds why).
 */
int gdrc_cache_put_direct(struct gdrc_cache *c, struct gdrc_mr *mr);

/*
 * A get that none of this thread's four entries covers and its parked
 * table did not serve, tried as a hit through a hazard cell (cell.c)
 * before the index step's own checks: a plain one-page host region this
 * thread would hold directly, with the fast path's checks.  The caller
 * asks first whether the hooks can be trusted (a fast path's host_ok),
 * and comes here only if so.  @return 1 served (*mr_p, the hit
 * counted); 0 not (nothing changed: go to the index); -1 not, and the
 * index holds nothing there that its lock-free look could see (nothing
 * changed: a miss, whose search under the write lock is the exact one).
 */
int gdrc_cache_get_cell(struct gdrc_cache *c, uintptr_t start,
			uintptr_t end, uint32_t access, struct gdrc_mr **mr_p);

/* A put of mr, a hazard cell (its magic says so: the caller read it;
 * cell.c), from any thread.  @return GDRC_PUT_OK, GDRC_PUT_OTHER_CTX or
 * GDRC_PUT_TOO_MANY (an empty cell: a double put); nothing done on a
 * fault. */
int gdrc_cache_put_cell(struct gdrc_cache *c, struct gdrc_mr *mr);

/* First-time shard assignment for this thread (shard.c). */
int gdrc_cache_tls_shard(void);

/* Remove every region overlapping [start, end); source is the stat to
 * count them under (GDRC_STAT_INV_EXPLICIT, GDRC_STAT_INV_HOST_HOOK). */
gdrc_status_t gdrc_cache_invalidate(struct gdrc_cache *c, uintptr_t start,
				    uintptr_t end, int source);

/* Apply the queued events now: what they invalidated and nobody holds
 * is deregistered before this returns.  Not hook-safe (it locks and
 * deregisters).  @return GDRC_OK; GDRC_ERR_FORK. */
gdrc_status_t gdrc_cache_drain_events(struct gdrc_cache *c);

/* Hook-safe: queue an event, cls an enum gdrc_invq_class: unmapped
 * pages (HOST), or freed CUDA allocations (CUDA, see invq.h). */
void gdrc_cache_post_event(struct gdrc_cache *c, uintptr_t start,
			   uintptr_t end, int cls);

/* The memory hooks stopped working: flush every registration and cache
 * no host memory from now on.  Not hook-safe. */
void gdrc_cache_stop_host_caching(struct gdrc_cache *c);

/* Fork child handler: no lock may be taken.  Sends every call to the
 * slow path, which then answers GDRC_ERR_FORK: sets pending and forgets
 * the forking thread's (the child's only thread's) entries for c. */
void gdrc_cache_mark_forked(struct gdrc_cache *c);

/* Remove every cached region of device (a CUDA ordinal,
 * GDRC_DEVICE_HOST or GDRC_DEVICE_ALL) that nobody holds, and let go of
 * this thread's handles on them.  @return GDRC_OK; GDRC_ERR_FORK. */
gdrc_status_t gdrc_cache_release_unused(struct gdrc_cache *c, int device,
					uint64_t *released_p);

/* One per-device counter (enum gdrc_device_stat) of device, which the
 * caller checked (GDRC_DEVICE_ALL .. GDRC_MAX_DEVICES - 1). */
uint64_t gdrc_cache_dev_stat(struct gdrc_cache *c, int device, int stat);

/*
 * The backend that registers memory of mem_type in c, and its argument
 * (be_p may be NULL): GPU memory's own where one was chosen, else the
 * host's.  Fixed for the cache's life, so a region keeps no copy.
 */
static inline const struct gdrc_pin_ops *
gdrc_cache_ops_for(const struct gdrc_cache *c, int mem_type, void **be_p)
{
	int gpu = mem_type == GDRC_MEM_CUDA && c->p.gpu_ops;

	if (be_p)
		*be_p = gpu ? c->p.gpu_be : c->p.be;
	return gpu ? c->p.gpu_ops : c->p.ops;
}

/* The segment of r holding addr, which r's allocation range holds. */
struct gdrc_seg gdrc_cache_seg_of(const struct gdrc_region *r,
				  uintptr_t addr);

/* Snapshot of every counter, indexed by enum gdrc_stat. */
void gdrc_cache_stats(struct gdrc_cache *c, uint64_t *values);

/* Check index, clock and segments.  @return 0 or a negative code. */
int gdrc_cache_check(struct gdrc_cache *c);

/* The inline hit path: it reads struct gdrc_cache, defined above. */
#include "cache/hit.h"

#endif /* GDRC_CACHE_H */
