/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cache.h - the registration cache: regions, handles, lookup, reference
 * counts, eviction and invalidation.
 *
 * Regions (struct gdrc_region, one per registration) live in the index
 * (index.c; overlaps allowed), and on an LRU list, both under the cache's
 * rwlock.  What gdrc_mr_get hands out (struct gdrc_mr, the public opaque
 * type) is either a region's own handle (a direct reference on the
 * region) or a thread's handle on it:
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
 * Eviction treats a region as unused when it has no direct reference
 * and no live handle has a get outstanding (held - remote, a
 * hint read without stopping the owner: a get racing with the eviction
 * still gets a registration that stays valid until its put).  An evicted
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
 */
#ifndef GDRC_CACHE_H
#define GDRC_CACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <gdrcache.h>

#include "cache/invq.h"
#include "gdrc_int.h"
#include "itree/itree.h"
#include "pin/pin.h"

#define REGION_REF_MASK 0xffffffffULL
#define REGION_INVALID (1ULL << 32)
#define REGION_DEAD (1ULL << 33)
#define REGION_PIN_ONE (1ULL << 40)
#define REGION_PIN_MASK (~0ULL << 40)

struct gdrc_region;
struct gdrc_handle;

/*
 * What the API hands out: a thread's handle (its pub), or a region's own
 * direct reference, which is only the magic word r->self in line 0 of
 * the region, so that a get, its put and the user's key reads touch that
 * one line.  The magic says which: a handle's pub.r is its region; the
 * region of a direct reference is the one around it (gdrc_mr_region).
 */
struct gdrc_mr {
	uint64_t magic;        /* GDRC_MR_MAGIC or _SELF while it lives (a
				* handle: from its first use until its
				* memory goes back to the pool) */
	struct gdrc_region *r; /* a handle's region; not there in a
				* direct reference */
};

/* gdrc_mr.magic of a live one: "gdrc-mr" and a version byte (a handle)
 * or "gdrc-ms" (a direct reference).  A put reads it before anything
 * else: most pointers that are not a handle, and handles whose memory
 * went back to the pool, fail here. */
#define GDRC_MR_MAGIC 0x67647263266d7201ULL
#define GDRC_MR_SELF_MAGIC 0x67647263266d7301ULL

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
 * What only some registrations have: GPU memory, CUDA-pinned host memory,
 * a registered range wider than the key, the kernel channel's
 * subscription and pins.  Allocated with its region (miss.c) before it is
 * published, freed with it (gdrc_region_free); every field fixed.  A
 * plain host registration has none: its ext is gdrc_region_ext_none,
 * whose registered range is the key's (gdrc_region_reg_start/_end).
 */
struct gdrc_region_ext {
	uintptr_t reg_start;     /* range registered (pinned); GPU: 64 KiB */
	uintptr_t reg_end;       /* rounded, may be wider than the key */
	uintptr_t alloc_start;   /* GPU or CUDA-pinned host memory: the
				  * whole allocation, or the run of VMM
				  * mappings it covers; else 0, 0 */
	uintptr_t alloc_end;
	uint64_t khandle;        /* its subscription */
	struct gdrc_kpin *kpins; /* the kmore further pins */
	uint32_t kmore;          /* GPU pins beyond kslot's (one per further
				  * VMM mapping), in kpins */
	/* GPU memory's segments (gdrc_int.h), in address order, covering
	 * [alloc_start, alloc_end).  nseg 1: no array (segs NULL), the one
	 * segment is alloc_start, alloc_end, buffer_id. */
	unsigned nseg;
	struct gdrc_seg *segs;   /* NULL or seg_store */
	/* index.c, under cache->lock: a region too wide for the page hash
	 * is in the index's tree through this node (else unused). */
	struct gdrc_itree_node node;
	struct gdrc_region *node_region;
	struct gdrc_seg seg_store[];
};

/* The ext of every region that needs none (read only). */
extern const struct gdrc_region_ext gdrc_region_ext_none;

/*
 * One registration, two 64-byte lines, not adjacent: another region's
 * line lies between them (pair_line; pool.c lays regions out two by
 * two).  Line 0 holds what a hit reads, line 1 the tag and what
 * misses, releases, queries and invalidations read under the lock; what
 * only GPU, CUDA-pinned, kernel-channel and very wide registrations need
 * is out of line (ext).  Fields marked "fixed" do not change between the
 * region's publication and its release.  Small fields are bytes and the
 * LRU's ticks 32 bits (lru.c compares them modulo 2^32): a million
 * cached registrations cost 128 MB of regions at this size
 * (docs/benchmarks.md, bytes per registration).
 */
struct gdrc_region {
	/* Line 0: all a hit (fast or through the index), its put and the
	 * user's key reads touch, but a tag check's BUFFER_ID. */
	_Atomic uint64_t word;   /* refs | INVALID | DEAD | pins, see above */
	_Atomic uint32_t stamp;  /* cache tick at its last get (LRU), mod
				  * 2^32 */
	int kslot;               /* fixed: kernel channel word, or -1 */
	uint64_t self;           /* GDRC_MR_SELF_MAGIC while it lives:
				  * (struct gdrc_mr *)&self is the direct
				  * reference handed out */
	uint32_t lkey;           /* fixed */
	uint32_t rkey;           /* fixed */
	struct gdrc_cache *cache;  /* fixed: owner */
	uintptr_t start;         /* fixed: key range [start, end): */
	uintptr_t end;           /* hits inside it are served */
	uint8_t access;          /* fixed: GDRC_ACCESS_* registered */
	uint8_t tag_check;       /* fixed: REGION_TAG_*: how hits check */
	uint8_t kmore_any;       /* fixed: ext->kmore > 0 */
	uint8_t mem_type;        /* fixed: enum gdrc_mem_type */
	uint8_t kind;            /* fixed: enum gdrc_ptr_kind */
	uint8_t kpinned;         /* fixed: kslot is a GPU pin, not a watch */
	int8_t ix_level;         /* index.c, under cache->lock: its level
				  * in the page hash, or -1 (the tree) */
	uint8_t was_cached;      /* fixed: inserted into the index */

	/* Not this region's: the line 0 of its pair's other region, or
	 * that region's line 1 (regions lie two by two, both lines 0 side
	 * by side and then both lines 1: pool.c's paired objects).  The
	 * line pair a CPU fetches together (the adjacent-line prefetch)
	 * thus holds two regions' hit lines rather than one region's two
	 * lines: random hits over many regions need half the lines kept
	 * in the last-level cache.  Never touched. */
	unsigned char pair_line[GDRC_CACHELINE];

	/* Line 1: the tag, what a query, a miss, a release and an
	 * invalidation read. */
	uint64_t buffer_id;      /* fixed: GPU: its first segment's identity,
				  * else 0 */
	void *handle;            /* fixed: backend object (its backend:
				  * gdrc_cache_ops_for(cache, mem_type)) */
	uint64_t id;             /* fixed: unique in the process */
	const struct gdrc_region_ext *ext; /* fixed: never NULL */
	struct gdrc_handle *_Atomic handles; /* pushed only; freed with it */
	union {
		/* Under cache->lock, while cached: cache->lru, sorted by
		 * enq (a collected region: off it, gdrc_collect_push). */
		struct gdrc_region *lru_prev;
		/* Under cache->slab_lock, while free: the slab free
		 * list. */
		struct gdrc_region *free_next;
	};
	struct gdrc_region *lru_next; /* under cache->lock */
	uint32_t enq;            /* under cache->lock: stamp when placed on
				  * the LRU */
	uint8_t info_flags;      /* fixed: GDRC_MR_INFO_* it was made with */
	int16_t device;          /* fixed: CUDA ordinal or -1 */
} GDRC_ALIGNED_CL; /* whole lines: threads on neighbouring regions share
		    * no line; sizeof counts pair_line, which is not its
		    * memory: allocate with c->regions only */

/* Is mr a live handle or direct reference (its magic)? */
static inline int gdrc_mr_live(const struct gdrc_mr *mr)
{
	return mr->magic == GDRC_MR_MAGIC || mr->magic == GDRC_MR_SELF_MAGIC;
}

/* The region of a live mr. */
static inline struct gdrc_region *gdrc_mr_region(const struct gdrc_mr *mr)
{
	if (mr->magic == GDRC_MR_SELF_MAGIC)
		return gdrc_container_of((uint64_t *)&mr->magic,
					 struct gdrc_region, self);
	return mr->r;
}

/* The handle a live mr is, or NULL: a direct reference. */
static inline struct gdrc_handle *gdrc_mr_handle(struct gdrc_mr *mr)
{
	return mr->magic == GDRC_MR_MAGIC ? (struct gdrc_handle *)mr : NULL;
}

/* The range a region registered: its key's unless its ext says. */
static inline uintptr_t gdrc_region_reg_start(const struct gdrc_region *r)
{
	return r->ext == &gdrc_region_ext_none ? r->start : r->ext->reg_start;
}

static inline uintptr_t gdrc_region_reg_end(const struct gdrc_region *r)
{
	return r->ext == &gdrc_region_ext_none ? r->end : r->ext->reg_end;
}

/* Bytes a region registered (pinned). */
static inline uint64_t gdrc_region_reg_len(const struct gdrc_region *r)
{
	return gdrc_region_reg_end(r) - gdrc_region_reg_start(r);
}

/* A GPU pin of the kernel channel: its word and its handle. */
struct gdrc_kpin {
	int slot;
	uint64_t handle;
};

/* gdrc_region.tag_check: what a hit asks the driver. */
enum {
	REGION_TAG_NONE = 0, /* nothing: hooks or the kernel channel */
	REGION_TAG_ONE = 1,  /* the BUFFER_ID at start (one segment) */
	REGION_TAG_SEGS = 2, /* that of each segment the request touches,
			      * found by a walk (at most REGION_SEGS_WALK) */
	REGION_TAG_MANY = 3, /* the same, found by a binary search */
};

/* Segments a hit walks inline; more are searched out of line. */
#define REGION_SEGS_WALK 8

/* Added to a handle's remote count when its owner retires it. */
#define HANDLE_RETIRED (1ULL << 63)

/* A thread's handle on a region.  Cache-line sized: one owner writes it. */
struct gdrc_handle {
	struct gdrc_mr pub;         /* first: (struct gdrc_handle *)&pub is
				     * this; pub.r: the region */
	_Atomic uint64_t held;      /* owner: gets - own puts; others: hint */
	_Atomic uint64_t remote;    /* puts not counted in held, plus
				     * HANDLE_RETIRED - held once retired */
	_Atomic int state;          /* HANDLE_IN_USE, _RELEASED, _CLAIMED */
	struct gdrc_handle *next;   /* on pub.r->handles */
	struct gdrc_handle *free_next; /* slab, under cache->slab_lock */
} GDRC_ALIGNED_CL;

enum {
	HANDLE_IN_USE = 0,
	HANDLE_RELEASED = 1, /* no pin, no get outstanding: reusable */
	HANDLE_CLAIMED = 2,  /* being reused by a thread */
};

/* Per-thread remembered handles, see the file comment. */
#define GDRC_TLS_ENTRIES 4

struct gdrc_tls_entry {
	uint64_t uid;          /* cache->uid; 0 = empty */
	uintptr_t start;       /* region key range and access, copied */
	uintptr_t end;
	uint32_t access;
	uint32_t last;         /* parked: far_clock at its last use */
	struct gdrc_handle *h; /* deref only after uid matched */
	struct gdrc_region *r; /* h->pub.r, one load nearer */
};

/* Regions this thread last hit through the index (handle.c). */
#define GDRC_TLS_SEEN 4

/* Entries the fast path replaced, kept with their handles, and regions
 * hit through the index, each by its first page (handle.c): this many at
 * first, eight times as many when a thread's pages keep displacing each
 * other there, up to the most. */
#define GDRC_TLS_PARKED 128
#define GDRC_TLS_PARKED_MAX 8192

struct gdrc_tls_far {
	unsigned size;       /* entries: a power of two */
	unsigned sweep_pos;  /* the look for invalid entries: the next one, */
	unsigned sweep_left; /* how many it has left to read (0: none under
			      * way), */
	uint64_t sweep_uid;  /* the cache it looks for, */
	uint64_t sweep_gen;  /* its removals count when the look began, */
	uint64_t sweep_uids; /* and uids seen so far (below) */
	uint64_t uids; /* bit uid % 64 of every cache with a parked entry
			* (and maybe of some without: cleared by a look
			* over the table only) */
	const struct gdrc_region **seen; /* size of them, compared only */
	struct gdrc_tls_entry parked[];  /* size of them */
};

struct gdrc_tls {
	struct gdrc_tls_entry e[GDRC_TLS_ENTRIES];
	unsigned mru;       /* the entry the last fast get found: tried
			     * first, so that a hit costs the same in
			     * whichever slot its cache's entry lies */
	unsigned next;      /* round-robin replacement */
	unsigned seen_next; /* round-robin replacement in seen */
	const struct gdrc_region *seen[GDRC_TLS_SEEN]; /* compared only */
	int shard;          /* stats shard; -1 until assigned */
	int no_handles;     /* no exit hook (any more): gets are served as
			     * direct references, and nothing is kept */
	/* Entries replaced in e whose handles were kept (the slow path
	 * looks there first: gdrc_cache_get_parked), and the regions this
	 * thread hit through the index, both by first page (handle.c).
	 * Made on first use, freed by the exit hook. */
	struct gdrc_tls_far *far;
	uint64_t swept_uid; /* the cache, and its removals count, at the */
	uint64_t swept_gen; /* last look for invalid regions in e, parked */
	struct gdrc_tls_entry *parked_last; /* the parked entry the last
					     * get served (a put's third try) */
	uint32_t far_clock; /* gets the four entries did not serve */
	uint32_t far_skip;  /* of those, how many leave far alone */
	uint16_t far_tries; /* looks at parked, and hits, since the last */
	uint16_t far_hits;  /* judgement of their worth, and looks that */
	uint16_t far_taken; /* found the slot held for another region */
	uint16_t far_fill;  /* judgements to skip while a grown table fills */
};

extern __thread struct gdrc_tls gdrc_tls_cur
	__attribute__((tls_model("initial-exec")));

/*
 * Fast-path counters, one cache line per thread: a thread owns shard i
 * (i < GDRC_SHARDS) alone and bumps it with a plain load and store; the
 * last shard is shared by threads beyond that and bumped atomically.
 */
#define GDRC_SHARDS 64

struct gdrc_shard {
	_Atomic uint64_t hits;       /* but tag-checked fast hits */
	_Atomic uint64_t puts;
	_Atomic uint64_t tag_checks; /* but those of tag_hits */
	_Atomic uint64_t tag_hits;   /* fast hits that passed a tag check:
				      * a hit and a check, one store */
} GDRC_ALIGNED_CL;

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
	 * 0 with tag == r->buffer_id.  The signature is the driver's
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

/* Miss-cause memory: recently removed ranges (under cache->lock). */
#define GDRC_GHOSTS 256

struct gdrc_ghost {
	uintptr_t start;
	uintptr_t end;
	int cause; /* GDRC_STAT_MISS_EVICTED or _INVALIDATED */
};

struct gdrc_inflight;

/*
 * What one device's registrations (slot 0: host memory's; slot d + 1:
 * CUDA ordinal d's) hold.  The atomics move at publication and release,
 * outside the lock, like pinned_bytes; the reservations under the lock.
 */
struct gdrc_dev_acct {
	_Atomic uint64_t pinned_bytes; /* regions alive, cached or held */
	_Atomic uint64_t regions;
	_Atomic uint64_t dmabufs;      /* of them, dma-buf registrations */
	_Atomic uint64_t evictions;    /* limits, retries, release_unused */
	_Atomic uint64_t retries;      /* ran out and retried once */
	uint64_t reserved_bytes;       /* under lock: being registered */
	uint64_t reserved_regions;
};

#define GDRC_DEV_SLOTS (GDRC_MAX_DEVICES + 1)

/*
 * Fixed-size objects, a cache line each at least, carved from chunks
 * that are freed only with the cache (so their memory never goes away
 * under a reader); a free object is linked through the pointer at
 * offset link.  Under cache->slab_lock.
 */
struct gdrc_pool {
	void *free;    /* first free object: the one freed longest ago */
	void *free_tail; /* last freed: reuse is first in, first out, so
			  * that a stale pointer finds a dead object for
			  * as long as possible */
	void *chunks;  /* the newest first (pool.c) */
	char *bump;    /* the newest chunk's objects never handed out */
	char *bump_end;
	size_t next_count; /* objects in the next chunk */
	size_t size;   /* memory an object takes, a multiple of
			* GDRC_CACHELINE */
	size_t link;   /* offset of the free-list pointer in an object */
	void (*init)(void *obj); /* for each fresh object, or NULL */
	int paired;    /* objects of two lines, laid out two by two: both
			* first lines, then both second lines (pool.c) */
};

/* index.c: a page hash read without a lock, with summaries for range
 * queries, and an interval tree of regions too wide for it. */
#define GDRC_IX_LEVELS 6
/* Granules a region may span at a level and still enter it. */
#define GDRC_IX_SPAN 16

struct gdrc_phash;
struct gdrc_ixsums;

struct gdrc_index {
	struct gdrc_itree tree;           /* cached regions too wide for
					   * the hash (nodes in their ext) */
	struct gdrc_phash *_Atomic ph;    /* the other cached regions, by
					   * granule: read by lookups
					   * without a lock */
	struct gdrc_ixsums *sums;         /* which blocks of granules hold
					   * any: under cache->lock */
	_Atomic uint64_t sums_size;       /* its bits << 32 | used, for
					   * gdrc_index_prepare's hint */
	struct gdrc_phash *retired;       /* tables replaced by a larger
					   * one, freed with the cache */
	/* Under cache->lock: regions in the hash by level and granules
	 * spanned less one, and the widest of each level (spans[L]
	 * granules; 0: none), which tells a range query how far before
	 * the range a region of the level may start. */
	uint64_t span_regions[GDRC_IX_LEVELS][GDRC_IX_SPAN];
	uint8_t spans[GDRC_IX_LEVELS];
	_Atomic uint32_t levels;          /* bit L: spans[L] > 0, what
					   * lookups read */
};

struct gdrc_cache {
	/* Read by every fast-path get: */
	uint64_t uid;                  /* fixed: unique per cache */
	uintptr_t key;                 /* the owner's, read and written by
					* it alone (the API layer: the
					* pointer it handed out, 0 once
					* finished): in the line every call
					* reads first */
	_Atomic uint64_t tick;         /* LRU clock, see lru_* */
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
	struct gdrc_region *lru_head;  /* least recent first */
	struct gdrc_region *lru_tail;
	uint64_t nregions;             /* in the index */
	_Atomic uint64_t removals;     /* regions removed, ever: a thread's
					* parked handles need a look when it
					* moved (handle.c) */
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
	struct gdrc_pool regions;      /* struct gdrc_region */
	struct gdrc_pool handles;      /* struct gdrc_handle */
	int registry_slot;             /* in the cache registry, or -1 */
};

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

/* First-time shard assignment for this thread (out of line part). */
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

/* Snapshot of every counter, indexed by enum gdrc_stat. */
void gdrc_cache_stats(struct gdrc_cache *c, uint64_t *values);

/* Check index, LRU and segments.  @return 0 or a negative code. */
int gdrc_cache_check(struct gdrc_cache *c);

static inline void gdrc_shard_inc(_Atomic uint64_t *v, int shard)
{
	if (gdrc_likely(shard < GDRC_SHARDS))
		atomic_store_explicit(v,
				      atomic_load_explicit(
					      v, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	else
		atomic_fetch_add_explicit(v, 1, memory_order_relaxed);
}

/* A plain increment of a counter only this thread writes. */
static inline void gdrc_owned_add(_Atomic uint64_t *v, uint64_t n)
{
	atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) +
				      n, memory_order_relaxed);
}

/* Does GPU region r still hold its allocation?  (See tag_query.) */
static inline int gdrc_region_tag_ok(const struct gdrc_cache *c,
				     const struct gdrc_region *r)
{
	unsigned long long tag = 0;

	return c->p.tag_query(&tag, c->p.tag_what, r->start) == 0 &&
	       tag == r->buffer_id;
}

/* The segment of r holding addr, which r's allocation range holds. */
struct gdrc_seg gdrc_cache_seg_of(const struct gdrc_region *r,
				  uintptr_t addr);

/* Did the kernel see any of r's further GPU pins (kpins) revoked? */
int gdrc_cache_kmore_stale(const struct gdrc_cache *c,
			   const struct gdrc_region *r);

/* Did the kernel see r's memory go?  One word per pin: a registration
 * over several VMM mappings holds one pin per mapping (nvidia_p2p pins
 * one allocation), and any of them revoked ends it. */
static inline int gdrc_region_kstale(const struct gdrc_cache *c,
				     const struct gdrc_region *r)
{
	return r->kslot >= 0 &&
	       (c->p.kgen[r->kslot] ||
		(gdrc_unlikely(r->kmore_any) && gdrc_cache_kmore_stale(c, r)));
}

/* Do the segments of r (REGION_TAG_MANY) that [start, end) touches
 * still hold their mappings?  A binary search for the first, then
 * gdrc_segs_check. */
int gdrc_cache_segs_ok(const struct gdrc_cache *c,
		       const struct gdrc_region *r, uintptr_t start,
		       uintptr_t end);

/*
 * Query the BUFFER_ID of segment g and each after it until one ends at
 * or past end.  The request lies inside its region's key, so inside its
 * segments: the walk never leaves the array, and needs no count.
 */
static inline int gdrc_segs_check(const struct gdrc_cache *c,
				  const struct gdrc_seg *g, uintptr_t end)
{
	for (;;) {
		unsigned long long tag = 0;

		if (c->p.tag_query(&tag, c->p.tag_what, g->start) ||
		    tag != g->buffer_id)
			return 0;
		if (g->end >= end)
			return 1;
		g++;
	}
}

/* The same for REGION_TAG_SEGS, inline: the first segment touched is
 * found by a walk from the first. */
static inline int gdrc_region_segs_walk(const struct gdrc_cache *c,
					const struct gdrc_region *r,
					uintptr_t start, uintptr_t end)
{
	const struct gdrc_seg *g = r->ext->segs;

	while (g->end <= start)
		g++;
	return gdrc_segs_check(c, g, end);
}

/* Does r still hold its memory where [start, end) touches it? */
static inline int gdrc_region_tags_ok(const struct gdrc_cache *c,
				      const struct gdrc_region *r,
				      uintptr_t start, uintptr_t end)
{
	if (gdrc_likely(r->tag_check == REGION_TAG_ONE))
		return gdrc_region_tag_ok(c, r);
	if (r->tag_check == REGION_TAG_SEGS)
		return gdrc_region_segs_walk(c, r, start, end);
	return gdrc_cache_segs_ok(c, r, start, end);
}

/*
 * No event queued, then r not INVALID: the two words every fast hit
 * reads after the hooks (gdrc_cache_hit_ok says why in this order).  Our
 * pin keeps r registered; INVALID says it left the cache, and the slow
 * path lets go of the handle.
 */
static inline __attribute__((always_inline)) int
gdrc_region_live(const struct gdrc_cache *c, const struct gdrc_region *r)
{
	return !atomic_load_explicit(&c->invq.pending, memory_order_acquire) &&
	       !(atomic_load_explicit(&r->word, memory_order_acquire) &
		 REGION_INVALID);
}

/*
 * The checks of a fast hit on r for [start, end), by this thread (whose
 * shard t->shard is set).
 * host_ok: whether the free interception can be trusted right now (the
 * hooks intact and no unmap between its system call and its event); it
 * is asked only for a region without a tag check.  A tag-checked region
 * does not need it: the BUFFER_ID of each segment the request touches
 * answers for that memory whatever a hook has or has not posted yet.
 * It still goes slow while an event is queued, so that what the CUDA
 * hooks saw (a segment the request does not touch unmapped, say)
 * removes it in every GDRC_VALIDATE mode; that is one load of a line
 * this get reads anyway.
 * @return the shard counter to count the hit in, or NULL (go slow).
 */
static inline __attribute__((always_inline)) _Atomic uint64_t *
gdrc_cache_hit_ok(struct gdrc_cache *c, struct gdrc_region *r,
		  const struct gdrc_tls *t, uintptr_t start, uintptr_t end,
		  int (*host_ok)(void))
{
	struct gdrc_shard *s;

	/* Without a tag check, trust the hooks: no unmap in its window,
	 * then no event queued.  The order is the proof.  An unmap counts
	 * itself busy until its event is queued, so seeing it idle first
	 * means pending shows its event; a drain marks r INVALID before it
	 * clears pending, so seeing pending clear means the word below
	 * shows the mark.  Read the other way round, an event queued (or a
	 * drain finished) between two loads served a registration of
	 * memory that was already unmapped. */
	if ((!r->tag_check && !host_ok()) || !gdrc_region_live(c, r))
		return NULL;
	if (gdrc_region_kstale(c, r))
		return NULL; /* the kernel saw it go: slow path */
	s = &c->shards[t->shard];
	if (!r->tag_check)
		return &s->hits;
	if (!gdrc_region_tags_ok(c, r, start, end)) {
		gdrc_shard_inc(&s->tag_checks, t->shard);
		return NULL; /* the slow path drops it */
	}
	return &s->tag_hits;
}

/* Stamp r with the current LRU tick (a store only when it moved): what
 * every hit, fast or through the index, writes for recency. */
static inline __attribute__((always_inline)) void
gdrc_region_stamp(struct gdrc_cache *c, struct gdrc_region *r)
{
	uint32_t tick = (uint32_t)atomic_load_explicit(&c->tick,
						       memory_order_relaxed);

	if (atomic_load_explicit(&r->stamp, memory_order_relaxed) != tick)
		atomic_store_explicit(&r->stamp, tick, memory_order_relaxed);
}

/* A hit on r: its LRU stamp, and the counter. */
static inline __attribute__((always_inline)) void
gdrc_cache_hit_count(struct gdrc_cache *c, struct gdrc_region *r,
		     const struct gdrc_tls *t, _Atomic uint64_t *count)
{
	gdrc_region_stamp(c, r);
	gdrc_shard_inc(count, t->shard);
}

/* Does entry e serve a get of [start, end) with access from c? */
static inline __attribute__((always_inline)) int
gdrc_tls_covers(const struct gdrc_tls_entry *e, const struct gdrc_cache *c,
		uintptr_t start, uintptr_t end, uint32_t access)
{
	return e->uid == c->uid && start >= e->start && end <= e->end &&
	       !(access & ~e->access);
}

/* Is e this thread's entry of c holding handle mr?  Compared with mr
 * itself (&h->pub): nothing of mr is read, and a free entry (h NULL) or
 * a direct reference never matches. */
static inline __attribute__((always_inline)) int
gdrc_tls_holds(const struct gdrc_tls_entry *e, const struct gdrc_cache *c,
	       const struct gdrc_mr *mr)
{
	return (const struct gdrc_mr *)e->h == mr && e->uid == c->uid;
}

/*
 * This thread's entry of c for handle mr, or NULL: the last one a get
 * found first (a put or reget follows its get), then the other three,
 * then the parked entry the last parked hit served.
 */
static inline __attribute__((always_inline)) struct gdrc_tls_entry *
gdrc_tls_holding(struct gdrc_tls *t, const struct gdrc_cache *c,
		 const struct gdrc_mr *mr)
{
	struct gdrc_tls_entry *e = &t->e[t->mru];

	if (gdrc_likely(gdrc_tls_holds(e, c, mr)))
		return e;
	for (int i = 0; i < GDRC_TLS_ENTRIES; i++)
		if (gdrc_tls_holds(&t->e[i], c, mr))
			return &t->e[i];
	e = t->parked_last; /* NULL, or in this thread's far table */
	if (e && gdrc_tls_holds(e, c, mr))
		return e;
	return NULL;
}

/* The fast path's second look, out of line (the caller's slow path
 * makes it first, so that the inline part stays as it was): a handle
 * this thread parked (handle.c).  @return as gdrc_cache_get_fast. */
struct gdrc_mr *gdrc_cache_get_parked_at(struct gdrc_cache *c,
					 uintptr_t start, uintptr_t end,
					 uint32_t access,
					 int (*host_ok)(void));

/* The same, with its exits for a thread without a parked table or one
 * that leaves it alone for now (far_skip: its gets seldom hit there)
 * inline: the gets that then go on to the index are the ones whose
 * steps before it count (gdrc_index_prefetch). */
static inline struct gdrc_mr *
gdrc_cache_get_parked(struct gdrc_cache *c, uintptr_t start, uintptr_t end,
		      uint32_t access, int (*host_ok)(void))
{
	struct gdrc_tls *t = &gdrc_tls_cur;

	if (!t->far)
		return NULL;
	t->far_clock++;
	if (t->far_skip) {
		t->far_skip--;
		return NULL;
	}
	return gdrc_cache_get_parked_at(c, start, end, access, host_ok);
}

/*
 * The fast path: a hit on one of this thread's remembered handles (the
 * checks: gdrc_cache_hit_ok), the one it hit last tried first.  (A
 * fork child never gets here: its entries are forgotten.)
 * @return the handle with the get counted, or NULL (go slow).
 */
static inline __attribute__((always_inline)) struct gdrc_mr *
gdrc_cache_get_fast(struct gdrc_cache *c, uintptr_t start, uintptr_t end,
		    uint32_t access, int (*host_ok)(void))
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_entry *e = &t->e[t->mru];
	_Atomic uint64_t *count;

	if (gdrc_unlikely(!gdrc_tls_covers(e, c, start, end, access))) {
		/* The others from the one after it: ranges taken in turn
		 * are found at the first of them. */
		unsigned i = t->mru;

		for (int k = 1;; k++) {
			if (k == GDRC_TLS_ENTRIES)
				return NULL;
			i = (i + 1) % GDRC_TLS_ENTRIES;
			if (gdrc_tls_covers(&t->e[i], c, start, end, access))
				break;
		}
		t->mru = i;
		e = &t->e[i];
	}
	count = gdrc_cache_hit_ok(c, e->r, t, start, end, host_ok);
	if (!count)
		return NULL;
	gdrc_owned_add(&e->h->held, 1);
	gdrc_cache_hit_count(c, e->r, t, count);
	return &e->h->pub;
}

/* gdrc_cache_reget's checks for a region with more than the host hit's
 * words to read (a BUFFER_ID to query, a kernel word): out of line, so
 * that the host case stays a leaf.  (lookup.c) */
int gdrc_cache_reget_checked(struct gdrc_cache *c, struct gdrc_region *r,
			     const struct gdrc_tls *t, uintptr_t start,
			     uintptr_t end, int (*host_ok)(void));

/*
 * A get of [start, end) with access served by mr, which this thread
 * already holds, without another reference: mr must be one of this
 * thread's remembered handles of c covering the request, and pass the
 * checks of a fast hit (gdrc_cache_hit_ok, spelled out here for a host
 * region without a kernel word: the preload's reg after dereg, whose
 * every instruction counts).  Counted as a hit.
 * @return 1 served; 0 not (the caller puts mr and gets anew).
 */
static inline __attribute__((always_inline)) int
gdrc_cache_reget(struct gdrc_cache *c, const struct gdrc_mr *mr,
		 uintptr_t start, uintptr_t end, uint32_t access,
		 int (*host_ok)(void))
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_entry *e = gdrc_tls_holding(t, c, mr);
	struct gdrc_region *r;

	if (!e || start < e->start || end > e->end || (access & ~e->access))
		return 0;
	r = e->r;
	if (gdrc_unlikely(r->tag_check || r->kslot >= 0))
		return gdrc_cache_reget_checked(c, r, t, start, end, host_ok);
	/* gdrc_cache_hit_ok's order, and its proof. */
	if (!host_ok() || !gdrc_region_live(c, r))
		return 0;
	gdrc_cache_hit_count(c, r, t, &c->shards[t->shard].hits);
	return 1;
}

/*
 * c: the cache the caller says mr came from.  A handle that is one of
 * this thread's live entries of c is put with two plain stores, without
 * reading mr's region; anything else (a direct reference, another
 * thread's handle, a retired one, the wrong cache, a fork child, whose
 * entries were forgotten) is left to gdrc_cache_put_slow.  The entry is
 * compared with mr itself (&h->pub), so nothing of mr is read before it
 * matched, and a free entry (h NULL) never matches.  A put with no get
 * outstanding (held no more than remote: the owner's count is exact,
 * and remote only counts other threads' puts of gets still
 * outstanding) is a double put: also left to the slow path, which finds
 * it again and changes nothing.
 * @return 1 put; 0 not done here.
 */
static inline __attribute__((always_inline)) int
gdrc_cache_put_fast(struct gdrc_cache *c, struct gdrc_mr *mr)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_entry *e = gdrc_tls_holding(t, c, mr);
	struct gdrc_handle *h;
	uint64_t held;

	/* A live entry implies the thread has its shard (tls_install). */
	if (!e)
		return 0;
	h = e->h;
	held = atomic_load_explicit(&h->held, memory_order_relaxed);
	if (gdrc_unlikely(held <= atomic_load_explicit(&h->remote,
						       memory_order_relaxed)))
		return 0;
	gdrc_shard_inc(&c->shards[t->shard].puts, t->shard);
	atomic_store_explicit(&h->held, held - 1, memory_order_relaxed);
	return 1;
}

/* A put, fast or not.  @return GDRC_PUT_OK, or the fault found. */
static inline int gdrc_cache_put(struct gdrc_cache *c, struct gdrc_mr *mr)
{
	return gdrc_cache_put_fast(c, mr) ? GDRC_PUT_OK :
					    gdrc_cache_put_slow(c, mr);
}

#endif /* GDRC_CACHE_H */
