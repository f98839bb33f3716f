// SPDX-License-Identifier: BSD-3-Clause
/*
 * log.c - the log sink.
 *
 * The handler and its argument are one pair behind a mutex so a reader
 * never sees a new function with an old argument.  Formatting happens
 * into a stack buffer before the lock is taken.  Not hook-safe.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "log.h"

_Atomic int gdrc_log_level_cur = GDRC_LOG_WARN;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static gdrc_log_fn log_fn;   /* NULL: stderr; under log_lock */
static void *log_arg;        /* under log_lock */

static const char *const level_names[] = {
	[GDRC_LOG_ERROR] = "error", [GDRC_LOG_WARN] = "warn",
	[GDRC_LOG_INFO] = "info",   [GDRC_LOG_DEBUG] = "debug",
	[GDRC_LOG_TRACE] = "trace",
};

void gdrc_log_set_level(enum gdrc_log_level level)
{
	atomic_store_explicit(&gdrc_log_level_cur, (int)level,
			      memory_order_relaxed);
}

int gdrc_log_level_parse(const char *s, enum gdrc_log_level *level_p)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]);
	     i++) {
		char digit[2] = { (char)('0' + i), 0 };

		if (!strcasecmp(s, level_names[i]) || !strcmp(s, digit)) {
			*level_p = (enum gdrc_log_level)i;
			return 0;
		}
	}
	return -1;
}

GDRC_API void gdrc_log_set_handler(gdrc_log_fn fn, void *arg)
{
	pthread_mutex_lock(&log_lock);
	log_fn = fn;
	log_arg = arg;
	pthread_mutex_unlock(&log_lock);
}

void gdrc_log_fork_child(void)
{
	pthread_mutex_init(&log_lock, NULL);
}

void gdrc_log_write(enum gdrc_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	gdrc_log_vwrite(level, fmt, ap);
	va_end(ap);
}

void gdrc_log_vwrite(enum gdrc_log_level level, const char *fmt, va_list ap)
{
	/* Room for the longest line the library writes: GDRC_STATS's
	 * counters, one JSON object (about 1 KiB; it was cut at 512). */
	char msg[2048];
	int n;

	n = snprintf(msg, sizeof(msg), "gdrc[%d]: %s: ", (int)getpid(),
		     level_names[level]);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);

	pthread_mutex_lock(&log_lock);
	if (log_fn)
		log_fn(level, msg, log_arg);
	else
		fprintf(stderr, "%s\n", msg);
	pthread_mutex_unlock(&log_lock);
}
