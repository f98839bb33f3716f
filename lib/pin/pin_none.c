// SPDX-License-Identifier: BSD-3-Clause
/*
 * pin_none.c - the backends that register nothing with a NIC.
 *
 * none: lets the cache classify, round, validate and track exactly as
 * with a NIC: what unit tests and the cache benchmark use.  Keys are 0.
 * kmod: the same for the NIC, for GPU memory whose pages gdrcache.ko
 * pins (the cache asks the module for the pin itself, with the range's
 * invalidation word; nvidia_p2p_get_pages in the kernel).  A NIC cannot
 * use those pages yet: the module is not a peer-memory client.
 */
#include "pin.h"

static gdrc_status_t pin_none_reg(void *be, struct gdrc_pin_reg *reg)
{
	(void)be;
	reg->handle = NULL;
	reg->lkey = 0;
	reg->rkey = 0;
	return GDRC_OK;
}

static void pin_none_dereg(void *be, struct gdrc_pin_reg *reg)
{
	(void)be;
	(void)reg;
}

const struct gdrc_pin_ops gdrc_pin_none_ops = {
	.name = "none",
	.backend = GDRC_BACKEND_NONE,
	.reg = pin_none_reg,
	.dereg = pin_none_dereg,
};

const struct gdrc_pin_ops gdrc_pin_kmod_ops = {
	.name = "kmod",
	.backend = GDRC_BACKEND_KMOD,
	.reg = pin_none_reg,
	.dereg = pin_none_dereg,
};
