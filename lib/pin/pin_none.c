// SPDX-License-Identifier: BSD-3-Clause
/*
 * pin_none.c - the backend that registers nothing.
 *
 * Lets the cache classify, round, validate and track exactly as with a
 * NIC: what unit tests and the cache benchmark use.  Keys are 0.
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
