// SPDX-License-Identifier: BSD-3-Clause
/*
 * api_cufile.c - contexts that register with cuFile, and the CUDA free
 * path that deregisters their registrations before the memory goes.
 *
 * NVIDIA's GPUDirect Storage guide asks for cuFileBufDeregister before
 * the buffer is freed, and libcufile 1.15 shows why (measured on an
 * H200, shared/research/storage-probe.md): a registration outlives its
 * memory, and the next allocation at the same address cannot be
 * registered (CU_FILE_MEMORY_ALREADY_REGISTERED).  The CUDA free hooks
 * only queue (hook context); for a cuFile context that is not enough.
 * So every CUDA free the hooks see takes a second step here, in the
 * freeing thread, before the driver frees (gdrc_hooks_set_cuda_sync):
 * each cuFile context applies its queued events at once, which
 * deregisters what the free ended and nobody holds (a cuFile context's
 * gets are direct references: no idle handle keeps one), and then its
 * free callback (gdrc_set_free_fn) drops what its caller holds, whose
 * last put deregisters too.  The cuFile deregistrations made there are
 * counted (stat free_deregs).
 *
 * The step runs inside the program's cuMemFree (maybe under its
 * allocator's lock, as PyTorch's): it takes cufile_ctx_lock for reading
 * and each context's cache lock, and calls cuFile; no lock of ours is
 * ever held around a CUDA free, and a free that cuFile itself makes
 * inside the step is not stepped again (the thread's in_step flag).
 *
 * Locks: cufile_ctx_lock (a rwlock: the list of cuFile contexts and
 * their free callbacks; written at gdrc_init, gdrc_fini and
 * gdrc_set_free_fn, read by the free step) → cache->lock.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "api_int.h"
#include "gdrc_int.h"
#include "hooks/hooks.h"
#include "log/log.h"

static pthread_rwlock_t cufile_ctx_lock = PTHREAD_RWLOCK_INITIALIZER;
/* Under cufile_ctx_lock: */
static struct gdrc_ctx *cufile_ctxs[GDRC_CACHES_MAX];
static unsigned cufile_nctx;
/* cufile_nctx, for the free path's look without the lock. */
static atomic_uint cufile_live;
static pthread_once_t cufile_step_once = PTHREAD_ONCE_INIT;

/* This thread is in the free step (a free cuFile makes inside it). */
static __thread int in_step;

static void cufile_free_step(uintptr_t start, uintptr_t end)
{
	int saved_errno = errno;

	if (in_step ||
	    !atomic_load_explicit(&cufile_live, memory_order_acquire))
		return;
	in_step = 1;
	pthread_rwlock_rdlock(&cufile_ctx_lock);
	for (unsigned i = 0; i < cufile_nctx; i++) {
		struct gdrc_ctx *ctx = cufile_ctxs[i];
		unsigned long before = gdrc_pin_cufile_thread_deregs;

		if (gdrc_cache_drain_events(&ctx->cache) != GDRC_OK)
			continue; /* a fork child's: the parent's to free */
		if (ctx->free_fn)
			ctx->free_fn(ctx->free_arg, start, end);
		if (gdrc_pin_cufile_thread_deregs != before)
			gdrc_cache_stat_add(&ctx->cache, GDRC_STAT_FREE_DEREGS,
					    gdrc_pin_cufile_thread_deregs -
						    before);
	}
	pthread_rwlock_unlock(&cufile_ctx_lock);
	in_step = 0;
	errno = saved_errno;
}

/* A fork child: the lock may have been held by a thread it lacks. */
static void cufile_atfork_child(void)
{
	pthread_rwlock_init(&cufile_ctx_lock, NULL);
}

static void cufile_step_install(void)
{
	pthread_atfork(NULL, NULL, cufile_atfork_child);
	gdrc_hooks_set_cuda_sync(cufile_free_step);
}

void gdrc_api_cufile_enlist(struct gdrc_ctx *ctx)
{
	pthread_once(&cufile_step_once, cufile_step_install);
	pthread_rwlock_wrlock(&cufile_ctx_lock);
	/* At most GDRC_CACHES_MAX contexts live at once. */
	cufile_ctxs[cufile_nctx++] = ctx;
	atomic_store_explicit(&cufile_live, cufile_nctx,
			      memory_order_release);
	pthread_rwlock_unlock(&cufile_ctx_lock);
	if (!ctx->cuda_hooks || !gdrc_cuhooks_active())
		gdrc_warn("cufile: the CUDA free hooks are off (%s): a "
			  "cuFile registration of freed memory is released "
			  "at the next get's BUFFER_ID check instead of at "
			  "the free",
			  ctx->cuda_hooks ? gdrc_cuhooks_reason() :
			  ctx->cuda ? "GDRC_MEM_HOOKS is not auto" :
				      ctx->gpu_reason);
}

void gdrc_api_cufile_forget(struct gdrc_ctx *ctx)
{
	if (!ctx->cufile)
		return;
	pthread_rwlock_wrlock(&cufile_ctx_lock);
	for (unsigned i = 0; i < cufile_nctx; i++) {
		if (cufile_ctxs[i] == ctx) {
			cufile_ctxs[i] = cufile_ctxs[--cufile_nctx];
			break;
		}
	}
	atomic_store_explicit(&cufile_live, cufile_nctx,
			      memory_order_release);
	ctx->free_fn = NULL;
	pthread_rwlock_unlock(&cufile_ctx_lock);
}

void gdrc_api_cufile_set_free(struct gdrc_ctx *ctx, gdrc_free_fn fn,
			      void *arg)
{
	pthread_rwlock_wrlock(&cufile_ctx_lock);
	ctx->free_fn = fn;
	ctx->free_arg = arg;
	pthread_rwlock_unlock(&cufile_ctx_lock);
}

gdrc_status_t gdrc_api_cufile_req(struct gdrc_ctx *ctx,
				  struct gdrc_cache_req *req)
{
	/* GPU memory in a host-only context never gets here: it is
	 * refused before classifying (gpu_refused, api_backend.c). */
	if (req->mem_type == GDRC_MEM_HOST &&
	    !(ctx->cufile_mem & GDRC_CUFILE_HOST)) {
		gdrc_error("%#lx is host memory, and this context registers "
			   "only GPU memory with cuFile (gdrc_config.cufile)",
			   (unsigned long)req->start);
		return GDRC_ERR_UNSUPPORTED;
	}
	req->access = GDRC_ACCESS_LOCAL_WRITE | GDRC_ACCESS_REMOTE_WRITE |
		      GDRC_ACCESS_REMOTE_READ | GDRC_ACCESS_REMOTE_ATOMIC;
	return GDRC_OK;
}
