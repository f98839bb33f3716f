// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_parked.c - handles the fast path replaced and the thread kept
 * (handle.c, "parked"): a thread taking more buffers in turn than the
 * fast path remembers is served from them without a miss; memory unmapped
 * under a parked handle is never served; a parked handle on a region
 * that left the cache is let go of at the thread's next get that the
 * fast path does not serve, and every parked handle at the thread's
 * exit.
 * Every put also runs under GDRC_MISUSE=abort (CMake), so a put of a
 * parked handle taken for a double put would abort.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "ctx_stat.h"
#include "map_pages.h"

#include <gdrcache.h>

#define PAGE 4096UL
#define NPAGES 12 /* more than the fast path's four entries */
#define MAPPED (NPAGES + 1) /* and one more, for a miss */

static struct gdrc_ctx *ctx;
static char *buf;

/* get + put of page i; @return the registration's id (0: failed). */
static uint64_t touch(int i)
{
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;
	uint64_t id;

	if (gdrc_mr_get(ctx, buf + i * PAGE + 8, 64, GDRC_ACCESS_LOCAL_WRITE,
			0, &mr))
		return 0;
	if (gdrc_mr_query(mr, &info) || info.key_addr > (uintptr_t)buf + i * PAGE ||
	    info.key_addr + info.key_length < (uintptr_t)buf + (i + 1) * PAGE)
		id = 0; /* served a registration of other memory */
	else
		id = info.id;
	gdrc_mr_put(ctx, mr);
	return id;
}

static int setup(void **state)
{
	(void)state;
	buf = map_at(NULL, MAPPED * PAGE);
	return gdrc_init(NULL, &ctx) == GDRC_OK ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	gdrc_fini(ctx);
	munmap(buf, MAPPED * PAGE);
	return 0;
}

/* More buffers than a thread's first parked table holds
 * (GDRC_TLS_PARKED, 128), and EXTRA more for misses: enough for a look
 * over the largest table (GDRC_TLS_PARKED_MAX, 256 entries a get). */
#define BIG 600
#define EXTRA 40

static int setup_big(void **state)
{
	(void)state;
	buf = map_at(NULL, (BIG + EXTRA) * PAGE);
	return gdrc_init(NULL, &ctx) == GDRC_OK ? 0 : -1;
}

/* The same under a limit of bytes (far more than BIG pages). */
static int setup_big_limited(void **state)
{
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_MAX_BYTES,
		.max_bytes = 1ULL << 30,
	};

	(void)state;
	buf = map_at(NULL, (BIG + EXTRA) * PAGE);
	return gdrc_init(&cfg, &ctx) == GDRC_OK ? 0 : -1;
}

static int teardown_big(void **state)
{
	(void)state;
	gdrc_fini(ctx);
	munmap(buf, (BIG + EXTRA) * PAGE);
	return 0;
}

/* Rounds over every page: all hits after the first round, each get
 * served its own page's registration, every registration the same. */
static void test_parked_rounds_hit(void **state)
{
	uint64_t ids[NPAGES], misses;

	(void)state;
	for (int i = 0; i < NPAGES; i++)
		assert_int_not_equal(ids[i] = touch(i), 0);
	misses = ctx_stat(ctx, GDRC_STAT_MISSES);
	assert_int_equal(misses, NPAGES);
	for (int round = 0; round < 50; round++)
		for (int i = 0; i < NPAGES; i++)
			assert_int_equal(touch((i * 5 + round) % NPAGES),
					 ids[(i * 5 + round) % NPAGES]);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), misses);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_HITS), 50 * NPAGES);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PUTS), 51 * NPAGES);
}

/* A page mapped again under its parked handle is a miss, a new
 * registration; the others are still hits. */
static void test_parked_remap_not_served(void **state)
{
	uint64_t ids[NPAGES], misses;

	(void)state;
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < NPAGES; i++)
			assert_int_not_equal(ids[i] = touch(i), 0);
	/* Pages 0..7 were replaced in the fast path's entries by 8..11. */
	misses = ctx_stat(ctx, GDRC_STAT_MISSES);
	assert_true(mmap(buf + 2 * PAGE, PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
		    buf + 2 * PAGE);
	for (int i = 0; i < NPAGES; i++) {
		uint64_t id = touch(i);

		assert_int_not_equal(id, 0);
		if (i == 2)
			assert_int_not_equal(id, ids[i]);
		else
			assert_int_equal(id, ids[i]);
	}
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), misses + 1);
}

/* Four pages, as many as the fast path's entries: after two rounds each
 * is in an entry of its own.  Every pair of them in turn, so that the
 * second is found in each place after the entry that served the first
 * (gdrc_mr_get looks at two, the other two after the parked table): all
 * hits, each its own registration.  Then page 2 is mapped again, and
 * the same pairs serve it a new registration once, never the old one. */
static void test_four_entries_any_order(void **state)
{
	uint64_t ids[4], misses, hits, id2 = 0;

	(void)state;
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 4; i++)
			assert_int_not_equal(ids[i] = touch(i), 0);
	misses = ctx_stat(ctx, GDRC_STAT_MISSES);
	hits = ctx_stat(ctx, GDRC_STAT_HITS);
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 4; b++) {
			assert_int_equal(touch(a), ids[a]);
			assert_int_equal(touch(b), ids[b]);
		}
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), misses);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_HITS), hits + 32);
	assert_true(mmap(buf + 2 * PAGE, PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
		    buf + 2 * PAGE);
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 4; b++) {
			int pages[2] = { a, b };

			for (int k = 0; k < 2; k++) {
				uint64_t id = touch(pages[k]);

				assert_int_not_equal(id, 0);
				if (pages[k] != 2) {
					assert_int_equal(id, ids[pages[k]]);
					continue;
				}
				assert_int_not_equal(id, ids[2]);
				if (!id2)
					id2 = id;
				assert_int_equal(id, id2);
			}
		}
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), misses + 1);
}

/* A second thread that runs what it is given, one job at a time, so
 * that its handles stay its own while this thread invalidates. */
static int (*_Atomic job)(void);
static _Atomic int job_ret;

/* The job that ends the worker. */
static int job_quit(void)
{
	return 0;
}

static void *job_worker(void *arg)
{
	int (*fn)(void);

	(void)arg;
	for (;;) {
		while (!(fn = atomic_load(&job)))
			sched_yield();
		if (fn == job_quit) {
			atomic_store(&job, NULL);
			return NULL;
		}
		atomic_store(&job_ret, fn());
		atomic_store(&job, NULL);
	}
}

/* End the job worker t and wait for it. */
static void worker_stop(pthread_t t)
{
	atomic_store(&job, job_quit);
	assert_int_equal(pthread_join(t, NULL), 0);
}

/* Run fn on the job worker; its result. */
static int on_worker(int (*fn)(void))
{
	atomic_store(&job, fn);
	while (atomic_load(&job))
		sched_yield();
	return atomic_load(&job_ret);
}

static struct gdrc_ctx *other;

/* Rounds over every page (each gets the worker's handle). */
static int rounds(void)
{
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < NPAGES; i++)
			if (!touch(i))
				return -1;
	return 0;
}

static int touch_0(void)
{
	return touch(0) ? 0 : -1;
}

static int miss_extra(void)
{
	return touch(NPAGES) ? 0 : -1;
}

/* Another thread's parked handle on an invalidated page keeps it
 * registered through that thread's hits, until its next get that the
 * fast path does not serve (here a miss); its other parked handles go
 * when it exits. */
static void test_parked_released(void **state)
{
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, job_worker, NULL), 0);
	assert_int_equal(on_worker(rounds), 0);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES), NPAGES * PAGE);
	/* Page 3 is parked (the worker's entries hold 8..11). */
	assert_int_equal(gdrc_invalidate(ctx, buf + 3 * PAGE, PAGE), GDRC_OK);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), NPAGES - 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES), NPAGES * PAGE);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), 0);
	assert_int_equal(on_worker(touch_0), 0);
	/* A hit (parked page 0): page 3 still registered. */
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES), NPAGES * PAGE);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), 0);
	assert_int_equal(on_worker(miss_extra), 0);
	/* A miss (the extra page, now cached): page 3 let go of. */
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES), NPAGES * PAGE);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), 1);
	/* Everything else out of the cache: the worker's handles (four
	 * remembered, the rest parked) keep it registered until it exits. */
	assert_int_equal(gdrc_invalidate(ctx, buf, MAPPED * PAGE), GDRC_OK);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES),
			 (NPAGES - 1) * PAGE);
	worker_stop(t);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES), 0);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), NPAGES + 1);
}

static int other_get(void)
{
	struct gdrc_mr *mr;

	if (gdrc_mr_get(other, buf, PAGE, 0, 0, &mr))
		return -1;
	gdrc_mr_put(other, mr);
	return 0;
}

static int touch_4(void)
{
	return touch(4) ? 0 : -1;
}

/* A thread's parked handles on regions that left a context go at its
 * next get in that context that the fast path does not serve, each
 * time, whatever it did in another context in between (a context whose
 * first get finds none of its own parked looks at none). */
static void test_parked_released_across_contexts(void **state)
{
	pthread_t t;

	(void)state;
	assert_int_equal(gdrc_init(NULL, &other), GDRC_OK);
	assert_int_equal(pthread_create(&t, NULL, job_worker, NULL), 0);
	assert_int_equal(on_worker(rounds), 0);
	/* Pages 3 and 4 are parked (the worker's entries hold 8..11). */
	assert_int_equal(gdrc_invalidate(ctx, buf + 3 * PAGE, PAGE), GDRC_OK);
	assert_int_equal(on_worker(other_get), 0);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), 0);
	assert_int_equal(on_worker(miss_extra), 0);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), 1);
	assert_int_equal(gdrc_invalidate(ctx, buf + 4 * PAGE, PAGE), GDRC_OK);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), 1);
	assert_int_equal(on_worker(touch_4), 0); /* a miss */
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), 2);
	worker_stop(t);
	gdrc_fini(other);
}

static int big_rounds(void)
{
	for (int round = 0; round < 10; round++)
		for (int i = 0; i < BIG; i++)
			if (!touch((i * 7 + round) % BIG))
				return -1;
	return 0;
}

/* Rounds over the first SOME pages, each in a random order of its own.
 * In the first parked table (128 slots, by page) three of them share
 * each of the first 64 slots, two each of the others. */
#define SOME 320
#define RANDOM_ROUNDS 30

static int some_random_rounds(void)
{
	static int order[SOME];
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	for (int i = 0; i < SOME; i++)
		order[i] = i;
	for (int round = 0; round < RANDOM_ROUNDS; round++) {
		for (int i = SOME - 1; i > 0; i--) { /* Fisher-Yates */
			int j, tmp;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			j = (int)(x % (uint64_t)(i + 1));
			tmp = order[i];
			order[i] = order[j];
			order[j] = tmp;
		}
		for (int i = 0; i < SOME; i++)
			if (!touch(order[i]))
				return -1;
	}
	return 0;
}

static int next_extra;

static int miss_next_extra(void)
{
	return touch(BIG + next_extra++) ? 0 : -1;
}

/*
 * Run run (rounds of gets) on a worker over the first pages pages (each
 * missed once, then hit hits times in all), invalidate them, and check
 * that more than pinned of them stay pinned by the worker's parked
 * handles (the table grew to hold them) until its next EXTRA gets, which
 * let go of them.  @return the worker, still running.
 */
static pthread_t grown_then_let_go(int (*run)(void), int pages,
				   uint64_t hits, uint64_t pinned)
{
	pthread_t t;

	next_extra = 0;
	assert_int_equal(pthread_create(&t, NULL, job_worker, NULL), 0);
	assert_int_equal(on_worker(run), 0);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), pages);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_HITS), hits);
	assert_int_equal(gdrc_invalidate(ctx, buf, pages * PAGE), GDRC_OK);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 0);
	assert_true(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES) > pinned * PAGE);
	for (int i = 0; i < EXTRA; i++)
		assert_int_equal(on_worker(miss_next_extra), 0);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES), EXTRA * PAGE);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), pages);
	return t;
}

/*
 * A thread taking BIG buffers in turn: its parked table grows to hold
 * them (so that an invalidation of them all leaves far more than 128
 * pinned by its handles), every get after the first round is a hit, and
 * its handles on regions that left the cache are let go of over its next
 * few gets that the fast path does not serve (a large table is looked
 * over a part at a time), then nothing of theirs is pinned.
 */
static void test_parked_grows(void **state)
{
	pthread_t t = grown_then_let_go(big_rounds, BIG, 9 * BIG, BIG / 2);

	(void)state;
	worker_stop(t);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES), EXTRA * PAGE);
}

/*
 * A thread taking 320 buffers in a random order, two or three to each
 * slot of its first parked table (128): the table serves part of its
 * gets and the others clash for its slots, which is not worth the
 * table's lines (parked_review), so it grows, and ends up holding every
 * buffer: every get after the first round a hit, and an invalidation of
 * them leaves them all pinned by the thread's handles until its next
 * look.  (This one grew under the review of before 2026-11-28 too; the
 * case that differs, a table that serves more than an eighth but not
 * three quarters of the gets while an eighth clash, is measured in
 * docs/design.md's parked table, not tested.)
 */
static void test_parked_grows_when_clashing(void **state)
{
	pthread_t t = grown_then_let_go(some_random_rounds, SOME,
					(RANDOM_ROUNDS - 1) * SOME, 200);

	(void)state;
	worker_stop(t);
}

/* The other context's pages: OTHER_PAGES taken in turn, then EXTRA
 * more for misses. */
#define OTHER_PAGES 20

static char *buf2;

static int other_touch(int i)
{
	struct gdrc_mr *mr;

	if (gdrc_mr_get(other, buf2 + i * PAGE, PAGE, 0, 0, &mr))
		return -1;
	gdrc_mr_put(other, mr);
	return 0;
}

/* Each page three times in a row (a handle from its second get on,
 * whatever the parked table's judgement), in turn: four handles
 * remembered, the rest parked. */
static int other_rounds(void)
{
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < OTHER_PAGES; i++)
			for (int k = 0; k < 3; k++)
				if (other_touch(i))
					return -1;
	return 0;
}

static int other_misses(void)
{
	for (int i = 0; i < EXTRA; i++)
		if (other_touch(OTHER_PAGES + i))
			return -1;
	return 0;
}

/* A grown table's look for one context's invalid entries, left half
 * done when the thread moves to another context, does not keep that
 * context's own looks from running: its handles on registrations that
 * left it are let go of over its next gets. */
static void test_parked_looks_per_context(void **state)
{
	pthread_t t;

	(void)state;
	next_extra = 0;
	buf2 = map_at(NULL, (OTHER_PAGES + EXTRA) * PAGE);
	assert_int_equal(gdrc_init(NULL, &other), GDRC_OK);
	assert_int_equal(pthread_create(&t, NULL, job_worker, NULL), 0);
	assert_int_equal(on_worker(big_rounds), 0);
	assert_int_equal(on_worker(other_rounds), 0);
	assert_int_equal(gdrc_invalidate(ctx, buf, BIG * PAGE), GDRC_OK);
	assert_int_equal(on_worker(miss_next_extra), 0); /* a look begins */
	assert_int_equal(gdrc_invalidate(other, buf2, OTHER_PAGES * PAGE),
			 GDRC_OK);
	assert_true(ctx_stat(other, GDRC_STAT_PINNED_BYTES) > 4 * PAGE);
	assert_int_equal(on_worker(other_misses), 0);
	assert_int_equal(ctx_stat(other, GDRC_STAT_PINNED_BYTES), EXTRA * PAGE);
	worker_stop(t);
	gdrc_fini(other);
	munmap(buf2, (OTHER_PAGES + EXTRA) * PAGE);
}

/* Under a limit of bytes the table does not grow: a thread's parked
 * handles, which keep what they hold pinned after an eviction until the
 * thread looks again, stay at 128 (and four remembered). */
static void test_parked_limited_stays(void **state)
{
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, job_worker, NULL), 0);
	assert_int_equal(on_worker(big_rounds), 0);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), BIG);
	assert_int_equal(gdrc_invalidate(ctx, buf, BIG * PAGE), GDRC_OK);
	assert_true(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES) <= (128 + 4) * PAGE);
	worker_stop(t);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES), 0);
}

/* A put of a parked handle (its get, then more gets than the fast path
 * remembers, then the put) is taken, once: a second is a double put. */
static void test_parked_late_put(void **state)
{
	struct gdrc_mr *held;
	uint64_t misuse;

	(void)state;
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < NPAGES; i++)
			assert_int_not_equal(touch(i), 0);
	assert_int_equal(gdrc_mr_get(ctx, buf, 64, GDRC_ACCESS_LOCAL_WRITE, 0,
				     &held),
			 GDRC_OK);
	for (int i = 1; i < NPAGES; i++)
		assert_int_not_equal(touch(i), 0);
	misuse = ctx_stat(ctx, GDRC_STAT_MISUSE);
	gdrc_mr_put(ctx, held);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), misuse);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PUTS),
			 ctx_stat(ctx, GDRC_STAT_HITS) +
				 ctx_stat(ctx, GDRC_STAT_MISSES));
	/* Still served, and its handle still counts right. */
	assert_int_not_equal(touch(0), 0);
	assert_int_equal(gdrc_invalidate(ctx, buf, NPAGES * PAGE), GDRC_OK);
	assert_int_not_equal(touch(0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_parked_rounds_hit, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_four_entries_any_order,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_parked_remap_not_served,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_parked_released, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_parked_released_across_contexts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parked_late_put, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_parked_grows, setup_big,
						teardown_big),
		cmocka_unit_test_setup_teardown(test_parked_grows_when_clashing,
						setup_big, teardown_big),
		cmocka_unit_test_setup_teardown(test_parked_looks_per_context,
						setup_big, teardown_big),
		cmocka_unit_test_setup_teardown(test_parked_limited_stays,
						setup_big_limited, teardown_big),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
