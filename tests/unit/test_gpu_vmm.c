// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_gpu_vmm.c - GPU memory as cuMem allocators lay it out, on the fake
 * CUDA driver (tests/fakes): one VA reservation holding several mappings,
 * each its own physical allocation with its own BUFFER_ID, and holes
 * (PyTorch's expandable segments, ncclMemAlloc).  Registrations over
 * two and three mappings, each mapping remapped in turn, several
 * unmapped at once, requests into a hole, the driver calls a hit makes
 * per mapping touched, and the driver calls that need a context made
 * from a thread with none or with another device's.  Every case runs in
 * each GDRC_VALIDATE mode, with the CUDA hooks on and off.  Runs in CI.
 *
 * Layout (16 MiB reserved): A 4 MiB at 0, B 4 MiB at 4, C 2 MiB at 8,
 * a hole from 10 to 16.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gdrcache.h>

#include "fake_cuda.h"
#include "fake_cuda_test.h"

#define MIB (1024UL * 1024)

struct mode {
	const char *validate; /* GDRC_VALIDATE */
	const char *hooks;    /* GDRC_MEM_HOOKS */
	int report;           /* the program reports its unmaps with
			       * gdrc_invalidate (docs/env.md) */
};

static const struct mode modes[] = {
	{ "always", "auto", 0 },
	{ "auto", "auto", 0 },
	{ "hooks", "auto", 0 },
	{ "always", "none", 0 }, /* BUFFER_IDs alone */
	{ "hooks", "none", 1 },  /* the program's reports alone */
};

#define NMODES (sizeof(modes) / sizeof(modes[0]))

struct layout {
	CUdeviceptr va, a, b, c, hole;
};

static struct gdrc_ctx *ctx_env(const struct mode *m, const char *extra,
				const char *value)
{
	struct gdrc_ctx *ctx;

	setenv("GDRC_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
	setenv("GDRC_VALIDATE", m->validate, 1);
	setenv("GDRC_MEM_HOOKS", m->hooks, 1);
	if (extra)
		setenv(extra, value, 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	unsetenv("GDRC_VALIDATE");
	unsetenv("GDRC_MEM_HOOKS");
	if (extra)
		unsetenv(extra);
	assert_int_equal(gdrc_gpu_status(ctx, NULL), GDRC_OK);
	return ctx;
}

/* Whether a CUDA unmap reaches the cache in mode m. */
static int hooks_on(const struct mode *m)
{
	return !strcmp(m->hooks, "auto") || m->report;
}

/* cuMemUnmap through the hooked entry point, reported in mode m. */
static void unmap(struct gdrc_ctx *ctx, const struct mode *m, CUdeviceptr p,
		  size_t size)
{
	assert_int_equal(cuMemUnmap(p, size), CUDA_SUCCESS);
	if (m->report)
		assert_int_equal(gdrc_invalidate(ctx, (void *)(uintptr_t)p,
						 size),
				 GDRC_OK);
}

static struct layout lay_out(int device)
{
	struct layout l;

	l.va = fake_cuda_vmm_reserve(16 * MIB);
	assert_true(l.va != 0);
	l.a = l.va;
	l.b = l.va + 4 * MIB;
	l.c = l.va + 8 * MIB;
	l.hole = l.va + 10 * MIB;
	assert_int_equal(fake_cuda_vmm_map(l.a, 4 * MIB, device), 0);
	assert_int_equal(fake_cuda_vmm_map(l.b, 4 * MIB, device), 0);
	assert_int_equal(fake_cuda_vmm_map(l.c, 2 * MIB, device), 0);
	return l;
}

/* Unmap the mapping at p and map a new physical allocation in its
 * place: a new BUFFER_ID. */
static void remap(struct gdrc_ctx *ctx, const struct mode *m, CUdeviceptr p,
		  size_t size)
{
	unmap(ctx, m, p, size);
	assert_int_equal(fake_cuda_vmm_map(p, size, 0), 0);
}

/* End a mode's round: the context, then a fresh fake (no reservation
 * or mapping left) for the next one. */
static void ctx_close(struct gdrc_ctx *ctx)
{
	gdrc_fini(ctx);
	fake_cuda_reset(1);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
}

static int setup(void **state)
{
	(void)state;
	fake_cuda_reset(1);
	return cuInit(0) != CUDA_SUCCESS;
}

static gdrc_status_t try_get(struct gdrc_ctx *ctx, CUdeviceptr p,
			     size_t len)
{
	struct gdrc_mr *mr = NULL;
	gdrc_status_t s = gdrc_mr_get(ctx, (void *)(uintptr_t)p, len, 0, 0,
				      &mr);

	if (!s)
		gdrc_mr_put(ctx, mr);
	return s;
}

/* ---- keys over several mappings ---- */

static void test_gpu_vmm_keyed_by_the_mappings_covered(void **state)
{
	(void)state;
	for (unsigned m = 0; m < NMODES; m++) {
		struct gdrc_ctx *ctx = ctx_env(&modes[m], NULL, NULL);
		struct layout l = lay_out(0);
		struct gdrc_mr_info one, two, three, again;

		one = get_info(ctx, l.b + MIB, 64);
		assert_int_equal(one.kind, GDRC_PTR_VMM);
		assert_int_equal(one.key_addr, l.b);
		assert_int_equal(one.key_length, 4 * MIB);
		assert_int_equal(one.buffer_id, fake_cuda_buffer_id(l.b));
		two = get_info(ctx, l.a + MIB, 4 * MIB);
		assert_int_equal(two.key_addr, l.a);
		assert_int_equal(two.key_length, 8 * MIB);
		assert_int_equal(two.addr, l.a);
		assert_int_equal(two.length, 8 * MIB);
		assert_int_equal(two.buffer_id, fake_cuda_buffer_id(l.a));
		three = get_info(ctx, l.a + MIB, 8 * MIB);
		assert_int_equal(three.key_addr, l.a);
		assert_int_equal(three.key_length, 10 * MIB);
		/* Served again, inside any of its mappings. */
		again = get_info(ctx, l.b + 3 * MIB, 2 * MIB);
		assert_int_equal(again.id, three.id);
		again = get_info(ctx, l.a, 10 * MIB);
		assert_int_equal(again.id, three.id);
		ctx_close(ctx);
	}
}

static void test_gpu_vmm_ptr_query_reports_the_mapping(void **state)
{
	struct gdrc_ctx *ctx = ctx_env(&modes[0], NULL, NULL);
	struct layout l = lay_out(0);
	struct gdrc_ptr_info info;

	(void)state;
	assert_int_equal(gdrc_ptr_query(ctx, (void *)(uintptr_t)(l.b + 5),
					&info),
			 GDRC_OK);
	assert_int_equal(info.kind, GDRC_PTR_VMM);
	assert_int_equal(info.alloc_base, l.b);
	assert_int_equal(info.alloc_size, 4 * MIB);
	assert_int_equal(info.buffer_id, fake_cuda_buffer_id(l.b));
	assert_int_equal(info.flags, 0);
	/* The same answer from a registration over all three. */
	(void)get_info(ctx, l.a, 10 * MIB);
	for (int i = 0; i < 3; i++) {
		CUdeviceptr seg[] = { l.a, l.b, l.c };
		size_t size[] = { 4 * MIB, 4 * MIB, 2 * MIB };

		assert_int_equal(gdrc_ptr_query(ctx,
						(void *)(uintptr_t)(seg[i] + 5),
						&info),
				 GDRC_OK);
		assert_int_equal(info.flags, GDRC_PTR_INFO_CACHED);
		assert_int_equal(info.alloc_base, seg[i]);
		assert_int_equal(info.alloc_size, size[i]);
		assert_int_equal(info.buffer_id, fake_cuda_buffer_id(seg[i]));
	}
	gdrc_fini(ctx);
}

/* Past GDRC_WHOLE_ALLOC_MAX the key is the request rounded to 64 KiB,
 * still within the mappings it covers. */
static void test_gpu_vmm_large_run_keyed_by_request(void **state)
{
	struct gdrc_ctx *ctx = ctx_env(&modes[0], "GDRC_WHOLE_ALLOC_MAX",
				       "4M");
	struct layout l = lay_out(0);
	struct gdrc_mr_info info;

	(void)state;
	info = get_info(ctx, l.a + 3 * MIB + 100, 2 * MIB);
	assert_int_equal(info.key_addr, l.a + 3 * MIB);
	assert_int_equal(info.key_length, 2 * MIB + 64 * 1024);
	gdrc_fini(ctx);
}

/* ---- remapped mappings are never served stale ---- */

/*
 * Register over A, B and C; remap one of them; then a get over all
 * three, and over each one alone, must never get the old registration
 * where its memory changed.  With the hooks on, the unmap removes the
 * registration in every mode, so no get at all returns it.
 */
static void remap_one(const struct mode *m, int target)
{
	static const size_t sizes[] = { 4 * MIB, 4 * MIB, 2 * MIB };
	struct gdrc_ctx *ctx = ctx_env(m, NULL, NULL);
	struct layout l = lay_out(0);
	CUdeviceptr segs[] = { l.a, l.b, l.c };
	struct gdrc_mr_info abc, info;

	abc = get_info(ctx, l.a, 10 * MIB);
	/* Warm every mapping's hit path too. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(get_info(ctx, segs[i] + 64, 64).id, abc.id);
	remap(ctx, m, segs[target], sizes[target]);
	for (int i = 0; i < 3; i++) {
		info = get_info(ctx, segs[i] + 64, 64);
		if (i == target || hooks_on(m))
			assert_int_not_equal(info.id, abc.id);
		if (i == target)
			assert_int_equal(info.buffer_id,
					 fake_cuda_buffer_id(segs[i]));
	}
	info = get_info(ctx, l.a, 10 * MIB);
	assert_int_not_equal(info.id, abc.id);
	info = get_info(ctx, l.a + MIB, 10 * MIB - MIB);
	assert_int_not_equal(info.id, abc.id);
	ctx_close(ctx);
}

static void test_gpu_vmm_remap_first_middle_last(void **state)
{
	(void)state;
	for (unsigned m = 0; m < NMODES; m++)
		for (int target = 0; target < 3; target++)
			remap_one(&modes[m], target);
}

/* A request over two mappings, the second remapped, hit by the same
 * thread right after (its remembered handle): the fast path's check. */
static void test_gpu_vmm_fast_path_checks_second_mapping(void **state)
{
	(void)state;
	for (unsigned m = 0; m < NMODES; m++) {
		struct gdrc_ctx *ctx = ctx_env(&modes[m], NULL, NULL);
		struct layout l = lay_out(0);
		struct gdrc_mr_info before, after;

		before = get_info(ctx, l.a + 3 * MIB, 2 * MIB);
		assert_int_equal(get_info(ctx, l.a + 3 * MIB, 2 * MIB).id,
				 before.id);
		remap(ctx, &modes[m], l.b, 4 * MIB);
		after = get_info(ctx, l.a + 3 * MIB, 2 * MIB);
		assert_int_not_equal(after.id, before.id);
		ctx_close(ctx);
	}
}

/* One cuMemUnmap over B and C: B is a hole now. */
static void test_gpu_vmm_unmap_two_at_once(void **state)
{
	(void)state;
	for (unsigned m = 0; m < NMODES; m++) {
		struct gdrc_ctx *ctx = ctx_env(&modes[m], NULL, NULL);
		struct layout l = lay_out(0);
		struct gdrc_mr_info abc = get_info(ctx, l.a, 10 * MIB), a;

		unmap(ctx, &modes[m], l.b, 6 * MIB);
		assert_int_equal(try_get(ctx, l.a, 10 * MIB),
				 GDRC_ERR_UNSUPPORTED);
		assert_int_equal(try_get(ctx, l.b, 64), GDRC_ERR_UNSUPPORTED);
		assert_int_equal(try_get(ctx, l.c + MIB, 64),
				 GDRC_ERR_UNSUPPORTED);
		a = get_info(ctx, l.a + 64, 64);
		if (hooks_on(&modes[m]))
			assert_int_not_equal(a.id, abc.id);
		assert_int_equal(a.key_length, 4 * MIB);
		ctx_close(ctx);
	}
}

/* ---- holes ---- */

static void test_gpu_vmm_hole_refused_unsupported(void **state)
{
	struct gdrc_ctx *ctx = ctx_env(&modes[0], NULL, NULL);
	struct layout l = lay_out(0);
	struct gdrc_ptr_info info;

	(void)state;
	/* Into the hole from C, and inside it. */
	assert_int_equal(try_get(ctx, l.c + MIB, 2 * MIB),
			 GDRC_ERR_UNSUPPORTED);
	assert_int_equal(try_get(ctx, l.hole + MIB, 64), GDRC_ERR_UNSUPPORTED);
	assert_int_equal(gdrc_ptr_query(ctx, (void *)(uintptr_t)l.hole,
					&info),
			 GDRC_ERR_UNSUPPORTED);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 0);
	/* A hole in the middle: A and C mapped, B not. */
	assert_int_equal(cuMemUnmap(l.b, 4 * MIB), CUDA_SUCCESS);
	assert_int_equal(try_get(ctx, l.a, 10 * MIB), GDRC_ERR_UNSUPPORTED);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(get_info(ctx, l.c, 2 * MIB).key_length, 2 * MIB);
	gdrc_fini(ctx);
}

/* A reservation whose mappings come from two devices: one registration
 * cannot cover both. */
static void test_gpu_vmm_two_devices_in_one_range_refused(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr va;

	(void)state;
	fake_cuda_reset(2);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	ctx = ctx_env(&modes[0], NULL, NULL);
	va = fake_cuda_vmm_reserve(8 * MIB);
	assert_int_equal(fake_cuda_vmm_map(va, 4 * MIB, 0), 0);
	assert_int_equal(fake_cuda_vmm_map(va + 4 * MIB, 4 * MIB, 1), 0);
	assert_int_equal(try_get(ctx, va, 8 * MIB), GDRC_ERR_UNSUPPORTED);
	assert_int_equal(get_info(ctx, va + 4 * MIB, 64).device, 1);
	assert_int_equal(get_info(ctx, va, 64).device, 0);
	gdrc_fini(ctx);
}

/* Memory that merely follows a reservation (a cuMemAlloc allocation,
 * another reservation's mapping) is not one of its mappings: a range
 * running into it is refused.  Found by review. */
static void test_gpu_vmm_walk_stays_in_its_reservation(void **state)
{
	struct gdrc_ctx *ctx = ctx_env(&modes[0], NULL, NULL);
	CUdeviceptr va = fake_cuda_vmm_reserve(4 * MIB);
	CUdeviceptr plain, other;

	(void)state;
	assert_int_equal(fake_cuda_vmm_map(va, 4 * MIB, 0), 0);
	plain = fake_cuda_alloc_at(FAKE_DEVICE, 2 * MIB, 0, va + 4 * MIB);
	assert_int_equal(plain, va + 4 * MIB);
	assert_int_equal(try_get(ctx, va + 3 * MIB, 2 * MIB),
			 GDRC_ERR_UNSUPPORTED);
	assert_int_equal(fake_cuda_free(plain), 0);
	other = fake_cuda_alloc_at(FAKE_VMM, 2 * MIB, 0, va + 4 * MIB);
	assert_int_equal(other, va + 4 * MIB);
	assert_int_equal(try_get(ctx, va + 3 * MIB, 2 * MIB),
			 GDRC_ERR_UNSUPPORTED);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	/* Each alone is fine. */
	assert_int_equal(get_info(ctx, va, 64).key_length, 4 * MIB);
	assert_int_equal(get_info(ctx, other, 64).key_length, 2 * MIB);
	gdrc_fini(ctx);
}

/* ---- what a hit costs ---- */

/* Always mode: a hit asks one BUFFER_ID per mapping it touches, and
 * nothing else. */
static void test_gpu_vmm_hit_queries_touched_mappings(void **state)
{
	static const struct {
		unsigned long off, len;
		unsigned long want;
	} req[] = {
		{ MIB, 64, 1 },                /* inside A */
		{ 4 * MIB + 64, 64, 1 },       /* inside B */
		{ 9 * MIB, 64, 1 },            /* inside C */
		{ 3 * MIB, 2 * MIB, 2 },       /* A and B */
		{ 7 * MIB, 2 * MIB, 2 },       /* B and C */
		{ MIB, 8 * MIB, 3 },           /* all three */
	};
	struct gdrc_ctx *ctx = ctx_env(&modes[0], NULL, NULL);
	struct layout l = lay_out(0);
	uint64_t id = get_info(ctx, l.a, 10 * MIB).id;

	(void)state;
	for (unsigned i = 0; i < sizeof(req) / sizeof(req[0]); i++) {
		assert_int_equal(get_info(ctx, l.a + req[i].off, req[i].len).id,
				 id);
		fake_cuda_calls_reset();
		for (int k = 0; k < 10; k++)
			(void)get_info(ctx, l.a + req[i].off, req[i].len);
		if (fake_cuda_calls("cuPointerGetAttribute") !=
		    10 * req[i].want)
			fail_msg("request %u: %lu queries for 10 hits", i,
				 fake_cuda_calls("cuPointerGetAttribute"));
		assert_int_equal(fake_cuda_calls("cuPointerGetAttributes"), 0);
		assert_int_equal(fake_cuda_calls("cuMemGetAddressRange_v2"), 0);
	}
	gdrc_fini(ctx);
}

/*
 * Registrations over 8 mappings (checked by a walk) and over 12 (by a
 * binary search): a hit asks exactly the mappings it touches, wherever
 * they are, and a remap of any one of them is caught.
 */
static void test_gpu_vmm_many_mappings(void **state)
{
	static const unsigned counts[] = { 8, 12 };

	(void)state;
	for (unsigned c = 0; c < 2; c++) {
		unsigned n = counts[c];
		struct gdrc_ctx *ctx = ctx_env(&modes[3], NULL, NULL);
		CUdeviceptr va = fake_cuda_vmm_reserve(n * 2 * MIB);
		uint64_t id;

		for (unsigned i = 0; i < n; i++)
			assert_int_equal(fake_cuda_vmm_map(va + i * 2 * MIB,
							   2 * MIB, 0),
					 0);
		id = get_info(ctx, va, n * 2 * MIB).id;
		for (unsigned i = 0; i < n; i++) {
			unsigned long want = i + 2 < n ? 3 : n - i;

			/* Inside mapping i, then from i over (up to) three. */
			assert_int_equal(get_info(ctx, va + i * 2 * MIB + 64,
						  64).id,
					 id);
			fake_cuda_calls_reset();
			assert_int_equal(get_info(ctx, va + i * 2 * MIB + 64,
						  64).id,
					 id);
			assert_int_equal(fake_cuda_calls(
						 "cuPointerGetAttribute"),
					 1);
			assert_int_equal(get_info(ctx, va + i * 2 * MIB + 64,
						  want * 2 * MIB - 128).id,
					 id);
			fake_cuda_calls_reset();
			(void)get_info(ctx, va + i * 2 * MIB + 64,
				       want * 2 * MIB - 128);
			assert_int_equal(fake_cuda_calls(
						 "cuPointerGetAttribute"),
					 want);
		}
		/* Hooks off here: only the BUFFER_ID tells. */
		remap(ctx, &modes[3], va + (n - 2) * 2 * MIB, 2 * MIB);
		assert_int_equal(get_info(ctx, va + MIB, 64).id, id);
		assert_int_not_equal(get_info(ctx, va + (n - 2) * 2 * MIB + 64,
					      64).id,
				     id);
		ctx_close(ctx);
	}
}

/* ---- the pointer's own context ---- */

struct thread_arg {
	struct gdrc_ctx *ctx;
	CUdeviceptr p;
	size_t len;
	CUcontext push;   /* made current first, or NULL */
	gdrc_status_t status;
	struct gdrc_mr_info info;
	CUcontext after;  /* current once the get and put returned */
	int depth_ok;     /* the pushed context popped back out */
};

static void *get_thread(void *argp)
{
	struct thread_arg *a = argp;
	struct gdrc_mr *mr;
	CUcontext popped = NULL;

	if (a->push)
		assert_int_equal(cuCtxPushCurrent_v2(a->push), CUDA_SUCCESS);
	a->status = gdrc_mr_get(a->ctx, (void *)(uintptr_t)a->p, a->len, 0,
				0, &mr);
	if (!a->status) {
		gdrc_mr_query(mr, &a->info);
		gdrc_mr_put(a->ctx, mr);
	}
	cuCtxGetCurrent(&a->after);
	if (a->push)
		a->depth_ok = cuCtxPopCurrent_v2(&popped) == CUDA_SUCCESS &&
			      popped == a->push &&
			      cuCtxPopCurrent_v2(&popped) != CUDA_SUCCESS;
	return NULL;
}

static struct thread_arg run_get(struct gdrc_ctx *ctx, CUdeviceptr p,
				 size_t len, CUcontext push)
{
	struct thread_arg a = { .ctx = ctx, .p = p, .len = len, .push = push };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, get_thread, &a), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	return a;
}

/* A thread with no context: classification, keys and tag checks of
 * memory over several mappings, and it still has no context after. */
static void test_gpu_vmm_thread_without_context(void **state)
{
	struct gdrc_ctx *ctx = ctx_env(&modes[0], NULL, NULL);
	struct layout l = lay_out(0);
	struct thread_arg a;

	(void)state;
	a = run_get(ctx, l.a + MIB, 8 * MIB, NULL);
	assert_int_equal(a.status, GDRC_OK);
	assert_int_equal(a.info.kind, GDRC_PTR_VMM);
	assert_int_equal(a.info.key_length, 10 * MIB);
	assert_null(a.after);
	assert_int_equal(fake_cuda_primary_refs(0), 0);
	gdrc_fini(ctx);
}

/* A thread with device 0's context current gets device 1's memory:
 * right device, right mappings, and device 0's context current again. */
static void test_gpu_vmm_other_device_context_restored(void **state)
{
	struct gdrc_ctx *ctx;
	struct layout l;
	struct thread_arg a;
	CUdeviceptr plain;

	(void)state;
	fake_cuda_reset(2);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	ctx = ctx_env(&modes[0], NULL, NULL);
	l = lay_out(1);
	a = run_get(ctx, l.b + MIB, 5 * MIB, fake_cuda_ctx(0));
	assert_int_equal(a.status, GDRC_OK);
	assert_int_equal(a.info.device, 1);
	assert_int_equal(a.info.key_addr, l.b);
	assert_int_equal(a.info.key_length, 6 * MIB);
	assert_ptr_equal(a.after, fake_cuda_ctx(0));
	assert_true(a.depth_ok);
	plain = fake_cuda_alloc(FAKE_DEVICE, MIB, 1);
	a = run_get(ctx, plain, 64, fake_cuda_ctx(0));
	assert_int_equal(a.status, GDRC_OK);
	assert_int_equal(a.info.device, 1);
	assert_ptr_equal(a.after, fake_cuda_ctx(0));
	assert_true(a.depth_ok);
	assert_int_equal(fake_cuda_primary_refs(0), 0);
	assert_int_equal(fake_cuda_primary_refs(1), 0);
	gdrc_fini(ctx);
}

/* No context current and the device's primary one inactive: the library
 * does not create one (it would cost the user GPU memory); it says so. */
static void test_gpu_vmm_no_context_to_be_had_cuda_error(void **state)
{
	struct gdrc_ctx *ctx = ctx_env(&modes[0], NULL, NULL);
	struct layout l = lay_out(0);
	struct thread_arg a;

	(void)state;
	fake_cuda_set_primary_active(0);
	fake_cuda_calls_reset();
	a = run_get(ctx, l.a, 64, NULL);
	assert_int_equal(a.status, GDRC_ERR_CUDA);
	assert_int_equal(fake_cuda_calls("cuDevicePrimaryCtxRetain"), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	fake_cuda_set_primary_active(1);
	a = run_get(ctx, l.a, 64, NULL);
	assert_int_equal(a.status, GDRC_OK);
	assert_int_equal(fake_cuda_primary_refs(0), 0);
	gdrc_fini(ctx);
}

#define T(fn) cmocka_unit_test_setup(fn, setup)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_gpu_vmm_keyed_by_the_mappings_covered),
		T(test_gpu_vmm_ptr_query_reports_the_mapping),
		T(test_gpu_vmm_large_run_keyed_by_request),
		T(test_gpu_vmm_remap_first_middle_last),
		T(test_gpu_vmm_fast_path_checks_second_mapping),
		T(test_gpu_vmm_unmap_two_at_once),
		T(test_gpu_vmm_hole_refused_unsupported),
		T(test_gpu_vmm_two_devices_in_one_range_refused),
		T(test_gpu_vmm_walk_stays_in_its_reservation),
		T(test_gpu_vmm_hit_queries_touched_mappings),
		T(test_gpu_vmm_many_mappings),
		T(test_gpu_vmm_thread_without_context),
		T(test_gpu_vmm_other_device_context_restored),
		T(test_gpu_vmm_no_context_to_be_had_cuda_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
