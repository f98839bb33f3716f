// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_misuse.c - a caller that gets its own lifetimes wrong learns it at
 * the faulty call (GDRC_MISUSE, docs/env.md): one error line naming the
 * call and the handle or context, GDRC_STAT_MISUSE counts it, and then
 * either the process aborts (abort: checked in forked children) or
 * nothing changes (warn: every counter and registration checked).  The
 * cases are issue 17's list: calls after gdrc_fini, a second gdrc_fini,
 * double puts of every kind of handle, puts of what is not a handle, of
 * another context's, and of handles held at gdrc_fini.
 */
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctx_stat.h"

#include <gdrcache.h>

#include "child_capture.h"

#define BUF_LEN (64 * 4096)
/* Never read: every call it is given fails before. */
#define SENTINEL_MR ((struct gdrc_mr *)0x5a5a5a5a)

static char *buf;

/* The log: the last error line, and how many there were. */
static char last_error[512];
static int errors;

static void sink(enum gdrc_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level != GDRC_LOG_ERROR)
		return;
	snprintf(last_error, sizeof(last_error), "%s", msg);
	errors++;
}

static int setup(void **state)
{
	(void)state;
	setenv("GDRC_MISUSE", "warn", 1);
	setenv("GDRC_BACKEND", "none", 1);
	last_error[0] = 0;
	errors = 0;
	gdrc_log_set_handler(sink, NULL);
	buf = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(buf != MAP_FAILED);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	gdrc_log_set_handler(NULL, NULL);
	munmap(buf, BUF_LEN);
	return 0;
}

static struct gdrc_ctx *ctx_new(void)
{
	struct gdrc_ctx *ctx = NULL;

	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	return ctx;
}

/* The process-wide misuse count, read through a fresh context. */
static uint64_t misuses(void)
{
	struct gdrc_ctx *ctx = ctx_new();
	uint64_t n = ctx_stat(ctx, GDRC_STAT_MISUSE);

	gdrc_fini(ctx);
	return n;
}

static struct gdrc_mr *get(struct gdrc_ctx *ctx, size_t off, uint32_t flags)
{
	struct gdrc_mr *mr = NULL;

	assert_int_equal(gdrc_mr_get(ctx, buf + off, 4096,
				     GDRC_ACCESS_LOCAL_WRITE, flags, &mr),
			 GDRC_OK);
	return mr;
}

/* A get served through this thread's handle: a registration's first
 * get is a direct reference, its second (after a put) the handle. */
static struct gdrc_mr *get_handle(struct gdrc_ctx *ctx, size_t off)
{
	gdrc_mr_put(ctx, get(ctx, off, 0));
	return get(ctx, off, 0);
}

/* The last error line says call, "misuse" and what. */
static void assert_said(const char *call, const char *what)
{
	assert_non_null(strstr(last_error, call));
	assert_non_null(strstr(last_error, "misuse"));
	assert_non_null(strstr(last_error, what));
}

/* Counters a wrongly accepted put or get would move. */
struct snap {
	uint64_t puts, regions, deregs, hits, misses;
};

static struct snap snap_of(struct gdrc_ctx *ctx)
{
	return (struct snap){
		.puts = ctx_stat(ctx, GDRC_STAT_PUTS),
		.regions = ctx_stat(ctx, GDRC_STAT_REGIONS),
		.deregs = ctx_stat(ctx, GDRC_STAT_DEREGS),
		.hits = ctx_stat(ctx, GDRC_STAT_HITS),
		.misses = ctx_stat(ctx, GDRC_STAT_MISSES),
	};
}

static void assert_unchanged(struct gdrc_ctx *ctx, struct snap s)
{
	struct snap now = snap_of(ctx);

	assert_int_equal(now.puts, s.puts);
	assert_int_equal(now.regions, s.regions);
	assert_int_equal(now.deregs, s.deregs);
	assert_int_equal(now.hits, s.hits);
	assert_int_equal(now.misses, s.misses);
}

/* ====================================================================
 * Contexts
 * ==================================================================== */

/* Every call on a finished context: GDRC_ERR_INVALID_PARAM, no spin, no
 * touch of freed memory (ASan, valgrind). */
static void test_misuse_calls_after_fini(void **state)
{
	struct gdrc_ctx *ctx = ctx_new();
	struct gdrc_mr *mr = SENTINEL_MR;
	struct gdrc_ptr_info pinfo;
	uint64_t v = 7, before = misuses();
	const char *why = NULL;
	char text[64];

	(void)state;
	gdrc_fini(ctx);
	errors = 0;
	assert_int_equal(gdrc_mr_get(ctx, buf, 4096, 0, 0, &mr),
			 GDRC_ERR_INVALID_PARAM);
	assert_ptr_equal(mr, SENTINEL_MR);
	assert_said("gdrc_mr_get", "finished");
	assert_int_equal(gdrc_mr_reget(ctx, SENTINEL_MR, buf, 4096, 0),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_ptr_query(ctx, buf, &pinfo),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_invalidate(ctx, buf, 4096),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_HITS, &v),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(v, 7);
	assert_int_equal(gdrc_stats_dump(ctx, GDRC_DUMP_TEXT, text,
					 sizeof(text), NULL),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_release_unused(ctx, GDRC_DEVICE_ALL, &v),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_device_stat_get(ctx, GDRC_DEVICE_ALL,
					      GDRC_DEVICE_STAT_REGIONS, &v),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_gpu_status(ctx, &why), GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_hooks_status(ctx, &why),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_kmod_status(ctx, &why), GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_cuda_hooks_status(ctx, &why),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_backend_status(ctx, GDRC_BACKEND_NONE, &why),
			 GDRC_ERR_INVALID_PARAM);
	assert_null(why);
	gdrc_mr_put(ctx, SENTINEL_MR); /* not read: the context fails first */
	assert_said("gdrc_mr_put", "finished");
	assert_int_equal(errors, 14);
	assert_int_equal(misuses(), before + 14);
}

/* A second gdrc_fini is a misuse, not a double free. */
static void test_misuse_double_fini(void **state)
{
	struct gdrc_ctx *ctx = ctx_new();
	uint64_t before = misuses();

	(void)state;
	(void)get(ctx, 0, 0);
	gdrc_fini(ctx);
	gdrc_fini(ctx);
	assert_said("gdrc_fini", "finished");
	assert_int_equal(misuses(), before + 1);
}

/*
 * The memory of a finished context serves a later gdrc_init, which
 * hands out another pointer: the old one still fails, the new context is
 * untouched by calls on it.
 */
static void test_misuse_stale_pointer_after_reuse(void **state)
{
	struct gdrc_ctx *old = ctx_new(), *cur;
	struct gdrc_mr *mr;
	struct snap s;
	int reused = 0;

	(void)state;
	gdrc_fini(old);
	for (int i = 0; i < 8; i++) {
		cur = ctx_new();
		if (((uintptr_t)cur & ~(uintptr_t)4095) ==
		    ((uintptr_t)old & ~(uintptr_t)4095))
			reused++;
		assert_ptr_not_equal(cur, old);
		mr = get(cur, 0, 0);
		s = snap_of(cur);
		errors = 0;
		assert_int_equal(gdrc_invalidate(old, buf, BUF_LEN),
				 GDRC_ERR_INVALID_PARAM);
		gdrc_mr_put(old, mr);
		assert_int_equal(errors, 2);
		assert_unchanged(cur, s);
		gdrc_mr_put(cur, mr);
		gdrc_fini(cur);
	}
	/* First in, first out: with no other context finished, the old
	 * memory came back. */
	assert_true(reused > 0);
}

/*
 * Registrations still held at gdrc_fini are released there (a warning
 * counts them); a later put through the finished context is a misuse
 * that reads nothing of the handle.
 */
static void test_misuse_put_after_fini_of_held(void **state)
{
	struct gdrc_ctx *ctx = ctx_new();
	struct gdrc_mr *a = get(ctx, 0, 0);
	struct gdrc_mr *b = get(ctx, 8192, GDRC_GET_UNCACHED);
	uint64_t before = misuses();

	(void)state;
	gdrc_fini(ctx);
	gdrc_mr_put(ctx, a);
	gdrc_mr_put(ctx, b);
	assert_said("gdrc_mr_put", "finished");
	assert_int_equal(misuses(), before + 2);
}

/* ====================================================================
 * Handles
 * ==================================================================== */

/* mr's put, then its second: refused as a double put, counted once,
 * nothing else changed.  @return the state between the two. */
static struct snap double_put_refused(struct gdrc_ctx *ctx,
				      struct gdrc_mr *mr)
{
	uint64_t before;
	struct snap s;

	gdrc_mr_put(ctx, mr);
	s = snap_of(ctx);
	before = ctx_stat(ctx, GDRC_STAT_MISUSE);
	gdrc_mr_put(ctx, mr);
	assert_said("gdrc_mr_put", "no get outstanding: a double put");
	assert_unchanged(ctx, s);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), before + 1);
	return s;
}

/* The owner's double put on its fast-path handle. */
static void test_misuse_double_put_owner(void **state)
{
	struct gdrc_ctx *ctx = ctx_new();
	struct gdrc_mr *mr = get_handle(ctx, 0), *again;
	struct snap s;

	(void)state;
	s = double_put_refused(ctx, mr);
	/* Gets and puts go on as before: a hit, then a put that counts. */
	again = get(ctx, 0, 0);
	assert_ptr_equal(again, mr);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_HITS), s.hits + 1);
	gdrc_mr_put(ctx, again);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PUTS), s.puts + 1);
	gdrc_mr_put(ctx, again);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PUTS), s.puts + 1);
	gdrc_fini(ctx);
}

/* Two gets, three puts: only the third is refused. */
static void test_misuse_one_put_too_many(void **state)
{
	struct gdrc_ctx *ctx = ctx_new();
	struct gdrc_mr *mr = get_handle(ctx, 0);
	uint64_t puts, before;

	(void)state;
	assert_ptr_equal(get(ctx, 0, 0), mr);
	puts = ctx_stat(ctx, GDRC_STAT_PUTS);
	before = ctx_stat(ctx, GDRC_STAT_MISUSE);
	gdrc_mr_put(ctx, mr);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), before);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), before + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PUTS), puts + 2);
	gdrc_fini(ctx);
}

struct put_arg {
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	int times;
};

static void *put_thread(void *p)
{
	struct put_arg *a = p;

	for (int i = 0; i < a->times; i++)
		gdrc_mr_put(a->ctx, a->mr);
	return NULL;
}

static void put_from_thread(struct gdrc_ctx *ctx, struct gdrc_mr *mr,
			    int times)
{
	struct put_arg a = { ctx, mr, times };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, put_thread, &a), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

/* Another thread puts what this one got, twice: the second is refused,
 * and the owner's own put after it too (nothing is outstanding). */
static void test_misuse_double_put_remote(void **state)
{
	struct gdrc_ctx *ctx = ctx_new();
	struct gdrc_mr *mr = get_handle(ctx, 0);
	uint64_t puts = ctx_stat(ctx, GDRC_STAT_PUTS);
	uint64_t before = ctx_stat(ctx, GDRC_STAT_MISUSE);

	(void)state;
	put_from_thread(ctx, mr, 2);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PUTS), puts + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), before + 1);
	assert_said("gdrc_mr_put", "no get outstanding");
	gdrc_mr_put(ctx, mr);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PUTS), puts + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), before + 2);
	/* Still a working handle: get and put again. */
	assert_ptr_equal(get(ctx, 0, 0), mr);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PUTS), puts + 2);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), before + 2);
	gdrc_fini(ctx);
}

/*
 * A handle the owner let go of (its entry replaced by four other
 * registrations): the late double put finds it released; nothing is
 * released twice, and the registration is still served.
 */
static void test_misuse_double_put_after_retire(void **state)
{
	struct gdrc_ctx *ctx = ctx_new();
	struct gdrc_mr *mr = get(ctx, 0, 0), *o[8];
	uint64_t before, deregs;

	(void)state;
	gdrc_mr_put(ctx, mr);
	for (int i = 0; i < 8; i++)
		o[i] = get(ctx, (size_t)(i + 2) * 8192, 0);
	for (int i = 0; i < 8; i++)
		gdrc_mr_put(ctx, o[i]);
	before = ctx_stat(ctx, GDRC_STAT_MISUSE);
	deregs = ctx_stat(ctx, GDRC_STAT_DEREGS);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), before + 1);
	assert_said("gdrc_mr_put", "double put");
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), deregs);
	mr = get(ctx, 0, 0);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 9);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
}

/* A cached registration's first get (a direct reference, no handle):
 * its double put is refused and changes nothing; the registration stays
 * cached and served. */
static void test_misuse_double_put_first_get(void **state)
{
	struct gdrc_ctx *ctx = ctx_new();
	struct snap s;

	(void)state;
	s = double_put_refused(ctx, get(ctx, 0, 0));
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 1);
	gdrc_mr_put(ctx, get(ctx, 0, 0));
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_HITS), s.hits + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), 0);
	gdrc_fini(ctx);
}

/* An uncached registration (a direct reference): its double put is
 * refused, so the registration is released once. */
static void test_misuse_double_put_uncached(void **state)
{
	struct gdrc_ctx *ctx = ctx_new();
	struct gdrc_mr *a = get(ctx, 0, GDRC_GET_UNCACHED);
	struct gdrc_mr *b = get(ctx, 0, GDRC_GET_UNCACHED);
	uint64_t before = ctx_stat(ctx, GDRC_STAT_MISUSE);

	(void)state;
	assert_ptr_not_equal(a, b);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), 0);
	gdrc_mr_put(ctx, a);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), 1);
	/* a's memory went back to the pool: the put finds no magic. */
	gdrc_mr_put(ctx, a);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), before + 1);
	assert_said("gdrc_mr_put", "not a registration");
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), 1);
	gdrc_mr_put(ctx, b);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), 2);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), before + 1);
	gdrc_fini(ctx);
}

/* What is not a handle: memory of the caller's (zeroed, or a copy of a
 * handle's bytes), the context pointer itself. */
static void test_misuse_put_not_a_handle(void **state)
{
	struct gdrc_ctx *ctx = ctx_new();
	struct gdrc_mr *mr = get(ctx, 0, 0);
	uint64_t garbage[16] = { 0 }, before;
	struct gdrc_mr_info info;
	struct snap s;

	(void)state;
	s = snap_of(ctx);
	before = ctx_stat(ctx, GDRC_STAT_MISUSE);
	gdrc_mr_put(ctx, (struct gdrc_mr *)garbage);
	assert_said("gdrc_mr_put", "not a registration");
	gdrc_mr_put(ctx, (struct gdrc_mr *)buf);
	gdrc_mr_put(ctx, (struct gdrc_mr *)ctx);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), before + 3);
	assert_int_equal(gdrc_mr_query((struct gdrc_mr *)garbage, &info),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_lkey((struct gdrc_mr *)garbage), 0);
	assert_int_equal(gdrc_mr_rkey((struct gdrc_mr *)garbage), 0);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), before + 6);
	assert_unchanged(ctx, s);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
}

/* A handle of another (live) context, put through this one. */
static void test_misuse_put_other_context(void **state)
{
	struct gdrc_ctx *a = ctx_new(), *b = ctx_new();
	struct gdrc_mr *mr = get(a, 0, 0);
	struct gdrc_mr *u = get(a, 8192, GDRC_GET_UNCACHED);
	uint64_t before = ctx_stat(a, GDRC_STAT_MISUSE);
	struct snap sa, sb;

	(void)state;
	sa = snap_of(a);
	sb = snap_of(b);
	gdrc_mr_put(b, mr);
	assert_said("gdrc_mr_put", "another context");
	gdrc_mr_put(b, u);
	assert_unchanged(a, sa);
	assert_unchanged(b, sb);
	assert_int_equal(ctx_stat(a, GDRC_STAT_MISUSE), before + 2);
	gdrc_mr_put(a, mr);
	gdrc_mr_put(a, u);
	assert_int_equal(ctx_stat(a, GDRC_STAT_PUTS), sa.puts + 2);
	gdrc_fini(b);
	gdrc_fini(a);
}

/* ====================================================================
 * GDRC_MISUSE=abort: the process stops at the faulty call, with the line
 * ==================================================================== */

enum abort_case { AB_GET_AFTER_FINI, AB_DOUBLE_FINI, AB_DOUBLE_PUT };

static void abort_child(int c)
{
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;

	gdrc_log_set_handler(NULL, NULL); /* stderr: the parent reads it */
	setenv("GDRC_MISUSE", "abort", 1);
	alarm(20); /* a spin would end here, as SIGALRM */
	ctx = ctx_new();
	mr = get(ctx, 0, 0);
	switch (c) {
	case AB_GET_AFTER_FINI:
		gdrc_fini(ctx);
		(void)gdrc_mr_get(ctx, buf, 4096, 0, 0, &mr);
		break;
	case AB_DOUBLE_FINI:
		gdrc_fini(ctx);
		gdrc_fini(ctx);
		break;
	case AB_DOUBLE_PUT:
		gdrc_mr_put(ctx, mr);
		gdrc_mr_put(ctx, mr);
		break;
	}
	_exit(0); /* not reached */
}

static void expect_abort(enum abort_case c, const char *line)
{
	char out[4096];
	int status = child_run(abort_child, (int)c, out, sizeof(out), 60);

	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
		fail_msg("case %d: status %#x, output: %s", c, status, out);
	if (!strstr(out, line) || !strstr(out, "GDRC_MISUSE=abort"))
		fail_msg("case %d: no '%s' in: %s", c, line, out);
}

static void test_misuse_abort_policy(void **state)
{
	(void)state;
	expect_abort(AB_GET_AFTER_FINI, "gdrc_mr_get: misuse: context");
	expect_abort(AB_DOUBLE_FINI, "gdrc_fini: misuse: context");
	expect_abort(AB_DOUBLE_PUT, "gdrc_mr_put: misuse: handle");
}

/* ====================================================================
 * Documented acceptances
 * ==================================================================== */

/*
 * The none backend (track only) registers nothing, so nothing checks the
 * memory: an unmapped range and a read-only one asked for remote write
 * are accepted (gdrcache.h, GDRC_BACKEND_NONE).  Not misuses.
 */
static void test_misuse_track_only_accepts_what_no_nic_checks(void **state)
{
	struct gdrc_ctx *ctx = ctx_new();
	char *ro = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	char *gone = mmap(NULL, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	struct gdrc_mr *mr;
	uint64_t before = ctx_stat(ctx, GDRC_STAT_MISUSE);

	(void)state;
	assert_true(ro != MAP_FAILED && gone != MAP_FAILED);
	assert_int_equal(munmap(gone, 8192), 0);
	assert_int_equal(gdrc_mr_get(ctx, ro, 8192,
				     GDRC_ACCESS_REMOTE_WRITE, 0, &mr),
			 GDRC_OK);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(gdrc_mr_get(ctx, gone, 8192, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), before);
	munmap(ro, 8192);
	gdrc_fini(ctx);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_misuse_calls_after_fini),
		T(test_misuse_double_fini),
		T(test_misuse_stale_pointer_after_reuse),
		T(test_misuse_put_after_fini_of_held),
		T(test_misuse_double_put_owner),
		T(test_misuse_one_put_too_many),
		T(test_misuse_double_put_remote),
		T(test_misuse_double_put_after_retire),
		T(test_misuse_double_put_first_get),
		T(test_misuse_double_put_uncached),
		T(test_misuse_put_not_a_handle),
		T(test_misuse_put_other_context),
		T(test_misuse_abort_policy),
		T(test_misuse_track_only_accepts_what_no_nic_checks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
