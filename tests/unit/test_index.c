// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_index.c - the cache's index (lib/cache/index.c) through the public
 * API with the none backend: hits answered by the lock-free page hash at
 * each of its levels (GDRC_STAT_TREE_LOOKUPS stays put), the hash grown
 * several times, a removed region's slot never serving another range,
 * regions too wide for the hash found through the tree, range queries
 * through the summaries against a model, and lookups racing with
 * invalidations and new registrations from another thread.  ctest runs
 * it with GDRC_CHECK=1: after every change the index check compares
 * every entry of the hash with its region and its summaries.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <cmocka.h>

#include "ctx_stat.h"

#include <gdrcache.h>

#define PAGE 4096UL
#define ACC GDRC_ACCESS_LOCAL_WRITE

static struct gdrc_ctx *ctx_new(void)
{
	struct gdrc_ctx *ctx;

	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	return ctx;
}

static char *map(size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

/* A get of [p, p + len) that must hit, served for key [key, key + klen). */
static void expect_hit(struct gdrc_ctx *ctx, const char *p, size_t len,
		       const char *key, size_t klen)
{
	uint64_t hits = ctx_stat(ctx, GDRC_STAT_HITS);
	uint64_t misses = ctx_stat(ctx, GDRC_STAT_MISSES);
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;

	assert_int_equal(gdrc_mr_get(ctx, p, len, ACC, 0, &mr), GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, &info), GDRC_OK);
	assert_int_equal(info.key_addr, (uintptr_t)key);
	assert_int_equal(info.key_length, klen);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_HITS), hits + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), misses);
}

static void reg(struct gdrc_ctx *ctx, const char *p, size_t len)
{
	struct gdrc_mr *mr;

	assert_int_equal(gdrc_mr_get(ctx, p, len, ACC, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);
}

/*
 * 3,000 one-page regions (the hash starts at 1,024 slots and grows at
 * three quarters: three times), then a hit on each, in an order that
 * never repeats within a thread's remembered handles: every one answered
 * by the hash, none by the tree.
 */
static void test_index_hash_grows_and_answers(void **state)
{
	enum { N = 3000 };
	struct gdrc_ctx *ctx = ctx_new();
	char *buf = map(N * PAGE);
	uint64_t tree;

	(void)state;
	for (unsigned i = 0; i < N; i++)
		reg(ctx, buf + i * PAGE, PAGE);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), N);
	tree = ctx_stat(ctx, GDRC_STAT_TREE_LOOKUPS);
	for (unsigned i = 0; i < N; i++) {
		unsigned j = (i * 1237u) % N; /* 1237 is prime to N */

		expect_hit(ctx, buf + j * PAGE + 8, 64, buf + j * PAGE, PAGE);
	}
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_TREE_LOOKUPS), tree);
	gdrc_fini(ctx);
	munmap(buf, N * PAGE);
}

/*
 * Regions at the hash's first three levels (1 page; 20 pages, past 8
 * granules of 4 KiB; 300 pages, past 8 of 64 KiB): hits at their first
 * and last bytes and over their second half, all from the hash.
 */
struct level_arg {
	struct gdrc_ctx *ctx;
	char *buf;
	size_t len;
	int ok;
};

/* A get of [p, p + len) served for key [a->buf, + a->len)?  No cmocka
 * assertion off the test's own thread. */
static int served_by(const struct level_arg *a, const char *p, size_t len)
{
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;
	int ok;

	if (gdrc_mr_get(a->ctx, p, len, ACC, 0, &mr) != GDRC_OK)
		return 0;
	ok = gdrc_mr_query(mr, &info) == GDRC_OK &&
	     info.key_addr == (uintptr_t)a->buf && info.key_length == a->len;
	gdrc_mr_put(a->ctx, mr);
	return ok;
}

static void *level_hits(void *p)
{
	struct level_arg *a = p;

	a->ok = served_by(a, a->buf + a->len - 1, 1) &&
		served_by(a, a->buf, 1) &&
		served_by(a, a->buf + a->len / 2, a->len / 2);
	return NULL;
}

static void test_index_levels(void **state)
{
	static const size_t pages[] = { 1, 20, 300 };
	struct gdrc_ctx *ctx = ctx_new();
	char *buf[3];
	uint64_t tree;

	(void)state;
	for (int i = 0; i < 3; i++) {
		buf[i] = map(pages[i] * PAGE);
		reg(ctx, buf[i], pages[i] * PAGE);
	}
	tree = ctx_stat(ctx, GDRC_STAT_TREE_LOOKUPS);
	for (int i = 0; i < 3; i++) {
		struct level_arg a = { ctx, buf[i], pages[i] * PAGE, 0 };
		uint64_t hits = ctx_stat(ctx, GDRC_STAT_HITS);
		pthread_t th;

		/* A new thread remembers no handle: its first get of each
		 * buffer is the index's (then the rest may be the fast
		 * path's), and none may be the tree's. */
		assert_int_equal(pthread_create(&th, NULL, level_hits, &a), 0);
		assert_int_equal(pthread_join(th, NULL), 0);
		assert_true(a.ok);
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_HITS), hits + 3);
	}
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_TREE_LOOKUPS), tree);
	gdrc_fini(ctx);
	for (int i = 0; i < 3; i++)
		munmap(buf[i], pages[i] * PAGE);
}

/*
 * Two regions in one 64 KiB granule of the hash's second level: a get
 * between them finds the granule's entry of the wide one, which does
 * not cover it, and misses; then each serves only what it covers.
 */
static void test_index_granule_neighbour(void **state)
{
	struct gdrc_ctx *ctx = ctx_new();
	char *buf = map(64 * PAGE);
	char *g = (char *)(((uintptr_t)buf + 16 * PAGE - 1) &
			   ~(16 * PAGE - 1));
	uint64_t misses;
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;

	(void)state;
	reg(ctx, g + 4 * PAGE, 20 * PAGE); /* level 1: granules g, g + 64K */
	misses = ctx_stat(ctx, GDRC_STAT_MISSES);
	assert_int_equal(gdrc_mr_get(ctx, g + PAGE, PAGE, ACC, 0, &mr),
			 GDRC_OK);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), misses + 1);
	assert_int_equal(gdrc_mr_query(mr, &info), GDRC_OK);
	assert_int_equal(info.key_addr, (uintptr_t)(g + PAGE));
	assert_int_equal(info.key_length, PAGE);
	gdrc_mr_put(ctx, mr);
	expect_hit(ctx, g + 4 * PAGE, PAGE, g + 4 * PAGE, 20 * PAGE);
	expect_hit(ctx, g + PAGE + 8, 8, g + PAGE, PAGE);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 2);
	gdrc_fini(ctx);
	munmap(buf, 64 * PAGE);
}

/*
 * A region invalidated, its memory reused by other registrations: a get
 * of its old page misses and registers anew, never served another
 * region's registration through a slot left behind.
 */
static void test_index_removed_slot_never_serves(void **state)
{
	enum { N = 200 };
	struct gdrc_ctx *ctx = ctx_new();
	char *buf = map(2 * N * PAGE);

	(void)state;
	for (unsigned i = 0; i < N; i++)
		reg(ctx, buf + i * PAGE, PAGE);
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(gdrc_invalidate(ctx, buf + i * PAGE, PAGE),
				 GDRC_OK);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 0);
	for (unsigned i = N; i < 2 * N; i++)
		reg(ctx, buf + i * PAGE, PAGE);
	for (unsigned i = 0; i < N; i++) {
		uint64_t misses = ctx_stat(ctx, GDRC_STAT_MISSES);
		struct gdrc_mr_info info;
		struct gdrc_mr *mr;

		assert_int_equal(gdrc_mr_get(ctx, buf + i * PAGE, PAGE, ACC,
					     0, &mr),
				 GDRC_OK);
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), misses + 1);
		assert_int_equal(gdrc_mr_query(mr, &info), GDRC_OK);
		assert_int_equal(info.key_addr, (uintptr_t)(buf + i * PAGE));
		gdrc_mr_put(ctx, mr);
	}
	gdrc_fini(ctx);
	munmap(buf, 2 * N * PAGE);
}

/*
 * A request the hash cannot answer goes to the tree: a region that
 * covers the request with too few rights in the hash, and a wider
 * registration of the same memory made by the miss (the two merge);
 * then the rights asked are served.
 */
static void test_index_rights_fall_to_miss(void **state)
{
	struct gdrc_ctx *ctx = ctx_new();
	char *buf = map(4 * PAGE);
	uint64_t tree, misses;
	struct gdrc_mr *mr;

	(void)state;
	reg(ctx, buf, PAGE);
	tree = ctx_stat(ctx, GDRC_STAT_TREE_LOOKUPS);
	misses = ctx_stat(ctx, GDRC_STAT_MISSES);
	assert_int_equal(gdrc_mr_get(ctx, buf, PAGE,
				     ACC | GDRC_ACCESS_REMOTE_READ, 0, &mr),
			 GDRC_OK);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_TREE_LOOKUPS), tree + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), misses + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISS_ACCESS), 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 1);
	expect_hit(ctx, buf, PAGE, buf, PAGE);
	gdrc_fini(ctx);
	munmap(buf, 4 * PAGE);
}

struct race {
	struct gdrc_ctx *ctx;
	char *buf;
	unsigned pages;
	_Atomic int stop;
	_Atomic unsigned long served;
};

/* Random gets: every registration served covers what was asked. */
static void *race_getter(void *arg)
{
	struct race *r = arg;
	unsigned seed = 7;

	while (!atomic_load(&r->stop)) {
		unsigned i = (unsigned)rand_r(&seed) % r->pages;
		const char *p = r->buf + i * PAGE + 100;
		struct gdrc_mr_info info;
		struct gdrc_mr *mr;

		if (gdrc_mr_get(r->ctx, p, 100, ACC, 0, &mr) != GDRC_OK)
			abort();
		if (gdrc_mr_query(mr, &info) != GDRC_OK ||
		    info.key_addr > (uintptr_t)p ||
		    info.key_addr + info.key_length < (uintptr_t)p + 100)
			abort();
		gdrc_mr_put(r->ctx, mr);
		r->served++;
	}
	return NULL;
}

/*
 * Two threads of random gets over 256 pages while the main thread
 * invalidates pages and registers them again, in single pages and in
 * runs (which merge their neighbours, so regions move between levels):
 * every registration served covers its request (checked in the getters;
 * an abort fails the test), and the index stays consistent (GDRC_CHECK).
 */
static void test_index_lookups_race_changes(void **state)
{
	enum { PAGES = 256, ROUNDS = 4000 };
	struct race r = { .ctx = ctx_new(), .pages = PAGES };
	pthread_t th[2];
	unsigned seed = 3;

	(void)state;
	r.buf = map(PAGES * PAGE);
	for (unsigned i = 0; i < PAGES; i++)
		reg(r.ctx, r.buf + i * PAGE, PAGE);
	for (int t = 0; t < 2; t++)
		assert_int_equal(pthread_create(&th[t], NULL, race_getter, &r),
				 0);
	for (unsigned n = 0; n < ROUNDS; n++) {
		unsigned i = (unsigned)rand_r(&seed) % (PAGES - 8);
		size_t len = (n & 1 ? 1 : 1 + (unsigned)rand_r(&seed) % 8) *
			     PAGE;

		assert_int_equal(gdrc_invalidate(r.ctx, r.buf + i * PAGE,
						 len),
				 GDRC_OK);
		reg(r.ctx, r.buf + i * PAGE, len);
	}
	/* Under valgrind, which runs one thread at a time, the getters may
	 * not have had the lock yet: let them (at most 10 s). */
	for (int ms = 0; !atomic_load(&r.served) && ms < 10000; ms++)
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	atomic_store(&r.stop, 1);
	for (int t = 0; t < 2; t++)
		assert_int_equal(pthread_join(th[t], NULL), 0);
	assert_true(r.served > 0);
	gdrc_fini(r.ctx);
	munmap(r.buf, PAGES * PAGE);
}

/*
 * Range queries through the hash's summaries, against a model.  Disjoint
 * registrations (so none merges) of 1 to 40 pages, now and then 100 to
 * 400 (the next levels), at random pages of a 2 GiB reservation, then
 * gdrc_invalidate of random ranges from one page to a gigabyte, many of
 * them across the summaries' block edges (256 KiB, 16 MiB, 1 GiB at the
 * first level): after each, the cache holds exactly the registrations
 * the model says survive (their count, a hit on each survivor's first
 * page, a miss on each removed one's), and the index is consistent
 * (GDRC_CHECK).  A query that missed a region, or visited one twice,
 * fails here.
 */
enum { MODEL_MAX = 64 };

struct model {
	uintptr_t start[MODEL_MAX];
	uintptr_t end[MODEL_MAX];
	unsigned n;
};

static int model_overlaps(const struct model *m, uintptr_t s, uintptr_t e)
{
	for (unsigned i = 0; i < m->n; i++)
		if (m->start[i] < e && m->end[i] > s)
			return 1;
	return 0;
}

/* An edge of a summary block near a random page, or the page. */
static uintptr_t model_pick(uintptr_t base, size_t len, unsigned *seed)
{
	static const uintptr_t edge[] = { 256UL << 10, 16UL << 20,
					  1UL << 30 };
	uintptr_t p = base + ((uintptr_t)rand_r(seed) % (len / PAGE)) * PAGE;
	uintptr_t b = edge[(unsigned)rand_r(seed) % 3];

	if (rand_r(seed) & 1) {
		p = (p + b - 1) & ~(b - 1);
		p += ((uintptr_t)rand_r(seed) % 5) * PAGE - 2 * PAGE;
	}
	return p < base ? base : p >= base + len ? base + len - PAGE : p;
}

static void test_index_ranges_match_model(void **state)
{
	const size_t len = 2UL << 30;
	struct gdrc_ctx *ctx = ctx_new();
	char *buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uintptr_t base = (uintptr_t)buf;
	struct model m = { .n = 0 };
	unsigned seed = 7;

	(void)state;
	assert_true(buf != MAP_FAILED);
	for (unsigned round = 0; round < 300; round++) {
		uintptr_t a, b;
		struct model kept = { .n = 0 };

		/* Fill up to 40 registrations. */
		for (unsigned tries = 0; m.n < 40 && tries < 200; tries++) {
			unsigned r = (unsigned)rand_r(&seed);
			size_t pages = r % 8 ? 1 + r % 40 : 100 + r % 300;
			uintptr_t s = model_pick(base, len, &seed);
			uintptr_t e = s + pages * PAGE;

			if (e > base + len || model_overlaps(&m, s, e))
				continue;
			reg(ctx, (char *)s, e - s);
			m.start[m.n] = s;
			m.end[m.n++] = e;
		}
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), m.n);
		/* Invalidate a range: a page to a gigabyte. */
		a = model_pick(base, len, &seed);
		b = a + (((uintptr_t)1 << (12 + (unsigned)rand_r(&seed) % 19)) +
			 ((uintptr_t)rand_r(&seed) % 4) * PAGE);
		if (b > base + len)
			b = base + len;
		assert_int_equal(gdrc_invalidate(ctx, (void *)a, b - a),
				 GDRC_OK);
		for (unsigned i = 0; i < m.n; i++) {
			if (m.start[i] < b && m.end[i] > a)
				continue;
			kept.start[kept.n] = m.start[i];
			kept.end[kept.n++] = m.end[i];
		}
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), kept.n);
		for (unsigned i = 0; i < kept.n; i++)
			expect_hit(ctx, (char *)kept.start[i], PAGE,
				   (char *)kept.start[i],
				   kept.end[i] - kept.start[i]);
		for (unsigned i = 0; i < m.n; i++) {
			uint64_t misses = ctx_stat(ctx, GDRC_STAT_MISSES);

			if (!(m.start[i] < b && m.end[i] > a))
				continue;
			/* Removed: a get misses, and registers it anew. */
			reg(ctx, (char *)m.start[i], m.end[i] - m.start[i]);
			assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES),
					 misses + 1);
		}
	}
	gdrc_fini(ctx);
	munmap(buf, len);
}

/*
 * A registration wider than the hash takes (more than 16 granules of its
 * last level: 64 GiB) is in the tree: found by a hit anywhere in it,
 * alongside a one-page one inside it, and removed by an invalidation of
 * one page of it.
 */
static void test_index_wide_region(void **state)
{
	const size_t len = 80UL << 30;
	struct gdrc_ctx *ctx = ctx_new();
	char *buf = mmap(NULL, len, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct gdrc_mr *mr;

	(void)state;
	if (buf == MAP_FAILED)
		skip(); /* no 80 GiB of address space here */
	reg(ctx, buf, len);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 1);
	expect_hit(ctx, buf + len / 2, 64, buf, len);
	expect_hit(ctx, buf + len - 8, 8, buf, len);
	/* A page inside it, of fewer rights: the wide one covers it. */
	assert_int_equal(gdrc_mr_get(ctx, buf + 5 * PAGE, PAGE, 0, 0, &mr),
			 GDRC_OK);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 1);
	assert_int_equal(gdrc_invalidate(ctx, buf + (len / 3 & ~(PAGE - 1)),
					 PAGE),
			 GDRC_OK);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 0);
	reg(ctx, buf + PAGE, PAGE);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 1);
	gdrc_fini(ctx);
	munmap(buf, len);
}

/*
 * A get of a page the page hash holds nothing of, with one level in use
 * and nothing in the tree, goes to the miss path without a look under
 * the lock (the miss path's own search under the write lock is the
 * exact one): GDRC_STAT_TREE_LOOKUPS stays.  Once a wide region is in
 * the tree, a get inside it that the hash holds nothing of looks there,
 * and is served by it.
 */
static void test_index_miss_skips_locked_look(void **state)
{
	const size_t len = 80UL << 30;
	struct gdrc_ctx *ctx = ctx_new();
	char *buf = map(4 * PAGE), *wide;
	uint64_t tree, misses;

	(void)state;
	reg(ctx, buf, PAGE);
	tree = ctx_stat(ctx, GDRC_STAT_TREE_LOOKUPS);
	misses = ctx_stat(ctx, GDRC_STAT_MISSES);
	reg(ctx, buf + 2 * PAGE, PAGE);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), misses + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_TREE_LOOKUPS), tree);
	expect_hit(ctx, buf + 2 * PAGE, 64, buf + 2 * PAGE, PAGE);

	wide = mmap(NULL, len, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (wide != MAP_FAILED) {
		reg(ctx, wide, len);
		tree = ctx_stat(ctx, GDRC_STAT_TREE_LOOKUPS);
		expect_hit(ctx, wide + 7 * PAGE, 64, wide, len);
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_TREE_LOOKUPS),
				 tree + 1);
		munmap(wide, len);
	}
	gdrc_fini(ctx);
	munmap(buf, 4 * PAGE);
	if (wide == MAP_FAILED)
		skip(); /* no 80 GiB of address space here */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_index_hash_grows_and_answers),
		cmocka_unit_test(test_index_levels),
		cmocka_unit_test(test_index_granule_neighbour),
		cmocka_unit_test(test_index_removed_slot_never_serves),
		cmocka_unit_test(test_index_rights_fall_to_miss),
		cmocka_unit_test(test_index_lookups_race_changes),
		cmocka_unit_test(test_index_ranges_match_model),
		cmocka_unit_test(test_index_wide_region),
		cmocka_unit_test(test_index_miss_skips_locked_look),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
