// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_gpu_vmm.c - libgdrcache on VMM memory made of several mappings,
 * against the real CUDA driver: one VA reservation, several
 * cuMemCreate + cuMemMap pieces and holes, the way PyTorch's expandable
 * segments and ncclMemAlloc lay it out.  The same cases as the fake
 * driver's tests/unit/test_gpu_vmm.c, on what the driver really does
 * (docs/probes/vmm_probe-h100-2026-11-25.txt, from tests/gpu/vmm_probe.c).
 *
 * Layout (16 MiB reserved): A 4 MiB at 0, B 4 MiB at 4, C 2 MiB at 8,
 * a hole from 10 to 16.  Each piece is its own physical allocation
 * (gpuDirectRDMACapable where the device supports it), with its own
 * BUFFER_ID.
 *
 * Tests, each run in every mode of modes[] (GDRC_VALIDATE always, auto
 * and hooks with GDRC_MEM_HOOKS=auto; always with GDRC_MEM_HOOKS=none,
 * where BUFFER_IDs alone catch a remap):
 *   keys           a get spanning 2 and 3 mappings is keyed by the
 *                  whole mappings it covers (key_addr the first one's
 *                  start, key_length their sum), buffer_id the first
 *                  one's, kind VMM; hits are served again (same id);
 *                  gdrc_ptr_query reports the one mapping;
 *   remap_new      the first, middle and last mapping unmapped,
 *                  released and a new allocation mapped in its place;
 *   remap_same     the same, mapping the same handle again (a new
 *                  BUFFER_ID too): after either, gets over all three
 *                  and over the remapped one never return the old
 *                  registration; with the hooks on, no get at all does
 *                  (with GDRC_MEM_HOOKS=none a get touching only
 *                  unchanged mappings may be served the old one);
 *   partial_unmap  one cuMemUnmap over B and C: gets reaching B are
 *                  refused (GDRC_ERR_UNSUPPORTED), one inside A works;
 *   hole           a request from C into the hole and one inside the
 *                  hole are refused, nothing is registered;
 *   pool_trim      stream-ordered memory freed, the pool trimmed to 0
 *                  and allocated again: a new registration, never the
 *                  old one;
 *   no_context     gets (and gdrc_ptr_query) from a thread that never
 *                  made a context current work, and leave it with none;
 *                  a thread with device 0's primary context the same;
 *   mode_stats     one fixed workload per mode, printing the
 *                  tag_checks, hits and invalidations counters;
 *   other_device   the layout on device 1 (skipped with one device),
 *                  got, put and invalidated from threads with device
 *                  0's primary context current and with none: keys on
 *                  device 1, hits across threads, B's remap (made from
 *                  device 0's context) never served stale.
 * Every case prints each mode's counters too.
 *
 * libgdrcache runs with cfg NULL, i.e. the "none" backend (registrations
 * tracked, keys 0): no NIC is needed.  The main thread keeps device 0's
 * primary context current.  Only the driver API is used (no runtime).
 *
 * Run on a machine with a GPU:
 *     ctest -L gpu -R test_gpu_vmm_driver   (in the build directory)
 *     tests/gpu/test_gpu_vmm_driver         (GDRC_LOG_LEVEL=debug: detail)
 * Without a driver or a device it prints "skipped: no GPU" and exits 77;
 * without VMM support (or with a granularity above 2 MiB) each test skips.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cuda.h>

#include <gdrcache.h>

#include "gpu_test.h"

#define GROUP_NAME "gpu vmm (driver API)"

#define RESERVED (16 * MIB)
#define NSEG 3
#define POOL_SIZE (64 * MIB)
#define STAT_HITS 10 /* hits of the mode_stats workload, per phase */

static CUdevice dev0;
static CUcontext pctx0;
static int ndevices;

struct mode {
	const char *validate; /* GDRC_VALIDATE */
	const char *hooks;    /* GDRC_MEM_HOOKS */
};

static const struct mode modes[] = {
	{ "always", "auto" },
	{ "auto", "auto" },
	{ "hooks", "auto" },
	{ "always", "none" }, /* BUFFER_IDs alone */
};

/* Whether a cuMemUnmap reaches the cache in mode m. */
static int hooks_on(const struct mode *m)
{
	return !strcmp(m->hooks, "auto");
}

/* ====================================================================
 * Helpers (more in gpu_test.h)
 * ==================================================================== */

static void print_stats(struct gdrc_ctx *ctx, const struct mode *m,
			const char *what)
{
	print_message("    [%s] GDRC_VALIDATE=%s GDRC_MEM_HOOKS=%s: "
		      "tag_checks %llu hits %llu invalidations %llu "
		      "(misses %llu, by tag check %llu, by cuda hook %llu)\n",
		      what, m->validate, m->hooks,
		      (unsigned long long)stat_of(ctx, GDRC_STAT_TAG_CHECKS),
		      (unsigned long long)stat_of(ctx, GDRC_STAT_HITS),
		      (unsigned long long)stat_of(ctx, GDRC_STAT_INVALIDATIONS),
		      (unsigned long long)stat_of(ctx, GDRC_STAT_MISSES),
		      (unsigned long long)stat_of(ctx, GDRC_STAT_INV_TAG_CHECK),
		      (unsigned long long)stat_of(ctx,
						  GDRC_STAT_INV_CUDA_HOOK));
}

/* A context with GPU support in mode m (the knobs are set for the
 * gdrc_init call only). */
static struct gdrc_ctx *ctx_open_mode(const struct mode *m)
{
	struct gdrc_ctx *ctx = NULL;
	const char *reason = NULL;
	gdrc_status_t status;

	assert_int_equal(setenv("GDRC_VALIDATE", m->validate, 1), 0);
	assert_int_equal(setenv("GDRC_MEM_HOOKS", m->hooks, 1), 0);
	status = gdrc_init(NULL, &ctx);
	unsetenv("GDRC_VALIDATE");
	unsetenv("GDRC_MEM_HOOKS");
	if (status != GDRC_OK)
		print_error("gdrc_init with GDRC_VALIDATE=%s "
			    "GDRC_MEM_HOOKS=%s\n", m->validate, m->hooks);
	GD(status);
	assert_non_null(ctx);
	if (gdrc_gpu_status(ctx, &reason) != GDRC_OK) {
		gdrc_fini(ctx);
		fail_msg("libgdrcache has no GPU support: %s",
			 reason ? reason : "(no reason)");
	}
	if (hooks_on(m) && gdrc_cuda_hooks_status(ctx, &reason) != GDRC_OK) {
		gdrc_fini(ctx);
		fail_msg("the CUDA free hooks are not working: %s",
			 reason ? reason : "(no reason)");
	}
	return ctx;
}

/* gdrc_mr_get that must succeed; the reference is dropped again (the
 * registration stays cached).  @return what gdrc_mr_query says of it. */
static struct gdrc_mr_info get_info(struct gdrc_ctx *ctx, CUdeviceptr addr,
				    size_t len)
{
	struct gdrc_mr *mr = NULL;
	struct gdrc_mr_info info;

	memset(&info, 0, sizeof(info));
	GD(gdrc_mr_get(ctx, vp(addr), len, ACCESS, 0, &mr));
	assert_non_null(mr);
	GD(gdrc_mr_query(mr, &info));
	gdrc_mr_put(ctx, mr);
	return info;
}

/* gdrc_mr_get that must fail with want, writing no registration. */
static void get_refused(struct gdrc_ctx *ctx, CUdeviceptr addr, size_t len,
			gdrc_status_t want)
{
	struct gdrc_mr *mr = NULL;

	GD_EXPECT(gdrc_mr_get(ctx, vp(addr), len, ACCESS, 0, &mr), want);
	assert_null(mr);
}

/*
 * A registration of device's GPU memory keyed [key, key + len): the
 * registered range is that rounded out to 64 KiB, buffer_id the one of
 * the first mapping (or allocation) it covers.
 */
static void check_key_on(const struct gdrc_mr_info *i, int device, int kind,
			 CUdeviceptr key, size_t len, unsigned long long bid)
{
	assert_int_equal(i->mem_type, GDRC_MEM_CUDA);
	assert_int_equal(i->kind, kind);
	assert_int_equal(i->device, device);
	assert_int_equal(i->backend, GDRC_BACKEND_NONE);
	assert_int_equal(i->access, ACCESS);
	assert_int_equal(i->key_addr, key);
	assert_int_equal(i->key_length, len);
	assert_int_equal(i->addr, align_down(key, GPU_PAGE));
	assert_int_equal(i->length,
			 align_up(key + len, GPU_PAGE) -
				 align_down(key, GPU_PAGE));
	assert_int_not_equal(bid, 0);
	assert_int_equal(i->buffer_id, bid);
	assert_true(i->flags & GDRC_MR_INFO_CACHED);
}

static void check_key(const struct gdrc_mr_info *i, int kind,
		      CUdeviceptr key, size_t len, unsigned long long bid)
{
	check_key_on(i, 0, kind, key, len, bid);
}

/* ====================================================================
 * The layout: A 4 MiB at 0, B 4 MiB at 4, C 2 MiB at 8, hole at 10
 * ==================================================================== */

enum { SEG_A, SEG_B, SEG_C };

static const char *const seg_names[NSEG] = { "A", "B", "C" };

struct layout {
	CUdevice dev;                          /* where the pieces live */
	CUmemAllocationProp prop;
	CUdeviceptr va;                        /* RESERVED bytes */
	CUdeviceptr seg[NSEG];                 /* A, B, C */
	size_t size[NSEG];
	CUdeviceptr hole;                      /* 10 MiB .. 16 MiB */
	CUmemGenericAllocationHandle h[NSEG];
	int have[NSEG];                        /* h[i] not released */
	int mapped[NSEG];                      /* h[i] mapped at seg[i] */
};

/* The allocation properties every piece on dev is made with. */
static void vmm_prop(CUmemAllocationProp *prop, CUdevice dev)
{
	CUdevice_attribute rdma;

	memset(prop, 0, sizeof(*prop));
	prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop->location.id = (int)dev;
	/* What RDMA needs; asked only where the device supports it. */
	rdma = CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED;
	prop->allocFlags.gpuDirectRDMACapable = dev_attr(rdma, dev) ? 1 : 0;
}

/* Skip the calling test unless dev has VMM with a granularity the
 * layout's 2 MiB pieces are made of. */
static void need_vmm_on(CUdevice dev)
{
	CUmemAllocationProp prop;
	size_t gran = 0;

	if (!dev_attr(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
		      dev)) {
		print_message("    device %d has no virtual memory management\n",
			      (int)dev);
		skip();
	}
	vmm_prop(&prop, dev);
	CU(cuMemGetAllocationGranularity(&gran, &prop,
					 CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	if (!gran || (2 * MIB) % gran) {
		print_message("    granularity %zu does not divide 2 MiB\n",
			      gran);
		skip();
	}
}

static void need_vmm(void)
{
	need_vmm_on(dev0);
}

static void seg_create(struct layout *l, int i)
{
	CU(cuMemCreate(&l->h[i], l->size[i], &l->prop, 0));
	l->have[i] = 1;
}

static void seg_release(struct layout *l, int i)
{
	CU(cuMemRelease(l->h[i]));
	l->h[i] = 0;
	l->have[i] = 0;
}

/* Map h[i] at seg[i], read-write for the layout's device. */
static void seg_map(struct layout *l, int i)
{
	CUmemAccessDesc access;

	memset(&access, 0, sizeof(access));
	access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	access.location.id = (int)l->dev;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CU(cuMemMap(l->seg[i], l->size[i], 0, l->h[i], 0));
	l->mapped[i] = 1;
	CU(cuMemSetAccess(l->seg[i], l->size[i], &access, 1));
}

static void seg_unmap(struct layout *l, int i)
{
	CU(cuMemUnmap(l->seg[i], l->size[i]));
	l->mapped[i] = 0;
}

static void layout_make_on(struct layout *l, CUdevice dev)
{
	memset(l, 0, sizeof(*l));
	l->dev = dev;
	vmm_prop(&l->prop, dev);
	CU(cuMemAddressReserve(&l->va, RESERVED, 0, 0, 0));
	l->seg[SEG_A] = l->va;
	l->size[SEG_A] = 4 * MIB;
	l->seg[SEG_B] = l->va + 4 * MIB;
	l->size[SEG_B] = 4 * MIB;
	l->seg[SEG_C] = l->va + 8 * MIB;
	l->size[SEG_C] = 2 * MIB;
	l->hole = l->va + 10 * MIB;
	for (int i = 0; i < NSEG; i++) {
		seg_create(l, i);
		seg_map(l, i);
	}
	print_message("    layout on device %d: %#llx, A bid %llu, B bid %llu, "
		      "C bid %llu, gpuDirectRDMACapable %d\n", (int)dev,
		      (unsigned long long)l->va, buffer_id_of(l->seg[SEG_A]),
		      buffer_id_of(l->seg[SEG_B]), buffer_id_of(l->seg[SEG_C]),
		      (int)l->prop.allocFlags.gpuDirectRDMACapable);
}

static void layout_make(struct layout *l)
{
	layout_make_on(l, dev0);
}

static void layout_free(struct layout *l)
{
	for (int i = 0; i < NSEG; i++) {
		if (l->mapped[i])
			seg_unmap(l, i);
		if (l->have[i])
			seg_release(l, i);
	}
	CU(cuMemAddressFree(l->va, RESERVED));
	l->va = 0;
}

/* ====================================================================
 * 1. Keys over several mappings
 * ==================================================================== */

static void keys_case(const struct mode *m)
{
	struct gdrc_mr_info two, three, bc, info;
	struct gdrc_ptr_info pi;
	struct gdrc_ctx *ctx;
	struct layout l;
	CUdeviceptr a, b, c;
	uint64_t hits;

	print_message("  mode GDRC_VALIDATE=%s GDRC_MEM_HOOKS=%s\n",
		      m->validate, m->hooks);
	layout_make(&l);
	a = l.seg[SEG_A];
	b = l.seg[SEG_B];
	c = l.seg[SEG_C];
	ctx = ctx_open_mode(m);

	/* Nothing cached yet: gdrc_ptr_query reports the one mapping. */
	memset(&pi, 0xa5, sizeof(pi));
	GD(gdrc_ptr_query(ctx, vp(b + 5), &pi));
	print_message("    ptr_query B+5: kind %d buffer id %llu alloc "
		      "%#llx+%llu flags %#x\n", pi.kind,
		      (unsigned long long)pi.buffer_id,
		      (unsigned long long)pi.alloc_base,
		      (unsigned long long)pi.alloc_size, pi.flags);
	assert_int_equal(pi.kind, GDRC_PTR_VMM);
	assert_int_equal(pi.mem_type, GDRC_MEM_CUDA);
	assert_int_equal(pi.device, 0);
	assert_int_equal(pi.flags, 0);
	assert_int_equal(pi.buffer_id, buffer_id_of(b));
	assert_int_equal(pi.alloc_base, b);
	assert_int_equal(pi.alloc_size, 4 * MIB);

	/* A+1M..B+1M: A and B, keyed A..B. */
	two = get_info(ctx, a + MIB, 4 * MIB);
	print_mr("A+1M 4M (A, B)", &two);
	check_key(&two, GDRC_PTR_VMM, a, 8 * MIB, buffer_id_of(a));
	hits = stat_of(ctx, GDRC_STAT_HITS);
	info = get_info(ctx, a + MIB, 4 * MIB);
	assert_int_equal(info.id, two.id);
	info = get_info(ctx, a + 3 * MIB, 2 * MIB);
	assert_int_equal(info.id, two.id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), hits + 2);

	/* A+1M..C+1M: all three, keyed A..C. */
	three = get_info(ctx, a + MIB, 8 * MIB);
	print_mr("A+1M 8M (A, B, C)", &three);
	check_key(&three, GDRC_PTR_VMM, a, 10 * MIB, buffer_id_of(a));
	assert_int_not_equal(three.id, two.id);
	/* Served again, inside any of its mappings (ranges only it holds). */
	hits = stat_of(ctx, GDRC_STAT_HITS);
	assert_int_equal(get_info(ctx, b + 3 * MIB, 2 * MIB).id, three.id);
	assert_int_equal(get_info(ctx, c + 64, 64).id, three.id);
	assert_int_equal(get_info(ctx, a, 10 * MIB).id, three.id);
	assert_int_equal(get_info(ctx, a + MIB, 8 * MIB).id, three.id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), hits + 4);
	print_stats(ctx, m, "keys");
	gdrc_fini(ctx);

	/* B+3M..C+1M in a context of its own: B and C, keyed B..C. */
	ctx = ctx_open_mode(m);
	bc = get_info(ctx, b + 3 * MIB, 2 * MIB);
	print_mr("B+3M 2M (B, C)", &bc);
	check_key(&bc, GDRC_PTR_VMM, b, 6 * MIB, buffer_id_of(b));
	hits = stat_of(ctx, GDRC_STAT_HITS);
	assert_int_equal(get_info(ctx, c + MIB, 64).id, bc.id);
	assert_int_equal(get_info(ctx, b, 6 * MIB).id, bc.id);
	assert_int_equal(get_info(ctx, b + 3 * MIB, 2 * MIB).id, bc.id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), hits + 3);
	print_stats(ctx, m, "keys B..C");
	gdrc_fini(ctx);
	layout_free(&l);
}

static void test_gpu_vmm_keys(void **state)
{
	(void)state;
	need_vmm();
	for (size_t m = 0; m < ARRAY_SIZE(modes); m++)
		keys_case(&modes[m]);
}

/* ====================================================================
 * 2. Remap of the first, a middle and the last mapping
 * ==================================================================== */

enum remap_way {
	REMAP_NEW,  /* unmap, release, create, map, set access */
	REMAP_SAME, /* unmap, map the same handle again, set access */
};

static void remap_one(struct layout *l, const struct mode *m,
		      enum remap_way way, int target)
{
	struct gdrc_mr_info abc, info;
	unsigned long long old_bid, new_bid;
	struct gdrc_ctx *ctx;

	ctx = ctx_open_mode(m);
	abc = get_info(ctx, l->va, 10 * MIB);
	check_key(&abc, GDRC_PTR_VMM, l->va, 10 * MIB,
		  buffer_id_of(l->seg[SEG_A]));
	/* Warm every mapping's hit path too. */
	for (int i = 0; i < NSEG; i++)
		assert_int_equal(get_info(ctx, l->seg[i] + 64, 64).id, abc.id);

	old_bid = buffer_id_of(l->seg[target]);
	seg_unmap(l, target);
	if (way == REMAP_NEW) {
		seg_release(l, target);
		seg_create(l, target);
	}
	seg_map(l, target);
	new_bid = buffer_id_of(l->seg[target]);
	print_message("    %s: %s remapped (%s): BUFFER_ID %llu -> %llu\n",
		      m->validate, seg_names[target],
		      way == REMAP_NEW ? "new allocation" : "same handle",
		      old_bid, new_bid);
	assert_true(new_bid != old_bid);

	/* Each mapping alone. */
	for (int i = 0; i < NSEG; i++) {
		info = get_info(ctx, l->seg[i] + 64, 64);
		if (i == target || hooks_on(m))
			assert_int_not_equal(info.id, abc.id);
		if (info.id != abc.id)
			check_key(&info, GDRC_PTR_VMM, l->seg[i], l->size[i],
				  buffer_id_of(l->seg[i]));
		if (i == target)
			assert_int_equal(info.buffer_id, new_bid);
	}
	/* All three. */
	info = get_info(ctx, l->va, 10 * MIB);
	print_mr("A..C after the remap", &info);
	assert_int_not_equal(info.id, abc.id);
	check_key(&info, GDRC_PTR_VMM, l->va, 10 * MIB,
		  buffer_id_of(l->seg[SEG_A]));
	assert_int_equal(get_info(ctx, l->va + MIB, 9 * MIB).id, info.id);
	assert_true(stat_of(ctx, GDRC_STAT_INVALIDATIONS) >= 1);
	if (!hooks_on(m))
		assert_true(stat_of(ctx, GDRC_STAT_INV_TAG_CHECK) >= 1);
	print_stats(ctx, m, way == REMAP_NEW ? "remap new" : "remap same");
	gdrc_fini(ctx);
}

static void remap_case(enum remap_way way)
{
	struct layout l;

	need_vmm();
	for (size_t m = 0; m < ARRAY_SIZE(modes); m++) {
		layout_make(&l);
		for (int target = 0; target < NSEG; target++)
			remap_one(&l, &modes[m], way, target);
		layout_free(&l);
	}
}

static void test_gpu_vmm_remap_new(void **state)
{
	(void)state;
	remap_case(REMAP_NEW);
}

static void test_gpu_vmm_remap_same(void **state)
{
	(void)state;
	remap_case(REMAP_SAME);
}

/* ====================================================================
 * 3. One cuMemUnmap over B and C
 * ==================================================================== */

static void partial_unmap_case(const struct mode *m)
{
	struct gdrc_mr_info abc, info;
	struct gdrc_ctx *ctx;
	struct layout l;

	layout_make(&l);
	ctx = ctx_open_mode(m);
	abc = get_info(ctx, l.va, 10 * MIB);
	check_key(&abc, GDRC_PTR_VMM, l.va, 10 * MIB,
		  buffer_id_of(l.seg[SEG_A]));
	CU(cuMemUnmap(l.seg[SEG_B], 6 * MIB));
	l.mapped[SEG_B] = 0;
	l.mapped[SEG_C] = 0;

	/* Anything reaching B (or C) now reaches a hole. */
	get_refused(ctx, l.va, 10 * MIB, GDRC_ERR_UNSUPPORTED);
	get_refused(ctx, l.seg[SEG_B], 64, GDRC_ERR_UNSUPPORTED);
	get_refused(ctx, l.seg[SEG_A] + 3 * MIB, 2 * MIB,
		    GDRC_ERR_UNSUPPORTED);
	get_refused(ctx, l.seg[SEG_C] + MIB, 64, GDRC_ERR_UNSUPPORTED);

	/* Inside A: fine; with the hooks on, not the old registration. */
	info = get_info(ctx, l.seg[SEG_A] + 64, 64);
	print_mr("inside A after B, C unmapped", &info);
	if (hooks_on(m))
		assert_int_not_equal(info.id, abc.id);
	if (info.id != abc.id)
		check_key(&info, GDRC_PTR_VMM, l.seg[SEG_A], 4 * MIB,
			  buffer_id_of(l.seg[SEG_A]));
	assert_int_equal(info.buffer_id, buffer_id_of(l.seg[SEG_A]));
	assert_int_equal(get_info(ctx, l.seg[SEG_A], 4 * MIB).id, info.id);
	print_stats(ctx, m, "partial unmap");
	gdrc_fini(ctx);
	layout_free(&l);
}

static void test_gpu_vmm_partial_unmap(void **state)
{
	(void)state;
	need_vmm();
	for (size_t m = 0; m < ARRAY_SIZE(modes); m++)
		partial_unmap_case(&modes[m]);
}

/* ====================================================================
 * 4. Holes
 * ==================================================================== */

static void hole_case(const struct mode *m)
{
	struct gdrc_mr_info info;
	struct gdrc_ptr_info pi;
	struct gdrc_ctx *ctx;
	struct layout l;

	layout_make(&l);
	ctx = ctx_open_mode(m);
	/* From C into the hole, and inside the hole. */
	get_refused(ctx, l.seg[SEG_C] + MIB, 2 * MIB, GDRC_ERR_UNSUPPORTED);
	get_refused(ctx, l.hole + MIB, 64, GDRC_ERR_UNSUPPORTED);
	get_refused(ctx, l.hole, RESERVED - 10 * MIB, GDRC_ERR_UNSUPPORTED);
	GD_EXPECT(gdrc_ptr_query(ctx, vp(l.hole), &pi), GDRC_ERR_UNSUPPORTED);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 0);

	/* A registration of C does not serve the request either. */
	info = get_info(ctx, l.seg[SEG_C], 2 * MIB);
	check_key(&info, GDRC_PTR_VMM, l.seg[SEG_C], 2 * MIB,
		  buffer_id_of(l.seg[SEG_C]));
	get_refused(ctx, l.seg[SEG_C] + MIB, 2 * MIB, GDRC_ERR_UNSUPPORTED);
	get_refused(ctx, l.va, 12 * MIB, GDRC_ERR_UNSUPPORTED);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 1);
	print_stats(ctx, m, "hole");
	gdrc_fini(ctx);
	layout_free(&l);
}

static void test_gpu_vmm_hole(void **state)
{
	(void)state;
	need_vmm();
	for (size_t m = 0; m < ARRAY_SIZE(modes); m++)
		hole_case(&modes[m]);
}

/* ====================================================================
 * 5. Stream-ordered pool: free, trim, allocate again
 * ==================================================================== */

static void pool_trim_case(const struct mode *m, CUstream stream,
			   CUmemoryPool pool)
{
	struct gdrc_mr_info i1, i2;
	unsigned long long b1, b2;
	struct gdrc_ctx *ctx;
	CUdeviceptr p1, p2, base = 0;
	size_t size = 0;

	ctx = ctx_open_mode(m);
	CU(cuMemAllocAsync(&p1, POOL_SIZE, stream));
	CU(cuStreamSynchronize(stream));
	CU(cuMemGetAddressRange(&base, &size, p1));
	b1 = buffer_id_of(p1);
	i1 = get_info(ctx, p1 + 4096, 4096);
	print_mr("pool before the trim", &i1);
	check_key(&i1, GDRC_PTR_POOL, base, size, b1);
	assert_int_equal(get_info(ctx, p1, POOL_SIZE).id, i1.id);

	CU(cuMemFreeAsync(p1, stream));
	CU(cuStreamSynchronize(stream));
	CU(cuMemPoolTrimTo(pool, 0));
	CU(cuMemAllocAsync(&p2, POOL_SIZE, stream));
	CU(cuStreamSynchronize(stream));
	b2 = buffer_id_of(p2);
	print_message("    %s/%s: pool VA %#llx -> %#llx (%s), BUFFER_ID "
		      "%llu -> %llu\n", m->validate, m->hooks,
		      (unsigned long long)p1, (unsigned long long)p2,
		      p1 == p2 ? "the same" : "another", b1, b2);
	if (p1 == p2)
		assert_true(b2 != b1);
	CU(cuMemGetAddressRange(&base, &size, p2));
	i2 = get_info(ctx, p2 + 4096, 4096);
	print_mr("pool after the trim", &i2);
	assert_int_not_equal(i2.id, i1.id);
	check_key(&i2, GDRC_PTR_POOL, base, size, b2);
	assert_int_equal(get_info(ctx, p2, POOL_SIZE).id, i2.id);
	print_stats(ctx, m, "pool trim");
	gdrc_fini(ctx);
	CU(cuMemFreeAsync(p2, stream));
	CU(cuStreamSynchronize(stream));
}

static void test_gpu_vmm_pool_trim(void **state)
{
	CUmemoryPool pool;
	CUstream stream;

	(void)state;
	if (!dev_attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev0)) {
		print_message("    device 0 has no memory pools\n");
		skip();
	}
	CU(cuDeviceGetDefaultMemPool(&pool, dev0));
	CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
	for (size_t m = 0; m < ARRAY_SIZE(modes); m++)
		pool_trim_case(&modes[m], stream, pool);
	CU(cuMemPoolTrimTo(pool, 0));
	CU(cuStreamDestroy(stream));
}

/* ====================================================================
 * 6. Threads with no current context, and with device 0's primary one
 * ==================================================================== */

/* What a thread saw; checked by the main thread (cmocka's asserts must
 * not run on another thread). */
struct thread_arg {
	struct gdrc_ctx *ctx;
	CUdeviceptr p, q;   /* get [p, p + len); gdrc_ptr_query q */
	size_t len;
	CUdeviceptr inv;    /* gdrc_invalidate [inv, inv + inv_len) first */
	size_t inv_len;     /* 0: no invalidation */
	CUcontext make_current; /* cuCtxSetCurrent first, or NULL */
	CUresult set_res, before_res, after_res;
	CUcontext before, after; /* current before and after */
	gdrc_status_t inv_status, query_status, get1_status, get2_status;
	struct gdrc_ptr_info pinfo;
	struct gdrc_mr_info info1, info2;
};

static gdrc_status_t thread_get(struct thread_arg *a,
				struct gdrc_mr_info *info)
{
	struct gdrc_mr *mr = NULL;
	gdrc_status_t s;

	s = gdrc_mr_get(a->ctx, vp(a->p), a->len, ACCESS, 0, &mr);
	if (s == GDRC_OK) {
		s = gdrc_mr_query(mr, info);
		gdrc_mr_put(a->ctx, mr);
	}
	return s;
}

static void *get_thread(void *argp)
{
	struct thread_arg *a = argp;

	a->set_res = CUDA_SUCCESS;
	if (a->make_current)
		a->set_res = cuCtxSetCurrent(a->make_current);
	a->before = (CUcontext)(uintptr_t)1;
	a->before_res = cuCtxGetCurrent(&a->before);
	if (a->inv_len)
		a->inv_status = gdrc_invalidate(a->ctx, vp(a->inv),
						a->inv_len);
	/* Classified here first: cuMemGetAddressRange needs a context. */
	a->query_status = gdrc_ptr_query(a->ctx, vp(a->q), &a->pinfo);
	a->get1_status = thread_get(a, &a->info1); /* a miss, or a hit */
	a->get2_status = thread_get(a, &a->info2); /* a hit */
	a->after = (CUcontext)(uintptr_t)1;
	a->after_res = cuCtxGetCurrent(&a->after);
	if (a->make_current)
		(void)cuCtxSetCurrent(NULL);
	return NULL;
}

/* Run get_thread on a new thread and wait for it. */
static void thread_go(struct thread_arg *a)
{
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, get_thread, a), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

/*
 * What every thread must have seen: each call worked, on VMM memory of
 * device, gdrc_ptr_query with the driver's BUFFER_ID, the second get
 * served the first's registration, and the thread's context was what it
 * set (none, or make_current) before and after.
 */
static void thread_check(const struct thread_arg *a, int device)
{
	CU(a->set_res);
	CU(a->before_res);
	CU(a->after_res);
	assert_ptr_equal(a->before, a->make_current);
	assert_ptr_equal(a->after, a->make_current);
	if (a->inv_len)
		GD(a->inv_status);
	GD(a->query_status);
	assert_int_equal(a->pinfo.kind, GDRC_PTR_VMM);
	assert_int_equal(a->pinfo.device, device);
	assert_int_equal(a->pinfo.buffer_id, buffer_id_of(a->q));
	GD(a->get1_status);
	GD(a->get2_status);
	assert_int_equal(a->info1.device, device);
	assert_int_equal(a->info2.id, a->info1.id);
}

/* Run get_thread on a new thread with a new context of mode m. */
static void run_thread(const struct mode *m, const struct layout *l,
		       CUcontext make_current, struct thread_arg *a)
{
	memset(a, 0, sizeof(*a));
	a->ctx = ctx_open_mode(m);
	a->p = l->seg[SEG_A] + MIB;
	a->len = 4 * MIB; /* A and B */
	a->q = l->seg[SEG_B] + 5;
	a->make_current = make_current;
	thread_go(a);
	print_message("    %s/%s, thread %s: current before %p after %p; "
		      "ptr_query %s, gets %s, %s\n", m->validate, m->hooks,
		      make_current ? "with device 0's primary context" :
				     "with no context",
		      (void *)a->before, (void *)a->after,
		      gdrc_status_str(a->query_status),
		      gdrc_status_str(a->get1_status),
		      gdrc_status_str(a->get2_status));
	thread_check(a, 0);
	assert_int_equal(a->pinfo.alloc_base, l->seg[SEG_B]);
	assert_int_equal(a->pinfo.alloc_size, 4 * MIB);
	print_mr("from the thread", &a->info1);
	check_key(&a->info1, GDRC_PTR_VMM, l->seg[SEG_A], 8 * MIB,
		  buffer_id_of(l->seg[SEG_A]));
	print_stats(a->ctx, m, make_current ? "primary-context thread" :
					      "no-context thread");
	gdrc_fini(a->ctx);
	a->ctx = NULL;
}

static void no_context_case(const struct mode *m)
{
	struct thread_arg none, primary;
	struct layout l;

	layout_make(&l);
	run_thread(m, &l, NULL, &none);
	run_thread(m, &l, pctx0, &primary);
	assert_int_equal(none.info1.key_addr, primary.info1.key_addr);
	assert_int_equal(none.info1.key_length, primary.info1.key_length);
	assert_int_equal(none.info1.buffer_id, primary.info1.buffer_id);
	layout_free(&l);
}

static void test_gpu_vmm_no_context(void **state)
{
	(void)state;
	need_vmm();
	for (size_t m = 0; m < ARRAY_SIZE(modes); m++)
		no_context_case(&modes[m]);
}

/* ====================================================================
 * 7. What each mode did: one workload, its counters printed
 * ==================================================================== */

/*
 * Register A..C, STAT_HITS hits over B and C, remap B (a new allocation),
 * register A..C again (a new registration), STAT_HITS hits again.
 */
static void mode_stats_case(const struct mode *m)
{
	struct gdrc_mr_info before, after;
	uint64_t checks, hits, invs;
	struct gdrc_ctx *ctx;
	struct layout l;

	layout_make(&l);
	ctx = ctx_open_mode(m);
	before = get_info(ctx, l.va, 10 * MIB);
	for (int i = 0; i < STAT_HITS; i++)
		assert_int_equal(get_info(ctx, l.seg[SEG_B] + 3 * MIB,
					  2 * MIB).id,
				 before.id);
	seg_unmap(&l, SEG_B);
	seg_release(&l, SEG_B);
	seg_create(&l, SEG_B);
	seg_map(&l, SEG_B);
	after = get_info(ctx, l.va, 10 * MIB);
	assert_int_not_equal(after.id, before.id);
	for (int i = 0; i < STAT_HITS; i++)
		assert_int_equal(get_info(ctx, l.seg[SEG_B] + 3 * MIB,
					  2 * MIB).id,
				 after.id);
	checks = stat_of(ctx, GDRC_STAT_TAG_CHECKS);
	hits = stat_of(ctx, GDRC_STAT_HITS);
	invs = stat_of(ctx, GDRC_STAT_INVALIDATIONS);
	print_message("    GDRC_VALIDATE=%-6s GDRC_MEM_HOOKS=%-4s: "
		      "GDRC_STAT_TAG_CHECKS %llu, GDRC_STAT_HITS %llu, "
		      "GDRC_STAT_INVALIDATIONS %llu\n", m->validate, m->hooks,
		      (unsigned long long)checks, (unsigned long long)hits,
		      (unsigned long long)invs);
	print_stats(ctx, m, "mode stats");
	assert_true(hits >= 2 * STAT_HITS);
	assert_true(invs >= 1);
	if (!strcmp(m->validate, "hooks"))
		assert_int_equal(checks, 0);
	else if (!strcmp(m->validate, "always"))
		assert_true(checks >= 2 * STAT_HITS);
	gdrc_fini(ctx);
	layout_free(&l);
}

static void test_gpu_vmm_mode_stats(void **state)
{
	(void)state;
	need_vmm();
	for (size_t m = 0; m < ARRAY_SIZE(modes); m++)
		mode_stats_case(&modes[m]);
}

/* ====================================================================
 * 8. Device 1's layout from threads of device 0's context and of none
 * ==================================================================== */

/* A thread with cur current (NULL: none) gets [p, p + len) of device
 * 1's memory twice and asks gdrc_ptr_query of q.  @return the first
 * get's registration. */
static struct gdrc_mr_info turn_get(struct gdrc_ctx *ctx, CUcontext cur,
				    CUdeviceptr p, size_t len, CUdeviceptr q)
{
	struct thread_arg a = { .ctx = ctx, .make_current = cur, .p = p,
				.len = len, .q = q };

	thread_go(&a);
	thread_check(&a, 1);
	return a.info1;
}

/*
 * Device 1's A, B, C seen from threads with device 0's primary context
 * current and with none (the main thread keeps device 0's): keys over
 * several mappings on the right device, hits across the threads, a
 * remap of B (a new allocation, from the main thread) never served
 * stale, and gdrc_invalidate from device 0's thread.
 */
static void other_device_case(const struct mode *m, CUdevice dev1)
{
	struct gdrc_mr_info ab, abc, info;
	struct gdrc_ctx *ctx;
	struct layout l;
	CUdeviceptr a, b;
	uint64_t hits;

	print_message("  mode GDRC_VALIDATE=%s GDRC_MEM_HOOKS=%s\n",
		      m->validate, m->hooks);
	layout_make_on(&l, dev1);
	a = l.seg[SEG_A];
	b = l.seg[SEG_B];
	ctx = ctx_open_mode(m);

	ab = turn_get(ctx, pctx0, a + MIB, 4 * MIB, b + 5);
	print_mr("device 1 A+1M 4M from device 0's thread", &ab);
	check_key_on(&ab, 1, GDRC_PTR_VMM, a, 8 * MIB, buffer_id_of(a));
	hits = stat_of(ctx, GDRC_STAT_HITS);
	info = turn_get(ctx, NULL, a + MIB, 4 * MIB, a);
	assert_int_equal(info.id, ab.id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), hits + 2);
	abc = turn_get(ctx, NULL, l.va, 10 * MIB, l.seg[SEG_C] + 5);
	check_key_on(&abc, 1, GDRC_PTR_VMM, a, 10 * MIB, buffer_id_of(a));

	/* B becomes a new allocation, remapped from device 0's thread. */
	seg_unmap(&l, SEG_B);
	seg_release(&l, SEG_B);
	seg_create(&l, SEG_B);
	seg_map(&l, SEG_B);
	/* B alone, from device 0's thread: never the old A..C. */
	info = turn_get(ctx, pctx0, b + 64, 64, b);
	print_mr("device 1 B after its remap, device 0's thread", &info);
	assert_int_not_equal(info.id, abc.id);
	check_key_on(&info, 1, GDRC_PTR_VMM, b, 4 * MIB, buffer_id_of(b));
	/* All three, from the no-context thread: a new registration. */
	info = turn_get(ctx, NULL, l.va, 10 * MIB, b + 5);
	print_mr("device 1 A..C after B's remap, no-context thread", &info);
	assert_int_not_equal(info.id, abc.id);
	check_key_on(&info, 1, GDRC_PTR_VMM, a, 10 * MIB, buffer_id_of(a));
	abc = info;
	if (hooks_on(m))
		assert_int_not_equal(turn_get(ctx, pctx0, a + MIB, 4 * MIB,
					      a).id,
				     ab.id);
	assert_true(stat_of(ctx, GDRC_STAT_INVALIDATIONS) >= 1);

	/* Invalidated from device 0's thread: the next get registers. */
	{
		struct thread_arg t = { .ctx = ctx, .make_current = pctx0,
					.p = l.va, .len = 10 * MIB, .q = a,
					.inv = l.va, .inv_len = 10 * MIB };

		thread_go(&t);
		thread_check(&t, 1);
		info = t.info1;
	}
	assert_int_not_equal(info.id, abc.id);
	check_key_on(&info, 1, GDRC_PTR_VMM, a, 10 * MIB, buffer_id_of(a));
	print_stats(ctx, m, "device 1 from other threads");
	gdrc_fini(ctx);
	layout_free(&l);
}

static void test_gpu_vmm_other_device(void **state)
{
	CUcontext pctx1;
	CUdevice dev1;

	(void)state;
	if (ndevices < 2) {
		print_message("    one device only\n");
		skip();
	}
	CU(cuDeviceGet(&dev1, 1));
	need_vmm_on(dev1);
	/* Device 1's primary context alive, as an application using that
	 * device has it; no thread here makes it current. */
	CU(cuDevicePrimaryCtxRetain(&pctx1, dev1));
	for (size_t m = 0; m < ARRAY_SIZE(modes); m++)
		other_device_case(&modes[m], dev1);
	CU(cuDevicePrimaryCtxRelease(dev1));
}

/* ====================================================================
 * Setup
 * ==================================================================== */

/* After a failed test: the main thread's context back. */
static int restore_ctx0(void **state)
{
	(void)state;
	return cuCtxSetCurrent(pctx0) == CUDA_SUCCESS ? 0 : -1;
}

static int group_setup(void **state)
{
	char name[256] = "";
	int drv = 0;

	(void)state;
	if (gpu_test_ctx0(&dev0, &pctx0, name, sizeof(name), &drv))
		return -1;
	print_message("%s: device 0 %s, %d device(s), driver API %d, "
		      "libgdrcache %s\n",
		      GROUP_NAME, name, ndevices, drv, gdrc_version_string());
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	return gpu_test_ctx0_release(dev0, pctx0);
}

#define T(fn) cmocka_unit_test_teardown(fn, restore_ctx0)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_gpu_vmm_keys),
		T(test_gpu_vmm_remap_new),
		T(test_gpu_vmm_remap_same),
		T(test_gpu_vmm_partial_unmap),
		T(test_gpu_vmm_hole),
		T(test_gpu_vmm_pool_trim),
		T(test_gpu_vmm_no_context),
		T(test_gpu_vmm_mode_stats),
		T(test_gpu_vmm_other_device),
	};
	int skip = gpu_test_start(&ndevices);

	if (skip)
		return skip;
	return cmocka_run_group_tests_name(GROUP_NAME, tests, group_setup,
					   group_teardown);
}
