// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_config.c - unit tests for lib/config, the GDRC_* knobs.
 *
 * The defaults with an empty environment; every syntax the parser
 * accepts for sizes, booleans, choices and log levels, and a set of
 * values it must refuse (with GDRC_ERR_INVALID_PARAM and the knobs left
 * as they were); a bad environment value failing gdrc_config_load and
 * gdrc_init with a log line that names the variable; gdrc_config fields
 * taking precedence over the environment; GDRC_BACKEND=verbs without a
 * PD; and docs/env.md agreeing with the knob table.
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

#include "config/config.h"
#include "log/log.h"

#ifndef GDRC_SOURCE_DIR
#error "GDRC_SOURCE_DIR must name the source root"
#endif

#define CTX_SENTINEL ((struct gdrc_ctx *)(uintptr_t)0x5a5a5a5a)

/* ====================================================================
 * Helpers
 * ==================================================================== */

/* Every message the capturing sink received, one per line. */
static char log_text[16384];
static size_t log_len;
static int log_calls;
static int log_worst = -1; /* lowest (most severe) level seen */

static void capture_sink(enum gdrc_log_level level, const char *msg,
			 void *arg)
{
	size_t n = strlen(msg);

	(void)arg;
	log_calls++;
	if (log_worst < 0 || (int)level < log_worst)
		log_worst = (int)level;
	if (log_len + n + 2 > sizeof(log_text))
		return;
	memcpy(log_text + log_len, msg, n);
	log_len += n;
	log_text[log_len++] = '\n';
	log_text[log_len] = '\0';
}

static void capture_start(void)
{
	log_text[0] = '\0';
	log_len = 0;
	log_calls = 0;
	log_worst = -1;
	gdrc_log_set_handler(capture_sink, NULL);
}

static void capture_stop(void)
{
	gdrc_log_set_handler(NULL, NULL);
}

/* Unset every variable of the knob table. */
static void unset_all(void)
{
	for (size_t i = 0; i < gdrc_config_count(); i++)
		assert_int_equal(unsetenv(gdrc_config_desc(i)->name), 0);
}

static int setup(void **state)
{
	(void)state;
	unset_all();
	/* Rejections log errors: keep them off stderr. */
	capture_start();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unset_all();
	capture_stop();
	gdrc_log_set_level(GDRC_LOG_WARN);
	return 0;
}

static size_t knob_index(const char *name)
{
	for (size_t i = 0; i < gdrc_config_count(); i++)
		if (!strcmp(gdrc_config_desc(i)->name, name))
			return i;
	fail_msg("knob %s is not in the table", name);
	return 0;
}

/* Knobs filled with a pattern no parse produces. */
static void knobs_poison(struct gdrc_knobs *k)
{
	memset(k, 0xa5, sizeof(*k));
}

/* value must be refused, and must leave the knobs byte for byte. */
static void expect_rejected(const char *knob, const char *value)
{
	struct gdrc_knobs k, before;
	gdrc_status_t st;

	knobs_poison(&k);
	memcpy(&before, &k, sizeof(k));
	st = gdrc_config_parse(knob_index(knob), value, &k);
	if (st != GDRC_ERR_INVALID_PARAM)
		fail_msg("%s='%s': status %d, expected %d", knob, value, st,
			 GDRC_ERR_INVALID_PARAM);
	if (memcmp(&k, &before, sizeof(k)))
		fail_msg("%s='%s' rejected but changed the knobs", knob, value);
}

static uint64_t parse_size(const char *knob, const char *value)
{
	struct gdrc_knobs k;
	gdrc_status_t st;

	knobs_poison(&k);
	st = gdrc_config_parse(knob_index(knob), value, &k);
	if (st != GDRC_OK)
		fail_msg("%s='%s' refused (%d)", knob, value, st);
	return !strcmp(knob, "GDRC_MAX_BYTES") ? k.max_bytes : k.max_regions;
}

/* Parse an int-valued knob; the field starts at 0x5a5a5a5a. */
static int parse_int(const char *knob, const char *value)
{
	struct gdrc_knobs k;
	gdrc_status_t st;

	knobs_poison(&k);
	k.log_level = k.mem_hooks = k.backend = k.stats = k.check =
		0x5a5a5a5a;
	st = gdrc_config_parse(knob_index(knob), value, &k);
	if (st != GDRC_OK)
		fail_msg("%s='%s' refused (%d)", knob, value, st);
	if (!strcmp(knob, "GDRC_LOG_LEVEL"))
		return k.log_level;
	if (!strcmp(knob, "GDRC_MEM_HOOKS"))
		return k.mem_hooks;
	if (!strcmp(knob, "GDRC_BACKEND"))
		return k.backend;
	if (!strcmp(knob, "GDRC_STATS"))
		return k.stats;
	if (!strcmp(knob, "GDRC_CHECK"))
		return k.check;
	fail_msg("no int field for %s", knob);
	return -1;
}

static uint64_t ctx_stat(struct gdrc_ctx *ctx, enum gdrc_stat s)
{
	uint64_t v = UINT64_MAX;

	assert_int_equal(gdrc_stat_get(ctx, s, &v), GDRC_OK);
	return v;
}

/* ====================================================================
 * Defaults
 * ==================================================================== */

static void test_config_no_env_defaults(void **state)
{
	struct gdrc_knobs k, fromtable;

	(void)state;
	unset_all();
	knobs_poison(&k);
	assert_int_equal(gdrc_config_load(&k), GDRC_OK);

	assert_int_equal(k.log_level, GDRC_LOG_WARN);
	assert_true(k.max_regions == 16384);
	assert_true(k.max_bytes == UINT64_MAX);
	assert_true(k.max_bytes == GDRC_LIMIT_NONE);
	assert_int_equal(k.mem_hooks, GDRC_KNOB_HOOKS_AUTO);
	assert_int_equal(k.backend, GDRC_KNOB_BACKEND_AUTO);
	assert_int_equal(k.stats, 0);
	assert_int_equal(k.check, 0);

	/* The same as parsing each row's default in the table. */
	knobs_poison(&fromtable);
	for (size_t i = 0; i < gdrc_config_count(); i++) {
		const char *def = gdrc_config_desc(i)->defval;

		assert_int_equal(gdrc_config_parse(i, def, &fromtable),
				 GDRC_OK);
	}
	assert_int_equal(k.log_level, fromtable.log_level);
	assert_true(k.max_regions == fromtable.max_regions);
	assert_true(k.max_bytes == fromtable.max_bytes);
	assert_int_equal(k.mem_hooks, fromtable.mem_hooks);
	assert_int_equal(k.backend, fromtable.backend);
	assert_int_equal(k.stats, fromtable.stats);
	assert_int_equal(k.check, fromtable.check);
}

static void test_config_table_rows_complete(void **state)
{
	(void)state;
	assert_true(gdrc_config_count() >= 7);
	for (size_t i = 0; i < gdrc_config_count(); i++) {
		const struct gdrc_knob_desc *d = gdrc_config_desc(i);

		assert_non_null(d);
		assert_non_null(d->name);
		assert_int_equal(strncmp(d->name, "GDRC_", 5), 0);
		assert_non_null(d->defval);
		assert_non_null(d->help);
		assert_true(strlen(d->help) > 0);
		if (d->type == GDRC_KNOB_CHOICE)
			assert_non_null(d->choices);
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(d->name,
						gdrc_config_desc(j)->name);
	}
	assert_null(gdrc_config_desc(gdrc_config_count()));
	assert_null(gdrc_config_desc(SIZE_MAX));
}

/* Every knob set in the environment replaces its default. */
static void test_config_env_values_applied(void **state)
{
	struct gdrc_knobs k;

	(void)state;
	setenv("GDRC_LOG_LEVEL", "debug", 1);
	setenv("GDRC_MAX_REGIONS", "7", 1);
	setenv("GDRC_MAX_BYTES", "1M", 1);
	setenv("GDRC_MEM_HOOKS", "none", 1);
	setenv("GDRC_BACKEND", "verbs", 1);
	setenv("GDRC_STATS", "yes", 1);
	setenv("GDRC_CHECK", "on", 1);
	knobs_poison(&k);
	assert_int_equal(gdrc_config_load(&k), GDRC_OK);
	assert_int_equal(k.log_level, GDRC_LOG_DEBUG);
	assert_true(k.max_regions == 7);
	assert_true(k.max_bytes == 1024 * 1024);
	assert_int_equal(k.mem_hooks, GDRC_KNOB_HOOKS_NONE);
	assert_int_equal(k.backend, GDRC_KNOB_BACKEND_VERBS);
	assert_int_equal(k.stats, 1);
	assert_int_equal(k.check, 1);
	unset_all();
}

/* ====================================================================
 * Sizes
 * ==================================================================== */

static void test_config_size_valid_parsed(void **state)
{
	static const struct {
		const char *in;
		uint64_t want;
	} cases[] = {
		{ "0", 0 },
		{ "1", 1 },
		{ "007", 7 }, /* decimal, not octal */
		{ "16384", 16384 },
		{ "18446744073709551615", UINT64_MAX },
		{ "0K", 0 },
		{ "1K", 1024ULL },
		{ "1k", 1024ULL },
		{ "2M", 2ULL << 20 },
		{ "2m", 2ULL << 20 },
		{ "3G", 3ULL << 30 },
		{ "3g", 3ULL << 30 },
		{ "4T", 4ULL << 40 },
		{ "4t", 4ULL << 40 },
		{ "1000K", 1000ULL << 10 },
		/* Largest values each suffix can reach. */
		{ "18014398509481983K", 18014398509481983ULL << 10 },
		{ "17592186044415M", 17592186044415ULL << 20 },
		{ "17179869183G", 17179869183ULL << 30 },
		{ "16777215T", 16777215ULL << 40 },
		{ "inf", UINT64_MAX },
		{ "INF", UINT64_MAX },
		{ "Inf", UINT64_MAX },
		{ "unlimited", UINT64_MAX },
		{ "UNLIMITED", UINT64_MAX },
		{ "Unlimited", UINT64_MAX },
	};
	static const char *const knobs[] = { "GDRC_MAX_REGIONS",
					     "GDRC_MAX_BYTES" };

	(void)state;
	for (size_t j = 0; j < 2; j++) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			uint64_t got = parse_size(knobs[j], cases[i].in);

			if (got != cases[i].want)
				fail_msg("%s='%s': %llu, expected %llu",
					 knobs[j], cases[i].in,
					 (unsigned long long)got,
					 (unsigned long long)cases[i].want);
		}
	}
}

static void test_config_size_invalid_rejected_unchanged(void **state)
{
	static const char *const bad[] = {
		"",
		" 5",
		"\t5",
		"-1",
		"+1",
		"-0",
		"0x10",
		"12KB",
		"1KK",
		"1Ki",
		"1P",
		"1E",
		"1B",
		"1 K",
		"1.5G",
		"1e3",
		"1,000",
		"K",
		"T",
		"5\t",
		"5\n",
		"lots",
		"none",
		"in",
		"infinity",
		"inf ",
		"-inf",
		"18446744073709551616",   /* 2^64 */
		"99999999999999999999999",
		"18014398509481984K",     /* 2^64 */
		"17592186044416M",        /* 2^64 */
		"17179869184G",           /* 2^64 */
		"16777216T",              /* 2^64 */
		"17179869184T",           /* 2^74 */
		"18446744073709551615T",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		expect_rejected("GDRC_MAX_REGIONS", bad[i]);
		expect_rejected("GDRC_MAX_BYTES", bad[i]);
	}
}

/*
 * A trailing blank is no suffix.  parse_uint looks the character after
 * the digits up with strchr("KMGT", c & ~0x20); ' ' & ~0x20 is 0, which
 * strchr finds at the string's terminator, so "5 " would parse as
 * 5 * 1024^5.
 */
static void test_config_size_trailing_blank_rejected(void **state)
{
	(void)state;
	expect_rejected("GDRC_MAX_REGIONS", "5 ");
	expect_rejected("GDRC_MAX_BYTES", "5 ");
	expect_rejected("GDRC_MAX_BYTES", "0 ");
}

/* ====================================================================
 * Booleans
 * ==================================================================== */

static void test_config_bool_valid_parsed(void **state)
{
	static const char *const yes[] = {
		"1",  "y",   "Y",   "yes",  "YES",  "Yes", "yEs",
		"on", "ON",  "On",  "true", "TRUE", "True", "tRuE",
	};
	static const char *const no[] = {
		"0",   "n",   "N",   "no",    "NO",    "No",    "nO",
		"off", "OFF", "Off", "false", "FALSE", "False", "fAlSe",
	};
	static const char *const knobs[] = { "GDRC_STATS", "GDRC_CHECK" };

	(void)state;
	for (size_t j = 0; j < 2; j++) {
		for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
			if (parse_int(knobs[j], yes[i]) != 1)
				fail_msg("%s='%s' is not 1", knobs[j], yes[i]);
		for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
			if (parse_int(knobs[j], no[i]) != 0)
				fail_msg("%s='%s' is not 0", knobs[j], no[i]);
	}
}

static void test_config_bool_invalid_rejected_unchanged(void **state)
{
	static const char *const bad[] = {
		"",    "2",      "-1",    "10",     "01",  "00",   " 1",
		"1 ",  "t",      "f",     "ye",     "yess", "o",   "of",
		"offf", "enable", "disable", "yes ", "truee", "nope", "0x1",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		expect_rejected("GDRC_STATS", bad[i]);
		expect_rejected("GDRC_CHECK", bad[i]);
	}
}

/* ====================================================================
 * Choices
 * ==================================================================== */

static void test_config_choice_any_case_parsed(void **state)
{
	(void)state;
	assert_int_equal(parse_int("GDRC_MEM_HOOKS", "auto"),
			 GDRC_KNOB_HOOKS_AUTO);
	assert_int_equal(parse_int("GDRC_MEM_HOOKS", "AUTO"),
			 GDRC_KNOB_HOOKS_AUTO);
	assert_int_equal(parse_int("GDRC_MEM_HOOKS", "Auto"),
			 GDRC_KNOB_HOOKS_AUTO);
	assert_int_equal(parse_int("GDRC_MEM_HOOKS", "none"),
			 GDRC_KNOB_HOOKS_NONE);
	assert_int_equal(parse_int("GDRC_MEM_HOOKS", "NONE"),
			 GDRC_KNOB_HOOKS_NONE);
	assert_int_equal(parse_int("GDRC_MEM_HOOKS", "nOnE"),
			 GDRC_KNOB_HOOKS_NONE);

	assert_int_equal(parse_int("GDRC_BACKEND", "auto"),
			 GDRC_KNOB_BACKEND_AUTO);
	assert_int_equal(parse_int("GDRC_BACKEND", "AuTo"),
			 GDRC_KNOB_BACKEND_AUTO);
	assert_int_equal(parse_int("GDRC_BACKEND", "verbs"),
			 GDRC_KNOB_BACKEND_VERBS);
	assert_int_equal(parse_int("GDRC_BACKEND", "VERBS"),
			 GDRC_KNOB_BACKEND_VERBS);
	assert_int_equal(parse_int("GDRC_BACKEND", "Verbs"),
			 GDRC_KNOB_BACKEND_VERBS);
	assert_int_equal(parse_int("GDRC_BACKEND", "none"),
			 GDRC_KNOB_BACKEND_NONE);
	assert_int_equal(parse_int("GDRC_BACKEND", "NONE"),
			 GDRC_KNOB_BACKEND_NONE);
}

static void test_config_choice_invalid_rejected_unchanged(void **state)
{
	static const char *const bad_hooks[] = {
		"",      "a",     "au",    "aut",  "autox", "auto ", " auto",
		"none ", "non",   "nonee", "0",    "1",     "|",     "auto|",
		"auto|none", "verbs", "off",  "yes",
	};
	static const char *const bad_backend[] = {
		"",      "v",     "verb",   "verbss", "verbs ", " none",
		"0",     "1",     "2",      "|",      "auto|verbs",
		"auto|verbs|none", "ibverbs", "dmabuf,", ",dmabuf",
		"dmabuf,,kmod", "dmabuf kmod", "auto,dmabuf", "dmabuf,auto",
		"verbs,none", "none,verbs", "dmabuf,dmabuf",
		"dmabuf,peermem,kmod,none,dmabuf", "peermem;kmod",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad_hooks) / sizeof(bad_hooks[0]); i++)
		expect_rejected("GDRC_MEM_HOOKS", bad_hooks[i]);
	for (size_t i = 0; i < sizeof(bad_backend) / sizeof(bad_backend[0]);
	     i++)
		expect_rejected("GDRC_BACKEND", bad_backend[i]);
}

/* ====================================================================
 * Log levels
 * ==================================================================== */

static void test_config_level_names_digits_parsed(void **state)
{
	static const struct {
		const char *in;
		int want;
	} cases[] = {
		{ "error", GDRC_LOG_ERROR }, { "ERROR", GDRC_LOG_ERROR },
		{ "warn", GDRC_LOG_WARN },   { "Warn", GDRC_LOG_WARN },
		{ "info", GDRC_LOG_INFO },   { "INFO", GDRC_LOG_INFO },
		{ "debug", GDRC_LOG_DEBUG }, { "DeBuG", GDRC_LOG_DEBUG },
		{ "trace", GDRC_LOG_TRACE }, { "TRACE", GDRC_LOG_TRACE },
		{ "0", GDRC_LOG_ERROR },     { "1", GDRC_LOG_WARN },
		{ "2", GDRC_LOG_INFO },      { "3", GDRC_LOG_DEBUG },
		{ "4", GDRC_LOG_TRACE },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int got = parse_int("GDRC_LOG_LEVEL", cases[i].in);

		if (got != cases[i].want)
			fail_msg("GDRC_LOG_LEVEL='%s': %d, expected %d",
				 cases[i].in, got, cases[i].want);
	}
}

static void test_config_level_invalid_rejected_unchanged(void **state)
{
	static const char *const bad[] = {
		"",      "5",     "9",      "-1",    "00",    "04",  "01",
		" 1",    "1 ",    "warning", "err",  "warn ", " warn", "fatal",
		"none",  "all",   "tracee", "w",     "e",     "0x1", "+1",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_rejected("GDRC_LOG_LEVEL", bad[i]);
}

/* ====================================================================
 * Bad environment values
 * ==================================================================== */

static void test_config_env_invalid_load_fails_logged(void **state)
{
	struct gdrc_knobs k;

	(void)state;
	setenv("GDRC_MAX_REGIONS", "lots", 1);
	capture_start();
	assert_int_equal(gdrc_config_load(&k), GDRC_ERR_INVALID_PARAM);
	assert_true(log_calls >= 1);
	assert_int_equal(log_worst, GDRC_LOG_ERROR);
	assert_non_null(strstr(log_text, "GDRC_MAX_REGIONS"));
	assert_non_null(strstr(log_text, "lots"));
	unset_all();
}

static void test_config_string_empty_or_too_long_rejected(void **state)
{
	size_t i = knob_index("GDRC_CUDA_LIBRARY");
	char longval[GDRC_KNOB_STR_MAX + 1];
	struct gdrc_knobs k;

	(void)state;
	memset(&k, 0, sizeof(k));
	assert_int_equal(gdrc_config_parse(i, "/opt/libcuda.so", &k), GDRC_OK);
	assert_string_equal(k.cuda_library, "/opt/libcuda.so");
	assert_int_equal(gdrc_config_parse(i, "", &k), GDRC_ERR_INVALID_PARAM);
	memset(longval, 'x', sizeof(longval) - 1);
	longval[sizeof(longval) - 1] = '\0';
	assert_int_equal(gdrc_config_parse(i, longval, &k),
			 GDRC_ERR_INVALID_PARAM);
	assert_string_equal(k.cuda_library, "/opt/libcuda.so");
}

/* Whichever knob is bad, the log line names that knob.  (A string knob
 * takes any text; its bad value is the empty string.) */
static void test_config_env_each_invalid_knob_named(void **state)
{
	struct gdrc_knobs k;

	(void)state;
	for (size_t i = 0; i < gdrc_config_count(); i++) {
		const char *name = gdrc_config_desc(i)->name;

		if (gdrc_config_desc(i)->type == GDRC_KNOB_STRING)
			continue;

		unset_all();
		assert_int_equal(setenv(name, "bogus-value", 1), 0);
		capture_start();
		if (gdrc_config_load(&k) != GDRC_ERR_INVALID_PARAM)
			fail_msg("%s=bogus-value accepted", name);
		if (!strstr(log_text, name) ||
		    !strstr(log_text, "bogus-value"))
			fail_msg("log for bad %s does not name it: '%s'", name,
				 log_text);
		/* Only the bad knob is named. */
		for (size_t j = 0; j < gdrc_config_count(); j++) {
			const char *other = gdrc_config_desc(j)->name;

			if (j != i && strstr(log_text, other) &&
			    !strstr(name, other))
				fail_msg("log for bad %s names %s: '%s'", name,
					 other, log_text);
		}
	}
	unset_all();
}

static void test_config_init_env_invalid_ctx_untouched(void **state)
{
	struct gdrc_ctx *ctx = CTX_SENTINEL;

	(void)state;
	setenv("GDRC_MAX_REGIONS", "lots", 1);
	capture_start();
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_ERR_INVALID_PARAM);
	assert_ptr_equal(ctx, CTX_SENTINEL);
	assert_non_null(strstr(log_text, "GDRC_MAX_REGIONS"));
	assert_non_null(strstr(log_text, "lots"));

	/* Also when a cfg is given: the environment is still read. */
	{
		struct gdrc_config cfg = {
			.field_mask = GDRC_CONFIG_FIELD_MAX_BYTES,
			.max_bytes = 1 << 20,
		};

		assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_ERR_INVALID_PARAM);
		assert_ptr_equal(ctx, CTX_SENTINEL);
	}
	unset_all();
}

static void test_config_init_unknown_field_invalid(void **state)
{
	static const uint64_t bad_bits[] = { 1ULL << 63, 1ULL << 3,
					     GDRC_CONFIG_FIELD_MAX_REGIONS |
						     (1ULL << 40) };
	struct gdrc_ctx *ctx = CTX_SENTINEL;

	(void)state;
	assert_int_equal(setenv("GDRC_MEM_HOOKS", "none", 1), 0);
	for (size_t i = 0; i < sizeof(bad_bits) / sizeof(bad_bits[0]); i++) {
		struct gdrc_config cfg = {
			.field_mask = bad_bits[i],
			.max_regions = 4,
		};

		assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_ERR_INVALID_PARAM);
		assert_ptr_equal(ctx, CTX_SENTINEL);
	}
	unset_all();
}

/* ====================================================================
 * gdrc_config fields and the environment
 * ==================================================================== */

/* Get and put one page at each of pages 0, 2, 4 (never adjacent, so no
 * merging).  @return status of the first get that failed, or GDRC_OK. */
static gdrc_status_t get_put_three_pages(struct gdrc_ctx *ctx, char *buf,
					 size_t pg)
{
	for (int i = 0; i < 3; i++) {
		struct gdrc_mr *mr = NULL;
		gdrc_status_t st;

		st = gdrc_mr_get(ctx, buf + (size_t)(2 * i) * pg, pg, 0, 0,
				 &mr);
		if (st)
			return st;
		assert_non_null(mr);
		gdrc_mr_put(ctx, mr);
	}
	return GDRC_OK;
}

static void test_config_cfg_max_regions_overrides_env(void **state)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_MAX_REGIONS,
		.max_regions = 2,
	};
	struct gdrc_ctx *ctx = NULL;
	char *buf;

	(void)state;
	buf = mmap(NULL, 6 * pg, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(buf != MAP_FAILED);
	setenv("GDRC_MAX_REGIONS", "5", 1);
	setenv("GDRC_MEM_HOOKS", "none", 1);

	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_OK);
	assert_non_null(ctx);
	assert_int_equal(get_put_three_pages(ctx, buf, pg), GDRC_OK);
	assert_true(ctx_stat(ctx, GDRC_STAT_REGIONS) == 2);
	assert_true(ctx_stat(ctx, GDRC_STAT_EVICTIONS) == 1);
	gdrc_fini(ctx);

	/* Control: without the field the environment's 5 applies. */
	ctx = NULL;
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	assert_int_equal(get_put_three_pages(ctx, buf, pg), GDRC_OK);
	assert_true(ctx_stat(ctx, GDRC_STAT_REGIONS) == 3);
	assert_true(ctx_stat(ctx, GDRC_STAT_EVICTIONS) == 0);
	gdrc_fini(ctx);

	munmap(buf, 6 * pg);
	unset_all();
}

/* A value in a field whose bit is clear is ignored. */
static void test_config_cfg_field_bit_clear_env_used(void **state)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	struct gdrc_config cfg = {
		.field_mask = 0,
		.max_regions = 1,
		.max_bytes = 1,
	};
	struct gdrc_ctx *ctx = NULL;
	char *buf;

	(void)state;
	buf = mmap(NULL, 6 * pg, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(buf != MAP_FAILED);
	setenv("GDRC_MAX_REGIONS", "2", 1);
	setenv("GDRC_MEM_HOOKS", "none", 1);

	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_OK);
	assert_int_equal(get_put_three_pages(ctx, buf, pg), GDRC_OK);
	assert_true(ctx_stat(ctx, GDRC_STAT_REGIONS) == 2);
	assert_true(ctx_stat(ctx, GDRC_STAT_EVICTIONS) == 1);
	gdrc_fini(ctx);

	munmap(buf, 6 * pg);
	unset_all();
}

static void test_config_cfg_max_bytes_overrides_env(void **state)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_MAX_BYTES,
		.max_bytes = 0,
	};
	struct gdrc_mr *a = NULL, *b = NULL;
	struct gdrc_ctx *ctx = NULL;
	char *buf;

	(void)state;
	cfg.max_bytes = pg;
	buf = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(buf != MAP_FAILED);
	setenv("GDRC_MAX_BYTES", "inf", 1);
	setenv("GDRC_MEM_HOOKS", "none", 1);

	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_OK);
	assert_int_equal(gdrc_mr_get(ctx, buf, pg, 0, 0, &a), GDRC_OK);
	/* One page in use already: a second cannot fit. */
	assert_int_equal(gdrc_mr_get(ctx, buf + 2 * pg, pg, 0, 0, &b),
			 GDRC_ERR_LIMIT);
	assert_null(b);
	gdrc_mr_put(ctx, a);
	gdrc_fini(ctx);

	munmap(buf, 4 * pg);
	unset_all();
}

/* ====================================================================
 * Backend
 * ==================================================================== */

static void test_config_verbs_without_pd_unsupported(void **state)
{
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_PD,
		.pd = NULL,
	};
	struct gdrc_ctx *ctx = CTX_SENTINEL;

	(void)state;
	setenv("GDRC_BACKEND", "verbs", 1);
	setenv("GDRC_MEM_HOOKS", "none", 1);
	capture_start();
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_ERR_UNSUPPORTED);
	assert_ptr_equal(ctx, CTX_SENTINEL);
	/* A PD field that is set but NULL is no PD either. */
	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_ERR_UNSUPPORTED);
	assert_ptr_equal(ctx, CTX_SENTINEL);
	assert_non_null(strstr(log_text, "GDRC_BACKEND"));
	unset_all();
}

/* GDRC_BACKEND lists: entries in order, four bits each. */
static void test_config_backend_list_parsed(void **state)
{
	(void)state;
	assert_int_equal(parse_int("GDRC_BACKEND", "auto"),
			 GDRC_KNOB_BACKEND_AUTO);
	assert_int_equal(parse_int("GDRC_BACKEND", "dmabuf"),
			 GDRC_KNOB_BACKEND_DMABUF);
	assert_int_equal(parse_int("GDRC_BACKEND", "peermem,kmod"),
			 GDRC_KNOB_BACKEND_PEERMEM |
				 GDRC_KNOB_BACKEND_KMOD << 4);
	assert_int_equal(parse_int("GDRC_BACKEND", "KMOD,none,dmabuf,peermem"),
			 GDRC_KNOB_BACKEND_KMOD | GDRC_KNOB_BACKEND_NONE << 4 |
				 GDRC_KNOB_BACKEND_DMABUF << 8 |
				 GDRC_KNOB_BACKEND_PEERMEM << 12);
	assert_int_equal(gdrc_knob_list_at(0x654, 0), 4);
	assert_int_equal(gdrc_knob_list_at(0x654, 2), 6);
	assert_int_equal(gdrc_knob_list_at(0x654, 3), 0);
	assert_int_equal(gdrc_knob_list_at(0x654, GDRC_KNOB_LIST_MAX), 0);
}

/* auto without a PD is the none backend: keys are 0. */
static void test_config_backend_auto_no_pd_none(void **state)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	struct gdrc_mr_info info;
	struct gdrc_ctx *ctx = NULL;
	struct gdrc_mr *mr = NULL;
	char *buf;

	(void)state;
	buf = mmap(NULL, pg, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(buf != MAP_FAILED);
	setenv("GDRC_BACKEND", "auto", 1);
	setenv("GDRC_MEM_HOOKS", "none", 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	assert_int_equal(gdrc_mr_get(ctx, buf, pg, 0, 0, &mr), GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, &info), GDRC_OK);
	assert_int_equal(info.backend, GDRC_BACKEND_NONE);
	assert_int_equal(info.lkey, 0);
	assert_int_equal(info.rkey, 0);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	munmap(buf, pg);
	unset_all();
}

/* ====================================================================
 * docs/env.md
 * ==================================================================== */

#define ENV_MD_MAX_ROWS 64

struct env_row {
	char name[64];
	char defval[64];
};

/* Copy the text between the next pair of backticks at or after *p. */
static int take_backticked(const char **p, char *out, size_t outlen)
{
	const char *a = strchr(*p, '`'), *b;

	if (!a)
		return -1;
	b = strchr(a + 1, '`');
	if (!b || (size_t)(b - a - 1) >= outlen)
		return -1;
	memcpy(out, a + 1, (size_t)(b - a - 1));
	out[b - a - 1] = '\0';
	*p = b + 1;
	return 0;
}

static size_t read_env_md(struct env_row *rows)
{
	const char *path = GDRC_SOURCE_DIR "/docs/env.md";
	char line[4096];
	size_t n = 0;
	FILE *f;

	f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s", path);
	while (fgets(line, sizeof(line), f)) {
		const char *p = line, *bar;

		if (strncmp(line, "| `GDRC_", 8))
			continue;
		assert_true(n < ENV_MD_MAX_ROWS);
		if (take_backticked(&p, rows[n].name, sizeof(rows[n].name)))
			fail_msg("env.md: bad name column: %s", line);
		/* The default is in the second column. */
		bar = strchr(p, '|');
		if (!bar)
			fail_msg("env.md: one column only: %s", line);
		p = bar + 1;
		bar = strchr(p, '|');
		if (take_backticked(&p, rows[n].defval,
				    sizeof(rows[n].defval)) ||
		    (bar && p > bar))
			fail_msg("env.md: no `default` in column 2: %s", line);
		n++;
	}
	fclose(f);
	return n;
}

static void test_config_env_md_matches_table(void **state)
{
	struct env_row rows[ENV_MD_MAX_ROWS];
	size_t n;

	(void)state;
	n = read_env_md(rows);
	assert_true(n > 0);

	for (size_t i = 0; i < gdrc_config_count(); i++) {
		const struct gdrc_knob_desc *d = gdrc_config_desc(i);
		int seen = 0;

		for (size_t j = 0; j < n; j++) {
			if (strcmp(rows[j].name, d->name))
				continue;
			seen++;
			if (strcmp(rows[j].defval, d->defval))
				fail_msg("%s: env.md default '%s', table '%s'",
					 d->name, rows[j].defval, d->defval);
		}
		if (seen != 1)
			fail_msg("%s appears %d times in docs/env.md", d->name,
				 seen);
	}
	for (size_t j = 0; j < n; j++) {
		size_t i;

		for (i = 0; i < gdrc_config_count(); i++)
			if (!strcmp(rows[j].name, gdrc_config_desc(i)->name))
				break;
		if (i == gdrc_config_count())
			fail_msg("docs/env.md lists %s, the table does not",
				 rows[j].name);
	}
	assert_int_equal(n, gdrc_config_count());
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_config_no_env_defaults),
		T(test_config_table_rows_complete),
		T(test_config_env_values_applied),
		T(test_config_size_valid_parsed),
		T(test_config_size_invalid_rejected_unchanged),
		T(test_config_size_trailing_blank_rejected),
		T(test_config_bool_valid_parsed),
		T(test_config_bool_invalid_rejected_unchanged),
		T(test_config_choice_any_case_parsed),
		T(test_config_choice_invalid_rejected_unchanged),
		T(test_config_level_names_digits_parsed),
		T(test_config_level_invalid_rejected_unchanged),
		T(test_config_env_invalid_load_fails_logged),
		T(test_config_env_each_invalid_knob_named),
		T(test_config_string_empty_or_too_long_rejected),
		T(test_config_init_env_invalid_ctx_untouched),
		T(test_config_init_unknown_field_invalid),
		T(test_config_cfg_max_regions_overrides_env),
		T(test_config_cfg_field_bit_clear_env_used),
		T(test_config_cfg_max_bytes_overrides_env),
		T(test_config_verbs_without_pd_unsupported),
		T(test_config_backend_auto_no_pd_none),
		T(test_config_backend_list_parsed),
		T(test_config_env_md_matches_table),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
