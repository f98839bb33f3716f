// SPDX-License-Identifier: BSD-3-Clause
/*
 * preload.c - libgdrcache-preload.so: the cache for unmodified programs.
 *
 *   LD_PRELOAD=libgdrcache-preload.so ./program
 *
 * A thin layer over the public API of libgdrcache.so.0, which it
 * depends on (found beside it: its run path is $ORIGIN): one library in
 * the process, whatever the mix of programs and libraries that link it
 * and this preload, so one set of hooks, one configuration, one log.
 * At load it installs the memory hooks (gdrc_install_hooks): glibc's
 * (munmap, mremap, madvise, brk, mmap MAP_FIXED, glibc's own internal
 * calls included) and the CUDA driver's free functions (libcuda.so.1
 * loaded, not initialised; GDRC_CUDA_LIBRARY=none or GDRC_MEM_HOOKS=none
 * skips them).
 *
 * With GDRC_PRELOAD_MR=1 (default) it also serves the program's own
 * ibv_reg_mr, ibv_reg_mr_iova and ibv_reg_mr_iova2 from the cache: each
 * call returns a struct ibv_mr of its own, with exactly the addr and
 * length asked for and the keys of a cached registration that covers
 * them, and ibv_dereg_mr of it drops the reference.  A program that
 * registers and deregisters its buffer around every message then pays a
 * lookup instead of a pin.  One gdrc context per protection domain,
 * made at the PD's first registration (the CUDA driver is initialised
 * then, when it is installed) and closed by ibv_dealloc_pd.
 *
 * preload_cufile.c, in the same library, does the same for cuFile
 * programs (GDRC_PRELOAD_CUFILE=1, the default): their cuFileBufRegister,
 * cuFileBufDeregister, cuFileRead and cuFileWrite are served from one
 * context that registers with cuFile, made at the first such call, and
 * what they leave registered when they free its memory is deregistered
 * before the free.
 *
 * Passed through untouched: registrations with access flags the cache
 * does not model (MW_BIND, ZERO_BASED, ON_DEMAND, ...), an iova other
 * than the address, zero lengths, anything the cache refuses (managed
 * memory, limits), remote write or atomic without local write, every
 * registration once ibv_fork_init was called (or RDMAV_FORK_SAFE set),
 * every registration of a fork child, ibv_reg_dmabuf_mr, and every MR
 * the program did not get from here.  The library's own registrations
 * never come here: it calls libibverbs' definitions directly
 * (lib/pin/pin_ibv_resolve.c).
 * The MR's handle field is not meaningful; ibv_rereg_mr of a cached MR
 * is served by the cache (its keys may change).  Errors are those of
 * plain verbs (tests/preload/run_preload_errors_vm.sh), but for the
 * differences docs/hooks.md lists.
 *
 * Scaling: a cached reg+dereg takes no lock and calls no malloc.  PDs
 * sit in a fixed table read without a lock (a per-thread hint finds the
 * last one at once).  Our MRs are carved from arenas of our own, 1 MiB
 * aligned, so whether an MR handed to ibv_dereg_mr is ours is a lookup of
 * its arena, not of a table every thread writes; freed ones go back to a
 * per-thread list, and only its overflow (or a thread's exit) takes the
 * lock.
 *
 * Locks: preload_lock guards PD slot changes, arena growth and the spare
 * list; it is never held across a call into the cache or libibverbs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <infiniband/verbs.h>

#include <gdrcache.h>

/* rdma-core makes these macros that pick a function; we define both. */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* Access bits the cache registers with; optional ones may be dropped. */
#define PRELOAD_ACCESS                                                       \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                  \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* Protection domains with a cache at once; more pass through. */
#define PRELOAD_MAX_PDS 64
/* Arenas of MRs: size (also their alignment), and how many at most
 * (PRELOAD_MAX_ARENAS * ~10,000 MRs held at once). */
#define PRELOAD_ARENA (1UL << 20)
#define PRELOAD_MAX_ARENAS 1024
/* A thread's free MRs: fetched this many at a time, given back past
 * twice that. */
#define PRELOAD_BATCH 64

#define PRELOAD_TLS __thread __attribute__((tls_model("initial-exec")))

struct preload_pd {
	struct ibv_pd *_Atomic pd; /* NULL: free; published after ctx */
	struct gdrc_ctx *ctx;
	/* Bumped (under preload_lock) when the PD goes: a parked MR of an
	 * older generation lost its context and is dropped, never put. */
	_Atomic unsigned gen;
};

/* Cache-line aligned: each thread writes its own MRs, never a line
 * another thread's MR shares. */
struct preload_mr {
	struct ibv_mr mr;          /* what the program holds: first */
	atomic_int live;           /* handed out, not yet deregistered */
	unsigned int access;       /* as the program asked */
	uint32_t gacc;             /* the same, in GDRC_ACCESS_ bits */
	unsigned gen;              /* ppd->gen when parked */
	struct gdrc_mr *gmr;
	struct preload_pd *ppd;
	struct preload_mr *next;   /* on a free list */
} __attribute__((aligned(64)));

struct preload_arena {
	/* carved: objects handed out of this arena so far */
	_Atomic unsigned long carved;
};

/* Objects start past the header, each at a multiple of their size. */
#define PRELOAD_FIRST                                                        \
	((sizeof(struct preload_arena) + sizeof(struct preload_mr) - 1) /    \
	 sizeof(struct preload_mr) * sizeof(struct preload_mr))
#define PRELOAD_PER_ARENA                                                    \
	((PRELOAD_ARENA - PRELOAD_FIRST) / sizeof(struct preload_mr))

static pthread_mutex_t preload_lock = PTHREAD_MUTEX_INITIALIZER;
static struct preload_pd preload_pds[PRELOAD_MAX_PDS];
static struct preload_arena *_Atomic preload_arenas[PRELOAD_MAX_ARENAS];
static _Atomic unsigned preload_narenas;
static struct preload_mr *preload_spare; /* under preload_lock */
static atomic_int preload_fork_init;     /* ibv_fork_init was called */
static int preload_forked;               /* in a fork child */
static int preload_mr_on;                /* fixed after the constructor */
static pthread_key_t preload_key;        /* gives a thread's list back */

static PRELOAD_TLS struct preload_pd *tls_pd;     /* last PD used */
static PRELOAD_TLS struct preload_mr *tls_free;   /* free MRs */
static PRELOAD_TLS unsigned tls_nfree;
static PRELOAD_TLS int tls_keyed;                  /* destructor set */
/* One TLS block, so that a reg+dereg finds both with one address. */
static PRELOAD_TLS struct {
	/* The MR this thread deregistered last, its reference still held,
	 * for the next reg of the same buffer (gdrc_mr_reget): the pattern
	 * of a library that registers around every message costs no get
	 * and put. */
	struct preload_mr *parked;
	/* The MR this thread handed out last: a dereg of it is known to be
	 * ours without the arena walk. */
	struct preload_mr *given;
} tls_mr;

static struct {
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	struct ibv_mr *(*reg_mr_iova)(struct ibv_pd *, void *, size_t,
				      uint64_t, int);
	struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *, void *, size_t,
				       uint64_t, unsigned int);
	int (*dereg_mr)(struct ibv_mr *);
	int (*rereg_mr)(struct ibv_mr *, int, struct ibv_pd *, void *, size_t,
			int);
	int (*dealloc_pd)(struct ibv_pd *);
	int (*fork_init)(void);
} real;

/* ------------------------------------------------------------------
 * Tables.
 * ------------------------------------------------------------------ */

static struct preload_pd *pd_find(struct ibv_pd *pd)
{
	for (int i = 0; i < PRELOAD_MAX_PDS; i++)
		if (atomic_load_explicit(&preload_pds[i].pd,
					 memory_order_acquire) == pd)
			return &preload_pds[i];
	return NULL;
}

/* pd_get past this thread's last PD: found, or made.  Not inlined, and
 * cold: its frame (the config, the locks) would cost every hit. */
__attribute__((noinline, cold))
static struct preload_pd *pd_get_slow(struct ibv_pd *pd)
{
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_PD,
				   .pd = pd };
	struct preload_pd *ppd, *slot = NULL;
	struct gdrc_ctx *ctx;
	gdrc_status_t status;

	ppd = pd_find(pd);
	if (ppd)
		return tls_pd = ppd;
	/* With ibv_fork_init in effect, a registration keeps its pages out
	 * of fork children until it is deregistered; a cached one would
	 * keep them out after the program's dereg.  Nothing is cached then
	 * (ibv_fork_init comes before any other verbs call, so before the
	 * first PD is seen here).  libibverbs 44 applies MADV_DONTFORK
	 * after ibv_fork_init even where the kernel copies pinned pages at
	 * fork and ibv_is_fork_initialized says "unneeded": what counts is
	 * that it was called (here, or by libibverbs for RDMAV_FORK_SAFE). */
	if (atomic_load_explicit(&preload_fork_init, memory_order_relaxed) ||
	    ibv_is_fork_initialized() == IBV_FORK_ENABLED) {
		static atomic_flag said = ATOMIC_FLAG_INIT;

		/* A warning: the whole process loses its cache, and the
		 * call usually comes from a library (UCX makes it unless
		 * told UCX_IB_FORK_INIT=n), not from the user. */
		if (!atomic_flag_test_and_set(&said))
			gdrc_log_printf(GDRC_LOG_WARN,
					"preload: ibv_fork_init is in effect "
					"(RDMAV_FORK_SAFE, or a call: UCX makes "
					"one unless UCX_IB_FORK_INIT=n): "
					"registrations pass through uncached");
		return NULL;
	}

	status = gdrc_init(&cfg, &ctx);
	if (status) {
		gdrc_log_printf(GDRC_LOG_WARN,
				"preload: no cache for pd %p (%s): its "
				"registrations pass through",
				(void *)pd, gdrc_status_str(status));
		return NULL;
	}
	pthread_mutex_lock(&preload_lock);
	/* Another thread may have made one meanwhile: use that. */
	ppd = pd_find(pd);
	if (!ppd && (slot = pd_find(NULL)) != NULL) {
		slot->ctx = ctx;
		atomic_store_explicit(&slot->pd, pd, memory_order_release);
	}
	pthread_mutex_unlock(&preload_lock);
	if (slot)
		return tls_pd = slot;
	gdrc_fini(ctx);
	if (!ppd)
		gdrc_log_printf(GDRC_LOG_WARN,
				"preload: more than %d protection domains: "
				"pd %p's registrations pass through",
				PRELOAD_MAX_PDS, (void *)pd);
	return ppd ? (tls_pd = ppd) : NULL;
}

/* The context of pd, made at its first use.  NULL: pass through. */
static inline struct preload_pd *pd_get(struct ibv_pd *pd)
{
	struct preload_pd *ppd = tls_pd;

	if (ppd && atomic_load_explicit(&ppd->pd, memory_order_acquire) == pd)
		return ppd;
	return pd_get_slow(pd);
}

/* Is mr one of ours (an object in one of our arenas)?  No lock. */
static struct preload_mr *mr_ours(struct ibv_mr *mr)
{
	uintptr_t base = (uintptr_t)mr & ~(PRELOAD_ARENA - 1);
	uintptr_t off = (uintptr_t)mr - base;
	unsigned n = atomic_load_explicit(&preload_narenas,
					  memory_order_acquire);

	if (!mr || off < PRELOAD_FIRST ||
	    (off - PRELOAD_FIRST) % sizeof(struct preload_mr))
		return NULL;
	for (unsigned i = 0; i < n; i++)
		if ((uintptr_t)atomic_load_explicit(&preload_arenas[i],
						    memory_order_relaxed) ==
		    base)
			return (struct preload_mr *)mr;
	return NULL;
}

/* A new arena, 1 MiB aligned.  Under preload_lock.  @return 0 or -1. */
static int arena_grow(void)
{
	unsigned n = atomic_load(&preload_narenas);
	uintptr_t p, a;

	if (n == PRELOAD_MAX_ARENAS)
		return -1;
	p = (uintptr_t)mmap(NULL, 2 * PRELOAD_ARENA, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == (uintptr_t)MAP_FAILED)
		return -1;
	a = (p + PRELOAD_ARENA - 1) & ~(PRELOAD_ARENA - 1);
	if (a > p)
		munmap((void *)p, a - p);
	if (a + PRELOAD_ARENA < p + 2 * PRELOAD_ARENA)
		munmap((void *)(a + PRELOAD_ARENA),
		       p + 2 * PRELOAD_ARENA - a - PRELOAD_ARENA);
	atomic_store(&preload_arenas[n], (struct preload_arena *)a);
	atomic_store_explicit(&preload_narenas, n + 1, memory_order_release);
	return 0;
}

/* Under preload_lock: up to PRELOAD_BATCH free MRs onto this thread's
 * list, from the spare list or a fresh part of an arena. */
static void mr_refill(void)
{
	unsigned got = 0;

	while (got < PRELOAD_BATCH) {
		struct preload_mr *m = preload_spare;

		if (m) {
			preload_spare = m->next;
		} else {
			unsigned n = atomic_load(&preload_narenas);
			struct preload_arena *a =
				n ? atomic_load(&preload_arenas[n - 1]) : NULL;
			unsigned long c = a ? atomic_load(&a->carved) : 0;

			if (!a || c == PRELOAD_PER_ARENA) {
				if (arena_grow())
					return;
				continue; /* carve from the new one */
			}
			m = (struct preload_mr *)((char *)a + PRELOAD_FIRST +
						  c * sizeof(*m));
			/* Counted after it is set up: dealloc_pd reads
			 * carved objects without the lock. */
			atomic_init(&m->live, 0);
			atomic_store(&a->carved, c + 1);
		}
		m->next = tls_free;
		tls_free = m;
		tls_nfree++;
		got++;
	}
}

/* A thread's list goes back to the spare list (at its exit, or when it
 * holds too many). */
static void mr_give_back(unsigned keep)
{
	pthread_mutex_lock(&preload_lock);
	while (tls_nfree > keep) {
		struct preload_mr *m = tls_free;

		tls_free = m->next;
		tls_nfree--;
		m->next = preload_spare;
		preload_spare = m;
	}
	pthread_mutex_unlock(&preload_lock);
}

static void mr_free(struct preload_mr *m);

/* Let go of the parked MR (not its context's, if its PD went). */
static void mr_unpark_locked(void)
{
	struct preload_mr *m = tls_mr.parked;

	tls_mr.parked = NULL;
	if (!m)
		return;
	if (m->gen == atomic_load(&m->ppd->gen))
		gdrc_mr_put(m->ppd->ctx, m->gmr);
	m->next = preload_spare;
	preload_spare = m;
}

/* Thread exit.  Under preload_lock, so that ibv_dealloc_pd, which bumps
 * the generation under it, never frees a context under our put. */
static void mr_thread_exit(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&preload_lock);
	mr_unpark_locked();
	pthread_mutex_unlock(&preload_lock);
	mr_give_back(0);
}

static struct preload_mr *mr_alloc(void)
{
	struct preload_mr *m;

	if (!tls_free) {
		if (!tls_keyed) {
			tls_keyed = 1;
			pthread_setspecific(preload_key, (void *)1);
		}
		pthread_mutex_lock(&preload_lock);
		mr_refill();
		pthread_mutex_unlock(&preload_lock);
		if (!tls_free)
			return NULL;
	}
	m = tls_free;
	tls_free = m->next;
	tls_nfree--;
	return m;
}

static void mr_free(struct preload_mr *m)
{
	m->next = tls_free;
	tls_free = m;
	if (++tls_nfree > 2 * PRELOAD_BATCH)
		mr_give_back(PRELOAD_BATCH);
}

/* Does the program still hold an MR of ours on ppd?  No lock needed: an
 * object is counted in carved only once it is set up. */
static int pd_busy(const struct preload_pd *ppd)
{
	unsigned n = atomic_load(&preload_narenas);

	for (unsigned i = 0; i < n; i++) {
		struct preload_arena *a = atomic_load(&preload_arenas[i]);
		unsigned long c = atomic_load(&a->carved);
		struct preload_mr *m =
			(struct preload_mr *)((char *)a + PRELOAD_FIRST);

		for (unsigned long k = 0; k < c; k++)
			if (atomic_load(&m[k].live) && m[k].ppd == ppd)
				return 1;
	}
	return 0;
}

/* ------------------------------------------------------------------
 * The interposed verbs.
 * ------------------------------------------------------------------ */

/* A reg past the parked MR: a get from the cache.  Not inlined:
 * its frame would cost every reget. */
__attribute__((noinline))
static struct ibv_mr *mr_cached_get(struct ibv_pd *pd, void *addr,
				    size_t len, unsigned int access)
{
	uint32_t gacc = 0;
	struct preload_pd *ppd;
	struct preload_mr *pmr;
	struct gdrc_mr *gmr;
	gdrc_status_t status;

	/* Verbs refuses remote write or atomic without local write (EINVAL);
	 * the cache would add it: such a request goes through, to fail as
	 * it would without us. */
	if (!preload_mr_on || preload_forked || !pd || !addr || !len ||
	    (access & ~(PRELOAD_ACCESS | IBV_ACCESS_OPTIONAL_RANGE)) ||
	    ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(access & IBV_ACCESS_LOCAL_WRITE)))
		return NULL;
	ppd = pd_get(pd);
	if (!ppd)
		return NULL;
	if (access & IBV_ACCESS_LOCAL_WRITE)
		gacc |= GDRC_ACCESS_LOCAL_WRITE;
	if (access & IBV_ACCESS_REMOTE_WRITE)
		gacc |= GDRC_ACCESS_REMOTE_WRITE;
	if (access & IBV_ACCESS_REMOTE_READ)
		gacc |= GDRC_ACCESS_REMOTE_READ;
	if (access & IBV_ACCESS_REMOTE_ATOMIC)
		gacc |= GDRC_ACCESS_REMOTE_ATOMIC;
	pmr = mr_alloc();
	if (!pmr)
		return NULL;
	status = gdrc_mr_get(ppd->ctx, addr, len, gacc, 0, &gmr);
	if (status) {
		mr_free(pmr);
		return NULL;
	}
	pmr->mr = (struct ibv_mr){
		.context = pd->context,
		.pd = pd,
		.addr = addr,
		.length = len,
		.lkey = gdrc_mr_lkey(gmr),
		.rkey = gdrc_mr_rkey(gmr),
	};
	pmr->gmr = gmr;
	pmr->ppd = ppd;
	pmr->access = access;
	pmr->gacc = gacc;
	atomic_store_explicit(&pmr->live, 1, memory_order_release);
	return &(tls_mr.given = pmr)->mr;
}

/* Which libibverbs entry a reg came through, to pass it on to. */
enum reg_entry { REG_PLAIN, REG_IOVA, REG_IOVA2 };

/* A reg the parked MR does not serve: from the cache, else passed on. */
__attribute__((noinline))
static struct ibv_mr *reg_slow(struct ibv_pd *pd, void *addr, size_t len,
			       uint64_t iova, unsigned int access,
			       enum reg_entry entry)
{
	struct ibv_mr *mr = NULL;

	if (iova == (uintptr_t)addr)
		mr = mr_cached_get(pd, addr, len, access);
	if (mr)
		return mr;
	if (entry == REG_PLAIN)
		return real.reg_mr(pd, addr, len, (int)access);
	if (entry == REG_IOVA)
		return real.reg_mr_iova(pd, addr, len, iova, (int)access);
	return real.reg_mr_iova2(pd, addr, len, iova, access);
}

/* The parked MR pmr, of the reg's PD and access, no longer serves it:
 * let go of, and the reg made anew. */
__attribute__((noinline))
static struct ibv_mr *reg_stale(struct preload_mr *pmr, void *addr,
				size_t len, enum reg_entry entry)
{
	struct ibv_pd *pd = pmr->mr.pd;
	unsigned int access = pmr->access;

	gdrc_mr_put(pmr->ppd->ctx, pmr->gmr);
	mr_free(pmr);
	return reg_slow(pd, addr, len, (uintptr_t)addr, access, entry);
}

/*
 * Every reg: first the MR this thread deregistered last, if it was of
 * this PD with this access (and the PD was not deallocated since: gen).
 * Its reference is still held, and gdrc_mr_reget says whether it still
 * serves this range.  Its access passed mr_cached_get's checks when it
 * was made.  Inlined into each entry, with the rest out of line: what
 * is left is a leaf's work around one call.
 */
static inline __attribute__((always_inline)) struct ibv_mr *
reg_mr(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
       unsigned int access, enum reg_entry entry)
{
	struct preload_mr *pmr = tls_mr.parked;

	if (!pmr || pmr->mr.pd != pd || pmr->access != access ||
	    iova != (uintptr_t)addr || preload_forked ||
	    pmr->gen != atomic_load_explicit(&pmr->ppd->gen,
					     memory_order_relaxed))
		return reg_slow(pd, addr, len, iova, access, entry);
	tls_mr.parked = NULL;
	if (__builtin_expect(gdrc_mr_reget(pmr->ppd->ctx, pmr->gmr, addr, len,
					   pmr->gacc) != GDRC_OK, 0))
		return reg_stale(pmr, addr, len, entry);
	pmr->mr.addr = addr;
	pmr->mr.length = len;
	atomic_store_explicit(&pmr->live, 1, memory_order_relaxed);
	tls_mr.given = pmr;
	return &pmr->mr;
}

GDRC_API struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
				   size_t length, int access)
{
	return reg_mr(pd, addr, length, (uintptr_t)addr, (unsigned)access,
		      REG_PLAIN);
}

GDRC_API struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
					size_t length, uint64_t iova,
					int access)
{
	return reg_mr(pd, addr, length, iova, (unsigned)access, REG_IOVA);
}

GDRC_API struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
					 size_t length, uint64_t iova,
					 unsigned int access)
{
	return reg_mr(pd, addr, length, iova, access, REG_IOVA2);
}

/* Park pmr, deregistered, as this thread's: its reference held, and its
 * PD's generation noted (reg_mr tells a PD deallocated since by it). */
static inline void mr_park(struct preload_mr *pmr)
{
	pmr->gen = atomic_load_explicit(&pmr->ppd->gen, memory_order_relaxed);
	tls_mr.parked = pmr;
}

/* A dereg past dereg's common case: any MR, ours or not, with another
 * parked or none. */
__attribute__((noinline))
static int dereg_slow(struct ibv_mr *mr)
{
	struct preload_mr *pmr = mr_ours(mr), *old;

	if (!pmr)
		return real.dereg_mr(mr);
	/* A second dereg of the same MR is the program's error: refused
	 * (where libibverbs would use the freed MR).  (Two threads
	 * deregistering it at once are not told apart: no atomic exchange
	 * on every dereg for a program that races itself.) */
	if (!atomic_load_explicit(&pmr->live, memory_order_relaxed)) {
		errno = EINVAL;
		return EINVAL;
	}
	atomic_store_explicit(&pmr->live, 0, memory_order_relaxed);
	/* Parked, reference held, for the next reg of this buffer.  A
	 * parked MR of another PD stays: it is let go of only while its
	 * own PD is in use (or, under the lock, at thread exit). */
	if (tls_mr.parked && tls_mr.parked->ppd != pmr->ppd) {
		gdrc_mr_put(pmr->ppd->ctx, pmr->gmr);
		mr_free(pmr);
		return 0;
	}
	old = tls_mr.parked;
	mr_park(pmr);
	if (old) {
		/* The same PD: gone only if the program deallocated it. */
		if (old->gen == pmr->gen)
			gdrc_mr_put(old->ppd->ctx, old->gmr);
		mr_free(old);
	}
	return 0;
}

/* The common case inline: the MR this thread was handed last, live,
 * and nothing parked: it is parked (dereg_slow's rules, in short). */
GDRC_API int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct preload_mr *pmr = tls_mr.given;

	if (!pmr || mr != &pmr->mr || tls_mr.parked ||
	    !atomic_load_explicit(&pmr->live, memory_order_relaxed))
		return dereg_slow(mr);
	atomic_store_explicit(&pmr->live, 0, memory_order_relaxed);
	mr_park(pmr);
	return 0;
}

/*
 * A cached MR is re-registered by getting a registration for what it
 * becomes (its new translation, PD or access) and moving that into the
 * program's MR, whose keys may change, as the verbs man page allows.
 * libibverbs' own checks of the arguments come first, with its result.
 * What the cache cannot serve fails as the driver's refusal would
 * (IBV_REREG_MR_ERR_CMD), and the MR is left as it was.
 */
GDRC_API int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
			  void *addr, size_t length, int access)
{
	struct preload_mr *pmr = mr_ours(mr), *fresh;
	struct gdrc_mr *old_gmr;
	struct preload_pd *old_ppd;

	if (!pmr)
		return real.rereg_mr(mr, flags, pd, addr, length, access);
	if (!atomic_load_explicit(&pmr->live, memory_order_relaxed) ||
	    (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !addr)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (!(flags & IBV_REREG_MR_CHANGE_PD))
		pd = mr->pd;
	if (!(flags & IBV_REREG_MR_CHANGE_TRANSLATION)) {
		addr = mr->addr;
		length = mr->length;
	}
	if (!(flags & IBV_REREG_MR_CHANGE_ACCESS))
		access = (int)pmr->access;
	errno = 0;
	fresh = (struct preload_mr *)mr_cached_get(pd, addr, length,
						   (unsigned)access);
	if (!fresh) {
		if (!errno)
			errno = EINVAL;
		return IBV_REREG_MR_ERR_CMD;
	}
	old_gmr = pmr->gmr;
	old_ppd = pmr->ppd;
	pmr->mr = fresh->mr;
	pmr->gmr = fresh->gmr;
	pmr->ppd = fresh->ppd;
	pmr->access = fresh->access;
	pmr->gacc = fresh->gacc;
	atomic_store_explicit(&fresh->live, 0, memory_order_relaxed);
	mr_free(fresh);
	gdrc_mr_put(old_ppd->ctx, old_gmr);
	return 0;
}

/* Noted, so that nothing is cached from then on (pd_get). */
GDRC_API int ibv_fork_init(void)
{
	int ret = real.fork_init ? real.fork_init() : ENOSYS;

	if (!ret)
		atomic_store(&preload_fork_init, 1);
	return ret;
}

/* The PD's cached registrations go first; while the program still holds
 * MRs of ours on it, the PD is busy, as it would be without us. */
GDRC_API int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct preload_pd *ppd;
	struct gdrc_ctx *ctx = NULL;

	pthread_mutex_lock(&preload_lock);
	ppd = pd ? pd_find(pd) : NULL;
	if (ppd && pd_busy(ppd)) {
		pthread_mutex_unlock(&preload_lock);
		errno = EBUSY; /* as the kernel's refusal sets it */
		return EBUSY;
	}
	if (ppd) {
		/* This thread's parked MR of the PD lets go first, or
		 * gdrc_fini would count it as a registration still held.
		 * (Other threads' parked ones are released by the fini.) */
		if (tls_mr.parked && tls_mr.parked->ppd == ppd)
			mr_unpark_locked();
		ctx = ppd->ctx;
		atomic_fetch_add(&ppd->gen, 1);
		atomic_store(&ppd->pd, NULL);
	}
	pthread_mutex_unlock(&preload_lock);
	if (tls_pd == ppd)
		tls_pd = NULL;
	gdrc_fini(ctx);
	return real.dealloc_pd(pd);
}

/* ------------------------------------------------------------------
 * Load time.
 * ------------------------------------------------------------------ */

/*
 * A fork child: the parent's contexts answer GDRC_ERR_FORK there, and a
 * thread that held preload_lock at the fork (growing an arena, taking
 * the spare list) is not in the child: the lock is made usable again
 * for the MRs the child deregisters, and every registration passes
 * through.
 */
static void preload_atfork_child(void)
{
	pthread_mutex_init(&preload_lock, NULL);
	preload_forked = 1;
}

static int env_on(const char *name)
{
	const char *v = getenv(name);

	return v && strcmp(v, "0");
}

__attribute__((constructor)) static void preload_init(void)
{
	char on[8];
	gdrc_status_t status;

	real.reg_mr = dlsym(RTLD_NEXT, "ibv_reg_mr");
	real.reg_mr_iova = dlsym(RTLD_NEXT, "ibv_reg_mr_iova");
	real.reg_mr_iova2 = dlsym(RTLD_NEXT, "ibv_reg_mr_iova2");
	real.dereg_mr = dlsym(RTLD_NEXT, "ibv_dereg_mr");
	real.rereg_mr = dlsym(RTLD_NEXT, "ibv_rereg_mr");
	real.dealloc_pd = dlsym(RTLD_NEXT, "ibv_dealloc_pd");
	real.fork_init = dlsym(RTLD_NEXT, "ibv_fork_init");
	/* libibverbs calls ibv_fork_init itself, inside, for these (set
	 * and not "0"). */
	if (env_on("RDMAV_FORK_SAFE") || env_on("IBV_FORK_SAFE"))
		atomic_store(&preload_fork_init, 1);
	if (pthread_key_create(&preload_key, mr_thread_exit) ||
	    pthread_atfork(NULL, NULL, preload_atfork_child))
		return; /* nothing cached: every call passes through */
	status = gdrc_install_hooks();
	if (status == GDRC_ERR_INVALID_PARAM ||
	    gdrc_knob_value("GDRC_PRELOAD_MR", on, sizeof(on))) {
		gdrc_log_printf(GDRC_LOG_ERROR,
				"preload: bad GDRC_* settings: caching nothing");
		return;
	}
	preload_mr_on = !strcmp(on, "1") && real.reg_mr && real.reg_mr_iova &&
			real.reg_mr_iova2 && real.dereg_mr && real.rereg_mr &&
			real.dealloc_pd;
	gdrc_log_printf(GDRC_LOG_DEBUG, "preload: loaded; ibv_reg_mr %s",
			preload_mr_on ? "cached" : "passed through");
}
