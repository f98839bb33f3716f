// SPDX-License-Identifier: BSD-3-Clause
/*
 * api_query.c - the calls that report: what a handle is (gdrc_mr_query,
 * gdrc_mr_lkey, gdrc_mr_rkey) and what a pointer is (gdrc_ptr_query);
 * the statistics (gdrc_stat_get, gdrc_stats_dump, gdrc_device_stat_get);
 * which backends and the GPU serve a context and why not
 * (gdrc_backend_status, gdrc_gpu_status; the event sources report in
 * api_sources.c); the knobs (gdrc_knob_describe, gdrc_knob_value) and
 * gdrc_log_printf.  And two calls that are not queries but have no better
 * home: gdrc_release_unused (drops the registrations nobody holds) and
 * gdrc_set_free_fn (a cuFile context's free callback).
 *
 * Each checks its arguments, then reads what init recorded in the
 * context or asks the module that knows; none changes what the context
 * caches but gdrc_release_unused.  A handle that is not live is a misuse
 * (mr_live).  No lock of this file's own: the cache's are taken inside
 * the cache (cache.h), and gdrc_set_free_fn takes the cuFile contexts'
 * (api_cufile.c).  Never called in hook context.  Callers: the program,
 * gdrc-info.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "cache/cache.h"
#include "classify/classify.h"
#include "config/config.h"
#include "gdrc_int.h"
#include "hooks/hooks.h"
#include "log/log.h"
#include "stats/stats.h"

/* ------------------------------------------------------------------
 * Handles and pointers.
 * ------------------------------------------------------------------ */

/* Is mr a live registration or handle?  Else a misuse, in call. */
static inline int mr_live(const struct gdrc_mr *mr, const char *call)
{
	if (gdrc_likely(gdrc_mr_live(mr)))
		return 1;
	gdrc_api_misuse(call, "handle %p " MR_NOT_LIVE, (const void *)mr);
	return 0;
}

GDRC_API gdrc_status_t gdrc_mr_query(const struct gdrc_mr *mr,
				     struct gdrc_mr_info *info_p)
{
	const struct gdrc_region *r;
	uint64_t w;

	if (!mr || !info_p || !mr_live(mr, __func__))
		return GDRC_ERR_INVALID_PARAM;
	r = gdrc_mr_region(mr);
	w = atomic_load_explicit(&((struct gdrc_region *)r)->word,
				 memory_order_acquire);
	memset(info_p, 0, sizeof(*info_p));
	info_p->id = gdrc_region_cold(r)->id;
	info_p->addr = gdrc_region_reg_start(r);
	info_p->length = gdrc_region_reg_len(r);
	info_p->key_addr = r->start;
	info_p->key_length = r->end - r->start;
	info_p->kind = r->kind;
	info_p->buffer_id = gdrc_region_ext(r)->buffer_id;
	info_p->flags = gdrc_region_ext(r)->info_flags |
			(r->kern ? GDRC_MR_INFO_KMOD : 0) |
			(r->tag_check ? GDRC_MR_INFO_TAG_CHECKED : 0);
	info_p->mem_type = r->mem_type;
	info_p->backend = gdrc_cache_ops_for(r->cache, r->mem_type,
						    NULL)->backend;
	info_p->device = gdrc_region_ext(r)->device;
	info_p->access = r->access;
	info_p->lkey = r->lkey;
	info_p->rkey = r->rkey;
	if (!(w & REGION_INVALID))
		info_p->flags |= GDRC_MR_INFO_CACHED;
	else if (r->was_cached)
		info_p->flags |= GDRC_MR_INFO_INVALIDATED;
	return GDRC_OK;
}

GDRC_API uint32_t gdrc_mr_lkey(const struct gdrc_mr *mr)
{
	return mr && mr_live(mr, __func__) ? gdrc_mr_region(mr)->lkey : 0;
}

GDRC_API uint32_t gdrc_mr_rkey(const struct gdrc_mr *mr)
{
	return mr && mr_live(mr, __func__) ? gdrc_mr_region(mr)->rkey : 0;
}

GDRC_API gdrc_status_t gdrc_ptr_query(struct gdrc_ctx *pub, const void *ptr,
				      struct gdrc_ptr_info *info_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);
	uintptr_t p = (uintptr_t)ptr;
	struct gdrc_region *r;
	struct gdrc_class cls;
	gdrc_status_t status;
	int ret;

	if (!ctx || !ptr || !info_p || !range_ok(ptr, 1))
		return GDRC_ERR_INVALID_PARAM;
	gdrc_hooks_wait_idle();
	ret = gdrc_cache_peek(&ctx->cache, p, p + 1, &r);
	if (ret < 0)
		return (gdrc_status_t)ret;
	if (ret) {
		/* A registration over several VMM mappings: the one holding
		 * ptr, as classification would answer. */
		struct gdrc_seg seg = gdrc_cache_seg_of(r, p);

		memset(info_p, 0, sizeof(*info_p));
		info_p->mem_type = r->mem_type;
		info_p->kind = r->kind;
		info_p->device = gdrc_region_ext(r)->device;
		info_p->flags = GDRC_PTR_INFO_CACHED;
		info_p->buffer_id = seg.buffer_id;
		info_p->alloc_base = seg.start;
		info_p->alloc_size = seg.end - seg.start;
		gdrc_cache_region_put(&ctx->cache, r);
		return GDRC_OK;
	}
	if (ctx->cuda)
		gdrc_cache_stat_add(&ctx->cache, GDRC_STAT_CLASSIFY_CALLS, 1);
	status = gdrc_classify(ctx->cuda, p, &cls);
	if (!status)
		*info_p = cls.info;
	return status;
}

/* ------------------------------------------------------------------
 * Statistics.
 * ------------------------------------------------------------------ */

GDRC_API gdrc_status_t gdrc_stat_get(struct gdrc_ctx *pub, enum gdrc_stat stat,
				     uint64_t *value_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);
	uint64_t v[GDRC_STAT_COUNT];

	if (!ctx || !value_p || (unsigned)stat >= GDRC_STAT_COUNT)
		return GDRC_ERR_INVALID_PARAM;
	if (atomic_load_explicit(&ctx->cache.forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	gdrc_api_ctx_stats_settled(ctx, v);
	*value_p = v[stat];
	return GDRC_OK;
}

GDRC_API gdrc_status_t gdrc_stats_dump(struct gdrc_ctx *pub,
				       enum gdrc_dump_format format, char *buf,
				       size_t buflen, size_t *needed_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);
	uint64_t v[GDRC_STAT_COUNT];

	if (!ctx || (format != GDRC_DUMP_TEXT && format != GDRC_DUMP_JSON) ||
	    (!buf && buflen))
		return GDRC_ERR_INVALID_PARAM;
	if (atomic_load_explicit(&ctx->cache.forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	gdrc_api_ctx_stats_settled(ctx, v);
	return gdrc_stats_format(v, format, buf, buflen, needed_p);
}

GDRC_API gdrc_status_t gdrc_device_stat_get(struct gdrc_ctx *pub, int device,
					    enum gdrc_device_stat stat,
					    uint64_t *value_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);

	if (!ctx || !value_p || (unsigned)stat >= GDRC_DEVICE_STAT_COUNT ||
	    device < GDRC_DEVICE_ALL || device >= GDRC_MAX_DEVICES)
		return GDRC_ERR_INVALID_PARAM;
	*value_p = gdrc_cache_dev_stat(&ctx->cache, device, stat);
	return GDRC_OK;
}

/* ------------------------------------------------------------------
 * What serves the context: backends, the GPU.
 * ------------------------------------------------------------------ */

GDRC_API gdrc_status_t gdrc_backend_status(struct gdrc_ctx *pub,
					   enum gdrc_backend backend,
					   const char **reason_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);

	if (!ctx || (unsigned)backend >= GDRC_BACKENDS)
		return GDRC_ERR_INVALID_PARAM;
	if (reason_p)
		*reason_p = ctx->be_used[backend] ? NULL :
						    ctx->be_why[backend];
	return ctx->be_used[backend] ? GDRC_OK : GDRC_ERR_UNSUPPORTED;
}

GDRC_API gdrc_status_t gdrc_gpu_status(struct gdrc_ctx *pub,
				       const char **reason_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);

	if (!ctx)
		return GDRC_ERR_INVALID_PARAM;
	if (reason_p)
		*reason_p = ctx->cuda ? NULL : ctx->gpu_reason;
	return ctx->cuda ? GDRC_OK : GDRC_ERR_NO_DEVICE;
}

/* ------------------------------------------------------------------
 * Knobs and the log, process-wide.
 * ------------------------------------------------------------------ */

GDRC_API gdrc_status_t gdrc_knob_describe(unsigned index,
					  const char **name_p,
					  const char **default_p,
					  const char **help_p)
{
	const struct gdrc_knob_desc *d = gdrc_config_desc(index);

	if (!name_p || !default_p || !help_p)
		return GDRC_ERR_INVALID_PARAM;
	if (!d)
		return GDRC_ERR_LIMIT;
	*name_p = d->name;
	*default_p = d->defval;
	*help_p = d->help;
	return GDRC_OK;
}

GDRC_API gdrc_status_t gdrc_knob_value(const char *name, char *buf,
				       size_t len)
{
	const struct gdrc_knob_desc *d = NULL;
	struct gdrc_knobs knobs;
	const char *v;
	size_t i, n;

	if (!name || !buf || !len)
		return GDRC_ERR_INVALID_PARAM;
	for (i = 0; (d = gdrc_config_desc(i)); i++)
		if (!strcmp(d->name, name))
			break;
	if (!d)
		return GDRC_ERR_INVALID_PARAM;
	v = getenv(name);
	if (!v)
		v = d->defval;
	if (gdrc_config_parse(i, v, &knobs))
		return GDRC_ERR_INVALID_PARAM;
	if (d->type == GDRC_KNOB_BOOL)
		v = *(const int *)((const char *)&knobs + d->offset) ? "1" : "0";
	n = strlen(v);
	if (n >= len)
		return GDRC_ERR_LIMIT;
	memcpy(buf, v, n + 1);
	return GDRC_OK;
}

GDRC_API void gdrc_log_printf(enum gdrc_log_level level, const char *fmt,
			      ...)
{
	va_list ap;

	if ((unsigned)level > GDRC_LOG_TRACE || !fmt ||
	    (int)level > atomic_load_explicit(&gdrc_log_level_cur,
					      memory_order_relaxed))
		return;
	va_start(ap, fmt);
	gdrc_log_vwrite(level, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------
 * Housekeeping: unused registrations, the free callback.
 * ------------------------------------------------------------------ */

GDRC_API gdrc_status_t gdrc_release_unused(struct gdrc_ctx *pub, int device,
					   uint64_t *released_p)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);

	if (!ctx || device < GDRC_DEVICE_ALL)
		return GDRC_ERR_INVALID_PARAM;
	return gdrc_cache_release_unused(&ctx->cache, device, released_p);
}

GDRC_API gdrc_status_t gdrc_set_free_fn(struct gdrc_ctx *pub, gdrc_free_fn fn,
					void *arg)
{
	struct gdrc_ctx *ctx = ctx_open(pub, __func__);

	if (!ctx)
		return GDRC_ERR_INVALID_PARAM;
	if (atomic_load_explicit(&ctx->cache.forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	/* The CUDA free hooks need to be installed, not yet tested: the
	 * self test waits for a CUDA context, and if it fails later every
	 * free goes through the flush anyway. */
	if (!ctx->cufile || !ctx->cuda_hooks || !gdrc_cuhooks_active())
		return GDRC_ERR_UNSUPPORTED;
	gdrc_api_cufile_set_free(ctx, fn, arg);
	return GDRC_OK;
}
