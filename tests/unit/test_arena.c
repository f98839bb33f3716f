// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_arena.c - where regions live (lib/cache/arena.c): each region is
 * one line of the arena's hit array, side by side with the regions
 * handed out before and after it, its cold record at the same index of
 * the second array; freed regions come back first in, first out through
 * their 32-bit links; the walk (cleanup, checks, the clock hand) visits
 * each region handed out once; and a full arena refuses a region
 * (GDRC_ERR_LIMIT from a miss) without changing anything, then
 * serves again once one is given back; and under an address-space
 * limit the arena is sized to a sixteenth of it.  Drives the cache
 * layer directly, with the none backend.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cache/cache_int.h"
#include "cache_layer.h"
#include "child_capture.h"
#include "vm_pages.h"

#define PAGE 4096UL
/* Any addresses: the none backend touches no memory. */
#define RANGE_START 0x100000000UL
/* Past the arena's first block (1,024 regions) and its second. */
#define NREG 2500

struct walk {
	struct gdrc_region *r[2 * NREG];
	size_t n;
};

static void walk_fn(struct gdrc_region *r, void *arg)
{
	struct walk *w = arg;

	if (w->n < 2 * NREG)
		w->r[w->n] = r;
	w->n++;
}

static void test_arena_lines_side_by_side(void **state)
{
	struct gdrc_cache *c = cache_layer_new(&gdrc_pin_none_ops, 1);
	struct gdrc_arena *a;
	static struct gdrc_region *reg[NREG];
	static struct walk w;
	static uint64_t ids[NREG];

	(void)state;
	assert_non_null(c);
	a = &c->regions;
	for (size_t i = 0; i < NREG; i++) {
		uintptr_t start = RANGE_START + i * 2 * PAGE;
		struct gdrc_mr *mr;
		struct gdrc_region *r;

		assert_int_equal(cache_layer_get_host(c, start, start + PAGE,
						      &mr),
				 GDRC_OK);
		r = gdrc_mr_region(mr);
		reg[i] = r;
		/* One line, in the arena, its cold record at its index. */
		assert_int_equal((uintptr_t)r % GDRC_CACHELINE, 0);
		assert_true(r >= a->hits && r < a->hits + gdrc_arena_made(a));
		assert_ptr_equal(gdrc_region_cold(r), &a->cold[r - a->hits]);
		assert_ptr_equal(r->cache, c);
		ids[i] = gdrc_region_cold(r)->id;
		assert_ptr_equal(gdrc_region_linked(c,
						    gdrc_region_link_to(c, r)),
				 r);
		gdrc_cache_put(c, mr);
	}
	assert_int_equal(c->nregions, NREG);
	assert_int_equal(gdrc_region_link_to(c, NULL), 0);
	assert_null(gdrc_region_linked(c, 0));
	/* Nothing was freed: regions were handed out one after the other,
	 * each the line after the last. */
	for (size_t i = 1; i < NREG; i++) {
		assert_ptr_equal(reg[i], reg[i - 1] + 1);
		assert_true(ids[i] > ids[i - 1]);
	}
	/* The walk: every region handed out, once, in index order. */
	gdrc_arena_each(a, walk_fn, &w);
	assert_int_equal(w.n, gdrc_arena_made(a));
	assert_true(w.n >= NREG);
	for (size_t i = 0; i < w.n && i < 2 * NREG; i++)
		assert_ptr_equal(w.r[i], a->hits + i);
	gdrc_cache_cleanup(c);
	free(c);
}

/* Regions given back are handed out again oldest first, before any
 * fresh one; a fresh one is zero but for its word and ext. */
static void test_arena_reuse_first_in_first_out(void **state)
{
	struct gdrc_cache *c = cache_layer_new(&gdrc_pin_none_ops, 1);
	struct gdrc_region *r[8], *fresh;
	uint32_t made;

	(void)state;
	assert_non_null(c);
	for (int i = 0; i < 8; i++)
		assert_non_null(r[i] = gdrc_arena_get(c));
	made = gdrc_arena_made(&c->regions);
	assert_int_equal(made, 8);
	gdrc_slab_lock(c);
	for (int i = 0; i < 8; i += 2) /* 0, 2, 4, 6 */
		gdrc_arena_put_locked(c, r[i]);
	gdrc_arena_put_locked(c, r[1]);
	gdrc_slab_unlock(c);
	assert_ptr_equal(gdrc_arena_get(c), r[0]);
	assert_ptr_equal(gdrc_arena_get(c), r[2]);
	assert_ptr_equal(gdrc_arena_get(c), r[4]);
	assert_ptr_equal(gdrc_arena_get(c), r[6]);
	assert_ptr_equal(gdrc_arena_get(c), r[1]);
	assert_int_equal(gdrc_arena_made(&c->regions), made);
	fresh = gdrc_arena_get(c);
	assert_ptr_equal(fresh, r[7] + 1);
	assert_int_equal(gdrc_arena_made(&c->regions), made + 1);
	assert_int_equal(atomic_load(&fresh->word),
			 REGION_DEAD | REGION_INVALID);
	assert_ptr_equal(gdrc_region_ext(fresh), &gdrc_region_ext_none);
	assert_int_equal(fresh->link, 0);
	assert_int_equal(fresh->start, 0);
	/* Give them all back: cleanup finds them dead (never published). */
	gdrc_slab_lock(c);
	for (int i = 0; i < 8; i++)
		gdrc_arena_put_locked(c, r[i]);
	gdrc_arena_put_locked(c, fresh);
	gdrc_slab_unlock(c);
	gdrc_cache_cleanup(c);
	free(c);
}

/*
 * A context of GDRC_MAX_REGIONS 1,000 holds 65,536 registrations alive
 * at most (eight times its limit, at least that many): held uncached
 * ones fill it, and the next miss answers GDRC_ERR_LIMIT with
 * nothing changed (no registration made, none dropped); a put frees a
 * region, and the miss after it is served.
 */
static void test_arena_full_refuses(void **state)
{
	struct gdrc_cache_params p = {
		.max_regions = 1000,
		.max_bytes = GDRC_LIMIT_NONE,
		.host_max_regions = GDRC_LIMIT_NONE,
		.ops = &gdrc_pin_none_ops,
		.cache_host = 1,
	};
	struct gdrc_cache *c = aligned_alloc(
		GDRC_CACHELINE, gdrc_align_up(sizeof(*c), GDRC_CACHELINE));
	struct gdrc_mr **held, *mr;
	uint32_t cap;
	uint64_t alive;

	(void)state;
	assert_non_null(c);
	memset(c, 0, sizeof(*c));
	assert_int_equal(gdrc_cache_init(c, &p), GDRC_OK);
	cap = c->regions.cap;
	assert_int_equal(cap, 65536);
	held = calloc(cap, sizeof(*held));
	assert_non_null(held);
	for (uint32_t i = 0; i < cap; i++) {
		struct gdrc_cache_req req = {
			.start = RANGE_START + i * PAGE,
			.end = RANGE_START + (i + 1) * PAGE,
			.mem_type = GDRC_MEM_HOST, .kind = GDRC_PTR_HOST,
			.device = -1, .flags = GDRC_GET_UNCACHED,
		};

		assert_int_equal(gdrc_cache_get_miss(c, &req, &held[i]),
				 GDRC_OK);
	}
	assert_int_equal(gdrc_arena_made(&c->regions), cap);
	alive = atomic_load(&c->nalive);
	assert_int_equal(alive, cap);
	mr = (struct gdrc_mr *)&p; /* a value the refusal must not touch */
	assert_int_equal(cache_layer_get_host(c, RANGE_START - PAGE,
					      RANGE_START, &mr),
			 GDRC_ERR_LIMIT);
	assert_ptr_equal(mr, (struct gdrc_mr *)&p);
	assert_int_equal(atomic_load(&c->nalive), alive);
	assert_int_equal(c->nregions, 0);
	/* Held registrations are untouched: each still answers its key. */
	assert_int_equal(gdrc_mr_region(held[7])->start, RANGE_START + 7 * PAGE);
	assert_int_equal(gdrc_cache_put(c, held[7]), GDRC_PUT_OK);
	assert_int_equal(cache_layer_get_host(c, RANGE_START - PAGE,
					      RANGE_START, &mr),
			 GDRC_OK);
	assert_int_equal(gdrc_cache_put(c, mr), GDRC_PUT_OK);
	for (uint32_t i = 0; i < cap; i++)
		if (i != 7)
			assert_int_equal(gdrc_cache_put(c, held[i]),
					 GDRC_PUT_OK);
	assert_int_equal(atomic_load(&c->nalive), 1); /* the cached one */
	free(held);
	gdrc_cache_cleanup(c);
	free(c);
}

/*
 * A context without a count limit reserves room for 2^27 regions (10
 * GiB of address space), but under an address-space limit at most a
 * sixteenth of it: 2^25 under 64 GiB.  In a child (the limit stays
 * there).  Exit codes: 0 as expected, 2 no limit could be set, 3 the
 * cap, 4 gdrc_cache_init failed.
 */
static int limited_child(void)
{
	struct rlimit rl = { .rlim_cur = 64UL << 30, .rlim_max = 64UL << 30 };
	struct gdrc_cache *c;
	struct rlimit old;

	if (getrlimit(RLIMIT_AS, &old) ||
	    (old.rlim_max != RLIM_INFINITY && old.rlim_max < rl.rlim_max))
		return 2;
	if (setrlimit(RLIMIT_AS, &rl))
		return 2;
	c = cache_layer_new(&gdrc_pin_none_ops, 0);
	if (!c)
		return 4;
	if (c->regions.cap != 1u << 25)
		return 3;
	gdrc_cache_cleanup(c);
	free(c);
	return 0;
}

/* limited_child, as child_run runs it (its status the exit code). */
static void limited_child_exit(int unused)
{
	(void)unused;
	_exit(limited_child());
}

static void test_arena_address_space_limit(void **state)
{
	struct gdrc_cache *c = cache_layer_new(&gdrc_pin_none_ops, 0);
	long v = vm_pages();
	char out[256];
	int status;

	(void)state;
	assert_non_null(c);
	/* valgrind grants a few GiB of address space at most: its arena is
	 * a halved one, and a limit is its own business. */
	if (getenv("GDRC_TEST_VALGRIND")) {
		gdrc_cache_cleanup(c);
		free(c);
		skip();
	}
	assert_int_equal(c->regions.cap, 1u << 27); /* no limit: the most */
	gdrc_cache_cleanup(c);
	free(c);
	/* Sanitizers and valgrind take tens of terabytes or refuse limits:
	 * a limit of 64 GiB would leave them no room. */
	if (v < 0 || (uint64_t)v * (uint64_t)sysconf(_SC_PAGESIZE) > (16UL << 30))
		skip();
	status = child_run(limited_child_exit, 0, out, sizeof(out), 60);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arena_lines_side_by_side),
		cmocka_unit_test(test_arena_reuse_first_in_first_out),
		cmocka_unit_test(test_arena_full_refuses),
		cmocka_unit_test(test_arena_address_space_limit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
