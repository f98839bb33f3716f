// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_itree.c - unit tests for lib/itree, the intrusive interval tree.
 *
 * Fixed cases for insert, remove, overlap, find_cover, walk and each
 * gdrc_itree_check() code, a randomized run compared against a brute-force
 * scan with the tree checked after every mutation, and a large tree whose
 * height is held to the AVL bound.  Randomness comes from a seeded
 * xorshift generator so every run is the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gdrc_int.h"
#include "itree/itree.h"

/* Codes documented in lib/itree/itree.c. */
#define ITREE_BAD_RANGE (-1)
#define ITREE_BAD_ORDER (-2)
#define ITREE_BAD_HEIGHT (-3)
#define ITREE_BAD_BALANCE (-4)
#define ITREE_BAD_MAX_END (-5)
#define ITREE_BAD_COUNT (-6)

struct test_obj {
	int idx;
	bool in_tree;
	struct gdrc_itree_node node; /* not first, so container_of matters */
};

static uint64_t test_rng_state;

static void test_seed(uint64_t seed)
{
	test_rng_state = seed ? seed : 1;
}

static uint64_t test_rand(void)
{
	uint64_t x = test_rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	test_rng_state = x;
	return x;
}

static uintptr_t test_rand_below(uintptr_t n)
{
	return (uintptr_t)(test_rand() % n);
}

static struct test_obj *test_obj_of(struct gdrc_itree_node *n)
{
	return gdrc_container_of(n, struct test_obj, node);
}

static void test_insert(struct gdrc_itree *t, struct test_obj *o,
			uintptr_t start, uintptr_t end)
{
	o->node.start = start;
	o->node.end = end;
	gdrc_itree_insert(t, &o->node);
	o->in_tree = true;
}

static void test_remove(struct gdrc_itree *t, struct test_obj *o)
{
	gdrc_itree_remove(t, &o->node);
	o->in_tree = false;
}

static bool test_key_less(const struct gdrc_itree_node *a,
			  const struct gdrc_itree_node *b)
{
	if (a->start != b->start)
		return a->start < b->start;
	return (uintptr_t)a < (uintptr_t)b;
}

/* log2 without libm: integer part by halving, fraction bit by bit. */
static double test_log2(double x)
{
	double frac = 0.0, bit = 0.5;
	int ip = 0;

	while (x >= 2.0) {
		x /= 2.0;
		ip++;
	}
	for (int i = 0; i < 40; i++) {
		x *= x;
		if (x >= 2.0) {
			x /= 2.0;
			frac += bit;
		}
		bit /= 2.0;
	}
	return ip + frac;
}

static void test_assert_avl_height(const struct gdrc_itree *t)
{
	double bound = 1.45 * test_log2((double)t->count) + 2.0;

	assert_non_null(t->root);
	assert_true((double)t->root->height <= bound);
}

/* Records visited nodes; returns stop_val once stop_after are recorded. */
struct test_collect {
	struct gdrc_itree_node *v[1024];
	size_t n;
	size_t stop_after; /* 0: never stop */
	int stop_val;
};

static int test_collect_fn(struct gdrc_itree_node *node, void *arg)
{
	struct test_collect *c = arg;

	assert_true(c->n < GDRC_ARRAY_SIZE(c->v));
	c->v[c->n++] = node;
	if (c->stop_after && c->n == c->stop_after)
		return c->stop_val;
	return 0;
}

static int test_count_fn(struct gdrc_itree_node *node, void *arg)
{
	(void)node;
	(*(size_t *)arg)++;
	return 0;
}

static int test_accept_even_fn(struct gdrc_itree_node *node, void *arg)
{
	(void)arg;
	return !(test_obj_of(node)->idx & 1);
}

static int test_reject_all_fn(struct gdrc_itree_node *node, void *arg)
{
	(*(size_t *)arg)++;
	(void)node;
	return 0;
}

static void test_itree_init_empty_tree_finds_nothing(void **state)
{
	struct test_collect c = { .n = 0 };
	struct gdrc_itree t;
	size_t seen = 0;

	(void)state;
	memset(&t, 0xa5, sizeof(t));
	gdrc_itree_init(&t);
	assert_null(t.root);
	assert_int_equal(t.count, 0);
	assert_int_equal(gdrc_itree_check(&t), 0);
	assert_int_equal(gdrc_itree_overlap(&t, 0, UINTPTR_MAX,
					    test_collect_fn, &c), 0);
	assert_int_equal(c.n, 0);
	assert_null(gdrc_itree_find_cover(&t, 1, 2, NULL, NULL));
	assert_int_equal(gdrc_itree_walk(&t, test_count_fn, &seen), 0);
	assert_int_equal(seen, 0);
}

static void test_itree_insert_single_found_by_overlap(void **state)
{
	struct test_collect c = { .n = 0 };
	struct test_obj o = { .idx = 0 };
	struct gdrc_itree t;

	(void)state;
	gdrc_itree_init(&t);
	test_insert(&t, &o, 100, 200);
	assert_int_equal(t.count, 1);
	assert_ptr_equal(t.root, &o.node);
	assert_int_equal(o.node.height, 1);
	assert_int_equal(o.node.max_end, 200);
	assert_int_equal(gdrc_itree_check(&t), 0);
	assert_int_equal(gdrc_itree_overlap(&t, 150, 151, test_collect_fn,
					    &c), 0);
	assert_int_equal(c.n, 1);
	assert_ptr_equal(c.v[0], &o.node);
	assert_ptr_equal(gdrc_itree_find_cover(&t, 100, 200, NULL, NULL),
			 &o.node);
}

static void test_itree_insert_equal_ranges_both_found(void **state)
{
	struct test_collect c = { .n = 0 };
	struct test_obj o[2] = { { .idx = 0 }, { .idx = 1 } };
	struct gdrc_itree t;
	bool seen0, seen1;

	(void)state;
	gdrc_itree_init(&t);
	test_insert(&t, &o[0], 0x1000, 0x2000);
	test_insert(&t, &o[1], 0x1000, 0x2000);
	assert_int_equal(t.count, 2);
	assert_int_equal(gdrc_itree_check(&t), 0);
	assert_int_equal(gdrc_itree_overlap(&t, 0x1800, 0x1900,
					    test_collect_fn, &c), 0);
	assert_int_equal(c.n, 2);
	seen0 = c.v[0] == &o[0].node || c.v[1] == &o[0].node;
	seen1 = c.v[0] == &o[1].node || c.v[1] == &o[1].node;
	assert_true(seen0);
	assert_true(seen1);
}

static void test_itree_insert_ascending_stays_balanced(void **state)
{
	enum { N = 1000 };
	struct test_obj *o = calloc(N, sizeof(*o));
	struct gdrc_itree t;

	(void)state;
	assert_non_null(o);
	gdrc_itree_init(&t);
	for (int i = 0; i < N; i++) {
		o[i].idx = i;
		test_insert(&t, &o[i], (uintptr_t)i * 16,
			    (uintptr_t)i * 16 + 8);
		assert_int_equal(gdrc_itree_check(&t), 0);
		test_assert_avl_height(&t);
	}
	/* Perfectly balanced would be 10; AVL allows at most 14 here. */
	assert_true(t.root->height <= 14);
	assert_int_equal(t.root->max_end, (uintptr_t)(N - 1) * 16 + 8);
	free(o);
}

static void test_itree_remove_root_keeps_balance(void **state)
{
	enum { N = 64 };
	struct test_obj o[N];
	struct gdrc_itree_node *old_root;
	struct test_collect c = { .n = 0 };
	struct gdrc_itree t;

	(void)state;
	memset(o, 0, sizeof(o));
	gdrc_itree_init(&t);
	for (int i = 0; i < N; i++) {
		o[i].idx = i;
		test_insert(&t, &o[i], (uintptr_t)i * 10,
			    (uintptr_t)i * 10 + 5);
	}
	/* Remove the root repeatedly: always the two-child case until small. */
	for (int i = 0; i < N; i++) {
		old_root = t.root;
		test_remove(&t, test_obj_of(old_root));
		assert_int_equal(t.count, (size_t)(N - 1 - i));
		assert_int_equal(gdrc_itree_check(&t), 0);
		assert_true(t.root != old_root);
		assert_null(old_root->left);
		assert_null(old_root->right);
		c.n = 0;
		assert_int_equal(gdrc_itree_overlap(&t, old_root->start,
						    old_root->end,
						    test_collect_fn, &c), 0);
		assert_int_equal(c.n, 0);
		if (t.count)
			test_assert_avl_height(&t);
	}
	assert_null(t.root);
}

static void test_itree_remove_equal_range_removes_only_that_node(void **state)
{
	struct test_collect c = { .n = 0 };
	struct test_obj o[5];
	struct gdrc_itree t;

	(void)state;
	memset(o, 0, sizeof(o));
	gdrc_itree_init(&t);
	for (int i = 0; i < 5; i++) {
		o[i].idx = i;
		test_insert(&t, &o[i], 500, 600);
	}
	test_remove(&t, &o[2]);
	assert_int_equal(t.count, 4);
	assert_int_equal(gdrc_itree_check(&t), 0);
	assert_int_equal(gdrc_itree_overlap(&t, 500, 600, test_collect_fn, &c),
			 0);
	assert_int_equal(c.n, 4);
	for (size_t i = 0; i < c.n; i++)
		assert_ptr_not_equal(c.v[i], &o[2].node);
}

static void test_itree_remove_absent_node_leaves_tree(void **state)
{
	struct test_obj o[3];
	struct gdrc_itree t;

	(void)state;
	memset(o, 0, sizeof(o));
	gdrc_itree_init(&t);
	test_insert(&t, &o[0], 10, 20);
	test_insert(&t, &o[1], 30, 40);
	o[2].node.start = 10;
	o[2].node.end = 20;
	gdrc_itree_remove(&t, &o[2].node);
	assert_int_equal(t.count, 2);
	assert_int_equal(gdrc_itree_check(&t), 0);
	assert_ptr_equal(gdrc_itree_find_cover(&t, 12, 13, NULL, NULL),
			 &o[0].node);
}

static void test_itree_remove_then_reinsert_found(void **state)
{
	struct test_obj o[3];
	struct gdrc_itree t;

	(void)state;
	memset(o, 0, sizeof(o));
	gdrc_itree_init(&t);
	test_insert(&t, &o[0], 0, 10);
	test_insert(&t, &o[1], 20, 30);
	test_insert(&t, &o[2], 40, 50);
	test_remove(&t, &o[1]);
	assert_null(gdrc_itree_find_cover(&t, 25, 26, NULL, NULL));
	test_insert(&t, &o[1], 60, 70);
	assert_int_equal(gdrc_itree_check(&t), 0);
	assert_int_equal(t.count, 3);
	assert_null(gdrc_itree_find_cover(&t, 25, 26, NULL, NULL));
	assert_ptr_equal(gdrc_itree_find_cover(&t, 65, 66, NULL, NULL),
			 &o[1].node);
	assert_int_equal(t.root->max_end, 70);
}

static void test_itree_overlap_visits_in_start_order(void **state)
{
	enum { N = 200 };
	struct test_collect c = { .n = 0 };
	struct test_obj o[N];
	struct gdrc_itree t;

	(void)state;
	memset(o, 0, sizeof(o));
	gdrc_itree_init(&t);
	test_seed(7);
	/* Shuffled starts, all long enough to overlap [5000, 5001). */
	for (int i = 0; i < N; i++) {
		uintptr_t s = test_rand_below(5000);

		o[i].idx = i;
		test_insert(&t, &o[i], s, 5001 + test_rand_below(100));
	}
	assert_int_equal(gdrc_itree_overlap(&t, 5000, 5001, test_collect_fn,
					    &c), 0);
	assert_int_equal(c.n, N);
	for (size_t i = 1; i < c.n; i++)
		assert_true(c.v[i - 1]->start <= c.v[i]->start);
}

static void test_itree_overlap_half_open_edges_excluded(void **state)
{
	struct test_collect c = { .n = 0 };
	struct test_obj o = { .idx = 0 };
	struct gdrc_itree t;

	(void)state;
	gdrc_itree_init(&t);
	test_insert(&t, &o, 10, 20);
	assert_int_equal(gdrc_itree_overlap(&t, 20, 30, test_collect_fn, &c),
			 0);
	assert_int_equal(gdrc_itree_overlap(&t, 0, 10, test_collect_fn, &c),
			 0);
	assert_int_equal(c.n, 0);
	assert_int_equal(gdrc_itree_overlap(&t, 19, 20, test_collect_fn, &c),
			 0);
	assert_int_equal(gdrc_itree_overlap(&t, 0, 11, test_collect_fn, &c),
			 0);
	assert_int_equal(c.n, 2);
}

static void test_itree_overlap_stop_returns_callback_value(void **state)
{
	struct test_collect c = { .n = 0, .stop_after = 3, .stop_val = 42 };
	struct test_obj o[10];
	struct gdrc_itree t;

	(void)state;
	memset(o, 0, sizeof(o));
	gdrc_itree_init(&t);
	for (int i = 9; i >= 0; i--)
		test_insert(&t, &o[i], (uintptr_t)i * 100,
			    (uintptr_t)i * 100 + 150);
	assert_int_equal(gdrc_itree_overlap(&t, 0, 1000, test_collect_fn, &c),
			 42);
	assert_int_equal(c.n, 3);
	assert_ptr_equal(c.v[0], &o[0].node);
	assert_ptr_equal(c.v[1], &o[1].node);
	assert_ptr_equal(c.v[2], &o[2].node);
}

static void test_itree_find_cover_skips_too_short(void **state)
{
	struct test_obj o[4];
	struct gdrc_itree t;

	(void)state;
	memset(o, 0, sizeof(o));
	gdrc_itree_init(&t);
	/* All start early enough; only o[3] reaches far enough. */
	test_insert(&t, &o[0], 0, 150);
	test_insert(&t, &o[1], 50, 199);
	test_insert(&t, &o[2], 90, 120);
	test_insert(&t, &o[3], 80, 200);
	assert_ptr_equal(gdrc_itree_find_cover(&t, 100, 200, NULL, NULL),
			 &o[3].node);
	/* And one that starts too late is skipped too. */
	test_remove(&t, &o[3]);
	test_insert(&t, &o[3], 101, 300);
	assert_null(gdrc_itree_find_cover(&t, 100, 200, NULL, NULL));
}

static void test_itree_find_cover_null_fn_returns_lowest_start(void **state)
{
	struct test_obj o[4];
	struct gdrc_itree t;

	(void)state;
	memset(o, 0, sizeof(o));
	gdrc_itree_init(&t);
	test_insert(&t, &o[0], 40, 100);
	test_insert(&t, &o[1], 10, 100);
	test_insert(&t, &o[2], 30, 100);
	test_insert(&t, &o[3], 20, 100);
	assert_ptr_equal(gdrc_itree_find_cover(&t, 50, 60, NULL, NULL),
			 &o[1].node);
}

static void test_itree_find_cover_rejected_by_fn_tries_next(void **state)
{
	struct test_obj o[4];
	struct gdrc_itree t;
	size_t calls = 0;

	(void)state;
	memset(o, 0, sizeof(o));
	gdrc_itree_init(&t);
	for (int i = 0; i < 4; i++) {
		o[i].idx = i + 1; /* o[1] is the first even idx */
		test_insert(&t, &o[i], (uintptr_t)i, 100);
	}
	assert_ptr_equal(gdrc_itree_find_cover(&t, 50, 60,
					       test_accept_even_fn, NULL),
			 &o[1].node);
	assert_null(gdrc_itree_find_cover(&t, 50, 60, test_reject_all_fn,
					  &calls));
	assert_int_equal(calls, 4);
}

static void test_itree_walk_visits_all_in_order(void **state)
{
	enum { N = 300 };
	struct test_collect c = { .n = 0 };
	struct test_obj o[N];
	struct gdrc_itree t;

	(void)state;
	memset(o, 0, sizeof(o));
	gdrc_itree_init(&t);
	test_seed(99);
	for (int i = 0; i < N; i++) {
		uintptr_t s = test_rand_below(64);

		test_insert(&t, &o[i], s, s + 1 + test_rand_below(8));
	}
	assert_int_equal(gdrc_itree_walk(&t, test_collect_fn, &c), 0);
	assert_int_equal(c.n, N);
	for (size_t i = 1; i < c.n; i++)
		assert_true(test_key_less(c.v[i - 1], c.v[i]));
}

static void test_itree_walk_stop_returns_callback_value(void **state)
{
	struct test_collect c = { .n = 0, .stop_after = 2, .stop_val = -7 };
	struct test_obj o[5];
	struct gdrc_itree t;

	(void)state;
	memset(o, 0, sizeof(o));
	gdrc_itree_init(&t);
	for (int i = 0; i < 5; i++)
		test_insert(&t, &o[i], (uintptr_t)(5 - i), 10);
	assert_int_equal(gdrc_itree_walk(&t, test_collect_fn, &c), -7);
	assert_int_equal(c.n, 2);
	assert_ptr_equal(c.v[0], &o[4].node);
	assert_ptr_equal(c.v[1], &o[3].node);
}

static void test_itree_extreme_addresses_found(void **state)
{
	struct test_collect c = { .n = 0 };
	struct test_obj o[3];
	struct gdrc_itree t;

	(void)state;
	memset(o, 0, sizeof(o));
	gdrc_itree_init(&t);
	test_insert(&t, &o[0], 0, 1);
	test_insert(&t, &o[1], UINTPTR_MAX - 16, UINTPTR_MAX);
	test_insert(&t, &o[2], 0, UINTPTR_MAX);
	assert_int_equal(gdrc_itree_check(&t), 0);
	assert_int_equal(t.root->max_end, UINTPTR_MAX);
	assert_ptr_equal(gdrc_itree_find_cover(&t, UINTPTR_MAX - 8,
					       UINTPTR_MAX, NULL, NULL),
			 &o[2].node);
	assert_int_equal(gdrc_itree_overlap(&t, UINTPTR_MAX - 1, UINTPTR_MAX,
					    test_collect_fn, &c), 0);
	assert_int_equal(c.n, 2);
	assert_ptr_equal(c.v[0], &o[2].node);
	assert_ptr_equal(c.v[1], &o[1].node);
}

/* Seven nodes, full tree of height 3, for the corruption tests. */
static void test_build_seven(struct gdrc_itree *t, struct test_obj *o)
{
	memset(o, 0, 7 * sizeof(*o));
	gdrc_itree_init(t);
	for (int i = 0; i < 7; i++) {
		o[i].idx = i;
		test_insert(t, &o[i], (uintptr_t)i * 10, (uintptr_t)i * 10 + 5);
	}
	assert_int_equal(gdrc_itree_check(t), 0);
	assert_int_equal(t->root->height, 3);
}

static void test_itree_check_detects_bad_range(void **state)
{
	struct test_obj o[7];
	struct gdrc_itree t;

	(void)state;
	test_build_seven(&t, o);
	o[6].node.end = o[6].node.start;
	assert_int_equal(gdrc_itree_check(&t), ITREE_BAD_RANGE);
}

static void test_itree_check_detects_bad_order(void **state)
{
	struct gdrc_itree_node *tmp;
	struct test_obj o[7];
	struct gdrc_itree t;

	(void)state;
	test_build_seven(&t, o);
	/* Heights and max_end stay valid; only the order breaks. */
	tmp = t.root->left;
	t.root->left = t.root->right;
	t.root->right = tmp;
	assert_int_equal(gdrc_itree_check(&t), ITREE_BAD_ORDER);
}

static void test_itree_check_detects_cycle_as_bad_order(void **state)
{
	struct test_obj o[7];
	struct gdrc_itree t;

	(void)state;
	test_build_seven(&t, o);
	t.root->right->right->right = t.root;
	assert_int_equal(gdrc_itree_check(&t), ITREE_BAD_ORDER);
	t.root->right->right->right = NULL;
	assert_int_equal(gdrc_itree_check(&t), 0);
}

static void test_itree_check_detects_bad_height(void **state)
{
	struct test_obj o[7];
	struct gdrc_itree t;

	(void)state;
	test_build_seven(&t, o);
	t.root->left->left->height = 2;
	assert_int_equal(gdrc_itree_check(&t), ITREE_BAD_HEIGHT);
}

static void test_itree_check_detects_bad_balance(void **state)
{
	struct test_obj o[3];
	struct gdrc_itree t;

	(void)state;
	memset(o, 0, sizeof(o));
	/* A right-leaning chain with correct heights and max_end. */
	for (int i = 0; i < 3; i++) {
		o[i].node.start = (uintptr_t)i * 10;
		o[i].node.end = (uintptr_t)i * 10 + 5;
		o[i].node.max_end = 25;
		o[i].node.height = 3 - i;
	}
	o[0].node.right = &o[1].node;
	o[1].node.right = &o[2].node;
	t.root = &o[0].node;
	t.count = 3;
	assert_int_equal(gdrc_itree_check(&t), ITREE_BAD_BALANCE);
}

static void test_itree_check_detects_bad_max_end(void **state)
{
	struct test_obj o[7];
	struct gdrc_itree t;

	(void)state;
	test_build_seven(&t, o);
	t.root->max_end++;
	assert_int_equal(gdrc_itree_check(&t), ITREE_BAD_MAX_END);
	t.root->max_end--;
	t.root->left->right->max_end--;
	assert_int_equal(gdrc_itree_check(&t), ITREE_BAD_MAX_END);
}

static void test_itree_check_detects_bad_count(void **state)
{
	struct test_obj o[7];
	struct gdrc_itree t;

	(void)state;
	test_build_seven(&t, o);
	t.count++;
	assert_int_equal(gdrc_itree_check(&t), ITREE_BAD_COUNT);
	t.count -= 2;
	assert_int_equal(gdrc_itree_check(&t), ITREE_BAD_COUNT);
}

/* Brute-force comparison of one overlap and one cover query. */
static void test_compare_queries(const struct gdrc_itree *t,
				 struct test_obj *o, int n, uintptr_t qs,
				 uintptr_t qe)
{
	static struct test_collect c;
	struct gdrc_itree_node *want = NULL, *want_even = NULL, *got;
	bool marked[1024];
	size_t expect = 0;

	assert_true(n <= (int)GDRC_ARRAY_SIZE(marked));
	memset(marked, 0, sizeof(marked));
	c.n = 0;
	c.stop_after = 0;
	assert_int_equal(gdrc_itree_overlap(t, qs, qe, test_collect_fn, &c),
			 0);
	for (size_t i = 0; i < c.n; i++) {
		struct test_obj *x = test_obj_of(c.v[i]);

		assert_true(x->in_tree);
		assert_true(c.v[i]->start < qe && c.v[i]->end > qs);
		assert_false(marked[x->idx]);
		marked[x->idx] = true;
		if (i)
			assert_true(c.v[i - 1]->start <= c.v[i]->start);
	}
	for (int i = 0; i < n; i++) {
		struct gdrc_itree_node *x = &o[i].node;

		if (!o[i].in_tree)
			continue;
		if (x->start < qe && x->end > qs)
			expect++;
		if (x->start <= qs && x->end >= qe) {
			if (!want || test_key_less(x, want))
				want = x;
			if (!(o[i].idx & 1) &&
			    (!want_even || test_key_less(x, want_even)))
				want_even = x;
		}
	}
	assert_int_equal(c.n, expect);

	got = gdrc_itree_find_cover(t, qs, qe, NULL, NULL);
	assert_ptr_equal(got, want);
	got = gdrc_itree_find_cover(t, qs, qe, test_accept_even_fn, NULL);
	assert_ptr_equal(got, want_even);
}

static void test_random_range(uintptr_t *s, uintptr_t *e)
{
	*s = test_rand_below(4096);
	if (test_rand_below(8) == 0)
		*e = *s + 1 + test_rand_below(2048);
	else
		*e = *s + 1 + test_rand_below(64);
}

static void test_itree_random_ops_match_brute_force(void **state)
{
	enum { N = 400, OPS = 20000 };
	struct test_obj *o = calloc(N, sizeof(*o));
	struct gdrc_itree t;
	size_t in = 0;

	(void)state;
	assert_non_null(o);
	gdrc_itree_init(&t);
	test_seed(0x9e3779b97f4a7c15ull);
	for (int i = 0; i < N; i++)
		o[i].idx = i;

	for (int op = 0; op < OPS; op++) {
		struct test_obj *x = &o[test_rand_below(N)];
		uintptr_t s, e;

		if (x->in_tree) {
			test_remove(&t, x);
			in--;
		} else {
			struct test_obj *y = &o[test_rand_below(N)];

			/* Often copy a live range so equal ranges pile up. */
			if (y->in_tree && test_rand_below(4) == 0) {
				s = y->node.start;
				e = y->node.end;
			} else {
				test_random_range(&s, &e);
			}
			test_insert(&t, x, s, e);
			in++;
		}
		assert_int_equal(gdrc_itree_check(&t), 0);
		assert_int_equal(t.count, in);
		if (in)
			test_assert_avl_height(&t);

		test_random_range(&s, &e);
		test_compare_queries(&t, o, N, s, e);
		/* Query exactly a live node's range: it must be covered. */
		if (x->in_tree) {
			test_compare_queries(&t, o, N, x->node.start,
					     x->node.end);
			assert_non_null(gdrc_itree_find_cover(&t,
							      x->node.start,
							      x->node.end,
							      NULL, NULL));
		}
	}
	free(o);
}

static void test_itree_large_tree_height_within_avl_bound(void **state)
{
	enum { N = 100000 };
	struct test_obj *o = calloc(N, sizeof(*o));
	struct gdrc_itree t;
	size_t seen = 0;

	(void)state;
	assert_non_null(o);
	gdrc_itree_init(&t);
	test_seed(12345);
	for (int i = 0; i < N; i++) {
		uintptr_t s = test_rand_below((uintptr_t)1 << 40);

		o[i].idx = i;
		test_insert(&t, &o[i], s, s + 1 + test_rand_below(1 << 20));
	}
	assert_int_equal(t.count, N);
	assert_int_equal(gdrc_itree_check(&t), 0);
	test_assert_avl_height(&t);
	assert_int_equal(gdrc_itree_walk(&t, test_count_fn, &seen), 0);
	assert_int_equal(seen, N);

	for (int i = 0; i < N; i += 2)
		test_remove(&t, &o[i]);
	assert_int_equal(t.count, N / 2);
	assert_int_equal(gdrc_itree_check(&t), 0);
	test_assert_avl_height(&t);
	for (int i = 1; i < N; i += 2) {
		struct gdrc_itree_node *got;

		got = gdrc_itree_find_cover(&t, o[i].node.start, o[i].node.end,
					    NULL, NULL);
		assert_non_null(got);
		assert_true(test_obj_of(got)->in_tree);
		assert_true(got->start <= o[i].node.start &&
			    got->end >= o[i].node.end);
	}

	for (int i = 1; i < N; i += 2)
		test_remove(&t, &o[i]);
	assert_null(t.root);
	assert_int_equal(t.count, 0);
	assert_int_equal(gdrc_itree_check(&t), 0);
	free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_itree_init_empty_tree_finds_nothing),
		cmocka_unit_test(test_itree_insert_single_found_by_overlap),
		cmocka_unit_test(test_itree_insert_equal_ranges_both_found),
		cmocka_unit_test(test_itree_insert_ascending_stays_balanced),
		cmocka_unit_test(test_itree_remove_root_keeps_balance),
		cmocka_unit_test(
			test_itree_remove_equal_range_removes_only_that_node),
		cmocka_unit_test(test_itree_remove_absent_node_leaves_tree),
		cmocka_unit_test(test_itree_remove_then_reinsert_found),
		cmocka_unit_test(test_itree_overlap_visits_in_start_order),
		cmocka_unit_test(test_itree_overlap_half_open_edges_excluded),
		cmocka_unit_test(
			test_itree_overlap_stop_returns_callback_value),
		cmocka_unit_test(test_itree_find_cover_skips_too_short),
		cmocka_unit_test(
			test_itree_find_cover_null_fn_returns_lowest_start),
		cmocka_unit_test(
			test_itree_find_cover_rejected_by_fn_tries_next),
		cmocka_unit_test(test_itree_walk_visits_all_in_order),
		cmocka_unit_test(test_itree_walk_stop_returns_callback_value),
		cmocka_unit_test(test_itree_extreme_addresses_found),
		cmocka_unit_test(test_itree_check_detects_bad_range),
		cmocka_unit_test(test_itree_check_detects_bad_order),
		cmocka_unit_test(test_itree_check_detects_cycle_as_bad_order),
		cmocka_unit_test(test_itree_check_detects_bad_height),
		cmocka_unit_test(test_itree_check_detects_bad_balance),
		cmocka_unit_test(test_itree_check_detects_bad_max_end),
		cmocka_unit_test(test_itree_check_detects_bad_count),
		cmocka_unit_test(test_itree_random_ops_match_brute_force),
		cmocka_unit_test(test_itree_large_tree_height_within_avl_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
