/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * types.h - the objects a cache is made of, shared by the files of
 * lib/cache/ and read by the API layer's queries: the region word's bits,
 * what gdrc_mr_get hands out (struct gdrc_mr), a registration (struct
 * gdrc_region and its ext), a thread's handle on one (struct
 * gdrc_handle), what each thread remembers of its handles (struct
 * gdrc_tls: four entries for the fast path, and a parked table for the
 * entries they had to give up), the stats shards, the miss-cause ghosts,
 * the per-device accounts, the object pools and the index.
 *
 * The rules these obey (the region word, a handle's counts, who may free
 * what) are cache.h's opening comment; struct gdrc_cache itself, which
 * holds all of them, is in cache.h.  Nothing here is a function but the
 * few accessors that read an mr or a region.
 */
#ifndef GDRC_CACHE_TYPES_H
#define GDRC_CACHE_TYPES_H

#include <stdatomic.h>
#include <stdint.h>

#include <gdrcache.h>

#include "gdrc_int.h"
#include "itree/itree.h"

struct gdrc_cache;

#define REGION_REF_MASK 0xffffffffULL
#define REGION_INVALID (1ULL << 32)
#define REGION_DEAD (1ULL << 33)
#define REGION_PIN_ONE (1ULL << 40)
#define REGION_PIN_MASK (~0ULL << 40)

struct gdrc_region;
struct gdrc_handle;

/*
 * What the API hands out: a thread's handle (its pub), or a region's own
 * direct reference, which is only the magic word r->self in the region's
 * line, so that a get, its put and the user's key reads touch that one
 * line.  The magic says which: a handle's pub.r is its region; the
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
/* A hazard cell's ("gdrc-mc"): an index hit held without a write to its
 * region (cell.c). */
#define GDRC_MR_CELL_MAGIC 0x67647263266d6301ULL

/*
 * A hazard cell: an index hit on a plain host region, held by naming
 * the region here instead of counting in its word, so that the hit
 * reads one line of the index and none of the region (cell.c says how a
 * removal finds it).  pub.r is the region held, or the region with
 * GDRC_CELL_CONVERTED when a removal turned the hold into a direct
 * reference, or NULL: free.  Read and written with atomics.
 */
struct gdrc_cell {
	struct gdrc_mr pub;        /* magic GDRC_MR_CELL_MAGIC, fixed */
	struct gdrc_cache *cache;  /* the hold's cache: a put checks it */
	uint64_t pad;              /* 32 bytes: in a line-aligned block
				    * (cell.c), none across two lines */
};

#define GDRC_CELL_CONVERTED 1ULL
#define GDRC_CELLS 4

/* The region a cell's pub.r value v names (GDRC_CELL_CONVERTED or not;
 * NULL for a free cell). */
static inline struct gdrc_region *gdrc_cell_region(uintptr_t v)
{
	return (struct gdrc_region *)(v & ~(uintptr_t)GDRC_CELL_CONVERTED);
}

/* One thread's cells, and the links of every block (cell.c). */
struct gdrc_cells {
	struct gdrc_cell c[GDRC_CELLS];
	struct gdrc_cells *next;      /* every block: never unlinked */
	struct gdrc_cells *free_next; /* blocks no thread owns */
	unsigned last;                /* the cell its owner took last */
};

/*
 * What only some registrations have: GPU memory, CUDA-pinned host memory,
 * a registered range wider than the key, the kernel channel's
 * subscription and pins, a tree node, and threads' handles.  A plain
 * host registration has none: its ext is gdrc_region_ext_none, whose
 * registered range is the key's (gdrc_region_reg_start/_end), and it
 * gets one of its own only when a thread makes a handle on it
 * (handle.c: ext_for_handles, a copy of the shared one).  Allocated with
 * its region (miss.c) before it is published, or by that first handle,
 * and freed with the region (gdrc_region_free); every field fixed but
 * handles and the tree node.
 */
struct gdrc_region_ext {
	uintptr_t reg_start;     /* range registered (pinned); GPU: 64 KiB */
	uintptr_t reg_end;       /* rounded, may be wider than the key */
	uintptr_t alloc_start;   /* GPU or CUDA-pinned host memory: the
				  * whole allocation, or the run of VMM
				  * mappings it covers; else 0, 0 */
	uintptr_t alloc_end;
	uint64_t buffer_id;      /* GPU: its first segment's identity; the
				  * identity of CUDA-pinned host memory;
				  * else 0 */
	struct gdrc_handle *_Atomic handles; /* pushed only; freed with the
					      * region */
	uint64_t khandle;        /* its subscription */
	struct gdrc_kpin *kpins; /* the kmore further pins */
	uint32_t kmore;          /* GPU pins beyond kslot's (one per further
				  * VMM mapping), in kpins */
	int kslot;               /* kernel channel word, or -1 (the
				  * region's kern bit: kslot >= 0) */
	uint8_t kpinned;         /* kslot is a GPU pin, not a watch */
	uint8_t info_flags;      /* GDRC_MR_INFO_* it was made with but
				  * KMOD and TAG_CHECKED (the region's
				  * kern and tag_check say) */
	int16_t device;          /* CUDA ordinal or -1 */
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
/* The same, as gdrc_region.ext holds it (never written through: a
 * region that needs its own gets a copy, handle.c). */
#define REGION_EXT_NONE ((struct gdrc_region_ext *)&gdrc_region_ext_none)

/*
 * One registration: a 64-byte line, all that a hit (fast or through the
 * index), its put and the user's key reads touch, in the cache's region
 * arena (arena.c), with the region's cold record (struct
 * gdrc_region_cold, 16 bytes: what only a miss, a release and a query
 * read) at the same index in a second array.  What only GPU,
 * CUDA-pinned, kernel-channel, very wide registrations and those with
 * handles need is out of line (ext).  Fields marked "fixed" do not
 * change between the region's publication and its release.  80 bytes a
 * registration: docs/design.md, "Memory per registration".
 */
struct gdrc_region {
	_Atomic uint64_t word;   /* refs | INVALID | DEAD | pins, see above */
	uint64_t self;           /* GDRC_MR_SELF_MAGIC while it lives:
				  * (struct gdrc_mr *)&self is the direct
				  * reference handed out */
	uintptr_t start;         /* fixed: key range [start, end): */
	uintptr_t end;           /* hits inside it are served */
	struct gdrc_cache *cache; /* fixed: owner */
	/* Never NULL: &gdrc_region_ext_none or its own; fixed but for
	 * that one change, from the shared one to a copy of its own, made
	 * by a thread's first handle on it (handle.c). */
	struct gdrc_region_ext *_Atomic ext;
	uint32_t lkey;           /* fixed */
	uint32_t rkey;           /* fixed */
	/* One list at a time, in the order a region goes through them:
	 * collected for removal (under cache->lock, gdrc_collect_push),
	 * dead, waiting to be released after the lock (a gdrc_defer), then
	 * free (under cache->slab_lock, the arena's free list).  The next
	 * one's arena index + 1; 0 ends the list (arena.c). */
	uint32_t link;
	_Atomic uint8_t used;    /* set by each hit (a store only when
				  * clear), cleared by the clock hand:
				  * the replacement's reference bit (lru.c) */
	/* Under cache->lock, index.c and lru.c: */
	uint8_t listed : 1;      /* cached, on the clock (lru.c) */
	int8_t ix_level : 4;     /* its level in the page hash, or -1 (the
				  * tree) */
	uint8_t : 0;
	uint8_t access : 4;      /* fixed: GDRC_ACCESS_* registered */
	uint8_t mem_type : 1;    /* fixed: enum gdrc_mem_type */
	uint8_t kind : 3;        /* fixed: enum gdrc_ptr_kind */
	uint8_t tag_check : 2;   /* fixed: REGION_TAG_*: how hits check */
	uint8_t kern : 1;        /* fixed: ext->kslot >= 0 (the kernel
				  * channel's word tells a hit) */
	uint8_t was_cached : 1;  /* set once before it is inserted */
} GDRC_ALIGNED_CL; /* one line: threads on neighbouring regions share
		    * no line */

/* A region's cold record: arena.c keeps it at the region's index. */
struct gdrc_region_cold {
	void *obj;   /* fixed: backend object (its backend:
		      * gdrc_cache_ops_for(cache, mem_type)) */
	uint64_t id; /* fixed: unique in the process */
};

/* Is mr a live handle or direct reference (its magic)?  A cell is live
 * while it holds a region. */
static inline int gdrc_mr_live(const struct gdrc_mr *mr)
{
	return mr->magic == GDRC_MR_MAGIC || mr->magic == GDRC_MR_SELF_MAGIC ||
	       (mr->magic == GDRC_MR_CELL_MAGIC &&
		__atomic_load_n(&mr->r, __ATOMIC_ACQUIRE));
}

/* The region of a live mr. */
static inline struct gdrc_region *gdrc_mr_region(const struct gdrc_mr *mr)
{
	if (mr->magic == GDRC_MR_SELF_MAGIC)
		return gdrc_container_of((uint64_t *)&mr->magic,
					 struct gdrc_region, self);
	if (mr->magic == GDRC_MR_CELL_MAGIC)
		return gdrc_cell_region(
			(uintptr_t)__atomic_load_n(&mr->r, __ATOMIC_ACQUIRE));
	return mr->r;
}

/* The handle a live mr is, or NULL: a direct reference. */
static inline struct gdrc_handle *gdrc_mr_handle(struct gdrc_mr *mr)
{
	return mr->magic == GDRC_MR_MAGIC ? (struct gdrc_handle *)mr : NULL;
}

/* r's ext (never NULL). */
static inline const struct gdrc_region_ext *
gdrc_region_ext(const struct gdrc_region *r)
{
	return atomic_load_explicit(&r->ext, memory_order_acquire);
}

/* The range a region registered: its key's unless its ext says. */
static inline uintptr_t gdrc_region_reg_start(const struct gdrc_region *r)
{
	const struct gdrc_region_ext *x = gdrc_region_ext(r);

	return x == &gdrc_region_ext_none ? r->start : x->reg_start;
}

static inline uintptr_t gdrc_region_reg_end(const struct gdrc_region *r)
{
	const struct gdrc_region_ext *x = gdrc_region_ext(r);

	return x == &gdrc_region_ext_none ? r->end : x->reg_end;
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
	_Atomic uint32_t uses;      /* owner: hits that did not mark the
				     * region used (gdrc_cache_get_host) */
	struct gdrc_handle *next;   /* on its region's ext->handles */
	struct gdrc_handle *free_next; /* slab, under cache->slab_lock */
	uint32_t uses_seen;         /* uses when the clock hand last looked
				     * (lru.c, under cache->lock) */
} GDRC_ALIGNED_CL;

enum {
	HANDLE_IN_USE = 0,
	HANDLE_RELEASED = 1, /* no pin, no get outstanding: reusable */
	HANDLE_CLAIMED = 2,  /* being reused by a thread */
};

/*
 * What each thread remembers of its handles (struct gdrc_tls, one per
 * thread: gdrc_tls_cur).  The fast path looks in GDRC_TLS_ENTRIES
 * entries, each a handle with a copy of its region's range and access.
 * When it must give one up for a new handle, the entry is not let go of
 * but parked, handle and all, in the thread's parked table, a hash by
 * the region's first page; a get the four entries do not serve looks
 * there next (gdrc_cache_get_parked).  handle.c owns all of it.
 */
#define GDRC_TLS_ENTRIES 4

struct gdrc_tls_entry {
	uint64_t uid;          /* cache->uid; 0 = empty */
	uintptr_t start;       /* region key range and access, copied */
	uintptr_t end;
	uint32_t access;       /* and GDRC_TLS_CHECKED */
	uint32_t last;         /* parked: parked_clock at its last use */
	struct gdrc_handle *h; /* deref only after uid matched */
	struct gdrc_region *r; /* h->pub.r, one load nearer */
	struct gdrc_shard *stats; /* this thread's own shard of the cache:
				   * the hit path counts there with plain
				   * stores (a thread without one of its
				   * own keeps no entry: shard.c) */
};

/* gdrc_tls_entry.access: the region needs more than a plain host hit's
 * checks (a BUFFER_ID, the kernel's word).  Never in a request's access,
 * so it changes no compare of rights. */
#define GDRC_TLS_CHECKED (1u << 31)
/* gdrc_tls_entry.access: the region's memory is memory CUDA gave or
 * knows (pinned host memory: kind other than GDRC_PTR_HOST), freed
 * through the CUDA hooks too (hit.h, gdrc_cache_get_host).  Not in a
 * request's access either. */
#define GDRC_TLS_CUDA (1u << 30)

/* Regions this thread last hit through the index (handle.c). */
#define GDRC_TLS_SEEN 4

/* Entries of a parked table: this many at first, eight times as many
 * each time the thread's buffers keep displacing each other in it, up
 * to the most (32,768: a thread that takes 16,384 buffers in turn still
 * finds each in a slot of its own; 1.75 MiB of table). */
#define GDRC_TLS_PARKED 128
#define GDRC_TLS_PARKED_MAX 32768

/* Lookups in a parked table between two of its reviews (handle.c,
 * parked_review). */
#define GDRC_PARKED_REVIEW 256

/* The slot of a parked table of size entries for a region (or a request)
 * starting at start: its first page's. */
static inline unsigned gdrc_tls_parked_slot(uintptr_t start, unsigned size)
{
	return (unsigned)(start >> 12) & (size - 1);
}

/*
 * A thread's parked table: entries the four had to give up, with their
 * handles, and the regions this thread last hit through the index, both
 * in the slot of their region's first page.  The sweep fields are the
 * look for entries whose region left the cache, a few slots a get
 * (gdrc_tls_drop_invalid).
 */
struct gdrc_tls_parked {
	unsigned size;       /* entries: a power of two */
	unsigned sweep_pos;  /* the look for invalid entries: the next one, */
	unsigned sweep_left; /* how many it has left to read (0: none under
			      * way), */
	uint64_t sweep_uid;  /* the cache it looks for, */
	uint64_t sweep_stamp; /* its removal stamp when the look began, */
	uint64_t sweep_uids; /* and uids seen so far (below) */
	uint64_t uids; /* bit uid % 64 of every cache with a parked entry
			* (and maybe of some without: cleared by a look
			* over the table only) */
	const struct gdrc_region **seen; /* size of them, compared only */
	struct gdrc_tls_entry e[];       /* size of them */
};

struct gdrc_tls {
	struct gdrc_tls_entry e[GDRC_TLS_ENTRIES];
	unsigned mru;       /* the entry the last fast get found, as its
			     * byte offset in e (gdrc_tls_mru: one add
			     * where an index takes three): tried first,
			     * so that a hit costs the same in whichever
			     * slot its cache's entry lies */
	unsigned next;      /* round-robin replacement */
	unsigned seen_next; /* round-robin replacement in seen */
	const struct gdrc_region *seen[GDRC_TLS_SEEN]; /* compared only */
	int shard;          /* stats shard; -1 until assigned */
	int no_handles;     /* no exit hook (any more): gets are served as
			     * direct references, and nothing is kept */
	struct gdrc_cells *cells; /* this thread's hazard cells, or NULL:
				   * taken on the first index hit, given
				   * back by the exit hook (cell.c) */
	/* The parked table, or NULL: made on the first entry given up,
	 * freed by the exit hook. */
	struct gdrc_tls_parked *parked;
	uint64_t swept;     /* the removal stamp of the cache of the last
			     * look for invalid regions in e and parked, as
			     * it began (0: none to trust) */
	struct gdrc_tls_entry *parked_last; /* the parked entry the last
					     * get served (a put's third try) */
	/* How the parked table earns its keep (handle.c, parked_review): */
	uint32_t parked_clock;   /* gets the four entries did not serve */
	uint32_t parked_off;     /* of the next ones, how many skip the
				  * table (it was seldom hit) */
	uint16_t parked_looks;   /* since the last review: lookups in the */
	uint16_t parked_hits;    /* table, hits, and lookups that found */
	uint16_t parked_clashes; /* the slot held for another region */
	uint16_t parked_fill;    /* reviews to skip while a grown table
				  * fills */
};

/* The entry the last fast get found (struct gdrc_tls, mru). */
static inline struct gdrc_tls_entry *gdrc_tls_mru(struct gdrc_tls *t)
{
	return (struct gdrc_tls_entry *)((char *)t->e + t->mru);
}

/* Make e, one of t's four entries, the one tried first. */
static inline void gdrc_tls_set_mru(struct gdrc_tls *t,
				    const struct gdrc_tls_entry *e)
{
	t->mru = (unsigned)((const char *)e - (const char *)t->e);
}

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

/* Miss-cause memory: recently removed ranges (under cache->lock). */
#define GDRC_GHOSTS 256

/* Private runs of host mappings a cache remembers (struct gdrc_cache). */
#define GDRC_VMEMO 8

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
};

/*
 * A cache's regions (arena.c): address space reserved once for cap hit
 * lines (struct gdrc_region) and, beside, their cold records, made
 * accessible as regions are needed and given back only with the cache.
 * So a region's memory never goes away under a reader holding a stale
 * pointer (it reads a region, perhaps dead or reused: type-stable as
 * the pool's objects are), 32 bits name a region (its index), and hit
 * lines lie side by side with nothing between them.  hits, cold and cap
 * are fixed; the rest under cache->slab_lock, but made, which the clock
 * hand reads under cache->lock.
 */
struct gdrc_arena {
	struct gdrc_region *hits;      /* cap of them, reserved */
	struct gdrc_region_cold *cold; /* cap of them, reserved */
	size_t hits_bytes;             /* the reservations, for munmap */
	size_t cold_bytes;
	uint32_t cap;
	uint32_t ready;                /* accessible: [0, ready) */
	_Atomic uint32_t made;         /* handed out once: [0, made) */
	uint32_t free;                 /* first free: index + 1, or 0; the
					* one freed longest ago */
	uint32_t free_tail;            /* last freed (reuse is first in,
					* first out, as the pool's) */
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
	_Atomic uint32_t wide;            /* regions in the tree (0 or
					   * not), for lookups without the
					   * lock */
	uint64_t inserts;                 /* regions ever inserted, under
					   * cache->lock: a miss that saw
					   * no cover, and no insert since,
					   * need not look again */
};

#endif /* GDRC_CACHE_TYPES_H */
