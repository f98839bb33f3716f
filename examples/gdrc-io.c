/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gdrc-io.c - what a registration cache buys storage I/O: O_DIRECT reads
 * of a file through io_uring, into buffers registered four ways.
 *
 *   plain     io_uring_prep_read into unregistered memory: for direct
 *             I/O to a device the kernel pins the buffer's pages for
 *             every read and lets them go (tmpfs copies into them as
 *             for any read)
 *   once      fixed buffers registered once, before the loop (slots of a
 *             sparse table), io_uring_prep_read_fixed: the floor
 *   per-read  a fixed buffer registered for each read: its slot set
 *             before the read and cleared after (two
 *             io_uring_register_buffers_update_tag calls), what a library
 *             without a cache would do
 *   cache     gdrc_mr_get before the read, gdrc_mr_put after its
 *             completion, the registration's lkey the fixed buffer's
 *             index: a library using libgdrcache's io_uring backend
 *
 * The cache owns the buffer table of the ring it is given, so cache mode
 * and the workload read through a second ring, set up as the first.
 *
 * The program writes its own test file (-f): each 8-byte word holds its
 * file offset xor a seed, so a read that brings the wrong part of the
 * file, or lands in other pages than the buffer's, shows.  The file is
 * the larger of 64 MiB and 4 times the largest size, and is removed at
 * exit (--keep leaves it).  One read is in flight at a time; a read
 * takes the offset after the last one's, wrapping at the end.
 * Before a read the first word of every page of the buffer is poisoned;
 * after it, every byte is compared with the file's (neither is timed).  A
 * mismatch is printed and ends the program.
 *
 * The sweep: for each size, the modes take turns, ROUNDS times over (so
 * that the modes of one size are measured close together in time), each
 * turn W warm-up reads and N timed ones into four buffers of the largest
 * size taken in turn.  Per mode and size it reports the median over the
 * rounds of each round's median read (and the fastest and slowest round),
 * a read being timed from before its registration to after its release;
 * the time spent registering per read, in the same loop: inside
 * gdrc_mr_get + gdrc_mr_put (cache), the two slot updates (per-read),
 * nothing (plain, once); and that registering again back to back, with no
 * read between (the median of 15; the cache's timed 64 at a time, as a
 * hit costs about as much as reading the timer twice): a read leaves the
 * CPU's caches to the data it moved, and the registration after it pays
 * for that.
 *
 * The workload (--workload N) follows: N reads through the cache into B
 * buffers (--bufs) taken in turn, buffer i of the i-th size of the list
 * (cycled), one in four mmap'ed, the others from posix_memalign.  Before
 * every eighth read one buffer, picked at random, is let go and replaced
 * by one of the same size: an allocated one freed and allocated again
 * (often the same block, whose pages stay mapped and its registration
 * valid; a large one unmapped by free and mapped anew, often at the same
 * address), a mapped one in turn unmapped and mapped again at its
 * address, or replaced by new memory mapped over it with MAP_FIXED.  A
 * cache that missed the unmap would hand out a slot holding the old
 * pages: the read would land there and the poisoned words would stay.
 * The same reads (same sizes, offsets and replacements, buffers of their
 * own) are made again in once mode, each buffer's slot set when it is
 * allocated, and in plain mode, when the sweep has those modes: the
 * workload's buffers are colder than the sweep's four, so its reads are
 * slower in every mode, and are compared with once on the same reads.
 * The passes take turns.  Per size it prints the median read of each,
 * registering per read in the loop and back to back, and the sweep's
 * once; then one line with the cache's hits, misses, invalidations and
 * evictions over the run.  The cache's buffer table has K slots
 * (--cache-slots): fewer than the buffers makes it evict.
 *
 * GPU memory (--mem cuda): the same sweep and workload, reading the file
 * with GPUDirect Storage (cuFileRead, cuFile's handle of the O_DIRECT fd)
 * into cuMemAlloc'd memory of device 0, the modes being
 *   plain     cuFileRead into unregistered memory: cuFile moves the data
 *             through its own registered bounce buffers
 *   once      each buffer registered with cuFileBufRegister before the
 *             loop
 *   per-read  cuFileBufRegister before each read, cuFileBufDeregister
 *             after: what a program without a cache would do
 *   cache     gdrc_mr_get before the read in a context that registers
 *             with cuFile (GDRC_CONFIG_FIELD_CUFILE), the read given the
 *             registered base (gdrc_mr_query) and the offset from it,
 *             gdrc_mr_put after
 * Each mode reads into buffers of its own (cuFile refuses a second
 * registration of a base: one mode's would block another's).  A buffer
 * is poisoned before a read and copied back and compared after it
 * (cuMemcpyHtoD, cuMemcpyDtoH; untimed).  The workload's replacement is
 * cuMemFree and cuMemAlloc of the same size (the driver often gives the
 * address back); in once mode the buffer is deregistered before its free
 * and the new one registered, in cache mode the cache deregisters it
 * inside the free (the CUDA free hooks: its line counts free_deregs).
 * --cache-slots does not apply.  Nothing CUDA is needed to build it: the
 * driver (libcuda.so.1, GDRC_CUDA_LIBRARY) and libcufile (libcufile.so.0,
 * GDRC_CUFILE_LIBRARY) are opened at run time, the files libgdrcache
 * opens, so it is always built with gdrc-io; without a GPU, libcufile,
 * cuFile's driver or a file handle cuFile takes (in a container without
 * /run/udev it needs tests/gpu/udev_entry.sh's entry) it exits 77 and
 * says which.
 *
 * Build (installed package):
 *   cc gdrc-io.c $(pkg-config --cflags --libs gdrcache liburing) -ldl
 * Run:
 *   gdrc-io -f /dev/shm -s 64K:16M --workload 400
 *   gdrc-io --mem cuda -f /tmp -s 64K:16M --workload 400
 * Options:
 *   -f PATH    the test file, or a folder to make it in (gdrc-io.XXXXXX);
 *              its file system must take O_DIRECT (default: gdrc-io.dat)
 *   -s SIZES   MIN:MAX, doubling, or a list A,B,C; multiples of 4 KiB,
 *              K and M suffixes (64K:16M)
 *   -n N       timed reads per round, mode and size (20)
 *   -r N       rounds (5)                 -w N   warm-up reads (2)
 *   -m MODES   plain,once,per-read,cache (all four); none: no sweep
 *   -o FILE    also write the results as CSV (mode,bytes,usec,mbps,
 *              reg_usec,usec_min,usec_max,reg_b2b_usec; the workload's
 *              rows are modes workload, workload-once and workload-plain,
 *              min and max their fastest and slowest read)
 *   --workload N     then N reads of the workload above (0: none)
 *   --bufs B         the workload's buffers (16)
 *   --cache-slots K  the cache's buffer table (64)
 *   --mem M    host (default) or cuda: the buffers are GPU memory read
 *              with cuFile (above)
 *   --keep     leave the test file
 *   -h, --help the usage line
 * Exit 0 when every byte of every read was right; 1 on a mismatch or a
 * failure; 2 on bad options; 77 when this machine cannot run it (no
 * io_uring, no O_DIRECT on the file's file system, no sparse buffer
 * tables, fixed buffers over RLIMIT_MEMLOCK; with --mem cuda: no GPU, no
 * libcufile, cuFile's driver or handle refused): the line says why.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <liburing.h>

#include <gdrcache.h>

enum { MODE_PLAIN, MODE_ONCE, MODE_PER_READ, MODE_CACHE, MODES };
static const char *const mode_names[MODES] = { "plain", "once", "per-read",
					       "cache" };

enum {
	NBUF = 4,             /* the sweep's buffers, taken in turn */
	SLOT_PER_READ = NBUF, /* our table: once 0 to NBUF - 1, then this */
	B2B_REPS = 15,
	B2B_BATCH = 64,
	MAX_SIZES = 32,
	PAGE = 4096,
	EXIT_SKIP = 77,
};

#ifndef MAP_FIXED_NOREPLACE /* Linux 4.17; older kernels take a hint */
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define FILE_MIN (64ull << 20)
#define CHUNK (1u << 20)

/* One mode at one size, in microseconds. */
struct result {
	int have;
	double us;   /* the median round's median read */
	double lo;   /* the fastest round's */
	double hi;   /* the slowest round's */
	double reg;  /* registering per read, in the loop */
	double b2b;  /* registering per read, back to back */
};

struct io {
	struct io_uring own;   /* plain, once, per-read: our buffer table */
	struct io_uring cring; /* cache, workload: gdrcache's table */
	int own_table;         /* our table is registered */
	struct gdrc_ctx *gdrc;
	int fd;                /* the test file, O_DIRECT */
	uint64_t fsize;
	uint64_t seed;         /* the file's word at offset o: o ^ seed */
	uint64_t next;         /* the sweep's reads: the next offset */
	uint64_t reads;        /* reads checked */
	size_t sizes[MAX_SIZES];
	unsigned nsizes;
	size_t max_size;
	unsigned iters, rounds, warmup, modes;
	unsigned wl_reads, wl_bufs, slots;
	char *buf[NBUF];       /* the sweep's, max_size each */
	struct result res[MODES][MAX_SIZES];
	FILE *csv;
	/* --mem cuda: p->gdrc registers with cuFile */
	int cuda;
	void *fh;              /* cuFile's handle of fd */
	char *gbuf[MODES][NBUF]; /* the sweep's, per mode: GPU addresses */
	uint64_t *stage;       /* max_size: a GPU buffer copied back */
	uint64_t *poison_img;  /* max_size of poison words */
};

/* The test file, for the exit handlers. */
static char file_path[PATH_MAX];
static volatile sig_atomic_t file_made;
static int keep_file;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void vsay(const char *prefix, const char *fmt, va_list ap)
{
	fprintf(stderr, "gdrc-io: %s", prefix);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay("", fmt, ap);
	va_end(ap);
	exit(1);
}

/* This machine cannot run it: say why, and let ctest count a skip. */
static void skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("gdrc-io: skipped: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	exit(EXIT_SKIP);
}

static void file_remove(void)
{
	if (file_made && !keep_file)
		unlink(file_path);
}

static void on_signal(int sig)
{
	file_remove();
	_exit(128 + sig);
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/*
 * The timer: the time-stamp counter where there is one (a cache hit's
 * get + put costs some nanoseconds, a clock_gettime call about 20),
 * converted at the rate measured against CLOCK_MONOTONIC since the
 * program started (a second or more before the first report).
 */
static inline uint64_t ticks(void)
{
#if defined(__x86_64__)
	return __rdtsc();
#else
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

static struct {
	double us;
	uint64_t ticks;
} clock0;

/* Ticks per microsecond. */
static double tick_rate(void)
{
	double us = now_us() - clock0.us;
	uint64_t t = ticks() - clock0.ticks;

	return us > 0 ? (double)t / us : 1.0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0, n), which it sorts. */
static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static const char *size_str(size_t len, char *s, size_t n)
{
	if (len % (1u << 20) == 0)
		snprintf(s, n, "%zuM", len >> 20);
	else if (len % 1024 == 0)
		snprintf(s, n, "%zuK", len >> 10);
	else
		snprintf(s, n, "%zu", len);
	return s;
}

static void *xalloc(size_t len)
{
	void *h;

	if (posix_memalign(&h, PAGE, len))
		die("posix_memalign");
	return h;
}

/* ---- the test file ---- */

static inline uint64_t word_at(const struct io *p, uint64_t off)
{
	return off ^ p->seed;
}

/* Written into the buffer before a read: no word of the file (that
 * would be at offset 2^63). */
static inline uint64_t poison(const struct io *p)
{
	return p->seed ^ (1ull << 63);
}

/* Write the file with plain writes, then open it for O_DIRECT reads.  A
 * folder gets a new file of its own. */
static void file_make(struct io *p, const char *path)
{
	struct stat st;
	uint64_t *chunk;
	int fd;

	if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
		snprintf(file_path, sizeof(file_path), "%s/gdrc-io.XXXXXX",
			 path);
		fd = mkostemp(file_path, O_CLOEXEC);
	} else {
		snprintf(file_path, sizeof(file_path), "%s", path);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	}
	if (fd < 0)
		die(file_path);
	file_made = 1;
	chunk = xalloc(CHUNK);
	for (uint64_t o = 0; o < p->fsize; o += CHUNK) {
		size_t done = 0;

		for (size_t j = 0; j < CHUNK / 8; j++)
			chunk[j] = word_at(p, o + 8 * j);
		while (done < CHUNK) {
			ssize_t r = pwrite(fd, (char *)chunk + done,
					   CHUNK - done, (off_t)(o + done));

			if (r <= 0)
				die("writing the test file");
			done += (size_t)r;
		}
	}
	free(chunk);
	/* On disk, so that the O_DIRECT reads go to the device, not to
	 * pages still being written. */
	if (fdatasync(fd))
		die("fdatasync");
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	p->fd = open(file_path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (p->fd < 0 && (errno == EINVAL || errno == EOPNOTSUPP))
		skip("the file system of %s takes no O_DIRECT (%s)",
		     file_path, strerror(errno));
	if (p->fd < 0)
		die(file_path);
}

/* The offset of read k of len bytes: the one after read k - 1's,
 * wrapping at the end of the file. */
static uint64_t read_off(const struct io *p, uint64_t k, size_t len)
{
	return (k % (p->fsize / len)) * len;
}

static void poison_buf(const struct io *p, char *buf, size_t len)
{
	for (size_t j = 0; j < len; j += PAGE)
		*(uint64_t *)(buf + j) = poison(p);
}

/* Is buf[0, len) the file at off?  Compared a page at a time, a loop the
 * compiler vectorises; a page that differs is then searched for its
 * first wrong byte, printed before the program ends. */
static void check(struct io *p, const char *buf, size_t len, uint64_t off,
		  const char *what)
{
	const uint64_t *w = (const uint64_t *)buf;
	size_t nw = len / 8;

	for (size_t pg = 0; pg < nw; pg += PAGE / 8) {
		size_t end = pg + PAGE / 8 < nw ? pg + PAGE / 8 : nw;
		uint64_t diff = 0;

		for (size_t j = pg; j < end; j++)
			diff |= w[j] ^ word_at(p, off + 8 * j);
		if (!diff)
			continue;
		for (size_t j = pg; j < end; j++) {
			uint64_t want = word_at(p, off + 8 * j);
			unsigned b;

			if (w[j] == want)
				continue;
			for (b = 0; b < 8; b++)
				if (((w[j] ^ want) >> (8 * b)) & 0xff)
					break;
			fail("%s: read %" PRIu64 " (%zu bytes at file offset "
			     "%" PRIu64 "): byte %zu is %#x, want %#x%s", what,
			     p->reads, len, off, 8 * j + b,
			     (unsigned)(w[j] >> (8 * b)) & 0xff,
			     (unsigned)(want >> (8 * b)) & 0xff,
			     w[j] == poison(p) ? " (the read never reached "
						 "this page)" : "");
		}
	}
	p->reads++;
}

/* ---- GPU memory: the CUDA driver and cuFile, opened at run time ----
 *
 * The driver's and cuFile's ABI (CUDA 13.0's cuda.h and cufile.h,
 * libcufile 1.15), the _v2 names where cuda.h maps to them: building
 * needs no CUDA toolkit. */

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;

struct cf_error {        /* CUfileError_t */
	int err;             /* CUfileOpError: 0 or 5000 + n */
	CUresult cu_err;
};

struct cf_descr {        /* CUfileDescr_t */
	int type;            /* 1: CU_FILE_HANDLE_TYPE_OPAQUE_FD */
	union {
		int fd;
		void *handle;
	} handle;
	const void *fs_ops;
};

static struct {
	CUresult (*cuInit)(unsigned flags);
	CUresult (*cuDeviceGetCount)(int *count);
	CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
	CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
	CUresult (*cuCtxSetCurrent)(CUcontext ctx);
	CUresult (*cuCtxSynchronize)(void);
	CUresult (*cuMemAlloc)(CUdeviceptr *p, size_t size);
	CUresult (*cuMemFree)(CUdeviceptr p);
	CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t n);
	CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t n);
	CUresult (*cuGetErrorName)(CUresult res, const char **name);
} cu;

static struct {
	struct cf_error (*cuFileBufRegister)(const void *base, size_t len,
					     int flags);
	struct cf_error (*cuFileBufDeregister)(const void *base);
	struct cf_error (*cuFileHandleRegister)(void **fh,
						struct cf_descr *descr);
	void (*cuFileHandleDeregister)(void *fh);
	ssize_t (*cuFileRead)(void *fh, void *base, size_t size,
			      off_t file_offset, off_t base_offset);
} cf;

struct sym {
	const char *name;
	void *slot; /* where the entry point goes */
};

static const struct sym cu_syms[] = {
	{ "cuInit", &cu.cuInit },
	{ "cuDeviceGetCount", &cu.cuDeviceGetCount },
	{ "cuDeviceGet", &cu.cuDeviceGet },
	{ "cuDeviceGetName", &cu.cuDeviceGetName },
	{ "cuDevicePrimaryCtxRetain", &cu.cuDevicePrimaryCtxRetain },
	{ "cuCtxSetCurrent", &cu.cuCtxSetCurrent },
	{ "cuCtxSynchronize", &cu.cuCtxSynchronize },
	{ "cuMemAlloc_v2", &cu.cuMemAlloc },
	{ "cuMemFree_v2", &cu.cuMemFree },
	{ "cuMemcpyHtoD_v2", &cu.cuMemcpyHtoD },
	{ "cuMemcpyDtoH_v2", &cu.cuMemcpyDtoH },
	{ "cuGetErrorName", &cu.cuGetErrorName },
}, cf_syms[] = {
	{ "cuFileBufRegister", &cf.cuFileBufRegister },
	{ "cuFileBufDeregister", &cf.cuFileBufDeregister },
	{ "cuFileHandleRegister", &cf.cuFileHandleRegister },
	{ "cuFileHandleDeregister", &cf.cuFileHandleDeregister },
	{ "cuFileRead", &cf.cuFileRead },
};

/* The library's own choice of file, else the default name. */
static const char *lib_path(const char *env, const char *dflt)
{
	const char *v = getenv(env);

	return v && *v ? v : dflt;
}

/* Open path and fill the entry points (never closed: libgdrcache holds
 * them too).  @return NULL, or why not. */
static const char *lib_load(const char *path, const struct sym *syms,
			    size_t n)
{
	static char why[PATH_MAX + 64];
	void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);

	if (!h)
		return dlerror();
	for (size_t i = 0; i < n; i++) {
		void *fn = dlsym(h, syms[i].name);

		if (!fn) {
			snprintf(why, sizeof(why), "%s lacks %s", path,
				 syms[i].name);
			return why;
		}
		memcpy(syms[i].slot, &fn, sizeof(fn));
	}
	return NULL;
}

static const char *cu_name(CUresult res)
{
	static char buf[32];
	const char *name = NULL;

	if (cu.cuGetErrorName && !cu.cuGetErrorName(res, &name) && name)
		return name;
	snprintf(buf, sizeof(buf), "CUresult %d", res);
	return buf;
}

static void cu_ok(CUresult res, const char *what)
{
	if (res)
		fail("%s: %s (%d)", what, cu_name(res), res);
}

static void cf_ok(struct cf_error e, const char *what, const void *buf)
{
	if (e.err)
		fail("%s(%p): cuFile status %d (cu_err %d)", what, buf, e.err,
		     e.cu_err);
}

static char *galloc(size_t len)
{
	CUdeviceptr d = 0;

	cu_ok(cu.cuMemAlloc(&d, len), "cuMemAlloc");
	return (char *)(uintptr_t)d;
}

static void gfree(char *buf)
{
	cu_ok(cu.cuMemFree((CUdeviceptr)(uintptr_t)buf), "cuMemFree");
}

static CUdeviceptr dptr(const char *buf)
{
	return (CUdeviceptr)(uintptr_t)buf;
}

/*
 * --mem cuda, before the test file: the driver on device 0, libcufile,
 * and the cache's context that registers GPU memory with cuFile (its
 * gdrc_init opens cuFile's driver).  Exits 77 where this cannot run.
 */
static void cuda_up(struct io *p)
{
	const char *cuda = lib_path("GDRC_CUDA_LIBRARY", "libcuda.so.1");
	const char *cufile = lib_path("GDRC_CUFILE_LIBRARY", "libcufile.so.0");
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_CUFILE,
				   .cufile = GDRC_CUFILE_GPU };
	const char *why;
	CUcontext ctx;
	CUdevice dev;
	char name[128];
	gdrc_status_t s;
	CUresult res;
	int n = 0;

	if (!strcmp(cuda, "none"))
		skip("--mem cuda: GDRC_CUDA_LIBRARY=none");
	why = lib_load(cuda, cu_syms, sizeof(cu_syms) / sizeof(cu_syms[0]));
	if (why)
		skip("--mem cuda: no CUDA driver (%s)", why);
	res = cu.cuInit(0);
	if (res == 100 || res == 34) /* NO_DEVICE, STUB_LIBRARY */
		skip("--mem cuda: no GPU (cuInit: %s)", cu_name(res));
	cu_ok(res, "cuInit");
	cu_ok(cu.cuDeviceGetCount(&n), "cuDeviceGetCount");
	if (n < 1)
		skip("--mem cuda: no GPU (no CUDA device)");
	cu_ok(cu.cuDeviceGet(&dev, 0), "cuDeviceGet");
	cu_ok(cu.cuDeviceGetName(name, sizeof(name), dev), "cuDeviceGetName");
	cu_ok(cu.cuDevicePrimaryCtxRetain(&ctx, dev),
	      "cuDevicePrimaryCtxRetain");
	cu_ok(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	if (!strcmp(cufile, "none"))
		skip("--mem cuda: GDRC_CUFILE_LIBRARY=none");
	why = lib_load(cufile, cf_syms, sizeof(cf_syms) / sizeof(cf_syms[0]));
	if (why)
		skip("--mem cuda: no libcufile (%s; GDRC_CUFILE_LIBRARY names "
		     "one)", why);
	s = gdrc_init(&cfg, &p->gdrc);
	if (s == GDRC_ERR_NO_DEVICE)
		skip("--mem cuda: cuFileDriverOpen failed (the library's line "
		     "above gives its status)");
	if (s == GDRC_ERR_UNSUPPORTED)
		skip("--mem cuda: the library cannot register with cuFile "
		     "here (the line above says why)");
	if (s != GDRC_OK)
		fail("gdrc_init of a cuFile context: %s", gdrc_status_str(s));
	printf("gdrc-io: --mem cuda: %s (device 0), %s\n", name, cufile);
}

/* After the test file: cuFile's handle of it, and the host buffers
 * that poison and check GPU memory. */
static void cuda_handle_up(struct io *p)
{
	struct cf_descr d = { .type = 1 };
	struct cf_error e;

	d.handle.fd = p->fd;
	e = cf.cuFileHandleRegister(&p->fh, &d);
	if (e.err == 5027) /* CU_FILE_HANDLE_NOT_REGISTERED */
		skip("--mem cuda: cuFileHandleRegister(%s): cuFile status "
		     "5027: cuFile finds no udev entry for the file's disk "
		     "(in a container without /run/udev, "
		     "tests/gpu/udev_entry.sh writes one)", file_path);
	if (e.err)
		skip("--mem cuda: cuFileHandleRegister(%s): cuFile status %d",
		     file_path, e.err);
	p->stage = (uint64_t *)xalloc(p->max_size);
	p->poison_img = (uint64_t *)xalloc(p->max_size);
	for (size_t j = 0; j < p->max_size / 8; j++)
		p->poison_img[j] = poison(p);
}

static void cuda_down(struct io *p)
{
	if (p->fh)
		cf.cuFileHandleDeregister(p->fh);
	p->fh = NULL;
	free(p->poison_img);
	free(p->stage);
}

/* ---- io_uring ---- */

/* Set slot of ring's table to buf[0, len); len 0 clears it.  Tag 0: no
 * completion when the kernel drops the old buffer.  @return 1 when set,
 * else -errno. */
static int slot_set(struct io_uring *ring, unsigned slot, void *buf,
		    size_t len)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	__u64 tag = 0;

	return io_uring_register_buffers_update_tag(ring, slot, &iov, &tag, 1);
}

/* One read of len bytes at off into buf, the fixed buffer idx (plain
 * when idx < 0), waited for.  @return the completion's result. */
static int read_raw(struct io *p, struct io_uring *ring, char *buf,
		    size_t len, uint64_t off, int idx)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;
	int ret;

	if (!sqe)
		fail("no submission queue entry");
	if (idx < 0)
		io_uring_prep_read(sqe, p->fd, buf, (unsigned)len, off);
	else
		io_uring_prep_read_fixed(sqe, p->fd, buf, (unsigned)len, off,
					 idx);
	ret = io_uring_submit_and_wait(ring, 1);
	if (ret >= 0)
		ret = io_uring_wait_cqe(ring, &cqe);
	if (ret < 0)
		fail("io_uring submit: %s", strerror(-ret));
	ret = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return ret;
}

static void read_one(struct io *p, struct io_uring *ring, char *buf,
		     size_t len, uint64_t off, int idx, const char *what)
{
	int res = read_raw(p, ring, buf, len, off, idx);

	if (res != (int)len)
		fail("%s: read of %zu bytes at %" PRIu64 " into %p (buffer "
		     "%d): %s", what, len, off, (void *)buf, idx,
		     res < 0 ? strerror(-res) : "short read");
}

/* What a read registered in its mode: the fixed buffer index (-1:
 * plain) and what to let go after it; with --mem cuda, the base cuFile
 * is given (the cache's registered base, else the buffer). */
struct reg {
	struct gdrc_mr *mr;
	int idx;
	char *buf;
	char *base;
};

/* --mem cuda: register as mode m does, before a read. */
static void cuda_reg_get(struct io *p, int m, char *buf, size_t len,
			 struct reg *r)
{
	struct gdrc_mr_info info;
	gdrc_status_t s;

	r->mr = NULL;
	r->idx = -1;
	r->buf = r->base = buf;
	if (m == MODE_PER_READ) {
		cf_ok(cf.cuFileBufRegister(buf, len, 0), "cuFileBufRegister",
		      buf);
	} else if (m == MODE_CACHE) {
		s = gdrc_mr_get(p->gdrc, buf, len, GDRC_ACCESS_LOCAL_WRITE, 0,
				&r->mr);
		if (s == GDRC_OK)
			s = gdrc_mr_query(r->mr, &info);
		if (s != GDRC_OK)
			fail("gdrc_mr_get(%p, %zu): %s", (void *)buf, len,
			     gdrc_status_str(s));
		r->base = (char *)info.addr;
	}
}

static void cuda_reg_put(struct io *p, int m, struct reg *r)
{
	if (m == MODE_PER_READ)
		cf_ok(cf.cuFileBufDeregister(r->buf), "cuFileBufDeregister",
		      r->buf);
	else if (r->mr)
		gdrc_mr_put(p->gdrc, r->mr);
}

/* --mem cuda: cuFileRead of len at off into buf, given base, registered
 * or not, and buf's offset from it. */
static void cuda_read(struct io *p, const struct reg *r, size_t len,
		      uint64_t off, const char *what)
{
	ssize_t n = cf.cuFileRead(p->fh, r->base, len, (off_t)off,
				  (off_t)(r->buf - r->base));

	if (n != (ssize_t)len)
		fail("%s: cuFileRead of %zu bytes at %" PRIu64 " into %p "
		     "(base %p): %zd%s", what, len, off, (void *)r->buf,
		     (void *)r->base, n, n < 0 ? " (-cuFile status, or -1: "
					       "errno)" : " (short)");
}

/* Poison buf before a read: host memory's words, or GPU memory from the
 * poison image (synchronized: the copy must land before cuFile's). */
static void poison_any(struct io *p, char *buf, size_t len)
{
	if (!p->cuda) {
		poison_buf(p, buf, len);
		return;
	}
	cu_ok(cu.cuMemcpyHtoD(dptr(buf), p->poison_img, len), "cuMemcpyHtoD");
	cu_ok(cu.cuCtxSynchronize(), "cuCtxSynchronize");
}

/* check() of buf after a read, GPU memory copied back first. */
static void check_any(struct io *p, char *buf, size_t len, uint64_t off,
		      const char *what)
{
	if (p->cuda) {
		cu_ok(cu.cuMemcpyDtoH(p->stage, dptr(buf), len),
		      "cuMemcpyDtoH");
		buf = (char *)p->stage;
	}
	check(p, buf, len, off, what);
}

static void reg_get(struct io *p, int m, char *buf, size_t len,
		    unsigned bi, struct reg *r)
{
	gdrc_status_t s;
	int ret;

	if (p->cuda) {
		cuda_reg_get(p, m, buf, len, r);
		return;
	}
	r->mr = NULL;
	switch (m) {
	case MODE_PLAIN:
		r->idx = -1;
		break;
	case MODE_ONCE:
		r->idx = (int)bi;
		break;
	case MODE_PER_READ:
		ret = slot_set(&p->own, SLOT_PER_READ, buf, len);
		if (ret != 1)
			fail("registering %p+%zu: %s", (void *)buf, len,
			     strerror(ret < 0 ? -ret : EIO));
		r->idx = SLOT_PER_READ;
		break;
	default:
		s = gdrc_mr_get(p->gdrc, buf, len, GDRC_ACCESS_LOCAL_WRITE, 0,
				&r->mr);
		if (s != GDRC_OK)
			fail("gdrc_mr_get(%p, %zu): %s", (void *)buf, len,
			     gdrc_status_str(s));
		r->idx = (int)gdrc_mr_lkey(r->mr);
		break;
	}
}

static void reg_put(struct io *p, int m, struct reg *r)
{
	int ret;

	if (p->cuda) {
		cuda_reg_put(p, m, r);
		return;
	}
	if (m == MODE_PER_READ) {
		ret = slot_set(&p->own, SLOT_PER_READ, NULL, 0);
		if (ret != 1)
			fail("clearing slot %d: %s", SLOT_PER_READ,
			     strerror(ret < 0 ? -ret : EIO));
	} else if (r->mr) {
		gdrc_mr_put(p->gdrc, r->mr);
	}
}

static struct io_uring *ring_of(struct io *p, int m)
{
	return m == MODE_CACHE ? &p->cring : &p->own;
}

/* One registered, timed read: its time and the part of it spent
 * registering and letting go, in ticks.  Poisoned before, checked
 * after, untimed. */
static void timed_read(struct io *p, int m, char *buf, size_t len,
		       unsigned bi, uint64_t off, const char *what,
		       double *t_p, double *reg_p)
{
	uint64_t t0, t1, t2, t3;
	struct reg r;

	poison_any(p, buf, len);
	t0 = ticks();
	reg_get(p, m, buf, len, bi, &r);
	t1 = ticks();
	if (p->cuda)
		cuda_read(p, &r, len, off, what);
	else
		read_one(p, ring_of(p, m), buf, len, off, r.idx, what);
	t2 = ticks();
	reg_put(p, m, &r);
	t3 = ticks();
	check_any(p, buf, len, off, what);
	*t_p = (double)(t3 - t0);
	*reg_p = m == MODE_PLAIN || m == MODE_ONCE ?
			 0 : (double)(t1 - t0 + t3 - t2);
}

/* Registering alone, as a read does it, back to back with no read
 * between: the median of B2B_REPS, in microseconds.  A cache hit's get
 * and put take about as long as reading the timer twice, so the cache's
 * are timed B2B_BATCH at a time.  Its first get of a range may miss; it
 * is left out. */
static double reg_b2b(struct io *p, int m, char *buf, size_t len)
{
	unsigned batch = m == MODE_CACHE ? B2B_BATCH : 1;
	double v[B2B_REPS];
	struct reg r;

	if (m == MODE_PLAIN || m == MODE_ONCE)
		return 0;
	reg_get(p, m, buf, len, 0, &r);
	reg_put(p, m, &r);
	for (int k = 0; k < B2B_REPS; k++) {
		uint64_t t = ticks();

		for (unsigned j = 0; j < batch; j++) {
			reg_get(p, m, buf, len, 0, &r);
			reg_put(p, m, &r);
		}
		v[k] = (double)(ticks() - t) / batch;
	}
	return median(v, B2B_REPS) / tick_rate();
}

static void csv_row(struct io *p, const char *mode, size_t len,
		    const struct result *r)
{
	if (p->csv)
		fprintf(p->csv, "%s,%zu,%.3f,%.2f,%.5f,%.3f,%.3f,%.5f\n",
			mode, len, r->us, (double)len / r->us, r->reg, r->lo,
			r->hi, r->b2b);
}

/* ---- the sweep ---- */

/* The sweep's buffer i for mode m: the four shared by the modes, or with
 * --mem cuda the mode's own. */
static char *buf_of(struct io *p, int m, unsigned i)
{
	return p->cuda ? p->gbuf[m][i] : p->buf[i];
}

/* One turn of mode m at len: W warm-up reads, then N timed ones.  The
 * medians of its reads and of their registering, in ticks: an interrupt
 * or a neighbour taking the CPU lands in one read, not in all. */
static void measure(struct io *p, int m, size_t len, double *t,
		    double *reg, double *t_p, double *reg_p)
{
	unsigned n = p->iters, w = p->warmup;

	for (unsigned k = 0; k < w + n; k++) {
		double tk, rk;

		timed_read(p, m, buf_of(p, m, k % NBUF), len, k % NBUF,
			   read_off(p, p->next++, len), mode_names[m], &tk,
			   &rk);
		if (k >= w) {
			t[k - w] = tk;
			reg[k - w] = rk;
		}
	}
	*t_p = median(t, n);
	*reg_p = median(reg, n);
}

static void sweep(struct io *p)
{
	unsigned rounds = p->rounds;
	double *t = calloc((size_t)MODES * rounds, sizeof(*t));
	double *g = calloc((size_t)MODES * rounds, sizeof(*g));
	double *rt = calloc(p->iters, sizeof(*rt));
	double *rg = calloc(p->iters, sizeof(*rg));

	if (!t || !g || !rt || !rg)
		die("calloc");
	for (unsigned si = 0; si < p->nsizes; si++) {
		size_t len = p->sizes[si];
		char line[512], sz[24];
		const char *sep = "";
		int at;
		double rate;

		for (unsigned rnd = 0; rnd < rounds; rnd++)
			for (int m = 0; m < MODES; m++)
				if (p->modes & (1u << m))
					measure(p, m, len, rt, rg,
						&t[m * rounds + rnd],
						&g[m * rounds + rnd]);
		rate = tick_rate();
		at = snprintf(line, sizeof(line), "%6s:",
			      size_str(len, sz, sizeof(sz)));
		for (int m = 0; m < MODES; m++) {
			struct result *r = &p->res[m][si];
			double *v = t + m * rounds;

			if (!(p->modes & (1u << m)))
				continue;
			r->have = 1;
			r->us = median(v, rounds) / rate;
			r->lo = v[0] / rate;
			r->hi = v[rounds - 1] / rate;
			r->reg = median(g + m * rounds, rounds) / rate;
			r->b2b = reg_b2b(p, m, buf_of(p, m, 0), len);
			csv_row(p, mode_names[m], len, r);
			at += snprintf(line + at, sizeof(line) - (size_t)at,
				       "%s %s %.1f", sep, mode_names[m], r->us);
			sep = ",";
		}
		at += snprintf(line + at, sizeof(line) - (size_t)at,
			       " us/read");
		sep = "; registering per read:";
		for (int m = MODE_PER_READ; m < MODES; m++) {
			struct result *r = &p->res[m][si];

			if (!r->have)
				continue;
			at += snprintf(line + at, sizeof(line) - (size_t)at,
				       "%s %s %.3f (b2b %.3f)", sep,
				       mode_names[m], r->reg, r->b2b);
			sep = ",";
		}
		printf("%s%s\n", line, *sep == ',' ? " us" : "");
	}
	free(rg);
	free(rt);
	free(g);
	free(t);
}

/* ---- the workload ---- */

struct wl_buf {
	char *p;
	size_t len;
	unsigned si;  /* its size's index in the list */
	int mapped;   /* mmap'ed, else posix_memalign'ed */
};

struct wl_count {
	unsigned freed, freed_same;   /* free + posix_memalign */
	unsigned mapped, mapped_same; /* unmapped or mapped over */
};

/* One mode's pass over the workload's reads: buffers of its own, the
 * same sizes and the same random choices as the other passes'. */
struct wl_pass {
	int m;               /* MODE_CACHE, MODE_ONCE or MODE_PLAIN */
	struct wl_buf *b;
	uint64_t rnd;
	struct wl_count c;
	double *t, *g;       /* size i's reads from [i * N]: times, and */
	unsigned *cnt;       /* registering; how many */
};

static char *wl_map(size_t len, void *at, int flags)
{
	void *h = mmap(at, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);

	return h == MAP_FAILED ? NULL : h;
}

/* Let b go and put new memory of its size in its place. */
static void wl_replace(struct wl_buf *b, struct wl_count *c)
{
	char *old = b->p;

	if (!b->mapped) {
		free(old);
		b->p = xalloc(b->len);
		c->freed++;
		c->freed_same += b->p == old;
		return;
	}
	if (c->mapped++ % 2 == 0) {
		/* Unmapped, then mapped at the same address.  NOREPLACE:
		 * should another thread have taken the range meanwhile,
		 * it is not overwritten; the buffer moves instead. */
		if (munmap(old, b->len))
			die("munmap");
		b->p = wl_map(b->len, old, MAP_FIXED_NOREPLACE);
		if (!b->p)
			b->p = wl_map(b->len, NULL, 0);
	} else {
		/* New pages over the old in one call, no munmap at all. */
		b->p = wl_map(b->len, old, MAP_FIXED);
	}
	if (!b->p)
		die("mmap");
	c->mapped_same += b->p == old;
}

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void wl_slot(struct io *p, unsigned slot, void *buf, size_t len)
{
	int ret = slot_set(&p->own, slot, buf, len);

	if (ret == -ENOMEM)
		skip("the workload's fixed buffers are over RLIMIT_MEMLOCK "
		     "(ulimit -l; root is not charged)");
	if (ret != 1)
		fail("setting slot %u: %s", slot,
		     strerror(ret < 0 ? -ret : EIO));
}

/* Once mode: register buffer b (slot i of our table; with --mem cuda
 * cuFileBufRegister), or let it go (set 0). */
static void wl_once(struct io *p, unsigned i, struct wl_buf *b, int set)
{
	if (!p->cuda)
		wl_slot(p, i, set ? b->p : NULL, set ? b->len : 0);
	else if (set)
		cf_ok(cf.cuFileBufRegister(b->p, b->len, 0),
		      "cuFileBufRegister", b->p);
	else
		cf_ok(cf.cuFileBufDeregister(b->p), "cuFileBufDeregister",
		      b->p);
}

/* --mem cuda: free b and allocate its size again (the driver often
 * hands the same address back). */
static void wl_replace_gpu(struct wl_buf *b, struct wl_count *c)
{
	char *old = b->p;

	gfree(old);
	b->p = galloc(b->len);
	c->freed++;
	c->freed_same += b->p == old;
}

static void wl_pass_up(struct io *p, struct wl_pass *w, int m)
{
	unsigned nb = p->wl_bufs, ns = p->nsizes;

	memset(w, 0, sizeof(*w));
	w->m = m;
	w->rnd = p->seed | 1;
	w->b = calloc(nb, sizeof(*w->b));
	w->t = calloc((size_t)ns * p->wl_reads, sizeof(*w->t));
	w->g = calloc((size_t)ns * p->wl_reads, sizeof(*w->g));
	w->cnt = calloc(ns, sizeof(*w->cnt));
	if (!w->b || !w->t || !w->g || !w->cnt)
		die("calloc");
	for (unsigned i = 0; i < nb; i++) {
		struct wl_buf *b = &w->b[i];

		b->si = i % ns;
		b->len = p->sizes[b->si];
		b->mapped = !p->cuda && i % 4 == 3;
		if (p->cuda)
			b->p = galloc(b->len);
		else
			b->p = b->mapped ? wl_map(b->len, NULL, 0) :
					   xalloc(b->len);
		if (!b->p)
			die("mmap");
		if (m == MODE_ONCE)
			wl_once(p, i, b, 1);
	}
}

static void wl_pass_down(struct io *p, struct wl_pass *w)
{
	for (unsigned i = 0; i < p->wl_bufs; i++) {
		if (w->m == MODE_ONCE)
			wl_once(p, i, &w->b[i], 0);
		if (p->cuda)
			gfree(w->b[i].p);
		else if (w->b[i].mapped)
			munmap(w->b[i].p, w->b[i].len);
		else
			free(w->b[i].p);
	}
	free(w->cnt);
	free(w->g);
	free(w->t);
	free(w->b);
}

/* Read k of pass w; before every eighth read, a buffer replaced.  A
 * program that registers once knows when it frees: its slot is cleared
 * before and set to the new buffer after, untimed. */
static void wl_step(struct io *p, struct wl_pass *w, unsigned k)
{
	unsigned nb = p->wl_bufs, bi = k % nb, si = w->b[bi].si;
	size_t at = (size_t)si * p->wl_reads + w->cnt[si];

	if (k % 8 == 4) {
		unsigned v = (unsigned)(xorshift(&w->rnd) % nb);

		if (w->m == MODE_ONCE)
			wl_once(p, v, &w->b[v], 0);
		if (p->cuda)
			wl_replace_gpu(&w->b[v], &w->c);
		else
			wl_replace(&w->b[v], &w->c);
		if (w->m == MODE_ONCE)
			wl_once(p, v, &w->b[v], 1);
	}
	timed_read(p, w->m, w->b[bi].p, w->b[bi].len, bi,
		   read_off(p, w->cnt[si], w->b[bi].len), "workload",
		   &w->t[at], &w->g[at]);
	w->cnt[si]++;
}

/* The medians of pass w's reads of size si, and their spread. */
static struct result wl_result(struct io *p, struct wl_pass *w,
			       unsigned si, double rate)
{
	double *v = w->t + (size_t)si * p->wl_reads;
	unsigned n = w->cnt[si];
	struct result r = { .have = 1 };

	r.us = median(v, n) / rate;
	r.lo = v[0] / rate;
	r.hi = v[n - 1] / rate;
	r.reg = median(w->g + (size_t)si * p->wl_reads, n) / rate;
	return r;
}

static uint64_t stat_of(struct io *p, enum gdrc_stat st)
{
	uint64_t v = 0;

	gdrc_stat_get(p->gdrc, st, &v);
	return v;
}

/*
 * The workload through the cache and, on the same reads with buffers of
 * their own, the sweep's other modes but per-read: a workload's buffers
 * are colder than the sweep's four (a 64 KiB read may follow a 16 MiB
 * one), so once is measured again where the cache is.  Each pass reads
 * the same offsets in the same order.  The passes take turns, each
 * going first in turn, so that a busy machine, or a disk that caches
 * what another pass read just before, favours none; a turn is a round of
 * the buffers and one read more, so that the first read of a turn, which
 * takes in the cache the unmap events of the other passes' frees, falls
 * on each buffer in turn.
 */
static void workload(struct io *p)
{
	enum { HITS, MISSES, INVAL, EVICT, FREE_DEREGS, NSTAT };
	static const enum gdrc_stat ids[NSTAT] = {
		GDRC_STAT_HITS, GDRC_STAT_MISSES, GDRC_STAT_INVALIDATIONS,
		GDRC_STAT_EVICTIONS, GDRC_STAT_FREE_DEREGS
	};
	static const char *const rows[MODES] = {
		[MODE_PLAIN] = "workload-plain", [MODE_ONCE] = "workload-once",
		[MODE_CACHE] = "workload"
	};
	unsigned n = p->wl_reads, nb = p->wl_bufs, ns = p->nsizes;
	unsigned np = 0, once = 0;
	struct wl_pass w[3], *wc;
	uint64_t st[NSTAT];
	size_t lo = SIZE_MAX, hi = 0;
	char s1[24], s2[24], tail[64];
	double rate;
	int ret;

	if (!p->cuda && (p->modes & (1u << MODE_ONCE))) {
		ret = io_uring_register_buffers_sparse(&p->own, nb);
		if (ret)
			fail("a table of %u slots: %s", nb, strerror(-ret));
		p->own_table = 1;
	}
	for (int m = 0; m < MODES; m++) {
		if (m == MODE_PER_READ ||
		    (m != MODE_CACHE && !(p->modes & (1u << m))))
			continue;
		once += m == MODE_ONCE;
		wl_pass_up(p, &w[np++], m);
	}
	wc = &w[np - 1];
	for (int j = 0; j < NSTAT; j++)
		st[j] = stat_of(p, ids[j]);
	for (unsigned k0 = 0, turn = 0; k0 < n; k0 += nb + 1, turn++)
		for (unsigned i = 0; i < np; i++)
			for (unsigned k = k0; k < k0 + nb + 1 && k < n; k++)
				wl_step(p, &w[(i + turn) % np], k);
	for (int j = 0; j < NSTAT; j++)
		st[j] = stat_of(p, ids[j]) - st[j];

	rate = tick_rate();
	for (unsigned si = 0; si < ns; si++) {
		struct result r[MODES] = { { 0 } };
		unsigned i;

		if (!wc->cnt[si])
			continue;
		for (i = 0; i < np; i++) {
			r[w[i].m] = wl_result(p, &w[i], si, rate);
			if (w[i].m != MODE_CACHE)
				csv_row(p, rows[w[i].m], p->sizes[si],
					&r[w[i].m]);
		}
		for (i = 0; wc->b[i].si != si; i++)
			;
		r[MODE_CACHE].b2b = reg_b2b(p, MODE_CACHE, wc->b[i].p,
					    wc->b[i].len);
		csv_row(p, rows[MODE_CACHE], p->sizes[si], &r[MODE_CACHE]);
		lo = p->sizes[si] < lo ? p->sizes[si] : lo;
		hi = p->sizes[si] > hi ? p->sizes[si] : hi;

		printf("workload %6s: %.1f us/read",
		       size_str(p->sizes[si], s1, sizeof(s1)),
		       r[MODE_CACHE].us);
		if (r[MODE_ONCE].have)
			printf(", once %.1f (%.3fx)", r[MODE_ONCE].us,
			       r[MODE_CACHE].us / r[MODE_ONCE].us);
		if (r[MODE_PLAIN].have)
			printf(", plain %.1f (plain/workload %.2fx)",
			       r[MODE_PLAIN].us,
			       r[MODE_PLAIN].us / r[MODE_CACHE].us);
		printf("; registering %.3f (b2b %.3f) us/read; %u reads",
		       r[MODE_CACHE].reg, r[MODE_CACHE].b2b, wc->cnt[si]);
		if (p->res[MODE_ONCE][si].have)
			printf(" (the sweep's once: %.1f)",
			       p->res[MODE_ONCE][si].us);
		printf("\n");
	}
	/* GPU memory: the registrations the CUDA frees released (inside
	 * cuMemFree, before the driver freed). */
	if (p->cuda)
		snprintf(tail, sizeof(tail), ", free_deregs %" PRIu64,
			 st[FREE_DEREGS]);
	else
		snprintf(tail, sizeof(tail), " (cache slots %u)", p->slots);
	printf("workload: %u reads, %u buffers of %s to %s, %u replaced "
	       "between reads: %u freed and allocated again (%u at the old "
	       "address), %u mapped anew (%u at the old address); hits %"
	       PRIu64 ", misses %" PRIu64 ", invalidations %" PRIu64
	       ", evictions %" PRIu64 "%s; data: every byte checked\n", n,
	       nb, size_str(lo, s1, sizeof(s1)),
	       size_str(hi, s2, sizeof(s2)), wc->c.freed + wc->c.mapped,
	       wc->c.freed, wc->c.freed_same, wc->c.mapped,
	       wc->c.mapped_same, st[HITS], st[MISSES], st[INVAL],
	       st[EVICT], tail);
	for (unsigned i = 0; i < np; i++)
		wl_pass_down(p, &w[i]);
	if (once && !p->cuda) {
		io_uring_unregister_buffers(&p->own);
		p->own_table = 0;
	}
}

/* ---- set up ---- */

static void rings_up(struct io *p)
{
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_IO_URING |
			      GDRC_CONFIG_FIELD_IO_URING_SLOTS,
		.ring = &p->cring,
		.ring_slots = p->slots,
	};
	gdrc_status_t s;
	int ret;

	ret = io_uring_queue_init(8, &p->own, 0);
	if (ret)
		skip("no io_uring here (io_uring_queue_init: %s)",
		     strerror(-ret));
	ret = io_uring_queue_init(8, &p->cring, 0);
	if (ret)
		fail("a second io_uring: %s", strerror(-ret));
	if (p->modes & (1u << MODE_ONCE | 1u << MODE_PER_READ)) {
		ret = io_uring_register_buffers_sparse(&p->own, NBUF + 1);
		if (ret == -EINVAL)
			skip("the kernel has no sparse buffer tables (5.19 "
			     "and later)");
		if (ret)
			fail("io_uring_register_buffers_sparse: %s",
			     strerror(-ret));
		p->own_table = 1;
	}
	if (!(p->modes & (1u << MODE_CACHE)) && !p->wl_reads)
		return;
	s = gdrc_init(&cfg, &p->gdrc);
	if (s == GDRC_ERR_UNSUPPORTED)
		skip("gdrc_init on an io_uring: %s (GDRC_LOG_LEVEL=info "
		     "says why)", gdrc_status_str(s));
	if (s != GDRC_OK)
		fail("gdrc_init on an io_uring: %s", gdrc_status_str(s));
}

/* The sweep's buffers, registered in our table for once mode; and one
 * plain read first, which a file system without O_DIRECT through
 * io_uring refuses. */
static void buffers_up(struct io *p)
{
	char *b = xalloc(PAGE);
	int res = read_raw(p, &p->own, b, PAGE, 0, -1);

	if (res == -EINVAL || res == -EOPNOTSUPP)
		skip("an O_DIRECT read through io_uring of %s: %s", file_path,
		     strerror(-res));
	if (res != PAGE)
		fail("reading %s: %s", file_path,
		     res < 0 ? strerror(-res) : "short read");
	check(p, b, PAGE, 0, "first read");
	free(b);
	if (!p->modes)
		return;
	for (int i = 0; i < NBUF; i++) {
		p->buf[i] = xalloc(p->max_size);
		memset(p->buf[i], 0, p->max_size);
		if (!(p->modes & (1u << MODE_ONCE)))
			continue;
		res = slot_set(&p->own, (unsigned)i, p->buf[i], p->max_size);
		if (res == -ENOMEM)
			skip("fixed buffers of %zu bytes are over "
			     "RLIMIT_MEMLOCK (ulimit -l; root is not "
			     "charged)", NBUF * p->max_size);
		if (res != 1)
			fail("registering buffer %d: %s", i,
			     strerror(res < 0 ? -res : EIO));
	}
}

static void buffers_down(struct io *p)
{
	if (p->own_table)
		io_uring_unregister_buffers(&p->own);
	p->own_table = 0;
	for (int i = 0; i < NBUF; i++) {
		free(p->buf[i]);
		p->buf[i] = NULL;
	}
}

/* --mem cuda: the sweep's buffers, each mode its own, registered for
 * once mode; and one read first, which says whether cuFile reads this
 * file at all. */
static void cuda_buffers_up(struct io *p)
{
	char *g = galloc(PAGE);
	ssize_t n;

	n = cf.cuFileRead(p->fh, g, PAGE, 0, 0);
	if (n != PAGE)
		skip("--mem cuda: a first cuFileRead of %s: %zd", file_path,
		     n);
	check_any(p, g, PAGE, 0, "first read");
	gfree(g);
	for (int m = 0; m < MODES; m++) {
		if (!(p->modes & (1u << m)))
			continue;
		for (int i = 0; i < NBUF; i++) {
			p->gbuf[m][i] = galloc(p->max_size);
			if (m == MODE_ONCE)
				cf_ok(cf.cuFileBufRegister(p->gbuf[m][i],
							   p->max_size, 0),
				      "cuFileBufRegister", p->gbuf[m][i]);
		}
	}
}

/* Once mode's deregistered before their free; the cache's go with it. */
static void cuda_buffers_down(struct io *p)
{
	for (int m = 0; m < MODES; m++) {
		for (int i = 0; i < NBUF; i++) {
			if (!p->gbuf[m][i])
				continue;
			if (m == MODE_ONCE)
				cf_ok(cf.cuFileBufDeregister(p->gbuf[m][i]),
				      "cuFileBufDeregister", p->gbuf[m][i]);
			gfree(p->gbuf[m][i]);
			p->gbuf[m][i] = NULL;
		}
	}
}

/* ---- options ---- */

static int parse_size(const char *s, char **end, size_t *v_p)
{
	unsigned long long v;

	errno = 0;
	v = strtoull(s, end, 0);
	if (errno || *end == s)
		return -1;
	if (**end == 'K' || **end == 'k')
		v <<= 10, (*end)++;
	else if (**end == 'M' || **end == 'm')
		v <<= 20, (*end)++;
	/* O_DIRECT's alignment, and the kernel's 1 GiB a fixed buffer */
	if (!v || v % PAGE || v > (1ull << 30))
		return -1;
	*v_p = (size_t)v;
	return 0;
}

/* MIN:MAX (doubling) or A,B,C. */
static int parse_sizes(struct io *p, const char *s)
{
	size_t v, top;
	char *e;

	p->nsizes = 0;
	if (parse_size(s, &e, &v))
		return -1;
	if (*e == ':') {
		if (parse_size(e + 1, &e, &top) || *e || top < v)
			return -1;
		for (; v <= top && p->nsizes < MAX_SIZES; v *= 2)
			p->sizes[p->nsizes++] = v;
		return 0;
	}
	for (;;) {
		if (p->nsizes == MAX_SIZES)
			return -1;
		p->sizes[p->nsizes++] = v;
		if (!*e)
			return 0;
		if (*e != ',' || parse_size(e + 1, &e, &v))
			return -1;
	}
}

static int parse_modes(const char *s, unsigned *modes_p)
{
	unsigned bits = 0;

	if (!strcmp(s, "none")) {
		*modes_p = 0;
		return 0;
	}
	while (*s) {
		size_t l = strcspn(s, ",");
		int m;

		for (m = 0; m < MODES; m++)
			if (strlen(mode_names[m]) == l &&
			    !strncmp(s, mode_names[m], l))
				break;
		if (m == MODES)
			return -1;
		bits |= 1u << m;
		s += l + (s[l] == ',');
	}
	*modes_p = bits;
	return bits ? 0 : -1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gdrc-io [-f PATH] [-s MIN:MAX|A,B,...] [-n N] [-r N] "
		"[-w N] [-m MODES] [-o CSV]\n"
		"               [--workload N] [--bufs B] [--cache-slots K] "
		"[--mem host|cuda] [--keep]\n"
		"MODES: plain,once,per-read,cache (all four), or none\n"
		"the options are described at the top of gdrc-io.c\n");
}

int main(int argc, char **argv)
{
	static const struct option longs[] = {
		{ "workload", 1, NULL, 'W' }, { "bufs", 1, NULL, 'B' },
		{ "cache-slots", 1, NULL, 'K' }, { "keep", 0, NULL, 'k' },
		{ "mem", 1, NULL, 'M' }, { "help", 0, NULL, 'h' },
		{ 0, 0, 0, 0 }
	};
	struct io *p = calloc(1, sizeof(*p));
	const char *path = "gdrc-io.dat", *csv_path = NULL;
	int c, bad = 0;

	if (!p)
		die("calloc");
	p->fd = -1;
	p->iters = 20;
	p->rounds = 5;
	p->warmup = 2;
	p->modes = (1u << MODES) - 1;
	p->wl_bufs = 16;
	p->slots = 64;
	parse_sizes(p, "64K:16M");
	while ((c = getopt_long(argc, argv, "f:s:n:r:w:m:o:h", longs,
				NULL)) != -1) {
		switch (c) {
		case 'f': path = optarg; break;
		case 's': bad |= parse_sizes(p, optarg); break;
		case 'n': p->iters = (unsigned)atoi(optarg); break;
		case 'r': p->rounds = (unsigned)atoi(optarg); break;
		case 'w': p->warmup = (unsigned)atoi(optarg); break;
		case 'm': bad |= parse_modes(optarg, &p->modes); break;
		case 'o': csv_path = optarg; break;
		case 'W': p->wl_reads = (unsigned)atoi(optarg); break;
		case 'B': p->wl_bufs = (unsigned)atoi(optarg); break;
		case 'K': p->slots = (unsigned)atoi(optarg); break;
		case 'k': keep_file = 1; break;
		case 'M':
			p->cuda = !strcmp(optarg, "cuda");
			bad |= !p->cuda && strcmp(optarg, "host");
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (bad || optind != argc || !p->iters || !p->rounds ||
	    (int)p->iters < 0 || (int)p->rounds < 0 || (int)p->warmup < 0 ||
	    !p->wl_bufs || (int)p->wl_bufs < 0 || !p->slots ||
	    p->slots > GDRC_IO_URING_SLOTS_MAX ||
	    (!p->modes && !p->wl_reads)) {
		fprintf(stderr, "gdrc-io: bad options\n");
		usage(stderr);
		return 2;
	}
	for (unsigned i = 0; i < p->nsizes; i++)
		if (p->sizes[i] > p->max_size)
			p->max_size = p->sizes[i];
	p->fsize = 4 * (uint64_t)p->max_size > FILE_MIN ?
			   4 * (uint64_t)p->max_size : FILE_MIN;
	p->fsize -= p->fsize % CHUNK;
	setvbuf(stdout, NULL, _IOLBF, 0);
	clock0.us = now_us();
	clock0.ticks = ticks();
	p->seed = ((uint64_t)getpid() << 32 ^ (uint64_t)clock0.ticks) |
		  0x9e3779b97f4a7c15ull;

	/* A 64 MiB file left in /dev/shm would hold that much memory: it
	 * goes also when a signal ends the program (SIGPIPE: its output
	 * piped into head). */
	atexit(file_remove);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	signal(SIGPIPE, on_signal);
	if (p->cuda)
		cuda_up(p);
	file_make(p, path);
	if (p->cuda) {
		cuda_handle_up(p);
		cuda_buffers_up(p);
	} else {
		rings_up(p);
		buffers_up(p);
	}
	printf("gdrc-io: %s, %" PRIu64 " MiB, O_DIRECT%s; %u reads x %u "
	       "rounds per mode and size, one in flight\n", file_path,
	       p->fsize >> 20, p->cuda ? ", cuFileRead into GPU memory" : "",
	       p->iters, p->rounds);
	if (csv_path) {
		p->csv = fopen(csv_path, "w");
		if (!p->csv)
			die(csv_path);
		fprintf(p->csv, "mode,bytes,usec,mbps,reg_usec,usec_min,"
				"usec_max,reg_b2b_usec\n");
	}
	if (p->modes)
		sweep(p);
	if (p->cuda)
		cuda_buffers_down(p);
	else
		buffers_down(p);
	if (p->wl_reads)
		workload(p);
	if (p->csv && fclose(p->csv))
		die(csv_path);
	if (p->cuda)
		cuda_down(p); /* the handle, while cuFile's driver is open */
	gdrc_fini(p->gdrc);
	if (!p->cuda) {
		io_uring_queue_exit(&p->cring);
		io_uring_queue_exit(&p->own);
	}
	close(p->fd);
	printf("data: every byte checked (%" PRIu64 " reads)\n", p->reads);
	free(p);
	return 0;
}
