// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_fake_cufile.c - unit tests for the fake libcufile itself.
 *
 * Other tests trust libcufile.so.0 of tests/fakes/cufile to behave like
 * libcufile 1.15.1 did on an H200 in compatibility mode
 * (shared/research/storage-probe.md); these check that it does, with
 * the exact statuses: a second registration of a base is refused (5023)
 * while overlapping and unaligned interior ones are not, a range past
 * its allocation is refused (5014), the per-GPU pinned limit (5036), a
 * registration that outlives its memory blocks the address the
 * allocator gives back until deregistered, deregistering what starts no
 * registration (5024), implicit driver opens and the use count, file
 * handles, reads and writes on host and fake device memory, which I/Os
 * found a registration, the stream and batch calls, delays spent outside
 * the mutex, failure injection, threads, and that dlopen of the file
 * gives the instance the test links.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake_cuda.h"
#include "fake_cufile.h"

#define KiB 1024UL
#define MiB (1024UL * KiB)
#define P(x) ((void *)(uintptr_t)(x))

/* The test file: FILE_SIZE bytes of pat(), made once for the group. */
#define FILE_SIZE (MiB + 123)

static char file_path[] = "/tmp/test_fake_cufile.XXXXXX";
static int file_fd = -1;

/* ====================================================================
 * Helpers
 * ==================================================================== */

static unsigned char pat(size_t i)
{
	return (unsigned char)(i * 7 + 3);
}

static int group_setup(void **state)
{
	unsigned char *buf;
	size_t i;

	(void)state;
	file_fd = mkstemp(file_path);
	if (file_fd < 0)
		return -1;
	buf = malloc(FILE_SIZE);
	if (!buf)
		return -1;
	for (i = 0; i < FILE_SIZE; i++)
		buf[i] = pat(i);
	if (pwrite(file_fd, buf, FILE_SIZE, 0) != (ssize_t)FILE_SIZE) {
		free(buf);
		return -1;
	}
	free(buf);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	close(file_fd);
	unlink(file_path);
	return 0;
}

/* Two fake GPUs, cuInit done, the fake cuFile as loaded. */
static int setup(void **state)
{
	(void)state;
	fake_cuda_reset(2);
	fake_cufile_reset();
	return cuInit(0) == CUDA_SUCCESS ? 0 : -1;
}

static int reg(const void *p, size_t len)
{
	return cuFileBufRegister(p, len, 0).err;
}

static int dereg(const void *p)
{
	return cuFileBufDeregister(p).err;
}

static CUdeviceptr gpu_alloc(size_t size, int device)
{
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, size, device);

	assert_true(p != 0);
	return p;
}

static CUfileHandle_t handle_of(int fd)
{
	CUfileDescr_t d = { .type = CU_FILE_HANDLE_TYPE_OPAQUE_FD };
	CUfileHandle_t fh = NULL;

	d.handle.fd = fd;
	assert_int_equal(cuFileHandleRegister(&fh, &d).err, CU_FILE_SUCCESS);
	assert_non_null(fh);
	return fh;
}

static long now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000L + t.tv_nsec / 1000;
}

static struct fake_cufile_io last_io(void)
{
	struct fake_cufile_io io;

	assert_int_equal(fake_cufile_last_io(&io), 0);
	return io;
}

/* ====================================================================
 * Driver, version, properties
 * ==================================================================== */

static void test_fake_cufile_version_1150(void **state)
{
	int v = 0;

	(void)state;
	assert_int_equal(cuFileGetVersion(&v).err, CU_FILE_SUCCESS);
	assert_int_equal(v, 1150);
	assert_int_equal(cuFileGetVersion(NULL).err, CU_FILE_INVALID_VALUE);
	assert_int_equal(fake_cufile_calls("cuFileGetVersion"), 2);
}

static void test_fake_cufile_driver_use_count_open_close(void **state)
{
	(void)state;
	assert_int_equal(cuFileDriverClose().err,
			 CU_FILE_DRIVER_NOT_INITIALIZED);
	assert_int_equal(cuFileDriverClose_v2().err,
			 CU_FILE_DRIVER_NOT_INITIALIZED);
	assert_int_equal(cuFileUseCount(), 0);
	assert_int_equal(cuFileDriverOpen().err, CU_FILE_SUCCESS);
	assert_int_equal(cuFileDriverOpen().err, CU_FILE_SUCCESS);
	assert_int_equal(cuFileUseCount(), 2);
	assert_int_equal(fake_cufile_driver_use_count(), 2);
	assert_int_equal(cuFileDriverClose_v2().err, CU_FILE_SUCCESS);
	assert_int_equal(cuFileDriverClose().err, CU_FILE_SUCCESS);
	assert_int_equal(cuFileUseCount(), 0);
	assert_int_equal(cuFileDriverClose().err,
			 CU_FILE_DRIVER_NOT_INITIALIZED);
	assert_int_equal(fake_cufile_implicit_opens(), 0);
	assert_int_equal(fake_cufile_calls("cuFileDriverOpen"), 2);
	assert_int_equal(fake_cufile_calls("cuFileDriverClose"), 3);
	assert_int_equal(fake_cufile_calls("cuFileDriverClose_v2"), 2);
	assert_int_equal(fake_cufile_calls("cuFileUseCount"), 3);
}

static void test_fake_cufile_properties_need_open_limit(void **state)
{
	CUfileDrvProps_t props;

	(void)state;
	memset(&props, 0xab, sizeof(props));
	assert_int_equal(cuFileDriverGetProperties(&props).err,
			 CU_FILE_DRIVER_NOT_INITIALIZED);
	assert_int_equal(cuFileDriverOpen().err, CU_FILE_SUCCESS);
	assert_int_equal(cuFileDriverGetProperties(NULL).err,
			 CU_FILE_INVALID_VALUE);
	assert_int_equal(cuFileDriverGetProperties(&props).err,
			 CU_FILE_SUCCESS);
	assert_int_equal(props.max_device_pinned_mem_size, 33554432);
	assert_int_equal(props.max_batch_io_size, FAKE_CUFILE_MAX_BATCH);
	assert_int_equal(props.nvfs.major_version, 0);	/* no nvidia-fs */
	fake_cufile_set_pinned_limit_kib(1024);
	assert_int_equal(cuFileDriverGetProperties(&props).err,
			 CU_FILE_SUCCESS);
	assert_int_equal(props.max_device_pinned_mem_size, 1024);
	fake_cufile_set_pinned_limit_kib(0);
	assert_int_equal(cuFileDriverGetProperties(&props).err,
			 CU_FILE_SUCCESS);
	assert_int_equal(props.max_device_pinned_mem_size, 33554432);
}

static void test_fake_cufile_register_opens_driver_implicitly(void **state)
{
	CUfileDrvProps_t props;
	CUdeviceptr p = gpu_alloc(MiB, 0);
	CUfileHandle_t fh;

	(void)state;
	assert_int_equal(reg(P(p), MiB), CU_FILE_SUCCESS);
	assert_int_equal(cuFileUseCount(), 1);
	assert_int_equal(fake_cufile_implicit_opens(), 1);
	assert_int_equal(reg(P(p + 4096), 4096), CU_FILE_SUCCESS);
	assert_int_equal(cuFileDriverOpen().err, CU_FILE_SUCCESS);
	assert_int_equal(cuFileUseCount(), 2);
	assert_int_equal(fake_cufile_implicit_opens(), 1);
	assert_int_equal(cuFileDriverClose().err, CU_FILE_SUCCESS);
	assert_int_equal(cuFileDriverClose().err, CU_FILE_SUCCESS);
	assert_int_equal(cuFileDriverGetProperties(&props).err,
			 CU_FILE_DRIVER_NOT_INITIALIZED);
	/* Closing the driver drops no registration. */
	assert_int_equal(fake_cufile_live(), 2);
	/* Refused arguments open nothing; a handle opens it too. */
	assert_int_equal(reg(NULL, MiB), CU_FILE_INVALID_VALUE);
	assert_int_equal(cuFileUseCount(), 0);
	fh = handle_of(file_fd);
	assert_int_equal(cuFileUseCount(), 1);
	assert_int_equal(fake_cufile_implicit_opens(), 2);
	cuFileHandleDeregister(fh);
}

/* ====================================================================
 * Buffer registration
 * ==================================================================== */

static void test_fake_cufile_register_bad_args_invalid_value(void **state)
{
	char buf[64];

	(void)state;
	assert_int_equal(reg(NULL, 4096), CU_FILE_INVALID_VALUE);
	assert_int_equal(reg(buf, 0), CU_FILE_INVALID_VALUE);
	assert_int_equal(fake_cufile_live(), 0);
	assert_int_equal(fake_cufile_calls("cuFileBufRegister"), 2);
}

static void test_fake_cufile_register_twice_already_registered(void **state)
{
	CUdeviceptr p = gpu_alloc(4 * MiB, 0);
	size_t len = 0;

	(void)state;
	assert_int_equal(fake_cufile_registered(P(p), &len), 0);
	assert_int_equal(reg(P(p), 4 * MiB), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(p), 4 * MiB), CU_FILE_MEMORY_ALREADY_REGISTERED);
	assert_int_equal(reg(P(p), 4096), CU_FILE_MEMORY_ALREADY_REGISTERED);
	assert_int_equal(fake_cufile_registered(P(p), &len), 1);
	assert_int_equal(len, 4 * MiB);
	assert_int_equal(fake_cufile_registered(P(p + 1), NULL), 0);
	assert_int_equal(fake_cufile_live(), 1);
	assert_int_equal(fake_cufile_device_bytes(0), 4 * MiB);
	assert_int_equal(fake_cufile_device_bytes(1), 0);
}

/* As measured: base + 64 KiB over a registered buffer, and base + 100. */
static void test_fake_cufile_register_overlap_interior_accepted(void **state)
{
	CUdeviceptr p = gpu_alloc(4 * MiB, 1);
	size_t len = 0;

	(void)state;
	assert_int_equal(reg(P(p), MiB), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(p + 64 * KiB), MiB), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(p + 100), 4096), CU_FILE_SUCCESS);
	assert_int_equal(fake_cufile_live(), 3);
	assert_int_equal(fake_cufile_registered(P(p + 100), &len), 1);
	assert_int_equal(len, 4096);
	assert_int_equal(fake_cufile_device_bytes(1), 2 * MiB + 4096);
	assert_int_equal(reg(P(p + 100), 8), CU_FILE_MEMORY_ALREADY_REGISTERED);
	assert_int_equal(dereg(P(p)), CU_FILE_SUCCESS);
	assert_int_equal(fake_cufile_registered(P(p + 64 * KiB), NULL), 1);
	assert_int_equal(fake_cufile_device_bytes(1), MiB + 4096);
}

static void test_fake_cufile_register_past_allocation_range_error(void **state)
{
	CUdeviceptr p = gpu_alloc(4 * MiB, 0), r;

	(void)state;
	assert_int_equal(reg(P(p), 4 * MiB + 1),
			 CU_FILE_CUDA_POINTER_RANGE_ERROR);
	assert_int_equal(reg(P(p + 4 * MiB - 10), 11),
			 CU_FILE_CUDA_POINTER_RANGE_ERROR);
	assert_int_equal(reg(P(p + 4 * MiB - 10), 10), CU_FILE_SUCCESS);
	assert_int_equal(fake_cufile_live(), 1);
	assert_int_equal(fake_cufile_device_bytes(0), 10);

	/* VMM: the range may run over adjacent mappings (measured), not
	 * past the reservation. */
	r = fake_cuda_vmm_reserve(4 * MiB);
	assert_true(r != 0);
	assert_int_equal(fake_cuda_vmm_map(r, 2 * MiB, 0), 0);
	assert_int_equal(fake_cuda_vmm_map(r + 2 * MiB, 2 * MiB, 0), 0);
	assert_int_equal(reg(P(r + MiB), 3 * MiB + 1),
			 CU_FILE_CUDA_POINTER_RANGE_ERROR);
	assert_int_equal(reg(P(r + MiB), 2 * MiB), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(r + 2 * MiB), 2 * MiB), CU_FILE_SUCCESS);
}

static void test_fake_cufile_register_host_memory_accepted(void **state)
{
	CUdeviceptr pinned = fake_cuda_alloc(FAKE_HOST_PINNED, MiB, 0);
	void *h = calloc(1, MiB);

	(void)state;
	assert_non_null(h);
	assert_true(pinned != 0);
	assert_int_equal(reg(h, MiB), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(pinned), MiB), CU_FILE_SUCCESS);
	/* Host memory has no allocation to overrun, and no GPU. */
	assert_int_equal(reg(P(pinned + 4096), 2 * MiB), CU_FILE_SUCCESS);
	assert_int_equal(reg(h, MiB), CU_FILE_MEMORY_ALREADY_REGISTERED);
	assert_int_equal(fake_cufile_live(), 3);
	assert_int_equal(fake_cufile_device_bytes(0), 0);
	assert_int_equal(fake_cufile_device_bytes(-1), 0);
	assert_int_equal(dereg(h), CU_FILE_SUCCESS);
	free(h);
}

static void test_fake_cufile_pinned_limit_pinning_failed(void **state)
{
	CUdeviceptr a = gpu_alloc(3 * MiB, 0), b = gpu_alloc(2 * MiB, 0);
	CUdeviceptr c = gpu_alloc(2 * MiB, 0), d = gpu_alloc(4 * MiB, 1);

	(void)state;
	fake_cufile_set_pinned_limit_kib(4096);		/* 4 MiB per GPU */
	assert_int_equal(reg(P(a), 3 * MiB), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(b), 2 * MiB), CU_FILE_GPU_MEMORY_PINNING_FAILED);
	assert_int_equal(fake_cufile_registered(P(b), NULL), 0);
	assert_int_equal(reg(P(b), MiB), CU_FILE_SUCCESS);	/* exactly 4 */
	assert_int_equal(reg(P(c), 1), CU_FILE_GPU_MEMORY_PINNING_FAILED);
	/* The limit is per GPU. */
	assert_int_equal(reg(P(d), 4 * MiB), CU_FILE_SUCCESS);
	/* Host memory counts nowhere. */
	assert_int_equal(reg(&a, sizeof(a)), CU_FILE_SUCCESS);
	assert_int_equal(dereg(&a), CU_FILE_SUCCESS);
	/* After a deregistration it fits. */
	assert_int_equal(dereg(P(a)), CU_FILE_SUCCESS);
	assert_int_equal(fake_cufile_device_bytes(0), MiB);
	assert_int_equal(reg(P(c), 2 * MiB), CU_FILE_SUCCESS);
	assert_int_equal(fake_cufile_device_bytes(0), 3 * MiB);
	assert_int_equal(fake_cufile_device_bytes(1), 4 * MiB);
	/* An orphan still counts until deregistered. */
	assert_int_equal(fake_cuda_free(c), 0);
	assert_int_equal(reg(P(a), 2 * MiB), CU_FILE_GPU_MEMORY_PINNING_FAILED);
	assert_int_equal(dereg(P(c)), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(a), 2 * MiB), CU_FILE_SUCCESS);
}

static void test_fake_cufile_deregister_unknown_not_registered(void **state)
{
	CUdeviceptr p = gpu_alloc(MiB, 0);
	char buf[16];

	(void)state;
	assert_int_equal(dereg(NULL), CU_FILE_INVALID_VALUE);
	assert_int_equal(dereg(buf), CU_FILE_MEMORY_NOT_REGISTERED);
	assert_int_equal(reg(P(p), MiB), CU_FILE_SUCCESS);
	assert_int_equal(dereg(P(p + 4096)), CU_FILE_MEMORY_NOT_REGISTERED);
	assert_int_equal(dereg(P(p)), CU_FILE_SUCCESS);
	assert_int_equal(dereg(P(p)), CU_FILE_MEMORY_NOT_REGISTERED);
	assert_int_equal(fake_cufile_live(), 0);
	assert_int_equal(fake_cufile_device_bytes(0), 0);
	assert_int_equal(fake_cufile_calls("cuFileBufDeregister"), 5);
}

/* ====================================================================
 * Registrations that outlive their memory
 * ==================================================================== */

/* shared/research/cufile_stale.c, as measured. */
static void test_fake_cufile_free_then_same_va_already_registered(void **state)
{
	CUdeviceptr p = gpu_alloc(4 * MiB, 0), q;
	size_t len = 0;

	(void)state;
	assert_int_equal(reg(P(p), 4 * MiB), CU_FILE_SUCCESS);
	assert_int_equal(fake_cuda_free(p), 0);
	assert_int_equal(fake_cufile_registered(P(p), &len), 2);
	assert_int_equal(len, 4 * MiB);
	assert_int_equal(fake_cufile_live(), 0);
	assert_int_equal(fake_cufile_orphans(), 1);
	assert_int_equal(fake_cufile_orphaned_total(), 1);
	assert_int_equal(fake_cufile_device_bytes(0), 4 * MiB);

	q = gpu_alloc(4 * MiB, 0);
	assert_int_equal(q, p);		/* the allocator's LIFO */
	assert_int_equal(reg(P(q), 4 * MiB),
			 CU_FILE_MEMORY_ALREADY_REGISTERED);
	assert_int_equal(dereg(P(p)), CU_FILE_SUCCESS);
	assert_int_equal(fake_cufile_orphans(), 0);
	assert_int_equal(reg(P(q), 4 * MiB), CU_FILE_SUCCESS);
	assert_int_equal(fake_cufile_registered(P(q), NULL), 1);
	assert_int_equal(fake_cufile_orphaned_total(), 1);
	assert_int_equal(fake_cufile_device_bytes(0), 4 * MiB);
}

static void test_fake_cufile_deregister_before_free_no_orphan(void **state)
{
	CUdeviceptr p = gpu_alloc(4 * MiB, 0), q;

	(void)state;
	assert_int_equal(reg(P(p), 4 * MiB), CU_FILE_SUCCESS);
	assert_int_equal(dereg(P(p)), CU_FILE_SUCCESS);
	assert_int_equal(fake_cuda_free(p), 0);
	q = gpu_alloc(4 * MiB, 0);
	assert_int_equal(q, p);
	assert_int_equal(reg(P(q), 4 * MiB), CU_FILE_SUCCESS);
	assert_int_equal(fake_cufile_orphaned_total(), 0);
	assert_int_equal(fake_cufile_orphans(), 0);
}

/* Every way the fake CUDA frees memory orphans what lies in it, and
 * only that. */
static void test_fake_cufile_every_free_orphans(void **state)
{
	CUdeviceptr a, b, pool, host, r, keep;

	(void)state;
	a = gpu_alloc(MiB, 0);
	b = gpu_alloc(256, 0);
	pool = fake_cuda_alloc(FAKE_POOL, MiB, 1);
	host = fake_cuda_alloc(FAKE_HOST_PINNED, MiB, 0);
	keep = gpu_alloc(MiB, 0);
	r = fake_cuda_vmm_reserve(6 * MiB);
	assert_true(pool && host && r);
	assert_int_equal(fake_cuda_vmm_map(r, 2 * MiB, 0), 0);
	assert_int_equal(fake_cuda_vmm_map(r + 2 * MiB, 2 * MiB, 1), 0);
	assert_int_equal(reg(P(a), MiB), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(a + 64 * KiB), 4096), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(b), 256), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(pool), MiB), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(host), MiB), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(keep), MiB), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(r), 2 * MiB), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(r + 3 * MiB), MiB), CU_FILE_SUCCESS);

	assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
	assert_int_equal(fake_cufile_orphans(), 2);	/* a and its interior */
	assert_int_equal(cuMemFreeAsync_ptsz(b, NULL), CUDA_SUCCESS);
	assert_int_equal(cuMemFreeAsync(pool, NULL), CUDA_SUCCESS);
	assert_int_equal(cuMemFreeHost(P(host)), CUDA_SUCCESS);
	assert_int_equal(fake_cufile_orphans(), 5);
	assert_int_equal(cuMemUnmap(r, 4 * MiB), CUDA_SUCCESS);	/* both */
	assert_int_equal(fake_cufile_orphans(), 7);
	assert_int_equal(fake_cufile_registered(P(a + 64 * KiB), NULL), 2);
	assert_int_equal(fake_cufile_registered(P(r + 3 * MiB), NULL), 2);
	assert_int_equal(fake_cufile_registered(P(keep), NULL), 1);
	assert_int_equal(fake_cufile_live(), 1);
	/* A refused free orphans nothing. */
	assert_int_equal(cuMemFree_v2(keep + 512), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(fake_cufile_orphaned_total(), 7);
	assert_int_equal(fake_cufile_device_bytes(0), 2 * MiB + 4096 + 256 +
				 2 * MiB);
	assert_int_equal(fake_cufile_device_bytes(1), MiB + MiB);
	assert_int_equal(dereg(P(r + 3 * MiB)), CU_FILE_SUCCESS);
	assert_int_equal(fake_cufile_orphans(), 6);
}

static void test_fake_cufile_reset_keeps_observer(void **state)
{
	CUdeviceptr p = gpu_alloc(MiB, 0);

	(void)state;
	assert_int_equal(reg(P(p), MiB), CU_FILE_SUCCESS);
	fake_cufile_fail("cuFileRead", CU_FILE_IO_ERROR, -1);
	assert_int_equal(cuFileDriverOpen().err, CU_FILE_SUCCESS);
	fake_cufile_reset();
	assert_int_equal(fake_cufile_live(), 0);
	assert_int_equal(fake_cufile_calls("cuFileBufRegister"), 0);
	assert_int_equal(cuFileUseCount(), 0);
	assert_int_equal(cuFileRead(NULL, &p, 1, 0, 0),
			 -CU_FILE_HANDLE_NOT_REGISTERED);
	/* Neither reset removes the observer. */
	fake_cuda_reset(2);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	p = gpu_alloc(MiB, 0);
	assert_int_equal(reg(P(p), MiB), CU_FILE_SUCCESS);
	assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
	assert_int_equal(fake_cufile_registered(P(p), NULL), 2);
}

/* A test's own observer must pass frees on for orphans to be seen. */
static void test_fake_cufile_observer_replaced_then_chained(void **state)
{
	CUdeviceptr p = gpu_alloc(MiB, 0), q = gpu_alloc(MiB, 0);

	(void)state;
	assert_int_equal(reg(P(p), MiB), CU_FILE_SUCCESS);
	assert_int_equal(reg(P(q), MiB), CU_FILE_SUCCESS);
	fake_cuda_set_free_observer(NULL);
	assert_int_equal(fake_cuda_free(p), 0);
	assert_int_equal(fake_cufile_registered(P(p), NULL), 1);
	fake_cuda_set_free_observer(fake_cufile_on_cuda_free);
	assert_int_equal(fake_cuda_free(q), 0);
	assert_int_equal(fake_cufile_registered(P(q), NULL), 2);
}

/* ====================================================================
 * File handles
 * ==================================================================== */

static void test_fake_cufile_handle_register_rules(void **state)
{
	CUfileDescr_t d = { .type = CU_FILE_HANDLE_TYPE_OPAQUE_FD };
	CUfileHandle_t fh = NULL;
	int fd;

	(void)state;
	d.handle.fd = file_fd;
	assert_int_equal(cuFileHandleRegister(NULL, &d).err,
			 CU_FILE_INVALID_VALUE);
	assert_int_equal(cuFileHandleRegister(&fh, NULL).err,
			 CU_FILE_INVALID_VALUE);
	d.type = CU_FILE_HANDLE_TYPE_USERSPACE_FS;
	assert_int_equal(cuFileHandleRegister(&fh, &d).err,
			 CU_FILE_INVALID_VALUE);
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	d.handle.fd = -1;
	assert_int_equal(cuFileHandleRegister(&fh, &d).err,
			 CU_FILE_INVALID_VALUE);
	fd = dup(file_fd);
	assert_true(fd >= 0);
	close(fd);
	d.handle.fd = fd;		/* closed */
	assert_int_equal(cuFileHandleRegister(&fh, &d).err,
			 CU_FILE_INVALID_VALUE);
	assert_null(fh);
	assert_int_equal(cuFileUseCount(), 0);

	d.handle.fd = file_fd;
	assert_int_equal(cuFileHandleRegister(&fh, &d).err, CU_FILE_SUCCESS);
	assert_non_null(fh);
	cuFileHandleDeregister(fh);
	cuFileHandleDeregister(fh);	/* unknown: ignored */
	cuFileHandleDeregister(NULL);
	assert_int_equal(fake_cufile_calls("cuFileHandleRegister"), 6);
	assert_int_equal(fake_cufile_calls("cuFileHandleDeregister"), 3);
}

/* ====================================================================
 * I/O
 * ==================================================================== */

static void test_fake_cufile_read_host_returns_file_bytes(void **state)
{
	unsigned char *buf = calloc(1, 64 * KiB);
	struct fake_cufile_io io;
	CUfileHandle_t fh = handle_of(file_fd);
	size_t i;

	(void)state;
	assert_non_null(buf);
	assert_int_equal(cuFileRead(fh, buf, 8192, 4096, 100), 8192);
	for (i = 0; i < 8192; i++)
		assert_int_equal(buf[100 + i], pat(4096 + i));
	assert_int_equal(buf[99], 0);
	assert_int_equal(buf[100 + 8192], 0);
	io = last_io();
	assert_ptr_equal(io.base, buf);
	assert_int_equal(io.buf_offset, 100);
	assert_int_equal(io.size, 8192);
	assert_int_equal(io.file_offset, 4096);
	assert_int_equal(io.write, 0);
	assert_int_equal(io.registered, 0);
	assert_int_equal(io.device, -1);
	assert_int_equal(io.ret, 8192);

	/* Short at the end of the file, 0 past it. */
	assert_int_equal(cuFileRead(fh, buf, 4096, FILE_SIZE - 10, 0), 10);
	for (i = 0; i < 10; i++)
		assert_int_equal(buf[i], pat(FILE_SIZE - 10 + i));
	assert_int_equal(cuFileRead(fh, buf, 4096, FILE_SIZE + 1, 0), 0);
	assert_int_equal(fake_cufile_io_count(-1), 3);
	cuFileHandleDeregister(fh);
	free(buf);
}

static void test_fake_cufile_write_host_and_device(void **state)
{
	unsigned char *buf = malloc(4096), back[4096];
	CUdeviceptr g = gpu_alloc(MiB, 0);
	CUfileHandle_t fh = handle_of(file_fd);
	size_t i;

	(void)state;
	assert_non_null(buf);
	for (i = 0; i < 4096; i++)
		buf[i] = (unsigned char)(255 - i);
	assert_int_equal(cuFileWrite(fh, buf, 1000, 8192, 16), 1000);
	assert_int_equal(pread(file_fd, back, 1000, 8192), 1000);
	assert_memory_equal(back, buf + 16, 1000);
	assert_int_equal(last_io().write, 1);

	/* Device memory cannot be touched: a write writes zeros. */
	assert_int_equal(cuFileWrite(fh, P(g), 4096, 8192, 4096), 4096);
	assert_int_equal(pread(file_fd, back, 4096, 8192), 4096);
	for (i = 0; i < 4096; i++)
		assert_int_equal(back[i], 0);
	assert_int_equal(last_io().device, 0);

	/* Put the pattern back for the other tests. */
	for (i = 0; i < 4096; i++)
		back[i] = pat(8192 + i);
	assert_int_equal(pwrite(file_fd, back, 4096, 8192), 4096);
	cuFileHandleDeregister(fh);
	free(buf);
}

static void test_fake_cufile_read_device_short_at_eof(void **state)
{
	CUdeviceptr g = gpu_alloc(4 * MiB, 1);
	CUfileHandle_t fh = handle_of(file_fd);
	struct fake_cufile_io io;

	(void)state;
	/* Over several scratch chunks, then past the end of the file. */
	assert_int_equal(cuFileRead(fh, P(g), 2 * MiB, 0, 0), FILE_SIZE);
	assert_int_equal(cuFileRead(fh, P(g), MiB, FILE_SIZE - 100, 4096),
			 100);
	io = last_io();
	assert_int_equal(io.device, 1);
	assert_int_equal(io.ret, 100);
	assert_int_equal(io.registered, 0);
	/* A range past the allocation. */
	assert_int_equal(cuFileRead(fh, P(g), 4096, 0, 4 * MiB - 4095),
			 -CU_FILE_CUDA_POINTER_RANGE_ERROR);
	assert_int_equal(fake_cufile_io_count(-1), 2);
	cuFileHandleDeregister(fh);
}

static void test_fake_cufile_io_registered_or_bounce(void **state)
{
	CUdeviceptr g = gpu_alloc(4 * MiB, 0), q;
	CUfileHandle_t fh = handle_of(file_fd);
	struct fake_cufile_io log[8];
	void *h = calloc(1, MiB);
	int i, n;

	(void)state;
	assert_non_null(h);
	assert_int_equal(reg(P(g), MiB), CU_FILE_SUCCESS);
	assert_int_equal(reg(h, 64 * KiB), CU_FILE_SUCCESS);

	/* Inside the registration: registered. */
	assert_int_equal(cuFileRead(fh, P(g), 64 * KiB, 0, 0), 64 * KiB);
	assert_int_equal(last_io().registered, 1);
	assert_int_equal(cuFileRead(fh, P(g), 64 * KiB, 0, MiB - 64 * KiB),
			 64 * KiB);
	assert_int_equal(last_io().registered, 1);
	assert_int_equal(cuFileRead(fh, h, 4096, 0, 60 * KiB), 4096);
	assert_int_equal(last_io().registered, 1);
	/* One byte past it, an interior base, unregistered memory. */
	assert_int_equal(cuFileRead(fh, P(g), 64 * KiB + 1, 0,
				    MiB - 64 * KiB), 64 * KiB + 1);
	assert_int_equal(last_io().registered, 0);
	assert_int_equal(cuFileRead(fh, P(g + 4096), 4096, 0, 0), 4096);
	assert_int_equal(last_io().registered, 0);
	assert_int_equal(cuFileRead(fh, P(g + MiB), 4096, 0, 0), 4096);
	assert_int_equal(last_io().registered, 0);
	assert_int_equal(cuFileWrite(fh, h, 4096, FILE_SIZE + 4096,
				     64 * KiB - 1), 4096);
	assert_int_equal(last_io().registered, 0);

	/* An orphan's base, the memory allocated again: bounce buffer (the
	 * read works, as measured in compatibility mode). */
	assert_int_equal(fake_cuda_free(g), 0);
	q = gpu_alloc(4 * MiB, 0);
	assert_int_equal(q, g);
	assert_int_equal(cuFileRead(fh, P(q), 4096, 0, 0), 4096);
	assert_int_equal(last_io().registered, 0);

	assert_int_equal(fake_cufile_io_count(1), 3);
	assert_int_equal(fake_cufile_io_count(0), 5);
	assert_int_equal(fake_cufile_io_count(-1), 8);
	n = fake_cufile_io_log(log, 8);
	assert_int_equal(n, 8);
	assert_int_equal(log[0].size, 64 * KiB);
	assert_int_equal(log[7].ret, 4096);
	for (i = 0; i < n; i++)
		assert_int_equal(log[i].registered, i < 3);
	assert_int_equal(fake_cufile_io_log(log, 2), 2);
	assert_int_equal(log[1].registered, 0);
	assert_ptr_equal(log[0].base, h);

	assert_int_equal(ftruncate(file_fd, FILE_SIZE), 0);
	assert_int_equal(dereg(h), CU_FILE_SUCCESS);
	cuFileHandleDeregister(fh);
	free(h);
}

static void test_fake_cufile_io_bad_handle_args(void **state)
{
	char buf[64] = { 0 };
	CUfileHandle_t fh = handle_of(file_fd);
	struct fake_cufile_io io;

	(void)state;
	assert_int_equal(cuFileRead(NULL, buf, 8, 0, 0),
			 -CU_FILE_HANDLE_NOT_REGISTERED);
	assert_int_equal(cuFileRead((CUfileHandle_t)buf, buf, 8, 0, 0),
			 -CU_FILE_HANDLE_NOT_REGISTERED);
	assert_int_equal(cuFileRead(fh, NULL, 8, 0, 0),
			 -CU_FILE_INVALID_VALUE);
	assert_int_equal(cuFileRead(fh, buf, 8, -1, 0),
			 -CU_FILE_INVALID_VALUE);
	assert_int_equal(cuFileWrite(fh, buf, 8, 0, -1),
			 -CU_FILE_INVALID_VALUE);
	cuFileHandleDeregister(fh);
	assert_int_equal(cuFileWrite(fh, buf, 8, 0, 0),
			 -CU_FILE_HANDLE_NOT_REGISTERED);
	assert_int_equal(fake_cufile_last_io(&io), -1);
	assert_int_equal(fake_cufile_calls("cuFileRead"), 4);
	assert_int_equal(fake_cufile_calls("cuFileWrite"), 2);
}

/* An OS error comes back as -1 with errno: a read-only fd written. */
static void test_fake_cufile_io_os_error_errno(void **state)
{
	int fd = open(file_path, O_RDONLY);
	char buf[64] = { 0 };
	CUfileHandle_t fh;

	(void)state;
	assert_true(fd >= 0);
	fh = handle_of(fd);
	errno = 0;
	assert_int_equal(cuFileWrite(fh, buf, 8, 0, 0), -1);
	assert_int_equal(errno, EBADF);
	assert_int_equal(last_io().ret, -1);
	cuFileHandleDeregister(fh);
	close(fd);
}

static void test_fake_cufile_async_done_at_once(void **state)
{
	unsigned char buf[4096];
	CUfileHandle_t fh = handle_of(file_fd);
	size_t size = 4096;
	off_t foff = 12345, boff = 0;
	ssize_t n = 0;

	(void)state;
	assert_int_equal(cuFileReadAsync(fh, buf, &size, &foff, &boff, &n,
					 NULL).err, CU_FILE_SUCCESS);
	assert_int_equal(n, 4096);
	assert_int_equal(buf[0], pat(12345));
	assert_int_equal(cuFileReadAsync(fh, buf, NULL, &foff, &boff, &n,
					 NULL).err, CU_FILE_INVALID_VALUE);
	assert_int_equal(cuFileWriteAsync(fh, buf, &size, &foff, &boff, NULL,
					  NULL).err, CU_FILE_INVALID_VALUE);
	assert_int_equal(cuFileReadAsync(NULL, buf, &size, &foff, &boff, &n,
					 NULL).err, CU_FILE_SUCCESS);
	assert_int_equal(n, -CU_FILE_HANDLE_NOT_REGISTERED);
	assert_int_equal(cuFileWriteAsync(fh, buf, &size, &foff, &boff, &n,
					  NULL).err, CU_FILE_SUCCESS);
	assert_int_equal(n, 4096);
	assert_int_equal(last_io().write, 1);
	assert_int_equal(fake_cufile_calls("cuFileReadAsync"), 3);
	assert_int_equal(fake_cufile_calls("cuFileWriteAsync"), 2);
	cuFileHandleDeregister(fh);
}

/* ====================================================================
 * Batch I/O
 * ==================================================================== */

static CUfileIOParams_t batch_io(CUfileHandle_t fh, void *base, size_t size,
				 off_t foff, int write, uintptr_t cookie)
{
	CUfileIOParams_t p;

	memset(&p, 0, sizeof(p));
	p.mode = CUFILE_BATCH;
	p.fh = fh;
	p.opcode = write ? CUFILE_WRITE : CUFILE_READ;
	p.cookie = P(cookie);
	p.u.batch.devPtr_base = base;
	p.u.batch.size = size;
	p.u.batch.file_offset = foff;
	return p;
}

static void test_fake_cufile_batch_events_complete(void **state)
{
	unsigned char a[4096], b[4096];
	CUfileHandle_t fh = handle_of(file_fd);
	int rofd = open(file_path, O_RDONLY);
	CUfileHandle_t ro = handle_of(rofd);
	CUfileIOParams_t io[5];
	CUfileIOEvents_t ev[8];
	CUfileBatchHandle_t bh = NULL;
	unsigned nr;

	(void)state;
	assert_int_equal(cuFileBatchIOSetUp(&bh, 0).err,
			 CU_FILE_INVALID_VALUE);
	assert_int_equal(cuFileBatchIOSetUp(&bh, FAKE_CUFILE_MAX_BATCH + 1)
			 .err, CU_FILE_INVALID_VALUE);
	assert_int_equal(cuFileBatchIOSetUp(NULL, 4).err,
			 CU_FILE_INVALID_VALUE);
	assert_int_equal(cuFileBatchIOSetUp(&bh, 4).err, CU_FILE_SUCCESS);
	assert_non_null(bh);

	io[0] = batch_io(fh, a, 4096, 0, 0, 1);
	io[1] = batch_io(fh, b, 100, FILE_SIZE - 100, 0, 2);
	io[2] = batch_io(ro, a, 16, 0, 1, 3);	/* fails: EBADF */
	io[3] = batch_io(fh, a, 1, 0, 0, 4);
	io[4] = batch_io(fh, a, 1, 0, 0, 5);
	assert_int_equal(cuFileBatchIOSubmit(bh, 3, io, 0).err,
			 CU_FILE_SUCCESS);
	/* Two more would exceed the batch's 4. */
	assert_int_equal(cuFileBatchIOSubmit(bh, 2, &io[3], 0).err,
			 CU_FILE_INVALID_VALUE);
	nr = 8;
	assert_int_equal(cuFileBatchIOGetStatus(bh, 9, &nr, ev, NULL).err,
			 CU_FILE_INVALID_VALUE);
	assert_int_equal(cuFileBatchIOGetStatus(bh, 1, &nr, ev, NULL).err,
			 CU_FILE_SUCCESS);
	assert_int_equal(nr, 3);
	assert_ptr_equal(ev[0].cookie, P(1));
	assert_int_equal(ev[0].status, CUFILE_COMPLETE);
	assert_int_equal(ev[0].ret, 4096);
	assert_int_equal(a[17], pat(17));
	assert_int_equal(ev[1].status, CUFILE_COMPLETE);
	assert_int_equal(ev[1].ret, 100);
	assert_int_equal(b[0], pat(FILE_SIZE - 100));
	assert_ptr_equal(ev[2].cookie, P(3));
	assert_int_equal(ev[2].status, CUFILE_FAILED);
	assert_int_equal((ssize_t)ev[2].ret, -1);
	nr = 8;
	assert_int_equal(cuFileBatchIOGetStatus(bh, 0, &nr, ev, NULL).err,
			 CU_FILE_SUCCESS);
	assert_int_equal(nr, 0);

	/* Read events free their slots; nothing is submitted when one I/O
	 * is bad. */
	assert_int_equal(cuFileBatchIOSubmit(bh, 2, &io[3], 0).err,
			 CU_FILE_SUCCESS);
	io[0].fh = NULL;
	assert_int_equal(cuFileBatchIOSubmit(bh, 1, io, 0).err,
			 CU_FILE_INVALID_VALUE);
	io[0].fh = fh;
	io[0].opcode = 7;
	assert_int_equal(cuFileBatchIOSubmit(bh, 1, io, 0).err,
			 CU_FILE_INVALID_VALUE);
	assert_int_equal(cuFileBatchIOCancel(bh).err, CU_FILE_SUCCESS);
	nr = 1;
	assert_int_equal(cuFileBatchIOGetStatus(bh, 1, &nr, ev, NULL).err,
			 CU_FILE_SUCCESS);
	assert_int_equal(nr, 1);
	assert_ptr_equal(ev[0].cookie, P(4));
	assert_int_equal(fake_cufile_io_count(-1), 5);

	cuFileBatchIODestroy(bh);
	nr = 8;
	assert_int_equal(cuFileBatchIOGetStatus(bh, 0, &nr, ev, NULL).err,
			 CU_FILE_INVALID_VALUE);
	assert_int_equal(cuFileBatchIOCancel(bh).err, CU_FILE_INVALID_VALUE);
	assert_int_equal(cuFileBatchIOSubmit(bh, 1, &io[3], 0).err,
			 CU_FILE_INVALID_VALUE);
	cuFileHandleDeregister(ro);
	cuFileHandleDeregister(fh);
	close(rofd);
}

/* ====================================================================
 * Failure injection, delays
 * ==================================================================== */

static void test_fake_cufile_fail_injection_then_success(void **state)
{
	CUfileDescr_t d = { .type = CU_FILE_HANDLE_TYPE_OPAQUE_FD };
	CUdeviceptr p = gpu_alloc(MiB, 0);
	CUfileHandle_t fh = NULL;
	char buf[16];

	(void)state;
	/* What cuFileHandleRegister answered in the containers. */
	d.handle.fd = file_fd;
	fake_cufile_fail("cuFileHandleRegister", CU_FILE_HANDLE_NOT_REGISTERED,
			 1);
	assert_int_equal(cuFileHandleRegister(&fh, &d).err,
			 CU_FILE_HANDLE_NOT_REGISTERED);
	assert_null(fh);
	assert_int_equal(cuFileUseCount(), 0);	/* did nothing else */
	assert_int_equal(cuFileHandleRegister(&fh, &d).err, CU_FILE_SUCCESS);

	fake_cufile_fail("cuFileBufRegister", CU_FILE_INTERNAL_ERROR, -1);
	assert_int_equal(reg(P(p), MiB), CU_FILE_INTERNAL_ERROR);
	assert_int_equal(reg(P(p), MiB), CU_FILE_INTERNAL_ERROR);
	assert_int_equal(fake_cufile_live(), 0);
	fake_cufile_fail("cuFileBufRegister", 0, 0);
	assert_int_equal(reg(P(p), MiB), CU_FILE_SUCCESS);
	assert_int_equal(fake_cufile_calls("cuFileBufRegister"), 3);

	fake_cufile_fail("cuFileBufDeregister", CU_FILE_INTERNAL_ERROR, 1);
	assert_int_equal(dereg(P(p)), CU_FILE_INTERNAL_ERROR);
	assert_int_equal(fake_cufile_registered(P(p), NULL), 1);
	assert_int_equal(dereg(P(p)), CU_FILE_SUCCESS);

	fake_cufile_fail("cuFileRead", CU_FILE_IO_ERROR, 1);
	assert_int_equal(cuFileRead(fh, buf, 8, 0, 0), -CU_FILE_IO_ERROR);
	fake_cufile_fail("cuFileRead", -EIO, 1);
	errno = 0;
	assert_int_equal(cuFileRead(fh, buf, 8, 0, 0), -1);
	assert_int_equal(errno, EIO);
	assert_int_equal(cuFileRead(fh, buf, 8, 0, 0), 8);
	assert_int_equal(fake_cufile_io_count(-1), 1);

	fake_cufile_fail("cuFileDriverOpen", CU_FILE_PLATFORM_NOT_SUPPORTED, 1);
	assert_int_equal(cuFileDriverOpen().err,
			 CU_FILE_PLATFORM_NOT_SUPPORTED);
	assert_int_equal(cuFileUseCount(), 1);		/* the implicit one */
	assert_int_equal(cuFileDriverOpen().err, CU_FILE_SUCCESS);

	/* A failing deregistration of a handle keeps it. */
	fake_cufile_fail("cuFileHandleDeregister", CU_FILE_INTERNAL_ERROR, 1);
	cuFileHandleDeregister(fh);
	assert_int_equal(cuFileRead(fh, buf, 8, 0, 0), 8);
	cuFileHandleDeregister(fh);
	assert_int_equal(cuFileRead(fh, buf, 8, 0, 0),
			 -CU_FILE_HANDLE_NOT_REGISTERED);

	fake_cufile_calls_reset();
	assert_int_equal(fake_cufile_calls("cuFileRead"), 0);
}

static void test_fake_cufile_delays_spent(void **state)
{
	const char *env = getenv("FAKE_CUFILE_OPEN_US");
	long env_open = env ? atol(env) : 0, t;
	CUdeviceptr p = gpu_alloc(MiB, 0);

	(void)state;
	/* The environment's delay, read at load. */
	t = now_us();
	assert_int_equal(cuFileDriverOpen().err, CU_FILE_SUCCESS);
	assert_true(now_us() - t >= env_open);
	assert_int_equal(cuFileDriverClose().err, CU_FILE_SUCCESS);
	fake_cufile_set_open_delay_us(20000);
	t = now_us();
	assert_int_equal(reg(P(p), MiB), CU_FILE_SUCCESS);	/* opens */
	assert_true(now_us() - t >= 20000);
	assert_int_equal(dereg(P(p)), CU_FILE_SUCCESS);

	fake_cufile_set_delay_us(30000, 10000);
	t = now_us();
	assert_int_equal(reg(P(p), MiB), CU_FILE_SUCCESS);
	assert_true(now_us() - t >= 30000);
	t = now_us();
	assert_int_equal(dereg(P(p)), CU_FILE_SUCCESS);
	assert_true(now_us() - t >= 10000);
	fake_cufile_set_delay_us(-1, -1);
	fake_cufile_set_open_delay_us(-1);
}

struct slow_reg {
	const void *base;
	atomic_int done;
	int err;
};

static void *slow_register(void *arg)
{
	struct slow_reg *s = arg;

	s->err = reg(s->base, 4096);
	atomic_store(&s->done, 1);
	return NULL;
}

/* A registration's delay does not hold the fake's mutex. */
static void test_fake_cufile_delay_outside_mutex(void **state)
{
	struct slow_reg s = { .base = &s };
	pthread_t t;

	(void)state;
	fake_cufile_set_delay_us(500000, -1);
	assert_int_equal(pthread_create(&t, NULL, slow_register, &s), 0);
	while (!fake_cufile_registered(&s, NULL))
		usleep(1000);
	/* Registered, still sleeping: the mutex is free. */
	assert_int_equal(fake_cufile_live(), 1);
	fake_cufile_set_delay_us(0, 0);
	assert_int_equal(reg(&t, sizeof(t)), CU_FILE_SUCCESS);
	assert_int_equal(dereg(&t), CU_FILE_SUCCESS);
	assert_int_equal(atomic_load(&s.done), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(s.err, CU_FILE_SUCCESS);
	fake_cufile_set_delay_us(-1, -1);
}

/* ====================================================================
 * Threads, dlopen
 * ==================================================================== */

#define NTHREADS 8
#define NITER 500

/*
 * Each thread its own size, so that the allocator gives a freed address
 * back to the thread that freed it only: another thread's orphan there
 * would refuse the registration (5023), as it should.
 */
static void *hammer(void *arg)
{
	int t = (int)(uintptr_t)arg, device = t % 2, i;
	size_t size = (size_t)(t + 1) * 64 * KiB;
	char host[256];

	for (i = 0; i < NITER; i++) {
		CUdeviceptr g = fake_cuda_alloc(FAKE_DEVICE, size, device);

		if (!g)
			return (void *)1;
		if (reg(P(g), size) || reg(host + i % 128, 64) ||
		    fake_cufile_registered(P(g), NULL) != 1)
			return (void *)2;
		if (reg(P(g), size) != CU_FILE_MEMORY_ALREADY_REGISTERED)
			return (void *)3;
		if (dereg(host + i % 128))
			return (void *)4;
		/* Every other one is freed while registered. */
		if (i % 2 && dereg(P(g)))
			return (void *)5;
		if (fake_cuda_free(g))
			return (void *)6;
		if (!(i % 2) && (fake_cufile_registered(P(g), NULL) != 2 ||
				 dereg(P(g))))
			return (void *)7;
	}
	return NULL;
}

static void test_fake_cufile_threads_consistent(void **state)
{
	pthread_t t[NTHREADS];
	void *ret;
	int i;

	(void)state;
	for (i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, hammer,
						(void *)(uintptr_t)i), 0);
	for (i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_join(t[i], &ret), 0);
		assert_null(ret);
	}
	assert_int_equal(fake_cufile_live(), 0);
	assert_int_equal(fake_cufile_orphans(), 0);
	assert_int_equal(fake_cufile_orphaned_total(), NTHREADS * NITER / 2);
	assert_int_equal(fake_cufile_device_bytes(0), 0);
	assert_int_equal(fake_cufile_device_bytes(1), 0);
	assert_int_equal(fake_cufile_calls("cuFileBufRegister"),
			 NTHREADS * NITER * 3);
	assert_int_equal(fake_cufile_implicit_opens(), 1);
}

static void test_fake_cufile_dlopen_same_instance(void **state)
{
	CUfileError_t (*breg)(const void *, size_t, int);
	const char *path = FAKE_CUFILE_PATH, *name = "/cufile/libcufile.so.0";
	size_t n = strlen(path);
	Dl_info info;
	void *h;

	(void)state;
	assert_true(n > strlen(name));
	assert_string_equal(path + n - strlen(name), name);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	*(void **)&breg = dlsym(h, "cuFileBufRegister");
	assert_ptr_equal((void *)breg, (void *)cuFileBufRegister);
	assert_int_equal(breg(&info, 8, 0).err, CU_FILE_SUCCESS);
	assert_int_equal(fake_cufile_registered(&info, NULL), 1);
	assert_int_not_equal(dladdr((void *)cuFileBufRegister, &info), 0);
	assert_non_null(strstr(info.dli_fname, "libcufile.so.0"));
	assert_int_equal(dlclose(h), 0);
	assert_int_equal(dereg(&info), CU_FILE_SUCCESS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup(test_fake_cufile_##name, setup)
		T(version_1150),
		T(driver_use_count_open_close),
		T(properties_need_open_limit),
		T(register_opens_driver_implicitly),
		T(register_bad_args_invalid_value),
		T(register_twice_already_registered),
		T(register_overlap_interior_accepted),
		T(register_past_allocation_range_error),
		T(register_host_memory_accepted),
		T(pinned_limit_pinning_failed),
		T(deregister_unknown_not_registered),
		T(free_then_same_va_already_registered),
		T(deregister_before_free_no_orphan),
		T(every_free_orphans),
		T(reset_keeps_observer),
		T(observer_replaced_then_chained),
		T(handle_register_rules),
		T(read_host_returns_file_bytes),
		T(write_host_and_device),
		T(read_device_short_at_eof),
		T(io_registered_or_bounce),
		T(io_bad_handle_args),
		T(io_os_error_errno),
		T(async_done_at_once),
		T(batch_events_complete),
		T(fail_injection_then_success),
		T(delays_spent),
		T(delay_outside_mutex),
		T(threads_consistent),
		T(dlopen_same_instance),
#undef T
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
