// SPDX-License-Identifier: BSD-3-Clause
/*
 * preload.c - libgdrcache-preload.so: the cache for unmodified programs.
 *
 *   LD_PRELOAD=libgdrcache-preload.so ./program
 *
 * A thin layer over the public API of libgdrcache.so.0, which it
 * depends on (found beside it: its run path is $ORIGIN): one library in
 * the process, whatever the mix of programs and libraries that link it
 * and this preload, so one set of hooks, one configuration, one log.
 * At load it installs the memory hooks (gdrc_install_hooks): glibc's
 * (munmap, mremap, madvise, brk, mmap MAP_FIXED, glibc's own internal
 * calls included) and the CUDA driver's free functions (libcuda.so.1
 * loaded, not initialised; GDRC_CUDA_LIBRARY=none or GDRC_MEM_HOOKS=none
 * skips them).
 *
 * With GDRC_PRELOAD_MR=1 (default) it also serves the program's own
 * ibv_reg_mr, ibv_reg_mr_iova and ibv_reg_mr_iova2 from the cache: each
 * call returns a struct ibv_mr of its own, with exactly the addr and
 * length asked for and the keys of a cached registration that covers
 * them, and ibv_dereg_mr of it drops the reference.  A program that
 * registers and deregisters its buffer around every message then pays a
 * lookup instead of a pin.  One gdrc context per protection domain,
 * made at the PD's first registration (the CUDA driver is initialised
 * then, when it is installed) and closed by ibv_dealloc_pd.
 *
 * Passed through untouched: registrations with access flags the cache
 * does not model (MW_BIND, ZERO_BASED, ON_DEMAND, ...), an iova other
 * than the address, zero lengths, anything the cache refuses (managed
 * memory, limits), ibv_reg_dmabuf_mr, and every MR the program did not
 * get from here.  The library's own registrations never come here: it
 * calls libibverbs' definitions directly (lib/pin/pin_ibv_resolve.c).
 * The MR's handle field is not meaningful; ibv_rereg_mr of a cached MR
 * fails with IBV_REREG_MR_ERR_INPUT.
 *
 * Locks: preload_lock guards the PD and MR tables; it is never held
 * across a call into the cache or libibverbs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include <gdrcache.h>

#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(elt) (preload_oom = 1)
static int preload_oom; /* under preload_lock */
#include <uthash.h>

/* rdma-core makes these macros that pick a function; we define both. */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* Access bits the cache registers with; optional ones may be dropped. */
#define PRELOAD_ACCESS                                                       \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                  \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

struct preload_pd {
	struct ibv_pd *pd;       /* key */
	struct gdrc_ctx *ctx;
	unsigned long mrs;       /* our MRs on it, not yet deregistered */
	UT_hash_handle hh;
};

struct preload_mr {
	struct ibv_mr mr;        /* what the program holds */
	struct ibv_mr *self;     /* key: &mr */
	struct gdrc_mr *gmr;
	struct preload_pd *ppd;
	UT_hash_handle hh;
};

static pthread_mutex_t preload_lock = PTHREAD_MUTEX_INITIALIZER;
static struct preload_pd *preload_pds;   /* under preload_lock */
static struct preload_mr *preload_mrs;   /* under preload_lock */
static int preload_mr_on;                /* fixed after the constructor */

static struct {
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	struct ibv_mr *(*reg_mr_iova)(struct ibv_pd *, void *, size_t,
				      uint64_t, int);
	struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *, void *, size_t,
				       uint64_t, unsigned int);
	int (*dereg_mr)(struct ibv_mr *);
	int (*rereg_mr)(struct ibv_mr *, int, struct ibv_pd *, void *, size_t,
			int);
	int (*dealloc_pd)(struct ibv_pd *);
} real;

/* ------------------------------------------------------------------
 * Tables.
 * ------------------------------------------------------------------ */

/* The context of pd, made at its first use.  NULL: pass through. */
static struct preload_pd *pd_get(struct ibv_pd *pd)
{
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_PD,
				   .pd = pd };
	struct preload_pd *ppd, *other = NULL;
	struct gdrc_ctx *ctx;
	gdrc_status_t status;
	int added = 0;

	pthread_mutex_lock(&preload_lock);
	HASH_FIND_PTR(preload_pds, &pd, ppd);
	pthread_mutex_unlock(&preload_lock);
	if (ppd)
		return ppd;

	status = gdrc_init(&cfg, &ctx);
	if (status) {
		gdrc_log_printf(GDRC_LOG_WARN,
				"preload: no cache for pd %p (%s): its "
				"registrations pass through",
				(void *)pd, gdrc_status_str(status));
		return NULL;
	}
	ppd = calloc(1, sizeof(*ppd));
	if (ppd) {
		ppd->pd = pd;
		ppd->ctx = ctx;
		pthread_mutex_lock(&preload_lock);
		/* Another thread may have made one meanwhile: use that. */
		HASH_FIND_PTR(preload_pds, &pd, other);
		if (!other) {
			preload_oom = 0;
			HASH_ADD_PTR(preload_pds, pd, ppd);
			added = !preload_oom;
		}
		pthread_mutex_unlock(&preload_lock);
		if (added)
			return ppd;
		free(ppd);
	}
	gdrc_fini(ctx);
	return other;
}

/* ------------------------------------------------------------------
 * The interposed verbs.
 * ------------------------------------------------------------------ */

/* @return a cached MR for the request, or NULL to pass it through. */
static struct ibv_mr *mr_cached(struct ibv_pd *pd, void *addr, size_t len,
				unsigned int access)
{
	uint32_t gacc = 0;
	struct preload_pd *ppd;
	struct preload_mr *pmr;
	struct gdrc_mr *gmr;
	gdrc_status_t status;

	if (!preload_mr_on || !pd || !addr || !len ||
	    (access & ~(PRELOAD_ACCESS | IBV_ACCESS_OPTIONAL_RANGE)))
		return NULL;
	ppd = pd_get(pd);
	if (!ppd)
		return NULL;
	if (access & IBV_ACCESS_LOCAL_WRITE)
		gacc |= GDRC_ACCESS_LOCAL_WRITE;
	if (access & IBV_ACCESS_REMOTE_WRITE)
		gacc |= GDRC_ACCESS_REMOTE_WRITE;
	if (access & IBV_ACCESS_REMOTE_READ)
		gacc |= GDRC_ACCESS_REMOTE_READ;
	if (access & IBV_ACCESS_REMOTE_ATOMIC)
		gacc |= GDRC_ACCESS_REMOTE_ATOMIC;
	pmr = malloc(sizeof(*pmr));
	if (!pmr)
		return NULL;
	status = gdrc_mr_get(ppd->ctx, addr, len, gacc, 0, &gmr);
	if (status) {
		free(pmr);
		return NULL;
	}
	memset(&pmr->mr, 0, sizeof(pmr->mr));
	pmr->mr.context = pd->context;
	pmr->mr.pd = pd;
	pmr->mr.addr = addr;
	pmr->mr.length = len;
	pmr->mr.lkey = gdrc_mr_lkey(gmr);
	pmr->mr.rkey = gdrc_mr_rkey(gmr);
	pmr->self = &pmr->mr;
	pmr->gmr = gmr;
	pmr->ppd = ppd;
	pthread_mutex_lock(&preload_lock);
	preload_oom = 0;
	HASH_ADD_PTR(preload_mrs, self, pmr);
	if (!preload_oom)
		ppd->mrs++;
	pthread_mutex_unlock(&preload_lock);
	if (preload_oom) {
		gdrc_mr_put(ppd->ctx, gmr);
		free(pmr);
		return NULL;
	}
	return &pmr->mr;
}

/* Take mr out of the table if it is ours.  @return it, or NULL. */
static struct preload_mr *mr_take(struct ibv_mr *mr)
{
	struct preload_mr *pmr = NULL;

	if (!mr)
		return NULL;
	pthread_mutex_lock(&preload_lock);
	HASH_FIND_PTR(preload_mrs, &mr, pmr);
	if (pmr) {
		HASH_DEL(preload_mrs, pmr);
		pmr->ppd->mrs--;
	}
	pthread_mutex_unlock(&preload_lock);
	return pmr;
}

GDRC_API struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
				   size_t length, int access)
{
	struct ibv_mr *mr = mr_cached(pd, addr, length, (unsigned)access);

	return mr ? mr : real.reg_mr(pd, addr, length, access);
}

GDRC_API struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
					size_t length, uint64_t iova,
					int access)
{
	struct ibv_mr *mr = NULL;

	if (iova == (uintptr_t)addr)
		mr = mr_cached(pd, addr, length, (unsigned)access);
	return mr ? mr : real.reg_mr_iova(pd, addr, length, iova, access);
}

GDRC_API struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
					 size_t length, uint64_t iova,
					 unsigned int access)
{
	struct ibv_mr *mr = NULL;

	if (iova == (uintptr_t)addr)
		mr = mr_cached(pd, addr, length, access);
	return mr ? mr : real.reg_mr_iova2(pd, addr, length, iova, access);
}

GDRC_API int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct preload_mr *pmr = mr_take(mr);

	if (!pmr)
		return real.dereg_mr(mr);
	gdrc_mr_put(pmr->ppd->ctx, pmr->gmr);
	free(pmr);
	return 0;
}

GDRC_API int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
			  void *addr, size_t length, int access)
{
	struct preload_mr *pmr = NULL;

	pthread_mutex_lock(&preload_lock);
	if (mr)
		HASH_FIND_PTR(preload_mrs, &mr, pmr);
	pthread_mutex_unlock(&preload_lock);
	if (pmr) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	return real.rereg_mr(mr, flags, pd, addr, length, access);
}

/* The PD's cached registrations go first; while the program still holds
 * MRs of ours on it, the PD is busy, as it would be without us. */
GDRC_API int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct preload_pd *ppd = NULL;

	pthread_mutex_lock(&preload_lock);
	if (pd)
		HASH_FIND_PTR(preload_pds, &pd, ppd);
	if (ppd && ppd->mrs) {
		pthread_mutex_unlock(&preload_lock);
		return EBUSY;
	}
	if (ppd)
		HASH_DEL(preload_pds, ppd);
	pthread_mutex_unlock(&preload_lock);
	if (ppd) {
		gdrc_fini(ppd->ctx);
		free(ppd);
	}
	return real.dealloc_pd(pd);
}

/* ------------------------------------------------------------------
 * Load time.
 * ------------------------------------------------------------------ */

__attribute__((constructor)) static void preload_init(void)
{
	char on[8];
	gdrc_status_t status;

	real.reg_mr = dlsym(RTLD_NEXT, "ibv_reg_mr");
	real.reg_mr_iova = dlsym(RTLD_NEXT, "ibv_reg_mr_iova");
	real.reg_mr_iova2 = dlsym(RTLD_NEXT, "ibv_reg_mr_iova2");
	real.dereg_mr = dlsym(RTLD_NEXT, "ibv_dereg_mr");
	real.rereg_mr = dlsym(RTLD_NEXT, "ibv_rereg_mr");
	real.dealloc_pd = dlsym(RTLD_NEXT, "ibv_dealloc_pd");
	status = gdrc_install_hooks();
	if (status == GDRC_ERR_INVALID_PARAM ||
	    gdrc_knob_value("GDRC_PRELOAD_MR", on, sizeof(on))) {
		gdrc_log_printf(GDRC_LOG_ERROR,
				"preload: bad GDRC_* settings: caching nothing");
		return;
	}
	preload_mr_on = !strcmp(on, "1") && real.reg_mr && real.reg_mr_iova &&
			real.reg_mr_iova2 && real.dereg_mr && real.rereg_mr &&
			real.dealloc_pd;
	gdrc_log_printf(GDRC_LOG_DEBUG, "preload: loaded; ibv_reg_mr %s",
			preload_mr_on ? "cached" : "passed through");
}
