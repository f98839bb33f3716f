// SPDX-License-Identifier: BSD-3-Clause
/*
 * header_alone.c - the public header compiles on its own, as strict C99
 * (-std=c99 -pedantic -Werror), with no other header before it: every
 * type it uses (size_t, uint64_t, ...) comes from gdrcache.h itself.
 * Built as an object only; nothing runs.
 */
#include <gdrcache.h>

/* Compile-time checks, C99 style: a negative array size fails. */
typedef char header_alone_version_ok[GDRC_VERSION ==
					     ((GDRC_VERSION_MAJOR << 16) |
					      (GDRC_VERSION_MINOR << 8) |
					      GDRC_VERSION_PATCH) ?
				     1 :
				     -1];
typedef char header_alone_limit_ok[GDRC_LIMIT_NONE == UINT64_MAX ? 1 : -1];
typedef char header_alone_stats_ok[GDRC_STAT_COUNT > 0 ? 1 : -1];

const char *header_alone_status(void);
size_t header_alone_config_size(void);
gdrc_status_t header_alone_use(const void *addr, size_t len);
void header_alone_sink(enum gdrc_log_level level, const char *msg,
		       void *arg);

const char *header_alone_status(void)
{
	return gdrc_status_str(GDRC_OK);
}

size_t header_alone_config_size(void)
{
	return sizeof(struct gdrc_config) + sizeof(struct gdrc_mr_info);
}

void header_alone_sink(enum gdrc_log_level level, const char *msg,
		       void *arg)
{
	(void)level;
	(void)msg;
	(void)arg;
}

gdrc_status_t header_alone_use(const void *addr, size_t len)
{
	struct gdrc_config cfg = { 0 };
	struct gdrc_ctx *ctx = NULL;
	struct gdrc_mr_info info;
	struct gdrc_mr *mr = NULL;
	gdrc_log_fn fn = header_alone_sink;
	uint64_t hits = 0;
	gdrc_status_t st;
	char buf[64];

	cfg.field_mask = GDRC_CONFIG_FIELD_MAX_REGIONS;
	cfg.max_regions = GDRC_LIMIT_NONE;
	gdrc_log_set_handler(fn, NULL);
	st = gdrc_init(&cfg, &ctx);
	if (st != GDRC_OK)
		return st;
	st = gdrc_mr_get(ctx, addr, len,
			 GDRC_ACCESS_LOCAL_WRITE | GDRC_ACCESS_REMOTE_READ,
			 GDRC_GET_UNCACHED, &mr);
	if (st == GDRC_OK) {
		st = gdrc_mr_query(mr, &info);
		if (st == GDRC_OK && info.mem_type != GDRC_MEM_HOST)
			st = GDRC_ERR_UNSUPPORTED;
		gdrc_mr_put(ctx, mr);
	}
	if (st == GDRC_OK)
		st = gdrc_stat_get(ctx, GDRC_STAT_HITS, &hits);
	if (st == GDRC_OK)
		st = gdrc_stats_dump(ctx, GDRC_DUMP_JSON, buf, sizeof(buf),
				     NULL);
	gdrc_fini(ctx);
	return st;
}
