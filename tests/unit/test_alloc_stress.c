// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_alloc_stress.c - no deadlock between the memory hooks and an
 * allocator's own locks.
 *
 * Threads malloc blocks of 64 KiB to 4 MiB (sizes an allocator maps,
 * purges with madvise and unmaps), register them (get and put), free
 * them, and now and then invalidate; one more thread churns small
 * blocks.  The hooks then run inside the allocator, with its locks held,
 * while other threads are inside the cache.  ctest runs this three times:
 * with glibc's malloc, and with jemalloc and mimalloc preloaded
 * (LD_PRELOAD; Debian libjemalloc2, libmimalloc2.0), which purge from
 * their own paths and threads (libfabric #9594 and #10879 deadlocked
 * there).
 *
 * Fails on a deadlock (a watchdog alarm aborts after WATCHDOG_S), on a
 * registration that does not cover its block, when the allocator's
 * unmaps never reached the hooks, or when GDRC_CHECK finds the cache
 * inconsistent.  Run: test_alloc_stress [seconds] (default 2).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gdrcache.h>

/* Sanitizers own malloc and map memory with raw system calls: their
 * unmaps never pass the hooks, so none are required there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EVENTS_REQUIRED 0
#else
#define EVENTS_REQUIRED 1
#endif

#define THREADS 4
#define WATCHDOG_S 60
#define MIN_BLOCK (64u << 10)
#define MAX_SHIFT 6 /* blocks up to MIN_BLOCK << MAX_SHIFT = 4 MiB */

static struct gdrc_ctx *ctx;
static atomic_int stop;
static atomic_int failed;
static atomic_ulong gets;

static void on_alarm(int sig)
{
	static const char msg[] =
		"test_alloc_stress: no progress for " "60" " s: deadlock\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	abort();
}

static void fail(const char *what)
{
	fprintf(stderr, "test_alloc_stress: %s\n", what);
	atomic_store(&failed, 1);
	atomic_store(&stop, 1);
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;

	while (!atomic_load(&stop)) {
		size_t size = (size_t)MIN_BLOCK << (rand_r(&seed) % MAX_SHIFT);
		char *p = malloc(size);
		struct gdrc_mr_info info;
		struct gdrc_mr *mr;
		gdrc_status_t st;

		if (!p) {
			fail("malloc failed");
			break;
		}
		p[0] = 1;
		p[size - 1] = 1;
		/* Other threads' frees may land in this range's queue slot
		 * (merged) while it registers: BUSY after three such. */
		while ((st = gdrc_mr_get(ctx, p, size, GDRC_ACCESS_LOCAL_WRITE,
					 0, &mr)) == GDRC_ERR_BUSY)
			;
		if (st != GDRC_OK) {
			fail("gdrc_mr_get failed");
			free(p);
			break;
		}
		if (gdrc_mr_query(mr, &info) != GDRC_OK ||
		    info.addr > (uintptr_t)p ||
		    info.addr + info.length < (uintptr_t)p + size)
			fail("a registration does not cover its block");
		gdrc_mr_put(ctx, mr);
		if (rand_r(&seed) % 16 == 0 &&
		    gdrc_invalidate(ctx, p, size) != GDRC_OK)
			fail("gdrc_invalidate failed");
		free(p);
		atomic_fetch_add(&gets, 1);
	}
	return NULL;
}

/* Small blocks: arenas grow and shrink, tcaches fill and drain. */
static void *churn(void *arg)
{
	void *slot[256] = { 0 };
	unsigned seed = 7;

	(void)arg;
	while (!atomic_load(&stop)) {
		unsigned i = rand_r(&seed) % 256;

		free(slot[i]);
		slot[i] = malloc(16 + rand_r(&seed) % 8192);
	}
	for (unsigned i = 0; i < 256; i++)
		free(slot[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0;
	const char *pre = getenv("LD_PRELOAD");
	pthread_t th[THREADS + 1];
	uint64_t events = 0, hits = 0;
	unsigned long last = 0;
	struct timespec t0, t;

	signal(SIGALRM, on_alarm);
	if (gdrc_init(NULL, &ctx) != GDRC_OK) {
		fprintf(stderr, "test_alloc_stress: gdrc_init failed\n");
		return 1;
	}
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	pthread_create(&th[THREADS], NULL, churn, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		alarm(WATCHDOG_S);
		usleep(100 * 1000);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (atomic_load(&gets) == last)
			continue; /* the alarm fires if this lasts */
		last = atomic_load(&gets);
	} while (!atomic_load(&stop) &&
		 (double)(t.tv_sec - t0.tv_sec) +
				 (double)(t.tv_nsec - t0.tv_nsec) / 1e9 <
			 secs);
	atomic_store(&stop, 1);
	for (int i = 0; i <= THREADS; i++)
		pthread_join(th[i], NULL);
	alarm(0);
	gdrc_stat_get(ctx, GDRC_STAT_MEM_EVENTS, &events);
	gdrc_stat_get(ctx, GDRC_STAT_HITS, &hits);
	printf("test_alloc_stress (%s): %lu get/put/free cycles, %llu hits, "
	       "%llu memory events in %.1f s\n",
	       pre && *pre ? pre : "glibc malloc", atomic_load(&gets),
	       (unsigned long long)hits, (unsigned long long)events, secs);
	if (!events && EVENTS_REQUIRED)
		fail("the allocator's unmaps never reached the hooks");
	if (!atomic_load(&gets))
		fail("no progress at all");
	gdrc_fini(ctx);
	return atomic_load(&failed);
}
