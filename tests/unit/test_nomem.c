// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_nomem.c - every allocation of the library failing in turn.
 *
 * posix_memalign, calloc and malloc are wrapped at link time
 * (-Wl,--wrap): the wrappers count the library's calls, fail the Nth
 * one, and track what was handed out until it is freed.  For N = 1, 2,
 * ... a fixed workload (gdrc_init; gets of 100 pages, which need several
 * slab chunks of regions and handles; a GPU get on the fake driver,
 * whose first SYNC_MEMOPS is remembered in a hash table; invalidate;
 * fini) runs with the Nth allocation failing, until a run makes fewer
 * than N allocations.  Each call must answer GDRC_OK or
 * GDRC_ERR_NO_MEMORY (never anything else, never a crash), a failed get
 * must leave *mr_p alone and the cache as it was (GDRC_CHECK=1 checks
 * the tree and accounting after every change), and after gdrc_fini
 * every allocation made must have been freed.  What a process keeps for
 * good (installed hooks, the loaded driver, the SYNC_MEMOPS memo, whose
 * failure only means setting the attribute again) is set up by an
 * unarmed first run.
 *
 * Also: the page hash's larger table never to be had (every malloc and
 * calloc of 16 KiB or more failing: a table under 2 MiB is one of
 * those, the first one 8 KiB): gets go on answering GDRC_OK,
 * registered uncached once the table is full.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include <gdrcache.h>

#include "fake_cuda.h"
#include "fake_cuda_test.h"

#define PAGE 4096UL
#define PAGES 100
#define LIVE_MAX 4096

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
int __real_posix_memalign(void **p, size_t align, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
void __wrap_free(void *p);

static struct {
	int armed;          /* counting and failing */
	size_t fail_from;   /* malloc, calloc and posix_memalign of
			     * this many bytes or more fail (0: none) */
	unsigned calls;     /* allocation calls while armed */
	unsigned fail_at;   /* 1-based; 0: never */
	int failed;         /* the failure was injected */
	void *live[LIVE_MAX];
	unsigned nlive;
} inj;

static int inject(void)
{
	if (!inj.armed)
		return 0;
	if (++inj.calls == inj.fail_at) {
		inj.failed = 1;
		return 1;
	}
	return 0;
}

static void track(void *p)
{
	if (p && inj.armed) {
		assert_true(inj.nlive < LIVE_MAX);
		inj.live[inj.nlive++] = p;
	}
}

void *__wrap_malloc(size_t n)
{
	void *p;

	if ((inj.fail_from && n >= inj.fail_from) || inject()) {
		errno = ENOMEM;
		return NULL;
	}
	p = __real_malloc(n);
	track(p);
	return p;
}

void *__wrap_calloc(size_t n, size_t m)
{
	void *p;

	if ((inj.fail_from && m && n >= inj.fail_from / m) || inject()) {
		errno = ENOMEM;
		return NULL;
	}
	p = __real_calloc(n, m);
	track(p);
	return p;
}

int __wrap_posix_memalign(void **pp, size_t align, size_t n)
{
	int r;

	if ((inj.fail_from && n >= inj.fail_from) || inject())
		return ENOMEM;
	r = __real_posix_memalign(pp, align, n);
	if (!r)
		track(*pp);
	return r;
}

void __wrap_free(void *p)
{
	for (unsigned i = 0; i < inj.nlive; i++)
		if (inj.live[i] == p) {
			inj.live[i] = inj.live[--inj.nlive];
			break;
		}
	__real_free(p);
}

static char *buf;
static CUdeviceptr gpu;

static void expect_ok_or_nomem(gdrc_status_t st, const char *what)
{
	if (st != GDRC_OK && st != GDRC_ERR_NO_MEMORY)
		fail_msg("%s: status %d with allocation %u failing", what, st,
			 inj.fail_at);
}

/* One run of the workload with allocation fail_at failing. */
static void workload(unsigned fail_at)
{
	struct gdrc_ctx *ctx = (struct gdrc_ctx *)0x1;
	gdrc_status_t st;

	memset(&inj, 0, sizeof(inj));
	inj.fail_at = fail_at;
	inj.armed = 1;
	st = gdrc_init(NULL, &ctx);
	expect_ok_or_nomem(st, "gdrc_init");
	if (st) {
		assert_ptr_equal(ctx, (struct gdrc_ctx *)0x1);
		goto out;
	}
	for (unsigned i = 0; i < PAGES; i++) {
		struct gdrc_mr *mr = (struct gdrc_mr *)0x1;
		uint64_t regions = stat_of(ctx, GDRC_STAT_REGIONS);

		st = gdrc_mr_get(ctx, buf + i * PAGE, 64, 0, 0, &mr);
		expect_ok_or_nomem(st, "gdrc_mr_get");
		if (st) {
			assert_ptr_equal(mr, (struct gdrc_mr *)0x1);
			assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS),
					 regions);
			continue;
		}
		gdrc_mr_put(ctx, mr);
	}
	{
		struct gdrc_mr *mr = (struct gdrc_mr *)0x1;

		st = gdrc_mr_get(ctx, (void *)(uintptr_t)gpu, 64, 0, 0, &mr);
		expect_ok_or_nomem(st, "gdrc_mr_get (gpu)");
		if (!st)
			gdrc_mr_put(ctx, mr);
		else
			assert_ptr_equal(mr, (struct gdrc_mr *)0x1);
	}
	expect_ok_or_nomem(gdrc_invalidate(ctx, buf, PAGES * PAGE),
			   "gdrc_invalidate");
	gdrc_fini(ctx);
out:
	inj.armed = 0;
	if (inj.nlive)
		fail_msg("allocation %u failing: %u block(s) never freed",
			 fail_at, inj.nlive);
}

static void test_nomem_every_allocation_fails_in_turn(void **state)
{
	unsigned n;

	(void)state;
	workload(0);
	print_message("    the workload makes %u allocation(s)\n", inj.calls);
	assert_true(inj.calls >= 4);
	for (n = 1;; n++) {
		workload(n);
		if (!inj.failed)
			break;
	}
	print_message("    each of the %u failed in turn: statuses OK or "
		      "GDRC_ERR_NO_MEMORY, nothing leaked\n", n - 1);
	assert_true(n > 4);
}

/*
 * 1,200 one-page gets with no larger page hash to be had: the first (128
 * buckets of six entries, 768) fills to its last sixteenth; every get is still GDRC_OK,
 * those past the room registered uncached (counted, not cached, a miss
 * again next time); once allocations work the table grows and the next
 * page is cached.  GDRC_CHECK checks the index after every change.
 */
static void test_nomem_hash_full_serves_uncached(void **state)
{
	enum { N = 1200 };
	char *pages = mmap(NULL, (N + 1) * PAGE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	uint64_t regions, uncached, misses;

	(void)state;
	assert_true(pages != MAP_FAILED);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	inj.fail_from = 16384;
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(gdrc_mr_get(ctx, pages + i * PAGE, 64, 0, 0,
					     &mr),
				 GDRC_OK);
		gdrc_mr_put(ctx, mr);
	}
	regions = stat_of(ctx, GDRC_STAT_REGIONS);
	uncached = stat_of(ctx, GDRC_STAT_MISS_UNCACHED);
	print_message("    %llu cached, %llu uncached\n",
		      (unsigned long long)regions,
		      (unsigned long long)uncached);
	assert_true(regions >= 576 && regions < 768); /* past 3/4, < full */
	assert_int_equal(regions + uncached, N);
	/* The last page got is not cached: a miss again. */
	misses = stat_of(ctx, GDRC_STAT_MISSES);
	assert_int_equal(gdrc_mr_get(ctx, pages + (N - 1) * PAGE, 64, 0, 0,
				     &mr),
			 GDRC_OK);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), misses + 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), regions);
	/* Allocations back: the table grows, the next page is cached. */
	inj.fail_from = 0;
	assert_int_equal(gdrc_mr_get(ctx, pages + N * PAGE, 64, 0, 0, &mr),
			 GDRC_OK);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), regions + 1);
	gdrc_fini(ctx);
	munmap(pages, (N + 1) * PAGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nomem_every_allocation_fails_in_turn),
		cmocka_unit_test(test_nomem_hash_full_serves_uncached),
	};
	int rc;

	setenv("GDRC_CHECK", "1", 1);
	setenv("GDRC_KMOD", "off", 1);
	setenv("GDRC_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
	setenv("GDRC_LOG_LEVEL", "error", 1);
	buf = mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return 1;
	fake_cuda_reset(1);
	if (cuInit(0) != CUDA_SUCCESS)
		return 1;
	gpu = fake_cuda_alloc(FAKE_DEVICE, 1 << 20, 0);
	/* Unarmed first: what a process keeps for good (the hooks, the
	 * driver, the SYNC_MEMOPS memo of this allocation) is set up here. */
	{
		struct gdrc_ctx *ctx;
		struct gdrc_mr *mr;

		if (gdrc_init(NULL, &ctx) ||
		    gdrc_mr_get(ctx, (void *)(uintptr_t)gpu, 64, 0, 0, &mr))
			return 1;
		gdrc_mr_put(ctx, mr);
		gdrc_fini(ctx);
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	munmap(buf, PAGES * PAGE);
	return rc;
}
