// SPDX-License-Identifier: BSD-3-Clause
/*
 * pin_verbs.c - memory registered with ibv_reg_mr on the context's
 * protection domain: host memory (verbs), and GPU memory through a
 * peer-memory client (peermem: nvidia-peermem resolves the GPU address
 * inside ibv_reg_mr; without it the kernel refuses the range).
 *
 * Built only with libibverbs (GDRC_HAVE_VERBS).  Called outside the
 * cache lock.  ENOMEM and EAGAIN (RLIMIT_MEMLOCK, NIC tables full) map
 * to GDRC_ERR_NO_MEMORY so the cache evicts and retries; every other
 * failure is GDRC_ERR_VERBS.  fork: libibverbs' own fork support
 * (ibv_fork_init or the kernel's) decides whether pinned pages stay
 * usable in a child; the cache never lets a child use them.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "log/log.h"
#include "pin.h"

/* See pin.h: direct here, libibverbs' own in the shared library. */
struct gdrc_ibv_fns gdrc_ibv = {
	.reg_mr_iova2 = ibv_reg_mr_iova2,
	.reg_dmabuf_mr = ibv_reg_dmabuf_mr,
	.dereg_mr = ibv_dereg_mr,
};

/* GDRC_ACCESS_* to IBV_ACCESS_*, spelled out rather than assumed equal. */
int gdrc_pin_ibv_access(uint32_t access)
{
	int ibv = 0;

	if (access & GDRC_ACCESS_LOCAL_WRITE)
		ibv |= IBV_ACCESS_LOCAL_WRITE;
	if (access & GDRC_ACCESS_REMOTE_WRITE)
		ibv |= IBV_ACCESS_REMOTE_WRITE;
	if (access & GDRC_ACCESS_REMOTE_READ)
		ibv |= IBV_ACCESS_REMOTE_READ;
	if (access & GDRC_ACCESS_REMOTE_ATOMIC)
		ibv |= IBV_ACCESS_REMOTE_ATOMIC;
	return ibv;
}

gdrc_status_t gdrc_pin_ibv_result(struct ibv_mr *mr, int err,
				  struct gdrc_pin_reg *reg, const char *call)
{
	if (!mr) {
		gdrc_debug("%s of %#lx+%zu failed: %s", call,
			   (unsigned long)reg->addr, reg->length,
			   strerror(err));
		return (err == ENOMEM || err == EAGAIN) ? GDRC_ERR_NO_MEMORY :
							  GDRC_ERR_VERBS;
	}
	reg->handle = mr;
	reg->lkey = mr->lkey;
	reg->rkey = mr->rkey;
	return GDRC_OK;
}

static gdrc_status_t pin_verbs_reg(void *be, struct gdrc_pin_reg *reg)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = gdrc_ibv.reg_mr_iova2(be, (void *)reg->addr, reg->length,
			      (uint64_t)reg->addr,
			      (unsigned)gdrc_pin_ibv_access(reg->access));
	return gdrc_pin_ibv_result(mr, errno, reg, "ibv_reg_mr");
}

void gdrc_pin_ibv_dereg(void *be, struct gdrc_pin_reg *reg)
{
	int ret;

	(void)be;
	ret = gdrc_ibv.dereg_mr(reg->handle);
	if (ret)
		gdrc_warn("ibv_dereg_mr of %#lx+%zu failed: %s",
			  (unsigned long)reg->addr, reg->length,
			  strerror(ret));
}

const struct gdrc_pin_ops gdrc_pin_verbs_ops = {
	.name = "verbs",
	.backend = GDRC_BACKEND_VERBS,
	.reg = pin_verbs_reg,
	.dereg = gdrc_pin_ibv_dereg,
};

const struct gdrc_pin_ops gdrc_pin_peermem_ops = {
	.name = "peermem",
	.backend = GDRC_BACKEND_PEERMEM,
	.reg = pin_verbs_reg,
	.dereg = gdrc_pin_ibv_dereg,
};

int gdrc_pin_peermem_probe(const char *root, char *why, size_t why_len)
{
	/* Where each generation of the client shows itself. */
	static const char *const marks[] = {
		"sys/module/nvidia_peermem",
		"sys/module/nv_peer_mem",
		"sys/kernel/mm/memory_peers/nv_mem/version",
	};
	char path[512];

	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", root ? root : "",
			 marks[i]);
		if (!access(path, F_OK))
			return 1;
	}
	snprintf(why, why_len,
		 "no peer-memory client: nvidia-peermem (or nv_peer_mem) is not loaded");
	return 0;
}
