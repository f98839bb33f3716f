// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cache.c - the cache's contract on host memory, through the public
 * API with the none backend: hits, misses and their causes, rounding,
 * merging, reference counts, and invalidation by the memory hooks
 * (munmap, madvise, mremap, brk, glibc's own unmaps) and explicitly.
 * ctest runs it with GDRC_CHECK=1, so the tree and LRU invariants are
 * checked after every change.
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctx_stat.h"
#include "libc_sym.h"

#include "map_pages.h"

#include <gdrcache.h>

#define PAGE 4096UL
#define BUF_PAGES 16

struct fixture {
	struct gdrc_ctx *ctx;
	char *buf;
};

/*
 * glibc's own allocator, also under ASan, whose malloc replaces glibc's
 * and unmaps with raw system calls no hook can see (docs/threading.md).
 */
static void *(*libc_malloc)(size_t);
static void (*libc_free)(void *);
static int (*libc_malloc_trim)(size_t);

static int group_setup(void **state)
{
	(void)state;
	libc_malloc = (void *(*)(size_t))libc_sym("malloc");
	libc_free = (void (*)(void *))libc_sym("free");
	libc_malloc_trim = (int (*)(size_t))libc_sym("malloc_trim");
	assert_non_null(libc_malloc);
	assert_non_null(libc_free);
	assert_non_null(libc_malloc_trim);
	return 0;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(gdrc_init(NULL, &f->ctx), GDRC_OK);
	f->buf = mmap(NULL, BUF_PAGES * PAGE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(f->buf != MAP_FAILED);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	gdrc_fini(f->ctx);
	munmap(f->buf, BUF_PAGES * PAGE);
	free(f);
	return 0;
}

static struct gdrc_mr *get(struct gdrc_ctx *ctx, const void *addr,
			   size_t len, uint32_t access)
{
	struct gdrc_mr *mr = NULL;

	assert_int_equal(gdrc_mr_get(ctx, addr, len, access, 0, &mr),
			 GDRC_OK);
	assert_non_null(mr);
	return mr;
}

static struct gdrc_mr_info info(const struct gdrc_mr *mr)
{
	struct gdrc_mr_info i;

	assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
	return i;
}

/* id of a fresh get+put of [addr, addr + len). */
static uint64_t get_id(struct gdrc_ctx *ctx, const void *addr, size_t len)
{
	struct gdrc_mr *mr = get(ctx, addr, len, 0);
	uint64_t id = info(mr).id;

	gdrc_mr_put(ctx, mr);
	return id;
}

static void test_cache_second_get_hits_same_registration(void **state)
{
	struct fixture *f = *state;
	struct gdrc_mr *a, *b;

	a = get(f->ctx, f->buf + 100, 64, 0);
	b = get(f->ctx, f->buf + 100, 64, 0);
	assert_int_equal(info(a).id, info(b).id);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_MISSES), 1);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_MISS_COLD), 1);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_HITS), 1);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_REGIONS), 1);
	gdrc_mr_put(f->ctx, a);
	gdrc_mr_put(f->ctx, b);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_PUTS), 2);
	/* Lazy unpinning: still cached, still pinned. */
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_REGIONS), 1);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_PINNED_BYTES), PAGE);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_DEREGS), 0);
}

static void test_cache_query_reports_page_rounded_range(void **state)
{
	struct fixture *f = *state;
	struct gdrc_mr *mr = get(f->ctx, f->buf + PAGE + 10, PAGE, 0);
	struct gdrc_mr_info i = info(mr);

	assert_int_equal(i.addr, (uintptr_t)f->buf + PAGE);
	assert_int_equal(i.length, 2 * PAGE);
	assert_int_equal(i.mem_type, GDRC_MEM_HOST);
	assert_int_equal(i.backend, GDRC_BACKEND_NONE);
	assert_int_equal(i.device, -1);
	assert_int_equal(i.lkey, 0);
	assert_int_equal(i.rkey, 0);
	assert_int_equal(gdrc_mr_lkey(mr), 0);
	assert_int_equal(i.flags, GDRC_MR_INFO_CACHED);
	assert_true(i.id > 0);
	gdrc_mr_put(f->ctx, mr);
}

static void test_cache_subrange_of_cached_hits(void **state)
{
	struct fixture *f = *state;
	struct gdrc_mr *big = get(f->ctx, f->buf, 4 * PAGE, 0);
	struct gdrc_mr *small = get(f->ctx, f->buf + PAGE + 7, 100, 0);
	struct gdrc_mr *edge = get(f->ctx, f->buf + 4 * PAGE - 1, 1, 0);

	assert_int_equal(info(big).id, info(small).id);
	assert_int_equal(info(big).id, info(edge).id);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_HITS), 2);
	gdrc_mr_put(f->ctx, big);
	gdrc_mr_put(f->ctx, small);
	gdrc_mr_put(f->ctx, edge);
}

static void test_cache_more_access_misses_and_merges_rights(void **state)
{
	struct fixture *f = *state;
	struct gdrc_mr *rd, *wr, *rd2;
	struct gdrc_mr_info i;

	rd = get(f->ctx, f->buf, PAGE, GDRC_ACCESS_REMOTE_READ);
	wr = get(f->ctx, f->buf, PAGE, GDRC_ACCESS_REMOTE_WRITE);
	assert_int_not_equal(info(rd).id, info(wr).id);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_MISS_ACCESS), 1);
	i = info(wr);
	/* Union of both, and REMOTE_WRITE implies LOCAL_WRITE. */
	assert_int_equal(i.access, GDRC_ACCESS_REMOTE_READ |
					   GDRC_ACCESS_REMOTE_WRITE |
					   GDRC_ACCESS_LOCAL_WRITE);
	/* The weaker one was retired but stays valid for its holder. */
	assert_int_equal(info(rd).flags, GDRC_MR_INFO_INVALIDATED);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_REGIONS), 1);
	rd2 = get(f->ctx, f->buf, PAGE, GDRC_ACCESS_REMOTE_READ);
	assert_int_equal(info(rd2).id, info(wr).id);
	gdrc_mr_put(f->ctx, rd);
	gdrc_mr_put(f->ctx, wr);
	gdrc_mr_put(f->ctx, rd2);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_DEREGS), 1);
}

static void test_cache_overlapping_request_merges_too_small(void **state)
{
	struct fixture *f = *state;
	struct gdrc_mr *a, *b;
	struct gdrc_mr_info i;

	a = get(f->ctx, f->buf + 2 * PAGE, PAGE, 0);
	gdrc_mr_put(f->ctx, a);
	b = get(f->ctx, f->buf + PAGE, 2 * PAGE + 1, 0);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_MISS_TOO_SMALL), 1);
	i = info(b);
	assert_int_equal(i.addr, (uintptr_t)f->buf + PAGE);
	assert_int_equal(i.length, 3 * PAGE);
	/* The old one was subsumed, not left beside it. */
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_REGIONS), 1);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_PINNED_BYTES), 3 * PAGE);
	gdrc_mr_put(f->ctx, b);
}

static void test_cache_adjacent_ranges_stay_separate(void **state)
{
	struct fixture *f = *state;
	struct gdrc_mr *a = get(f->ctx, f->buf, PAGE, 0);
	struct gdrc_mr *b = get(f->ctx, f->buf + PAGE, PAGE, 0);

	assert_int_not_equal(info(a).id, info(b).id);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_MISS_COLD), 2);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_REGIONS), 2);
	gdrc_mr_put(f->ctx, a);
	gdrc_mr_put(f->ctx, b);
}

static void test_cache_explicit_invalidate_gives_new_id(void **state)
{
	struct fixture *f = *state;
	uint64_t id1 = get_id(f->ctx, f->buf, 64);

	assert_int_equal(gdrc_invalidate(f->ctx, f->buf + 10, 1), GDRC_OK);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_INV_EXPLICIT), 1);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_INVALIDATIONS), 1);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_PINNED_BYTES), 0);
	assert_true(get_id(f->ctx, f->buf, 64) > id1);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_MISS_INVALIDATED), 1);
}

static void test_cache_invalidate_elsewhere_keeps_registration(void **state)
{
	struct fixture *f = *state;
	uint64_t id1 = get_id(f->ctx, f->buf, 64);

	assert_int_equal(gdrc_invalidate(f->ctx, f->buf + PAGE, PAGE),
			 GDRC_OK);
	assert_int_equal(get_id(f->ctx, f->buf, 64), id1);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_INVALIDATIONS), 0);
}

static void test_cache_held_invalidated_valid_until_put(void **state)
{
	struct fixture *f = *state;
	struct gdrc_mr *old = get(f->ctx, f->buf, PAGE, 0);
	struct gdrc_mr *fresh;
	struct gdrc_mr_info i;

	assert_int_equal(gdrc_invalidate(f->ctx, f->buf, PAGE), GDRC_OK);
	i = info(old);
	assert_int_equal(i.flags, GDRC_MR_INFO_INVALIDATED);
	assert_int_equal(i.addr, (uintptr_t)f->buf);
	fresh = get(f->ctx, f->buf, PAGE, 0);
	assert_ptr_not_equal(fresh, old);
	assert_true(info(fresh).id > i.id);
	/* Both pinned until the old holder lets go. */
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_PINNED_BYTES), 2 * PAGE);
	gdrc_mr_put(f->ctx, old);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_PINNED_BYTES), PAGE);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_DEREGS), 1);
	gdrc_mr_put(f->ctx, fresh);
}

static void test_cache_uncached_flag_released_at_put(void **state)
{
	struct fixture *f = *state;
	struct gdrc_mr *mr;

	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, PAGE, 0,
				     GDRC_GET_UNCACHED, &mr),
			 GDRC_OK);
	assert_int_equal(info(mr).flags, 0);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_MISS_UNCACHED), 1);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_PINNED_BYTES), PAGE);
	gdrc_mr_put(f->ctx, mr);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_PINNED_BYTES), 0);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_DEREGS), 1);
}

static void test_cache_ids_never_repeat(void **state)
{
	struct fixture *f = *state;
	uint64_t last = 0;

	for (int i = 0; i < 100; i++) {
		uint64_t id = get_id(f->ctx, f->buf + (i % 3) * PAGE, 8);

		assert_true(id > last);
		last = id;
		assert_int_equal(gdrc_invalidate(f->ctx, f->buf,
						 BUF_PAGES * PAGE),
				 GDRC_OK);
	}
}

/* Tests of what the glibc hooks report skip where there are none (a
 * TSan build, which turns them off). */
static void require_hooks(struct gdrc_ctx *ctx)
{
	const char *why = NULL;

	if (gdrc_hooks_status(ctx, &why) != GDRC_OK) {
		print_message("    no memory hooks: %s\n", why);
		skip();
	}
}

static void test_cache_munmap_then_same_va_misses(void **state)
{
	struct fixture *f = *state;
	char *p = map_at(NULL, 4 * PAGE), *q;
	uint64_t id1 = get_id(f->ctx, p + PAGE, 64);

	require_hooks(f->ctx);
	assert_int_equal(munmap(p, 4 * PAGE), 0);
	/* MAP_FIXED_NOREPLACE is not itself an invalidating event. */
	q = map_at(p, 4 * PAGE);
	assert_ptr_equal(q, p);
	assert_true(get_id(f->ctx, q + PAGE, 64) > id1);
	assert_true(ctx_stat(f->ctx, GDRC_STAT_INV_HOST_HOOK) >= 1);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_MISS_INVALIDATED), 1);
	munmap(q, 4 * PAGE);
}

static void test_cache_partial_munmap_invalidates_whole_region(void **state)
{
	struct fixture *f = *state;
	char *p = map_at(NULL, 4 * PAGE);
	uint64_t id1 = get_id(f->ctx, p, 4 * PAGE);

	require_hooks(f->ctx);
	assert_int_equal(munmap(p + 3 * PAGE, PAGE), 0);
	assert_true(get_id(f->ctx, p, PAGE) > id1);
	munmap(p, 3 * PAGE);
}

static void test_cache_munmap_while_held_keeps_holder_valid(void **state)
{
	struct fixture *f = *state;
	char *p = map_at(NULL, 2 * PAGE), *q;
	struct gdrc_mr *old = get(f->ctx, p, PAGE, 0), *fresh;
	uint64_t id1 = info(old).id;

	require_hooks(f->ctx);
	assert_int_equal(munmap(p, 2 * PAGE), 0);
	q = map_at(p, 2 * PAGE);
	fresh = get(f->ctx, q, PAGE, 0);
	assert_ptr_not_equal(fresh, old);
	assert_true(info(fresh).id > id1);
	assert_int_equal(info(old).flags, GDRC_MR_INFO_INVALIDATED);
	assert_int_equal(info(old).id, id1);
	gdrc_mr_put(f->ctx, old);
	gdrc_mr_put(f->ctx, fresh);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_PINNED_BYTES), PAGE);
	munmap(q, 2 * PAGE);
}

static void test_cache_madvise_dontneed_invalidates(void **state)
{
	struct fixture *f = *state;
	uint64_t id1 = get_id(f->ctx, f->buf, 2 * PAGE);

	require_hooks(f->ctx);
	assert_int_equal(madvise(f->buf + PAGE, PAGE, MADV_DONTNEED), 0);
	assert_true(get_id(f->ctx, f->buf, 2 * PAGE) > id1);
}

static void test_cache_madvise_willneed_keeps(void **state)
{
	struct fixture *f = *state;
	uint64_t id1 = get_id(f->ctx, f->buf, 2 * PAGE);

	assert_int_equal(madvise(f->buf, 2 * PAGE, MADV_WILLNEED), 0);
	assert_int_equal(get_id(f->ctx, f->buf, 2 * PAGE), id1);
}

static void test_cache_mremap_shrink_invalidates(void **state)
{
	struct fixture *f = *state;
	char *p = map_at(NULL, 4 * PAGE);
	uint64_t id1 = get_id(f->ctx, p, 4 * PAGE);

	require_hooks(f->ctx);
	assert_ptr_equal(mremap(p, 4 * PAGE, 2 * PAGE, 0), p);
	assert_true(get_id(f->ctx, p, PAGE) > id1);
	munmap(p, 2 * PAGE);
}

static void test_cache_mmap_fixed_over_region_invalidates(void **state)
{
	struct fixture *f = *state;
	uint64_t id1 = get_id(f->ctx, f->buf, PAGE);
	char *p = mmap(f->buf, PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

	require_hooks(f->ctx);
	assert_ptr_equal(p, f->buf);
	assert_true(get_id(f->ctx, f->buf, PAGE) > id1);
}

static void test_cache_brk_shrink_invalidates(void **state)
{
	struct fixture *f = *state;
	char *top = sbrk(0), *p;
	uint64_t id1;

	require_hooks(f->ctx);
	/* Start on a page boundary so the range is ours alone. */
	p = sbrk((intptr_t)(PAGE - ((uintptr_t)top % PAGE)) + 4 * PAGE);
	assert_true(p != (void *)-1);
	p = (char *)(((uintptr_t)p + PAGE - 1) & ~(PAGE - 1));
	id1 = get_id(f->ctx, p, 2 * PAGE);
	assert_true(sbrk(-(intptr_t)(4 * PAGE)) != (void *)-1);
	assert_true(sbrk((intptr_t)(4 * PAGE)) != (void *)-1);
	assert_true(get_id(f->ctx, p, 2 * PAGE) > id1);
	assert_true(brk(top) == 0);
}

/* Under valgrind (its job sets GDRC_TEST_VALGRIND) glibc's allocator is
 * replaced and the address space has fewer segments: tests that need
 * either skip. */
static void skip_under_valgrind(void)
{
	if (getenv("GDRC_TEST_VALGRIND")) {
		print_message("    skipped under valgrind\n");
		skip();
	}
}

static void test_cache_glibc_free_of_large_block_invalidates(void **state)
{
	struct fixture *f = *state;
	const size_t len = 64UL << 20; /* far above the mmap threshold */
	char *p = libc_malloc(len), *q;
	struct gdrc_mr *old;
	uint64_t hook_before = ctx_stat(f->ctx, GDRC_STAT_INV_HOST_HOOK);
	uint64_t id1;

	skip_under_valgrind();
	require_hooks(f->ctx);
	assert_non_null(p);
	old = get(f->ctx, p, 4096, 0);
	id1 = info(old).id;
	gdrc_mr_put(f->ctx, old);
	libc_free(p); /* glibc's internal munmap */
	q = libc_malloc(len);
	assert_non_null(q);
	if (q == p) /* the usual case: same address again */
		assert_true(get_id(f->ctx, q, 4096) > id1);
	else
		assert_int_equal(get_id(f->ctx, f->buf, 8) > 0, 1);
	assert_true(ctx_stat(f->ctx, GDRC_STAT_INV_HOST_HOOK) > hook_before);
	libc_free(q);
}

static void test_cache_malloc_trim_seen_and_heap_still_works(void **state)
{
	struct fixture *f = *state;
	enum { N = 256 };
	char *blocks[N];

	for (int i = 0; i < N; i++) {
		blocks[i] = libc_malloc(8192);
		assert_non_null(blocks[i]);
		memset(blocks[i], i, 8192);
	}
	(void)get_id(f->ctx, blocks[N / 2], 8192);
	for (int i = 0; i < N; i++)
		libc_free(blocks[i]);
	libc_malloc_trim(0);
	/* Whatever glibc gave back, the cache is consistent afterwards
	 * (GDRC_CHECK=1) and the heap usable. */
	for (int i = 0; i < N; i++) {
		blocks[i] = libc_malloc(100);
		assert_non_null(blocks[i]);
	}
	(void)get_id(f->ctx, f->buf, 8);
	for (int i = 0; i < N; i++)
		libc_free(blocks[i]);
}

/*
 * 40,000 mmap/munmap cycles with no cache call in between: the events
 * queue in a fixed number of slots (merging: at least 40,000 - 64 posts
 * widen another range), the library allocates nothing for them (the
 * heap in use stays within a page), and one get applies them all.
 */
static void test_cache_many_unmaps_bounded_then_drained(void **state)
{
	struct fixture *f = *state;
	uint64_t events = ctx_stat(f->ctx, GDRC_STAT_MEM_EVENTS);
	uint64_t merges = ctx_stat(f->ctx, GDRC_STAT_INVQ_MERGES);
	char *keep = map_at(NULL, PAGE);
	uint64_t id_keep = get_id(f->ctx, keep, PAGE);
	size_t heap0, heap1;
	char *p;

	skip_under_valgrind();
	require_hooks(f->ctx);
	/* Distinct, non-adjacent pages of one reservation, so that the
	 * ranges cannot simply coalesce. */
	char *res = mmap(NULL, 2 * 40000 * PAGE, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	assert_true(res != MAP_FAILED);
	heap0 = mallinfo2().uordblks;
	for (int i = 0; i < 40000; i++) {
		p = mmap(res + (size_t)i * 2 * PAGE, PAGE,
			 PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		assert_true(p != MAP_FAILED);
		assert_int_equal(munmap(p, PAGE), 0);
	}
	heap1 = mallinfo2().uordblks;
	munmap(res, 2 * 40000 * PAGE);
	print_message("    heap in use %zu -> %zu bytes; merges %llu\n", heap0,
		      heap1,
		      (unsigned long long)(ctx_stat(f->ctx,
						GDRC_STAT_INVQ_MERGES) -
					   merges));
	assert_true(heap1 <= heap0 + PAGE);
	assert_true(ctx_stat(f->ctx, GDRC_STAT_MEM_EVENTS) >= events + 40000);
	assert_true(ctx_stat(f->ctx, GDRC_STAT_INVQ_MERGES) >=
		    merges + 40000 - 64);
	/* One call drains everything; an untouched range survives unless a
	 * merge widened over it, which only costs a re-registration. */
	assert_true(get_id(f->ctx, keep, PAGE) >= id_keep);
	munmap(keep, PAGE);
}

static void test_cache_two_contexts_both_see_unmap(void **state)
{
	struct fixture *f = *state;
	struct gdrc_ctx *ctx2;
	char *p = map_at(NULL, PAGE), *q;
	uint64_t id1, id2;

	require_hooks(f->ctx);
	assert_int_equal(gdrc_init(NULL, &ctx2), GDRC_OK);
	id1 = get_id(f->ctx, p, PAGE);
	id2 = get_id(ctx2, p, PAGE);
	assert_int_not_equal(id1, id2);
	munmap(p, PAGE);
	q = map_at(p, PAGE);
	assert_true(get_id(f->ctx, q, PAGE) > id2);
	assert_true(get_id(ctx2, q, PAGE) > id2);
	gdrc_fini(ctx2);
	munmap(q, PAGE);
}

static void test_cache_fini_with_held_registration_releases(void **state)
{
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	char buf[64];

	(void)state;
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	assert_int_equal(gdrc_mr_get(ctx, buf, sizeof(buf), 0, 0, &mr),
			 GDRC_OK);
	gdrc_fini(ctx); /* warns; must not leak (ASan/valgrind check) */
}

static void test_cache_stats_dump_has_every_counter(void **state)
{
	struct fixture *f = *state;
	char buf[4096];
	size_t needed = 0;

	(void)get_id(f->ctx, f->buf, 8);
	(void)get_id(f->ctx, f->buf, 8);
	assert_int_equal(gdrc_stats_dump(f->ctx, GDRC_DUMP_JSON, buf,
					 sizeof(buf), &needed),
			 GDRC_OK);
	assert_int_equal(strlen(buf), needed);
	assert_non_null(strstr(buf, "\"hits\": 1"));
	assert_non_null(strstr(buf, "\"misses\": 1"));
	assert_int_equal(gdrc_stats_dump(f->ctx, GDRC_DUMP_TEXT, buf,
					 sizeof(buf), &needed),
			 GDRC_OK);
	assert_non_null(strstr(buf, "miss_cold 1\n"));
	for (int s = 0; s < GDRC_STAT_COUNT; s++)
		assert_non_null(strstr(buf, gdrc_stat_name(s)));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_cache_second_get_hits_same_registration),
		T(test_cache_query_reports_page_rounded_range),
		T(test_cache_subrange_of_cached_hits),
		T(test_cache_more_access_misses_and_merges_rights),
		T(test_cache_overlapping_request_merges_too_small),
		T(test_cache_adjacent_ranges_stay_separate),
		T(test_cache_explicit_invalidate_gives_new_id),
		T(test_cache_invalidate_elsewhere_keeps_registration),
		T(test_cache_held_invalidated_valid_until_put),
		T(test_cache_uncached_flag_released_at_put),
		T(test_cache_ids_never_repeat),
		T(test_cache_munmap_then_same_va_misses),
		T(test_cache_partial_munmap_invalidates_whole_region),
		T(test_cache_munmap_while_held_keeps_holder_valid),
		T(test_cache_madvise_dontneed_invalidates),
		T(test_cache_madvise_willneed_keeps),
		T(test_cache_mremap_shrink_invalidates),
		T(test_cache_mmap_fixed_over_region_invalidates),
		T(test_cache_brk_shrink_invalidates),
		T(test_cache_glibc_free_of_large_block_invalidates),
		T(test_cache_malloc_trim_seen_and_heap_still_works),
		T(test_cache_many_unmaps_bounded_then_drained),
		T(test_cache_two_contexts_both_see_unmap),
		cmocka_unit_test(
			test_cache_fini_with_held_registration_releases),
		T(test_cache_stats_dump_has_every_counter),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
