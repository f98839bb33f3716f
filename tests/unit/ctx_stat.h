/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ctx_stat.h - for cmocka tests: one counter of a context, the read
 * itself asserted to succeed.
 */
#ifndef GDRC_TEST_CTX_STAT_H
#define GDRC_TEST_CTX_STAT_H

#include <stdint.h>

#include <gdrcache.h>

static inline uint64_t ctx_stat(struct gdrc_ctx *ctx, enum gdrc_stat s)
{
	uint64_t v = UINT64_MAX;

	assert_int_equal(gdrc_stat_get(ctx, s, &v), GDRC_OK);
	return v;
}

#endif /* GDRC_TEST_CTX_STAT_H */
