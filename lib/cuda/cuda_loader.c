// SPDX-License-Identifier: BSD-3-Clause
/*
 * cuda_loader.c - load the CUDA driver at run time.
 *
 * The driver is optional: without libcuda, without a device, or when
 * cuInit fails, the library works for host memory only and keeps the
 * reason.  Entry points are resolved by their exported names, with the
 * _v2 suffix where the driver ABI has one, so the build needs no CUDA
 * toolkit.  One process-wide table under cuda_lock.  Once loaded, the
 * driver stays loaded for the life of the process: libcuda does not
 * support being unloaded (its threads and atexit handlers stay), and a
 * later GDRC_CUDA_LIBRARY naming another file is ignored.
 *
 * Never called from hook context.  Callers: the API layer (gdrc_init/fini) and
 * classify/ (through the table).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda_loader.h"
#include "gdrc_int.h"
#include "log/log.h"

static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;
/* Under cuda_lock: */
static struct gdrc_cuda cuda_table;
static void *cuda_handle;
static int cuda_loaded;
static int cuda_forked; /* in a fork child: CUDA is not usable */
static pthread_once_t cuda_atfork_once = PTHREAD_ONCE_INIT;
static char cuda_why[256] = "the CUDA driver was not asked for";

struct cuda_sym {
	const char *name;
	size_t offset; /* in struct gdrc_cuda */
	int optional;
};

#define CUDA_SYM(field, name, opt)                                          \
	{ name, offsetof(struct gdrc_cuda, field), opt }

static const struct cuda_sym cuda_syms[] = {
	CUDA_SYM(cuInit, "cuInit", 0),
	CUDA_SYM(cuDriverGetVersion, "cuDriverGetVersion", 0),
	CUDA_SYM(cuDeviceGetCount, "cuDeviceGetCount", 0),
	CUDA_SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute", 0),
	CUDA_SYM(cuGetErrorName, "cuGetErrorName", 0),
	CUDA_SYM(cuPointerGetAttribute, "cuPointerGetAttribute", 0),
	CUDA_SYM(cuPointerGetAttributes, "cuPointerGetAttributes", 0),
	CUDA_SYM(cuPointerSetAttribute, "cuPointerSetAttribute", 0),
	CUDA_SYM(cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle",
		 0),
	CUDA_SYM(cuMemRelease, "cuMemRelease", 0),
	CUDA_SYM(cuCtxPushCurrent, "cuCtxPushCurrent_v2", 0),
	CUDA_SYM(cuCtxPopCurrent, "cuCtxPopCurrent_v2", 0),
	CUDA_SYM(cuCtxGetCurrent, "cuCtxGetCurrent", 0),
	CUDA_SYM(cuDevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState", 0),
	CUDA_SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 0),
	CUDA_SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", 0),
	CUDA_SYM(cuCtxGetDevice, "cuCtxGetDevice", 0),
	CUDA_SYM(cuMemGetAddressRange, "cuMemGetAddressRange_v2", 0),
	CUDA_SYM(cuCtxGetFlags, "cuCtxGetFlags", 1),
	CUDA_SYM(cuCtxSetFlags, "cuCtxSetFlags", 1),
	CUDA_SYM(cuMemGetHandleForAddressRange,
		 "cuMemGetHandleForAddressRange", 1),
};

const char *gdrc_cuda_err(const struct gdrc_cuda *cu, CUresult res)
{
	static __thread char buf[32];
	const char *name = NULL;

	if (cu && cu->cuGetErrorName &&
	    cu->cuGetErrorName(res, &name) == CUDA_SUCCESS && name)
		return name;
	snprintf(buf, sizeof(buf), "CUresult %d", res);
	return buf;
}

CUresult gdrc_cuda_enter(const struct gdrc_cuda *cu, CUcontext owner,
			 int device, struct gdrc_cuda_scope *s)
{
	CUcontext cur = NULL, want = owner;
	CUdevice cur_dev;
	CUresult res;

	*s = (struct gdrc_cuda_scope){ .device = device };
	if (cu->cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
		cur = NULL;
	if (owner ? cur == owner :
		    cur && cu->cuCtxGetDevice(&cur_dev) == CUDA_SUCCESS &&
			    cur_dev == device)
		return CUDA_SUCCESS;
	if (!want) {
		unsigned flags;
		int active = 0;

		/* Retaining an inactive primary context would create one:
		 * hundreds of MiB of the user's GPU memory. */
		res = cu->cuDevicePrimaryCtxGetState(device, &flags, &active);
		if (res != CUDA_SUCCESS)
			return res;
		if (!active)
			return CUDA_ERROR_INVALID_CONTEXT;
		res = cu->cuDevicePrimaryCtxRetain(&want, device);
		if (res != CUDA_SUCCESS)
			return res;
		s->primary = 1;
	}
	res = cu->cuCtxPushCurrent(want);
	if (res != CUDA_SUCCESS) {
		gdrc_cuda_leave(cu, s);
		return res;
	}
	s->pushed = 1;
	return CUDA_SUCCESS;
}

CUresult gdrc_cuda_enter_mem(const struct gdrc_cuda *cu, uintptr_t addr,
			     struct gdrc_cuda_scope *s)
{
	int attrs[] = { CU_POINTER_ATTRIBUTE_CONTEXT,
			CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
	CUcontext owner = NULL;
	int device = -1;
	void *data[] = { &owner, &device };
	CUresult res;

	*s = (struct gdrc_cuda_scope){ 0 };
	res = cu->cuPointerGetAttributes(GDRC_ARRAY_SIZE(attrs), attrs, data,
					 (CUdeviceptr)addr);
	if (res == CUDA_SUCCESS && device < 0)
		res = CUDA_ERROR_INVALID_VALUE;
	if (res != CUDA_SUCCESS)
		return res;
	return gdrc_cuda_enter(cu, owner, device, s);
}

void gdrc_cuda_leave(const struct gdrc_cuda *cu, struct gdrc_cuda_scope *s)
{
	CUcontext popped;

	if (s->pushed)
		cu->cuCtxPopCurrent(&popped);
	if (s->primary)
		cu->cuDevicePrimaryCtxRelease(s->device);
	s->pushed = s->primary = 0;
}

/* Under cuda_lock.  @return 0, or -1 with cuda_why set. */
static int cuda_open(const char *path)
{
	struct gdrc_cuda t = { 0 };
	CUresult res;

	cuda_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!cuda_handle) {
		snprintf(cuda_why, sizeof(cuda_why), "cannot load %s: %s",
			 path, dlerror());
		return -1;
	}
	for (size_t i = 0; i < GDRC_ARRAY_SIZE(cuda_syms); i++) {
		void *fn = dlsym(cuda_handle, cuda_syms[i].name);

		if (!fn && !cuda_syms[i].optional) {
			snprintf(cuda_why, sizeof(cuda_why),
				 "%s lacks %s: driver too old", path,
				 cuda_syms[i].name);
			goto err_close;
		}
		memcpy((char *)&t + cuda_syms[i].offset, &fn, sizeof(fn));
	}
	res = t.cuInit(0);
	if (res != CUDA_SUCCESS) {
		snprintf(cuda_why, sizeof(cuda_why), "cuInit failed: %s",
			 gdrc_cuda_err(&t, res));
		goto err_close;
	}
	res = t.cuDriverGetVersion(&t.driver_version);
	if (res == CUDA_SUCCESS)
		res = t.cuDeviceGetCount(&t.device_count);
	if (res != CUDA_SUCCESS || t.device_count <= 0) {
		snprintf(cuda_why, sizeof(cuda_why), "no CUDA device (%s)",
			 res ? gdrc_cuda_err(&t, res) : "count 0");
		goto err_close;
	}
	t.handle = cuda_handle;
	cuda_table = t;
	gdrc_debug("cuda driver %d loaded from %s, %d device(s)",
		   t.driver_version, path, t.device_count);
	return 0;

err_close:
	dlclose(cuda_handle);
	cuda_handle = NULL;
	return -1;
}

/*
 * CUDA does not survive fork(): a child that uses its parent's driver
 * state gets CUDA_ERROR_NOT_INITIALIZED (seen on an H200).  The child
 * handler runs with only the forking thread alive and takes no lock; it
 * makes cuda_lock usable again, since a thread that held it at the fork
 * (loading the driver, say) is not in the child, and the child reads
 * nothing it guarded but cuda_forked and the reason set under it.
 */
static void cuda_atfork_child(void)
{
	pthread_mutex_init(&cuda_lock, NULL);
	cuda_forked = 1;
	snprintf(cuda_why, sizeof(cuda_why),
		 "in a fork child: CUDA is not usable after fork()");
}

static void cuda_atfork_install(void)
{
	pthread_atfork(NULL, NULL, cuda_atfork_child);
}

const struct gdrc_cuda *gdrc_cuda_get(const char *path)
{
	const struct gdrc_cuda *cu = NULL;

	pthread_once(&cuda_atfork_once, cuda_atfork_install);
	pthread_mutex_lock(&cuda_lock);
	if (cuda_forked) {
		snprintf(cuda_why, sizeof(cuda_why),
			 "in a fork child: CUDA is not usable after fork()");
		gdrc_info("gpu support off: %s", cuda_why);
		pthread_mutex_unlock(&cuda_lock);
		return NULL;
	}
	if (!cuda_loaded && !cuda_open(path ? path : "libcuda.so.1")) {
		cuda_loaded = 1;
		cuda_why[0] = '\0';
	}
	if (cuda_loaded)
		cu = &cuda_table;
	else
		gdrc_info("gpu support off: %s", cuda_why);
	pthread_mutex_unlock(&cuda_lock);
	return cu;
}

const char *gdrc_cuda_reason(void)
{
	const char *why;

	pthread_mutex_lock(&cuda_lock);
	why = cuda_loaded && !cuda_forked ? NULL : cuda_why;
	pthread_mutex_unlock(&cuda_lock);
	return why;
}
