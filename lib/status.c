// SPDX-License-Identifier: BSD-3-Clause
/*
 * status.c - status codes to strings.  Thread safe, hook-safe.
 */
#include <gdrcache.h>

#include "gdrc_int.h"

/* Indexed by -status; a test checks every enum value has a string. */
static const char *const status_str[] = {
	[-GDRC_OK] = "success",
	[-GDRC_ERR_INVALID_PARAM] = "invalid parameter",
	[-GDRC_ERR_NO_MEMORY] = "out of memory",
	[-GDRC_ERR_UNSUPPORTED] = "unsupported",
	[-GDRC_ERR_LIMIT] = "limit exceeded",
	[-GDRC_ERR_NO_DEVICE] = "no device",
	[-GDRC_ERR_CUDA] = "cuda driver error",
	[-GDRC_ERR_VERBS] = "verbs error",
	[-GDRC_ERR_KMOD] = "kernel module error",
	[-GDRC_ERR_BUSY] = "busy",
	[-GDRC_ERR_FORK] = "context belongs to the parent process",
	[-GDRC_ERR_STALE] = "registration no longer serves this get",
};

GDRC_API const char *gdrc_status_str(gdrc_status_t status)
{
	long idx = -(long)status;

	if (idx < 0 || idx >= (long)GDRC_ARRAY_SIZE(status_str) ||
	    !status_str[idx])
		return "unknown status";
	return status_str[idx];
}

GDRC_API unsigned gdrc_version(void)
{
	return GDRC_VERSION;
}

#define GDRC_STR2(x) #x
#define GDRC_STR(x) GDRC_STR2(x)

GDRC_API const char *gdrc_version_string(void)
{
	return GDRC_STR(GDRC_VERSION_MAJOR) "." GDRC_STR(
		GDRC_VERSION_MINOR) "." GDRC_STR(GDRC_VERSION_PATCH);
}

GDRC_API const char *gdrc_backend_name(enum gdrc_backend backend)
{
	static const char *const names[] = {
		[GDRC_BACKEND_NONE] = "none",
		[GDRC_BACKEND_VERBS] = "verbs",
		[GDRC_BACKEND_DMABUF] = "dmabuf",
		[GDRC_BACKEND_PEERMEM] = "peermem",
		[GDRC_BACKEND_KMOD] = "kmod",
	};

	if ((unsigned)backend >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[backend];
}
