// SPDX-License-Identifier: BSD-3-Clause
/*
 * shim_one.c - the ideal registration cache to compare the preload with:
 * an LD_PRELOAD shim that remembers one registration per thread and
 * hands it back when the same (pd, addr, length, access) comes again,
 * with no lookup, no reference count, no memory-event source and no
 * check of any kind.  Not a usable cache (it never notices a free): only
 * the floor that interposing ibv_reg_mr and ibv_dereg_mr costs.  Its
 * first registration per thread is made up, not made, so that
 * preload_bench can run it on a machine without an RDMA device.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include <infiniband/verbs.h>

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

struct shim_entry {
	struct ibv_mr mr;
	unsigned int access;
	int valid;
};

static __thread struct shim_entry shim
	__attribute__((tls_model("initial-exec")));

static struct ibv_mr *shim_reg(struct ibv_pd *pd, void *addr, size_t len,
			       unsigned int access)
{
	struct shim_entry *e = &shim;

	if (!e->valid || e->mr.pd != pd || e->mr.addr != addr ||
	    e->mr.length != len || e->access != access) {
		memset(&e->mr, 0, sizeof(e->mr));
		e->mr.pd = pd;
		e->mr.context = pd ? pd->context : NULL;
		e->mr.addr = addr;
		e->mr.length = len;
		e->mr.lkey = e->mr.rkey = 1;
		e->access = access;
		e->valid = 1;
	}
	return &e->mr;
}

__attribute__((visibility("default")))
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			  int access)
{
	return shim_reg(pd, addr, length, (unsigned int)access);
}

__attribute__((visibility("default")))
struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	(void)iova;
	return shim_reg(pd, addr, length, access);
}

__attribute__((visibility("default")))
int ibv_dereg_mr(struct ibv_mr *mr)
{
	static int (*real_dereg)(struct ibv_mr *);

	if (mr == &shim.mr)
		return 0;
	if (!real_dereg)
		real_dereg = (int (*)(struct ibv_mr *))dlsym(RTLD_NEXT,
							     "ibv_dereg_mr");
	return real_dereg ? real_dereg(mr) : -1;
}
