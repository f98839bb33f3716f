// SPDX-License-Identifier: BSD-3-Clause
/*
 * api_sources.c - the event sources: how a context learns that memory it
 * has registered was freed or unmapped, so that the registration goes
 * before the addresses are reused (docs/hooks.md, "Event sources").
 *
 *   host memory   our patch of glibc's memory functions, or UCX's UCM
 *                 where it owns them (hooks/); gdrcache.ko's notifier,
 *                 range by range (kchan/); userfaultfd, range by range
 *                 (GDRC_MEM_HOOKS=uffd, hooks/uffd.c); or the caller
 *                 itself, with gdrc_invalidate (GDRC_MEM_HOOKS=none);
 *   GPU memory    the CUDA free hooks (hooks/cuhooks.c), trusted once
 *                 their self test passed; else a check of each hit's
 *                 BUFFER_ID (GDRC_VALIDATE); gdrcache.ko revokes what
 *                 it pins itself.
 *
 * What is here:
 *   - the subscriber that turns a hook's event into an invalidation
 *     queued on the context (ctx_mem_event, hook context: only queues);
 *   - the check a slow get makes first (gdrc_api_hooks_check): did
 *     another library patch over our hooks?  Then whatever relied on
 *     them is flushed, and the hooks are taken back or host memory is
 *     no longer cached;
 *   - the CUDA free hooks' self test, once per process;
 *   - the setup at gdrc_init (gdrc_api_sources_open: which source
 *     watches what, and whether host memory may be cached at all;
 *     gdrc_api_sources_subscribe), and gdrc_install_hooks;
 *   - gdrc_invalidate, and the calls that report on the sources
 *     (gdrc_hooks_status, gdrc_cuda_hooks_status, gdrc_kmod_status,
 *     gdrc_source_status).
 *
 * Locks: cuhooks_test_lock guards the self test and its result, taken
 * alone.  The flushes walk the cache registry (gdrc_cache_each: its lock,
 * then each cache's).  Nothing else of ours is held here.
 *
 * Callers: api.c (gdrc_init), api_get.c (the slow get, the policy of a
 * GPU miss), the hooks (ctx_mem_event, in hook context), the program.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "api_int.h"
#include "cache/cache.h"
#include "config/config.h"
#include "cuda/cuda_loader.h"
#include "gdrc_int.h"
#include "hooks/hooks.h"
#include "kchan/kchan.h"
#include "log/log.h"
#include "vma/vma.h"

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

/* Our glibc hooks were overwritten and could not be taken back: said
 * once per process. */
static atomic_flag hooks_lost_warned = ATOMIC_FLAG_INIT;

/* ------------------------------------------------------------------
 * Events, and the check that the hooks still see every free.
 * ------------------------------------------------------------------ */

/* The hooks' subscriber (gdrc_hooks_subscribe): memory [start, end) lost
 * its contents; queue its invalidation on the context, counted by
 * source.  Hook context (see hooks.h): only queues. */
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
 * Did another library patch over our hooks since they went in?  Then
 * frees may have gone unseen.  CUDA's: what relied on those hooks is
 * flushed and GPU hits are tag checked from then on (cuhooks_lost).
 * glibc's: the hooks are taken back, chained over the newcomer's patch
 * (or UCX's UCM, if it was UCM, serves from then on), after a flush of
 * what relied on them; if they cannot be, every context that relied on
 * them drops its host registrations and caches none any more.  Cheap
 * when nothing happened: the probe is one load.
 */
void gdrc_api_hooks_check(void)
{
	/* The probe is one load; the full check reads every patched function. */
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
	if (!atomic_flag_test_and_set(&hooks_lost_warned))
		gdrc_warn("memory hooks were overwritten by another library: "
			  "host registrations are no longer cached");
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

/* See api_int.h: the self test's verdict, the test run first if it is
 * still owed. */
int gdrc_api_cuhooks_ok(const struct gdrc_cuda *cu, CUcontext cu_ctx)
{
	return cuhooks_test(cu, cu_ctx) == CUHOOKS_OK;
}

/* ------------------------------------------------------------------
 * Setup, at gdrc_init.
 * ------------------------------------------------------------------ */

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
		gdrc_api_hooks_check();
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

/*
 * The cache's question for a host miss (gdrc_cache_params.host_private):
 * is [start, end) privately mapped?  Unmapped pages count as private (no
 * backend but none registers them, and none pins nothing), with nothing
 * to remember.  Under the cache's write lock: gdrc_vma_kind allocates
 * nothing.
 */
static int host_private(uintptr_t start, uintptr_t end, uintptr_t *lo_p,
			uintptr_t *hi_p)
{
	static atomic_flag warned = ATOMIC_FLAG_INIT;

	switch (gdrc_vma_kind(start, end, lo_p, hi_p)) {
	case GDRC_VMA_PRIVATE:
		return 1;
	case GDRC_VMA_UNMAPPED:
		*lo_p = *hi_p = start;
		return 1;
	case GDRC_VMA_SHARED:
		return 0;
	case GDRC_VMA_UNKNOWN:
		break;
	}
	if (!atomic_flag_test_and_set(&warned))
		gdrc_warn("host memory is registered per get, uncached: the kind of its mapping is not known (%s; said once)",
			  gdrc_vma_method());
	return 0;
}

gdrc_status_t gdrc_api_sources_open(struct gdrc_ctx *ctx,
				    struct gdrc_cache_params *p)
{
	kmod_setup(ctx, p);
	p->cache_host = host_caching(&ctx->knobs, ctx->kchan != NULL);
	uffd_setup(ctx, p);
	/* gdrcache.ko's notifier sees every way pages go; the other
	 * sources only calls on the mapping itself, which is all that
	 * takes private pages (enum gdrc_vmemo_mode says what
	 * ends a run found private). */
	if (!ctx->kchan) {
		p->host_private = host_private;
		p->host_private_memo =
			p->watch == &uffd_watch_ops ? GDRC_VMEMO_OFF :
			ctx->knobs.mem_hooks == GDRC_KNOB_HOOKS_NONE ?
						      GDRC_VMEMO_EXPLICIT :
						      GDRC_VMEMO_EVENTS;
	}
	return gpu_setup(ctx);
}

gdrc_status_t gdrc_api_sources_subscribe(struct gdrc_ctx *ctx)
{
	if (((ctx->cache.p.cache_host || ctx->cuda_hooks) &&
	     ctx->knobs.mem_hooks == GDRC_KNOB_HOOKS_AUTO) ||
	    uffd_watches_host(ctx)) {
		ctx->hooks_slot = gdrc_hooks_subscribe(ctx_mem_event, ctx);
		if (ctx->hooks_slot < 0)
			return GDRC_ERR_LIMIT;
	}
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

/* ------------------------------------------------------------------
 * The caller as a source: frees it reports itself.
 * ------------------------------------------------------------------ */

GDRC_API gdrc_status_t gdrc_invalidate(struct gdrc_ctx *pub, const void *addr,
				       size_t len)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);
	uintptr_t start = (uintptr_t)addr;

	if (!ctx || !range_ok(addr, len))
		return GDRC_ERR_INVALID_PARAM;
	gdrc_api_hooks_check();
	/* As a get does: an unmap whose event is still on its way (posted
	 * by userfaultfd's reader after the unmapping thread went on, or
	 * by another thread's hook) is applied by this call too. */
	gdrc_hooks_wait_idle();
	return gdrc_cache_invalidate(&ctx->cache, start, start + len,
				     GDRC_STAT_INV_EXPLICIT);
}

/* ------------------------------------------------------------------
 * Statuses: which sources serve a context, and why the others do not.
 * ------------------------------------------------------------------ */

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

	gdrc_api_ctx_stats_settled(ctx, v);
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

GDRC_API gdrc_status_t gdrc_host_mem_status(struct gdrc_ctx *pub,
					    enum gdrc_host_mem mem,
					    const char **reason_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);
	const char *why;
	int on;

	if (!ctx || (mem != GDRC_HOST_MEM_PRIVATE &&
		     mem != GDRC_HOST_MEM_SHARED))
		return GDRC_ERR_INVALID_PARAM;
	if (!ctx->cache.p.watch &&
	    !atomic_load(&ctx->cache.cache_host)) {
		on = 0;
		if (gdrc_hooks_status(pub, &why) == GDRC_OK)
			why = "host memory is not cached: no source sees it go";
	} else if (ctx->kchan) {
		on = 1;
		why = "gdrcache.ko's notifier sees every way its pages go";
	} else if (mem == GDRC_HOST_MEM_PRIVATE) {
		on = 1;
		why = "only calls on its own mapping take its pages, which the host source watches (docs/hooks.md lists those it misses)";
	} else {
		on = 0;
		why = "a hole punched or a truncation of its file, or another process, can take its pages, which only gdrcache.ko sees: registered per get";
	}
	if (reason_p)
		*reason_p = why;
	return on ? GDRC_OK : GDRC_ERR_UNSUPPORTED;
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
