/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu_test.h - what the real-GPU cmocka programs share (test_gpu.c,
 * test_gpu_vmm.c): checks of driver and library calls that fail the
 * test with the call, its result and its place, and small helpers.
 * Include after <cmocka.h>, <cuda.h> and <gdrcache.h>.
 */
#ifndef GDRC_GPU_TEST_H
#define GDRC_GPU_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define KIB 1024ULL
#define MIB (1024ULL * KIB)
#define GPU_PAGE (64 * KIB)
#define ACCESS                                                               \
	(GDRC_ACCESS_LOCAL_WRITE | GDRC_ACCESS_REMOTE_WRITE |                \
	 GDRC_ACCESS_REMOTE_READ)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline const char *cu_name(CUresult res)
{
	const char *name = NULL;

	if (cuGetErrorName(res, &name) != CUDA_SUCCESS || !name)
		name = "unknown CUresult";
	return name;
}

static inline void cu_check(CUresult res, const char *call, const char *file,
		     int line)
{
	if (res == CUDA_SUCCESS)
		return;
	print_error("%s:%d: %s failed: %s (%d)\n", file, line, call,
		    cu_name(res), (int)res);
	_fail(file, line);
}

static inline void gd_expect(gdrc_status_t got, gdrc_status_t want,
		      const char *call, const char *file, int line)
{
	if (got == want)
		return;
	print_error("%s:%d: %s returned %s (%d), expected %s (%d)\n", file,
		    line, call, gdrc_status_str(got), (int)got,
		    gdrc_status_str(want), (int)want);
	_fail(file, line);
}

#define CU(call) cu_check((call), #call, __FILE__, __LINE__)
#define GD(call) gd_expect((call), GDRC_OK, #call, __FILE__, __LINE__)
#define GD_EXPECT(call, want)                                                \
	gd_expect((call), (want), #call, __FILE__, __LINE__)

static inline const void *vp(CUdeviceptr p)
{
	return (const void *)(uintptr_t)p;
}

static inline unsigned long long align_down(unsigned long long v,
				     unsigned long long a)
{
	return v & ~(a - 1);
}

static inline unsigned long long align_up(unsigned long long v, unsigned long long a)
{
	return (v + a - 1) & ~(a - 1);
}

static inline int dev_attr(CUdevice_attribute attr, CUdevice dev)
{
	int v = 0;

	CU(cuDeviceGetAttribute(&v, attr, dev));
	return v;
}

static inline unsigned long long buffer_id_of(CUdeviceptr p)
{
	unsigned long long id = 0;

	CU(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p));
	return id;
}

static inline uint64_t stat_of(struct gdrc_ctx *ctx, enum gdrc_stat s)
{
	uint64_t v = 0;

	GD(gdrc_stat_get(ctx, s, &v));
	return v;
}

static inline uint64_t dev_stat_of(struct gdrc_ctx *ctx, int device,
				   enum gdrc_device_stat s)
{
	uint64_t v = 0;

	GD(gdrc_device_stat_get(ctx, device, s, &v));
	return v;
}

static inline void print_mr(const char *what, const struct gdrc_mr_info *i)
{
	print_message("    %s: id %llu buffer id %llu key %#llx+%llu "
		      "registered %#llx+%llu kind %d device %d flags %#x\n",
		      what, (unsigned long long)i->id,
		      (unsigned long long)i->buffer_id,
		      (unsigned long long)i->key_addr,
		      (unsigned long long)i->key_length,
		      (unsigned long long)i->addr,
		      (unsigned long long)i->length, i->kind, i->device,
		      i->flags);
}

/* Knobs the tests depend on; tests set them one context at a time. */
static const char *const gpu_test_knobs[] = {
	"GDRC_VALIDATE",    "GDRC_WHOLE_ALLOC_MAX", "GDRC_MEM_HOOKS",
	"GDRC_BACKEND",     "GDRC_CUDA_LIBRARY",    "GDRC_MAX_REGIONS",
	"GDRC_MAX_BYTES",   "GDRC_GPU_MAX_BYTES",   "GDRC_GPU_MAX_REGIONS",
};

/*
 * Before the tests: clear gpu_test_knobs (so that the caller's
 * environment cannot change what is asserted) and find the devices.
 * @return 0, or 77 (skipped: printed why) without a driver or a GPU.
 */
static inline int gpu_test_start(int *ndevices_p)
{
	CUresult res;
	int n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(gpu_test_knobs); i++)
		unsetenv(gpu_test_knobs[i]);
	res = cuInit(0);
	if (res == CUDA_SUCCESS)
		res = cuDeviceGetCount(&n);
	if (res != CUDA_SUCCESS) {
		printf("skipped: no GPU (cuInit or cuDeviceGetCount: %s, "
		       "CUresult %d)\n", cu_name(res), (int)res);
		return 77;
	}
	if (n < 1) {
		printf("skipped: no GPU (no CUDA device)\n");
		return 77;
	}
	*ndevices_p = n;
	return 0;
}

/* Device 0's primary context, retained and made current; its name and
 * the driver's version.  @return 0, or -1 (printed why). */
static inline int gpu_test_ctx0(CUdevice *dev_p, CUcontext *ctx_p,
				char *name, int name_len, int *driver_p)
{
	CUresult res;

	res = cuDeviceGet(dev_p, 0);
	if (res == CUDA_SUCCESS)
		res = cuDevicePrimaryCtxRetain(ctx_p, *dev_p);
	if (res == CUDA_SUCCESS)
		res = cuCtxSetCurrent(*ctx_p);
	if (res == CUDA_SUCCESS)
		res = cuDeviceGetName(name, name_len, *dev_p);
	if (res == CUDA_SUCCESS)
		res = cuDriverGetVersion(driver_p);
	if (res != CUDA_SUCCESS) {
		print_error("setting up device 0's primary context: %s\n",
			    cu_name(res));
		return -1;
	}
	return 0;
}

/* After the tests: let go of what gpu_test_ctx0 retained.
 * @return 0, or -1. */
static inline int gpu_test_ctx0_release(CUdevice dev, CUcontext ctx)
{
	if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
	    cuDevicePrimaryCtxRelease(dev) != CUDA_SUCCESS)
		return -1;
	return 0;
}

#endif /* GDRC_GPU_TEST_H */
