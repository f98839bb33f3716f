// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_api_params.c - every bad argument of the public API gets its
 * documented status and changes nothing: no output written, no counter
 * moved, no registration made or dropped.
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

#include "ctx_stat.h"

#include <gdrcache.h>

#define BUF_LEN (16 * 4096)
#define SENTINEL ((struct gdrc_mr *)0x5a5a5a5a)

struct fixture {
	struct gdrc_ctx *ctx;
	char *buf;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(gdrc_init(NULL, &f->ctx), GDRC_OK);
	f->buf = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(f->buf != MAP_FAILED);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	gdrc_fini(f->ctx);
	munmap(f->buf, BUF_LEN);
	free(f);
	return 0;
}

/* Counters that any accepted call would move. */
static void snapshot(struct gdrc_ctx *ctx, uint64_t v[4])
{
	v[0] = ctx_stat(ctx, GDRC_STAT_HITS);
	v[1] = ctx_stat(ctx, GDRC_STAT_MISSES);
	v[2] = ctx_stat(ctx, GDRC_STAT_REGIONS);
	v[3] = ctx_stat(ctx, GDRC_STAT_INVALIDATIONS);
}

static void assert_unchanged(struct gdrc_ctx *ctx, const uint64_t before[4])
{
	uint64_t after[4];

	snapshot(ctx, after);
	assert_memory_equal(before, after, sizeof(after));
}

static void test_mr_get_bad_args_invalid_param(void **state)
{
	struct fixture *f = *state;
	struct gdrc_mr *mr = SENTINEL;
	uint64_t before[4];
	const void *top = (const void *)(UINTPTR_MAX - 100);

	snapshot(f->ctx, before);
	assert_int_equal(gdrc_mr_get(NULL, f->buf, 64, 0, 0, &mr),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_get(f->ctx, NULL, 64, 0, 0, &mr),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, 64, 0, 0, NULL),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, 0, 0, 0, &mr),
			 GDRC_ERR_INVALID_PARAM);
	/* Wraps the address space. */
	assert_int_equal(gdrc_mr_get(f->ctx, top, 200, 0, 0, &mr),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, SIZE_MAX, 0, 0, &mr),
			 GDRC_ERR_INVALID_PARAM);
	/* Ends exactly at the top of the address space (the end wraps to
	 * zero), and one byte into the room kept for rounding out. */
	assert_int_equal(gdrc_mr_get(f->ctx, (const void *)(UINTPTR_MAX - 4095),
				     4096, 0, 0, &mr),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_get(f->ctx,
				     (const void *)(UINTPTR_MAX - 65536 - 100),
				     101, 0, 0, &mr),
			 GDRC_ERR_INVALID_PARAM);
	/* Unknown access and flag bits. */
	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, 64, 1u << 4, 0, &mr),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, 64, 1u << 31, 0, &mr),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, 64, 0, 1u << 1, &mr),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, 64, 0, 1u << 31, &mr),
			 GDRC_ERR_INVALID_PARAM);
	assert_ptr_equal(mr, SENTINEL);
	assert_unchanged(f->ctx, before);
}

static void test_mr_get_bad_args_after_hit_change_nothing(void **state)
{
	struct fixture *f = *state;
	struct gdrc_mr *mr, *mr2 = SENTINEL;
	uint64_t before[4];

	/* A cached, remembered region must not be handed out either. */
	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, 64, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(f->ctx, mr);
	snapshot(f->ctx, before);
	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, 64, 1u << 5, 0, &mr2),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, 64, 0, 4, &mr2),
			 GDRC_ERR_INVALID_PARAM);
	/* Lengths whose end wraps past the top of the address space, to
	 * zero or into the cached range: a hit compares the end with the
	 * remembered range's, so the range must be refused before. */
	assert_int_equal(gdrc_mr_get(f->ctx, f->buf,
				     (size_t)(0 - (uintptr_t)f->buf), 0, 0,
				     &mr2),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, SIZE_MAX - 31, 0, 0,
				     &mr2),
			 GDRC_ERR_INVALID_PARAM);
	assert_ptr_equal(mr2, SENTINEL);
	assert_unchanged(f->ctx, before);
}

static void test_mr_put_null_ignored(void **state)
{
	struct fixture *f = *state;
	struct gdrc_mr *mr;
	uint64_t puts;

	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, 64, 0, 0, &mr), GDRC_OK);
	puts = ctx_stat(f->ctx, GDRC_STAT_PUTS);
	gdrc_mr_put(f->ctx, NULL);
	gdrc_mr_put(NULL, mr);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_PUTS), puts);
	gdrc_mr_put(f->ctx, mr);
	assert_int_equal(ctx_stat(f->ctx, GDRC_STAT_PUTS), puts + 1);
}

static void test_mr_query_bad_args_invalid_param(void **state)
{
	struct fixture *f = *state;
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;

	memset(&info, 0xab, sizeof(info));
	assert_int_equal(gdrc_mr_query(NULL, &info), GDRC_ERR_INVALID_PARAM);
	assert_int_equal(info.id, 0xababababababababULL);
	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, 64, 0, 0, &mr), GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, NULL), GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_mr_lkey(NULL), 0);
	assert_int_equal(gdrc_mr_rkey(NULL), 0);
	gdrc_mr_put(f->ctx, mr);
}

static void test_invalidate_bad_args_invalid_param(void **state)
{
	struct fixture *f = *state;
	struct gdrc_mr *mr;
	struct gdrc_mr_info info;
	uint64_t before[4];

	assert_int_equal(gdrc_mr_get(f->ctx, f->buf, 64, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(f->ctx, mr);
	snapshot(f->ctx, before);
	assert_int_equal(gdrc_invalidate(NULL, f->buf, 64),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_invalidate(f->ctx, NULL, 64),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_invalidate(f->ctx, f->buf, 0),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_invalidate(f->ctx, f->buf, SIZE_MAX),
			 GDRC_ERR_INVALID_PARAM);
	assert_unchanged(f->ctx, before);
	/* The registration is still cached. */
	assert_int_equal(gdrc_mr_query(mr, &info), GDRC_OK);
	assert_true(info.flags & GDRC_MR_INFO_CACHED);
}

static void test_stat_get_bad_args_invalid_param(void **state)
{
	struct fixture *f = *state;
	uint64_t v = 77;

	assert_int_equal(gdrc_stat_get(NULL, GDRC_STAT_HITS, &v),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_stat_get(f->ctx, GDRC_STAT_HITS, NULL),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_stat_get(f->ctx, GDRC_STAT_COUNT, &v),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_stat_get(f->ctx, (enum gdrc_stat)-1, &v),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(v, 77);
}

static void test_stats_dump_bad_args_invalid_param(void **state)
{
	struct fixture *f = *state;
	char buf[16] = "untouched";
	size_t needed = 5;

	assert_int_equal(gdrc_stats_dump(NULL, GDRC_DUMP_TEXT, buf,
					 sizeof(buf), &needed),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_stats_dump(f->ctx, (enum gdrc_dump_format)9,
					 buf, sizeof(buf), &needed),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_stats_dump(f->ctx, GDRC_DUMP_JSON, NULL, 8,
					 &needed),
			 GDRC_ERR_INVALID_PARAM);
	assert_string_equal(buf, "untouched");
	assert_int_equal(needed, 5);
}

static void test_init_bad_args_invalid_param(void **state)
{
	struct gdrc_config cfg = { .field_mask = 1ULL << 40 };
	struct gdrc_ctx *ctx = (struct gdrc_ctx *)SENTINEL;

	(void)state;
	assert_int_equal(gdrc_init(NULL, NULL), GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_ERR_INVALID_PARAM);
	assert_ptr_equal(ctx, SENTINEL);
	gdrc_fini(NULL); /* ignored */
}

/* Status queries: NULL ctx refused; answers with and without the
 * feature (the machine has the glibc hooks and no /dev/gdrcache). */
static void test_status_queries(void **state)
{
	struct fixture *f = *state;
	const char *why = "unchanged";
	struct gdrc_ctx *ctx;

	assert_int_equal(gdrc_hooks_status(NULL, &why), GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_kmod_status(NULL, &why), GDRC_ERR_INVALID_PARAM);
	assert_string_equal(why, "unchanged");
	assert_int_equal(gdrc_hooks_status(f->ctx, &why), GDRC_OK);
	/* On success the reason names the source. */
	assert_non_null(why);
	assert_non_null(strstr(why, "glibc patched"));
	if (access("/dev/gdrcache", F_OK)) {
		assert_int_equal(gdrc_kmod_status(f->ctx, &why),
				 GDRC_ERR_UNSUPPORTED);
		assert_non_null(why);
	}
	setenv("GDRC_MEM_HOOKS", "none", 1);
	setenv("GDRC_KMOD", "off", 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	unsetenv("GDRC_MEM_HOOKS");
	unsetenv("GDRC_KMOD");
	assert_int_equal(gdrc_hooks_status(ctx, &why), GDRC_ERR_UNSUPPORTED);
	assert_string_equal(why, "GDRC_MEM_HOOKS=none");
	assert_int_equal(gdrc_kmod_status(ctx, NULL), GDRC_ERR_UNSUPPORTED);
	assert_int_equal(gdrc_kmod_status(ctx, &why), GDRC_ERR_UNSUPPORTED);
	assert_string_equal(why, "GDRC_KMOD=off");
	gdrc_fini(ctx);
}

/* Every knob described, then GDRC_ERR_LIMIT; NULL outputs refused. */
static void test_knob_describe(void **state)
{
	const char *name = NULL, *def = NULL, *help = NULL;
	unsigned n = 0;
	int seen_backend = 0;

	(void)state;
	while (gdrc_knob_describe(n, &name, &def, &help) == GDRC_OK) {
		assert_non_null(name);
		assert_non_null(def);
		assert_non_null(help);
		assert_int_equal(strncmp(name, "GDRC_", 5), 0);
		seen_backend |= !strcmp(name, "GDRC_BACKEND");
		n++;
	}
	assert_true(n >= 10);
	assert_true(seen_backend);
	assert_int_equal(gdrc_knob_describe(n, &name, &def, &help),
			 GDRC_ERR_LIMIT);
	assert_int_equal(gdrc_knob_describe(0xffffffffu, &name, &def, &help),
			 GDRC_ERR_LIMIT);
	assert_int_equal(gdrc_knob_describe(0, NULL, &def, &help),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_knob_describe(0, &name, NULL, &help),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_knob_describe(0, &name, &def, NULL),
			 GDRC_ERR_INVALID_PARAM);
}

/* gdrc_knob_value: every bad argument, a bad value, a short buffer
 * (buf untouched each time), booleans normalised, defaults. */
static void test_knob_value(void **state)
{
	char buf[64];

	(void)state;
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(gdrc_knob_value(NULL, buf, sizeof(buf)),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_knob_value("GDRC_PRELOAD_MR", NULL, 8),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_knob_value("GDRC_PRELOAD_MR", buf, 0),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_knob_value("GDRC_NO_SUCH_KNOB", buf,
					 sizeof(buf)),
			 GDRC_ERR_INVALID_PARAM);
	setenv("GDRC_PRELOAD_MR", "maybe", 1);
	assert_int_equal(gdrc_knob_value("GDRC_PRELOAD_MR", buf, sizeof(buf)),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(buf[0], 'x');
	setenv("GDRC_PRELOAD_MR", "off", 1);
	assert_int_equal(gdrc_knob_value("GDRC_PRELOAD_MR", buf, 1),
			 GDRC_ERR_LIMIT);
	assert_int_equal(buf[0], 'x');
	assert_int_equal(gdrc_knob_value("GDRC_PRELOAD_MR", buf, 2), GDRC_OK);
	assert_string_equal(buf, "0");
	setenv("GDRC_PRELOAD_MR", "yes", 1);
	assert_int_equal(gdrc_knob_value("GDRC_PRELOAD_MR", buf, sizeof(buf)),
			 GDRC_OK);
	assert_string_equal(buf, "1");
	unsetenv("GDRC_PRELOAD_MR");
	assert_int_equal(gdrc_knob_value("GDRC_PRELOAD_MR", buf, sizeof(buf)),
			 GDRC_OK);
	assert_string_equal(buf, "1"); /* the default */
	setenv("GDRC_WHOLE_ALLOC_MAX", "8M", 1);
	assert_int_equal(gdrc_knob_value("GDRC_WHOLE_ALLOC_MAX", buf,
					 sizeof(buf)),
			 GDRC_OK);
	assert_string_equal(buf, "8M");
	unsetenv("GDRC_WHOLE_ALLOC_MAX");
}

/* gdrc_install_hooks: refused with GDRC_MEM_HOOKS=none or a bad setting,
 * done (twice) otherwise. */
static void test_install_hooks(void **state)
{
	(void)state;
	setenv("GDRC_CUDA_LIBRARY", "none", 1);
	setenv("GDRC_MEM_HOOKS", "none", 1);
	assert_int_equal(gdrc_install_hooks(), GDRC_ERR_UNSUPPORTED);
	setenv("GDRC_MEM_HOOKS", "sometimes", 1);
	assert_int_equal(gdrc_install_hooks(), GDRC_ERR_INVALID_PARAM);
	unsetenv("GDRC_MEM_HOOKS");
	assert_int_equal(gdrc_install_hooks(), GDRC_OK);
	assert_int_equal(gdrc_install_hooks(), GDRC_OK);
	unsetenv("GDRC_CUDA_LIBRARY");
}

static int logged[GDRC_LOG_TRACE + 1];
static char last_msg[256];

static void count_sink(enum gdrc_log_level level, const char *msg, void *arg)
{
	(void)arg;
	logged[level]++;
	snprintf(last_msg, sizeof(last_msg), "%s", msg);
}

/* gdrc_log_printf: through the level filter and the sink, prefixed;
 * an unknown level or a NULL format is ignored. */
static void test_log_printf(void **state)
{
	struct gdrc_ctx *ctx;

	(void)state;
	setenv("GDRC_LOG_LEVEL", "warn", 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	gdrc_fini(ctx);
	unsetenv("GDRC_LOG_LEVEL");
	memset(logged, 0, sizeof(logged));
	gdrc_log_set_handler(count_sink, NULL);
	gdrc_log_printf(GDRC_LOG_WARN, "layer says %d", 42);
	gdrc_log_printf(GDRC_LOG_DEBUG, "not shown");
	gdrc_log_printf((enum gdrc_log_level)99, "not shown either");
	gdrc_log_printf(GDRC_LOG_ERROR, NULL);
	gdrc_log_set_handler(NULL, NULL);
	assert_int_equal(logged[GDRC_LOG_WARN], 1);
	assert_int_equal(logged[GDRC_LOG_DEBUG], 0);
	assert_int_equal(logged[GDRC_LOG_ERROR], 0);
	assert_non_null(strstr(last_msg, "gdrc["));
	assert_non_null(strstr(last_msg, "layer says 42"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_mr_get_bad_args_invalid_param, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_mr_get_bad_args_after_hit_change_nothing, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_mr_put_null_ignored,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_mr_query_bad_args_invalid_param, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_invalidate_bad_args_invalid_param, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_stat_get_bad_args_invalid_param, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_stats_dump_bad_args_invalid_param, setup,
			teardown),
		cmocka_unit_test(test_init_bad_args_invalid_param),
		cmocka_unit_test_setup_teardown(test_status_queries, setup,
						teardown),
		cmocka_unit_test(test_knob_describe),
		cmocka_unit_test(test_knob_value),
		cmocka_unit_test(test_install_hooks),
		cmocka_unit_test(test_log_printf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
