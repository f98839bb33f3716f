// SPDX-License-Identifier: BSD-3-Clause
/*
 * api.c - a context's life: gdrc_init and gdrc_fini, the memory a context
 * lives in, fork, and what a call on a context that is not one does
 * (GDRC_MISUSE).  The other public calls are in api_get.c (get, put),
 * api_sources.c (event sources, gdrc_invalidate) and api_query.c (the
 * calls that report); api_int.h lists the files.
 *
 * gdrc_init (ctx_setup) loads the knobs, checks the config, has the host
 * backend chosen (api_backend.c), the event sources set up
 * (api_sources.c) and the GPU backend chosen, and makes the cache; then
 * it subscribes the context to the hooks' events and, last, hands out
 * its public pointer (below).  gdrc_fini undoes it in the other order.
 * The live contexts are the cache registry's (gdrc_cache_each): there is
 * no second list.
 *
 * Misuse: a call on a context that gdrc_fini finished, or on a pointer
 * that never was one, must be caught, not crash or corrupt another
 * context.  What gdrc_init hands out points into its context's first
 * CTX_ALIGN bytes, at a line chosen by the cache's uid (ctx_pub), and is
 * kept in the cache's key; every call finds the context by masking and
 * accepts the pointer only if it is the key (ctx_of: one load, of the
 * line the fast path reads first anyway).  gdrc_fini zeroes the key, and
 * a finished context's memory is never given back to malloc: it waits,
 * first in first out, for a later gdrc_init, which gives it a new uid.
 * So a call on a finished context reads memory that is still there and
 * fails the check, and after the memory's reuse it still fails unless
 * the new uid chooses the old line (one reuse in CTX_TAGS).  Handles are
 * checked by the cache (gdrc_cache_put_fast, gdrc_cache_put_slow).  A
 * misuse is logged, counted, and then aborts or is ignored, whatever
 * call found it (gdrc_api_misuse).
 *
 * Fork: this file is the fork protocol's one owner (atfork_*).  The
 * prepare handler takes ctx_lock and then the cache registry's lock, so
 * that the child finds both consistent; the child handler marks every
 * cache forked (gdrc_cache_fork_child) without taking any other lock
 * (other threads' locks may be held forever in the child).
 *
 * Lock order: ctx_lock, then the cache registry's lock (only in the fork
 * handler: neither is held while taking the other elsewhere), then a
 * cache's locks (cache.h).
 *
 * Callers: the program (gdrc_init, gdrc_fini), every file of the API
 * layer (gdrc_api_misuse, through ctx_open; the statistics), fork and
 * exit (the handlers).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "cache/cache.h"
#include "config/config.h"
#include "gdrc_int.h"
#include "hooks/hooks.h"
#include "kchan/kchan.h"
#include "log/log.h"
#include "stats/stats.h"

#define GDRC_CONFIG_FIELD_ALL                                                \
	(GDRC_CONFIG_FIELD_PD | GDRC_CONFIG_FIELD_MAX_REGIONS |              \
	 GDRC_CONFIG_FIELD_MAX_BYTES | GDRC_CONFIG_FIELD_IO_URING |          \
	 GDRC_CONFIG_FIELD_IO_URING_SLOTS | GDRC_CONFIG_FIELD_CUFILE)

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

/* ------------------------------------------------------------------
 * Misuse.
 * ------------------------------------------------------------------ */

/* A misuse was detected in call: see api_int.h.
 * Not GDRC_NOINLINE: a call to a cold function on the context check
 * that opens every call made GCC 12 move the callers' whole hit path
 * into .text.unlikely, behind a jump and six saved registers. */
__attribute__((noinline, format(printf, 2, 3)))
void gdrc_api_misuse(const char *call, const char *fmt, ...)
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

__attribute__((noinline)) /* not cold: see gdrc_api_misuse */
void gdrc_api_ctx_misuse(const char *call, const struct gdrc_ctx *pub)
{
	gdrc_api_misuse(call,
			"context %p is finished (gdrc_fini) or was never one",
			(const void *)pub);
}

/* ------------------------------------------------------------------
 * The memory a context lives in.
 * ------------------------------------------------------------------ */

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

/* ------------------------------------------------------------------
 * Fork.
 * ------------------------------------------------------------------ */

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

static void atfork_install(void)
{
	if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child))
		gdrc_warn("pthread_atfork failed: fork children are not "
			  "protected from their parent's registrations");
}

/* ------------------------------------------------------------------
 * Statistics: the context's, and what it prints at its end
 * (GDRC_STATS=1).
 * ------------------------------------------------------------------ */

/* The cache's counters, and the context's own (see api_int.h). */
void gdrc_api_ctx_stats(struct gdrc_ctx *ctx, uint64_t *v)
{
	gdrc_cache_stats(&ctx->cache, v);
	v[GDRC_STAT_UCM_EVENTS] =
		atomic_load_explicit(&ctx->ucm_events, memory_order_relaxed);
	v[GDRC_STAT_UFFD_EVENTS] =
		atomic_load_explicit(&ctx->uffd_events, memory_order_relaxed);
	v[GDRC_STAT_MISUSE] =
		atomic_load_explicit(&misuse_seen, memory_order_relaxed);
}

/* For the calls that report them (gdrc_stat_get, gdrc_stats_dump,
 * gdrc_source_status); not print_stats (see api_int.h). */
void gdrc_api_ctx_stats_settled(struct gdrc_ctx *ctx, uint64_t *v)
{
	gdrc_hooks_wait_idle();
	gdrc_api_ctx_stats(ctx, v);
}

/* GDRC_STATS=1: the counters, one JSON line in the log, at gdrc_fini or
 * exit. */
static void print_stats(struct gdrc_ctx *ctx)
{
	uint64_t v[GDRC_STAT_COUNT];
	char buf[2048];

	gdrc_api_ctx_stats(ctx, v);
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

/* ------------------------------------------------------------------
 * gdrc_init and gdrc_fini.
 * ------------------------------------------------------------------ */

/* Everything of gdrc_init up to the cache made: the knobs (the config's
 * fields over the environment's), the backends and the event sources.
 * On failure the caller undoes what was opened. */
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
	/* Who sees frees: decides p.cache_host and p.watch, loads the
	 * driver (api_sources.c). */
	status = gdrc_api_sources_open(ctx, &p);
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

	status = gdrc_api_sources_subscribe(ctx);
	if (status)
		goto err_cleanup;
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
