// SPDX-License-Identifier: BSD-3-Clause
/*
 * cufile.c - load libcufile at run time and keep its driver open while a
 * context registers with it (cufile.h).
 *
 * No build-time dependency: the few types the calls need are declared in
 * cufile_types.h.  One process-wide table and one count of contexts under
 * cufile_lock; the driver is opened and closed with the lock held, so a
 * context being created waits for a close in progress rather than racing
 * it.  Never called from hook context.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cufile/cufile.h"
#include "gdrc_int.h"
#include "log/log.h"

static pthread_mutex_t cufile_lock = PTHREAD_MUTEX_INITIALIZER;
/* Under cufile_lock: */
static struct gdrc_cufile cufile_table;
static int cufile_loaded;
static unsigned cufile_users; /* contexts holding the driver open */
static int cufile_forked;     /* a fork child: never use the parent's */
static pthread_once_t cufile_atfork_once = PTHREAD_ONCE_INIT;

struct cufile_sym {
	const char *name;
	size_t offset; /* in struct gdrc_cufile */
};

#define CUFILE_SYM(field) { #field, offsetof(struct gdrc_cufile, field) }

static const struct cufile_sym cufile_syms[] = {
	CUFILE_SYM(cuFileDriverOpen),
	CUFILE_SYM(cuFileDriverClose),
	CUFILE_SYM(cuFileDriverGetProperties),
	CUFILE_SYM(cuFileBufRegister),
	CUFILE_SYM(cuFileBufDeregister),
};

/* The status names that matter to a reader of the log; others by number. */
const char *gdrc_cufile_err(CUfileError_t e)
{
	static __thread char buf[80];
	const char *name;

	switch (e.err) {
	case CU_FILE_SUCCESS: name = "CU_FILE_SUCCESS"; break;
	case CU_FILE_DRIVER_NOT_INITIALIZED:
		name = "CU_FILE_DRIVER_NOT_INITIALIZED"; break;
	case CU_FILE_PLATFORM_NOT_SUPPORTED:
		name = "CU_FILE_PLATFORM_NOT_SUPPORTED"; break;
	case CU_FILE_CUDA_DRIVER_ERROR:
		snprintf(buf, sizeof(buf),
			 "CU_FILE_CUDA_DRIVER_ERROR (5011, CUresult %d)",
			 e.cu_err);
		return buf;
	case CU_FILE_CUDA_POINTER_INVALID:
		name = "CU_FILE_CUDA_POINTER_INVALID"; break;
	case CU_FILE_CUDA_MEMORY_TYPE_INVALID:
		name = "CU_FILE_CUDA_MEMORY_TYPE_INVALID"; break;
	case CU_FILE_CUDA_POINTER_RANGE_ERROR:
		name = "CU_FILE_CUDA_POINTER_RANGE_ERROR"; break;
	case CU_FILE_CUDA_CONTEXT_MISMATCH:
		name = "CU_FILE_CUDA_CONTEXT_MISMATCH"; break;
	case CU_FILE_INVALID_VALUE: name = "CU_FILE_INVALID_VALUE"; break;
	case CU_FILE_MEMORY_ALREADY_REGISTERED:
		name = "CU_FILE_MEMORY_ALREADY_REGISTERED"; break;
	case CU_FILE_MEMORY_NOT_REGISTERED:
		name = "CU_FILE_MEMORY_NOT_REGISTERED"; break;
	case CU_FILE_GPU_MEMORY_PINNING_FAILED:
		name = "CU_FILE_GPU_MEMORY_PINNING_FAILED"; break;
	case CU_FILE_NOMEM_ERROR: name = "CU_FILE_NOMEM_ERROR"; break;
	default: name = "cuFile error"; break;
	}
	snprintf(buf, sizeof(buf), "%s (%d)", name, (int)e.err);
	return buf;
}

/* The child of a fork: cuFile's state is the parent's (CUDA does not
 * survive fork); lock usable again, nothing closed. */
static void cufile_atfork_child(void)
{
	pthread_mutex_init(&cufile_lock, NULL);
	cufile_forked = 1;
	cufile_users = 0;
}

static void cufile_atfork_install(void)
{
	pthread_atfork(NULL, NULL, cufile_atfork_child);
}

/* Under cufile_lock.  @return 0, or -1 with why filled. */
static int cufile_load(const char *path, char *why, size_t why_len)
{
	struct gdrc_cufile t = { 0 };

	t.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!t.handle) {
		snprintf(why, why_len, "cannot load %s: %s", path, dlerror());
		return -1;
	}
	for (size_t i = 0; i < GDRC_ARRAY_SIZE(cufile_syms); i++) {
		void *fn = dlsym(t.handle, cufile_syms[i].name);

		if (!fn) {
			snprintf(why, why_len, "%s lacks %s", path,
				 cufile_syms[i].name);
			dlclose(t.handle);
			return -1;
		}
		memcpy((char *)&t + cufile_syms[i].offset, &fn, sizeof(fn));
	}
	cufile_table = t;
	return 0;
}

/* Under cufile_lock, the driver just opened: its pinned-memory limit. */
static void cufile_read_limit(void)
{
	CUfileDrvProps_t props;
	CUfileError_t e;

	memset(&props, 0, sizeof(props));
	cufile_table.max_pinned_bytes = GDRC_LIMIT_NONE;
	e = cufile_table.cuFileDriverGetProperties(&props);
	if (e.err != CU_FILE_SUCCESS) {
		gdrc_warn("cuFileDriverGetProperties: %s: no per-device "
			  "pinned-memory limit from cuFile",
			  gdrc_cufile_err(e));
		return;
	}
	if (props.max_device_pinned_mem_size)
		cufile_table.max_pinned_bytes =
			(uint64_t)props.max_device_pinned_mem_size << 10;
}

gdrc_status_t gdrc_cufile_get(const char *path,
			      const struct gdrc_cufile **cf_p, char *why,
			      size_t why_len)
{
	gdrc_status_t status = GDRC_OK;
	CUfileError_t e;

	pthread_once(&cufile_atfork_once, cufile_atfork_install);
	pthread_mutex_lock(&cufile_lock);
	if (cufile_forked) {
		snprintf(why, why_len,
			 "in a fork child: cuFile is not usable after fork()");
		status = GDRC_ERR_UNSUPPORTED;
		goto out;
	}
	if (!strcmp(path, "none")) {
		snprintf(why, why_len, "GDRC_CUFILE_LIBRARY=none");
		status = GDRC_ERR_UNSUPPORTED;
		goto out;
	}
	if (!cufile_loaded) {
		if (cufile_load(path, why, why_len)) {
			status = GDRC_ERR_UNSUPPORTED;
			goto out;
		}
		cufile_loaded = 1;
	}
	if (!cufile_users) {
		e = cufile_table.cuFileDriverOpen();
		if (e.err != CU_FILE_SUCCESS) {
			snprintf(why, why_len, "cuFileDriverOpen: %s",
				 gdrc_cufile_err(e));
			status = GDRC_ERR_NO_DEVICE;
			goto out;
		}
		cufile_read_limit();
		gdrc_debug("cuFile driver open (%s)", path);
	}
	cufile_users++;
	*cf_p = &cufile_table;
out:
	pthread_mutex_unlock(&cufile_lock);
	if (status)
		gdrc_error("cufile: %s", why);
	return status;
}

void gdrc_cufile_put(const struct gdrc_cufile *cf, int forked)
{
	CUfileError_t e;

	if (!cf)
		return;
	pthread_mutex_lock(&cufile_lock);
	if (!forked && !cufile_forked && cufile_users && !--cufile_users) {
		e = cufile_table.cuFileDriverClose();
		if (e.err != CU_FILE_SUCCESS)
			gdrc_warn("cuFileDriverClose: %s", gdrc_cufile_err(e));
	}
	pthread_mutex_unlock(&cufile_lock);
}
