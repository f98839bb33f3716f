/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats.h - counter names and the text and JSON dumps.
 *
 * The counters themselves live in the cache (cache.h); this module only
 * names and prints a snapshot.  Depends on nothing above it.
 */
#ifndef GDRC_STATS_H
#define GDRC_STATS_H

#include <stddef.h>
#include <stdint.h>

#include <gdrcache.h>

/*
 * Print values[0..GDRC_STAT_COUNT) into buf like snprintf.
 * @return GDRC_OK, GDRC_ERR_LIMIT (truncated) or GDRC_ERR_INVALID_PARAM.
 */
gdrc_status_t gdrc_stats_format(const uint64_t *values,
				enum gdrc_dump_format format, char *buf,
				size_t buflen, size_t *needed_p);

#endif /* GDRC_STATS_H */
