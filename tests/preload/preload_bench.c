// SPDX-License-Identifier: BSD-3-Clause
/*
 * preload_bench.c - what an interposed ibv_reg_mr + ibv_dereg_mr of a
 * buffer already registered costs, and how it scales with threads: the
 * per-message pattern of a library that pins the user's buffer around
 * each send.  Run it under LD_PRELOAD=libgdrcache-preload.so and under
 * LD_PRELOAD=libgdrc-shim-one.so (the ideal one-entry shim) in the same
 * session and compare (scripts/bench.sh and docs/benchmarks.md do).
 *
 * With --fake-pd (what the benchmark uses) the PD is a made-up one and
 * needs no RDMA device; the preload must then be told GDRC_BACKEND=none
 * (its registrations are the cache's bookkeeping only).  Without it the
 * first device's PD is used.
 *
 * Prints, for 1, 2, 4, ... up to --threads threads, each with its own
 * buffer: ns per reg+dereg in one thread, and M reg+dereg per second in
 * all, best of --reps runs.  A program that prints figures, not a test.
 * Usage: preload_bench [--fake-pd] [--threads N] [--iters N] [--reps N]
 */
#include <getopt.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define BUF (64 * 1024)

static struct ibv_pd *bench_pd;
static unsigned long iters = 2000000;
static pthread_barrier_t start_line;

struct worker {
	pthread_t t;
	char *buf;
	double secs;
	int fail;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	double t0;

	pthread_barrier_wait(&start_line);
	t0 = now();
	for (unsigned long i = 0; i < iters; i++) {
		struct ibv_mr *mr = ibv_reg_mr(bench_pd, w->buf, BUF, access);

		if (!mr || ibv_dereg_mr(mr)) {
			w->fail = 1;
			break;
		}
	}
	w->secs = now() - t0;
	return NULL;
}

/* @return M reg+dereg per second over n threads, 0 on failure. */
static double run(int n, double *ns_one)
{
	struct worker *w = calloc((size_t)n, sizeof(*w));
	double slowest = 0;
	int fail = 0;

	pthread_barrier_init(&start_line, NULL, (unsigned)n);
	for (int i = 0; i < n; i++) {
		/* A mapping each, apart from the others: one registration
		 * per thread, none merged with a neighbour's. */
		w[i].buf = mmap(NULL, 2 * BUF, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (w[i].buf == MAP_FAILED)
			return 0;
		memset(w[i].buf, 1, BUF);
		pthread_create(&w[i].t, NULL, work, &w[i]);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(w[i].t, NULL);
		fail |= w[i].fail;
		if (w[i].secs > slowest)
			slowest = w[i].secs;
		munmap(w[i].buf, 2 * BUF);
	}
	pthread_barrier_destroy(&start_line);
	free(w);
	if (fail)
		return 0;
	*ns_one = slowest * 1e9 / (double)iters;
	return (double)n * (double)iters / slowest / 1e6;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "fake-pd", no_argument, NULL, 'f' },
		{ "threads", required_argument, NULL, 't' },
		{ "iters", required_argument, NULL, 'i' },
		{ "reps", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct ibv_pd fake;
	int max_threads = 16, reps = 5, c;
	const char *pre = getenv("LD_PRELOAD");
	double one = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			bench_pd = &fake;
			break;
		case 't':
			max_threads = atoi(optarg);
			break;
		case 'i':
			iters = strtoul(optarg, NULL, 0);
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		default:
			printf("usage: preload_bench [--fake-pd] [--threads N] "
			       "[--iters N] [--reps N]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (!bench_pd) {
		struct ibv_device **devs = ibv_get_device_list(NULL);
		struct ibv_context *ctx = devs && devs[0] ?
						  ibv_open_device(devs[0]) :
						  NULL;

		bench_pd = ctx ? ibv_alloc_pd(ctx) : NULL;
		if (!bench_pd) {
			fprintf(stderr, "preload_bench: no RDMA device (use --fake-pd)\n");
			return 1;
		}
	}
	printf("preload_bench: LD_PRELOAD=%s, %s pd, %lu reg+dereg per thread, best of %d\n",
	       pre ? pre : "(none)", bench_pd == &fake ? "fake" : "device",
	       iters, reps);
	printf("%8s %14s %14s %10s\n", "threads", "ns/op (1 thr)", "M ops/s",
	       "scaling");
	for (int n = 1; n <= max_threads; n *= 2) {
		double best = 0, ns = 0;

		for (int r = 0; r < reps; r++) {
			double ns_r, m = run(n, &ns_r);

			if (m == 0) {
				fprintf(stderr, "preload_bench: a reg or dereg failed\n");
				return 1;
			}
			if (m > best) {
				best = m;
				ns = ns_r;
			}
		}
		if (n == 1)
			one = best;
		printf("%8d %14.2f %14.2f %9.2fx\n", n, ns, best, best / one);
		if (n < max_threads && 2 * n > max_threads)
			n = max_threads / 2; /* end on max_threads itself */
	}
	return 0;
}
