// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_invq.c - the event queue between the hooks and the cache
 * (lib/cache/invq.c): pending is set by every post and cleared only by a
 * drain that applied everything posted before its take, including a
 * post that found the queue's lock held (a signal handler interrupting
 * the drain on its own thread) and could only mark "everything".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
