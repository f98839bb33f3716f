// SPDX-License-Identifier: BSD-3-Clause
/*
 * vmm_probe.c - what the driver reports for VMM memory built from several
 * physical allocations, the way cuMem allocators lay it out.
 *
 * A research tool, not a test: it answers the questions the segment-aware
 * GPU registrations (lib/classify, lib/cache) are built on, and prints
 * one line per observation:
 *   - the pointer attributes (BUFFER_ID, RANGE_START/SIZE),
 *     cuMemGetAddressRange and cuMemRetainAllocationHandle in each
 *     segment, at a segment boundary and in a hole of the reservation;
 *   - the dma-buf export over one segment, a run of them, and a range
 *     that reaches into a hole;
 *   - what changes when a segment is remapped (new allocation, the same
 *     handle again, the same handle at another offset), partly unmapped,
 *     or unmapped together with its neighbour;
 *   - stream-ordered pool memory freed and trimmed;
 *   - the same calls from a thread with no current context;
 *   - the cost of the BUFFER_ID query in a VMM segment and in cuMemAlloc
 *     memory.
 *
 * Build: nvcc -O2 -o vmm_probe vmm_probe.c -lcuda -lpthread
 */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024ULL * 1024)

static CUdevice dev;
static CUcontext pctx;
static size_t gran;

#define CHECK(x)                                                          \
	do {                                                              \
		CUresult rc_ = (x);                                       \
		if (rc_ != CUDA_SUCCESS) {                                \
			printf("FATAL %s: %d (line %d)\n", #x, rc_,       \
			       __LINE__);                                 \
			exit(1);                                          \
		}                                                         \
	} while (0)

static CUmemGenericAllocationHandle create(size_t size)
{
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	prop.allocFlags.gpuDirectRDMACapable = 1;
	CHECK(cuMemCreate(&h, size, &prop, 0));
	return h;
}

static void access_rw(CUdeviceptr va, size_t size)
{
	CUmemAccessDesc a;

	memset(&a, 0, sizeof(a));
	a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.location.id = dev;
	a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CHECK(cuMemSetAccess(va, size, &a, 1));
}

/* One line: what the driver says about p (offsets relative to base). */
static void show(const char *what, CUdeviceptr base, CUdeviceptr p)
{
	CUpointer_attribute at[] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		CU_POINTER_ATTRIBUTE_BUFFER_ID,
		CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
		CU_POINTER_ATTRIBUTE_RANGE_SIZE,
		CU_POINTER_ATTRIBUTE_CONTEXT,
		CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
		CU_POINTER_ATTRIBUTE_MAPPED,
	};
	unsigned mt = 0;
	unsigned long long bid = 0, bid1 = 0;
	CUdeviceptr rs = 0, gb = 0;
	size_t rsz = 0, gsz = 0;
	CUcontext c = NULL;
	int ord = -1, ipc = -1, mapped = -1;
	void *d[] = { &mt, &bid, &rs, &rsz, &c, &ord, &ipc, &mapped };
	CUresult r1, r2, r3, r4;
	CUmemGenericAllocationHandle h = 0;

	r1 = cuPointerGetAttributes(8, at, d, p);
	r2 = cuPointerGetAttribute(&bid1, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
	r3 = cuMemGetAddressRange(&gb, &gsz, p);
	r4 = cuMemRetainAllocationHandle(&h, (void *)p);
	if (r4 == CUDA_SUCCESS)
		cuMemRelease(h);
	printf("%-28s +%6.2fM attrs rc=%d type=%u bid=%llu range=+%.2fM/%.2fM "
	       "ctx=%s ord=%d ipc=%d mapped=%d | bid1 rc=%d %llu | "
	       "getrange rc=%d +%.2fM/%.2fM | retain rc=%d h=%#llx\n",
	       what, (double)(p - base) / MIB, r1, mt, bid,
	       rs ? (double)(rs - base) / MIB : -1.0, (double)rsz / MIB,
	       c ? "yes" : "NULL", ord, ipc, mapped, r2, bid1, r3,
	       gb ? (double)(gb - base) / MIB : -1.0, (double)gsz / MIB, r4,
	       (unsigned long long)h);
}

static void dmabuf(const char *what, CUdeviceptr p, size_t len)
{
	int fd = -1;
	CUresult r = cuMemGetHandleForAddressRange(
		&fd, p, len, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);

	printf("%-28s dmabuf %.2fM rc=%d fd=%d\n", what, (double)len / MIB,
	       r, fd);
	if (fd >= 0)
		close(fd);
}

static unsigned long long bid_of(CUdeviceptr p)
{
	unsigned long long b = 0;

	if (cuPointerGetAttribute(&b, CU_POINTER_ATTRIBUTE_BUFFER_ID, p))
		return 0;
	return b;
}

static double ns_per_query(CUdeviceptr p, int n)
{
	struct timespec t0, t1;
	unsigned long long b;

	for (int i = 0; i < 1000; i++)
		cuPointerGetAttribute(&b, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++)
		cuPointerGetAttribute(&b, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n;
}

struct nctx_arg {
	CUdeviceptr vmm, plain;
};

static void *no_context_thread(void *argp)
{
	struct nctx_arg *a = argp;
	CUcontext cur = (CUcontext)1;
	unsigned one = 1;
	int fd = -1;
	CUresult r;

	cuCtxGetCurrent(&cur);
	printf("nctx: current context %s\n", cur ? "SET" : "NULL");
	show("nctx vmm", a->vmm, a->vmm);
	show("nctx cuMemAlloc", a->plain, a->plain);
	r = cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
				  a->plain);
	printf("nctx SYNC_MEMOPS on cuMemAlloc rc=%d\n", r);
	r = cuMemGetHandleForAddressRange(&fd, a->vmm, 2 * MIB,
					  CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
					  0);
	printf("nctx dmabuf vmm rc=%d\n", r);
	if (fd >= 0)
		close(fd);
	fd = -1;
	r = cuMemGetHandleForAddressRange(&fd, a->plain, 2 * MIB,
					  CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
					  0);
	printf("nctx dmabuf cuMemAlloc rc=%d\n", r);
	if (fd >= 0)
		close(fd);
	return NULL;
}

int main(void)
{
	CUmemAllocationProp prop;
	CUdeviceptr va, va2, plain;
	CUmemGenericAllocationHandle ha, hb, hc, hb2, hx;
	unsigned long long a0, b0, c0;
	CUresult r;

	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&pctx, dev));
	CHECK(cuCtxSetCurrent(pctx));
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	CHECK(cuMemGetAllocationGranularity(&gran, &prop,
					    CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	printf("granularity %.2fM\n", (double)gran / MIB);

	/* Layout: A 4M @0, B 4M @4M, C 2M @8M, hole 10M..16M. */
	CHECK(cuMemAddressReserve(&va, 16 * MIB, 0, 0, 0));
	ha = create(4 * MIB);
	hb = create(4 * MIB);
	hc = create(2 * MIB);
	CHECK(cuMemMap(va, 4 * MIB, 0, ha, 0));
	CHECK(cuMemMap(va + 4 * MIB, 4 * MIB, 0, hb, 0));
	CHECK(cuMemMap(va + 8 * MIB, 2 * MIB, 0, hc, 0));
	access_rw(va, 10 * MIB);
	printf("== layout A 4M @0, B 4M @4M, C 2M @8M, hole @10M\n");
	show("A start", va, va);
	show("A end-1", va, va + 4 * MIB - 1);
	show("B start", va, va + 4 * MIB);
	show("B mid", va, va + 6 * MIB);
	show("C start", va, va + 8 * MIB);
	show("hole", va, va + 10 * MIB);
	dmabuf("dmabuf A", va, 4 * MIB);
	dmabuf("dmabuf A..C", va, 10 * MIB);
	dmabuf("dmabuf B..C", va + 4 * MIB, 6 * MIB);
	dmabuf("dmabuf A+2M..B+2M", va + 2 * MIB, 4 * MIB);
	dmabuf("dmabuf A..hole", va, 12 * MIB);
	dmabuf("dmabuf A+64K 64K", va + 65536, 65536);
	a0 = bid_of(va);
	b0 = bid_of(va + 4 * MIB);
	c0 = bid_of(va + 8 * MIB);

	printf("== remap B: unmap, release, create, map, access\n");
	CHECK(cuMemUnmap(va + 4 * MIB, 4 * MIB));
	show("B unmapped", va, va + 4 * MIB);
	show("A after B unmapped", va, va);
	CHECK(cuMemRelease(hb));
	hb2 = create(4 * MIB);
	CHECK(cuMemMap(va + 4 * MIB, 4 * MIB, 0, hb2, 0));
	access_rw(va + 4 * MIB, 4 * MIB);
	show("B remapped", va, va + 4 * MIB);
	printf("bid A %llu->%llu B %llu->%llu C %llu->%llu\n", a0, bid_of(va),
	       b0, bid_of(va + 4 * MIB), c0, bid_of(va + 8 * MIB));

	printf("== C: unmap, map the same handle again at the same place\n");
	CHECK(cuMemUnmap(va + 8 * MIB, 2 * MIB));
	CHECK(cuMemMap(va + 8 * MIB, 2 * MIB, 0, hc, 0));
	access_rw(va + 8 * MIB, 2 * MIB);
	printf("bid C %llu->%llu (same handle, same place)\n", c0,
	       bid_of(va + 8 * MIB));
	CHECK(cuMemAddressReserve(&va2, 8 * MIB, 0, 0, 0));
	CHECK(cuMemMap(va2, 2 * MIB, 0, hc, 0));
	access_rw(va2, 2 * MIB);
	printf("bid C mapped twice: @va %llu @va2 %llu\n", bid_of(va + 8 * MIB),
	       bid_of(va2));
	CHECK(cuMemUnmap(va2, 2 * MIB));

	printf("== one handle at two offsets\n");
	hx = create(4 * MIB);
	r = cuMemMap(va2, 2 * MIB, 0, hx, 0);
	printf("map 2M of a 4M handle at offset 0 rc=%d\n", r);
	if (r == CUDA_SUCCESS) {
		access_rw(va2, 2 * MIB);
		printf("hx offset 0 @va2: bid %llu\n", bid_of(va2));
		CHECK(cuMemUnmap(va2, 2 * MIB));
	}
	r = cuMemMap(va2, 2 * MIB, 2 * MIB, hx, 0);
	printf("map hx offset 2M rc=%d\n", r);
	if (r == CUDA_SUCCESS) {
		access_rw(va2, 2 * MIB);
		printf("hx offset 2M @va2: bid %llu\n", bid_of(va2));
		CHECK(cuMemUnmap(va2, 2 * MIB));
	}
	r = cuMemMap(va2, 4 * MIB, 0, hx, 0);
	if (r == CUDA_SUCCESS) {
		access_rw(va2, 4 * MIB);
		show("hx whole, 2nd half", va2, va2 + 2 * MIB);
		r = cuMemUnmap(va2, 2 * MIB);
		printf("partial unmap (first half of a 4M mapping) rc=%d\n",
		       r);
		show("hx 2nd half after", va2, va2 + 2 * MIB);
		show("hx 1st half after", va2, va2);
		cuMemUnmap(va2, 4 * MIB);
		cuMemUnmap(va2 + 2 * MIB, 2 * MIB);
	}
	cuMemRelease(hx);

	printf("== one unmap over two mappings (B and C)\n");
	r = cuMemUnmap(va + 4 * MIB, 6 * MIB);
	printf("unmap B..C rc=%d\n", r);
	show("B after", va, va + 4 * MIB);
	show("C after", va, va + 8 * MIB);
	show("A after", va, va);

	printf("== no current context\n");
	CHECK(cuMemAlloc(&plain, 4 * MIB));
	{
		pthread_t t;
		struct nctx_arg a = { va, plain };

		pthread_create(&t, NULL, no_context_thread, &a);
		pthread_join(t, NULL);
	}

	printf("== pool: alloc, free, trim\n");
	{
		CUstream s;
		CUdeviceptr p1, p2;
		CUmemoryPool pool;
		unsigned long long b1;

		CHECK(cuStreamCreate(&s, 0));
		CHECK(cuDeviceGetDefaultMemPool(&pool, dev));
		CHECK(cuMemAllocAsync(&p1, 64 * MIB, s));
		CHECK(cuStreamSynchronize(s));
		b1 = bid_of(p1);
		show("pool alloc", p1, p1);
		CHECK(cuMemFreeAsync(p1, s));
		CHECK(cuStreamSynchronize(s));
		show("pool freed", p1, p1);
		CHECK(cuMemPoolTrimTo(pool, 0));
		show("pool trimmed", p1, p1);
		CHECK(cuMemAllocAsync(&p2, 64 * MIB, s));
		CHECK(cuStreamSynchronize(s));
		printf("pool realloc same va %d, bid %llu -> %llu\n", p1 == p2,
		       b1, bid_of(p2));
		CHECK(cuMemFreeAsync(p2, s));
		CHECK(cuStreamSynchronize(s));
	}

	printf("== cost of cuPointerGetAttribute(BUFFER_ID)\n");
	printf("vmm A start %.1f ns, A+3M %.1f ns, cuMemAlloc %.1f ns\n",
	       ns_per_query(va, 2000000), ns_per_query(va + 3 * MIB, 2000000),
	       ns_per_query(plain, 2000000));
	return 0;
}
