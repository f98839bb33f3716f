// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_fake_cuda.c - unit tests for the fake CUDA driver itself.
 *
 * Other tests trust libgdrc_fakecuda.so to behave like the real driver
 * did on an H200 (shared/research/gpu-probe.md); these check that it
 * does: sub-allocation of small cuMemAlloc blocks, VA reuse with a new
 * BUFFER_ID, what unknown (host or freed) addresses return, VMM, pool,
 * managed and pinned host memory, failure injection and call counts,
 * CUDA_ERROR_NOT_INITIALIZED before cuInit, per-thread context stacks
 * and flags, thread safety, and that dlopen of the file the test links
 * gives the same instance.  VMM reservations with several mappings and
 * holes, the context rules of cuMemGetAddressRange_v2 and the dma-buf
 * export, and cuCtxGetDevice follow what an H100 on driver 580 did
 * (docs/probes/vmm_probe-h100-2026-11-25.txt).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake_cuda.h"

#define KiB 1024UL
#define MiB (1024UL * KiB)
#define P(x) ((void *)(uintptr_t)(x))

/* ====================================================================
 * Helpers
 * ==================================================================== */

static int setup(void **state)
{
	(void)state;
	fake_cuda_reset(1);
	return cuInit(0) == CUDA_SUCCESS ? 0 : -1;
}

static unsigned long long buffer_id_of(CUdeviceptr p, CUresult *rc)
{
	unsigned long long id = 0xdeadULL;

	*rc = cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
	return id;
}

static size_t range_size_of(CUdeviceptr p)
{
	size_t size = 0;

	assert_int_equal(cuPointerGetAttribute(&size,
			 CU_POINTER_ATTRIBUTE_RANGE_SIZE, p), CUDA_SUCCESS);
	return size;
}

static void *attr_ptr(CUdeviceptr p, int attr)
{
	void *v = (void *)(uintptr_t)0x1234;

	assert_int_equal(cuPointerGetAttribute(&v, attr, p), CUDA_SUCCESS);
	return v;
}

static int attr_int(CUdeviceptr p, int attr)
{
	int v = -77;

	assert_int_equal(cuPointerGetAttribute(&v, attr, p), CUDA_SUCCESS);
	return v;
}

/* Make device's context current on this thread, and undo it. */
static void push_ctx(int device)
{
	assert_int_equal(cuCtxPushCurrent_v2(fake_cuda_ctx(device)),
			 CUDA_SUCCESS);
}

static void pop_ctx(void)
{
	assert_int_equal(cuCtxPopCurrent_v2(NULL), CUDA_SUCCESS);
}

/* ====================================================================
 * Initialisation and device queries
 * ==================================================================== */

static void test_fake_cuda_before_init_not_initialized(void **state)
{
	unsigned long long id;
	const char *name;
	unsigned flags;
	int n, v;

	(void)state;
	fake_cuda_reset(1);
	assert_int_equal(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
	assert_int_equal(cuDeviceGetAttribute(&v,
			 CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 0),
			 CUDA_ERROR_NOT_INITIALIZED);
	assert_int_equal(cuPointerGetAttribute(&id,
			 CU_POINTER_ATTRIBUTE_BUFFER_ID, 0x1000),
			 CUDA_ERROR_NOT_INITIALIZED);
	assert_int_equal(cuCtxPushCurrent_v2(fake_cuda_ctx(0)),
			 CUDA_ERROR_NOT_INITIALIZED);
	assert_int_equal(cuCtxGetFlags(&flags), CUDA_ERROR_NOT_INITIALIZED);
	assert_int_equal(cuMemRelease(1), CUDA_ERROR_NOT_INITIALIZED);
	/* As in the real driver, these two need no cuInit. */
	assert_int_equal(cuDriverGetVersion(&v), CUDA_SUCCESS);
	assert_int_equal(v, 13000);
	assert_int_equal(cuGetErrorName(CUDA_ERROR_NO_DEVICE, &name),
			 CUDA_SUCCESS);
	assert_string_equal(name, "CUDA_ERROR_NO_DEVICE");

	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	assert_int_equal(cuDeviceGetCount(&n), CUDA_SUCCESS);
	assert_int_equal(n, 1);
	assert_int_equal(fake_cuda_calls("cuDeviceGetCount"), 2);
}

static void test_fake_cuda_init_result_set_returned(void **state)
{
	int n;

	(void)state;
	fake_cuda_reset(1);
	fake_cuda_set_init_result(CUDA_ERROR_STUB_LIBRARY);
	assert_int_equal(cuInit(0), CUDA_ERROR_STUB_LIBRARY);
	assert_int_equal(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);

	fake_cuda_set_init_result(CUDA_SUCCESS);
	assert_int_equal(cuInit(1), CUDA_ERROR_INVALID_VALUE);
	fake_cuda_set_device_count(0);
	assert_int_equal(cuInit(0), CUDA_ERROR_NO_DEVICE);
	fake_cuda_set_device_count(3);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	assert_int_equal(cuDeviceGetCount(&n), CUDA_SUCCESS);
	assert_int_equal(n, 3);
	assert_int_equal(fake_cuda_calls("cuInit"), 4);
}

static void test_fake_cuda_device_attributes_one(void **state)
{
	static const int attrs[] = {
		CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED,
		CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
		CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
	};
	size_t i;
	int v;

	(void)state;
	for (i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		v = 0;
		assert_int_equal(cuDeviceGetAttribute(&v, attrs[i], 0),
				 CUDA_SUCCESS);
		assert_int_equal(v, 1);
	}
	assert_int_equal(cuDeviceGetAttribute(&v, attrs[0], 1),
			 CUDA_ERROR_INVALID_DEVICE);
	assert_int_equal(cuDeviceGetAttribute(&v, attrs[0], -1),
			 CUDA_ERROR_INVALID_DEVICE);
	assert_int_equal(cuDeviceGetAttribute(&v, 12345, 0),
			 CUDA_ERROR_INVALID_VALUE);
}

static void test_fake_cuda_error_names_known_codes(void **state)
{
	const char *name;

	(void)state;
	assert_int_equal(cuGetErrorName(CUDA_SUCCESS, &name), CUDA_SUCCESS);
	assert_string_equal(name, "CUDA_SUCCESS");
	assert_int_equal(cuGetErrorName(1, &name), CUDA_SUCCESS);
	assert_string_equal(name, "CUDA_ERROR_INVALID_VALUE");
	assert_int_equal(cuGetErrorName(801, &name), CUDA_SUCCESS);
	assert_string_equal(name, "CUDA_ERROR_NOT_SUPPORTED");
	assert_int_equal(cuGetErrorName(34, &name), CUDA_SUCCESS);
	assert_string_equal(name, "CUDA_ERROR_STUB_LIBRARY");
	assert_int_equal(cuGetErrorName(4242, &name),
			 CUDA_ERROR_INVALID_VALUE);
	assert_null(name);
}

/* ====================================================================
 * Allocations
 * ==================================================================== */

static void test_fake_cuda_small_allocs_512_apart_one_page(void **state)
{
	CUdeviceptr a, b, base = 0;
	unsigned long long ida, idb;
	size_t size = 0;
	CUresult rc;

	(void)state;
	a = fake_cuda_alloc(FAKE_DEVICE, 256, 0);
	b = fake_cuda_alloc(FAKE_DEVICE, 256, 0);
	assert_true(a && b);
	assert_int_equal(b - a, 512);
	assert_int_equal(a / GDRC_GPU_PAGE_SIZE, b / GDRC_GPU_PAGE_SIZE);

	ida = buffer_id_of(a, &rc);
	assert_int_equal(rc, CUDA_SUCCESS);
	idb = buffer_id_of(b + 100, &rc);
	assert_int_equal(rc, CUDA_SUCCESS);
	assert_true(ida >= 900 && idb >= 900);
	assert_int_not_equal(ida, idb);

	assert_int_equal(range_size_of(a), 256);
	assert_int_equal(range_size_of(b + 255), 256);
	push_ctx(0);
	assert_int_equal(cuMemGetAddressRange_v2(&base, &size, b + 17),
			 CUDA_SUCCESS);
	assert_int_equal(base, b);
	assert_int_equal(size, 256);
	pop_ctx();
	/* The gap between them belongs to neither. */
	buffer_id_of(a + 256, &rc);
	assert_int_equal(rc, CUDA_ERROR_INVALID_VALUE);
}

static void test_fake_cuda_large_alloc_64k_aligned_one_id(void **state)
{
	CUdeviceptr p, base = 0;
	unsigned long long id;
	size_t size = 0;
	CUresult rc;

	(void)state;
	p = fake_cuda_alloc(FAKE_DEVICE, 1 * MiB, 0);
	assert_true(p);
	assert_int_equal(p % GDRC_GPU_PAGE_SIZE, 0);
	id = buffer_id_of(p, &rc);
	assert_int_equal(rc, CUDA_SUCCESS);
	assert_int_equal(buffer_id_of(p + 4096, &rc), id);
	assert_int_equal(fake_cuda_buffer_id(p + MiB - 1), id);
	push_ctx(0);
	assert_int_equal(cuMemGetAddressRange_v2(&base, &size, p + 12345),
			 CUDA_SUCCESS);
	assert_int_equal(base, p);
	assert_int_equal(size, MiB);
	assert_int_equal(cuMemGetAddressRange_v2(&base, &size, p + MiB),
			 CUDA_ERROR_NOT_FOUND);
	pop_ctx();
	assert_int_equal(attr_ptr(p + 5, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR),
			 (void *)(uintptr_t)p);
	assert_int_equal(attr_int(p, CU_POINTER_ATTRIBUTE_MAPPED), 1);
	assert_int_equal(attr_int(p,
			 CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE), 1);
}

static void test_fake_cuda_free_realloc_same_va_new_id(void **state)
{
	static const enum fake_cuda_kind kinds[] = {
		FAKE_DEVICE, FAKE_POOL, FAKE_VMM, FAKE_MANAGED,
	};
	static const size_t sizes[] = { 256, 1 * MiB };
	size_t k, s;

	(void)state;
	for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		for (s = 0; s < 2; s++) {
			unsigned long long id, id2;
			CUdeviceptr p, q;
			CUresult rc;

			p = fake_cuda_alloc(kinds[k], sizes[s], 0);
			assert_true(p);
			id = buffer_id_of(p, &rc);
			assert_int_equal(rc, CUDA_SUCCESS);
			assert_int_equal(fake_cuda_free(p), 0);

			buffer_id_of(p, &rc);
			assert_int_equal(rc, CUDA_ERROR_INVALID_VALUE);
			assert_int_equal(fake_cuda_buffer_id(p), 0);

			q = fake_cuda_alloc(kinds[k], sizes[s], 0);
			assert_int_equal(q, p);
			id2 = buffer_id_of(q, &rc);
			assert_int_equal(rc, CUDA_SUCCESS);
			assert_true(id2 > id);
			assert_int_equal(fake_cuda_free(q), 0);
		}
	}
}

static void test_fake_cuda_free_lifo_most_recent_first(void **state)
{
	CUdeviceptr a, b, c;

	(void)state;
	a = fake_cuda_alloc(FAKE_DEVICE, 2 * MiB, 0);
	b = fake_cuda_alloc(FAKE_DEVICE, 2 * MiB, 0);
	assert_int_equal(fake_cuda_free(a), 0);
	assert_int_equal(fake_cuda_free(b), 0);
	/* Another size does not take them. */
	c = fake_cuda_alloc(FAKE_DEVICE, 4 * MiB, 0);
	assert_true(c != a && c != b);
	assert_int_equal(fake_cuda_alloc(FAKE_DEVICE, 2 * MiB, 0), b);
	assert_int_equal(fake_cuda_alloc(FAKE_DEVICE, 2 * MiB, 0), a);
}

static void test_fake_cuda_free_not_start_fails(void **state)
{
	CUdeviceptr p;

	(void)state;
	p = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	assert_int_equal(fake_cuda_free(p + 64), -1);
	assert_int_equal(fake_cuda_free(0x1000), -1);
	assert_int_equal(fake_cuda_free(p), 0);
	assert_int_equal(fake_cuda_free(p), -1);
}

static void test_fake_cuda_alloc_bad_args_zero(void **state)
{
	(void)state;
	assert_int_equal(fake_cuda_alloc(FAKE_DEVICE, 0, 0), 0);
	assert_int_equal(fake_cuda_alloc(FAKE_DEVICE, MiB, 1), 0);
	assert_int_equal(fake_cuda_alloc(FAKE_DEVICE, MiB, -1), 0);
	assert_int_equal(fake_cuda_alloc(FAKE_HOST_PINNED, MiB, 1), 0);
	assert_int_equal(fake_cuda_alloc(FAKE_DEVICE, FAKE_CUDA_VA_SIZE * 2,
					 0), 0);
}

static void test_fake_cuda_alloc_at_taken_fails(void **state)
{
	CUdeviceptr p, q, r;

	(void)state;
	p = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	assert_true(p);
	assert_int_equal(fake_cuda_alloc_at(FAKE_DEVICE, 4096, 0, p), 0);
	assert_int_equal(fake_cuda_alloc_at(FAKE_DEVICE, MiB, 0, p + MiB / 2),
			 0);
	assert_int_equal(fake_cuda_alloc_at(FAKE_DEVICE, MiB, 0, p - 4096),
			 0);
	assert_int_equal(fake_cuda_alloc_at(FAKE_DEVICE, MiB, 0, 0), 0);

	/* Force the VA the next fresh allocation would get: it moves on. */
	q = fake_cuda_alloc_at(FAKE_DEVICE, MiB, 0, p + MiB);
	assert_int_equal(q, p + MiB);
	r = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	assert_true(r >= q + MiB);

	/* A forced VA the allocator remembered as freed is not handed out. */
	assert_int_equal(fake_cuda_free(r), 0);
	assert_int_equal(fake_cuda_alloc_at(FAKE_POOL, 4096, 0, r), r);
	assert_true(fake_cuda_alloc(FAKE_DEVICE, MiB, 0) != r);

	/* Pinned host memory cannot go into the device VA range. */
	assert_int_equal(fake_cuda_alloc_at(FAKE_HOST_PINNED, 4096, 0,
					    r + 64 * KiB), 0);
}

static void test_fake_cuda_small_skips_forced_va(void **state)
{
	CUdeviceptr a, b;

	(void)state;
	a = fake_cuda_alloc(FAKE_DEVICE, 256, 0);
	assert_int_equal(fake_cuda_alloc_at(FAKE_DEVICE, 256, 0, a + 512),
			 a + 512);
	b = fake_cuda_alloc(FAKE_DEVICE, 256, 0);
	assert_int_equal(b, a + 1024);
}

/* ====================================================================
 * Pointer attributes
 * ==================================================================== */

static void test_fake_cuda_host_pointer_attributes_success_zero(void **state)
{
	int attrs[] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		CU_POINTER_ATTRIBUTE_BUFFER_ID,
		CU_POINTER_ATTRIBUTE_CONTEXT,
		CU_POINTER_ATTRIBUTE_IS_MANAGED,
		CU_POINTER_ATTRIBUTE_RANGE_SIZE,
	};
	unsigned memtype = 77;
	unsigned long long id = 77;
	CUcontext ctx = fake_cuda_ctx(0);
	int managed = 77, one = 1;
	size_t size = 77;
	void *data[] = { &memtype, &id, &ctx, &managed, &size };
	char *host = malloc(4096);
	CUdeviceptr hp = (CUdeviceptr)(uintptr_t)host;
	CUresult rc;

	(void)state;
	assert_non_null(host);
	assert_int_equal(cuPointerGetAttributes(5, attrs, data, hp),
			 CUDA_SUCCESS);
	assert_int_equal(memtype, 0);
	assert_int_equal(id, 0);
	assert_null(ctx);
	assert_int_equal(managed, 0);
	assert_int_equal(size, 0);

	buffer_id_of(hp, &rc);
	assert_int_equal(rc, CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuPointerGetAttribute(&memtype,
			 CU_POINTER_ATTRIBUTE_MEMORY_TYPE, hp),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuPointerSetAttribute(&one,
			 CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, hp),
			 CUDA_ERROR_INVALID_VALUE);
	free(host);
}

static void test_fake_cuda_freed_va_attributes_success_zero(void **state)
{
	int attrs[] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		CU_POINTER_ATTRIBUTE_BUFFER_ID,
	};
	unsigned memtype = 77;
	unsigned long long id = 77;
	void *data[] = { &memtype, &id };
	CUdeviceptr p;

	(void)state;
	p = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	assert_int_equal(cuPointerGetAttributes(2, attrs, data, p),
			 CUDA_SUCCESS);
	assert_int_equal(memtype, CU_MEMORYTYPE_DEVICE);
	assert_int_equal(id, fake_cuda_buffer_id(p));
	assert_int_equal(fake_cuda_free(p), 0);
	assert_int_equal(cuPointerGetAttributes(2, attrs, data, p),
			 CUDA_SUCCESS);
	assert_int_equal(memtype, 0);
	assert_int_equal(id, 0);
}

static void test_fake_cuda_device_attributes_all_filled(void **state)
{
	int attrs[] = {
		CU_POINTER_ATTRIBUTE_CONTEXT,
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
		CU_POINTER_ATTRIBUTE_HOST_POINTER,
		CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
		CU_POINTER_ATTRIBUTE_BUFFER_ID,
		CU_POINTER_ATTRIBUTE_IS_MANAGED,
		CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
		CU_POINTER_ATTRIBUTE_RANGE_SIZE,
		CU_POINTER_ATTRIBUTE_MAPPED,
		CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE,
		CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
	};
	CUcontext ctx = NULL;
	unsigned memtype = 0;
	CUdeviceptr dptr = 0, start = 0;
	void *hptr = NULL;
	int sync = -1, managed = -1, ordinal = -1, mapped = -1, gdr = -1;
	unsigned long long id = 0;
	size_t size = 0;
	CUmemoryPool pool = (CUmemoryPool)(uintptr_t)1;
	void *data[] = { &ctx, &memtype, &dptr, &hptr, &sync, &id, &managed,
			 &ordinal, &start, &size, &mapped, &gdr, &pool };
	CUdeviceptr p;

	(void)state;
	fake_cuda_reset(2);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	p = fake_cuda_alloc(FAKE_DEVICE, 3 * MiB + 5, 1);
	assert_true(p);
	assert_int_equal(cuPointerGetAttributes(13, attrs, data, p + 99),
			 CUDA_SUCCESS);
	assert_ptr_equal(ctx, fake_cuda_ctx(1));
	assert_non_null(ctx);
	assert_ptr_not_equal(fake_cuda_ctx(0), fake_cuda_ctx(1));
	assert_int_equal(memtype, CU_MEMORYTYPE_DEVICE);
	assert_int_equal(dptr, p + 99);
	assert_ptr_equal(hptr, (void *)(uintptr_t)(p + 99));
	assert_int_equal(sync, 0);
	assert_int_equal(id, fake_cuda_buffer_id(p));
	assert_int_equal(managed, 0);
	assert_int_equal(ordinal, 1);
	assert_int_equal(start, p);
	assert_int_equal(size, 3 * MiB + 5);
	assert_int_equal(mapped, 1);
	assert_int_equal(gdr, 1);
	assert_null(pool);
}

static void test_fake_cuda_unknown_attribute_invalid_value(void **state)
{
	int attrs[] = { CU_POINTER_ATTRIBUTE_BUFFER_ID, 5 };
	unsigned long long id = 0, other = 0;
	void *data[] = { &id, &other };
	CUdeviceptr p;
	int one = 1;

	(void)state;
	p = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	assert_int_equal(cuPointerGetAttributes(2, attrs, data, p),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuPointerGetAttribute(&id, 99, p),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuPointerGetAttribute(NULL,
			 CU_POINTER_ATTRIBUTE_BUFFER_ID, p),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuPointerSetAttribute(&one,
			 CU_POINTER_ATTRIBUTE_BUFFER_ID, p),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuPointerGetAttributes(0, attrs, data, p),
			 CUDA_ERROR_INVALID_VALUE);
}

static void test_fake_cuda_sync_memops_counted(void **state)
{
	CUdeviceptr p;
	int one = 1;

	(void)state;
	p = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	assert_int_equal(fake_cuda_sync_memops_count(p), 0);
	assert_int_equal(attr_int(p, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS), 0);
	assert_int_equal(cuPointerSetAttribute(&one,
			 CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p + 100),
			 CUDA_SUCCESS);
	assert_int_equal(cuPointerSetAttribute(&one,
			 CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p), CUDA_SUCCESS);
	assert_int_equal(fake_cuda_sync_memops_count(p + 7), 2);
	assert_int_equal(attr_int(p, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS), 1);
	assert_int_equal(fake_cuda_sync_memops_count(0x1000), -1);
}

static void test_fake_cuda_vmm_sync_memops_not_supported(void **state)
{
	CUmemGenericAllocationHandle h = 0, h2 = 0;
	CUdeviceptr p, d;
	int one = 1;

	(void)state;
	p = fake_cuda_alloc(FAKE_VMM, 3 * MiB, 0);
	assert_true(p);
	assert_int_equal(p % FAKE_CUDA_VMM_GRANULARITY, 0);
	assert_int_equal(range_size_of(p), 4 * MiB);
	assert_int_equal(attr_int(p, CU_POINTER_ATTRIBUTE_MEMORY_TYPE),
			 CU_MEMORYTYPE_DEVICE);
	assert_true(fake_cuda_buffer_id(p) >= 900);
	assert_null(attr_ptr(p, CU_POINTER_ATTRIBUTE_CONTEXT));
	assert_int_equal(cuPointerSetAttribute(&one,
			 CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p), 801);
	assert_int_equal(fake_cuda_sync_memops_count(p), 0);

	assert_int_equal(cuMemRetainAllocationHandle(&h,
			 (void *)(uintptr_t)(p + MiB)), CUDA_SUCCESS);
	assert_int_equal(cuMemRetainAllocationHandle(&h2,
			 (void *)(uintptr_t)p), CUDA_SUCCESS);
	assert_true(h != 0);
	assert_int_equal(h, h2);
	assert_int_equal(fake_cuda_retained_handles(), 2);
	assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
	assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
	assert_int_equal(fake_cuda_retained_handles(), 0);
	assert_int_equal(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);

	d = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	assert_int_equal(cuMemRetainAllocationHandle(&h,
			 (void *)(uintptr_t)d), CUDA_ERROR_INVALID_VALUE);
}

static void test_fake_cuda_pool_handle_non_null_no_context(void **state)
{
	CUdeviceptr p, q, d;

	(void)state;
	p = fake_cuda_alloc(FAKE_POOL, MiB, 0);
	q = fake_cuda_alloc(FAKE_POOL, 256, 0);
	d = fake_cuda_alloc(FAKE_DEVICE, 256, 0);
	assert_true(p && q && d);
	assert_non_null(fake_cuda_pool(0));
	assert_ptr_equal(attr_ptr(p, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE),
			 fake_cuda_pool(0));
	assert_ptr_equal(attr_ptr(q, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE),
			 fake_cuda_pool(0));
	assert_null(attr_ptr(p, CU_POINTER_ATTRIBUTE_CONTEXT));
	assert_int_equal(attr_int(p, CU_POINTER_ATTRIBUTE_MEMORY_TYPE),
			 CU_MEMORYTYPE_DEVICE);
	/* Pool and cuMemAlloc blocks do not share a page. */
	assert_int_not_equal(q / GDRC_GPU_PAGE_SIZE, d / GDRC_GPU_PAGE_SIZE);
	assert_null(attr_ptr(d, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE));
	assert_ptr_equal(attr_ptr(d, CU_POINTER_ATTRIBUTE_CONTEXT),
			 fake_cuda_ctx(0));
}

static void test_fake_cuda_managed_is_managed_one(void **state)
{
	CUdeviceptr p;

	(void)state;
	p = fake_cuda_alloc(FAKE_MANAGED, MiB, 0);
	assert_true(p);
	assert_int_equal(attr_int(p, CU_POINTER_ATTRIBUTE_MEMORY_TYPE),
			 CU_MEMORYTYPE_DEVICE);
	assert_int_equal(attr_int(p, CU_POINTER_ATTRIBUTE_IS_MANAGED), 1);
	assert_int_equal(attr_int(p,
			 CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE), 0);
	assert_true(fake_cuda_buffer_id(p) >= 900);
}

static void test_fake_cuda_host_pinned_memtype_host_writable(void **state)
{
	CUdeviceptr p, q;
	char *h;

	(void)state;
	p = fake_cuda_alloc(FAKE_HOST_PINNED, 10000, 0);
	assert_true(p);
	assert_int_equal(p % 4096, 0);
	h = (char *)(uintptr_t)p;
	memset(h, 0xab, 10000);
	assert_int_equal(h[9999], (char)0xab);
	assert_int_equal(attr_int(p + 10, CU_POINTER_ATTRIBUTE_MEMORY_TYPE),
			 CU_MEMORYTYPE_HOST);
	assert_true(fake_cuda_buffer_id(p + 9999) >= 900);
	assert_int_equal(range_size_of(p), 10000);
	assert_int_equal(attr_int(p, CU_POINTER_ATTRIBUTE_IS_MANAGED), 0);
	assert_int_equal(fake_cuda_free(p), 0);
	assert_int_equal(fake_cuda_buffer_id(p), 0);

	/* Forced at a free host address. */
	q = fake_cuda_alloc(FAKE_HOST_PINNED, 4096, 0);
	assert_true(q);
	assert_int_equal(fake_cuda_free(q), 0);
	assert_int_equal(fake_cuda_alloc_at(FAKE_HOST_PINNED, 4096, 0, q), q);
	((char *)(uintptr_t)q)[0] = 1;
	assert_int_equal(fake_cuda_alloc_at(FAKE_HOST_PINNED, 4096, 0, q), 0);
	assert_int_equal(fake_cuda_alloc_at(FAKE_HOST_PINNED, 4096, 0, q + 1),
			 0);
}

/* ====================================================================
 * VMM reservations, and the context rules of the range queries
 * ==================================================================== */

/* The probe's layout: in a 16 MiB reservation A 4 MiB at 0, B 4 MiB at
 * 4 MiB (on device dev_b), C 2 MiB at 8 MiB, a hole from 10 MiB. */
struct layout {
	CUdeviceptr r, a, b, c, hole;
};

static struct layout make_layout(int dev_b)
{
	struct layout l;

	l.r = fake_cuda_vmm_reserve(16 * MiB);
	assert_true(l.r);
	l.a = l.r;
	l.b = l.r + 4 * MiB;
	l.c = l.r + 8 * MiB;
	l.hole = l.r + 10 * MiB;
	assert_int_equal(fake_cuda_vmm_map(l.a, 4 * MiB, 0), 0);
	assert_int_equal(fake_cuda_vmm_map(l.b, 4 * MiB, dev_b), 0);
	assert_int_equal(fake_cuda_vmm_map(l.c, 2 * MiB, 0), 0);
	return l;
}

/* Export [p, p + size) in the current context; a returned fd is closed. */
static CUresult export_range(CUdeviceptr p, size_t size)
{
	int fd = -1;
	CUresult rc;

	rc = cuMemGetHandleForAddressRange(&fd, p, size,
					   CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
					   0);
	if (rc == CUDA_SUCCESS) {
		assert_true(fd >= 0);
		close(fd);
	} else {
		assert_int_equal(fd, -1);
	}
	return rc;
}

/* Every attribute the probe printed, of one address. */
struct vmm_attrs {
	CUcontext ctx;
	unsigned memtype;
	unsigned long long id;
	CUdeviceptr start;
	size_t size;
	int ordinal, ipc, mapped, managed;
	CUmemoryPool pool;
};

static struct vmm_attrs vmm_attrs_of(CUdeviceptr p)
{
	int attrs[] = {
		CU_POINTER_ATTRIBUTE_CONTEXT,
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		CU_POINTER_ATTRIBUTE_BUFFER_ID,
		CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
		CU_POINTER_ATTRIBUTE_RANGE_SIZE,
		CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
		CU_POINTER_ATTRIBUTE_MAPPED,
		CU_POINTER_ATTRIBUTE_IS_MANAGED,
		CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
	};
	struct vmm_attrs v = {
		.ctx = fake_cuda_ctx(0), .memtype = 77, .id = 77, .start = 77,
		.size = 77, .ordinal = 77, .ipc = 77, .mapped = 77,
		.managed = 77, .pool = fake_cuda_pool(0),
	};
	void *data[] = { &v.ctx, &v.memtype, &v.id, &v.start, &v.size,
			 &v.ordinal, &v.ipc, &v.mapped, &v.managed, &v.pool };

	assert_int_equal(cuPointerGetAttributes(10, attrs, data, p),
			 CUDA_SUCCESS);
	return v;
}

static void test_fake_cuda_vmm_mapping_attrs_range_is_reservation(void **state)
{
	struct {
		CUdeviceptr p, base;
		int device;
	} at[4];
	unsigned long long ids[4];
	struct layout l;
	size_t i;
	CUresult rc;

	(void)state;
	fake_cuda_reset(2);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	l = make_layout(1);
	at[0].p = l.a;
	at[1].p = l.a + 4 * MiB - 1;
	at[2].p = l.b + 2 * MiB;
	at[3].p = l.c;
	at[0].base = at[1].base = l.a;
	at[2].base = l.b;
	at[3].base = l.c;
	at[0].device = at[1].device = at[3].device = 0;
	at[2].device = 1;
	for (i = 0; i < 4; i++) {
		struct vmm_attrs v = vmm_attrs_of(at[i].p);

		assert_null(v.ctx);
		assert_int_equal(v.memtype, CU_MEMORYTYPE_DEVICE);
		assert_true(v.id >= FAKE_CUDA_FIRST_BUFFER_ID);
		assert_int_equal(v.id, fake_cuda_buffer_id(at[i].p));
		assert_int_equal(v.id, fake_cuda_buffer_id(at[i].base));
		assert_int_equal(buffer_id_of(at[i].p, &rc), v.id);
		assert_int_equal(rc, CUDA_SUCCESS);
		/* The whole reservation, holes and other mappings in it. */
		assert_int_equal(v.start, l.r);
		assert_int_equal(v.size, 16 * MiB);
		assert_int_equal(v.ordinal, at[i].device);
		assert_int_equal(v.ipc, 0);
		assert_int_equal(v.mapped, 1);
		assert_int_equal(v.managed, 0);
		assert_null(v.pool);
		ids[i] = v.id;
	}
	/* One BUFFER_ID per mapping. */
	assert_int_equal(ids[0], ids[1]);
	assert_int_not_equal(ids[0], ids[2]);
	assert_int_not_equal(ids[0], ids[3]);
	assert_int_not_equal(ids[2], ids[3]);
	assert_int_equal(attr_ptr(l.c + MiB,
				  CU_POINTER_ATTRIBUTE_RANGE_START_ADDR),
			 (void *)(uintptr_t)l.r);
	assert_int_equal(range_size_of(l.b), 16 * MiB);
}

static void test_fake_cuda_vmm_hole_attrs_reservation_no_device(void **state)
{
	CUmemGenericAllocationHandle h = 0;
	CUdeviceptr base = 1;
	struct vmm_attrs v;
	struct layout l;
	size_t size = 1;
	CUresult rc;
	int one = 1;

	(void)state;
	l = make_layout(0);
	v = vmm_attrs_of(l.hole);
	assert_null(v.ctx);
	assert_int_equal(v.memtype, 0);
	assert_int_equal(v.id, 0);
	assert_int_equal(v.start, l.r);
	assert_int_equal(v.size, 16 * MiB);
	assert_int_equal(v.ordinal, -2);
	assert_int_equal(v.ipc, 0);
	assert_int_equal(v.mapped, 0);
	assert_int_equal(v.managed, 0);
	assert_null(v.pool);
	assert_int_equal(vmm_attrs_of(l.r + 16 * MiB - 1).size, 16 * MiB);

	assert_int_equal(fake_cuda_buffer_id(l.hole), 0);
	buffer_id_of(l.hole, &rc);
	assert_int_equal(rc, CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemRetainAllocationHandle(&h,
			 (void *)(uintptr_t)l.hole), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(fake_cuda_retained_handles(), 0);
	assert_int_equal(cuPointerSetAttribute(&one,
			 CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, l.hole),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(fake_cuda_sync_memops_count(l.hole), -1);

	push_ctx(0);
	assert_int_equal(cuMemGetAddressRange_v2(&base, &size, l.hole),
			 CUDA_ERROR_NOT_FOUND);
	assert_int_equal(base, 1);
	assert_int_equal(size, 1);
	pop_ctx();
}

static void test_fake_cuda_vmm_address_range_is_the_mapping(void **state)
{
	CUdeviceptr base = 0, p;
	struct layout l;
	size_t size = 0;

	(void)state;
	fake_cuda_reset(2);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	l = make_layout(1);
	p = fake_cuda_alloc(FAKE_VMM, 3 * MiB, 0);
	assert_true(p);
	/* Any current context will do, even another device's. */
	push_ctx(0);
	assert_int_equal(cuMemGetAddressRange_v2(&base, &size, l.a + MiB),
			 CUDA_SUCCESS);
	assert_int_equal(base, l.a);
	assert_int_equal(size, 4 * MiB);
	assert_int_equal(cuMemGetAddressRange_v2(&base, &size,
			 l.b + 4 * MiB - 1), CUDA_SUCCESS);
	assert_int_equal(base, l.b);
	assert_int_equal(size, 4 * MiB);
	assert_int_equal(cuMemGetAddressRange_v2(&base, &size, l.c),
			 CUDA_SUCCESS);
	assert_int_equal(base, l.c);
	assert_int_equal(size, 2 * MiB);
	assert_int_equal(cuMemGetAddressRange_v2(NULL, &size, l.c + MiB),
			 CUDA_SUCCESS);
	assert_int_equal(size, 2 * MiB);
	/* A reservation of fake_cuda_alloc's own: the mapping is all of it. */
	assert_int_equal(cuMemGetAddressRange_v2(&base, &size, p + MiB),
			 CUDA_SUCCESS);
	assert_int_equal(base, p);
	assert_int_equal(size, 4 * MiB);
	assert_int_equal(cuMemGetAddressRange_v2(&base, &size,
			 l.r + 16 * MiB - 1), CUDA_ERROR_NOT_FOUND);
	assert_int_equal(cuMemGetAddressRange_v2(&base, &size, 0x1000),
			 CUDA_ERROR_NOT_FOUND);
	pop_ctx();
}

static void test_fake_cuda_address_range_needs_a_context(void **state)
{
	static const enum fake_cuda_kind kinds[] = {
		FAKE_DEVICE, FAKE_POOL, FAKE_VMM, FAKE_MANAGED,
		FAKE_HOST_PINNED,
	};
	CUdeviceptr p[6], base;
	struct layout l;
	size_t i, size;

	(void)state;
	for (i = 0; i < 5; i++) {
		p[i] = fake_cuda_alloc(kinds[i], MiB, 0);
		assert_true(p[i]);
	}
	l = make_layout(0);
	p[5] = l.b + MiB;
	for (i = 0; i < 6; i++) {
		base = 1;
		size = 1;
		assert_int_equal(cuMemGetAddressRange_v2(&base, &size, p[i]),
				 CUDA_ERROR_INVALID_CONTEXT);
		assert_int_equal(base, 1);
		assert_int_equal(size, 1);
	}
	/* Ahead of NOT_FOUND too. */
	assert_int_equal(cuMemGetAddressRange_v2(&base, &size, l.hole),
			 CUDA_ERROR_INVALID_CONTEXT);
	push_ctx(0);
	for (i = 0; i < 6; i++)
		assert_int_equal(cuMemGetAddressRange_v2(&base, &size, p[i]),
				 CUDA_SUCCESS);
	pop_ctx();
	assert_int_equal(cuMemGetAddressRange_v2(&base, &size, p[0]),
			 CUDA_ERROR_INVALID_CONTEXT);
}

static void test_fake_cuda_export_needs_a_context(void **state)
{
	CUdeviceptr d, pool;
	struct layout l;

	(void)state;
	l = make_layout(0);
	d = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	pool = fake_cuda_alloc(FAKE_POOL, MiB, 0);
	assert_true(d && pool);
	assert_int_equal(export_range(l.a, 4 * MiB),
			 CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(export_range(d, MiB), CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(export_range(pool, MiB), CUDA_ERROR_INVALID_CONTEXT);
	push_ctx(0);
	assert_int_equal(export_range(l.a, 4 * MiB), CUDA_SUCCESS);
	assert_int_equal(export_range(d, MiB), CUDA_SUCCESS);
	assert_int_equal(export_range(pool, MiB), CUDA_SUCCESS);
	pop_ctx();
	assert_int_equal(export_range(d, MiB), CUDA_ERROR_INVALID_CONTEXT);
}

static void test_fake_cuda_vmm_export_over_mappings_not_holes(void **state)
{
	CUdeviceptr p, q, d;
	struct layout l;

	(void)state;
	l = make_layout(0);
	push_ctx(0);
	/* The probe's exports, with its results. */
	assert_int_equal(export_range(l.a, 4 * MiB), CUDA_SUCCESS);
	assert_int_equal(export_range(l.a, 10 * MiB), CUDA_SUCCESS);
	assert_int_equal(export_range(l.b, 6 * MiB), CUDA_SUCCESS);
	assert_int_equal(export_range(l.a + 2 * MiB, 4 * MiB), CUDA_SUCCESS);
	assert_int_equal(export_range(l.a, 12 * MiB),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(export_range(l.a + 64 * KiB, 64 * KiB),
			 CUDA_SUCCESS);
	/* Into or from a hole, past the reservation, or unaligned. */
	assert_int_equal(export_range(l.c, 4 * MiB),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(export_range(l.hole, 2 * MiB),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(export_range(l.a, 17 * MiB),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(export_range(l.a + 100, 4096),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(export_range(l.a, 100), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(export_range(l.a, 0), CUDA_ERROR_INVALID_VALUE);
	/* A hole made by an unmap splits what was one range. */
	assert_int_equal(cuMemUnmap(l.b, 4 * MiB), CUDA_SUCCESS);
	assert_int_equal(export_range(l.a, 10 * MiB),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(export_range(l.a, 4 * MiB), CUDA_SUCCESS);
	assert_int_equal(export_range(l.c, 2 * MiB), CUDA_SUCCESS);

	/* Adjacent mappings of two reservations are not one range. */
	p = fake_cuda_alloc(FAKE_VMM, 2 * MiB, 0);
	q = fake_cuda_alloc(FAKE_VMM, 2 * MiB, 0);
	assert_int_equal(q, p + 2 * MiB);
	assert_int_equal(export_range(p, 2 * MiB), CUDA_SUCCESS);
	assert_int_equal(export_range(p, 4 * MiB), CUDA_ERROR_INVALID_VALUE);

	/* Other kinds: inside one allocation, as before. */
	d = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	assert_int_equal(export_range(d + 4096, MiB - 4096), CUDA_SUCCESS);
	assert_int_equal(export_range(d, 2 * MiB), CUDA_ERROR_INVALID_VALUE);
	pop_ctx();
}

static void test_fake_cuda_export_other_device_context_refused(void **state)
{
	CUdeviceptr d, pool;
	struct layout l;

	(void)state;
	fake_cuda_reset(2);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	d = fake_cuda_alloc(FAKE_DEVICE, MiB, 1);
	pool = fake_cuda_alloc(FAKE_POOL, MiB, 1);
	assert_true(d && pool);
	l = make_layout(1);	/* A and C on device 0, B on device 1 */

	push_ctx(0);
	assert_int_equal(export_range(d, MiB), CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(export_range(pool, MiB), CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(export_range(l.a, 4 * MiB), CUDA_SUCCESS);
	assert_int_equal(export_range(l.c, 2 * MiB), CUDA_SUCCESS);
	assert_int_equal(export_range(l.b, 4 * MiB),
			 CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(export_range(l.a, 8 * MiB),
			 CUDA_ERROR_INVALID_CONTEXT);
	/* A bad range says so first. */
	assert_int_equal(export_range(l.a, 12 * MiB),
			 CUDA_ERROR_INVALID_VALUE);
	pop_ctx();

	push_ctx(1);
	assert_int_equal(export_range(d, MiB), CUDA_SUCCESS);
	assert_int_equal(export_range(pool, MiB), CUDA_SUCCESS);
	assert_int_equal(export_range(l.b, 4 * MiB), CUDA_SUCCESS);
	assert_int_equal(export_range(l.a, 4 * MiB),
			 CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(export_range(l.b, 6 * MiB),
			 CUDA_ERROR_INVALID_CONTEXT);
	pop_ctx();
}

static void test_fake_cuda_vmm_unmap_partial_refused(void **state)
{
	unsigned long long ida, idb, idc;
	CUdeviceptr d;
	struct layout l;

	(void)state;
	l = make_layout(0);
	ida = fake_cuda_buffer_id(l.a);
	idb = fake_cuda_buffer_id(l.b);
	idc = fake_cuda_buffer_id(l.c);
	d = fake_cuda_alloc(FAKE_DEVICE, 4 * MiB, 0);
	assert_true(d);

	/* Part of a mapping, alone or with whole ones. */
	assert_int_equal(cuMemUnmap(l.a, 2 * MiB), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemUnmap(l.a + 2 * MiB, 2 * MiB),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemUnmap(l.a + 2 * MiB, 4 * MiB),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemUnmap(l.a, 6 * MiB), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemUnmap(l.b + 2 * MiB, 8 * MiB),
			 CUDA_ERROR_INVALID_VALUE);
	/* No mapping at all, nothing, or not in the reservation. */
	assert_int_equal(cuMemUnmap(l.hole, 6 * MiB),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemUnmap(l.a, 0), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemUnmap(l.a, 17 * MiB), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemUnmap(0x1000, 2 * MiB),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemUnmap(d, 4 * MiB), CUDA_ERROR_INVALID_VALUE);
	/* Nor is a mapping freed as device memory. */
	assert_int_equal(cuMemFree_v2(l.a), CUDA_ERROR_INVALID_VALUE);

	assert_int_equal(fake_cuda_buffer_id(l.a), ida);
	assert_int_equal(fake_cuda_buffer_id(l.a + 2 * MiB), ida);
	assert_int_equal(fake_cuda_buffer_id(l.b), idb);
	assert_int_equal(fake_cuda_buffer_id(l.c), idc);
	assert_true(fake_cuda_buffer_id(d) != 0);
	assert_int_equal(fake_cuda_calls("cuMemUnmap"), 10);
}

static void test_fake_cuda_vmm_unmap_several_whole_mappings(void **state)
{
	unsigned long long ida;
	struct layout l;

	(void)state;
	l = make_layout(0);
	ida = fake_cuda_buffer_id(l.a);
	/* B and C in one call. */
	assert_int_equal(cuMemUnmap(l.b, 6 * MiB), CUDA_SUCCESS);
	assert_int_equal(fake_cuda_buffer_id(l.b), 0);
	assert_int_equal(fake_cuda_buffer_id(l.c), 0);
	assert_int_equal(vmm_attrs_of(l.c).mapped, 0);
	assert_int_equal(vmm_attrs_of(l.b).ordinal, -2);
	assert_int_equal(fake_cuda_buffer_id(l.a), ida);
	assert_int_equal(vmm_attrs_of(l.a).size, 16 * MiB);

	/* A and C with the hole of B between, and holes at both ends. */
	assert_int_equal(fake_cuda_vmm_map(l.c, 2 * MiB, 0), 0);
	assert_int_equal(cuMemUnmap(l.r, 16 * MiB), CUDA_SUCCESS);
	assert_int_equal(fake_cuda_buffer_id(l.a), 0);
	assert_int_equal(fake_cuda_buffer_id(l.c), 0);
	assert_int_equal(vmm_attrs_of(l.a).size, 16 * MiB);
	/* Nothing left to unmap. */
	assert_int_equal(cuMemUnmap(l.r, 16 * MiB), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(fake_cuda_vmm_unreserve(l.r), 0);
}

static void test_fake_cuda_vmm_remap_same_va_new_buffer_id(void **state)
{
	CUmemGenericAllocationHandle h1 = 0, h2 = 0;
	unsigned long long id1, id2;
	CUdeviceptr r;

	(void)state;
	r = fake_cuda_vmm_reserve(4 * MiB);
	assert_true(r);
	assert_int_equal(fake_cuda_vmm_map(r, 4 * MiB, 0), 0);
	id1 = fake_cuda_buffer_id(r);
	assert_true(id1 >= FAKE_CUDA_FIRST_BUFFER_ID);
	assert_int_equal(cuMemRetainAllocationHandle(&h1,
			 (void *)(uintptr_t)(r + MiB)), CUDA_SUCCESS);
	assert_int_equal(fake_cuda_retained_handles(), 1);

	assert_int_equal(cuMemUnmap(r, 4 * MiB), CUDA_SUCCESS);
	assert_int_equal(fake_cuda_buffer_id(r), 0);
	assert_int_equal(fake_cuda_vmm_map(r, 4 * MiB, 0), 0);
	id2 = fake_cuda_buffer_id(r);
	assert_true(id2 > id1);
	assert_int_equal(attr_int(r, CU_POINTER_ATTRIBUTE_MAPPED), 1);

	/* A new physical allocation, so a new handle; the reference on
	 * the old one still has to be released. */
	assert_int_equal(cuMemRetainAllocationHandle(&h2,
			 (void *)(uintptr_t)r), CUDA_SUCCESS);
	assert_true(h2 != 0 && h2 != h1);
	assert_int_equal(fake_cuda_retained_handles(), 2);
	assert_int_equal(cuMemRelease(h1), CUDA_SUCCESS);
	assert_int_equal(cuMemRelease(h2), CUDA_SUCCESS);
	assert_int_equal(fake_cuda_retained_handles(), 0);
	assert_int_equal(cuPointerSetAttribute(&(int){ 1 },
			 CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, r),
			 CUDA_ERROR_NOT_SUPPORTED);
}

static void test_fake_cuda_vmm_reserve_map_unreserve_rules(void **state)
{
	CUdeviceptr r, r2, d, s, v;
	unsigned memtype = 77;
	size_t size = 77;
	int attrs[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
			CU_POINTER_ATTRIBUTE_RANGE_SIZE };
	void *data[] = { &memtype, &size };

	(void)state;
	assert_int_equal(fake_cuda_vmm_reserve(0), 0);
	assert_int_equal(fake_cuda_vmm_reserve(MiB), 0);
	assert_int_equal(fake_cuda_vmm_reserve(3 * MiB), 0);
	assert_int_equal(fake_cuda_vmm_reserve(FAKE_CUDA_VA_SIZE * 2), 0);
	r = fake_cuda_vmm_reserve(8 * MiB);
	r2 = fake_cuda_vmm_reserve(4 * MiB);
	assert_true(r && r2);
	assert_int_equal(r % FAKE_CUDA_VMM_GRANULARITY, 0);
	assert_int_equal(r2 % FAKE_CUDA_VMM_GRANULARITY, 0);
	assert_true(r2 >= r + 8 * MiB || r2 + 4 * MiB <= r);

	/* Nothing else lands in a reservation, hole as it is. */
	d = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	s = fake_cuda_alloc(FAKE_DEVICE, 256, 0);
	v = fake_cuda_alloc(FAKE_VMM, 2 * MiB, 0);
	assert_true(d && s && v);
	assert_true(d >= r + 8 * MiB || d + MiB <= r);
	assert_true(s >= r + 8 * MiB || s < r);
	assert_true(v >= r + 8 * MiB || v + 2 * MiB <= r);
	assert_true(d >= r2 + 4 * MiB || d + MiB <= r2);
	assert_int_equal(fake_cuda_alloc_at(FAKE_DEVICE, MiB, 0, r + 2 * MiB),
			 0);
	assert_int_equal(fake_cuda_alloc_at(FAKE_DEVICE, 256, 0, r + 6 * MiB),
			 0);
	assert_int_equal(fake_cuda_alloc_at(FAKE_VMM, 2 * MiB, 0, r), 0);
	assert_int_equal(fake_cuda_alloc_at(FAKE_MANAGED, 4 * MiB, 0,
					    r - 2 * MiB), 0);

	/* Mapping: aligned, inside one reservation, over no mapping. */
	assert_int_equal(fake_cuda_vmm_map(r + MiB, 2 * MiB, 0), -1);
	assert_int_equal(fake_cuda_vmm_map(r, 3 * MiB, 0), -1);
	assert_int_equal(fake_cuda_vmm_map(r, 0, 0), -1);
	assert_int_equal(fake_cuda_vmm_map(r + 6 * MiB, 4 * MiB, 0), -1);
	assert_int_equal(fake_cuda_vmm_map(r, 2 * MiB, 1), -1);
	assert_int_equal(fake_cuda_vmm_map(r, 2 * MiB, -1), -1);
	assert_int_equal(fake_cuda_vmm_map(v, 2 * MiB, 0), -1);
	assert_int_equal(fake_cuda_vmm_map(0, 2 * MiB, 0), -1);
	assert_int_equal(fake_cuda_vmm_map(r2 + 8 * MiB, 2 * MiB, 0), -1);
	assert_int_equal(fake_cuda_vmm_map(r, 8 * MiB, 0), 0);
	assert_int_equal(fake_cuda_vmm_map(r + 2 * MiB, 2 * MiB, 0), -1);
	assert_int_equal(fake_cuda_vmm_map(r2 + 2 * MiB, 2 * MiB, 0), 0);

	/* Unreserving: at the start, with nothing mapped. */
	assert_int_equal(fake_cuda_vmm_unreserve(r + 2 * MiB), -1);
	assert_int_equal(fake_cuda_vmm_unreserve(r), -1);
	assert_int_equal(fake_cuda_vmm_unreserve(r2), -1);
	assert_int_equal(fake_cuda_vmm_unreserve(v), -1);
	assert_int_equal(fake_cuda_vmm_unreserve(d), -1);
	assert_int_equal(fake_cuda_vmm_unreserve(0), -1);
	assert_int_equal(cuMemUnmap(r, 8 * MiB), CUDA_SUCCESS);
	assert_int_equal(fake_cuda_vmm_unreserve(r), 0);
	assert_int_equal(fake_cuda_vmm_unreserve(r), -1);
	assert_int_equal(cuMemUnmap(r2 + 2 * MiB, 2 * MiB), CUDA_SUCCESS);
	assert_int_equal(fake_cuda_vmm_unreserve(r2), 0);

	/* Gone: an unknown address, and its VA free for others. */
	assert_int_equal(cuPointerGetAttributes(2, attrs, data, r + MiB),
			 CUDA_SUCCESS);
	assert_int_equal(memtype, 0);
	assert_int_equal(size, 0);
	assert_int_equal(fake_cuda_alloc_at(FAKE_DEVICE, MiB, 0, r + 2 * MiB),
			 r + 2 * MiB);
}

static void test_fake_cuda_vmm_alloc_is_its_own_reservation(void **state)
{
	unsigned long long id;
	CUdeviceptr p, r;

	(void)state;
	p = fake_cuda_alloc(FAKE_VMM, 3 * MiB, 0);
	assert_true(p);
	id = fake_cuda_buffer_id(p);
	assert_int_equal(vmm_attrs_of(p + MiB).start, p);
	assert_int_equal(vmm_attrs_of(p + MiB).size, 4 * MiB);
	assert_int_equal(cuMemUnmap(p, 2 * MiB), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(fake_cuda_buffer_id(p), id);
	/* Unmapped, it goes whole: no hole left behind. */
	assert_int_equal(cuMemUnmap(p, 4 * MiB), CUDA_SUCCESS);
	assert_int_equal(vmm_attrs_of(p).size, 0);
	assert_int_equal(vmm_attrs_of(p).memtype, 0);
	assert_int_equal(fake_cuda_alloc(FAKE_VMM, 3 * MiB, 0), p);
	assert_true(fake_cuda_buffer_id(p) > id);
	assert_int_equal(fake_cuda_free(p), 0);
	assert_int_equal(fake_cuda_buffer_id(p), 0);

	/* fake_cuda_free of a mapping in a reservation: the reservation
	 * stays. */
	r = fake_cuda_vmm_reserve(4 * MiB);
	assert_int_equal(fake_cuda_vmm_map(r, 4 * MiB, 0), 0);
	assert_int_equal(fake_cuda_free(r + 2 * MiB), -1);
	assert_int_equal(fake_cuda_free(r), 0);
	assert_int_equal(fake_cuda_buffer_id(r), 0);
	assert_int_equal(vmm_attrs_of(r).size, 4 * MiB);
	assert_int_equal(fake_cuda_free(r), -1);
	assert_int_equal(fake_cuda_vmm_unreserve(r), 0);
}

static void test_fake_cuda_vmm_reset_drops_reservations(void **state)
{
	CUdeviceptr r;

	(void)state;
	r = fake_cuda_vmm_reserve(4 * MiB);
	assert_int_equal(fake_cuda_vmm_map(r, 2 * MiB, 0), 0);
	fake_cuda_reset(1);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	assert_int_equal(fake_cuda_buffer_id(r), 0);
	assert_int_equal(vmm_attrs_of(r + 2 * MiB).size, 0);
	assert_int_equal(fake_cuda_vmm_unreserve(r), -1);
	assert_int_equal(fake_cuda_vmm_map(r + 2 * MiB, 2 * MiB, 0), -1);
	/* The VA range starts over. */
	assert_int_equal(fake_cuda_vmm_reserve(4 * MiB), r);
}

/* ====================================================================
 * Failure injection and call counts
 * ==================================================================== */

static void test_fake_cuda_fail_injection_then_success(void **state)
{
	CUdeviceptr p;
	CUresult rc;
	int i;

	(void)state;
	p = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	fake_cuda_calls_reset();
	fake_cuda_fail("cuPointerGetAttribute", CUDA_ERROR_OUT_OF_MEMORY, 2);
	for (i = 0; i < 2; i++) {
		assert_int_equal(buffer_id_of(p, &rc), 0xdeadULL);
		assert_int_equal(rc, CUDA_ERROR_OUT_OF_MEMORY);
	}
	assert_int_equal(buffer_id_of(p, &rc), fake_cuda_buffer_id(p));
	assert_int_equal(rc, CUDA_SUCCESS);
	assert_int_equal(fake_cuda_calls("cuPointerGetAttribute"), 3);
	assert_int_equal(fake_cuda_calls("cuPointerGetAttributes"), 0);

	fake_cuda_fail("cuPointerGetAttribute", CUDA_ERROR_DEINITIALIZED, -1);
	for (i = 0; i < 5; i++) {
		buffer_id_of(p, &rc);
		assert_int_equal(rc, CUDA_ERROR_DEINITIALIZED);
	}
	fake_cuda_fail("cuPointerGetAttribute", CUDA_ERROR_DEINITIALIZED, 0);
	buffer_id_of(p, &rc);
	assert_int_equal(rc, CUDA_SUCCESS);
	assert_int_equal(fake_cuda_calls("cuPointerGetAttribute"), 9);

	fake_cuda_calls_reset();
	assert_int_equal(fake_cuda_calls("cuPointerGetAttribute"), 0);
}

static void test_fake_cuda_fail_injection_v2_alias(void **state)
{
	(void)state;
	fake_cuda_fail("cuCtxPushCurrent", CUDA_ERROR_INVALID_CONTEXT, 1);
	assert_int_equal(cuCtxPushCurrent_v2(fake_cuda_ctx(0)),
			 CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(cuCtxPushCurrent_v2(fake_cuda_ctx(0)), CUDA_SUCCESS);
	assert_int_equal(fake_cuda_calls("cuCtxPushCurrent_v2"), 2);
	assert_int_equal(fake_cuda_calls("cuCtxPushCurrent"), 2);
	assert_int_equal(cuCtxPopCurrent_v2(NULL), CUDA_SUCCESS);

	/* cuInit itself can be made to fail. */
	fake_cuda_reset(1);
	fake_cuda_fail("cuInit", CUDA_ERROR_NO_DEVICE, 1);
	assert_int_equal(cuInit(0), CUDA_ERROR_NO_DEVICE);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
}

/* ====================================================================
 * Contexts
 * ==================================================================== */

static void test_fake_cuda_ctx_flags_push_set_pop(void **state)
{
	CUcontext c = NULL;
	unsigned flags = 7;

	(void)state;
	fake_cuda_reset(2);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	assert_int_equal(cuCtxGetFlags(&flags), CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(cuCtxSetFlags(CU_CTX_SYNC_MEMOPS),
			 CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(cuCtxPopCurrent_v2(&c), CUDA_ERROR_INVALID_CONTEXT);

	assert_int_equal(cuCtxPushCurrent_v2(fake_cuda_ctx(0)), CUDA_SUCCESS);
	assert_int_equal(cuCtxGetFlags(&flags), CUDA_SUCCESS);
	assert_int_equal(flags, 0);
	assert_int_equal(cuCtxSetFlags(CU_CTX_SYNC_MEMOPS), CUDA_SUCCESS);
	assert_int_equal(fake_cuda_ctx_flags(0), CU_CTX_SYNC_MEMOPS);
	assert_int_equal(fake_cuda_ctx_flags(1), 0);

	assert_int_equal(cuCtxPushCurrent_v2(fake_cuda_ctx(1)), CUDA_SUCCESS);
	assert_int_equal(cuCtxGetFlags(&flags), CUDA_SUCCESS);
	assert_int_equal(flags, 0);
	assert_int_equal(cuCtxPopCurrent_v2(&c), CUDA_SUCCESS);
	assert_ptr_equal(c, fake_cuda_ctx(1));
	assert_int_equal(cuCtxGetFlags(&flags), CUDA_SUCCESS);
	assert_int_equal(flags, CU_CTX_SYNC_MEMOPS);
	assert_int_equal(cuCtxPopCurrent_v2(&c), CUDA_SUCCESS);
	assert_ptr_equal(c, fake_cuda_ctx(0));
	assert_int_equal(cuCtxPopCurrent_v2(&c), CUDA_ERROR_INVALID_CONTEXT);

	/* Only the contexts of present devices can be pushed. */
	assert_int_equal(cuCtxPushCurrent_v2(fake_cuda_ctx(2)),
			 CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(cuCtxPushCurrent_v2(NULL), CUDA_ERROR_INVALID_VALUE);

	/* A reset drops the flags and this thread's stack. */
	assert_int_equal(cuCtxPushCurrent_v2(fake_cuda_ctx(0)), CUDA_SUCCESS);
	fake_cuda_reset(1);
	assert_int_equal(fake_cuda_ctx_flags(0), 0);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	assert_int_equal(cuCtxPopCurrent_v2(&c), CUDA_ERROR_INVALID_CONTEXT);
}

static void *other_thread_flags(void *arg)
{
	unsigned flags;

	(void)arg;
	return (void *)(uintptr_t)cuCtxGetFlags(&flags);
}

static void test_fake_cuda_ctx_stack_per_thread(void **state)
{
	pthread_t t;
	void *ret;

	(void)state;
	assert_int_equal(cuCtxPushCurrent_v2(fake_cuda_ctx(0)), CUDA_SUCCESS);
	assert_int_equal(pthread_create(&t, NULL, other_thread_flags, NULL),
			 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_int_equal((uintptr_t)ret, CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(cuCtxPopCurrent_v2(NULL), CUDA_SUCCESS);
}

static void test_fake_cuda_ctx_get_device(void **state)
{
	CUdevice dev = 77;

	(void)state;
	fake_cuda_reset(2);
	assert_int_equal(cuCtxGetDevice(&dev), CUDA_ERROR_NOT_INITIALIZED);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	assert_int_equal(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(dev, 77);
	push_ctx(1);
	assert_int_equal(cuCtxGetDevice(&dev), CUDA_SUCCESS);
	assert_int_equal(dev, 1);
	assert_int_equal(cuCtxGetDevice(NULL), CUDA_ERROR_INVALID_VALUE);
	push_ctx(0);
	assert_int_equal(cuCtxGetDevice(&dev), CUDA_SUCCESS);
	assert_int_equal(dev, 0);
	pop_ctx();
	fake_cuda_fail("cuCtxGetDevice", CUDA_ERROR_DEINITIALIZED, 1);
	assert_int_equal(cuCtxGetDevice(&dev), CUDA_ERROR_DEINITIALIZED);
	assert_int_equal(dev, 0);
	assert_int_equal(cuCtxGetDevice(&dev), CUDA_SUCCESS);
	assert_int_equal(dev, 1);
	pop_ctx();
	assert_int_equal(fake_cuda_calls("cuCtxGetDevice"), 7);
}

/* ====================================================================
 * The free observer, fake_cuda_alloc_range
 * ==================================================================== */

#define MAX_FREED 16

/* What the observer heard, and what the fake said of it then. */
static struct {
	int n;
	CUdeviceptr base[MAX_FREED];
	size_t size[MAX_FREED];
	int found[MAX_FREED];	/* fake_cuda_alloc_range still finds it */
	int same[MAX_FREED];	/* ... and as the same allocation */
} heard;

static void observe_free(CUdeviceptr base, size_t size)
{
	CUdeviceptr b = 0;
	size_t sz = 0;
	int i = heard.n++;

	assert_true(i < MAX_FREED);
	heard.base[i] = base;
	heard.size[i] = size;
	/* The fake's mutex is not held: this would deadlock. */
	heard.found[i] = fake_cuda_alloc_range(base, &b, &sz, NULL) == 0 &&
			 fake_cuda_buffer_id(base) != 0;
	heard.same[i] = b == base && sz == size;
}

static void heard_one(int i, CUdeviceptr base, size_t size)
{
	assert_true(i < heard.n);
	assert_int_equal(heard.base[i], base);
	assert_int_equal(heard.size[i], size);
	assert_int_equal(heard.found[i], 1);
	assert_int_equal(heard.same[i], 1);
}

static int remove_observer(void **state)
{
	(void)state;
	fake_cuda_set_free_observer(NULL);
	return 0;
}

static void test_fake_cuda_free_observer_every_free_before(void **state)
{
	CUdeviceptr a, b, pool, host, vmm, dev, r;

	(void)state;
	memset(&heard, 0, sizeof(heard));
	a = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	b = fake_cuda_alloc(FAKE_DEVICE, 256, 0);
	pool = fake_cuda_alloc(FAKE_POOL, 3000, 0);
	host = fake_cuda_alloc(FAKE_HOST_PINNED, 5000, 0);
	vmm = fake_cuda_alloc(FAKE_VMM, 3 * MiB, 0);
	dev = fake_cuda_alloc(FAKE_MANAGED, MiB, 0);
	r = fake_cuda_vmm_reserve(8 * MiB);
	assert_true(a && b && pool && host && vmm && dev && r);
	assert_int_equal(fake_cuda_vmm_map(r, 2 * MiB, 0), 0);
	assert_int_equal(fake_cuda_vmm_map(r + 4 * MiB, 4 * MiB, 0), 0);
	fake_cuda_set_free_observer(observe_free);

	/* Refused frees tell nothing. */
	assert_int_equal(cuMemFree_v2(a + 512), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemFreeHost(P(host + 4096)),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemUnmap(r, MiB), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(fake_cuda_free(a + 1), -1);
	fake_cuda_fail("cuMemFree_v2", CUDA_ERROR_DEINITIALIZED, 1);
	assert_int_equal(cuMemFree_v2(a), CUDA_ERROR_DEINITIALIZED);
	assert_int_equal(heard.n, 0);

	assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
	heard_one(0, a, MiB);
	assert_int_equal(cuMemFreeAsync(b, NULL), CUDA_SUCCESS);
	heard_one(1, b, 256);
	assert_int_equal(cuMemFreeAsync_ptsz(pool, NULL), CUDA_SUCCESS);
	heard_one(2, pool, 3000);
	assert_int_equal(cuMemFreeHost(P(host)), CUDA_SUCCESS);
	heard_one(3, host, 5000);
	/* Once per mapping, the hole between told nothing. */
	assert_int_equal(cuMemUnmap(r, 8 * MiB), CUDA_SUCCESS);
	heard_one(4, r, 2 * MiB);
	heard_one(5, r + 4 * MiB, 4 * MiB);
	assert_int_equal(fake_cuda_free(vmm), 0);
	heard_one(6, vmm, 4 * MiB);	/* the mapping, granularity rounded */
	assert_int_equal(fake_cuda_free(dev), 0);
	heard_one(7, dev, MiB);
	assert_int_equal(heard.n, 8);
	assert_int_equal(fake_cuda_alloc_range(a, NULL, NULL, NULL), -1);
	assert_int_equal(fake_cuda_alloc_range(r + 4 * MiB, NULL, NULL, NULL),
			 -1);

	/* A reset keeps the observer and tells it nothing... */
	a = fake_cuda_alloc(FAKE_DEVICE, MiB, 1);
	fake_cuda_reset(2);
	assert_int_equal(heard.n, 8);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	a = fake_cuda_alloc(FAKE_DEVICE, MiB, 1);
	assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
	heard_one(8, a, MiB);
	/* ...and NULL removes it. */
	fake_cuda_set_free_observer(NULL);
	a = fake_cuda_alloc(FAKE_DEVICE, MiB, 1);
	assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
	assert_int_equal(heard.n, 9);
}

static void test_fake_cuda_alloc_range_allocation_or_mapping(void **state)
{
	CUdeviceptr p, s, host, base = 1;
	struct layout l;
	size_t size = 2;
	int device = 3;
	void *m;

	(void)state;
	/* No cuInit, no context. */
	fake_cuda_reset(2);
	p = fake_cuda_alloc(FAKE_DEVICE, MiB, 1);
	s = fake_cuda_alloc(FAKE_DEVICE, 256, 0);
	host = fake_cuda_alloc(FAKE_HOST_PINNED, 5000, 1);
	assert_true(p && s && host);
	assert_int_equal(fake_cuda_alloc_range(p + 12345, &base, &size,
					       &device), 0);
	assert_int_equal(base, p);
	assert_int_equal(size, MiB);
	assert_int_equal(device, 1);
	assert_int_equal(fake_cuda_alloc_range(s + 255, &base, &size,
					       &device), 0);
	assert_int_equal(base, s);
	assert_int_equal(size, 256);
	assert_int_equal(device, 0);
	/* Pinned host memory: device -1. */
	assert_int_equal(fake_cuda_alloc_range(host + 4999, &base, &size,
					       &device), 0);
	assert_int_equal(base, host);
	assert_int_equal(size, 5000);
	assert_int_equal(device, -1);

	/* None: the sub-allocation gap, malloc'd memory, freed memory; the
	 * outputs untouched. */
	base = 1;
	size = 2;
	device = 3;
	assert_int_equal(fake_cuda_alloc_range(s + 256, &base, &size,
					       &device), -1);
	m = malloc(64);
	assert_non_null(m);
	assert_int_equal(fake_cuda_alloc_range((uintptr_t)m, &base, &size,
					       &device), -1);
	free(m);
	assert_int_equal(fake_cuda_free(p), 0);
	assert_int_equal(fake_cuda_alloc_range(p, &base, &size, &device), -1);
	assert_int_equal(base, 1);
	assert_int_equal(size, 2);
	assert_int_equal(device, 3);

	/* VMM: the mapping, not the reservation; a hole is none. */
	l = make_layout(1);
	assert_int_equal(fake_cuda_alloc_range(l.b + 5, &base, &size,
					       &device), 0);
	assert_int_equal(base, l.b);
	assert_int_equal(size, 4 * MiB);
	assert_int_equal(device, 1);
	assert_int_equal(fake_cuda_alloc_range(l.c + 2 * MiB - 1, &base, NULL,
					       NULL), 0);
	assert_int_equal(base, l.c);
	assert_int_equal(fake_cuda_alloc_range(l.hole, &base, &size, &device),
			 -1);
}

/* ====================================================================
 * Reset, threads, dlopen
 * ==================================================================== */

static void test_fake_cuda_reset_drops_state_ids_rise(void **state)
{
	unsigned long long id;
	CUdeviceptr p, q;
	int n;

	(void)state;
	p = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	id = fake_cuda_buffer_id(p);
	fake_cuda_fail("cuDeviceGetCount", CUDA_ERROR_INVALID_VALUE, -1);
	fake_cuda_reset(1);
	assert_int_equal(fake_cuda_buffer_id(p), 0);
	assert_int_equal(fake_cuda_calls("cuDeviceGetCount"), 0);
	assert_int_equal(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	assert_int_equal(cuDeviceGetCount(&n), CUDA_SUCCESS);
	q = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	assert_int_equal(q, p);		/* the VA range starts over */
	assert_true(fake_cuda_buffer_id(q) > id);
}

#define NTHREADS 8
#define NITER 2000

static void *hammer(void *arg)
{
	int device = (int)(uintptr_t)arg % 2;
	int i;

	for (i = 0; i < NITER; i++) {
		size_t size = (i % 3 == 0) ? 256 : (size_t)(i % 7 + 1) * 64 * KiB;
		enum fake_cuda_kind kind = (enum fake_cuda_kind)(i % 4);
		unsigned long long id = 0;
		CUdeviceptr p = fake_cuda_alloc(kind, size, device);
		int attr = CU_POINTER_ATTRIBUTE_BUFFER_ID;
		void *data[] = { &id };

		if (!p)
			return (void *)1;
		if (cuPointerGetAttributes(1, &attr, data, p + size - 1) ||
		    id != fake_cuda_buffer_id(p))
			return (void *)2;
		if (cuCtxPushCurrent_v2(fake_cuda_ctx(device)) ||
		    cuCtxPopCurrent_v2(NULL))
			return (void *)3;
		if (fake_cuda_free(p))
			return (void *)4;
	}
	return NULL;
}

static void test_fake_cuda_threads_consistent(void **state)
{
	pthread_t t[NTHREADS];
	void *ret;
	int i;

	(void)state;
	fake_cuda_reset(2);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	for (i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, hammer,
						(void *)(uintptr_t)i), 0);
	for (i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_join(t[i], &ret), 0);
		assert_null(ret);
	}
	assert_int_equal(fake_cuda_calls("cuPointerGetAttributes"),
			 NTHREADS * NITER);
}

static void test_fake_cuda_dlopen_same_instance(void **state)
{
	CUresult (*init)(unsigned);
	unsigned long long (*bid)(CUdeviceptr);
	Dl_info info;
	CUdeviceptr p;
	void *h;

	(void)state;
	assert_int_not_equal(dladdr((void *)cuInit, &info), 0);
	assert_non_null(info.dli_fname);
	h = dlopen(info.dli_fname, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	*(void **)&init = dlsym(h, "cuInit");
	*(void **)&bid = dlsym(h, "fake_cuda_buffer_id");
	assert_ptr_equal((void *)init, (void *)cuInit);
	p = fake_cuda_alloc(FAKE_DEVICE, MiB, 0);
	assert_int_equal(bid(p), fake_cuda_buffer_id(p));
	assert_int_equal(dlclose(h), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fake_cuda_before_init_not_initialized),
		cmocka_unit_test(test_fake_cuda_init_result_set_returned),
		cmocka_unit_test_setup(test_fake_cuda_device_attributes_one,
				       setup),
		cmocka_unit_test(test_fake_cuda_error_names_known_codes),
		cmocka_unit_test_setup(
			test_fake_cuda_small_allocs_512_apart_one_page, setup),
		cmocka_unit_test_setup(
			test_fake_cuda_large_alloc_64k_aligned_one_id, setup),
		cmocka_unit_test_setup(
			test_fake_cuda_free_realloc_same_va_new_id, setup),
		cmocka_unit_test_setup(
			test_fake_cuda_free_lifo_most_recent_first, setup),
		cmocka_unit_test_setup(test_fake_cuda_free_not_start_fails,
				       setup),
		cmocka_unit_test_setup(test_fake_cuda_alloc_bad_args_zero,
				       setup),
		cmocka_unit_test_setup(test_fake_cuda_alloc_at_taken_fails,
				       setup),
		cmocka_unit_test_setup(test_fake_cuda_small_skips_forced_va,
				       setup),
		cmocka_unit_test_setup(
			test_fake_cuda_host_pointer_attributes_success_zero,
			setup),
		cmocka_unit_test_setup(
			test_fake_cuda_freed_va_attributes_success_zero, setup),
		cmocka_unit_test_setup(
			test_fake_cuda_device_attributes_all_filled, setup),
		cmocka_unit_test_setup(
			test_fake_cuda_unknown_attribute_invalid_value, setup),
		cmocka_unit_test_setup(test_fake_cuda_sync_memops_counted,
				       setup),
		cmocka_unit_test_setup(
			test_fake_cuda_vmm_sync_memops_not_supported, setup),
		cmocka_unit_test_setup(
			test_fake_cuda_pool_handle_non_null_no_context, setup),
		cmocka_unit_test_setup(test_fake_cuda_managed_is_managed_one,
				       setup),
		cmocka_unit_test_setup(
			test_fake_cuda_host_pinned_memtype_host_writable,
			setup),
		cmocka_unit_test(
			test_fake_cuda_vmm_mapping_attrs_range_is_reservation),
		cmocka_unit_test_setup(
			test_fake_cuda_vmm_hole_attrs_reservation_no_device,
			setup),
		cmocka_unit_test(
			test_fake_cuda_vmm_address_range_is_the_mapping),
		cmocka_unit_test_setup(
			test_fake_cuda_address_range_needs_a_context, setup),
		cmocka_unit_test_setup(test_fake_cuda_export_needs_a_context,
				       setup),
		cmocka_unit_test_setup(
			test_fake_cuda_vmm_export_over_mappings_not_holes,
			setup),
		cmocka_unit_test(
			test_fake_cuda_export_other_device_context_refused),
		cmocka_unit_test_setup(
			test_fake_cuda_vmm_unmap_partial_refused, setup),
		cmocka_unit_test_setup(
			test_fake_cuda_vmm_unmap_several_whole_mappings, setup),
		cmocka_unit_test_setup(
			test_fake_cuda_vmm_remap_same_va_new_buffer_id, setup),
		cmocka_unit_test_setup(
			test_fake_cuda_vmm_reserve_map_unreserve_rules, setup),
		cmocka_unit_test_setup(
			test_fake_cuda_vmm_alloc_is_its_own_reservation, setup),
		cmocka_unit_test_setup(
			test_fake_cuda_vmm_reset_drops_reservations, setup),
		cmocka_unit_test_setup(
			test_fake_cuda_fail_injection_then_success, setup),
		cmocka_unit_test_setup(test_fake_cuda_fail_injection_v2_alias,
				       setup),
		cmocka_unit_test(test_fake_cuda_ctx_flags_push_set_pop),
		cmocka_unit_test_setup(test_fake_cuda_ctx_stack_per_thread,
				       setup),
		cmocka_unit_test(test_fake_cuda_ctx_get_device),
		cmocka_unit_test_setup(
			test_fake_cuda_reset_drops_state_ids_rise, setup),
		cmocka_unit_test_setup_teardown(
			test_fake_cuda_free_observer_every_free_before, setup,
			remove_observer),
		cmocka_unit_test(
			test_fake_cuda_alloc_range_allocation_or_mapping),
		cmocka_unit_test(test_fake_cuda_threads_consistent),
		cmocka_unit_test_setup(test_fake_cuda_dlopen_same_instance,
				       setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
