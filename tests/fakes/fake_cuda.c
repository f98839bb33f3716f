// SPDX-License-Identifier: BSD-3-Clause
/*
 * fake_cuda.c - a fake CUDA driver, libgdrc_fakecuda.so.  Test-only.
 *
 * What it fakes: the driver entry points libgdrcache resolves (see
 * lib/cuda/cuda_loader.h) plus cuMemGetAddressRange_v2 and
 * cuCtxGetDevice, over a simulated set of devices, contexts and
 * allocations that the tests create through the fake_cuda_* control API
 * (fake_cuda.h).  Behaviour follows what the real driver did on an H200
 * (docs in shared/research/gpu-probe.md) and, for VMM reservations and
 * the context rules, on an H100 with driver 580
 * (docs/probes/vmm_probe-h100-2026-11-25.txt):
 *   - device allocations live in 64 GiB of PROT_NONE address space
 *     reserved once, so they never collide with host memory; nothing
 *     ever touches them;
 *   - cuMemAlloc below 64 KiB is sub-allocated 512 B apart inside one
 *     64 KiB page; larger ones take fresh 64 KiB-aligned VA;
 *   - every allocation gets a new BUFFER_ID (from 900, never reused),
 *     and freeing then allocating the same kind and size gives back the
 *     most recently freed VA (LIFO), as the real allocator does;
 *   - stream-ordered (pool) and VMM allocations have no context, as the
 *     CUDA documentation says for pools and UCX relies on for both;
 *   - an unknown address (malloc'd host memory, freed VA) makes
 *     cuPointerGetAttributes succeed with zeros, and cuPointerGetAttribute
 *     and cuPointerSetAttribute fail with CUDA_ERROR_INVALID_VALUE;
 *   - VMM memory refuses SYNC_MEMOPS with CUDA_ERROR_NOT_SUPPORTED;
 *   - VMM memory is laid out as the cuMem allocators (PyTorch expandable
 *     segments, ncclMemAlloc) lay it out: a VA reservation holding
 *     mappings, each of its own physical allocation, maybe with holes.
 *     Each map creates a new physical allocation and BUFFER_ID (the
 *     driver gives a new id even to the same handle mapped again at the
 *     same address), each cuMemUnmap releases it.  RANGE_START_ADDR and
 *     RANGE_SIZE give the whole reservation, cuMemGetAddressRange_v2
 *     the mapping.  In a hole cuPointerGetAttributes succeeds with
 *     MEMORY_TYPE 0, DEVICE_ORDINAL -2 and the reservation's range;
 *     everything else that takes an address fails there as on an
 *     unknown one.  cuMemUnmap takes only whole mappings of one
 *     reservation, one or more.  fake_cuda_alloc(FAKE_VMM) is a
 *     reservation of its own, wholly mapped, that goes with its mapping;
 *   - cuMemGetAddressRange_v2 and cuMemGetHandleForAddressRange fail with
 *     CUDA_ERROR_INVALID_CONTEXT on a thread with no current context,
 *     whatever the memory.  The export (an fd of /dev/null: the caller
 *     only passes it on and closes it) takes a range inside one
 *     allocation, or over adjacent mappings of one reservation, and,
 *     stricter than the driver, only in the context of the device that
 *     owns the memory, to catch a library exporting in the wrong one.
 * Pinned host memory (FAKE_HOST_PINNED) is real RW anonymous memory, so
 * tests may touch it; fake_cuda_free munmaps it.
 *
 * What it does not fake: any data movement, kernels, streams, memcpy,
 * a real dma-buf, nvidia_p2p, real context semantics beyond a per-thread
 * stack of one context per device, cuMemCreate / cuMemMap as entry
 * points (tests map through the control API), or one physical
 * allocation mapped at several places.
 *
 * Also: call counting and failure injection per entry point, and
 * cuInit's result set by the test.  All state sits under one mutex; the
 * only per-thread state is the current-context stack, which a reset
 * invalidates through a generation number.  mmap and munmap run with the
 * mutex dropped, so a munmap hook that calls back into the driver cannot
 * deadlock.
 *
 * A free observer (fake_cuda_set_free_observer; the fake libcufile's)
 * hears of every allocation about to be freed, by any free entry point,
 * cuMemUnmap (once per mapping) or fake_cuda_free: before the memory is
 * released and with the mutex dropped, so it may query the fake.  The
 * free then looks its allocation up again: a free racing another free
 * of the same memory may tell the observer twice and fail once.
 * fake_cuda_reset drops allocations without telling it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda/cuda_types.h"
#include "fake_cuda.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define CTX_STACK_MAX 32	/* deeper pushes fail with OUT_OF_MEMORY */
#define CTX_VALID_FLAGS 0xffU	/* CU_CTX_SCHED_* .. CU_CTX_SYNC_MEMOPS */
#define FREED_MAX 4096	/* freed VAs remembered for reuse */
#define HANDLE_TAG 0xfa4e000000000000ULL
#define HOLE_ORDINAL (-2)	/* DEVICE_ORDINAL of unmapped reserved VA */

/* ====================================================================
 * State
 * ==================================================================== */

#define FAKE_CUDA_ENTRY_POINTS(X)	\
	X(cuInit)			\
	X(cuDriverGetVersion)		\
	X(cuDeviceGetCount)		\
	X(cuDeviceGetAttribute)		\
	X(cuGetErrorName)		\
	X(cuPointerGetAttribute)	\
	X(cuPointerGetAttributes)	\
	X(cuPointerSetAttribute)	\
	X(cuMemRetainAllocationHandle)	\
	X(cuMemRelease)			\
	X(cuMemGetAddressRange_v2)	\
	X(cuCtxPushCurrent_v2)		\
	X(cuCtxPopCurrent_v2)		\
	X(cuCtxGetFlags)		\
	X(cuCtxSetFlags)		\
	X(cuCtxGetCurrent)		\
	X(cuCtxGetDevice)		\
	X(cuDevicePrimaryCtxGetState)	\
	X(cuDevicePrimaryCtxRetain)	\
	X(cuDevicePrimaryCtxRelease_v2)	\
	X(cuMemAlloc_v2)		\
	X(cuMemFree_v2)			\
	X(cuMemFreeAsync)		\
	X(cuMemFreeHost)		\
	X(cuMemHostUnregister)		\
	X(cuMemUnmap)			\
	X(cuGetProcAddress_v2)		\
	X(cuMemGetHandleForAddressRange)

enum fn_id {
#define X(name) FN_##name,
	FAKE_CUDA_ENTRY_POINTS(X)
#undef X
	FN_COUNT
};

static const char *const fn_names[FN_COUNT] = {
#define X(name) [FN_##name] = #name,
	FAKE_CUDA_ENTRY_POINTS(X)
#undef X
};

struct fn_state {
	unsigned long calls;
	CUresult fail_err;
	int fail_left;		/* -1: forever */
};

/* The opaque driver types, defined here: their addresses are handles. */
struct CUctx_st {
	unsigned flags;
};

struct CUmemPoolHandle_st {
	char unused;
};

/* A VMM mapping is a fake_alloc (FAKE_VMM) inside one of these. */
struct fake_resv {
	CUdeviceptr start;
	size_t size;
	bool implicit;		/* fake_cuda_alloc's: goes with its mapping */
};

struct fake_alloc {
	CUdeviceptr start;
	size_t size;		/* as asked (VMM: the mapping's size) */
	size_t span;		/* VA it occupies: size rounded up */
	enum fake_cuda_kind kind;
	int device;
	unsigned long long buffer_id;
	int sync_count;		/* successful SYNC_MEMOPS sets */
	bool sync_on;		/* last SYNC_MEMOPS value set */
	CUmemGenericAllocationHandle handle;	/* VMM only */
};

/* A freed allocation whose VA the next like allocation takes again. */
struct freed_va {
	CUdeviceptr start;
	size_t size;
	enum fake_cuda_kind kind;
	int device;
};

struct handle_ref {
	CUmemGenericAllocationHandle handle;
	int refs;
};

/* The 64 KiB page that small DEVICE / POOL allocations are cut from. */
struct small_page {
	CUdeviceptr start;	/* 0: none open */
	size_t used;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
	int ndevices;
	bool initialised;
	bool primary_inactive;	/* fake_cuda_set_primary_active(0) */
	int primary_refs[FAKE_CUDA_MAX_DEVICES]; /* retains not released */
	CUresult init_result;
	unsigned gen;		/* bumped by reset: drops every context stack */
	unsigned long long next_buffer_id;

	CUdeviceptr va_base, va_end, va_next;

	struct fake_alloc *allocs;	/* sorted by start, disjoint spans */
	size_t nallocs, allocs_cap;
	/* Sorted by start, disjoint; each VMM allocation lies in one. */
	struct fake_resv *resvs;
	size_t nresvs, resvs_cap;
	struct freed_va *freed;		/* a stack: most recent last */
	size_t nfreed, freed_cap;
	struct handle_ref *handles;
	size_t nhandles, handles_cap;
	struct small_page small[2][FAKE_CUDA_MAX_DEVICES];	/* DEVICE, POOL */

	struct fn_state fn[FN_COUNT];
	struct CUctx_st ctx[FAKE_CUDA_MAX_DEVICES];
	struct CUmemPoolHandle_st pool[FAKE_CUDA_MAX_DEVICES];
} st = {
	.ndevices = 1,
	.next_buffer_id = FAKE_CUDA_FIRST_BUFFER_ID,
};

/* Told of each allocation about to be freed; guarded by lock, called
 * without it.  Not cleared by fake_cuda_reset. */
static void (*free_observer)(CUdeviceptr base, size_t size);

static __thread struct {
	unsigned gen;
	int depth;
	CUcontext stack[CTX_STACK_MAX];
} tls;

static void lock_state(void)
{
	pthread_mutex_lock(&lock);
}

static void unlock_state(void)
{
	pthread_mutex_unlock(&lock);
}

static void *grow(void *arr, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	void *p;

	if (need <= *cap)
		return arr;
	ncap = *cap ? *cap * 2 : 16;
	while (ncap < need)
		ncap *= 2;
	p = realloc(arr, ncap * elem);
	if (!p) {
		fprintf(stderr, "fake_cuda: out of memory\n");
		abort();
	}
	*cap = ncap;
	return p;
}

static int clamp_devices(int n)
{
	if (n < 0)
		return 0;
	return n > FAKE_CUDA_MAX_DEVICES ? FAKE_CUDA_MAX_DEVICES : n;
}

/* Reserve the device VA range on first use; lock held. */
/* FAKE_CUDA_VA_SIZE, or FAKE_CUDA_VA_GIB GiB from the environment
 * (valgrind refuses a 64 GiB reservation). */
static size_t va_size(void)
{
	const char *g = getenv("FAKE_CUDA_VA_GIB");
	unsigned long v = g ? strtoul(g, NULL, 10) : 0;

	return v ? (size_t)v << 30 : (size_t)FAKE_CUDA_VA_SIZE;
}

static void ensure_va(void)
{
	size_t size = va_size();
	void *p;

	if (st.va_base)
		return;
	p = mmap(NULL, size, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		perror("fake_cuda: reserving device VA");
		abort();
	}
	/* Start on a 2 MiB boundary so every kind's alignment is easy. */
	st.va_base = ALIGN_UP((CUdeviceptr)(uintptr_t)p,
			      FAKE_CUDA_VMM_GRANULARITY);
	st.va_end = (CUdeviceptr)(uintptr_t)p + size;
	st.va_next = st.va_base;
}

/* ====================================================================
 * The allocation table
 * ==================================================================== */

/*
 * Index of the last of n elements of elem bytes, sorted by the
 * CUdeviceptr at offset off in each, that starts at or below p, or -1.
 * One search for both tables.
 */
static long find_le_in(const void *arr, size_t n, size_t elem, size_t off,
		       CUdeviceptr p)
{
	long lo = 0, hi = (long)n - 1, best = -1;

	while (lo <= hi) {
		long mid = lo + (hi - lo) / 2;
		CUdeviceptr start;

		memcpy(&start, (const char *)arr + mid * elem + off,
		       sizeof(start));
		if (start <= p) {
			best = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return best;
}

/* Index of the last allocation starting at or below p, or -1. */
static long find_le(CUdeviceptr p)
{
	return find_le_in(st.allocs, st.nallocs, sizeof(*st.allocs),
			  offsetof(struct fake_alloc, start), p);
}

/* Index of the last reservation starting at or below p, or -1. */
static long resv_find_le(CUdeviceptr p)
{
	return find_le_in(st.resvs, st.nresvs, sizeof(*st.resvs),
			  offsetof(struct fake_resv, start), p);
}

/* The reservation holding p, or NULL. */
static struct fake_resv *resv_lookup(CUdeviceptr p)
{
	long i = resv_find_le(p);

	if (i < 0 || p - st.resvs[i].start >= st.resvs[i].size)
		return NULL;
	return &st.resvs[i];
}

/* The allocation whose [start, start + size) holds p, or NULL. */
static struct fake_alloc *lookup(CUdeviceptr p)
{
	long i = find_le(p);

	if (i < 0 || p - st.allocs[i].start >= st.allocs[i].size)
		return NULL;
	return &st.allocs[i];
}

/* Whether any allocation's span meets [va, va + span); span != 0. */
static bool alloc_meets(CUdeviceptr va, size_t span)
{
	long i = find_le(va + span - 1);

	return i >= 0 && st.allocs[i].start + st.allocs[i].span > va;
}

/*
 * The end of the furthest allocation or reservation that meets
 * [va, va + span), 0 if none does; span != 0.  Both tables count: no
 * allocation may land inside a reservation, even in a hole.
 */
static CUdeviceptr taken_end(CUdeviceptr va, size_t span)
{
	CUdeviceptr last = va + span - 1, end = 0, e;
	long i;

	i = find_le(last);
	if (i >= 0) {
		e = st.allocs[i].start + st.allocs[i].span;
		if (e > va)
			end = e;
	}
	i = resv_find_le(last);
	if (i >= 0) {
		e = st.resvs[i].start + st.resvs[i].size;
		if (e > va && e > end)
			end = e;
	}
	return end;
}

/* Whether [va, va + span) is unusable or meets anything taken. */
static bool range_taken(CUdeviceptr va, size_t span)
{
	if (!va || !span || va + span < va)
		return true;
	return taken_end(va, span) != 0;
}

static struct fake_alloc *insert_alloc(CUdeviceptr start, size_t size,
				       size_t span, enum fake_cuda_kind kind,
				       int device)
{
	long pos = find_le(start) + 1;
	struct fake_alloc *a;

	st.allocs = grow(st.allocs, &st.allocs_cap, st.nallocs + 1,
			 sizeof(*st.allocs));
	memmove(&st.allocs[pos + 1], &st.allocs[pos],
		(st.nallocs - pos) * sizeof(*st.allocs));
	st.nallocs++;
	a = &st.allocs[pos];
	memset(a, 0, sizeof(*a));
	a->start = start;
	a->size = size;
	a->span = span;
	a->kind = kind;
	a->device = device;
	a->buffer_id = st.next_buffer_id++;
	if (kind == FAKE_VMM)
		a->handle = HANDLE_TAG | a->buffer_id;
	return a;
}

static void remove_alloc(struct fake_alloc *a)
{
	size_t pos = a - st.allocs;

	memmove(a, a + 1, (st.nallocs - pos - 1) * sizeof(*a));
	st.nallocs--;
}

static void insert_resv(CUdeviceptr start, size_t size, bool implicit)
{
	long pos = resv_find_le(start) + 1;
	struct fake_resv *r;

	st.resvs = grow(st.resvs, &st.resvs_cap, st.nresvs + 1,
			sizeof(*st.resvs));
	memmove(&st.resvs[pos + 1], &st.resvs[pos],
		(st.nresvs - pos) * sizeof(*st.resvs));
	st.nresvs++;
	r = &st.resvs[pos];
	r->start = start;
	r->size = size;
	r->implicit = implicit;
}

static void remove_resv(struct fake_resv *r)
{
	size_t pos = r - st.resvs;

	memmove(r, r + 1, (st.nresvs - pos - 1) * sizeof(*r));
	st.nresvs--;
}

/* Remember a's VA for the next like allocation (LIFO). */
static void remember_freed(const struct fake_alloc *a)
{
	if (st.nfreed == FREED_MAX) {	/* forget the oldest quarter */
		st.nfreed -= FREED_MAX / 4;
		memmove(st.freed, st.freed + FREED_MAX / 4,
			st.nfreed * sizeof(*st.freed));
	}
	st.freed = grow(st.freed, &st.freed_cap, st.nfreed + 1,
			sizeof(*st.freed));
	st.freed[st.nfreed].start = a->start;
	st.freed[st.nfreed].size = a->size;
	st.freed[st.nfreed].kind = a->kind;
	st.freed[st.nfreed].device = a->device;
	st.nfreed++;
}

/* Index of the first allocation that ends above p. */
static long first_ending_above(CUdeviceptr p)
{
	long i = find_le(p);

	if (i >= 0 && st.allocs[i].start + st.allocs[i].span > p)
		return i;
	return i + 1;
}

/*
 * cuMemUnmap of [p, p + size), inside one reservation.  Every mapping it
 * meets must lie wholly inside it, and it must meet one at least; holes
 * between them are fine.  The driver refuses a partial unmap and changes
 * nothing, and one call over several whole adjacent mappings unmaps them
 * all (driver 580).  The physical allocations go too: the allocators
 * release right after unmapping, and the fake keeps no handle unmapped.
 * A reservation of fake_cuda_alloc goes with its mapping, its VA
 * remembered for reuse like any freed allocation's.  unmap_range checks
 * the rules and finds the mappings (indices first..last), unmap_locked
 * does it.  Lock held.
 */
static CUresult unmap_range(CUdeviceptr p, size_t size, long *first_p,
			    long *last_p)
{
	struct fake_resv *r = resv_lookup(p);
	long first, last;

	if (!r || !size || size > r->start + r->size - p)
		return CUDA_ERROR_INVALID_VALUE;
	first = first_ending_above(p);
	last = find_le(p + size - 1);
	if (last < first || st.allocs[first].start < p ||
	    st.allocs[last].start + st.allocs[last].span > p + size)
		return CUDA_ERROR_INVALID_VALUE;
	*first_p = first;
	*last_p = last;
	return CUDA_SUCCESS;
}

static CUresult unmap_locked(CUdeviceptr p, size_t size)
{
	struct fake_resv *r = resv_lookup(p);
	long first, last;
	CUresult rc;

	rc = unmap_range(p, size, &first, &last);
	if (rc)
		return rc;
	if (r->implicit) {
		remember_freed(&st.allocs[first]);
		remove_resv(r);
	}
	memmove(&st.allocs[first], &st.allocs[last + 1],
		(st.nallocs - last - 1) * sizeof(*st.allocs));
	st.nallocs -= last + 1 - first;
	return CUDA_SUCCESS;
}

/* Pop the most recently freed VA fit for a like allocation, or 0. */
static CUdeviceptr take_freed(enum fake_cuda_kind kind, size_t size,
			      size_t span, int device)
{
	size_t i = st.nfreed;

	while (i-- > 0) {
		struct freed_va *f = &st.freed[i];
		CUdeviceptr va = f->start;

		if (f->kind != kind || f->size != size || f->device != device)
			continue;
		memmove(f, f + 1, (st.nfreed - i - 1) * sizeof(*f));
		st.nfreed--;
		if (!range_taken(va, span))	/* else alloc_at took it */
			return va;
	}
	return 0;
}

/* Fresh span bytes of device VA aligned to align, or 0; lock held. */
static CUdeviceptr va_fresh(size_t span, size_t align)
{
	CUdeviceptr va = ALIGN_UP(st.va_next, align);

	while (va < st.va_end && st.va_end - va >= span) {
		CUdeviceptr end = taken_end(va, span);

		if (!end) {
			st.va_next = va + span;
			return va;
		}
		va = ALIGN_UP(end, align);
	}
	return 0;
}

/* A slot in the open 64 KiB page of (kind, device), or 0. */
static CUdeviceptr va_small(enum fake_cuda_kind kind, int device,
			    size_t span)
{
	struct small_page *pg = &st.small[kind == FAKE_POOL][device];

	for (;;) {
		CUdeviceptr va;

		if (!pg->start || pg->used + span > GDRC_GPU_PAGE_SIZE) {
			pg->start = va_fresh(GDRC_GPU_PAGE_SIZE,
					     GDRC_GPU_PAGE_SIZE);
			pg->used = 0;
			if (!pg->start)
				return 0;
		}
		va = pg->start + pg->used;
		pg->used += span;
		if (!range_taken(va, span))	/* else skip an alloc_at */
			return va;
	}
}

/* Size as RANGE_SIZE reports it and the VA span, for kind; false if bad. */
static bool alloc_geometry(enum fake_cuda_kind kind, size_t size,
			   size_t *rsize, size_t *span)
{
	size_t gran;

	if (!size || size > FAKE_CUDA_VA_SIZE)
		return false;
	switch (kind) {
	case FAKE_DEVICE:
	case FAKE_POOL:
		gran = size < GDRC_GPU_PAGE_SIZE ? FAKE_CUDA_SUBALLOC_STRIDE
						 : GDRC_GPU_PAGE_SIZE;
		*rsize = size;
		*span = ALIGN_UP(size, gran);
		return true;
	case FAKE_MANAGED:
		*rsize = size;
		*span = ALIGN_UP(size, GDRC_GPU_PAGE_SIZE);
		return true;
	case FAKE_VMM:
		*rsize = ALIGN_UP(size, FAKE_CUDA_VMM_GRANULARITY);
		*span = *rsize;
		return true;
	case FAKE_HOST_PINNED:
		*rsize = size;
		*span = ALIGN_UP(size, (size_t)sysconf(_SC_PAGESIZE));
		return true;
	}
	return false;
}

/* Map pinned host memory, at va exactly if va != 0; 0 on failure. */
static CUdeviceptr host_map(CUdeviceptr va, size_t span)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	void *p;

	if (va)
		flags |= MAP_FIXED_NOREPLACE;
	p = mmap((void *)(uintptr_t)va, span, PROT_READ | PROT_WRITE, flags,
		 -1, 0);
	if (p == MAP_FAILED)
		return 0;
	if (va && (CUdeviceptr)(uintptr_t)p != va) {
		/* A kernel without MAP_FIXED_NOREPLACE took it as a hint. */
		munmap(p, span);
		return 0;
	}
	return (CUdeviceptr)(uintptr_t)p;
}

static CUdeviceptr alloc_host(size_t size, size_t span, int device,
			      CUdeviceptr at)
{
	CUdeviceptr va, want = at;

	lock_state();
	if (device >= st.ndevices) {
		unlock_state();
		return 0;
	}
	if (!want)
		want = take_freed(FAKE_HOST_PINNED, size, span, device);
	unlock_state();

	va = host_map(want, span);
	if (!va && !at && want)
		va = host_map(0, span);
	if (!va)
		return 0;

	lock_state();
	if (range_taken(va, span) || device >= st.ndevices) {
		/* A device kind forced here, or a reset shrank the devices. */
		unlock_state();
		munmap((void *)(uintptr_t)va, span);
		return 0;
	}
	insert_alloc(va, size, span, FAKE_HOST_PINNED, device);
	unlock_state();
	return va;
}

static CUdeviceptr do_alloc(enum fake_cuda_kind kind, size_t size,
			    int device, CUdeviceptr at)
{
	size_t rsize, span;
	CUdeviceptr va = 0;

	if (!alloc_geometry(kind, size, &rsize, &span) || device < 0)
		return 0;
	if (kind == FAKE_HOST_PINNED) {
		if (at % (CUdeviceptr)sysconf(_SC_PAGESIZE))
			return 0;
		return alloc_host(rsize, span, device, at);
	}

	lock_state();
	if (device >= st.ndevices)
		goto out;
	ensure_va();
	if (at) {
		va = range_taken(at, span) ? 0 : at;
		goto found;
	}
	va = take_freed(kind, rsize, span, device);
	if (va)
		goto found;
	if (span < GDRC_GPU_PAGE_SIZE)
		va = va_small(kind, device, span);
	else if (kind == FAKE_VMM)
		va = va_fresh(span, FAKE_CUDA_VMM_GRANULARITY);
	else
		va = va_fresh(span, GDRC_GPU_PAGE_SIZE);
found:
	if (va && kind == FAKE_VMM)
		insert_resv(va, span, true);
	if (va)
		insert_alloc(va, rsize, span, kind, device);
out:
	unlock_state();
	return va;
}

/* ====================================================================
 * Control API
 * ==================================================================== */

void fake_cuda_reset(int ndevices)
{
	struct { CUdeviceptr start; size_t span; } *unmap = NULL;
	size_t i, n = 0;

	lock_state();
	if (st.nallocs) {
		unmap = malloc(st.nallocs * sizeof(*unmap));
		if (!unmap) {
			fprintf(stderr, "fake_cuda: out of memory\n");
			abort();
		}
	}
	for (i = 0; i < st.nallocs; i++) {
		if (st.allocs[i].kind != FAKE_HOST_PINNED)
			continue;
		unmap[n].start = st.allocs[i].start;
		unmap[n].span = st.allocs[i].span;
		n++;
	}
	st.nallocs = 0;
	st.nresvs = 0;
	st.nfreed = 0;
	st.nhandles = 0;
	memset(st.small, 0, sizeof(st.small));
	memset(st.fn, 0, sizeof(st.fn));
	memset(st.ctx, 0, sizeof(st.ctx));
	memset(st.primary_refs, 0, sizeof(st.primary_refs));
	st.primary_inactive = false;
	st.va_next = st.va_base;
	st.ndevices = clamp_devices(ndevices);
	st.initialised = false;
	st.init_result = CUDA_SUCCESS;
	st.gen++;
	unlock_state();

	for (i = 0; i < n; i++)
		munmap((void *)(uintptr_t)unmap[i].start, unmap[i].span);
	free(unmap);
}

CUdeviceptr fake_cuda_alloc(enum fake_cuda_kind kind, size_t size, int device)
{
	return do_alloc(kind, size, device, 0);
}

CUdeviceptr fake_cuda_alloc_at(enum fake_cuda_kind kind, size_t size,
			       int device, CUdeviceptr va)
{
	if (!va)
		return 0;
	return do_alloc(kind, size, device, va);
}

int fake_cuda_free(CUdeviceptr p)
{
	void (*fn)(CUdeviceptr, size_t);
	struct fake_alloc *a;
	size_t span, size;
	bool host;
	int ret = 0;

	lock_state();
	a = lookup(p);
	fn = a && a->start == p ? free_observer : NULL;
	size = fn ? a->size : 0;
	unlock_state();
	if (fn)
		fn(p, size);

	lock_state();
	a = lookup(p);
	if (!a || a->start != p) {
		unlock_state();
		return -1;
	}
	host = a->kind == FAKE_HOST_PINNED;
	span = a->span;
	if (a->kind == FAKE_VMM) {
		/* A mapping: unmapped as by cuMemUnmap, which cannot
		 * refuse one whole mapping. */
		ret = unmap_locked(p, span) ? -1 : 0;
	} else {
		remember_freed(a);
		remove_alloc(a);
	}
	unlock_state();

	if (host)
		munmap((void *)(uintptr_t)p, span);
	return ret;
}

void fake_cuda_set_free_observer(void (*fn)(CUdeviceptr base, size_t size))
{
	lock_state();
	free_observer = fn;
	unlock_state();
}

int fake_cuda_alloc_range(CUdeviceptr p, CUdeviceptr *base, size_t *size,
			  int *device)
{
	struct fake_alloc *a;

	lock_state();
	a = lookup(p);
	if (!a) {
		unlock_state();
		return -1;
	}
	if (base)
		*base = a->start;
	if (size)
		*size = a->size;
	if (device)
		*device = a->kind == FAKE_HOST_PINNED ? -1 : a->device;
	unlock_state();
	return 0;
}

CUdeviceptr fake_cuda_vmm_reserve(size_t size)
{
	CUdeviceptr va;

	if (!size || size % FAKE_CUDA_VMM_GRANULARITY ||
	    size > FAKE_CUDA_VA_SIZE)
		return 0;
	lock_state();
	ensure_va();
	va = va_fresh(size, FAKE_CUDA_VMM_GRANULARITY);
	if (va)
		insert_resv(va, size, false);
	unlock_state();
	return va;
}

int fake_cuda_vmm_map(CUdeviceptr va, size_t size, int device)
{
	struct fake_resv *r;
	int ret = -1;

	if (!size || (va | size) % FAKE_CUDA_VMM_GRANULARITY || device < 0)
		return -1;
	lock_state();
	r = resv_lookup(va);
	if (device < st.ndevices && r && size <= r->start + r->size - va &&
	    !alloc_meets(va, size)) {
		insert_alloc(va, size, size, FAKE_VMM, device);
		ret = 0;
	}
	unlock_state();
	return ret;
}

int fake_cuda_vmm_unreserve(CUdeviceptr va)
{
	long i;
	int ret = -1;

	lock_state();
	i = resv_find_le(va);
	if (i >= 0 && st.resvs[i].start == va &&
	    !alloc_meets(va, st.resvs[i].size)) {
		remove_resv(&st.resvs[i]);
		ret = 0;
	}
	unlock_state();
	return ret;
}

unsigned long long fake_cuda_buffer_id(CUdeviceptr p)
{
	struct fake_alloc *a;
	unsigned long long id;

	lock_state();
	a = lookup(p);
	id = a ? a->buffer_id : 0;
	unlock_state();
	return id;
}

int fake_cuda_sync_memops_count(CUdeviceptr p)
{
	struct fake_alloc *a;
	int n;

	lock_state();
	a = lookup(p);
	n = a ? a->sync_count : -1;
	unlock_state();
	return n;
}

int fake_cuda_retained_handles(void)
{
	size_t i;
	int n = 0;

	lock_state();
	for (i = 0; i < st.nhandles; i++)
		n += st.handles[i].refs;
	unlock_state();
	return n;
}

unsigned fake_cuda_ctx_flags(int device)
{
	unsigned flags = 0;

	lock_state();
	if (device >= 0 && device < FAKE_CUDA_MAX_DEVICES)
		flags = st.ctx[device].flags;
	unlock_state();
	return flags;
}

CUcontext fake_cuda_ctx(int device)
{
	if (device < 0 || device >= FAKE_CUDA_MAX_DEVICES)
		return NULL;
	return &st.ctx[device];
}

CUmemoryPool fake_cuda_pool(int device)
{
	if (device < 0 || device >= FAKE_CUDA_MAX_DEVICES)
		return NULL;
	return &st.pool[device];
}

void fake_cuda_set_init_result(CUresult r)
{
	lock_state();
	st.init_result = r;
	unlock_state();
}

void fake_cuda_set_device_count(int n)
{
	lock_state();
	st.ndevices = clamp_devices(n);
	unlock_state();
}

static enum fn_id fn_lookup(const char *name)
{
	size_t i, len = name ? strlen(name) : 0;

	for (i = 0; name && i < FN_COUNT; i++) {
		if (!strcmp(fn_names[i], name))
			return (enum fn_id)i;
		if (!strncmp(fn_names[i], name, len) &&
		    !strcmp(fn_names[i] + len, "_v2"))
			return (enum fn_id)i;
	}
	fprintf(stderr, "fake_cuda: no entry point named \"%s\"\n",
		name ? name : "(null)");
	abort();
}

void fake_cuda_fail(const char *fn_name, CUresult err, int count)
{
	enum fn_id fn = fn_lookup(fn_name);

	lock_state();
	st.fn[fn].fail_err = err;
	st.fn[fn].fail_left = count < 0 ? -1 : count;
	unlock_state();
}

unsigned long fake_cuda_calls(const char *fn_name)
{
	enum fn_id fn = fn_lookup(fn_name);
	unsigned long n;

	lock_state();
	n = st.fn[fn].calls;
	unlock_state();
	return n;
}

void fake_cuda_calls_reset(void)
{
	size_t i;

	lock_state();
	for (i = 0; i < FN_COUNT; i++)
		st.fn[i].calls = 0;
	unlock_state();
}

/* ====================================================================
 * Entry points
 * ==================================================================== */

/*
 * Count a call of fn and say whether it goes ahead: an injected failure
 * first, then CUDA_ERROR_NOT_INITIALIZED where fn needs cuInit.  Lock
 * held.
 */
static CUresult enter(enum fn_id fn, bool need_init)
{
	struct fn_state *s = &st.fn[fn];

	s->calls++;
	if (s->fail_left) {
		if (s->fail_left > 0)
			s->fail_left--;
		return s->fail_err;
	}
	if (need_init && !st.initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	return CUDA_SUCCESS;
}

CUresult cuInit(unsigned flags)
{
	CUresult rc;

	lock_state();
	rc = enter(FN_cuInit, false);
	if (rc)
		goto out;
	if (flags)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (st.init_result != CUDA_SUCCESS)
		rc = st.init_result;
	else if (!st.ndevices)
		rc = CUDA_ERROR_NO_DEVICE;
	else
		st.initialised = true;
out:
	unlock_state();
	return rc;
}

/* Like the real one, this works before cuInit. */
CUresult cuDriverGetVersion(int *version)
{
	CUresult rc;

	lock_state();
	rc = enter(FN_cuDriverGetVersion, false);
	if (!rc) {
		if (version)
			*version = FAKE_CUDA_DRIVER_VERSION;
		else
			rc = CUDA_ERROR_INVALID_VALUE;
	}
	unlock_state();
	return rc;
}

CUresult cuDeviceGetCount(int *count)
{
	CUresult rc;

	lock_state();
	rc = enter(FN_cuDeviceGetCount, true);
	if (!rc) {
		if (count)
			*count = st.ndevices;
		else
			rc = CUDA_ERROR_INVALID_VALUE;
	}
	unlock_state();
	return rc;
}

CUresult cuDeviceGetAttribute(int *value, int attr, CUdevice dev)
{
	CUresult rc;

	lock_state();
	rc = enter(FN_cuDeviceGetAttribute, true);
	if (rc)
		goto out;
	if (!value) {
		rc = CUDA_ERROR_INVALID_VALUE;
	} else if (dev < 0 || dev >= st.ndevices) {
		rc = CUDA_ERROR_INVALID_DEVICE;
	} else {
		switch (attr) {
		case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
		case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
		case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:
			*value = 1;
			break;
		default:
			rc = CUDA_ERROR_INVALID_VALUE;
		}
	}
out:
	unlock_state();
	return rc;
}

static const struct {
	CUresult code;
	const char *name;
} err_names[] = {
#define E(x) { x, #x }
	E(CUDA_SUCCESS),
	E(CUDA_ERROR_INVALID_VALUE),
	E(CUDA_ERROR_OUT_OF_MEMORY),
	E(CUDA_ERROR_NOT_INITIALIZED),
	E(CUDA_ERROR_DEINITIALIZED),
	E(CUDA_ERROR_STUB_LIBRARY),
	E(CUDA_ERROR_NO_DEVICE),
	E(CUDA_ERROR_INVALID_DEVICE),
	E(CUDA_ERROR_INVALID_CONTEXT),
	E(CUDA_ERROR_NOT_FOUND),
	E(CUDA_ERROR_NOT_SUPPORTED),
#undef E
};

/* Like the real one, this works before cuInit. */
CUresult cuGetErrorName(CUresult res, const char **name)
{
	CUresult rc;
	size_t i;

	lock_state();
	rc = enter(FN_cuGetErrorName, false);
	unlock_state();
	if (rc)
		return rc;
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < ARRAY_SIZE(err_names); i++) {
		if (err_names[i].code == res) {
			*name = err_names[i].name;
			return CUDA_SUCCESS;
		}
	}
	*name = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

/* Bytes an attribute's value takes, 0 for one the fake does not know. */
static size_t attr_size(int attr)
{
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		return sizeof(CUcontext);
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		return sizeof(unsigned);
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		return sizeof(CUdeviceptr);
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		return sizeof(void *);
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		return sizeof(unsigned long long);
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		return sizeof(CUdeviceptr);
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		return sizeof(size_t);
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		return sizeof(CUmemoryPool);
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
	case CU_POINTER_ATTRIBUTE_MAPPED:
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		return sizeof(int);
	}
	return 0;
}

/*
 * Store attr of ptr at data: ptr is in allocation a and reservation r,
 * either NULL.  No a but an r is a hole in a reservation, which reports
 * the reservation's range and no device; neither is an unknown address,
 * all zeros.
 */
static void fill_attr(const struct fake_alloc *a, const struct fake_resv *r,
		      int attr, CUdeviceptr ptr, void *data)
{
	union {
		CUcontext ctx;
		CUmemoryPool pool;
		CUdeviceptr dptr;
		void *p;
		unsigned long long ull;
		size_t sz;
		unsigned u;
		int i;
	} v;
	bool no_ctx;

	memset(&v, 0, sizeof(v));
	if (!a && r) {
		if (attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
			v.dptr = r->start;
		else if (attr == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
			v.sz = r->size;
		else if (attr == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
			v.i = HOLE_ORDINAL;
		goto store;
	}
	if (!a)
		goto store;
	no_ctx = a->kind == FAKE_POOL || a->kind == FAKE_VMM;
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		v.ctx = no_ctx ? NULL : &st.ctx[a->device];
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		v.u = a->kind == FAKE_HOST_PINNED ? CU_MEMORYTYPE_HOST
						  : CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		v.dptr = ptr;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		v.p = (void *)(uintptr_t)ptr;
		break;
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		v.i = a->sync_on;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		v.ull = a->buffer_id;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		v.i = a->kind == FAKE_MANAGED;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		v.i = a->device;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		/* VMM: the reservation, holes and other mappings included. */
		v.dptr = r ? r->start : a->start;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		v.sz = r ? r->size : a->size;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		v.i = 1;
		break;
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
		v.i = a->kind == FAKE_DEVICE || a->kind == FAKE_POOL ||
		      a->kind == FAKE_VMM;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		/* cuIpcGetMemHandle works on cuMemAlloc memory only. */
		v.i = a->kind == FAKE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		v.pool = a->kind == FAKE_POOL ? &st.pool[a->device] : NULL;
		break;
	}
store:
	memcpy(data, &v, attr_size(attr));
}

CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr ptr)
{
	struct fake_alloc *a;
	CUresult rc;

	lock_state();
	rc = enter(FN_cuPointerGetAttribute, true);
	if (rc)
		goto out;
	/* In a hole too: the driver refused BUFFER_ID there, and the fake
	 * refuses the rest alike. */
	a = lookup(ptr);
	if (!data || !attr_size(attr) || !a)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		fill_attr(a, resv_lookup(ptr), attr, ptr, data);
out:
	unlock_state();
	return rc;
}

CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data,
				CUdeviceptr ptr)
{
	struct fake_alloc *a;
	struct fake_resv *r;
	CUresult rc;
	unsigned i;

	lock_state();
	rc = enter(FN_cuPointerGetAttributes, true);
	if (rc)
		goto out;
	if (!n || !attrs || !data) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (!attr_size(attrs[i]) || !data[i]) {
			rc = CUDA_ERROR_INVALID_VALUE;
			goto out;
		}
	}
	a = lookup(ptr);
	r = resv_lookup(ptr);
	for (i = 0; i < n; i++)
		fill_attr(a, r, attrs[i], ptr, data[i]);
out:
	unlock_state();
	return rc;
}

CUresult cuPointerSetAttribute(const void *value, int attr, CUdeviceptr ptr)
{
	struct fake_alloc *a;
	CUresult rc;
	int v;

	lock_state();
	rc = enter(FN_cuPointerSetAttribute, true);
	if (rc)
		goto out;
	a = lookup(ptr);
	if (!value || attr != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS || !a) {
		rc = CUDA_ERROR_INVALID_VALUE;
	} else if (a->kind == FAKE_VMM) {
		rc = CUDA_ERROR_NOT_SUPPORTED;
	} else {
		memcpy(&v, value, sizeof(v));
		a->sync_on = v != 0;
		a->sync_count++;
	}
out:
	unlock_state();
	return rc;
}

static struct handle_ref *find_handle(CUmemGenericAllocationHandle h)
{
	size_t i;

	for (i = 0; i < st.nhandles; i++)
		if (st.handles[i].handle == h)
			return &st.handles[i];
	return NULL;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
				     void *addr)
{
	struct fake_alloc *a;
	struct handle_ref *h;
	CUresult rc;

	lock_state();
	rc = enter(FN_cuMemRetainAllocationHandle, true);
	if (rc)
		goto out;
	a = lookup((CUdeviceptr)(uintptr_t)addr);
	if (!handle || !a || a->kind != FAKE_VMM) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	h = find_handle(a->handle);
	if (!h) {
		st.handles = grow(st.handles, &st.handles_cap,
				  st.nhandles + 1, sizeof(*st.handles));
		h = &st.handles[st.nhandles++];
		h->handle = a->handle;
		h->refs = 0;
	}
	h->refs++;
	*handle = a->handle;
out:
	unlock_state();
	return rc;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct handle_ref *h;
	CUresult rc;

	lock_state();
	rc = enter(FN_cuMemRelease, true);
	if (rc)
		goto out;
	h = find_handle(handle);
	if (!h) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (--h->refs == 0)
		*h = st.handles[--st.nhandles];
out:
	unlock_state();
	return rc;
}

/* This thread's current context, NULL if none; lock held. */
static CUcontext current_ctx(void)
{
	if (tls.gen != st.gen) {
		tls.gen = st.gen;
		tls.depth = 0;
	}
	return tls.depth ? tls.stack[tls.depth - 1] : NULL;
}

/* The device whose context ctx is, -1 if none (of those present). */
static int ctx_device(CUcontext ctx)
{
	int i;

	for (i = 0; i < st.ndevices; i++)
		if (ctx == &st.ctx[i])
			return i;
	return -1;
}

/*
 * The allocation holding p; for VMM the mapping, not the reservation.
 * The driver wants a current context, any, even for memory that has none
 * (VMM, pool).
 */
CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size,
				 CUdeviceptr p)
{
	struct fake_alloc *a;
	CUresult rc;

	lock_state();
	rc = enter(FN_cuMemGetAddressRange_v2, true);
	if (rc)
		goto out;
	if (!current_ctx()) {
		rc = CUDA_ERROR_INVALID_CONTEXT;
		goto out;
	}
	a = lookup(p);
	if (!a) {
		rc = CUDA_ERROR_NOT_FOUND;
		goto out;
	}
	if (base)
		*base = a->start;
	if (size)
		*size = a->size;
out:
	unlock_state();
	return rc;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	CUresult rc;

	lock_state();
	rc = enter(FN_cuCtxPushCurrent_v2, true);
	if (rc)
		goto out;
	current_ctx();
	if (!ctx)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (ctx_device(ctx) < 0)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	else if (tls.depth == CTX_STACK_MAX)
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	else
		tls.stack[tls.depth++] = ctx;
out:
	unlock_state();
	return rc;
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	CUresult rc;

	lock_state();
	rc = enter(FN_cuCtxPopCurrent_v2, true);
	if (rc)
		goto out;
	if (!current_ctx()) {
		rc = CUDA_ERROR_INVALID_CONTEXT;
		goto out;
	}
	tls.depth--;
	if (pctx)
		*pctx = tls.stack[tls.depth];
out:
	unlock_state();
	return rc;
}

CUresult cuCtxGetFlags(unsigned *flags)
{
	CUcontext ctx;
	CUresult rc;

	lock_state();
	rc = enter(FN_cuCtxGetFlags, true);
	if (rc)
		goto out;
	ctx = current_ctx();
	if (!flags)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (!ctx)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	else
		*flags = ctx->flags;
out:
	unlock_state();
	return rc;
}

CUresult cuCtxSetFlags(unsigned flags)
{
	CUcontext ctx;
	CUresult rc;

	lock_state();
	rc = enter(FN_cuCtxSetFlags, true);
	if (rc)
		goto out;
	ctx = current_ctx();
	if (!ctx)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	else if (flags & ~CTX_VALID_FLAGS)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		ctx->flags = flags;
out:
	unlock_state();
	return rc;
}

/*
 * The current context, and the devices' primary contexts: the context of
 * device d doubles as its primary context, active unless a test said
 * otherwise (fake_cuda_set_primary_active).
 */
CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	CUresult rc;

	lock_state();
	rc = enter(FN_cuCtxGetCurrent, true);
	if (!rc && !pctx)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (!rc)
		*pctx = current_ctx();
	unlock_state();
	return rc;
}

CUresult cuCtxGetDevice(CUdevice *dev)
{
	CUresult rc;
	int d;

	lock_state();
	rc = enter(FN_cuCtxGetDevice, true);
	if (rc)
		goto out;
	d = ctx_device(current_ctx());
	if (!dev)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (d < 0)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	else
		*dev = d;
out:
	unlock_state();
	return rc;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned *flags,
				    int *active)
{
	CUresult rc;

	lock_state();
	rc = enter(FN_cuDevicePrimaryCtxGetState, true);
	if (!rc && (dev < 0 || dev >= st.ndevices))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (!rc && (!flags || !active))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (!rc) {
		*flags = st.ctx[dev].flags;
		*active = !st.primary_inactive;
	}
	unlock_state();
	return rc;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CUresult rc;

	lock_state();
	rc = enter(FN_cuDevicePrimaryCtxRetain, true);
	if (!rc && (dev < 0 || dev >= st.ndevices))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (!rc && !pctx)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (!rc) {
		*pctx = &st.ctx[dev];
		st.primary_refs[dev]++;
	}
	unlock_state();
	return rc;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	CUresult rc;

	lock_state();
	rc = enter(FN_cuDevicePrimaryCtxRelease_v2, true);
	if (!rc && (dev < 0 || dev >= st.ndevices || !st.primary_refs[dev]))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (!rc)
		st.primary_refs[dev]--;
	unlock_state();
	return rc;
}

void fake_cuda_set_primary_active(int active)
{
	lock_state();
	st.primary_inactive = !active;
	unlock_state();
}

int fake_cuda_primary_refs(int device)
{
	int n;

	lock_state();
	n = device >= 0 && device < FAKE_CUDA_MAX_DEVICES ?
		    st.primary_refs[device] : -1;
	unlock_state();
	return n;
}

/* ====================================================================
 * Allocation and free entry points, and cuGetProcAddress
 * ==================================================================== */

/*
 * The free functions libgdrcache detours begin exactly as libcuda 580's
 * do (push %rbp; mov %rsp,%rbp; push %r12; sub $8,%rsp, measured with
 * tests/gpu/free_probe.c), whatever compiler or sanitizer builds the
 * fake, and then call the C body with the arguments untouched: the
 * detour is tested against the driver's real prologue.
 */
#define FAKE_DRIVER_ENTRY(name, body)                                       \
	__asm__(".text\n.globl " #name "\n.type " #name ", @function\n"      \
		".p2align 4\n" #name ":\n"                                   \
		"\tpush %rbp\n\tmov %rsp, %rbp\n\tpush %r12\n"               \
		"\tsub $8, %rsp\n\tcall " #body "\n\tadd $8, %rsp\n"         \
		"\tpop %r12\n\tpop %rbp\n\tret\n"                            \
		".size " #name ", . - " #name "\n")

/* Free the allocation of one of kinds starting at p. */
static CUresult free_entry(enum fn_id fn, CUdeviceptr p, unsigned kinds)
{
	struct fake_alloc *a;
	CUresult rc;

	lock_state();
	rc = enter(fn, true);
	a = rc ? NULL : lookup(p);
	if (!rc && (!a || a->start != p || !(kinds & (1u << a->kind))))
		rc = CUDA_ERROR_INVALID_VALUE;
	unlock_state();
	if (!rc && fake_cuda_free(p))
		rc = CUDA_ERROR_INVALID_VALUE;
	return rc;
}

#ifndef CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
#define CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED 713
#endif

#define DEVICE_KINDS ((1u << FAKE_DEVICE) | (1u << FAKE_POOL) | \
		      (1u << FAKE_MANAGED))

__attribute__((used)) static CUresult fake_mem_free(CUdeviceptr p)
{
	return free_entry(FN_cuMemFree_v2, p, DEVICE_KINDS);
}

__attribute__((used)) static CUresult fake_mem_free_v1(unsigned int p)
{
	return free_entry(FN_cuMemFree_v2, p, DEVICE_KINDS);
}

__attribute__((used)) static CUresult fake_mem_free_async(CUdeviceptr p,
							   void *stream)
{
	(void)stream;
	return free_entry(FN_cuMemFreeAsync, p, DEVICE_KINDS);
}

__attribute__((used)) static CUresult fake_mem_free_host(void *p)
{
	return free_entry(FN_cuMemFreeHost, (uintptr_t)p,
			  1u << FAKE_HOST_PINNED);
}

/* The memory stays mapped; only the driver forgets it (and the fake
 * leaks the mapping, which a test never reuses). */
__attribute__((used)) static CUresult fake_mem_host_unregister(void *p)
{
	struct fake_alloc *a;
	CUresult rc;

	lock_state();
	rc = enter(FN_cuMemHostUnregister, true);
	a = rc ? NULL : lookup((uintptr_t)p);
	if (!rc && (!a || a->start != (uintptr_t)p ||
		    a->kind != FAKE_HOST_PINNED))
		rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	if (!rc)
		remove_alloc(a);
	unlock_state();
	return rc;
}

/* Whole mappings of one reservation, and their physical allocations
 * (see unmap_locked). */
__attribute__((used)) static CUresult fake_mem_unmap(CUdeviceptr p,
						      size_t size)
{
	void (*fn)(CUdeviceptr, size_t) = NULL;
	struct { CUdeviceptr start; size_t size; } *gone = NULL;
	long first, last, i;
	CUresult rc;

	lock_state();
	rc = enter(FN_cuMemUnmap, true);
	if (!rc && !free_observer)
		rc = unmap_locked(p, size);
	else if (!rc)
		rc = unmap_range(p, size, &first, &last);
	if (rc || !free_observer) {
		unlock_state();
		return rc;
	}
	/* Tell the observer of each mapping, unlocked, then unmap: the
	 * range is checked again, as anything may have changed. */
	fn = free_observer;
	gone = malloc((last - first + 1) * sizeof(*gone));
	if (!gone) {
		fprintf(stderr, "fake_cuda: out of memory\n");
		abort();
	}
	for (i = first; i <= last; i++) {
		gone[i - first].start = st.allocs[i].start;
		gone[i - first].size = st.allocs[i].size;
	}
	unlock_state();
	for (i = 0; i <= last - first; i++)
		fn(gone[i].start, gone[i].size);
	free(gone);

	lock_state();
	rc = unmap_locked(p, size);
	unlock_state();
	return rc;
}

FAKE_DRIVER_ENTRY(cuMemFree_v2, fake_mem_free);
FAKE_DRIVER_ENTRY(cuMemFree, fake_mem_free_v1);
FAKE_DRIVER_ENTRY(cuMemFreeAsync, fake_mem_free_async);
FAKE_DRIVER_ENTRY(cuMemFreeAsync_ptsz, fake_mem_free_async);
FAKE_DRIVER_ENTRY(cuMemFreeHost, fake_mem_free_host);
FAKE_DRIVER_ENTRY(cuMemHostUnregister, fake_mem_host_unregister);
FAKE_DRIVER_ENTRY(cuMemUnmap, fake_mem_unmap);

/* On the current context's device. */
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size)
{
	CUresult rc;
	int device;

	lock_state();
	rc = enter(FN_cuMemAlloc_v2, true);
	device = rc ? -1 : ctx_device(current_ctx());
	if (!rc && device < 0)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	unlock_state();
	if (rc)
		return rc;
	if (!p || !size)
		return CUDA_ERROR_INVALID_VALUE;
	*p = fake_cuda_alloc(FAKE_DEVICE, size, device);
	return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/*
 * As the real one: a name without its _v2 suffix gets the _v2 entry
 * point, per-thread-stream flag (2) the _ptsz one where there is one,
 * and a version below 3020 the 32-bit cuMemFree.
 */
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver,
			     unsigned long long flags, int *status)
{
	char name[128];
	Dl_info self;
	void *h, *fn = NULL;
	CUresult rc;

	lock_state();
	rc = enter(FN_cuGetProcAddress_v2, false);
	unlock_state();
	if (rc)
		return rc;
	if (!sym || !pfn || !dladdr((void *)cuGetProcAddress_v2, &self))
		return CUDA_ERROR_INVALID_VALUE;
	h = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & 2) {
		snprintf(name, sizeof(name), "%s_ptsz", sym);
		fn = dlsym(h, name);
	}
	if (!fn && ver >= 3020) {
		snprintf(name, sizeof(name), "%s_v2", sym);
		fn = dlsym(h, name);
	}
	if (!fn)
		fn = dlsym(h, sym);
	dlclose(h);
	*pfn = fn;
	if (status)
		*status = fn ? 0 : 1;
	return fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/*
 * Whether [p, p + size) may be exported: inside one device allocation,
 * or over adjacent mappings of one reservation with no hole between
 * (driver 580 refuses a range reaching into a hole), host-page aligned,
 * in a current context.  Stricter than the driver, that context must be
 * the owning device's: a library that exports in whatever context the
 * caller left current would work on one GPU and break on the next.
 * Lock held.
 */
static CUresult export_check(const void *handle, CUdeviceptr p, size_t size,
			     int type, unsigned long long flags)
{
	CUcontext ctx = current_ctx();
	CUdeviceptr end = p + size;
	struct fake_alloc *a;
	struct fake_resv *r;
	bool own;
	long i;

	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!handle || !size || flags || end < p ||
	    type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD ||
	    (p | size) % (CUdeviceptr)sysconf(_SC_PAGESIZE))
		return CUDA_ERROR_INVALID_VALUE;
	a = lookup(p);
	if (!a || a->kind == FAKE_HOST_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	own = a->device == ctx_device(ctx);
	if (a->kind != FAKE_VMM) {
		if (end > a->start + a->span)
			return CUDA_ERROR_INVALID_VALUE;
		return own ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
	}
	/* Every mapping starting below end is in r, end being in r. */
	r = resv_lookup(p);
	if (end > r->start + r->size)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = a - st.allocs; st.allocs[i].start + st.allocs[i].span < end;
	     i++) {
		if ((size_t)i + 1 == st.nallocs ||
		    st.allocs[i + 1].start !=
			    st.allocs[i].start + st.allocs[i].span)
			return CUDA_ERROR_INVALID_VALUE;
		own = own && st.allocs[i + 1].device == ctx_device(ctx);
	}
	return own ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* A dma-buf fd: here a fresh fd of /dev/null (the caller only passes it
 * on and closes it). */
CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr p,
				       size_t size, int type,
				       unsigned long long flags)
{
	CUresult rc;
	int fd;

	lock_state();
	rc = enter(FN_cuMemGetHandleForAddressRange, true);
	if (!rc)
		rc = export_check(handle, p, size, type, flags);
	unlock_state();
	if (rc)
		return rc;
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*(int *)handle = fd;
	return CUDA_SUCCESS;
}
