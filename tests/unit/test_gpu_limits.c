// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_gpu_limits.c - giving pinned GPU memory back, on the fake CUDA
 * driver: gdrc_release_unused of one device, host memory or everything
 * (held registrations stay; another thread's idle handle keeps its
 * registration until that thread moves on), the per-device limits
 * GDRC_GPU_MAX_BYTES and GDRC_GPU_MAX_REGIONS (a device's unused
 * registrations evicted LRU-first, other devices' left alone, a get
 * refused with GDRC_ERR_LIMIT when the ones in use fill it), the
 * per-device counters, and every bad argument's exact status.  The
 * running-out retry is in test_backend.c (it needs a NIC that can run
 * out).  Runs in CI.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gdrcache.h>

#include "fake_cuda.h"
#include "fake_cuda_test.h"

#define MIB (1024UL * 1024)

static struct gdrc_ctx *ctx_env(const char *name, const char *value,
				const char *name2, const char *value2)
{
	struct gdrc_ctx *ctx;

	setenv("GDRC_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
	if (name)
		setenv(name, value, 1);
	if (name2)
		setenv(name2, value2, 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	if (name)
		unsetenv(name);
	if (name2)
		unsetenv(name2);
	return ctx;
}

static int setup(void **state)
{
	(void)state;
	fake_cuda_reset(2);
	return cuInit(0) != CUDA_SUCCESS;
}

static struct gdrc_mr *get(struct gdrc_ctx *ctx, CUdeviceptr p, size_t len)
{
	struct gdrc_mr *mr;

	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)p, len, 0, 0,
				     &mr),
			 GDRC_OK);
	return mr;
}

/* ---- gdrc_release_unused ---- */

static void test_gpu_limits_release_one_device(void **state)
{
	struct gdrc_ctx *ctx = ctx_env(NULL, NULL, NULL, NULL);
	CUdeviceptr d0[3], d1[2];
	static char host[3 * 4096];
	struct gdrc_mr_info info;
	struct gdrc_mr *held;
	uint64_t n = 99;

	(void)state;
	for (int i = 0; i < 3; i++)
		d0[i] = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	for (int i = 0; i < 2; i++)
		d1[i] = fake_cuda_alloc(FAKE_DEVICE, 2 * MIB, 1);
	held = get(ctx, d0[0], 64);
	(void)get_info(ctx, d0[1], 64);
	(void)get_info(ctx, d0[2], 64);
	(void)get_info(ctx, d1[0], 64);
	(void)get_info(ctx, d1[1], 64);
	(void)get_info(ctx, (CUdeviceptr)(uintptr_t)host, 4096);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_REGIONS), 3);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_PINNED_BYTES),
			 3 * MIB);
	assert_int_equal(dev_stat(ctx, 1, GDRC_DEVICE_STAT_PINNED_BYTES),
			 4 * MIB);
	assert_int_equal(dev_stat(ctx, GDRC_DEVICE_HOST,
				  GDRC_DEVICE_STAT_REGIONS), 1);

	assert_int_equal(gdrc_release_unused(ctx, 0, &n), GDRC_OK);
	assert_int_equal(n, 2);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_REGIONS), 1);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_PINNED_BYTES), MIB);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_EVICTIONS), 2);
	assert_int_equal(dev_stat(ctx, 1, GDRC_DEVICE_STAT_REGIONS), 2);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 4);
	/* The held one is still cached and served. */
	assert_int_equal(gdrc_mr_query(held, &info), GDRC_OK);
	assert_int_equal(get_info(ctx, d0[0] + 100, 64).id, info.id);

	assert_int_equal(gdrc_release_unused(ctx, GDRC_DEVICE_HOST, &n),
			 GDRC_OK);
	assert_int_equal(n, 1);
	assert_int_equal(dev_stat(ctx, GDRC_DEVICE_HOST,
				  GDRC_DEVICE_STAT_REGIONS), 0);
	assert_int_equal(dev_stat(ctx, 1, GDRC_DEVICE_STAT_REGIONS), 2);

	assert_int_equal(gdrc_release_unused(ctx, GDRC_DEVICE_ALL, NULL),
			 GDRC_OK);
	assert_int_equal(dev_stat(ctx, GDRC_DEVICE_ALL,
				  GDRC_DEVICE_STAT_REGIONS), 1);
	assert_int_equal(dev_stat(ctx, GDRC_DEVICE_ALL,
				  GDRC_DEVICE_STAT_PINNED_BYTES), MIB);
	gdrc_mr_put(ctx, held);
	/* Nothing left to release but the one just put (cached again). */
	assert_int_equal(gdrc_release_unused(ctx, 1, &n), GDRC_OK);
	assert_int_equal(n, 0);
	assert_int_equal(gdrc_release_unused(ctx, 0, &n), GDRC_OK);
	assert_int_equal(n, 1);
	assert_int_equal(dev_stat(ctx, GDRC_DEVICE_ALL,
				  GDRC_DEVICE_STAT_REGIONS), 0);
	gdrc_fini(ctx);
}

/* A thread that gets and puts n allocations, then idles (its handles
 * pinning them) until told to exit, which lets go of them. */
struct idle_arg {
	struct gdrc_ctx *ctx;
	CUdeviceptr p[2];
	int n;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stage; /* 1: got and put; 2: may go on */
	pthread_t t;
};

static void *idle_thread(void *argp)
{
	struct idle_arg *a = argp;

	/* Twice each: a registration's first get is a direct reference,
	 * the second makes this thread's handle, which keeps it. */
	for (int i = 0; i < 2 * a->n; i++)
		(void)get_info(a->ctx, a->p[i % a->n], 64);
	pthread_mutex_lock(&a->lock);
	a->stage = 1;
	pthread_cond_broadcast(&a->cond);
	while (a->stage != 2)
		pthread_cond_wait(&a->cond, &a->lock);
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

/* Start a's thread and wait until it idles. */
static void idle_start(struct idle_arg *a)
{
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	assert_int_equal(pthread_create(&a->t, NULL, idle_thread, a), 0);
	pthread_mutex_lock(&a->lock);
	while (a->stage != 1)
		pthread_cond_wait(&a->cond, &a->lock);
	pthread_mutex_unlock(&a->lock);
}

/* Let a's thread exit, and wait for it. */
static void idle_finish(struct idle_arg *a)
{
	pthread_mutex_lock(&a->lock);
	a->stage = 2;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	assert_int_equal(pthread_join(a->t, NULL), 0);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
}

/* Another thread's idle handle keeps its registration alive (not
 * cached) until that thread moves on: here, until it exits. */
static void test_gpu_limits_release_waits_for_idle_thread(void **state)
{
	struct gdrc_ctx *ctx = ctx_env(NULL, NULL, NULL, NULL);
	struct idle_arg a = { .ctx = ctx, .n = 1 };
	uint64_t n;

	(void)state;
	a.p[0] = fake_cuda_alloc(FAKE_DEVICE, MIB, 1);
	idle_start(&a);
	assert_int_equal(gdrc_release_unused(ctx, 1, &n), GDRC_OK);
	assert_int_equal(n, 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(dev_stat(ctx, 1, GDRC_DEVICE_STAT_REGIONS), 1);
	idle_finish(&a);
	assert_int_equal(dev_stat(ctx, 1, GDRC_DEVICE_STAT_REGIONS), 0);
	assert_int_equal(dev_stat(ctx, 1, GDRC_DEVICE_STAT_PINNED_BYTES), 0);
	gdrc_fini(ctx);
}

static void test_gpu_limits_bad_arguments(void **state)
{
	struct gdrc_ctx *ctx = ctx_env(NULL, NULL, NULL, NULL);
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	uint64_t n = 7, v = 7;

	(void)state;
	(void)get_info(ctx, p, 64);
	assert_int_equal(gdrc_release_unused(NULL, 0, &n),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_release_unused(ctx, GDRC_DEVICE_ALL - 1, &n),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(n, 7);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 1);
	assert_int_equal(gdrc_device_stat_get(NULL, 0,
					      GDRC_DEVICE_STAT_REGIONS, &v),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_device_stat_get(ctx, 0,
					      GDRC_DEVICE_STAT_REGIONS, NULL),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_device_stat_get(ctx, 0, GDRC_DEVICE_STAT_COUNT,
					      &v),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_device_stat_get(ctx, 0,
					      (enum gdrc_device_stat)-1, &v),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_device_stat_get(ctx, GDRC_MAX_DEVICES,
					      GDRC_DEVICE_STAT_REGIONS, &v),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_device_stat_get(ctx, GDRC_DEVICE_ALL - 1,
					      GDRC_DEVICE_STAT_REGIONS, &v),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(v, 7);
	assert_int_equal(gdrc_device_stat_get(ctx, GDRC_MAX_DEVICES - 1,
					      GDRC_DEVICE_STAT_REGIONS, &v),
			 GDRC_OK);
	assert_int_equal(v, 0);
	/* Limits: none by default, none for host memory or the sum. */
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_MAX_BYTES),
			 GDRC_LIMIT_NONE);
	assert_int_equal(dev_stat(ctx, GDRC_DEVICE_HOST,
				  GDRC_DEVICE_STAT_MAX_REGIONS),
			 GDRC_LIMIT_NONE);
	gdrc_fini(ctx);
}

/* ---- per-device limits ---- */

static void test_gpu_limits_regions_per_device(void **state)
{
	struct gdrc_ctx *ctx = ctx_env("GDRC_GPU_MAX_REGIONS", "2", NULL,
				       NULL);
	CUdeviceptr d0[3], d1[2];
	struct gdrc_mr *h0, *h1;
	uint64_t first;

	(void)state;
	for (int i = 0; i < 2; i++)
		d1[i] = fake_cuda_alloc(FAKE_DEVICE, MIB, 1);
	for (int i = 0; i < 3; i++)
		d0[i] = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_MAX_REGIONS), 2);
	/* Device 1's are the oldest, and are left alone. */
	(void)get_info(ctx, d1[0], 64);
	(void)get_info(ctx, d1[1], 64);
	first = get_info(ctx, d0[0], 64).id;
	(void)get_info(ctx, d0[1], 64);
	(void)get_info(ctx, d0[2], 64);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_REGIONS), 2);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_EVICTIONS), 1);
	assert_int_equal(dev_stat(ctx, 1, GDRC_DEVICE_STAT_REGIONS), 2);
	assert_int_equal(dev_stat(ctx, 1, GDRC_DEVICE_STAT_EVICTIONS), 0);
	/* The LRU one of device 0 went. */
	assert_int_not_equal(get_info(ctx, d0[0], 64).id, first);
	/* Both in use: a third is refused, and nothing changes. */
	h0 = get(ctx, d0[0], 64);
	h1 = get(ctx, d0[2], 64);
	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)d0[1], 64, 0, 0,
				     &(struct gdrc_mr *){ NULL }),
			 GDRC_ERR_LIMIT);
	assert_int_equal(stat_of(ctx, GDRC_STAT_LIMIT_REJECTS), 1);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_REGIONS), 2);
	gdrc_mr_put(ctx, h0);
	gdrc_mr_put(ctx, h1);
	assert_int_equal(get_info(ctx, d0[1], 64).device, 0);
	gdrc_fini(ctx);
}

/*
 * The device's limit reached by registrations another thread got and
 * put back (its idle handles keep them alive): a new one evicts the one
 * it needs, not the whole device, and is made.  (Found by review: the
 * eviction loop waited for the counts to drop, flushed the device, and
 * refused the get all the same.)
 */
static void test_gpu_limits_idle_handles_do_not_flush(void **state)
{
	struct gdrc_ctx *ctx = ctx_env("GDRC_GPU_MAX_REGIONS", "2", NULL,
				       NULL);
	struct idle_arg a = { .ctx = ctx, .n = 2 };
	CUdeviceptr third = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);

	(void)state;
	a.p[0] = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	a.p[1] = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	idle_start(&a);
	assert_int_equal(get_info(ctx, third, 64).device, 0);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_EVICTIONS), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 2);
	idle_finish(&a);
	/* The thread gone, what it held is released: within the limit. */
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_REGIONS), 2);
	gdrc_fini(ctx);
}

static void test_gpu_limits_bytes_per_device(void **state)
{
	struct gdrc_ctx *ctx = ctx_env("GDRC_GPU_MAX_BYTES", "4M", NULL,
				       NULL);
	CUdeviceptr small[3], big;

	(void)state;
	for (int i = 0; i < 3; i++)
		small[i] = fake_cuda_alloc(FAKE_DEVICE, 2 * MIB, 0);
	big = fake_cuda_alloc(FAKE_DEVICE, 8 * MIB, 0);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_MAX_BYTES),
			 4 * MIB);
	for (int i = 0; i < 3; i++)
		(void)get_info(ctx, small[i], 64);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_PINNED_BYTES),
			 4 * MIB);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_EVICTIONS), 1);
	/* Could never fit: refused without flushing the device. */
	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)big, 64, 0, 0,
				     &(struct gdrc_mr *){ NULL }),
			 GDRC_ERR_LIMIT);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_REGIONS), 2);
	/* Other devices are not limited by device 0's use. */
	assert_int_equal(get_info(ctx, fake_cuda_alloc(FAKE_DEVICE, 4 * MIB,
						       1),
				  64).device,
			 1);
	gdrc_fini(ctx);
}

#define T(fn) cmocka_unit_test_setup(fn, setup)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_gpu_limits_release_one_device),
		T(test_gpu_limits_release_waits_for_idle_thread),
		T(test_gpu_limits_bad_arguments),
		T(test_gpu_limits_regions_per_device),
		T(test_gpu_limits_bytes_per_device),
		T(test_gpu_limits_idle_handles_do_not_flush),
	};

	setenv("GDRC_MEM_HOOKS", "none", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
