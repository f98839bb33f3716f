// SPDX-License-Identifier: BSD-3-Clause
/*
 * miss.c - the miss path: nothing cached serves the request.
 *
 *   1. Write lock; drain queued events (inval.c); look again (another
 *      thread may have cached it meanwhile): a hit ends here.
 *   2. Plan (plan_miss): drop overlapping regions the kernel saw go or
 *      made for other memory; name the miss's cause; widen the range
 *      and rights over the overlapping regions of the same memory.
 *   3. Make room (lru.c: the context's and the device's limits), reserve
 *      the bytes, list the registration as in flight, unlock.
 *   4. Unlocked: subscribe or pin with the kernel channel, register with
 *      the backend (one retry after giving back unused registrations
 *      when it ran out), publish the region (region.c).
 *   5. Write lock; drain; unreserve.  A widened registration that the
 *      NIC refused (a neighbour's page unmapped meanwhile) starts over
 *      once, not widened.  If an unmap overlapped the range
 *      meanwhile (drain marked it stale, or its kernel word moved), throw
 *      the registration away and start over (MISS_STALE_RETRIES); if
 *      another thread cached a cover, serve that; else retire the
 *      regions the new one subsumes and insert it (region.c).
 *   6. Serve it through this thread's handle (handle.c), or, uncached,
 *      as a direct reference.
 *
 * Locks: cache->lock for writing in steps 1-3 and 5 (plan_miss asserts
 * it), none in step 4: no backend call, allocation or system call is
 * made under it.  Callers: the API layer (gdrc_cache_get_miss).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache_int.h"
#include "log/log.h"

static _Atomic uint64_t region_id_next = 1;

struct miss_plan {
	uintptr_t start;  /* key range */
	uintptr_t end;
	uintptr_t reg_start; /* registered range */
	uintptr_t reg_end;
	uint32_t access;
	int cause;        /* GDRC_STAT_MISS_* */
	int cached;       /* insert into the index */
	int narrow;       /* no widening over cached neighbours */
	int unseen;       /* uncached: no source sees all its pages go */
	const struct gdrc_cache_req *req;
};

/* What one walk over the regions overlapping a miss's range finds. */
struct plan_walk {
	struct miss_plan *plan;
	uintptr_t start, end;       /* the key range asked (not widened) */
	struct gdrc_collect kstale; /* the kernel saw their memory go */
	struct gdrc_collect stale;  /* made for other memory */
	int overlap;                /* one of the same memory overlaps */
	int cover;                  /* ... and covers [start, end) */
};

static int plan_fn(struct gdrc_region *r, void *arg)
{
	struct plan_walk *w = arg;
	struct miss_plan *plan = w->plan;

	if (gdrc_region_kstale(w->kstale.c, r)) {
		gdrc_collect_push(&w->kstale, r);
		return 0;
	}
	if (!gdrc_same_memory(r, plan->req)) {
		gdrc_collect_push(&w->stale, r);
		return 0;
	}
	w->overlap = 1;
	if (r->start <= w->start && w->end <= r->end)
		w->cover = 1;
	if (!plan->cached || plan->narrow ||
	    !gdrc_same_segments(r, plan->req))
		return 0;
	if (r->start < plan->start)
		plan->start = r->start;
	if (r->end > plan->end)
		plan->end = r->end;
	plan->access |= r->access;
	return 0;
}

/*
 * Decide what to register and why it missed.
 *
 * A cached region of other memory overlapping the request is stale:
 * allocations and mappings never overlap, so a region that disagrees
 * with what the driver reports here now (same_memory: memory type, and
 * the range and BUFFER_ID of every segment both cover) was made for
 * memory freed or remapped since (a free no hook saw).  It is dropped.
 *
 * A region of the same memory that covers the range with too few rights,
 * or overlaps without covering, is merged into the new one (ranges and
 * rights), and retired once the new one is in; only overlapping, never
 * merely adjacent, ranges merge, since one registration must not span two
 * allocations.  Not with plan->narrow (get_miss: the widened registration
 * failed).  GPU merges stay inside the allocation: only regions of
 * exactly the request's segments merge.
 */
static void plan_miss(struct gdrc_cache *c, struct miss_plan *plan,
		      struct gdrc_defer *d)
{
	const struct gdrc_cache_req *req = plan->req;
	struct plan_walk w = {
		.plan = plan, .start = plan->start, .end = plan->end,
		.kstale = { .c = c }, .stale = { .c = c, .req = req },
	};
	unsigned n, nk;

	gdrc_assert_wrlocked(c);
	/* One walk: each region is sorted into one of the lists or kept
	 * (and then counted, and widened over), as four walks did before,
	 * kernel-stale first. */
	gdrc_index_overlap(c, w.start, w.end, plan_fn, &w);
	nk = gdrc_remove_collected(c, &w.kstale, GDRC_STAT_MISS_INVALIDATED, d);
	gdrc_stat_add(c, GDRC_STAT_INVALIDATIONS, nk);
	gdrc_stat_add(c, GDRC_STAT_INV_KMOD, nk);
	n = gdrc_remove_collected(c, &w.stale, GDRC_STAT_MISS_INVALIDATED, d);
	gdrc_stat_add(c, GDRC_STAT_INVALIDATIONS, n);
	gdrc_stat_add(c, GDRC_STAT_INV_TAG_CHECK, n);
	if (!plan->cached)
		plan->cause = GDRC_STAT_MISS_UNCACHED;
	else if (w.cover)
		plan->cause = GDRC_STAT_MISS_ACCESS;
	else if (w.overlap)
		plan->cause = GDRC_STAT_MISS_TOO_SMALL;
	else
		plan->cause = n || nk ? GDRC_STAT_MISS_INVALIDATED :
					gdrc_ghost_cause(c, w.start, w.end);
	if (req->mem_type == GDRC_MEM_HOST) {
		plan->reg_start = plan->start;
		plan->reg_end = plan->end;
	} else {
		plan->reg_start = gdrc_align_down(plan->start, req->reg_align);
		plan->reg_end = gdrc_align_up(plan->end, req->reg_align);
	}
}

/*
 * A registration of device's memory ran out (BAR1 space, GPU or pinnable
 * memory, fds, a backend's table of slots): give back the device's
 * unused registrations before the one retry (host memory: every unused
 * one, since the NIC's and the memlock limit's resources are shared by
 * all), this thread's idle handles on them too, and say so the first
 * time.
 */
static void oom_release(struct gdrc_cache *c, int device)
{
	struct gdrc_dev_acct *a = gdrc_dev_acct(c, device);
	struct gdrc_defer d = { 0 };
	unsigned n;

	gdrc_cache_wrlock(c);
	gdrc_drain(c, &d);
	n = gdrc_evict_all_unused(c, device < 0 ? GDRC_DEVICE_ALL : device, &d);
	gdrc_cache_unlock_release(c, &d);
	gdrc_tls_drop_invalid(c);
	gdrc_stat_add(c, GDRC_STAT_OOM_RETRIES, 1);
	if (a)
		atomic_fetch_add_explicit(&a->retries, 1, memory_order_relaxed);
	if (!atomic_flag_test_and_set(&c->oom_warned))
		gdrc_warn("%s ran out of registrable memory (BAR1, pinned "
			  "memory, fds, or the backend's table of slots: an "
			  "io_uring's): released %u unused registrations of "
			  "it and retried (stat oom_retries counts these; said "
			  "once)",
			  device < 0 ? "host memory" : "a cuda device", n);
}

static gdrc_status_t reg_with_retry(struct gdrc_cache *c,
				    const struct gdrc_pin_ops *ops, void *be,
				    struct gdrc_pin_reg *reg, int device)
{
	gdrc_status_t status;

	status = ops->reg(be, reg);
	if (status != GDRC_ERR_NO_MEMORY && status != GDRC_ERR_LIMIT)
		return status;
	oom_release(c, device);
	return ops->reg(be, reg);
}

/* What the kernel channel holds for a registration being made. */
struct miss_kern {
	int slot;                /* -1: none */
	uint64_t handle;
	int pinned;              /* slot is a GPU pin, not a watch */
	uint32_t kmore;          /* further GPU pins, one per VMM mapping */
	struct gdrc_kpin *kpins;
};

/* Give back whatever k holds (a failed registration). */
static void kern_release(struct gdrc_cache *c, struct miss_kern *k)
{
	gdrc_kern_give_back(c, k->slot, k->pinned, k->handle, k->kmore,
			    k->kpins);
	free(k->kpins);
	*k = (struct miss_kern){ .slot = -1 };
}

/*
 * GPU memory: pinned by the module, revoked by the driver.  nvidia_p2p
 * pins one allocation, so a registration over several VMM mappings
 * takes one pin per mapping, of the part of the registered range in it
 * (mappings are 2 MiB aligned, so each part is whole 64 KiB pages); any
 * of them revoked ends the registration.  One segment: the whole
 * registered range, as it may round past a small allocation.
 * @return 0, or the module's -errno (nothing held then).
 */
static int kern_pin_gpu(struct gdrc_cache *c, const struct miss_plan *plan,
			struct miss_kern *k)
{
	const struct gdrc_cache_req *req = plan->req;
	unsigned n = gdrc_req_nseg(req);
	int err = 0;

	if (n > 1) {
		k->kpins = calloc(n - 1, sizeof(*k->kpins));
		if (!k->kpins)
			return -ENOMEM;
	}
	for (unsigned i = 0; i < n && !err; i++) {
		struct gdrc_seg g = gdrc_req_seg(req, i);
		uintptr_t s = n > 1 && g.start > plan->reg_start ? g.start :
								    plan->reg_start;
		uintptr_t e = n > 1 && g.end < plan->reg_end ? g.end :
							       plan->reg_end;
		uint64_t handle;
		int slot;

		if (s >= e)
			continue; /* a key narrower than the mappings */
		err = c->p.kpin(c->p.karg, s, e - s, &slot, &handle);
		if (err)
			break;
		if (k->slot < 0) {
			k->slot = slot;
			k->handle = handle;
			k->pinned = 1;
		} else {
			k->kpins[k->kmore++] = (struct gdrc_kpin){
				.slot = slot, .handle = handle };
		}
	}
	if (err)
		kern_release(c, k);
	return err;
}

/* Nothing would see this host range go: registered uncached, and
 * counted so. */
static void plan_uncache(struct miss_plan *plan)
{
	plan->cached = 0;
	plan->cause = GDRC_STAT_MISS_UNCACHED;
}

/*
 * Cached host memory is watched by the host monitor when there is one
 * (c->p.watch): subscribed before it is registered, so that an unmap
 * racing with the registration shows, in the word (the kernel channel)
 * or in the queue (userfaultfd: the drain after the registration marks
 * the miss's inflight range stale).  A range the monitor does not take
 * (no slot left, a file mapping) is handed out uncached unless the hooks
 * watch everything: nothing would see its memory go.  GPU memory is
 * pinned (kern_pin_gpu).
 * @return 0, or the module's -errno when a GPU pin failed.
 */
static int miss_subscribe(struct gdrc_cache *c, struct miss_plan *plan,
			  struct miss_kern *k)
{
	*k = (struct miss_kern){ .slot = -1 };
	if (plan->req->mem_type != GDRC_MEM_HOST) {
		if (!c->p.kgen ||
		    (!plan->cached && !c->p.gpu_kpin_required))
			return 0;
		return c->p.kpin ? kern_pin_gpu(c, plan, k) : -EOPNOTSUPP;
	}
	if (!c->p.watch || !plan->cached)
		return 0;
	if (c->p.watch->subscribe(c->p.watch_arg, plan->reg_start,
				  plan->reg_end - plan->reg_start, &k->slot,
				  &k->handle)) {
		k->slot = -1;
		if (!atomic_load_explicit(&c->cache_host,
					  memory_order_relaxed))
			plan_uncache(plan);
	}
	return 0;
}

/*
 * The kmod backend's pin failed with err: when the module ran out
 * (ENOMEM from the provider, BAR1; ENOSPC, EDQUOT: its limits), give back
 * the device's unused registrations and try once more.
 * @return GDRC_OK pinned; GDRC_ERR_NO_MEMORY; GDRC_ERR_KMOD.
 */
static gdrc_status_t kpin_retry(struct gdrc_cache *c, struct miss_plan *plan,
				int err, struct miss_kern *k)
{
	int full = err == -ENOMEM || err == -ENOSPC || err == -EDQUOT;

	if (full) {
		oom_release(c, plan->req->device);
		err = miss_subscribe(c, plan, k);
		full = err == -ENOMEM || err == -ENOSPC || err == -EDQUOT;
	}
	if (!err)
		return GDRC_OK;
	gdrc_debug("gdrcache.ko pin of %#lx+%lu failed: %s",
		   (unsigned long)plan->reg_start,
		   (unsigned long)(plan->reg_end - plan->reg_start),
		   strerror(-err));
	return full ? GDRC_ERR_NO_MEMORY : GDRC_ERR_KMOD;
}

/* ext_new could not allocate. */
#define EXT_NO_MEMORY ((struct gdrc_region_ext *)1)
/* GDRC_MR_INFO_* a query reads off the region itself (its kern and
 * tag_check bits), not stored in its ext. */
#define EXT_INFO_IMPLIED (GDRC_MR_INFO_KMOD | GDRC_MR_INFO_TAG_CHECKED)

/*
 * The ext a registration of plan needs (its kernel handle and pins are
 * filled in once it is registered), or NULL: a plain host registration
 * (its registered range the key, no allocation, no kernel subscription,
 * narrow enough for the page hash) has none.  Outside the lock.
 */
static struct gdrc_region_ext *ext_new(const struct miss_plan *plan,
				       const struct miss_kern *k)
{
	const struct gdrc_cache_req *req = plan->req;
	unsigned nseg = req->segs ? req->nseg : 0;
	struct gdrc_region_ext *x;

	if (req->mem_type == GDRC_MEM_HOST && !req->segs && !req->alloc_start &&
	    !req->alloc_end && !req->buffer_id &&
	    req->device == GDRC_DEVICE_HOST &&
	    !(req->info_flags & ~EXT_INFO_IMPLIED) &&
	    plan->reg_start == plan->start && plan->reg_end == plan->end &&
	    k->slot < 0 && !k->kmore &&
	    !(plan->cached && gdrc_index_wide(plan->start, plan->end)))
		return NULL;
	x = calloc(1, sizeof(*x) + nseg * sizeof(x->seg_store[0]));
	if (!x)
		return EXT_NO_MEMORY;
	x->reg_start = plan->reg_start;
	x->reg_end = plan->reg_end;
	x->alloc_start = req->alloc_start;
	x->alloc_end = req->alloc_end;
	x->buffer_id = req->buffer_id;
	x->kslot = k->slot;
	x->kpinned = (uint8_t)k->pinned;
	x->khandle = k->handle;
	x->kmore = k->kmore;
	x->kpins = k->kpins;
	x->device = (int16_t)req->device;
	x->info_flags = (uint8_t)(req->info_flags & ~EXT_INFO_IMPLIED);
	x->nseg = gdrc_req_nseg(req);
	if (nseg) {
		memcpy(x->seg_store, req->segs, nseg * sizeof(x->seg_store[0]));
		x->segs = x->seg_store;
	}
	return x;
}

/* Register plan's range outside the lock.  @return status; *r_p set. */
static gdrc_status_t miss_register(struct gdrc_cache *c,
				   struct miss_plan *plan,
				   struct gdrc_region **r_p)
{
	const struct gdrc_cache_req *req = plan->req;
	struct gdrc_pin_reg reg = {
		.addr = plan->reg_start,
		.length = plan->reg_end - plan->reg_start,
		.access = plan->access,
		.mem_type = req->mem_type,
		.id = req->buffer_id,
	};
	void *be;
	const struct gdrc_pin_ops *ops = gdrc_cache_ops_for(c, req->mem_type,
							    &be);
	gdrc_status_t status;
	struct gdrc_region_ext *x;
	struct gdrc_region *r;
	struct miss_kern k;
	int kerr;

	r = gdrc_region_alloc(c);
	if (!r)
		return gdrc_arena_full(c) ? GDRC_ERR_LIMIT : GDRC_ERR_NO_MEMORY;
	kerr = miss_subscribe(c, plan, &k);
	if (req->mem_type == GDRC_MEM_CUDA && c->p.gpu_kpin_required &&
	    !k.pinned) {
		status = kpin_retry(c, plan, kerr, &k);
		if (status) {
			gdrc_stat_add(c, GDRC_STAT_REG_FAILURES, 1);
			gdrc_region_free(c, r);
			return status;
		}
	}
	x = ext_new(plan, &k);
	if (x == EXT_NO_MEMORY) {
		kern_release(c, &k);
		gdrc_region_free(c, r);
		return GDRC_ERR_NO_MEMORY;
	}
	status = reg_with_retry(c, ops, be, &reg, req->device);
	if (status) {
		free(x);
		kern_release(c, &k);
		gdrc_stat_add(c, GDRC_STAT_REG_FAILURES, 1);
		gdrc_region_free(c, r);
		return status;
	}
	if (x)
		atomic_store_explicit(&r->ext, x, memory_order_relaxed);
	else
		x = REGION_EXT_NONE;
	r->kern = k.slot >= 0;
	gdrc_region_cold(r)->id = atomic_fetch_add_explicit(
		&region_id_next, 1, memory_order_relaxed);
	r->start = plan->start;
	r->end = plan->end;
	r->access = plan->access & 0xf;
	r->lkey = reg.lkey;
	r->rkey = reg.rkey;
	r->mem_type = req->mem_type & 1;
	r->kind = req->kind & 7;
	/* GDRC_VALIDATE=auto: the kernel's word replaces the tag query. */
	if (!req->tag_check || (req->tag_check_auto && k.slot >= 0))
		r->tag_check = REGION_TAG_NONE;
	else if (!x->segs)
		r->tag_check = REGION_TAG_ONE;
	else
		r->tag_check = x->nseg <= REGION_SEGS_WALK ? REGION_TAG_SEGS :
							     REGION_TAG_MANY;
	r->was_cached = 0;
	gdrc_region_cold(r)->obj = reg.handle;
	gdrc_region_publish(c, r);
	*r_p = r;
	return GDRC_OK;
}

/* Is [start, end) inside a private run this cache remembers? */
static int vmemo_covers(const struct gdrc_cache *c, uintptr_t start,
			uintptr_t end)
{
	for (unsigned i = 0; i < GDRC_VMEMO; i++)
		if (c->vmemo[i].start <= start && end <= c->vmemo[i].end)
			return 1;
	return 0;
}

/*
 * Plain host memory is cached only where the sources in force see every
 * way its pages can go (c->p.host_private: private memory, unless
 * gdrcache.ko watches); other memory is registered for this get
 * alone, as GDRC_GET_UNCACHED asks, and counted as unseen.  Memory CUDA
 * allocated (alloc_end set: cuMemHostAlloc) goes with its CUDA free,
 * which the CUDA hooks see.  Before plan_miss, so that an uncached plan
 * is not widened over neighbours.  Under the write lock, after the
 * drain: a remembered run no event touched since is still private.
 */
static void plan_private(struct gdrc_cache *c, struct miss_plan *plan)
{
	const struct gdrc_cache_req *req = plan->req;
	uintptr_t lo, hi;

	if (!c->p.host_private || !plan->cached ||
	    req->mem_type != GDRC_MEM_HOST || req->alloc_end ||
	    vmemo_covers(c, plan->start, plan->end))
		return;
	if (c->p.host_private(plan->start, plan->end, &lo, &hi)) {
		if (c->p.host_private_memo)
			gdrc_vmemo_add(c, lo, hi);
		return;
	}
	plan_uncache(plan);
	plan->unseen = 1;
}

/* Retries when unmaps keep racing with the registration. */
#define MISS_STALE_RETRIES 3

static void plan_init(struct gdrc_cache *c, const struct gdrc_cache_req *req,
		      struct miss_plan *plan)
{
	*plan = (struct miss_plan){
		.access = req->access,
		.cached = !(req->flags & GDRC_GET_UNCACHED) &&
			  (req->mem_type != GDRC_MEM_HOST || c->p.watch ||
			   atomic_load_explicit(&c->cache_host,
						memory_order_relaxed)),
		.req = req,
	};
	if (req->mem_type == GDRC_MEM_HOST) {
		plan->start = gdrc_align_down(req->start, c->page_size);
		plan->end = gdrc_align_up(req->end, c->page_size);
	} else {
		plan->start = req->key_start;
		plan->end = req->key_end;
	}
}

/*
 * Under the write lock: a cached registration that covers the request
 * (made by another thread, or while this one registered).  If there is
 * one, the lock is dropped and the hit served in *mr_p.
 * @return 1 served; 0 none, the lock still held.
 */
static int serve_cover(struct gdrc_cache *c, const struct gdrc_cache_req *req,
		       const struct gdrc_cover_arg *want, struct gdrc_defer *d,
		       struct gdrc_mr **mr_p)
{
	struct gdrc_region *found;
	uint64_t hold;

	found = gdrc_find_cover(c, req->start, req->end, want);
	if (!found)
		return 0;
	hold = gdrc_hold_for(c, found, req->start);
	gdrc_hit(found, hold);
	gdrc_cache_unlock_release(c, d);
	*mr_p = gdrc_hit_done(c, found, hold);
	return 1;
}

static gdrc_status_t get_miss(struct gdrc_cache *c,
			      const struct gdrc_cache_req *req,
			      struct gdrc_mr **mr_p, void **spare_p)
{
	struct gdrc_cover_arg want = { .c = c, .access = req->access,
				       .req = req };
	struct gdrc_inflight inflight = { 0 };
	struct gdrc_defer d = { 0 };
	struct gdrc_collect col = { 0 };
	struct miss_plan plan;
	struct gdrc_region *r = NULL;
	gdrc_status_t status;
	uintptr_t own_start, own_end; /* the request's own key range */
	uint64_t inserts;             /* the index's, when nothing covered */
	int tries = 0, reserved, narrow = 0, widened;

	if (atomic_load_explicit(&c->forked, memory_order_relaxed))
		return GDRC_ERR_FORK;
	gdrc_tls_drop_invalid(c);
again:
	plan_init(c, req, &plan);
	plan.narrow = narrow;
	gdrc_cache_wrlock(c);
	gdrc_drain(c, &d);
	if (plan.cached && serve_cover(c, req, &want, &d, mr_p))
		return GDRC_OK;
	inserts = c->ix.inserts;
	own_start = plan.start;
	own_end = plan.end;
	plan_private(c, &plan);
	plan_miss(c, &plan, &d);
	widened = plan.start != own_start || plan.end != own_end;
	if (gdrc_evict(c, plan.cached, plan.reg_end - plan.reg_start, &d) ||
	    gdrc_evict_device(c, req->device, plan.reg_end - plan.reg_start,
			      &d)) {
		gdrc_stat_add(c, GDRC_STAT_LIMIT_REJECTS, 1);
		gdrc_cache_unlock_release(c, &d);
		gdrc_debug("%#lx+%lu exceeds the cache limits",
			   (unsigned long)plan.reg_start,
			   (unsigned long)(plan.reg_end - plan.reg_start));
		return GDRC_ERR_LIMIT;
	}
	reserved = plan.cached; /* miss_register may uncache the plan */
	c->reserved_regions += reserved;
	c->reserved_bytes += plan.reg_end - plan.reg_start;
	gdrc_dev_reserve(c, req->device, plan.reg_end - plan.reg_start, 1);
	inflight = (struct gdrc_inflight){
		.next = c->inflight, .start = plan.start, .end = plan.end,
		.alloc_start = req->alloc_start, .alloc_end = req->alloc_end,
	};
	c->inflight = &inflight;
	gdrc_cache_unlock_release(c, &d);

	status = miss_register(c, &plan, &r);

	gdrc_cache_wrlock(c);
	gdrc_drain(c, &d);
	for (struct gdrc_inflight **pp = &c->inflight; *pp;
	     pp = &(*pp)->next) {
		if (*pp == &inflight) {
			*pp = inflight.next;
			break;
		}
	}
	c->reserved_regions -= reserved;
	c->reserved_bytes -= plan.reg_end - plan.reg_start;
	gdrc_dev_reserve(c, req->device, plan.reg_end - plan.reg_start, -1);
	if (status) {
		int freed = inflight.stale;

		gdrc_cache_unlock_release(c, &d);
		/* The range was unmapped or freed while the backend looked
		 * at it (drain marked it): its failure is the memory going
		 * (libcufile: CU_FILE_CUDA_POINTER_INVALID), not the
		 * backend's.  Trying again with this request would register
		 * what the caller classified before the free: busy, as a
		 * registration that succeeded over a free would end after
		 * its retries (below). */
		if (freed) {
			gdrc_debug("%#lx+%lu went while it was being registered",
				   (unsigned long)plan.start,
				   (unsigned long)(plan.end - plan.start));
			return GDRC_ERR_BUSY;
		}
		/* A registration widened over cached neighbours spans pages
		 * the caller did not ask for, and one of them may have been
		 * unmapped meanwhile (ibv_reg_mr, io_uring: EFAULT), or it
		 * grew past what the backend takes as one (io_uring: 1 GiB):
		 * the caller's own range, once more, alone. */
		if ((status == GDRC_ERR_VERBS || status == GDRC_ERR_IO ||
		     status == GDRC_ERR_UNSUPPORTED) && widened && !narrow) {
			narrow = 1;
			goto again;
		}
		return status;
	}
	/* Unmapped while being registered: seen by the hooks (drain marked
	 * it) or by the kernel channel (its word moved). */
	if (inflight.stale || gdrc_region_kstale(c, r)) {
		gdrc_cache_unlock_release(c, &d);
		gdrc_region_unpin(c, r);
		if (++tries < MISS_STALE_RETRIES)
			goto again;
		gdrc_debug("%#lx+%lu kept being unmapped while registering",
			   (unsigned long)plan.start,
			   (unsigned long)(plan.end - plan.start));
		return GDRC_ERR_BUSY;
	}
	if (plan.cached) {
		/* Another thread may have cached the same range meanwhile:
		 * serve that (a hit) and drop ours.  (Only an insertion can
		 * have made a cover: with none since the search above, there
		 * is none.) */
		if (c->ix.inserts != inserts &&
		    serve_cover(c, req, &want, &d, mr_p)) {
			gdrc_region_unpin(c, r);
			return GDRC_OK;
		}
		col = (struct gdrc_collect){
			.start = plan.start, .end = plan.end,
			.access = plan.access, .subsume = 1, .req = req,
		};
		gdrc_index_overlap(c, plan.start, plan.end, gdrc_collect_fn,
				   &col);
		gdrc_remove_collected(c, &col, 0, &d);
		/* No room in the index (its larger table could not be
		 * made): handed out uncached, as a range nothing watches
		 * is. */
		if (gdrc_region_insert(c, r, spare_p))
			plan_uncache(&plan);
	}
	gdrc_stat_add(c, GDRC_STAT_MISSES, 1);
	gdrc_stat_add(c, plan.cause, 1);
	if (plan.unseen)
		gdrc_stat_add(c, GDRC_STAT_UNCACHED_SHARED, 1);
	gdrc_cache_unlock_release(c, &d);
	/* The miss's pin is the get: a direct reference, served as an
	 * index hit that does not repeat is, so that this thread's next get
	 * of it makes a handle (gdrc_hold_for) and the one after reaches
	 * the fast path.  A registration got once costs no handle: a
	 * million of them would cost 64 MB of handles. */
	gdrc_region_pin_to_ref(r);
	*mr_p = plan.cached ? gdrc_serve_hit(c, r, 1) : gdrc_serve_direct(r);
	return GDRC_OK;
}

gdrc_status_t gdrc_cache_get_miss(struct gdrc_cache *c,
				  const struct gdrc_cache_req *req,
				  struct gdrc_mr **mr_p)
{
	/* A larger page hash, made before the lock if the insertion may
	 * need one (no allocation under cache->lock). */
	void *spare = gdrc_index_prepare(c);
	gdrc_status_t status = get_miss(c, req, mr_p, &spare);

	gdrc_index_table_free(spare);
	return status;
}
