// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_sources.c - gdrc_source_status: every event source says whether
 * it serves this context, always with a reason, and counts what it told
 * the cache.  ctest runs it once per host source: GDRC_TEST_HOST_SOURCE
 * names the one that must serve ("glibc", "uffd", "ucm" with libucs
 * preloaded, or "none" with GDRC_MEM_HOOKS=none); every other host
 * source must not.  Then an unmap of a cached page must count in the
 * serving source's events and in no other's.  No GPU: both GPU sources
 * are off, with the driver's reason.  Public API, none backend.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include <gdrcache.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sources_names),
		cmocka_unit_test(test_sources_bad_input),
		cmocka_unit_test(test_sources_one_host_source),
		cmocka_unit_test(test_sources_events_counted),
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
