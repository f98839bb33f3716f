/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_loader.h - the CUDA driver, loaded at run time.
 *
 * dlopen("libcuda.so.1") (or GDRC_CUDA_LIBRARY), resolve the entry points
 * into one table, cuInit(0), count devices.  Process-wide, under a mutex:
 * the first gdrc_init that wants CUDA loads it, and it stays loaded (the
 * driver does not support being unloaded).  Without a driver or a device the
 * library still works for host memory; gdrc_cuda_reason() says why GPU
 * support is off.
 *
 * Depends only on log/ and cuda_types.h.
 */
#ifndef GDRC_CUDA_LOADER_H
#define GDRC_CUDA_LOADER_H

#include <gdrcache.h>

#include "cuda/cuda_types.h"

/* Entry points; optional ones (NULL when the driver lacks them) say so. */
struct gdrc_cuda {
	CUresult (*cuInit)(unsigned flags);
	CUresult (*cuDriverGetVersion)(int *version);
	CUresult (*cuDeviceGetCount)(int *count);
	CUresult (*cuDeviceGetAttribute)(int *value, int attr, CUdevice dev);
	CUresult (*cuGetErrorName)(CUresult res, const char **name);
	CUresult (*cuPointerGetAttribute)(void *data, int attr,
					  CUdeviceptr ptr);
	CUresult (*cuPointerGetAttributes)(unsigned n, int *attrs,
					   void **data, CUdeviceptr ptr);
	CUresult (*cuPointerSetAttribute)(const void *value, int attr,
					  CUdeviceptr ptr);
	CUresult (*cuMemRetainAllocationHandle)(
		CUmemGenericAllocationHandle *handle, void *addr);
	CUresult (*cuMemRelease)(CUmemGenericAllocationHandle handle);
	CUresult (*cuCtxPushCurrent)(CUcontext ctx);
	CUresult (*cuCtxPopCurrent)(CUcontext *ctx);
	CUresult (*cuCtxGetCurrent)(CUcontext *ctx);
	CUresult (*cuDevicePrimaryCtxGetState)(CUdevice dev, unsigned *flags,
					       int *active);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
	CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
	CUresult (*cuCtxGetDevice)(CUdevice *dev);
	/* The mapping (VMM) or allocation holding p; needs a context. */
	CUresult (*cuMemGetAddressRange)(CUdeviceptr *base, size_t *size,
					 CUdeviceptr p);
	CUresult (*cuCtxGetFlags)(unsigned *flags);  /* optional */
	CUresult (*cuCtxSetFlags)(unsigned flags);   /* optional, 12.1+ */
	/* optional, 11.7+: a dma-buf fd of a range (handle: an int *) */
	CUresult (*cuMemGetHandleForAddressRange)(void *handle, CUdeviceptr p,
						  size_t size, int type,
						  unsigned long long flags);
	void *handle;                                /* the dlopen handle */
	int driver_version;                          /* cuDriverGetVersion */
	int device_count;
};

/*
 * Load the driver once per process; later calls return the same table
 * (a failed load is retried).  path: NULL for "libcuda.so.1".
 * @return the table, or NULL when GPU support is off (reason logged at
 *         info and kept for gdrc_cuda_reason).  Thread safe.
 */
const struct gdrc_cuda *gdrc_cuda_get(const char *path);

/* Why the last gdrc_cuda_get failed; NULL if the driver is loaded. */
const char *gdrc_cuda_reason(void);

/*
 * The context a driver call about some memory must run in, made current
 * for the call and put back after it.  Some calls need a current context
 * (cuMemGetAddressRange, the dma-buf export: CUDA_ERROR_INVALID_CONTEXT
 * from a thread with none, seen on an H100), and the caller's may be
 * none or another device's.  owner: the memory's context
 * (CU_POINTER_ATTRIBUTE_CONTEXT), else NULL for memory that has none
 * (VMM, pools), which then runs in the caller's context if that is on
 * device, else in device's primary context (retained for the call) if
 * it is active; an inactive one is never created.
 */
struct gdrc_cuda_scope {
	int pushed;       /* a context was pushed: pop it */
	int primary;      /* device's primary context retained: release */
	CUdevice device;
};

/* @return CUDA_SUCCESS, or why no context could be made current. */
CUresult gdrc_cuda_enter(const struct gdrc_cuda *cu, CUcontext owner,
			 int device, struct gdrc_cuda_scope *s);
void gdrc_cuda_leave(const struct gdrc_cuda *cu, struct gdrc_cuda_scope *s);

/* gdrc_cuda_enter for the memory at addr: its context and device asked
 * of the driver first (CONTEXT, DEVICE_ORDINAL).  @return CUDA_SUCCESS,
 * CUDA_ERROR_INVALID_VALUE for memory of no device, or the driver's. */
CUresult gdrc_cuda_enter_mem(const struct gdrc_cuda *cu, uintptr_t addr,
			     struct gdrc_cuda_scope *s);

/* "CUDA_ERROR_..." for res, or "CUresult <n>". */
const char *gdrc_cuda_err(const struct gdrc_cuda *cu, CUresult res);

#endif /* GDRC_CUDA_LOADER_H */
