/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cufile.h - GPUDirect Storage's libcufile, loaded at run time, and its
 * driver opened while some context uses it.
 *
 * dlopen("libcufile.so.0") (or GDRC_CUFILE_LIBRARY), resolve the few entry
 * points the cufile backend calls into one table.  The entry points are
 * looked up in the library's own handle, so a program's interposer of the
 * same names (libgdrcache-preload.so) never receives the library's own
 * registrations.  Loading is process-wide and happens once, at the first
 * context that asks for cuFile (never at library load); the library stays
 * loaded.  The driver (cuFileDriverOpen, 0.2-0.5 s measured on an H200)
 * is opened by the first gdrc_cufile_get and closed by the last
 * gdrc_cufile_put; a fork child never closes its parent's.
 *
 * Depends on log/, cuda/cuda_types.h and cufile_types.h.
 * Callers: api_backend.c (init, fini), pin/pin_cufile.c (the table).
 */
#ifndef GDRC_CUFILE_H
#define GDRC_CUFILE_H

#include <stdint.h>

#include <gdrcache.h>

#include "cufile/cufile_types.h"

struct gdrc_cufile {
	CUfileError_t (*cuFileDriverOpen)(void);
	CUfileError_t (*cuFileDriverClose)(void);
	CUfileError_t (*cuFileDriverGetProperties)(CUfileDrvProps_t *props);
	CUfileError_t (*cuFileBufRegister)(const void *base, size_t length,
					   int flags);
	CUfileError_t (*cuFileBufDeregister)(const void *base);
	void *handle; /* the dlopen handle */
	/* Pinned GPU memory cuFile allows per device, in bytes
	 * (max_device_pinned_mem_size); GDRC_LIMIT_NONE when the driver
	 * does not say. */
	uint64_t max_pinned_bytes;
};

/*
 * Load libcufile (path: GDRC_CUFILE_LIBRARY's value) if no context did,
 * and open its driver if no context has it open: one reference per
 * context.
 * @return GDRC_OK with *cf_p; GDRC_ERR_UNSUPPORTED (cannot be loaded, an
 *         entry point missing, in a fork child) or GDRC_ERR_NO_DEVICE
 *         (cuFileDriverOpen failed), with why filled.  Logged.
 */
gdrc_status_t gdrc_cufile_get(const char *path,
			      const struct gdrc_cufile **cf_p, char *why,
			      size_t why_len);

/* Drop a context's reference; the last closes the driver (not in a fork
 * child: forked).  NULL is ignored. */
void gdrc_cufile_put(const struct gdrc_cufile *cf, int forked);

/* "CU_FILE_MEMORY_ALREADY_REGISTERED (5023)" and the like, for logs. */
const char *gdrc_cufile_err(CUfileError_t e);

#endif /* GDRC_CUFILE_H */
