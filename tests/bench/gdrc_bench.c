// SPDX-License-Identifier: BSD-3-Clause
/*
 * gdrc_bench.c - gdrc-bench, the benchmark of libgdrcache's cache itself.
 *
 * What it measures
 *   Everything runs on contexts with the "none" backend (no protection
 *   domain: nothing is registered, so only the cache's own work is timed)
 *   and with the memory hooks on, as an application gets them, through
 *   the public API of the shared library:
 *
 *   a. hit      gdrc_mr_get + gdrc_mr_put of one 64-byte range of an
 *               mmap'd page, one thread; and the same rotating over 4
 *               ranges in 4 pages, and over 16 in 16 (more than a
 *               thread's fast path remembers; still hits).
 *   b. ucx      the single-range hit on UCX's ucs_rcache (no-op mem_reg
 *               and mem_dereg, UCM_EVENT_VM_UNMAPPED) in the same process,
 *               timed in rounds alternating with a.'s one-range hit again
 *               ("gdrc hit, 1 range, alternating"), and the ratio
 *               gdrc/ucx of those two.  Only when built with UCX.
 *   c. miss     get + put of a range, then gdrc_invalidate of it, so that
 *               the next get of that range misses: ns per miss
 *               (get + put + invalidate); and gdrc_mr_get with
 *               GDRC_GET_UNCACHED + put (register and release each time).
 *   d. lookup   with n one-page registrations cached (n = 1 .. 1000000):
 *               the cost of inserting them (a fresh context per
 *               repetition, no warm-up), of hits in a random page order
 *               (defeats the per-thread remembered hits: the tree path)
 *               and of hits on the same page again and again.  Per n,
 *               UCX's ucs_rcache is filled with the same pages beside the
 *               last context (no memory events; when built with UCX), and
 *               the random-page hits of both, in the same order, are
 *               timed in alternating rounds (gdrc, ucx, gdrc, ...: 5 of
 *               each after a warm-up of each) so that both see the same
 *               state of the machine.  Then the dependent-load floor (a
 *               chase through n random 256-byte lines: one load per
 *               step, as one level of a search structure), and the
 *               resident bytes per cached registration of both (RssAnon
 *               before and after each one's fill, measured apart, with
 *               malloc's free memory given back first so that neither
 *               fill reuses pages an earlier one freed; gdrcache's over
 *               its last context's fill, whose insert time therefore
 *               includes page faults the three before it did not take;
 *               shown from n = 10000).  At the start and the end of d.,
 *               e.'s CPU-bound loop on one thread ("cpu loop, ns per
 *               step", a step being 32 dependent additions; --quick does
 *               not shorten it): whether the host's own speed moved
 *               during the run, which a runner comparing runs needs.
 *   r. rotate   (runs right after d.) hits rotating over 16384 cached
 *               ranges: a 64-byte range at the same offset of each of
 *               16384 pages, in address order, cycling, in a fresh
 *               context holding just those and in UCX's rcache (no
 *               memory events) beside it, timed in alternating rounds as
 *               in d.; the ratio gdrc/ucx; and the "hot range ratio",
 *               b.'s: the 1-range hits of both, alternating, when both
 *               ran.
 *               Without UCX, gdrc's figure and "-".
 *   e. threads  total hit throughput with 1, 2 and N threads (N = online
 *               CPUs; also 4 and 8 when N < 8, marked "oversub", and 16
 *               when N > 16), all on
 *               one shared range, or each on a range of its own page.
 *               For UCX one rcache is shared by all threads.
 *   f. machine  CPU model, CPUs, date (UTC), library, compiler and UCX
 *               versions.
 *   g. gpu      only when a CUDA driver and a device are there (else one
 *               "skipped" line), on device 0 and again on device 1 where
 *               there is one: the bare cuPointerGetAttribute(BUFFER_ID)
 *               that a validated GPU hit adds; GPU hits with
 *               GDRC_VALIDATE=always (ratio to that bare query) and =hooks
 *               (ratio to the host hit of a.), and in paired rounds the
 *               always hit's ratio to the query, as get + put and as the
 *               get alone (puts outside the timing); the miss cost (get + put +
 *               invalidate) on device, pool and pinned host memory;
 *               gdrc_ptr_query classifying an unregistered device pointer;
 *               and one registration over three VMM mappings (2 MiB each,
 *               one reservation, as cuMem allocators lay memory out), hit
 *               by requests that touch k = 1, 2, 3 of them, in paired
 *               rounds against k bare BUFFER_ID queries (target: at most
 *               1.25 for each k).  On device 1, also its always and
 *               hooks hits from a thread with device 0's primary context
 *               current, in paired rounds against the same hits with its
 *               own context current (and the always hit against the bare
 *               query from that thread).
 *               The driver is opened at run time (GDRC_CUDA_LIBRARY,
 *               default libcuda.so.1, as the library does): building needs
 *               no CUDA toolkit.
 *
 * How each number is taken
 *   Warm up, then time the loop 5 times with CLOCK_MONOTONIC: "best" is
 *   the fastest repetition, "median" the middle one.  b.'s, d.'s
 *   random-page and r.'s hits are timed in rounds alternating with UCX's,
 *   each repetition of one followed by one of the other.  Latencies are ns
 *   per operation (one get + one put unless said otherwise); throughputs
 *   are millions of get+put pairs per second, all threads together.
 *   Every returned registration is used (summed into a volatile sink) so
 *   no work can be optimised away.  The cache's counters are read around
 *   each loop: a loop meant to hit that missed (or a miss loop that hit)
 *   prints a WARNING, since its number would not mean what its label says.
 *
 * Running it
 *   gdrc-bench                full run (under a minute on 2 cores)
 *   gdrc-bench --quick        10x fewer iterations, n up to 100000 (CI)
 *   gdrc-bench --json PATH    also write the results as one JSON object
 *   gdrc-bench --gpu-only     only a. (the host hit g. compares with)
 *                             and g., for quick runs on a GPU machine
 *   gdrc-bench --lookup-only  only a., b.'s single-range UCX hit (not
 *                             its child processes), d. (the lookup
 *                             table, UCX's rows and bytes per
 *                             registration) and r.; what
 *                             scripts/bench-ucx.sh runs
 *   gdrc-bench --ucx-only     only a. and b. (the hit against UCX's,
 *                             apart and in one process)
 *   Run it on an idle machine and compare numbers of one run only.  It
 *   checks no speed: it exits 0 when every call succeeded, 1 when a
 *   libgdrcache (or UCX, or CUDA, or system) call failed, 2 on a bad
 *   option.  No driver or no GPU is not a failure: g. is skipped.
 *
 * Reading the output
 *   Compare "best" (the least disturbed repetition); "median" shows the
 *   noise.  "ratio gdrc/ucx" below 1 means libgdrcache's hit is faster.
 *   In the thread table "ratio" is the best throughput over that of 1
 *   thread in the same mode, "m.ratio" the same of the medians (a
 *   single thread's best can be an outlier: on the GPU machine's host it
 *   moves between two groups 1.8x apart); T for T threads is linear
 *   scaling (possible for private ranges up to the number of CPUs); a
 *   shared range is bounded
 *   by one reference count's cache line moving between CPUs, and should
 *   not fall below 1.  Rows marked oversub have more threads than CPUs.
 *   The "cpu" rows time a loop that shares nothing in the same way: what
 *   the machine gives T threads (on a VM whose vCPUs run at different
 *   speeds, well under T); "eff" is the hits' m.ratio over the cpu
 *   loop's at the same T, 1 where the hits lose nothing to each other.
 *   Insert times for small n include the first allocations of a context.
 *
 * JSON (--json PATH): one object with keys "machine" (object), "quick",
 * "gpu_only", "hit_ns", "hit_rotate4_ns", "hit_rotate16_ns", "ucx_hit_ns",
 * "hit_paired_ns" (a.'s hit again, in b.'s alternating rounds),
 * "ratio_hit_vs_ucx" (r.'s hot range ratio), "ucx_default_hit_ns",
 * "ratio_hit_vs_ucx_default", "mixed_gdrc_first_gdrc_hit_ns",
 * "mixed_gdrc_first_ucx_hit_ns", "mixed_ucx_first_gdrc_hit_ns",
 * "mixed_ucx_first_ucx_hit_ns", "miss_ns", "uncached_ns", "cpu_loop_ns"
 * and "cpu_loop_end_ns" (d.'s cpu loop at its start and end, ns per
 * step), "rotate16k_ns", "ucx_rotate16k_ns", "ratio_rotate16k_vs_ucx"
 * (r.), "lookup": [{"n",
 * "insert_ns", "random_hit_ns", "same_hit_ns", "ucx_random_hit_ns" (with
 * UCX), "floor_ns", "bytes_per_reg", "ucx_bytes_per_reg" (-1: not
 * measured)}], "threads": [{"mode":
 * "shared" or "private", "threads", "oversubscribed", "mops", "ratio",
 * "median_ratio", "cpu_median_ratio" (the CPU-bound loop's, same
 * threads), "ucx_mops", "ucx_ratio"}], "gpu": {"device", "driver" (as
 * cuDriverGetVersion says, e.g. 13000), "tag_query_ns", "hit_always_ns",
 * "ratio_always_vs_tag", "ratio_always_vs_tag_paired" (the per-round
 * ratio of the paired rounds), "ratio_always_get_vs_tag_paired" (the same
 * for the get alone), "hit_hooks_ns", "ratio_hooks_vs_host_hit",
 * "miss_device_ns", "miss_pool_ns", "miss_host_pinned_ns",
 * "classify_ns", "vmm_k1_hit_ns" ... "vmm_k3_ratio_paired"} of device 0
 * or null when g. was skipped; "gpu1" the same of device 1 (null with
 * one device) with its hits from a thread with device 0's context
 * current: "cross_tag_query_ns", "cross_hit_always_ns",
 * "ratio_cross_always_vs_own_paired", "ratio_cross_always_vs_tag_paired",
 * "cross_hit_hooks_ns", "ratio_cross_hooks_vs_own_paired".  Each number is the best
 * repetition; the same key with "_median" appended holds the median.
 * UCX values are null when UCX is not built.  Those of sections a run
 * leaves out are null (the arrays empty): --gpu-only keeps a. and g.,
 * --lookup-only a., b.'s "ucx_hit_ns" (and "ratio_hit_vs_ucx"), d. and
 * r., --ucx-only a. and b., --threads-only a. and e.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <gdrcache.h>

#ifdef GDRC_BENCH_HAVE_UCX
#include <ucm/api/ucm.h>
#include <ucp/api/ucp.h>
#include <ucs/memory/rcache.h>
#include <ucs/type/status.h>
#endif

#define BENCH_PAGE 4096UL
#define BENCH_REPS 5
#define BENCH_PAIRS 15		/* g: alternating rounds of two loops */
#define BENCH_RANGE 64		/* bytes per get */
#define BENCH_OFFSET 256	/* where in its page a hit range starts */
#define BENCH_ACCESS                                                         \
	(GDRC_ACCESS_LOCAL_WRITE | GDRC_ACCESS_REMOTE_READ |                 \
	 GDRC_ACCESS_REMOTE_WRITE)
#define BENCH_MAX_THREADS 256
#define BENCH_MAX_THR_ROWS 8
#define BENCH_MAX_LOOKUP 7

/* Iterations of a full run; --quick divides each by 10. */
#define BENCH_HIT_ITERS 10000000UL	/* a, b */
#define BENCH_MISS_ITERS 200000UL	/* c */
#define BENCH_MISS_PAGES 1024UL		/* c: pages the misses rotate over */
#define BENCH_LOOKUP_ITERS 2000000UL	/* d: per repetition, at least 1M */
#define BENCH_THR_NS 40000000UL	/* e: one run, ns (all threads at once) */
#define BENCH_THR_STEP 1024		/* e: gets between looks at the clock */
#define BENCH_LOOKUP_MAX_N 1000000UL
#define BENCH_CPU_ITERS 2000000UL	/* d: cpu loop steps, even --quick */
#define BENCH_ROTATE_N 16384UL	/* r: ranges the hits rotate over */
#define BENCH_LOOKUP_QUICK_N 100000UL
#define BENCH_GPU_CALL_ITERS 1000000UL	/* g: loops making a driver call */
#define BENCH_GPU_MISS_ITERS 100000UL	/* g: misses */
#define BENCH_GPU_BUF (1UL << 20)	/* g: each allocation, 1 MiB */
#define BENCH_GPU_OFFSET 4096UL		/* g: where in it a get starts */

#define bench_unlikely(x) __builtin_expect(!!(x), 0)

/* One measurement: best and median of the repetitions. */
struct bench_res {
	double best;
	double median;
	int valid;
};

struct bench_lookup_res {
	uint64_t n;
	struct bench_res insert;
	struct bench_res random_hit;
	struct bench_res same_hit;
	struct bench_res ucx_random_hit; /* valid 0: UCX not built */
	struct bench_res floor;          /* ns per dependent load */
	double bytes_per_reg;            /* resident; < 0: not measured */
	double ucx_bytes_per_reg;
};

struct bench_thr_res {
	int private;
	int threads;
	int oversub;
	struct bench_res mops;
	double ratio;        /* best over 1 thread's best */
	double median_ratio; /* median over 1 thread's median */
	struct bench_res ucx_mops;
	double ucx_ratio;
	double cpu_ratio;    /* the CPU-bound loop's median ratio, same T */
};

struct bench_machine {
	char cpu[256];
	long ncpu;
	char date[64];
	char kernel[3 * sizeof(((struct utsname *)0)->release) + 8];
	const char *version;
	const char *ucx_version;
	const char *ucx_hook_mode; /* UCX_MEM_MMAP_HOOK_MODE */
	const char *ucx_events;    /* ucm events of the rcache */
};

/* g.  ran 0: skipped, for the reason in skip. */
struct bench_gpu_res {
	int ran;
	char skip[256];
	char device[256];
	int ordinal;			/* the CUDA device measured */
	int driver;			/* cuDriverGetVersion, e.g. 13000 */
	struct bench_res tag_query;	/* bare cuPointerGetAttribute */
	struct bench_res hit_always;	/* GDRC_VALIDATE=always */
	struct bench_res paired;	/* hit_always / tag_query per round */
	struct bench_res paired_get;	/* the get alone / tag_query */
	struct bench_res hit_hooks;	/* GDRC_VALIDATE=hooks */
	struct bench_res miss_device;	/* cuMemAlloc */
	struct bench_res miss_pool;	/* cuMemAllocAsync */
	struct bench_res miss_host_pinned; /* cuMemHostAlloc */
	struct bench_res classify;	/* gdrc_ptr_query, not registered */
	int vmm_ran;			/* the VMM rows below were measured */
	/* One registration over three VMM mappings, always mode, a hit
	 * touching k of them: get + put over k bare queries, paired. */
	struct bench_res vmm_paired[3];
	struct bench_res vmm_hit[3];	/* ns per get + put */
	struct bench_res vmm_tags[3];	/* ns per k bare queries */
	/* Device 1 and up: hits on this device's memory from a thread
	 * with device 0's primary context current. */
	int cross_ran;
	struct bench_res cross_tag;	/* bare query, device 0 current */
	struct bench_res cross_always;
	struct bench_res cross_always_paired;	/* / own thread's */
	struct bench_res cross_always_tag_paired; /* / cross_tag */
	struct bench_res cross_hooks;
	struct bench_res cross_hooks_paired;	/* / own thread's */
};

/* g. runs on device 0 and, where there is one, device 1. */
#define BENCH_GPUS 2

struct bench_results {
	struct bench_machine machine;
	struct bench_res hit;
	struct bench_res hit_rotate4;
	struct bench_res hit_rotate16;
	struct bench_res ucx_hit;
	struct bench_res hit_paired; /* a.'s hit again, in b.'s rounds */
	struct bench_res ucx_default_hit; /* child, UCX's own hooks in */
	/* Both in one child with UCX's hooks in ([0] gdrc_init first,
	 * [1] ucs_rcache_create first): gdrcache on UCM's events. */
	struct bench_res mixed_gdrc[2], mixed_ucx[2];
	struct bench_res miss;
	struct bench_res uncached;
	struct bench_lookup_res lookup[BENCH_MAX_LOOKUP];
	int nlookup;
	/* d.: the 1-thread CPU-bound loop, ns per step, at its start and
	 * end: did the host's speed move during the run? */
	struct bench_res cpu_loop, cpu_loop_end;
	/* r.: hits rotating over BENCH_ROTATE_N ranges (ucx: invalid when
	 * UCX is not built). */
	struct bench_res rotate16k, ucx_rotate16k;
	struct bench_thr_res thr[2 * BENCH_MAX_THR_ROWS];
	int nthr;
	struct bench_gpu_res gpu[BENCH_GPUS]; /* by CUDA ordinal */
};

struct bench_opts {
	int quick;
	int ucx_child; /* --ucx-default-child: only UCX's hit, then exit */
	int mixed_child; /* --mixed-child=N: both caches, order N, exit */
	int gpu_only;  /* --gpu-only: a. and g. */
	int threads_only; /* --threads-only: a. and e. without UCX */
	int lookup_only; /* --lookup-only: a. and d. */
	int ucx_only;  /* --ucx-only: a. and b. */
	const char *json;
	uint64_t div; /* 10 with --quick, else 1 */
};

static volatile uint64_t bench_sink;

/* ====================================================================
 * Helpers
 * ==================================================================== */

static uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* @return 0 for GDRC_OK, else print what failed and return -1. */
static int bench_check(gdrc_status_t status, const char *what)
{
	if (status == GDRC_OK)
		return 0;
	fprintf(stderr, "gdrc-bench: %s failed: %s (%d)\n", what,
		gdrc_status_str(status), (int)status);
	return -1;
}

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Best (lowest, or highest when higher_better) and median of s[0..n). */
static void bench_summarize(double *s, int n, int higher_better,
			    struct bench_res *r)
{
	qsort(s, n, sizeof(*s), bench_cmp_double);
	r->best = higher_better ? s[n - 1] : s[0];
	r->median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	r->valid = 1;
}

/* A timed loop: iters operations, 0 or -1 on a failed call. */
typedef int (*bench_loop_fn)(void *arg, uint64_t iters);

/* Warm up, then time BENCH_REPS runs of iters: ns per operation. */
static int bench_run(bench_loop_fn fn, void *arg, uint64_t iters,
		     uint64_t warmup, struct bench_res *r)
{
	double s[BENCH_REPS];

	if (warmup && fn(arg, warmup))
		return -1;
	for (int i = 0; i < BENCH_REPS; i++) {
		uint64_t t0 = bench_now_ns();

		if (fn(arg, iters))
			return -1;
		s[i] = (double)(bench_now_ns() - t0) / (double)iters;
	}
	bench_summarize(s, BENCH_REPS, 0, r);
	return 0;
}

/*
 * The ratio of two loops' costs, b over a, taken in BENCH_PAIRS rounds
 * that each time a and b back to back, so that both see the same state
 * of the machine (clock, neighbours, the driver's own bimodal timing);
 * odd rounds run b first, so that neither loop always follows the
 * other.  r holds the best and median per-round ratio.
 */
static int bench_pair(bench_loop_fn fa, void *aa, bench_loop_fn fb, void *ab,
		      uint64_t iters, struct bench_res *r)
{
	double s[BENCH_PAIRS];

	for (int i = 0; i < BENCH_PAIRS; i++) {
		uint64_t t0, t1, t2;

		t0 = bench_now_ns();
		if ((i & 1) ? fb(ab, iters) : fa(aa, iters))
			return -1;
		t1 = bench_now_ns();
		if ((i & 1) ? fa(aa, iters) : fb(ab, iters))
			return -1;
		t2 = bench_now_ns();
		s[i] = (i & 1) ? (double)(t1 - t0) / (double)(t2 - t1) :
				 (double)(t2 - t1) / (double)(t1 - t0);
	}
	bench_summarize(s, BENCH_PAIRS, 0, r);
	return 0;
}

/*
 * Two loops timed in alternating rounds: a warm-up of a, one of b, then
 * BENCH_REPS rounds of a then b.  Five of one loop and then five of the
 * other can fall on two states of the machine (a neighbour, the clock,
 * one cache's lines evicting the other's); alternating, both see the
 * same ones, so that their medians can be set against each other (issue
 * 34: UCX "in the same process", alternating).  fb NULL: a alone, as
 * bench_run times it.  ra and rb: ns per operation of each.
 */
static int bench_alternate(bench_loop_fn fa, void *aa, bench_loop_fn fb,
			   void *ab, uint64_t iters, uint64_t warmup,
			   struct bench_res *ra, struct bench_res *rb)
{
	double sa[BENCH_REPS], sb[BENCH_REPS];

	if (!fb)
		return bench_run(fa, aa, iters, warmup, ra);
	if (warmup && (fa(aa, warmup) || fb(ab, warmup)))
		return -1;
	for (int i = 0; i < BENCH_REPS; i++) {
		uint64_t t0, t1, t2;

		t0 = bench_now_ns();
		if (fa(aa, iters))
			return -1;
		t1 = bench_now_ns();
		if (fb(ab, iters))
			return -1;
		t2 = bench_now_ns();
		sa[i] = (double)(t1 - t0) / (double)iters;
		sb[i] = (double)(t2 - t1) / (double)iters;
	}
	bench_summarize(sa, BENCH_REPS, 0, ra);
	bench_summarize(sb, BENCH_REPS, 0, rb);
	return 0;
}

static int bench_counter(struct gdrc_ctx *ctx, enum gdrc_stat stat,
			 uint64_t *value)
{
	return bench_check(gdrc_stat_get(ctx, stat, value), "gdrc_stat_get");
}

/* Warn when a loop meant to hit did not (its number means less). */
static int bench_expect_misses(struct gdrc_ctx *ctx, uint64_t before,
			       uint64_t expected, const char *what)
{
	uint64_t now;

	if (bench_counter(ctx, GDRC_STAT_MISSES, &now))
		return -1;
	if (now - before != expected)
		printf("WARNING: %s: %llu misses, expected %llu\n", what,
		       (unsigned long long)(now - before),
		       (unsigned long long)expected);
	return 0;
}

static char *bench_mmap(size_t len, int populate)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
	void *p;

	if (populate)
		flags |= MAP_POPULATE;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (p == MAP_FAILED) {
		perror("gdrc-bench: mmap");
		return NULL;
	}
	return p;
}

/* xorshift64: a fixed, reproducible sequence. */
static uint64_t bench_xorshift(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

/* ====================================================================
 * Machine information
 * ==================================================================== */

static void bench_machine_info(struct bench_machine *m)
{
	char line[512];
	struct utsname u;
	struct tm tm;
	time_t now;
	FILE *f;

	snprintf(m->cpu, sizeof(m->cpu), "unknown");
	f = fopen("/proc/cpuinfo", "r");
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			char *colon = strchr(line, ':');

			if (strncmp(line, "model name", 10) || !colon)
				continue;
			colon++;
			while (*colon == ' ' || *colon == '\t')
				colon++;
			colon[strcspn(colon, "\n")] = '\0';
			snprintf(m->cpu, sizeof(m->cpu), "%s", colon);
			break;
		}
		fclose(f);
	}
	m->ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (m->ncpu < 1)
		m->ncpu = 1;
	now = time(NULL);
	gmtime_r(&now, &tm);
	strftime(m->date, sizeof(m->date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (uname(&u) == 0)
		snprintf(m->kernel, sizeof(m->kernel), "%s %s %s", u.sysname,
			 u.release, u.machine);
	else
		snprintf(m->kernel, sizeof(m->kernel), "unknown");
	m->version = gdrc_version_string();
#ifdef GDRC_BENCH_HAVE_UCX
	m->ucx_version = ucp_get_version_string();
	m->ucx_hook_mode = getenv("UCX_MEM_MMAP_HOOK_MODE");
#else
	m->ucx_version = NULL;
#endif
}

/* ====================================================================
 * a. Hits, one thread
 * ==================================================================== */

struct bench_hit_arg {
	struct gdrc_ctx *ctx;
	const char *addr[16];
	unsigned mask; /* 0: addr[0] only; 3, 15: rotate over 4, 16 */
};

static int bench_hit_loop(void *p, uint64_t iters)
{
	struct bench_hit_arg *a = p;
	uintptr_t acc = 0;

	for (uint64_t i = 0; i < iters; i++) {
		struct gdrc_mr *mr;
		gdrc_status_t s;

		s = gdrc_mr_get(a->ctx, a->addr[i & a->mask], BENCH_RANGE,
				BENCH_ACCESS, 0, &mr);
		if (bench_unlikely(s != GDRC_OK))
			return bench_check(s, "gdrc_mr_get (hit)");
		acc += (uintptr_t)mr;
		gdrc_mr_put(a->ctx, mr);
	}
	bench_sink += acc;
	return 0;
}

/* Get and put addr once (a miss the first time), checking the key. */
static int bench_prime(struct gdrc_ctx *ctx, const char *addr, size_t len)
{
	struct gdrc_mr *mr;

	if (bench_check(gdrc_mr_get(ctx, addr, len, BENCH_ACCESS, 0, &mr),
			"gdrc_mr_get (first)"))
		return -1;
	bench_sink += gdrc_mr_lkey(mr);
	gdrc_mr_put(ctx, mr);
	return 0;
}

static int bench_hit(struct gdrc_ctx *ctx, char *buf,
		     const struct bench_opts *o, struct bench_results *res)
{
	uint64_t iters = BENCH_HIT_ITERS / o->div, m0;
	struct bench_hit_arg a = { .ctx = ctx, .mask = 0 };

	for (int i = 0; i < 16; i++) {
		a.addr[i] = buf + i * BENCH_PAGE + BENCH_OFFSET;
		if (bench_prime(ctx, a.addr[i], BENCH_RANGE))
			return -1;
	}
	if (bench_counter(ctx, GDRC_STAT_MISSES, &m0) ||
	    bench_run(bench_hit_loop, &a, iters, iters / 10, &res->hit) ||
	    bench_expect_misses(ctx, m0, 0, "hit, 1 range"))
		return -1;
	printf("a. hit, 1 range                       %10.2f %10.2f\n",
	       res->hit.best, res->hit.median);

	for (unsigned n = 4; n <= 16; n *= 4) {
		struct bench_res *r = n == 4 ? &res->hit_rotate4 :
					       &res->hit_rotate16;
		char label[64];

		a.mask = n - 1;
		snprintf(label, sizeof(label),
			 "hit, %u ranges in %u pages, rotating", n, n);
		if (bench_counter(ctx, GDRC_STAT_MISSES, &m0) ||
		    bench_run(bench_hit_loop, &a, iters, iters / 10, r) ||
		    bench_expect_misses(ctx, m0, 0, label))
			return -1;
		printf("a. %s %*.2f %10.2f\n", label, 44 - (int)strlen(label),
		       r->best, r->median);
	}
	fflush(stdout);
	return 0;
}

/* ====================================================================
 * b. UCX reference
 * ==================================================================== */

#ifdef GDRC_BENCH_HAVE_UCX
static ucs_status_t bench_ucx_reg(void *context, ucs_rcache_t *rcache,
				  void *arg, ucs_rcache_region_t *region,
				  uint16_t flags)
{
	(void)context;
	(void)rcache;
	(void)arg;
	(void)region;
	(void)flags;
	return UCS_OK;
}

static void bench_ucx_dereg(void *context, ucs_rcache_t *rcache,
			    ucs_rcache_region_t *region)
{
	(void)context;
	(void)rcache;
	(void)region;
}

static void bench_ucx_dump(void *context, ucs_rcache_t *rcache,
			   ucs_rcache_region_t *region, char *buf, size_t max)
{
	(void)context;
	(void)rcache;
	(void)region;
	if (max)
		buf[0] = '\0';
}

static const ucs_rcache_ops_t bench_ucx_ops = {
	.mem_reg = bench_ucx_reg,
	.mem_dereg = bench_ucx_dereg,
	.dump_region = bench_ucx_dump,
};

static int bench_ucx_create(ucs_rcache_t **rc_p, const char **events)
{
	ucs_rcache_params_t p;
	ucs_status_t st;

	memset(&p, 0, sizeof(p));
	p.region_struct_size = sizeof(ucs_rcache_region_t);
	p.alignment = BENCH_PAGE;
	p.max_alignment = BENCH_PAGE;
	p.ucm_events = UCM_EVENT_VM_UNMAPPED;
	p.ucm_event_priority = 1000;
	p.ops = &bench_ucx_ops;
	p.max_regions = ULONG_MAX;
	p.max_size = SIZE_MAX;
	p.max_unreleased = SIZE_MAX;
	st = ucs_rcache_create(&p, "gdrc-bench", NULL, rc_p);
	if (st == UCS_ERR_UNSUPPORTED) {
		/* No ucm hooks (see bench_ucx_hook_mode): no events. */
		p.ucm_events = 0;
		st = ucs_rcache_create(&p, "gdrc-bench", NULL, rc_p);
	}
	if (st != UCS_OK) {
		fprintf(stderr, "gdrc-bench: ucs_rcache_create failed: %s\n",
			ucs_status_string(st));
		return -1;
	}
	*events = p.ucm_events ? "VM_UNMAPPED" : "none";
	printf("b. ucx rcache: ucm events %s, UCX_MEM_MMAP_HOOK_MODE=%s\n",
	       *events, getenv("UCX_MEM_MMAP_HOOK_MODE") ?
	       getenv("UCX_MEM_MMAP_HOOK_MODE") : "(default)");
	return 0;
}

struct bench_ucx_arg {
	ucs_rcache_t *rc;
	char *addr;
};

static int bench_ucx_loop(void *p, uint64_t iters)
{
	struct bench_ucx_arg *a = p;
	uintptr_t acc = 0;

	for (uint64_t i = 0; i < iters; i++) {
		ucs_rcache_region_t *r;
		ucs_status_t st;

		st = ucs_rcache_get(a->rc, a->addr, BENCH_RANGE,
				    PROT_READ | PROT_WRITE, NULL, &r);
		if (bench_unlikely(st != UCS_OK)) {
			fprintf(stderr, "gdrc-bench: ucs_rcache_get failed: "
				"%s\n", ucs_status_string(st));
			return -1;
		}
		acc += (uintptr_t)r;
		ucs_rcache_region_put(a->rc, r);
	}
	bench_sink += acc;
	return 0;
}

/*
 * b.'s hit on the range a. hit.  With ctx (a.'s context), timed in rounds
 * alternating with a.'s one-range hit again (hit_paired), so that the
 * hot range ratio sets two medians of one state of the machine against
 * each other, as d. and r. do (issue 34's rule: UCX in the same process,
 * alternating); ctx NULL: UCX alone.
 */
static int bench_ucx_hit(ucs_rcache_t *rc, struct gdrc_ctx *ctx, char *buf,
			 const struct bench_opts *o, struct bench_results *res)
{
	uint64_t iters = BENCH_HIT_ITERS / o->div;
	struct bench_ucx_arg a = { .rc = rc, .addr = buf + BENCH_OFFSET };
	struct bench_hit_arg h = { .ctx = ctx,
				   .addr = { buf + BENCH_OFFSET } };
	const struct bench_res *g = ctx ? &res->hit_paired : &res->hit;

	if (ctx ? bench_alternate(bench_hit_loop, &h, bench_ucx_loop, &a,
				  iters, iters / 10, &res->hit_paired,
				  &res->ucx_hit) :
		  bench_run(bench_ucx_loop, &a, iters, iters / 10,
			    &res->ucx_hit))
		return -1;
	printf("b. ucx hit, 1 range                   %10.2f %10.2f\n",
	       res->ucx_hit.best, res->ucx_hit.median);
	if (ctx)
		printf("b. gdrc hit, 1 range, alternating     %10.2f %10.2f\n",
		       g->best, g->median);
	printf("b. ratio gdrc/ucx, 1 range            %10.3f %10.3f\n",
	       g->best / res->ucx_hit.best, g->median / res->ucx_hit.median);
	fflush(stdout);
	return 0;
}

/* The gdrcache hit the hot range ratio sets against b.'s: a.'s again in
 * b.'s alternating rounds where it ran so, else a.'s own. */
static const struct bench_res *bench_hot_hit(const struct bench_results *res)
{
	return res->hit_paired.valid ? &res->hit_paired : &res->hit;
}

/*
 * UCX as it runs in real programs: its own memory hooks in libc and
 * VM_UNMAPPED events on.  Those hooks keep ours out of the process, so
 * this runs in a child started without UCX_MEM_MMAP_HOOK_MODE=none,
 * which never calls gdrc_init and prints one line for the parent.
 */
static int bench_ucx_child(char *buf, const struct bench_opts *o)
{
	struct bench_results r = { 0 };
	const char *events;
	ucs_rcache_t *rc;

	if (bench_ucx_create(&rc, &events) ||
	    bench_ucx_hit(rc, NULL, buf, o, &r))
		return 1;
	printf("ucx-default-child %.3f %.3f %s\n", r.ucx_hit.best,
	       r.ucx_hit.median, events);
	ucs_rcache_destroy(rc);
	return 0;
}

static int bench_caches_host(struct gdrc_ctx *ctx, const char *addr,
			     int *cached);

/*
 * gdrcache and UCX's rcache in one process, as UCX-based libraries run
 * them: UCX's own hooks in glibc, gdrcache on UCM's events (docs/hooks.md).
 * order 0: gdrc_init first; 1: ucs_rcache_create first.  Prints one line
 * for the parent.
 */
static int bench_mixed_child(char *buf, const struct bench_opts *o,
			     int order)
{
	struct bench_results r = { 0 };
	struct gdrc_ctx *ctx = NULL;
	const char *events, *src = NULL;
	ucs_rcache_t *rc = NULL;
	int ret = 1, cached;

	if (order == 0 && bench_check(gdrc_init(NULL, &ctx), "gdrc_init"))
		return 1;
	if (bench_ucx_create(&rc, &events))
		goto out;
	if (order == 1 && bench_check(gdrc_init(NULL, &ctx), "gdrc_init"))
		goto out;
	if (bench_caches_host(ctx, buf + BENCH_MAX_THREADS / 2 * BENCH_PAGE,
			      &cached))
		goto out;
	if (gdrc_hooks_status(ctx, &src) != GDRC_OK || !cached) {
		fprintf(stderr, "gdrc-bench: mixed: no host caching (%s)\n",
			src ? src : "?");
		goto out;
	}
	if (bench_hit(ctx, buf, o, &r) || bench_ucx_hit(rc, NULL, buf, o, &r))
		goto out;
	printf("mixed-child %.3f %.3f %.3f %.3f %s\n", r.hit.best,
	       r.hit.median, r.ucx_hit.best, r.ucx_hit.median, src);
	ret = 0;
out:
	if (rc)
		ucs_rcache_destroy(rc);
	gdrc_fini(ctx);
	return ret;
}

static int bench_mixed(const struct bench_opts *o, struct bench_results *res)
{
	static const char *const names[2] = { "gdrc_init first",
					      "rcache first" };
	char cmd[256], line[512];

	for (int k = 0; k < 2; k++) {
		struct bench_res *g = &res->mixed_gdrc[k],
				 *u = &res->mixed_ucx[k];
		FILE *f;

		snprintf(cmd, sizeof(cmd),
			 "env -u UCX_MEM_MMAP_HOOK_MODE /proc/%d/exe "
			 "--mixed-child=%d%s",
			 (int)getpid(), k, o->quick ? " --quick" : "");
		f = popen(cmd, "r");
		if (!f)
			return -1;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "mixed-child %lf %lf %lf %lf",
				   &g->best, &g->median, &u->best,
				   &u->median) == 4)
				g->valid = u->valid = 1;
		if (pclose(f) || !g->valid) {
			fprintf(stderr, "gdrc-bench: mixed child failed\n");
			return -1;
		}
		printf("b. one process, %-15s gdrc %10.2f %10.2f\n",
		       names[k], g->best, g->median);
		printf("b. one process, %-15s ucx  %10.2f %10.2f\n",
		       names[k], u->best, u->median);
		printf("b. one process, %-15s ratio%10.3f %10.3f\n",
		       names[k], g->best / u->best, g->median / u->median);
	}
	fflush(stdout);
	return 0;
}

static int bench_ucx_default(const struct bench_opts *o,
			     struct bench_results *res)
{
	char cmd[256], line[256];
	double best, median;
	char events[32];
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "env -u UCX_MEM_MMAP_HOOK_MODE /proc/%d/exe "
		 "--ucx-default-child%s",
		 (int)getpid(), o->quick ? " --quick" : "");
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "ucx-default-child %lf %lf %31s", &best,
			   &median, events) == 3) {
			res->ucx_default_hit.best = best;
			res->ucx_default_hit.median = median;
			res->ucx_default_hit.valid = 1;
		}
	}
	if (pclose(f) || !res->ucx_default_hit.valid) {
		fprintf(stderr, "gdrc-bench: ucx child failed\n");
		return -1;
	}
	printf("b. ucx hit, own hooks + events (child)%10.2f %10.2f\n", best,
	       median);
	printf("b. ratio gdrc/ucx (own hooks)         %10.3f %10.3f\n",
	       res->hit.best / best, res->hit.median / median);
	fflush(stdout);
	return 0;
}
#endif /* GDRC_BENCH_HAVE_UCX */

/* ====================================================================
 * c. Misses
 * ==================================================================== */

struct bench_miss_arg {
	struct gdrc_ctx *ctx;
	char *buf;
	uint64_t npages;
	uint64_t next;
};

/* get + put of a range not cached, then invalidate it. */
static int bench_miss_loop(void *p, uint64_t iters)
{
	struct bench_miss_arg *a = p;
	uintptr_t acc = 0;

	for (uint64_t i = 0; i < iters; i++) {
		char *addr = a->buf + a->next * BENCH_PAGE + BENCH_OFFSET;
		struct gdrc_mr *mr;
		gdrc_status_t s;

		if (++a->next == a->npages)
			a->next = 0;
		s = gdrc_mr_get(a->ctx, addr, BENCH_RANGE, BENCH_ACCESS, 0,
				&mr);
		if (bench_unlikely(s != GDRC_OK))
			return bench_check(s, "gdrc_mr_get (miss)");
		acc += (uintptr_t)mr;
		gdrc_mr_put(a->ctx, mr);
		s = gdrc_invalidate(a->ctx, addr, BENCH_RANGE);
		if (bench_unlikely(s != GDRC_OK))
			return bench_check(s, "gdrc_invalidate");
	}
	bench_sink += acc;
	return 0;
}

/* get(GDRC_GET_UNCACHED) + put of one range. */
static int bench_uncached_loop(void *p, uint64_t iters)
{
	struct bench_miss_arg *a = p;
	char *addr = a->buf + BENCH_OFFSET;
	uintptr_t acc = 0;

	for (uint64_t i = 0; i < iters; i++) {
		struct gdrc_mr *mr;
		gdrc_status_t s;

		s = gdrc_mr_get(a->ctx, addr, BENCH_RANGE, BENCH_ACCESS,
				GDRC_GET_UNCACHED, &mr);
		if (bench_unlikely(s != GDRC_OK))
			return bench_check(s, "gdrc_mr_get (uncached)");
		acc += (uintptr_t)mr;
		gdrc_mr_put(a->ctx, mr);
	}
	bench_sink += acc;
	return 0;
}

static int bench_miss(struct gdrc_ctx *ctx, const struct bench_opts *o,
		      struct bench_results *res)
{
	uint64_t iters = BENCH_MISS_ITERS / o->div, warm = iters / 10, m0;
	size_t len = (BENCH_MISS_PAGES + 1) * BENCH_PAGE;
	struct bench_miss_arg a = { .ctx = ctx, .npages = BENCH_MISS_PAGES };
	char *buf = bench_mmap(len, 0);
	int ret = -1;

	if (!buf)
		return -1;
	a.buf = buf;
	if (bench_counter(ctx, GDRC_STAT_MISSES, &m0) ||
	    bench_run(bench_miss_loop, &a, iters, warm, &res->miss) ||
	    bench_expect_misses(ctx, m0, warm + BENCH_REPS * iters,
				"miss (get+put+invalidate)"))
		goto out;
	printf("c. miss: get+put+invalidate           %10.2f %10.2f\n",
	       res->miss.best, res->miss.median);

	/* A page the miss loop never used. */
	a.buf = buf + BENCH_MISS_PAGES * BENCH_PAGE;
	if (bench_counter(ctx, GDRC_STAT_MISSES, &m0) ||
	    bench_run(bench_uncached_loop, &a, iters, warm, &res->uncached) ||
	    bench_expect_misses(ctx, m0, warm + BENCH_REPS * iters,
				"uncached get+put"))
		goto out;
	printf("c. uncached: get(UNCACHED)+put        %10.2f %10.2f\n",
	       res->uncached.best, res->uncached.median);
	fflush(stdout);
	ret = 0;
out:
	munmap(buf, len);
	return ret;
}

/* ====================================================================
 * d. Lookup cost as cached registrations grow
 * ==================================================================== */

struct bench_lookup_arg {
	struct gdrc_ctx *ctx;
	char *buf;
	const uint32_t *order; /* a random permutation of the n pages */
	uint64_t n;
	uint64_t pos;
};

/* One get + put of each page, in address order: n cold misses. */
static int bench_populate_loop(void *p, uint64_t n)
{
	struct bench_lookup_arg *a = p;
	uintptr_t acc = 0;

	for (uint64_t i = 0; i < n; i++) {
		struct gdrc_mr *mr;
		gdrc_status_t s;

		s = gdrc_mr_get(a->ctx, a->buf + i * BENCH_PAGE, BENCH_PAGE,
				BENCH_ACCESS, 0, &mr);
		if (bench_unlikely(s != GDRC_OK))
			return bench_check(s, "gdrc_mr_get (populate)");
		acc += (uintptr_t)mr;
		gdrc_mr_put(a->ctx, mr);
	}
	bench_sink += acc;
	return 0;
}

/* Hits on the pages in random order (cycling the permutation). */
static int bench_random_loop(void *p, uint64_t iters)
{
	struct bench_lookup_arg *a = p;
	uint64_t pos = a->pos;
	uintptr_t acc = 0;

	for (uint64_t i = 0; i < iters; i++) {
		const char *addr = a->buf + a->order[pos] * BENCH_PAGE;
		struct gdrc_mr *mr;
		gdrc_status_t s;

		if (++pos == a->n)
			pos = 0;
		s = gdrc_mr_get(a->ctx, addr, BENCH_RANGE, BENCH_ACCESS, 0,
				&mr);
		if (bench_unlikely(s != GDRC_OK))
			return bench_check(s, "gdrc_mr_get (random hit)");
		acc += (uintptr_t)mr;
		gdrc_mr_put(a->ctx, mr);
	}
	a->pos = pos;
	bench_sink += acc;
	return 0;
}

/* Fill a fresh context of n registrations; ns per insert. */
static int bench_populate(struct bench_lookup_arg *a, double *ns,
			  int keep)
{
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_MAX_REGIONS,
		.max_regions = a->n,
	};
	uint64_t t0, regions, evictions;

	if (bench_check(gdrc_init(&cfg, &a->ctx), "gdrc_init (lookup)"))
		return -1;
	t0 = bench_now_ns();
	if (bench_populate_loop(a, a->n))
		goto err;
	*ns = (double)(bench_now_ns() - t0) / (double)a->n;
	if (bench_counter(a->ctx, GDRC_STAT_REGIONS, &regions) ||
	    bench_counter(a->ctx, GDRC_STAT_EVICTIONS, &evictions))
		goto err;
	if (regions != a->n || evictions)
		printf("WARNING: n=%llu: %llu regions cached, %llu evicted "
		       "after populating\n", (unsigned long long)a->n,
		       (unsigned long long)regions,
		       (unsigned long long)evictions);
	if (!keep) {
		gdrc_fini(a->ctx);
		a->ctx = NULL;
	}
	return 0;
err:
	gdrc_fini(a->ctx);
	a->ctx = NULL;
	return -1;
}

/* Resident anonymous memory of this process, bytes (RssAnon); -1. */
static long long bench_rss_anon(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

/*
 * RssAnon after giving malloc's free memory back to the system.  What
 * an earlier context or rcache freed, malloc keeps (up to its trim and
 * mmap thresholds, which grow with use), and the next fill reuses it
 * without adding to RssAnon: the kept context of d., filled after four
 * freed ones, showed 0 bytes per registration at n = 10000 and 168
 * instead of 210 at 100000 (on the 2-core build machine).  Called
 * before a fill that is measured, so that its bytes do not depend on
 * what ran before it.
 */
static long long bench_rss_anon_trimmed(void)
{
	malloc_trim(0);
	return bench_rss_anon();
}

/*
 * The dependent-load floor: n lines of BENCH_FLOOR_LINE bytes in one
 * random cycle (Sattolo), each holding the index of the next; a step is
 * one load whose address depends on the previous one, as each level of
 * a search structure is.  Over n lines it is what any structure that
 * touches one such line per registration cannot beat.
 */
#define BENCH_FLOOR_LINE 256

struct bench_floor_arg {
	char *lines;
	uint32_t pos;
};

static int bench_floor_loop(void *p, uint64_t iters)
{
	struct bench_floor_arg *a = p;
	uint32_t pos = a->pos;

	for (uint64_t i = 0; i < iters; i++)
		pos = *(volatile uint32_t *)(a->lines +
					     (size_t)pos * BENCH_FLOOR_LINE);
	a->pos = pos;
	bench_sink += pos;
	return 0;
}

static int bench_floor(uint64_t n, uint64_t iters, struct bench_res *r)
{
	struct bench_floor_arg a = { .pos = 0 };
	uint64_t seed = 0x2545f4914f6cdd1dULL;
	uint32_t *perm;
	int ret = -1;

	a.lines = bench_mmap(n * BENCH_FLOOR_LINE, 1);
	perm = malloc(n * sizeof(*perm));
	if (!a.lines || !perm)
		goto out;
	for (uint64_t i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	for (uint64_t i = n - 1; i > 0; i--) { /* Sattolo: one cycle */
		uint64_t j = bench_xorshift(&seed) % i;
		uint32_t t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	for (uint64_t i = 0; i < n; i++)
		*(uint32_t *)(a.lines + (size_t)perm[i] * BENCH_FLOOR_LINE) =
			perm[(i + 1) % n];
	ret = bench_run(bench_floor_loop, &a, iters, n < iters ? n : iters, r);
out:
	free(perm);
	if (a.lines)
		munmap(a.lines, n * BENCH_FLOOR_LINE);
	return ret;
}

#ifdef GDRC_BENCH_HAVE_UCX
struct bench_ucx_lookup_arg {
	ucs_rcache_t *rc;
	const struct bench_lookup_arg *a;
	uint64_t pos;
};

/* The same random pages as bench_random_loop, in UCX's rcache. */
static int bench_ucx_random_loop(void *p, uint64_t iters)
{
	struct bench_ucx_lookup_arg *u = p;
	uint64_t pos = u->pos;
	uintptr_t acc = 0;

	for (uint64_t i = 0; i < iters; i++) {
		void *addr = u->a->buf + u->a->order[pos] * BENCH_PAGE;
		ucs_rcache_region_t *reg;

		if (++pos == u->a->n)
			pos = 0;
		if (bench_unlikely(ucs_rcache_get(u->rc, addr, BENCH_RANGE,
						  PROT_READ | PROT_WRITE, NULL,
						  &reg) != UCS_OK)) {
			fprintf(stderr, "gdrc-bench: ucs_rcache_get failed\n");
			return -1;
		}
		acc += (uintptr_t)reg;
		ucs_rcache_region_put(u->rc, reg);
	}
	u->pos = pos;
	bench_sink += acc;
	return 0;
}

/* An rcache of UCX with no memory events, no limits, page alignment. */
static int bench_ucx_plain_create(ucs_rcache_t **rc_p, const char *name)
{
	ucs_rcache_params_t p;

	memset(&p, 0, sizeof(p));
	p.region_struct_size = sizeof(ucs_rcache_region_t);
	p.alignment = BENCH_PAGE;
	p.max_alignment = BENCH_PAGE;
	p.ops = &bench_ucx_ops;
	p.max_regions = ULONG_MAX;
	p.max_size = SIZE_MAX;
	p.max_unreleased = SIZE_MAX;
	if (ucs_rcache_create(&p, name, NULL, rc_p) != UCS_OK) {
		fprintf(stderr, "gdrc-bench: ucs_rcache_create failed\n");
		*rc_p = NULL;
		return -1;
	}
	return 0;
}

/* One get + put of len bytes at buf + i pages, i = 0 .. n - 1. */
static int bench_ucx_fill(ucs_rcache_t *rc, char *buf, uint64_t n,
			  size_t len)
{
	for (uint64_t i = 0; i < n; i++) {
		ucs_rcache_region_t *reg;

		if (ucs_rcache_get(rc, buf + i * BENCH_PAGE, len,
				   PROT_READ | PROT_WRITE, NULL, &reg) !=
		    UCS_OK) {
			fprintf(stderr, "gdrc-bench: ucs_rcache_get failed\n");
			return -1;
		}
		ucs_rcache_region_put(rc, reg);
	}
	return 0;
}

/*
 * UCX's rcache filled with the same n pages as a's context, beside it:
 * the resident bytes per registration of this fill alone (RssAnon
 * around it).  The caller destroys *rc_p (NULL if it was not created),
 * even when the fill failed.
 */
static int bench_ucx_lookup_fill(const struct bench_lookup_arg *a,
				 ucs_rcache_t **rc_p,
				 struct bench_lookup_res *r)
{
	long long rss0 = bench_rss_anon_trimmed(), rss1;

	if (bench_ucx_plain_create(rc_p, "gdrc-bench-lookup") ||
	    bench_ucx_fill(*rc_p, a->buf, a->n, BENCH_PAGE))
		return -1;
	rss1 = bench_rss_anon();
	r->ucx_bytes_per_reg = rss0 < 0 || rss1 < 0 ? -1 :
			       (double)(rss1 - rss0) / (double)a->n;
	return 0;
}
#endif

static int bench_lookup_one(uint64_t n, const struct bench_opts *o,
			    struct bench_lookup_res *r)
{
	uint64_t iters = BENCH_LOOKUP_ITERS / o->div;
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	struct bench_lookup_arg a = { .n = n };
	struct bench_hit_arg same = { .mask = 0 };
	bench_loop_fn ucx_fn = NULL;
	void *ucx_arg = NULL;
#ifdef GDRC_BENCH_HAVE_UCX
	struct bench_ucx_lookup_arg u = { .a = &a };
#endif
	double ins[BENCH_REPS];
	size_t len = n * BENCH_PAGE;
	uint32_t *order;
	uint64_t m0;
	int ret = -1;

	r->n = n;
	r->ucx_random_hit.valid = 0;
	r->ucx_bytes_per_reg = -1;
	order = malloc(n * sizeof(*order));
	if (!order) {
		fprintf(stderr, "gdrc-bench: out of memory\n");
		return -1;
	}
	for (uint64_t i = 0; i < n; i++)
		order[i] = (uint32_t)i;
	for (uint64_t i = n - 1; i > 0; i--) {
		uint64_t j = bench_xorshift(&seed) % (i + 1);
		uint32_t t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	a.order = order;
	a.buf = bench_mmap(len, 0);
	if (!a.buf)
		goto out_free;

	for (int rep = 0; rep < BENCH_REPS; rep++) {
		int keep = rep == BENCH_REPS - 1;
		long long rss0 = keep ? bench_rss_anon_trimmed() : 0, rss1;

		if (bench_populate(&a, &ins[rep], keep))
			goto out_unmap;
		if (!keep)
			continue;
		/* The kept context: what its n registrations cost (the
		 * others are gone when bench_populate returns). */
		rss1 = bench_rss_anon();
		r->bytes_per_reg = rss0 < 0 || rss1 < 0 ? -1 :
				   (double)(rss1 - rss0) / (double)n;
	}
	bench_summarize(ins, BENCH_REPS, 0, &r->insert);

	/* UCX's rcache over the same pages, filled after gdrcache's and
	 * kept beside it, so that the random-page hits of both are timed
	 * in alternating rounds on one state of the machine. */
#ifdef GDRC_BENCH_HAVE_UCX
	if (bench_ucx_lookup_fill(&a, &u.rc, r))
		goto out_fini;
	ucx_fn = bench_ucx_random_loop;
	ucx_arg = &u;
#endif
	if (bench_counter(a.ctx, GDRC_STAT_MISSES, &m0) ||
	    bench_alternate(bench_random_loop, &a, ucx_fn, ucx_arg, iters,
			    n < iters ? n : iters, &r->random_hit,
			    &r->ucx_random_hit) ||
	    bench_expect_misses(a.ctx, m0, 0, "lookup, random hits"))
		goto out_fini;

	same.ctx = a.ctx;
	same.addr[0] = a.buf + (n / 2) * BENCH_PAGE;
	if (bench_counter(a.ctx, GDRC_STAT_MISSES, &m0) ||
	    bench_run(bench_hit_loop, &same, iters, iters / 10,
		      &r->same_hit) ||
	    bench_expect_misses(a.ctx, m0, 0, "lookup, same-page hits"))
		goto out_fini;

	printf("%9llu %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n",
	       (unsigned long long)n, r->insert.best, r->insert.median,
	       r->random_hit.best, r->random_hit.median, r->same_hit.best,
	       r->same_hit.median);
	fflush(stdout);
	ret = 0;
out_fini:
#ifdef GDRC_BENCH_HAVE_UCX
	if (u.rc)
		ucs_rcache_destroy(u.rc);
#endif
	gdrc_fini(a.ctx);
	/* The floor is timed with both caches gone, on its own lines. */
	if (!ret && bench_floor(n, iters, &r->floor))
		ret = -1;
out_unmap:
	munmap(a.buf, len);
out_free:
	free(order);
	return ret;
}

/* e.'s loop that shares nothing: here, one thread's speed. */
static int bench_cpu_loop(void *p, uint64_t iters);

static int bench_lookup(const struct bench_opts *o, struct bench_results *res)
{
	uint64_t max_n = o->quick ? BENCH_LOOKUP_QUICK_N : BENCH_LOOKUP_MAX_N;

	/* The host's speed before the table; again after it. */
	if (bench_run(bench_cpu_loop, NULL, BENCH_CPU_ITERS,
		      BENCH_CPU_ITERS / 10, &res->cpu_loop))
		return -1;
	printf("\nd. lookup with n cached one-page registrations, ns per op\n");
	printf("%9s %19s %19s %19s\n", "", "insert (get+put)",
	       "random-page hit", "same-page hit");
	printf("%9s %9s %9s %9s %9s %9s %9s\n", "n", "best", "median", "best",
	       "median", "best", "median");
	for (uint64_t n = 1; n <= max_n && res->nlookup < BENCH_MAX_LOOKUP;
	     n *= 10) {
		if (bench_lookup_one(n, o, &res->lookup[res->nlookup]))
			return -1;
		res->nlookup++;
	}
	printf("\nd. random-page hit against UCX's ucs_rcache filled with the "
	       "same n pages\n(no memory events; timed in alternating rounds "
	       "with gdrcache's), and the\ndependent-load floor (one random "
	       "%d-byte line of n per step); medians,\nns; resident bytes "
	       "per cached registration (n >= 10000)\n", BENCH_FLOOR_LINE);
	printf("%9s %9s %9s %9s %9s %9s %9s %9s\n", "n", "gdrc", "ucx",
	       "gdrc/ucx", "floor", "gdrc/flr", "B/reg", "ucx B/reg");
	for (int i = 0; i < res->nlookup; i++) {
		const struct bench_lookup_res *l = &res->lookup[i];
		int ucx = l->ucx_random_hit.valid;
		char b[2][16] = { "-", "-" };

		if (l->n >= 10000 && l->bytes_per_reg >= 0)
			snprintf(b[0], sizeof(b[0]), "%.0f", l->bytes_per_reg);
		if (ucx && l->n >= 10000 && l->ucx_bytes_per_reg >= 0)
			snprintf(b[1], sizeof(b[1]), "%.0f",
				 l->ucx_bytes_per_reg);
		printf("%9llu %9.1f ", (unsigned long long)l->n,
		       l->random_hit.median);
		if (ucx)
			printf("%9.1f %9.2f ", l->ucx_random_hit.median,
			       l->random_hit.median / l->ucx_random_hit.median);
		else
			printf("%9s %9s ", "-", "-");
		printf("%9.1f %9.2f %9s %9s\n", l->floor.median,
		       l->random_hit.median / l->floor.median, b[0], b[1]);
	}
	if (bench_run(bench_cpu_loop, NULL, BENCH_CPU_ITERS,
		      BENCH_CPU_ITERS / 10, &res->cpu_loop_end))
		return -1;
	printf("d. cpu loop, ns per step: start %.2f, end %.2f (1 thread, "
	       "medians)\n", res->cpu_loop.median, res->cpu_loop_end.median);
	fflush(stdout);
	return 0;
}

/* ====================================================================
 * r. Hits rotating over many ranges, against UCX
 * ==================================================================== */

/*
 * One BENCH_RANGE-byte range at BENCH_OFFSET of each of BENCH_ROTATE_N
 * pages (GDRC_MAX_REGIONS's default: what a default context holds),
 * cached in a fresh context with room for exactly those and in UCX's
 * rcache beside it, then hit in address order, cycling: far more ranges
 * than a thread's remembered hits, so that every hit takes the lookup
 * path, but in an order that repeats, unlike d.'s.  Both are timed in
 * alternating rounds, as d.'s random-page hits are.
 */
static int bench_rotate(const struct bench_opts *o, struct bench_results *res)
{
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_MAX_REGIONS,
		.max_regions = BENCH_ROTATE_N,
	};
	uint64_t iters = BENCH_LOOKUP_ITERS / o->div, m0;
	struct bench_lookup_arg a = { .n = BENCH_ROTATE_N };
	size_t len = BENCH_ROTATE_N * BENCH_PAGE;
	const struct bench_res *g = &res->rotate16k, *u = &res->ucx_rotate16k;
	bench_loop_fn ucx_fn = NULL;
	void *ucx_arg = NULL;
#ifdef GDRC_BENCH_HAVE_UCX
	struct bench_ucx_lookup_arg ua = { .a = &a };
#endif
	uint32_t *order;
	char *buf;
	int ret = -1;

	/* bench_random_loop's walk, over the pages in address order. */
	order = malloc(BENCH_ROTATE_N * sizeof(*order));
	buf = bench_mmap(len, 0);
	if (!order || !buf)
		goto out;
	for (uint32_t i = 0; i < BENCH_ROTATE_N; i++)
		order[i] = i;
	a.order = order;
	a.buf = buf + BENCH_OFFSET;
	if (bench_check(gdrc_init(&cfg, &a.ctx), "gdrc_init (rotate)"))
		goto out;
	for (uint64_t i = 0; i < BENCH_ROTATE_N; i++)
		if (bench_prime(a.ctx, a.buf + i * BENCH_PAGE, BENCH_RANGE))
			goto out;
#ifdef GDRC_BENCH_HAVE_UCX
	if (bench_ucx_plain_create(&ua.rc, "gdrc-bench-rotate") ||
	    bench_ucx_fill(ua.rc, a.buf, BENCH_ROTATE_N, BENCH_RANGE))
		goto out;
	ucx_fn = bench_ucx_random_loop;
	ucx_arg = &ua;
#endif
	if (bench_counter(a.ctx, GDRC_STAT_MISSES, &m0) ||
	    bench_alternate(bench_random_loop, &a, ucx_fn, ucx_arg, iters,
			    iters / 10, &res->rotate16k, &res->ucx_rotate16k) ||
	    bench_expect_misses(a.ctx, m0, 0, "rotate, 16384 ranges"))
		goto out;

	printf("\nr. hits rotating over %lu cached ranges (%d bytes in each "
	       "of %lu pages, in\naddress order), in alternating rounds with "
	       "UCX's rcache in the same process\n", BENCH_ROTATE_N,
	       BENCH_RANGE, BENCH_ROTATE_N);
	printf("%-37s %10s %10s\n", "ns per get+put unless said", "best",
	       "median");
	printf("%-37s %10.2f %10.2f\n", "r. rotate 16384, gdrc", g->best,
	       g->median);
	if (u->valid) {
		printf("%-37s %10.2f %10.2f\n", "r. rotate 16384, ucx", u->best,
		       u->median);
		printf("%-37s %10.3f %10.3f\n",
		       "r. ratio gdrc/ucx, rotate 16384", g->best / u->best,
		       g->median / u->median);
	} else {
		printf("%-37s %10s %10s\n", "r. rotate 16384, ucx", "-", "-");
		printf("%-37s %10s %10s\n", "r. ratio gdrc/ucx, rotate 16384",
		       "-", "-");
	}
	/* One hot range: gdrcache's hit against b.'s, when both ran. */
	if (bench_hot_hit(res)->valid && res->ucx_hit.valid)
		printf("%-37s %10.3f %10.3f\n", "r. hot range ratio (b.)",
		       bench_hot_hit(res)->best / res->ucx_hit.best,
		       bench_hot_hit(res)->median / res->ucx_hit.median);
	else
		printf("%-37s %10s %10s\n", "r. hot range ratio (b.)", "-",
		       "-");
	fflush(stdout);
	ret = 0;
out:
#ifdef GDRC_BENCH_HAVE_UCX
	if (ua.rc)
		ucs_rcache_destroy(ua.rc);
#endif
	gdrc_fini(a.ctx);
	if (buf)
		munmap(buf, len);
	free(order);
	if (ret && !order)
		fprintf(stderr, "gdrc-bench: out of memory\n");
	return ret;
}

/* ====================================================================
 * e. Hit throughput with threads
 * ==================================================================== */

struct bench_thr_ctl {
	struct gdrc_ctx *ctx;
#ifdef GDRC_BENCH_HAVE_UCX
	ucs_rcache_t *rc;
#endif
	char *buf;
	int private;
	int ucx;
	int cpu;             /* the CPU-bound loop instead of hits */
	uint64_t run_ns;
	pthread_barrier_t barrier;
	_Atomic int stop;
};

struct bench_thr_arg {
	struct bench_thr_ctl *ctl;
	pthread_t tid;
	int idx;
	int err;
	uint64_t ops;
	uint64_t t0;
	uint64_t t1;
};

/*
 * What the machine's CPUs give when nothing is shared: a chain of
 * dependent additions, a get+put's worth per iteration, timed as the
 * hits are.  On the GPU machine's VM one vCPU runs such a chain 1.1 to
 * 2.9 times as fast as another, and a single thread lands on either, so
 * the hits' ratio is read against this loop's ratio at the same T.
 */
static int bench_cpu_loop(void *p, uint64_t iters)
{
	uint64_t x = (uintptr_t)p;

	for (uint64_t i = 0; i < iters * 32; i++) {
		x += 1;
		__asm__ volatile("" : "+r"(x));
	}
	return 0;
}

static void *bench_thr_main(void *p)
{
	struct bench_thr_arg *t = p;
	struct bench_thr_ctl *ctl = t->ctl;
	char *addr = ctl->buf + BENCH_OFFSET +
		     (ctl->private ? (uint64_t)t->idx * BENCH_PAGE : 0);
	struct bench_hit_arg hit = { .ctx = ctl->ctx, .addr = { addr } };
	bench_loop_fn fn = bench_hit_loop;
	void *arg = &hit;
#ifdef GDRC_BENCH_HAVE_UCX
	struct bench_ucx_arg ucx = { .rc = ctl->rc, .addr = addr };

	if (ctl->ucx) {
		fn = bench_ucx_loop;
		arg = &ucx;
	}
#endif
	if (ctl->cpu)
		fn = bench_cpu_loop;
	/* Warm up: this thread's first hit goes through the tree. */
	t->err = fn(arg, 1000);
	pthread_barrier_wait(&ctl->barrier);
	if (t->err)
		return NULL;
	t->t0 = bench_now_ns();
	do {
		t->err = fn(arg, BENCH_THR_STEP);
		t->ops += BENCH_THR_STEP;
	} while (!t->err &&
		 !atomic_load_explicit(&ctl->stop, memory_order_relaxed));
	t->t1 = bench_now_ns();
	return NULL;
}

/*
 * One run of T threads: total M get+put per second.  Every thread runs
 * until the main thread, run_ns after the start, says stop; the total is
 * every thread's gets over the time from the first start to the last
 * stop.  (A fixed count per thread, timed the same way, counted one
 * thread's late start or preemption as idle time of all the others,
 * which had finished: at 16 threads on the GPU machine's VM the ratio
 * moved with it from run to run.)
 */
static int bench_thr_once(struct bench_thr_ctl *ctl, int nthreads,
			  double *mops)
{
	struct bench_thr_arg t[BENCH_MAX_THREADS];
	struct timespec run = { .tv_sec = (time_t)(ctl->run_ns / 1000000000),
				.tv_nsec = (long)(ctl->run_ns % 1000000000) };
	uint64_t t0 = UINT64_MAX, t1 = 0, ops = 0;
	int err = 0, n;

	atomic_store(&ctl->stop, 0);
	if (pthread_barrier_init(&ctl->barrier, NULL, nthreads + 1)) {
		perror("gdrc-bench: pthread_barrier_init");
		return -1;
	}
	for (n = 0; n < nthreads; n++) {
		t[n] = (struct bench_thr_arg){ .ctl = ctl, .idx = n };
		if (pthread_create(&t[n].tid, NULL, bench_thr_main, &t[n])) {
			/* The threads started wait at the barrier for
			 * the others forever: give up. */
			fprintf(stderr, "gdrc-bench: pthread_create failed\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&ctl->barrier);
	nanosleep(&run, NULL);
	atomic_store(&ctl->stop, 1);
	for (int i = 0; i < n; i++) {
		pthread_join(t[i].tid, NULL);
		err |= t[i].err;
		ops += t[i].ops;
		if (t[i].t0 < t0)
			t0 = t[i].t0;
		if (t[i].t1 > t1)
			t1 = t[i].t1;
	}
	pthread_barrier_destroy(&ctl->barrier);
	if (err)
		return -1;
	*mops = (double)ops * 1e3 / (double)(t1 - t0);
	return 0;
}

static int bench_thr_run(struct bench_thr_ctl *ctl, int nthreads,
			 struct bench_res *r)
{
	double s[BENCH_REPS];

	for (int i = 0; i < BENCH_REPS; i++)
		if (bench_thr_once(ctl, nthreads, &s[i]))
			return -1;
	bench_summarize(s, BENCH_REPS, 1, r);
	return 0;
}

/* Thread counts: 1, 2, N, and 4 and 8 when N < 8; sorted, unique. */
static int bench_thread_counts(long ncpu, int *counts)
{
	int want[6] = { 1, 2, (int)(ncpu < BENCH_MAX_THREADS ? ncpu :
					BENCH_MAX_THREADS), 0, 0, 0 };
	int n = 0;

	if (ncpu < 8) {
		want[3] = 4;
		want[4] = 8;
	}
	if (ncpu > 16)
		want[5] = 16; /* issue 16's row, on a larger machine too */
	for (int t = 1; t <= BENCH_MAX_THREADS; t++)
		for (int i = 0; i < 6; i++)
			if (want[i] == t) {
				counts[n++] = t;
				break;
			}
	return n;
}

static int bench_threads(struct gdrc_ctx *ctx, void *rc, char *buf,
			 const struct bench_opts *o, struct bench_results *res)
{
	struct bench_thr_ctl ctl = { .ctx = ctx, .buf = buf };
	int counts[BENCH_MAX_THR_ROWS], ncounts, ucx = 0;
	double cpu_ratio[BENCH_MAX_THR_ROWS], cpu_base = 0;
	uint64_t m0;

#ifdef GDRC_BENCH_HAVE_UCX
	ctl.rc = rc;
	ucx = rc != NULL;
#else
	(void)rc;
#endif
	ncounts = bench_thread_counts(res->machine.ncpu, counts);
	/* Cache every page a thread will use, from this thread. */
	for (int i = 0; i < counts[ncounts - 1]; i++)
		if (bench_prime(ctx, buf + i * BENCH_PAGE + BENCH_OFFSET,
				BENCH_RANGE))
			return -1;

	printf("\ne. hit throughput with threads, M get+put/s "
	       "(%ld CPUs online); cpu: a loop that shares nothing (M loops/s),\n"
	       "eff: m.ratio over cpu's m.ratio at the same threads\n",
	       res->machine.ncpu);
	printf("%-8s %7s %-8s %9s %9s %7s %7s %6s %9s %9s %7s\n", "mode",
	       "threads", "", "gdrc", "median", "ratio", "m.ratio", "eff",
	       "ucx", "median", "ratio");
	ctl.cpu = 1;
	ctl.run_ns = BENCH_THR_NS / o->div;
	for (int i = 0; i < ncounts; i++) {
		struct bench_res cpu;

		if (bench_thr_run(&ctl, counts[i], &cpu))
			return -1;
		if (i == 0)
			cpu_base = cpu.median;
		cpu_ratio[i] = cpu.median / cpu_base;
		printf("%-8s %7d %-8s %9.2f %9.2f %6.2fx %6.2fx\n", "cpu",
		       counts[i], counts[i] > res->machine.ncpu ? "oversub" : "",
		       cpu.best, cpu.median, cpu.best / cpu_base,
		       cpu_ratio[i]);
	}
	ctl.cpu = 0;
	for (int mode = 0; mode < 2; mode++) {
		double base = 0, median_base = 0, ucx_base = 0;

		ctl.private = mode;
		for (int i = 0; i < ncounts; i++) {
			struct bench_thr_res *r = &res->thr[res->nthr];

			r->private = mode;
			r->threads = counts[i];
			r->oversub = counts[i] > res->machine.ncpu;
			ctl.ucx = 0;
			ctl.run_ns = BENCH_THR_NS / o->div;
			if (bench_counter(ctx, GDRC_STAT_MISSES, &m0) ||
			    bench_thr_run(&ctl, counts[i], &r->mops) ||
			    bench_expect_misses(ctx, m0, 0, "thread hits"))
				return -1;
			if (i == 0) {
				base = r->mops.best;
				median_base = r->mops.median;
			}
			r->ratio = r->mops.best / base;
			r->median_ratio = r->mops.median / median_base;
			r->cpu_ratio = cpu_ratio[i];
			if (ucx) {
				ctl.ucx = 1;
				if (bench_thr_run(&ctl, counts[i],
						  &r->ucx_mops))
					return -1;
				if (i == 0)
					ucx_base = r->ucx_mops.best;
				r->ucx_ratio = r->ucx_mops.best / ucx_base;
			}
			res->nthr++;
			printf("%-8s %7d %-8s %9.2f %9.2f %6.2fx %6.2fx %6.2f",
			       mode ? "private" : "shared", r->threads,
			       r->oversub ? "oversub" : "", r->mops.best,
			       r->mops.median, r->ratio, r->median_ratio,
			       r->median_ratio / r->cpu_ratio);
			if (ucx)
				printf(" %9.2f %9.2f %6.2fx\n",
				       r->ucx_mops.best, r->ucx_mops.median,
				       r->ucx_ratio);
			else
				printf(" %9s %9s %7s\n", "-", "-", "-");
			fflush(stdout);
		}
	}
	return 0;
}

/* ====================================================================
 * g. GPU
 * ==================================================================== */

/*
 * The CUDA driver is opened at run time, as libgdrcache opens it, so that
 * building the benchmark needs no CUDA toolkit.  These types and values
 * are the driver ABI (checked by hand against cuda.h of CUDA 13.0); the
 * entry points are the exported names, with the _v2 suffix where cuda.h
 * maps the API name to one.  The legacy default-stream names are used:
 * the stream here is an explicit one anyway.
 */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

/* CUmemAllocationProp and CUmemAccessDesc of cuda.h 13.0 (type, handle
 * types, location {type, id}, win32 metadata, allocFlags {compression,
 * gpuDirectRDMACapable, usage, reserved[4]}; location, flags), padded:
 * the driver reads its own size of them, no more. */
struct bench_mem_prop {
	int type;		/* CU_MEM_ALLOCATION_TYPE_PINNED */
	int handle_types;
	int loc_type;		/* CU_MEM_LOCATION_TYPE_DEVICE */
	int loc_id;
	void *win32;
	unsigned char compression;
	unsigned char rdma_capable;
	unsigned short usage;
	unsigned char reserved[4];
	unsigned char pad[32];
};

struct bench_mem_access {
	int loc_type;
	int loc_id;
	int flags;		/* CU_MEM_ACCESS_FLAGS_PROT_READWRITE */
	unsigned char pad[32];
};

#define BENCH_CUDA_SUCCESS 0
#define BENCH_CUDA_ERROR_STUB_LIBRARY 34
#define BENCH_CUDA_ERROR_NO_DEVICE 100
#define BENCH_CUDA_ERROR_NOT_SUPPORTED 801
#define BENCH_CU_POINTER_ATTRIBUTE_BUFFER_ID 7
#define BENCH_CU_STREAM_NON_BLOCKING 0x1
#define BENCH_CU_MEM_ALLOCATION_TYPE_PINNED 1
#define BENCH_CU_MEM_LOCATION_TYPE_DEVICE 1
#define BENCH_CU_MEM_ACCESS_FLAGS_PROT_READWRITE 3
#define BENCH_CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED 126

struct bench_cuda {
	CUresult (*cuInit)(unsigned flags);
	CUresult (*cuDriverGetVersion)(int *version);
	CUresult (*cuDeviceGetCount)(int *count);
	CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
	CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
	CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
	CUresult (*cuCtxSetCurrent)(CUcontext ctx);
	CUresult (*cuMemAlloc)(CUdeviceptr *p, size_t size);
	CUresult (*cuMemFree)(CUdeviceptr p);
	CUresult (*cuMemHostAlloc)(void **p, size_t size, unsigned flags);
	CUresult (*cuMemFreeHost)(void *p);
	CUresult (*cuStreamCreate)(CUstream *stream, unsigned flags);
	CUresult (*cuStreamDestroy)(CUstream stream);
	CUresult (*cuStreamSynchronize)(CUstream stream);
	CUresult (*cuMemAllocAsync)(CUdeviceptr *p, size_t size,
				    CUstream stream);
	CUresult (*cuMemFreeAsync)(CUdeviceptr p, CUstream stream);
	CUresult (*cuPointerGetAttribute)(void *data, int attr, CUdeviceptr p);
	CUresult (*cuGetErrorName)(CUresult res, const char **name);
	CUresult (*cuDeviceGetAttribute)(int *value, int attr, CUdevice dev);
	CUresult (*cuMemGetAllocationGranularity)(
		size_t *gran, const struct bench_mem_prop *prop, int option);
	CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *h, size_t size,
				const struct bench_mem_prop *prop,
				unsigned long long flags);
	CUresult (*cuMemRelease)(CUmemGenericAllocationHandle h);
	CUresult (*cuMemAddressReserve)(CUdeviceptr *p, size_t size,
					size_t align, CUdeviceptr addr,
					unsigned long long flags);
	CUresult (*cuMemAddressFree)(CUdeviceptr p, size_t size);
	CUresult (*cuMemMap)(CUdeviceptr p, size_t size, size_t offset,
			     CUmemGenericAllocationHandle h,
			     unsigned long long flags);
	CUresult (*cuMemUnmap)(CUdeviceptr p, size_t size);
	CUresult (*cuMemSetAccess)(CUdeviceptr p, size_t size,
				   const struct bench_mem_access *desc,
				   size_t count);
};

#define BENCH_CU_SYM(field, name) { name, offsetof(struct bench_cuda, field) }

static const struct {
	const char *name;
	size_t offset;
} bench_cu_syms[] = {
	BENCH_CU_SYM(cuInit, "cuInit"),
	BENCH_CU_SYM(cuDriverGetVersion, "cuDriverGetVersion"),
	BENCH_CU_SYM(cuDeviceGetCount, "cuDeviceGetCount"),
	BENCH_CU_SYM(cuDeviceGet, "cuDeviceGet"),
	BENCH_CU_SYM(cuDeviceGetName, "cuDeviceGetName"),
	BENCH_CU_SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
	BENCH_CU_SYM(cuDevicePrimaryCtxRelease,
		     "cuDevicePrimaryCtxRelease_v2"),
	BENCH_CU_SYM(cuCtxSetCurrent, "cuCtxSetCurrent"),
	BENCH_CU_SYM(cuMemAlloc, "cuMemAlloc_v2"),
	BENCH_CU_SYM(cuMemFree, "cuMemFree_v2"),
	BENCH_CU_SYM(cuMemHostAlloc, "cuMemHostAlloc"),
	BENCH_CU_SYM(cuMemFreeHost, "cuMemFreeHost"),
	BENCH_CU_SYM(cuStreamCreate, "cuStreamCreate"),
	BENCH_CU_SYM(cuStreamDestroy, "cuStreamDestroy_v2"),
	BENCH_CU_SYM(cuStreamSynchronize, "cuStreamSynchronize"),
	BENCH_CU_SYM(cuMemAllocAsync, "cuMemAllocAsync"),
	BENCH_CU_SYM(cuMemFreeAsync, "cuMemFreeAsync"),
	BENCH_CU_SYM(cuPointerGetAttribute, "cuPointerGetAttribute"),
	BENCH_CU_SYM(cuGetErrorName, "cuGetErrorName"),
	BENCH_CU_SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
	BENCH_CU_SYM(cuMemGetAllocationGranularity,
		     "cuMemGetAllocationGranularity"),
	BENCH_CU_SYM(cuMemCreate, "cuMemCreate"),
	BENCH_CU_SYM(cuMemRelease, "cuMemRelease"),
	BENCH_CU_SYM(cuMemAddressReserve, "cuMemAddressReserve"),
	BENCH_CU_SYM(cuMemAddressFree, "cuMemAddressFree"),
	BENCH_CU_SYM(cuMemMap, "cuMemMap"),
	BENCH_CU_SYM(cuMemUnmap, "cuMemUnmap"),
	BENCH_CU_SYM(cuMemSetAccess, "cuMemSetAccess"),
};

/* The driver's entry points; filled by bench_gpu_open. */
static struct bench_cuda bench_cu;

/* What g. holds while it runs; bench_gpu_close releases all of it. */
struct bench_gpu {
	CUdevice dev;		/* the device measured */
	CUcontext cu_ctx;	/* its primary context, retained */
	CUdevice home_dev;	/* device 0, when dev is another one */
	CUcontext home;		/* device 0's primary context, or NULL */
	CUstream stream;	/* for the pool allocation */
	CUdeviceptr dev_buf;	/* cuMemAlloc: tag query, hits, misses */
	CUdeviceptr unreg_buf;	/* cuMemAlloc, never registered: classify */
	CUdeviceptr pool_buf;	/* cuMemAllocAsync */
	void *pinned_buf;	/* cuMemHostAlloc */
	CUdeviceptr vmm_va;	/* BENCH_VMM_MAPS mappings of vmm_gran */
	size_t vmm_gran;
	CUmemGenericAllocationHandle vmm_h[3];
	int vmm_created;	/* how many of vmm_h exist */
	int vmm_mapped;		/* how many of them are mapped */
	struct gdrc_ctx *always; /* GDRC_VALIDATE=always */
	struct gdrc_ctx *hooks;	 /* GDRC_VALIDATE=hooks */
	struct gdrc_ctx *plain;	 /* as the environment says: misses */
};

static const char *bench_gpu_errname(CUresult res)
{
	static char buf[32];
	const char *name = NULL;

	if (bench_cu.cuGetErrorName &&
	    bench_cu.cuGetErrorName(res, &name) == BENCH_CUDA_SUCCESS && name)
		return name;
	snprintf(buf, sizeof(buf), "CUresult %d", res);
	return buf;
}

/* @return 0 for CUDA_SUCCESS, else print what failed and return -1. */
static int bench_gpu_check(CUresult res, const char *what)
{
	if (res == BENCH_CUDA_SUCCESS)
		return 0;
	fprintf(stderr, "gdrc-bench: %s failed: %s (%d)\n", what,
		bench_gpu_errname(res), res);
	return -1;
}

/* The driver, once loaded; an initialised one is never closed (it keeps
 * threads and exit handlers, and libgdrcache holds it too). */
static void *bench_cu_handle;
static int bench_cu_inited;

/*
 * Open the driver libgdrcache opens (GDRC_CUDA_LIBRARY, default
 * libcuda.so.1; with another one the cache would classify pointers with a
 * driver that did not allocate them) and initialise it.
 * @return 0: ready, *ndev devices; 1: no usable driver or no device (a
 *         skip, the reason in why); -1: the driver failed.
 */
static int bench_cuda_load(int *driver, int *ndev, char *why, size_t len)
{
	const char *path = getenv("GDRC_CUDA_LIBRARY");
	CUresult res;

	if (path && !strcmp(path, "none")) {
		snprintf(why, len, "GDRC_CUDA_LIBRARY=none");
		return 1;
	}
	if (!path || !*path)
		path = "libcuda.so.1";
	bench_cu_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!bench_cu_handle) {
		snprintf(why, len, "no CUDA driver: %s", dlerror());
		return 1;
	}
	for (size_t i = 0; i < sizeof(bench_cu_syms) / sizeof(bench_cu_syms[0]);
	     i++) {
		void *fn = dlsym(bench_cu_handle, bench_cu_syms[i].name);

		if (!fn) {
			/* Too old for stream-ordered allocation (11.2). */
			snprintf(why, len, "%s lacks %s", path,
				 bench_cu_syms[i].name);
			return 1;
		}
		memcpy((char *)&bench_cu + bench_cu_syms[i].offset, &fn,
		       sizeof(fn));
	}
	res = bench_cu.cuInit(0);
	if (res == BENCH_CUDA_ERROR_NO_DEVICE ||
	    res == BENCH_CUDA_ERROR_STUB_LIBRARY) {
		snprintf(why, len, "cuInit: %s", bench_gpu_errname(res));
		return 1;
	}
	if (bench_gpu_check(res, "cuInit"))
		return -1;
	bench_cu_inited = 1;
	if (bench_gpu_check(bench_cu.cuDriverGetVersion(driver),
			    "cuDriverGetVersion") ||
	    bench_gpu_check(bench_cu.cuDeviceGetCount(ndev),
			    "cuDeviceGetCount"))
		return -1;
	if (*ndev < 1) {
		snprintf(why, len, "no CUDA device");
		return 1;
	}
	return 0;
}

static void bench_cuda_unload(void)
{
	if (bench_cu_handle && !bench_cu_inited)
		dlclose(bench_cu_handle);
	bench_cu_handle = NULL;
}

/*
 * Device ordinal's primary context, retained and made current on this
 * thread, where everything of g. runs; for a device other than 0, device
 * 0's too (retained, for the hits from its thread).  @return 0 or -1.
 */
static int bench_gpu_open(struct bench_gpu *g, struct bench_gpu_res *r,
			  int ordinal)
{
	r->ordinal = ordinal;
	if (bench_gpu_check(bench_cu.cuDeviceGet(&g->dev, ordinal),
			    "cuDeviceGet") ||
	    bench_gpu_check(bench_cu.cuDeviceGetName(r->device,
						     sizeof(r->device),
						     g->dev),
			    "cuDeviceGetName") ||
	    bench_gpu_check(bench_cu.cuDevicePrimaryCtxRetain(&g->cu_ctx,
							      g->dev),
			    "cuDevicePrimaryCtxRetain"))
		return -1;
	if (ordinal &&
	    (bench_gpu_check(bench_cu.cuDeviceGet(&g->home_dev, 0),
			     "cuDeviceGet") ||
	     bench_gpu_check(bench_cu.cuDevicePrimaryCtxRetain(&g->home,
							       g->home_dev),
			     "cuDevicePrimaryCtxRetain")))
		return -1;
	return bench_gpu_check(bench_cu.cuCtxSetCurrent(g->cu_ctx),
			       "cuCtxSetCurrent");
}

/*
 * A context with GDRC_VALIDATE=mode (NULL: whatever the environment
 * says).  The knob is read by gdrc_init alone, so it is set around that
 * call only, and the user's own value, if any, is put back.
 */
static int bench_gpu_ctx(const char *mode, struct gdrc_ctx **ctx_p)
{
	const char *old = getenv("GDRC_VALIDATE");
	char *saved = NULL;
	gdrc_status_t s;

	if (mode && old && !(saved = strdup(old))) {
		fprintf(stderr, "gdrc-bench: out of memory\n");
		return -1;
	}
	if (mode && setenv("GDRC_VALIDATE", mode, 1)) {
		perror("gdrc-bench: setenv GDRC_VALIDATE");
		free(saved);
		return -1;
	}
	s = gdrc_init(NULL, ctx_p);
	if (mode) {
		if (saved)
			setenv("GDRC_VALIDATE", saved, 1);
		else
			unsetenv("GDRC_VALIDATE");
	}
	free(saved);
	return bench_check(s, "gdrc_init (gpu)");
}

/* The allocations the measurements use, one of each kind. */
static int bench_gpu_alloc(struct bench_gpu *g, struct bench_gpu_res *r)
{
	CUresult res;

	if (bench_gpu_check(bench_cu.cuMemAlloc(&g->dev_buf, BENCH_GPU_BUF),
			    "cuMemAlloc") ||
	    bench_gpu_check(bench_cu.cuMemAlloc(&g->unreg_buf, BENCH_GPU_BUF),
			    "cuMemAlloc") ||
	    bench_gpu_check(bench_cu.cuMemHostAlloc(&g->pinned_buf,
						    BENCH_GPU_BUF, 0),
			    "cuMemHostAlloc") ||
	    bench_gpu_check(bench_cu.cuStreamCreate(&g->stream,
						    BENCH_CU_STREAM_NON_BLOCKING),
			    "cuStreamCreate"))
		return -1;
	res = bench_cu.cuMemAllocAsync(&g->pool_buf, BENCH_GPU_BUF, g->stream);
	if (res == BENCH_CUDA_ERROR_NOT_SUPPORTED) {
		/* A device without memory pools: that row stays null. */
		g->pool_buf = 0;
		printf("g. (pool memory not supported on %s: no pool row)\n",
		       r->device);
		return 0;
	}
	if (bench_gpu_check(res, "cuMemAllocAsync"))
		return -1;
	/* The pointer is usable (and classifiable) once the allocation
	 * has happened on the stream. */
	return bench_gpu_check(bench_cu.cuStreamSynchronize(g->stream),
			       "cuStreamSynchronize");
}

/* Release everything bench_gpu_open, _ctx and _alloc took; contexts
 * first, as they describe the memory freed after them. */
static int bench_gpu_close(struct bench_gpu *g)
{
	int ret = 0;

	gdrc_fini(g->always);
	gdrc_fini(g->hooks);
	gdrc_fini(g->plain);
	for (int i = 0; i < g->vmm_mapped; i++)
		ret |= bench_gpu_check(bench_cu.cuMemUnmap(g->vmm_va +
							   i * g->vmm_gran,
							   g->vmm_gran),
				       "cuMemUnmap");
	for (int i = 0; i < g->vmm_created; i++)
		ret |= bench_gpu_check(bench_cu.cuMemRelease(g->vmm_h[i]),
				       "cuMemRelease");
	if (g->vmm_va)
		ret |= bench_gpu_check(bench_cu.cuMemAddressFree(
					       g->vmm_va, 3 * g->vmm_gran),
				       "cuMemAddressFree");
	if (g->dev_buf)
		ret |= bench_gpu_check(bench_cu.cuMemFree(g->dev_buf),
				       "cuMemFree");
	if (g->unreg_buf)
		ret |= bench_gpu_check(bench_cu.cuMemFree(g->unreg_buf),
				       "cuMemFree");
	if (g->pool_buf)
		ret |= bench_gpu_check(bench_cu.cuMemFreeAsync(g->pool_buf,
							       g->stream),
				       "cuMemFreeAsync") |
		       bench_gpu_check(bench_cu.cuStreamSynchronize(g->stream),
				       "cuStreamSynchronize");
	if (g->pinned_buf)
		ret |= bench_gpu_check(bench_cu.cuMemFreeHost(g->pinned_buf),
				       "cuMemFreeHost");
	if (g->stream)
		ret |= bench_gpu_check(bench_cu.cuStreamDestroy(g->stream),
				       "cuStreamDestroy");
	if (g->cu_ctx)
		ret |= bench_gpu_check(bench_cu.cuCtxSetCurrent(NULL),
				       "cuCtxSetCurrent") |
		       bench_gpu_check(bench_cu.cuDevicePrimaryCtxRelease(
					       g->dev),
				       "cuDevicePrimaryCtxRelease");
	if (g->home)
		ret |= bench_gpu_check(bench_cu.cuDevicePrimaryCtxRelease(
					       g->home_dev),
				       "cuDevicePrimaryCtxRelease");
	return ret ? -1 : 0;
}

struct bench_gpu_tag_arg {
	CUdeviceptr addr;
};

/* The bare tag query a validated GPU hit adds. */
static int bench_gpu_tag_loop(void *p, uint64_t iters)
{
	struct bench_gpu_tag_arg *a = p;
	unsigned long long acc = 0;

	for (uint64_t i = 0; i < iters; i++) {
		unsigned long long id = 0;
		CUresult res;

		res = bench_cu.cuPointerGetAttribute(
			&id, BENCH_CU_POINTER_ATTRIBUTE_BUFFER_ID, a->addr);
		if (bench_unlikely(res != BENCH_CUDA_SUCCESS))
			return bench_gpu_check(res,
					       "cuPointerGetAttribute(BUFFER_ID)");
		acc += id;
	}
	bench_sink += acc;
	return 0;
}

/* Gets timed in batches, their puts outside the timing. */
#define BENCH_GET_BATCH 1024

/* iters hits on a->addr[0] (always mode), in ns: the gets alone. */
static int bench_gpu_get_alone(struct bench_hit_arg *a, uint64_t iters,
			       double *ns)
{
	static struct gdrc_mr *mrs[BENCH_GET_BATCH];
	uint64_t total = 0;

	for (uint64_t done = 0; done < iters; done += BENCH_GET_BATCH) {
		uint64_t n = iters - done < BENCH_GET_BATCH ?
				     iters - done : BENCH_GET_BATCH;
		uint64_t t0 = bench_now_ns();

		for (uint64_t i = 0; i < n; i++) {
			gdrc_status_t s = gdrc_mr_get(a->ctx, a->addr[0],
						      BENCH_RANGE,
						      BENCH_ACCESS, 0,
						      &mrs[i]);

			if (bench_unlikely(s != GDRC_OK))
				return bench_check(s, "gdrc_mr_get (alone)");
		}
		total += bench_now_ns() - t0;
		for (uint64_t i = 0; i < n; i++)
			gdrc_mr_put(a->ctx, mrs[i]);
	}
	*ns = (double)total;
	return 0;
}

/* As bench_pair, with the get alone against the bare tag query. */
static int bench_pair_get_alone(struct bench_gpu_tag_arg *tag,
				struct bench_hit_arg *hit, uint64_t iters,
				struct bench_res *r)
{
	double s[BENCH_PAIRS], get_ns = 0;

	for (int i = 0; i < BENCH_PAIRS; i++) {
		uint64_t t0, t1;

		if ((i & 1) && bench_gpu_get_alone(hit, iters, &get_ns))
			return -1;
		t0 = bench_now_ns();
		if (bench_gpu_tag_loop(tag, iters))
			return -1;
		t1 = bench_now_ns();
		if (!(i & 1) && bench_gpu_get_alone(hit, iters, &get_ns))
			return -1;
		s[i] = get_ns / (double)(t1 - t0);
	}
	bench_summarize(s, BENCH_PAIRS, 0, r);
	return 0;
}

struct bench_gpu_miss_arg {
	struct gdrc_ctx *ctx;
	const char *addr;
};

/* get + put + gdrc_invalidate of one range: every get misses, and so
 * classifies the pointer again. */
static int bench_gpu_miss_loop(void *p, uint64_t iters)
{
	struct bench_gpu_miss_arg *a = p;
	uintptr_t acc = 0;

	for (uint64_t i = 0; i < iters; i++) {
		struct gdrc_mr *mr;
		gdrc_status_t s;

		s = gdrc_mr_get(a->ctx, a->addr, BENCH_RANGE, BENCH_ACCESS, 0,
				&mr);
		if (bench_unlikely(s != GDRC_OK))
			return bench_check(s, "gdrc_mr_get (gpu miss)");
		acc += (uintptr_t)mr;
		gdrc_mr_put(a->ctx, mr);
		s = gdrc_invalidate(a->ctx, a->addr, BENCH_RANGE);
		if (bench_unlikely(s != GDRC_OK))
			return bench_check(s, "gdrc_invalidate (gpu)");
	}
	bench_sink += acc;
	return 0;
}

/* gdrc_ptr_query of a pointer no registration covers. */
static int bench_gpu_classify_loop(void *p, uint64_t iters)
{
	struct bench_gpu_miss_arg *a = p;
	uint64_t acc = 0;

	for (uint64_t i = 0; i < iters; i++) {
		struct gdrc_ptr_info info;
		gdrc_status_t s;

		s = gdrc_ptr_query(a->ctx, a->addr, &info);
		if (bench_unlikely(s != GDRC_OK))
			return bench_check(s, "gdrc_ptr_query");
		acc += info.buffer_id + info.flags;
	}
	bench_sink += acc;
	return 0;
}

/* Warn when counter stat of ctx did not grow by expected (the number
 * then would not measure what its label says). */
static int bench_gpu_expect(struct gdrc_ctx *ctx, enum gdrc_stat stat,
			    uint64_t before, uint64_t expected,
			    const char *what)
{
	uint64_t now;

	if (bench_counter(ctx, stat, &now))
		return -1;
	if (now - before != expected)
		printf("WARNING: %s: %s grew by %llu, expected %llu\n", what,
		       gdrc_stat_name(stat), (unsigned long long)(now - before),
		       (unsigned long long)expected);
	return 0;
}

/* Warn unless ctx classifies addr as kind. */
static int bench_gpu_expect_kind(struct gdrc_ctx *ctx, const void *addr,
				 int kind, const char *what)
{
	struct gdrc_ptr_info info;

	if (bench_check(gdrc_ptr_query(ctx, addr, &info), "gdrc_ptr_query"))
		return -1;
	if (info.kind != kind)
		printf("WARNING: %s: classified as kind %d, expected %d\n",
		       what, info.kind, kind);
	return 0;
}

static void bench_gpu_line(const char *label, const struct bench_res *r)
{
	printf("%-37s %10.2f %10.2f\n", label, r->best, r->median);
	fflush(stdout);
}

static void bench_gpu_ratio(const char *label, const struct bench_res *num,
			    const struct bench_res *den)
{
	printf("%-37s %10.3f %10.3f\n", label, num->best / den->best,
	       num->median / den->median);
	fflush(stdout);
}

/*
 * Hits on addr in ctx.  The first get is the miss that classifies the
 * allocation and caches it whole; only hits are timed.  tag_checked: the
 * context validates hits (GDRC_VALIDATE=always), so each one must make
 * exactly one BUFFER_ID query; otherwise none.
 */
static int bench_gpu_hit(struct gdrc_ctx *ctx, const char *addr,
			 int tag_checked, uint64_t iters, const char *what,
			 struct bench_res *r)
{
	struct bench_hit_arg a = { .ctx = ctx, .addr = { addr }, .mask = 0 };
	uint64_t warm = iters / 10, m0, t0;
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;
	gdrc_status_t s;

	if (bench_check(gdrc_mr_get(ctx, addr, BENCH_RANGE, BENCH_ACCESS, 0,
				    &mr), "gdrc_mr_get (gpu, first)"))
		return -1;
	s = gdrc_mr_query(mr, &info);
	gdrc_mr_put(ctx, mr);
	if (bench_check(s, "gdrc_mr_query"))
		return -1;
	if (info.mem_type != GDRC_MEM_CUDA ||
	    !(info.flags & GDRC_MR_INFO_TAG_CHECKED) != !tag_checked)
		printf("WARNING: %s: registered as mem_type %d, flags %#x\n",
		       what, info.mem_type, info.flags);
	if (bench_counter(ctx, GDRC_STAT_MISSES, &m0) ||
	    bench_counter(ctx, GDRC_STAT_TAG_CHECKS, &t0) ||
	    bench_run(bench_hit_loop, &a, iters, warm, r) ||
	    bench_expect_misses(ctx, m0, 0, what) ||
	    bench_gpu_expect(ctx, GDRC_STAT_TAG_CHECKS, t0,
			     tag_checked ? warm + BENCH_REPS * iters : 0,
			     what))
		return -1;
	return 0;
}

/* Misses on addr, expected to be of kind: each classified once. */
static int bench_gpu_miss(struct gdrc_ctx *ctx, const char *addr, int kind,
			  uint64_t iters, const char *what,
			  struct bench_res *r)
{
	struct bench_gpu_miss_arg a = { .ctx = ctx, .addr = addr };
	uint64_t warm = iters / 10, m0, c0;

	if (bench_gpu_expect_kind(ctx, addr, kind, what) ||
	    bench_counter(ctx, GDRC_STAT_MISSES, &m0) ||
	    bench_counter(ctx, GDRC_STAT_CLASSIFY_CALLS, &c0) ||
	    bench_run(bench_gpu_miss_loop, &a, iters, warm, r) ||
	    bench_expect_misses(ctx, m0, warm + BENCH_REPS * iters, what) ||
	    bench_gpu_expect(ctx, GDRC_STAT_CLASSIFY_CALLS, c0,
			     warm + BENCH_REPS * iters, what))
		return -1;
	bench_gpu_line(what, r);
	return 0;
}

/* ---- g. VMM memory of several mappings ---- */

/* Three mappings of the minimum granularity, back to back in one
 * reservation, RDMA-capable where the device allows it. */
static int bench_vmm_map(struct bench_gpu *g)
{
	struct bench_mem_prop prop = { 0 };
	struct bench_mem_access acc = { 0 };
	CUresult res;

	prop.type = BENCH_CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.loc_type = BENCH_CU_MEM_LOCATION_TYPE_DEVICE;
	prop.loc_id = g->dev;
	prop.rdma_capable = 1;
	if (bench_gpu_check(bench_cu.cuMemGetAllocationGranularity(
				    &g->vmm_gran, &prop, 0),
			    "cuMemGetAllocationGranularity") ||
	    bench_gpu_check(bench_cu.cuMemAddressReserve(
				    &g->vmm_va, 3 * g->vmm_gran, 0, 0, 0),
			    "cuMemAddressReserve"))
		return -1;
	for (int i = 0; i < 3; i++) {
		res = bench_cu.cuMemCreate(&g->vmm_h[i], g->vmm_gran, &prop, 0);
		if (res != BENCH_CUDA_SUCCESS && prop.rdma_capable) {
			prop.rdma_capable = 0; /* not on this device */
			res = bench_cu.cuMemCreate(&g->vmm_h[i], g->vmm_gran,
						   &prop, 0);
		}
		if (bench_gpu_check(res, "cuMemCreate"))
			return -1;
		g->vmm_created++;
		if (bench_gpu_check(bench_cu.cuMemMap(g->vmm_va +
							  i * g->vmm_gran,
						      g->vmm_gran, 0,
						      g->vmm_h[i], 0),
				    "cuMemMap"))
			return -1;
		g->vmm_mapped++;
	}
	acc.loc_type = BENCH_CU_MEM_LOCATION_TYPE_DEVICE;
	acc.loc_id = g->dev;
	acc.flags = BENCH_CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return bench_gpu_check(bench_cu.cuMemSetAccess(g->vmm_va,
						       3 * g->vmm_gran, &acc,
						       1),
			       "cuMemSetAccess");
}

struct bench_vmm_arg {
	struct gdrc_ctx *ctx;
	const char *addr;	/* the request */
	size_t len;
	CUdeviceptr seg[3];	/* the mappings it touches */
	int k;
};

static int bench_vmm_hit_loop(void *p, uint64_t iters)
{
	struct bench_vmm_arg *a = p;
	uintptr_t acc = 0;

	for (uint64_t i = 0; i < iters; i++) {
		struct gdrc_mr *mr;
		gdrc_status_t s;

		s = gdrc_mr_get(a->ctx, a->addr, a->len, BENCH_ACCESS, 0, &mr);
		if (bench_unlikely(s != GDRC_OK))
			return bench_check(s, "gdrc_mr_get (vmm hit)");
		acc += (uintptr_t)mr;
		gdrc_mr_put(a->ctx, mr);
	}
	bench_sink += acc;
	return 0;
}

/* k bare queries per iteration: what a hit touching k mappings asks. */
static int bench_vmm_tag_loop(void *p, uint64_t iters)
{
	struct bench_vmm_arg *a = p;
	unsigned long long acc = 0;

	for (uint64_t i = 0; i < iters; i++) {
		for (int j = 0; j < a->k; j++) {
			unsigned long long id = 0;
			CUresult res;

			res = bench_cu.cuPointerGetAttribute(
				&id, BENCH_CU_POINTER_ATTRIBUTE_BUFFER_ID,
				a->seg[j]);
			if (bench_unlikely(res != BENCH_CUDA_SUCCESS))
				return bench_gpu_check(res, "BUFFER_ID (vmm)");
			acc += id;
		}
	}
	bench_sink += acc;
	return 0;
}

/*
 * One registration over the three mappings (always mode), then hits
 * touching k = 1 (inside the middle mapping), 2 and 3 of them, each in
 * paired rounds against k bare queries.  Every hit must be that one
 * registration: checked by id before timing.
 */
static int bench_vmm(struct bench_gpu *g, uint64_t calls,
		     struct bench_gpu_res *r)
{
	const char *va;
	size_t gran;
	struct gdrc_mr_info whole, info;
	struct gdrc_mr *mr;

	if (bench_vmm_map(g))
		return -1;
	va = (const char *)(uintptr_t)g->vmm_va;
	gran = g->vmm_gran;
	printf("g. vmm: 3 mappings of %zu KiB at %p, one registration\n",
	       gran >> 10, (const void *)va);
	if (bench_check(gdrc_mr_get(g->always, va, 3 * gran, BENCH_ACCESS, 0,
				    &mr),
			"gdrc_mr_get (vmm, whole)") ||
	    bench_check(gdrc_mr_query(mr, &whole), "gdrc_mr_query (vmm)"))
		return -1;
	gdrc_mr_put(g->always, mr);
	if (whole.key_length != 3 * gran || !(whole.flags &
					      GDRC_MR_INFO_TAG_CHECKED)) {
		fprintf(stderr, "gdrc-bench: vmm key %zu (want %zu), flags "
			"%#x\n", whole.key_length, 3 * gran, whole.flags);
		return -1;
	}
	for (int k = 1; k <= 3; k++) {
		struct bench_vmm_arg a = {
			.ctx = g->always, .k = k,
			.addr = k == 1 ? va + gran + 4096 : va + gran - 32,
			.len = k == 1 ? BENCH_RANGE :
			       k == 2 ? 64 : gran + 64,
		};
		char label[64];

		for (int j = 0; j < k; j++)
			a.seg[j] = g->vmm_va + (k == 1 ? 1 : j) * gran;
		if (bench_check(gdrc_mr_get(g->always, a.addr, a.len,
					    BENCH_ACCESS, 0, &mr),
				"gdrc_mr_get (vmm)") ||
		    bench_check(gdrc_mr_query(mr, &info), "gdrc_mr_query"))
			return -1;
		gdrc_mr_put(g->always, mr);
		if (info.id != whole.id) {
			fprintf(stderr, "gdrc-bench: vmm k=%d missed\n", k);
			return -1;
		}
		if (bench_run(bench_vmm_hit_loop, &a, calls, calls / 10,
			      &r->vmm_hit[k - 1]) ||
		    bench_run(bench_vmm_tag_loop, &a, calls, calls / 10,
			      &r->vmm_tags[k - 1]) ||
		    bench_pair(bench_vmm_tag_loop, &a, bench_vmm_hit_loop, &a,
			       calls / 10, &r->vmm_paired[k - 1]))
			return -1;
		snprintf(label, sizeof(label), "g. vmm hit, %d mapping%s", k,
			 k > 1 ? "s" : "");
		bench_gpu_line(label, &r->vmm_hit[k - 1]);
		snprintf(label, sizeof(label), "g. %d bare quer%s", k,
			 k > 1 ? "ies" : "y");
		bench_gpu_line(label, &r->vmm_tags[k - 1]);
		printf("%-37s %10.3f %10.3f\n",
		       "g. same, paired rounds (<= 1.25)",
		       r->vmm_paired[k - 1].best,
		       r->vmm_paired[k - 1].median);
	}
	r->vmm_ran = 1;
	return 0;
}

/* A loop run with a given context current (the switch, one driver call
 * each way, is outside the loop's iterations). */
struct bench_ctx_loop {
	CUcontext cur, back;
	bench_loop_fn fn;
	void *arg;
};

static int bench_ctx_loop(void *p, uint64_t iters)
{
	struct bench_ctx_loop *c = p;
	int ret;

	if (bench_gpu_check(bench_cu.cuCtxSetCurrent(c->cur),
			    "cuCtxSetCurrent"))
		return -1;
	ret = c->fn(c->arg, iters);
	if (bench_gpu_check(bench_cu.cuCtxSetCurrent(c->back),
			    "cuCtxSetCurrent"))
		return -1;
	return ret;
}

/*
 * The same hits on this device's memory from device 0's thread: device 0's
 * primary context current, as in a process that drives several GPUs from
 * one thread.  The registrations are the ones just made, so each get is a
 * hit.  Each is timed alone and in paired rounds against the same hit
 * with the device's own context current (the host's timing moves between
 * runs); the validated one also against the bare query from device 0's
 * thread, since the driver may answer another device's pointer at
 * another cost.
 */
static int bench_gpu_cross(struct bench_gpu *g, const struct bench_opts *o,
			   const char *hit_addr, struct bench_gpu_res *r)
{
	uint64_t calls = BENCH_GPU_CALL_ITERS / o->div;
	uint64_t hits = BENCH_HIT_ITERS / o->div;
	struct bench_gpu_tag_arg tag = { .addr = (CUdeviceptr)(uintptr_t)
							 hit_addr };
	struct bench_hit_arg always = { .ctx = g->always,
					.addr = { hit_addr } };
	struct bench_hit_arg hooks = { .ctx = g->hooks, .addr = { hit_addr } };
	struct bench_ctx_loop own_always = { g->cu_ctx, g->cu_ctx,
					     bench_hit_loop, &always };
	struct bench_ctx_loop own_hooks = { g->cu_ctx, g->cu_ctx,
					    bench_hit_loop, &hooks };
	struct bench_ctx_loop x_always = { g->home, g->cu_ctx, bench_hit_loop,
					   &always };
	struct bench_ctx_loop x_hooks = { g->home, g->cu_ctx, bench_hit_loop,
					  &hooks };
	struct bench_ctx_loop x_tag = { g->home, g->cu_ctx, bench_gpu_tag_loop,
					&tag };

	if (bench_run(bench_ctx_loop, &x_tag, calls, calls / 10,
		      &r->cross_tag) ||
	    bench_run(bench_ctx_loop, &x_always, calls, calls / 10,
		      &r->cross_always) ||
	    bench_pair(bench_ctx_loop, &own_always, bench_ctx_loop, &x_always,
		       calls / 10, &r->cross_always_paired) ||
	    bench_pair(bench_ctx_loop, &x_tag, bench_ctx_loop, &x_always,
		       calls / 10, &r->cross_always_tag_paired) ||
	    bench_run(bench_ctx_loop, &x_hooks, hits, hits / 10,
		      &r->cross_hooks) ||
	    bench_pair(bench_ctx_loop, &own_hooks, bench_ctx_loop, &x_hooks,
		       hits / 10, &r->cross_hooks_paired))
		return -1;
	bench_gpu_line("g. bare tag query, device 0's thread", &r->cross_tag);
	bench_gpu_line("g. always hit, from device 0's thread",
		       &r->cross_always);
	printf("%-37s %10.3f %10.3f\n", "g. same / own thread's, paired",
	       r->cross_always_paired.best, r->cross_always_paired.median);
	printf("%-37s %10.3f %10.3f\n", "g. same / bare query there, paired",
	       r->cross_always_tag_paired.best,
	       r->cross_always_tag_paired.median);
	bench_gpu_line("g. hooks hit, from device 0's thread",
		       &r->cross_hooks);
	printf("%-37s %10.3f %10.3f\n", "g. same / own thread's, paired (~1)",
	       r->cross_hooks_paired.best, r->cross_hooks_paired.median);
	r->cross_ran = 1;
	return 0;
}

static int bench_gpu_measure(struct bench_gpu *g, const struct bench_opts *o,
			     struct bench_results *res, struct bench_gpu_res *r)
{
	uint64_t calls = BENCH_GPU_CALL_ITERS / o->div;
	uint64_t misses = BENCH_GPU_MISS_ITERS / o->div;
	const char *hit_addr = (const char *)(uintptr_t)g->dev_buf +
			       BENCH_GPU_OFFSET;
	struct bench_gpu_tag_arg tag = { .addr = g->dev_buf };
	struct bench_hit_arg always = { .ctx = g->always,
					.addr = { hit_addr } };
	struct bench_gpu_miss_arg cls = {
		.ctx = g->plain,
		.addr = (const char *)(uintptr_t)g->unreg_buf +
			BENCH_GPU_OFFSET,
	};
	uint64_t c0;

	/* 1. What the issue compares a validated hit with. */
	if (bench_run(bench_gpu_tag_loop, &tag, calls, calls / 10,
		      &r->tag_query))
		return -1;
	bench_gpu_line("g. bare tag query (BUFFER_ID)", &r->tag_query);

	/* 2. and 3. */
	if (bench_gpu_hit(g->always, hit_addr, 1, calls,
			  "g. gpu hit, validate always", &r->hit_always))
		return -1;
	bench_gpu_line("g. gpu hit, validate always", &r->hit_always);
	bench_gpu_ratio("g. ratio always/tag query (<= 1.15)",
			&r->hit_always, &r->tag_query);
	if (bench_pair(bench_gpu_tag_loop, &tag, bench_hit_loop, &always,
		       calls / 10, &r->paired))
		return -1;
	printf("%-37s %10.3f %10.3f\n", "g. same, paired rounds (<= 1.15)",
	       r->paired.best, r->paired.median);
	if (bench_pair_get_alone(&tag, &always, calls / 10, &r->paired_get))
		return -1;
	printf("%-37s %10.3f %10.3f\n", "g. the get alone, paired rounds",
	       r->paired_get.best, r->paired_get.median);
	if (bench_gpu_hit(g->hooks, hit_addr, 0, BENCH_HIT_ITERS / o->div,
			  "g. gpu hit, validate hooks", &r->hit_hooks))
		return -1;
	bench_gpu_line("g. gpu hit, validate hooks", &r->hit_hooks);
	bench_gpu_ratio("g. ratio hooks/host hit of a. (~1)", &r->hit_hooks,
			&res->hit);
	if (g->home && bench_gpu_cross(g, o, hit_addr, r))
		return -1;

	/* 4. The cache's own miss cost, nothing registered (none backend):
	 * classification, the tree, and SYNC_MEMOPS the first time an
	 * allocation is seen (process-wide, so in some warm-up). */
	if (bench_gpu_miss(g->plain, hit_addr, GDRC_PTR_DEVICE, misses,
			   "g. miss, device: get+put+invalidate",
			   &r->miss_device))
		return -1;
	if (g->pool_buf &&
	    bench_gpu_miss(g->plain,
			   (const char *)(uintptr_t)g->pool_buf +
				   BENCH_GPU_OFFSET,
			   GDRC_PTR_POOL, misses,
			   "g. miss, pool: get+put+invalidate",
			   &r->miss_pool))
		return -1;
	if (bench_gpu_miss(g->plain, (const char *)g->pinned_buf +
			   BENCH_GPU_OFFSET, GDRC_PTR_HOST_PINNED, misses,
			   "g. miss, host pinned: get+put+inval.",
			   &r->miss_host_pinned))
		return -1;

	/* 5. Classification alone, next to the bare attribute query. */
	if (bench_gpu_expect_kind(g->plain, cls.addr, GDRC_PTR_DEVICE,
				  "g. classify") ||
	    bench_counter(g->plain, GDRC_STAT_CLASSIFY_CALLS, &c0) ||
	    bench_run(bench_gpu_classify_loop, &cls, calls, calls / 10,
		      &r->classify) ||
	    bench_gpu_expect(g->plain, GDRC_STAT_CLASSIFY_CALLS, c0,
			     calls / 10 + BENCH_REPS * calls, "g. classify"))
		return -1;
	bench_gpu_line("g. classify: gdrc_ptr_query, unreg.", &r->classify);
	bench_gpu_ratio("g. ratio classify/tag query", &r->classify,
			&r->tag_query);

	/* 6. A registration over several VMM mappings. */
	return bench_vmm(g, calls, r);
}

/* g. on one device.  @return 0 when measured or skipped (the reason in
 * r->skip), -1 when a call failed. */
static int bench_gpu_device(const struct bench_opts *o,
			    struct bench_results *res, int ordinal)
{
	struct bench_gpu_res *r = &res->gpu[ordinal];
	struct bench_gpu g = { 0 };
	const char *why = NULL;
	int ret;

	r->driver = res->gpu[0].driver;
	ret = bench_gpu_open(&g, r, ordinal) ? -1 : 0;
	if (ret)
		goto out;
	if (bench_gpu_ctx("always", &g.always) ||
	    bench_gpu_ctx("hooks", &g.hooks) || bench_gpu_ctx(NULL, &g.plain)) {
		ret = -1;
		goto out;
	}
	/* The benchmark found a device; the library may still have GPU
	 * support off (its own loader, its own reasons). */
	if (gdrc_gpu_status(g.plain, &why) != GDRC_OK) {
		snprintf(r->skip, sizeof(r->skip), "libgdrcache: %s",
			 why ? why : "gpu support off");
		ret = 1;
		goto out;
	}
	printf("g. gpu: %s, driver %d.%d (%d), device %d\n", r->device,
	       r->driver / 1000, r->driver % 1000 / 10, r->driver, ordinal);
	printf("%-37s %10s %10s\n", "ns per op (get+put unless said)", "best",
	       "median");
	ret = bench_gpu_alloc(&g, r) || bench_gpu_measure(&g, o, res, r) ?
		      -1 : 0;
	r->ran = ret == 0;
out:
	if (bench_gpu_close(&g))
		ret = -1;
	return ret;
}

/* g. on device 0 and, where there is one, device 1.
 * @return 0 when measured or skipped, -1 when a call failed. */
static int bench_gpu(const struct bench_opts *o, struct bench_results *res)
{
	struct bench_gpu_res *r = &res->gpu[0];
	int ndev = 0, ret;

	printf("\n");
	ret = bench_cuda_load(&r->driver, &ndev, r->skip, sizeof(r->skip));
	for (int d = 0; !ret && d < ndev && d < BENCH_GPUS; d++) {
		if (d)
			printf("\n");
		ret = bench_gpu_device(o, res, d);
		r = &res->gpu[d];
	}
	bench_cuda_unload();
	if (ret == 1) {
		printf("g. gpu: skipped (%s)\n", r->skip);
		ret = 0;
	}
	fflush(stdout);
	return ret;
}

/* ====================================================================
 * Output
 * ==================================================================== */

static void bench_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void bench_json_num(FILE *f, double v, int valid)
{
	/* JSON has no inf or nan (a ratio over a zero). */
	if (valid && isfinite(v))
		fprintf(f, "%.3f", v);
	else
		fputs("null", f);
}

/* "key": best, "key_median": median */
static void bench_json_res(FILE *f, const char *key,
			   const struct bench_res *r, const char *sep)
{
	fprintf(f, "\"%s\": ", key);
	bench_json_num(f, r->best, r->valid);
	fprintf(f, ", \"%s_median\": ", key);
	bench_json_num(f, r->median, r->valid);
	fputs(sep, f);
}

/* "key": num/den of the bests, "key_median": of the medians */
static void bench_json_ratio(FILE *f, const char *key,
			     const struct bench_res *num,
			     const struct bench_res *den, const char *sep)
{
	int valid = num->valid && den->valid;

	fprintf(f, "\"%s\": ", key);
	bench_json_num(f, valid ? num->best / den->best : 0, valid);
	fprintf(f, ", \"%s_median\": ", key);
	bench_json_num(f, valid ? num->median / den->median : 0, valid);
	fputs(sep, f);
}

/* "gpu": {...}, or null when g. was skipped. */
/* g. of one device, as the value of key ("gpu": device 0, "gpu1"). */
static void bench_gpu_json(FILE *f, const char *key,
			   const struct bench_gpu_res *g,
			   const struct bench_results *res)
{
	const char *sep = ",\n    ";

	fprintf(f, "  \"%s\": ", key);
	if (!g->ran) {
		fputs("null", f);
		return;
	}
	fputs("{\"device\": ", f);
	bench_json_str(f, g->device);
	fprintf(f, ", \"ordinal\": %d, \"driver\": %d,\n    ", g->ordinal,
		g->driver);
	bench_json_res(f, "tag_query_ns", &g->tag_query, sep);
	bench_json_res(f, "hit_always_ns", &g->hit_always, sep);
	bench_json_ratio(f, "ratio_always_vs_tag", &g->hit_always,
			 &g->tag_query, sep);
	bench_json_res(f, "ratio_always_vs_tag_paired", &g->paired, sep);
	bench_json_res(f, "ratio_always_get_vs_tag_paired", &g->paired_get,
		       sep);
	bench_json_res(f, "hit_hooks_ns", &g->hit_hooks, sep);
	bench_json_ratio(f, "ratio_hooks_vs_host_hit", &g->hit_hooks,
			 &res->hit, sep);
	if (g->cross_ran) {
		bench_json_res(f, "cross_tag_query_ns", &g->cross_tag, sep);
		bench_json_res(f, "cross_hit_always_ns", &g->cross_always,
			       sep);
		bench_json_res(f, "ratio_cross_always_vs_own_paired",
			       &g->cross_always_paired, sep);
		bench_json_res(f, "ratio_cross_always_vs_tag_paired",
			       &g->cross_always_tag_paired, sep);
		bench_json_res(f, "cross_hit_hooks_ns", &g->cross_hooks, sep);
		bench_json_res(f, "ratio_cross_hooks_vs_own_paired",
			       &g->cross_hooks_paired, sep);
	}
	bench_json_res(f, "miss_device_ns", &g->miss_device, sep);
	bench_json_res(f, "miss_pool_ns", &g->miss_pool, sep);
	bench_json_res(f, "miss_host_pinned_ns", &g->miss_host_pinned, sep);
	bench_json_res(f, "classify_ns", &g->classify, sep);
	if (g->vmm_ran) {
		static const char *const names[3][3] = {
			{ "vmm_k1_hit_ns", "vmm_k1_tags_ns",
			  "vmm_k1_ratio_paired" },
			{ "vmm_k2_hit_ns", "vmm_k2_tags_ns",
			  "vmm_k2_ratio_paired" },
			{ "vmm_k3_hit_ns", "vmm_k3_tags_ns",
			  "vmm_k3_ratio_paired" },
		};

		for (int k = 0; k < 3; k++) {
			bench_json_res(f, names[k][0], &g->vmm_hit[k], sep);
			bench_json_res(f, names[k][1], &g->vmm_tags[k], sep);
			bench_json_res(f, names[k][2], &g->vmm_paired[k],
				       k == 2 ? "}" : sep);
		}
	} else {
		fputs("\"vmm\": null}", f);
	}
}

static int bench_write_json(const char *path, const struct bench_opts *o,
			    const struct bench_results *res)
{
	const struct bench_machine *m = &res->machine;
	int ucx = res->ucx_hit.valid;
	FILE *f = fopen(path, "w");

	if (!f) {
		perror("gdrc-bench: --json");
		return -1;
	}
	fputs("{\n  \"machine\": {\"cpu\": ", f);
	bench_json_str(f, m->cpu);
	fprintf(f, ", \"ncpu\": %ld, \"date\": ", m->ncpu);
	bench_json_str(f, m->date);
	fputs(", \"kernel\": ", f);
	bench_json_str(f, m->kernel);
	fputs(", \"version\": ", f);
	bench_json_str(f, m->version);
	fputs(", \"compiler\": ", f);
	bench_json_str(f, __VERSION__);
	fputs(", \"ucx_version\": ", f);
	if (m->ucx_version)
		bench_json_str(f, m->ucx_version);
	else
		fputs("null", f);
	fputs(", \"ucx_mmap_hook_mode\": ", f);
	if (m->ucx_hook_mode)
		bench_json_str(f, m->ucx_hook_mode);
	else
		fputs("null", f);
	fputs(", \"ucx_ucm_events\": ", f);
	if (m->ucx_events)
		bench_json_str(f, m->ucx_events);
	else
		fputs("null", f);
	fprintf(f, "},\n  \"quick\": %s, \"gpu_only\": %s,\n  ",
		o->quick ? "true" : "false", o->gpu_only ? "true" : "false");
	bench_json_res(f, "hit_ns", &res->hit, ",\n  ");
	bench_json_res(f, "hit_rotate4_ns", &res->hit_rotate4, ",\n  ");
	bench_json_res(f, "hit_rotate16_ns", &res->hit_rotate16, ",\n  ");
	bench_json_res(f, "ucx_hit_ns", &res->ucx_hit, ",\n  ");
	bench_json_res(f, "hit_paired_ns", &res->hit_paired, ",\n  ");
	fputs("\"ratio_hit_vs_ucx\": ", f);
	bench_json_num(f, ucx ? bench_hot_hit(res)->best / res->ucx_hit.best :
				0,
		       ucx);
	fputs(", \"ratio_hit_vs_ucx_median\": ", f);
	bench_json_num(f,
		       ucx ? bench_hot_hit(res)->median / res->ucx_hit.median :
			     0,
		       ucx);
	fputs(",\n  ", f);
	bench_json_res(f, "ucx_default_hit_ns", &res->ucx_default_hit,
		       ",\n  ");
	bench_json_ratio(f, "ratio_hit_vs_ucx_default", &res->hit,
			 &res->ucx_default_hit, ",\n  ");
	bench_json_res(f, "mixed_gdrc_first_gdrc_hit_ns", &res->mixed_gdrc[0],
		       ",\n  ");
	bench_json_res(f, "mixed_gdrc_first_ucx_hit_ns", &res->mixed_ucx[0],
		       ",\n  ");
	bench_json_res(f, "mixed_ucx_first_gdrc_hit_ns", &res->mixed_gdrc[1],
		       ",\n  ");
	bench_json_res(f, "mixed_ucx_first_ucx_hit_ns", &res->mixed_ucx[1],
		       ",\n  ");
	bench_json_res(f, "miss_ns", &res->miss, ",\n  ");
	bench_json_res(f, "uncached_ns", &res->uncached, ",\n  ");
	bench_json_res(f, "cpu_loop_ns", &res->cpu_loop, ",\n  ");
	bench_json_res(f, "cpu_loop_end_ns", &res->cpu_loop_end, ",\n  ");
	bench_json_res(f, "rotate16k_ns", &res->rotate16k, ",\n  ");
	bench_json_res(f, "ucx_rotate16k_ns", &res->ucx_rotate16k, ",\n  ");
	bench_json_ratio(f, "ratio_rotate16k_vs_ucx", &res->rotate16k,
			 &res->ucx_rotate16k, ",\n");
	fputs("  \"lookup\": [", f);
	for (int i = 0; i < res->nlookup; i++) {
		const struct bench_lookup_res *l = &res->lookup[i];

		fprintf(f, "%s\n    {\"n\": %llu, ", i ? "," : "",
			(unsigned long long)l->n);
		bench_json_res(f, "insert_ns", &l->insert, ", ");
		bench_json_res(f, "random_hit_ns", &l->random_hit, ", ");
		bench_json_res(f, "same_hit_ns", &l->same_hit, ", ");
		if (l->ucx_random_hit.valid)
			bench_json_res(f, "ucx_random_hit_ns",
				       &l->ucx_random_hit, ", ");
		bench_json_res(f, "floor_ns", &l->floor, ", ");
		fprintf(f, "\"bytes_per_reg\": %.1f, \"ucx_bytes_per_reg\": "
			"%.1f}", l->bytes_per_reg,
			l->ucx_random_hit.valid ? l->ucx_bytes_per_reg : -1.0);
	}
	fputs("\n  ],\n  \"threads\": [", f);
	for (int i = 0; i < res->nthr; i++) {
		const struct bench_thr_res *t = &res->thr[i];

		fprintf(f, "%s\n    {\"mode\": \"%s\", \"threads\": %d, "
			"\"oversubscribed\": %s, ", i ? "," : "",
			t->private ? "private" : "shared", t->threads,
			t->oversub ? "true" : "false");
		bench_json_res(f, "mops", &t->mops, ", ");
		fputs("\"ratio\": ", f);
		bench_json_num(f, t->ratio, 1);
		fputs(", \"median_ratio\": ", f);
		bench_json_num(f, t->median_ratio, 1);
		fputs(", \"cpu_median_ratio\": ", f);
		bench_json_num(f, t->cpu_ratio, 1);
		fputs(", ", f);
		bench_json_res(f, "ucx_mops", &t->ucx_mops, ", ");
		fputs("\"ucx_ratio\": ", f);
		bench_json_num(f, t->ucx_ratio, t->ucx_mops.valid);
		fputs("}", f);
	}
	fputs("\n  ],\n", f);
	bench_gpu_json(f, "gpu", &res->gpu[0], res);
	fputs(",\n", f);
	bench_gpu_json(f, "gpu1", &res->gpu[1], res);
	fputs("\n}\n", f);
	if (fclose(f)) {
		perror("gdrc-bench: --json");
		return -1;
	}
	return 0;
}

#ifdef GDRC_BENCH_HAVE_UCX
/*
 * UCX and libgdrcache cannot both hook libc here, so UCX's are left out:
 *   - Loading libucs runs its constructor, which (UCX 1.13, default
 *     UCX_MEM_MMAP_HOOK_MODE=bistro) rewrites the first bytes of libc's
 *     munmap, mmap, mremap, madvise, brk and sbrk before main() runs;
 *     libgdrcache then refuses to patch them, caches no host memory, and
 *     every "hit" below would be a miss.
 *   - UCX_MEM_MMAP_HOOK_MODE=reloc deadlocks in ucs_rcache_create (UCX
 *     1.13: ucm_malloc_install -> ucm_dlmalloc -> sbrk event -> dlsym ->
 *     malloc -> ucm_dlmalloc, spinning on its own lock), and without its
 *     malloc relocations the rcache refuses VM_UNMAPPED events.
 *   - Switching UCX to bistro after gdrc_init overwrites libgdrcache's
 *     patch: it then misses every munmap.
 * So, unless the user chose a mode, the program runs itself again with
 * UCX_MEM_MMAP_HOOK_MODE=none, and the rcache gets no ucm events when it
 * cannot have them (bench_ucx_create).  Neither hit path depends on the
 * hooks: ucs_rcache_get's hit is the same lock, page-table lookup and
 * reference count with or without events.
 */
static void bench_ucx_hook_mode(char **argv)
{
	if (getenv("UCX_MEM_MMAP_HOOK_MODE"))
		return;
	if (setenv("UCX_MEM_MMAP_HOOK_MODE", "none", 1))
		return;
	execv("/proc/self/exe", argv);
	perror("gdrc-bench: re-exec with UCX_MEM_MMAP_HOOK_MODE=none");
}
#endif

/* Does ctx cache host memory (are the memory hooks in)? */
static int bench_caches_host(struct gdrc_ctx *ctx, const char *addr,
			     int *cached)
{
	uint64_t h0, h1;

	if (bench_prime(ctx, addr, BENCH_RANGE) ||
	    bench_counter(ctx, GDRC_STAT_HITS, &h0) ||
	    bench_prime(ctx, addr, BENCH_RANGE) ||
	    bench_counter(ctx, GDRC_STAT_HITS, &h1))
		return -1;
	*cached = h1 != h0;
	return 0;
}

static void bench_usage(FILE *f)
{
	fprintf(f,
		"usage: gdrc-bench [--quick] [--gpu-only] [--threads-only] "
		"[--lookup-only] [--ucx-only] [--json PATH] [--help]\n"
		"(--ucx-default-child, --mixed-child are internal: the UCX\n"
		"runs in a child)\n"
		"Measure libgdrcache's cache (none backend, hooks on): hit,\n"
		"miss, lookup as registrations grow, threaded hits, GPU hits,\n"
		"misses and classification when a GPU is there; and UCX's\n"
		"ucs_rcache for reference when built with UCX.\n"
		"  --quick      10x fewer iterations, n up to 100000\n"
		"  --gpu-only   only the host hit (a.) and the GPU section (g.)\n"
		"  --threads-only  only the host hit (a.) and gdrcache's\n"
		"               threaded hits (e., no UCX rows)\n"
		"  --lookup-only   only the host hit (a.), UCX's (b., in\n"
		"               this process only), the lookup table (d.,\n"
		"               with UCX's rows and bytes) and rotation (r.)\n"
		"  --ucx-only   only the host hit (a.) and UCX's (b., apart\n"
		"               and in one process, both orders)\n"
		"  --json PATH  also write the results as JSON to PATH\n"
		"  --help       this text\n");
}

static int bench_parse(int argc, char **argv, struct bench_opts *o)
{
	static const struct option longopts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "json", required_argument, NULL, 'j' },
		{ "gpu-only", no_argument, NULL, 'g' },
		{ "threads-only", no_argument, NULL, 't' },
		{ "lookup-only", no_argument, NULL, 'l' },
		{ "ucx-only", no_argument, NULL, 'x' },
		{ "help", no_argument, NULL, 'h' },
		{ "ucx-default-child", no_argument, NULL, 'u' },
		{ "mixed-child", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	o->div = 1;
	while ((c = getopt_long(argc, argv, "qj:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'q':
			o->quick = 1;
			o->div = 10;
			break;
		case 'j':
			o->json = optarg;
			break;
		case 'g':
			o->gpu_only = 1;
			break;
		case 't':
			o->threads_only = 1;
			break;
		case 'l':
			o->lookup_only = 1;
			break;
		case 'x':
			o->ucx_only = 1;
			break;
		case 'u':
			o->ucx_child = 1;
			break;
		case 'm':
			o->mixed_child = 1 + (atoi(optarg) == 1);
			break;
		case 'h':
			bench_usage(stdout);
			exit(0);
		default:
			bench_usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gdrc-bench: unexpected argument '%s'\n",
			argv[optind]);
		bench_usage(stderr);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct bench_results res;
	struct bench_opts o = { 0 };
	struct gdrc_ctx *ctx = NULL;
	size_t buf_len = BENCH_MAX_THREADS * BENCH_PAGE;
#ifdef GDRC_BENCH_HAVE_UCX
	ucs_rcache_t *rc = NULL;
#else
	void *rc = NULL;
#endif
	uint64_t t_start = bench_now_ns();
	char *buf;
	int ret = 1, cached;

	if (bench_parse(argc, argv, &o))
		return 2;
#ifdef GDRC_BENCH_HAVE_UCX
	if (o.ucx_child) {
		buf = bench_mmap(buf_len, 1);
		return buf ? bench_ucx_child(buf, &o) : 1;
	}
	if (o.mixed_child) {
		buf = bench_mmap(buf_len, 1);
		return buf ? bench_mixed_child(buf, &o, o.mixed_child - 1) : 1;
	}
	bench_ucx_hook_mode(argv);
#endif
	bench_machine_info(&res.machine);
	printf("gdrc-bench: libgdrcache %s, %s run%s, none backend, hooks on\n",
	       res.machine.version, o.quick ? "quick" : "full",
	       o.gpu_only ? " (--gpu-only: a. and g.)" : "");
	printf("machine: %s, %ld CPUs online, %s\n", res.machine.cpu,
	       res.machine.ncpu, res.machine.kernel);
	printf("date: %s; compiler: %s; ucx: %s\n", res.machine.date,
	       __VERSION__, res.machine.ucx_version ? res.machine.ucx_version :
	       "not built");
	printf("each: best and median of %d repetitions after a warm-up\n\n",
	       BENCH_REPS);
	printf("%-37s %10s %10s\n", "ns per get+put unless said", "best",
	       "median");

	buf = bench_mmap(buf_len, 1);
	if (!buf)
		return 1;
	if (bench_check(gdrc_init(NULL, &ctx), "gdrc_init"))
		goto out_unmap;
	if (bench_caches_host(ctx, buf + (buf_len - BENCH_PAGE), &cached))
		goto out;
	if (!cached)
		printf("WARNING: libgdrcache caches no host memory here "
		       "(memory hooks unavailable, see its log): every gdrc "
		       "number below is a miss\n");

	if (bench_hit(ctx, buf, &o, &res))
		goto out;
	if (o.gpu_only)
		goto gpu;
	if (o.threads_only) {
		if (bench_threads(ctx, NULL, buf, &o, &res))
			goto out;
		goto done;
	}
	if (o.lookup_only) {
#ifdef GDRC_BENCH_HAVE_UCX
		/* b.'s single-range hit only: r.'s hot range ratio. */
		if (bench_ucx_create(&rc, &res.machine.ucx_events) ||
		    bench_ucx_hit(rc, ctx, buf, &o, &res))
			goto out;
#endif
		if (bench_lookup(&o, &res) || bench_rotate(&o, &res))
			goto out;
		goto done;
	}
#ifdef GDRC_BENCH_HAVE_UCX
	if (bench_ucx_create(&rc, &res.machine.ucx_events) ||
	    bench_ucx_hit(rc, ctx, buf, &o, &res) ||
	    bench_ucx_default(&o, &res) ||
	    bench_mixed(&o, &res))
		goto out;
#else
	printf("b. ucx: not built\n");
#endif
	if (o.ucx_only)
		goto done;
	if (bench_miss(ctx, &o, &res) || bench_lookup(&o, &res) ||
	    bench_rotate(&o, &res) || bench_threads(ctx, rc, buf, &o, &res))
		goto out;
gpu:
	if (bench_gpu(&o, &res))
		goto out;
done:
	printf("\ntotal time %.1f s\n",
	       (double)(bench_now_ns() - t_start) / 1e9);
	if (o.json && bench_write_json(o.json, &o, &res))
		goto out;
	ret = 0;
out:
#ifdef GDRC_BENCH_HAVE_UCX
	if (rc)
		ucs_rcache_destroy(rc);
#endif
	gdrc_fini(ctx);
out_unmap:
	munmap(buf, buf_len);
	if (ret)
		fprintf(stderr, "gdrc-bench: stopped after a failure\n");
	return ret;
}
