// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_sources.c - gdrc_source_status: every event source says whether
 * it serves this context, always with a reason, and counts what it told
 * the cache.  ctest runs it once per host source: GDRC_TEST_HOST_SOURCE
 * names the one that must serve ("glibc", "uffd", "ucm" with libucs
 * preloaded, or "none" with GDRC_MEM_HOOKS=none); every other host
 * source must not.  Then an unmap of a cached page must count in the
 * serving source's events and in no other's.  No GPU: both GPU sources
 * are off, with the driver's reason.  Then which kinds of host memory
 * are cached (gdrc_host_mem_status, and what gets do), and the mapping
 * classifier behind it (lib/vma, reached through the static archive).
 * Public API, none backend.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include <gdrcache.h>

#include "vma/vma.h"

#define NSOURCES (GDRC_SOURCE_BUFFER_ID + 1)

static struct gdrc_ctx *ctx;
static int serving = -1; /* the host source expected, or -1 (none) */

static const char *const host_names[] = { "kmod", "ucm", "glibc", "uffd" };

static void test_sources_names(void **state)
{
	(void)state;
	for (int s = 0; s < NSOURCES; s++)
		assert_string_not_equal(gdrc_source_name((enum gdrc_source)s),
					"unknown");
	assert_string_equal(gdrc_source_name(GDRC_SOURCE_UFFD), "uffd");
	assert_string_equal(gdrc_source_name((enum gdrc_source)NSOURCES),
			    "unknown");
	assert_string_equal(gdrc_source_name((enum gdrc_source)-1),
			    "unknown");
}

/* Bad input: the status, and nothing written. */
static void test_sources_bad_input(void **state)
{
	const char *why = "untouched";
	uint64_t ev = 42;

	(void)state;
	assert_int_equal(gdrc_source_status(ctx, (enum gdrc_source)NSOURCES,
					    &why, &ev),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_source_status(ctx, (enum gdrc_source)-1, &why,
					    &ev),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_source_status(NULL, GDRC_SOURCE_GLIBC, &why,
					    &ev),
			 GDRC_ERR_INVALID_PARAM);
	assert_string_equal(why, "untouched");
	assert_int_equal(ev, 42);
	/* Both outputs may be NULL. */
	assert_int_not_equal(gdrc_source_status(ctx, GDRC_SOURCE_GLIBC, NULL,
						NULL),
			     GDRC_ERR_INVALID_PARAM);
}

/*
 * What a GPU source should answer here: none serves without a GPU; with
 * one, every GPU hit is tag checked (BUFFER_ID, GDRC_VALIDATE's default),
 * and the CUDA free hooks serve as gdrc_cuda_hooks_status says, where
 * GDRC_MEM_HOOKS lets them in (auto) at all.
 */
static gdrc_status_t gpu_source_want(int s)
{
	const char *hooks = getenv("GDRC_MEM_HOOKS");

	if (gdrc_gpu_status(ctx, NULL) != GDRC_OK)
		return GDRC_ERR_UNSUPPORTED;
	if (s == GDRC_SOURCE_BUFFER_ID)
		return GDRC_OK;
	if (hooks && strcmp(hooks, "auto"))
		return GDRC_ERR_UNSUPPORTED;
	return gdrc_cuda_hooks_status(ctx, NULL);
}

/* The expected host source serves, no other does, each says why. */
static void test_sources_one_host_source(void **state)
{
	(void)state;
	for (int s = 0; s < NSOURCES; s++) {
		const char *why = NULL;
		gdrc_status_t st = gdrc_source_status(ctx, (enum gdrc_source)s,
						      &why, NULL);
		int want = s == serving ? GDRC_OK : GDRC_ERR_UNSUPPORTED;

		if (s >= GDRC_SOURCE_CUDA_HOOKS)
			want = gpu_source_want(s);
		print_message("source %-10s %s: %s\n",
			      gdrc_source_name((enum gdrc_source)s),
			      st == GDRC_OK ? "yes" : "no", why ? why : "-");
		assert_int_equal(st, want);
		assert_non_null(why);
		assert_true(why[0] != '\0');
	}
}

/* A cached page unmapped: the serving source counts it, no other. */
static void test_sources_events_counted(void **state)
{
	uint64_t before[NSOURCES], after[NSOURCES];
	struct gdrc_mr *mr;
	char *p;

	(void)state;
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(gdrc_mr_get(ctx, p, 4096, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	for (int s = 0; s < NSOURCES; s++)
		gdrc_source_status(ctx, (enum gdrc_source)s, NULL,
				   &before[s]);
	munmap(p, 4096);
	/* A get applies what the sources posted. */
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(gdrc_mr_get(ctx, p, 4096, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	for (int s = 0; s < NSOURCES; s++) {
		gdrc_source_status(ctx, (enum gdrc_source)s, NULL, &after[s]);
		if (s == serving)
			assert_true(after[s] > before[s]);
		else
			assert_int_equal(after[s], before[s]);
	}
	gdrc_invalidate(ctx, p, 4096);
	munmap(p, 4096);
}

/* ====================================================================
 * Kinds of host memory: what is cached under the source in force
 * ==================================================================== */

#define PAGE 4096ul

/* A memfd of len bytes. */
static int memfd_sized(const char *name, size_t len)
{
	int fd = memfd_create(name, 0);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)len), 0);
	return fd;
}

/* [p, p + len) got, put and got again: was the second get a hit? */
static int second_get_hits(void *p, size_t len)
{
	struct gdrc_mr *mr;
	uint64_t hits0, hits1;

	assert_int_equal(gdrc_mr_get(ctx, p, len, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_HITS, &hits0), GDRC_OK);
	assert_int_equal(gdrc_mr_get(ctx, p, len, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_HITS, &hits1), GDRC_OK);
	return hits1 == hits0 + 1;
}

static uint64_t unseen(void)
{
	uint64_t v;

	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_UNCACHED_SHARED, &v),
			 GDRC_OK);
	return v;
}

/* Private memory is cached under every host source, shared memory under
 * none of these (only gdrcache.ko sees a file's hole punch); each says
 * why; bad input gets its status. */
static void test_sources_host_mem_status(void **state)
{
	const char *why = NULL;

	(void)state;
	assert_int_equal(gdrc_host_mem_status(ctx, GDRC_HOST_MEM_PRIVATE,
					      &why),
			 GDRC_OK);
	assert_non_null(why);
	print_message("private: %s\n", why);
	why = NULL;
	assert_int_equal(gdrc_host_mem_status(ctx, GDRC_HOST_MEM_SHARED, &why),
			 GDRC_ERR_UNSUPPORTED);
	assert_non_null(why);
	print_message("shared: %s\n", why);
	assert_int_equal(gdrc_host_mem_status(ctx, GDRC_HOST_MEM_SHARED, NULL),
			 GDRC_ERR_UNSUPPORTED);
	why = "untouched";
	assert_int_equal(gdrc_host_mem_status(NULL, GDRC_HOST_MEM_PRIVATE,
					      &why),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_host_mem_status(ctx, (enum gdrc_host_mem)2,
					      &why),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_host_mem_status(ctx, (enum gdrc_host_mem)-1,
					      &why),
			 GDRC_ERR_INVALID_PARAM);
	assert_string_equal(why, "untouched");
}

/* A memfd's shared mapping is registered per get and counted unseen; a
 * private mapping beside it is cached. */
static void test_sources_shared_memory_uncached(void **state)
{
	int fd = memfd_sized("gdrc-sources", 4 * PAGE);
	char *s, *p;
	uint64_t u0;

	(void)state;
	s = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	p = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(s != MAP_FAILED && p != MAP_FAILED);
	u0 = unseen();
	assert_false(second_get_hits(s, 4 * PAGE));
	assert_int_equal(unseen(), u0 + 2);
	assert_true(second_get_hits(p, 4 * PAGE));
	assert_int_equal(unseen(), u0 + 2);
	gdrc_invalidate(ctx, p, 4 * PAGE);
	munmap(s, 4 * PAGE);
	munmap(p, 4 * PAGE);
	close(fd);
}

/*
 * A run of private mappings the cache remembers is forgotten when an
 * event overlaps it: part of a private mapping unmapped (and, under
 * GDRC_MEM_HOOKS=none, reported by the caller), a shared mapping put in
 * the hole without MAP_FIXED (no event of its own): a get of it is not
 * cached on the strength of what the run was.
 */
static void test_sources_private_run_forgotten_after_unmap(void **state)
{
	int fd = memfd_sized("gdrc-sources-hole", 2 * PAGE);
	char *p, *s;
	uint64_t u0;

	(void)state;
	p = mmap(NULL, 8 * PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	assert_true(second_get_hits(p, PAGE)); /* the run is remembered */
	assert_int_equal(munmap(p + 4 * PAGE, 2 * PAGE), 0);
	if (serving < 0)
		gdrc_invalidate(ctx, p + 4 * PAGE, 2 * PAGE);
	s = mmap(p + 4 * PAGE, 2 * PAGE, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
	assert_ptr_equal(s, p + 4 * PAGE);
	u0 = unseen();
	assert_false(second_get_hits(s, 2 * PAGE));
	assert_int_equal(unseen(), u0 + 2);
	gdrc_invalidate(ctx, p, 8 * PAGE);
	munmap(p, 8 * PAGE);
	close(fd);
}

/* gdrc_vma_kind, both ways of asking: private (anonymous, a private
 * mapping of a file), shared (memfd, shared anonymous), a range across
 * a private and a shared mapping, a hole. */
static void vma_kinds(int text)
{
	int fd = memfd_sized("gdrc-vma", 4 * PAGE);
	char *p, *s, *a, *f;
	uintptr_t lo, hi;

	gdrc_vma_force_text(text);
	/* p: four private pages, then s: a shared memfd mapping right
	 * after them, then a hole of two pages. */
	p = mmap(NULL, 10 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		 0);
	assert_true(p != MAP_FAILED);
	assert_ptr_equal(mmap(p, 4 * PAGE, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
			 p);
	s = mmap(p + 4 * PAGE, 4 * PAGE, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, fd, 0);
	assert_ptr_equal(s, p + 4 * PAGE);
	assert_int_equal(munmap(p + 8 * PAGE, 2 * PAGE), 0);
	/* Before anything else is mapped, into the hole perhaps. */
	assert_int_equal(gdrc_vma_kind((uintptr_t)p + 8 * PAGE,
				       (uintptr_t)p + 9 * PAGE, &lo, &hi),
			 GDRC_VMA_UNMAPPED);
	assert_int_equal(gdrc_vma_kind((uintptr_t)p + 7 * PAGE,
				       (uintptr_t)p + 9 * PAGE, &lo, &hi),
			 GDRC_VMA_SHARED);
	a = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	f = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	assert_true(a != MAP_FAILED && f != MAP_FAILED);

	assert_int_equal(gdrc_vma_kind((uintptr_t)p + PAGE,
				       (uintptr_t)p + 2 * PAGE, &lo, &hi),
			 GDRC_VMA_PRIVATE);
	assert_true(lo <= (uintptr_t)p && hi == (uintptr_t)p + 4 * PAGE);
	assert_int_equal(gdrc_vma_kind((uintptr_t)s, (uintptr_t)s + PAGE,
				       &lo, &hi),
			 GDRC_VMA_SHARED);
	assert_true(lo == (uintptr_t)s && hi == (uintptr_t)s + PAGE);
	assert_int_equal(gdrc_vma_kind((uintptr_t)p + 3 * PAGE,
				       (uintptr_t)p + 5 * PAGE, &lo, &hi),
			 GDRC_VMA_SHARED);
	assert_int_equal(gdrc_vma_kind((uintptr_t)a, (uintptr_t)a + PAGE,
				       &lo, &hi),
			 GDRC_VMA_SHARED);
	assert_int_equal(gdrc_vma_kind((uintptr_t)f, (uintptr_t)f + PAGE,
				       &lo, &hi),
			 GDRC_VMA_PRIVATE);
	gdrc_vma_force_text(0);
	munmap(p, 8 * PAGE);
	munmap(a, PAGE);
	munmap(f, PAGE);
	close(fd);
}

static void test_sources_vma_kinds_by_query(void **state)
{
	(void)state;
	print_message("asked with %s\n", gdrc_vma_method());
	vma_kinds(0);
}

static void test_sources_vma_kinds_by_maps_text(void **state)
{
	(void)state;
	vma_kinds(1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sources_names),
		cmocka_unit_test(test_sources_bad_input),
		cmocka_unit_test(test_sources_one_host_source),
		cmocka_unit_test(test_sources_events_counted),
		cmocka_unit_test(test_sources_host_mem_status),
		cmocka_unit_test(test_sources_shared_memory_uncached),
		cmocka_unit_test(test_sources_private_run_forgotten_after_unmap),
		cmocka_unit_test(test_sources_vma_kinds_by_query),
		cmocka_unit_test(test_sources_vma_kinds_by_maps_text),
	};
	const char *want = getenv("GDRC_TEST_HOST_SOURCE"), *why = NULL;
	int rc;

	if (!want) {
		printf("GDRC_TEST_HOST_SOURCE is not set\n");
		return 1;
	}
	for (int s = 0; s < 4; s++)
		if (!strcmp(want, host_names[s]))
			serving = s;
	if (serving < 0 && strcmp(want, "none")) {
		printf("GDRC_TEST_HOST_SOURCE=%s: unknown\n", want);
		return 1;
	}
	if (gdrc_init(NULL, &ctx))
		return 1;
	if (serving >= 0 && gdrc_hooks_status(ctx, &why) != GDRC_OK) {
		printf("skipped: no host source here (%s)\n", why);
		gdrc_fini(ctx);
		return 77;
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	gdrc_fini(ctx);
	return rc;
}
