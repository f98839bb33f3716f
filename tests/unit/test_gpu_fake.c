// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_gpu_fake.c - GPU memory handling against the fake CUDA driver
 * (tests/fakes): loading and its failures, classification of every kind
 * of memory, SYNC_MEMOPS set exactly once per allocation, whole-allocation
 * keys rounded to 64 KiB, BUFFER_ID validation of hits (a free and
 * reallocation at the same address no hook saw is never served stale,
 * also for one of two allocations sharing a 64 KiB page), and how many
 * driver calls a hit costs in each validation mode.  Runs in CI.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <gdrcache.h>

#include "fake_cuda.h"
#include "fake_cuda_test.h"

#define KIB 1024UL
#define MIB (1024UL * 1024)

static struct gdrc_ctx *ctx_mode(const char *validate)
{
	struct gdrc_ctx *ctx;

	setenv("GDRC_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
	if (validate)
		setenv("GDRC_VALIDATE", validate, 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	unsetenv("GDRC_VALIDATE");
	assert_int_equal(gdrc_gpu_status(ctx, NULL), GDRC_OK);
	return ctx;
}

/* A fresh fake with one device, initialised as a loaded driver stays. */
static int setup(void **state)
{
	(void)state;
	fake_cuda_reset(1);
	return cuInit(0) != CUDA_SUCCESS;
}

/* ---- loading ---- */

static void test_gpu_fake_no_driver_host_still_works(void **state)
{
	struct gdrc_ctx *ctx;
	const char *why = NULL;
	char buf[64];
	struct gdrc_mr *mr;

	(void)state;
	setenv("GDRC_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	assert_int_equal(gdrc_gpu_status(ctx, &why), GDRC_ERR_NO_DEVICE);
	assert_non_null(why);
	assert_non_null(strstr(why, "cannot load"));
	assert_int_equal(gdrc_mr_get(ctx, buf, sizeof(buf), 0, 0, &mr),
			 GDRC_OK);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(stat_of(ctx, GDRC_STAT_CLASSIFY_CALLS), 0);
	gdrc_fini(ctx);
	unsetenv("GDRC_CUDA_LIBRARY");
}

static void test_gpu_fake_cuda_library_none_turns_gpu_off(void **state)
{
	struct gdrc_ctx *ctx;
	const char *why = NULL;

	(void)state;
	fake_cuda_calls_reset();
	setenv("GDRC_CUDA_LIBRARY", "none", 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	assert_int_equal(gdrc_gpu_status(ctx, &why), GDRC_ERR_NO_DEVICE);
	assert_string_equal(why, "GDRC_CUDA_LIBRARY=none");
	assert_int_equal(fake_cuda_calls("cuInit"), 0);
	gdrc_fini(ctx);
	unsetenv("GDRC_CUDA_LIBRARY");
}

static void test_gpu_fake_cuinit_failure_says_why(void **state)
{
	struct gdrc_ctx *ctx;
	const char *why = NULL;

	(void)state;
	fake_cuda_set_init_result(CUDA_ERROR_NO_DEVICE);
	setenv("GDRC_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	assert_int_equal(gdrc_gpu_status(ctx, &why), GDRC_ERR_NO_DEVICE);
	assert_non_null(strstr(why, "cuInit failed"));
	assert_non_null(strstr(why, "CUDA_ERROR_NO_DEVICE"));
	gdrc_fini(ctx);
	fake_cuda_set_init_result(CUDA_SUCCESS);
}

static void test_gpu_fake_zero_devices_says_why(void **state)
{
	struct gdrc_ctx *ctx;
	const char *why = NULL;

	(void)state;
	fake_cuda_reset(0);
	setenv("GDRC_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	assert_int_equal(gdrc_gpu_status(ctx, &why), GDRC_ERR_NO_DEVICE);
	/* The real driver's cuInit already fails without a device. */
	if (!strstr(why, "CUDA_ERROR_NO_DEVICE"))
		fail_msg("reason: %s", why);
	gdrc_fini(ctx);
}

/* From here on the fake driver is loaded for the rest of the process. */

static void test_gpu_fake_gpu_status_bad_args(void **state)
{
	(void)state;
	assert_int_equal(gdrc_gpu_status(NULL, NULL), GDRC_ERR_INVALID_PARAM);
}

/* ---- classification ---- */

static void expect_kind(struct gdrc_ctx *ctx, CUdeviceptr p, int kind,
			int mem_type, int device)
{
	struct gdrc_ptr_info info;

	assert_int_equal(gdrc_ptr_query(ctx, (void *)(uintptr_t)p, &info),
			 GDRC_OK);
	assert_int_equal(info.kind, kind);
	assert_int_equal(info.mem_type, mem_type);
	assert_int_equal(info.device, device);
	assert_int_equal(info.buffer_id, fake_cuda_buffer_id(p));
	assert_int_equal(info.flags, 0);
}

static void test_gpu_fake_classify_every_kind(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr dev = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	CUdeviceptr pool = fake_cuda_alloc(FAKE_POOL, MIB, 0);
	CUdeviceptr vmm = fake_cuda_alloc(FAKE_VMM, 2 * MIB, 0);
	CUdeviceptr man = fake_cuda_alloc(FAKE_MANAGED, MIB, 0);
	CUdeviceptr pin = fake_cuda_alloc(FAKE_HOST_PINNED, MIB, 0);
	char host[64];
	struct gdrc_ptr_info info;

	(void)state;
	expect_kind(ctx, dev + 100, GDRC_PTR_DEVICE, GDRC_MEM_CUDA, 0);
	expect_kind(ctx, pool, GDRC_PTR_POOL, GDRC_MEM_CUDA, 0);
	expect_kind(ctx, vmm + MIB, GDRC_PTR_VMM, GDRC_MEM_CUDA, 0);
	expect_kind(ctx, man, GDRC_PTR_MANAGED, GDRC_MEM_CUDA, 0);
	expect_kind(ctx, pin, GDRC_PTR_HOST_PINNED, GDRC_MEM_HOST, -1);
	assert_int_equal(gdrc_ptr_query(ctx, host, &info), GDRC_OK);
	assert_int_equal(info.kind, GDRC_PTR_HOST);
	assert_int_equal(info.buffer_id, 0);
	assert_int_equal(gdrc_ptr_query(ctx, (void *)(uintptr_t)dev, &info),
			 GDRC_OK);
	assert_int_equal(info.alloc_base, dev);
	assert_int_equal(info.alloc_size, MIB);
	/* Every query above classified: one driver call each, plus the VMM
	 * check for the one device pointer that is not legacy-IPC capable. */
	assert_int_equal(fake_cuda_calls("cuPointerGetAttributes"), 7);
	assert_int_equal(fake_cuda_calls("cuMemRetainAllocationHandle"), 1);
	assert_int_equal(fake_cuda_retained_handles(), 0);
	gdrc_fini(ctx);
}

static void test_gpu_fake_ptr_query_cached_from_registration(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode("hooks");
	CUdeviceptr dev = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	struct gdrc_ptr_info info;

	(void)state;
	(void)get_info(ctx, dev, 64);
	fake_cuda_calls_reset();
	assert_int_equal(gdrc_ptr_query(ctx, (void *)(uintptr_t)(dev + 4096),
					&info),
			 GDRC_OK);
	assert_int_equal(info.flags, GDRC_PTR_INFO_CACHED);
	assert_int_equal(info.kind, GDRC_PTR_DEVICE);
	assert_int_equal(info.alloc_base, dev);
	assert_int_equal(fake_cuda_calls("cuPointerGetAttributes"), 0);
	assert_int_equal(fake_cuda_calls("cuPointerGetAttribute"), 0);
	gdrc_fini(ctx);
}

static void test_gpu_fake_managed_refused_unsupported(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr man = fake_cuda_alloc(FAKE_MANAGED, MIB, 0);
	struct gdrc_mr *mr = (struct gdrc_mr *)0x1;

	(void)state;
	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)man, 64, 0, 0,
				     &mr),
			 GDRC_ERR_UNSUPPORTED);
	assert_ptr_equal(mr, (struct gdrc_mr *)0x1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 0);
	gdrc_fini(ctx);
}

static void test_gpu_fake_range_past_allocation_unsupported(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr dev = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	struct gdrc_mr *mr;

	(void)state;
	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)(dev + MIB - 8),
				     64, 0, 0, &mr),
			 GDRC_ERR_UNSUPPORTED);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	gdrc_fini(ctx);
}

static void test_gpu_fake_classify_failure_cuda_error(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr dev = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	struct gdrc_mr *mr;

	(void)state;
	fake_cuda_fail("cuPointerGetAttributes", CUDA_ERROR_INVALID_CONTEXT,
		       1);
	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)dev, 64, 0, 0,
				     &mr),
			 GDRC_ERR_CUDA);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(fake_cuda_sync_memops_count(dev), 0);
	/* The next try works. */
	(void)get_info(ctx, dev, 64);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 1);
	gdrc_fini(ctx);
}

/* ---- keys, rounding, SYNC_MEMOPS ---- */

static void test_gpu_fake_whole_allocation_rounded_64k(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr dev = fake_cuda_alloc(FAKE_DEVICE, 200 * KIB, 0);
	struct gdrc_mr_info a, b;

	(void)state;
	a = get_info(ctx, dev + 4096, 100);
	assert_int_equal(a.key_addr, dev);
	assert_int_equal(a.key_length, 200 * KIB);
	assert_int_equal(a.addr % (64 * KIB), 0);
	assert_true(a.addr <= dev);
	assert_int_equal(a.length % (64 * KIB), 0);
	assert_true(a.addr + a.length >= dev + 200 * KIB);
	assert_int_equal(a.mem_type, GDRC_MEM_CUDA);
	assert_int_equal(a.kind, GDRC_PTR_DEVICE);
	assert_int_equal(a.device, 0);
	assert_int_equal(a.buffer_id, fake_cuda_buffer_id(dev));
	b = get_info(ctx, dev + 150 * KIB, 8);
	assert_int_equal(b.id, a.id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), 1);
	gdrc_fini(ctx);
}

static void test_gpu_fake_large_allocation_keyed_by_request(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr dev = fake_cuda_alloc(FAKE_DEVICE, 8 * MIB, 0);
	struct gdrc_mr_info a;

	(void)state;
	setenv("GDRC_WHOLE_ALLOC_MAX", "1M", 1);
	ctx = ctx_mode(NULL);
	unsetenv("GDRC_WHOLE_ALLOC_MAX");
	a = get_info(ctx, dev + 3 * MIB + 100, 200 * KIB);
	assert_int_equal(a.key_addr, dev + 3 * MIB);
	assert_int_equal(a.key_length, 256 * KIB);
	assert_int_equal(a.addr, dev + 3 * MIB);
	assert_int_equal(a.length, 256 * KIB);
	gdrc_fini(ctx);
}

static void test_gpu_fake_sync_memops_once_per_allocation(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr a = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	CUdeviceptr b = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	struct gdrc_mr_info info;

	(void)state;
	info = get_info(ctx, a, 64);
	assert_true(info.flags & GDRC_MR_INFO_SYNC_MEMOPS);
	assert_true(info.flags & GDRC_MR_INFO_TAG_CHECKED);
	assert_int_equal(fake_cuda_sync_memops_count(a), 1);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(gdrc_invalidate(ctx, (void *)(uintptr_t)a,
						 64),
				 GDRC_OK);
		(void)get_info(ctx, a + 4096 * i, 64);
	}
	assert_int_equal(fake_cuda_sync_memops_count(a), 1);
	(void)get_info(ctx, b, 64);
	assert_int_equal(fake_cuda_sync_memops_count(b), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_SYNC_MEMOPS_SET), 2);
	gdrc_fini(ctx);
}

static void test_gpu_fake_vmm_sync_memops_on_context(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr v = fake_cuda_alloc(FAKE_VMM, 2 * MIB, 0);
	struct gdrc_mr_info info;

	(void)state;
	info = get_info(ctx, v, 64);
	assert_int_equal(info.kind, GDRC_PTR_VMM);
	if (!(info.flags & GDRC_MR_INFO_SYNC_MEMOPS_CTX))
		fail_msg("flags %#x, push %lu get %lu set %lu", info.flags,
			 fake_cuda_calls("cuCtxPushCurrent_v2"),
			 fake_cuda_calls("cuCtxGetFlags"),
			 fake_cuda_calls("cuCtxSetFlags"));
	/* No current context here: the active primary one got the flag. */
	assert_true(fake_cuda_ctx_flags(0) & CU_CTX_SYNC_MEMOPS);
	assert_int_equal(fake_cuda_primary_refs(0), 0);
	assert_int_equal(fake_cuda_retained_handles(), 0);
	gdrc_fini(ctx);
}

/* Device 1's VMM memory from a thread with device 0's context current:
 * the flag goes on device 1's (active primary) context, not device 0's.
 * (With no context to be had at all the get fails: test_gpu_vmm.) */
static void test_gpu_fake_vmm_other_device_current_not_flagged(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr v;
	CUcontext popped;
	struct gdrc_mr_info info;

	(void)state;
	fake_cuda_reset(2);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	ctx = ctx_mode(NULL);
	v = fake_cuda_alloc(FAKE_VMM, 2 * MIB, 1);
	assert_int_equal(cuCtxPushCurrent_v2(fake_cuda_ctx(0)), CUDA_SUCCESS);
	info = get_info(ctx, v, 64);
	assert_int_equal(cuCtxPopCurrent_v2(&popped), CUDA_SUCCESS);
	assert_ptr_equal(popped, fake_cuda_ctx(0));
	assert_true(info.flags & GDRC_MR_INFO_SYNC_MEMOPS_CTX);
	assert_int_equal(fake_cuda_ctx_flags(0) & CU_CTX_SYNC_MEMOPS, 0);
	assert_true(fake_cuda_ctx_flags(1) & CU_CTX_SYNC_MEMOPS);
	assert_int_equal(fake_cuda_primary_refs(1), 0);
	gdrc_fini(ctx);
}

static void test_gpu_fake_vmm_current_context_gets_flag(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr v = fake_cuda_alloc(FAKE_VMM, 2 * MIB, 1);
	CUcontext popped;
	struct gdrc_mr_info info;

	(void)state;
	fake_cuda_reset(2);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	v = fake_cuda_alloc(FAKE_VMM, 2 * MIB, 1);
	fake_cuda_set_primary_active(0);
	assert_int_equal(cuCtxPushCurrent_v2(fake_cuda_ctx(1)), CUDA_SUCCESS);
	info = get_info(ctx, v, 64);
	assert_int_equal(cuCtxPopCurrent_v2(&popped), CUDA_SUCCESS);
	assert_true(info.flags & GDRC_MR_INFO_SYNC_MEMOPS_CTX);
	assert_true(fake_cuda_ctx_flags(1) & CU_CTX_SYNC_MEMOPS);
	gdrc_fini(ctx);
}

static void test_gpu_fake_vmm_without_ctx_flags_reports_none(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr v;
	struct gdrc_mr_info info;

	(void)state;
	/* Device 1's context, never seen before: setting its flag fails, as
	 * on drivers before 12.1. */
	fake_cuda_reset(2);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	fake_cuda_fail("cuCtxSetFlags", CUDA_ERROR_NOT_SUPPORTED, -1);
	ctx = ctx_mode(NULL);
	v = fake_cuda_alloc(FAKE_VMM, 2 * MIB, 1);
	info = get_info(ctx, v, 64);
	assert_true(info.flags & GDRC_MR_INFO_NO_SYNC_MEMOPS);
	assert_int_equal(info.device, 1);
	fake_cuda_fail("cuCtxSetFlags", CUDA_SUCCESS, 0);
	gdrc_fini(ctx);
}

/* ---- validation ---- */

static void test_gpu_fake_free_realloc_same_va_new_id(void **state)
{
	static const enum fake_cuda_kind kinds[] = { FAKE_DEVICE, FAKE_POOL,
						     FAKE_VMM };
	struct gdrc_ctx *ctx = ctx_mode(NULL);

	(void)state;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		size_t size = kinds[k] == FAKE_VMM ? 2 * MIB : MIB;
		CUdeviceptr p = fake_cuda_alloc(kinds[k], size, 0), q;
		struct gdrc_mr_info a, b;

		a = get_info(ctx, p, 64);
		(void)get_info(ctx, p, 64); /* remembered: fast-path hit */
		assert_int_equal(fake_cuda_free(p), 0);
		q = fake_cuda_alloc(kinds[k], size, 0);
		assert_int_equal(q, p); /* same VA, new BUFFER_ID */
		b = get_info(ctx, q, 64);
		assert_int_not_equal(b.id, a.id);
		assert_int_not_equal(b.buffer_id, a.buffer_id);
		assert_int_equal(b.buffer_id, fake_cuda_buffer_id(q));
		assert_int_equal(stat_of(ctx, GDRC_STAT_INV_TAG_CHECK), k + 1);
		assert_int_equal(fake_cuda_free(q), 0);
	}
	gdrc_fini(ctx);
}

/* A remembered registration whose allocation was freed and made again
 * at the same address: the next get asks the driver for its BUFFER_ID
 * once on the fast path (the mismatch: one failed check) and once more
 * where the index finds it (which removes it), then registers anew; no
 * check is repeated on the way. */
static void test_gpu_fake_stale_hit_checked_once(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode("always");
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0), q;
	struct gdrc_mr_info a, b;
	uint64_t checks;

	(void)state;
	for (int i = 0; i < 3; i++)
		a = get_info(ctx, p, 64); /* the third through the handle */
	assert_int_equal(fake_cuda_free(p), 0);
	q = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	assert_int_equal(q, p);
	checks = stat_of(ctx, GDRC_STAT_TAG_CHECKS);
	fake_cuda_calls_reset();
	b = get_info(ctx, q, 64);
	assert_int_not_equal(b.id, a.id);
	assert_int_equal(fake_cuda_calls("cuPointerGetAttribute"), 2);
	assert_int_equal(stat_of(ctx, GDRC_STAT_TAG_CHECKS) - checks, 2);
	assert_int_equal(stat_of(ctx, GDRC_STAT_INV_TAG_CHECK), 1);
	gdrc_fini(ctx);
	fake_cuda_free(q);
}

static void test_gpu_fake_shared_page_neighbour_never_validates(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr a = fake_cuda_alloc(FAKE_DEVICE, 256, 0);
	CUdeviceptr b = fake_cuda_alloc(FAKE_DEVICE, 256, 0), b2;
	struct gdrc_mr_info ia, ib, ib2, ia2;

	(void)state;
	assert_int_equal(a / (64 * KIB), b / (64 * KIB));
	ia = get_info(ctx, a, 256);
	ib = get_info(ctx, b, 256);
	assert_int_not_equal(ia.id, ib.id);
	assert_int_equal(ia.key_length, 256);
	assert_int_equal(ib.key_length, 256);
	assert_int_equal(ia.addr, ib.addr); /* same 64 KiB page pinned */
	assert_int_equal(fake_cuda_free(b), 0);
	b2 = fake_cuda_alloc(FAKE_DEVICE, 256, 0);
	assert_int_equal(b2, b);
	ib2 = get_info(ctx, b2, 256);
	assert_int_not_equal(ib2.id, ib.id);
	assert_int_equal(ib2.buffer_id, fake_cuda_buffer_id(b2));
	ia2 = get_info(ctx, a, 256);
	assert_int_equal(ia2.id, ia.id); /* the neighbour is untouched */
	gdrc_fini(ctx);
}

static void test_gpu_fake_held_registration_valid_after_free(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0), q;
	struct gdrc_mr *old, *fresh;
	struct gdrc_mr_info a, b;

	(void)state;
	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)p, 64, 0, 0,
				     &old),
			 GDRC_OK);
	assert_int_equal(fake_cuda_free(p), 0);
	q = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	assert_int_equal(q, p);
	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)q, 64, 0, 0,
				     &fresh),
			 GDRC_OK);
	assert_ptr_not_equal(fresh, old);
	assert_int_equal(gdrc_mr_query(old, &a), GDRC_OK);
	assert_int_equal(gdrc_mr_query(fresh, &b), GDRC_OK);
	assert_true(a.flags & GDRC_MR_INFO_INVALIDATED);
	assert_int_not_equal(a.buffer_id, b.buffer_id);
	gdrc_mr_put(ctx, old);
	gdrc_mr_put(ctx, fresh);
	assert_int_equal(stat_of(ctx, GDRC_STAT_DEREGS), 1);
	gdrc_fini(ctx);
}

static void test_gpu_fake_hit_cuda_calls_per_mode(void **state)
{
	static const char *const modes[] = { "always", "auto", "hooks" };
	static const unsigned long want[] = { 100, 100, 0 };

	(void)state;
	for (int m = 0; m < 3; m++) {
		struct gdrc_ctx *ctx = ctx_mode(modes[m]);
		CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
		struct gdrc_mr_info info = get_info(ctx, p, 64);

		assert_int_equal(!!(info.flags & GDRC_MR_INFO_TAG_CHECKED),
				 m < 2);
		fake_cuda_calls_reset();
		for (int i = 0; i < 100; i++)
			(void)get_info(ctx, p + 64 * i, 64);
		assert_int_equal(fake_cuda_calls("cuPointerGetAttribute"),
				 want[m]);
		assert_int_equal(fake_cuda_calls("cuPointerGetAttributes"),
				 0);
		assert_int_equal(fake_cuda_calls("cuPointerSetAttribute"), 0);
		assert_int_equal(stat_of(ctx, GDRC_STAT_TAG_CHECKS), want[m]);
		assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), 100);
		gdrc_fini(ctx);
		fake_cuda_free(p);
	}
}

static void test_gpu_fake_hooks_mode_explicit_invalidate(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode("hooks");
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0), q;
	struct gdrc_mr_info a, b;

	(void)state;
	a = get_info(ctx, p, 64);
	assert_int_equal(fake_cuda_free(p), 0);
	assert_int_equal(gdrc_invalidate(ctx, (void *)(uintptr_t)p, MIB),
			 GDRC_OK);
	q = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	b = get_info(ctx, q, 64);
	assert_int_not_equal(a.id, b.id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_INV_EXPLICIT), 1);
	gdrc_fini(ctx);
}

static void test_gpu_fake_second_device_ordinal(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr p;

	(void)state;
	fake_cuda_reset(2);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	ctx = ctx_mode(NULL);
	p = fake_cuda_alloc(FAKE_DEVICE, MIB, 1);
	assert_int_equal(get_info(ctx, p, 64).device, 1);
	gdrc_fini(ctx);
}

static void test_gpu_fake_host_pinned_takes_host_path(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr p = fake_cuda_alloc(FAKE_HOST_PINNED, MIB, 0);
	struct gdrc_mr_info info = get_info(ctx, p + 10, 100);

	(void)state;
	assert_int_equal(info.mem_type, GDRC_MEM_HOST);
	assert_int_equal(info.kind, GDRC_PTR_HOST_PINNED);
	assert_int_equal(info.addr, p); /* page rounded, not 64 KiB */
	assert_int_equal(info.length, 4096);
	assert_int_equal(info.flags & GDRC_MR_INFO_TAG_CHECKED, 0);
	assert_int_equal(fake_cuda_sync_memops_count(p), 0);
	gdrc_fini(ctx);
}

/* The child's checks, as an exit code: 0 ok, else the failing step. */
static int fork_child(void)
{
	struct gdrc_ctx *ctx;
	const char *why = NULL;
	struct gdrc_mr *mr;
	char buf[64];

	if (gdrc_init(NULL, &ctx) != GDRC_OK)
		return 1;
	if (gdrc_gpu_status(ctx, &why) != GDRC_ERR_NO_DEVICE)
		return 2;
	if (!why || !strstr(why, "fork"))
		return 3;
	if (gdrc_mr_get(ctx, buf, sizeof(buf), 0, 0, &mr) != GDRC_OK)
		return 4;
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	return 0;
}

static void test_gpu_fake_fork_child_has_no_gpu(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	int wstatus;
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fork_child());
	assert_int_equal(waitpid(pid, &wstatus, 0), pid);
	assert_true(WIFEXITED(wstatus));
	assert_int_equal(WEXITSTATUS(wstatus), 0);
	/* The parent keeps its GPU support. */
	assert_int_equal(gdrc_gpu_status(ctx, NULL), GDRC_OK);
	gdrc_fini(ctx);
}

/*
 * A tag-checked hit does not look at the event queue (the BUFFER_ID is
 * its answer), so a fork child must not find the forking thread's
 * remembered handle: its get answers GDRC_ERR_FORK, not a hit.
 */
static int fork_child_tagged(struct gdrc_ctx *ctx, CUdeviceptr p)
{
	struct gdrc_mr *mr = NULL;

	if (gdrc_mr_get(ctx, (void *)(uintptr_t)p, 64, 0, 0, &mr) !=
	    GDRC_ERR_FORK)
		return 1;
	return mr ? 2 : 0;
}

static void test_gpu_fake_fork_child_no_tag_checked_hit(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode("always");
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	uint64_t hits;
	int wstatus;
	pid_t pid;

	(void)state;
	(void)get_info(ctx, p, 64); /* miss */
	(void)get_info(ctx, p, 64); /* remembered by this thread */
	hits = stat_of(ctx, GDRC_STAT_HITS);
	(void)get_info(ctx, p, 64);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), hits + 1);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fork_child_tagged(ctx, p));
	assert_int_equal(waitpid(pid, &wstatus, 0), pid);
	assert_true(WIFEXITED(wstatus));
	assert_int_equal(WEXITSTATUS(wstatus), 0);
	/* The parent's entry still hits. */
	(void)get_info(ctx, p, 64);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), hits + 2);
	gdrc_fini(ctx);
	fake_cuda_free(p);
}

/*
 * A put through the wrong context is a misuse (GDRC_MISUSE=warn here):
 * counted, and nothing changes in either context; the put through the
 * right one then drops the reference, and the registration is released
 * once it was invalidated.
 */
static void test_gpu_fake_put_through_other_context(void **state)
{
	struct gdrc_ctx *a, *b;
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	struct gdrc_mr *mr;
	uint64_t puts_a, misuse;

	(void)state;
	setenv("GDRC_MISUSE", "warn", 1);
	a = ctx_mode("always");
	b = ctx_mode("always");
	(void)get_info(a, p, 64);
	(void)get_info(a, p, 64); /* a fast-path handle of this thread */
	puts_a = stat_of(a, GDRC_STAT_PUTS);
	misuse = stat_of(a, GDRC_STAT_MISUSE);
	assert_int_equal(gdrc_mr_get(a, (void *)(uintptr_t)p, 64, 0, 0, &mr),
			 GDRC_OK);
	gdrc_mr_put(b, mr);
	assert_int_equal(stat_of(a, GDRC_STAT_MISUSE), misuse + 1);
	assert_int_equal(stat_of(a, GDRC_STAT_PUTS), puts_a);
	assert_int_equal(stat_of(b, GDRC_STAT_PUTS), 0);
	gdrc_mr_put(a, mr);
	assert_int_equal(stat_of(a, GDRC_STAT_PUTS), puts_a + 1);
	assert_int_equal(gdrc_invalidate(a, (void *)(uintptr_t)p, MIB),
			 GDRC_OK);
	/* Nothing held: the next get registers anew, and a's region and
	 * pinned counts go back to that one registration. */
	(void)get_info(a, p, 64);
	assert_int_equal(stat_of(a, GDRC_STAT_REGIONS), 1);
	assert_int_equal(stat_of(a, GDRC_STAT_MISUSE), misuse + 1);
	gdrc_fini(b);
	gdrc_fini(a);
	setenv("GDRC_MISUSE", "abort", 1);
	fake_cuda_free(p);
}

#define T(fn) cmocka_unit_test_setup(fn, setup)

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* Before the fake is loaded for good: */
		T(test_gpu_fake_no_driver_host_still_works),
		T(test_gpu_fake_cuda_library_none_turns_gpu_off),
		T(test_gpu_fake_cuinit_failure_says_why),
		T(test_gpu_fake_zero_devices_says_why),
		T(test_gpu_fake_gpu_status_bad_args),
		T(test_gpu_fake_classify_every_kind),
		T(test_gpu_fake_ptr_query_cached_from_registration),
		T(test_gpu_fake_managed_refused_unsupported),
		T(test_gpu_fake_range_past_allocation_unsupported),
		T(test_gpu_fake_classify_failure_cuda_error),
		T(test_gpu_fake_whole_allocation_rounded_64k),
		T(test_gpu_fake_large_allocation_keyed_by_request),
		T(test_gpu_fake_sync_memops_once_per_allocation),
		T(test_gpu_fake_vmm_sync_memops_on_context),
		T(test_gpu_fake_vmm_without_ctx_flags_reports_none),
		T(test_gpu_fake_vmm_other_device_current_not_flagged),
		T(test_gpu_fake_vmm_current_context_gets_flag),
		T(test_gpu_fake_free_realloc_same_va_new_id),
		T(test_gpu_fake_stale_hit_checked_once),
		T(test_gpu_fake_shared_page_neighbour_never_validates),
		T(test_gpu_fake_held_registration_valid_after_free),
		T(test_gpu_fake_hit_cuda_calls_per_mode),
		T(test_gpu_fake_hooks_mode_explicit_invalidate),
		T(test_gpu_fake_fork_child_no_tag_checked_hit),
		T(test_gpu_fake_put_through_other_context),
		T(test_gpu_fake_second_device_ordinal),
		T(test_gpu_fake_host_pinned_takes_host_path),
		T(test_gpu_fake_fork_child_has_no_gpu),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
