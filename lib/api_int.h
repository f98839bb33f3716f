/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * api_int.h - what the files of the API layer share: the context
 * (struct gdrc_ctx), the inline helpers every public call opens with
 * (ctx_open: from the pointer the caller holds to the live context;
 * range_ok), and the few functions one file of the layer calls in
 * another.  The API layer is where the modules meet: it may include any
 * of them (lib/README.md).  Its files, by concern:
 *
 *   api.c          a context's life: gdrc_init, gdrc_fini, the memory
 *                  of finished contexts, fork, the misuse policy, the
 *                  statistics a context prints at its end;
 *   api_get.c      gdrc_mr_get, gdrc_mr_reget, gdrc_mr_put: the hot
 *                  path and, below it, what a miss does;
 *   api_sources.c  the event sources (memory hooks, CUDA free hooks,
 *                  gdrcache.ko, userfaultfd, gdrc_invalidate): set up at
 *                  gdrc_init, checked at slow gets, and their statuses;
 *   api_query.c    the calls that report (queries, statuses, statistics,
 *                  knobs) and gdrc_set_free_fn;
 *   api_backend.c  which backend registers what, chosen at gdrc_init;
 *   api_cufile.c   cuFile contexts and their step in the CUDA free.
 */
#ifndef GDRC_API_INT_H
#define GDRC_API_INT_H

#include <gdrcache.h>

#include "cache/cache.h"
#include "config/config.h"
#include "cuda/cuda_loader.h"
#include "gdrc_int.h"
#include "pin/pin.h"

struct gdrc_kchan;

/* Backends by enum gdrc_backend value (NONE..CUFILE); the GPU ones
 * are DMABUF..KMOD (cufile registers both kinds, in a context of its
 * own). */
#define GDRC_BACKENDS (GDRC_BACKEND_CUFILE + 1)
#define GDRC_GPU_BACKEND_LAST GDRC_BACKEND_KMOD

struct gdrc_ctx {
	struct gdrc_cache cache;  /* first: the fast path reads it */
	struct gdrc_knobs knobs;  /* fixed after init */
	const struct gdrc_cuda *cuda; /* NULL: no GPU support */
	struct gdrc_kchan *kchan; /* gdrcache.ko's channel, or NULL */
	char gpu_reason[256];     /* why cuda is NULL */
	char kmod_why[256];       /* why kchan is NULL */
	int cuda_hooks;           /* relies on the CUDA free hooks:
				   * GDRC_MEM_HOOKS=auto with a driver */
	int hooks_slot;           /* its subscription to the hooks'
				   * events (api_sources.c), or -1 */
	_Atomic uint64_t ucm_events; /* host events from UCX's UCM (hook context) */
	_Atomic uint64_t uffd_events; /* host events read from userfaultfd */
	/* Backends, fixed after init: used (1) or why not. */
	int be_used[GDRC_BACKENDS];
	char be_why[GDRC_BACKENDS][192];
	int gpu_refused;          /* no GPU backend works: refuse GPU gets */
	struct gdrc_pin_uring *uring; /* the io_uring backend's, or NULL */
	/* The cufile backend's (api_cufile.c): the library, the base
	 * table, and the free callback (gdrc_set_free_fn; changed under
	 * the cufile context lock, read by the CUDA free path). */
	const struct gdrc_cufile *cufile;
	struct gdrc_pin_cufile *cufile_be;
	gdrc_free_fn free_fn;
	void *free_arg;
	uint32_t cufile_mem;      /* GDRC_CUFILE_* asked for; 0: no cuFile */
#ifdef GDRC_HAVE_VERBS
	struct gdrc_pin_dmabuf_be dmabuf_be;
#endif
};

/* A context is its cache, first (the cache registry holds caches). */
_Static_assert(offsetof(struct gdrc_ctx, cache) == 0,
	       "a context begins with its cache");

/*
 * The pointer a caller holds is not the context's address (api.c, "Misuse"):
 * a context is CTX_ALIGN-aligned, and gdrc_init hands out a pointer into its
 * first CTX_ALIGN bytes, at one of CTX_TAGS cache lines chosen by the
 * cache's uid.  The cache keeps that pointer as its key; gdrc_fini zeroes
 * the key.  So a call finds the context by masking the pointer, and knows
 * the pointer is live when it equals the key.
 */
#define CTX_ALIGN 4096
#define CTX_TAGS (CTX_ALIGN / GDRC_CACHELINE)

/* The pointer gdrc_init hands out for ctx. */
static inline struct gdrc_ctx *ctx_pub(struct gdrc_ctx *ctx)
{
	return (struct gdrc_ctx *)((uintptr_t)ctx +
				   (ctx->cache.uid % CTX_TAGS) *
					   GDRC_CACHELINE);
}

/* The context pub lies in (not checked). */
static inline struct gdrc_ctx *ctx_base(struct gdrc_ctx *pub)
{
	return (struct gdrc_ctx *)((uintptr_t)pub &
				   ~(uintptr_t)(CTX_ALIGN - 1));
}

/* The live context pub was handed out for, or NULL (pub not NULL): one
 * load, one compare. */
static inline struct gdrc_ctx *ctx_of(struct gdrc_ctx *pub)
{
	struct gdrc_ctx *ctx = ctx_base(pub);

	return ctx->cache.key == (uintptr_t)pub ? ctx : NULL;
}

/*
 * api.c: report a misuse found by the public call named call (the text
 * printf-style): one error line, counted (GDRC_STAT_MISUSE), then abort()
 * or back to the caller, which changes nothing (GDRC_MISUSE).  Never in
 * hook context.  gdrc_api_ctx_misuse: pub is not a live context.
 */
void gdrc_api_misuse(const char *call, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void gdrc_api_ctx_misuse(const char *call, const struct gdrc_ctx *pub);

/*
 * How every public call that takes a context begins: the live context
 * behind pub, or NULL.  NULL pub is plain bad input; any other pointer
 * that is not a live context is a misuse, reported under call's name
 * before NULL comes back.  Either way the caller returns
 * GDRC_ERR_INVALID_PARAM (or nothing).
 */
static inline struct gdrc_ctx *ctx_open(struct gdrc_ctx *pub,
					const char *call)
{
	struct gdrc_ctx *ctx;

	if (!pub)
		return NULL;
	ctx = ctx_of(pub);
	if (gdrc_unlikely(!ctx))
		gdrc_api_ctx_misuse(call, pub);
	return ctx;
}

/* The context a live cache of the registry belongs to, or NULL for one
 * not (yet) a context's: made by a test below the API, or in gdrc_init
 * before its key is set.  For walks over every cache (gdrc_cache_each). */
static inline struct gdrc_ctx *ctx_of_cache(struct gdrc_cache *c)
{
	return c->key ? (struct gdrc_ctx *)c : NULL;
}

/* Room left at the top of the address space for rounding a range out. */
#define GDRC_MAX_ROUNDING (64 * 1024)

/* [addr, addr + len) must be non-empty, not wrap, and leave room to be
 * rounded out to pages. */
static inline int range_ok(const void *addr, size_t len)
{
	const uintptr_t top = UINTPTR_MAX - GDRC_MAX_ROUNDING;
	uintptr_t start = (uintptr_t)addr, end = start + len;

	/* 1 <= start < end <= top: two compares of the values less one,
	 * which wraps a zero past the bound (a start or length of zero,
	 * an end that wrapped to zero; one that wrapped further is below
	 * start). */
	return (start - 1 < end - 1) & (end - 1 < top);
}

/* What a put, a query or a key read says of an mr that is not a live
 * registration or handle (its magic is wrong). */
#define MR_NOT_LIVE                                                          \
	"is not a registration (or its memory went back to its context's "   \
	"pool)"

/*
 * api.c: the context's statistics, the cache's counters and the
 * context's own (events by source, misuses), into v[GDRC_STAT_COUNT].
 * _settled: first waits for unmaps still posting their events, as a get
 * does, so that an unmap that returned is counted (with userfaultfd the
 * reader posts after the unmapping thread went on); for the calls that
 * report them.  Not at exit or at gdrc_fini, which may run in a signal
 * handler that must not wait for a window it may have interrupted.
 */
void gdrc_api_ctx_stats(struct gdrc_ctx *ctx, uint64_t *v);
void gdrc_api_ctx_stats_settled(struct gdrc_ctx *ctx, uint64_t *v);

/*
 * api_sources.c, at gdrc_init: open gdrcache.ko's channel if it is there,
 * decide whether host memory is cached (p->cache_host: only while its
 * frees can be seen), set up userfaultfd when asked for, load the CUDA
 * driver and hook its frees.
 * @return GDRC_OK (with or without GPU support), or GDRC_ERR_UNSUPPORTED
 *         when GDRC_VALIDATE=hooks asks for CUDA free hooks that failed.
 */
gdrc_status_t gdrc_api_sources_open(struct gdrc_ctx *ctx,
				    struct gdrc_cache_params *p);

/*
 * api_sources.c, at the end of gdrc_init (the cache made): subscribe ctx
 * to the memory hooks' events when it relies on them (ctx->hooks_slot;
 * gdrc_fini unsubscribes).  @return GDRC_OK, or GDRC_ERR_LIMIT when every
 * subscription slot is taken.
 */
gdrc_status_t gdrc_api_sources_subscribe(struct gdrc_ctx *ctx);

/*
 * api_sources.c: before a slow get or an invalidation looks in the
 * cache, check that no other library patched over our memory hooks or
 * CUDA free hooks.  If one did, the frees since may have gone unseen:
 * what relied on those hooks is dropped, and the hooks are taken back
 * or host memory is no longer cached.  One load when nothing happened.
 */
void gdrc_api_hooks_check(void);

/*
 * api_sources.c: may a GPU registration rely on the CUDA free hooks
 * alone (no BUFFER_ID check at each hit)?  Only once their self test
 * passed; it runs here, in cu_ctx, if it could not run before (no CUDA
 * context was current at gdrc_init).
 */
int gdrc_api_cuhooks_ok(const struct gdrc_cuda *cu, CUcontext cu_ctx);

/*
 * Init time (api_backend.c): choose the host backend (cufile when asked
 * for, io_uring with a ring, verbs with a PD, else none) from
 * GDRC_BACKEND and the config, before the rest
 * of the setup.  A ring's table is registered here (ctx->uring, its
 * size the host limit of registrations alive).
 * @return GDRC_OK; GDRC_ERR_UNSUPPORTED when verbs is asked for without
 *         a PD or without libibverbs; with a ring, what
 *         gdrc_pin_uring_open returns, or GDRC_ERR_UNSUPPORTED (built
 *         without liburing, GDRC_BACKEND not auto); with cufile,
 *         what gdrc_cufile_get returns, or GDRC_ERR_UNSUPPORTED
 *         (GDRC_BACKEND neither auto nor cufile).  Logged.
 */
gdrc_status_t gdrc_api_pick_host(struct gdrc_ctx *ctx, struct ibv_pd *pd,
				 struct io_uring *ring, uint32_t slots,
				 int cufile, struct gdrc_cache_params *p);

/* Release what gdrc_api_pick_host took (the ring's table); forked: in a
 * fork child, where the table is the parent's. */
void gdrc_api_backend_close(struct gdrc_ctx *ctx, int forked);

/*
 * Init time, once the driver and the kernel channel are set up: try the
 * GPU backends in GDRC_BACKEND's order and record why each one was not
 * used; set p->gpu_ops.  Never fails: when none works, GPU gets are
 * refused later (gpu_refused).
 */
void gdrc_api_pick_gpu(struct gdrc_ctx *ctx, struct ibv_pd *pd,
		       struct gdrc_cache_params *p);

/* The reasons, one line, for the GPU refusal's log message. */
void gdrc_api_gpu_refusal(const struct gdrc_ctx *ctx, char *buf, size_t len);

/*
 * api_cufile.c: a context that registers with cuFile.  enlist: at the end
 * of gdrc_init, the context joins the list the CUDA free path drains
 * (and the free path is hooked in, once per process); forget: at the
 * start of gdrc_fini, it leaves it (waiting for a free in progress).
 */
void gdrc_api_cufile_enlist(struct gdrc_ctx *ctx);
void gdrc_api_cufile_forget(struct gdrc_ctx *ctx);

/* gdrc_set_free_fn's work, arguments checked. */
void gdrc_api_cufile_set_free(struct gdrc_ctx *ctx, gdrc_free_fn fn,
			      void *arg);

/* A miss's request in a cuFile context: host memory refused where the
 * context registers GPU memory only (GDRC_ERR_UNSUPPORTED, logged; the
 * other way round is gpu_refused), every access right (a cuFile
 * registration has none to differ in). */
gdrc_status_t gdrc_api_cufile_req(struct gdrc_ctx *ctx,
				  struct gdrc_cache_req *req);

#endif /* GDRC_API_INT_H */
