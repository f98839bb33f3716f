// SPDX-License-Identifier: BSD-3-Clause
/*
 * cufile_bench.c - gdrc-cufile-bench: what the cache saves a program that
 * reads files into GPU memory with GPUDirect Storage (cuFile).
 *
 * What it measures (device 0, cuMemAlloc'd memory)
 *   a. registering  at 4 KiB, 64 KiB, 1 MiB and 16 MiB: cuFileBufRegister
 *                   + cuFileBufDeregister of a whole allocation, each
 *                   round timed (20 rounds; median and fastest), against
 *                   gdrc_mr_get + gdrc_mr_put of the same allocation in a
 *                   context that registers with cuFile, cached (its first
 *                   get, the miss, is shown apart): batches of 1,000, the
 *                   median and the fastest batch's get + put.  A hit is
 *                   validated as GDRC_VALIDATE says (auto: a BUFFER_ID
 *                   query per hit).  The ratio is the medians'; the
 *                   issue's target: at least 10,000x at 1 MiB.
 *   b. reading      when cuFile takes a handle for the test file (it needs
 *                   a udev entry for the file's disk: in a container
 *                   without /run/udev, tests/gpu/udev_entry.sh), a 1 MiB
 *                   cuFileRead per I/O three ways, each into an allocation
 *                   of its own, the modes taking turns: unregistered (the
 *                   read goes through cuFile's bounce buffers),
 *                   cuFileBufRegister + read + cuFileBufDeregister each
 *                   time, and through the cache (get, the registered base
 *                   from gdrc_mr_query, read, put).  Every read's bytes are
 *                   copied back and compared with the file (untimed), and
 *                   the buffer poisoned before the next.
 *
 * Nothing CUDA is needed to build it: libcuda.so.1 (GDRC_CUDA_LIBRARY) and
 * libcufile.so.0 (GDRC_CUFILE_LIBRARY) are opened at run time, the files
 * the library opens, so that both use one instance of each.  The types
 * below are the driver's and cuFile's ABI (CUDA 13.0's cuda.h and
 * cufile.h, libcufile 1.15), with the _v2 names where cuda.h maps to
 * them.
 *
 * Running it
 *   gdrc-cufile-bench                 about a minute on an H200 (cuFile
 *                                     registers in milliseconds)
 *   gdrc-cufile-bench --quick         5 rounds, smaller batches (ctest)
 *   gdrc-cufile-bench --json PATH     also the results as one JSON object
 *   gdrc-cufile-bench --dir DIR       the test file's folder (/tmp); it
 *                                     is removed at exit
 * It checks no speed.  Exit 0 when every call succeeded and every byte
 * read was right; 1 on a failure; 2 on a bad option; 77 (skipped, the
 * line says why) without a driver, a GPU, libcufile, or when
 * cuFileDriverOpen fails.  No file handle is not a failure: b. is
 * skipped with cuFile's status.
 *
 * JSON: {"machine": {"gpu", "driver", "cufile_library", "date"},
 * "quick", "rounds", "register": [{"bytes", "register_us",
 * "deregister_us", "reg_dereg_us", "reg_dereg_min_us", "first_get_us",
 * "get_put_us", "get_put_min_us", "ratio"}], "target_ratio_1m" (the
 * ratio at 1 MiB), "target_met", "read": {"bytes", "reads",
 * "bounce_us", "bounce_min_us", "per_io_us", "per_io_min_us",
 * "cache_us", "cache_min_us"} or null, "read_skipped" (why, or null)}.
 * Times are microseconds, medians unless "_min".
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <gdrcache.h>

#define KIB 1024ull
#define MIB (1024ull * KIB)
#define EXIT_SKIP 77
#define NSIZES 4
#define MAX_ROUNDS 64
#define POISON 0xa5

/* ---- the driver and cuFile, opened at run time ---- */

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_STUB_LIBRARY 34
#define CUDA_ERROR_NO_DEVICE 100

struct cu {
	CUresult (*cuInit)(unsigned flags);
	CUresult (*cuDriverGetVersion)(int *version);
	CUresult (*cuDeviceGetCount)(int *count);
	CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
	CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
	CUresult (*cuCtxSetCurrent)(CUcontext ctx);
	CUresult (*cuCtxSynchronize)(void);
	CUresult (*cuMemAlloc)(CUdeviceptr *p, size_t size);
	CUresult (*cuMemFree)(CUdeviceptr p);
	CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t n);
	CUresult (*cuMemsetD8)(CUdeviceptr p, unsigned char v, size_t n);
	CUresult (*cuGetErrorName)(CUresult res, const char **name);
};

/* CUfileError_t: a CUfileOpError (0 or 5000 + n) and a CUresult. */
struct cf_error {
	int err;
	CUresult cu_err;
};

/* CUfileDescr_t, CU_FILE_HANDLE_TYPE_OPAQUE_FD. */
struct cf_descr {
	int type;
	union {
		int fd;
		void *handle;
	} handle;
	const void *fs_ops;
};
#define CF_HANDLE_TYPE_OPAQUE_FD 1
#define CF_HANDLE_NOT_REGISTERED 5027

struct cf {
	struct cf_error (*cuFileBufRegister)(const void *base, size_t len,
					     int flags);
	struct cf_error (*cuFileBufDeregister)(const void *base);
	struct cf_error (*cuFileHandleRegister)(void **fh,
						struct cf_descr *descr);
	void (*cuFileHandleDeregister)(void *fh);
	ssize_t (*cuFileRead)(void *fh, void *base, size_t size,
			      off_t file_offset, off_t base_offset);
};

#define SYM(type, field, name) { name, offsetof(struct type, field) }

static const struct sym {
	const char *name;
	size_t offset;
} cu_syms[] = {
	SYM(cu, cuInit, "cuInit"),
	SYM(cu, cuDriverGetVersion, "cuDriverGetVersion"),
	SYM(cu, cuDeviceGetCount, "cuDeviceGetCount"),
	SYM(cu, cuDeviceGet, "cuDeviceGet"),
	SYM(cu, cuDeviceGetName, "cuDeviceGetName"),
	SYM(cu, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
	SYM(cu, cuCtxSetCurrent, "cuCtxSetCurrent"),
	SYM(cu, cuCtxSynchronize, "cuCtxSynchronize"),
	SYM(cu, cuMemAlloc, "cuMemAlloc_v2"),
	SYM(cu, cuMemFree, "cuMemFree_v2"),
	SYM(cu, cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
	SYM(cu, cuMemsetD8, "cuMemsetD8_v2"),
	SYM(cu, cuGetErrorName, "cuGetErrorName"),
}, cf_syms[] = {
	SYM(cf, cuFileBufRegister, "cuFileBufRegister"),
	SYM(cf, cuFileBufDeregister, "cuFileBufDeregister"),
	SYM(cf, cuFileHandleRegister, "cuFileHandleRegister"),
	SYM(cf, cuFileHandleDeregister, "cuFileHandleDeregister"),
	SYM(cf, cuFileRead, "cuFileRead"),
};

static struct cu cu;
static struct cf cf;

/* ---- results ---- */

struct reg_result {
	size_t bytes;
	double reg_us, dereg_us;      /* medians, apart */
	double regdereg_us, regdereg_min_us;
	double first_get_us;          /* the miss: registers */
	double getput_us, getput_min_us;
};

struct read_result {
	int have;
	unsigned reads;               /* per mode */
	double bounce_us, bounce_min_us;
	double per_io_us, per_io_min_us;
	double cache_us, cache_min_us;
};

struct bench {
	int quick;
	unsigned rounds;              /* reg+dereg rounds, reads per mode */
	unsigned batches, batch;      /* get+put */
	const char *dir;
	const char *json;
	const char *cufile_path;
	char gpu[128];
	int driver;
	CUcontext cu_ctx;
	struct gdrc_ctx *ctx;
	struct reg_result reg[NSIZES];
	struct read_result rd;
	char read_skipped[PATH_MAX + 256];
	/* the test file: words of offset ^ seed */
	char path[PATH_MAX];
	int fd;
	void *fh;
	uint64_t fsize, seed, reads_checked;
};

static const size_t sizes[NSIZES] = { 4 * KIB, 64 * KIB, 1 * MIB,
				      16 * MIB };

/* ---- helpers ---- */

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0, n), which it sorts; *min_p its least. */
static double median(double *v, unsigned n, double *min_p)
{
	qsort(v, n, sizeof(*v), cmp_double);
	if (min_p)
		*min_p = v[0];
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static const char *cu_err(CUresult res)
{
	static char buf[32];
	const char *name = NULL;

	if (cu.cuGetErrorName && cu.cuGetErrorName(res, &name) == 0 && name)
		return name;
	snprintf(buf, sizeof(buf), "CUresult %d", res);
	return buf;
}

/* @return 0, or -1 after saying what failed. */
static int cu_check(CUresult res, const char *what)
{
	if (res == CUDA_SUCCESS)
		return 0;
	fprintf(stderr, "gdrc-cufile-bench: %s: %s (%d)\n", what, cu_err(res),
		res);
	return -1;
}

static int cf_check(struct cf_error e, const char *what, const void *p)
{
	if (!e.err)
		return 0;
	fprintf(stderr, "gdrc-cufile-bench: %s(%p): cuFile status %d "
		"(cu_err %d)\n", what, p, e.err, e.cu_err);
	return -1;
}

static int gd_check(gdrc_status_t s, const char *what)
{
	if (s == GDRC_OK)
		return 0;
	fprintf(stderr, "gdrc-cufile-bench: %s: %s\n", what,
		gdrc_status_str(s));
	return -1;
}

static const void *pv(CUdeviceptr p)
{
	return (const void *)(uintptr_t)p;
}

/* Open path and fill the table from it.  @return 0, or -1 with why. */
static int load(const char *path, const struct sym *syms, size_t n,
		void *table, char *why, size_t len)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);

	if (!h) {
		snprintf(why, len, "%s", dlerror());
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		void *fn = dlsym(h, syms[i].name);

		if (!fn) {
			snprintf(why, len, "%s lacks %s", path, syms[i].name);
			return -1;
		}
		memcpy((char *)table + syms[i].offset, &fn, sizeof(fn));
	}
	/* Never closed: the library holds both too. */
	return 0;
}

static void skip_out(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

/* This machine cannot run it: say why, and let ctest count a skip. */
static void skip_out(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("gdrc-cufile-bench: skipped: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	exit(EXIT_SKIP);
}

/*
 * The driver on device 0, libcufile, and a cuFile context (which opens
 * cuFile's driver).  Exits 77 where this machine cannot run it.
 * @return 0, or -1 on a failure.
 */
static int setup(struct bench *b)
{
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_CUFILE,
				   .cufile = GDRC_CUFILE_GPU };
	const char *cuda_path = getenv("GDRC_CUDA_LIBRARY");
	char why[PATH_MAX + 128];
	CUdevice dev;
	gdrc_status_t s;
	CUresult res;
	int n = 0;

	if (cuda_path && !strcmp(cuda_path, "none"))
		skip_out("%s", "GDRC_CUDA_LIBRARY=none");
	if (!cuda_path || !*cuda_path)
		cuda_path = "libcuda.so.1";
	if (load(cuda_path, cu_syms, sizeof(cu_syms) / sizeof(cu_syms[0]),
		 &cu, why, sizeof(why)))
		skip_out("no CUDA driver (%s)", why);
	res = cu.cuInit(0);
	if (res == CUDA_ERROR_NO_DEVICE || res == CUDA_ERROR_STUB_LIBRARY)
		skip_out("no GPU (cuInit: %s)", cu_err(res));
	if (cu_check(res, "cuInit") ||
	    cu_check(cu.cuDeviceGetCount(&n), "cuDeviceGetCount"))
		return -1;
	if (n < 1)
		skip_out("%s", "no GPU (no CUDA device)");
	if (cu_check(cu.cuDriverGetVersion(&b->driver), "cuDriverGetVersion") ||
	    cu_check(cu.cuDeviceGet(&dev, 0), "cuDeviceGet") ||
	    cu_check(cu.cuDeviceGetName(b->gpu, sizeof(b->gpu), dev),
		     "cuDeviceGetName") ||
	    cu_check(cu.cuDevicePrimaryCtxRetain(&b->cu_ctx, dev),
		     "cuDevicePrimaryCtxRetain") ||
	    cu_check(cu.cuCtxSetCurrent(b->cu_ctx), "cuCtxSetCurrent"))
		return -1;

	b->cufile_path = getenv("GDRC_CUFILE_LIBRARY");
	if (b->cufile_path && !strcmp(b->cufile_path, "none"))
		skip_out("%s", "GDRC_CUFILE_LIBRARY=none");
	if (!b->cufile_path || !*b->cufile_path)
		b->cufile_path = "libcufile.so.0";
	if (load(b->cufile_path, cf_syms, sizeof(cf_syms) / sizeof(cf_syms[0]),
		 &cf, why, sizeof(why)))
		skip_out("no libcufile (%s; GDRC_CUFILE_LIBRARY names one)",
			 why);
	s = gdrc_init(&cfg, &b->ctx);
	if (s == GDRC_ERR_NO_DEVICE)
		skip_out("%s", "cuFileDriverOpen failed (the library's line "
			       "above gives its status)");
	if (s == GDRC_ERR_UNSUPPORTED)
		skip_out("%s", "the library cannot register with cuFile here "
			       "(the line above says why)");
	return gd_check(s, "gdrc_init of a cuFile context");
}

/* ---- a. registering ---- */

static int bench_register(struct bench *b, unsigned i)
{
	struct reg_result *r = &b->reg[i];
	double t[MAX_ROUNDS], tr[MAX_ROUNDS], td[MAX_ROUNDS];
	double *tb = calloc(b->batches, sizeof(*tb));
	uint64_t hits0 = 0, hits1 = 0, miss0 = 0, miss1 = 0;
	struct gdrc_mr *mr = NULL;
	CUdeviceptr p;
	int ret = -1;

	r->bytes = sizes[i];
	if (!tb || cu_check(cu.cuMemAlloc(&p, sizes[i]), "cuMemAlloc"))
		goto out;
	for (unsigned k = 0; k < b->rounds; k++) {
		double t0 = now_us(), t1, t2;

		if (cf_check(cf.cuFileBufRegister(pv(p), sizes[i], 0),
			     "cuFileBufRegister", pv(p)))
			goto out_free;
		t1 = now_us();
		if (cf_check(cf.cuFileBufDeregister(pv(p)),
			     "cuFileBufDeregister", pv(p)))
			goto out_free;
		t2 = now_us();
		tr[k] = t1 - t0;
		td[k] = t2 - t1;
		t[k] = t2 - t0;
	}
	r->reg_us = median(tr, b->rounds, NULL);
	r->dereg_us = median(td, b->rounds, NULL);
	r->regdereg_us = median(t, b->rounds, &r->regdereg_min_us);

	gdrc_stat_get(b->ctx, GDRC_STAT_MISSES, &miss0);
	{
		double t0 = now_us();

		if (gd_check(gdrc_mr_get(b->ctx, pv(p), sizes[i], 0, 0, &mr),
			     "gdrc_mr_get (the first: a miss)"))
			goto out_free;
		gdrc_mr_put(b->ctx, mr);
		r->first_get_us = now_us() - t0;
	}
	gdrc_stat_get(b->ctx, GDRC_STAT_HITS, &hits0);
	for (unsigned k = 0; k < b->batches; k++) {
		double t0 = now_us();

		for (unsigned j = 0; j < b->batch; j++) {
			gdrc_status_t s = gdrc_mr_get(b->ctx, pv(p), sizes[i],
						      0, 0, &mr);

			if (gd_check(s, "gdrc_mr_get"))
				goto out_release;
			gdrc_mr_put(b->ctx, mr);
		}
		tb[k] = (now_us() - t0) / b->batch;
	}
	r->getput_us = median(tb, b->batches, &r->getput_min_us);
	gdrc_stat_get(b->ctx, GDRC_STAT_HITS, &hits1);
	gdrc_stat_get(b->ctx, GDRC_STAT_MISSES, &miss1);
	if (hits1 - hits0 != (uint64_t)b->batches * b->batch ||
	    miss1 - miss0 != 1)
		printf("WARNING: %zu bytes: %" PRIu64 " hits and %" PRIu64
		       " misses where %u hits and 1 miss were meant: the "
		       "get+put figure is not a hit's\n", sizes[i],
		       hits1 - hits0, miss1 - miss0, b->batches * b->batch);
	ret = 0;
out_release:
	if (gd_check(gdrc_release_unused(b->ctx, 0, NULL),
		     "gdrc_release_unused"))
		ret = -1;
out_free:
	if (cu_check(cu.cuMemFree(p), "cuMemFree"))
		ret = -1;
out:
	free(tb);
	return ret;
}

/* ---- b. reading ---- */

static uint64_t file_word(const struct bench *b, uint64_t off)
{
	return off ^ b->seed;
}

/* The test file, and cuFile's handle of it.  @return 0 (b->fh set, or
 * b->read_skipped saying why not), or -1 on a failure. */
static int file_up(struct bench *b)
{
	struct cf_descr d;
	struct cf_error e;
	uint64_t *chunk;
	int fd;

	snprintf(b->path, sizeof(b->path), "%s/gdrc-cufile-bench.XXXXXX",
		 b->dir);
	fd = mkstemp(b->path);
	if (fd < 0) {
		fprintf(stderr, "gdrc-cufile-bench: %s: %s\n", b->path,
			strerror(errno));
		b->path[0] = '\0';
		return -1;
	}
	chunk = malloc(MIB);
	if (!chunk)
		return -1;
	for (uint64_t o = 0; o < b->fsize; o += MIB) {
		for (size_t j = 0; j < MIB / 8; j++)
			chunk[j] = file_word(b, o + 8 * j);
		if (pwrite(fd, chunk, MIB, (off_t)o) != (ssize_t)MIB) {
			fprintf(stderr, "gdrc-cufile-bench: writing %s: %s\n",
				b->path, strerror(errno));
			free(chunk);
			close(fd);
			return -1;
		}
	}
	free(chunk);
	if (fdatasync(fd))
		perror("gdrc-cufile-bench: fdatasync");
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	b->fd = open(b->path, O_RDONLY | O_DIRECT);
	if (b->fd < 0 && errno == EINVAL)
		b->fd = open(b->path, O_RDONLY);
	if (b->fd < 0) {
		fprintf(stderr, "gdrc-cufile-bench: %s: %s\n", b->path,
			strerror(errno));
		return -1;
	}
	memset(&d, 0, sizeof(d));
	d.type = CF_HANDLE_TYPE_OPAQUE_FD;
	d.handle.fd = b->fd;
	e = cf.cuFileHandleRegister(&b->fh, &d);
	if (e.err) {
		b->fh = NULL;
		snprintf(b->read_skipped, sizeof(b->read_skipped),
			 "cuFileHandleRegister(%s): cuFile status %d%s",
			 b->path, e.err,
			 e.err == CF_HANDLE_NOT_REGISTERED ?
				 " (no udev entry for the file's disk: in a "
				 "container without /run/udev, "
				 "tests/gpu/udev_entry.sh writes one)" :
				 "");
	}
	return 0;
}

static void file_down(struct bench *b)
{
	if (b->fh)
		cf.cuFileHandleDeregister(b->fh);
	b->fh = NULL;
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
	if (b->path[0])
		unlink(b->path);
	b->path[0] = '\0';
}

enum { RD_BOUNCE, RD_PER_IO, RD_CACHE, RD_MODES };
static const char *const rd_names[RD_MODES] = {
	"unregistered (bounce buffers)", "register+read+deregister",
	"through the cache"
};

/* One timed read of len at off into p, in mode m.  @return its time in
 * microseconds, or a negative number on a failure (said). */
static double timed_read(struct bench *b, int m, CUdeviceptr p, size_t len,
			 uint64_t off)
{
	struct gdrc_mr_info info;
	struct gdrc_mr *mr = NULL;
	uintptr_t base = (uintptr_t)p;
	double t0 = now_us(), t;
	ssize_t n;

	if (m == RD_PER_IO &&
	    cf_check(cf.cuFileBufRegister(pv(p), len, 0),
		     "cuFileBufRegister", pv(p)))
		return -1;
	if (m == RD_CACHE) {
		if (gd_check(gdrc_mr_get(b->ctx, pv(p), len, 0, 0, &mr),
			     "gdrc_mr_get") ||
		    gd_check(gdrc_mr_query(mr, &info), "gdrc_mr_query"))
			return -1;
		base = info.addr;
	}
	n = cf.cuFileRead(b->fh, (void *)base, len, (off_t)off,
			  (off_t)((uintptr_t)p - base));
	if (m == RD_PER_IO &&
	    cf_check(cf.cuFileBufDeregister(pv(p)), "cuFileBufDeregister",
		     pv(p)))
		return -1;
	if (mr)
		gdrc_mr_put(b->ctx, mr);
	t = now_us() - t0;
	if (n != (ssize_t)len) {
		fprintf(stderr, "gdrc-cufile-bench: cuFileRead of %zu bytes at "
			"%" PRIu64 " (%s): %zd\n", len, off, rd_names[m], n);
		return -1;
	}
	return t;
}

/* Are p's len bytes the file at off?  Then poison p for the next read. */
static int check_read(struct bench *b, CUdeviceptr p, uint64_t *host,
		      size_t len, uint64_t off, int m)
{
	if (cu_check(cu.cuMemcpyDtoH(host, p, len), "cuMemcpyDtoH"))
		return -1;
	for (size_t j = 0; j < len / 8; j++) {
		if (host[j] == file_word(b, off + 8 * j))
			continue;
		fprintf(stderr, "gdrc-cufile-bench: %s: the read of %zu "
			"bytes at %" PRIu64 ": word %zu is %#" PRIx64
			", the file's %#" PRIx64 "\n", rd_names[m], len, off,
			j, host[j], file_word(b, off + 8 * j));
		return -1;
	}
	b->reads_checked++;
	if (cu_check(cu.cuMemsetD8(p, POISON, len), "cuMemsetD8") ||
	    cu_check(cu.cuCtxSynchronize(), "cuCtxSynchronize"))
		return -1;
	return 0;
}

static int bench_read(struct bench *b)
{
	const size_t len = 1 * MIB;
	double t[RD_MODES][MAX_ROUNDS];
	CUdeviceptr p[RD_MODES] = { 0 };
	uint64_t *host = malloc(len), k = 0;
	struct read_result *r = &b->rd;
	int ret = -1, m;

	if (!host)
		return -1;
	/* One allocation per mode: the per-I/O registrations and the
	 * cache's would be two of one base, which cuFile refuses. */
	for (m = 0; m < RD_MODES; m++)
		if (cu_check(cu.cuMemAlloc(&p[m], len), "cuMemAlloc") ||
		    cu_check(cu.cuMemsetD8(p[m], POISON, len), "cuMemsetD8"))
			goto out;
	if (cu_check(cu.cuCtxSynchronize(), "cuCtxSynchronize"))
		goto out;
	/* A read each first, untimed: cuFile's first use of a buffer. */
	for (unsigned round = 0; round <= b->rounds; round++) {
		for (m = 0; m < RD_MODES; m++) {
			uint64_t off = (k++ * len) % b->fsize;
			double us = timed_read(b, m, p[m], len, off);

			if (us < 0 || check_read(b, p[m], host, len, off, m))
				goto out;
			if (round)
				t[m][round - 1] = us;
		}
	}
	r->have = 1;
	r->reads = b->rounds;
	r->bounce_us = median(t[RD_BOUNCE], b->rounds, &r->bounce_min_us);
	r->per_io_us = median(t[RD_PER_IO], b->rounds, &r->per_io_min_us);
	r->cache_us = median(t[RD_CACHE], b->rounds, &r->cache_min_us);
	ret = 0;
out:
	for (m = 0; m < RD_MODES; m++)
		if (p[m] && cu_check(cu.cuMemFree(p[m]), "cuMemFree"))
			ret = -1;
	free(host);
	return ret;
}

/* ---- output ---- */

static const char *size_str(size_t n, char *s, size_t len)
{
	if (n % MIB == 0)
		snprintf(s, len, "%zuM", (size_t)(n / MIB));
	else
		snprintf(s, len, "%zuK", (size_t)(n / KIB));
	return s;
}

static double target_ratio(const struct bench *b)
{
	for (unsigned i = 0; i < NSIZES; i++)
		if (b->reg[i].bytes == 1 * MIB && b->reg[i].getput_us > 0)
			return b->reg[i].regdereg_us / b->reg[i].getput_us;
	return 0;
}

static void print_table(const struct bench *b)
{
	char s[32];

	printf("\na. registering per I/O against the cache's get+put, "
	       "microseconds\n   (register+deregister: %u rounds; get+put: "
	       "%u batches of %u, cached; first get: the miss)\n",
	       b->rounds, b->batches, b->batch);
	printf("%6s | %10s %10s | %11s %10s | %10s | %9s %9s | %10s\n",
	       "bytes", "register", "deregister", "reg+dereg", "fastest",
	       "first get", "get+put", "fastest", "ratio");
	for (unsigned i = 0; i < NSIZES; i++) {
		const struct reg_result *r = &b->reg[i];

		printf("%6s | %10.1f %10.1f | %11.1f %10.1f | %10.1f | "
		       "%9.4f %9.4f | %9.0fx\n",
		       size_str(r->bytes, s, sizeof(s)), r->reg_us,
		       r->dereg_us, r->regdereg_us, r->regdereg_min_us,
		       r->first_get_us, r->getput_us, r->getput_min_us,
		       r->getput_us > 0 ? r->regdereg_us / r->getput_us : 0);
	}
	printf("target: get+put at least 10000x cheaper than "
	       "register+deregister at 1 MiB: %.0fx, %s\n", target_ratio(b),
	       target_ratio(b) >= 10000 ? "met" : "not met");
	if (!b->rd.have) {
		printf("\nb. cuFileRead: skipped: %s\n", b->read_skipped);
		return;
	}
	printf("\nb. cuFileRead of 1 MiB per I/O, microseconds (%u reads per "
	       "mode, the modes taking turns; every byte checked)\n",
	       b->rd.reads);
	printf("%-32s %10s %10s\n", "", "median", "fastest");
	printf("%-32s %10.1f %10.1f\n", rd_names[RD_BOUNCE], b->rd.bounce_us,
	       b->rd.bounce_min_us);
	printf("%-32s %10.1f %10.1f\n", rd_names[RD_PER_IO], b->rd.per_io_us,
	       b->rd.per_io_min_us);
	printf("%-32s %10.1f %10.1f\n", rd_names[RD_CACHE], b->rd.cache_us,
	       b->rd.cache_min_us);
	printf("register+read+deregister / cache: %.2fx; unregistered / "
	       "cache: %.2fx\n", b->rd.per_io_us / b->rd.cache_us,
	       b->rd.bounce_us / b->rd.cache_us);
}

static int write_json(const struct bench *b)
{
	FILE *f = fopen(b->json, "w");
	char date[64];
	time_t now = time(NULL);

	if (!f) {
		perror("gdrc-cufile-bench: --json");
		return -1;
	}
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	fprintf(f, "{\"machine\": {\"gpu\": \"%s\", \"driver\": %d, "
		"\"cufile_library\": \"%s\", \"date\": \"%s\"},\n", b->gpu,
		b->driver, b->cufile_path, date);
	fprintf(f, " \"quick\": %s, \"rounds\": %u,\n \"register\": [",
		b->quick ? "true" : "false", b->rounds);
	for (unsigned i = 0; i < NSIZES; i++) {
		const struct reg_result *r = &b->reg[i];

		fprintf(f, "%s\n  {\"bytes\": %zu, \"register_us\": %.3f, "
			"\"deregister_us\": %.3f, \"reg_dereg_us\": %.3f, "
			"\"reg_dereg_min_us\": %.3f, \"first_get_us\": %.3f, "
			"\"get_put_us\": %.5f, \"get_put_min_us\": %.5f, "
			"\"ratio\": %.1f}", i ? "," : "", r->bytes, r->reg_us,
			r->dereg_us, r->regdereg_us, r->regdereg_min_us,
			r->first_get_us, r->getput_us, r->getput_min_us,
			r->getput_us > 0 ? r->regdereg_us / r->getput_us : 0);
	}
	fprintf(f, "],\n \"target_ratio_1m\": %.1f, \"target_met\": %s,\n",
		target_ratio(b), target_ratio(b) >= 10000 ? "true" : "false");
	if (b->rd.have)
		fprintf(f, " \"read\": {\"bytes\": %llu, \"reads\": %u, "
			"\"bounce_us\": %.3f, \"bounce_min_us\": %.3f, "
			"\"per_io_us\": %.3f, \"per_io_min_us\": %.3f, "
			"\"cache_us\": %.3f, \"cache_min_us\": %.3f},\n"
			" \"read_skipped\": null}\n", MIB, b->rd.reads,
			b->rd.bounce_us, b->rd.bounce_min_us, b->rd.per_io_us,
			b->rd.per_io_min_us, b->rd.cache_us,
			b->rd.cache_min_us);
	else {
		fprintf(f, " \"read\": null, \"read_skipped\": \"");
		for (const char *c = b->read_skipped; *c; c++) {
			if (*c == '"' || *c == '\\')
				fputc('\\', f);
			fputc(*c, f);
		}
		fprintf(f, "\"}\n");
	}
	if (fclose(f)) {
		perror("gdrc-cufile-bench: --json");
		return -1;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: gdrc-cufile-bench [--quick] [--json PATH] "
		   "[--dir DIR] [--help]\n"
		   "the measurements are described at the top of "
		   "tests/bench/cufile_bench.c\n");
}

int main(int argc, char **argv)
{
	static const struct option longs[] = {
		{ "quick", 0, NULL, 'q' }, { "json", 1, NULL, 'j' },
		{ "dir", 1, NULL, 'd' }, { "help", 0, NULL, 'h' },
		{ 0, 0, 0, 0 }
	};
	struct bench *b = calloc(1, sizeof(*b));
	int c, rc = 0;

	if (!b)
		return 1;
	b->dir = "/tmp";
	b->fd = -1;
	while ((c = getopt_long(argc, argv, "qj:d:h", longs, NULL)) != -1) {
		switch (c) {
		case 'q': b->quick = 1; break;
		case 'j': b->json = optarg; break;
		case 'd': b->dir = optarg; break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	b->rounds = b->quick ? 5 : 20;
	b->batches = b->quick ? 11 : 31;
	b->batch = b->quick ? 100 : 1000;
	b->fsize = (b->quick ? 16 : 64) * MIB;
	b->seed = ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (setup(b))
		return 1;
	printf("gdrc-cufile-bench: %s (device 0), driver %d, %s%s\n", b->gpu,
	       b->driver, b->cufile_path, b->quick ? ", --quick" : "");
	for (unsigned i = 0; i < NSIZES && !rc; i++)
		rc = bench_register(b, i) ? 1 : 0;
	if (!rc)
		rc = file_up(b) ? 1 : 0;
	if (!rc && b->fh)
		rc = bench_read(b) ? 1 : 0;
	file_down(b);
	if (!rc) {
		print_table(b);
		if (b->json && write_json(b))
			rc = 1;
		printf("data: every byte checked (%" PRIu64 " reads)\n",
		       b->reads_checked);
	}
	gdrc_fini(b->ctx);
	free(b);
	return rc;
}
