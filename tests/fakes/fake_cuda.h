/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_cuda.h - control API of the fake CUDA driver, libgdrc_fakecuda.so.
 *
 * Unit tests only.  A test links against the fake and points
 * GDRC_CUDA_LIBRARY at the same file, so the library under test and the
 * test share one instance: the test makes "GPU" allocations here and the
 * library sees them through the cu* entry points.  Everything is thread
 * safe (one mutex).  See fake_cuda.c for what is and is not modelled.
 *
 * A CUdeviceptr of 0 means failure wherever one is returned.  Entry
 * point names (fake_cuda_fail, fake_cuda_calls) are the exported symbol
 * names, e.g. "cuCtxPushCurrent_v2"; the name without "_v2" also works.
 * An unknown name aborts the test.
 */
#ifndef GDRC_FAKE_CUDA_H
#define GDRC_FAKE_CUDA_H

#include "cuda/cuda_types.h"

#define FAKE_CUDA_MAX_DEVICES 8
#define FAKE_CUDA_FIRST_BUFFER_ID 900ULL
#define FAKE_CUDA_DRIVER_VERSION 13000
#define FAKE_CUDA_VA_SIZE (64ULL << 30)		/* device VA reserved at init */
#define FAKE_CUDA_SUBALLOC_STRIDE 512UL		/* small cuMemAlloc spacing */
#define FAKE_CUDA_VMM_GRANULARITY (2UL << 20)

enum fake_cuda_kind {
	FAKE_DEVICE,		/* cuMemAlloc; < 64 KiB sub-allocated 512 B apart */
	FAKE_POOL,		/* cuMemAllocAsync: as DEVICE, MEMPOOL_HANDLE set */
	FAKE_VMM,		/* cuMemCreate + cuMemMap, 2 MiB granularity,
				 * in a reservation of its own (RANGE_*
				 * = its span) that goes with it */
	FAKE_MANAGED,		/* cuMemAllocManaged: DEVICE with IS_MANAGED=1 */
	FAKE_HOST_PINNED,	/* cuMemHostAlloc: real RW host memory, HOST */
};

/* Drop all state (allocations, reservations, call counts, failures,
 * context flags and stacks, init) and set the device count (0..8);
 * BUFFER_IDs keep rising. */
void fake_cuda_reset(int ndevices);

/* Allocate size bytes of kind on device; returns the start or 0.  Never
 * inside a reservation. */
CUdeviceptr fake_cuda_alloc(enum fake_cuda_kind kind, size_t size, int device);

/* As fake_cuda_alloc at exactly va; 0 if any of it is taken (or unusable),
 * a reservation's VA included. */
CUdeviceptr fake_cuda_alloc_at(enum fake_cuda_kind kind, size_t size,
			       int device, CUdeviceptr va);

/* Free the allocation starting at p; 0, or -1 if p starts none.  A VMM
 * mapping is unmapped as by cuMemUnmap; its reservation stays unless
 * fake_cuda_alloc made it. */
int fake_cuda_free(CUdeviceptr p);

/*
 * Call fn(base, size) for every allocation about to be freed, with the
 * allocation's start and size (VMM: the mapping's), by cuMemFree_v2,
 * cuMemFreeAsync(_ptsz), cuMemFreeHost, cuMemUnmap (once per mapping) or
 * fake_cuda_free: before the memory is released (fake_cuda_alloc_range
 * still finds it), never with the fake's mutex held (fn may call
 * fake_cuda_*), never for a free that is refused.  One observer; NULL
 * removes it.  fake_cuda_reset keeps it, and frees nothing through it.
 * The fake libcufile installs its own when loaded.
 */
void fake_cuda_set_free_observer(void (*fn)(CUdeviceptr base, size_t size));

/* The allocation (VMM: the mapping) containing p: 0 and its start, size
 * and device (-1 for FAKE_HOST_PINNED), any of them NULL if not wanted;
 * -1 if p is in none (a hole, malloc'd or freed memory).  Needs no
 * context nor cuInit. */
int fake_cuda_alloc_range(CUdeviceptr p, CUdeviceptr *base, size_t *size,
			  int *device);

/*
 * VMM as the cuMem allocators use it (PyTorch expandable segments,
 * ncclMemAlloc): one VA reservation, mappings of their own physical
 * allocations put in it, maybe with holes between.  In a mapping
 * RANGE_START_ADDR / RANGE_SIZE give the whole reservation and
 * cuMemGetAddressRange_v2 the mapping; a hole reads as in fake_cuda.c.
 * Tests unmap through the entry point cuMemUnmap: whole mappings of one
 * reservation only, one or more, holes between allowed.
 */

/* cuMemAddressReserve: size bytes of VA (a nonzero multiple of
 * FAKE_CUDA_VMM_GRANULARITY), 2 MiB aligned, from the device VA the other
 * allocations use and meeting none of them; nothing mapped.  0 on
 * failure. */
CUdeviceptr fake_cuda_vmm_reserve(size_t size);

/* cuMemCreate + cuMemMap + cuMemSetAccess of a new physical allocation of
 * size bytes on device at va: va and size granularity aligned, wholly in
 * one reservation, over no mapping.  Every map gets a new BUFFER_ID, as
 * in the driver even for the same handle mapped again at the same place.
 * 0, or -1. */
int fake_cuda_vmm_map(CUdeviceptr va, size_t size, int device);

/* cuMemAddressFree: 0, or -1 if va starts no reservation or something is
 * still mapped in it. */
int fake_cuda_vmm_unreserve(CUdeviceptr va);

/* BUFFER_ID of the allocation (for VMM the mapping) containing p, 0 if
 * none (a hole included). */
unsigned long long fake_cuda_buffer_id(CUdeviceptr p);

/* Successful cuPointerSetAttribute(SYNC_MEMOPS) calls on p's allocation
 * (-1 if p is in none). */
int fake_cuda_sync_memops_count(CUdeviceptr p);

/* References taken by cuMemRetainAllocationHandle not yet released. */
int fake_cuda_retained_handles(void);

/* Flags of device's context (0 for a bad ordinal). */
unsigned fake_cuda_ctx_flags(int device);

/* The context of device (one per device, 0..7; only those of present
 * devices can be pushed), NULL outside 0..7. */
CUcontext fake_cuda_ctx(int device);

/* The memory pool of device (MEMPOOL_HANDLE of FAKE_POOL), NULL
 * outside 0..7. */
CUmemoryPool fake_cuda_pool(int device);

/* Whether every device's primary context reads as active (default 1). */
void fake_cuda_set_primary_active(int active);

/* cuDevicePrimaryCtxRetain calls on device not yet released. */
int fake_cuda_primary_refs(int device);

/* What cuInit returns from now on (CUDA_SUCCESS by default). */
void fake_cuda_set_init_result(CUresult r);

/* Change the device count (0..8) without resetting anything else. */
void fake_cuda_set_device_count(int n);

/* The next count calls of fn_name return err and do nothing else;
 * count -1: every call from now on, 0: stop failing. */
void fake_cuda_fail(const char *fn_name, CUresult err, int count);

/* Calls of fn_name so far, failed and refused ones included. */
unsigned long fake_cuda_calls(const char *fn_name);

/* Zero every call count. */
void fake_cuda_calls_reset(void);

/*
 * The driver entry points the fake exports, for tests that call them
 * directly.  Same ABI as the real ones (enums are int here).  Define
 * FAKE_CUDA_NO_DRIVER_PROTOTYPES to leave them out.
 */
#ifndef FAKE_CUDA_NO_DRIVER_PROTOTYPES
CUresult cuInit(unsigned flags);
CUresult cuDriverGetVersion(int *version);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGetAttribute(int *value, int attr, CUdevice dev);
CUresult cuGetErrorName(CUresult res, const char **name);
CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr ptr);
CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data,
				CUdeviceptr ptr);
CUresult cuPointerSetAttribute(const void *value, int attr, CUdeviceptr ptr);
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
				     void *addr);
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size,
				 CUdeviceptr p);
CUresult cuCtxPushCurrent_v2(CUcontext ctx);
CUresult cuCtxPopCurrent_v2(CUcontext *ctx);
CUresult cuCtxGetFlags(unsigned *flags);
CUresult cuCtxSetFlags(unsigned flags);
CUresult cuCtxGetCurrent(CUcontext *ctx);
CUresult cuCtxGetDevice(CUdevice *dev);
CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned *flags,
				    int *active);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size);
CUresult cuMemFree_v2(CUdeviceptr p);
CUresult cuMemFreeAsync(CUdeviceptr p, void *stream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, void *stream);
CUresult cuMemFreeHost(void *p);
CUresult cuMemHostUnregister(void *p);
CUresult cuMemUnmap(CUdeviceptr p, size_t size);
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver,
			     unsigned long long flags, int *status);
CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr p,
				       size_t size, int type,
				       unsigned long long flags);
#endif

#endif /* GDRC_FAKE_CUDA_H */
