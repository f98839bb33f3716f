/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pin.h - registration backends behind one ops table.
 *
 * A backend pins (and, with a NIC, registers) one range and releases it.
 * The cache calls these outside its lock; a backend may allocate, sleep
 * and make system calls, but never calls back into the cache.
 *
 * Backends: none (pin_none.c: registers nothing, keys 0, for tests and
 * benchmarks of the cache itself) and verbs (pin_verbs.c: ibv_reg_mr on
 * host memory).  GPU backends (dmabuf, peermem, kmod) plug in here.
 *
 * Depends on log/ and the public header only.
 */
#ifndef GDRC_PIN_H
#define GDRC_PIN_H

#include <stddef.h>
#include <stdint.h>

#include <gdrcache.h>

/* One registration, as the backend sees it. */
struct gdrc_pin_reg {
	uintptr_t addr;   /* in: page aligned start */
	size_t length;    /* in: page aligned length */
	uint32_t access;  /* in: GDRC_ACCESS_*, already normalised */
	int mem_type;     /* in: enum gdrc_mem_type */
	void *handle;     /* out: backend's object (struct ibv_mr *) */
	uint32_t lkey;    /* out */
	uint32_t rkey;    /* out */
};

struct gdrc_pin_ops {
	const char *name;
	int backend; /* enum gdrc_backend */
	/*
	 * Register reg->addr..+length.  @return GDRC_OK;
	 * GDRC_ERR_NO_MEMORY when resources ran out (the cache then evicts
	 * and retries once); another GDRC_ERR_* otherwise.  Logs the cause.
	 */
	gdrc_status_t (*reg)(void *be, struct gdrc_pin_reg *reg);
	/* Release what reg() made.  Logs failures; cannot fail. */
	void (*dereg)(void *be, struct gdrc_pin_reg *reg);
};

extern const struct gdrc_pin_ops gdrc_pin_none_ops;
#ifdef GDRC_HAVE_VERBS
extern const struct gdrc_pin_ops gdrc_pin_verbs_ops;
#endif

#endif /* GDRC_PIN_H */
