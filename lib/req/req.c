// SPDX-License-Identifier: BSD-3-Clause
/*
 * req.c - a classified pointer and the context's policy into a cache
 * request (see req.h for the policy).
 */
#include "req/req.h"
#include "log/log.h"

/* GPU memory: the key, the registered rounding, the segments. */
static gdrc_status_t req_gpu(const struct gdrc_cuda *cu,
			     const struct gdrc_class *cls,
			     const struct gdrc_req_policy *pol,
			     struct gdrc_cache_req *req, struct gdrc_seg *buf,
			     unsigned cap, struct gdrc_seg **segs_p,
			     int *sync_set_p)
{
	const struct gdrc_ptr_info *info = &cls->info;
	uintptr_t alloc_start = info->alloc_base;
	uintptr_t alloc_end = info->alloc_base + info->alloc_size;
	gdrc_status_t status;
	unsigned nseg = 1;

	if (info->kind == GDRC_PTR_MANAGED) {
		gdrc_debug("%#lx is managed memory: not registered",
			   (unsigned long)req->start);
		return GDRC_ERR_UNSUPPORTED;
	}
	if (info->kind == GDRC_PTR_VMM) {
		status = gdrc_classify_segments(cu, cls, req->start, req->end,
						buf, cap, segs_p, &nseg);
		if (status)
			return status;
		alloc_end = (*segs_p)[nseg - 1].end;
		if (nseg > 1) {
			req->segs = *segs_p;
			req->nseg = nseg;
		}
	}
	if (req->end > alloc_end) {
		gdrc_error("%#lx+%lu runs past its cuda allocation (%#lx+%zu)",
			   (unsigned long)req->start,
			   (unsigned long)(req->end - req->start),
			   (unsigned long)info->alloc_base, info->alloc_size);
		return GDRC_ERR_UNSUPPORTED;
	}
	req->mem_type = GDRC_MEM_CUDA;
	req->device = info->device;
	req->buffer_id = info->buffer_id;
	req->alloc_start = alloc_start;
	req->alloc_end = alloc_end;
	req->reg_align = pol->reg_align;
	req->tag_check = pol->tag_check;
	req->tag_check_auto = pol->tag_check_auto;
	if (alloc_end - alloc_start <= pol->whole_alloc_max) {
		req->key_start = alloc_start;
		req->key_end = alloc_end;
	} else {
		req->key_start = gdrc_align_down(req->start, GDRC_GPU_PAGE_SIZE);
		req->key_end = gdrc_align_up(req->end, GDRC_GPU_PAGE_SIZE);
		if (req->key_start < alloc_start)
			req->key_start = alloc_start;
		if (req->key_end > alloc_end)
			req->key_end = alloc_end;
	}
	req->info_flags = gdrc_classify_sync_memops(cu, cls, sync_set_p);
	if (req->tag_check)
		req->info_flags |= GDRC_MR_INFO_TAG_CHECKED;
	return GDRC_OK;
}

gdrc_status_t gdrc_req_from_class(const struct gdrc_cuda *cu,
				  const struct gdrc_class *cls,
				  const struct gdrc_req_policy *pol,
				  struct gdrc_cache_req *req,
				  struct gdrc_seg *buf, unsigned cap,
				  struct gdrc_seg **segs_p, int *sync_set_p)
{
	*sync_set_p = 0;
	req->kind = cls->info.kind;
	if (cls->info.mem_type == GDRC_MEM_CUDA)
		return req_gpu(cu, cls, pol, req, buf, cap, segs_p,
			       sync_set_p);
	if (cls->info.kind == GDRC_PTR_HOST_PINNED && cls->info.alloc_size) {
		req->buffer_id = cls->info.buffer_id;
		req->alloc_start = cls->info.alloc_base;
		req->alloc_end = cls->info.alloc_base + cls->info.alloc_size;
	}
	return GDRC_OK;
}
