// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cufile_gpu.c - the cufile backend against the real CUDA driver and
 * runtime and the real libcufile (GPUDirect Storage).
 *
 * The program calls cuFile itself (linked against the toolkit's
 * libcufile) to see what the library registered: cuFile refuses a second
 * registration of a base (CU_FILE_MEMORY_ALREADY_REGISTERED, 5023,
 * shared/research/storage-probe.md), so the program's own
 * cuFileBufRegister of a base answers whether a registration of it is
 * alive.  The library loads libcufile itself (dlopen at gdrc_init):
 * GDRC_CUFILE_LIBRARY names the same file (the ctest environment, else
 * the path CMake found, GDRC_TEST_CUFILE_SO), so both use one instance.
 *
 * Tests are named test_cufile_gpu_<scenario>_<memory>, memory being
 * cudart (cudaMalloc / cudaFree) or malloc (plain host memory):
 *   whole_alloc       a get anywhere in a cudaMalloc'd allocation of
 *                     1 MiB, 4 MiB or 1,000,000 bytes registers the
 *                     allocation exactly (base, size: no rounding);
 *                     another range inside it is a hit; while cached the
 *                     program cannot register the base (5023);
 *                     gdrc_release_unused deregisters it (then the
 *                     program can, and deregister it too);
 *   free_cached       get + put of 4 MiB, cudaFree: the registration is
 *                     gone inside the free (stat free_deregs 1); the
 *                     allocation made next at the same address registers
 *                     (the program's own cuFileBufRegister, then the
 *                     cache's), where a registration that outlived its
 *                     memory would make both fail with 5023;
 *   free_held         the same with the registration still held at the
 *                     free, by a gdrc_set_free_fn user whose callback
 *                     puts it: the put inside the free deregisters;
 *   read_write        cuFileRead into base + 68 KiB of an allocation the
 *                     program never registered, through the cache
 *                     (gdrc_mr_query's base and the offset from it),
 *                     every byte compared and the bytes around it left
 *                     alone; cuFileWrite from another part of it (a hit),
 *                     the file read back with pread and compared.  Needs
 *                     cuFileHandleRegister, which needs a udev entry for
 *                     the file's disk (tests/gpu/udev_entry.sh); skipped
 *                     with its status without one;
 *   device_limit      GDRC_GPU_MAX_BYTES=6M with 4 MiB allocations: the
 *                     least recently used unused registration is evicted
 *                     (and deregistered), a get while the held ones fill
 *                     the limit is GDRC_ERR_LIMIT and registers nothing;
 *   host_refused      host memory in a GDRC_CUFILE_GPU context, GPU
 *                     memory in a GDRC_CUFILE_HOST one:
 *                     GDRC_ERR_UNSUPPORTED;
 *   host_registered   host memory in a GDRC_CUFILE_ALL context: backend
 *                     cufile, mem_type host, device -1, registered by
 *                     pages;
 *   second_device     (two GPUs) device 1's memory registered with
 *                     device 0's context current, which stays current;
 *                     its cudaFree with device 0 current deregisters it;
 *                     gdrc_release_unused of device 1 alone;
 *   control_stale     what the cache is for, without it: the program
 *                     registers, frees without deregistering and
 *                     allocates again at the same address; cuFile's
 *                     answer to the new registration is printed (5023
 *                     on libcufile 1.15.1), not asserted.
 *
 * One cuFile context (the keeper) lives for the whole run, so cuFile's
 * driver is opened once (0.2-0.5 s) and the program's own calls find it
 * open; each test makes and finishes contexts of its own.
 *
 * Run on a machine with a GPU and libcufile:
 *     ctest -R test_cufile_gpu      (in the build directory)
 *     tests/gpu/test_cufile_gpu     (GDRC_LOG_LEVEL=debug for detail)
 * Exit 77 (skipped, the reason printed) without a GPU, without a
 * loadable libcufile, or when cuFileDriverOpen fails.  The test file
 * (8 MiB) goes in GDRC_TEST_CUFILE_DIR, default /tmp, and is removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cufile.h>

#include <gdrcache.h>

#include "gpu_test.h"

#ifndef GDRC_TEST_CUFILE_SO
#define GDRC_TEST_CUFILE_SO "libcufile.so.0"
#endif

#define REALLOC_TRIES 64 /* allocations made to get a freed VA back */
#define TF_SIZE (8 * MIB) /* the test file */
#define POISON 0xa5

static CUdevice dev0;
static CUcontext pctx0;
static int ndevices;
static struct gdrc_ctx *keeper; /* holds cuFile's driver open */

/* The test file: words of offset ^ seed. */
static struct {
	char path[PATH_MAX];
	int fd;       /* cuFile's: O_DIRECT where the file system takes it */
	int plain_fd; /* buffered: the test's own reads */
	uint64_t seed;
	CUfileHandle_t fh;
	int have_fh;
	char why[PATH_MAX + 320]; /* why there is no handle */
} tf = { .fd = -1, .plain_fd = -1 };

/* ====================================================================
 * Checks
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

static void cf_expect(CUfileError_t got, int want, const char *call,
		      const char *file, int line)
{
	if ((int)got.err == want)
		return;
	print_error("%s:%d: %s returned %d (%s, cu_err %d), expected %d\n",
		    file, line, call, (int)got.err,
		    CUFILE_ERRSTR((int)got.err), (int)got.cu_err, want);
	_fail(file, line);
}

/* The program's own cuFile calls, with the status they must return. */
#define CF_EXPECT(call, want) \
	cf_expect((call), (want), #call, __FILE__, __LINE__)

/* ====================================================================
 * Helpers
 * ==================================================================== */

static const void *pv(uintptr_t p)
{
	return (const void *)p;
}

static uint64_t file_word(uint64_t off)
{
	return off ^ tf.seed;
}

/* A cuFile context: memory is GDRC_CUFILE_* bits; env NULL or name,
 * value, ..., NULL, set for the gdrc_init call only. */
static struct gdrc_ctx *cf_open_env(uint32_t memory,
				    const char *const *env)
{
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_CUFILE,
				   .cufile = memory };
	struct gdrc_ctx *ctx = NULL;
	const char *reason = NULL;
	gdrc_status_t status;

	for (size_t i = 0; env && env[i]; i += 2)
		assert_int_equal(setenv(env[i], env[i + 1], 1), 0);
	status = gdrc_init(&cfg, &ctx);
	for (size_t i = 0; env && env[i]; i += 2)
		unsetenv(env[i]);
	GD(status);
	assert_non_null(ctx);
	GD(gdrc_backend_status(ctx, GDRC_BACKEND_CUFILE, &reason));
	if (gdrc_gpu_status(ctx, &reason) != GDRC_OK) {
		gdrc_fini(ctx);
		fail_msg("libgdrcache has no GPU support: %s",
			 reason ? reason : "(no reason)");
	}
	return ctx;
}

static struct gdrc_ctx *cf_open(uint32_t memory)
{
	return cf_open_env(memory, NULL);
}

/* gdrc_mr_get that must succeed; info (optional) is queried. */
static struct gdrc_mr *get(struct gdrc_ctx *ctx, uintptr_t addr, size_t len,
			   struct gdrc_mr_info *info)
{
	struct gdrc_mr *mr = NULL;

	GD(gdrc_mr_get(ctx, pv(addr), len, GDRC_ACCESS_LOCAL_WRITE, 0, &mr));
	assert_non_null(mr);
	if (info)
		GD(gdrc_mr_query(mr, info));
	return mr;
}

static uintptr_t gmalloc(size_t size)
{
	void *p = NULL;

	RT(cudaMalloc(&p, size));
	return (uintptr_t)p;
}

static void gfree(uintptr_t p)
{
	RT(cudaFree((void *)p));
}

/* The driver's view of the allocation holding p. */
static void alloc_range(uintptr_t p, uintptr_t *base_p, size_t *size_p)
{
	CUdeviceptr base = 0;
	size_t size = 0;

	CU(cuMemGetAddressRange(&base, &size, (CUdeviceptr)p));
	*base_p = (uintptr_t)base;
	*size_p = size;
}

/* A registration of the whole GPU allocation [base, base + size) of
 * device, made by the cufile backend: exactly the allocation. */
static void check_cufile_gpu(const struct gdrc_mr_info *i, uintptr_t base,
			     size_t size, int device)
{
	print_mr("registration", i);
	assert_int_equal(i->backend, GDRC_BACKEND_CUFILE);
	assert_int_equal(i->mem_type, GDRC_MEM_CUDA);
	assert_int_equal(i->kind, GDRC_PTR_DEVICE);
	assert_int_equal(i->device, device);
	assert_int_equal(i->addr, base);
	assert_int_equal(i->length, size);
	assert_int_equal(i->key_addr, base);
	assert_int_equal(i->key_length, size);
	assert_int_equal(i->lkey, 0);
	assert_int_equal(i->rkey, 0);
	assert_int_equal(i->buffer_id, buffer_id_of((CUdeviceptr)base));
	assert_true(i->flags & GDRC_MR_INFO_CACHED);
}

/* The program's own registration of [base, base + len) succeeds and is
 * deregistered: nothing else holds the base in cuFile. */
static void base_is_free(uintptr_t base, size_t len)
{
	CF_EXPECT(cuFileBufRegister(pv(base), len, 0), CU_FILE_SUCCESS);
	CF_EXPECT(cuFileBufDeregister(pv(base)), CU_FILE_SUCCESS);
}

/* Something (the cache) holds base registered in cuFile. */
static void base_is_registered(uintptr_t base, size_t len)
{
	CF_EXPECT(cuFileBufRegister(pv(base), len, 0),
		  CU_FILE_MEMORY_ALREADY_REGISTERED);
}

/*
 * After want was freed: cudaMalloc size bytes until want comes back (up
 * to REALLOC_TRIES times), holding the other allocations meanwhile, then
 * free those.  @return 1 if want is allocated again (the caller owns it).
 */
static int realloc_same_va(uintptr_t want, size_t size)
{
	uintptr_t held[REALLOC_TRIES], q;
	int n = 0, found = 0;

	for (int i = 0; i < REALLOC_TRIES; i++) {
		q = gmalloc(size);
		if (q == want) {
			found = 1;
			break;
		}
		held[n++] = q;
	}
	for (int i = 0; i < n; i++)
		gfree(held[i]);
	print_message("    freed VA %#lx %s after %d other allocation(s)\n",
		      (unsigned long)want,
		      found ? "came back" : "never came back", n);
	return found;
}

/* Device 0 current again (the runtime's and the driver's view). */
static int restore_ctx0(void **state)
{
	(void)state;
	if (cudaSetDevice(0) != cudaSuccess ||
	    cuCtxSetCurrent(pctx0) != CUDA_SUCCESS)
		return -1;
	return 0;
}

/* ====================================================================
 * The test file
 * ==================================================================== */

/* Make the file and register it with cuFile (the keeper has the driver
 * open).  Without a handle, tf.why says why; not a failure. */
static int tf_setup(void)
{
	const char *dir = getenv("GDRC_TEST_CUFILE_DIR");
	CUfileDescr_t descr;
	CUfileError_t e;
	uint64_t *chunk;
	int fd;

	if (!dir || !*dir)
		dir = "/tmp";
	tf.seed = ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
	snprintf(tf.path, sizeof(tf.path), "%s/gdrc-cufile.XXXXXX", dir);
	fd = mkstemp(tf.path);
	if (fd < 0) {
		print_error("mkstemp(%s): %s\n", tf.path, strerror(errno));
		tf.path[0] = '\0';
		return -1;
	}
	chunk = malloc(MIB);
	if (!chunk)
		return -1;
	for (uint64_t o = 0; o < TF_SIZE; o += MIB) {
		for (size_t j = 0; j < MIB / 8; j++)
			chunk[j] = file_word(o + 8 * j);
		if (pwrite(fd, chunk, MIB, (off_t)o) != (ssize_t)MIB) {
			print_error("writing %s: %s\n", tf.path,
				    strerror(errno));
			free(chunk);
			close(fd);
			return -1;
		}
	}
	free(chunk);
	if (fsync(fd)) {
		close(fd);
		return -1;
	}
	tf.plain_fd = fd;
	tf.fd = open(tf.path, O_RDWR | O_DIRECT);
	if (tf.fd < 0 && errno == EINVAL)
		tf.fd = open(tf.path, O_RDWR);
	if (tf.fd < 0) {
		print_error("open(%s): %s\n", tf.path, strerror(errno));
		return -1;
	}
	memset(&descr, 0, sizeof(descr));
	descr.handle.fd = tf.fd;
	descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	e = cuFileHandleRegister(&tf.fh, &descr);
	if (e.err != CU_FILE_SUCCESS) {
		snprintf(tf.why, sizeof(tf.why),
			 "cuFileHandleRegister of %s: %d (%s)%s", tf.path,
			 (int)e.err, CUFILE_ERRSTR((int)e.err),
			 e.err == CU_FILE_HANDLE_NOT_REGISTERED ?
				 "; cuFile finds no udev entry for the "
				 "file's disk (a container without "
				 "/run/udev: tests/gpu/udev_entry.sh)" :
				 "");
		printf("note: %s\n", tf.why);
		return 0;
	}
	tf.have_fh = 1;
	return 0;
}

static void tf_teardown(void)
{
	if (tf.have_fh)
		cuFileHandleDeregister(tf.fh);
	tf.have_fh = 0;
	if (tf.fd >= 0)
		close(tf.fd);
	if (tf.plain_fd >= 0)
		close(tf.plain_fd);
	if (tf.path[0])
		unlink(tf.path);
}

/* Is host[0, len) the file at off?  Fails at the first wrong byte. */
static void check_file_words(const unsigned char *host, size_t len,
			     uint64_t off, const char *what)
{
	const uint64_t *w = (const uint64_t *)host;

	for (size_t j = 0; j < len / 8; j++) {
		if (w[j] == file_word(off + 8 * j))
			continue;
		fail_msg("%s: the word at +%zu is %#llx, the file's %#llx%s",
			 what, 8 * j, (unsigned long long)w[j],
			 (unsigned long long)file_word(off + 8 * j),
			 host[8 * j] == POISON ? " (never written)" : "");
	}
}

static void check_poison(const unsigned char *host, size_t len,
			 const char *what)
{
	for (size_t j = 0; j < len; j++)
		if (host[j] != POISON)
			fail_msg("%s: byte %zu is %#x, was %#x: the I/O "
				 "wrote outside its range", what, j, host[j],
				 POISON);
}

/* ====================================================================
 * (a) whole allocations, hits, gdrc_release_unused
 * ==================================================================== */

static void test_cufile_gpu_whole_alloc_cudart(void **state)
{
	static const size_t sizes[] = { 1 * MIB, 4 * MIB, 1000000 };
	struct gdrc_ctx *ctx = cf_open(GDRC_CUFILE_ALL);

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		struct gdrc_mr_info info, again;
		struct gdrc_mr *mr;
		uintptr_t p = gmalloc(sizes[i]), base;
		uint64_t released = 0;
		size_t size;

		alloc_range(p, &base, &size);
		print_message("    cudaMalloc(%zu): %#lx, the driver's "
			      "allocation %#lx+%zu\n", sizes[i],
			      (unsigned long)p, (unsigned long)base, size);
		assert_int_equal(base, p);
		/* A range in its middle: the registration is the whole
		 * allocation, unrounded. */
		mr = get(ctx, p + sizes[i] / 4, 4096, &info);
		check_cufile_gpu(&info, base, size, 0);
		assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), i + 1);
		base_is_registered(base, size);
		gdrc_mr_put(ctx, mr);

		/* Another range inside it, to its last byte: a hit. */
		mr = get(ctx, p + sizes[i] / 2, sizes[i] - sizes[i] / 2,
			 &again);
		assert_int_equal(again.id, info.id);
		assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), i + 1);
		assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), i + 1);
		gdrc_mr_put(ctx, mr);
		assert_int_equal(dev_stat_of(ctx, 0,
					     GDRC_DEVICE_STAT_PINNED_BYTES),
				 size);

		GD(gdrc_release_unused(ctx, 0, &released));
		assert_int_equal(released, 1);
		assert_int_equal(stat_of(ctx, GDRC_STAT_DEREGS), i + 1);
		assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
		assert_int_equal(dev_stat_of(ctx, 0,
					     GDRC_DEVICE_STAT_PINNED_BYTES),
				 0);
		base_is_free(base, size);
		gfree(p);
	}
	/* Released before their frees: nothing left for a free to do. */
	assert_int_equal(stat_of(ctx, GDRC_STAT_FREE_DEREGS), 0);
	gdrc_fini(ctx);
}

/* ====================================================================
 * (b) the free before the release
 * ==================================================================== */

/* The CUDA free hooks are on: the free step depends on them. */
static void require_cuda_hooks(struct gdrc_ctx *ctx)
{
	const char *reason = NULL;

	if (gdrc_cuda_hooks_status(ctx, &reason) != GDRC_OK)
		fail_msg("the CUDA free hooks are off: %s",
			 reason ? reason : "(no reason)");
}

/*
 * After the registration of the allocation at p was released inside its
 * cudaFree: the next allocation at that address registers, by the
 * program and by the cache; the cache's is cached when it is freed in
 * turn, and released inside that free.  @return how many registrations
 * that free released: 1, or 0 when the address did not come back.
 */
static int check_reuse(struct gdrc_ctx *ctx, uintptr_t p, size_t size)
{
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;

	if (!realloc_same_va(p, size)) {
		print_message("    the freed address did not come back: the "
			      "new allocation at the old address was not "
			      "tried\n");
		return 0;
	}
	/* A registration that outlived its memory: 5023 here. */
	base_is_free(p, size);
	mr = get(ctx, p, size, &info);
	check_cufile_gpu(&info, p, size, 0);
	gdrc_mr_put(ctx, mr);
	gfree(p);
	return 1;
}

static void test_cufile_gpu_free_cached_cudart(void **state)
{
	struct gdrc_ctx *ctx = cf_open(GDRC_CUFILE_ALL);
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;
	uintptr_t p = gmalloc(4 * MIB);
	int reused;

	(void)state;
	require_cuda_hooks(ctx);
	mr = get(ctx, p, 4 * MIB, &info);
	check_cufile_gpu(&info, p, 4 * MIB, 0);
	gdrc_mr_put(ctx, mr); /* cached, held by nobody */
	base_is_registered(p, 4 * MIB);
	assert_int_equal(stat_of(ctx, GDRC_STAT_FREE_DEREGS), 0);

	gfree(p);
	/* Deregistered inside cudaFree, before the driver freed. */
	assert_int_equal(stat_of(ctx, GDRC_STAT_FREE_DEREGS), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_DEREGS), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_PINNED_BYTES),
			 0);

	reused = check_reuse(ctx, p, 4 * MIB);
	assert_int_equal(stat_of(ctx, GDRC_STAT_FREE_DEREGS), 1 + reused);
	gdrc_fini(ctx);
}

/* A gdrc_set_free_fn user holding one registration. */
struct holder {
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr; /* held; NULL once put */
	uintptr_t base;     /* its allocation */
	int calls, puts;
};

/* Inside the program's CUDA free: put what it frees. */
static void holder_free(void *arg, uintptr_t start, uintptr_t end)
{
	struct holder *h = arg;

	h->calls++;
	if (h->mr && start <= h->base && h->base < end) {
		gdrc_mr_put(h->ctx, h->mr);
		h->mr = NULL;
		h->puts++;
	}
}

static void test_cufile_gpu_free_held_cudart(void **state)
{
	struct gdrc_ctx *ctx = cf_open(GDRC_CUFILE_ALL);
	struct holder h = { .ctx = ctx };
	struct gdrc_mr_info info;
	uintptr_t p = gmalloc(4 * MIB);
	int reused;

	(void)state;
	require_cuda_hooks(ctx);
	GD(gdrc_set_free_fn(ctx, holder_free, &h));
	h.base = p;
	h.mr = get(ctx, p + 64 * KIB, 1 * MIB, &info); /* held */
	check_cufile_gpu(&info, p, 4 * MIB, 0);
	base_is_registered(p, 4 * MIB);

	gfree(p);
	print_message("    free callback: %d call(s), %d put(s)\n", h.calls,
		      h.puts);
	assert_int_equal(h.puts, 1);
	assert_null(h.mr);
	/* The callback's put, the last, deregistered inside the free. */
	assert_int_equal(stat_of(ctx, GDRC_STAT_FREE_DEREGS), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_DEREGS), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_PUTS), 1);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_PINNED_BYTES),
			 0);

	reused = check_reuse(ctx, p, 4 * MIB);
	assert_int_equal(h.puts, 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_FREE_DEREGS), 1 + reused);
	GD(gdrc_set_free_fn(ctx, NULL, NULL));
	gdrc_fini(ctx);
}

/* ====================================================================
 * (c) cuFileRead and cuFileWrite through the cache
 * ==================================================================== */

static void test_cufile_gpu_read_write_cudart(void **state)
{
	const size_t size = 4 * MIB, len = 1 * MIB, wlen = 512 * KIB;
	const uint64_t foff = 2 * MIB + 12 * KIB, woff = 5 * MIB + 4 * KIB;
	struct gdrc_ctx *ctx;
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;
	unsigned char *host;
	uint64_t *pat;
	uintptr_t p, ptr, wptr;
	ssize_t n;

	(void)state;
	if (!tf.have_fh) {
		print_message("    skipped: %s\n", tf.why[0] ? tf.why :
				      "no test file");
		skip();
	}
	ctx = cf_open(GDRC_CUFILE_GPU);
	host = malloc(len + 8 * KIB);
	pat = malloc(wlen);
	assert_non_null(host);
	assert_non_null(pat);
	p = gmalloc(size);
	RT(cudaMemset((void *)p, POISON, size));
	RT(cudaDeviceSynchronize());

	/* Read into base + 68 KiB; the program registered nothing. */
	ptr = p + 64 * KIB + 4 * KIB;
	mr = get(ctx, ptr, len, &info);
	check_cufile_gpu(&info, p, size, 0);
	n = cuFileRead(tf.fh, (void *)info.addr, len, (off_t)foff,
		       (off_t)(ptr - info.addr));
	gdrc_mr_put(ctx, mr);
	if (n != (ssize_t)len)
		fail_msg("cuFileRead(%#lx + %#lx, %zu at %llu): %zd (%s)",
			 (unsigned long)info.addr,
			 (unsigned long)(ptr - info.addr), len,
			 (unsigned long long)foff, n,
			 n < 0 ? CUFILE_ERRSTR((int)n) : "short read");
	RT(cudaMemcpy(host, (void *)(ptr - 4 * KIB), len + 8 * KIB,
		      cudaMemcpyDeviceToHost));
	check_poison(host, 4 * KIB, "before the read's range");
	check_file_words(host + 4 * KIB, len, foff, "cuFileRead");
	check_poison(host + 4 * KIB + len, 4 * KIB, "after the read's range");
	print_message("    cuFileRead of %zu bytes at +%#lx of a registration "
		      "the program never made: every byte right\n", len,
		      (unsigned long)(ptr - info.addr));

	/* Write from base + 2 MiB + 8 KiB: the same registration, a hit. */
	wptr = p + 2 * MIB + 8 * KIB;
	for (size_t j = 0; j < wlen / 8; j++)
		pat[j] = 0xc0ffee0000000000ull ^
			 (j * 0x9e3779b97f4a7c15ull);
	RT(cudaMemcpy((void *)wptr, pat, wlen, cudaMemcpyHostToDevice));
	mr = get(ctx, wptr, wlen, &info);
	assert_int_equal(info.addr, p);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 1);
	n = cuFileWrite(tf.fh, (const void *)info.addr, wlen, (off_t)woff,
			(off_t)(wptr - info.addr));
	gdrc_mr_put(ctx, mr);
	if (n != (ssize_t)wlen)
		fail_msg("cuFileWrite(%#lx + %#lx, %zu at %llu): %zd (%s)",
			 (unsigned long)info.addr,
			 (unsigned long)(wptr - info.addr), wlen,
			 (unsigned long long)woff, n,
			 n < 0 ? CUFILE_ERRSTR((int)n) : "short write");
	memset(host, 0, wlen);
	assert_int_equal(pread(tf.plain_fd, host, wlen, (off_t)woff),
			 (ssize_t)wlen);
	if (memcmp(host, pat, wlen)) {
		size_t j = 0;

		while (((uint64_t *)host)[j] == pat[j])
			j++;
		fail_msg("cuFileWrite: the file's word at +%zu is %#llx, the "
			 "GPU's %#llx", 8 * j,
			 (unsigned long long)((uint64_t *)host)[j],
			 (unsigned long long)pat[j]);
	}
	print_message("    cuFileWrite of %zu bytes from +%#lx: the file "
		      "holds every byte\n", wlen,
		      (unsigned long)(wptr - info.addr));

	base_is_registered(p, size);
	GD(gdrc_release_unused(ctx, 0, NULL));
	base_is_free(p, size);
	gfree(p);
	free(pat);
	free(host);
	gdrc_fini(ctx);
}

/* ====================================================================
 * (d) the per-device byte limit
 * ==================================================================== */

static void test_cufile_gpu_device_limit_cudart(void **state)
{
	static const char *const env[] = { "GDRC_GPU_MAX_BYTES", "6M", NULL };
	struct gdrc_ctx *ctx = cf_open_env(GDRC_CUFILE_ALL, env);
	struct gdrc_mr *ma, *mb, *mc = NULL;
	uintptr_t a = gmalloc(4 * MIB), b = gmalloc(4 * MIB),
		  c = gmalloc(4 * MIB);

	(void)state;
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_MAX_BYTES),
			 6 * MIB);
	ma = get(ctx, a, 4 * MIB, NULL);
	gdrc_mr_put(ctx, ma); /* cached, unused */

	/* b does not fit beside a: a, unused, is evicted. */
	mb = get(ctx, b, 4 * MIB, NULL);
	assert_int_equal(stat_of(ctx, GDRC_STAT_EVICTIONS), 1);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_EVICTIONS), 1);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_PINNED_BYTES),
			 4 * MIB);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 1);
	base_is_free(a, 4 * MIB); /* deregistered by the eviction */
	base_is_registered(b, 4 * MIB);

	/* b held: c cannot fit, and nothing is registered for it. */
	GD_EXPECT(gdrc_mr_get(ctx, pv(c), 4 * MIB, GDRC_ACCESS_LOCAL_WRITE,
			      0, &mc),
		  GDRC_ERR_LIMIT);
	assert_null(mc);
	assert_int_equal(stat_of(ctx, GDRC_STAT_LIMIT_REJECTS), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_EVICTIONS), 1);
	base_is_free(c, 4 * MIB);

	/* b put: c takes its place. */
	gdrc_mr_put(ctx, mb);
	mc = get(ctx, c, 4 * MIB, NULL);
	assert_int_equal(stat_of(ctx, GDRC_STAT_EVICTIONS), 2);
	base_is_free(b, 4 * MIB);
	gdrc_mr_put(ctx, mc);
	gdrc_fini(ctx);
	base_is_free(c, 4 * MIB);
	gfree(c);
	gfree(b);
	gfree(a);
}

/* ====================================================================
 * (e) host memory
 * ==================================================================== */

static void test_cufile_gpu_host_refused_malloc(void **state)
{
	struct gdrc_ctx *ctx = cf_open(GDRC_CUFILE_GPU);
	struct gdrc_mr *mr = NULL;
	void *h = aligned_alloc(4096, 1 * MIB);
	uintptr_t g = gmalloc(1 * MIB);

	(void)state;
	assert_non_null(h);
	memset(h, 0, 1 * MIB);
	GD_EXPECT(gdrc_mr_get(ctx, h, 1 * MIB, GDRC_ACCESS_LOCAL_WRITE, 0,
			      &mr),
		  GDRC_ERR_UNSUPPORTED);
	assert_null(mr);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	gdrc_fini(ctx);
	base_is_free((uintptr_t)h, 1 * MIB);

	/* And GPU memory in a context for host memory only. */
	ctx = cf_open(GDRC_CUFILE_HOST);
	GD_EXPECT(gdrc_mr_get(ctx, pv(g), 1 * MIB, GDRC_ACCESS_LOCAL_WRITE,
			      0, &mr),
		  GDRC_ERR_UNSUPPORTED);
	assert_null(mr);
	gdrc_fini(ctx);
	base_is_free(g, 1 * MIB);
	gfree(g);
	free(h);
}

static void test_cufile_gpu_host_registered_malloc(void **state)
{
	struct gdrc_ctx *ctx = cf_open(GDRC_CUFILE_ALL);
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;
	void *h = aligned_alloc(4096, 1 * MIB);
	uint64_t released = 0;

	(void)state;
	assert_non_null(h);
	memset(h, 0, 1 * MIB);
	mr = get(ctx, (uintptr_t)h, 1 * MIB, &info);
	print_mr("host registration", &info);
	assert_int_equal(info.backend, GDRC_BACKEND_CUFILE);
	assert_int_equal(info.mem_type, GDRC_MEM_HOST);
	assert_int_equal(info.kind, GDRC_PTR_HOST);
	assert_int_equal(info.device, -1);
	assert_int_equal(info.addr, (uintptr_t)h);
	assert_int_equal(info.length, 1 * MIB);
	base_is_registered((uintptr_t)h, 1 * MIB);
	gdrc_mr_put(ctx, mr);

	GD(gdrc_release_unused(ctx, GDRC_DEVICE_HOST, &released));
	assert_int_equal(released, 1);
	base_is_free((uintptr_t)h, 1 * MIB);
	gdrc_fini(ctx);
	free(h);
}

/* ====================================================================
 * (f) a second GPU
 * ==================================================================== */

static void test_cufile_gpu_second_device_cudart(void **state)
{
	struct gdrc_ctx *ctx;
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;
	CUcontext cur = NULL;
	uintptr_t p1, q1;
	uint64_t released = 0;

	(void)state;
	if (ndevices < 2) {
		print_message("    skipped: one GPU\n");
		skip();
	}
	ctx = cf_open(GDRC_CUFILE_ALL);
	require_cuda_hooks(ctx);
	RT(cudaSetDevice(1));
	p1 = gmalloc(2 * MIB);
	q1 = gmalloc(1 * MIB);
	RT(cudaSetDevice(0));
	CU(cuCtxGetCurrent(&cur));
	assert_ptr_equal(cur, pctx0);

	/* Registered in device 1's context; device 0's stays current. */
	mr = get(ctx, p1 + 4 * KIB, 64 * KIB, &info);
	check_cufile_gpu(&info, p1, 2 * MIB, 1);
	CU(cuCtxGetCurrent(&cur));
	assert_ptr_equal(cur, pctx0);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_PINNED_BYTES),
			 2 * MIB);
	assert_int_equal(dev_stat_of(ctx, 0, GDRC_DEVICE_STAT_PINNED_BYTES),
			 0);
	gdrc_mr_put(ctx, mr);
	RT(cudaSetDevice(1));
	base_is_registered(p1, 2 * MIB);
	RT(cudaSetDevice(0));

	/* Freed with device 0 current: deregistered inside the free. */
	gfree(p1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_FREE_DEREGS), 1);
	assert_int_equal(dev_stat_of(ctx, 1, GDRC_DEVICE_STAT_PINNED_BYTES),
			 0);

	/* gdrc_release_unused by device. */
	mr = get(ctx, q1, 1 * MIB, &info);
	check_cufile_gpu(&info, q1, 1 * MIB, 1);
	gdrc_mr_put(ctx, mr);
	GD(gdrc_release_unused(ctx, 0, &released));
	assert_int_equal(released, 0);
	GD(gdrc_release_unused(ctx, 1, &released));
	assert_int_equal(released, 1);
	RT(cudaSetDevice(1));
	base_is_free(q1, 1 * MIB);
	gfree(q1);
	RT(cudaSetDevice(0));
	gdrc_fini(ctx);
}

/* ====================================================================
 * Control: cuFile without the cache
 * ==================================================================== */

static void test_cufile_gpu_control_stale_cudart(void **state)
{
	uintptr_t p = gmalloc(4 * MIB);
	CUfileError_t e;

	(void)state;
	CF_EXPECT(cuFileBufRegister(pv(p), 4 * MIB, 0), CU_FILE_SUCCESS);
	gfree(p); /* not deregistered: the program's bug */
	if (!realloc_same_va(p, 4 * MIB)) {
		print_message("    the freed address did not come back\n");
		CF_EXPECT(cuFileBufDeregister(pv(p)), CU_FILE_SUCCESS);
		return;
	}
	e = cuFileBufRegister(pv(p), 4 * MIB, 0);
	print_message("    control: registered, freed without deregistering, "
		      "allocated again at the same address: "
		      "cuFileBufRegister -> %d (%s)%s\n", (int)e.err,
		      CUFILE_ERRSTR((int)e.err),
		      e.err == CU_FILE_MEMORY_ALREADY_REGISTERED ?
			      ", as storage-probe.md measured: what "
			      "free_cached and free_held guard against" :
			      "; storage-probe.md measured 5023 here");
	/* Let go of both (cufile_stale.c's clean-up). */
	cuFileBufDeregister(pv(p));
	if (e.err == CU_FILE_SUCCESS)
		cuFileBufDeregister(pv(p));
	gfree(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cufile_gpu_whole_alloc_cudart),
		cmocka_unit_test(test_cufile_gpu_free_cached_cudart),
		cmocka_unit_test(test_cufile_gpu_free_held_cudart),
		cmocka_unit_test(test_cufile_gpu_read_write_cudart),
		cmocka_unit_test(test_cufile_gpu_device_limit_cudart),
		cmocka_unit_test(test_cufile_gpu_host_refused_malloc),
		cmocka_unit_test(test_cufile_gpu_host_registered_malloc),
		cmocka_unit_test_teardown(test_cufile_gpu_second_device_cudart,
					  restore_ctx0),
		cmocka_unit_test(test_cufile_gpu_control_stale_cudart),
	};
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_CUFILE,
				   .cufile = GDRC_CUFILE_ALL };
	const char *lib;
	char name[128];
	gdrc_status_t status;
	int skip_rc, driver = 0, rc;

	skip_rc = gpu_test_start(&ndevices);
	if (skip_rc)
		return skip_rc;
	/* The toolkit's libcufile, the one this program is linked with,
	 * unless the environment names one. */
	setenv("GDRC_CUFILE_LIBRARY", GDRC_TEST_CUFILE_SO, 0);
	lib = getenv("GDRC_CUFILE_LIBRARY");
	if (gpu_test_ctx0(&dev0, &pctx0, name, sizeof(name), &driver))
		return 1;
	if (cudaSetDevice(0) != cudaSuccess || cudaFree(NULL) != cudaSuccess) {
		printf("the CUDA runtime could not start on device 0\n");
		return 1;
	}
	status = gdrc_init(&cfg, &keeper);
	if (status == GDRC_ERR_UNSUPPORTED) {
		printf("skipped: no libcufile (GDRC_CUFILE_LIBRARY=%s could "
		       "not be loaded: the line above says why)\n", lib);
		return 77;
	}
	if (status == GDRC_ERR_NO_DEVICE) {
		printf("skipped: cuFileDriverOpen failed (its status is in "
		       "the line above)\n");
		return 77;
	}
	if (status != GDRC_OK) {
		printf("gdrc_init of a cuFile context: %s\n",
		       gdrc_status_str(status));
		return 1;
	}
	printf("%s, driver %d, %d device(s), libcufile %s\n", name, driver,
	       ndevices, lib);
	if (tf_setup()) {
		tf_teardown();
		gdrc_fini(keeper);
		return 1;
	}
	rc = cmocka_run_group_tests_name("cufile gpu", tests, NULL, NULL);
	tf_teardown();
	gdrc_fini(keeper);
	if (gpu_test_ctx0_release(dev0, pctx0))
		rc = rc ? rc : 1;
	return rc;
}
