// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_gpu.c - libgdrcache against the real CUDA driver and runtime.
 *
 * Tests are named test_gpu_<scenario>_<allocator>, the allocators being
 *   cumem      cuMemAlloc / cuMemFree
 *   cudart     cudaMalloc / cudaFree
 *   pool       cuMemAllocAsync, or cudaMallocAsync / cudaFreeAsync, on a
 *              stream of the device's default memory pool
 *   vmm        cuMemCreate + cuMemAddressReserve + cuMemMap
 *   managed    cuMemAllocManaged
 *   hostalloc  cuMemHostAlloc
 *   malloc     plain host memory
 * and the scenarios
 *   status       gdrc_gpu_status: GPU support is on;
 *   classify     gdrc_ptr_query answers each kind with the driver's own
 *                values (BUFFER_ID, cuMemGetAddressRange, ordinal);
 *   whole_alloc  a GPU registration covers its whole allocation, rounded
 *                out to 64 KiB, and serves hits anywhere inside it;
 *   range_keys   above GDRC_WHOLE_ALLOC_MAX, the request rounded to
 *                64 KiB within the allocation;
 *   past_end     a range running past its allocation is refused;
 *   sync_memops  CU_POINTER_ATTRIBUTE_SYNC_MEMOPS is set once per
 *                allocation (VMM: on the context, or not at all);
 *   realloc      a free and reallocation at the same address is caught
 *                by the BUFFER_ID tag check: a new registration, never
 *                the stale one (GDRC_MEM_HOOKS=none, so that no host
 *                hook can catch it first; "hooked" runs with the hooks);
 *   freed_through  the same with GDRC_VALIDATE=hooks, so only the CUDA
 *                free hooks can catch it, for each way of freeing: the
 *                driver symbol, cudaFree, cuGetProcAddress, dlsym,
 *                cudaGetDriverEntryPointByVersion, cudaFreeAsync, the
 *                per-thread-stream cuMemFreeAsync, cuMemUnmap,
 *                cudaFreeHost, cudaHostUnregister;
 *   suballoc     two small allocations sharing a 64 KiB page keep
 *                separate registrations, and freeing one leaves the
 *                other cached;
 *   validate     GDRC_VALIDATE=hooks makes no driver call on a hit,
 *                always makes one per hit;
 *   invalidate   gdrc_invalidate of a GPU range;
 *   second_device  memory of device 1 reports ordinal 1.
 *   other_device_from_threads  device 1's plain and pool memory from
 *                threads with device 0's context current and with none:
 *                right device, SYNC_MEMOPS, context left alone, hits,
 *                its free removing only its own registration.
 *   device_limits  GDRC_GPU_MAX_REGIONS and GDRC_GPU_MAX_BYTES on two
 *                devices: each device evicts and refuses on its own,
 *                the other's registrations and counters untouched;
 *   release_unused_devices  gdrc_release_unused of device 1, then 0,
 *                then all: only that device's unused ones go.
 *
 * libgdrcache runs with cfg NULL, i.e. the "none" backend (registrations
 * tracked, keys 0): no NIC is needed.  Each test creates and destroys
 * its own gdrc context; all share device 0's primary context, which the
 * runtime uses too.  Built twice from this one source: test_gpu with the
 * dynamic runtime (libcudart.so) and test_gpu_static with
 * -DGDRC_TEST_STATIC_CUDART and libcudart_static.a.
 *
 * Run on a machine with a GPU:
 *     ctest -L gpu            (in the build directory)
 *     tests/gpu/test_gpu      (directly; GDRC_LOG_LEVEL=debug for detail)
 * Without a driver or a device it prints "skipped: no GPU" and exits 77,
 * which ctest reports as skipped; tests needing two devices skip alone.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <gdrcache.h>

#include "gpu_test.h"

#ifdef GDRC_TEST_STATIC_CUDART
#define GROUP_NAME "gpu (static cudart)"
#else
#define GROUP_NAME "gpu (dynamic cudart)"
#endif

#define REALLOC_TRIES 64 /* allocations made to get a freed VA back */
#define HIT_LOOPS 1000

static CUdevice dev0;
static CUcontext pctx0;
static int ndevices;

/* GDRC_MEM_HOOKS=none: the context sees no host unmap event, so only
 * the BUFFER_ID check can notice a GPU free. */
static const char *const env_hooks_none[] = { "GDRC_MEM_HOOKS", "none",
					      NULL };

/* ====================================================================
 * Checks: every CUDA and libgdrcache call is checked (CU, GD and
 * GD_EXPECT in gpu_test.h; the runtime's here)
 * ==================================================================== */

static void rt_check(cudaError_t err, const char *call, const char *file,
		     int line)
{
	if (err == cudaSuccess)
		return;
	print_error("%s:%d: %s failed: %s (%d)\n", file, line, call,
		    cudaGetErrorName(err), (int)err);
	_fail(file, line);
}

#define RT(call) rt_check((call), #call, __FILE__, __LINE__)

/* ====================================================================
 * Helpers
 * ==================================================================== */

/* The attribute is a boolean; read into a zeroed int either way. */
static unsigned sync_memops_of(CUdeviceptr p)
{
	unsigned v = 0;

	CU(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
	return v;
}

/* A context with GPU support; env: NULL or name, value, ..., NULL, set
 * for the gdrc_init call only. */
static struct gdrc_ctx *ctx_open_env(const char *const *env)
{
	struct gdrc_ctx *ctx = NULL;
	const char *reason = NULL;
	gdrc_status_t status;

	for (size_t i = 0; env && env[i]; i += 2)
		assert_int_equal(setenv(env[i], env[i + 1], 1), 0);
	status = gdrc_init(NULL, &ctx);
	for (size_t i = 0; env && env[i]; i += 2)
		unsetenv(env[i]);
	GD(status);
	assert_non_null(ctx);
	if (gdrc_gpu_status(ctx, &reason) != GDRC_OK) {
		gdrc_fini(ctx);
		fail_msg("libgdrcache has no GPU support: %s",
			 reason ? reason : "(no reason)");
	}
	return ctx;
}

static struct gdrc_ctx *ctx_open(void)
{
	return ctx_open_env(NULL);
}

/* gdrc_mr_get that must succeed; info (optional) is queried. */
static struct gdrc_mr *get(struct gdrc_ctx *ctx, CUdeviceptr addr,
			   size_t len, struct gdrc_mr_info *info)
{
	struct gdrc_mr *mr = NULL;

	GD(gdrc_mr_get(ctx, vp(addr), len, ACCESS, 0, &mr));
	assert_non_null(mr);
	if (info)
		GD(gdrc_mr_query(mr, info));
	return mr;
}

/*
 * A registration of the GPU allocation [base, base + size) registered
 * whole: key range the allocation, registered range it rounded out to
 * 64 KiB, and the driver's identity of it.
 */
static void check_whole(const struct gdrc_mr_info *i, CUdeviceptr base,
			size_t size, int kind, int device)
{
	assert_int_equal(i->mem_type, GDRC_MEM_CUDA);
	assert_int_equal(i->kind, kind);
	assert_int_equal(i->device, device);
	assert_int_equal(i->backend, GDRC_BACKEND_NONE);
	assert_int_equal(i->lkey, 0);
	assert_int_equal(i->rkey, 0);
	assert_int_equal(i->access, ACCESS);
	assert_int_equal(i->buffer_id, buffer_id_of(base));
	assert_int_equal(i->key_addr, base);
	assert_int_equal(i->key_length, size);
	assert_int_equal(i->addr, align_down(base, GPU_PAGE));
	assert_int_equal(i->length,
			 align_up(base + size, GPU_PAGE) -
				 align_down(base, GPU_PAGE));
	assert_true(i->flags & GDRC_MR_INFO_CACHED);
}

/* gdrc_ptr_query of q, a GPU pointer of kind on device, against what the
 * driver says of it. */
static void query_gpu(struct gdrc_ctx *ctx, CUdeviceptr q, int kind,
		      int device)
{
	struct gdrc_ptr_info pi;
	CUdeviceptr base = 0;
	size_t size = 0;

	CU(cuMemGetAddressRange(&base, &size, q));
	memset(&pi, 0xa5, sizeof(pi));
	GD(gdrc_ptr_query(ctx, vp(q), &pi));
	print_message("    %#llx: kind %d mem_type %d device %d buffer id "
		      "%llu alloc %#llx+%llu (driver: %#llx+%llu)\n",
		      (unsigned long long)q, pi.kind, pi.mem_type, pi.device,
		      (unsigned long long)pi.buffer_id,
		      (unsigned long long)pi.alloc_base,
		      (unsigned long long)pi.alloc_size,
		      (unsigned long long)base, (unsigned long long)size);
	assert_int_equal(pi.kind, kind);
	assert_int_equal(pi.mem_type, GDRC_MEM_CUDA);
	assert_int_equal(pi.device, device);
	assert_int_equal(pi.flags, 0); /* classified, not from the cache */
	assert_int_not_equal(pi.buffer_id, 0);
	assert_int_equal(pi.buffer_id, buffer_id_of(q));
	assert_int_equal(pi.alloc_base, base);
	assert_int_equal(pi.alloc_size, size);
	assert_int_equal(stat_of(ctx, GDRC_STAT_CLASSIFY_CALLS), 1);
}

/* --------------------------------------------------------------------
 * VMM: one granule-sized mapping at a reserved VA
 * -------------------------------------------------------------------- */

struct vmm_buf {
	CUmemAllocationProp prop;
	CUdeviceptr va;
	size_t size;
	CUmemGenericAllocationHandle handle;
};

static int vmm_supported(void)
{
	return dev_attr(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
			dev0);
}

/* A new physical allocation mapped read-write at v->va. */
static void vmm_map(struct vmm_buf *v)
{
	CUmemAccessDesc access;

	memset(&access, 0, sizeof(access));
	access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	access.location.id = (int)dev0;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CU(cuMemCreate(&v->handle, v->size, &v->prop, 0));
	CU(cuMemMap(v->va, v->size, 0, v->handle, 0));
	CU(cuMemSetAccess(v->va, v->size, &access, 1));
}

/* Unmap and release the physical allocation; the VA stays reserved. */
static void vmm_unmap(struct vmm_buf *v)
{
	CU(cuMemUnmap(v->va, v->size));
	CU(cuMemRelease(v->handle));
	v->handle = 0;
}

static void vmm_alloc(struct vmm_buf *v)
{
	CUdevice_attribute rdma;
	size_t gran = 0;

	memset(v, 0, sizeof(*v));
	v->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	v->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	v->prop.location.id = (int)dev0;
	/* What RDMA needs; asked only where the device supports it. */
	rdma = CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED;
	v->prop.allocFlags.gpuDirectRDMACapable = dev_attr(rdma, dev0) ? 1 : 0;
	CU(cuMemGetAllocationGranularity(&gran, &v->prop,
					 CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	assert_true(gran > 0);
	v->size = gran;
	CU(cuMemAddressReserve(&v->va, v->size, 0, 0, 0));
	vmm_map(v);
	print_message("    vmm: %#llx+%llu, gpuDirectRDMACapable %d\n",
		      (unsigned long long)v->va, (unsigned long long)v->size,
		      v->prop.allocFlags.gpuDirectRDMACapable);
}

static void vmm_free(struct vmm_buf *v)
{
	vmm_unmap(v);
	CU(cuMemAddressFree(v->va, v->size));
}

/* --------------------------------------------------------------------
 * Allocators for the free-and-reallocate tests
 * -------------------------------------------------------------------- */

struct galloc {
	const char *name;
	int kind; /* enum gdrc_ptr_kind of what it allocates */
	void (*alloc)(struct galloc *a, size_t size, CUdeviceptr *p);
	void (*release)(struct galloc *a, CUdeviceptr p);
	cudaStream_t stream; /* pool */
};

static void cumem_alloc(struct galloc *a, size_t size, CUdeviceptr *p)
{
	(void)a;
	CU(cuMemAlloc(p, size));
}

static void cumem_release(struct galloc *a, CUdeviceptr p)
{
	(void)a;
	CU(cuMemFree(p));
}

static void cudart_alloc(struct galloc *a, size_t size, CUdeviceptr *p)
{
	void *v = NULL;

	(void)a;
	RT(cudaMalloc(&v, size));
	*p = (CUdeviceptr)(uintptr_t)v;
}

static void cudart_release(struct galloc *a, CUdeviceptr p)
{
	(void)a;
	RT(cudaFree((void *)(uintptr_t)p));
}

/* Stream-ordered: synchronized, so the memory is there (or gone back to
 * the pool) when the call returns. */
static void pool_alloc(struct galloc *a, size_t size, CUdeviceptr *p)
{
	void *v = NULL;

	RT(cudaMallocAsync(&v, size, a->stream));
	RT(cudaStreamSynchronize(a->stream));
	*p = (CUdeviceptr)(uintptr_t)v;
}

static void pool_release(struct galloc *a, CUdeviceptr p)
{
	RT(cudaFreeAsync((void *)(uintptr_t)p, a->stream));
	RT(cudaStreamSynchronize(a->stream));
}

static struct galloc galloc_cumem = { "cumem", GDRC_PTR_DEVICE, cumem_alloc,
				      cumem_release, NULL };

/*
 * After want was freed: allocate size bytes until want comes back (up to
 * REALLOC_TRIES times), holding the other allocations meanwhile, then
 * free those.  @return 1 if want is allocated again (the caller owns it).
 */
static int realloc_same_va(struct galloc *a, CUdeviceptr want, size_t size)
{
	CUdeviceptr held[REALLOC_TRIES], q = 0;
	int n = 0, found = 0;

	for (int i = 0; i < REALLOC_TRIES; i++) {
		a->alloc(a, size, &q);
		if (q == want) {
			found = 1;
			break;
		}
		held[n++] = q;
	}
	for (int i = 0; i < n; i++)
		a->release(a, held[i]);
	print_message("    %s: freed VA %#llx %s after %d other "
		      "allocation(s)\n", a->name, (unsigned long long)want,
		      found ? "came back" : "never came back", n);
	return found;
}

/* ====================================================================
 * Status and classification
 * ==================================================================== */

static void test_gpu_status_driver(void **state)
{
	struct gdrc_ctx *ctx = NULL;
	const char *reason = "(not written)";

	(void)state;
	GD(gdrc_init(NULL, &ctx));
	GD(gdrc_gpu_status(ctx, &reason));
	assert_null(reason);
	GD(gdrc_gpu_status(ctx, NULL));
	gdrc_fini(ctx);
}

static void test_gpu_classify_cumem(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr p;

	(void)state;
	CU(cuMemAlloc(&p, MIB));
	ctx = ctx_open();
	query_gpu(ctx, p + 4096, GDRC_PTR_DEVICE, 0);
	gdrc_fini(ctx);
	CU(cuMemFree(p));
}

static void test_gpu_classify_pool(void **state)
{
	struct gdrc_ctx *ctx;
	CUstream stream;
	CUdeviceptr p;

	(void)state;
	if (!dev_attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev0)) {
		print_message("    device 0 has no memory pools\n");
		skip();
	}
	CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
	CU(cuMemAllocAsync(&p, MIB, stream));
	CU(cuStreamSynchronize(stream));
	ctx = ctx_open();
	query_gpu(ctx, p + 4096, GDRC_PTR_POOL, 0);
	gdrc_fini(ctx);
	CU(cuMemFreeAsync(p, stream));
	CU(cuStreamSynchronize(stream));
	CU(cuStreamDestroy(stream));
}

static void test_gpu_classify_vmm(void **state)
{
	struct gdrc_ctx *ctx;
	struct vmm_buf v;

	(void)state;
	if (!vmm_supported())
		skip();
	vmm_alloc(&v);
	ctx = ctx_open();
	query_gpu(ctx, v.va + 4096, GDRC_PTR_VMM, 0);
	gdrc_fini(ctx);
	vmm_free(&v);
}

static void test_gpu_classify_managed(void **state)
{
	struct gdrc_ptr_info pi;
	struct gdrc_mr *mr = NULL;
	struct gdrc_ctx *ctx;
	CUdeviceptr p;

	(void)state;
	if (!dev_attr(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, dev0))
		skip();
	CU(cuMemAllocManaged(&p, MIB, CU_MEM_ATTACH_GLOBAL));
	ctx = ctx_open();
	memset(&pi, 0xa5, sizeof(pi));
	GD(gdrc_ptr_query(ctx, vp(p + 4096), &pi));
	print_message("    managed %#llx: kind %d mem_type %d device %d "
		      "buffer id %llu alloc %#llx+%llu\n",
		      (unsigned long long)p, pi.kind, pi.mem_type, pi.device,
		      (unsigned long long)pi.buffer_id,
		      (unsigned long long)pi.alloc_base,
		      (unsigned long long)pi.alloc_size);
	assert_int_equal(pi.kind, GDRC_PTR_MANAGED);
	assert_int_equal(pi.mem_type, GDRC_MEM_CUDA);
	GD_EXPECT(gdrc_mr_get(ctx, vp(p), MIB, ACCESS, 0, &mr),
		  GDRC_ERR_UNSUPPORTED);
	assert_null(mr);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_SYNC_MEMOPS_SET), 0);
	gdrc_fini(ctx);
	CU(cuMemFree(p));
}

static void test_gpu_classify_hostalloc(void **state)
{
	struct gdrc_ptr_info pi;
	struct gdrc_mr_info info;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	uintptr_t h, q;
	void *host = NULL;

	(void)state;
	CU(cuMemHostAlloc(&host, MIB, 0));
	h = (uintptr_t)host;
	q = h + 4096;
	ctx = ctx_open();
	memset(&pi, 0xa5, sizeof(pi));
	GD(gdrc_ptr_query(ctx, (const void *)q, &pi));
	print_message("    hostalloc %#llx: kind %d mem_type %d device %d "
		      "buffer id %llu alloc %#llx+%llu\n",
		      (unsigned long long)h, pi.kind, pi.mem_type, pi.device,
		      (unsigned long long)pi.buffer_id,
		      (unsigned long long)pi.alloc_base,
		      (unsigned long long)pi.alloc_size);
	assert_int_equal(pi.kind, GDRC_PTR_HOST_PINNED);
	assert_int_equal(pi.mem_type, GDRC_MEM_HOST);
	assert_int_equal(pi.device, -1);
	assert_int_equal(pi.flags, 0);
	assert_int_not_equal(pi.buffer_id, 0);
	assert_int_equal(pi.buffer_id, buffer_id_of((CUdeviceptr)q));
	assert_true(pi.alloc_base <= q && q < pi.alloc_base + pi.alloc_size);

	/* Registered as host memory. */
	mr = get(ctx, (CUdeviceptr)h, 4096, &info);
	assert_int_equal(info.mem_type, GDRC_MEM_HOST);
	assert_int_equal(info.kind, GDRC_PTR_HOST_PINNED);
	assert_int_equal(info.device, -1);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	CU(cuMemFreeHost(host));
}

static void test_gpu_classify_malloc(void **state)
{
	struct gdrc_ptr_info pi;
	struct gdrc_ctx *ctx;
	char *p;

	(void)state;
	p = malloc(MIB);
	assert_non_null(p);
	memset(p, 1, MIB);
	ctx = ctx_open();
	memset(&pi, 0xa5, sizeof(pi));
	GD(gdrc_ptr_query(ctx, p + 100, &pi));
	assert_int_equal(pi.kind, GDRC_PTR_HOST);
	assert_int_equal(pi.mem_type, GDRC_MEM_HOST);
	assert_int_equal(pi.device, -1);
	assert_int_equal(pi.flags, 0);
	assert_int_equal(pi.buffer_id, 0);
	assert_int_equal(pi.alloc_base, 0);
	assert_int_equal(pi.alloc_size, 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_CLASSIFY_CALLS), 1);
	gdrc_fini(ctx);
	free(p);
}

/* ====================================================================
 * Registration ranges
 * ==================================================================== */

static void test_gpu_whole_alloc_cumem(void **state)
{
	struct gdrc_mr_info i1, i2;
	struct gdrc_mr *mr1, *mr2;
	struct gdrc_ctx *ctx;
	CUdeviceptr p;

	(void)state;
	CU(cuMemAlloc(&p, MIB));
	ctx = ctx_open();
	mr1 = get(ctx, p + 4096, 100, &i1);
	print_mr("get p+4K", &i1);
	check_whole(&i1, p, MIB, GDRC_PTR_DEVICE, 0);
	assert_int_equal(i1.addr % GPU_PAGE, 0);
	assert_int_equal(i1.length % GPU_PAGE, 0);
	assert_true(i1.addr <= p && i1.addr + i1.length >= p + MIB);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISS_COLD), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_PINNED_BYTES), i1.length);

	/* Anywhere inside the allocation: the same registration. */
	mr2 = get(ctx, p + 512 * KIB, 4096, &i2);
	assert_int_equal(i2.id, i1.id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 1);
	gdrc_mr_put(ctx, mr2);
	gdrc_mr_put(ctx, mr1);
	gdrc_fini(ctx);
	CU(cuMemFree(p));
}

static void test_gpu_range_keys_cumem(void **state)
{
	static const char *const env[] = { "GDRC_WHOLE_ALLOC_MAX", "256K",
					   NULL };
	unsigned long long q, ks, ke;
	struct gdrc_mr_info i1, i2, i3;
	struct gdrc_mr *mr1, *mr2, *mr3;
	struct gdrc_ctx *ctx;
	CUdeviceptr p;

	(void)state;
	CU(cuMemAlloc(&p, MIB));
	ctx = ctx_open_env(env);
	q = p + 300 * KIB;
	ks = align_down(q, GPU_PAGE);
	ke = align_up(q + 100, GPU_PAGE);
	if (ks < p)
		ks = p;
	if (ke > p + MIB)
		ke = p + MIB;
	mr1 = get(ctx, q, 100, &i1);
	print_mr("get p+300K", &i1);
	assert_int_equal(i1.key_addr, ks);
	assert_int_equal(i1.key_length, ke - ks);
	assert_int_equal(i1.addr, align_down(ks, GPU_PAGE));
	assert_int_equal(i1.length,
			 align_up(ke, GPU_PAGE) - align_down(ks, GPU_PAGE));
	assert_int_equal(i1.kind, GDRC_PTR_DEVICE);
	assert_int_equal(i1.buffer_id, buffer_id_of(p));

	/* Inside the key range: a hit; elsewhere in the allocation: not. */
	mr2 = get(ctx, i1.key_addr + 10, 64, &i2);
	assert_int_equal(i2.id, i1.id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), 1);
	mr3 = get(ctx, p + 600 * KIB, 64, &i3);
	assert_true(i3.id != i1.id);
	assert_int_equal(i3.buffer_id, i1.buffer_id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 2);
	gdrc_mr_put(ctx, mr3);
	gdrc_mr_put(ctx, mr2);
	gdrc_mr_put(ctx, mr1);
	gdrc_fini(ctx);
	CU(cuMemFree(p));
}

static void test_gpu_past_end_cumem(void **state)
{
	struct gdrc_mr *mr = NULL;
	struct gdrc_mr_info info;
	struct gdrc_ctx *ctx;
	CUdeviceptr p, base = 0;
	size_t size = 0;

	(void)state;
	CU(cuMemAlloc(&p, MIB));
	CU(cuMemGetAddressRange(&base, &size, p));
	assert_int_equal(base, p);
	ctx = ctx_open();
	GD_EXPECT(gdrc_mr_get(ctx, vp(p + size - 8), 64, ACCESS, 0, &mr),
		  GDRC_ERR_UNSUPPORTED);
	assert_null(mr);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);

	/* Up to the last byte is fine. */
	mr = get(ctx, p + size - 64, 64, &info);
	check_whole(&info, p, size, GDRC_PTR_DEVICE, 0);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	CU(cuMemFree(p));
}

/* ====================================================================
 * SYNC_MEMOPS
 * ==================================================================== */

static void test_gpu_sync_memops_cumem(void **state)
{
	const uint32_t sync_bits = GDRC_MR_INFO_SYNC_MEMOPS |
				   GDRC_MR_INFO_SYNC_MEMOPS_CTX |
				   GDRC_MR_INFO_NO_SYNC_MEMOPS;
	struct gdrc_mr_info i1, i2;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	CUdeviceptr p;

	(void)state;
	CU(cuMemAlloc(&p, MIB));
	print_message("    SYNC_MEMOPS before the first get: %u\n",
		      sync_memops_of(p));
	ctx = ctx_open();
	mr = get(ctx, p, MIB, &i1);
	assert_int_equal(sync_memops_of(p), 1);
	assert_int_equal(i1.flags & sync_bits, GDRC_MR_INFO_SYNC_MEMOPS);
	assert_int_equal(stat_of(ctx, GDRC_STAT_SYNC_MEMOPS_SET), 1);
	gdrc_mr_put(ctx, mr);

	/* A new registration of the same allocation: not set again. */
	GD(gdrc_invalidate(ctx, vp(p), MIB));
	mr = get(ctx, p + 4096, 64, &i2);
	assert_true(i2.id != i1.id);
	assert_int_equal(i2.buffer_id, i1.buffer_id);
	assert_int_equal(i2.flags & sync_bits, GDRC_MR_INFO_SYNC_MEMOPS);
	assert_int_equal(stat_of(ctx, GDRC_STAT_SYNC_MEMOPS_SET), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 2);
	assert_int_equal(sync_memops_of(p), 1);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	CU(cuMemFree(p));
}

static void test_gpu_sync_memops_vmm(void **state)
{
	struct gdrc_mr_info info;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	struct vmm_buf v;
	unsigned ctx_flags = 0;
	uint32_t how;

	(void)state;
	if (!vmm_supported())
		skip();
	vmm_alloc(&v);
	ctx = ctx_open();
	mr = get(ctx, v.va, v.size, &info);
	print_mr("vmm", &info);
	check_whole(&info, v.va, v.size, GDRC_PTR_VMM, 0);
	how = info.flags & (GDRC_MR_INFO_SYNC_MEMOPS |
			    GDRC_MR_INFO_SYNC_MEMOPS_CTX |
			    GDRC_MR_INFO_NO_SYNC_MEMOPS);
	CU(cuCtxGetFlags(&ctx_flags));
	print_message("    vmm SYNC_MEMOPS: %s (current context flags %#x)\n",
		      how == GDRC_MR_INFO_SYNC_MEMOPS_CTX ?
			      "GDRC_MR_INFO_SYNC_MEMOPS_CTX (on the context)" :
		      how == GDRC_MR_INFO_NO_SYNC_MEMOPS ?
			      "GDRC_MR_INFO_NO_SYNC_MEMOPS (not set)" :
			      "unexpected",
		      ctx_flags);
	assert_true(how == GDRC_MR_INFO_SYNC_MEMOPS_CTX ||
		    how == GDRC_MR_INFO_NO_SYNC_MEMOPS);
	assert_int_equal(stat_of(ctx, GDRC_STAT_SYNC_MEMOPS_SET),
			 how == GDRC_MR_INFO_SYNC_MEMOPS_CTX ? 1 : 0);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	vmm_free(&v);
}

/* ====================================================================
 * Free and reallocate at the same VA (default GDRC_VALIDATE: always)
 * ==================================================================== */

/*
 * get+put on a fresh allocation, free it, allocate until the same VA
 * returns, get again: a new registration of the new allocation.
 * how: REALLOC_TAG, no hook may see the free (GDRC_MEM_HOOKS=none), so
 * the BUFFER_ID check must be what caught it; REALLOC_ANY, either may;
 * REALLOC_CUDA_HOOK, GDRC_VALIDATE=hooks makes no tag check at all, so
 * the CUDA free hook must have caught it.  @return 0 if the VA never
 * came back (nothing left allocated: the caller cleans up and skips),
 * else 1.
 */
enum { REALLOC_TAG, REALLOC_ANY, REALLOC_CUDA_HOOK };

static const char *const env_validate_hooks[] = { "GDRC_VALIDATE", "hooks",
						   NULL };

static int realloc_case(struct galloc *a, size_t size, int how)
{
	unsigned long long b1, b2;
	struct gdrc_mr_info i1, i2;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	uint64_t by_tag, by_hook, by_cuda, events;
	CUdeviceptr p, base = 0;
	size_t asize = 0;

	a->alloc(a, size, &p);
	b1 = buffer_id_of(p);
	CU(cuMemGetAddressRange(&base, &asize, p));
	ctx = ctx_open_env(how == REALLOC_TAG ? env_hooks_none :
			   how == REALLOC_CUDA_HOOK ? env_validate_hooks :
						      NULL);
	events = stat_of(ctx, GDRC_STAT_CUDA_EVENTS);
	mr = get(ctx, p, size, &i1);
	print_mr("before the free", &i1);
	check_whole(&i1, base, asize, a->kind, 0);
	assert_int_equal(i1.buffer_id, b1);
	gdrc_mr_put(ctx, mr);

	a->release(a, p);
	if (how == REALLOC_CUDA_HOOK)
		assert_true(stat_of(ctx, GDRC_STAT_CUDA_EVENTS) > events);
	if (!realloc_same_va(a, p, size)) {
		gdrc_fini(ctx);
		return 0;
	}
	b2 = buffer_id_of(p);
	print_message("    %s: BUFFER_ID %llu -> %llu at %#llx\n", a->name, b1,
		      b2, (unsigned long long)p);
	assert_true(b2 != b1);
	CU(cuMemGetAddressRange(&base, &asize, p));

	mr = get(ctx, p, size, &i2);
	print_mr("after the reallocation", &i2);
	check_whole(&i2, base, asize, a->kind, 0);
	by_tag = stat_of(ctx, GDRC_STAT_INV_TAG_CHECK);
	by_hook = stat_of(ctx, GDRC_STAT_INV_HOST_HOOK);
	by_cuda = stat_of(ctx, GDRC_STAT_INV_CUDA_HOOK);
	print_message("    invalidations: by tag check %llu, by host hook "
		      "%llu, by cuda hook %llu\n", (unsigned long long)by_tag,
		      (unsigned long long)by_hook,
		      (unsigned long long)by_cuda);
	assert_true(i2.id != i1.id);
	assert_int_equal(i2.buffer_id, b2);
	assert_true(i2.buffer_id != i1.buffer_id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 2);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), 0);
	if (how == REALLOC_TAG) {
		assert_true(by_tag >= 1);
		assert_int_equal(by_hook + by_cuda, 0);
	} else if (how == REALLOC_CUDA_HOOK) {
		assert_int_equal(by_cuda, 1);
		assert_int_equal(by_tag, 0);
		assert_int_equal(stat_of(ctx, GDRC_STAT_TAG_CHECKS), 0);
	} else {
		assert_true(by_tag + by_hook + by_cuda >= 1);
	}
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	a->release(a, p);
	return 1;
}

static void test_gpu_realloc_cumem(void **state)
{
	(void)state;
	if (!realloc_case(&galloc_cumem, MIB, REALLOC_TAG))
		skip();
}

static void test_gpu_realloc_hooked_cumem(void **state)
{
	(void)state;
	if (!realloc_case(&galloc_cumem, MIB, REALLOC_ANY))
		skip();
}

static void test_gpu_realloc_cudart(void **state)
{
	struct galloc a = { "cudart", GDRC_PTR_DEVICE, cudart_alloc,
			    cudart_release, NULL };

	(void)state;
	if (!realloc_case(&a, MIB, REALLOC_TAG))
		skip();
}

static void test_gpu_realloc_pool(void **state)
{
	struct galloc a = { "pool", GDRC_PTR_POOL, pool_alloc, pool_release,
			    NULL };
	int done;

	(void)state;
	if (!dev_attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev0))
		skip();
	RT(cudaStreamCreateWithFlags(&a.stream, cudaStreamNonBlocking));
	done = realloc_case(&a, MIB, REALLOC_TAG);
	RT(cudaStreamDestroy(a.stream));
	if (!done)
		skip();
}

/* VMM: unmap and release the physical memory, map a new one at the very
 * same reserved VA. */
static void test_gpu_realloc_vmm(void **state)
{
	unsigned long long b1, b2;
	struct gdrc_mr_info i1, i2;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	struct vmm_buf v;

	(void)state;
	if (!vmm_supported())
		skip();
	vmm_alloc(&v);
	b1 = buffer_id_of(v.va);
	ctx = ctx_open_env(env_hooks_none);
	mr = get(ctx, v.va, v.size, &i1);
	print_mr("before the remap", &i1);
	check_whole(&i1, v.va, v.size, GDRC_PTR_VMM, 0);
	gdrc_mr_put(ctx, mr);

	vmm_unmap(&v);
	vmm_map(&v);
	b2 = buffer_id_of(v.va);
	print_message("    vmm: BUFFER_ID %llu -> %llu at %#llx\n", b1, b2,
		      (unsigned long long)v.va);
	assert_true(b2 != b1);

	mr = get(ctx, v.va, v.size, &i2);
	print_mr("after the remap", &i2);
	check_whole(&i2, v.va, v.size, GDRC_PTR_VMM, 0);
	assert_true(i2.id != i1.id);
	assert_int_equal(i2.buffer_id, b2);
	assert_true(stat_of(ctx, GDRC_STAT_INV_TAG_CHECK) >= 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 2);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	vmm_free(&v);
}

/* ====================================================================
 * CUDA free hooks: every way a program frees, with GDRC_VALIDATE=hooks
 * (no tag check can hide a missed free).  "freed through" names how the
 * program got the free function.
 * ==================================================================== */

/* The driver's cuMemFree as a program might have fetched it. */
typedef CUresult (*free_fn)(CUdeviceptr p);
typedef CUresult (*free_async_fn)(CUdeviceptr p, CUstream s);

static void *entry_gpa(const char *sym, cuuint64_t flags)
{
	CUdriverProcAddressQueryResult q;
	void *fn = NULL;

	CU(cuGetProcAddress(sym, &fn, CUDA_VERSION, flags, &q));
	assert_int_equal(q, CU_GET_PROC_ADDRESS_SUCCESS);
	assert_non_null(fn);
	return fn;
}

static void gpa_release(struct galloc *a, CUdeviceptr p)
{
	(void)a;
	CU(((free_fn)entry_gpa("cuMemFree", CU_GET_PROC_ADDRESS_DEFAULT))(p));
}

static void dlsym_release(struct galloc *a, CUdeviceptr p)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	free_fn fn;

	(void)a;
	assert_non_null(h);
	fn = (free_fn)dlsym(h, "cuMemFree_v2");
	dlclose(h);
	assert_non_null(fn);
	CU(fn(p));
}

#if CUDART_VERSION >= 12050
static void rt_entry_release(struct galloc *a, CUdeviceptr p)
{
	enum cudaDriverEntryPointQueryResult q;
	void *fn = NULL;

	(void)a;
	RT(cudaGetDriverEntryPointByVersion("cuMemFree", &fn, CUDA_VERSION,
					    cudaEnableDefault, &q));
	assert_int_equal(q, cudaDriverEntryPointSuccess);
	CU(((free_fn)fn)(p));
}
#endif

/* cuMemFreeAsync for per-thread default streams (the _ptsz variant). */
static void ptds_release(struct galloc *a, CUdeviceptr p)
{
	free_async_fn fn = (free_async_fn)entry_gpa(
		"cuMemFreeAsync", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);

	CU(fn(p, (CUstream)a->stream));
	RT(cudaStreamSynchronize(a->stream));
}

static void test_gpu_cuda_hooks_status(void **state)
{
	struct gdrc_ctx *ctx;
	const char *why = "unset";

	(void)state;
	ctx = ctx_open_env(env_validate_hooks);
	assert_int_equal(gdrc_cuda_hooks_status(ctx, &why), GDRC_OK);
	assert_null(why);
	gdrc_fini(ctx);
}

static void test_gpu_freed_through_symbol_cumem(void **state)
{
	(void)state;
	if (!realloc_case(&galloc_cumem, MIB, REALLOC_CUDA_HOOK))
		skip();
}

static void test_gpu_freed_through_cudafree_cudart(void **state)
{
	struct galloc a = { "cudart", GDRC_PTR_DEVICE, cudart_alloc,
			    cudart_release, NULL };

	(void)state;
	if (!realloc_case(&a, MIB, REALLOC_CUDA_HOOK))
		skip();
}

static void test_gpu_freed_through_getprocaddress_cumem(void **state)
{
	struct galloc a = { "cumem/gpa", GDRC_PTR_DEVICE, cumem_alloc,
			    gpa_release, NULL };

	(void)state;
	if (!realloc_case(&a, MIB, REALLOC_CUDA_HOOK))
		skip();
}

static void test_gpu_freed_through_dlsym_cumem(void **state)
{
	struct galloc a = { "cumem/dlsym", GDRC_PTR_DEVICE, cumem_alloc,
			    dlsym_release, NULL };

	(void)state;
	if (!realloc_case(&a, MIB, REALLOC_CUDA_HOOK))
		skip();
}

static void test_gpu_freed_through_driver_entry_point_cumem(void **state)
{
#if CUDART_VERSION >= 12050
	struct galloc a = { "cumem/cudaGetDriverEntryPointByVersion",
			    GDRC_PTR_DEVICE, cumem_alloc, rt_entry_release,
			    NULL };

	(void)state;
	if (!realloc_case(&a, MIB, REALLOC_CUDA_HOOK))
		skip();
#else
	(void)state;
	skip();
#endif
}

static void pool_case(void (*release)(struct galloc *, CUdeviceptr),
		      const char *name)
{
	struct galloc a = { name, GDRC_PTR_POOL, pool_alloc, release, NULL };
	int done;

	if (!dev_attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev0))
		skip();
	RT(cudaStreamCreateWithFlags(&a.stream, cudaStreamNonBlocking));
	done = realloc_case(&a, MIB, REALLOC_CUDA_HOOK);
	RT(cudaStreamDestroy(a.stream));
	if (!done)
		skip();
}

static void test_gpu_freed_through_cudafreeasync_pool(void **state)
{
	(void)state;
	pool_case(pool_release, "pool/cudaFreeAsync");
}

static void test_gpu_freed_through_ptsz_pool(void **state)
{
	(void)state;
	pool_case(ptds_release, "pool/cuMemFreeAsync_ptsz");
}

static void test_gpu_freed_through_unmap_vmm(void **state)
{
	struct gdrc_mr_info i1, i2;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	struct vmm_buf v;
	uint64_t events;

	(void)state;
	if (!vmm_supported())
		skip();
	vmm_alloc(&v);
	ctx = ctx_open_env(env_validate_hooks);
	mr = get(ctx, v.va, v.size, &i1);
	gdrc_mr_put(ctx, mr);
	events = stat_of(ctx, GDRC_STAT_CUDA_EVENTS);
	vmm_unmap(&v);
	assert_int_equal(stat_of(ctx, GDRC_STAT_CUDA_EVENTS), events + 1);
	vmm_map(&v);
	mr = get(ctx, v.va, v.size, &i2);
	print_mr("after the remap", &i2);
	assert_true(i2.id != i1.id);
	assert_int_equal(i2.buffer_id, buffer_id_of(v.va));
	assert_int_equal(stat_of(ctx, GDRC_STAT_INV_CUDA_HOOK), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_TAG_CHECKS), 0);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	vmm_free(&v);
}

/* Pinned host memory: cudaFreeHost unmaps inside the driver (no libc
 * munmap on driver 580): only the CUDA hook sees it. */
static void test_gpu_freed_through_cudafreehost_hostalloc(void **state)
{
	struct gdrc_mr_info i1, i2;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	void *h = NULL, *h2 = NULL;
	uint64_t events;

	(void)state;
	RT(cudaMallocHost(&h, MIB));
	ctx = ctx_open_env(env_validate_hooks);
	mr = get(ctx, (CUdeviceptr)(uintptr_t)h + 64 * KIB, 4 * KIB, &i1);
	assert_int_equal(i1.kind, GDRC_PTR_HOST_PINNED);
	gdrc_mr_put(ctx, mr);
	events = stat_of(ctx, GDRC_STAT_CUDA_EVENTS);
	RT(cudaFreeHost(h));
	assert_int_equal(stat_of(ctx, GDRC_STAT_CUDA_EVENTS), events + 1);
	RT(cudaMallocHost(&h2, MIB));
	print_message("    hostalloc: %p freed, %p allocated\n", h, h2);
	mr = get(ctx, (CUdeviceptr)(uintptr_t)h2 + 64 * KIB, 4 * KIB, &i2);
	assert_true(i2.id != i1.id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_INV_CUDA_HOOK), 1);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	RT(cudaFreeHost(h2));
}

/* cudaHostUnregister: the memory stays, the pinned registration goes. */
static void test_gpu_freed_through_hostunregister_malloc(void **state)
{
	struct gdrc_mr_info i1, i2;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	void *h = aligned_alloc(64 * KIB, MIB);

	(void)state;
	assert_non_null(h);
	RT(cudaHostRegister(h, MIB, cudaHostRegisterDefault));
	ctx = ctx_open_env(env_validate_hooks);
	mr = get(ctx, (CUdeviceptr)(uintptr_t)h, 4 * KIB, &i1);
	assert_int_equal(i1.kind, GDRC_PTR_HOST_PINNED);
	gdrc_mr_put(ctx, mr);
	RT(cudaHostUnregister(h));
	mr = get(ctx, (CUdeviceptr)(uintptr_t)h, 4 * KIB, &i2);
	assert_true(i2.id != i1.id);
	assert_int_equal(i2.kind, GDRC_PTR_HOST);
	assert_int_equal(stat_of(ctx, GDRC_STAT_INV_CUDA_HOOK), 1);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	free(h);
}

/* ====================================================================
 * The dma-buf export half of the dmabuf backend: what
 * cuMemGetHandleForAddressRange(DMA_BUF_FD) takes, per kind of memory
 * (no NIC here: the fd is only checked and closed).  Prints every answer
 * for docs/backends.md; asserts what the backend relies on.
 * ==================================================================== */

/* @return the CUresult; *fd_p >= 0 on success (closed by the caller). */
static CUresult dmabuf_export(CUdeviceptr p, size_t len, int *fd_p)
{
	*fd_p = -1;
	return cuMemGetHandleForAddressRange(fd_p, p, len,
					     CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
					     0);
}

/* Export [p + off, + len) of an allocation; print; return the result. */
static CUresult export_case(const char *kind, const char *what,
			    CUdeviceptr p, size_t off, size_t len)
{
	CUresult res;
	int fd;

	res = dmabuf_export(p + off, len, &fd);
	print_message("    dma-buf %-10s %-28s +%-7zu %8zu bytes: %s%s\n", kind,
		      what, off, len, cu_name(res), fd >= 0 ? " (fd)" : "");
	if (res == CUDA_SUCCESS) {
		assert_true(fd >= 0);
		assert_int_equal(close(fd), 0);
	}
	return res;
}

static void export_kind(const char *kind, CUdeviceptr p, size_t size,
			int must_work)
{
	CUresult whole, sub;

	whole = export_case(kind, "whole allocation", p, 0, size);
	sub = export_case(kind, "64 KiB inside", p, 64 * KIB, 64 * KIB);
	export_case(kind, "4 KiB, host-page aligned", p, 4 * KIB, 4 * KIB);
	/* Recorded, not asserted: what the driver does at the edges. */
	export_case(kind, "unaligned start", p, 512, 64 * KIB);
	export_case(kind, "past the allocation", p, 0, size + 64 * KIB);
	if (must_work) {
		assert_int_equal(whole, CUDA_SUCCESS);
		assert_int_equal(sub, CUDA_SUCCESS);
	}
}

static void test_gpu_dmabuf_export(void **state)
{
	struct galloc pool = { "pool", GDRC_PTR_POOL, pool_alloc, pool_release,
			       NULL };
	CUdeviceptr d, q, a, b;
	struct vmm_buf v;
	void *h = NULL;

	(void)state;
	print_message("    DMA_BUF_SUPPORTED %d, driver %d\n",
		      dev_attr(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev0),
		      CUDA_VERSION);
	if (!dev_attr(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev0))
		skip();
	CU(cuMemAlloc(&d, 2 * MIB));
	export_kind("cumem", d, 2 * MIB, 1);
	CU(cuMemFree(d));

	if (dev_attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev0)) {
		RT(cudaStreamCreateWithFlags(&pool.stream,
					     cudaStreamNonBlocking));
		pool_alloc(&pool, 2 * MIB, &q);
		export_kind("pool", q, 2 * MIB, 0);
		pool_release(&pool, q);
		RT(cudaStreamDestroy(pool.stream));
	}
	if (vmm_supported()) {
		vmm_alloc(&v);
		export_kind("vmm", v.va, v.size, 1);
		vmm_free(&v);
	}
	CU(cuMemHostAlloc(&h, 2 * MIB, 0));
	export_kind("hostalloc", (CUdeviceptr)(uintptr_t)h, 2 * MIB, 0);
	CU(cuMemFreeHost(h));
	if (dev_attr(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, dev0)) {
		CU(cuMemAllocManaged(&d, 2 * MIB, CU_MEM_ATTACH_GLOBAL));
		export_kind("managed", d, 2 * MIB, 0);
		CU(cuMemFree(d));
	}
	/* Two small allocations in one 64 KiB page: the page spans both. */
	CU(cuMemAlloc(&a, 512));
	CU(cuMemAlloc(&b, 512));
	export_case("suballoc", "512 B allocation", a, 0, 512);
	export_case("suballoc", "its 4 KiB page",
		    a & ~(CUdeviceptr)(4 * KIB - 1), 0, 4 * KIB);
	export_case("suballoc", "its 64 KiB page",
		    a & ~(CUdeviceptr)(64 * KIB - 1), 0, 64 * KIB);
	CU(cuMemFree(a));
	CU(cuMemFree(b));
}

/* ====================================================================
 * Sub-allocations sharing a 64 KiB page
 * ==================================================================== */

static void test_gpu_suballoc_cumem(void **state)
{
	struct gdrc_mr_info ia, ib, ib2, ia2;
	struct gdrc_mr *ma, *mb, *mb2, *ma2;
	CUdeviceptr a, b, base = 0;
	struct gdrc_ctx *ctx;
	size_t size = 0;
	uint64_t hits;

	(void)state;
	CU(cuMemAlloc(&a, 256));
	CU(cuMemAlloc(&b, 256));
	print_message("    a %#llx b %#llx\n", (unsigned long long)a,
		      (unsigned long long)b);
	if (a / GPU_PAGE != b / GPU_PAGE) {
		CU(cuMemFree(b));
		CU(cuMemFree(a));
		print_message("    not in one 64 KiB page\n");
		skip();
	}
	CU(cuMemGetAddressRange(&base, &size, a));
	assert_int_equal(base, a);
	assert_int_equal(size, 256);
	CU(cuMemGetAddressRange(&base, &size, b));
	assert_int_equal(base, b);
	assert_int_equal(size, 256);

	ctx = ctx_open_env(env_hooks_none);
	ma = get(ctx, a, 256, &ia);
	mb = get(ctx, b, 256, &ib);
	print_mr("a", &ia);
	print_mr("b", &ib);
	assert_true(ia.id != ib.id);
	assert_true(ia.buffer_id != ib.buffer_id);
	check_whole(&ia, a, 256, GDRC_PTR_DEVICE, 0);
	check_whole(&ib, b, 256, GDRC_PTR_DEVICE, 0);
	assert_int_equal(ia.addr, ib.addr); /* the same registered page */
	gdrc_mr_put(ctx, mb);
	gdrc_mr_put(ctx, ma);

	/* b freed and reallocated: new registration; a untouched. */
	CU(cuMemFree(b));
	if (!realloc_same_va(&galloc_cumem, b, 256)) {
		gdrc_fini(ctx);
		CU(cuMemFree(a));
		skip();
	}
	mb2 = get(ctx, b, 256, &ib2);
	print_mr("b again", &ib2);
	assert_true(ib2.id != ib.id);
	assert_true(ib2.id != ia.id);
	assert_int_equal(ib2.buffer_id, buffer_id_of(b));
	assert_true(ib2.buffer_id != ib.buffer_id);
	assert_true(stat_of(ctx, GDRC_STAT_INV_TAG_CHECK) >= 1);

	hits = stat_of(ctx, GDRC_STAT_HITS);
	ma2 = get(ctx, a, 256, &ia2);
	assert_int_equal(ia2.id, ia.id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), hits + 1);
	gdrc_mr_put(ctx, ma2);
	gdrc_mr_put(ctx, mb2);
	gdrc_fini(ctx);
	CU(cuMemFree(b));
	CU(cuMemFree(a));
}

/* ====================================================================
 * GDRC_VALIDATE: driver calls on hits
 * ==================================================================== */

/* HIT_LOOPS get/put hits on one registration; checks_per_hit: 0 (hooks)
 * or at least 1 (always).  Host hooks off: no event may send a hit
 * through the miss path, where it is not tag-checked. */
static void validate_case(const char *mode, int checks_per_hit)
{
	const char *const env[] = { "GDRC_VALIDATE", mode, "GDRC_MEM_HOOKS",
				    "none", NULL };
	struct gdrc_mr_info info;
	struct gdrc_mr *mr, *hit;
	struct gdrc_ctx *ctx;
	uint64_t checks;
	CUdeviceptr p;

	CU(cuMemAlloc(&p, MIB));
	ctx = ctx_open_env(env);
	mr = get(ctx, p, MIB, &info);
	assert_int_equal(!!(info.flags & GDRC_MR_INFO_TAG_CHECKED),
			 checks_per_hit);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), 0);
	checks = stat_of(ctx, GDRC_STAT_TAG_CHECKS);

	for (int i = 0; i < HIT_LOOPS; i++) {
		struct gdrc_mr_info hi;

		hit = get(ctx, p + (CUdeviceptr)(i % 16) * 4096, 64, &hi);
		assert_int_equal(hi.id, info.id);
		gdrc_mr_put(ctx, hit);
	}
	checks = stat_of(ctx, GDRC_STAT_TAG_CHECKS) - checks;
	print_message("    GDRC_VALIDATE=%s: %d hits, %llu tag checks\n", mode,
		      HIT_LOOPS, (unsigned long long)checks);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), HIT_LOOPS);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 1);
	if (checks_per_hit)
		assert_true(checks >= HIT_LOOPS);
	else
		assert_int_equal(checks, 0);
	gdrc_fini(ctx);
	CU(cuMemFree(p));
}

static void test_gpu_validate_hooks_cumem(void **state)
{
	(void)state;
	validate_case("hooks", 0);
}

static void test_gpu_validate_always_cumem(void **state)
{
	(void)state;
	validate_case("always", 1);
}

/* ====================================================================
 * Explicit invalidation, second device
 * ==================================================================== */

static void test_gpu_invalidate_cumem(void **state)
{
	struct gdrc_mr_info i1, i2, q;
	struct gdrc_mr *mr1, *mr2;
	struct gdrc_ctx *ctx;
	CUdeviceptr p;

	(void)state;
	CU(cuMemAlloc(&p, MIB));
	ctx = ctx_open();
	mr1 = get(ctx, p, MIB, &i1);
	GD(gdrc_invalidate(ctx, vp(p + 100), 10));
	GD(gdrc_mr_query(mr1, &q)); /* still valid for its holder */
	assert_true(q.flags & GDRC_MR_INFO_INVALIDATED);
	assert_false(q.flags & GDRC_MR_INFO_CACHED);
	assert_int_equal(stat_of(ctx, GDRC_STAT_INV_EXPLICIT), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_INVALIDATIONS), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);

	mr2 = get(ctx, p, MIB, &i2);
	assert_true(i2.id != i1.id);
	assert_int_equal(i2.buffer_id, i1.buffer_id);
	check_whole(&i2, p, MIB, GDRC_PTR_DEVICE, 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISS_INVALIDATED), 1);
	gdrc_mr_put(ctx, mr1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_DEREGS), 1);
	gdrc_mr_put(ctx, mr2);
	gdrc_fini(ctx);
	CU(cuMemFree(p));
}

/* Device 1 and its primary context, retained (the caller releases it);
 * the test skips on a machine with one device. */
static void device1(CUdevice *dev_p, CUcontext *ctx_p)
{
	if (ndevices < 2) {
		print_message("    one device only\n");
		skip();
	}
	CU(cuDeviceGet(dev_p, 1));
	CU(cuDevicePrimaryCtxRetain(ctx_p, *dev_p));
}

static void test_gpu_second_device_cumem(void **state)
{
	struct gdrc_mr_info info;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	CUcontext pctx1;
	CUdevice dev1;
	CUdeviceptr p;

	(void)state;
	device1(&dev1, &pctx1);
	CU(cuCtxSetCurrent(pctx1));
	CU(cuMemAlloc(&p, MIB));
	ctx = ctx_open();
	query_gpu(ctx, p, GDRC_PTR_DEVICE, 1);
	mr = get(ctx, p, MIB, &info);
	print_mr("device 1", &info);
	check_whole(&info, p, MIB, GDRC_PTR_DEVICE, 1);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	CU(cuMemFree(p));
	CU(cuCtxSetCurrent(pctx0));
	CU(cuDevicePrimaryCtxRelease(dev1));
}

/* What a thread with a given context current (or none) saw of device
 * 1's memory: no cmocka assertion off the test's own thread. */
struct other_dev {
	struct gdrc_ctx *ctx;
	CUcontext current;       /* set in the thread: pctx0, or NULL */
	CUdeviceptr addr[2];     /* device 1's: plain, pool */
	struct gdrc_mr_info info[2];
	gdrc_status_t status[2];
	CUcontext after;         /* current when the thread was done */
	CUresult cu;
};

static void *other_dev_thread(void *p)
{
	struct other_dev *o = p;
	struct gdrc_mr *mr;

	o->cu = cuCtxSetCurrent(o->current);
	for (int i = 0; i < 2 && o->cu == CUDA_SUCCESS; i++) {
		o->status[i] = gdrc_mr_get(o->ctx, vp(o->addr[i]), 4096,
					   ACCESS, 0, &mr);
		if (o->status[i])
			continue;
		gdrc_mr_query(mr, &o->info[i]);
		gdrc_mr_put(o->ctx, mr);
	}
	if (o->cu == CUDA_SUCCESS)
		o->cu = cuCtxGetCurrent(&o->after);
	return NULL;
}

static struct other_dev other_dev_run(struct gdrc_ctx *ctx, CUcontext cur,
				      const CUdeviceptr *addr)
{
	struct other_dev o = { .ctx = ctx, .current = cur,
			       .addr = { addr[0], addr[1] } };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, other_dev_thread, &o), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(o.cu, CUDA_SUCCESS);
	assert_ptr_equal(o.after, cur); /* left as it found it */
	for (int i = 0; i < 2; i++) {
		GD(o.status[i]);
		assert_int_equal(o.info[i].device, 1);
		assert_int_equal(o.info[i].kind,
				 i ? GDRC_PTR_POOL : GDRC_PTR_DEVICE);
		assert_true(o.info[i].flags & GDRC_MR_INFO_SYNC_MEMOPS);
	}
	return o;
}

/*
 * Device 1's memory (cuMemAlloc, and its default memory pool) got, put
 * and freed from threads whose current context is device 0's, or none:
 * the right device, SYNC_MEMOPS set on each allocation, the thread's
 * context as it was, the second thread's gets hits on the first's
 * registrations, and device 1's free (through the hooked cuMemFree, from
 * device 0's thread) removes its registration and nothing else.
 */
static void test_gpu_other_device_from_threads(void **state)
{
	struct other_dev a, b;
	struct gdrc_ctx *ctx;
	CUdeviceptr addr[2];
	CUcontext pctx1;
	CUstream stream;
	CUdevice dev1;
	uint64_t hits;

	(void)state;
	device1(&dev1, &pctx1);
	if (!dev_attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev1)) {
		CU(cuDevicePrimaryCtxRelease(dev1));
		print_message("    device 1 has no memory pools\n");
		skip();
	}
	CU(cuCtxSetCurrent(pctx1));
	CU(cuMemAlloc(&addr[0], MIB));
	CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
	CU(cuMemAllocAsync(&addr[1], MIB, stream));
	CU(cuStreamSynchronize(stream));
	CU(cuCtxSetCurrent(pctx0));
	ctx = ctx_open();

	a = other_dev_run(ctx, pctx0, addr);
	print_mr("device 1 from device 0's thread", &a.info[0]);
	print_mr("device 1 pool from device 0's thread", &a.info[1]);
	CU(cuCtxSetCurrent(pctx1));
	assert_int_equal(sync_memops_of(addr[0]), 1);
	assert_int_equal(sync_memops_of(addr[1]), 1);
	CU(cuCtxSetCurrent(pctx0));
	hits = stat_of(ctx, GDRC_STAT_HITS);
	b = other_dev_run(ctx, NULL, addr);
	for (int i = 0; i < 2; i++)
		assert_int_equal(b.info[i].id, a.info[i].id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), hits + 2);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 2);

	/* Freed from device 0's context: only that registration goes. */
	CU(cuMemFree(addr[0]));
	gdrc_mr_put(ctx, get(ctx, addr[1], 4096, &b.info[1]));
	assert_int_equal(b.info[1].id, a.info[1].id);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 1);
	assert_true(stat_of(ctx, GDRC_STAT_INV_CUDA_HOOK) +
			    stat_of(ctx, GDRC_STAT_INV_TAG_CHECK) >=
		    1);
	gdrc_fini(ctx);
	CU(cuCtxSetCurrent(pctx1));
	CU(cuMemFreeAsync(addr[1], stream));
	CU(cuStreamSynchronize(stream));
	CU(cuStreamDestroy(stream));
	CU(cuCtxSetCurrent(pctx0));
	CU(cuDevicePrimaryCtxRelease(dev1));
}

/* ---- Per-device limits and release, on two devices (issue 18) ---- */

/* n allocations of size on device 1, made in its primary context. */
static void alloc_on1(CUcontext pctx1, CUdeviceptr *p, int n, size_t size)
{
	CU(cuCtxSetCurrent(pctx1));
	for (int i = 0; i < n; i++)
		CU(cuMemAlloc(&p[i], size));
	CU(cuCtxSetCurrent(pctx0));
}

static void free_all(CUdeviceptr *p, int n)
{
	for (int i = 0; i < n; i++)
		CU(cuMemFree(p[i]));
}

/* The end of a two-device case: ctx finished, then device 0's n0
 * allocations and device 1's n1 freed, each in its own context, and
 * device 1's primary context let go of. */
static void two_devices_done(struct gdrc_ctx *ctx, CUdeviceptr *d0, int n0,
			     CUdeviceptr *d1, int n1, CUdevice dev1,
			     CUcontext pctx1)
{
	gdrc_fini(ctx);
	free_all(d0, n0);
	CU(cuCtxSetCurrent(pctx1));
	free_all(d1, n1);
	CU(cuCtxSetCurrent(pctx0));
	CU(cuDevicePrimaryCtxRelease(dev1));
}

/* A get and put from the main thread (device 0's context current):
 * @return what the registration was. */
static struct gdrc_mr_info got(struct gdrc_ctx *ctx, CUdeviceptr p)
{
	struct gdrc_mr_info info;

	gdrc_mr_put(ctx, get(ctx, p, 4096, &info));
	return info;
}

/*
 * GDRC_GPU_MAX_REGIONS=2, each device on its own: device 1's two fill
 * its limit and are left alone while device 0 evicts its least recently
 * used; device 1's third (from device 0's thread) evicts device 1's
 * oldest; with both of device 1's in use, a third is refused with
 * GDRC_ERR_LIMIT and nothing changes on either device.
 */
static void test_gpu_device_limits_regions(void **state)
{
	static const char *const env[] = { "GDRC_GPU_MAX_REGIONS", "2",
					   NULL };
	struct gdrc_mr_info first0, first1, info;
	struct gdrc_mr *held[2], *mr = NULL;
	CUdeviceptr d0[3], d1[3];
	struct gdrc_ctx *ctx;
	CUcontext pctx1;
	CUdevice dev1;

	(void)state;
	device1(&dev1, &pctx1);
	alloc_on1(pctx1, d1, 3, MIB);
	for (int i = 0; i < 3; i++)
		CU(cuMemAlloc(&d0[i], MIB));
	ctx = ctx_open_env(env);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_MAX_REGIONS), 2);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_MAX_REGIONS), 2);

	first1 = got(ctx, d1[0]);
	assert_int_equal(first1.device, 1);
	(void)got(ctx, d1[1]);
	first0 = got(ctx, d0[0]);
	(void)got(ctx, d0[1]);
	(void)got(ctx, d0[2]);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_REGIONS), 2);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_EVICTIONS), 1);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_REGIONS), 2);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_EVICTIONS), 0);
	assert_int_not_equal(got(ctx, d0[0]).id, first0.id);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_EVICTIONS), 0);

	/* Device 1's third: its own oldest goes, device 0's stay. */
	info = got(ctx, d1[2]);
	assert_int_equal(info.device, 1);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_REGIONS), 2);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_EVICTIONS), 1);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_REGIONS), 2);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_EVICTIONS), 2);

	/* Both of device 1's in use: a third is refused, nothing moves. */
	held[0] = get(ctx, d1[1], 4096, NULL);
	held[1] = get(ctx, d1[2], 4096, NULL);
	GD_EXPECT(gdrc_mr_get(ctx, vp(d1[0]), 4096, ACCESS, 0, &mr),
		  GDRC_ERR_LIMIT);
	assert_null(mr);
	assert_int_equal(stat_of(ctx, GDRC_STAT_LIMIT_REJECTS), 1);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_REGIONS), 2);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_REGIONS), 2);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_EVICTIONS), 2);
	gdrc_mr_put(ctx, held[0]);
	gdrc_mr_put(ctx, held[1]);
	info = got(ctx, d1[0]);
	assert_int_not_equal(info.id, first1.id);
	assert_int_equal(info.device, 1);
	two_devices_done(ctx, d0, 3, d1, 3, dev1, pctx1);
}

/*
 * GDRC_GPU_MAX_BYTES=4M, each device on its own: an 8 MiB allocation of
 * device 1 could never fit and is refused without evicting device 1's
 * registration; device 0's 4 MiB are not counted against device 1; each
 * device's pinned bytes are the lengths of its own registrations.
 */
static void test_gpu_device_limits_bytes(void **state)
{
	static const char *const env[] = { "GDRC_GPU_MAX_BYTES", "4M", NULL };
	struct gdrc_mr_info small1, big0;
	struct gdrc_mr *mr = NULL;
	CUdeviceptr d1[2], d0;
	struct gdrc_ctx *ctx;
	CUcontext pctx1;
	CUdevice dev1;

	(void)state;
	device1(&dev1, &pctx1);
	CU(cuCtxSetCurrent(pctx1));
	CU(cuMemAlloc(&d1[0], 2 * MIB));
	CU(cuMemAlloc(&d1[1], 8 * MIB));
	CU(cuCtxSetCurrent(pctx0));
	CU(cuMemAlloc(&d0, 4 * MIB));
	ctx = ctx_open_env(env);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_MAX_BYTES),
			 4 * MIB);
	small1 = got(ctx, d1[0]);
	assert_int_equal(small1.device, 1);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_PINNED_BYTES),
			 small1.length);
	GD_EXPECT(gdrc_mr_get(ctx, vp(d1[1]), 4096, ACCESS, 0, &mr),
		  GDRC_ERR_LIMIT);
	assert_null(mr);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_REGIONS), 1);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_EVICTIONS), 0);
	assert_int_equal(got(ctx, d1[0]).id, small1.id);

	big0 = got(ctx, d0);
	print_mr("device 0, 4 MiB, with device 1 holding 2", &big0);
	assert_int_equal(big0.device, 0);
	assert_int_equal(big0.key_length, 4 * MIB);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_PINNED_BYTES),
			 big0.length);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_PINNED_BYTES),
			 small1.length);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_EVICTIONS), 0);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_EVICTIONS), 0);
	two_devices_done(ctx, &d0, 1, d1, 2, dev1, pctx1);
}

/*
 * gdrc_release_unused on one device of two: device 1's unused
 * registrations go, one held stays and is served; device 0's are left;
 * then device 0's; GDRC_DEVICE_ALL takes the last once it is put.
 */
static void test_gpu_release_unused_devices(void **state)
{
	struct gdrc_mr_info held_info, info;
	CUdeviceptr d0[2], d1[3];
	struct gdrc_ctx *ctx;
	struct gdrc_mr *held;
	CUcontext pctx1;
	CUdevice dev1;
	uint64_t n = 99;

	(void)state;
	device1(&dev1, &pctx1);
	alloc_on1(pctx1, d1, 3, MIB);
	for (int i = 0; i < 2; i++)
		CU(cuMemAlloc(&d0[i], MIB));
	ctx = ctx_open();
	held = get(ctx, d1[0], 4096, &held_info);
	assert_int_equal(held_info.device, 1);
	for (int i = 1; i < 3; i++)
		assert_int_equal(got(ctx, d1[i]).device, 1);
	for (int i = 0; i < 2; i++)
		assert_int_equal(got(ctx, d0[i]).device, 0);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_REGIONS), 3);

	GD(gdrc_release_unused(ctx, 1, &n));
	assert_int_equal(n, 2);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_REGIONS), 1);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_EVICTIONS), 2);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_REGIONS), 2);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_EVICTIONS), 0);
	GD(gdrc_mr_query(held, &info));
	assert_int_equal(got(ctx, d1[0] + 4096).id, held_info.id);

	GD(gdrc_release_unused(ctx, 0, &n));
	assert_int_equal(n, 2);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_REGIONS), 0);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_REGIONS), 1);
	gdrc_mr_put(ctx, held);
	GD(gdrc_release_unused(ctx, GDRC_DEVICE_ALL, &n));
	assert_int_equal(n, 1);
	assert_int_equal(dev_stat_of(ctx, GDRC_DEVICE_ALL,
				     GDRC_DEVICE_STAT_REGIONS), 0);
	two_devices_done(ctx, d0, 2, d1, 3, dev1, pctx1);
}

/*
 * A context made with the driver API (cuCtxCreate), not the primary one:
 * classification, SYNC_MEMOPS and the tag check work the same, and a
 * free and reallocation at the same address in it is never served stale.
 */
static void test_gpu_driver_context_cumem(void **state)
{
	struct gdrc_mr_info a, b;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	CUcontext own, popped;
	CUdeviceptr p, q;
	int tries = 0;

	(void)state;
	CU(cuCtxCreate(&own, NULL, 0, dev0));
	CU(cuMemAlloc(&p, MIB));
	ctx = ctx_open();
	query_gpu(ctx, p, GDRC_PTR_DEVICE, 0);
	mr = get(ctx, p, 64, &a);
	print_mr("own context", &a);
	check_whole(&a, p, MIB, GDRC_PTR_DEVICE, 0);
	assert_true(a.flags & GDRC_MR_INFO_SYNC_MEMOPS);
	assert_int_equal(sync_memops_of(p), 1);
	gdrc_mr_put(ctx, mr);
	CU(cuMemFree(p));
	do {
		CU(cuMemAlloc(&q, MIB));
		if (q == p)
			break;
		CU(cuMemFree(q));
	} while (++tries < 16);
	if (q != p) {
		gdrc_fini(ctx);
		CU(cuCtxPopCurrent(&popped));
		CU(cuCtxDestroy(own));
		print_message("    the VA did not come back\n");
		skip();
	}
	mr = get(ctx, q, 64, &b);
	assert_int_not_equal(b.id, a.id);
	assert_int_not_equal(b.buffer_id, a.buffer_id);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	CU(cuMemFree(q));
	CU(cuCtxPopCurrent(&popped));
	assert_ptr_equal(popped, own);
	CU(cuCtxDestroy(own));
}

/* ====================================================================
 * Setup
 * ==================================================================== */

/* After a test that may leave another context current. */
static int restore_ctx0(void **state)
{
	(void)state;
	return cuCtxSetCurrent(pctx0) == CUDA_SUCCESS ? 0 : -1;
}

static int group_setup(void **state)
{
	int drv = 0, rtv = 0;
	char name[256] = "";
	cudaError_t err;

	(void)state;
	if (gpu_test_ctx0(&dev0, &pctx0, name, sizeof(name), &drv))
		return -1;
	/* The runtime adopts the primary context made current above. */
	err = cudaSetDevice(0);
	if (err == cudaSuccess)
		err = cudaRuntimeGetVersion(&rtv);
	if (err != cudaSuccess) {
		print_error("cuda runtime: %s\n", cudaGetErrorName(err));
		return -1;
	}
	print_message("%s: device 0 %s, %d device(s), driver API %d, "
		      "runtime %d, libgdrcache %s\n",
		      GROUP_NAME, name, ndevices, drv, rtv,
		      gdrc_version_string());
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	return gpu_test_ctx0_release(dev0, pctx0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpu_status_driver),
		cmocka_unit_test(test_gpu_classify_cumem),
		cmocka_unit_test(test_gpu_classify_pool),
		cmocka_unit_test(test_gpu_classify_vmm),
		cmocka_unit_test(test_gpu_classify_managed),
		cmocka_unit_test(test_gpu_classify_hostalloc),
		cmocka_unit_test(test_gpu_classify_malloc),
		cmocka_unit_test(test_gpu_whole_alloc_cumem),
		cmocka_unit_test(test_gpu_range_keys_cumem),
		cmocka_unit_test(test_gpu_past_end_cumem),
		cmocka_unit_test(test_gpu_sync_memops_cumem),
		cmocka_unit_test(test_gpu_sync_memops_vmm),
		cmocka_unit_test(test_gpu_realloc_cumem),
		cmocka_unit_test(test_gpu_realloc_hooked_cumem),
		cmocka_unit_test(test_gpu_realloc_cudart),
		cmocka_unit_test(test_gpu_realloc_pool),
		cmocka_unit_test(test_gpu_realloc_vmm),
		cmocka_unit_test(test_gpu_cuda_hooks_status),
		cmocka_unit_test(test_gpu_freed_through_symbol_cumem),
		cmocka_unit_test(test_gpu_freed_through_cudafree_cudart),
		cmocka_unit_test(test_gpu_freed_through_getprocaddress_cumem),
		cmocka_unit_test(test_gpu_freed_through_dlsym_cumem),
		cmocka_unit_test(
			test_gpu_freed_through_driver_entry_point_cumem),
		cmocka_unit_test(test_gpu_freed_through_cudafreeasync_pool),
		cmocka_unit_test(test_gpu_freed_through_ptsz_pool),
		cmocka_unit_test(test_gpu_freed_through_unmap_vmm),
		cmocka_unit_test(test_gpu_freed_through_cudafreehost_hostalloc),
		cmocka_unit_test(test_gpu_freed_through_hostunregister_malloc),
		cmocka_unit_test(test_gpu_dmabuf_export),
		cmocka_unit_test(test_gpu_suballoc_cumem),
		cmocka_unit_test(test_gpu_validate_hooks_cumem),
		cmocka_unit_test(test_gpu_validate_always_cumem),
		cmocka_unit_test(test_gpu_invalidate_cumem),
		cmocka_unit_test_teardown(test_gpu_second_device_cumem,
					  restore_ctx0),
		cmocka_unit_test_teardown(test_gpu_other_device_from_threads,
					  restore_ctx0),
		cmocka_unit_test_teardown(test_gpu_device_limits_regions,
					  restore_ctx0),
		cmocka_unit_test_teardown(test_gpu_device_limits_bytes,
					  restore_ctx0),
		cmocka_unit_test_teardown(test_gpu_release_unused_devices,
					  restore_ctx0),
		cmocka_unit_test_teardown(test_gpu_driver_context_cumem,
					  restore_ctx0),
	};
	int skip = gpu_test_start(&ndevices);

	if (skip)
		return skip;
	return cmocka_run_group_tests_name(GROUP_NAME, tests, group_setup,
					   group_teardown);
}
