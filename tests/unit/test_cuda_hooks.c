// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cuda_hooks.c - CUDA free interception against the fake driver:
 * every free path (the driver symbol, a cuGetProcAddress pointer of each
 * stream flavour, dlsym, the 32-bit cuMemFree, async, host, unregister,
 * VMM unmap) drops the registrations of the freed allocation before the
 * address is reused, with GDRC_VALIDATE=hooks so that no tag check can
 * hide a missed free; a neighbour sharing the 64 KiB page keeps its
 * registration; the self test waits for a context; and the statuses.
 *
 * The fake's free functions begin with libcuda 580's own prologue, so the
 * same detour code runs here as on the GPU machine.  Tests run in order:
 * the first one sees the process before any CUDA context existed.
 */
#include <dlfcn.h>
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

#define KIB 1024UL
#define MIB (1024UL * 1024)
#define CU_VERSION 13000
#define GPA_PTDS 2ULL

static struct gdrc_ctx *ctx_hooks(void)
{
	struct gdrc_ctx *ctx;

	setenv("GDRC_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
	setenv("GDRC_VALIDATE", "hooks", 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	unsetenv("GDRC_VALIDATE");
	return ctx;
}

static void *gpa(const char *name, unsigned long long flags)
{
	void *fn = NULL;
	int st = -1;

	assert_int_equal(cuGetProcAddress_v2(name, &fn, CU_VERSION, flags,
					     &st),
			 CUDA_SUCCESS);
	assert_int_equal(st, 0);
	assert_non_null(fn);
	return fn;
}

static void *fake_sym(const char *name)
{
	void *h = dlopen(FAKE_CUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
	void *fn;

	assert_non_null(h);
	fn = dlsym(h, name);
	dlclose(h);
	assert_non_null(fn);
	return fn;
}

/*
 * Register kind at p, free it with do_free, reallocate at the same
 * address: the free is a CUDA hook event, the old registration goes
 * (counted as a CUDA hook invalidation), and the new allocation gets a
 * new registration, with no tag check made at any point.
 */
static void free_path(enum fake_cuda_kind kind, size_t size,
		      CUresult (*do_free)(CUdeviceptr p, size_t size))
{
	struct gdrc_ctx *ctx = ctx_hooks();
	CUdeviceptr p = fake_cuda_alloc(kind, size, 0), q;
	struct gdrc_mr_info a, b;
	uint64_t ev, inv;

	assert_true(p != 0);
	a = get_info(ctx, p, 4 * KIB);
	assert_int_equal(a.flags & GDRC_MR_INFO_TAG_CHECKED, 0);
	ev = stat_of(ctx, GDRC_STAT_CUDA_EVENTS);
	inv = stat_of(ctx, GDRC_STAT_INV_CUDA_HOOK);
	assert_int_equal(do_free(p, size), CUDA_SUCCESS);
	assert_int_equal(stat_of(ctx, GDRC_STAT_CUDA_EVENTS), ev + 1);
	/* The source that saw it says so. */
	assert_int_equal(gdrc_source_status(ctx, GDRC_SOURCE_CUDA_HOOKS, NULL,
					    &b.id),
			 GDRC_OK);
	assert_int_equal(b.id, ev + 1);
	q = fake_cuda_alloc_at(kind, size, 0, p);
	assert_true(q == p);
	assert_true(fake_cuda_buffer_id(p) != a.buffer_id);
	b = get_info(ctx, p, 4 * KIB);
	assert_true(b.id != a.id);
	assert_int_equal(b.buffer_id, fake_cuda_buffer_id(p));
	assert_int_equal(stat_of(ctx, GDRC_STAT_INV_CUDA_HOOK), inv + 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_TAG_CHECKS), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_INV_TAG_CHECK), 0);
	assert_int_equal(fake_cuda_free(p), 0);
	gdrc_fini(ctx);
}

static CUresult free_symbol(CUdeviceptr p, size_t size)
{
	(void)size;
	return cuMemFree_v2(p);
}

static CUresult free_gpa(CUdeviceptr p, size_t size)
{
	CUresult (*fn)(CUdeviceptr) = (CUresult (*)(CUdeviceptr))gpa(
		"cuMemFree", 0);

	(void)size;
	return fn(p);
}

static CUresult free_dlsym(CUdeviceptr p, size_t size)
{
	CUresult (*fn)(CUdeviceptr) = (CUresult (*)(CUdeviceptr))fake_sym(
		"cuMemFree_v2");

	(void)size;
	return fn(p);
}

static CUresult free_async_ptds(CUdeviceptr p, size_t size)
{
	CUresult (*fn)(CUdeviceptr, void *) =
		(CUresult (*)(CUdeviceptr, void *))gpa("cuMemFreeAsync",
						       GPA_PTDS);

	(void)size;
	assert_ptr_equal((void *)fn, fake_sym("cuMemFreeAsync_ptsz"));
	return fn(p, NULL);
}

static CUresult free_async(CUdeviceptr p, size_t size)
{
	(void)size;
	return cuMemFreeAsync(p, NULL);
}

static CUresult free_host(CUdeviceptr p, size_t size)
{
	(void)size;
	return cuMemFreeHost((void *)(uintptr_t)p);
}

static CUresult free_unmap(CUdeviceptr p, size_t size)
{
	return cuMemUnmap(p, size);
}

/* ---- before any context: the self test waits ---- */

static void test_cuda_hooks_self_test_waits_for_a_context(void **state)
{
	struct gdrc_ctx *ctx;
	const char *why = NULL;
	CUdeviceptr p;

	(void)state;
	ctx = ctx_hooks();
	assert_int_equal(gdrc_cuda_hooks_status(ctx, &why),
			 GDRC_ERR_UNSUPPORTED);
	assert_non_null(why);
	assert_non_null(strstr(why, "waits for a cuda context"));
	/* The first GPU miss runs it, in the allocation's context. */
	p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	assert_int_equal(get_info(ctx, p, 4 * KIB).flags &
				 GDRC_MR_INFO_TAG_CHECKED,
			 0);
	assert_int_equal(gdrc_cuda_hooks_status(ctx, &why), GDRC_OK);
	assert_null(why);
	/* As event sources: the hooks serve GPU memory, BUFFER_IDs are not
	 * asked (GDRC_VALIDATE=hooks). */
	assert_int_equal(gdrc_source_status(ctx, GDRC_SOURCE_CUDA_HOOKS, &why,
					    NULL),
			 GDRC_OK);
	assert_non_null(strstr(why, "detoured"));
	assert_int_equal(gdrc_source_status(ctx, GDRC_SOURCE_BUFFER_ID, &why,
					    NULL),
			 GDRC_ERR_UNSUPPORTED);
	assert_non_null(strstr(why, "GDRC_VALIDATE=hooks"));
	assert_int_equal(fake_cuda_free(p), 0);
	gdrc_fini(ctx);
}

/* ---- every free path ---- */

static void test_cuda_hooks_cumemfree_symbol(void **state)
{
	(void)state;
	free_path(FAKE_DEVICE, MIB, free_symbol);
}

static void test_cuda_hooks_cumemfree_through_getprocaddress(void **state)
{
	(void)state;
	free_path(FAKE_DEVICE, MIB, free_gpa);
}

static void test_cuda_hooks_cumemfree_through_dlsym(void **state)
{
	(void)state;
	free_path(FAKE_DEVICE, MIB, free_dlsym);
}

static void test_cuda_hooks_cumemfree_v1(void **state)
{
	struct gdrc_ctx *ctx = ctx_hooks();
	CUresult (*v1)(unsigned int) =
		(CUresult (*)(unsigned int))fake_sym("cuMemFree");
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	uint64_t ev = stat_of(ctx, GDRC_STAT_CUDA_EVENTS);
	CUresult res;

	(void)state;
	/* Its free is seen, with the address it was given.  The 32-bit API
	 * names this allocation only where it lies below 4 GiB (valgrind
	 * maps there); elsewhere the driver refuses the truncated one. */
	res = v1((unsigned int)p);
	assert_int_equal(stat_of(ctx, GDRC_STAT_CUDA_EVENTS), ev + 1);
	if (p >> 32)
		assert_int_not_equal(res, CUDA_SUCCESS);
	if (res != CUDA_SUCCESS)
		assert_int_equal(fake_cuda_free(p), 0);
	gdrc_fini(ctx);
}

static void test_cuda_hooks_async_free_seen_at_call(void **state)
{
	(void)state;
	free_path(FAKE_POOL, MIB, free_async);
}

static void test_cuda_hooks_async_free_per_thread_stream(void **state)
{
	(void)state;
	free_path(FAKE_POOL, MIB, free_async_ptds);
}

static void test_cuda_hooks_cumemfreehost(void **state)
{
	(void)state;
	free_path(FAKE_HOST_PINNED, MIB, free_host);
}

static void test_cuda_hooks_vmm_unmap(void **state)
{
	(void)state;
	free_path(FAKE_VMM, 2 * MIB, free_unmap);
}

/* The memory stays; the registration made for pinned memory goes, and
 * the next get sees plain host memory. */
static void test_cuda_hooks_host_unregister(void **state)
{
	struct gdrc_ctx *ctx = ctx_hooks();
	CUdeviceptr p = fake_cuda_alloc(FAKE_HOST_PINNED, MIB, 0);
	struct gdrc_mr_info a, b;
	uint64_t inv;

	(void)state;
	a = get_info(ctx, p + 64 * KIB, 4 * KIB);
	assert_int_equal(a.kind, GDRC_PTR_HOST_PINNED);
	inv = stat_of(ctx, GDRC_STAT_INV_CUDA_HOOK);
	assert_int_equal(cuMemHostUnregister((void *)(uintptr_t)p),
			 CUDA_SUCCESS);
	b = get_info(ctx, p + 64 * KIB, 4 * KIB);
	assert_int_equal(stat_of(ctx, GDRC_STAT_INV_CUDA_HOOK), inv + 1);
	assert_true(b.id != a.id);
	assert_int_equal(b.kind, GDRC_PTR_HOST);
	gdrc_fini(ctx);
}

/* Two allocations in one 64 KiB page: freeing one keeps the other's
 * registration, although both keys cover the same page. */
static void test_cuda_hooks_neighbour_in_page_kept(void **state)
{
	struct gdrc_ctx *ctx = ctx_hooks();
	CUdeviceptr a = fake_cuda_alloc(FAKE_DEVICE, 512, 0);
	CUdeviceptr b = fake_cuda_alloc(FAKE_DEVICE, 512, 0);
	struct gdrc_mr_info ia, ib, ib2;
	uint64_t misses;

	(void)state;
	assert_true(a / (64 * KIB) == b / (64 * KIB));
	ia = get_info(ctx, a, 512);
	ib = get_info(ctx, b, 512);
	assert_true(ia.id != ib.id);
	assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
	misses = stat_of(ctx, GDRC_STAT_MISSES);
	ib2 = get_info(ctx, b, 512);
	assert_int_equal(ib2.id, ib.id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), misses);
	assert_int_equal(stat_of(ctx, GDRC_STAT_INV_CUDA_HOOK), 1);
	assert_int_equal(fake_cuda_free(b), 0);
	gdrc_fini(ctx);
}

/* A free the driver refuses changes nothing it owns; the cache dropped
 * the registration anyway (it cannot know), which is only slower. */
static void test_cuda_hooks_failed_free_is_harmless(void **state)
{
	struct gdrc_ctx *ctx = ctx_hooks();
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	struct gdrc_mr_info a, b;

	(void)state;
	a = get_info(ctx, p, 4 * KIB);
	fake_cuda_fail("cuMemFree_v2", CUDA_ERROR_INVALID_VALUE, 1);
	assert_int_equal(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);
	b = get_info(ctx, p, 4 * KIB);
	assert_true(b.id != a.id);
	assert_int_equal(b.buffer_id, a.buffer_id);
	assert_int_equal(fake_cuda_free(p), 0);
	gdrc_fini(ctx);
}

/* ---- statuses ---- */

static void test_cuda_hooks_status_bad_input(void **state)
{
	const char *why = "unchanged";

	(void)state;
	assert_int_equal(gdrc_cuda_hooks_status(NULL, &why),
			 GDRC_ERR_INVALID_PARAM);
	assert_string_equal(why, "unchanged");
}

static void test_cuda_hooks_mem_hooks_none(void **state)
{
	struct gdrc_ctx *ctx;
	const char *why = NULL;
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	struct gdrc_mr_info a;

	(void)state;
	setenv("GDRC_MEM_HOOKS", "none", 1);
	ctx = ctx_hooks();
	unsetenv("GDRC_MEM_HOOKS");
	assert_int_equal(gdrc_cuda_hooks_status(ctx, &why),
			 GDRC_ERR_UNSUPPORTED);
	assert_string_equal(why, "GDRC_MEM_HOOKS=none");
	assert_int_equal(gdrc_source_status(ctx, GDRC_SOURCE_CUDA_HOOKS, &why,
					    NULL),
			 GDRC_ERR_UNSUPPORTED);
	assert_string_equal(why, "GDRC_MEM_HOOKS=none");
	/* Without the hooks each hit's BUFFER_ID answers, even asked for
	 * GDRC_VALIDATE=hooks. */
	assert_int_equal(gdrc_source_status(ctx, GDRC_SOURCE_BUFFER_ID, &why,
					    NULL),
			 GDRC_OK);
	/* The caller reports frees: a free alone changes nothing here. */
	a = get_info(ctx, p, 4 * KIB);
	assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
	assert_int_equal(stat_of(ctx, GDRC_STAT_CUDA_EVENTS), 0);
	assert_int_equal(gdrc_invalidate(ctx, (void *)(uintptr_t)p, 4 * KIB),
			 GDRC_OK);
	assert_int_equal(stat_of(ctx, GDRC_STAT_INV_EXPLICIT), 1);
	(void)a;
	gdrc_fini(ctx);
}

static void test_cuda_hooks_no_driver(void **state)
{
	struct gdrc_ctx *ctx;
	const char *why = NULL;

	(void)state;
	setenv("GDRC_CUDA_LIBRARY", "none", 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	unsetenv("GDRC_CUDA_LIBRARY");
	assert_int_equal(gdrc_cuda_hooks_status(ctx, &why),
			 GDRC_ERR_UNSUPPORTED);
	assert_string_equal(why, "GDRC_CUDA_LIBRARY=none");
	gdrc_fini(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* first: no CUDA context has existed yet */
		cmocka_unit_test(test_cuda_hooks_self_test_waits_for_a_context),
		cmocka_unit_test(test_cuda_hooks_cumemfree_symbol),
		cmocka_unit_test(test_cuda_hooks_cumemfree_through_getprocaddress),
		cmocka_unit_test(test_cuda_hooks_cumemfree_through_dlsym),
		cmocka_unit_test(test_cuda_hooks_cumemfree_v1),
		cmocka_unit_test(test_cuda_hooks_async_free_seen_at_call),
		cmocka_unit_test(test_cuda_hooks_async_free_per_thread_stream),
		cmocka_unit_test(test_cuda_hooks_cumemfreehost),
		cmocka_unit_test(test_cuda_hooks_vmm_unmap),
		cmocka_unit_test(test_cuda_hooks_host_unregister),
		cmocka_unit_test(test_cuda_hooks_neighbour_in_page_kept),
		cmocka_unit_test(test_cuda_hooks_failed_free_is_harmless),
		cmocka_unit_test(test_cuda_hooks_status_bad_input),
		cmocka_unit_test(test_cuda_hooks_mem_hooks_none),
		cmocka_unit_test(test_cuda_hooks_no_driver),
	};

	fake_cuda_reset(1);
	if (cuInit(0) != CUDA_SUCCESS)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
