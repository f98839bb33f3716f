// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_pool.c - the region pool's layout (lib/cache/pool.c, paired
 * objects): regions lie two by two, both lines 0 in one line pair, then
 * both lines 1, so that a line pair fetched together holds two hits'
 * lines.  Checked through what the rest of the library relies on: no
 * two regions share a line, every region's line 0 has another's beside
 * it, and the pool's walk (cleanup, a fork child) visits each region
 * handed out once.  Drives the cache layer directly, with the none
 * backend, over several of the pool's chunks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cache/cache_int.h"
#include "cache_layer.h"

#define PAGE 4096UL
/* Any addresses: the none backend touches no memory. */
#define RANGE_START 0x100000000UL
/* More than the first three chunks hold (64, 128, 256 objects). */
#define NREG 500

static int cmp_uptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

static int has(const uintptr_t *sorted, size_t n, uintptr_t v)
{
	return bsearch(&v, sorted, n, sizeof(v), cmp_uptr) != NULL;
}

struct walk {
	uintptr_t obj[2 * NREG];
	size_t n;
};

static void walk_fn(void *obj, void *arg)
{
	struct walk *w = arg;

	if (w->n < 2 * NREG)
		w->obj[w->n] = (uintptr_t)obj;
	w->n++;
}

static void test_pool_regions_paired(void **state)
{
	struct gdrc_cache *c = cache_layer_new(&gdrc_pin_none_ops, 1);
	static uintptr_t reg[NREG], lines[2 * NREG];
	static struct walk w;

	(void)state;
	assert_non_null(c);
	for (size_t i = 0; i < NREG; i++) {
		uintptr_t start = RANGE_START + i * 2 * PAGE;
		struct gdrc_mr *mr;

		assert_int_equal(cache_layer_get_host(c, start, start + PAGE,
						      &mr),
				 GDRC_OK);
		reg[i] = (uintptr_t)gdrc_mr_region(mr);
		gdrc_cache_put(c, mr);
	}
	assert_int_equal(c->nregions, NREG);

	/* No two regions share a line: line 0 at the region, line 1 two
	 * lines on (past its pair's line 0). */
	for (size_t i = 0; i < NREG; i++) {
		assert_int_equal(reg[i] % GDRC_CACHELINE, 0);
		lines[2 * i] = reg[i];
		lines[2 * i + 1] = reg[i] + 2 * GDRC_CACHELINE;
	}
	qsort(lines, 2 * NREG, sizeof(lines[0]), cmp_uptr);
	for (size_t i = 1; i < 2 * NREG; i++)
		assert_true(lines[i] > lines[i - 1]);

	/* Each region's line pair holds another region's line 0. */
	qsort(reg, NREG, sizeof(reg[0]), cmp_uptr);
	for (size_t i = 0; i < NREG; i++)
		assert_true(has(reg, NREG, reg[i] ^ GDRC_CACHELINE));

	/* The pool's walk: every object handed out, once, the regions
	 * among them (the miss may have taken others and given them back:
	 * those are walked too, on the same layout). */
	gdrc_pool_each(&c->regions, walk_fn, &w);
	assert_true(w.n >= NREG && w.n <= 2 * NREG);
	qsort(w.obj, w.n, sizeof(w.obj[0]), cmp_uptr);
	for (size_t i = 1; i < w.n; i++)
		assert_true(w.obj[i] > w.obj[i - 1]);
	for (size_t i = 0; i < NREG; i++)
		assert_true(has(w.obj, w.n, reg[i]));
	for (size_t i = 0; i < w.n; i++) /* its line 1 is no one's line 0 */
		assert_false(has(w.obj, w.n, w.obj[i] + 2 * GDRC_CACHELINE));

	gdrc_cache_cleanup(c);
	free(c);
}

/*
 * The clock hand's walk (gdrc_pool_walk) and gdrc_pool_count, on a pool
 * of odd size (a paired pool's last block half used) that grows while a
 * walk is under way: the count is the objects handed out, one round of
 * the walk visits each of them once and comes back to the first, and
 * objects handed out after the walk began are found on its next round.
 */
static void test_pool_walk_goes_round(void **state)
{
	struct gdrc_cache *c = cache_layer_new(&gdrc_pin_none_ops, 1);
	static struct walk w;
	struct gdrc_pool_pos pos = { 0 };
	size_t n;
	void *first, *obj;

	(void)state;
	assert_non_null(c);
	/* An empty pool (gdrc_cache_init made its first chunk, gave out
	 * nothing): no object to walk to. */
	assert_int_equal(gdrc_pool_count(c, &c->regions), 0);
	assert_null(gdrc_pool_walk(c, &c->regions, &pos));
	assert_non_null(gdrc_pool_get(c, &c->regions));
	assert_int_equal(gdrc_pool_count(c, &c->regions), 1);
	first = gdrc_pool_walk(c, &c->regions, &pos);
	assert_non_null(first);
	assert_ptr_equal(gdrc_pool_walk(c, &c->regions, &pos), first);
	/* 99 more: into the second chunk (64 in the first), its last
	 * block half used. */
	for (size_t i = 1; i < 99; i++)
		assert_non_null(gdrc_pool_get(c, &c->regions));
	n = gdrc_pool_count(c, &c->regions);
	assert_int_equal(n, 99);
	gdrc_pool_each(&c->regions, walk_fn, &w);
	assert_int_equal(w.n, n);
	qsort(w.obj, w.n, sizeof(w.obj[0]), cmp_uptr);
	/* One round from where the hand is: each object once. */
	{
		static uintptr_t round[NREG];

		for (size_t i = 0; i < n; i++) {
			round[i] = (uintptr_t)gdrc_pool_walk(c, &c->regions,
							     &pos);
			assert_true(has(w.obj, w.n, round[i]));
		}
		qsort(round, n, sizeof(round[0]), cmp_uptr);
		for (size_t i = 1; i < n; i++)
			assert_true(round[i] > round[i - 1]);
	}
	/* Half a round, then more objects: the rest of the round, and
	 * the next one has them all. */
	for (size_t i = 0; i < n / 2; i++)
		(void)gdrc_pool_walk(c, &c->regions, &pos);
	for (size_t i = 0; i < 200; i++)
		assert_non_null(gdrc_pool_get(c, &c->regions));
	assert_int_equal(gdrc_pool_count(c, &c->regions), n + 200);
	memset(&w, 0, sizeof(w));
	gdrc_pool_each(&c->regions, walk_fn, &w);
	qsort(w.obj, w.n, sizeof(w.obj[0]), cmp_uptr);
	{
		static uintptr_t seen[2 * NREG];
		size_t m = 0, rounds = 0;

		/* Walk until every object was seen twice over: no object
		 * outside the pool's, none missed. */
		for (size_t i = 0; i < 3 * (n + 200); i++) {
			obj = gdrc_pool_walk(c, &c->regions, &pos);
			assert_true(has(w.obj, w.n, (uintptr_t)obj));
			if (m < 2 * NREG)
				seen[m++] = (uintptr_t)obj;
			rounds += obj == first;
		}
		qsort(seen, m, sizeof(seen[0]), cmp_uptr);
		for (size_t i = 0; i < w.n; i++)
			assert_true(has(seen, m, w.obj[i]));
		assert_true(rounds >= 2);
	}
	gdrc_cache_cleanup(c);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_regions_paired),
		cmocka_unit_test(test_pool_walk_goes_round),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
