// SPDX-License-Identifier: BSD-3-Clause
/*
 * classify.c - pointer classification, SYNC_MEMOPS and the tag check.
 *
 * What the driver does (measured on an H200, research/gpu-probe.md):
 * every address inside one allocation has the same BUFFER_ID, a free and
 * reallocation at the same address gets a new one, and a freed address
 * answers CUDA_ERROR_INVALID_VALUE; a malloc'd pointer answers success
 * with memory type 0 to cuPointerGetAttributes.  Stream-ordered pools
 * report a mempool handle; VMM mappings accept
 * cuMemRetainAllocationHandle and refuse the SYNC_MEMOPS pointer
 * attribute (CUDA_ERROR_NOT_SUPPORTED); managed memory reports
 * IS_MANAGED.  VMM memory (measured on an H100, docs/design.md): the
 * range attributes report the whole reservation, holes included, and
 * cuMemGetAddressRange the one mapping (with a context current only);
 * every cuMemMap gets a new BUFFER_ID; a hole reads as type 0 with the
 * reservation's range.
 *
 * Locks: classify_lock protects the SYNC_MEMOPS sets and is held across
 * the driver calls that set it, so two threads never both pay for it.
 * Only allocations are remembered, never contexts (see sync_ctx).
 * Callers: the API layer (api_get.c, api_query.c).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "classify.h"
#include "gdrc_int.h"
#include "log/log.h"

/* uthash must not exit() on allocation failure: it tells us instead. */
static int sync_oom;
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(elt) (sync_oom = 1)
#include <uthash.h>

/* Entries kept before the sets are cleared (see classify.h). */
#define CLASSIFY_SYNC_MAX 65536

struct sync_entry {
	uint64_t key;      /* BUFFER_ID */
	uint32_t how;      /* GDRC_MR_INFO_SYNC_MEMOPS* */
	UT_hash_handle hh;
};

static pthread_mutex_t classify_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sync_entry *sync_allocs;   /* by BUFFER_ID; classify_lock */
static unsigned sync_count;              /* classify_lock */

static gdrc_status_t cuda_fail(const struct gdrc_cuda *cu, const char *call,
			       CUresult res, uintptr_t addr)
{
	gdrc_error("%s on %#lx failed: %s", call, (unsigned long)addr,
		   gdrc_cuda_err(cu, res));
	return GDRC_ERR_CUDA;
}

static int classify_is_vmm(const struct gdrc_cuda *cu, uintptr_t addr)
{
	CUmemGenericAllocationHandle h;

	if (cu->cuMemRetainAllocationHandle(&h, (void *)addr) != CUDA_SUCCESS)
		return 0;
	cu->cuMemRelease(h);
	return 1;
}

/*
 * The one mapping of a VMM reservation that holds addr.  The pointer
 * attributes report the whole reservation, holes and other mappings
 * included (PyTorch's expandable segments reserve all of the GPU's
 * memory and map 20 MiB pieces into it); cuMemGetAddressRange reports
 * the mapping, but only with a context current.
 */
static CUresult vmm_mapping(const struct gdrc_cuda *cu, uintptr_t addr,
			    int device, CUdeviceptr *base_p, size_t *size_p)
{
	struct gdrc_cuda_scope scope;
	CUresult res;

	res = gdrc_cuda_enter(cu, NULL, device, &scope);
	if (res != CUDA_SUCCESS) {
		gdrc_error("no context of cuda device %d to ask about %#lx in: "
			   "none is current and its primary one is inactive",
			   device, (unsigned long)addr);
		return res;
	}
	res = cu->cuMemGetAddressRange(base_p, size_p, (CUdeviceptr)addr);
	gdrc_cuda_leave(cu, &scope);
	return res;
}

gdrc_status_t gdrc_classify(const struct gdrc_cuda *cu, uintptr_t addr,
			    struct gdrc_class *cls)
{
	int attrs[] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		CU_POINTER_ATTRIBUTE_BUFFER_ID,
		CU_POINTER_ATTRIBUTE_IS_MANAGED,
		CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
		CU_POINTER_ATTRIBUTE_RANGE_SIZE,
		CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
		CU_POINTER_ATTRIBUTE_CONTEXT,
		CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
	};
	unsigned memtype = 0;
	unsigned long long buffer_id = 0;
	int managed = 0, ordinal = -1;
	CUdeviceptr base = 0;
	size_t size = 0;
	CUmemoryPool pool = NULL;
	CUcontext ctx = NULL;
	int legacy_ipc = 0;
	void *data[] = { &memtype, &buffer_id, &managed, &ordinal,   &base,
			 &size,    &pool,      &ctx,     &legacy_ipc };
	struct gdrc_ptr_info *info = &cls->info;
	CUresult res;

	memset(cls, 0, sizeof(*cls));
	info->mem_type = GDRC_MEM_HOST;
	info->kind = GDRC_PTR_HOST;
	info->device = -1;
	if (!cu)
		return GDRC_OK;

	res = cu->cuPointerGetAttributes(GDRC_ARRAY_SIZE(attrs), attrs, data,
					 (CUdeviceptr)addr);
	if (res != CUDA_SUCCESS)
		return cuda_fail(cu, "cuPointerGetAttributes", res, addr);
	info->buffer_id = buffer_id;
	if (!memtype && !buffer_id && size) {
		/* Host memory has no range; a hole of a reservation has
		 * the reservation's (as a freed pool block has none). */
		gdrc_error("%#lx lies in an unmapped part of a cuda "
			   "reservation (%#llx+%zu)", (unsigned long)addr,
			   (unsigned long long)base, size);
		return GDRC_ERR_UNSUPPORTED;
	}
	if (memtype != CU_MEMORYTYPE_DEVICE) {
		/* Plain host memory reads as type 0 and no BUFFER_ID. */
		if (buffer_id) {
			info->kind = GDRC_PTR_HOST_PINNED;
			info->alloc_base = (uintptr_t)base;
			info->alloc_size = size;
		}
		return GDRC_OK;
	}
	info->mem_type = GDRC_MEM_CUDA;
	info->device = ordinal;
	info->alloc_base = (uintptr_t)base;
	info->alloc_size = size;
	cls->cu_ctx = ctx;
	if (managed)
		info->kind = GDRC_PTR_MANAGED;
	else if (pool)
		info->kind = GDRC_PTR_POOL;
	else if (legacy_ipc) /* cuMemAlloc: skip a failing ~1 us call */
		info->kind = GDRC_PTR_DEVICE;
	else if (classify_is_vmm(cu, addr))
		info->kind = GDRC_PTR_VMM;
	else
		info->kind = GDRC_PTR_DEVICE;
	if (info->kind == GDRC_PTR_VMM) {
		cls->resv_start = (uintptr_t)base;
		res = vmm_mapping(cu, addr, ordinal, &base, &size);
		if (res != CUDA_SUCCESS)
			return cuda_fail(cu, "cuMemGetAddressRange", res, addr);
		info->alloc_base = (uintptr_t)base;
		info->alloc_size = size;
	}
	if (!buffer_id || !size || base > addr || addr - base >= size) {
		gdrc_error("cuda reports an odd allocation for %#lx: base "
			   "%#llx size %zu buffer id %llu",
			   (unsigned long)addr, (unsigned long long)base, size,
			   buffer_id);
		return GDRC_ERR_CUDA;
	}
	return GDRC_OK;
}

/* Under classify_lock.  Remember key -> how, clearing when too many. */
static void sync_remember(uint64_t key, uint32_t how)
{
	struct sync_entry *e, *tmp;

	if (++sync_count > CLASSIFY_SYNC_MAX) {
		HASH_ITER(hh, sync_allocs, e, tmp) {
			HASH_DEL(sync_allocs, e);
			free(e);
		}
		sync_count = 1;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return; /* only costs setting it again next time */
	e->key = key;
	e->how = how;
	sync_oom = 0;
	HASH_ADD(hh, sync_allocs, key, sizeof(e->key), e);
	if (sync_oom)
		free(e);
}

/* Under classify_lock: set CU_CTX_SYNC_MEMOPS on the current context. */
static int sync_ctx_set(const struct gdrc_cuda *cu)
{
	unsigned flags = 0;

	return cu->cuCtxGetFlags && cu->cuCtxSetFlags &&
	       cu->cuCtxGetFlags(&flags) == CUDA_SUCCESS &&
	       ((flags & CU_CTX_SYNC_MEMOPS) ||
		cu->cuCtxSetFlags(flags | CU_CTX_SYNC_MEMOPS) == CUDA_SUCCESS);
}

/*
 * Under classify_lock: the context flag, on the context whose memory
 * operations touch cls's memory: the allocation's own, or, for VMM and
 * pool memory, which belong to no context, the one gdrc_cuda_enter
 * picks (the caller's if it is on the memory's device, since another
 * device's would get the flag in its place; else the device's primary
 * context if it is active, an inactive one never being created).  Not
 * remembered per context: a destroyed context's address may come back
 * as a new context without the flag.  It runs once per allocation anyway.
 */
static uint32_t sync_ctx(const struct gdrc_cuda *cu, const struct gdrc_class *cls)
{
	uint32_t how = GDRC_MR_INFO_NO_SYNC_MEMOPS;
	struct gdrc_cuda_scope scope;

	if (gdrc_cuda_enter(cu, cls->cu_ctx, cls->info.device, &scope) ==
	    CUDA_SUCCESS) {
		if (sync_ctx_set(cu))
			how = GDRC_MR_INFO_SYNC_MEMOPS_CTX;
		gdrc_cuda_leave(cu, &scope);
	}
	if (how == GDRC_MR_INFO_NO_SYNC_MEMOPS)
		gdrc_warn("cannot make memory operations synchronous on cuda "
			  "device %d: its registrations report "
			  "GDRC_MR_INFO_NO_SYNC_MEMOPS", cls->info.device);
	return how;
}

uint32_t gdrc_classify_sync_memops(const struct gdrc_cuda *cu,
				   const struct gdrc_class *cls,
				   int *did_set_p)
{
	uint64_t key = cls->info.buffer_id;
	struct sync_entry *e;
	unsigned one = 1;
	uint32_t how;
	CUresult res;

	*did_set_p = 0;
	pthread_mutex_lock(&classify_lock);
	HASH_FIND(hh, sync_allocs, &key, sizeof(key), e);
	if (e) {
		how = e->how;
		goto out;
	}
	res = cu->cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
					(CUdeviceptr)cls->info.alloc_base);
	if (res == CUDA_SUCCESS) {
		how = GDRC_MR_INFO_SYNC_MEMOPS;
		*did_set_p = 1;
	} else {
		if (res != CUDA_ERROR_NOT_SUPPORTED)
			gdrc_debug("SYNC_MEMOPS on %#lx: %s",
				   (unsigned long)cls->info.alloc_base,
				   gdrc_cuda_err(cu, res));
		how = sync_ctx(cu, cls);
		*did_set_p = how == GDRC_MR_INFO_SYNC_MEMOPS_CTX;
	}
	sync_remember(key, how);
out:
	pthread_mutex_unlock(&classify_lock);
	return how;
}

/* Append seg to the array, moving it from buf to the heap when full. */
static int segs_push(const struct gdrc_seg *buf, struct gdrc_seg **segs_p,
		     unsigned *n_p, unsigned *max_p, const struct gdrc_seg *seg)
{
	struct gdrc_seg *grown;

	if (*n_p == *max_p) {
		grown = malloc(2 * (size_t)*max_p * sizeof(*grown));
		if (!grown)
			return -1;
		memcpy(grown, *segs_p, *n_p * sizeof(*grown));
		if (*segs_p != buf)
			free(*segs_p);
		*segs_p = grown;
		*max_p *= 2;
	}
	(*segs_p)[(*n_p)++] = *seg;
	return 0;
}

/* The mapping starting at addr, which must be another mapping of cls's
 * reservation, of its device: never another reservation's, nor an
 * allocation of another kind that happens to follow it. */
static gdrc_status_t vmm_next(const struct gdrc_cuda *cu,
			      const struct gdrc_class *cls, uintptr_t addr,
			      struct gdrc_seg *seg)
{
	int attrs[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
			CU_POINTER_ATTRIBUTE_BUFFER_ID,
			CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
			CU_POINTER_ATTRIBUTE_RANGE_START_ADDR };
	unsigned memtype = 0;
	unsigned long long buffer_id = 0;
	int ordinal = -1, device = cls->info.device;
	CUdeviceptr base = 0, resv = 0;
	void *data[] = { &memtype, &buffer_id, &ordinal, &resv };
	size_t size = 0;
	CUresult res;

	res = cu->cuPointerGetAttributes(GDRC_ARRAY_SIZE(attrs), attrs, data,
					 (CUdeviceptr)addr);
	if (res != CUDA_SUCCESS)
		return cuda_fail(cu, "cuPointerGetAttributes", res, addr);
	if (memtype != CU_MEMORYTYPE_DEVICE || !buffer_id) {
		gdrc_error("the range reaches an unmapped part of its cuda "
			   "reservation at %#lx", (unsigned long)addr);
		return GDRC_ERR_UNSUPPORTED;
	}
	if (ordinal != device) {
		gdrc_error("the range spans mappings of cuda devices %d and "
			   "%d at %#lx", device, ordinal, (unsigned long)addr);
		return GDRC_ERR_UNSUPPORTED;
	}
	if ((uintptr_t)resv != cls->resv_start) {
		gdrc_error("the range runs past its cuda reservation (%#lx) "
			   "into other memory at %#lx",
			   (unsigned long)cls->resv_start, (unsigned long)addr);
		return GDRC_ERR_UNSUPPORTED;
	}
	res = cu->cuMemGetAddressRange(&base, &size, (CUdeviceptr)addr);
	if (res != CUDA_SUCCESS)
		return cuda_fail(cu, "cuMemGetAddressRange", res, addr);
	if (base != addr || !size) {
		gdrc_error("cuda reports an odd mapping at %#lx: %#llx+%zu",
			   (unsigned long)addr, (unsigned long long)base, size);
		return GDRC_ERR_CUDA;
	}
	*seg = (struct gdrc_seg){ .start = addr, .end = addr + size,
				  .buffer_id = buffer_id };
	return GDRC_OK;
}

gdrc_status_t gdrc_classify_segments(const struct gdrc_cuda *cu,
				     const struct gdrc_class *cls,
				     uintptr_t start, uintptr_t end,
				     struct gdrc_seg *buf, unsigned cap,
				     struct gdrc_seg **segs_p, unsigned *n_p)
{
	const struct gdrc_ptr_info *info = &cls->info;
	struct gdrc_seg seg = {
		.start = info->alloc_base,
		.end = info->alloc_base + info->alloc_size,
		.buffer_id = info->buffer_id,
	};
	struct gdrc_cuda_scope scope;
	gdrc_status_t status = GDRC_OK;
	unsigned n = 0, max = cap;
	CUresult res;

	*segs_p = buf;
	if (!cap || start < seg.start || start >= seg.end) {
		gdrc_error("%#lx is not in the mapping classified (%#lx+%zu)",
			   (unsigned long)start, (unsigned long)seg.start,
			   info->alloc_size);
		return GDRC_ERR_INVALID_PARAM;
	}
	segs_push(buf, segs_p, &n, &max, &seg);
	if (end > seg.end) {
		res = gdrc_cuda_enter(cu, NULL, info->device, &scope);
		if (res != CUDA_SUCCESS)
			return cuda_fail(cu, "making a context current", res,
					 start);
		while (!status && seg.end < end) {
			status = vmm_next(cu, cls, seg.end, &seg);
			if (!status &&
			    segs_push(buf, segs_p, &n, &max, &seg))
				status = GDRC_ERR_NO_MEMORY;
		}
		gdrc_cuda_leave(cu, &scope);
	}
	if (status && *segs_p != buf)
		free(*segs_p);
	if (status)
		*segs_p = buf;
	*n_p = n;
	return status;
}
