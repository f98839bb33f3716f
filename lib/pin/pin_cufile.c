// SPDX-License-Identifier: BSD-3-Clause
/*
 * pin_cufile.c - the cufile backend: GPU and host memory registered with
 * GPUDirect Storage (cuFileBufRegister), for cuFileRead and cuFileWrite.
 *
 * A registration is cuFileBufRegister(addr, length) of exactly the range
 * the cache asks for (for GPU memory: the whole allocation, unrounded,
 * since cuFile refuses a range past the allocation's end); keys are 0,
 * and the caller reads and writes with the registered base and an offset
 * from it (gdrc_mr_query: info.addr).  GPU memory registers in its own
 * context (the caller's may be another device's or none).
 *
 * cuFile keys a registration by its base pointer and refuses a second one
 * of the same base (CU_FILE_MEMORY_ALREADY_REGISTERED, measured on libcufile
 * 1.15).  The cache can ask for one while an older registration of the
 * same base is still alive: two threads missing on one allocation at
 * once, a host range grown over its page (a longer request from the same
 * start), or memory freed while a region on it is held and allocated
 * again at the same address.  So the backend keeps a table of what it
 * registered with cuFile, by base, each entry with the memory's identity
 * (a CUDA allocation's BUFFER_ID; 0 for host memory) and the count of
 * the cache's registrations on it:
 *   - the same memory again: shared, and a longer request re-registers
 *     the base with the longer length (cuFile has no resize; between its
 *     deregistration and the new registration an I/O on the shorter one
 *     in another thread goes through cuFile's bounce buffers);
 *   - other memory at the base: either the entry's allocation was freed
 *     while a region on it was held, or the request's was (classified
 *     before a free another thread made meanwhile).  The driver says
 *     which (the BUFFER_ID at the base now).  A stale entry is
 *     deregistered and kept, marked unregistered, for its users, and
 *     the new memory gets an entry of its own; a stale request shares
 *     the current entry, and the cache drops its region at once (the
 *     free marked it stale) or at its first tag check.  Host memory
 *     carries no identity: a region on unmapped pages held across the
 *     unmap shares its registration with the new memory there, which
 *     matters only where cuFile pins host pages (nvidia-fs).
 * The last user of a registered entry deregisters it.
 *
 * Locks: u->lock (a leaf) guards the base table and is held across the
 * cuFile calls, so that a base's register and deregister never
 * interleave; it is taken outside every cache lock (the cache calls
 * backends with none held).
 *
 * Depends on log/, cufile/ (the entry points) and cuda/ (the memory's own
 * context).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "cuda/cuda_loader.h"
#include "cufile/cufile.h"
#include "gdrc_int.h"
#include "log/log.h"
#include "pin.h"

#define CUFILE_BUCKETS 1024u

/* One registration made with cuFile, and how many regions share it. */
struct cufile_base {
	struct cufile_base *next;
	uintptr_t base;
	size_t length;  /* registered with cuFile; 0: not (any more) */
	uint64_t id;    /* the memory's identity (gdrc_pin_reg.id) */
	unsigned users; /* the cache's registrations on it */
	int gpu;        /* GPU memory: deregistered in its own context */
};

struct gdrc_pin_cufile {
	const struct gdrc_cufile *cf;
	const struct gdrc_cuda *cu; /* NULL: no GPU support (host only) */
	pthread_mutex_t lock;
	struct cufile_base *bucket[CUFILE_BUCKETS]; /* under lock */
	unsigned bases;                             /* under lock */
};

/* cuFile deregistrations this thread made (read by the free path). */
__thread unsigned long gdrc_pin_cufile_thread_deregs;

static struct cufile_base **bucket_of(struct gdrc_pin_cufile *u,
				      uintptr_t base)
{
	return &u->bucket[(base >> 6 ^ base >> 16) % CUFILE_BUCKETS];
}

/* The entry cuFile holds base for (at most one is registered). */
static struct cufile_base *base_find(struct gdrc_pin_cufile *u,
				     uintptr_t base)
{
	for (struct cufile_base *b = *bucket_of(u, base); b; b = b->next)
		if (b->base == base && b->length)
			return b;
	return NULL;
}

/* What a refusal means to the cache: out of pinned memory (evict unused
 * ones and retry once), a CUDA failure, or cuFile's own refusal. */
static gdrc_status_t cufile_status(CUfileError_t e)
{
	switch (e.err) {
	case CU_FILE_GPU_MEMORY_PINNING_FAILED:
	case CU_FILE_NOMEM_ERROR:
		return GDRC_ERR_NO_MEMORY;
	case CU_FILE_CUDA_DRIVER_ERROR:
		return GDRC_ERR_CUDA;
	default:
		return GDRC_ERR_CUFILE;
	}
}

/* GPU memory's own context made current for a cuFile call on it (the
 * caller's may be another device's: cuFile then refuses, 5011, measured
 * on two H200s).  @return CUDA_SUCCESS, also for host memory or without
 * a driver (nothing entered); else why not.  Either way *scope is one
 * gdrc_cuda_leave undoes (a failed enter leaves nothing to undo). */
static CUresult cufile_enter(const struct gdrc_pin_cufile *u, int gpu,
			     uintptr_t addr, struct gdrc_cuda_scope *scope)
{
	*scope = (struct gdrc_cuda_scope){ 0 };
	return gpu && u->cu ? gdrc_cuda_enter_mem(u->cu, addr, scope) :
			      CUDA_SUCCESS;
}

/* Under u->lock: cuFileBufRegister in the memory's context. */
static CUfileError_t cufile_register(struct gdrc_pin_cufile *u,
				     const struct gdrc_pin_reg *reg,
				     size_t length)
{
	struct gdrc_cuda_scope scope;
	CUfileError_t e;
	CUresult res;

	res = cufile_enter(u, reg->mem_type == GDRC_MEM_CUDA, reg->addr,
			   &scope);
	if (res != CUDA_SUCCESS) {
		gdrc_error("no context to register %#lx+%zu with cuFile in: "
			   "%s",
			   (unsigned long)reg->addr, length,
			   gdrc_cuda_err(u->cu, res));
		return (CUfileError_t){ CU_FILE_CUDA_DRIVER_ERROR, res };
	}
	e = u->cf->cuFileBufRegister((const void *)reg->addr, length, 0);
	if (u->cu)
		gdrc_cuda_leave(u->cu, &scope);
	return e;
}

/* Under u->lock.  GPU memory in its own context where it still has one
 * (memory freed behind the hooks' back has none: then as it is). */
static void cufile_deregister(struct gdrc_pin_cufile *u,
			      const struct cufile_base *b)
{
	struct gdrc_cuda_scope scope;
	uintptr_t base = b->base;
	CUfileError_t e;

	(void)cufile_enter(u, b->gpu, base, &scope);
	e = u->cf->cuFileBufDeregister((const void *)base);
	if (u->cu)
		gdrc_cuda_leave(u->cu, &scope);

	gdrc_pin_cufile_thread_deregs++;
	if (e.err != CU_FILE_SUCCESS)
		gdrc_warn("cuFileBufDeregister(%#lx): %s",
			  (unsigned long)base, gdrc_cufile_err(e));
}

/* Under u->lock: b and the request name different memory at one base.
 * @return 1 if the request's is the one gone (b's is at the base now). */
static int request_stale(struct gdrc_pin_cufile *u,
			 const struct gdrc_pin_reg *reg,
			 const struct cufile_base *b)
{
	unsigned long long now = 0;

	if (!u->cu || !b->id ||
	    u->cu->cuPointerGetAttribute(&now, CU_POINTER_ATTRIBUTE_BUFFER_ID,
					 (CUdeviceptr)reg->addr) != CUDA_SUCCESS)
		return 0;
	return now == b->id;
}

static gdrc_status_t pin_cufile_reg(void *be, struct gdrc_pin_reg *reg)
{
	struct gdrc_pin_cufile *u = be;
	struct cufile_base *b, *nb;
	CUfileError_t e;

	nb = malloc(sizeof(*nb)); /* before the lock; freed if shared */
	if (!nb)
		return GDRC_ERR_NO_MEMORY;
	pthread_mutex_lock(&u->lock);
	b = base_find(u, reg->addr);
	if (b && b->id != reg->id && !request_stale(u, reg, b)) {
		/* Registered for memory freed since (a region on it is
		 * still held): stale, whatever its holder does. */
		cufile_deregister(u, b);
		b->length = 0;
		b = NULL;
	}
	if (b && b->id != reg->id) {
		b->users++; /* the current memory's registration */
		goto served;
	}
	if (b && b->length >= reg->length) {
		b->users++;
		goto served;
	}
	if (b) {
		/* Longer than what cuFile holds of this base: again, longer
		 * (the old registration back if cuFile refuses the new). */
		if (b->length)
			cufile_deregister(u, b);
		e = cufile_register(u, reg, reg->length);
		if (e.err != CU_FILE_SUCCESS) {
			CUfileError_t e2 = cufile_register(u, reg, b->length);

			if (e2.err != CU_FILE_SUCCESS) {
				gdrc_error("cuFile: %#lx+%zu could not be "
					   "registered again (%s): its "
					   "registrations go through "
					   "cuFile's bounce buffers",
					   (unsigned long)b->base, b->length,
					   gdrc_cufile_err(e2));
				b->length = 0; /* nothing to deregister */
			}
			goto refused;
		}
		b->length = reg->length;
		b->users++;
		goto served;
	}
	e = cufile_register(u, reg, reg->length);
	if (e.err != CU_FILE_SUCCESS)
		goto refused;
	*nb = (struct cufile_base){
		.next = *bucket_of(u, reg->addr), .base = reg->addr,
		.length = reg->length, .id = reg->id, .users = 1,
		.gpu = reg->mem_type == GDRC_MEM_CUDA,
	};
	*bucket_of(u, reg->addr) = nb;
	u->bases++;
	b = nb;
	nb = NULL;
served:
	pthread_mutex_unlock(&u->lock);
	free(nb);
	reg->handle = b;
	reg->lkey = 0;
	reg->rkey = 0;
	return GDRC_OK;
refused:
	pthread_mutex_unlock(&u->lock);
	free(nb);
	if (e.err == CU_FILE_MEMORY_ALREADY_REGISTERED)
		gdrc_error("cuFileBufRegister(%#lx+%zu): %s: registered by "
			   "the program itself, or freed while registered "
			   "and allocated again",
			   (unsigned long)reg->addr, reg->length,
			   gdrc_cufile_err(e));
	else
		gdrc_error("cuFileBufRegister(%#lx+%zu): %s",
			   (unsigned long)reg->addr, reg->length,
			   gdrc_cufile_err(e));
	return cufile_status(e);
}

static void pin_cufile_dereg(void *be, struct gdrc_pin_reg *reg)
{
	struct gdrc_pin_cufile *u = be;
	struct cufile_base *b = reg->handle, **pp;

	pthread_mutex_lock(&u->lock);
	if (!--b->users) {
		if (b->length)
			cufile_deregister(u, b);
		for (pp = bucket_of(u, b->base); *pp != b; pp = &(*pp)->next)
			;
		*pp = b->next;
		u->bases--;
	} else {
		b = NULL;
	}
	pthread_mutex_unlock(&u->lock);
	free(b);
	reg->handle = NULL;
}

const struct gdrc_pin_ops gdrc_pin_cufile_ops = {
	.name = "cufile",
	.backend = GDRC_BACKEND_CUFILE,
	.reg = pin_cufile_reg,
	.dereg = pin_cufile_dereg,
};

gdrc_status_t gdrc_pin_cufile_open(const struct gdrc_cufile *cf,
				   struct gdrc_pin_cufile **u_p)
{
	struct gdrc_pin_cufile *u = calloc(1, sizeof(*u));

	if (!u)
		return GDRC_ERR_NO_MEMORY;
	u->cf = cf;
	pthread_mutex_init(&u->lock, NULL);
	*u_p = u;
	return GDRC_OK;
}

void gdrc_pin_cufile_set_cuda(struct gdrc_pin_cufile *u,
			      const struct gdrc_cuda *cu)
{
	u->cu = cu;
}

void gdrc_pin_cufile_close(struct gdrc_pin_cufile *u, int forked)
{
	if (!u)
		return;
	/* The cache released every registration (a fork child's belong to
	 * its parent: only our memory goes). */
	if (u->bases && !forked)
		gdrc_warn("cufile: %u registered bases left at close",
			  u->bases);
	for (unsigned i = 0; i < CUFILE_BUCKETS; i++)
		while (u->bucket[i]) {
			struct cufile_base *b = u->bucket[i];

			u->bucket[i] = b->next;
			free(b);
		}
	pthread_mutex_destroy(&u->lock);
	free(u);
}
