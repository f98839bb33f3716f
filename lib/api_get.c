// SPDX-License-Identifier: BSD-3-Clause
/*
 * api_get.c - gdrc_mr_get, gdrc_mr_reget and gdrc_mr_put: the calls a
 * communication library makes around every transfer, and what a get does
 * when the cache cannot answer at once.  Read from the top down; a get
 * goes through as many of these steps as it needs:
 *
 *   1. gdrc_mr_get looks at its arguments and the context pointer, then
 *      at the one of this thread's four entries that served the last
 *      get and, if it covers the request and its region is a plain host
 *      region, serves the hit (gdrc_cache_get_host).  This is the code
 *      a repeated hit runs, inline in one function that calls nothing,
 *      straight through with no branch taken; every other case goes on
 *      by a jump: get_args checks what the hit path does not take
 *      (flags, bad arguments, a dead context), mr_get_next tries the
 *      entry after that one (buffers taken in turn find theirs there),
 *      mr_get_checked serves an entry whose region needs more checks (a
 *      BUFFER_ID, the kernel's word).
 *   2. mr_get_parked: this thread's parked table (gdrc_cache_parked_host,
 *      inline and calling nothing too), then the other two entries,
 *      then a hit through a hazard cell (gdrc_cache_get_cell: a plain
 *      one-page region read from the index's bucket alone, with the
 *      fast path's checks; a look that saw nothing of the page there
 *      sends the get past step 3's own look: GET_ABSENT).
 *      What the inline lookup leaves (a review due, more checks, the
 *      second hit in a row) goes to mr_get_slow, the general lookups.
 *   3. mr_get_index: after checking that nobody patched over our hooks
 *      (gdrc_api_hooks_check) and waiting for unmaps still posting their
 *      events, the cache's index (gdrc_cache_lookup).  The index's first
 *      line was asked for before (gdrc_index_prefetch), as soon as the
 *      thread's handles could not serve.
 *   4. mr_get_miss: not cached.  Ask the CUDA driver what the memory is
 *      (gdrc_classify), turn that and the context's choices into a
 *      request (req_policy, gdrc_req_from_class; cuFile's rules on top),
 *      and have the cache register it (gdrc_cache_get_miss).  GPU memory
 *      with no GPU backend that works is refused (gpu_refused).
 *
 * A put is the same: gdrc_mr_put's hit path (the handle the last get
 * served), then put_other: the handle the last parked hit served, a
 * direct reference's put (put_direct), a hazard cell's (put_cell), the
 * thread's other entries, and mr_put_slow, which checks the context and
 * reports a bad handle as a misuse (put_misuse).
 *
 * Everything past step 1 is out of line on purpose: its frames would
 * cost every hit register saves.  The steps a random pattern runs on
 * every get (2, 3) are GDRC_OUTLINE, compiled for speed; the rare ones
 * GDRC_NOINLINE (cold).  The hit paths take no branch: each of their
 * compares is an exit of its own (gdrc_tls_find_mru,
 * gdrc_cache_put_mru), which gcc lays out of the way, where one
 * unlikely test over several compares had it place the exit right
 * behind the first and jump over it on every hit (0.3 ns of the 7.1 ns
 * a hit and put took on the CPU machine).  The two hit paths are
 * aligned to a cache line, so that their layout does not move with the
 * code around them (either way it moved the one-range hit by up to
 * 0.4 ns there).  No lock here; the cache takes its own
 * (cache.h).  Never called in hook context.  Callers: the program.
 */
#include <stdlib.h>

#include "api_int.h"
#include "cache/cache.h"
#include "classify/classify.h"
#include "gdrc_int.h"
#include "hooks/hooks.h"
#include "log/log.h"
#include "req/req.h"

#define GDRC_ACCESS_ALL                                                      \
	(GDRC_ACCESS_LOCAL_WRITE | GDRC_ACCESS_REMOTE_WRITE |                \
	 GDRC_ACCESS_REMOTE_READ | GDRC_ACCESS_REMOTE_ATOMIC)
#define GDRC_GET_ALL (GDRC_GET_UNCACHED)
/* Not a caller's flag (refused as one): the hazard cell's look found
 * nothing of the request's page in the index, so the index step skips
 * its own look (gdrc_cache_get_cell's -1). */
#define GET_ABSENT (1u << 31)

/* VMM mappings a miss finds without allocating (more: on the heap). */
#define GDRC_SEG_STACK 8

/* What a registration must allow for access: remote writes and atomics
 * need local write too (the verbs rule). */
static inline uint32_t access_needed(uint32_t access)
{
	if (access & (GDRC_ACCESS_REMOTE_WRITE | GDRC_ACCESS_REMOTE_ATOMIC))
		access |= GDRC_ACCESS_LOCAL_WRITE;
	return access;
}

/* May a hit trust a host registration without a tag check, that is, are
 * the frees of its memory being seen right now?  Yes while no unmap is
 * between its system call and its event (one load) and our patches of
 * glibc and of CUDA's frees are still in place (gdrc_hooks_probe_ok).
 * The fast path's host_ok. */
static inline __attribute__((always_inline)) int hooks_trusted(void)
{
	return gdrc_hooks_idle() && gdrc_hooks_probe_ok();
}

/* Its first half, for the hits through an entry, which know whether
 * CUDA knows their memory (hit.h, gdrc_cache_get_host): no unmap in its
 * window and glibc's patch in place.  Their cuda_ok is the other half,
 * gdrc_hooks_probe_cuda_ok. */
static inline __attribute__((always_inline)) int hooks_trusted_libc(void)
{
	return gdrc_hooks_idle() && gdrc_hooks_probe_libc_ok();
}

GDRC_NOINLINE
static gdrc_status_t get_args(struct gdrc_ctx *pub, const void *addr,
			      size_t len, uint32_t access, uint32_t flags,
			      struct gdrc_mr **mr_p);
GDRC_OUTLINE
static gdrc_status_t mr_get_next(struct gdrc_ctx *ctx, uintptr_t start,
				 uintptr_t end, uint32_t access,
				 struct gdrc_mr **mr_p);
static inline __attribute__((always_inline)) gdrc_status_t
mr_get_parked(struct gdrc_ctx *ctx, uintptr_t start, uintptr_t end,
	      uint32_t access, uint32_t flags, struct gdrc_mr **mr_p);
GDRC_NOINLINE
static gdrc_status_t mr_get_checked(struct gdrc_ctx *ctx, uintptr_t start,
				    uintptr_t end, uint32_t access,
				    uint32_t flags, struct gdrc_mr **mr_p);
GDRC_OUTLINE
static gdrc_status_t mr_get_slow(struct gdrc_ctx *ctx, uintptr_t start,
				 uintptr_t end, uint32_t access,
				 uint32_t flags, struct gdrc_mr **mr_p);
GDRC_OUTLINE
static gdrc_status_t mr_get_index(struct gdrc_ctx *ctx, uintptr_t start,
				  uintptr_t end, uint32_t access,
				  uint32_t flags, struct gdrc_mr **mr_p);
GDRC_NOINLINE
static gdrc_status_t mr_get_miss(struct gdrc_ctx *ctx, uintptr_t start,
				 uintptr_t end, uint32_t access,
				 uint32_t flags, struct gdrc_mr **mr_p);
static struct gdrc_req_policy req_policy(struct gdrc_ctx *ctx,
					 const struct gdrc_class *cls);
static gdrc_status_t gpu_refused(struct gdrc_ctx *ctx, uintptr_t start);
GDRC_OUTLINE
static void put_other(struct gdrc_ctx *pub, struct gdrc_mr *mr);
GDRC_NOINLINE
static void put_direct(struct gdrc_ctx *pub, struct gdrc_mr *mr);
GDRC_NOINLINE
static void put_cell(struct gdrc_ctx *pub, struct gdrc_mr *mr);
GDRC_NOINLINE
static void mr_put_slow(struct gdrc_ctx *pub, struct gdrc_mr *mr);
GDRC_NOINLINE
static void put_misuse(const struct gdrc_mr *mr, int fault);

/*
 * Step 1: the hit path.  Everything a hit runs is here, inline, and it
 * calls nothing: a plain get (no flags) of a valid range from a live
 * context, served by the entry that served this thread's last get, on
 * a plain host region.  Anything else goes on by a jump: arguments the
 * hit path does not take to get_args, which checks and answers them.
 * The rights asked for are compared as given: an entry's are a
 * registration's, which has local write wherever it has remote write or
 * atomics, so access_needed would change no answer here (the steps
 * after it apply it).
 */
GDRC_API GDRC_HOT_ALIGN gdrc_status_t gdrc_mr_get(struct gdrc_ctx *pub,
						  const void *addr,
						  size_t len, uint32_t access,
						  uint32_t flags,
						  struct gdrc_mr **mr_p)
{
	uintptr_t start = (uintptr_t)addr, end = start + len;
	struct gdrc_tls_entry *e;
	struct gdrc_ctx *ctx;

	if (gdrc_unlikely(!pub || !mr_p || flags || !range_ok(addr, len) ||
			  (access & ~GDRC_ACCESS_ALL)))
		return get_args(pub, addr, len, access, flags, mr_p);
	ctx = ctx_of(pub);
	if (gdrc_unlikely(!ctx))
		return get_args(pub, addr, len, access, flags, mr_p);
	e = gdrc_tls_find_mru(&gdrc_tls_cur, &ctx->cache, start, end, access);
	if (gdrc_unlikely(!e))
		return mr_get_next(ctx, start, end, access, mr_p);
	if (gdrc_unlikely(!gdrc_cache_get_host(&ctx->cache, e,
					       hooks_trusted_libc,
					       gdrc_hooks_probe_cuda_ok, mr_p)))
		return mr_get_checked(ctx, start, end, access_needed(access),
				      0, mr_p);
	return GDRC_OK;
}

/* The arguments gdrc_mr_get's hit path does not take: flags, and
 * anything wrong (GDRC_ERR_INVALID_PARAM, nothing changed; a context
 * that is not one is a misuse too). */
GDRC_NOINLINE
static gdrc_status_t get_args(struct gdrc_ctx *pub, const void *addr,
			      size_t len, uint32_t access, uint32_t flags,
			      struct gdrc_mr **mr_p)
{
	uintptr_t start = (uintptr_t)addr;
	struct gdrc_ctx *ctx;

	if (!pub || !mr_p || !range_ok(addr, len) ||
	    (access & ~GDRC_ACCESS_ALL) || (flags & ~GDRC_GET_ALL))
		return GDRC_ERR_INVALID_PARAM;
	ctx = ctx_open(pub, "gdrc_mr_get");
	if (!ctx)
		return GDRC_ERR_INVALID_PARAM;
	return mr_get_slow(ctx, start, start + len, access_needed(access),
			   flags, mr_p);
}

/* Step 1b: the entry gdrc_mr_get tried does not cover the request: the
 * one after it (GDRC_TLS_FIRST), served as step 1 serves; else step 2. */
GDRC_OUTLINE
static gdrc_status_t mr_get_next(struct gdrc_ctx *ctx, uintptr_t start,
				 uintptr_t end, uint32_t access,
				 struct gdrc_mr **mr_p)
{
	struct gdrc_tls_entry *e;

	access = access_needed(access);
	e = gdrc_tls_find(&gdrc_tls_cur, &ctx->cache, start, end, access, 1,
			  GDRC_TLS_FIRST - 1);
	if (!e)
		return mr_get_parked(ctx, start, end, access, 0, mr_p);
	if (gdrc_unlikely(!gdrc_cache_get_host(&ctx->cache, e,
					       hooks_trusted_libc,
					       gdrc_hooks_probe_cuda_ok, mr_p)))
		return mr_get_checked(ctx, start, end, access, 0, mr_p);
	return GDRC_OK;
}

/* Step 2: neither of the two entries gdrc_mr_get tried covers the
 * request: this thread's parked table (gdrc_cache_parked_host, calling
 * nothing, so that this needs no frame either), then the other two
 * entries, then the index.  What the inline lookup leaves to
 * gdrc_cache_get_parked goes to mr_get_slow.  Inline in mr_get_next,
 * its one caller: a random pattern runs both on every get. */
static inline __attribute__((always_inline)) gdrc_status_t
mr_get_parked(struct gdrc_ctx *ctx, uintptr_t start, uintptr_t end,
	      uint32_t access, uint32_t flags, struct gdrc_mr **mr_p)
{
	/* A thread whose parked table rests (its gets seldom hit there)
	 * most likely goes to the index: the index's first line is asked
	 * for now, while the rest of the look runs. */
	int resting = gdrc_tls_parked_resting(&gdrc_tls_cur);
	int parked = gdrc_cache_parked_host(&ctx->cache, start, end, access,
					    hooks_trusted_libc,
					    gdrc_hooks_probe_cuda_ok, mr_p);
	struct gdrc_tls_entry *e;

	if (resting)
		gdrc_index_prefetch(&ctx->cache, start);
	if (parked > 0)
		return GDRC_OK;
	if (parked < 0)
		return mr_get_slow(ctx, start, end, access, flags, mr_p);
	/* The four entries gdrc_mr_get did not try. */
	e = gdrc_tls_find(&gdrc_tls_cur, &ctx->cache, start, end, access,
			  GDRC_TLS_FIRST, GDRC_TLS_ENTRIES - 1);
	if (!e) {
		int cell = 0;

		if (!resting)
			gdrc_index_prefetch(&ctx->cache, start);
		/* A hit through a hazard cell needs none of the index
		 * step's waits: the fast path's checks do, the hooks'
		 * first. */
		if (hooks_trusted())
			cell = gdrc_cache_get_cell(&ctx->cache, start, end,
						   access, mr_p);
		if (cell > 0)
			return GDRC_OK;
		return mr_get_index(ctx, start, end, access,
				    cell ? flags | GET_ABSENT : flags, mr_p);
	}
	if (!gdrc_cache_get_host(&ctx->cache, e, hooks_trusted_libc,
				 gdrc_hooks_probe_cuda_ok, mr_p))
		return mr_get_checked(ctx, start, end, access, flags, mr_p);
	return GDRC_OK;
}

/* Step 1b: one of this thread's entries covers the request, but its
 * region needs more than a plain host hit's checks (a BUFFER_ID, the
 * kernel's word), or did not pass them: all of gdrc_cache_hit_ok's
 * checks on the four entries, else the parked table's general lookup,
 * else the index (the four are not looked at again: a failed BUFFER_ID
 * check would ask the driver twice).  flags: 0 (a plain get). */
GDRC_NOINLINE
static gdrc_status_t mr_get_checked(struct gdrc_ctx *ctx, uintptr_t start,
				    uintptr_t end, uint32_t access,
				    uint32_t flags, struct gdrc_mr **mr_p)
{
	struct gdrc_mr *r;

	if ((r = gdrc_cache_get_fast(&ctx->cache, start, end, access,
				     hooks_trusted)) ||
	    (r = gdrc_cache_get_parked(&ctx->cache, start, end, access,
				       hooks_trusted))) {
		*mr_p = r;
		return GDRC_OK;
	}
	gdrc_index_prefetch(&ctx->cache, start);
	return mr_get_index(ctx, start, end, access, flags, mr_p);
}

/* Step 2b: what the inline parked lookup left (a review due, more
 * checks, the second hit in a row): the parked table's general lookup,
 * then the four entries with every check (two of them not tried yet);
 * then the index.  Also where a get with flags starts (it skips both). */
GDRC_OUTLINE
static gdrc_status_t mr_get_slow(struct gdrc_ctx *ctx, uintptr_t start,
				 uintptr_t end, uint32_t access,
				 uint32_t flags, struct gdrc_mr **mr_p)
{
	struct gdrc_mr *r;

	/* The fast path's second look: this thread's parked handle.  (A
	 * failed get leaves *mr_p alone.) */
	if (!flags && ((r = gdrc_cache_get_parked(&ctx->cache, start, end,
						  access, hooks_trusted)) ||
		       (r = gdrc_cache_get_fast(&ctx->cache, start, end, access,
						hooks_trusted)))) {
		*mr_p = r;
		return GDRC_OK;
	}
	if (!(flags & GDRC_GET_UNCACHED))
		gdrc_index_prefetch(&ctx->cache, start);
	return mr_get_index(ctx, start, end, access, flags, mr_p);
}

/* Step 3: the index.  Not found by this thread's handles: after checking
 * that nobody patched over our hooks and waiting for unmaps still posting
 * their events, the cache's index; else a miss.  The caller asked for
 * the index's first line already (gdrc_index_prefetch), as soon as it
 * knew the handles would not serve. */
GDRC_OUTLINE
static gdrc_status_t mr_get_index(struct gdrc_ctx *ctx, uintptr_t start,
				  uintptr_t end, uint32_t access,
				  uint32_t flags, struct gdrc_mr **mr_p)
{
	int ret;

	gdrc_api_hooks_check();
	/* An unmap of these addresses may still be posting its event. */
	gdrc_hooks_wait_idle();
	if (!(flags & (GDRC_GET_UNCACHED | GET_ABSENT))) {
		ret = gdrc_cache_lookup(&ctx->cache, start, end, access, mr_p);
		if (ret)
			return ret < 0 ? (gdrc_status_t)ret : GDRC_OK;
	}
	return mr_get_miss(ctx, start, end, access, flags & ~GET_ABSENT,
			   mr_p);
}

/* Step 4: not cached: classify and register.  Not inlined: its frame
 * (the request, the segments on the stack) would cost every index hit. */
GDRC_NOINLINE
static gdrc_status_t mr_get_miss(struct gdrc_ctx *ctx, uintptr_t start,
				 uintptr_t end, uint32_t access,
				 uint32_t flags, struct gdrc_mr **mr_p)
{
	struct gdrc_cache_req req = {
		.start = start, .end = end, .access = access, .flags = flags,
		.mem_type = GDRC_MEM_HOST, .kind = GDRC_PTR_HOST, .device = -1,
	};
	struct gdrc_seg seg_buf[GDRC_SEG_STACK], *segs = seg_buf;
	struct gdrc_class cls;
	gdrc_status_t status;

	if (ctx->cuda) {
		struct gdrc_req_policy pol;
		int sync_set;

		gdrc_cache_stat_add(&ctx->cache, GDRC_STAT_CLASSIFY_CALLS, 1);
		status = gdrc_classify(ctx->cuda, start, &cls);
		if (status)
			return status;
		if (cls.info.mem_type == GDRC_MEM_CUDA &&
		    cls.info.kind != GDRC_PTR_MANAGED && ctx->gpu_refused)
			return gpu_refused(ctx, start);
		pol = req_policy(ctx, &cls);
		status = gdrc_req_from_class(ctx->cuda, &cls, &pol, &req,
					     seg_buf, GDRC_ARRAY_SIZE(seg_buf),
					     &segs, &sync_set);
		if (sync_set)
			gdrc_cache_stat_add(&ctx->cache,
					    GDRC_STAT_SYNC_MEMOPS_SET, 1);
		if (status)
			goto out;
	}
	if (ctx->cufile) {
		status = gdrc_api_cufile_req(ctx, &req);
		if (status)
			goto out;
	}
	status = gdrc_cache_get_miss(&ctx->cache, &req, mr_p);
out:
	if (segs != seg_buf)
		free(segs);
	return status;
}

/*
 * The context's choices for a miss on the memory cls describes
 * (struct gdrc_req_policy, req/req.h): when GDRC_VALIDATE asks for a
 * BUFFER_ID check at every hit of GPU memory, how large an allocation is
 * registered whole, the rounding.  GDRC_VALIDATE=hooks relies on the
 * CUDA free hooks instead only once they passed their self test (run
 * now if no CUDA context was current at gdrc_init).
 */
static struct gdrc_req_policy req_policy(struct gdrc_ctx *ctx,
					 const struct gdrc_class *cls)
{
	struct gdrc_req_policy pol = {
		.tag_check_auto =
			ctx->knobs.validate == GDRC_KNOB_VALIDATE_AUTO,
		.whole_alloc_max = ctx->knobs.whole_alloc_max,
		.reg_align = GDRC_GPU_PAGE_SIZE,
	};

	if (ctx->cufile) {
		/* cuFile: one registration per allocation (VMM: the run of
		 * mappings the request covers) whatever its size, exactly
		 * (it refuses a range past the allocation's end, 64 KiB
		 * rounding included: tests/gpu/cufile_semantics.c). */
		pol.whole_alloc_max = UINT64_MAX;
		pol.reg_align = 1;
	}

	if (cls->info.mem_type == GDRC_MEM_CUDA &&
	    cls->info.kind != GDRC_PTR_MANAGED)
		pol.tag_check =
			ctx->knobs.validate != GDRC_KNOB_VALIDATE_HOOKS ||
			(ctx->cuda_hooks &&
			 !gdrc_api_cuhooks_ok(ctx->cuda, cls->cu_ctx));
	return pol;
}

/* GPU memory with no GPU backend that works: say why, once per call. */
static gdrc_status_t gpu_refused(struct gdrc_ctx *ctx, uintptr_t start)
{
	char why[4 * 200];

	gdrc_api_gpu_refusal(ctx, why, sizeof(why));
	gdrc_error("%#lx is GPU memory and no GPU backend works: %s",
		   (unsigned long)start, why);
	return GDRC_ERR_UNSUPPORTED;
}

GDRC_API gdrc_status_t gdrc_mr_reget(struct gdrc_ctx *pub,
				     const struct gdrc_mr *mr,
				     const void *addr, size_t len,
				     uint32_t access)
{
	uintptr_t start = (uintptr_t)addr;
	struct gdrc_ctx *ctx;

	if (gdrc_unlikely(!pub || !mr || !range_ok(addr, len) ||
			  (access & ~GDRC_ACCESS_ALL)))
		return GDRC_ERR_INVALID_PARAM;
	ctx = ctx_open(pub, __func__);
	if (gdrc_unlikely(!ctx))
		return GDRC_ERR_INVALID_PARAM;
	access = access_needed(access);
	return gdrc_cache_reget(&ctx->cache, mr, start, start + len, access,
				hooks_trusted) ?
		       GDRC_OK :
		       GDRC_ERR_STALE;
}

/* The put's hit path: a live context and the handle the last get
 * served, taken back with two plain stores; like the get's, it calls
 * nothing and takes no branch.  Then the handle the last parked hit
 * served (buffers taken in turn, more than four: the put after a parked
 * hit), the same way.  Everything else goes to put_other, by a jump. */
GDRC_API GDRC_HOT_ALIGN void gdrc_mr_put(struct gdrc_ctx *pub,
					 struct gdrc_mr *mr)
{
	struct gdrc_ctx *ctx;

	if (gdrc_unlikely(!pub || !mr))
		return;
	ctx = ctx_of(pub);
	if (gdrc_unlikely(!ctx))
		return mr_put_slow(pub, mr);
	/* mr is compared with the entry's handle, nothing of it is read. */
	if (gdrc_likely(gdrc_cache_put_mru(&ctx->cache, mr)))
		return;
	if (gdrc_likely(gdrc_cache_put_parked(&ctx->cache, mr)))
		return;
	put_other(pub, mr);
}

/* A put from live context pub that neither of this thread's last handles
 * served. */
GDRC_OUTLINE
static void put_other(struct gdrc_ctx *pub, struct gdrc_mr *mr)
{
	struct gdrc_ctx *ctx = ctx_base(pub);

	/* A direct reference (an index hit that does not repeat) is none
	 * of this thread's entries: they are not looked over for it.  Its
	 * magic is on the line its put changes. */
	if (mr->magic == GDRC_MR_SELF_MAGIC)
		return put_direct(pub, mr);
	/* A hazard cell (an index hit on a plain host region): its line is
	 * the one its put changes. */
	if (mr->magic == GDRC_MR_CELL_MAGIC)
		return put_cell(pub, mr);
	if (gdrc_cache_put_fast(&ctx->cache, mr))
		return;
	mr_put_slow(pub, mr);
}

/* A put of a direct reference from live context pub; anything wrong
 * with it is mr_put_slow's. */
GDRC_NOINLINE
static void put_direct(struct gdrc_ctx *pub, struct gdrc_mr *mr)
{
	if (!gdrc_cache_put_direct(&ctx_base(pub)->cache, mr))
		mr_put_slow(pub, mr);
}

/* A put of a hazard cell from live context pub; anything wrong with it
 * is mr_put_slow's (which finds it again, changing nothing). */
GDRC_NOINLINE
static void put_cell(struct gdrc_ctx *pub, struct gdrc_mr *mr)
{
	if (gdrc_cache_put_cell(&ctx_base(pub)->cache, mr))
		mr_put_slow(pub, mr);
}

/* gdrc_mr_put past its hit path: the context checked, then the rest. */
GDRC_NOINLINE
static void mr_put_slow(struct gdrc_ctx *pub, struct gdrc_mr *mr)
{
	struct gdrc_ctx *ctx = ctx_open(pub, "gdrc_mr_put");
	int fault;

	if (!ctx)
		return;
	fault = gdrc_cache_put_slow(&ctx->cache, mr);
	if (fault)
		put_misuse(mr, fault);
}

/* What a put found wrong with mr (enum gdrc_put_fault), said. */
GDRC_NOINLINE
static void put_misuse(const struct gdrc_mr *mr, int fault)
{
	static const char *const what[] = {
		[GDRC_PUT_NOT_MR] = MR_NOT_LIVE,
		[GDRC_PUT_OTHER_CTX] = "belongs to another context",
		[GDRC_PUT_RELEASED] = "was already let go of: a double put",
		[GDRC_PUT_TOO_MANY] = "has no get outstanding: a double put",
	};

	/* An emptied cell names no registration any more. */
	if (fault == GDRC_PUT_NOT_MR || !gdrc_mr_region(mr))
		gdrc_api_misuse("gdrc_mr_put", "handle %p %s",
				(const void *)mr, what[fault]);
	else
		gdrc_api_misuse("gdrc_mr_put",
				"handle %p (registration %llu) %s",
				(const void *)mr,
				(unsigned long long)gdrc_region_cold(
					gdrc_mr_region(mr))->id,
				what[fault]);
}
