// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_hooks.c - unit tests for the host memory event source.
 *
 * Each test subscribes a recorder that copies events into a preallocated
 * array (no malloc in hook context), does one memory operation, and
 * checks the exact page-aligned range that came out.  glibc's own malloc,
 * free and malloc_trim are taken from libc.so.6 by version, so that under
 * ASan (whose allocator maps memory with raw system calls) the tests still
 * exercise glibc's internal __munmap, __mremap, __madvise and __sbrk.
 *
 * The overhead test only prints.  Must pass plain and under ASan+UBSan.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "gdrc_int.h"
#include "hooks/hooks.h"
#include "hooks/hooks_int.h"
#include "libc_sym.h"
#include "vm_pages.h"

#define REC_MAX 4096

struct rec_event {
	uintptr_t start;
	uintptr_t end;
};

/* Written in hook context: fixed storage, atomics only. */
struct rec {
	struct rec_event ev[REC_MAX];
	atomic_uint n;
	int clobber_errno;
};

static struct rec rec;
static int rec_slot = -1;
static size_t page;

static void *(*libc_malloc)(size_t);
static void *(*libc_realloc)(void *, size_t);
static void (*libc_free)(void *);
static int (*libc_malloc_trim)(size_t);

/* Hook context. */
GDRC_HOOK_CONTEXT
static void rec_fn(uintptr_t start, uintptr_t end, int source, void *arg)
{
	struct rec *r = arg;
	unsigned int i = atomic_fetch_add(&r->n, 1);

	if (i < REC_MAX) {
		r->ev[i].start = start;
		r->ev[i].end = end;
	}
	if (r->clobber_errno)
		errno = EBADF;
}

static void rec_reset(void)
{
	atomic_store(&rec.n, 0);
}

static unsigned int rec_count(void)
{
	unsigned int n = atomic_load(&rec.n);

	assert_true(n <= REC_MAX);
	return n;
}

static unsigned int rec_exact(const void *start, const void *end)
{
	unsigned int i, n = rec_count(), hits = 0;

	for (i = 0; i < n; i++)
		if (rec.ev[i].start == (uintptr_t)start &&
		    rec.ev[i].end == (uintptr_t)end)
			hits++;
	return hits;
}

static unsigned int rec_overlap(const void *start, const void *end)
{
	unsigned int i, n = rec_count(), hits = 0;

	for (i = 0; i < n; i++)
		if (rec.ev[i].start < (uintptr_t)end &&
		    rec.ev[i].end > (uintptr_t)start)
			hits++;
	return hits;
}

/* Exactly one event touched [start, end), and it was exactly that. */
static void assert_reported_once(const void *start, const void *end)
{
	assert_int_equal(rec_exact(start, end), 1);
	assert_int_equal(rec_overlap(start, end), 1);
}

static void assert_not_reported(const void *start, const void *end)
{
	assert_int_equal(rec_overlap(start, end), 0);
}

static char *map_pages(size_t n)
{
	char *p = mmap(NULL, n * page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	memset(p, 0x5a, n * page);
	return p;
}

static uintptr_t align_down(uintptr_t v)
{
	return v & ~(uintptr_t)(page - 1);
}

static uintptr_t align_up(uintptr_t v)
{
	return (v + page - 1) & ~(uintptr_t)(page - 1);
}

static int group_setup(void **state)
{
	(void)state;
	page = (size_t)sysconf(_SC_PAGESIZE);
	libc_malloc = (void *(*)(size_t))libc_sym("malloc");
	libc_realloc = (void *(*)(void *, size_t))libc_sym("realloc");
	libc_free = (void (*)(void *))libc_sym("free");
	libc_malloc_trim = (int (*)(size_t))libc_sym("malloc_trim");
	if (!libc_malloc || !libc_realloc || !libc_free || !libc_malloc_trim)
		return -1;
	return 0;
}

static int rec_setup(void **state)
{
	(void)state;
	if (gdrc_hooks_install() != GDRC_OK)
		return -1;
	rec.clobber_errno = 0;
	rec_reset();
	rec_slot = gdrc_hooks_subscribe(rec_fn, &rec);
	return rec_slot >= 0 ? 0 : -1;
}

/* test_hooks_window_spans_dispatch's subscriber, or -1. */
static int win_slot = -1;

static int rec_teardown(void **state)
{
	(void)state;
	if (win_slot >= 0)
		gdrc_hooks_unsubscribe(win_slot);
	win_slot = -1;
	if (rec_slot >= 0)
		gdrc_hooks_unsubscribe(rec_slot);
	rec_slot = -1;
	return 0;
}

/* ------------------------------------------------------------------ */

static void test_hooks_install_twice_returns_ok(void **state)
{
	(void)state;
	assert_int_equal(gdrc_hooks_install(), GDRC_OK);
	assert_int_equal(gdrc_hooks_install(), GDRC_OK);
	assert_int_equal(gdrc_hooks_active(), 1);
	assert_null(gdrc_hooks_reason());
	assert_int_equal(gdrc_hooks_intact(), 1);
}

static void test_hooks_munmap_whole_region_reported(void **state)
{
	char *p = map_pages(4);

	(void)state;
	rec_reset();
	assert_int_equal(munmap(p, 4 * page), 0);
	assert_reported_once(p, p + 4 * page);
}

static void test_hooks_munmap_partial_reports_part(void **state)
{
	char *p = map_pages(4);

	(void)state;
	rec_reset();
	assert_int_equal(munmap(p + page, 2 * page), 0);
	assert_reported_once(p + page, p + 3 * page);
	assert_not_reported(p, p + page);
	assert_not_reported(p + 3 * page, p + 4 * page);
	munmap(p, page);
	munmap(p + 3 * page, page);
}

static void test_hooks_munmap_odd_length_reports_whole_pages(void **state)
{
	char *p = map_pages(2);

	(void)state;
	rec_reset();
	assert_int_equal(munmap(p, page + 1), 0);
	assert_reported_once(p, p + 2 * page);
}

static void test_hooks_munmap_unaligned_addr_einval_not_reported(void **state)
{
	char *p = map_pages(2);

	(void)state;
	rec_reset();
	errno = 0;
	assert_int_equal(munmap(p + 1, page), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(rec_count(), 0);
	assert_int_equal(p[0], 0x5a); /* still mapped */
	munmap(p, 2 * page);
}

static void test_hooks_munmap_success_errno_preserved(void **state)
{
	char *p = map_pages(1);

	(void)state;
	rec.clobber_errno = 1;
	rec_reset();
	errno = 1234;
	assert_int_equal(munmap(p, page), 0);
	assert_int_equal(errno, 1234);
	assert_reported_once(p, p + page);
}

static void test_hooks_madvise_dontneed_reported(void **state)
{
	char *p = map_pages(4);

	(void)state;
	rec_reset();
	assert_int_equal(madvise(p + page, 2 * page, MADV_DONTNEED), 0);
	assert_reported_once(p + page, p + 3 * page);
	assert_int_equal(p[page], 0); /* the contents really went */
	munmap(p, 4 * page);
}

static void test_hooks_madvise_free_reported(void **state)
{
	char *p = map_pages(2);

	(void)state;
	rec_reset();
	assert_int_equal(madvise(p, 2 * page, MADV_FREE), 0);
	assert_reported_once(p, p + 2 * page);
	munmap(p, 2 * page);
}

static void test_hooks_madvise_willneed_not_reported(void **state)
{
	char *p = map_pages(2);

	(void)state;
	rec_reset();
	assert_int_equal(madvise(p, 2 * page, MADV_WILLNEED), 0);
	assert_int_equal(rec_count(), 0);
	munmap(p, 2 * page);
}

static void test_hooks_madvise_unaligned_einval_not_reported(void **state)
{
	char *p = map_pages(1);

	(void)state;
	rec_reset();
	errno = 0;
	assert_int_equal(madvise(p + 1, page, MADV_DONTNEED), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(rec_count(), 0);
	munmap(p, page);
}

/*
 * MADV_DONTNEED over a hole: the kernel zaps every mapping in the range,
 * then says ENOMEM for the hole.  The zapped pages must be reported.
 */
static void test_hooks_madvise_over_hole_failed_reported(void **state)
{
	char *p = map_pages(3);

	(void)state;
	assert_int_equal(munmap(p + page, page), 0);
	rec_reset();
	errno = 0;
	assert_int_equal(madvise(p, 3 * page, MADV_DONTNEED), -1);
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(p[0], 0); /* the contents went all the same */
	assert_reported_once(p, p + 3 * page);
	munmap(p, 3 * page);
}

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif
#ifndef MADV_GUARD_REMOVE
#define MADV_GUARD_REMOVE 103
#endif

/* Linux 6.13's guard pages zap what they cover.  Older kernels refuse
 * the advice (EINVAL after the alignment check): reported either way. */
static void test_hooks_madvise_guard_install_reported(void **state)
{
	char *p = map_pages(2);
	int ret;

	(void)state;
	rec_reset();
	ret = madvise(p, page, MADV_GUARD_INSTALL);
	assert_reported_once(p, p + page);
	if (ret == 0) {
		assert_int_equal(madvise(p, page, MADV_GUARD_REMOVE), 0);
		assert_int_equal(p[0], 0);
	} else {
		assert_int_equal(errno, EINVAL);
	}
	assert_int_equal(p[page], 0x5a);
	munmap(p, 2 * page);
}

/* Grow a mapping whose next page is taken: it has to move. */
static void test_hooks_mremap_move_reports_old_range(void **state)
{
	char *p = map_pages(3), *q;

	(void)state;
	/* A different mapping right after the first two pages. */
	assert_true(mmap(p + 2 * page, page, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
		    p + 2 * page);
	rec_reset();
	q = mremap(p, 2 * page, 8 * page, MREMAP_MAYMOVE);
	assert_true(q != MAP_FAILED);
	assert_true(q != p);
	assert_reported_once(p, p + 2 * page);
	assert_not_reported(q, q + 8 * page);
	assert_int_equal(q[0], 0x5a);
	munmap(q, 8 * page);
	munmap(p + 2 * page, page);
}

static void test_hooks_mremap_fixed_reports_old_and_target(void **state)
{
	char *p, *t, *q;

	(void)state;
	if (gdrc_hooks_host_source(NULL) == GDRC_HOOKS_HOST_UCM) {
		/* UCX 1.13's bistro mremap drops the new address (fixed in
		 * 1.15): the call itself fails, nothing to report. */
		print_message("skipped: ucm owns mremap\n");
		skip();
	}
	p = map_pages(2);
	t = map_pages(4);
	rec_reset();
	q = mremap(p, 2 * page, 2 * page, MREMAP_MAYMOVE | MREMAP_FIXED,
		   t + page);
	assert_true(q == t + page);
	assert_reported_once(p, p + 2 * page);
	assert_reported_once(t + page, t + 3 * page);
	assert_int_equal(rec_count(), 2);
	munmap(t, 4 * page);
}

/*
 * mremap(MREMAP_FIXED) unmaps its target first and may fail after that
 * (here: the address-space limit, reached by a DONTUNMAP move).  In a
 * child, which the limit cannot hurt.  Exit codes: 0 reported and gone,
 * 2 the mremap did not fail, 3 the target page survived (this kernel
 * fails before unmapping: nothing to check), 4 not reported.
 */
static int mremap_fixed_fail_child(void)
{
	enum { N = 64 };
	char *old = mmap(NULL, N * page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *tgt = mmap(NULL, N * page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct rlimit rl;
	unsigned char vec;
	long v;

	if (old == MAP_FAILED || tgt == MAP_FAILED)
		return 1;
	memset(old, 1, N * page);
	munmap(tgt + page, (N - 1) * page); /* the target's first page only */
	tgt[0] = 7;
	v = vm_pages();
	if (v < 0 || getrlimit(RLIMIT_AS, &rl))
		return 1;
	rl.rlim_cur = (rlim_t)(v + 8) * page;
	if (setrlimit(RLIMIT_AS, &rl))
		return 1;
	rec_reset();
	if (mremap(old, N * page, N * page,
		   MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
		   tgt) != MAP_FAILED)
		return 2;
	if (!mincore(tgt, page, &vec))
		return 3;
	return rec_exact(tgt, tgt + N * page) == 1 ? 0 : 4;
}

static void test_hooks_mremap_fixed_failed_reports_target(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	if (getenv("GDRC_TEST_VALGRIND")) /* its own address-space rules */
		skip();
	pid = fork();
	assert_true(pid >= 0);
	if (!pid)
		_exit(mremap_fixed_fail_child());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 2 || WEXITSTATUS(status) == 3) {
		print_message("this kernel lost nothing in a failed mremap "
			      "(%d)\n", WEXITSTATUS(status));
		skip();
	}
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_hooks_mremap_shrink_reports_tail(void **state)
{
	char *p = map_pages(4);

	(void)state;
	rec_reset();
	assert_true(mremap(p, 4 * page, page, 0) == p);
	assert_reported_once(p + page, p + 4 * page);
	assert_not_reported(p, p + page);
	munmap(p, page);
}

static void test_hooks_mremap_grow_in_place_not_reported(void **state)
{
	char *p = map_pages(4);

	(void)state;
	assert_int_equal(munmap(p + 2 * page, 2 * page), 0);
	rec_reset();
	assert_true(mremap(p, 2 * page, 4 * page, 0) == p);
	assert_int_equal(rec_count(), 0);
	munmap(p, 4 * page);
}

static void test_hooks_mmap_fixed_over_mapping_reported(void **state)
{
	char *p = map_pages(4), *q;

	(void)state;
	rec_reset();
	q = mmap(p + page, 2 * page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	assert_true(q == p + page);
	assert_reported_once(p + page, p + 3 * page);
	assert_int_equal(q[0], 0); /* fresh pages */
	munmap(p, 4 * page);
}

static void test_hooks_mmap_plain_not_reported(void **state)
{
	char *p;

	(void)state;
	rec_reset();
	p = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(rec_count(), 0);
	munmap(p, 4 * page);
}

/* A failed MAP_FIXED may have unmapped the old range: still reported,
 * and its window closed. */
static void test_hooks_mmap_fixed_failed_reported(void **state)
{
	char *p = map_pages(2);
	void *q;

	(void)state;
	rec_reset();
	/* Not anonymous and no file: the kernel refuses with EBADF. */
	q = mmap(p, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED,
		 -1, 0);
	assert_true(q == MAP_FAILED);
	assert_int_equal(errno, EBADF);
	assert_reported_once(p, p + 2 * page);
	assert_int_equal(gdrc_hooks_idle(), 1);
	munmap(p, 2 * page);
}

static void test_hooks_mmap_fixed_noreplace_not_reported(void **state)
{
	char *p = map_pages(2), *q;

	(void)state;
	assert_int_equal(munmap(p, 2 * page), 0);
	rec_reset();
	q = mmap(p, 2 * page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	assert_true(q == p);
	assert_int_equal(rec_count(), 0);
	munmap(p, 2 * page);
}

static void test_hooks_mmap_bad_offset_einval(void **state)
{
	(void)state;
	rec_reset();
	errno = 0;
	assert_true(mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 1) == MAP_FAILED);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(rec_count(), 0);
}

static void test_hooks_sbrk_shrink_reports_range(void **state)
{
	const intptr_t n = 16 * (intptr_t)page;
	char *old, *grown, *back, *now;

	(void)state;
	old = sbrk(0);
	assert_true(old != (void *)-1);
	rec_reset();
	grown = sbrk(n);
	back = sbrk(-n);
	now = sbrk(0);
	assert_true(grown == old);
	assert_true(back == old + n);
	assert_true(now == old);
	assert_int_equal(rec_exact((void *)align_down((uintptr_t)old),
				   (void *)align_up((uintptr_t)old + n)),
			 1);
	assert_int_equal(rec_count(), 1);
}

static void test_hooks_brk_too_high_enomem_state_kept(void **state)
{
	char *old = sbrk(0);

	(void)state;
	rec_reset();
	errno = 0;
	assert_int_equal(brk((void *)(UINTPTR_MAX & ~(uintptr_t)(page - 1))),
			 -1);
	assert_int_equal(errno, ENOMEM);
	assert_true(sbrk(0) == old);
	assert_int_equal(rec_count(), 0);
}

/* free() of an mmap'ed block goes through glibc's hidden __munmap. */
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

static void test_hooks_glibc_free_large_reports_block(void **state)
{
	const size_t len = 64 << 20;
	char *p = libc_malloc(len);
	uintptr_t lo, hi;

	skip_under_valgrind();
	(void)state;
	assert_non_null(p);
	memset(p, 1, page);
	lo = align_down((uintptr_t)p);
	hi = (uintptr_t)p + len;
	rec_reset();
	libc_free(p);
	assert_int_equal(rec_overlap((void *)lo, (void *)hi), 1);
	assert_int_equal(rec.ev[0].start, lo);
	assert_true(rec.ev[0].end >= align_up(hi));
	assert_true(rec.ev[0].end <= align_up(hi) + page);
}

/* realloc() of an mmap'ed block goes through glibc's hidden __mremap. */
static void test_hooks_glibc_realloc_shrink_reports_tail(void **state)
{
	const size_t len = 64 << 20;
	char *p = libc_malloc(len), *q;

	skip_under_valgrind();
	(void)state;
	assert_non_null(p);
	rec_reset();
	q = libc_realloc(p, len / 2);
	assert_true(q == p);
	assert_int_equal(rec_count(), 1);
	assert_int_equal(rec.ev[0].start, align_up((uintptr_t)p + len / 2));
	assert_int_equal(rec.ev[0].end, align_up((uintptr_t)p + len));
	libc_free(q);
}

static void test_hooks_glibc_realloc_grow_reports_old_if_moved(void **state)
{
	const size_t len = 32 << 20;
	char *p = libc_malloc(len), *q;

	skip_under_valgrind();
	(void)state;
	assert_non_null(p);
	rec_reset();
	q = libc_realloc(p, 4 * len);
	assert_non_null(q);
	if (q == p) {
		assert_int_equal(rec_count(), 0);
	} else {
		assert_int_equal(rec_count(), 1);
		assert_int_equal(rec.ev[0].start, align_down((uintptr_t)p));
		assert_int_equal(rec.ev[0].end, align_up((uintptr_t)p + len));
	}
	print_message("realloc grow %s\n", q == p ? "in place" : "moved");
	libc_free(q);
}

static void test_hooks_glibc_malloc_trim_keeps_malloc_working(void **state)
{
	enum { N = 20000 };
	static void *blocks[N];
	unsigned int seen;
	size_t i;
	char *p;

	(void)state;
	for (i = 0; i < N; i++) {
		blocks[i] = libc_malloc(512);
		assert_non_null(blocks[i]);
		memset(blocks[i], 2, 512);
	}
	/* Keep every 64th block so the holes cannot merge into top. */
	for (i = 0; i < N; i++)
		if (i % 64)
			libc_free(blocks[i]);
	rec_reset();
	libc_malloc_trim(0);
	seen = rec_count();
	print_message("malloc_trim after %d frees: %u events reported\n",
		      N - N / 64, seen);
	for (i = 0; i < N; i += 64)
		libc_free(blocks[i]);
	rec_reset();
	libc_malloc_trim(0);
	print_message("malloc_trim after freeing the rest: %u events\n",
		      rec_count());
	p = libc_malloc(1 << 20);
	assert_non_null(p);
	memset(p, 3, 1 << 20);
	libc_free(p);
}

static void test_hooks_unsubscribe_stops_delivery(void **state)
{
	char *p = map_pages(1), *q = map_pages(1);
	uint64_t before;

	(void)state;
	rec_reset();
	assert_int_equal(munmap(p, page), 0);
	assert_reported_once(p, p + page);
	gdrc_hooks_unsubscribe(rec_slot);
	rec_slot = -1;
	rec_reset();
	before = gdrc_hooks_event_count();
	assert_int_equal(munmap(q, page), 0);
	assert_int_equal(rec_count(), 0);
	assert_true(gdrc_hooks_event_count() > before);
}

GDRC_HOOK_CONTEXT
static void dummy_fn(uintptr_t start, uintptr_t end, int source, void *arg)
{
	(void)start;
	(void)end;
	(void)arg;
}

static void test_hooks_subscribe_over_limit_returns_limit(void **state)
{
	int slots[GDRC_HOOKS_MAX_SUBSCRIBERS];
	int i, n = 0, rc;

	(void)state;
	/* rec holds one slot already. */
	for (;;) {
		rc = gdrc_hooks_subscribe(dummy_fn, NULL);
		if (rc < 0)
			break;
		assert_true(n < GDRC_HOOKS_MAX_SUBSCRIBERS);
		slots[n++] = rc;
	}
	assert_int_equal(rc, GDRC_ERR_LIMIT);
	assert_int_equal(n, GDRC_HOOKS_MAX_SUBSCRIBERS - 1);
	for (i = 0; i < n; i++)
		gdrc_hooks_unsubscribe(slots[i]);
	/* Freed slots are usable again. */
	rc = gdrc_hooks_subscribe(dummy_fn, NULL);
	assert_true(rc >= 0);
	gdrc_hooks_unsubscribe(rc);
	assert_int_equal(gdrc_hooks_subscribe(NULL, NULL),
			 GDRC_ERR_INVALID_PARAM);
}

/* ------------------------------------------------------------------ */

/*
 * The window (hooks.h, gdrc_hooks_busy): from before an unmap's system
 * call until its subscribers returned, gdrc_hooks_idle() is 0 and
 * gdrc_hooks_wait_idle() waits.  A subscriber stalls on one page's event
 * until the test lets it go.
 */
struct win {
	uintptr_t page;         /* the event to stall on */
	atomic_int entered;     /* the subscriber is stalling */
	atomic_int idle_inside; /* gdrc_hooks_idle() seen while stalling */
	atomic_int release;
	atomic_int waited;      /* gdrc_hooks_wait_idle() returned */
};

GDRC_HOOK_CONTEXT
static void win_fn(uintptr_t start, uintptr_t end, int source, void *arg)
{
	struct win *w = arg;
	struct timespec t0, t;

	if (source == GDRC_HOOKS_SRC_CUDA || start != w->page ||
	    end != w->page + page)
		return;
	atomic_store(&w->idle_inside, gdrc_hooks_idle());
	atomic_store(&w->entered, 1);
	/* Bounded, so a broken wait cannot hang the test. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		sched_yield();
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (!atomic_load(&w->release) && t.tv_sec - t0.tv_sec < 10);
}

static void *win_unmap_main(void *arg)
{
	struct win *w = arg;

	return (void *)(intptr_t)munmap((void *)w->page, page);
}

static void *win_wait_main(void *arg)
{
	struct win *w = arg;

	gdrc_hooks_wait_idle();
	atomic_store(&w->waited, 1);
	return NULL;
}

/* Map w's page, subscribe win_fn and unmap the page in *unmapper, which
 * stalls inside its window until w->release.  @return the slot. */
static int win_stall(struct win *w, pthread_t *unmapper)
{
	int slot;

	memset(w, 0, sizeof(*w));
	w->page = (uintptr_t)map_pages(1);
	slot = gdrc_hooks_subscribe(win_fn, w);
	assert_true(slot >= 0);
	assert_int_equal(pthread_create(unmapper, NULL, win_unmap_main, w), 0);
	while (!atomic_load(&w->entered))
		sched_yield();
	return slot;
}

static void test_hooks_window_spans_dispatch(void **state)
{
	/* Static: a failed check leaves the stalled subscriber using it. */
	static struct win w;
	pthread_t unmapper, waiter;
	struct timespec nap = { 0, 50 * 1000 * 1000 };
	void *ret;

	(void)state;
	assert_int_equal(gdrc_hooks_idle(), 1);
	win_slot = win_stall(&w, &unmapper);
	/* The page is unmapped already, its event not yet delivered. */
	assert_int_equal(atomic_load(&w.idle_inside), 0);
	assert_int_equal(gdrc_hooks_idle(), 0);
	assert_int_equal(pthread_create(&waiter, NULL, win_wait_main, &w), 0);
	nanosleep(&nap, NULL);
	assert_int_equal(atomic_load(&w.waited), 0);
	atomic_store(&w.release, 1);
	assert_int_equal(pthread_join(unmapper, &ret), 0);
	assert_int_equal((intptr_t)ret, 0);
	assert_int_equal(pthread_join(waiter, NULL), 0);
	assert_int_equal(atomic_load(&w.waited), 1);
	assert_int_equal(gdrc_hooks_idle(), 1);
}

/* Unsubscribes the stalled slot: waits, holding the subscribe lock. */
static void *win_unsub_main(void *arg)
{
	gdrc_hooks_unsubscribe(*(int *)arg);
	return NULL;
}

/* Hook context. */
GDRC_HOOK_CONTEXT
static void fork_fn(uintptr_t start, uintptr_t end, int source, void *arg)
{
	(void)start;
	(void)end;
	(void)source;
	atomic_fetch_add((atomic_int *)arg, 1);
}

/* The fork child's checks; alarm() turns a hang into a failure. */
static int fork_child_checks(void)
{
	static atomic_int events;
	char *p;
	int slot;

	alarm(10);
	if (!gdrc_hooks_idle())
		return 2;
	gdrc_hooks_wait_idle();
	slot = gdrc_hooks_subscribe(fork_fn, &events);
	if (slot < 0)
		return 3;
	p = mmap(NULL, page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || munmap(p, page) || atomic_load(&events) != 1)
		return 4;
	gdrc_hooks_unsubscribe(slot);
	return gdrc_hooks_idle() ? 0 : 5;
}

/*
 * fork() while another thread is inside an unmap's window (its
 * subscriber stalls) and a third waits in unsubscribe, holding the
 * subscribe lock: the child has neither thread, so it must start idle,
 * with the lock free and no dispatch counted.
 */
static void test_hooks_fork_child_starts_idle(void **state)
{
	static struct win w; /* static: see window_spans_dispatch */
	static int slot;
	pthread_t unmapper, unsub;
	struct timespec nap = { 0, 50 * 1000 * 1000 };
	int status;
	void *ret;
	pid_t pid;

	(void)state;
	slot = win_stall(&w, &unmapper);
	assert_int_equal(pthread_create(&unsub, NULL, win_unsub_main, &slot),
			 0);
	nanosleep(&nap, NULL); /* into unsubscribe's wait */
	assert_int_equal(gdrc_hooks_idle(), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid)
		_exit(fork_child_checks());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	atomic_store(&w.release, 1);
	assert_int_equal(pthread_join(unmapper, &ret), 0);
	assert_int_equal((intptr_t)ret, 0);
	assert_int_equal(pthread_join(unsub, NULL), 0);
	assert_int_equal(gdrc_hooks_idle(), 1);
	assert_true(WIFEXITED(status)); /* not killed by its alarm */
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* A failed unmap opens and closes the window too. */
static void test_hooks_window_closed_after_failed_unmap(void **state)
{
	(void)state;
	assert_int_equal(munmap((void *)(uintptr_t)1, page), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(gdrc_hooks_idle(), 1);
}

/* ------------------------------------------------------------------ */

enum { MT_WORKERS = 4, MT_LOOPS = 10000 };

struct mt {
	atomic_int stop;
	atomic_int toggle_on;       /* 1 around subscribe..unsubscribe */
	atomic_ulong perm_events;
	atomic_ulong toggle_events;
	atomic_ulong late_events;   /* delivered after unsubscribe returned */
	atomic_ulong toggles;
	atomic_ulong worker_fails;
};

/* Hook context. */
GDRC_HOOK_CONTEXT
static void mt_perm_fn(uintptr_t start, uintptr_t end, int source,
		       void *arg)
{
	struct mt *mt = arg;

	(void)start;
	(void)end;
	atomic_fetch_add(&mt->perm_events, 1);
}

/* Hook context. */
GDRC_HOOK_CONTEXT
static void mt_toggle_fn(uintptr_t start, uintptr_t end, int source,
			 void *arg)
{
	struct mt *mt = arg;

	(void)start;
	(void)end;
	if (!atomic_load(&mt->toggle_on))
		atomic_fetch_add(&mt->late_events, 1);
	atomic_fetch_add(&mt->toggle_events, 1);
}

static void *mt_worker(void *arg)
{
	struct mt *mt = arg;
	int i;

	for (i = 0; i < MT_LOOPS; i++) {
		char *p = mmap(NULL, page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			atomic_fetch_add(&mt->worker_fails, 1);
			continue;
		}
		p[0] = 1;
		if (munmap(p, page))
			atomic_fetch_add(&mt->worker_fails, 1);
	}
	return NULL;
}

static void *mt_toggler(void *arg)
{
	struct mt *mt = arg;
	int slot;

	while (!atomic_load(&mt->stop)) {
		atomic_store(&mt->toggle_on, 1);
		slot = gdrc_hooks_subscribe(mt_toggle_fn, mt);
		if (slot < 0) {
			atomic_store(&mt->toggle_on, 0);
			continue;
		}
		sched_yield();
		gdrc_hooks_unsubscribe(slot);
		atomic_store(&mt->toggle_on, 0);
		atomic_fetch_add(&mt->toggles, 1);
	}
	return NULL;
}

static void test_hooks_threads_concurrent_subscribe_consistent(void **state)
{
	static struct mt mt;
	pthread_t workers[MT_WORKERS], toggler;
	uint64_t before, delta;
	int perm, i;

	(void)state;
	memset(&mt, 0, sizeof(mt));
	perm = gdrc_hooks_subscribe(mt_perm_fn, &mt);
	assert_true(perm >= 0);
	before = gdrc_hooks_event_count();
	assert_int_equal(pthread_create(&toggler, NULL, mt_toggler, &mt), 0);
	for (i = 0; i < MT_WORKERS; i++)
		assert_int_equal(pthread_create(&workers[i], NULL, mt_worker,
						&mt),
				 0);
	for (i = 0; i < MT_WORKERS; i++)
		pthread_join(workers[i], NULL);
	atomic_store(&mt.stop, 1);
	pthread_join(toggler, NULL);
	delta = gdrc_hooks_event_count() - before;
	gdrc_hooks_unsubscribe(perm);

	print_message("threads: %llu events, %lu subscribe/unsubscribe cycles, %lu delivered to the toggled subscriber\n",
		      (unsigned long long)delta, atomic_load(&mt.toggles),
		      atomic_load(&mt.toggle_events));
	assert_int_equal(atomic_load(&mt.worker_fails), 0);
	assert_true(delta >= (uint64_t)MT_WORKERS * MT_LOOPS);
	assert_int_equal(atomic_load(&mt.perm_events), delta);
	assert_true(atomic_load(&mt.toggle_events) <= delta);
	assert_int_equal(atomic_load(&mt.late_events), 0);
	assert_true(atomic_load(&mt.toggles) > 0);
}

/* ------------------------------------------------------------------ */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

enum { BENCH_PAIRS = 200000, BENCH_ROUNDS = 5 };

static double bench_raw(void)
{
	uint64_t t0 = now_ns();
	int i;

	for (i = 0; i < BENCH_PAIRS; i++) {
		long p = syscall(SYS_mmap, NULL, page, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		assert_true(p != -1);
		syscall(SYS_munmap, p, page);
	}
	return (double)(now_ns() - t0) / BENCH_PAIRS;
}

static double bench_libc(void)
{
	uint64_t t0 = now_ns();
	int i;

	for (i = 0; i < BENCH_PAIRS; i++) {
		void *p = mmap(NULL, page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		assert_true(p != MAP_FAILED);
		munmap(p, page);
	}
	return (double)(now_ns() - t0) / BENCH_PAIRS;
}

static double bench_min(double (*fn)(void))
{
	double best = 1e30, t;
	int r;

	for (r = 0; r < BENCH_ROUNDS; r++) {
		t = fn();
		if (t < best)
			best = t;
	}
	return best;
}

enum { BENCH_REPORTS = 10000000 };

/* Dispatch alone (no system call): a fake range nobody maps. */
static double bench_report(void)
{
	uint64_t t0 = now_ns();
	int i;

	for (i = 0; i < BENCH_REPORTS; i++)
		gdrc_hooks_report((uintptr_t)4 << 40, page);
	return (double)(now_ns() - t0) / BENCH_REPORTS;
}

/* Prints only: timings are not asserted. */
static void test_hooks_overhead_print_only(void **state)
{
	double raw, none, one, rep0, rep1;
	int slot;

	(void)state;
	assert_int_equal(gdrc_hooks_install(), GDRC_OK);
	raw = bench_min(bench_raw);
	none = bench_min(bench_libc);
	rep0 = bench_min(bench_report);
	slot = gdrc_hooks_subscribe(dummy_fn, NULL);
	assert_true(slot >= 0);
	one = bench_min(bench_libc);
	rep1 = bench_min(bench_report);
	gdrc_hooks_unsubscribe(slot);
	print_message("mmap+munmap of one page, best of %d x %d pairs:\n",
		      BENCH_ROUNDS, BENCH_PAIRS);
	print_message("  raw syscall(2):            %7.1f ns/pair\n", raw);
	print_message("  hooked, no subscriber:     %7.1f ns/pair (%+.1f)\n",
		      none, none - raw);
	print_message("  hooked, one subscriber:    %7.1f ns/pair (%+.1f)\n",
		      one, one - raw);
	print_message("  dispatch only, no subscriber:  %5.1f ns/event\n", rep0);
	print_message("  dispatch only, one subscriber: %5.1f ns/event\n", rep1);
#if defined(__SANITIZE_ADDRESS__)
	print_message("  (asan build: includes asan's mmap/munmap interceptors)\n");
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hooks_install_twice_returns_ok),
#define T(fn) cmocka_unit_test_setup_teardown(fn, rec_setup, rec_teardown)
		T(test_hooks_munmap_whole_region_reported),
		T(test_hooks_munmap_partial_reports_part),
		T(test_hooks_munmap_odd_length_reports_whole_pages),
		T(test_hooks_munmap_unaligned_addr_einval_not_reported),
		T(test_hooks_munmap_success_errno_preserved),
		T(test_hooks_madvise_dontneed_reported),
		T(test_hooks_madvise_free_reported),
		T(test_hooks_madvise_willneed_not_reported),
		T(test_hooks_madvise_unaligned_einval_not_reported),
		T(test_hooks_madvise_over_hole_failed_reported),
		T(test_hooks_madvise_guard_install_reported),
		T(test_hooks_mremap_move_reports_old_range),
		T(test_hooks_mremap_fixed_reports_old_and_target),
		T(test_hooks_mremap_fixed_failed_reports_target),
		T(test_hooks_mremap_shrink_reports_tail),
		T(test_hooks_mremap_grow_in_place_not_reported),
		T(test_hooks_mmap_fixed_over_mapping_reported),
		T(test_hooks_mmap_plain_not_reported),
		T(test_hooks_mmap_fixed_failed_reported),
		T(test_hooks_mmap_fixed_noreplace_not_reported),
		T(test_hooks_mmap_bad_offset_einval),
		T(test_hooks_sbrk_shrink_reports_range),
		T(test_hooks_brk_too_high_enomem_state_kept),
		T(test_hooks_glibc_free_large_reports_block),
		T(test_hooks_glibc_realloc_shrink_reports_tail),
		T(test_hooks_glibc_realloc_grow_reports_old_if_moved),
		T(test_hooks_glibc_malloc_trim_keeps_malloc_working),
		T(test_hooks_unsubscribe_stops_delivery),
		T(test_hooks_window_spans_dispatch),
		T(test_hooks_window_closed_after_failed_unmap),
		T(test_hooks_fork_child_starts_idle),
		T(test_hooks_subscribe_over_limit_returns_limit),
#undef T
		cmocka_unit_test(
			test_hooks_threads_concurrent_subscribe_consistent),
		cmocka_unit_test(test_hooks_overhead_print_only),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
