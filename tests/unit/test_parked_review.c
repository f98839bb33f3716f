// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_parked_review.c - the parked table's review (lib/cache/handle.c,
 * parked_review), driven directly: a table that cannot grow (a byte
 * limit is set) and whose lookups clash, or seldom hit, is switched off
 * for 4,096 gets, then twice as many each time a review in a row
 * switches it off again, up to 65,536; a review that keeps it on starts
 * the count again from 4,096.  The lookups the thread makes while it is
 * on are what a pattern the table cannot serve pays, so the backoff is
 * what bounds them.  The table here is the test's own (only its size is
 * read), put in this thread's place for the test and taken back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "cache/cache_int.h"
#include "cache_layer.h"

/* One review's counts: lookups, hits among them and clashes. */
static void review(struct gdrc_cache *c, unsigned hits, unsigned clashes)
{
	struct gdrc_tls *t = &gdrc_tls_cur;

	t->parked_off = 0;
	t->parked_looks = GDRC_PARKED_REVIEW;
	t->parked_hits = (uint16_t)hits;
	t->parked_clashes = (uint16_t)clashes;
	gdrc_cache_parked_review(c);
	assert_int_equal(t->parked_looks, 0);
	assert_int_equal(t->parked_hits, 0);
	assert_int_equal(t->parked_clashes, 0);
}

static void test_parked_review_backs_off(void **state)
{
	struct gdrc_cache *c = cache_layer_new(&gdrc_pin_none_ops, 1);
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_parked *tab, *saved;

	(void)state;
	assert_non_null(c);
	c->p.max_bytes = 1u << 30; /* a byte limit: the table never grows */
	tab = calloc(1, sizeof(*tab));
	assert_non_null(tab);
	tab->size = GDRC_TLS_PARKED;
	saved = t->parked;
	t->parked = tab;
	t->parked_fill = 0;
	t->parked_backoff = 0;

	/* Clashing: off for 4,096, 8,192, ... 65,536, then 65,536 again. */
	review(c, 0, GDRC_PARKED_REVIEW);
	assert_int_equal(t->parked_off, 4096);
	review(c, 0, GDRC_PARKED_REVIEW);
	assert_int_equal(t->parked_off, 8192);
	review(c, 0, GDRC_PARKED_REVIEW);
	assert_int_equal(t->parked_off, 16384);
	review(c, 0, GDRC_PARKED_REVIEW);
	assert_int_equal(t->parked_off, 32768);
	review(c, 0, GDRC_PARKED_REVIEW);
	assert_int_equal(t->parked_off, 65536);
	review(c, 0, GDRC_PARKED_REVIEW);
	assert_int_equal(t->parked_off, 65536);
	/* A review that keeps it on (three hits in four): on, and the next
	 * switch-off (seldom hit, no clash) is a short one again. */
	review(c, GDRC_PARKED_REVIEW * 3 / 4, 0);
	assert_int_equal(t->parked_off, 0);
	review(c, GDRC_PARKED_REVIEW / 8 - 1, 0);
	assert_int_equal(t->parked_off, 4096);
	review(c, GDRC_PARKED_REVIEW / 8 - 1, 0);
	assert_int_equal(t->parked_off, 8192);
	/* Hits in between (neither seldom nor clashing): stays on. */
	review(c, GDRC_PARKED_REVIEW / 2, 0);
	assert_int_equal(t->parked_off, 0);
	review(c, 0, GDRC_PARKED_REVIEW);
	assert_int_equal(t->parked_off, 4096);
	assert_ptr_equal(t->parked, tab); /* never grown */

	t->parked = saved;
	t->parked_off = 0;
	t->parked_backoff = 0;
	free(tab);
	gdrc_cache_cleanup(c);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parked_review_backs_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
