// SPDX-License-Identifier: BSD-3-Clause
/*
 * hookcost.c - gdrc-hookcost: what it costs, and what it sees, to learn
 * that host memory was unmapped: libgdrcache's patched glibc entry points
 * (lib/hooks/) against userfaultfd non-cooperative events.
 *
 * What it measures (ns per operation, best and median of 5 repetitions)
 *   1. baseline   mmap of one page + a write to it + munmap through raw
 *                 syscall(), and each step alone; the same through glibc;
 *                 munmap of an empty range (a system call that succeeds
 *                 and does nothing: the hook's own cost stands out).
 *   2. hooks      malloc(1 MiB) + free() (glibc mmaps such a block; the
 *                 mmap threshold is pinned so that it stays so) and free()
 *                 alone, just before gdrc_init(NULL, &ctx) installs the
 *                 hooks (they cannot be taken out), then again after.
 *                 The glibc mmap + touch + munmap pair with a subscribed
 *                 context and no registration, with one cached
 *                 registration elsewhere, with a gdrc_mr_get hit after
 *                 each pair (the hit drains the queue the hooks fill), and
 *                 after gdrc_fini (hooks stay, nobody subscribed); the
 *                 empty-range munmap, hooked.
 *   3. userfaultfd  a uffd with UFFD_FEATURE_EVENT_UNMAP, _REMOVE and
 *                 _REMAP, and a reader thread that poll()s and read()s it,
 *                 counts the events and answers page faults with
 *                 UFFDIO_ZEROPAGE (or UFFDIO_COPY where said).  Per cycle:
 *                 raw mmap of a page, UFFDIO_REGISTER (MISSING), a write
 *                 (the fault goes to the reader), raw munmap (returns only
 *                 once the reader has read the UNMAP event).  Each step is
 *                 also timed alone; so are UFFDIO_REGISTER and _UNREGISTER
 *                 of a populated page (a cache's miss and eviction), a
 *                 reader that busy-polls, a WP-only registration (no
 *                 missing faults) and free() of a registered 1 MiB block.
 *   Sections run in the order 1, 3, 2: nothing is patched while 1 and 3
 *   run.  The cost of a munmap depends by a few hundred ns on the mappings
 *   around it, which change as the program runs, so each section times
 *   its own raw-syscall reference ("ref:" rows), alternating repetitions
 *   with the rows compared to it.
 *
 * What it checks
 *   Every loop's events are counted: the uffd reader must have read one
 *   UNMAP event per munmap (and one fault per first touch), the context's
 *   "mem_events" counter must have grown by one per hooked munmap or
 *   free.  A coverage table does each way of dropping memory (munmap
 *   through glibc and through a raw system call, madvise, mremap, mmap
 *   MAP_FIXED, brk, free) once under each mechanism (uffd: with a MISSING
 *   and with a WP-only registration) and says what was seen.  "info"
 *   checks show what breaks with userfaultfd: file mappings, a range
 *   another uffd owns, VMA splitting, kernel accesses (GUP, read()) to
 *   unpopulated registered pages with UFFD_USER_MODE_ONLY, and what a
 *   process without root may open (as root, a child that drops to uid
 *   65534 tries; with the sysctl vm.unprivileged_userfaultfd at 0 only
 *   UFFD_USER_MODE_ONLY is left).
 *   Not root and refused a full uffd, it measures UFFD_USER_MODE_ONLY.
 *
 * Running it
 *   gdrc-hookcost              full run (a few seconds)
 *   gdrc-hookcost --quick      10x fewer iterations
 *   gdrc-hookcost --json PATH  also write the results as one JSON object
 *   Run it on an idle machine; as root to see both kinds of uffd.  Exit 0
 *   when every count matched, 1 when a count was wrong or a call failed,
 *   2 on a bad option.  Without userfaultfd (errno printed) its rows are
 *   skipped, which is not an error.  GDRC_MEM_HOOKS=none in the
 *   environment keeps the hooks out (a check line says so).
 *
 * Reading the output
 *   "best" is the fastest repetition, "median" the middle one, "+ns" the
 *   best minus the best of the row named under "vs".  Step rows time one
 *   call with clock_gettime around it (some 20 ns of that is the clock).
 *
 * JSON (--json PATH): {"machine": {...}, "quick", "iterations",
 * "uffd": {"available", "how", "errno", "unprivileged_sysctl",
 * "unprivileged": {"plain", "user_mode_only", "dev_userfaultfd"}},
 * "rows": [{"key", "label", "best_ns", "median_ns", "ref", "delta_ns",
 * "skipped"}], "coverage": [{"op", "hooks", "uffd", "uffd_wp"}],
 * "checks": [{"key", "ok", "detail"}]}.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <gnu/libc-version.h>
#include <grp.h>
#include <linux/userfaultfd.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gdrcache.h>

#define HOOKCOST_REPS 5
#define HOOKCOST_ITERS 4000U      /* per repetition; --quick: / 10 */
#define HOOKCOST_BLOCK (1UL << 20) /* the malloc block freed */
#define HOOKCOST_MAX_ROWS 64
#define HOOKCOST_MAX_CHECKS 32
#define HOOKCOST_WAIT_MS 200      /* for an event that should come */
#define HOOKCOST_NOBODY 65534
#define HOOKCOST_WATCHDOG_S 120

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

#define HOOKCOST_EVENTS                                                      \
	(UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE |              \
	 UFFD_FEATURE_EVENT_REMAP)

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOOKCOST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define HOOKCOST_ASAN 1
#endif
#ifdef HOOKCOST_ASAN
#define HOOKCOST_NO_ASAN __attribute__((no_sanitize_address))
#else
#define HOOKCOST_NO_ASAN
#endif

static size_t hookcost_page;
/* malloc(HOOKCOST_BLOCK) is glibc's own mmap; not under a sanitizer. */
static int hookcost_mmapped_blocks;
static unsigned hookcost_iters = HOOKCOST_ITERS;
static int hookcost_quick;
static int hookcost_failed;      /* a count was wrong: exit 1 */

/* ====================================================================
 * Results
 * ==================================================================== */

struct hookcost_row {
	const char *key;        /* NULL: a section heading */
	const char *label;
	const char *ref;        /* key of the row compared with, or NULL */
	double best, median;    /* ns per operation */
	int sec;                /* section number, printed in order */
	int skipped;
	char why[160];
};

struct hookcost_check {
	const char *key;
	int ok;                 /* 1 ok, 0 failed, -1 information */
	char detail[200];
};

enum hookcost_op {
	HC_OP_MUNMAP,
	HC_OP_RAW_MUNMAP,
	HC_OP_DONTNEED,
	HC_OP_RAW_DONTNEED,
	HC_OP_MADV_FREE,
	HC_OP_MREMAP_MOVE,
	HC_OP_MREMAP_SHRINK,
	HC_OP_MAP_FIXED,
	HC_OP_BRK,
	HC_OP_FREE,
	HC_OP_COUNT
};

static const char *const hookcost_op_names[HC_OP_COUNT] = {
	[HC_OP_MUNMAP] = "munmap (glibc)",
	[HC_OP_RAW_MUNMAP] = "munmap (raw syscall)",
	[HC_OP_DONTNEED] = "madvise DONTNEED (glibc)",
	[HC_OP_RAW_DONTNEED] = "madvise DONTNEED (raw syscall)",
	[HC_OP_MADV_FREE] = "madvise FREE (glibc)",
	[HC_OP_MREMAP_MOVE] = "mremap move (MREMAP_FIXED)",
	[HC_OP_MREMAP_SHRINK] = "mremap shrink in place",
	[HC_OP_MAP_FIXED] = "mmap MAP_FIXED over it",
	[HC_OP_BRK] = "brk shrink (sbrk)",
	[HC_OP_FREE] = "free() of 1 MiB malloc block",
};

static struct hookcost_row hookcost_rows[HOOKCOST_MAX_ROWS];
static int hookcost_nrows;
static int hookcost_cur_sec;    /* section rows are added to now */
static struct hookcost_check hookcost_checks[HOOKCOST_MAX_CHECKS];
static int hookcost_nchecks;
/* What each mechanism saw: [op][0 hooks, 1 uffd MISSING, 2 uffd WP]. */
static char hookcost_cov[HC_OP_COUNT][3][40];

/* What was learnt about opening a userfaultfd. */
static struct {
	int available;
	int err;                /* errno of the failure */
	int flags;              /* userfaultfd flags the main uffd needed */
	char how[96];
	int sysctl;             /* vm.unprivileged_userfaultfd, -1 unknown */
	int probed;             /* the unprivileged probe ran */
	int nobody_plain;       /* errno, 0 = worked */
	int nobody_umo;
	int nobody_dev;
} hookcost_uinfo = { .sysctl = -1 };

static void hookcost_die(const char *what)
{
	fprintf(stderr, "gdrc-hookcost: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* "EPERM" where glibc can name it, else the message. */
static const char *hookcost_errno_name(int e)
{
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 32)
	if (strerrorname_np(e))
		return strerrorname_np(e);
#endif
	return strerror(e);
}

static uint64_t hookcost_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void hookcost_sleep_us(unsigned us)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)us * 1000 };

	nanosleep(&ts, NULL);
}

/* Start section sec (1..3); sections run out of order, print in order. */
static void hookcost_section(int sec, const char *title)
{
	struct hookcost_row *r;

	if (hookcost_nrows == HOOKCOST_MAX_ROWS)
		return;
	hookcost_cur_sec = sec;
	r = &hookcost_rows[hookcost_nrows++];
	memset(r, 0, sizeof(*r));
	r->label = title;
	r->sec = sec;
}

static struct hookcost_row *hookcost_row_new(const char *key,
					     const char *label,
					     const char *ref)
{
	struct hookcost_row *r;

	if (hookcost_nrows == HOOKCOST_MAX_ROWS) {
		fprintf(stderr, "gdrc-hookcost: too many rows\n");
		exit(1);
	}
	r = &hookcost_rows[hookcost_nrows++];
	memset(r, 0, sizeof(*r));
	r->key = key;
	r->label = label;
	r->ref = ref;
	r->sec = hookcost_cur_sec;
	return r;
}

__attribute__((format(printf, 3, 4)))
static void hookcost_skip(const char *key, const char *label,
			  const char *fmt, ...)
{
	struct hookcost_row *r = hookcost_row_new(key, label, NULL);
	va_list ap;

	r->skipped = 1;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
}

static const struct hookcost_row *hookcost_row_find(const char *key)
{
	for (int i = 0; i < hookcost_nrows; i++)
		if (hookcost_rows[i].key && key &&
		    !strcmp(hookcost_rows[i].key, key))
			return &hookcost_rows[i];
	return NULL;
}

__attribute__((format(printf, 3, 4)))
static void hookcost_check(const char *key, int ok, const char *fmt, ...)
{
	struct hookcost_check *c;
	va_list ap;

	if (hookcost_nchecks == HOOKCOST_MAX_CHECKS)
		return;
	c = &hookcost_checks[hookcost_nchecks++];
	c->key = key;
	c->ok = ok;
	va_start(ap, fmt);
	vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
	va_end(ap);
	if (ok == 0)
		hookcost_failed = 1;
}

static int hookcost_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* ====================================================================
 * The repetition driver
 * ==================================================================== */

/* Up to this many numbers from one run of a loop (steps of a cycle). */
#define HC_NVAL 6

/* Runs iters iterations, writes ns per iteration into val[0..HC_NVAL). */
typedef void (*hookcost_loop_fn)(void *arg, unsigned iters, double *val);

/* Which value of a loop becomes which row. */
struct hookcost_out {
	int val;                /* index into val[] */
	const char *key;
	const char *label;
	const char *ref;
};

/* One loop to repeat: what it runs and which rows it fills. */
struct hookcost_job {
	hookcost_loop_fn fn;
	void *arg;
	const struct hookcost_out *out;
	int nout;
};

static void hookcost_rows_add(const struct hookcost_job *job,
			      double vals[HC_NVAL][HOOKCOST_REPS])
{
	for (int o = 0; o < job->nout; o++) {
		const struct hookcost_out *out = &job->out[o];
		struct hookcost_row *r =
			hookcost_row_new(out->key, out->label, out->ref);
		double *s = vals[out->val];

		qsort(s, HOOKCOST_REPS, sizeof(double), hookcost_cmp_double);
		r->best = s[0];
		r->median = s[HOOKCOST_REPS / 2];
	}
}

/*
 * Warm up with a tenth of the iterations, then run HOOKCOST_REPS times
 * and add one row per out[].  With b, a and b alternate (a, b, a, b...),
 * so that a reference taken in the same state of the address space is
 * compared with b: the cost of a munmap depends on the mappings around
 * it by a few hundred ns, and that state changes as the program runs.
 * @return iterations each loop ran, warm-up included (for event counts).
 */
static uint64_t hookcost_run_ab(const struct hookcost_job *a,
				const struct hookcost_job *b)
{
	double va[HC_NVAL][HOOKCOST_REPS], vb[HC_NVAL][HOOKCOST_REPS];
	double val[HC_NVAL];
	unsigned warm = hookcost_iters / 10 ? hookcost_iters / 10 : 1;
	uint64_t total = warm;

	a->fn(a->arg, warm, val);
	if (b)
		b->fn(b->arg, warm, val);
	for (int rep = 0; rep < HOOKCOST_REPS; rep++) {
		memset(val, 0, sizeof(val));
		a->fn(a->arg, hookcost_iters, val);
		for (int v = 0; v < HC_NVAL; v++)
			va[v][rep] = val[v];
		if (b) {
			memset(val, 0, sizeof(val));
			b->fn(b->arg, hookcost_iters, val);
			for (int v = 0; v < HC_NVAL; v++)
				vb[v][rep] = val[v];
		}
		total += hookcost_iters;
	}
	hookcost_rows_add(a, va);
	if (b)
		hookcost_rows_add(b, vb);
	return total;
}

static uint64_t hookcost_run(hookcost_loop_fn fn, void *arg,
			     const struct hookcost_out *out, int nout)
{
	struct hookcost_job job = { fn, arg, out, nout };

	return hookcost_run_ab(&job, NULL);
}

/* a and b alternate; a is the reference, in the same state. */
static uint64_t hookcost_run2(hookcost_loop_fn fa, void *arga,
			      const struct hookcost_out *outa, int na,
			      hookcost_loop_fn fb, void *argb,
			      const struct hookcost_out *outb, int nb)
{
	struct hookcost_job a = { fa, arga, outa, na };
	struct hookcost_job b = { fb, argb, outb, nb };

	return hookcost_run_ab(&a, &b);
}

/* ====================================================================
 * Memory helpers
 * ==================================================================== */

static void *hookcost_raw_mmap(size_t len)
{
	long ret = syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return ret == -1 ? MAP_FAILED : (void *)ret;
}

static int hookcost_raw_munmap(void *p, size_t len)
{
	return (int)syscall(SYS_munmap, p, len);
}

static void *hookcost_libc_mmap(size_t len)
{
	return mmap(NULL, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

static uintptr_t hookcost_down(uintptr_t a)
{
	return a & ~(uintptr_t)(hookcost_page - 1);
}

static uintptr_t hookcost_up(uintptr_t a)
{
	return hookcost_down(a + hookcost_page - 1);
}

/*
 * Did glibc's malloc mmap this block for itself?  Such a chunk starts a
 * page (the user pointer is two words in) and bit 1 of its size word is
 * set.  A sanitizer's allocator fails the first test; reading its redzone
 * is not instrumented.
 */
HOOKCOST_NO_ASAN
static int hookcost_is_mmapped(uintptr_t user)
{
	uintptr_t size_word = user - sizeof(size_t);

	if ((user & (hookcost_page - 1)) != 2 * sizeof(size_t))
		return 0;
	return (*(const volatile size_t *)size_word & 2) != 0;
}

static void hookcost_touch(void *p)
{
	*(volatile char *)p = 1;
}

/* Mappings in this process (lines of /proc/self/maps); -1 on error. */
static int hookcost_vma_count(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, c;

	if (!f)
		return -1;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* ====================================================================
 * userfaultfd: the descriptor and its reader thread
 * ==================================================================== */

struct hookcost_uffd {
	int fd;
	int stop_fd;                    /* eventfd: the reader leaves */
	pthread_t thread;
	void *zero;                     /* a page of zeros for UFFDIO_COPY */
	atomic_int spin;                /* reader busy-polls, no poll() */
	atomic_int use_copy;            /* write faults: UFFDIO_COPY */
	atomic_int stop;
	_Atomic uint64_t n_unmap, n_remove, n_remap, n_fault, n_other;
	_Atomic uint64_t n_errors;      /* failed resolutions, bad reads */
};

/* Reader thread: resolve one missing-page fault. */
static void hookcost_uffd_fault(struct hookcost_uffd *u,
				const struct uffd_msg *m)
{
	uintptr_t at = hookcost_down((uintptr_t)m->arg.pagefault.address);
	int rc;

	if (atomic_load_explicit(&u->use_copy, memory_order_relaxed) &&
	    (m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WRITE)) {
		struct uffdio_copy cp = {
			.dst = at,
			.src = (uintptr_t)u->zero,
			.len = hookcost_page,
		};

		rc = ioctl(u->fd, UFFDIO_COPY, &cp);
	} else {
		struct uffdio_zeropage zp = {
			.range = { .start = at, .len = hookcost_page },
		};

		rc = ioctl(u->fd, UFFDIO_ZEROPAGE, &zp);
	}
	if (rc) {
		struct uffdio_range wake = { .start = at,
					     .len = hookcost_page };

		/* EEXIST: someone filled it; anything else: let it retry. */
		if (errno != EEXIST)
			atomic_fetch_add(&u->n_errors, 1);
		ioctl(u->fd, UFFDIO_WAKE, &wake);
	}
	atomic_fetch_add(&u->n_fault, 1);
}

static void hookcost_uffd_msg(struct hookcost_uffd *u,
			      const struct uffd_msg *m)
{
	switch (m->event) {
	case UFFD_EVENT_PAGEFAULT:
		hookcost_uffd_fault(u, m);
		break;
	case UFFD_EVENT_UNMAP:
		atomic_fetch_add(&u->n_unmap, 1);
		break;
	case UFFD_EVENT_REMOVE:
		atomic_fetch_add(&u->n_remove, 1);
		break;
	case UFFD_EVENT_REMAP:
		atomic_fetch_add(&u->n_remap, 1);
		break;
	default:
		atomic_fetch_add(&u->n_other, 1);
		break;
	}
}

/*
 * The reader.  It never allocates nor takes a lock: a thread blocked in
 * munmap or a fault waits for it, maybe with glibc's malloc lock held.
 */
static void *hookcost_uffd_reader(void *arg)
{
	struct hookcost_uffd *u = arg;
	struct uffd_msg msg[16];
	struct pollfd pfd[2] = {
		{ .fd = u->fd, .events = POLLIN },
		{ .fd = u->stop_fd, .events = POLLIN },
	};
	ssize_t n;

	while (!atomic_load_explicit(&u->stop, memory_order_relaxed)) {
		if (!atomic_load_explicit(&u->spin, memory_order_relaxed)) {
			if (poll(pfd, 2, -1) < 0) {
				if (errno == EINTR)
					continue;
				atomic_fetch_add(&u->n_errors, 1);
				break;
			}
			if ((pfd[1].revents & POLLIN) &&
			    !(pfd[0].revents & POLLIN))
				continue; /* stop is checked above */
		}
		n = read(u->fd, msg, sizeof(msg));
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				atomic_fetch_add(&u->n_errors, 1);
			continue;
		}
		for (size_t i = 0; i < (size_t)n / sizeof(msg[0]); i++)
			hookcost_uffd_msg(u, &msg[i]);
	}
	return NULL;
}

/* A bare userfaultfd, by the system call or /dev/userfaultfd. */
static int hookcost_uffd_create(int flags, char *how, size_t how_len)
{
	int fd, dev, saved;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | flags);
	if (fd >= 0) {
		snprintf(how, how_len, "userfaultfd(2)%s",
			 flags & UFFD_USER_MODE_ONLY ?
				 " with UFFD_USER_MODE_ONLY" : "");
		return fd;
	}
	saved = errno;
	dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev >= 0) {
		fd = ioctl(dev, USERFAULTFD_IOC_NEW,
			   O_CLOEXEC | O_NONBLOCK | flags);
		close(dev);
		if (fd >= 0) {
			snprintf(how, how_len, "/dev/userfaultfd");
			return fd;
		}
	}
	errno = saved;
	return -1;
}

/* The API handshake, asking for the three non-cooperative events. */
static int hookcost_uffd_api(int fd)
{
	struct uffdio_api api = { .api = UFFD_API,
				  .features = HOOKCOST_EVENTS };

	if (ioctl(fd, UFFDIO_API, &api))
		return -1;
	if ((api.features & HOOKCOST_EVENTS) != HOOKCOST_EVENTS) {
		errno = ENOTSUP;
		return -1;
	}
	return 0;
}

/* @return 0, or -1 with errno (nothing left open). */
static int hookcost_uffd_open(struct hookcost_uffd *u, int flags, char *how,
			      size_t how_len)
{
	int saved;

	memset(u, 0, sizeof(*u));
	u->fd = hookcost_uffd_create(flags, how, how_len);
	if (u->fd < 0)
		return -1;
	if (hookcost_uffd_api(u->fd))
		goto err_fd;
	u->zero = hookcost_raw_mmap(hookcost_page);
	if (u->zero == MAP_FAILED)
		goto err_fd;
	u->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (u->stop_fd < 0)
		goto err_zero;
	errno = pthread_create(&u->thread, NULL, hookcost_uffd_reader, u);
	if (errno)
		goto err_stop;
	return 0;

err_stop:
	close(u->stop_fd);
err_zero:
	saved = errno;
	hookcost_raw_munmap(u->zero, hookcost_page);
	errno = saved;
err_fd:
	saved = errno;
	close(u->fd);
	errno = saved;
	return -1;
}

static void hookcost_uffd_close(struct hookcost_uffd *u)
{
	uint64_t one = 1;

	atomic_store(&u->stop, 1);
	if (write(u->stop_fd, &one, sizeof(one)) != sizeof(one))
		perror("gdrc-hookcost: eventfd write");
	pthread_join(u->thread, NULL);
	close(u->stop_fd);
	close(u->fd);
	hookcost_raw_munmap(u->zero, hookcost_page);
}

static int hookcost_uffd_register(struct hookcost_uffd *u, void *p,
				  size_t len, uint64_t mode)
{
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)p, .len = len },
		.mode = mode,
	};

	return ioctl(u->fd, UFFDIO_REGISTER, &reg);
}

static int hookcost_uffd_unregister(struct hookcost_uffd *u, void *p,
				    size_t len)
{
	struct uffdio_range r = { .start = (uintptr_t)p, .len = len };

	return ioctl(u->fd, UFFDIO_UNREGISTER, &r);
}

/* Wait until *counter reaches want (the reader may lag a few ns). */
static uint64_t hookcost_uffd_wait(_Atomic uint64_t *counter, uint64_t want)
{
	uint64_t t_end = hookcost_now() + HOOKCOST_WAIT_MS * 1000000ULL;
	uint64_t v;

	while ((v = atomic_load(counter)) < want && hookcost_now() < t_end)
		hookcost_sleep_us(50);
	return v;
}

/* Do the counters show exactly `want` new UNMAP events and faults? */
static void hookcost_uffd_verify(struct hookcost_uffd *u, const char *key,
				 uint64_t unmap0, uint64_t fault0,
				 uint64_t want_unmap, uint64_t want_fault)
{
	uint64_t un = hookcost_uffd_wait(&u->n_unmap, unmap0 + want_unmap);
	uint64_t fa = hookcost_uffd_wait(&u->n_fault, fault0 + want_fault);
	uint64_t err = atomic_load(&u->n_errors);

	un -= unmap0;
	fa -= fault0;
	hookcost_check(key, un == want_unmap && fa == want_fault && !err,
		       "%llu munmaps -> %llu UNMAP events read; %llu first "
		       "touches -> %llu faults resolved; %llu reader errors",
		       (unsigned long long)want_unmap,
		       (unsigned long long)un,
		       (unsigned long long)want_fault,
		       (unsigned long long)fa, (unsigned long long)err);
}

/* ====================================================================
 * Loops
 * ==================================================================== */

/* Values of a cycle loop. */
enum { HC_V_TOTAL, HC_V_MMAP, HC_V_REG, HC_V_TOUCH, HC_V_UNMAP, HC_V_UNREG };

/* mmap + (register) + touch + munmap of one page. */
struct hookcost_cycle {
	struct hookcost_uffd *u;        /* NULL: no userfaultfd */
	uint64_t mode;                  /* UFFDIO_REGISTER_MODE_*; 0 none */
	int libc;                       /* glibc calls, else raw syscalls */
	int timed;                      /* clock around each step */
	struct gdrc_ctx *ctx;           /* get + put a hit after each */
	const void *hit;                /* the cached range */
};

static void hookcost_cycle_loop(void *arg, unsigned iters, double *val)
{
	struct hookcost_cycle *c = arg;
	uint64_t sum[HC_NVAL] = { 0 };
	uint64_t t0 = 0, t1 = 0, t2 = 0, t3 = 0, t4 = 0, start;
	struct gdrc_mr *mr;
	void *p;

	start = hookcost_now();
	for (unsigned i = 0; i < iters; i++) {
		if (c->timed)
			t0 = hookcost_now();
		p = c->libc ? hookcost_libc_mmap(hookcost_page) :
			      hookcost_raw_mmap(hookcost_page);
		if (p == MAP_FAILED)
			hookcost_die("mmap");
		if (c->timed)
			t1 = hookcost_now();
		if (c->mode &&
		    hookcost_uffd_register(c->u, p, hookcost_page, c->mode))
			hookcost_die("UFFDIO_REGISTER");
		if (c->timed)
			t2 = hookcost_now();
		hookcost_touch(p);
		if (c->timed)
			t3 = hookcost_now();
		if (c->libc ? munmap(p, hookcost_page) :
			      hookcost_raw_munmap(p, hookcost_page))
			hookcost_die("munmap");
		if (c->timed) {
			t4 = hookcost_now();
			sum[HC_V_MMAP] += t1 - t0;
			sum[HC_V_REG] += t2 - t1;
			sum[HC_V_TOUCH] += t3 - t2;
			sum[HC_V_UNMAP] += t4 - t3;
		}
		if (c->ctx) {
			if (gdrc_mr_get(c->ctx, c->hit, 64,
					GDRC_ACCESS_LOCAL_WRITE, 0, &mr))
				hookcost_die("gdrc_mr_get");
			gdrc_mr_put(c->ctx, mr);
		}
	}
	val[HC_V_TOTAL] = (double)(hookcost_now() - start) / iters;
	for (int v = HC_V_MMAP; v <= HC_V_UNMAP; v++)
		val[v] = (double)sum[v] / iters;
}

/* mmap + touch + REGISTER + UNREGISTER + munmap: what a cache's miss and
 * eviction add (the page is populated, so no fault reaches the reader). */
static void hookcost_regunreg_loop(void *arg, unsigned iters, double *val)
{
	struct hookcost_uffd *u = arg;
	uint64_t reg = 0, unreg = 0, t0, t1, t2;
	void *p;

	for (unsigned i = 0; i < iters; i++) {
		p = hookcost_raw_mmap(hookcost_page);
		if (p == MAP_FAILED)
			hookcost_die("mmap");
		hookcost_touch(p);
		t0 = hookcost_now();
		if (hookcost_uffd_register(u, p, hookcost_page,
					   UFFDIO_REGISTER_MODE_MISSING))
			hookcost_die("UFFDIO_REGISTER");
		t1 = hookcost_now();
		if (hookcost_uffd_unregister(u, p, hookcost_page))
			hookcost_die("UFFDIO_UNREGISTER");
		t2 = hookcost_now();
		if (hookcost_raw_munmap(p, hookcost_page))
			hookcost_die("munmap");
		reg += t1 - t0;
		unreg += t2 - t1;
	}
	val[HC_V_REG] = (double)reg / iters;
	val[HC_V_UNREG] = (double)unreg / iters;
}

/* Values of a malloc loop. */
enum { HC_V_PAIR, HC_V_FREE, HC_V_MREG };

/* malloc(1 MiB) + (register it) + free, with free timed alone. */
static void hookcost_malloc_loop(void *arg, unsigned iters, double *val)
{
	struct hookcost_uffd *u = arg; /* NULL: not registered */
	uint64_t pair = 0, fr = 0, reg = 0, t0, t1, t2, t3;
	uintptr_t lo, hi;
	char *p;

	for (unsigned i = 0; i < iters; i++) {
		t0 = hookcost_now();
		p = malloc(HOOKCOST_BLOCK);
		if (!p)
			hookcost_die("malloc");
		t1 = hookcost_now();
		if (u) {
			lo = hookcost_down((uintptr_t)p);
			hi = hookcost_up((uintptr_t)p + HOOKCOST_BLOCK);
			if (hookcost_uffd_register(u, (void *)lo, hi - lo,
					UFFDIO_REGISTER_MODE_MISSING))
				hookcost_die("UFFDIO_REGISTER (malloc block)");
		}
		t2 = hookcost_now();
		free(p);
		t3 = hookcost_now();
		pair += (t1 - t0) + (t3 - t2);
		reg += t2 - t1;
		fr += t3 - t2;
	}
	val[HC_V_PAIR] = (double)pair / iters;
	val[HC_V_FREE] = (double)fr / iters;
	val[HC_V_MREG] = (double)reg / iters;
}

/*
 * munmap of a page where nothing is mapped: a system call that succeeds
 * and does no work, so what the hooks add stands out.  Below
 * vm.mmap_min_addr nobody in this process maps anything.
 */
#define HOOKCOST_HOLE ((void *)0x1000)

static void hookcost_hole_loop(void *arg, unsigned iters, double *val)
{
	const int *libc = arg;
	uint64_t start = hookcost_now();

	for (unsigned i = 0; i < iters; i++)
		if (*libc ? munmap(HOOKCOST_HOLE, hookcost_page) :
			    hookcost_raw_munmap(HOOKCOST_HOLE, hookcost_page))
			hookcost_die("munmap of an empty range");
	val[0] = (double)(hookcost_now() - start) / iters;
}

/* gdrc_mr_get + gdrc_mr_put of a cached range. */
struct hookcost_hit {
	struct gdrc_ctx *ctx;
	const void *addr;
};

static void hookcost_hit_loop(void *arg, unsigned iters, double *val)
{
	struct hookcost_hit *h = arg;
	struct gdrc_mr *mr;
	uint64_t start = hookcost_now();

	for (unsigned i = 0; i < iters; i++) {
		if (gdrc_mr_get(h->ctx, h->addr, 64, GDRC_ACCESS_LOCAL_WRITE,
				0, &mr))
			hookcost_die("gdrc_mr_get");
		gdrc_mr_put(h->ctx, mr);
	}
	val[0] = (double)(hookcost_now() - start) / iters;
}

/* ====================================================================
 * Coverage: one way of dropping memory, under one mechanism
 * ==================================================================== */

/* Snapshot of what a mechanism has seen. */
struct hookcost_seen {
	uint64_t unmap, remove, remap; /* uffd */
	uint64_t posts;                /* hooks: the context's mem_events */
};

static void hookcost_seen_get(struct hookcost_uffd *u, struct gdrc_ctx *ctx,
			      struct hookcost_seen *s)
{
	memset(s, 0, sizeof(*s));
	if (u) {
		s->unmap = atomic_load(&u->n_unmap);
		s->remove = atomic_load(&u->n_remove);
		s->remap = atomic_load(&u->n_remap);
	}
	if (ctx && gdrc_stat_get(ctx, GDRC_STAT_MEM_EVENTS, &s->posts))
		s->posts = 0;
}

/* Describe what arrived since `before`; waits a while for slow news. */
static void hookcost_seen_describe(struct hookcost_uffd *u,
				   struct gdrc_ctx *ctx,
				   const struct hookcost_seen *before,
				   char *out, size_t len)
{
	uint64_t t_end = hookcost_now() + HOOKCOST_WAIT_MS * 1000000ULL;
	struct hookcost_seen now;

	for (;;) {
		hookcost_seen_get(u, ctx, &now);
		if (now.unmap != before->unmap ||
		    now.remove != before->remove ||
		    now.remap != before->remap || now.posts != before->posts ||
		    hookcost_now() >= t_end)
			break;
		hookcost_sleep_us(100);
	}
	/* Let a second event of the same call come in. */
	hookcost_sleep_us(1000);
	hookcost_seen_get(u, ctx, &now);
	out[0] = '\0';
	if (u) {
		snprintf(out, len, "%s%s%s",
			 now.unmap != before->unmap ? "UNMAP " : "",
			 now.remove != before->remove ? "REMOVE " : "",
			 now.remap != before->remap ? "REMAP " : "");
		if (out[0])
			out[strlen(out) - 1] = '\0';
	} else if (now.posts != before->posts) {
		uint64_t n = now.posts - before->posts;

		snprintf(out, len, "seen (%llu post%s)",
			 (unsigned long long)n, n == 1 ? "" : "s");
	}
	if (!out[0])
		snprintf(out, len, "NOT SEEN");
}

/*
 * Perform op once on fresh memory; with u, register that memory first
 * (in mode) and populate it (through the reader if MISSING); report what
 * u or ctx saw into out.
 */
static void hookcost_cover(enum hookcost_op op, struct hookcost_uffd *u,
			   uint64_t mode, struct gdrc_ctx *ctx, char *out,
			   size_t len)
{
	size_t pg = hookcost_page, rlen = pg;
	void *p = NULL, *target = NULL, *brk0 = NULL;
	struct hookcost_seen before;
	uintptr_t pad = 0;
	char *blk = NULL;
	int rc = 0;

	switch (op) {
	case HC_OP_BRK:
		brk0 = sbrk(0);
		pad = hookcost_up((uintptr_t)brk0) - (uintptr_t)brk0;
		if (sbrk((intptr_t)(pad + pg)) == (void *)-1) {
			snprintf(out, len, "sbrk failed: %s", strerror(errno));
			return;
		}
		p = (char *)brk0 + pad;
		break;
	case HC_OP_FREE:
		blk = malloc(HOOKCOST_BLOCK);
		if (!blk || !hookcost_is_mmapped((uintptr_t)blk)) {
			snprintf(out, len, "n/a (block not mmapped)");
			free(blk);
			return;
		}
		p = (void *)hookcost_down((uintptr_t)blk);
		rlen = hookcost_up((uintptr_t)blk + HOOKCOST_BLOCK) -
		       (uintptr_t)p;
		break;
	case HC_OP_MREMAP_SHRINK:
		rlen = 2 * pg;
		/* fall through */
	default:
		p = hookcost_libc_mmap(rlen);
		if (p == MAP_FAILED)
			hookcost_die("mmap");
		break;
	}
	if (op == HC_OP_MREMAP_MOVE) {
		target = hookcost_libc_mmap(pg);
		if (target == MAP_FAILED)
			hookcost_die("mmap");
	}
	if (u && hookcost_uffd_register(u, p, rlen, mode)) {
		snprintf(out, len, "REGISTER: %s", hookcost_errno_name(errno));
		rc = -1; /* nothing was done: clean up all */
		goto cleanup;
	}
	for (size_t off = 0; off < rlen && op != HC_OP_FREE; off += pg)
		hookcost_touch((char *)p + off);
	if (op == HC_OP_FREE)
		blk[0] = 1;

	/*
	 * The reader counts an event just after the read() that let its
	 * munmap return: let the last call's cleanup land first.
	 */
	if (u)
		hookcost_sleep_us(2000);
	hookcost_seen_get(u, ctx, &before);
	switch (op) {
	case HC_OP_MUNMAP:
		rc = munmap(p, pg);
		break;
	case HC_OP_RAW_MUNMAP:
		rc = hookcost_raw_munmap(p, pg);
		break;
	case HC_OP_DONTNEED:
		rc = madvise(p, pg, MADV_DONTNEED);
		break;
	case HC_OP_RAW_DONTNEED:
		rc = (int)syscall(SYS_madvise, p, pg, MADV_DONTNEED);
		break;
	case HC_OP_MADV_FREE:
		rc = madvise(p, pg, MADV_FREE);
		break;
	case HC_OP_MREMAP_MOVE:
		rc = mremap(p, pg, pg, MREMAP_MAYMOVE | MREMAP_FIXED,
			    target) == MAP_FAILED;
		break;
	case HC_OP_MREMAP_SHRINK:
		rc = mremap(p, rlen, pg, 0) == MAP_FAILED;
		break;
	case HC_OP_MAP_FIXED:
		rc = mmap(p, pg, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			  0) == MAP_FAILED;
		break;
	case HC_OP_BRK:
		rc = sbrk(-(intptr_t)pg) == (void *)-1;
		break;
	case HC_OP_FREE:
		free(blk);
		blk = NULL;
		break;
	default:
		break;
	}
	if (rc) {
		snprintf(out, len, "call failed: %s", strerror(errno));
		goto cleanup;
	}
	hookcost_seen_describe(u, ctx, &before, out, len);

cleanup:
	switch (op) {
	case HC_OP_MUNMAP:
	case HC_OP_RAW_MUNMAP:
		if (rc)
			munmap(p, rlen);
		break;
	case HC_OP_MREMAP_MOVE:
		munmap(target, pg);
		if (rc)
			munmap(p, pg);
		break;
	case HC_OP_MREMAP_SHRINK:
		munmap(p, rc ? rlen : pg);
		break;
	case HC_OP_BRK:
		if (u && rc)
			hookcost_uffd_unregister(u, p, pg);
		if (rc)
			sbrk(-(intptr_t)pg);
		if (pad)
			sbrk(-(intptr_t)pad);
		break;
	case HC_OP_FREE:
		free(blk);
		break;
	default:
		munmap(p, rlen);
		break;
	}
}

/* ====================================================================
 * userfaultfd: availability and what an unprivileged process may do
 * ==================================================================== */

static int hookcost_read_int(const char *path)
{
	FILE *f = fopen(path, "r");
	int v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%d", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* errno of each way to open a uffd, 0 where it worked. */
static void hookcost_try_opens(int res[3])
{
	int fd;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	res[0] = fd < 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
	res[1] = fd < 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
	fd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	res[2] = fd < 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
}

/* As root, a child that drops to nobody tries; otherwise we do. */
static void hookcost_probe_unprivileged(void)
{
	int res[3] = { -1, -1, -1 }, pipefd[2], status;
	pid_t pid;

	hookcost_uinfo.sysctl =
		hookcost_read_int("/proc/sys/vm/unprivileged_userfaultfd");
	if (geteuid() != 0) {
		hookcost_try_opens(res);
	} else {
		if (pipe(pipefd))
			return;
		pid = fork();
		if (pid < 0) {
			close(pipefd[0]);
			close(pipefd[1]);
			return;
		}
		if (pid == 0) {
			close(pipefd[0]);
			if (setgroups(0, NULL) || setgid(HOOKCOST_NOBODY) ||
			    setuid(HOOKCOST_NOBODY))
				_exit(3);
			hookcost_try_opens(res);
			_exit(write(pipefd[1], res, sizeof(res)) ==
			      sizeof(res) ? 0 : 4);
		}
		close(pipefd[1]);
		if (read(pipefd[0], res, sizeof(res)) != sizeof(res))
			res[0] = res[1] = res[2] = -1;
		close(pipefd[0]);
		waitpid(pid, &status, 0);
	}
	hookcost_uinfo.probed = res[0] >= 0;
	hookcost_uinfo.nobody_plain = res[0];
	hookcost_uinfo.nobody_umo = res[1];
	hookcost_uinfo.nobody_dev = res[2];
}

static const char *hookcost_errname(int e)
{
	static char buf[4][64];
	static int next;
	char *b = buf[next++ % 4];

	if (e == 0)
		return "works";
	if (e < 0)
		return "not tried";
	snprintf(b, 64, "fails (%s)", hookcost_errno_name(e));
	return b;
}

/* ====================================================================
 * userfaultfd: what breaks
 * ==================================================================== */

/* A kernel access (GUP, copy_to_user) to an unpopulated registered page. */
static void hookcost_kernel_access(struct hookcost_uffd *u, const char *key,
				   const char *what, uint64_t mode)
{
	uint64_t f0 = atomic_load(&u->n_fault);
	int zero, e_pop, e_read;
	ssize_t n;
	void *p;

	p = hookcost_raw_mmap(2 * hookcost_page);
	if (p == MAP_FAILED)
		hookcost_die("mmap");
	if (hookcost_uffd_register(u, p, 2 * hookcost_page, mode)) {
		hookcost_check(key, 0, "%s: REGISTER failed: %s", what,
			       strerror(errno));
		hookcost_raw_munmap(p, 2 * hookcost_page);
		return;
	}
	e_pop = madvise(p, hookcost_page, MADV_POPULATE_WRITE) ? errno : 0;
	zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	n = zero < 0 ? -1 :
		read(zero, (char *)p + hookcost_page, hookcost_page);
	e_read = n < 0 ? errno : 0;
	if (zero >= 0)
		close(zero);
	hookcost_check(key, -1,
		       "%s: MADV_POPULATE_WRITE (GUP, as ibv_reg_mr "
		       "pins) %s; read() from /dev/zero into it %s; %llu "
		       "faults to the reader",
		       what, hookcost_errname(e_pop), hookcost_errname(e_read),
		       (unsigned long long)(hookcost_uffd_wait(&u->n_fault,
				f0 + !e_pop + !e_read) - f0));
	hookcost_raw_munmap(p, 2 * hookcost_page);
}

static void hookcost_breakage(struct hookcost_uffd *u)
{
	char path[] = "/tmp/gdrc-hookcost-XXXXXX", how[96];
	struct hookcost_uffd umo;
	int fd, fd2, e, v0, v1;
	void *p;

	/* A private file mapping (not anonymous, shmem nor hugetlbfs). */
	fd = mkstemp(path);
	if (fd >= 0) {
		unlink(path);
		if (!ftruncate(fd, (off_t)hookcost_page)) {
			p = mmap(NULL, hookcost_page, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE, fd, 0);
			if (p != MAP_FAILED) {
				e = hookcost_uffd_register(u, p, hookcost_page,
					UFFDIO_REGISTER_MODE_MISSING) ?
					errno : 0;
				hookcost_check("uffd_file_mapping", -1,
					       "REGISTER of a MAP_PRIVATE "
					       "mapping of a regular file in "
					       "/tmp: %s",
					       hookcost_errname(e));
				munmap(p, hookcost_page);
			}
		}
		close(fd);
	}

	/* A range another userfaultfd already registered. */
	p = hookcost_raw_mmap(hookcost_page);
	if (p == MAP_FAILED)
		hookcost_die("mmap");
	fd2 = hookcost_uffd_create(hookcost_uinfo.flags, how, sizeof(how));
	if (fd2 >= 0 && !hookcost_uffd_api(fd2) &&
	    !hookcost_uffd_register(u, p, hookcost_page,
				    UFFDIO_REGISTER_MODE_MISSING)) {
		struct uffdio_register reg = {
			.range = { .start = (uintptr_t)p,
				   .len = hookcost_page },
			.mode = UFFDIO_REGISTER_MODE_MISSING,
		};

		e = ioctl(fd2, UFFDIO_REGISTER, &reg) ? errno : 0;
		hookcost_check("uffd_second_owner", -1,
			       "REGISTER of a range another uffd holds "
			       "(a second library, CRIU, a VM's postcopy): %s",
			       hookcost_errname(e));
	}
	if (fd2 >= 0)
		close(fd2);
	hookcost_raw_munmap(p, hookcost_page);

	/* VMA splitting: every registered piece becomes a mapping. */
	p = hookcost_raw_mmap(64 * hookcost_page);
	if (p == MAP_FAILED)
		hookcost_die("mmap");
	v0 = hookcost_vma_count();
	for (size_t i = 0; i < 64; i += 2)
		if (hookcost_uffd_register(u, (char *)p + i * hookcost_page,
					   hookcost_page,
					   UFFDIO_REGISTER_MODE_MISSING))
			hookcost_die("UFFDIO_REGISTER");
	v1 = hookcost_vma_count();
	hookcost_check("uffd_vma_split", -1,
		       "REGISTER of 32 separate pages of one 64-page mapping: "
		       "%d -> %d mappings (vm.max_map_count %d)",
		       v0, v1, hookcost_read_int("/proc/sys/vm/max_map_count"));
	hookcost_uffd_unregister(u, p, 64 * hookcost_page);
	hookcost_raw_munmap(p, 64 * hookcost_page);

	/* Kernel accesses: full uffd, then UFFD_USER_MODE_ONLY. */
	hookcost_kernel_access(u, "uffd_kernel_access_main",
			       hookcost_uinfo.flags & UFFD_USER_MODE_ONLY ?
				       "main uffd (USER_MODE_ONLY), MISSING" :
				       "main uffd (all faults), MISSING",
			       UFFDIO_REGISTER_MODE_MISSING);
	if (hookcost_uffd_open(&umo, UFFD_USER_MODE_ONLY, how, sizeof(how))) {
		hookcost_check("uffd_kernel_access_umo", -1,
			       "UFFD_USER_MODE_ONLY uffd: cannot open (%s)",
			       strerror(errno));
		return;
	}
	hookcost_kernel_access(&umo, "uffd_kernel_access_umo",
			       "UFFD_USER_MODE_ONLY uffd, MISSING",
			       UFFDIO_REGISTER_MODE_MISSING);
	hookcost_kernel_access(&umo, "uffd_kernel_access_umo_wp",
			       "UFFD_USER_MODE_ONLY uffd, WP-only",
			       UFFDIO_REGISTER_MODE_WP);
	hookcost_uffd_close(&umo);
}

/* ====================================================================
 * The sections
 * ==================================================================== */

/* Back the guest's memory and settle the allocator before timing. */
static void hookcost_warm(void)
{
	size_t len = 64UL << 20;
	char *p = hookcost_raw_mmap(len);

	if (p == MAP_FAILED)
		hookcost_die("mmap");
	for (size_t off = 0; off < len; off += hookcost_page)
		p[off] = 1;
	hookcost_raw_munmap(p, len);
}

static void hookcost_baseline(void)
{
	struct hookcost_cycle raw = { 0 }, libc = { .libc = 1 };
	static const struct hookcost_out raw_out[] = {
		{ HC_V_TOTAL, "raw_pair",
		  "syscall() mmap + touch + munmap, 1 page", NULL },
	};
	static const struct hookcost_out raw_steps[] = {
		{ HC_V_MMAP, "raw_mmap", "  step: mmap", NULL },
		{ HC_V_TOUCH, "raw_touch", "  step: first write (page fault)",
		  NULL },
		{ HC_V_UNMAP, "raw_munmap",
		  "  step: munmap of the touched page", NULL },
	};
	static const struct hookcost_out libc_out[] = {
		{ HC_V_TOTAL, "libc_pair", "glibc mmap + touch + munmap",
		  "raw_pair" },
	};
	static const struct hookcost_out libc_steps[] = {
		{ HC_V_UNMAP, "libc_munmap",
		  "  step: glibc munmap of the touched page", "raw_munmap" },
	};
	static const struct hookcost_out hole_raw[] = {
		{ 0, "raw_hole", "syscall() munmap of an empty range", NULL },
	};
	static const struct hookcost_out hole_libc[] = {
		{ 0, "libc_hole", "glibc munmap of an empty range",
		  "raw_hole" },
	};
	static const int no = 0, yes = 1;
	void *blk;

	hookcost_section(1, "1. baseline: no hooks, no userfaultfd");
	hookcost_run2(hookcost_cycle_loop, &raw, raw_out, 1,
		      hookcost_cycle_loop, &libc, libc_out, 1);
	raw.timed = 1;
	libc.timed = 1;
	hookcost_run2(hookcost_cycle_loop, &raw, raw_steps, 3,
		      hookcost_cycle_loop, &libc, libc_steps, 1);
	hookcost_run2(hookcost_hole_loop, (void *)&no, hole_raw, 1,
		      hookcost_hole_loop, (void *)&yes, hole_libc, 1);

	blk = malloc(HOOKCOST_BLOCK);
	if (!blk)
		hookcost_die("malloc");
	hookcost_mmapped_blocks = hookcost_is_mmapped((uintptr_t)blk);
#ifdef HOOKCOST_ASAN
	/* ASan's malloc: the free() rows do not measure glibc's. */
	hookcost_check("malloc_mmapped", hookcost_mmapped_blocks ? 1 : -1,
#else
	hookcost_check("malloc_mmapped", hookcost_mmapped_blocks,
#endif
		       "malloc(1 MiB) is served by mmap (M_MMAP_THRESHOLD "
		       "fixed at 128 KiB): %s",
		       hookcost_mmapped_blocks ? "yes" :
						 "NO: free() rows are moot");
	free(blk);
}

static void hookcost_userfaultfd(void)
{
	static const char *const title =
		"3. userfaultfd: EVENT_UNMAP/REMOVE/REMAP, MISSING "
		"registration, reader thread";
	struct hookcost_cycle raw = { 0 };
	struct hookcost_cycle cyc = { .mode = UFFDIO_REGISTER_MODE_MISSING };
	static const struct hookcost_out ref_out[] = {
		{ HC_V_TOTAL, "u_raw_pair",
		  "ref: syscall() mmap + touch + munmap, no uffd", NULL },
	};
	static const struct hookcost_out cyc_out[] = {
		{ HC_V_TOTAL, "uffd_cycle",
		  "mmap + REGISTER + touch + munmap (ZEROPAGE)",
		  "u_raw_pair" },
	};
	static const struct hookcost_out ref_steps[] = {
		{ HC_V_TOUCH, "u_raw_touch",
		  "  ref step: first write, no uffd", NULL },
		{ HC_V_UNMAP, "u_raw_munmap",
		  "  ref step: munmap of the touched page, no uffd", NULL },
	};
	static const struct hookcost_out cyc_steps[] = {
		{ HC_V_REG, "uffd_register",
		  "  step: UFFDIO_REGISTER of a fresh page", NULL },
		{ HC_V_TOUCH, "uffd_touch",
		  "  step: first write, reader answers ZEROPAGE",
		  "u_raw_touch" },
		{ HC_V_UNMAP, "uffd_munmap",
		  "  step: munmap, waits for reader to read UNMAP",
		  "u_raw_munmap" },
	};
	static const struct hookcost_out copy_steps[] = {
		{ HC_V_TOUCH, "uffd_touch_copy",
		  "  step: first write, reader answers UFFDIO_COPY",
		  "u_raw_touch" },
	};
	static const struct hookcost_out spin_out[] = {
		{ HC_V_TOTAL, "uffd_cycle_spin",
		  "same cycle, reader busy-polls (burns a CPU)",
		  "u_raw_pair" },
	};
	static const struct hookcost_out spin_steps[] = {
		{ HC_V_TOUCH, "uffd_touch_spin",
		  "  step: first write, busy-polling reader", "u_raw_touch" },
		{ HC_V_UNMAP, "uffd_munmap_spin",
		  "  step: munmap, busy-polling reader", "u_raw_munmap" },
	};
	static const struct hookcost_out wp_out[] = {
		{ HC_V_TOTAL, "uffd_wp_cycle",
		  "mmap + REGISTER(WP only) + touch + munmap", "u_raw_pair" },
	};
	static const struct hookcost_out wp_steps[] = {
		{ HC_V_TOUCH, "uffd_wp_touch",
		  "  step: first write, WP-only: kernel fills it",
		  "u_raw_touch" },
		{ HC_V_UNMAP, "uffd_wp_munmap",
		  "  step: munmap, WP-only registration (UNMAP)",
		  "u_raw_munmap" },
	};
	static const struct hookcost_out ru_out[] = {
		{ HC_V_REG, "uffd_register_pop",
		  "UFFDIO_REGISTER of a populated page (cache miss)", NULL },
		{ HC_V_UNREG, "uffd_unregister",
		  "UFFDIO_UNREGISTER of it (cache eviction)", NULL },
	};
	static const struct hookcost_out mref_out[] = {
		{ HC_V_PAIR, "u_malloc_pair",
		  "ref: malloc(1 MiB) + free, not registered", NULL },
		{ HC_V_FREE, "u_free", "  ref step: free() alone", NULL },
	};
	static const struct hookcost_out malloc_out[] = {
		{ HC_V_PAIR, "uffd_malloc_pair",
		  "malloc(1 MiB) + free, block registered", "u_malloc_pair" },
		{ HC_V_MREG, "uffd_malloc_register",
		  "  step: REGISTER of the 1 MiB block", NULL },
		{ HC_V_FREE, "uffd_free",
		  "  step: free() alone (UNMAP event)", "u_free" },
	};
	struct hookcost_uffd u;
	uint64_t un0, fa0, n;
	char how[96];

	hookcost_probe_unprivileged();
	hookcost_section(3, title);
	if (hookcost_uffd_open(&u, 0, how, sizeof(how))) {
		hookcost_uinfo.err = errno;
		if (geteuid() != 0 && errno == EPERM &&
		    !hookcost_uffd_open(&u, UFFD_USER_MODE_ONLY, how,
					sizeof(how))) {
			hookcost_uinfo.err = 0;
			hookcost_uinfo.flags = UFFD_USER_MODE_ONLY;
		} else {
			snprintf(hookcost_uinfo.how, sizeof(hookcost_uinfo.how),
				 "unavailable: %s (%s)",
				 hookcost_errno_name(hookcost_uinfo.err),
				 strerror(hookcost_uinfo.err));
			hookcost_skip("uffd_cycle", "userfaultfd rows",
				      "%s", hookcost_uinfo.how);
			for (int op = 0; op < HC_OP_COUNT; op++) {
				snprintf(hookcost_cov[op][1], 40, "n/a");
				snprintf(hookcost_cov[op][2], 40, "n/a");
			}
			return;
		}
	}
	hookcost_uinfo.available = 1;
	snprintf(hookcost_uinfo.how, sizeof(hookcost_uinfo.how), "%s", how);
	cyc.u = &u;

	/* The full cycle, then its steps; every munmap must be seen. */
	un0 = atomic_load(&u.n_unmap);
	fa0 = atomic_load(&u.n_fault);
	n = hookcost_run2(hookcost_cycle_loop, &raw, ref_out, 1,
			  hookcost_cycle_loop, &cyc, cyc_out, 1);
	raw.timed = 1;
	cyc.timed = 1;
	n += hookcost_run2(hookcost_cycle_loop, &raw, ref_steps, 2,
			   hookcost_cycle_loop, &cyc, cyc_steps, 3);
	hookcost_uffd_verify(&u, "uffd_cycle_events", un0, fa0, n, n);

	atomic_store(&u.use_copy, 1);
	un0 = atomic_load(&u.n_unmap);
	fa0 = atomic_load(&u.n_fault);
	n = hookcost_run(hookcost_cycle_loop, &cyc, copy_steps, 1);
	hookcost_uffd_verify(&u, "uffd_copy_events", un0, fa0, n, n);
	atomic_store(&u.use_copy, 0);

	atomic_store(&u.spin, 1);
	un0 = atomic_load(&u.n_unmap);
	fa0 = atomic_load(&u.n_fault);
	cyc.timed = 0;
	n = hookcost_run(hookcost_cycle_loop, &cyc, spin_out, 1);
	cyc.timed = 1;
	n += hookcost_run(hookcost_cycle_loop, &cyc, spin_steps, 2);
	hookcost_uffd_verify(&u, "uffd_spin_events", un0, fa0, n, n);
	/* The reader goes back to poll() after its next empty read. */
	atomic_store(&u.spin, 0);

	un0 = atomic_load(&u.n_unmap);
	fa0 = atomic_load(&u.n_fault);
	cyc.mode = UFFDIO_REGISTER_MODE_WP;
	cyc.timed = 0;
	n = hookcost_run(hookcost_cycle_loop, &cyc, wp_out, 1);
	cyc.timed = 1;
	n += hookcost_run(hookcost_cycle_loop, &cyc, wp_steps, 2);
	hookcost_uffd_verify(&u, "uffd_wp_events", un0, fa0, n, 0);

	un0 = atomic_load(&u.n_unmap);
	fa0 = atomic_load(&u.n_fault);
	hookcost_run(hookcost_regunreg_loop, &u, ru_out, 2);
	hookcost_uffd_verify(&u, "uffd_unregister_events", un0, fa0, 0, 0);

	un0 = atomic_load(&u.n_unmap);
	fa0 = atomic_load(&u.n_fault);
	if (hookcost_mmapped_blocks) {
		n = hookcost_run2(hookcost_malloc_loop, NULL, mref_out, 2,
				  hookcost_malloc_loop, &u, malloc_out, 3);
		hookcost_uffd_verify(&u, "uffd_free_events", un0, fa0, n, 0);
	} else {
		hookcost_skip("uffd_malloc_pair",
			      "free() of a registered block",
			      "malloc(1 MiB) is not an mmap of its own");
	}

	for (int op = 0; op < HC_OP_COUNT; op++) {
		char *cov_missing = hookcost_cov[op][1];
		char *cov_wp = hookcost_cov[op][2];

		hookcost_cover((enum hookcost_op)op, &u,
			       UFFDIO_REGISTER_MODE_MISSING, NULL, cov_missing,
			       sizeof(hookcost_cov[op][1]));
		hookcost_cover((enum hookcost_op)op, &u,
			       UFFDIO_REGISTER_MODE_WP, NULL, cov_wp,
			       sizeof(hookcost_cov[op][2]));
	}
	hookcost_breakage(&u);
	hookcost_uffd_close(&u);
}

static void hookcost_hooks(void)
{
	struct hookcost_cycle raw = { 0 }, cyc = { .libc = 1 };
	static const struct hookcost_out nohook_out[] = {
		{ HC_V_PAIR, "malloc_pair",
		  "malloc(1 MiB) + free, before gdrc_init", NULL },
		{ HC_V_FREE, "free", "  step: free() alone, no hooks", NULL },
	};
	static const struct hookcost_out ref_out[] = {
		{ HC_V_TOTAL, "h_raw_pair",
		  "ref: syscall() mmap+touch+munmap (not hooked)", NULL },
	};
	static const struct hookcost_out ctx_out[] = {
		{ HC_V_TOTAL, "hooks_pair_ctx",
		  "glibc mmap+touch+munmap, hooks, context, empty",
		  "h_raw_pair" },
	};
	static const struct hookcost_out reg_out[] = {
		{ HC_V_TOTAL, "hooks_pair_reg",
		  "glibc mmap+touch+munmap, hooks, 1 cached reg",
		  "h_raw_pair" },
	};
	static const struct hookcost_out ref_steps[] = {
		{ HC_V_UNMAP, "h_raw_munmap",
		  "  ref step: syscall() munmap (not hooked)", NULL },
	};
	static const struct hookcost_out reg_steps[] = {
		{ HC_V_UNMAP, "hooks_munmap",
		  "  step: hooked munmap (syscall + post to queue)",
		  "h_raw_munmap" },
	};
	static const struct hookcost_out hole_raw[] = {
		{ 0, "h_raw_hole", "ref: syscall() munmap of an empty range",
		  NULL },
	};
	static const struct hookcost_out hole_hooked[] = {
		{ 0, "hooks_hole",
		  "hooked munmap of an empty range: the hook alone",
		  "h_raw_hole" },
	};
	static const int no = 0, yes = 1;
	static const struct hookcost_out drain_out[] = {
		{ HC_V_TOTAL, "hooks_pair_drain",
		  "  same + gdrc_mr_get/put hit (drains queue)",
		  "hooks_pair_reg" },
	};
	static const struct hookcost_out hit_out[] = {
		{ 0, "get_hit", "gdrc_mr_get + put hit, queue empty", NULL },
	};
	static const struct hookcost_out malloc_out[] = {
		{ HC_V_PAIR, "hooks_malloc_pair",
		  "malloc(1 MiB) + free, hooks, 1 cached reg", "malloc_pair" },
		{ HC_V_FREE, "hooks_free", "  step: free() alone, hooked",
		  "free" },
	};
	static const struct hookcost_out ref2_out[] = {
		{ HC_V_TOTAL, "h_raw_pair2",
		  "ref: syscall() mmap+touch+munmap, after gdrc_fini", NULL },
	};
	static const struct hookcost_out nosub_out[] = {
		{ HC_V_TOTAL, "hooks_pair_nosub",
		  "glibc mmap+touch+munmap, hooks, no context",
		  "h_raw_pair2" },
	};
	struct hookcost_hit hit;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	uint64_t ev0, ev1, n, regions = 0, inv = 0;
	gdrc_status_t st;
	void *page;
	int active;

	hookcost_section(2, "2. libgdrcache hooks: glibc's munmap & co. "
			    "patched");
	/* free() without hooks: the last thing before the patches go in. */
	hookcost_run(hookcost_malloc_loop, NULL, nohook_out, 2);

	st = gdrc_init(NULL, &ctx);
	if (st) {
		fprintf(stderr, "gdrc-hookcost: gdrc_init: %s\n",
			gdrc_status_str(st));
		exit(1);
	}
	/* Are the hooks really on (GDRC_MEM_HOOKS=none turns them off)? */
	gdrc_stat_get(ctx, GDRC_STAT_MEM_EVENTS, &ev0);
	page = hookcost_libc_mmap(hookcost_page);
	if (page == MAP_FAILED)
		hookcost_die("mmap");
	munmap(page, hookcost_page);
	gdrc_stat_get(ctx, GDRC_STAT_MEM_EVENTS, &ev1);
	active = ev1 > ev0;
	hookcost_check("hooks_active", active ? 1 : -1,
		       "a glibc munmap after gdrc_init reached the context: %s",
		       active ? "yes" : "NO (hooks off: rows below measure "
					"plain glibc)");

	/* free() again, hooked, while the address space is as it was. */
	gdrc_stat_get(ctx, GDRC_STAT_MEM_EVENTS, &ev0);
	n = hookcost_run(hookcost_malloc_loop, NULL, malloc_out, 2);
	gdrc_stat_get(ctx, GDRC_STAT_MEM_EVENTS, &ev1);
	if (active && hookcost_mmapped_blocks)
		hookcost_check("hooks_free_events", ev1 - ev0 == n,
			       "%llu free() of 1 MiB blocks -> %llu events",
			       (unsigned long long)n,
			       (unsigned long long)(ev1 - ev0));

	gdrc_stat_get(ctx, GDRC_STAT_MEM_EVENTS, &ev0);
	n = hookcost_run2(hookcost_cycle_loop, &raw, ref_out, 1,
			  hookcost_cycle_loop, &cyc, ctx_out, 1);

	/* One cached registration on a page of its own. */
	page = hookcost_libc_mmap(hookcost_page);
	if (page == MAP_FAILED)
		hookcost_die("mmap");
	hookcost_touch(page);
	st = gdrc_mr_get(ctx, (char *)page + 256, 64, GDRC_ACCESS_LOCAL_WRITE,
			 0, &mr);
	if (st) {
		fprintf(stderr, "gdrc-hookcost: gdrc_mr_get: %s\n",
			gdrc_status_str(st));
		exit(1);
	}
	gdrc_mr_put(ctx, mr);
	n += hookcost_run(hookcost_cycle_loop, &cyc, reg_out, 1);
	raw.timed = 1;
	cyc.timed = 1;
	n += hookcost_run2(hookcost_cycle_loop, &raw, ref_steps, 1,
			   hookcost_cycle_loop, &cyc, reg_steps, 1);
	n += hookcost_run2(hookcost_hole_loop, (void *)&no, hole_raw, 1,
			   hookcost_hole_loop, (void *)&yes, hole_hooked, 1);
	gdrc_stat_get(ctx, GDRC_STAT_MEM_EVENTS, &ev1);
	if (active)
		hookcost_check("hooks_events", ev1 - ev0 == n,
			       "%llu glibc munmaps -> %llu events posted to "
			       "the context's queue (raw ones: none)",
			       (unsigned long long)n,
			       (unsigned long long)(ev1 - ev0));

	cyc.timed = 0;
	cyc.ctx = ctx;
	cyc.hit = (char *)page + 256;
	hookcost_run(hookcost_cycle_loop, &cyc, drain_out, 1);
	cyc.ctx = NULL;
	hit.ctx = ctx;
	hit.addr = (char *)page + 256;
	hookcost_run(hookcost_hit_loop, &hit, hit_out, 1);
	gdrc_stat_get(ctx, GDRC_STAT_REGIONS, &regions);
	gdrc_stat_get(ctx, GDRC_STAT_INV_HOST_HOOK, &inv);
	hookcost_check("hooks_registration_kept", regions == 1 && inv == 0,
		       "the cached registration survived the unrelated "
		       "unmaps: %llu cached, %llu invalidated by hooks",
		       (unsigned long long)regions, (unsigned long long)inv);

	for (int op = 0; op < HC_OP_COUNT; op++)
		hookcost_cover((enum hookcost_op)op, NULL, 0, ctx,
			       hookcost_cov[op][0],
			       sizeof(hookcost_cov[op][0]));

	gdrc_fini(ctx);
	munmap(page, hookcost_page);
	raw.timed = 0;
	hookcost_run2(hookcost_cycle_loop, &raw, ref2_out, 1,
		      hookcost_cycle_loop, &cyc, nosub_out, 1);
}

/* ====================================================================
 * Output
 * ==================================================================== */

static void hookcost_machine(char *cpu, size_t len, struct utsname *un)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256], *colon;

	snprintf(cpu, len, "unknown");
	uname(un);
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "model name", 10))
			continue;
		colon = strchr(line, ':');
		if (colon) {
			snprintf(cpu, len, "%s", colon + 2);
			cpu[strcspn(cpu, "\n")] = '\0';
		}
		break;
	}
	fclose(f);
}

static void hookcost_print(void)
{
	char cpu[128], delta[32];
	struct utsname un;

	hookcost_machine(cpu, sizeof(cpu), &un);
	printf("gdrc-hookcost: %s, %ld CPUs, Linux %s, glibc %s, "
	       "libgdrcache %s, uid %d\n",
	       cpu, sysconf(_SC_NPROCESSORS_ONLN), un.release,
	       gnu_get_libc_version(), gdrc_version_string(), (int)geteuid());
	printf("%u iterations x %d repetitions (+%u warm-up); ns per "
	       "operation%s\n\n",
	       hookcost_iters, HOOKCOST_REPS, hookcost_iters / 10,
	       hookcost_quick ? " (--quick)" : "");
	printf("%-52s %9s %9s %9s  %s\n", "", "best", "median", "+ns",
	       "vs");
	/* Sections ran in the order 1, 3, 2; print them 1, 2, 3. */
	for (int k = 0; k < 3 * hookcost_nrows; k++) {
		const struct hookcost_row *r =
			&hookcost_rows[k % hookcost_nrows];
		const struct hookcost_row *ref = hookcost_row_find(r->ref);

		if (r->sec != k / hookcost_nrows + 1)
			continue;
		if (!r->key) {
			printf("%s\n", r->label);
			continue;
		}
		if (r->skipped) {
			printf("%-52s skipped: %s\n", r->label, r->why);
			continue;
		}
		delta[0] = '\0';
		if (ref)
			snprintf(delta, sizeof(delta), "%+9.0f",
				 r->best - ref->best);
		printf("%-52s %9.0f %9.0f %9s  %s\n", r->label, r->best,
		       r->median, delta, ref ? ref->key : "");
	}

	printf("\ncoverage: one call on a populated range, "
	       "what each mechanism saw\n");
	printf("%-31s %-17s %-19s %s\n", "operation", "libgdrcache hooks",
	       "uffd, MISSING reg.", "uffd, WP-only reg.");
	for (int op = 0; op < HC_OP_COUNT; op++)
		printf("%-31s %-17s %-19s %s\n", hookcost_op_names[op],
		       hookcost_cov[op][0], hookcost_cov[op][1],
		       hookcost_cov[op][2]);

	printf("\nuserfaultfd: %s; vm.unprivileged_userfaultfd = %d\n",
	       hookcost_uinfo.how,
	       hookcost_uinfo.sysctl);
	if (hookcost_uinfo.probed)
		printf("as uid %d: userfaultfd(0) %s, "
		       "userfaultfd(UFFD_USER_MODE_ONLY) %s, "
		       "open(/dev/userfaultfd) %s\n",
		       geteuid() ? (int)geteuid() : HOOKCOST_NOBODY,
		       hookcost_errname(hookcost_uinfo.nobody_plain),
		       hookcost_errname(hookcost_uinfo.nobody_umo),
		       hookcost_errname(hookcost_uinfo.nobody_dev));

	printf("\nchecks\n");
	for (int i = 0; i < hookcost_nchecks; i++) {
		const struct hookcost_check *c = &hookcost_checks[i];

		printf("  %-4s %-26s %s\n",
		       c->ok > 0 ? "ok" : c->ok == 0 ? "FAIL" : "info", c->key,
		       c->detail);
	}
}

static void hookcost_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static int hookcost_json(const char *path)
{
	FILE *f = fopen(path, "w");
	char cpu[128];
	struct utsname un;
	int first = 1;

	if (!f) {
		fprintf(stderr, "gdrc-hookcost: %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	hookcost_machine(cpu, sizeof(cpu), &un);
	fprintf(f, "{\"machine\": {\"cpu\": ");
	hookcost_json_str(f, cpu);
	fprintf(f, ", \"cpus\": %ld, \"kernel\": ",
		sysconf(_SC_NPROCESSORS_ONLN));
	hookcost_json_str(f, un.release);
	fprintf(f, ", \"glibc\": ");
	hookcost_json_str(f, gnu_get_libc_version());
	fprintf(f, ", \"libgdrcache\": ");
	hookcost_json_str(f, gdrc_version_string());
	fprintf(f, ", \"uid\": %d},\n \"quick\": %s, \"iterations\": %u,\n",
		(int)geteuid(), hookcost_quick ? "true" : "false",
		hookcost_iters);
	fprintf(f, " \"uffd\": {\"available\": %s, \"how\": ",
		hookcost_uinfo.available ? "true" : "false");
	hookcost_json_str(f, hookcost_uinfo.how);
	fprintf(f, ", \"errno\": %d, \"unprivileged_sysctl\": %d, "
		"\"unprivileged\": {\"plain\": ",
		hookcost_uinfo.err, hookcost_uinfo.sysctl);
	hookcost_json_str(f, hookcost_errname(hookcost_uinfo.nobody_plain));
	fprintf(f, ", \"user_mode_only\": ");
	hookcost_json_str(f, hookcost_errname(hookcost_uinfo.nobody_umo));
	fprintf(f, ", \"dev_userfaultfd\": ");
	hookcost_json_str(f, hookcost_errname(hookcost_uinfo.nobody_dev));
	fprintf(f, "}},\n \"rows\": [");
	for (int i = 0; i < hookcost_nrows; i++) {
		const struct hookcost_row *r = &hookcost_rows[i];
		const struct hookcost_row *ref = hookcost_row_find(r->ref);

		if (!r->key)
			continue;
		fprintf(f, "%s\n  {\"key\": ", first ? "" : ",");
		first = 0;
		hookcost_json_str(f, r->key);
		fprintf(f, ", \"label\": ");
		hookcost_json_str(f, r->label);
		if (r->skipped) {
			fprintf(f, ", \"best_ns\": null, \"median_ns\": null, "
				"\"ref\": null, \"delta_ns\": null, "
				"\"skipped\": ");
			hookcost_json_str(f, r->why);
			fputc('}', f);
			continue;
		}
		fprintf(f, ", \"best_ns\": %.1f, \"median_ns\": %.1f, "
			"\"ref\": ", r->best, r->median);
		if (ref) {
			hookcost_json_str(f, ref->key);
			fprintf(f, ", \"delta_ns\": %.1f", r->best - ref->best);
		} else {
			fprintf(f, "null, \"delta_ns\": null");
		}
		fprintf(f, ", \"skipped\": null}");
	}
	fprintf(f, "],\n \"coverage\": [");
	for (int op = 0; op < HC_OP_COUNT; op++) {
		fprintf(f, "%s\n  {\"op\": ", op ? "," : "");
		hookcost_json_str(f, hookcost_op_names[op]);
		fprintf(f, ", \"hooks\": ");
		hookcost_json_str(f, hookcost_cov[op][0]);
		fprintf(f, ", \"uffd\": ");
		hookcost_json_str(f, hookcost_cov[op][1]);
		fprintf(f, ", \"uffd_wp\": ");
		hookcost_json_str(f, hookcost_cov[op][2]);
		fputc('}', f);
	}
	fprintf(f, "],\n \"checks\": [");
	for (int i = 0; i < hookcost_nchecks; i++) {
		const struct hookcost_check *c = &hookcost_checks[i];

		fprintf(f, "%s\n  {\"key\": ", i ? "," : "");
		hookcost_json_str(f, c->key);
		fprintf(f, ", \"ok\": %s, \"detail\": ",
			c->ok > 0 ? "true" : c->ok == 0 ? "false" : "null");
		hookcost_json_str(f, c->detail);
		fputc('}', f);
	}
	fprintf(f, "]}\n");
	if (fclose(f)) {
		fprintf(stderr, "gdrc-hookcost: %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	return 0;
}

static void hookcost_usage(FILE *f)
{
	fprintf(f, "usage: gdrc-hookcost [--quick] [--json PATH]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "json", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *json = NULL;
	int c;

	while ((c = getopt_long(argc, argv, "qj:h", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			hookcost_quick = 1;
			break;
		case 'j':
			json = optarg;
			break;
		case 'h':
			hookcost_usage(stdout);
			return 0;
		default:
			hookcost_usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		hookcost_usage(stderr);
		return 2;
	}
	if (hookcost_quick)
		hookcost_iters /= 10;
	hookcost_page = (size_t)sysconf(_SC_PAGESIZE);
	/* A stuck reader must not hang CI forever. */
	alarm(HOOKCOST_WATCHDOG_S);
	/* Keep 1 MiB blocks on mmap: glibc would raise the threshold after
	 * the first free (the dynamic threshold) and serve them from brk. */
	if (!mallopt(M_MMAP_THRESHOLD, 128 * 1024))
		fprintf(stderr, "gdrc-hookcost: mallopt failed\n");

	/* The order matters: nothing may be patched before sections 1 and 3,
	 * and the patches cannot be taken out again. */
	hookcost_warm();
	hookcost_baseline();
	hookcost_userfaultfd();
	hookcost_hooks();

	hookcost_print();
	if (json && hookcost_json(json))
		return 1;
	return hookcost_failed;
}
