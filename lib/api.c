// SPDX-License-Identifier: BSD-3-Clause
/*
 * api.c - the public entry points.  Checks arguments, then hands work to
 * the modules; the only file that wires modules together (lib/README.md).
 *
 * Process-wide state here: finished contexts' memory (ctx_dead), under
 * ctx_lock, and the fork protocol's one owner (atfork_*), whose prepare
 * handler takes ctx_lock and then the cache registry's lock, so that the
 * child finds both consistent; the child handler marks every cache
 * forked (gdrc_cache_fork_child) without taking any other lock (other
 * threads' locks may be held forever in the child).  The live contexts
 * are the cache registry's (gdrc_cache_each): there is no second one.
 *
 * Lock order: ctx_lock, then the cache registry's lock (only in the fork
 * handler: neither is held while taking the other elsewhere), then a
 * cache's locks (cache.h).  cuhooks_test_lock is taken alone.
 *
 * Misuse (GDRC_MISUSE, docs/env.md).  What gdrc_init hands out points
 * into its context's first CTX_ALIGN bytes, at a line chosen by the
 * cache's uid (ctx_pub), and is kept in the cache's key; every call
 * finds the context by masking and accepts the pointer only if it is
 * the key (ctx_of: one load, of the line the fast path reads first
 * anyway).  gdrc_fini zeroes the key, and a finished context's memory
 * is never given back to malloc: it waits, first in first out, for a
 * later gdrc_init, which gives it a new uid.  So a call on a finished
 * context reads memory that is still there and fails the check, and
 * after the memory's reuse it still fails unless the new uid chooses
 * the old line (one reuse in CTX_TAGS).  Handles are checked by the
 * cache (gdrc_cache_put_fast, gdrc_cache_put_slow).  A misuse is
 * logged, counted, and then aborts or is ignored, whatever call found
 * it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "classify/classify.h"
#include "config/config.h"
#include "cuda/cuda_loader.h"
#include "gdrc_int.h"
#include "hooks/hooks.h"
#include "kchan/kchan.h"
#include "log/log.h"
#include "req/req.h"
#include "stats/stats.h"
#include "api_int.h"


#define GDRC_ACCESS_ALL                                                      \
	(GDRC_ACCESS_LOCAL_WRITE | GDRC_ACCESS_REMOTE_WRITE |                \
	 GDRC_ACCESS_REMOTE_READ | GDRC_ACCESS_REMOTE_ATOMIC)
#define GDRC_GET_ALL (GDRC_GET_UNCACHED)
#define GDRC_CONFIG_FIELD_ALL                                                \
	(GDRC_CONFIG_FIELD_PD | GDRC_CONFIG_FIELD_MAX_REGIONS |              \
	 GDRC_CONFIG_FIELD_MAX_BYTES | GDRC_CONFIG_FIELD_IO_URING |          \
	 GDRC_CONFIG_FIELD_IO_URING_SLOTS | GDRC_CONFIG_FIELD_CUFILE)

/* Room left at the top of the address space for rounding a range out. */
#define GDRC_MAX_ROUNDING (64 * 1024)

/* Contexts: alignment, and the lines the public pointer may point at. */
#define CTX_ALIGN 4096
#define CTX_TAGS (CTX_ALIGN / GDRC_CACHELINE)
/* Finished contexts waiting for reuse: at most every context that ever
 * lived at once, plus one that failed because the registry was full. */
#define CTX_DEAD_MAX (GDRC_CACHES_MAX + 1)

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
/* Finished contexts, oldest first (a ring, under ctx_lock). */
static struct gdrc_ctx *ctx_dead[CTX_DEAD_MAX];
static unsigned ctx_dead_first, ctx_dead_count;

#ifdef NDEBUG
#define MISUSE_BUILD_DEFAULT GDRC_KNOB_MISUSE_WARN
#else
#define MISUSE_BUILD_DEFAULT GDRC_KNOB_MISUSE_ABORT
#endif
/* GDRC_MISUSE, resolved: the last gdrc_init's, else the build's. */
static atomic_int misuse_policy = MISUSE_BUILD_DEFAULT;
static _Atomic uint64_t misuse_seen; /* GDRC_STAT_MISUSE */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static int hooks_lost_seen; /* ctx_lock */

/*
 * The CUDA free hooks' self test (process-wide, like the hooks): it needs
 * a current context, so it runs at the first gdrc_init that has one or
 * else at the first GPU miss.  Until it passed, no GPU registration goes
 * without tag checks.
 */
enum { CUHOOKS_UNTESTED, CUHOOKS_OK, CUHOOKS_BAD };
static pthread_mutex_t cuhooks_test_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int cuhooks_state;  /* written under cuhooks_test_lock */
static char cuhooks_test_why[256]; /* cuhooks_test_lock; final once BAD */

/*
 * A misuse was detected in call: one error line, counted, then abort()
 * or back to the caller, which changes nothing.  Never in hook context.
 */
/* Not GDRC_NOINLINE: a call to a cold function on the context check
 * that opens every call made GCC 12 move the callers' whole hit path
 * into .text.unlikely, behind a jump and six saved registers. */
__attribute__((noinline, format(printf, 2, 3)))
static void misuse(const char *call, const char *fmt, ...)
{
	int stop = atomic_load_explicit(&misuse_policy, memory_order_relaxed) ==
		   GDRC_KNOB_MISUSE_ABORT;
	char what[192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	atomic_fetch_add_explicit(&misuse_seen, 1, memory_order_relaxed);
	gdrc_log_write(GDRC_LOG_ERROR, "%s: misuse: %s; %s", call, what,
		       stop ? "aborting (GDRC_MISUSE=abort)" :
			      "ignored, nothing changed (GDRC_MISUSE=warn)");
	if (stop)
		abort();
}

/* The pointer gdrc_init hands out for ctx (see the file comment). */
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

__attribute__((noinline)) /* not cold: see misuse */
static void ctx_misuse(const char *call, const struct gdrc_ctx *pub)
{
	misuse(call, "context %p is finished (gdrc_fini) or was never one",
	       (const void *)pub);
}

/* ctx_of for a call: NULL pub is plain bad input (callers that checked
 * it already lose nothing), anything else that is not a live context a
 * misuse, said under call's name. */
static inline struct gdrc_ctx *ctx_open(struct gdrc_ctx *pub,
					const char *call)
{
	struct gdrc_ctx *ctx;

	if (!pub)
		return NULL;
	ctx = ctx_of(pub);
	if (gdrc_unlikely(!ctx))
		ctx_misuse(call, pub);
	return ctx;
}

/* Memory for a context: the oldest finished one, else new. */
static struct gdrc_ctx *ctx_alloc(void)
{
	struct gdrc_ctx *ctx = NULL;
	void *mem;

	pthread_mutex_lock(&ctx_lock);
	if (ctx_dead_count) {
		ctx = ctx_dead[ctx_dead_first];
		ctx_dead_first = (ctx_dead_first + 1) % CTX_DEAD_MAX;
		ctx_dead_count--;
	}
	pthread_mutex_unlock(&ctx_lock);
	if (!ctx) {
		size_t size = (sizeof(*ctx) + CTX_ALIGN - 1) &
			      ~(size_t)(CTX_ALIGN - 1);

		if (posix_memalign(&mem, CTX_ALIGN, size))
			return NULL;
		ctx = mem;
	}
	memset(ctx, 0, sizeof(*ctx));
	return ctx;
}

/* A finished context: its key and uid gone (every pointer to it now
 * fails ctx_of, and no thread's remembered handle matches it), its
 * memory kept for a later gdrc_init. */
static void ctx_bury(struct gdrc_ctx *ctx)
{
	ctx->cache.key = 0;
	ctx->cache.uid = 0;
	pthread_mutex_lock(&ctx_lock);
	if (ctx_dead_count < CTX_DEAD_MAX) {
		ctx_dead[(ctx_dead_first + ctx_dead_count) % CTX_DEAD_MAX] =
			ctx;
		ctx_dead_count++;
		ctx = NULL;
	}
	pthread_mutex_unlock(&ctx_lock);
	free(ctx); /* not reached: see CTX_DEAD_MAX */
}

static void atfork_prepare(void)
{
	pthread_mutex_lock(&ctx_lock);
	gdrc_cache_fork_prepare();
}

static void atfork_parent(void)
{
	gdrc_cache_fork_parent();
	pthread_mutex_unlock(&ctx_lock);
}

static void atfork_child(void)
{
	gdrc_cache_fork_child();
	gdrc_log_fork_child();
	pthread_mutex_unlock(&ctx_lock);
}

/* A context is its cache, first (the registry holds caches). */
_Static_assert(offsetof(struct gdrc_ctx, cache) == 0,
	       "a context begins with its cache");

/* The context a live cache of the registry belongs to, or NULL for one
 * not (yet) a context's: made by a test below the API, or in gdrc_init
 * before its key is set. */
static struct gdrc_ctx *ctx_of_cache(struct gdrc_cache *c)
{
	return c->key ? (struct gdrc_ctx *)c : NULL;
}

static void atfork_install(void)
{
	if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child))
		gdrc_warn("pthread_atfork failed: fork children are not "
			  "protected from their parent's registrations");
}

/* Hook context: see hooks.h.  Only queues. */
GDRC_HOOK_CONTEXT
static void ctx_mem_event(uintptr_t start, uintptr_t end, int source,
			  void *arg)
{
	struct gdrc_ctx *ctx = arg;

	if (source == GDRC_HOOKS_SRC_UCM)
		atomic_fetch_add_explicit(&ctx->ucm_events, 1,
					  memory_order_relaxed);
	else if (source == GDRC_HOOKS_SRC_UFFD)
		atomic_fetch_add_explicit(&ctx->uffd_events, 1,
					  memory_order_relaxed);
	gdrc_cache_post_event(&ctx->cache, start, end,
			      source == GDRC_HOOKS_SRC_CUDA ? GDRC_INVQ_CUDA :
							      GDRC_INVQ_HOST);
}

/* gdrc_cache_each: post "everything" of class *arg to each context that
 * relies on the hooks of that class. */
static void ctx_flush_one(struct gdrc_cache *c, void *arg)
{
	struct gdrc_ctx *ctx = ctx_of_cache(c);
	int cls = *(const int *)arg;

	if (ctx && (cls == GDRC_INVQ_CUDA ? ctx->cuda_hooks :
					    ctx->hooks_slot >= 0))
		gdrc_cache_post_event(c, 0, UINTPTR_MAX, cls);
}

/*
 * Another library rewrote a CUDA free function we hooked: frees may go
 * unseen from now on.  Every GPU registration trusted to the hooks goes,
 * and new ones are tag checked (cuhooks_state BAD).
 */
static void cuhooks_lost(void)
{
	pthread_mutex_lock(&cuhooks_test_lock);
	if (atomic_load(&cuhooks_state) != CUHOOKS_BAD) {
		snprintf(cuhooks_test_why, sizeof(cuhooks_test_why),
			 "a cuda free function was rewritten by another library after the hooks went in");
		atomic_store(&cuhooks_state, CUHOOKS_BAD);
		gdrc_warn("%s: gpu hits are tag checked from now on",
			  cuhooks_test_why);
	}
	pthread_mutex_unlock(&cuhooks_test_lock);
	gdrc_cache_each(ctx_flush_one, &(int){ GDRC_INVQ_CUDA });
}

/* Drop every host registration that relied on the hooks. */
static void hooks_flush(void)
{
	gdrc_cache_each(ctx_flush_one, &(int){ GDRC_INVQ_HOST });
}

/* gdrc_cache_each: a context that relied on the host hooks caches no
 * host memory from now on. */
static void ctx_stop_host_one(struct gdrc_cache *c, void *arg)
{
	struct gdrc_ctx *ctx = ctx_of_cache(c);

	(void)arg;
	if (ctx && ctx->hooks_slot >= 0 && atomic_load(&c->cache_host))
		gdrc_cache_stop_host_caching(c);
}

/*
 * Another library patched glibc over our hooks: unmaps may have gone
 * unseen since.  If it was UCX's UCM, its events take over (after a
 * flush); otherwise flush every context that relied on the hooks and
 * cache no host memory any more.  Cheap when nothing happened.
 */
static void hooks_check(void)
{
	/* The probe is one load; the full check reads five functions. */
	if (gdrc_likely(gdrc_hooks_probe_ok()))
		return;
	if (gdrc_cuhooks_active() && !gdrc_cuhooks_intact())
		cuhooks_lost();
	if (!gdrc_hooks_active() || gdrc_hooks_intact())
		return;
	if (gdrc_hooks_retake(hooks_flush) == GDRC_OK) {
		const char *src;

		gdrc_hooks_host_source(&src);
		gdrc_info("memory hooks were overwritten by another library: host memory events now come from %s",
			  src);
		return;
	}
	pthread_mutex_lock(&ctx_lock);
	if (!hooks_lost_seen) {
		hooks_lost_seen = 1;
		gdrc_warn("memory hooks were overwritten by another library: "
			  "host registrations are no longer cached");
	}
	pthread_mutex_unlock(&ctx_lock);
	gdrc_cache_each(ctx_stop_host_one, NULL);
}

/*
 * Run the CUDA hooks' self test once, in context cu_ctx (NULL: the
 * current one, if any).  @return the state after it.
 */
static int cuhooks_test(const struct gdrc_cuda *cu, CUcontext cu_ctx)
{
	CUcontext cur = NULL, popped;
	int state;

	if (atomic_load(&cuhooks_state) != CUHOOKS_UNTESTED)
		return atomic_load(&cuhooks_state);
	if (cu->cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
		cur = NULL;
	if (!cur && !cu_ctx)
		return CUHOOKS_UNTESTED; /* no context yet: at a GPU miss */
	pthread_mutex_lock(&cuhooks_test_lock);
	state = atomic_load(&cuhooks_state);
	if (state == CUHOOKS_UNTESTED) {
		int pushed = cu_ctx && cu_ctx != cur &&
			     cu->cuCtxPushCurrent(cu_ctx) == CUDA_SUCCESS;

		if (!gdrc_cuhooks_active())
			snprintf(cuhooks_test_why, sizeof(cuhooks_test_why),
				 "%s", gdrc_cuhooks_reason());
		state = gdrc_cuhooks_active() &&
				!gdrc_cuhooks_self_test(
					cuhooks_test_why,
					sizeof(cuhooks_test_why)) ?
			CUHOOKS_OK : CUHOOKS_BAD;
		if (pushed)
			cu->cuCtxPopCurrent(&popped);
		if (state == CUHOOKS_BAD)
			gdrc_warn("cuda free hooks failed: %s; gpu hits are tag checked",
				  cuhooks_test_why);
		else
			gdrc_debug("cuda free hooks passed their self test");
		atomic_store(&cuhooks_state, state);
	}
	pthread_mutex_unlock(&cuhooks_test_lock);
	return state;
}


/*
 * Host memory is cached only while its frees can be seen: by the hooks,
 * or (registration by registration) by the kernel channel.
 */
static int host_caching(const struct gdrc_knobs *knobs, int have_kchan)
{
	static atomic_flag warned = ATOMIC_FLAG_INIT;

	if (knobs->mem_hooks == GDRC_KNOB_HOOKS_NONE)
		return 1;
	if (knobs->mem_hooks == GDRC_KNOB_HOOKS_UFFD)
		return 0; /* range by range (uffd_setup), glibc untouched */
	/* The module's notifier is the first choice (docs/hooks.md, "Event
	 * sources"): it sees every unmap of what it watches, raw system
	 * calls included, and patches nothing.  Hooks someone else put in
	 * (another context, the preload without the module) still add. */
	if (have_kchan) {
		if (gdrc_hooks_active() && gdrc_hooks_intact())
			return 1;
		gdrc_debug("host memory is watched by gdrcache.ko: glibc left unpatched");
		return 0;
	}
	/* Hooks that went in before (the preload's, at load) and that
	 * another library patched over since (Open MPI's patcher in its
	 * MPI_Init, say) are taken back now, chained, as the next slow get
	 * of a context already made would: a context made after the
	 * overwrite caches host memory like one made before it. */
	if (gdrc_hooks_install() == GDRC_OK && !gdrc_hooks_intact())
		hooks_check();
	if (gdrc_hooks_active() && gdrc_hooks_intact())
		return 1;
	if (have_kchan)
		gdrc_info("memory hooks unavailable (%s): host memory is "
			  "cached where gdrcache.ko watches it",
			  gdrc_hooks_reason() ? gdrc_hooks_reason() :
						"overwritten");
	else if (!atomic_flag_test_and_set(&warned))
		gdrc_warn("host registrations are not cached: memory hooks "
			  "unavailable (%s); GDRC_MEM_HOOKS=none caches them "
			  "if you call gdrc_invalidate yourself",
			  gdrc_hooks_reason() ? gdrc_hooks_reason() :
						"overwritten by another library");
	return 0;
}

/* The host monitors that watch range by range (struct gdrc_watch_ops):
 * gdrcache.ko's notifier, a word per range; userfaultfd, events through
 * the queue, a watch that ends with its mapping. */
static int kchan_watch(void *arg, uintptr_t start, size_t len, int *slot_p,
		       uint64_t *handle_p)
{
	return gdrc_kchan_subscribe(arg, start, len, slot_p, handle_p);
}

static void kchan_unwatch(void *arg, uint64_t handle)
{
	gdrc_kchan_unsubscribe(arg, handle);
}

static const struct gdrc_watch_ops kchan_watch_ops = {
	.name = "gdrcache.ko",
	.subscribe = kchan_watch,
	.unsubscribe = kchan_unwatch,
};

static int uffd_watch(void *arg, uintptr_t start, size_t len, int *slot_p,
		      uint64_t *handle_p)
{
	(void)arg;
	*slot_p = -1;
	*handle_p = 0;
	return gdrc_uffd_watch(start, len);
}

static const struct gdrc_watch_ops uffd_watch_ops = {
	.name = "userfaultfd",
	.subscribe = uffd_watch,
};

/* Which range-by-range monitor watches ctx's host memory, if any: the
 * module (first choice, unless the caller reports frees itself), or
 * userfaultfd (GDRC_MEM_HOOKS=uffd, set up). */
static int kmod_watches_host(const struct gdrc_ctx *ctx)
{
	return ctx->kchan && !ctx->cache.p.cache_host &&
	       ctx->knobs.mem_hooks != GDRC_KNOB_HOOKS_NONE;
}

static int uffd_watches_host(const struct gdrc_ctx *ctx)
{
	return ctx->cache.p.watch == &uffd_watch_ops;
}

static int ctx_kpin(void *arg, uintptr_t va, size_t len, int *slot_p,
		    uint64_t *handle_p)
{
	return gdrc_kchan_pin(arg, va, len, slot_p, handle_p);
}

static void ctx_kunpin(void *arg, uint64_t handle)
{
	gdrc_kchan_unpin(arg, handle);
}

/*
 * GDRC_MEM_HOOKS=uffd: userfaultfd watches each cached host range
 * (docs/hooks.md, "Event sources"), unless gdrcache.ko does.  Without
 * it, host registrations are not cached (said once).
 */
static void uffd_setup(struct gdrc_ctx *ctx, struct gdrc_cache_params *p)
{
	static atomic_flag warned = ATOMIC_FLAG_INIT;

	if (ctx->knobs.mem_hooks != GDRC_KNOB_HOOKS_UFFD || ctx->kchan)
		return;
	if (gdrc_uffd_start() == GDRC_OK) {
		p->watch = &uffd_watch_ops;
		return;
	}
	if (!atomic_flag_test_and_set(&warned))
		gdrc_warn("host registrations are not cached: GDRC_MEM_HOOKS=uffd and %s",
			  gdrc_uffd_reason());
}

/* Open gdrcache.ko's channel if it is there (GDRC_KMOD=auto). */
static void kmod_setup(struct gdrc_ctx *ctx, struct gdrc_cache_params *p)
{
	char *why = ctx->kmod_why;
	size_t why_len = sizeof(ctx->kmod_why);
	gdrc_status_t status;

	if (ctx->knobs.kmod == GDRC_KNOB_KMOD_OFF) {
		snprintf(why, why_len, "GDRC_KMOD=off");
		return;
	}
	status = gdrc_kchan_open(GDRC_KCHAN_PATH, &ctx->kchan, why, why_len);
	if (status == GDRC_ERR_NO_DEVICE) {
		gdrc_debug("no kernel channel: %s", why);
		return;
	}
	if (status) {
		gdrc_warn("kernel channel unusable: %s", why);
		return;
	}
	p->kgen = ctx->kchan->gen;
	p->watch = &kchan_watch_ops;
	p->watch_arg = ctx->kchan;
	p->kpin = ctx_kpin;
	p->kunpin = ctx_kunpin;
	p->karg = ctx->kchan;
}

/*
 * Load the driver and, with GDRC_MEM_HOOKS=auto, hook its frees.
 * @return GDRC_OK (GPU support on or off), or GDRC_ERR_UNSUPPORTED when
 *         GDRC_VALIDATE=hooks asks for hooks that failed.
 */
static gdrc_status_t gpu_setup(struct gdrc_ctx *ctx)
{
	const char *lib = ctx->knobs.cuda_library;

	if (!strcmp(lib, "none")) {
		snprintf(ctx->gpu_reason, sizeof(ctx->gpu_reason),
			 "GDRC_CUDA_LIBRARY=none");
		return GDRC_OK;
	}
	ctx->cuda = gdrc_cuda_get(lib);
	if (!ctx->cuda) {
		snprintf(ctx->gpu_reason, sizeof(ctx->gpu_reason), "%s",
			 gdrc_cuda_reason());
		return GDRC_OK;
	}
	if (ctx->knobs.mem_hooks != GDRC_KNOB_HOOKS_AUTO) {
		if (ctx->knobs.validate == GDRC_KNOB_VALIDATE_HOOKS)
			gdrc_warn("GDRC_VALIDATE=hooks without the CUDA free hooks (GDRC_MEM_HOOKS is not auto): "
				  "report every CUDA free with gdrc_invalidate");
		return GDRC_OK;
	}
	ctx->cuda_hooks = 1;
	gdrc_cuhooks_install(ctx->cuda->handle);
	if (cuhooks_test(ctx->cuda, NULL) == CUHOOKS_BAD &&
	    ctx->knobs.validate == GDRC_KNOB_VALIDATE_HOOKS) {
		gdrc_error("GDRC_VALIDATE=hooks refused: the cuda free hooks do not work (%s)",
			   cuhooks_test_why);
		return GDRC_ERR_UNSUPPORTED;
	}
	return GDRC_OK;
}

static gdrc_status_t ctx_setup(struct gdrc_ctx *ctx,
			       const struct gdrc_config *cfg)
{
	struct gdrc_cache_params p = { 0 };
	struct ibv_pd *pd = NULL;
	struct io_uring *ring = NULL;
	uint64_t slots;
	gdrc_status_t status;

	status = gdrc_config_load(&ctx->knobs);
	if (status)
		return status;
	slots = ctx->knobs.io_uring_slots;
	if (cfg && (cfg->field_mask & GDRC_CONFIG_FIELD_MAX_REGIONS))
		ctx->knobs.max_regions = cfg->max_regions;
	if (cfg && (cfg->field_mask & GDRC_CONFIG_FIELD_MAX_BYTES))
		ctx->knobs.max_bytes = cfg->max_bytes;
	if (cfg && (cfg->field_mask & GDRC_CONFIG_FIELD_PD))
		pd = cfg->pd;
	if (cfg && (cfg->field_mask & GDRC_CONFIG_FIELD_IO_URING_SLOTS))
		slots = cfg->ring_slots;
	gdrc_log_set_level((enum gdrc_log_level)ctx->knobs.log_level);
	if (cfg && (cfg->field_mask & GDRC_CONFIG_FIELD_IO_URING)) {
		ring = cfg->ring;
		if (!ring || pd || !slots || slots > GDRC_IO_URING_SLOTS_MAX) {
			gdrc_error("gdrc_config: a ring needs no PD, and 1 to "
				   "%u slots (got %s, %s, %llu)",
				   GDRC_IO_URING_SLOTS_MAX,
				   ring ? "a ring" : "no ring",
				   pd ? "a PD" : "no PD",
				   (unsigned long long)slots);
			return GDRC_ERR_INVALID_PARAM;
		}
	}

	if (cfg && (cfg->field_mask & GDRC_CONFIG_FIELD_CUFILE))
		ctx->cufile_mem = cfg->cufile;
	if (gdrc_knob_list_at(ctx->knobs.backend, 0) ==
	    GDRC_KNOB_BACKEND_CUFILE && !ctx->cufile_mem)
		ctx->cufile_mem = GDRC_CUFILE_ALL;
	if ((ctx->cufile_mem & ~GDRC_CUFILE_ALL) ||
	    (ctx->cufile_mem && (pd || ring))) {
		gdrc_error("gdrc_config: cufile takes GDRC_CUFILE_* bits, and "
			   "no PD and no ring (got %#x, %s, %s)",
			   ctx->cufile_mem, pd ? "a PD" : "no PD",
			   ring ? "a ring" : "no ring");
		return GDRC_ERR_INVALID_PARAM;
	}
	status = gdrc_api_pick_host(ctx, pd, ring, (uint32_t)slots,
				    ctx->cufile_mem != 0, &p);
	if (status)
		return status;
	p.max_regions = ctx->knobs.max_regions;
	p.max_bytes = ctx->knobs.max_bytes;
	p.gpu_max_regions = ctx->knobs.gpu_max_regions;
	p.gpu_max_bytes = ctx->knobs.gpu_max_bytes;
	p.check = ctx->knobs.check;
	kmod_setup(ctx, &p);
	p.cache_host = host_caching(&ctx->knobs, ctx->kchan != NULL);
	uffd_setup(ctx, &p);
	status = gpu_setup(ctx);
	if (status)
		return status;
	gdrc_api_pick_gpu(ctx, pd, &p);
	/* The tag check calls the driver directly (see tag_query); without
	 * a driver no region asks for it. */
	if (ctx->cuda)
		p.tag_query = ctx->cuda->cuPointerGetAttribute;
	p.tag_what = CU_POINTER_ATTRIBUTE_BUFFER_ID;
	status = gdrc_cache_init(&ctx->cache, &p);
	if (status == GDRC_ERR_LIMIT)
		gdrc_error("too many contexts (%d)", GDRC_CACHES_MAX);
	return status;
}

/* The cache's counters, and the context's own. */
static void ctx_stats(struct gdrc_ctx *ctx, uint64_t *v)
{
	gdrc_cache_stats(&ctx->cache, v);
	v[GDRC_STAT_UCM_EVENTS] =
		atomic_load_explicit(&ctx->ucm_events, memory_order_relaxed);
	v[GDRC_STAT_UFFD_EVENTS] =
		atomic_load_explicit(&ctx->uffd_events, memory_order_relaxed);
	v[GDRC_STAT_MISUSE] =
		atomic_load_explicit(&misuse_seen, memory_order_relaxed);
}

/* ctx_stats for a caller that reads them (gdrc_stat_get, gdrc_stats_dump,
 * gdrc_source_status): first the unmaps still posting their events, as
 * a get waits for them, so that an unmap that returned is counted (with
 * userfaultfd the reader posts after the unmapping thread went on).  Not
 * print_stats: it may run at exit or fini in a signal handler, which
 * must not wait for a window it may have interrupted. */
static void ctx_stats_settled(struct gdrc_ctx *ctx, uint64_t *v)
{
	gdrc_hooks_wait_idle();
	ctx_stats(ctx, v);
}

static void print_stats(struct gdrc_ctx *ctx)
{
	uint64_t v[GDRC_STAT_COUNT];
	char buf[2048];

	ctx_stats(ctx, v);
	gdrc_stats_format(v, GDRC_DUMP_JSON, buf, sizeof(buf), NULL);
	gdrc_log_write(GDRC_LOG_INFO, "stats %s", buf);
}

/* At exit: contexts still open with GDRC_STATS=1 print theirs (a
 * preloaded or careless program never calls gdrc_fini). */
static void stats_one(struct gdrc_cache *c, void *arg)
{
	struct gdrc_ctx *ctx = ctx_of_cache(c);

	(void)arg;
	if (ctx && ctx->knobs.stats && !atomic_load(&c->forked))
		print_stats(ctx);
}

static void stats_at_exit(void)
{
	gdrc_cache_each(stats_one, NULL);
}

static void stats_at_exit_install(void)
{
	if (atexit(stats_at_exit))
		gdrc_warn("atexit failed: GDRC_STATS prints at gdrc_fini only");
}

GDRC_API gdrc_status_t gdrc_init(const struct gdrc_config *cfg,
				 struct gdrc_ctx **ctx_p)
{
	struct gdrc_ctx *ctx;
	gdrc_status_t status;

	if (!ctx_p || (cfg && (cfg->field_mask & ~GDRC_CONFIG_FIELD_ALL)))
		return GDRC_ERR_INVALID_PARAM;
	pthread_once(&atfork_once, atfork_install);

	ctx = ctx_alloc();
	if (!ctx)
		return GDRC_ERR_NO_MEMORY;
	ctx->hooks_slot = -1;
	status = ctx_setup(ctx, cfg);
	if (status)
		goto err_free;

	if (((ctx->cache.p.cache_host || ctx->cuda_hooks) &&
	     ctx->knobs.mem_hooks == GDRC_KNOB_HOOKS_AUTO) ||
	    uffd_watches_host(ctx)) {
		ctx->hooks_slot = gdrc_hooks_subscribe(ctx_mem_event, ctx);
		if (ctx->hooks_slot < 0) {
			status = GDRC_ERR_LIMIT;
			goto err_cleanup;
		}
	}
	if (ctx->cufile)
		gdrc_api_cufile_enlist(ctx);
	if (ctx->knobs.stats) {
		static pthread_once_t stats_once = PTHREAD_ONCE_INIT;

		pthread_once(&stats_once, stats_at_exit_install);
	}
	atomic_store_explicit(&misuse_policy,
			      ctx->knobs.misuse == GDRC_KNOB_MISUSE_AUTO ?
				      MISUSE_BUILD_DEFAULT :
				      ctx->knobs.misuse,
			      memory_order_relaxed);
	gdrc_debug("context created: backend %s, host caching %s",
		   ctx->cache.p.ops->name,
		   ctx->cache.p.cache_host ? "on" : "off");
	*ctx_p = ctx_pub(ctx);
	ctx->cache.key = (uintptr_t)*ctx_p;
	return GDRC_OK;

err_cleanup:
	gdrc_cache_cleanup(&ctx->cache);
err_free:
	gdrc_api_backend_close(ctx, 0);
	gdrc_kchan_close(ctx->kchan);
	ctx_bury(ctx);
	return status;
}


GDRC_API void gdrc_fini(struct gdrc_ctx *pub)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);
	int forked;

	if (!ctx)
		return;
	forked = atomic_load_explicit(&ctx->cache.forked,
				      memory_order_relaxed);
	if (ctx->hooks_slot >= 0)
		gdrc_hooks_unsubscribe(ctx->hooks_slot);
	/* No CUDA free reaches it from now on (the free path's list). */
	gdrc_api_cufile_forget(ctx);
	/* The cleanup takes the cache out of the registry first: no fork
	 * handler, flush or exit walk reaches it after. */
	if (forked) {
		gdrc_cache_cleanup_forked(&ctx->cache);
	} else {
		if (ctx->knobs.stats)
			print_stats(ctx);
		gdrc_cache_cleanup(&ctx->cache);
	}
	/* After the cleanup, which unsubscribes and deregisters what it
	 * releases; in a fork child the fds are copies and closing them
	 * touches nothing of the parent's subscriptions or slots. */
	gdrc_api_backend_close(ctx, forked);
	gdrc_kchan_close(ctx->kchan);
	ctx_bury(ctx);
}

/* [addr, addr + len) must be non-empty, not wrap, and leave room to be
 * rounded out to pages. */
static int range_ok(const void *addr, size_t len)
{
	const uintptr_t top = UINTPTR_MAX - GDRC_MAX_ROUNDING;
	uintptr_t start = (uintptr_t)addr;

	/* start in [1, top], len in [1, top - start]: each one compare of
	 * the value less one, which wraps a zero past the bound. */
	return (start - 1 < top) & (len - 1 < top - start);
}

/* The context's policy for a request of GPU memory cls describes.
 * hooks mode trusts the CUDA hooks only once they passed their self
 * test (run now if no context was current at gdrc_init). */
static struct gdrc_req_policy req_policy(struct gdrc_ctx *ctx,
					 const struct gdrc_class *cls)
{
	struct gdrc_req_policy pol = {
		.tag_check_auto =
			ctx->knobs.validate == GDRC_KNOB_VALIDATE_AUTO,
		.whole_alloc_max = ctx->knobs.whole_alloc_max,
		.reg_align = GDRC_GPU_PAGE_SIZE,
	};

	if (ctx->cufile) {
		/* cuFile: one registration per allocation (VMM: the run of
		 * mappings the request covers) whatever its size, exactly
		 * (it refuses a range past the allocation's end, 64 KiB
		 * rounding included: tests/gpu/cufile_semantics.c). */
		pol.whole_alloc_max = UINT64_MAX;
		pol.reg_align = 1;
	}

	if (cls->info.mem_type == GDRC_MEM_CUDA &&
	    cls->info.kind != GDRC_PTR_MANAGED)
		pol.tag_check =
			ctx->knobs.validate != GDRC_KNOB_VALIDATE_HOOKS ||
			(ctx->cuda_hooks &&
			 cuhooks_test(ctx->cuda, cls->cu_ctx) != CUHOOKS_OK);
	return pol;
}

/* GPU memory with no GPU backend that works: say why, once per call. */
static gdrc_status_t gpu_refused(struct gdrc_ctx *ctx, uintptr_t start)
{
	char why[4 * 200];

	gdrc_api_gpu_refusal(ctx, why, sizeof(why));
	gdrc_error("%#lx is GPU memory and no GPU backend works: %s",
		   (unsigned long)start, why);
	return GDRC_ERR_UNSUPPORTED;
}

/* What a registration must allow for access: remote writes and atomics
 * need local write too (the verbs rule). */
static inline uint32_t access_needed(uint32_t access)
{
	if (access & (GDRC_ACCESS_REMOTE_WRITE | GDRC_ACCESS_REMOTE_ATOMIC))
		access |= GDRC_ACCESS_LOCAL_WRITE;
	return access;
}

/* The fast path's host_ok: one load while nothing is unmapping, plus
 * the probe of the patched code (see gdrc_hooks_probe_ok). */
static inline int hooks_trusted(void)
{
	return gdrc_hooks_idle() && gdrc_hooks_probe_ok();
}

/* VMM mappings a miss finds without allocating (more: on the heap). */
#define GDRC_SEG_STACK 8

/* Not cached: classify and register.  Not inlined: its frame (the
 * request, the segments on the stack) would cost every index hit. */
GDRC_NOINLINE
static gdrc_status_t mr_get_miss(struct gdrc_ctx *ctx, uintptr_t start,
				 uintptr_t end, uint32_t access,
				 uint32_t flags, struct gdrc_mr **mr_p)
{
	struct gdrc_cache_req req = {
		.start = start, .end = end, .access = access, .flags = flags,
		.mem_type = GDRC_MEM_HOST, .kind = GDRC_PTR_HOST, .device = -1,
	};
	struct gdrc_seg seg_buf[GDRC_SEG_STACK], *segs = seg_buf;
	struct gdrc_class cls;
	gdrc_status_t status;

	if (ctx->cuda) {
		struct gdrc_req_policy pol;
		int sync_set;

		gdrc_cache_stat_add(&ctx->cache, GDRC_STAT_CLASSIFY_CALLS, 1);
		status = gdrc_classify(ctx->cuda, start, &cls);
		if (status)
			return status;
		if (cls.info.mem_type == GDRC_MEM_CUDA &&
		    cls.info.kind != GDRC_PTR_MANAGED && ctx->gpu_refused)
			return gpu_refused(ctx, start);
		pol = req_policy(ctx, &cls);
		status = gdrc_req_from_class(ctx->cuda, &cls, &pol, &req,
					     seg_buf, GDRC_ARRAY_SIZE(seg_buf),
					     &segs, &sync_set);
		if (sync_set)
			gdrc_cache_stat_add(&ctx->cache,
					    GDRC_STAT_SYNC_MEMOPS_SET, 1);
		if (status)
			goto out;
	}
	if (ctx->cufile) {
		status = gdrc_api_cufile_req(ctx, &req);
		if (status)
			goto out;
	}
	status = gdrc_cache_get_miss(&ctx->cache, &req, mr_p);
out:
	if (segs != seg_buf)
		free(segs);
	return status;
}

/* Not found by the fast path: the index, then a miss.  Not inlined: its
 * frame would cost every hit six register saves. */
GDRC_NOINLINE
static gdrc_status_t mr_get_slow(struct gdrc_ctx *ctx, uintptr_t start,
				 uintptr_t end, uint32_t access,
				 uint32_t flags, struct gdrc_mr **mr_p)
{
	struct gdrc_mr *r;
	int ret;

	/* The fast path's second look: this thread's parked handle.  (A
	 * failed get leaves *mr_p alone.) */
	if (!flags && (r = gdrc_cache_get_parked(&ctx->cache, start, end,
						 access, hooks_trusted))) {
		*mr_p = r;
		return GDRC_OK;
	}
	if (!(flags & GDRC_GET_UNCACHED))
		gdrc_index_prefetch(&ctx->cache, start);
	hooks_check();
	/* An unmap of these addresses may still be posting its event. */
	gdrc_hooks_wait_idle();
	if (!(flags & GDRC_GET_UNCACHED)) {
		ret = gdrc_cache_lookup(&ctx->cache, start, end, access, mr_p);
		if (ret)
			return ret < 0 ? (gdrc_status_t)ret : GDRC_OK;
	}
	return mr_get_miss(ctx, start, end, access, flags, mr_p);
}

GDRC_API gdrc_status_t gdrc_mr_get(struct gdrc_ctx *pub, const void *addr,
				   size_t len, uint32_t access, uint32_t flags,
				   struct gdrc_mr **mr_p)
{
	uintptr_t start = (uintptr_t)addr, end = start + len;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *r;

	if (gdrc_unlikely(!pub || !mr_p || !range_ok(addr, len) ||
			  (access & ~GDRC_ACCESS_ALL) ||
			  (flags & ~GDRC_GET_ALL)))
		return GDRC_ERR_INVALID_PARAM;
	ctx = ctx_open(pub, __func__);
	if (gdrc_unlikely(!ctx))
		return GDRC_ERR_INVALID_PARAM;
	access = access_needed(access);
	if (gdrc_likely(!flags)) {
		r = gdrc_cache_get_fast(&ctx->cache, start, end, access,
					hooks_trusted);
		if (gdrc_likely(r != NULL)) {
			*mr_p = r;
			return GDRC_OK;
		}
	}
	return mr_get_slow(ctx, start, end, access, flags, mr_p);
}

GDRC_API gdrc_status_t gdrc_mr_reget(struct gdrc_ctx *pub,
				     const struct gdrc_mr *mr,
				     const void *addr, size_t len,
				     uint32_t access)
{
	uintptr_t start = (uintptr_t)addr;
	struct gdrc_ctx *ctx;

	if (gdrc_unlikely(!pub || !mr || !range_ok(addr, len) ||
			  (access & ~GDRC_ACCESS_ALL)))
		return GDRC_ERR_INVALID_PARAM;
	ctx = ctx_open(pub, __func__);
	if (gdrc_unlikely(!ctx))
		return GDRC_ERR_INVALID_PARAM;
	access = access_needed(access);
	return gdrc_cache_reget(&ctx->cache, mr, start, start + len, access,
				hooks_trusted) ?
		       GDRC_OK :
		       GDRC_ERR_STALE;
}

/* What a put, a query or a key read says of an mr without the magic. */
#define MR_NOT_LIVE                                                          \
	"is not a registration (or its memory went back to its context's "   \
	"pool)"

/* What a put found wrong with mr (enum gdrc_put_fault), said. */
GDRC_NOINLINE
static void put_misuse(const struct gdrc_mr *mr, int fault)
{
	static const char *const what[] = {
		[GDRC_PUT_NOT_MR] = MR_NOT_LIVE,
		[GDRC_PUT_OTHER_CTX] = "belongs to another context",
		[GDRC_PUT_RELEASED] = "was already let go of: a double put",
		[GDRC_PUT_TOO_MANY] = "has no get outstanding: a double put",
	};

	if (fault == GDRC_PUT_NOT_MR)
		misuse("gdrc_mr_put", "handle %p %s", (const void *)mr,
		       what[fault]);
	else
		misuse("gdrc_mr_put", "handle %p (registration %llu) %s",
		       (const void *)mr,
		       (unsigned long long)gdrc_mr_region(mr)->id,
		       what[fault]);
}

/* gdrc_mr_put past the fast path: the context checked, then the rest. */
GDRC_NOINLINE
static void mr_put_slow(struct gdrc_ctx *pub, struct gdrc_mr *mr)
{
	struct gdrc_ctx *ctx = ctx_open(pub, "gdrc_mr_put");
	int fault;

	if (!ctx)
		return;
	fault = gdrc_cache_put_slow(&ctx->cache, mr);
	if (fault)
		put_misuse(mr, fault);
}

GDRC_API void gdrc_mr_put(struct gdrc_ctx *pub, struct gdrc_mr *mr)
{
	struct gdrc_ctx *ctx;

	if (gdrc_unlikely(!pub || !mr))
		return;
	ctx = ctx_of(pub);
	if (gdrc_likely(ctx)) {
		/* A direct reference (an index hit that does not repeat) is
		 * none of this thread's entries: they are not looked over
		 * for it.  Its magic is on the line its put changes; a
		 * handle's, on the line its get just wrote. */
		if (mr->magic == GDRC_MR_SELF_MAGIC) {
			if (gdrc_cache_put_direct(&ctx->cache, mr))
				return;
		} else if (gdrc_likely(gdrc_cache_put_fast(&ctx->cache,
							   mr))) {
			return;
		}
	}
	mr_put_slow(pub, mr);
}

/* Is mr a live registration or handle?  Else a misuse, in call. */
static inline int mr_live(const struct gdrc_mr *mr, const char *call)
{
	if (gdrc_likely(gdrc_mr_live(mr)))
		return 1;
	misuse(call, "handle %p " MR_NOT_LIVE, (const void *)mr);
	return 0;
}

GDRC_API gdrc_status_t gdrc_mr_query(const struct gdrc_mr *mr,
				     struct gdrc_mr_info *info_p)
{
	const struct gdrc_region *r;
	uint64_t w;

	if (!mr || !info_p || !mr_live(mr, __func__))
		return GDRC_ERR_INVALID_PARAM;
	r = gdrc_mr_region(mr);
	w = atomic_load_explicit(&((struct gdrc_region *)r)->word,
				 memory_order_acquire);
	memset(info_p, 0, sizeof(*info_p));
	info_p->id = r->id;
	info_p->addr = gdrc_region_reg_start(r);
	info_p->length = gdrc_region_reg_len(r);
	info_p->key_addr = r->start;
	info_p->key_length = r->end - r->start;
	info_p->kind = r->kind;
	info_p->buffer_id = r->buffer_id;
	info_p->flags = r->info_flags;
	info_p->mem_type = r->mem_type;
	info_p->backend = gdrc_cache_ops_for(r->cache, r->mem_type,
						    NULL)->backend;
	info_p->device = r->device;
	info_p->access = r->access;
	info_p->lkey = r->lkey;
	info_p->rkey = r->rkey;
	if (!(w & REGION_INVALID))
		info_p->flags |= GDRC_MR_INFO_CACHED;
	else if (r->was_cached)
		info_p->flags |= GDRC_MR_INFO_INVALIDATED;
	return GDRC_OK;
}

GDRC_API uint32_t gdrc_mr_lkey(const struct gdrc_mr *mr)
{
	return mr && mr_live(mr, __func__) ? gdrc_mr_region(mr)->lkey : 0;
}

GDRC_API uint32_t gdrc_mr_rkey(const struct gdrc_mr *mr)
{
	return mr && mr_live(mr, __func__) ? gdrc_mr_region(mr)->rkey : 0;
}

GDRC_API gdrc_status_t gdrc_ptr_query(struct gdrc_ctx *pub, const void *ptr,
				      struct gdrc_ptr_info *info_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);
	uintptr_t p = (uintptr_t)ptr;
	struct gdrc_region *r;
	struct gdrc_class cls;
	gdrc_status_t status;
	int ret;

	if (!ctx || !ptr || !info_p || !range_ok(ptr, 1))
		return GDRC_ERR_INVALID_PARAM;
	gdrc_hooks_wait_idle();
	ret = gdrc_cache_peek(&ctx->cache, p, p + 1, &r);
	if (ret < 0)
		return (gdrc_status_t)ret;
	if (ret) {
		/* A registration over several VMM mappings: the one holding
		 * ptr, as classification would answer. */
		struct gdrc_seg seg = gdrc_cache_seg_of(r, p);

		memset(info_p, 0, sizeof(*info_p));
		info_p->mem_type = r->mem_type;
		info_p->kind = r->kind;
		info_p->device = r->device;
		info_p->flags = GDRC_PTR_INFO_CACHED;
		info_p->buffer_id = seg.buffer_id;
		info_p->alloc_base = seg.start;
		info_p->alloc_size = seg.end - seg.start;
		gdrc_cache_region_put(&ctx->cache, r);
		return GDRC_OK;
	}
	if (ctx->cuda)
		gdrc_cache_stat_add(&ctx->cache, GDRC_STAT_CLASSIFY_CALLS, 1);
	status = gdrc_classify(ctx->cuda, p, &cls);
	if (!status)
		*info_p = cls.info;
	return status;
}

GDRC_API gdrc_status_t gdrc_release_unused(struct gdrc_ctx *pub, int device,
					   uint64_t *released_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);

	if (!ctx || device < GDRC_DEVICE_ALL)
		return GDRC_ERR_INVALID_PARAM;
	return gdrc_cache_release_unused(&ctx->cache, device, released_p);
}

GDRC_API gdrc_status_t gdrc_device_stat_get(struct gdrc_ctx *pub, int device,
					    enum gdrc_device_stat stat,
					    uint64_t *value_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);

	if (!ctx || !value_p || (unsigned)stat >= GDRC_DEVICE_STAT_COUNT ||
	    device < GDRC_DEVICE_ALL || device >= GDRC_MAX_DEVICES)
		return GDRC_ERR_INVALID_PARAM;
	*value_p = gdrc_cache_dev_stat(&ctx->cache, device, stat);
	return GDRC_OK;
}

GDRC_API gdrc_status_t gdrc_gpu_status(struct gdrc_ctx *pub,
				       const char **reason_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);

	if (!ctx)
		return GDRC_ERR_INVALID_PARAM;
	if (reason_p)
		*reason_p = ctx->cuda ? NULL : ctx->gpu_reason;
	return ctx->cuda ? GDRC_OK : GDRC_ERR_NO_DEVICE;
}

GDRC_API gdrc_status_t gdrc_hooks_status(struct gdrc_ctx *pub,
					 const char **reason_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);
	const char *why = NULL;

	if (!ctx)
		return GDRC_ERR_INVALID_PARAM;
	if (kmod_watches_host(ctx)) {
		if (reason_p)
			*reason_p = "gdrcache.ko watches every cached host range (/dev/gdrcache); glibc left unpatched";
		return GDRC_OK;
	} else if (ctx->knobs.mem_hooks == GDRC_KNOB_HOOKS_NONE) {
		why = "GDRC_MEM_HOOKS=none";
	} else if (ctx->knobs.mem_hooks == GDRC_KNOB_HOOKS_UFFD) {
		if (uffd_watches_host(ctx)) {
			if (reason_p)
				*reason_p = "userfaultfd watches every cached host range (GDRC_MEM_HOOKS=uffd); glibc left unpatched";
			return GDRC_OK;
		}
		why = gdrc_uffd_reason();
	} else if (!gdrc_hooks_active())
		why = gdrc_hooks_reason();
	else if (!gdrc_hooks_intact())
		why = "overwritten by another library after they went in";
	if (reason_p) {
		const char *src = NULL;

		if (!why)
			gdrc_hooks_host_source(&src);
		*reason_p = why ? why : src;
	}
	return why ? GDRC_ERR_UNSUPPORTED : GDRC_OK;
}

GDRC_API gdrc_status_t gdrc_kmod_status(struct gdrc_ctx *pub,
					const char **reason_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);

	if (!ctx)
		return GDRC_ERR_INVALID_PARAM;
	if (reason_p)
		*reason_p = ctx->kchan ? NULL : ctx->kmod_why;
	return ctx->kchan ? GDRC_OK : GDRC_ERR_UNSUPPORTED;
}

GDRC_API gdrc_status_t gdrc_knob_describe(unsigned index,
					  const char **name_p,
					  const char **default_p,
					  const char **help_p)
{
	const struct gdrc_knob_desc *d = gdrc_config_desc(index);

	if (!name_p || !default_p || !help_p)
		return GDRC_ERR_INVALID_PARAM;
	if (!d)
		return GDRC_ERR_LIMIT;
	*name_p = d->name;
	*default_p = d->defval;
	*help_p = d->help;
	return GDRC_OK;
}

GDRC_API gdrc_status_t gdrc_knob_value(const char *name, char *buf,
				       size_t len)
{
	const struct gdrc_knob_desc *d = NULL;
	struct gdrc_knobs knobs;
	const char *v;
	size_t i, n;

	if (!name || !buf || !len)
		return GDRC_ERR_INVALID_PARAM;
	for (i = 0; (d = gdrc_config_desc(i)); i++)
		if (!strcmp(d->name, name))
			break;
	if (!d)
		return GDRC_ERR_INVALID_PARAM;
	v = getenv(name);
	if (!v)
		v = d->defval;
	if (gdrc_config_parse(i, v, &knobs))
		return GDRC_ERR_INVALID_PARAM;
	if (d->type == GDRC_KNOB_BOOL)
		v = *(const int *)((const char *)&knobs + d->offset) ? "1" : "0";
	n = strlen(v);
	if (n >= len)
		return GDRC_ERR_LIMIT;
	memcpy(buf, v, n + 1);
	return GDRC_OK;
}

/* Can gdrcache.ko's channel be opened (GDRC_KMOD not off)? */
static int kmod_present(const struct gdrc_knobs *knobs)
{
	struct gdrc_kchan *kc = NULL;
	char why[128];

	if (knobs->kmod == GDRC_KNOB_KMOD_OFF ||
	    gdrc_kchan_open(GDRC_KCHAN_PATH, &kc, why, sizeof(why)))
		return 0;
	gdrc_kchan_close(kc);
	return 1;
}

GDRC_API gdrc_status_t gdrc_install_hooks(void)
{
	struct gdrc_knobs knobs;
	gdrc_status_t status;
	void *cuda;

	status = gdrc_config_load(&knobs);
	if (status)
		return status;
	gdrc_log_set_level((enum gdrc_log_level)knobs.log_level);
	if (knobs.mem_hooks == GDRC_KNOB_HOOKS_UFFD)
		return gdrc_uffd_start();
	if (knobs.mem_hooks != GDRC_KNOB_HOOKS_AUTO)
		return GDRC_ERR_UNSUPPORTED;
	if (kmod_present(&knobs)) {
		/* Registrations are watched from the moment they are
		 * made: no free before the first context can be missed. */
		gdrc_debug("gdrcache.ko is loaded: glibc left unpatched");
		status = GDRC_OK;
	} else {
		status = gdrc_hooks_install();
	}
	/* The CUDA driver's frees too: loaded, not initialised, so that
	 * every later user of the driver gets the hooked code.  The handle
	 * stays open: the driver is never unloaded. */
	if (strcmp(knobs.cuda_library, "none")) {
		cuda = dlopen(knobs.cuda_library, RTLD_LAZY | RTLD_LOCAL);
		if (!cuda)
			gdrc_debug("no cuda driver (%s): no cuda hooks",
				   knobs.cuda_library);
		else if (gdrc_cuhooks_install(cuda))
			gdrc_info("cuda free hooks unavailable: %s",
				  gdrc_cuhooks_reason());
	}
	return status ? GDRC_ERR_UNSUPPORTED : GDRC_OK;
}

GDRC_API void gdrc_log_printf(enum gdrc_log_level level, const char *fmt,
			      ...)
{
	va_list ap;

	if ((unsigned)level > GDRC_LOG_TRACE || !fmt ||
	    (int)level > atomic_load_explicit(&gdrc_log_level_cur,
					      memory_order_relaxed))
		return;
	va_start(ap, fmt);
	gdrc_log_vwrite(level, fmt, ap);
	va_end(ap);
}

GDRC_API gdrc_status_t gdrc_backend_status(struct gdrc_ctx *pub,
					   enum gdrc_backend backend,
					   const char **reason_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);

	if (!ctx || (unsigned)backend >= GDRC_BACKENDS)
		return GDRC_ERR_INVALID_PARAM;
	if (reason_p)
		*reason_p = ctx->be_used[backend] ? NULL :
						    ctx->be_why[backend];
	return ctx->be_used[backend] ? GDRC_OK : GDRC_ERR_UNSUPPORTED;
}

GDRC_API gdrc_status_t gdrc_cuda_hooks_status(struct gdrc_ctx *pub,
					      const char **reason_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);
	const char *why = NULL;
	int state;

	if (!ctx)
		return GDRC_ERR_INVALID_PARAM;
	if (!ctx->cuda)
		why = ctx->gpu_reason;
	else if (!ctx->cuda_hooks)
		why = ctx->knobs.mem_hooks == GDRC_KNOB_HOOKS_UFFD ?
			      "GDRC_MEM_HOOKS=uffd: nothing is patched" :
			      "GDRC_MEM_HOOKS=none";
	else if ((state = cuhooks_test(ctx->cuda, NULL)) == CUHOOKS_UNTESTED)
		why = gdrc_cuhooks_active() ?
			      "installed; self test waits for a cuda context" :
			      gdrc_cuhooks_reason();
	else if (state == CUHOOKS_BAD)
		why = cuhooks_test_why;
	if (reason_p)
		*reason_p = why;
	return why ? GDRC_ERR_UNSUPPORTED : GDRC_OK;
}

GDRC_API gdrc_status_t gdrc_set_free_fn(struct gdrc_ctx *pub, gdrc_free_fn fn,
					void *arg)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);

	if (!ctx)
		return GDRC_ERR_INVALID_PARAM;
	if (atomic_load_explicit(&ctx->cache.forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	/* Installed is enough: the self test waits for a context, and
	 * one that fails later sends every free through the flush. */
	if (!ctx->cufile || !ctx->cuda_hooks || !gdrc_cuhooks_active())
		return GDRC_ERR_UNSUPPORTED;
	gdrc_api_cufile_set_free(ctx, fn, arg);
	return GDRC_OK;
}

/* Why a host source other than the one serving ctx is not it, or NULL
 * when ctx's host memory is watched by the source of host_src (enum
 * gdrc_hooks_host_src) in user space. */
static const char *host_src_why(const struct gdrc_ctx *ctx, int host_src)
{
	const char *hooks_why;

	if (kmod_watches_host(ctx))
		return "gdrcache.ko watches host memory";
	if (ctx->knobs.mem_hooks == GDRC_KNOB_HOOKS_UFFD)
		return "GDRC_MEM_HOOKS=uffd: nothing is patched";
	/* Else as gdrc_hooks_status says ("GDRC_MEM_HOOKS=none", ...). */
	if (gdrc_hooks_status((struct gdrc_ctx *)ctx_pub((struct gdrc_ctx *)ctx),
			      &hooks_why) != GDRC_OK)
		return hooks_why;
	if (gdrc_hooks_host_source(NULL) != host_src)
		return host_src == GDRC_HOOKS_HOST_UCM ?
			       "libc's munmap is not UCX's UCM patch" :
			       "UCX's UCM owns glibc's memory functions: its events serve";
	return NULL;
}

/* gdrc_source_status for ctx: *why (never NULL) and *events. */
static int source_on(struct gdrc_ctx *ctx, enum gdrc_source source,
		     const char **why, uint64_t *events)
{
	uint64_t v[GDRC_STAT_COUNT];
	const char *src = NULL;

	ctx_stats_settled(ctx, v);
	switch (source) {
	case GDRC_SOURCE_KMOD:
		*events = v[GDRC_STAT_INV_KMOD];
		*why = ctx->kchan ? "gdrcache.ko: host ranges watched by its "
				    "notifier, GPU pins revoked by the driver" :
				    ctx->kmod_why;
		return ctx->kchan != NULL;
	case GDRC_SOURCE_UCM:
	case GDRC_SOURCE_GLIBC:
		*events = source == GDRC_SOURCE_UCM ?
				  v[GDRC_STAT_UCM_EVENTS] :
				  v[GDRC_STAT_MEM_EVENTS] -
					  v[GDRC_STAT_UCM_EVENTS] -
					  v[GDRC_STAT_UFFD_EVENTS];
		*why = host_src_why(ctx, source == GDRC_SOURCE_UCM ?
						 GDRC_HOOKS_HOST_UCM :
						 GDRC_HOOKS_HOST_PATCH);
		if (*why)
			return 0;
		gdrc_hooks_host_source(&src);
		*why = src;
		return 1;
	case GDRC_SOURCE_UFFD:
		*events = v[GDRC_STAT_UFFD_EVENTS];
		if (uffd_watches_host(ctx)) {
			*why = "userfaultfd watches every cached host range";
			return 1;
		}
		*why = ctx->knobs.mem_hooks != GDRC_KNOB_HOOKS_UFFD ?
			       "not asked for (GDRC_MEM_HOOKS=uffd)" :
		       ctx->kchan ? "gdrcache.ko watches host memory" :
				    gdrc_uffd_reason();
		return 0;
	case GDRC_SOURCE_CUDA_HOOKS:
		*events = v[GDRC_STAT_CUDA_EVENTS];
		if (gdrc_cuda_hooks_status(ctx_pub(ctx), why) != GDRC_OK)
			return 0;
		*why = "libcuda's free functions detoured";
		return 1;
	case GDRC_SOURCE_BUFFER_ID:
		*events = v[GDRC_STAT_INV_TAG_CHECK];
		if (!ctx->cuda) {
			*why = ctx->gpu_reason;
			return 0;
		}
		if (ctx->knobs.validate == GDRC_KNOB_VALIDATE_HOOKS &&
		    gdrc_cuda_hooks_status(ctx_pub(ctx), NULL) == GDRC_OK) {
			*why = "GDRC_VALIDATE=hooks: the CUDA free hooks serve";
			return 0;
		}
		*why = ctx->knobs.validate == GDRC_KNOB_VALIDATE_AUTO ?
			       "each GPU hit's BUFFER_ID checked, but where "
			       "gdrcache.ko pins the memory" :
			       "each GPU hit's BUFFER_ID checked";
		return 1;
	}
	return -1;
}

GDRC_API gdrc_status_t gdrc_source_status(struct gdrc_ctx *pub,
					  enum gdrc_source source,
					  const char **reason_p,
					  uint64_t *events_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);
	const char *why = NULL;
	uint64_t events = 0;
	int on;

	if (!ctx)
		return GDRC_ERR_INVALID_PARAM;
	on = source_on(ctx, source, &why, &events);
	if (on < 0)
		return GDRC_ERR_INVALID_PARAM;
	if (reason_p)
		*reason_p = why ? why : "unknown";
	if (events_p)
		*events_p = events;
	return on ? GDRC_OK : GDRC_ERR_UNSUPPORTED;
}

GDRC_API gdrc_status_t gdrc_invalidate(struct gdrc_ctx *pub, const void *addr,
				       size_t len)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);
	uintptr_t start = (uintptr_t)addr;

	if (!ctx || !range_ok(addr, len))
		return GDRC_ERR_INVALID_PARAM;
	hooks_check();
	/* As a get does: an unmap whose event is still on its way (posted
	 * by userfaultfd's reader after the unmapping thread went on, or
	 * by another thread's hook) is applied by this call too. */
	gdrc_hooks_wait_idle();
	return gdrc_cache_invalidate(&ctx->cache, start, start + len,
				     GDRC_STAT_INV_EXPLICIT);
}

GDRC_API gdrc_status_t gdrc_stat_get(struct gdrc_ctx *pub, enum gdrc_stat stat,
				     uint64_t *value_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);
	uint64_t v[GDRC_STAT_COUNT];

	if (!ctx || !value_p || (unsigned)stat >= GDRC_STAT_COUNT)
		return GDRC_ERR_INVALID_PARAM;
	if (atomic_load_explicit(&ctx->cache.forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	ctx_stats_settled(ctx, v);
	*value_p = v[stat];
	return GDRC_OK;
}

GDRC_API gdrc_status_t gdrc_stats_dump(struct gdrc_ctx *pub,
				       enum gdrc_dump_format format, char *buf,
				       size_t buflen, size_t *needed_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);
	uint64_t v[GDRC_STAT_COUNT];

	if (!ctx || (format != GDRC_DUMP_TEXT && format != GDRC_DUMP_JSON) ||
	    (!buf && buflen))
		return GDRC_ERR_INVALID_PARAM;
	if (atomic_load_explicit(&ctx->cache.forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	ctx_stats_settled(ctx, v);
	return gdrc_stats_format(v, format, buf, buflen, needed_p);
}
