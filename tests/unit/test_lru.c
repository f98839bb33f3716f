// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_lru.c - limits and eviction: GDRC_MAX_REGIONS and GDRC_MAX_BYTES
 * evict a registration nobody holds and nobody used since the clock hand
 * last passed it (CLOCK, lib/cache/lru.c), never one in use, and refuse
 * with GDRC_ERR_LIMIT what cannot fit.  Run with GDRC_CHECK=1 (ctest) so
 * the clock's invariants (what is listed is what is cached) are checked
 * each time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "ctx_stat.h"

#include <gdrcache.h>

#define PAGE 4096UL
#define NPAGES 64

static char *buf;

static int group_setup(void **state)
{
	(void)state;
	buf = mmap(NULL, NPAGES * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return buf == MAP_FAILED;
}

static int group_teardown(void **state)
{
	(void)state;
	return munmap(buf, NPAGES * PAGE);
}

static struct gdrc_ctx *ctx_with(uint64_t max_regions, uint64_t max_bytes)
{
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_MAX_REGIONS |
			      GDRC_CONFIG_FIELD_MAX_BYTES,
		.max_regions = max_regions,
		.max_bytes = max_bytes,
	};
	struct gdrc_ctx *ctx;

	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_OK);
	return ctx;
}

static struct gdrc_mr *page_get(struct gdrc_ctx *ctx, int page)
{
	struct gdrc_mr *mr;

	assert_int_equal(gdrc_mr_get(ctx, buf + page * PAGE, PAGE, 0, 0, &mr),
			 GDRC_OK);
	return mr;
}

static uint64_t page_id(struct gdrc_ctx *ctx, int page)
{
	struct gdrc_mr *mr = page_get(ctx, page);
	struct gdrc_mr_info i;

	assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	return i.id;
}

static void test_lru_evicts_least_recently_used(void **state)
{
	struct gdrc_ctx *ctx = ctx_with(3, GDRC_LIMIT_NONE);
	uint64_t a, b, c;

	(void)state;
	a = page_id(ctx, 0);
	b = page_id(ctx, 1);
	c = page_id(ctx, 2);
	assert_int_equal(page_id(ctx, 0), a); /* A is used, B and C not */
	(void)page_id(ctx, 3);                /* evicts B, the first */
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_EVICTIONS), 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 3);
	assert_int_equal(page_id(ctx, 0), a);
	assert_int_equal(page_id(ctx, 2), c);
	assert_int_not_equal(page_id(ctx, 1), b); /* B came back new */
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISS_EVICTED), 1);
	gdrc_fini(ctx);
}

/*
 * The contract: a registration used since the hand last passed it is not
 * evicted while an unused one nobody holds is cached.  Eight cached, four
 * of them used, then four more made one by one: each eviction takes an
 * unused one (an old one or one just made), never a used one, whatever
 * the order the hand meets them in.
 */
static void test_lru_used_since_sweep_survives(void **state)
{
	struct gdrc_ctx *ctx = ctx_with(8, GDRC_LIMIT_NONE);
	uint64_t id[8];

	(void)state;
	for (int i = 0; i < 8; i++)
		id[i] = page_id(ctx, i);
	for (int i = 0; i < 8; i += 2)
		assert_int_equal(page_id(ctx, i), id[i]);
	for (int i = 0; i < 4; i++)
		(void)page_id(ctx, 20 + i);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_EVICTIONS), 4);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 8);
	for (int i = 0; i < 8; i += 2)
		assert_int_equal(page_id(ctx, i), id[i]);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_EVICTIONS), 4);
	gdrc_fini(ctx);
}

/*
 * The same contract for hits a thread's handle serves without reading
 * the region (lru.c: they count in the handle, which the hand reads as
 * the region's used mark).  Pages 0 and 2 are got three times each (the
 * second get makes the handle, the third hits through it); then sixteen
 * new pages, each a miss that evicts, with hits on 0 and 2 between: the
 * hand goes round the eight twice, clearing marks, yet never takes 0 or
 * 2, hit since it last passed them.
 */
static void test_lru_handle_hits_survive(void **state)
{
	struct gdrc_ctx *ctx = ctx_with(8, GDRC_LIMIT_NONE);
	uint64_t id[8];

	(void)state;
	for (int i = 0; i < 8; i++)
		id[i] = page_id(ctx, i);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(page_id(ctx, 0), id[0]);
		assert_int_equal(page_id(ctx, 2), id[2]);
	}
	for (int i = 0; i < 16; i++) {
		(void)page_id(ctx, 30 + i);
		assert_int_equal(page_id(ctx, 0), id[0]);
		assert_int_equal(page_id(ctx, 2), id[2]);
	}
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_EVICTIONS), 16);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), 8 + 16);
	gdrc_fini(ctx);
}

static void test_lru_order_follows_tree_path_hits(void **state)
{
	/* Six regions, more than a thread remembers (GDRC_TLS_ENTRIES), so
	 * the hits on pages 0 and 2 below take the tree path. */
	struct gdrc_ctx *ctx = ctx_with(6, GDRC_LIMIT_NONE);
	uint64_t id[6];

	(void)state;
	for (int i = 0; i < 6; i++)
		id[i] = page_id(ctx, i);
	assert_int_equal(page_id(ctx, 0), id[0]);
	(void)page_id(ctx, 10); /* evicts 1, the first one unused */
	assert_int_equal(page_id(ctx, 2), id[2]);
	(void)page_id(ctx, 11); /* evicts 3 */
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_EVICTIONS), 2);
	assert_int_equal(page_id(ctx, 0), id[0]);
	assert_int_equal(page_id(ctx, 2), id[2]);
	assert_int_equal(page_id(ctx, 4), id[4]);
	assert_int_equal(page_id(ctx, 5), id[5]);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_EVICTIONS), 2);
	assert_int_not_equal(page_id(ctx, 1), id[1]);
	gdrc_fini(ctx);
}

/* A miss is counted by why the range has no region: never cached
 * (cold) or removed (here, evicted), whatever order the removed ranges'
 * addresses came in (the cache answers outside their span without
 * looking at each). */
static void test_lru_miss_causes_by_address(void **state)
{
	static const struct {
		int page;
		uint64_t cold, evicted;
	} step[] = {
		{ 30, 1, 0 }, { 10, 2, 0 }, /* evicts 30 */
		{ 50, 3, 0 },               /* evicts 10 */
		{ 5, 4, 0 },  { 60, 5, 0 }, /* below, above all removed */
		{ 20, 6, 0 },               /* among them, never cached */
		{ 30, 6, 1 }, { 10, 6, 2 }, { 5, 6, 3 }, { 60, 6, 4 },
	};
	struct gdrc_ctx *ctx = ctx_with(1, GDRC_LIMIT_NONE);

	(void)state;
	for (size_t i = 0; i < sizeof(step) / sizeof(step[0]); i++) {
		(void)page_id(ctx, step[i].page);
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISS_COLD),
				 step[i].cold);
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISS_EVICTED),
				 step[i].evicted);
	}
	gdrc_fini(ctx);
}

static void test_lru_never_evicts_in_use(void **state)
{
	struct gdrc_ctx *ctx = ctx_with(2, GDRC_LIMIT_NONE);
	struct gdrc_mr *a = page_get(ctx, 0), *b = page_get(ctx, 1), *c;
	struct gdrc_mr_info i;

	(void)state;
	assert_int_equal(gdrc_mr_get(ctx, buf + 2 * PAGE, PAGE, 0, 0, &c),
			 GDRC_ERR_LIMIT);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_LIMIT_REJECTS), 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_EVICTIONS), 0);
	assert_int_equal(gdrc_mr_query(a, &i), GDRC_OK);
	assert_int_equal(i.flags, GDRC_MR_INFO_CACHED);
	gdrc_mr_put(ctx, b);
	/* Now B is unused: the same get evicts it. */
	c = page_get(ctx, 2);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_EVICTIONS), 1);
	assert_int_equal(gdrc_mr_query(a, &i), GDRC_OK);
	assert_int_equal(i.flags, GDRC_MR_INFO_CACHED);
	gdrc_mr_put(ctx, a);
	gdrc_mr_put(ctx, c);
	gdrc_fini(ctx);
}

static void test_lru_max_bytes_evicts_lru(void **state)
{
	struct gdrc_ctx *ctx = ctx_with(GDRC_LIMIT_NONE, 3 * PAGE);
	uint64_t a, b;

	(void)state;
	a = page_id(ctx, 0);
	b = page_id(ctx, 1);
	(void)page_id(ctx, 2);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES), 3 * PAGE);
	(void)page_id(ctx, 3);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES), 3 * PAGE);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_EVICTIONS), 1);
	assert_int_equal(page_id(ctx, 1), b);
	assert_int_not_equal(page_id(ctx, 0), a);
	gdrc_fini(ctx);
}

static void test_lru_request_over_max_bytes_limit_keeps_cache(void **state)
{
	struct gdrc_ctx *ctx = ctx_with(GDRC_LIMIT_NONE, 3 * PAGE);
	struct gdrc_mr *mr = (struct gdrc_mr *)0x1;
	uint64_t a = page_id(ctx, 0);

	(void)state;
	assert_int_equal(gdrc_mr_get(ctx, buf, 4 * PAGE, 0, 0, &mr),
			 GDRC_ERR_LIMIT);
	assert_ptr_equal(mr, (struct gdrc_mr *)0x1);
	/* Refused up front: nothing was evicted for it. */
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_EVICTIONS), 0);
	assert_int_equal(page_id(ctx, 0), a);
	gdrc_fini(ctx);
}

static void test_lru_uncached_counts_toward_bytes(void **state)
{
	struct gdrc_ctx *ctx = ctx_with(GDRC_LIMIT_NONE, 2 * PAGE);
	struct gdrc_mr *u1, *u2, *u3;

	(void)state;
	assert_int_equal(gdrc_mr_get(ctx, buf, PAGE, 0, GDRC_GET_UNCACHED,
				     &u1), GDRC_OK);
	assert_int_equal(gdrc_mr_get(ctx, buf, PAGE, 0, GDRC_GET_UNCACHED,
				     &u2), GDRC_OK);
	assert_int_equal(gdrc_mr_get(ctx, buf, PAGE, 0, GDRC_GET_UNCACHED,
				     &u3), GDRC_ERR_LIMIT);
	gdrc_mr_put(ctx, u1);
	assert_int_equal(gdrc_mr_get(ctx, buf, PAGE, 0, GDRC_GET_UNCACHED,
				     &u3), GDRC_OK);
	gdrc_mr_put(ctx, u2);
	gdrc_mr_put(ctx, u3);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES), 0);
	gdrc_fini(ctx);
}

static void test_lru_many_regions_stay_within_limit(void **state)
{
	struct gdrc_ctx *ctx = ctx_with(8, GDRC_LIMIT_NONE);

	(void)state;
	for (int round = 0; round < 20; round++)
		for (int p = 0; p < NPAGES; p++)
			(void)page_id(ctx, (p * 7 + round) % NPAGES);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 8);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PINNED_BYTES), 8 * PAGE);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_EVICTIONS) + 8,
			 ctx_stat(ctx, GDRC_STAT_MISSES));
	gdrc_fini(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lru_evicts_least_recently_used),
		cmocka_unit_test(test_lru_used_since_sweep_survives),
		cmocka_unit_test(test_lru_handle_hits_survive),
		cmocka_unit_test(test_lru_order_follows_tree_path_hits),
		cmocka_unit_test(test_lru_miss_causes_by_address),
		cmocka_unit_test(test_lru_never_evicts_in_use),
		cmocka_unit_test(test_lru_max_bytes_evicts_lru),
		cmocka_unit_test(
			test_lru_request_over_max_bytes_limit_keeps_cache),
		cmocka_unit_test(test_lru_uncached_counts_toward_bytes),
		cmocka_unit_test(test_lru_many_regions_stay_within_limit),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
