// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_signal_remap.c - signal handlers that unmap and map back pages
 * every 150 us in each of three threads, while those threads get, put
 * and check registrations: a handler lands inside the library on its
 * own thread, also while that thread holds the cache's queue lock (in a
 * post of its own unmap, or in the drain's take).  No run may hang,
 * and a get after the handler remapped a page never returns the
 * registration made before (a new id, by gdrc_mr_query).  A get refused
 * as busy (the range unmapped while it was registered, three times: the
 * handler on its own thread) is tried again, as gdrc_mr_get allows.
 *
 * Each run is a forked child: three threads (the child's main one and
 * two more), each with its own per-thread timer (timer_create,
 * SIGEV_THREAD_ID) whose SIGALRM handler munmaps two of that thread's
 * pages and maps new ones at the same addresses (MAP_FIXED): one of its
 * spare pages, which the thread keeps registered, then the page the
 * thread is about to check when one is armed, else another spare.  Each
 * page lies between guard pages, so that no other mapping lands in the
 * hole a handler leaves for a moment.  Between checks each thread
 * gets and puts its spares and maps, registers and unmaps a scratch
 * range, so that its own unmaps post to the queue and its gets drain it.
 * ROUNDS checks per thread, then the child exits; the parent gives each
 * child a deadline and counts the ones that miss it as hangs.
 *
 * ctest runs it once per host event source, named by
 * GDRC_TEST_HOST_SOURCE ("glibc"; "uffd" with GDRC_MEM_HOOKS=uffd;
 * "ucm" with libucs preloaded); a child that finds that source not
 * serving exits 77 and the test is skipped with its reason.
 *
 * Usage: test_signal_remap [runs [deadline_s]] (200 runs, 10 s each;
 * 20 under ThreadSanitizer; under valgrind, GDRC_TEST_VALGRIND set, 3
 * runs of 120 s).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <gdrcache.h>

#include "child_capture.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define PAGE 4096UL
#define THREADS 3     /* the child's main thread and two more */
#define VICTIMS 8     /* pages each thread checks in turn */
#define SPARES 4      /* pages its handler remaps besides the checked one */
#define ROUNDS 40     /* checks per thread and run */
#define PERIOD_NS 150000

/* Runs: ThreadSanitizer makes each one ten to fifty times slower. */
#if defined(__SANITIZE_THREAD__)
#define RUNS 20
#else
#define RUNS 200
#endif

static int runs = RUNS, deadline_s = 10;
static const char *want = "glibc";
static int skipped; /* the first run exited 77: main returns 77 */

/* One thread's pages and its handler's state (written by the handler,
 * which runs on that thread only). */
struct th {
	char *victim[VICTIMS];
	char *spare[SPARES];
	volatile sig_atomic_t armed;    /* victim to remap next, or -1 */
	volatile sig_atomic_t remapped; /* armed victims remapped */
	volatile sig_atomic_t next_spare;
	volatile sig_atomic_t in_handler_fail;
	volatile long slow_handlers;    /* handlers that took over 1 ms */
	volatile long max_handler_us;
	timer_t timer;
	struct gdrc_ctx *ctx;
	int fail;                       /* the failing step, or 0 */
	long busy;                      /* iterations waiting for a remap */
	long busy_gets;                 /* gets refused as busy, retried */
};

static struct th ths[THREADS];

static void remap(struct th *t, char *p)
{
	if (munmap(p, PAGE) ||
	    mmap(p, PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != p)
		t->in_handler_fail = 1;
}

/* Two unmaps a signal: under userfaultfd the second waits in the kernel
 * until the reader has read it, after the reader posted the first,
 * perhaps to a queue whose lock this very thread holds. */
static void on_timer(int sig, siginfo_t *si, void *uc)
{
	struct th *t = si->si_value.sival_ptr;
	int saved = errno, v;
	struct timespec a, b;
	long us;

	(void)sig;
	(void)uc;
	if (si->si_code != SI_TIMER || !t)
		return;
	clock_gettime(CLOCK_MONOTONIC, &a);
	remap(t, t->spare[t->next_spare++ % SPARES]);
	v = t->armed;
	remap(t, v >= 0 ? t->victim[v] : t->spare[t->next_spare++ % SPARES]);
	if (v >= 0) {
		t->armed = -1;
		t->remapped++;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	us = (b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000;
	if (us > 1000)
		t->slow_handlers++;
	if (us > t->max_handler_us)
		t->max_handler_us = us;
	errno = saved;
}

static int id_of(struct gdrc_mr *mr, uint64_t *id)
{
	struct gdrc_mr_info info;

	if (gdrc_mr_query(mr, &info))
		return -1;
	*id = info.id;
	return 0;
}

/* Gets refused as busy (the range unmapped while it was registered,
 * three times in a row: this thread's own handler) before one worked. */
#define BUSY_TRIES 1000

/* Get and put [p, p + len), again while the get is refused as busy; *id
 * (if not NULL) the registration's id.  @return 0, or -1. */
static int get_put(struct th *t, void *p, size_t len, uint64_t *id)
{
	struct gdrc_mr *mr;
	gdrc_status_t st;
	int ret = 0, tries = 0;

	while ((st = gdrc_mr_get(t->ctx, p, len, 0, 0, &mr)) ==
		       GDRC_ERR_BUSY &&
	       ++tries < BUSY_TRIES)
		t->busy_gets++;
	if (st) {
		fprintf(stderr, "get %p+%zu: %s\n", p, len,
			gdrc_status_str(st));
		return -1;
	}
	if (id && id_of(mr, id))
		ret = -1;
	gdrc_mr_put(t->ctx, mr);
	return ret;
}

/* One thread's checks.  t->fail: 0, or the failing step. */
static void *worker(void *arg)
{
	struct th *t = arg;
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD_ID,
				.sigev_signo = SIGALRM };
	struct itimerspec its = { { 0, PERIOD_NS }, { 0, PERIOD_NS } };
	char *arena;

	/* Every page between two guard pages: the hole a handler leaves
	 * for a moment is one page, where no other thread's mapping (two
	 * pages) lands to be clobbered by the MAP_FIXED after it. */
	t->armed = -1;
	arena = mmap(NULL, (2 * (VICTIMS + SPARES) + 1) * PAGE, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (arena == MAP_FAILED) {
		t->fail = 20;
		return NULL;
	}
	for (int i = 0; i < VICTIMS + SPARES; i++) {
		char *p = arena + (2 * i + 1) * PAGE;

		if (mmap(p, PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != p) {
			t->fail = 20;
			return NULL;
		}
		if (i < VICTIMS)
			t->victim[i] = p;
		else
			t->spare[i - VICTIMS] = p;
	}
	sev.sigev_value.sival_ptr = t;
	sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_MONOTONIC, &sev, &t->timer) ||
	    timer_settime(t->timer, 0, &its, NULL)) {
		t->fail = 21;
		return NULL;
	}
	for (int round = 0; round < ROUNDS && !t->fail; round++) {
		int v = round % VICTIMS, before = t->remapped;
		uint64_t id1, id2;

		if (get_put(t, t->victim[v], PAGE, &id1)) {
			t->fail = 22;
			break;
		}
		t->armed = v;
		while (t->remapped == before) {
			char *scratch = mmap(NULL, 2 * PAGE,
					     PROT_READ | PROT_WRITE,
					     MAP_PRIVATE | MAP_ANONYMOUS, -1,
					     0);

			if (scratch == MAP_FAILED) {
				t->fail = 23;
				break;
			}
			if (get_put(t, t->spare[t->busy % SPARES], PAGE,
				    NULL) ||
			    get_put(t, scratch, 2 * PAGE, NULL)) {
				t->fail = 24;
				break;
			}
			if (munmap(scratch, 2 * PAGE)) {
				t->fail = 25;
				break;
			}
			t->busy++;
		}
		if (t->fail)
			break;
		if (get_put(t, t->victim[v], PAGE, &id2)) {
			t->fail = 26;
			break;
		}
		if (id2 == id1) {
			/* A registration of the unmapped page. */
			fprintf(stderr, "round %d: page %p remapped, its "
				"registration %llu served again\n", round,
				(void *)t->victim[v], (unsigned long long)id1);
			t->fail = 27;
		}
	}
	timer_delete(t->timer);
	if (t->in_handler_fail && !t->fail)
		t->fail = 28;
	return NULL;
}

static int source_of(const char *name)
{
	static const char *const names[] = { "kmod", "ucm", "glibc", "uffd" };

	for (int s = 0; s < 4; s++)
		if (!strcmp(name, names[s]))
			return s;
	return -1;
}

/* A run: exit 0, 77 (the source named does not serve: why on stderr),
 * or the first failing step. */
static void child(void)
{
	struct sigaction sa = { .sa_sigaction = on_timer,
				.sa_flags = SA_SIGINFO | SA_RESTART };
	struct gdrc_ctx *ctx;
	pthread_t tid[THREADS];
	const char *why = NULL;
	int src = source_of(want);
	long busy = 0, busy_gets = 0, slow = 0, max_us = 0;

	if (src < 0) {
		fprintf(stderr, "GDRC_TEST_HOST_SOURCE=%s: unknown\n", want);
		_exit(2);
	}
	if (gdrc_init(NULL, &ctx))
		_exit(3);
	if (gdrc_hooks_status(ctx, &why) != GDRC_OK) {
		fprintf(stderr, "skip: no host event source here (%s)\n",
			why ? why : "?");
		_exit(77);
	}
	why = NULL;
	if (gdrc_source_status(ctx, (enum gdrc_source)src, &why, NULL) !=
	    GDRC_OK) {
		fprintf(stderr,
			"skip: the host source %s does not serve here (%s)\n",
			want, why ? why : "?");
		_exit(77);
	}
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL))
		_exit(4);
	for (int i = 0; i < THREADS; i++)
		ths[i].ctx = ctx;
	for (int i = 1; i < THREADS; i++)
		if (pthread_create(&tid[i], NULL, worker, &ths[i]))
			_exit(5);
	worker(&ths[0]);
	for (int i = 1; i < THREADS; i++)
		pthread_join(tid[i], NULL);
	for (int i = 0; i < THREADS; i++) {
		if (ths[i].fail) {
			fprintf(stderr, "thread %d failed at step %d\n", i,
				ths[i].fail);
			_exit(ths[i].fail);
		}
		busy += ths[i].busy;
		busy_gets += ths[i].busy_gets;
		slow += ths[i].slow_handlers;
		if (ths[i].max_handler_us > max_us)
			max_us = ths[i].max_handler_us;
	}
	gdrc_fini(ctx);
	fprintf(stderr,
		"rounds %d x %d threads, busy iterations %ld, gets retried "
		"as busy %ld, handlers over 1 ms %ld (longest %ld us)\n",
		ROUNDS, THREADS, busy, busy_gets, slow, max_us);
	_exit(0);
}

/* child() as child_run_timed runs it. */
static void child_fn(int unused)
{
	(void)unused;
	child();
}

static void test_signal_remap_handler_on_own_thread_never_hangs(void **state)
{
	char out[4096], first_fail[4096 + 128] = "";
	int hangs = 0, fails = 0, done = 0;
	double t0 = child_now_s(), slowest = 0, took;
	long slow = 0, max_us = 0;

	(void)state;
	for (int i = 0; i < runs; i++) {
		int st = child_run_timed(child_fn, 0, out, sizeof(out),
					 deadline_s, &took);

		if (i == 0 && st >= 0 && WIFEXITED(st) &&
		    WEXITSTATUS(st) == 77) {
			printf("%s", out);
			skipped = 1;
			return;
		}
		done++;
		if (took > slowest)
			slowest = took;
		if (st < 0) {
			hangs++;
		} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fails++;
		} else {
			const char *h = strstr(out, "handlers over 1 ms ");
			long n, us;

			if (h && sscanf(h,
					"handlers over 1 ms %ld (longest %ld",
					&n, &us) == 2) {
				slow += n;
				if (us > max_us)
					max_us = us;
			}
			continue;
		}
		if (!first_fail[0])
			snprintf(first_fail, sizeof(first_fail),
				 "run %d: %s (status %#x): %s", i,
				 st < 0 ? "hung" : "failed", st < 0 ? 0 : st,
				 out);
	}
	print_message("source %s: %d runs, %d hangs (deadline %d s), %d "
		      "failed; slowest run %.3f s, all %.1f s; in the runs "
		      "that ended, %ld handlers over 1 ms, the longest %ld "
		      "us\n",
		      want, done, hangs, deadline_s, fails, slowest,
		      child_now_s() - t0, slow, max_us);
	if (hangs || fails)
		fail_msg("%s", first_fail);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_signal_remap_handler_on_own_thread_never_hangs),
	};
	int rc;

	if (getenv("GDRC_TEST_HOST_SOURCE"))
		want = getenv("GDRC_TEST_HOST_SOURCE");
	if (getenv("GDRC_TEST_VALGRIND")) {
		runs = 3;
		deadline_s = 120;
	}
	if (argc > 1)
		runs = atoi(argv[1]);
	if (argc > 2)
		deadline_s = atoi(argv[2]);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	return skipped && !rc ? 77 : rc;
}
