// SPDX-License-Identifier: BSD-3-Clause
/*
 * pin_dmabuf.c - GPU memory registered through a dma-buf: the CUDA
 * driver exports the range, or the allocation holding it, as a dma-buf
 * fd (cuMemGetHandleForAddressRange, DMA_BUF_FD, called through the
 * argument's export_fd, outside this module), ibv_reg_dmabuf_mr
 * registers the range at its offset in it with iova = the GPU address,
 * and the fd is closed at once (the MR holds its own reference).
 *
 * Built only with libibverbs.  Called outside the cache lock.  Statuses
 * as for verbs: ENOMEM and EAGAIN are GDRC_ERR_NO_MEMORY (the cache
 * evicts and retries), anything else GDRC_ERR_VERBS; an export that ran
 * out of memory is GDRC_ERR_NO_MEMORY too, any other failed one
 * GDRC_ERR_CUDA.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "pin.h"

static gdrc_status_t pin_dmabuf_reg(void *arg, struct gdrc_pin_reg *reg)
{
	struct gdrc_pin_dmabuf_be *be = arg;
	uint64_t offset = 0;
	struct ibv_mr *mr;
	int fd, err;

	fd = be->export_fd(be->arg, reg->addr, reg->length, &offset);
	if (fd < 0)
		return fd == GDRC_PIN_EXPORT_FULL ? GDRC_ERR_NO_MEMORY :
						    GDRC_ERR_CUDA;
	errno = 0;
	mr = gdrc_ibv.reg_dmabuf_mr(be->pd, offset, reg->length, (uint64_t)reg->addr,
			       fd, gdrc_pin_ibv_access(reg->access));
	err = errno;
	close(fd);
	return gdrc_pin_ibv_result(mr, err, reg, "ibv_reg_dmabuf_mr");
}

const struct gdrc_pin_ops gdrc_pin_dmabuf_ops = {
	.name = "dmabuf",
	.backend = GDRC_BACKEND_DMABUF,
	.reg = pin_dmabuf_reg,
	.dereg = gdrc_pin_ibv_dereg,
};

int gdrc_pin_dmabuf_probe(struct ibv_pd *pd, char *why, size_t why_len)
{
	struct ibv_mr *mr;
	int err;

	errno = 0;
	mr = gdrc_ibv.reg_dmabuf_mr(pd, 0, 4096, 0, -1,
				    IBV_ACCESS_LOCAL_WRITE);
	err = errno;
	if (mr) { /* a provider that takes anything: it has the verb */
		gdrc_ibv.dereg_mr(mr);
		return 1;
	}
	if (err == EBADF)
		return 1;
	snprintf(why, why_len, "the NIC does not take dma-buf memory (ibv_reg_dmabuf_mr: %s)",
		 strerror(err));
	return 0;
}
