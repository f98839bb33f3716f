// SPDX-License-Identifier: BSD-3-Clause
/*
 * api_backend.c - which backend registers what, chosen at gdrc_init.
 *
 * Host memory: fixed buffers of an io_uring with a ring (io_uring; GPU
 * memory is then refused), ibv_reg_mr (verbs) with a protection domain,
 * else none.  A context that asks for cuFile (gdrc_config.cufile,
 * GDRC_BACKEND=cufile) registers host and GPU memory with it alone.
 * GPU memory: the GPU backends in GDRC_BACKEND's order (auto: dmabuf,
 * peermem, kmod, none), the first that works here:
 *   dmabuf   a PD; the driver has cuMemGetHandleForAddressRange and every
 *            device says CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED; the NIC
 *            takes ibv_reg_dmabuf_mr (probed once with fd -1);
 *   peermem  a PD, and nvidia-peermem (or nv_peer_mem) loaded;
 *   kmod     gdrcache.ko open (the module pins; the NIC gets nothing);
 *   none     always (tracked only, keys 0).
 * Every backend not used keeps its reason (gdrc_backend_status,
 * gdrc-info).  A list that ends without a working backend makes GPU gets
 * fail with GDRC_ERR_UNSUPPORTED, naming the reasons.
 *
 * Init time only: may log, allocate, make system calls and driver calls.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api_int.h"
#include "cufile/cufile.h"
#include "gdrc_int.h"
#include "kchan/kchan.h"
#include "log/log.h"

static const int auto_order[] = {
	GDRC_KNOB_BACKEND_DMABUF, GDRC_KNOB_BACKEND_PEERMEM,
	GDRC_KNOB_BACKEND_KMOD, GDRC_KNOB_BACKEND_NONE,
};

/* The public backend of a knob entry. */
static int knob_backend(int k)
{
	switch (k) {
	case GDRC_KNOB_BACKEND_DMABUF: return GDRC_BACKEND_DMABUF;
	case GDRC_KNOB_BACKEND_PEERMEM: return GDRC_BACKEND_PEERMEM;
	case GDRC_KNOB_BACKEND_KMOD: return GDRC_BACKEND_KMOD;
	default: return GDRC_BACKEND_NONE;
	}
}

static void why(struct gdrc_ctx *ctx, int backend, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void why(struct gdrc_ctx *ctx, int backend, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ctx->be_why[backend], sizeof(ctx->be_why[backend]), fmt, ap);
	va_end(ap);
}

/* The same reason for every GPU backend (DMABUF..GDRC_GPU_BACKEND_LAST). */
static void why_gpu(struct gdrc_ctx *ctx, const char *reason)
{
	for (int b = GDRC_BACKEND_DMABUF; b <= GDRC_GPU_BACKEND_LAST; b++)
		why(ctx, b, "%s", reason);
}

/* Host memory as fixed buffers of ring's table. */
static gdrc_status_t pick_uring(struct gdrc_ctx *ctx, struct io_uring *ring,
				uint32_t slots, struct gdrc_cache_params *p)
{
	const int b = GDRC_BACKEND_IO_URING;

	if (ctx->knobs.backend != GDRC_KNOB_BACKEND_AUTO) {
		gdrc_error("a ring registers with io_uring: GDRC_BACKEND must "
			   "be auto");
		why(ctx, b, "GDRC_BACKEND is not auto");
		return GDRC_ERR_UNSUPPORTED;
	}
#ifdef GDRC_HAVE_URING
	gdrc_status_t status;

	status = gdrc_pin_uring_open(ring, slots, &ctx->uring, ctx->be_why[b],
				     sizeof(ctx->be_why[b]));
	if (status) {
		gdrc_error("io_uring: %s", ctx->be_why[b]);
		return status;
	}
	p->ops = &gdrc_pin_uring_ops;
	p->be = ctx->uring;
	p->host_max_regions = slots;
	ctx->be_used[b] = 1;
	why(ctx, GDRC_BACKEND_VERBS, "the context registers with io_uring");
	return GDRC_OK;
#else
	(void)ring;
	(void)slots;
	(void)p;
	gdrc_error("a ring was given, but libgdrcache was built without "
		   "liburing");
	why(ctx, b, "built without liburing");
	return GDRC_ERR_UNSUPPORTED;
#endif
}

/* Host (and later GPU) memory with cuFile: libcufile loaded, its driver
 * opened (a reference per context), an empty base table. */
static gdrc_status_t pick_cufile(struct gdrc_ctx *ctx,
				 struct gdrc_cache_params *p)
{
	const int b = GDRC_BACKEND_CUFILE;
	gdrc_status_t status;

	if (ctx->knobs.backend != GDRC_KNOB_BACKEND_AUTO &&
	    ctx->knobs.backend != GDRC_KNOB_BACKEND_CUFILE) {
		gdrc_error("a context that registers with cuFile: GDRC_BACKEND "
			   "must be auto or cufile");
		why(ctx, b, "GDRC_BACKEND is neither auto nor cufile");
		return GDRC_ERR_UNSUPPORTED;
	}
	status = gdrc_cufile_get(ctx->knobs.cufile_library, &ctx->cufile,
				 ctx->be_why[b], sizeof(ctx->be_why[b]));
	if (status)
		return status;
	status = gdrc_pin_cufile_open(ctx->cufile, &ctx->cufile_be);
	if (status) {
		gdrc_cufile_put(ctx->cufile, 0);
		ctx->cufile = NULL;
		return status;
	}
	p->ops = &gdrc_pin_cufile_ops;
	p->be = ctx->cufile_be;
	/* A registration gone when the free that ends it returns: no
	 * thread's idle handle may keep it (cache.h, direct_refs). */
	p->direct_refs = 1;
	ctx->be_used[b] = 1;
	why(ctx, GDRC_BACKEND_VERBS, "the context registers with cuFile");
	why(ctx, GDRC_BACKEND_IO_URING, "the context registers with cuFile");
	return GDRC_OK;
}

void gdrc_api_backend_close(struct gdrc_ctx *ctx, int forked)
{
	gdrc_pin_cufile_close(ctx->cufile_be, forked);
	ctx->cufile_be = NULL;
	gdrc_cufile_put(ctx->cufile, forked);
	ctx->cufile = NULL;
#ifdef GDRC_HAVE_URING
	gdrc_pin_uring_close(ctx->uring, forked);
#else
	(void)forked;
#endif
	ctx->uring = NULL;
}

gdrc_status_t gdrc_api_pick_host(struct gdrc_ctx *ctx, struct ibv_pd *pd,
				 struct io_uring *ring, uint32_t slots,
				 int cufile, struct gdrc_cache_params *p)
{
	uint32_t list = ctx->knobs.backend;
	int first = gdrc_knob_list_at(list, 0);

	for (int b = 0; b < GDRC_BACKENDS; b++)
		why(ctx, b, "not in GDRC_BACKEND");
	p->host_max_regions = GDRC_LIMIT_NONE;
	if (cufile || first == GDRC_KNOB_BACKEND_CUFILE)
		return pick_cufile(ctx, p);
	why(ctx, GDRC_BACKEND_CUFILE, "not asked for (gdrc_config.cufile, "
				      "GDRC_BACKEND=cufile)");
	if (ring)
		return pick_uring(ctx, ring, slots, p);
#ifdef GDRC_HAVE_URING
	why(ctx, GDRC_BACKEND_IO_URING, "no ring (gdrc_config.ring)");
#else
	why(ctx, GDRC_BACKEND_IO_URING, "built without liburing");
#endif
	if (first == GDRC_KNOB_BACKEND_NONE && !gdrc_knob_list_at(list, 1)) {
		p->ops = &gdrc_pin_none_ops;
		p->be = NULL;
		ctx->be_used[GDRC_BACKEND_NONE] = 1;
		why(ctx, GDRC_BACKEND_VERBS, "GDRC_BACKEND=none");
		return GDRC_OK;
	}
	if (!pd) {
		if (first == GDRC_KNOB_BACKEND_VERBS) {
			gdrc_error("GDRC_BACKEND verbs needs a protection domain "
				   "(gdrc_config.pd)");
			return GDRC_ERR_UNSUPPORTED;
		}
		p->ops = &gdrc_pin_none_ops;
		p->be = NULL;
		ctx->be_used[GDRC_BACKEND_NONE] = 1;
		why(ctx, GDRC_BACKEND_VERBS,
		    "no protection domain (gdrc_config.pd)");
		return GDRC_OK;
	}
#ifdef GDRC_HAVE_VERBS
	p->ops = &gdrc_pin_verbs_ops;
	p->be = pd;
	ctx->be_used[GDRC_BACKEND_VERBS] = 1;
	return GDRC_OK;
#else
	gdrc_error("GDRC_BACKEND: a PD was given, but libgdrcache was built "
		   "without libibverbs");
	return GDRC_ERR_UNSUPPORTED;
#endif
}

#ifdef GDRC_HAVE_VERBS
/*
 * The dmabuf backend's export, in the memory's own context (the driver
 * refuses it from a thread with no context, and the caller's may be
 * another device's).  The range itself first (device and VMM memory
 * export any host-page-aligned part, a run of VMM mappings too, and the
 * 64 KiB page around a small sub-allocation); else the allocation
 * holding it, rounded to host pages, with the range's offset in it
 * (stream-ordered pool memory exports only whole allocations: measured
 * on driver 580, see docs/backends.md).  The allocation is what
 * cuMemGetAddressRange reports, which for VMM memory is one mapping:
 * the range attributes would give the whole reservation, whose export
 * fails over a hole, or holds mappings the registration does not cover.
 */
static int dmabuf_export(void *arg, uintptr_t addr, size_t len,
			 uint64_t *offset_p)
{
	const struct gdrc_cuda *cu = arg;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), s, e;
	CUdeviceptr base = 0;
	size_t size = 0;
	int full;
	struct gdrc_cuda_scope scope;
	CUresult res, res2;
	int fd = -1;

	*offset_p = 0;
	res = gdrc_cuda_enter_mem(cu, addr, &scope);
	if (res != CUDA_SUCCESS) {
		gdrc_error("no context to export %#lx+%zu in: %s",
			   (unsigned long)addr, len, gdrc_cuda_err(cu, res));
		return -1;
	}
	res = cu->cuMemGetHandleForAddressRange(
		&fd, (CUdeviceptr)addr, len,
		CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
	full = res == CUDA_ERROR_OUT_OF_MEMORY;
	if (res != CUDA_SUCCESS &&
	    cu->cuMemGetAddressRange(&base, &size, (CUdeviceptr)addr) ==
		    CUDA_SUCCESS) {
		s = gdrc_align_down((uintptr_t)base, page);
		e = gdrc_align_up((uintptr_t)base + size, page);
		if (s <= addr && addr + len <= e) {
			res2 = cu->cuMemGetHandleForAddressRange(
				&fd, (CUdeviceptr)s, e - s,
				CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
			full |= res2 == CUDA_ERROR_OUT_OF_MEMORY;
			if (res2 == CUDA_SUCCESS) {
				*offset_p = addr - s;
				res = CUDA_SUCCESS;
			}
		}
	}
	gdrc_cuda_leave(cu, &scope);
	if (res == CUDA_SUCCESS)
		return fd;
	if (full)
		return GDRC_PIN_EXPORT_FULL; /* the cache says so once */
	gdrc_error("cuMemGetHandleForAddressRange of %#lx+%zu: %s",
		   (unsigned long)addr, len, gdrc_cuda_err(cu, res));
	return -1;
}

static int dmabuf_ok(struct gdrc_ctx *ctx, struct ibv_pd *pd)
{
	const struct gdrc_cuda *cu = ctx->cuda;
	char nic[160];

	if (!pd) {
		why(ctx, GDRC_BACKEND_DMABUF,
		    "no protection domain (gdrc_config.pd)");
		return 0;
	}
	if (!cu->cuMemGetHandleForAddressRange) {
		why(ctx, GDRC_BACKEND_DMABUF,
		    "the CUDA driver has no cuMemGetHandleForAddressRange (11.7+)");
		return 0;
	}
	for (int d = 0; d < cu->device_count; d++) {
		int v = 0;

		if (cu->cuDeviceGetAttribute(&v,
					     CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
					     d) != CUDA_SUCCESS ||
		    !v) {
			why(ctx, GDRC_BACKEND_DMABUF,
			    "cuda device %d does not export dma-buf", d);
			return 0;
		}
	}
	if (!gdrc_pin_dmabuf_probe(pd, nic, sizeof(nic))) {
		why(ctx, GDRC_BACKEND_DMABUF, "%s", nic);
		return 0;
	}
	ctx->dmabuf_be.pd = pd;
	ctx->dmabuf_be.export_fd = dmabuf_export;
	ctx->dmabuf_be.arg = (void *)cu;
	return 1;
}
#endif

/* Can backend k register GPU memory here?  Records why not. */
static int gpu_ok(struct gdrc_ctx *ctx, int k, struct ibv_pd *pd,
		  const struct gdrc_pin_ops **ops_p, void **be_p)
{
	int b = knob_backend(k);

	switch (k) {
	case GDRC_KNOB_BACKEND_NONE:
		*ops_p = &gdrc_pin_none_ops;
		*be_p = NULL;
		return 1;
	case GDRC_KNOB_BACKEND_KMOD:
		if (!ctx->kchan) {
			why(ctx, b, "gdrcache.ko is not open (GDRC_KMOD=off, or "
				    "/dev/gdrcache missing)");
			return 0;
		}
		*ops_p = &gdrc_pin_kmod_ops;
		*be_p = NULL;
		return 1; /* gpu_kpin_required: set by the caller */
#ifdef GDRC_HAVE_VERBS
	case GDRC_KNOB_BACKEND_PEERMEM: {
		char w[160];

		if (!pd) {
			why(ctx, b, "no protection domain (gdrc_config.pd)");
			return 0;
		}
		if (!gdrc_pin_peermem_probe(NULL, w, sizeof(w))) {
			why(ctx, b, "%s", w);
			return 0;
		}
		*ops_p = &gdrc_pin_peermem_ops;
		*be_p = pd;
		return 1;
	}
	case GDRC_KNOB_BACKEND_DMABUF:
		if (!dmabuf_ok(ctx, pd))
			return 0;
		*ops_p = &gdrc_pin_dmabuf_ops;
		*be_p = &ctx->dmabuf_be;
		return 1;
#endif
	default:
		why(ctx, b, "built without libibverbs");
		return 0;
	}
}

void gdrc_api_pick_gpu(struct gdrc_ctx *ctx, struct ibv_pd *pd,
		       struct gdrc_cache_params *p)
{
	uint32_t list = ctx->knobs.backend;
	int first = gdrc_knob_list_at(list, 0), order[GDRC_KNOB_LIST_MAX];
	int n = 0, chosen = -1;

	if (ctx->cufile) {
		p->gpu_ops = &gdrc_pin_cufile_ops;
		p->gpu_be = ctx->cufile_be;
		if (!(ctx->cufile_mem & GDRC_CUFILE_GPU)) {
			/* Refused before classifying touches the memory. */
			why_gpu(ctx, "the context registers host memory only "
				     "with cuFile (gdrc_config.cufile)");
			ctx->gpu_refused = 1;
			return;
		}
		why_gpu(ctx, "the context registers with cuFile");
		if (!ctx->cuda) {
			/* No GPU memory will be seen: nothing to refuse. */
			gdrc_debug("cufile: no GPU support (%s): host memory "
				   "only", ctx->gpu_reason);
			return;
		}
		gdrc_pin_cufile_set_cuda(ctx->cufile_be, ctx->cuda);
		/* cuFile's own bound on each GPU's pinned memory is the
		 * per-device byte limit, if it is the lower one. */
		if (ctx->cufile->max_pinned_bytes < p->gpu_max_bytes)
			p->gpu_max_bytes = ctx->cufile->max_pinned_bytes;
		return;
	}
	if (ctx->uring) {
		/* io_uring pins host pages; GPU memory has none. */
		why_gpu(ctx, "the context registers host memory with io_uring "
			     "only");
		ctx->gpu_refused = 1;
		p->gpu_ops = &gdrc_pin_none_ops;
		return;
	}
	if (first == GDRC_KNOB_BACKEND_NONE && !gdrc_knob_list_at(list, 1)) {
		p->gpu_ops = &gdrc_pin_none_ops;
		why_gpu(ctx, "GDRC_BACKEND=none");
		return;
	}
	if (first == GDRC_KNOB_BACKEND_AUTO ||
	    first == GDRC_KNOB_BACKEND_VERBS) {
		memcpy(order, auto_order, sizeof(order));
		n = GDRC_KNOB_LIST_MAX;
	} else {
		while (n < GDRC_KNOB_LIST_MAX && gdrc_knob_list_at(list, n)) {
			order[n] = gdrc_knob_list_at(list, n);
			n++;
		}
	}
	if (!ctx->cuda) {
		for (int i = 0; i < n; i++)
			if (order[i] != GDRC_KNOB_BACKEND_NONE)
				why(ctx, knob_backend(order[i]),
				    "no GPU support: %s", ctx->gpu_reason);
		p->gpu_ops = &gdrc_pin_none_ops;
		return;
	}
	for (int i = 0; i < n; i++) {
		const struct gdrc_pin_ops *ops = NULL;
		void *be = NULL;
		int b = knob_backend(order[i]);

		if (chosen >= 0) {
			if (!ctx->be_used[b])
				why(ctx, b, "not tried: %s comes first",
				    gdrc_backend_name(chosen));
			continue;
		}
		if (!gpu_ok(ctx, order[i], pd, &ops, &be))
			continue;
		chosen = b;
		ctx->be_used[b] = 1;
		p->gpu_ops = ops;
		p->gpu_be = be;
		/* The kmod backend's registration is the module's pin. */
		p->gpu_kpin_required = b == GDRC_BACKEND_KMOD;
	}
	if (chosen < 0) {
		ctx->gpu_refused = 1;
		gdrc_warn("no GPU backend of GDRC_BACKEND works: GPU memory "
			  "will be refused");
	} else {
		gdrc_debug("GPU memory registered by %s",
			   gdrc_backend_name(chosen));
	}
}

void gdrc_api_gpu_refusal(const struct gdrc_ctx *ctx, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int b = GDRC_BACKEND_DMABUF;
	     b <= GDRC_GPU_BACKEND_LAST && off < len; b++) {
		int n = snprintf(buf + off, len - off, "%s%s: %s",
				 off ? "; " : "", gdrc_backend_name(b),
				 ctx->be_why[b]);

		if (n < 0)
			break;
		off += (size_t)n;
	}
}
