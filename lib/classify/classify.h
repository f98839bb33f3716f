/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * classify.h - what is this pointer, and preparing GPU allocations for
 * RDMA.
 *
 * One cuPointerGetAttributes call answers kind, device, BUFFER_ID and
 * the allocation's extent.  Device memory that is not legacy-IPC capable
 * (so not cuMemAlloc'd) needs one more call, cuMemRetainAllocationHandle,
 * to tell VMM memory; on cuMemAlloc memory that call fails and costs
 * about 1 us (H200), which is why legacy IPC is asked first.  Only misses and gdrc_ptr_query call
 * this, never a hit.  SYNC_MEMOPS is set once per allocation: a
 * process-wide set of BUFFER_IDs already prepared, under classify_lock,
 * bounded (cleared when it grows past CLASSIFY_SYNC_MAX, which only costs
 * setting the attribute again: it is idempotent).
 *
 * Never called from hook context or under a cache lock.
 * Depends on cuda/ and log/.
 */
#ifndef GDRC_CLASSIFY_H
#define GDRC_CLASSIFY_H

#include <stdint.h>

#include <gdrcache.h>

#include "cuda/cuda_loader.h"
#include "gdrc_int.h"

struct gdrc_class {
	struct gdrc_ptr_info info; /* the public answer; VMM: alloc_* is the
				    * mapping holding the pointer */
	CUcontext cu_ctx;          /* the allocation's context, or NULL */
	uintptr_t resv_start;      /* VMM: where its reservation starts
				    * (RANGE_START_ADDR): its mappings
				    * all report it */
};

/*
 * Classify addr.  Without a driver (cu NULL): plain host memory.
 * @return GDRC_OK; GDRC_ERR_UNSUPPORTED (logged) if addr lies in an
 *         unmapped part of a CUDA VMM reservation; GDRC_ERR_CUDA (logged)
 *         if the driver failed.
 */
gdrc_status_t gdrc_classify(const struct gdrc_cuda *cu, uintptr_t addr,
			    struct gdrc_class *cls);

/*
 * Make a GPU allocation's memory operations synchronous for RDMA, once
 * per allocation: the pointer attribute where supported, else (VMM) the
 * context flag CU_CTX_SYNC_MEMOPS where the driver has cuCtxSetFlags.
 * @return a GDRC_MR_INFO_SYNC_MEMOPS* bit saying how (or that it could
 *         not be done); *did_set_p is 1 if this call set it.
 */
uint32_t gdrc_classify_sync_memops(const struct gdrc_cuda *cu,
				   const struct gdrc_class *cls,
				   int *did_set_p);

/*
 * The VMM mappings that [start, end) covers, in address order, each
 * whole, for a VMM pointer cls classified at start.  Fills buf while cap
 * suffices, else a malloc'd array (the caller frees *segs_p if it is not
 * buf).  Runs in the memory's device context (gdrc_cuda_enter).
 * @return GDRC_OK with *segs_p, *n_p >= 1; GDRC_ERR_UNSUPPORTED (logged)
 *         if the range reaches an unmapped hole or another device's
 *         mapping; GDRC_ERR_NO_MEMORY; GDRC_ERR_CUDA (logged).
 */
gdrc_status_t gdrc_classify_segments(const struct gdrc_cuda *cu,
				     const struct gdrc_class *cls,
				     uintptr_t start, uintptr_t end,
				     struct gdrc_seg *buf, unsigned cap,
				     struct gdrc_seg **segs_p, unsigned *n_p);

#endif /* GDRC_CLASSIFY_H */
