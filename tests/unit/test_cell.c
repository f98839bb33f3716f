// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cell.c - hazard cells (lib/cache/cell.c): an index hit on a plain
 * one-page host region held by naming the region in one of the thread's
 * cells, through the public API with the none backend.
 *   - such a hit is a cell, counted, and its put empties it;
 *   - a region invalidated while a cell holds it is released at the put,
 *     not before (the removal turns the cell into a reference);
 *   - the clock hand does not evict a region a cell holds;
 *   - a cell is put from another thread; a second put is a misuse that
 *     changes nothing, also after the thread's next get (cells are
 *     taken in turn); a fifth hit held at once is a direct reference;
 *   - a get needing more rights is not served from the entry;
 *   - a removal between the hit's look and its cell makes the hit give
 *     the cell back; one after the cell converts it (the steps called
 *     one by one);
 *   - getters racing with invalidations and new registrations are only
 *     ever served registrations that cover their request and stay
 *     registered until their put (GDRC_CHECK checks the index).
 * The cell is told from the other kinds by its magic (types.h).  Pages
 * are registered by another thread (fill), so that this one's first get
 * of each is a hit it would hold directly.
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

#include <cmocka.h>

#include "api_int.h"
#include "cache/cache_int.h"
#include "ctx_stat.h"

#include <gdrcache.h>

#define PAGE 4096UL
#define ACC GDRC_ACCESS_LOCAL_WRITE
#define PAGES 64

static char *map(size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

static struct gdrc_ctx *ctx_max(uint64_t max_regions)
{
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_MAX_REGIONS,
		.max_regions = max_regions,
	};
	struct gdrc_ctx *ctx;

	assert_int_equal(gdrc_init(max_regions ? &cfg : NULL, &ctx), GDRC_OK);
	return ctx;
}

static void reg(struct gdrc_ctx *ctx, const char *p)
{
	struct gdrc_mr *mr;

	assert_int_equal(gdrc_mr_get(ctx, p, PAGE, ACC, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);
}

/*
 * Register n pages of buf in another thread: a thread's next get of a
 * page its own miss served makes a handle (gdrc_hold_for), while this
 * thread has seen none of them, so its first get of each is an index hit
 * it would hold as a direct reference: a cell.
 */
struct fill {
	struct gdrc_ctx *ctx;
	char *buf;
	unsigned from, to;
};

static void *fill_there(void *p)
{
	struct fill *f = p;

	for (unsigned i = f->from; i < f->to; i++)
		reg(f->ctx, f->buf + i * PAGE);
	return NULL;
}

/* A thread's end unmaps its stack: the event that queues sends this
 * thread's next get to the miss path, which drains it.  An uncached get
 * of memory never cached takes that turn. */
static void drain(struct gdrc_ctx *ctx)
{
	static char spare[64];
	struct gdrc_mr *mr;

	assert_int_equal(gdrc_mr_get(ctx, spare, 64, ACC, GDRC_GET_UNCACHED,
				     &mr),
			 GDRC_OK);
	gdrc_mr_put(ctx, mr);
}

static void fill(struct gdrc_ctx *ctx, char *buf, unsigned from, unsigned to)
{
	struct fill f = { ctx, buf, from, to };
	pthread_t th;

	assert_int_equal(pthread_create(&th, NULL, fill_there, &f), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	drain(ctx);
}

static int is_cell(const struct gdrc_mr *mr)
{
	return mr->magic == GDRC_MR_CELL_MAGIC;
}

/* A get of page p of buf that must hit through a cell. */
static struct gdrc_mr *cell_get(struct gdrc_ctx *ctx, const char *p)
{
	uint64_t hits = ctx_stat(ctx, GDRC_STAT_HITS);
	struct gdrc_mr *mr;

	assert_int_equal(gdrc_mr_get(ctx, p, 64, ACC, 0, &mr), GDRC_OK);
	assert_true(is_cell(mr));
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_HITS), hits + 1);
	return mr;
}

/* A context without limits whose every page of a fresh buf (*buf_p) is
 * cached (fill); ended by done(). */
static struct gdrc_ctx *ctx_filled(char **buf_p)
{
	struct gdrc_ctx *ctx = ctx_max(0);

	*buf_p = map(PAGES * PAGE);
	fill(ctx, *buf_p, 0, PAGES);
	return ctx;
}

static void done(struct gdrc_ctx *ctx, char *buf)
{
	gdrc_fini(ctx);
	munmap(buf, PAGES * PAGE);
}

static void test_cell_serves_index_hit(void **state)
{
	char *buf;
	struct gdrc_ctx *ctx = ctx_filled(&buf);
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;
	uint64_t puts, misses;

	(void)state;
	misses = ctx_stat(ctx, GDRC_STAT_MISSES);
	mr = cell_get(ctx, buf + 7 * PAGE + 100);
	assert_int_equal(gdrc_mr_query(mr, &info), GDRC_OK);
	assert_int_equal(info.key_addr, (uintptr_t)(buf + 7 * PAGE));
	assert_int_equal(info.key_length, PAGE);
	puts = ctx_stat(ctx, GDRC_STAT_PUTS);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PUTS), puts + 1);
	assert_null(__atomic_load_n(&mr->r, __ATOMIC_ACQUIRE));
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), misses);
	/* A request past the page is not the cell's: a miss (it merges). */
	assert_int_equal(gdrc_mr_get(ctx, buf + 8 * PAGE - 64, 128, ACC, 0,
				     &mr),
			 GDRC_OK);
	assert_false(is_cell(mr));
	gdrc_mr_put(ctx, mr);
	done(ctx, buf);
}

static void test_cell_invalidated_released_at_put(void **state)
{
	char *buf;
	struct gdrc_ctx *ctx = ctx_filled(&buf);
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;
	uint64_t deregs;

	(void)state;
	mr = cell_get(ctx, buf + 5 * PAGE);
	deregs = ctx_stat(ctx, GDRC_STAT_DEREGS);
	assert_int_equal(gdrc_invalidate(ctx, buf + 5 * PAGE, PAGE), GDRC_OK);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), PAGES - 1);
	/* Still registered while the cell holds it. */
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), deregs);
	assert_int_equal(gdrc_mr_query(mr, &info), GDRC_OK);
	assert_int_equal(info.key_addr, (uintptr_t)(buf + 5 * PAGE));
	gdrc_mr_put(ctx, mr);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), deregs + 1);
	done(ctx, buf);
}

static void test_cell_held_not_evicted(void **state)
{
	enum { MAX = 8 };
	struct gdrc_ctx *ctx = ctx_max(MAX);
	char *buf = map(8 * MAX * PAGE);
	struct gdrc_mr *mr;
	uint64_t misses;

	(void)state;
	fill(ctx, buf, 0, MAX);
	mr = cell_get(ctx, buf);
	/* Six more rounds of the clock over new pages. */
	fill(ctx, buf, MAX, 7 * MAX);
	assert_true(ctx_stat(ctx, GDRC_STAT_EVICTIONS) >= 6 * MAX - 1);
	gdrc_mr_put(ctx, mr);
	misses = ctx_stat(ctx, GDRC_STAT_MISSES);
	reg(ctx, buf); /* still cached: a hit */
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), misses);
	gdrc_fini(ctx);
	munmap(buf, 8 * MAX * PAGE);
}

struct put_arg {
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
};

static void *put_there(void *p)
{
	struct put_arg *a = p;

	gdrc_mr_put(a->ctx, a->mr);
	return NULL;
}

static void test_cell_put_elsewhere_and_twice(void **state)
{
	struct gdrc_ctx *ctx;
	char *buf;
	struct put_arg a;
	struct gdrc_mr *mr[GDRC_CELLS + 1];
	pthread_t th;
	uint64_t puts, misuse;

	(void)state;
	setenv("GDRC_MISUSE", "warn", 1); /* read by gdrc_init */
	ctx = ctx_filled(&buf);
	a.ctx = ctx;
	/* Four held at once are cells; the fifth a direct reference. */
	for (unsigned i = 0; i < GDRC_CELLS; i++)
		mr[i] = cell_get(ctx, buf + (10 + i) * PAGE);
	assert_int_equal(gdrc_mr_get(ctx, buf + 20 * PAGE, 64, ACC, 0,
				     &mr[GDRC_CELLS]),
			 GDRC_OK);
	assert_int_equal(mr[GDRC_CELLS]->magic, GDRC_MR_SELF_MAGIC);
	/* One put from another thread. */
	puts = ctx_stat(ctx, GDRC_STAT_PUTS);
	a.mr = mr[0];
	assert_int_equal(pthread_create(&th, NULL, put_there, &a), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PUTS), puts + 1);
	assert_null(__atomic_load_n(&mr[0]->r, __ATOMIC_ACQUIRE));
	/* Its second put: a misuse, nothing put. */
	misuse = ctx_stat(ctx, GDRC_STAT_MISUSE);
	gdrc_mr_put(ctx, mr[0]);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), misuse + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PUTS), puts + 1);
	for (unsigned i = 1; i <= GDRC_CELLS; i++)
		gdrc_mr_put(ctx, mr[i]);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_PUTS), puts + GDRC_CELLS + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), misuse + 1);
	/* Cells are taken in turn: the next gets take the other cells
	 * before the one put last, whose stale second put stays a misuse
	 * until then. */
	drain(ctx);
	mr[0] = cell_get(ctx, buf + 30 * PAGE);
	gdrc_mr_put(ctx, mr[0]);
	mr[1] = cell_get(ctx, buf + 31 * PAGE);
	assert_ptr_not_equal(mr[1], mr[0]);
	gdrc_mr_put(ctx, mr[0]);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), misuse + 2);
	gdrc_mr_put(ctx, mr[1]);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISUSE), misuse + 2);
	done(ctx, buf);
	unsetenv("GDRC_MISUSE");
}

/* A get needing more rights than the page's registration has: never
 * served from its entry (a miss for the rights). */
static void test_cell_rights_fall_to_miss(void **state)
{
	char *buf;
	struct gdrc_ctx *ctx = ctx_filled(&buf);
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;
	uint64_t misses;

	(void)state;
	misses = ctx_stat(ctx, GDRC_STAT_MISS_ACCESS);
	assert_int_equal(gdrc_mr_get(ctx, buf + 3 * PAGE, 64,
				     GDRC_ACCESS_REMOTE_READ, 0, &mr),
			 GDRC_OK);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISS_ACCESS), misses + 1);
	assert_int_equal(gdrc_mr_query(mr, &info), GDRC_OK);
	assert_true(info.access & GDRC_ACCESS_REMOTE_READ);
	gdrc_mr_put(ctx, mr);
	done(ctx, buf);
}

/*
 * A cell hit's used mark, in its bucket, moves with the entry when the
 * page hash grows (the clock hand would otherwise take a region hit
 * only through cells for unused, a round early).
 */
static void test_cell_used_mark_survives_growth(void **state)
{
	enum { MANY = 2048 };
	struct gdrc_ctx *ctx = ctx_max(0);
	struct gdrc_cache *c = &ctx_base(ctx)->cache;
	char *buf = map(MANY * PAGE);
	const void *first = atomic_load(&c->ix.ph);
	struct gdrc_region *r;
	struct gdrc_mr *mr;

	(void)state;
	fill(ctx, buf, 0, 4);
	mr = cell_get(ctx, buf + 2 * PAGE);
	r = gdrc_mr_region(mr);
	gdrc_mr_put(ctx, mr);
	fill(ctx, buf, 4, MANY);
	assert_ptr_not_equal(atomic_load(&c->ix.ph), first);
	gdrc_cache_wrlock(c);
	assert_int_equal(gdrc_index_used_take(c, r), 1);
	/* Taken: cleared. */
	assert_int_equal(gdrc_index_used_take(c, r), 0);
	gdrc_cache_unlock(c);
	gdrc_fini(ctx);
	munmap(buf, MANY * PAGE);
}

/*
 * The hit's look made in a page hash that then grows (its entries move to
 * a larger table) and loses the looked-at regions: the removals change
 * only the new table, and the old buckets the looks read are left as
 * they were (but where the retired table's pages went back to the
 * system: they read as zero), so only the table's own check refuses
 * every hit (without it a cell would name a region its removal
 * released: its look at the cells came before the cell).  The looks are
 * made one registration before the growth, found first in a context of
 * its own, so that no insertion changes their buckets before it.
 */
static void test_cell_look_in_replaced_table_refused(void **state)
{
	enum { FEW = 16, MANY = 2048 };
	char *buf = map(MANY * PAGE);
	struct gdrc_ix_ticket tk[FEW];
	struct gdrc_region *r[FEW];
	struct gdrc_ctx *ctx = ctx_max(0);
	struct gdrc_cache *c = &ctx_base(ctx)->cache;
	const void *first = atomic_load(&c->ix.ph);
	struct gdrc_cell *cell;
	unsigned grows = 0;
	int absent;

	(void)state;
	while (grows < MANY && atomic_load(&c->ix.ph) == first) {
		fill(ctx, buf, grows, grows + 1);
		grows++;
	}
	assert_true(grows < MANY); /* the registration that grew it */
	gdrc_fini(ctx);

	ctx = ctx_max(0);
	c = &ctx_base(ctx)->cache;
	fill(ctx, buf, 0, grows - 1);
	for (unsigned i = 0; i < FEW; i++) {
		uintptr_t p = (uintptr_t)buf + i * PAGE;

		r[i] = gdrc_index_find_plain(c, p, p + PAGE, ACC, &tk[i],
					     &absent);
		assert_non_null(r[i]);
	}
	fill(ctx, buf, grows - 1, grows);
	assert_ptr_not_equal(atomic_load(&c->ix.ph), tk[0].table);
	for (unsigned i = 0; i < FEW; i++)
		assert_int_equal(gdrc_invalidate(ctx, buf + i * PAGE, PAGE),
				 GDRC_OK);
	for (unsigned i = 0; i < FEW; i++) {
		cell = gdrc_cell_take(c, r[i]);
		assert_non_null(cell);
		assert_false(gdrc_index_ticket_valid(c, &tk[i]));
		gdrc_cell_drop(c, cell);
	}
	gdrc_fini(ctx);
	munmap(buf, MANY * PAGE);
}

/*
 * The hit's steps one by one (lookup.c, cell_hit), with a removal of
 * the page between the look and the cell: the bucket changed, so the
 * second read refuses the hit (without it the cell would name a region
 * the removal released: its look at the cells came before the cell).
 * And the other order: the cell stored first, then the removal, which
 * turns the cell into a reference the put gives back.
 */
static void test_cell_removal_between_look_and_cell(void **state)
{
	char *buf;
	struct gdrc_ctx *ctx = ctx_filled(&buf);
	struct gdrc_cache *c = &ctx_base(ctx)->cache;
	uintptr_t p = (uintptr_t)buf + 9 * PAGE;
	struct gdrc_ix_ticket tk;
	struct gdrc_region *r;
	struct gdrc_cell *cell;
	uint64_t deregs;
	int absent = -1;

	(void)state;
	r = gdrc_index_find_plain(c, p, p + PAGE, ACC, &tk, &absent);
	assert_non_null(r);
	assert_int_equal(absent, 0);
	assert_int_equal(gdrc_invalidate(ctx, (void *)p, PAGE), GDRC_OK);
	cell = gdrc_cell_take(c, r);
	assert_non_null(cell);
	assert_false(gdrc_index_ticket_valid(c, &tk));
	gdrc_cell_drop(c, cell);
	assert_null(__atomic_load_n(&cell->pub.r, __ATOMIC_ACQUIRE));
	/* The page is gone from the index: nothing there to see. */
	assert_null(gdrc_index_find_plain(c, p, p + PAGE, ACC, &tk, &absent));
	assert_int_equal(absent, 1);

	p += PAGE;
	r = gdrc_index_find_plain(c, p, p + PAGE, ACC, &tk, &absent);
	assert_non_null(r);
	cell = gdrc_cell_take(c, r);
	assert_true(gdrc_index_ticket_valid(c, &tk));
	deregs = ctx_stat(ctx, GDRC_STAT_DEREGS);
	assert_int_equal(gdrc_invalidate(ctx, (void *)p, PAGE), GDRC_OK);
	assert_int_equal((uintptr_t)__atomic_load_n(&cell->pub.r,
						     __ATOMIC_ACQUIRE),
			 (uintptr_t)r | GDRC_CELL_CONVERTED);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), deregs);
	gdrc_mr_put(ctx, &cell->pub);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), deregs + 1);
	done(ctx, buf);
}

struct race {
	struct gdrc_ctx *ctx;
	char *buf;
	atomic_int stop;
	atomic_ulong cells;
};

enum { RACE_PAGES = 256 };

/* Random gets held across a query: what is served covers the request
 * and is still registered (the query finds it live) until the put. */
static void *race_getter(void *p)
{
	struct race *r = p;
	unsigned seed = (unsigned)(uintptr_t)&seed;

	while (!atomic_load(&r->stop)) {
		unsigned i = (unsigned)rand_r(&seed) % RACE_PAGES;
		uintptr_t a = (uintptr_t)r->buf + i * PAGE;
		struct gdrc_mr_info info;
		struct gdrc_mr *mr;

		if (gdrc_mr_get(r->ctx, (void *)a, 64, ACC, 0, &mr) !=
		    GDRC_OK)
			abort();
		if (is_cell(mr))
			atomic_fetch_add(&r->cells, 1);
		for (int k = 0; k < 3; k++)
			if (gdrc_mr_query(mr, &info) != GDRC_OK ||
			    info.key_addr > a ||
			    info.key_addr + info.key_length < a + 64)
				abort();
		gdrc_mr_put(r->ctx, mr);
	}
	return NULL;
}

static void test_cell_race_with_removals(void **state)
{
	struct race r = { .ctx = ctx_max(0) };
	uint64_t misuse = ctx_stat(r.ctx, GDRC_STAT_MISUSE);
	pthread_t th[2];
	unsigned seed = 5;

	(void)state;
	r.buf = map(RACE_PAGES * PAGE);
	fill(r.ctx, r.buf, 0, RACE_PAGES);
	for (int t = 0; t < 2; t++)
		assert_int_equal(pthread_create(&th[t], NULL, race_getter, &r),
				 0);
	for (unsigned n = 0; n < 3000 || !atomic_load(&r.cells); n++) {
		unsigned i = (unsigned)rand_r(&seed) % RACE_PAGES;

		assert_int_equal(gdrc_invalidate(r.ctx, r.buf + i * PAGE,
						 PAGE),
				 GDRC_OK);
		reg(r.ctx, r.buf + i * PAGE);
	}
	atomic_store(&r.stop, 1);
	for (int t = 0; t < 2; t++)
		assert_int_equal(pthread_join(th[t], NULL), 0);
	assert_true(atomic_load(&r.cells) > 0);
	assert_int_equal(ctx_stat(r.ctx, GDRC_STAT_MISUSE), misuse);
	gdrc_fini(r.ctx);
	munmap(r.buf, RACE_PAGES * PAGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cell_serves_index_hit),
		cmocka_unit_test(test_cell_invalidated_released_at_put),
		cmocka_unit_test(test_cell_held_not_evicted),
		cmocka_unit_test(test_cell_put_elsewhere_and_twice),
		cmocka_unit_test(test_cell_rights_fall_to_miss),
		cmocka_unit_test(test_cell_removal_between_look_and_cell),
		cmocka_unit_test(test_cell_look_in_replaced_table_refused),
		cmocka_unit_test(test_cell_used_mark_survives_growth),
		cmocka_unit_test(test_cell_race_with_removals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
