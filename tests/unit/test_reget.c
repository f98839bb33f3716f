// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_reget.c - gdrc_mr_reget: a get served from a registration the
 * caller already holds (the preload keeps one per thread between a
 * dereg and the next reg).  It must answer GDRC_OK only when a cached
 * get would have been a hit on that very registration, count it as one,
 * take no reference, and answer GDRC_ERR_STALE whenever the memory went
 * (munmap, gdrc_invalidate), the request is wider or wants more access,
 * the handle is another thread's, or the caller holds a direct reference
 * (a registration's first get).  Public API, none backend, hooks on.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "ctx_stat.h"

#include <gdrcache.h>

#define PAGE 4096UL

struct fix {
	struct gdrc_ctx *ctx;
	char *p;
	struct gdrc_mr *mr;
	uint64_t id;
};

static uint64_t id_of(const struct gdrc_mr *mr)
{
	struct gdrc_mr_info i;

	assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
	return i.id;
}

/* Two pages mapped, the first got, put, and got again and held: the
 * miss served a direct reference, the second get this thread's handle,
 * which reget serves. */
static int setup(void **state)
{
	static struct fix f;

	memset(&f, 0, sizeof(f));
	if (gdrc_init(NULL, &f.ctx))
		return -1;
	f.p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (f.p == MAP_FAILED ||
	    gdrc_mr_get(f.ctx, f.p, PAGE, GDRC_ACCESS_LOCAL_WRITE, 0, &f.mr))
		return -1;
	gdrc_mr_put(f.ctx, f.mr);
	if (gdrc_mr_get(f.ctx, f.p, PAGE, GDRC_ACCESS_LOCAL_WRITE, 0, &f.mr))
		return -1;
	f.id = id_of(f.mr);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	if (f->mr)
		gdrc_mr_put(f->ctx, f->mr);
	munmap(f->p, 2 * PAGE);
	gdrc_fini(f->ctx);
	return 0;
}

static void test_reget_held_is_a_hit_without_a_reference(void **state)
{
	struct fix *f = *state;
	uint64_t hits = ctx_stat(f->ctx, GDRC_STAT_HITS);

	assert_int_equal(gdrc_mr_reget(f->ctx, f->mr, f->p + 8, 64,
				       GDRC_ACCESS_LOCAL_WRITE),
			 GDRC_OK);
	assert_int_equal(gdrc_mr_reget(f->ctx, f->mr, f->p, PAGE, 0), GDRC_OK);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_HITS), hits + 2);
	/* One put drops the one reference: invalidated, it is released. */
	gdrc_mr_put(f->ctx, f->mr);
	f->mr = NULL;
	assert_int_equal(gdrc_invalidate(f->ctx, f->p, PAGE), GDRC_OK);
	/* Nobody holds it any more: released, nothing pinned. */
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_PINNED_BYTES), 0);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_DEREGS), 1);
}

static void test_reget_after_munmap_is_stale(void **state)
{
	struct fix *f = *state;
	struct gdrc_mr *mr;
	uint64_t hits = ctx_stat(f->ctx, GDRC_STAT_HITS);

	assert_int_equal(munmap(f->p, PAGE), 0);
	assert_true(mmap(f->p, PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			 0) == f->p);
	assert_int_equal(gdrc_mr_reget(f->ctx, f->mr, f->p, 64,
				       GDRC_ACCESS_LOCAL_WRITE),
			 GDRC_ERR_STALE);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_HITS), hits);
	gdrc_mr_put(f->ctx, f->mr);
	f->mr = NULL;
	assert_int_equal(gdrc_mr_get(f->ctx, f->p, 64, 0, 0, &mr), GDRC_OK);
	assert_true(id_of(mr) != f->id);
	gdrc_mr_put(f->ctx, mr);
}

static void test_reget_after_invalidate_is_stale(void **state)
{
	struct fix *f = *state;

	assert_int_equal(gdrc_invalidate(f->ctx, f->p, PAGE), GDRC_OK);
	assert_int_equal(gdrc_mr_reget(f->ctx, f->mr, f->p, 64, 0),
			 GDRC_ERR_STALE);
}

static void test_reget_wider_or_more_access_is_stale(void **state)
{
	struct fix *f = *state;

	assert_int_equal(gdrc_mr_reget(f->ctx, f->mr, f->p, PAGE + 1, 0),
			 GDRC_ERR_STALE);
	assert_int_equal(gdrc_mr_reget(f->ctx, f->mr, f->p + PAGE, 64, 0),
			 GDRC_ERR_STALE);
	assert_int_equal(gdrc_mr_reget(f->ctx, f->mr, f->p, 64,
				       GDRC_ACCESS_REMOTE_READ),
			 GDRC_ERR_STALE);
	/* Still good for what it covers. */
	assert_int_equal(gdrc_mr_reget(f->ctx, f->mr, f->p, 64, 0), GDRC_OK);
}

static void *other_thread(void *arg)
{
	struct fix *f = arg;

	return (void *)(intptr_t)gdrc_mr_reget(f->ctx, f->mr, f->p, 64, 0);
}

static void test_reget_another_threads_handle_is_stale(void **state)
{
	struct fix *f = *state;
	pthread_t t;
	void *ret;

	assert_int_equal(pthread_create(&t, NULL, other_thread, f), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_int_equal((int)(intptr_t)ret, GDRC_ERR_STALE);
}

/* The second page's first get is a miss, served as a direct reference
 * (a registration got once costs no handle): reget answers STALE and
 * changes nothing; put and get again (a hit, now through this thread's
 * handle) and reget serves it. */
static void test_reget_of_a_miss_is_stale_until_got_again(void **state)
{
	struct fix *f = *state;
	struct gdrc_mr *mr;
	uint64_t hits, id;

	assert_int_equal(gdrc_mr_get(f->ctx, f->p + PAGE, 64, 0, 0, &mr),
			 GDRC_OK);
	id = id_of(mr);
	hits = ctx_stat(f->ctx, GDRC_STAT_HITS);
	assert_int_equal(gdrc_mr_reget(f->ctx, mr, f->p + PAGE, 64, 0),
			 GDRC_ERR_STALE);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_HITS), hits);
	gdrc_mr_put(f->ctx, mr);
	assert_int_equal(gdrc_mr_get(f->ctx, f->p + PAGE, 64, 0, 0, &mr),
			 GDRC_OK);
	assert_int_equal(id_of(mr), id);
	assert_int_equal(gdrc_mr_reget(f->ctx, mr, f->p + PAGE, 64, 0),
			 GDRC_OK);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_HITS), hits + 2);
	gdrc_mr_put(f->ctx, mr);
}

static void test_reget_bad_params_change_nothing(void **state)
{
	struct fix *f = *state;
	uint64_t hits = ctx_stat(f->ctx, GDRC_STAT_HITS);

	assert_int_equal(gdrc_mr_reget(NULL, f->mr, f->p, 64, 0),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_reget(f->ctx, NULL, f->p, 64, 0),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_reget(f->ctx, f->mr, f->p, 0, 0),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_reget(f->ctx, f->mr, (void *)(UINTPTR_MAX - 8),
				       64, 0),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_reget(f->ctx, f->mr, f->p, 64, 1u << 30),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_HITS), hits);
	assert_int_equal(gdrc_mr_reget(f->ctx, f->mr, f->p, 64, 0), GDRC_OK);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_reget_held_is_a_hit_without_a_reference),
		T(test_reget_after_munmap_is_stale),
		T(test_reget_after_invalidate_is_stale),
		T(test_reget_wider_or_more_access_is_stale),
		T(test_reget_another_threads_handle_is_stale),
		T(test_reget_of_a_miss_is_stale_until_got_again),
		T(test_reget_bad_params_change_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
