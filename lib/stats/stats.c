// SPDX-License-Identifier: BSD-3-Clause
/*
 * stats.c - names of the counters and their dumps.  No state, no lock.
 */
#include <stdarg.h>
#include <stdio.h>

#include "gdrc_int.h"
#include "stats.h"

/* A test checks that every counter has a name. */
static const char *const stat_names[GDRC_STAT_COUNT] = {
	[GDRC_STAT_HITS] = "hits",
	[GDRC_STAT_MISSES] = "misses",
	[GDRC_STAT_EVICTIONS] = "evictions",
	[GDRC_STAT_INVALIDATIONS] = "invalidations",
	[GDRC_STAT_REGIONS] = "regions",
	[GDRC_STAT_PINNED_BYTES] = "pinned_bytes",
	[GDRC_STAT_MISS_COLD] = "miss_cold",
	[GDRC_STAT_MISS_EVICTED] = "miss_evicted",
	[GDRC_STAT_MISS_INVALIDATED] = "miss_invalidated",
	[GDRC_STAT_MISS_TOO_SMALL] = "miss_too_small",
	[GDRC_STAT_MISS_ACCESS] = "miss_access",
	[GDRC_STAT_MISS_UNCACHED] = "miss_uncached",
	[GDRC_STAT_PUTS] = "puts",
	[GDRC_STAT_REG_FAILURES] = "reg_failures",
	[GDRC_STAT_DEREGS] = "deregs",
	[GDRC_STAT_PINNED_BYTES_MAX] = "pinned_bytes_max",
	[GDRC_STAT_INV_EXPLICIT] = "inv_explicit",
	[GDRC_STAT_INV_HOST_HOOK] = "inv_host_hook",
	[GDRC_STAT_MEM_EVENTS] = "mem_events",
	[GDRC_STAT_INVQ_MERGES] = "invq_merges",
	[GDRC_STAT_LIMIT_REJECTS] = "limit_rejects",
	[GDRC_STAT_INV_TAG_CHECK] = "inv_tag_check",
	[GDRC_STAT_TAG_CHECKS] = "tag_checks",
	[GDRC_STAT_SYNC_MEMOPS_SET] = "sync_memops_set",
	[GDRC_STAT_CLASSIFY_CALLS] = "classify_calls",
	[GDRC_STAT_INV_KMOD] = "inv_kmod",
	[GDRC_STAT_INV_CUDA_HOOK] = "inv_cuda_hook",
	[GDRC_STAT_CUDA_EVENTS] = "cuda_events",
	[GDRC_STAT_OOM_RETRIES] = "oom_retries",
	[GDRC_STAT_UCM_EVENTS] = "ucm_events",
	[GDRC_STAT_MISUSE] = "misuse",
	[GDRC_STAT_TREE_LOOKUPS] = "tree_lookups",
	[GDRC_STAT_UFFD_EVENTS] = "uffd_events",
	[GDRC_STAT_FREE_DEREGS] = "free_deregs",
	[GDRC_STAT_UNCACHED_SHARED] = "uncached_shared",
};

GDRC_API const char *gdrc_stat_name(enum gdrc_stat stat)
{
	if ((unsigned)stat >= GDRC_STAT_COUNT || !stat_names[stat])
		return "unknown";
	return stat_names[stat];
}

/* snprintf into buf at *off; past the end it only measures. */
static void __attribute__((format(printf, 4, 5)))
emit(char *buf, size_t buflen, size_t *off, const char *fmt, ...)
{
	char scratch[1];
	va_list ap;
	int n;

	va_start(ap, fmt);
	if (*off < buflen)
		n = vsnprintf(buf + *off, buflen - *off, fmt, ap);
	else
		n = vsnprintf(scratch, 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*off += (size_t)n;
}

gdrc_status_t gdrc_stats_format(const uint64_t *values,
				enum gdrc_dump_format format, char *buf,
				size_t buflen, size_t *needed_p)
{
	int json = format == GDRC_DUMP_JSON;
	size_t off = 0;

	if ((format != GDRC_DUMP_TEXT && !json) || (!buf && buflen))
		return GDRC_ERR_INVALID_PARAM;

	if (json)
		emit(buf, buflen, &off, "{");
	for (int i = 0; i < GDRC_STAT_COUNT; i++) {
		if (json)
			emit(buf, buflen, &off, "%s\"%s\": %llu", i ? ", " : "",
			     stat_names[i], (unsigned long long)values[i]);
		else
			emit(buf, buflen, &off, "%s %llu\n", stat_names[i],
			     (unsigned long long)values[i]);
	}
	if (json)
		emit(buf, buflen, &off, "}");

	if (needed_p)
		*needed_p = off;
	if (off >= buflen) {
		if (buflen)
			buf[buflen - 1] = '\0';
		return GDRC_ERR_LIMIT;
	}
	return GDRC_OK;
}
