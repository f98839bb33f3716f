// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_invq.c - the event queue between the hooks and the cache
 * (lib/cache/invq.c): pending is set by every post and cleared only by a
 * drain that applied everything posted before its take, including a
 * post that found the queue's lock held (a signal handler interrupting
 * the drain on its own thread) and could only mark "everything".  A
 * post never waits for a lock its own thread holds (a SIGALRM handler
 * posting while its thread is inside post and take), nor, on a thread
 * marked by gdrc_invq_nowait_thread, for one that another holds; either
 * way nothing posted is lost.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <cmocka.h>

#include "gdrc_int.h"
#include "cache/invq.h"

static struct gdrc_invq q;
static struct gdrc_invq_range out[GDRC_INVQ_SLOTS];

static int setup(void **state)
{
	(void)state;
	gdrc_invq_init(&q);
	return 0;
}

static uint64_t pending(void)
{
	return atomic_load(&q.pending);
}

static void test_invq_empty_is_not_pending(void **state)
{
	uint64_t seen;
	int all;

	(void)state;
	assert_int_equal(pending(), 0);
	assert_int_equal(gdrc_invq_take(&q, out, &all, &seen), 0);
	assert_int_equal(all, 0);
}

static void test_invq_post_take_done_clears(void **state)
{
	uint64_t seen;
	int all;

	(void)state;
	gdrc_invq_post(&q, 0x1000, 0x3000, GDRC_INVQ_HOST);
	assert_int_not_equal(pending(), 0);
	assert_int_equal(gdrc_invq_take(&q, out, &all, &seen), 1);
	assert_int_equal(out[0].start, 0x1000);
	assert_int_equal(out[0].end, 0x3000);
	assert_int_equal(out[0].cls, GDRC_INVQ_HOST);
	assert_int_equal(all, 0);
	assert_int_not_equal(pending(), 0); /* not applied yet */
	gdrc_invq_done(&q, seen);
	assert_int_equal(pending(), 0);
}

/* A post between take and done is not in what take returned: pending
 * stays set, and the next drain gets it. */
static void test_invq_post_after_take_keeps_pending(void **state)
{
	uint64_t seen;
	int all;

	(void)state;
	gdrc_invq_post(&q, 0x1000, 0x2000, GDRC_INVQ_HOST);
	assert_int_equal(gdrc_invq_take(&q, out, &all, &seen), 1);
	gdrc_invq_post(&q, 0x8000, 0x9000, GDRC_INVQ_CUDA);
	gdrc_invq_done(&q, seen);
	assert_int_not_equal(pending(), 0);
	assert_int_equal(gdrc_invq_take(&q, out, &all, &seen), 1);
	assert_int_equal(out[0].start, 0x8000);
	assert_int_equal(out[0].cls, GDRC_INVQ_CUDA);
	gdrc_invq_done(&q, seen);
	assert_int_equal(pending(), 0);
}

/* The lock held (as by a drain that a signal handler interrupted): the
 * post gives up on it and marks everything; between take and done that
 * keeps pending set, and the next take says "all". */
static void test_invq_post_without_lock_marks_all(void **state)
{
	uint64_t seen;
	int all;

	(void)state;
	gdrc_invq_post(&q, 0x1000, 0x2000, GDRC_INVQ_HOST);
	assert_int_equal(gdrc_invq_take(&q, out, &all, &seen), 1);
	assert_false(atomic_flag_test_and_set(&q.lock));
	gdrc_invq_post(&q, 0x5000, 0x6000, GDRC_INVQ_HOST);
	atomic_flag_clear(&q.lock);
	assert_int_equal(q.count, 0); /* it could not queue the range */
	gdrc_invq_done(&q, seen);
	assert_int_not_equal(pending(), 0);
	assert_int_equal(gdrc_invq_take(&q, out, &all, &seen), 0);
	assert_int_equal(all, 1);
	gdrc_invq_done(&q, seen);
	assert_int_equal(pending(), 0);
}

/* A fork child's poke: pending with nothing queued. */
static void test_invq_poke_sets_pending(void **state)
{
	uint64_t seen;
	int all;

	(void)state;
	gdrc_invq_poke(&q);
	assert_int_not_equal(pending(), 0);
	assert_int_equal(gdrc_invq_take(&q, out, &all, &seen), 0);
	assert_int_equal(all, 0);
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ====================================================================
 * Posts from a signal handler on the thread that holds the lock
 * ==================================================================== */

#define SIG_POSTS 20000        /* handler posts, at most */
#define SIG_LIMIT_NS 3000000000ull /* or this long, whichever first */
#define SIG_SLOW_NS 1000000u   /* a post that took this much CPU waited */
#define SIG_BASE 0x100000000ull
#define SIG_PAGE 0x1000u

static volatile int sig_posted;      /* handler posts done */
static volatile int sig_slow;        /* those over SIG_SLOW_NS */
static volatile int sig_interrupted; /* those inside main's post or take */
static volatile int sig_in_call;     /* main is in a post or take */
static volatile uint64_t sig_t0;
static unsigned char sig_covered[SIG_POSTS];

static void sig_disarm(void)
{
	struct itimerval off = { { 0, 0 }, { 0, 0 } };

	setitimer(ITIMER_REAL, &off, NULL);
}

/* Post k: [SIG_BASE + k pages, + 1 page), its CPU time measured. */
static void sig_post(int sig)
{
	int k = sig_posted;
	uint64_t t;

	(void)sig;
	if (k >= SIG_POSTS || wall_ns() - sig_t0 > SIG_LIMIT_NS) {
		sig_disarm();
		return;
	}
	if (sig_in_call)
		sig_interrupted++;
	t = cpu_ns();
	gdrc_invq_post(&q, SIG_BASE + (uintptr_t)k * SIG_PAGE,
		       SIG_BASE + (uintptr_t)(k + 1) * SIG_PAGE,
		       GDRC_INVQ_HOST);
	if (cpu_ns() - t > SIG_SLOW_NS)
		sig_slow++;
	sig_posted = k + 1;
}

/* One drain; marks the handler's posts it covers.  *all_below: every
 * post below it is covered ("everything"). */
static void sig_drain(int *all_below)
{
	uint64_t seen;
	unsigned n;
	int all;

	sig_in_call = 1;
	n = gdrc_invq_take(&q, out, &all, &seen);
	sig_in_call = 0;
	/* Every post done before take returned; one that lands between
	 * its return and this load is counted too (the check may miss it,
	 * never report a loss that is none). */
	if (all)
		*all_below = sig_posted;
	for (unsigned i = 0; i < n; i++) {
		uintptr_t k, k_end;

		if (out[i].cls != GDRC_INVQ_HOST || out[i].end <= SIG_BASE)
			continue;
		k = out[i].start < SIG_BASE ?
			    0 :
			    (out[i].start - SIG_BASE) / SIG_PAGE;
		k_end = (out[i].end - SIG_BASE) / SIG_PAGE;
		for (; k < k_end && k < SIG_POSTS; k++)
			sig_covered[k] = 1;
	}
	gdrc_invq_done(&q, seen);
}

/*
 * A 20 us SIGALRM whose handler posts while this thread loops on a post
 * of its own (the other class) and a drain: handlers land inside post
 * and take with the lock held.  Each handler post returns at once (no
 * post over 1 ms of CPU), and every range it posted is drained, as
 * itself or as "everything".
 */
static void test_invq_post_from_own_holder_never_spins(void **state)
{
	struct sigaction sa = { .sa_handler = sig_post };
	struct itimerval it = { { 0, 20 }, { 0, 20 } };
	int all_below = 0, lost = 0;
	sigset_t alrm;

	(void)state;
	memset(sig_covered, 0, sizeof(sig_covered));
	sig_posted = sig_slow = sig_interrupted = 0;
	sig_t0 = wall_ns();
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGALRM, &sa, NULL), 0);
	assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
	for (uintptr_t i = 0; sig_posted < SIG_POSTS &&
			      wall_ns() - sig_t0 < SIG_LIMIT_NS; i++) {
		sig_in_call = 1;
		gdrc_invq_post(&q, (i % 64) * SIG_PAGE,
			       (i % 64 + 1) * SIG_PAGE, GDRC_INVQ_CUDA);
		sig_in_call = 0;
		sig_drain(&all_below);
	}
	sig_disarm();
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	sigprocmask(SIG_BLOCK, &alrm, NULL);
	for (int i = 0; i < 4 && pending(); i++)
		sig_drain(&all_below);
	sigprocmask(SIG_UNBLOCK, &alrm, NULL);
	signal(SIGALRM, SIG_DFL);
	assert_int_equal(pending(), 0);
	for (int k = 0; k < sig_posted; k++)
		if (k >= all_below && !sig_covered[k])
			lost++;
	print_message("%d handler posts, %d inside a post or take, %d over "
		      "1 ms, %d lost\n",
		      sig_posted, sig_interrupted, sig_slow, lost);
	assert_true(sig_posted > 0);
	assert_true(sig_interrupted > 0);
	assert_int_equal(lost, 0);
	/* valgrind: a first run of any code costs its translation. */
	if (!getenv("GDRC_TEST_VALGRIND"))
		assert_int_equal(sig_slow, 0);
}

/* ====================================================================
 * A thread that never waits (the userfaultfd reader's mode)
 * ==================================================================== */

static uint64_t nowait_cpu;

static void *nowait_post(void *arg)
{
	uint64_t t;

	(void)arg;
	gdrc_invq_nowait_thread();
	t = cpu_ns();
	gdrc_invq_post(&q, 0x5000, 0x6000, GDRC_INVQ_HOST);
	nowait_cpu = cpu_ns() - t;
	return NULL;
}

/* The lock held by someone else (as by a thread that waits in the
 * kernel for the reader): a post from a gdrc_invq_nowait_thread thread
 * gives up after a few tries and marks everything. */
static void test_invq_post_from_nowait_thread_never_waits(void **state)
{
	uint64_t seen;
	pthread_t t;
	int all;

	(void)state;
	assert_false(atomic_flag_test_and_set(&q.lock));
	assert_int_equal(pthread_create(&t, NULL, nowait_post, NULL), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	atomic_flag_clear(&q.lock);
	print_message("post from a thread that never waits: %llu ns CPU\n",
		      (unsigned long long)nowait_cpu);
	if (!getenv("GDRC_TEST_VALGRIND"))
		assert_true(nowait_cpu < SIG_SLOW_NS);
	assert_int_equal(q.count, 0);
	assert_int_not_equal(pending(), 0);
	assert_int_equal(gdrc_invq_take(&q, out, &all, &seen), 0);
	assert_int_equal(all, 1);
	gdrc_invq_done(&q, seen);
	assert_int_equal(pending(), 0);
	/* This thread was not marked: its post queues the range. */
	gdrc_invq_post(&q, 0x7000, 0x8000, GDRC_INVQ_HOST);
	assert_int_equal(q.count, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_invq_empty_is_not_pending, setup),
		cmocka_unit_test_setup(test_invq_post_take_done_clears, setup),
		cmocka_unit_test_setup(test_invq_post_after_take_keeps_pending,
				       setup),
		cmocka_unit_test_setup(test_invq_post_without_lock_marks_all,
				       setup),
		cmocka_unit_test_setup(test_invq_poke_sets_pending, setup),
		cmocka_unit_test_setup(
			test_invq_post_from_own_holder_never_spins, setup),
		cmocka_unit_test_setup(
			test_invq_post_from_nowait_thread_never_waits, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
