// SPDX-License-Identifier: BSD-3-Clause
/*
 * status.c - status codes, backends and event sources to strings.
 * Thread safe, hook-safe.
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
	[-GDRC_ERR_IO] = "io_uring error",
	[-GDRC_ERR_CUFILE] = "cufile error",
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

/* names[i], or "unknown" past the table or at a hole in it. */
static const char *table_name(const char *const *names, size_t n, unsigned i)
{
	return i < n && names[i] ? names[i] : "unknown";
}

GDRC_API const char *gdrc_backend_name(enum gdrc_backend backend)
{
	static const char *const names[] = {
		[GDRC_BACKEND_NONE] = "none",
		[GDRC_BACKEND_VERBS] = "verbs",
		[GDRC_BACKEND_DMABUF] = "dmabuf",
		[GDRC_BACKEND_PEERMEM] = "peermem",
		[GDRC_BACKEND_KMOD] = "kmod",
		[GDRC_BACKEND_IO_URING] = "io_uring",
		[GDRC_BACKEND_CUFILE] = "cufile",
	};

	return table_name(names, GDRC_ARRAY_SIZE(names), (unsigned)backend);
}

GDRC_API const char *gdrc_source_name(enum gdrc_source source)
{
	static const char *const names[] = {
		[GDRC_SOURCE_KMOD] = "kmod",
		[GDRC_SOURCE_UCM] = "ucm",
		[GDRC_SOURCE_GLIBC] = "glibc",
		[GDRC_SOURCE_UFFD] = "uffd",
		[GDRC_SOURCE_CUDA_HOOKS] = "cuda_hooks",
		[GDRC_SOURCE_BUFFER_ID] = "buffer_id",
	};

	return table_name(names, GDRC_ARRAY_SIZE(names), (unsigned)source);
}
