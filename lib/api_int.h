/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * api_int.h - the context, shared by the files of the API layer (api.c,
 * api_backend.c).  The API layer is where the modules meet: it may
 * include any of them (lib/README.md).
 */
#ifndef GDRC_API_INT_H
#define GDRC_API_INT_H

#include <gdrcache.h>

#include "cache/cache.h"
#include "config/config.h"
#include "cuda/cuda_loader.h"
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
	int cuda_hooks;           /* GDRC_MEM_HOOKS=auto with a driver */
	int hooks_slot;           /* subscription, or -1 */
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

/* A miss's request in a cuFile context: the memory kind it registers
 * (GDRC_ERR_UNSUPPORTED for the other, logged), every access right (a
 * cuFile registration has none to differ in). */
gdrc_status_t gdrc_api_cufile_req(struct gdrc_ctx *ctx,
				  struct gdrc_cache_req *req);

#endif /* GDRC_API_INT_H */
