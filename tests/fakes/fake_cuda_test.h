/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_cuda_test.h - helpers the cmocka tests on the fake driver share
 * (test_gpu_fake.c, test_cuda_hooks.c).  Include after <cmocka.h>,
 * <gdrcache.h> and "fake_cuda.h".
 */
#ifndef GDRC_FAKE_CUDA_TEST_H
#define GDRC_FAKE_CUDA_TEST_H

#include <stdint.h>

/* A counter of ctx that must be readable. */
static inline uint64_t stat_of(struct gdrc_ctx *ctx, enum gdrc_stat s)
{
	uint64_t v;

	assert_int_equal(gdrc_stat_get(ctx, s, &v), GDRC_OK);
	return v;
}

/* A per-device counter of ctx that must be readable. */
static inline uint64_t dev_stat(struct gdrc_ctx *ctx, int device,
				enum gdrc_device_stat st)
{
	uint64_t v = 0;

	assert_int_equal(gdrc_device_stat_get(ctx, device, st, &v), GDRC_OK);
	return v;
}

/* Get (must succeed), describe and put [p, p + len). */
static inline struct gdrc_mr_info get_info(struct gdrc_ctx *ctx,
					   CUdeviceptr p, size_t len)
{
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;

	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)p, len, 0, 0,
				     &mr),
			 GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, &info), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	return info;
}

#endif /* GDRC_FAKE_CUDA_TEST_H */
