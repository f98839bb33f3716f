/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log.h - leveled logging with a replaceable sink.
 *
 * Messages are lowercase, carry no '=', and are never split; the prefix
 * "gdrc[pid]: " is added here.  The level is checked before formatting,
 * under a compile-time ceiling (GDRC_MAX_LOG_LEVEL).  Never call these
 * from hook context: formatting and the sink may allocate.
 *
 * Depends on nothing above it.
 */
#ifndef GDRC_LOG_H
#define GDRC_LOG_H

#include <stdarg.h>
#include <stdatomic.h>

#include <gdrcache.h>

#ifndef GDRC_MAX_LOG_LEVEL
#define GDRC_MAX_LOG_LEVEL GDRC_LOG_TRACE
#endif

extern _Atomic int gdrc_log_level_cur;

/* Set the process-wide level (from GDRC_LOG_LEVEL, at gdrc_init). */
void gdrc_log_set_level(enum gdrc_log_level level);

/* Parse "error".."trace" (or 0..4).  @return 0, or -1 if unknown. */
int gdrc_log_level_parse(const char *s, enum gdrc_log_level *level_p);

void gdrc_log_write(enum gdrc_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* In a fork child (the fork protocol's child handler): the sink's lock
 * usable again, whoever held it at the fork. */
void gdrc_log_fork_child(void);
void gdrc_log_vwrite(enum gdrc_log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

#define gdrc_log(level, ...)                                                 \
	do {                                                                 \
		if ((level) <= GDRC_MAX_LOG_LEVEL &&                         \
		    (int)(level) <= atomic_load_explicit(                    \
					    &gdrc_log_level_cur,             \
					    memory_order_relaxed))           \
			gdrc_log_write((level), __VA_ARGS__);                \
	} while (0)

#define gdrc_error(...) gdrc_log(GDRC_LOG_ERROR, __VA_ARGS__)
#define gdrc_warn(...) gdrc_log(GDRC_LOG_WARN, __VA_ARGS__)
#define gdrc_info(...) gdrc_log(GDRC_LOG_INFO, __VA_ARGS__)
#define gdrc_debug(...) gdrc_log(GDRC_LOG_DEBUG, __VA_ARGS__)
#define gdrc_trace(...) gdrc_log(GDRC_LOG_TRACE, __VA_ARGS__)

#endif /* GDRC_LOG_H */
