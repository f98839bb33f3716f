// SPDX-License-Identifier: BSD-3-Clause
/*
 * cufile_client.c - a cuFile program as one is written without the
 * cache (it calls cuFileBufRegister, cuFileRead... itself), run by
 * run_cufile_preload.sh plain and under libgdrcache-preload.so, against
 * the fake libcufile (libcufile.so.0, linked here) and the fake CUDA
 * driver (its control API makes the "GPU" memory; frees go through its
 * cuMemFree_v2, which the preload's CUDA hooks patch).  The fake's
 * counts and I/O log say what libcufile saw.
 *
 *   cufile_client TEST plain|preload
 *
 * TEST is one of:
 *   transparency  the program's registrations and their errors: each
 *                 status printed ("name status") and checked; the two
 *                 runs print the same lines.
 *   cache         reads into GPU memory never registered: one
 *                 registration for all (preload) or none and bounce
 *                 I/O (plain); host reads and writes move the file's
 *                 bytes either way.
 *   free          registered memory freed without cuFileBufDeregister,
 *                 then allocated again at the same address and
 *                 registered: 5023 plain, 0 under the preload, which
 *                 deregistered before the free (no orphan).
 *   per_io        register, read, deregister around every I/O: one real
 *                 registration for all of them under the preload.
 *
 * The mode says which results to expect.  Exit 0: all as expected.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "fake_cufile.h"

#define KIB 1024UL
#define MIB (1024UL * 1024)
#define FILE_SIZE (4 * MIB)
#define ROUNDS 8

static int preloaded;
static int failures;

static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "cufile_client: FAIL: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	failures++;
}

#define EXPECT(cond, ...)                                                    \
	do {                                                                 \
		if (!(cond))                                                 \
			fail(__VA_ARGS__);                                   \
	} while (0)

/* Print a status as "name status" (the lines both runs must share) and
 * check it. */
static void status_is(const char *name, CUfileError_t e, int want)
{
	printf("%s %d\n", name, (int)e.err);
	EXPECT((int)e.err == want, "%s: status %d, expected %d", name,
	       (int)e.err, want);
}

static CUfileError_t reg(CUdeviceptr p, size_t len)
{
	return cuFileBufRegister((const void *)(uintptr_t)p, len, 0);
}

static CUfileError_t dereg(CUdeviceptr p)
{
	return cuFileBufDeregister((const void *)(uintptr_t)p);
}

static CUdeviceptr gpu_alloc(size_t size)
{
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, size, 0);

	if (!p) {
		fprintf(stderr, "cufile_client: fake_cuda_alloc failed\n");
		exit(2);
	}
	return p;
}

static unsigned char pattern(off_t off)
{
	return (unsigned char)(off * 7 + 3);
}

/* A temporary file of FILE_SIZE known bytes, registered with cuFile. */
static CUfileHandle_t test_file(int *fd_p)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];
	unsigned char *buf = malloc(FILE_SIZE);
	CUfileDescr_t descr = { .type = CU_FILE_HANDLE_TYPE_OPAQUE_FD };
	CUfileHandle_t fh = NULL;
	CUfileError_t e;
	int fd;

	snprintf(path, sizeof(path), "%s/cufile_client.XXXXXX",
		 dir ? dir : "/tmp");
	fd = mkstemp(path);
	if (fd < 0 || !buf) {
		perror("cufile_client: test file");
		exit(2);
	}
	unlink(path);
	for (off_t i = 0; i < (off_t)FILE_SIZE; i++)
		buf[i] = pattern(i);
	if (pwrite(fd, buf, FILE_SIZE, 0) != (ssize_t)FILE_SIZE) {
		perror("cufile_client: pwrite");
		exit(2);
	}
	free(buf);
	descr.handle.fd = fd;
	e = cuFileHandleRegister(&fh, &descr);
	if (e.err != CU_FILE_SUCCESS) {
		fprintf(stderr, "cufile_client: cuFileHandleRegister: %d\n",
			(int)e.err);
		exit(2);
	}
	*fd_p = fd;
	return fh;
}

static unsigned long calls(const char *fn)
{
	return fake_cufile_calls(fn);
}

/* ------------------------------------------------------------------ */

static void run_transparency(void)
{
	CUdeviceptr p = gpu_alloc(4 * MIB), p2 = gpu_alloc(64 * KIB), h;
	void *host = NULL;

	if (posix_memalign(&host, 4096, 256 * KIB))
		exit(2);
	h = (uintptr_t)host;
	status_is("register", reg(p, 4 * MIB), CU_FILE_SUCCESS);
	status_is("register_again", reg(p, 4 * MIB),
		  CU_FILE_MEMORY_ALREADY_REGISTERED);
	status_is("register_interior", reg(p + 100, 64 * KIB),
		  CU_FILE_SUCCESS);
	status_is("register_overlap", reg(p + 64 * KIB, MIB),
		  CU_FILE_SUCCESS);
	status_is("register_past_end", reg(p + 3 * MIB, 2 * MIB),
		  CU_FILE_CUDA_POINTER_RANGE_ERROR);
	status_is("register_null", reg(0, 4096), CU_FILE_INVALID_VALUE);
	status_is("register_len0", reg(h, 0), CU_FILE_INVALID_VALUE);
	status_is("register_flags",
		  cuFileBufRegister((const void *)(uintptr_t)p2, 64 * KIB, 1),
		  CU_FILE_SUCCESS);
	/* Flagged: cuFile's own, inside memory the cache registered. */
	status_is("register_flags_inside",
		  cuFileBufRegister((const void *)(uintptr_t)(p + 128 * KIB),
				    64 * KIB, 1),
		  CU_FILE_SUCCESS);
	status_is("host_register", reg(h, 256 * KIB), CU_FILE_SUCCESS);
	status_is("host_register_again", reg(h, 256 * KIB),
		  CU_FILE_MEMORY_ALREADY_REGISTERED);

	status_is("deregister", dereg(p), CU_FILE_SUCCESS);
	status_is("deregister_again", dereg(p), FAKE_CUFILE_DEREG_UNKNOWN);
	status_is("deregister_interior", dereg(p + 100), CU_FILE_SUCCESS);
	status_is("deregister_overlap", dereg(p + 64 * KIB), CU_FILE_SUCCESS);
	status_is("deregister_never", dereg(p + 200),
		  FAKE_CUFILE_DEREG_UNKNOWN);
	status_is("deregister_flags", dereg(p2), CU_FILE_SUCCESS);
	status_is("deregister_flags_inside", dereg(p + 128 * KIB),
		  CU_FILE_SUCCESS);
	status_is("host_deregister", dereg(h), CU_FILE_SUCCESS);
	status_is("host_deregister_again", dereg(h),
		  FAKE_CUFILE_DEREG_UNKNOWN);
	status_is("register_after_deregister", reg(p, 4 * MIB),
		  CU_FILE_SUCCESS);
	status_is("deregister_last", dereg(p), CU_FILE_SUCCESS);

	/* What libcufile saw: every call plain; under the preload, one
	 * registration for the allocation, one for the host buffer, the
	 * flagged ones, and the refused ones, which it passed on. */
	if (preloaded) {
		EXPECT(calls("cuFileBufRegister") == 7,
		       "%lu registrations reached cuFile, expected 7 (the "
		       "allocation, the host buffer, the two flagged ones, "
		       "three refused)",
		       calls("cuFileBufRegister"));
		/* Still cached: the allocation and the host buffer. */
		EXPECT(fake_cufile_live() == 2, "%lu live, expected 2",
		       fake_cufile_live());
	} else {
		EXPECT(calls("cuFileBufRegister") == 12,
		       "%lu registrations, expected 12",
		       calls("cuFileBufRegister"));
		EXPECT(fake_cufile_live() == 0, "%lu live, expected 0",
		       fake_cufile_live());
	}
	EXPECT(cuMemFree_v2(p) == CUDA_SUCCESS, "cuMemFree_v2");
	EXPECT(cuMemFree_v2(p2) == CUDA_SUCCESS, "cuMemFree_v2");
	/* The cache's own registration went before the free. */
	EXPECT(fake_cufile_orphaned_total() == 0, "%lu orphaned",
	       fake_cufile_orphaned_total());
	free(host);
}

/* The fake's log of the last n I/Os (n <= FAKE_CUFILE_IO_LOG). */
static void io_log(struct fake_cufile_io *io, int n)
{
	if (fake_cufile_io_log(io, n) != n) {
		fprintf(stderr, "cufile_client: the I/O log is short\n");
		exit(2);
	}
}

static void run_cache(void)
{
	struct fake_cufile_io io[ROUNDS];
	unsigned char *buf = malloc(100000), *wbuf = malloc(50000);
	unsigned char back[50000];
	CUdeviceptr p = gpu_alloc(4 * MIB);
	CUfileHandle_t fh;
	ssize_t ret;
	int fd, bad;

	fh = test_file(&fd);
	/* Into GPU memory, never registered: a buffer at a new place each
	 * time. */
	for (int i = 0; i < ROUNDS; i++) {
		ret = cuFileRead(fh, (void *)(uintptr_t)(p + i * 64 * KIB),
				 64 * KIB, (off_t)(i * 64 * KIB), 0);
		EXPECT(ret == (ssize_t)(64 * KIB), "read %d returned %zd", i,
		       ret);
	}
	io_log(io, ROUNDS);
	for (int i = 0; i < ROUNDS; i++) {
		uintptr_t at = p + i * 64 * KIB;

		if (preloaded)
			EXPECT(io[i].base == (void *)(uintptr_t)p &&
				       io[i].buf_offset ==
					       (off_t)(at - p) &&
				       io[i].registered == 1,
			       "read %d: base %p offset %jd registered %d, "
			       "expected %p %jd 1",
			       i, io[i].base, (intmax_t)io[i].buf_offset,
			       io[i].registered, (void *)(uintptr_t)p,
			       (intmax_t)(at - p));
		else
			EXPECT(io[i].base == (void *)at &&
				       io[i].buf_offset == 0 &&
				       io[i].registered == 0,
			       "read %d: base %p offset %jd registered %d",
			       i, io[i].base, (intmax_t)io[i].buf_offset,
			       io[i].registered);
	}
	EXPECT(calls("cuFileBufRegister") == (preloaded ? 1u : 0u),
	       "%lu registrations for %d reads",
	       calls("cuFileBufRegister"), ROUNDS);
	EXPECT(fake_cufile_io_count(preloaded ? 1 : 0) == ROUNDS,
	       "%lu I/Os %s, expected %d",
	       fake_cufile_io_count(preloaded ? 1 : 0),
	       preloaded ? "registered" : "through the bounce buffer",
	       ROUNDS);

	/* Host memory: the file's bytes land, registered or not. */
	memset(buf, 0, 100000);
	ret = cuFileRead(fh, buf, 100000, 12345, 0);
	EXPECT(ret == 100000, "host read returned %zd", ret);
	bad = 0;
	for (off_t i = 0; i < 100000; i++)
		bad += buf[i] != pattern(12345 + i);
	EXPECT(!bad, "host read: %d bytes differ from the file", bad);
	io_log(io, 1);
	EXPECT(io[0].registered == preloaded,
	       "host read registered %d, expected %d", io[0].registered,
	       preloaded);
	if (preloaded)
		EXPECT((uintptr_t)io[0].base ==
				       ((uintptr_t)buf & ~(uintptr_t)4095) &&
			       (uintptr_t)io[0].base + io[0].buf_offset ==
				       (uintptr_t)buf,
		       "host read at %p + %jd, buffer %p", io[0].base,
		       (intmax_t)io[0].buf_offset, (void *)buf);

	/* And back out, from host memory. */
	for (int i = 0; i < 50000; i++)
		wbuf[i] = (unsigned char)(i * 13 + 1);
	ret = cuFileWrite(fh, wbuf + 16, 40000, (off_t)MIB + 7, 0);
	EXPECT(ret == 40000, "host write returned %zd", ret);
	EXPECT(pread(fd, back, 40000, (off_t)MIB + 7) == 40000 &&
		       !memcmp(back, wbuf + 16, 40000),
	       "host write: the file does not hold the bytes written");
	io_log(io, 1);
	EXPECT(io[0].registered == preloaded && io[0].write == 1,
	       "host write registered %d, expected %d", io[0].registered,
	       preloaded);
	/* From GPU memory with an offset of the program's own. */
	ret = cuFileWrite(fh, (const void *)(uintptr_t)(p + 8 * KIB), 4096,
			  2 * MIB, 8192);
	EXPECT(ret == 4096, "device write returned %zd", ret);
	io_log(io, 1);
	if (preloaded)
		EXPECT(io[0].base == (void *)(uintptr_t)p &&
			       io[0].buf_offset == (off_t)(16 * KIB) &&
			       io[0].registered == 1,
		       "device write: base %p offset %jd registered %d",
		       io[0].base, (intmax_t)io[0].buf_offset,
		       io[0].registered);
	else
		EXPECT(io[0].registered == 0, "device write registered");
	/* Still one registration of the allocation (plus the host ones). */
	EXPECT(calls("cuFileBufRegister") == (preloaded ? 3u : 0u),
	       "%lu registrations in all", calls("cuFileBufRegister"));
	cuFileHandleDeregister(fh);
	close(fd);
	free(buf);
	free(wbuf);
}

static void run_free(void)
{
	CUdeviceptr p = gpu_alloc(4 * MIB), q, r;

	status_is("register", reg(p, 4 * MIB), CU_FILE_SUCCESS);
	status_is("register_interior", reg(p + 4096, 4096), CU_FILE_SUCCESS);
	EXPECT(cuMemFree_v2(p) == CUDA_SUCCESS, "cuMemFree_v2(p)");
	q = gpu_alloc(4 * MIB);
	EXPECT(q == p, "the allocator gave %#llx, not the freed %#llx",
	       (unsigned long long)q, (unsigned long long)p);
	/* Plain: both registrations outlived the free; the new memory
	 * cannot be registered.  Preloaded: they went before it. */
	status_is("register_reallocated", reg(q, 4 * MIB),
		  preloaded ? CU_FILE_SUCCESS :
			      CU_FILE_MEMORY_ALREADY_REGISTERED);
	EXPECT(fake_cufile_orphaned_total() == (preloaded ? 0u : 2u),
	       "%lu orphaned, expected %u", fake_cufile_orphaned_total(),
	       preloaded ? 0u : 2u);

	/* Freed, then deregistered late: success either way (cuFile
	 * deregisters the orphan; the preload released it at the free). */
	r = gpu_alloc(MIB);
	status_is("register_other", reg(r, MIB), CU_FILE_SUCCESS);
	EXPECT(cuMemFree_v2(r) == CUDA_SUCCESS, "cuMemFree_v2(r)");
	status_is("deregister_after_free", dereg(r), CU_FILE_SUCCESS);
	EXPECT(fake_cufile_orphaned_total() == (preloaded ? 0u : 3u),
	       "%lu orphaned, expected %u", fake_cufile_orphaned_total(),
	       preloaded ? 0u : 3u);
	if (preloaded) {
		/* The new registration is the program's, as any other. */
		status_is("register_reallocated_again", reg(q, 4 * MIB),
			  CU_FILE_MEMORY_ALREADY_REGISTERED);
		status_is("deregister_reallocated", dereg(q),
			  CU_FILE_SUCCESS);
		EXPECT(fake_cufile_orphans() == 0, "%lu orphans",
		       fake_cufile_orphans());
	}
}

static void run_per_io(void)
{
	CUdeviceptr p = gpu_alloc(MIB);
	struct fake_cufile_io io;
	CUfileHandle_t fh;
	CUfileError_t e;
	ssize_t ret;
	int fd;

	fh = test_file(&fd);
	for (int i = 0; i < ROUNDS; i++) {
		e = reg(p, MIB);
		EXPECT(e.err == CU_FILE_SUCCESS, "round %d: register %d", i,
		       (int)e.err);
		ret = cuFileRead(fh, (void *)(uintptr_t)p, 64 * KIB,
				 (off_t)(i * 64 * KIB), 0);
		EXPECT(ret == (ssize_t)(64 * KIB), "round %d: read %zd", i,
		       ret);
		EXPECT(!fake_cufile_last_io(&io) && io.registered == 1 &&
			       io.base == (void *)(uintptr_t)p &&
			       io.buf_offset == 0,
		       "round %d: the read found no registration", i);
		e = dereg(p);
		EXPECT(e.err == CU_FILE_SUCCESS, "round %d: deregister %d", i,
		       (int)e.err);
	}
	EXPECT(calls("cuFileBufRegister") == (preloaded ? 1u : ROUNDS),
	       "%lu registrations reached cuFile for %d rounds",
	       calls("cuFileBufRegister"), ROUNDS);
	EXPECT(calls("cuFileBufDeregister") == (preloaded ? 0u : ROUNDS),
	       "%lu deregistrations reached cuFile for %d rounds",
	       calls("cuFileBufDeregister"), ROUNDS);
	cuFileHandleDeregister(fh);
	close(fd);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*run)(void);
	} tests[] = {
		{ "transparency", run_transparency },
		{ "cache", run_cache },
		{ "free", run_free },
		{ "per_io", run_per_io },
	};
	CUfileError_t e;

	if (argc != 3 || (strcmp(argv[2], "plain") &&
			  strcmp(argv[2], "preload"))) {
		fprintf(stderr, "usage: cufile_client TEST plain|preload\n");
		return 2;
	}
	preloaded = !strcmp(argv[2], "preload");
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (cuInit(0) != CUDA_SUCCESS) {
		fprintf(stderr, "cufile_client: cuInit failed\n");
		return 2;
	}
	e = cuFileDriverOpen();
	if (e.err != CU_FILE_SUCCESS) {
		fprintf(stderr, "cufile_client: cuFileDriverOpen: %d\n",
			(int)e.err);
		return 2;
	}
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (strcmp(argv[1], tests[i].name))
			continue;
		tests[i].run();
		cuFileDriverClose();
		if (failures)
			fprintf(stderr, "cufile_client: %s %s: %d failed\n",
				argv[1], argv[2], failures);
		return failures ? 1 : 0;
	}
	fprintf(stderr, "cufile_client: unknown test %s\n", argv[1]);
	return 2;
}
