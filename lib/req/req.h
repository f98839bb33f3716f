/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * req.h - what a miss asks the cache for: a classified pointer and the
 * context's policy turned into a struct gdrc_cache_req.
 *
 * The policy, in one place: managed memory is refused; GPU memory is
 * keyed by its whole allocation up to a size (whole_alloc_max), else by
 * the request rounded to 64 KiB GPU pages inside it; a VMM pointer's
 * allocation is the run of mappings the request covers, each whole,
 * never past a mapping the request does not reach, never over a hole;
 * registrations round out to GPU pages; SYNC_MEMOPS is set before any
 * registration of the allocation is handed out; CUDA-pinned host memory
 * carries its allocation (which bounds merges, and lets cuMemFreeHost's
 * event, a base address, find it).
 *
 * Depends on classify/ (the pointer's class, segments, SYNC_MEMOPS),
 * cache/cache.h (the request type only) and log/.  Callers: api_get.c.
 */
#ifndef GDRC_REQ_H
#define GDRC_REQ_H

#include "cache/cache.h"
#include "classify/classify.h"

/* What the context decided, as the request needs it. */
struct gdrc_req_policy {
	int tag_check;            /* validate GPU hits by BUFFER_ID */
	int tag_check_auto;       /* ... unless the kernel channel covers the
				   * registration (GDRC_VALIDATE=auto) */
	uint64_t whole_alloc_max; /* largest allocation keyed whole */
	uintptr_t reg_align;      /* GPU registrations round out to this */
};

/*
 * Fill req (start, end, access and flags set; host memory otherwise) for
 * the memory cls describes.  GPU memory may need the VMM mappings the
 * request covers: up to cap in buf, more in a new array put in *segs_p,
 * which the caller frees if it is not buf.  *sync_set_p: 1 if this call
 * set SYNC_MEMOPS on the allocation.
 * @return GDRC_OK; GDRC_ERR_UNSUPPORTED (managed memory, a request past
 *         its allocation or over a hole, logged); the classifier's
 *         errors for the mappings.
 */
gdrc_status_t gdrc_req_from_class(const struct gdrc_cuda *cu,
				  const struct gdrc_class *cls,
				  const struct gdrc_req_policy *pol,
				  struct gdrc_cache_req *req,
				  struct gdrc_seg *buf, unsigned cap,
				  struct gdrc_seg **segs_p, int *sync_set_p);

#endif /* GDRC_REQ_H */
