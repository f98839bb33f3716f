// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_exit.c - processes end in every way with contexts open, and
 * signal handlers free memory.  Each case runs in a forked child, which
 * the parent waits for with a deadline (a deadlock shows as a timeout):
 * - exit(), _exit() and SIGKILL with contexts open and registrations
 *   held: the child ends as asked, with nothing printed but what the
 *   library says of open contexts (GDRC_STATS);
 * - an atexit handler that calls gdrc_fini, registered before the first
 *   gdrc_init (so it runs after the library's own exit handler) and
 *   after it, and a second gdrc_fini at exit of a context finished
 *   earlier (the MPI_Finalize-then-atexit pattern): a misuse line under
 *   GDRC_MISUSE=warn, a clean exit;
 * - a SIGALRM handler that unmaps pages (every 50 us) while the main
 *   thread gets, puts, maps and unmaps, so that handlers land inside the
 *   hooks and inside the cache's drain: no deadlock, and no registration
 *   of a page the handler unmapped is served afterwards.
 * (The kernel's side of an exit, gdrcache.ko's release of pins on close
 * and SIGKILL, is tests/kmod's.)
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <gdrcache.h>

#include "child_capture.h"

#define PAGE 4096UL
#define DEADLINE_S 60

/* A context with a registration held and one cached. */
static struct gdrc_ctx *open_with_registrations(void)
{
	char *buf = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;

	if (buf == MAP_FAILED || gdrc_init(NULL, &ctx) ||
	    gdrc_mr_get(ctx, buf, PAGE, 0, 0, &mr) ||
	    gdrc_mr_get(ctx, buf + 2 * PAGE, PAGE, 0, 0, &mr))
		_exit(98);
	gdrc_mr_put(ctx, mr);
	return ctx;
}

static void child_exit(int unused)
{
	(void)unused;
	(void)open_with_registrations();
	(void)open_with_registrations();
	exit(0);
}

static void child_underscore_exit(int unused)
{
	(void)unused;
	(void)open_with_registrations();
	_exit(0);
}

static void child_killed(int unused)
{
	(void)unused;
	(void)open_with_registrations();
	raise(SIGKILL);
}

static void child_exit_stats(int unused)
{
	(void)unused;
	setenv("GDRC_STATS", "1", 1);
	(void)open_with_registrations();
	exit(0);
}

static void test_exit_with_contexts_open(void **state)
{
	char out[8192];
	int st;

	(void)state;
	st = child_run(child_exit, 0, out, sizeof(out), DEADLINE_S);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_string_equal(out, "");
	st = child_run(child_underscore_exit, 0, out, sizeof(out), DEADLINE_S);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_string_equal(out, "");
	st = child_run(child_killed, 0, out, sizeof(out), DEADLINE_S);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	/* GDRC_STATS=1: the open context's counters at exit, once. */
	st = child_run(child_exit_stats, 0, out, sizeof(out), DEADLINE_S);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_non_null(strstr(out, "\"regions\": 2"));
	assert_non_null(strstr(out, "stats {"));
	assert_null(strstr(strstr(out, "stats {") + 1, "stats {"));
	/* Whole: the last counter is there, and the object closes. */
	{
		char last[64];

		snprintf(last, sizeof(last), "\"%s\": ",
			 gdrc_stat_name((enum gdrc_stat)(GDRC_STAT_COUNT - 1)));
		assert_non_null(strstr(out, last));
		assert_non_null(strstr(strstr(out, last), "}"));
	}
}

static struct gdrc_ctx *at_exit_ctx;

static void fini_at_exit(void)
{
	gdrc_fini(at_exit_ctx);
	fprintf(stderr, "fini_at_exit done\n");
}

/* Registered before the first gdrc_init: runs after the library's own
 * exit handler (GDRC_STATS prints there). */
static void child_atexit_before_init(int unused)
{
	(void)unused;
	setenv("GDRC_STATS", "1", 1);
	if (atexit(fini_at_exit))
		return;
	at_exit_ctx = open_with_registrations();
	exit(0);
}

/* Registered after it: runs first. */
static void child_atexit_after_init(int unused)
{
	(void)unused;
	setenv("GDRC_STATS", "1", 1);
	at_exit_ctx = open_with_registrations();
	if (atexit(fini_at_exit))
		return;
	exit(0);
}

/* gdrc_fini from "MPI_Finalize", and again at exit. */
static void child_fini_twice_at_exit(int unused)
{
	(void)unused;
	setenv("GDRC_MISUSE", "warn", 1);
	at_exit_ctx = open_with_registrations();
	if (atexit(fini_at_exit))
		return;
	gdrc_fini(at_exit_ctx);
	exit(0);
}

static void test_exit_atexit_fini(void **state)
{
	char out[8192];
	int st;

	(void)state;
	st = child_run(child_atexit_before_init, 0, out, sizeof(out), DEADLINE_S);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_non_null(strstr(out, "fini_at_exit done"));
	assert_non_null(strstr(out, "1 registrations still held at fini"));
	assert_null(strstr(out, ": misuse: "));
	st = child_run(child_atexit_after_init, 0, out, sizeof(out), DEADLINE_S);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_non_null(strstr(out, "fini_at_exit done"));
	assert_null(strstr(out, ": misuse: "));
	st = child_run(child_fini_twice_at_exit, 0, out, sizeof(out), DEADLINE_S);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_non_null(strstr(out, "gdrc_fini: misuse: context"));
	assert_non_null(strstr(out, "fini_at_exit done"));
}

/* ====================================================================
 * munmap from a signal handler
 * ==================================================================== */

#define VICTIMS 64
#define SIG_ROUNDS 2000

static char *victim[VICTIMS];
static volatile sig_atomic_t armed = -1; /* victim the handler unmaps */
static volatile sig_atomic_t unmapped;   /* unmaps done by handlers */
static volatile sig_atomic_t in_handler_fail;

static void on_alarm(int sig)
{
	int saved = errno, v = armed;

	(void)sig;
	if (v >= 0) {
		if (munmap(victim[v], PAGE))
			in_handler_fail = 1;
		armed = -1;
		unmapped++;
	}
	errno = saved;
}

static uint64_t id_of(struct gdrc_mr *mr)
{
	struct gdrc_mr_info info;

	if (gdrc_mr_query(mr, &info))
		_exit(97);
	return info.id;
}

/*
 * Each round: register a victim page (id1), arm the handler, and keep
 * the main thread busy in the hooks and the cache (map and unmap a
 * scratch range, get and put, drain by a miss) until the handler has
 * unmapped it; then map a new page at the same address: its registration
 * must be new.  Exit code: 0, or the failing step.
 */
static void child_signal_munmap(int unused)
{
	(void)unused;
	struct itimerval it = { { 0, 50 }, { 0, 50 } };
	struct sigaction sa = { .sa_handler = on_alarm };
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr, *other;
	char *scratch;
	long busy = 0;

	if (gdrc_init(NULL, &ctx) || gdrc_hooks_status(ctx, NULL) != GDRC_OK)
		_exit(77);
	for (int v = 0; v < VICTIMS; v++) {
		victim[v] = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (victim[v] == MAP_FAILED)
			_exit(2);
	}
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	if (sigaction(SIGALRM, &sa, NULL) || setitimer(ITIMER_REAL, &it, NULL))
		_exit(3);
	for (int round = 0; round < SIG_ROUNDS; round++) {
		int v = round % VICTIMS, before = unmapped;
		uint64_t id1;

		if (gdrc_mr_get(ctx, victim[v], PAGE, 0, 0, &mr))
			_exit(4);
		id1 = id_of(mr);
		gdrc_mr_put(ctx, mr);
		armed = v;
		while (unmapped == before) {
			scratch = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (scratch == MAP_FAILED)
				_exit(5);
			if (gdrc_mr_get(ctx, scratch, 4 * PAGE, 0, 0, &other))
				_exit(6);
			gdrc_mr_put(ctx, other);
			if (munmap(scratch, 4 * PAGE))
				_exit(7);
			busy++;
		}
		if (mmap(victim[v], PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
		    victim[v])
			_exit(8);
		if (gdrc_mr_get(ctx, victim[v], PAGE, 0, 0, &mr))
			_exit(9);
		if (id_of(mr) == id1)
			_exit(10); /* a registration of the unmapped page */
		gdrc_mr_put(ctx, mr);
	}
	it = (struct itimerval){ { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &it, NULL);
	if (in_handler_fail)
		_exit(11);
	fprintf(stderr, "rounds %d, busy iterations %ld\n", SIG_ROUNDS, busy);
	gdrc_fini(ctx);
	_exit(0);
}

static void test_exit_signal_handler_munmap(void **state)
{
	char out[8192];
	int st;

	(void)state;
	st = child_run(child_signal_munmap, 0, out, sizeof(out), DEADLINE_S);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
		skip();
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("child status %#x: %s", st, out);
	print_message("%s", out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_with_contexts_open),
		cmocka_unit_test(test_exit_atexit_fini),
		cmocka_unit_test(test_exit_signal_handler_munmap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
