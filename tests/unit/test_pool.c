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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_regions_paired),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
