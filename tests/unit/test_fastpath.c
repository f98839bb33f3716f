// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_fastpath.c - the order of the fast path's loads (hit.h,
 * gdrc_cache_get_fast) against another thread's unmap, made
 * deterministic.  The fast path asks host_ok before anything else it
 * reads about an untagged registration; the callbacks here play the
 * other thread at that moment:
 *   - an unmap whose event is queued just as the get looks (its window
 *     closes between two of the get's loads);
 *   - the same, and a drain that applies it before the get goes on.
 * A fast path that read the queue's pending flag or the region's word
 * before asking host_ok served the old registration in both (the order
 * bug that test_threads caught under ASan about once in 200 runs).
 * And the miss path's: a registration that fails while an unmap of its
 * range is queued answers GDRC_ERR_BUSY (the memory went: trying again
 * with what the caller classified before would register the wrong
 * thing), another failure the backend's own status; nothing is cached
 * either way (test_cufile_free_race met the first with libcufile's
 * CU_FILE_CUDA_POINTER_INVALID once under ASan).
 * Drives the cache layer directly, with the none backend and one that
 * fails.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cache/cache_int.h"
#include "cache/invq.h"
#include "cache_layer.h"

#define PAGE 4096UL

/* Any addresses: the none backend touches no memory. */
#define RANGE_START 0x100000000UL
#define RANGE_END (RANGE_START + PAGE)
#define ELSEWHERE (RANGE_START + 64 * PAGE)

static struct gdrc_cache *cache;

/* What host_ok does, and how often it was asked. */
enum act { ACT_NOTHING, ACT_QUEUE, ACT_QUEUE_AND_DRAIN };
static enum act act;
static int asked;

static int host_ok_acting(void)
{
	asked++;
	if (act == ACT_QUEUE || act == ACT_QUEUE_AND_DRAIN)
		gdrc_cache_post_event(cache, RANGE_START, RANGE_END,
				      GDRC_INVQ_HOST);
	/* Any call that takes the write lock drains the queue first. */
	if (act == ACT_QUEUE_AND_DRAIN)
		assert_int_equal(gdrc_cache_invalidate(cache, ELSEWHERE,
						       ELSEWHERE + PAGE,
						       GDRC_STAT_INV_EXPLICIT),
				 GDRC_OK);
	act = ACT_NOTHING; /* once */
	return 1;
}

static int setup(void **state)
{
	(void)state;
	cache = cache_layer_new(&gdrc_pin_none_ops, 1);
	act = ACT_NOTHING;
	asked = 0;
	return cache ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	gdrc_cache_cleanup(cache);
	free(cache);
	cache = NULL;
	return 0;
}

/* For a test on a backend of its own: the cache, on ops (its end is
 * teardown's). */
static void cache_on(const struct gdrc_pin_ops *ops)
{
	cache = cache_layer_new(ops, 1);
	assert_non_null(cache);
}

/* A miss for the range and a second get: a cached registration behind
 * a live handle of this thread (a miss serves a direct reference, the
 * next get of it a handle), put back.  @return its id. */
static uint64_t register_range(void)
{
	struct gdrc_mr_info i;
	struct gdrc_mr *mr;

	for (int n = 0; n < 2; n++) {
		assert_int_equal(cache_layer_get_host(cache, RANGE_START,
						      RANGE_END, &mr),
				 GDRC_OK);
		assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
		gdrc_cache_put(cache, mr);
	}
	return i.id;
}

static struct gdrc_mr *get_fast(void)
{
	return gdrc_cache_get_fast(cache, RANGE_START, RANGE_END, 0,
				   host_ok_acting);
}

/* The control: nothing happens while the get looks, and it hits. */
static void test_fastpath_hits_when_nothing_happens(void **state)
{
	struct gdrc_mr_info i;
	uint64_t id = register_range();
	struct gdrc_mr *mr;

	(void)state;
	mr = get_fast();
	assert_non_null(mr);
	assert_int_equal(asked, 1);
	assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
	assert_int_equal(i.id, id);
	gdrc_cache_put(cache, mr);
}

/* An unmap's event queued as the get asks host_ok: the get goes slow,
 * and the slow path applies it and registers afresh. */
static void test_fastpath_event_queued_while_looking_goes_slow(void **state)
{
	struct gdrc_mr *mr;
	uint64_t id = register_range();

	(void)state;
	act = ACT_QUEUE;
	assert_null(get_fast());
	assert_int_equal(asked, 1);
	assert_int_equal(gdrc_cache_lookup(cache, RANGE_START, RANGE_END, 0,
					   &mr),
			 0);
	assert_true(register_range() > id);
}

/* The same event, drained by another call before the get goes on: the
 * region is marked invalid and pending is clear again. */
static void test_fastpath_event_drained_while_looking_goes_slow(void **state)
{
	uint64_t v[GDRC_STAT_COUNT], hits;
	uint64_t id = register_range();

	(void)state;
	gdrc_cache_stats(cache, v);
	hits = v[GDRC_STAT_HITS];
	act = ACT_QUEUE_AND_DRAIN;
	assert_null(get_fast());
	assert_int_equal(asked, 1);
	gdrc_cache_stats(cache, v);
	assert_int_equal(v[GDRC_STAT_INV_HOST_HOOK], 1);
	assert_int_equal(v[GDRC_STAT_HITS], hits);
	assert_true(register_range() > id);
}

/* A backend whose registration fails; with unmap_meanwhile, after an
 * unmap of the range was queued (another thread's munmap while the
 * backend looked at the pages). */
static int unmap_meanwhile;

static gdrc_status_t failing_reg(void *be, struct gdrc_pin_reg *reg)
{
	(void)be;
	if (unmap_meanwhile)
		gdrc_cache_post_event(cache, reg->addr, reg->addr + reg->length,
				      GDRC_INVQ_HOST);
	return GDRC_ERR_VERBS;
}

static void failing_dereg(void *be, struct gdrc_pin_reg *reg)
{
	(void)be;
	(void)reg;
	fail_msg("dereg of a registration that never succeeded");
}

static const struct gdrc_pin_ops failing_ops = {
	.name = "failing",
	.backend = GDRC_BACKEND_NONE,
	.reg = failing_reg,
	.dereg = failing_dereg,
};

static void test_miss_failed_while_unmapped_is_busy(void **state)
{
	struct gdrc_mr *mr = (struct gdrc_mr *)0x1;
	uint64_t v[GDRC_STAT_COUNT];

	(void)state;
	cache_on(&failing_ops);
	unmap_meanwhile = 1;
	assert_int_equal(cache_layer_get_host(cache, RANGE_START, RANGE_END,
					      &mr),
			 GDRC_ERR_BUSY);
	unmap_meanwhile = 0;
	assert_int_equal(cache_layer_get_host(cache, RANGE_START, RANGE_END,
					      &mr),
			 GDRC_ERR_VERBS);
	assert_ptr_equal(mr, (struct gdrc_mr *)0x1);
	gdrc_cache_stats(cache, v);
	assert_int_equal(v[GDRC_STAT_REGIONS], 0);
	assert_int_equal(v[GDRC_STAT_PINNED_BYTES], 0);
	assert_int_equal(v[GDRC_STAT_REG_FAILURES], 2);
	teardown(NULL);
}

/* A backend that registers as the none backend does and, once, has the
 * same range cached meanwhile (another thread's get while this one's
 * registration runs without the lock): that get is kept in raced. */
static int race_once;
static struct gdrc_mr *raced;

static gdrc_status_t racing_reg(void *be, struct gdrc_pin_reg *reg)
{
	if (race_once) {
		race_once = 0;
		assert_int_equal(cache_layer_get_host(cache, RANGE_START,
						      RANGE_END, &raced),
				 GDRC_OK);
	}
	return gdrc_pin_none_ops.reg(be, reg);
}

static const struct gdrc_pin_ops racing_ops = {
	.name = "racing",
	.backend = GDRC_BACKEND_NONE,
	.reg = racing_reg,
	.dereg = NULL, /* set from the none backend's */
};

/*
 * The miss path searches again after its registration only if a region
 * was inserted since its first search: here one was (the same range,
 * cached while it registered), so the get is served by that one and its
 * own registration dropped.
 */
static void test_miss_served_by_region_cached_meanwhile(void **state)
{
	struct gdrc_pin_ops ops = racing_ops;
	uint64_t v[GDRC_STAT_COUNT];
	struct gdrc_mr *mr;

	(void)state;
	ops.dereg = gdrc_pin_none_ops.dereg;
	cache_on(&ops);
	race_once = 1;
	assert_int_equal(cache_layer_get_host(cache, RANGE_START, RANGE_END,
					      &mr),
			 GDRC_OK);
	assert_non_null(raced);
	assert_ptr_equal(gdrc_mr_region(mr), gdrc_mr_region(raced));
	gdrc_cache_stats(cache, v);
	assert_int_equal(v[GDRC_STAT_REGIONS], 1);
	assert_int_equal(v[GDRC_STAT_MISSES], 1);
	assert_int_equal(v[GDRC_STAT_DEREGS], 1);
	gdrc_cache_put(cache, mr);
	gdrc_cache_put(cache, raced);
	raced = NULL;
	teardown(NULL);
}

/*
 * The level a region enters: the lowest at which it spans at most eight
 * granules (index.c, IX_FIT): 8 pages at the first, 9 at the second (64
 * KiB), 1 MiB (sixteen 64 KiB granules) at the third, in one entry.
 */
static void test_index_region_levels(void **state)
{
	static const struct {
		uintptr_t len;
		int level;
	} want[] = {
		{ 8 * PAGE, 0 }, { 9 * PAGE, 1 }, { 8 * 65536, 1 },
		{ 9 * 65536, 2 }, { 1UL << 20, 2 },
	};
	struct gdrc_mr *mr;

	(void)state;
	cache_on(&gdrc_pin_none_ops);
	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uintptr_t start = RANGE_START + ((uintptr_t)i << 32);

		assert_int_equal(cache_layer_get_host(cache, start,
						      start + want[i].len,
						      &mr),
				 GDRC_OK);
		assert_int_equal(gdrc_mr_region(mr)->ix_level, want[i].level);
		gdrc_cache_put(cache, mr);
	}
	teardown(NULL);
}

/*
 * A region taken out between the get that took it and the entry made for
 * it, this thread's look for removed regions ending in between (the
 * look tls_install makes first): the hit path trusts a finished look
 * instead of reading a region (gdrc_tls_live), so the entry must not be
 * covered by that one.  In a thread of its own (no parked table, so the
 * look ends in one call); the asserts are made here.
 */
struct taken_out {
	int peeked;     /* gdrc_cache_peek's result */
	int entry;      /* an entry covers the range */
	int served;     /* gdrc_cache_get_host served it */
};

static int host_ok_yes(void)
{
	return 1;
}

static void *taken_out_thread(void *arg)
{
	struct taken_out *o = arg;
	struct gdrc_region *r;
	struct gdrc_tls_entry *e;
	struct gdrc_mr *mr, *mr2;

	if (cache_layer_get_host(cache, RANGE_START, RANGE_END, &mr))
		return NULL;
	gdrc_cache_put(cache, mr);
	o->peeked = gdrc_cache_peek(cache, RANGE_START, RANGE_END, &r);
	if (o->peeked != 1)
		return NULL;
	if (gdrc_cache_invalidate(cache, RANGE_START, RANGE_END,
				  GDRC_STAT_INV_EXPLICIT))
		return NULL;
	mr = gdrc_serve(cache, r); /* the peek's pin becomes the get */
	e = gdrc_tls_find(&gdrc_tls_cur, cache, RANGE_START, RANGE_END, 0, 0,
			  GDRC_TLS_ENTRIES - 1);
	o->entry = e != NULL;
	if (e && gdrc_cache_get_host(cache, e, host_ok_yes, host_ok_yes,
				   &mr2)) {
		o->served = 1;
		gdrc_cache_put(cache, mr2);
	}
	gdrc_cache_put(cache, mr);
	return NULL;
}

static void test_fastpath_taken_out_before_entry_not_served(void **state)
{
	struct taken_out o = { 0 };
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, taken_out_thread, &o), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(o.peeked, 1);
	assert_int_equal(o.entry, 1);
	assert_int_equal(o.served, 0);
}

/* The CUDA hooks' answer, and how often it was asked. */
static int cuda_intact, cuda_asked;

static int cuda_ok_counting(void)
{
	cuda_asked++;
	return cuda_intact;
}

/* A handle entry for [start, end) of kind (a miss, then the handle). */
static struct gdrc_tls_entry *entry_of_kind(uintptr_t start, uintptr_t end,
					    int kind)
{
	struct gdrc_cache_req req = {
		.start = start, .end = end,
		.mem_type = GDRC_MEM_HOST, .kind = kind, .device = -1,
	};
	struct gdrc_mr *mr;

	for (int n = 0; n < 2; n++) {
		assert_int_equal(gdrc_cache_get_miss(cache, &req, &mr),
				 GDRC_OK);
		gdrc_cache_put(cache, mr);
	}
	return gdrc_tls_find(&gdrc_tls_cur, cache, start, end, 0, 0,
			     GDRC_TLS_ENTRIES - 1);
}

/*
 * A hit through an entry asks whether CUDA's frees are seen (cuda_ok)
 * only for memory CUDA knows: pinned host memory is not served while
 * the CUDA hooks are not intact, and is once they are; memory CUDA
 * does not know is served without the question.
 */
static void test_fastpath_cuda_hooks_asked_for_cuda_memory(void **state)
{
	struct gdrc_tls_entry *pinned, *plain;
	struct gdrc_mr *mr = NULL;

	(void)state;
	pinned = entry_of_kind(RANGE_START, RANGE_END, GDRC_PTR_HOST_PINNED);
	plain = entry_of_kind(ELSEWHERE, ELSEWHERE + PAGE, GDRC_PTR_HOST);
	assert_non_null(pinned);
	assert_non_null(plain);
	cuda_intact = 0;
	cuda_asked = 0;
	assert_false(gdrc_cache_get_host(cache, pinned, host_ok_yes,
					 cuda_ok_counting, &mr));
	assert_int_equal(cuda_asked, 1);
	assert_true(gdrc_cache_get_host(cache, plain, host_ok_yes,
					cuda_ok_counting, &mr));
	assert_int_equal(cuda_asked, 1);
	gdrc_cache_put(cache, mr);
	cuda_intact = 1;
	assert_true(gdrc_cache_get_host(cache, pinned, host_ok_yes,
					cuda_ok_counting, &mr));
	assert_int_equal(cuda_asked, 2);
	gdrc_cache_put(cache, mr);
}

/*
 * The stamp a thread's look over its entries leaves (t->swept) names
 * the cache looked at: a look over cache a, each cache having removed
 * one region, must not vouch for an entry of cache b whose region was
 * removed after b's last look.  Stamps counted per cache (equal here)
 * served b's removed region from the entry.
 */
static void *invalidate_range(void *arg)
{
	assert_int_equal(gdrc_cache_invalidate(arg, RANGE_START, RANGE_END,
					       GDRC_STAT_INV_EXPLICIT),
			 GDRC_OK);
	return NULL;
}

static void test_swept_stamp_names_its_cache(void **state)
{
	struct gdrc_cache *b = cache_layer_new(&gdrc_pin_none_ops, 1);
	struct gdrc_tls_entry *e;
	struct gdrc_mr *mr = NULL, *mr2;
	pthread_t t;

	(void)state;
	assert_non_null(b);
	/* An entry of b for the range (a miss, then the handle). */
	for (int n = 0; n < 2; n++) {
		assert_int_equal(cache_layer_get_host(b, RANGE_START, RANGE_END,
						      &mr),
				 GDRC_OK);
		gdrc_cache_put(b, mr);
	}
	e = gdrc_tls_find(&gdrc_tls_cur, b, RANGE_START, RANGE_END, 0, 0,
			  GDRC_TLS_ENTRIES - 1);
	assert_non_null(e);
	/* One removal in each cache: b's region, by another thread (this
	 * one's entry stays until it looks at b), and one of a's. */
	assert_int_equal(pthread_create(&t, NULL, invalidate_range, b), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(e->uid, b->uid);
	assert_int_equal(cache_layer_get_host(cache, ELSEWHERE,
					      ELSEWHERE + PAGE, &mr),
			 GDRC_OK);
	gdrc_cache_put(cache, mr);
	assert_int_equal(gdrc_cache_invalidate(cache, ELSEWHERE,
					       ELSEWHERE + PAGE,
					       GDRC_STAT_INV_EXPLICIT),
			 GDRC_OK);
	gdrc_tls_drop_invalid(cache); /* the thread looks at a */
	assert_false(gdrc_cache_get_host(b, e, host_ok_yes, host_ok_yes, &mr2));
	gdrc_tls_drop_invalid(b); /* lets go of b's handle */
	assert_int_equal(e->uid, 0);
	gdrc_cache_cleanup(b);
	free(b);
}

/*
 * A thread that counts in the shared last shard keeps no handle (the hit
 * path counts an entry's hits and puts with plain stores, which two
 * threads of that shard would lose): its gets are served as cells and
 * direct references, never through an entry, and each is counted.
 * Threads that took the GDRC_SHARDS shards of their own hold them until
 * the one that found none has done.
 */
struct shard_hold {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int release;
	int shard; /* the thread's, once it has one */
	int got;   /* set with shard */
};

static struct shard_hold holds[GDRC_SHARDS + 2];

/* Take a shard (a get does), say which, keep it until told. */
static void *shard_holder(void *arg)
{
	struct shard_hold *h = arg;
	int shard = gdrc_tls_shard();

	pthread_mutex_lock(&h->lock);
	h->shard = shard;
	h->got = 1;
	pthread_cond_broadcast(&h->cond);
	while (!h->release && shard < GDRC_SHARDS)
		pthread_cond_wait(&h->cond, &h->lock);
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

/* In the shared shard: three gets and puts of one range (a thread of
 * its own shard gets a handle at the second), what served them. */
struct shared_gets {
	int shard;
	int handles; /* gets served through a handle */
	int entries; /* entries of the cache left */
	gdrc_status_t status[3];
};

static void *shared_getter(void *arg)
{
	struct shared_gets *g = arg;
	struct gdrc_mr *mr;

	g->shard = gdrc_tls_shard();
	for (int n = 0; n < 3; n++) {
		g->status[n] = cache_layer_get_host(cache, RANGE_START,
						    RANGE_END, &mr);
		if (g->status[n] != GDRC_OK)
			continue;
		g->handles += mr->magic == GDRC_MR_MAGIC;
		gdrc_cache_put(cache, mr);
	}
	for (int i = 0; i < GDRC_TLS_ENTRIES; i++)
		g->entries += gdrc_tls_cur.e[i].uid == cache->uid;
	return NULL;
}

static void test_shared_shard_keeps_no_handle(void **state)
{
	uint64_t before[GDRC_STAT_COUNT], after[GDRC_STAT_COUNT];
	pthread_t t[GDRC_SHARDS + 2], getter;
	struct shared_gets g = { 0 };
	int n = 0;

	(void)state;
	register_range(); /* cached; this thread has a shard too */
	/* Holders until one finds the shared shard (this thread and the
	 * runner's other threads hold some already). */
	do {
		struct shard_hold *h = &holds[n];

		assert_true(n < GDRC_SHARDS + 2);
		pthread_mutex_init(&h->lock, NULL);
		pthread_cond_init(&h->cond, NULL);
		assert_int_equal(pthread_create(&t[n], NULL, shard_holder, h),
				 0);
		pthread_mutex_lock(&h->lock);
		while (!h->got)
			pthread_cond_wait(&h->cond, &h->lock);
		pthread_mutex_unlock(&h->lock);
	} while (holds[n++].shard < GDRC_SHARDS);
	gdrc_cache_stats(cache, before);
	assert_int_equal(pthread_create(&getter, NULL, shared_getter, &g), 0);
	assert_int_equal(pthread_join(getter, NULL), 0);
	gdrc_cache_stats(cache, after);
	for (int i = 0; i < n; i++) {
		pthread_mutex_lock(&holds[i].lock);
		holds[i].release = 1;
		pthread_cond_broadcast(&holds[i].cond);
		pthread_mutex_unlock(&holds[i].lock);
		assert_int_equal(pthread_join(t[i], NULL), 0);
	}
	assert_int_equal(g.shard, GDRC_SHARDS);
	for (int i = 0; i < 3; i++)
		assert_int_equal(g.status[i], GDRC_OK);
	assert_int_equal(g.handles, 0);
	assert_int_equal(g.entries, 0);
	/* Every get a hit of the registration cached, every put counted. */
	assert_int_equal(after[GDRC_STAT_HITS] - before[GDRC_STAT_HITS], 3);
	assert_int_equal(after[GDRC_STAT_PUTS] - before[GDRC_STAT_PUTS], 3);
	assert_int_equal(after[GDRC_STAT_MISSES], before[GDRC_STAT_MISSES]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_fastpath_hits_when_nothing_happens, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_fastpath_event_queued_while_looking_goes_slow,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_fastpath_event_drained_while_looking_goes_slow,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_fastpath_taken_out_before_entry_not_served, setup,
			teardown),
		cmocka_unit_test(test_miss_failed_while_unmapped_is_busy),
		cmocka_unit_test(test_miss_served_by_region_cached_meanwhile),
		cmocka_unit_test(test_index_region_levels),
		cmocka_unit_test_setup_teardown(
			test_shared_shard_keeps_no_handle, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_swept_stamp_names_its_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_fastpath_cuda_hooks_asked_for_cuda_memory, setup,
			teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
