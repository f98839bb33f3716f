// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_status.c - unit tests for the small public helpers: status
 * strings and their fixed values, counter names, the version, the
 * counter dumps (gdrc_stats_format and gdrc_stats_dump: text, JSON,
 * truncation, measuring, bad arguments) and the log sink
 * (gdrc_log_set_handler: prefix, level name, restoring stderr).
 */
#include <fcntl.h>
#include <limits.h>
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

#include "log/log.h"
#include "stats/stats.h"

#define DUMP_MAX 8192
#define CANARY 'X'

/* ====================================================================
 * Status
 * ==================================================================== */

static void test_status_every_value_has_string(void **state)
{
	const char *s[13];

	(void)state;
	for (int v = GDRC_OK; v >= GDRC_ERR_IO; v--) {
		const char *str = gdrc_status_str((gdrc_status_t)v);

		if (!str || !*str || !strcmp(str, "unknown status"))
			fail_msg("status %d has no string", v);
		s[-v] = str;
	}
	/* Distinct strings: no value borrows another's. */
	for (int i = 0; i <= -GDRC_ERR_IO; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(s[i], s[j]))
				fail_msg("statuses %d and %d share '%s'", -i,
					 -j, s[i]);
}

static void test_status_out_of_range_unknown(void **state)
{
	static const int bad[] = { 1, 2, -14, -15, -1000, INT_MIN, INT_MAX,
				   INT_MIN + 1 };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *str = gdrc_status_str((gdrc_status_t)bad[i]);

		assert_non_null(str);
		if (strcmp(str, "unknown status"))
			fail_msg("status %d: '%s'", bad[i], str);
	}
}

static void test_status_values_fixed(void **state)
{
	(void)state;
	assert_int_equal(GDRC_OK, 0);
	assert_int_equal(GDRC_ERR_INVALID_PARAM, -1);
	assert_int_equal(GDRC_ERR_NO_MEMORY, -2);
	assert_int_equal(GDRC_ERR_UNSUPPORTED, -3);
	assert_int_equal(GDRC_ERR_LIMIT, -4);
	assert_int_equal(GDRC_ERR_NO_DEVICE, -5);
	assert_int_equal(GDRC_ERR_CUDA, -6);
	assert_int_equal(GDRC_ERR_VERBS, -7);
	assert_int_equal(GDRC_ERR_KMOD, -8);
	assert_int_equal(GDRC_ERR_BUSY, -9);
	assert_int_equal(GDRC_ERR_FORK, -10);
	assert_int_equal(GDRC_ERR_STALE, -11);
	assert_int_equal(GDRC_ERR_IO, -12);
}

/* Other fixed values of the ABI. */
static void test_status_enum_values_fixed(void **state)
{
	(void)state;
	assert_int_equal(GDRC_STAT_HITS, 0);
	assert_int_equal(GDRC_STAT_LIMIT_REJECTS, 20);
	assert_true(GDRC_STAT_COUNT > GDRC_STAT_LIMIT_REJECTS);
	assert_int_equal(GDRC_DUMP_TEXT, 0);
	assert_int_equal(GDRC_DUMP_JSON, 1);
	assert_int_equal(GDRC_LOG_ERROR, 0);
	assert_int_equal(GDRC_LOG_TRACE, 4);
	assert_int_equal(GDRC_MEM_HOST, 0);
	assert_int_equal(GDRC_MEM_CUDA, 1);
	assert_int_equal(GDRC_BACKEND_NONE, 0);
	assert_int_equal(GDRC_BACKEND_VERBS, 1);
	assert_int_equal(GDRC_BACKEND_KMOD, 4);
	assert_int_equal(GDRC_BACKEND_IO_URING, 5);
	assert_true(GDRC_LIMIT_NONE == UINT64_MAX);
}

/* ====================================================================
 * Counter names and version
 * ==================================================================== */

static void test_status_stat_names_distinct(void **state)
{
	(void)state;
	for (int i = 0; i < GDRC_STAT_COUNT; i++) {
		const char *n = gdrc_stat_name((enum gdrc_stat)i);

		assert_non_null(n);
		if (!*n || !strcmp(n, "unknown"))
			fail_msg("stat %d has no name", i);
		/* Names go into text and JSON unquoted-safe. */
		if (strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789_") !=
		    strlen(n))
			fail_msg("stat %d: name '%s' has odd characters", i, n);
		for (int j = 0; j < i; j++)
			if (!strcmp(n, gdrc_stat_name((enum gdrc_stat)j)))
				fail_msg("stats %d and %d share '%s'", i, j, n);
	}
	assert_string_equal(gdrc_stat_name(GDRC_STAT_HITS), "hits");
	assert_string_equal(gdrc_stat_name(GDRC_STAT_LIMIT_REJECTS),
			    "limit_rejects");
}

static void test_status_stat_name_out_of_range_unknown(void **state)
{
	(void)state;
	assert_string_equal(gdrc_stat_name(GDRC_STAT_COUNT), "unknown");
	assert_string_equal(gdrc_stat_name((enum gdrc_stat)-1), "unknown");
	assert_string_equal(
		gdrc_stat_name((enum gdrc_stat)(GDRC_STAT_COUNT + 1)),
		"unknown");
	assert_string_equal(gdrc_stat_name((enum gdrc_stat)INT_MIN),
			    "unknown");
	assert_string_equal(gdrc_stat_name((enum gdrc_stat)INT_MAX),
			    "unknown");
}

static void test_status_version_matches_macros(void **state)
{
	char want[32];

	(void)state;
	assert_int_equal(gdrc_version(), GDRC_VERSION);
	assert_int_equal(gdrc_version() >> 16, GDRC_VERSION_MAJOR);
	assert_int_equal((gdrc_version() >> 8) & 0xff, GDRC_VERSION_MINOR);
	assert_int_equal(gdrc_version() & 0xff, GDRC_VERSION_PATCH);
	snprintf(want, sizeof(want), "%d.%d.%d", GDRC_VERSION_MAJOR,
		 GDRC_VERSION_MINOR, GDRC_VERSION_PATCH);
	assert_non_null(gdrc_version_string());
	assert_string_equal(gdrc_version_string(), want);
}

/* ====================================================================
 * Dump checks shared by gdrc_stats_format and gdrc_stats_dump
 * ==================================================================== */

/* Formats values[] (or a context's counters) into buf. */
typedef gdrc_status_t (*dump_fn)(void *arg, enum gdrc_dump_format fmt,
				 char *buf, size_t buflen, size_t *needed_p);

static gdrc_status_t format_values(void *arg, enum gdrc_dump_format fmt,
				   char *buf, size_t buflen, size_t *needed_p)
{
	return gdrc_stats_format(arg, fmt, buf, buflen, needed_p);
}

static gdrc_status_t dump_ctx(void *arg, enum gdrc_dump_format fmt,
			      char *buf, size_t buflen, size_t *needed_p)
{
	return gdrc_stats_dump(arg, fmt, buf, buflen, needed_p);
}

/* The whole dump; @return its length. */
static size_t dump_full(dump_fn fn, void *arg, enum gdrc_dump_format fmt,
			char *out)
{
	size_t needed = SIZE_MAX;

	memset(out, CANARY, DUMP_MAX);
	assert_int_equal(fn(arg, fmt, out, DUMP_MAX, &needed), GDRC_OK);
	assert_true(needed < DUMP_MAX);
	assert_int_equal(strlen(out), needed);
	return needed;
}

/* "name value\n" for every counter, in order, and nothing else. */
static void check_text(const char *text, const uint64_t *v)
{
	const char *p = text;

	for (int i = 0; i < GDRC_STAT_COUNT; i++) {
		char line[128];
		int n;

		n = snprintf(line, sizeof(line), "%s %llu\n",
			     gdrc_stat_name((enum gdrc_stat)i),
			     (unsigned long long)v[i]);
		if (strncmp(p, line, (size_t)n))
			fail_msg("text dump: expected '%.*s' at '%.40s'",
				 n - 1, line, p);
		p += n;
	}
	assert_string_equal(p, "");
}

/* One object with GDRC_STAT_COUNT "name": value pairs. */
static void check_json(const char *json, const uint64_t *v)
{
	size_t len = strlen(json), colons = 0, commas = 0;

	assert_true(len >= 2);
	assert_int_equal(json[0], '{');
	assert_int_equal(json[len - 1], '}');
	for (size_t i = 0; i < len; i++) {
		colons += json[i] == ':';
		commas += json[i] == ',';
	}
	assert_int_equal(colons, GDRC_STAT_COUNT);
	assert_int_equal(commas, GDRC_STAT_COUNT - 1);
	for (int i = 0; i < GDRC_STAT_COUNT; i++) {
		char pair[128];
		const char *at;
		size_t n;

		n = (size_t)snprintf(pair, sizeof(pair), "\"%s\": %llu",
				     gdrc_stat_name((enum gdrc_stat)i),
				     (unsigned long long)v[i]);
		at = strstr(json, pair);
		if (!at)
			fail_msg("json dump lacks '%s'", pair);
		/* The value ends there (not a prefix of a longer one). */
		if (at[n] != ',' && at[n] != '}')
			fail_msg("json dump: '%s' followed by '%c'", pair,
				 at[n]);
	}
}

/* Every too-small buffer: GDRC_ERR_LIMIT, a terminated prefix, the full
 * length in *needed_p, nothing written past buflen. */
static void check_truncation(dump_fn fn, void *arg,
			     enum gdrc_dump_format fmt)
{
	char full[DUMP_MAX], buf[DUMP_MAX];
	size_t len = dump_full(fn, arg, fmt, full);

	for (size_t buflen = 1; buflen <= len; buflen++) {
		size_t needed = SIZE_MAX;
		gdrc_status_t st;

		memset(buf, CANARY, sizeof(buf));
		st = fn(arg, fmt, buf, buflen, &needed);
		if (st != GDRC_ERR_LIMIT)
			fail_msg("buflen %zu of %zu: status %d", buflen,
				 len + 1, st);
		assert_int_equal(needed, len);
		assert_int_equal(buf[buflen - 1], '\0');
		assert_int_equal(strlen(buf), buflen - 1);
		assert_memory_equal(buf, full, buflen - 1);
		assert_int_equal(buf[buflen], CANARY);
	}

	/* Exactly enough room for the NUL: complete. */
	{
		size_t needed = SIZE_MAX;

		memset(buf, CANARY, sizeof(buf));
		assert_int_equal(fn(arg, fmt, buf, len + 1, &needed), GDRC_OK);
		assert_int_equal(needed, len);
		assert_string_equal(buf, full);
		assert_int_equal(buf[len + 1], CANARY);
	}
	/* needed_p may be NULL. */
	memset(buf, CANARY, sizeof(buf));
	assert_int_equal(fn(arg, fmt, buf, len + 1, NULL), GDRC_OK);
	assert_string_equal(buf, full);
	assert_int_equal(fn(arg, fmt, buf, 3, NULL), GDRC_ERR_LIMIT);
	assert_int_equal(strlen(buf), 2);
}

/* buflen 0 only measures: GDRC_ERR_LIMIT (nothing fits), *needed_p
 * set, buf (NULL or not) untouched. */
static void check_measure(dump_fn fn, void *arg, enum gdrc_dump_format fmt)
{
	char full[DUMP_MAX], buf[16];
	size_t len = dump_full(fn, arg, fmt, full), needed = SIZE_MAX;

	assert_int_equal(fn(arg, fmt, NULL, 0, &needed), GDRC_ERR_LIMIT);
	assert_int_equal(needed, len);
	assert_int_equal(fn(arg, fmt, NULL, 0, NULL), GDRC_ERR_LIMIT);

	memset(buf, CANARY, sizeof(buf));
	needed = SIZE_MAX;
	assert_int_equal(fn(arg, fmt, buf, 0, &needed), GDRC_ERR_LIMIT);
	assert_int_equal(needed, len);
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], CANARY);
}

/* Bad arguments: GDRC_ERR_INVALID_PARAM, neither buf nor *needed_p
 * written. */
static void check_bad_args(dump_fn fn, void *arg)
{
	static const int bad_fmt[] = { 2, 7, -1, INT_MAX };
	char buf[64];
	size_t needed;

	needed = 12345;
	assert_int_equal(fn(arg, GDRC_DUMP_TEXT, NULL, 1, &needed),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(fn(arg, GDRC_DUMP_JSON, NULL, 100, &needed),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(needed, 12345);

	for (size_t i = 0; i < sizeof(bad_fmt) / sizeof(bad_fmt[0]); i++) {
		memset(buf, CANARY, sizeof(buf));
		if (fn(arg, (enum gdrc_dump_format)bad_fmt[i], buf, sizeof(buf),
		       &needed) != GDRC_ERR_INVALID_PARAM)
			fail_msg("format %d accepted", bad_fmt[i]);
		assert_int_equal(needed, 12345);
		assert_int_equal(buf[0], CANARY);
		assert_int_equal(fn(arg, (enum gdrc_dump_format)bad_fmt[i],
				    NULL, 0, &needed),
				 GDRC_ERR_INVALID_PARAM);
		assert_int_equal(needed, 12345);
	}
}

/* ====================================================================
 * gdrc_stats_format
 * ==================================================================== */

static void fill_values(uint64_t *v)
{
	for (int i = 0; i < GDRC_STAT_COUNT; i++)
		v[i] = 1000003ULL * (uint64_t)(i + 1) + (uint64_t)i;
	v[0] = 0;
	v[GDRC_STAT_COUNT - 1] = UINT64_MAX;
}

static void test_status_format_text_names_values(void **state)
{
	uint64_t v[GDRC_STAT_COUNT];
	char out[DUMP_MAX], want[96];

	(void)state;
	fill_values(v);
	dump_full(format_values, v, GDRC_DUMP_TEXT, out);
	check_text(out, v);
	assert_non_null(strstr(out, "hits 0\n"));
	snprintf(want, sizeof(want), "%s 18446744073709551615\n",
		 gdrc_stat_name(GDRC_STAT_COUNT - 1));
	assert_non_null(strstr(out, want));
}

static void test_status_format_json_object(void **state)
{
	uint64_t v[GDRC_STAT_COUNT];
	char out[DUMP_MAX], want[96];

	(void)state;
	fill_values(v);
	dump_full(format_values, v, GDRC_DUMP_JSON, out);
	check_json(out, v);
	assert_non_null(strstr(out, "\"hits\": 0"));
	snprintf(want, sizeof(want), "\"%s\": 18446744073709551615}",
		 gdrc_stat_name(GDRC_STAT_COUNT - 1));
	assert_non_null(strstr(out, want));
}

static void test_status_format_small_buffer_limit(void **state)
{
	uint64_t v[GDRC_STAT_COUNT];

	(void)state;
	fill_values(v);
	check_truncation(format_values, v, GDRC_DUMP_TEXT);
	check_truncation(format_values, v, GDRC_DUMP_JSON);
}

static void test_status_format_zero_buflen_measures(void **state)
{
	uint64_t v[GDRC_STAT_COUNT];

	(void)state;
	fill_values(v);
	check_measure(format_values, v, GDRC_DUMP_TEXT);
	check_measure(format_values, v, GDRC_DUMP_JSON);
}

static void test_status_format_bad_args_invalid(void **state)
{
	uint64_t v[GDRC_STAT_COUNT];

	(void)state;
	fill_values(v);
	check_bad_args(format_values, v);
}

/* ====================================================================
 * gdrc_stats_dump
 * ==================================================================== */

struct dump_fixture {
	struct gdrc_ctx *ctx;
	char *page;
	size_t pg;
};

static int dump_setup(void **state)
{
	struct dump_fixture *f = calloc(1, sizeof(*f));
	struct gdrc_mr *mr;

	assert_non_null(f);
	assert_int_equal(setenv("GDRC_MEM_HOOKS", "none", 1), 0);
	assert_int_equal(gdrc_init(NULL, &f->ctx), GDRC_OK);
	f->pg = (size_t)sysconf(_SC_PAGESIZE);
	f->page = mmap(NULL, f->pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(f->page != MAP_FAILED);
	/* A miss and a hit, so that some counters are not 0. */
	for (int i = 0; i < 2; i++) {
		mr = NULL;
		assert_int_equal(gdrc_mr_get(f->ctx, f->page, f->pg, 0, 0, &mr),
				 GDRC_OK);
		gdrc_mr_put(f->ctx, mr);
	}
	*state = f;
	return 0;
}

static int dump_teardown(void **state)
{
	struct dump_fixture *f = *state;

	gdrc_fini(f->ctx);
	munmap(f->page, f->pg);
	free(f);
	unsetenv("GDRC_MEM_HOOKS");
	return 0;
}

static void ctx_values(struct gdrc_ctx *ctx, uint64_t *v)
{
	for (int i = 0; i < GDRC_STAT_COUNT; i++)
		assert_int_equal(gdrc_stat_get(ctx, (enum gdrc_stat)i, &v[i]),
				 GDRC_OK);
}

static void test_status_dump_text_names_values(void **state)
{
	struct dump_fixture *f = *state;
	uint64_t v[GDRC_STAT_COUNT];
	char out[DUMP_MAX];

	ctx_values(f->ctx, v);
	assert_true(v[GDRC_STAT_MISSES] == 1);
	assert_true(v[GDRC_STAT_PUTS] == 2);
	dump_full(dump_ctx, f->ctx, GDRC_DUMP_TEXT, out);
	check_text(out, v);
	assert_non_null(strstr(out, "misses 1\n"));
	assert_non_null(strstr(out, "puts 2\n"));
	assert_non_null(strstr(out, "regions 1\n"));
}

static void test_status_dump_json_object(void **state)
{
	struct dump_fixture *f = *state;
	uint64_t v[GDRC_STAT_COUNT];
	char out[DUMP_MAX];

	ctx_values(f->ctx, v);
	dump_full(dump_ctx, f->ctx, GDRC_DUMP_JSON, out);
	check_json(out, v);
	assert_non_null(strstr(out, "\"misses\": 1,"));
	assert_non_null(strstr(out, "\"puts\": 2,"));
}

static void test_status_dump_small_buffer_limit(void **state)
{
	struct dump_fixture *f = *state;

	check_truncation(dump_ctx, f->ctx, GDRC_DUMP_TEXT);
	check_truncation(dump_ctx, f->ctx, GDRC_DUMP_JSON);
}

static void test_status_dump_zero_buflen_measures(void **state)
{
	struct dump_fixture *f = *state;

	check_measure(dump_ctx, f->ctx, GDRC_DUMP_TEXT);
	check_measure(dump_ctx, f->ctx, GDRC_DUMP_JSON);
}

static void test_status_dump_bad_args_invalid(void **state)
{
	struct dump_fixture *f = *state;
	char buf[64];
	size_t needed = 12345;

	check_bad_args(dump_ctx, f->ctx);

	memset(buf, CANARY, sizeof(buf));
	assert_int_equal(gdrc_stats_dump(NULL, GDRC_DUMP_TEXT, buf,
					 sizeof(buf), &needed),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_stats_dump(NULL, GDRC_DUMP_JSON, NULL, 0,
					 &needed),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(needed, 12345);
	assert_int_equal(buf[0], CANARY);
}

/* ====================================================================
 * Log sink
 * ==================================================================== */

struct capture {
	int calls;
	int level;
	char msg[1024];
};

static void capture_sink(enum gdrc_log_level level, const char *msg,
			 void *arg)
{
	struct capture *c = arg;

	c->calls++;
	c->level = (int)level;
	snprintf(c->msg, sizeof(c->msg), "%s", msg);
}

static int log_teardown(void **state)
{
	(void)state;
	gdrc_log_set_handler(NULL, NULL);
	gdrc_log_set_level(GDRC_LOG_WARN);
	unsetenv("GDRC_MAX_REGIONS");
	unsetenv("GDRC_MEM_HOOKS");
	return 0;
}

static void test_status_log_sink_prefix_level(void **state)
{
	static const char *const names[] = { "error", "warn", "info",
					     "debug", "trace" };
	struct capture cap = { 0 };
	char want[128];

	(void)state;
	gdrc_log_set_handler(capture_sink, &cap);
	for (int l = GDRC_LOG_ERROR; l <= GDRC_LOG_TRACE; l++) {
		cap.calls = 0;
		gdrc_log_write((enum gdrc_log_level)l, "probe %d", 42 + l);
		assert_int_equal(cap.calls, 1);
		assert_int_equal(cap.level, l);
		snprintf(want, sizeof(want), "gdrc[%d]: %s: probe %d",
			 (int)getpid(), names[l], 42 + l);
		assert_string_equal(cap.msg, want);
	}
	gdrc_log_set_handler(NULL, NULL);
}

/* The level set by GDRC_LOG_LEVEL filters before the sink. */
static void test_status_log_level_filters_sink(void **state)
{
	struct capture cap = { 0 };

	(void)state;
	gdrc_log_set_handler(capture_sink, &cap);
	gdrc_log_set_level(GDRC_LOG_ERROR);
	gdrc_warn("filtered %d", 1);
	assert_int_equal(cap.calls, 0);
	gdrc_error("kept %d", 2);
	assert_int_equal(cap.calls, 1);
	assert_non_null(strstr(cap.msg, ": error: kept 2"));
	gdrc_log_set_level(GDRC_LOG_TRACE);
	gdrc_trace("kept %d", 3);
	assert_int_equal(cap.calls, 2);
	assert_non_null(strstr(cap.msg, ": trace: kept 3"));
	gdrc_log_set_handler(NULL, NULL);
}

/* A message from the library itself reaches the sink, prefixed. */
static void test_status_log_init_error_reaches_sink(void **state)
{
	struct capture cap = { 0 };
	struct gdrc_ctx *ctx = NULL;
	char prefix[64];

	(void)state;
	setenv("GDRC_MEM_HOOKS", "none", 1);
	setenv("GDRC_MAX_REGIONS", "lots", 1);
	gdrc_log_set_handler(capture_sink, &cap);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_ERR_INVALID_PARAM);
	gdrc_log_set_handler(NULL, NULL);
	assert_true(cap.calls >= 1);
	assert_int_equal(cap.level, GDRC_LOG_ERROR);
	snprintf(prefix, sizeof(prefix), "gdrc[%d]: error: ", (int)getpid());
	assert_int_equal(strncmp(cap.msg, prefix, strlen(prefix)), 0);
	assert_non_null(strstr(cap.msg, "GDRC_MAX_REGIONS"));
	unsetenv("GDRC_MAX_REGIONS");
	unsetenv("GDRC_MEM_HOOKS");
}

/* NULL restores stderr: the old sink is not called any more and the
 * message (with a newline) goes to file descriptor 2. */
static void test_status_log_null_handler_restores_stderr(void **state)
{
	struct capture cap = { 0 };
	char path[] = "/tmp/test_status_stderr_XXXXXX";
	char got[512] = { 0 }, want[128];
	int fd, saved;
	ssize_t n;

	(void)state;
	gdrc_log_set_handler(capture_sink, &cap);
	gdrc_log_write(GDRC_LOG_WARN, "to the sink");
	assert_int_equal(cap.calls, 1);

	gdrc_log_set_handler(NULL, NULL);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	fflush(stderr);
	saved = dup(2);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fd, 2), 2);
	gdrc_log_write(GDRC_LOG_WARN, "to stderr %d", 7);
	fflush(stderr);
	assert_int_equal(dup2(saved, 2), 2);
	close(saved);

	assert_int_equal(cap.calls, 1);
	n = pread(fd, got, sizeof(got) - 1, 0);
	close(fd);
	assert_true(n > 0);
	snprintf(want, sizeof(want), "gdrc[%d]: warn: to stderr 7\n",
		 (int)getpid());
	assert_string_equal(got, want);
}

int main(void)
{
#define D(fn) cmocka_unit_test_setup_teardown(fn, dump_setup, dump_teardown)
#define L(fn) cmocka_unit_test_teardown(fn, log_teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_every_value_has_string),
		cmocka_unit_test(test_status_out_of_range_unknown),
		cmocka_unit_test(test_status_values_fixed),
		cmocka_unit_test(test_status_enum_values_fixed),
		cmocka_unit_test(test_status_stat_names_distinct),
		cmocka_unit_test(test_status_stat_name_out_of_range_unknown),
		cmocka_unit_test(test_status_version_matches_macros),
		cmocka_unit_test(test_status_format_text_names_values),
		cmocka_unit_test(test_status_format_json_object),
		cmocka_unit_test(test_status_format_small_buffer_limit),
		cmocka_unit_test(test_status_format_zero_buflen_measures),
		cmocka_unit_test(test_status_format_bad_args_invalid),
		D(test_status_dump_text_names_values),
		D(test_status_dump_json_object),
		D(test_status_dump_small_buffer_limit),
		D(test_status_dump_zero_buflen_measures),
		D(test_status_dump_bad_args_invalid),
		L(test_status_log_sink_prefix_level),
		L(test_status_log_level_filters_sink),
		L(test_status_log_init_error_reaches_sink),
		L(test_status_log_null_handler_restores_stderr),
	};
#undef D
#undef L

	return cmocka_run_group_tests(tests, NULL, NULL);
}
