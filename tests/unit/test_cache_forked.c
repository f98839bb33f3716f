// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cache_forked.c - a cache marked forked (what a fork child's
 * handler does to every context) releases none of its parent's
 * registrations, and takes no lock a parent thread may have held at the
 * fork.  The paths that reach the cache without going through the API's
 * GDRC_ERR_FORK checks: the hooks found overwritten (the API flushes
 * every context, gdrc_cache_stop_host_caching) and the statistics.
 * Drives the cache layer directly, with a backend that counts.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cache_layer.h"

#define PAGE 4096UL
#define RANGE_START 0x100000000UL

static atomic_int regs, deregs;

static gdrc_status_t count_reg(void *be, struct gdrc_pin_reg *reg)
{
	(void)be;
	reg->handle = NULL;
	reg->lkey = 0;
	reg->rkey = 0;
	atomic_fetch_add(&regs, 1);
	return GDRC_OK;
}

static void count_dereg(void *be, struct gdrc_pin_reg *reg)
{
	(void)be;
	(void)reg;
	atomic_fetch_add(&deregs, 1);
}

static const struct gdrc_pin_ops count_ops = {
	.name = "count",
	.backend = GDRC_BACKEND_NONE,
	.reg = count_reg,
	.dereg = count_dereg,
};

static struct gdrc_cache *cache;

static int setup(void **state)
{
	struct gdrc_mr *mr;

	(void)state;
	cache = cache_layer_new(&count_ops, 0);
	if (!cache)
		return -1;
	atomic_store(&regs, 0);
	atomic_store(&deregs, 0);
	/* One cached registration, not held. */
	if (cache_layer_get_host(cache, RANGE_START, RANGE_START + PAGE, &mr))
		return -1;
	gdrc_cache_put(cache, mr);
	return atomic_load(&regs) == 1 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	gdrc_cache_cleanup_forked(cache);
	free(cache);
	return 0;
}

/* Holds the cache's lock for writing, as a parent thread might have at
 * the fork, until told to let go. */
static atomic_int holder_stage;

static void *holder_main(void *arg)
{
	(void)arg;
	pthread_rwlock_wrlock(&cache->lock);
	atomic_store(&holder_stage, 1);
	while (atomic_load(&holder_stage) != 2)
		usleep(1000);
	pthread_rwlock_unlock(&cache->lock);
	return NULL;
}

/* The hooks found overwritten in a child: host caching stops there, and
 * the parent's registration stays registered. */
static void test_cache_forked_stop_host_caching_releases_nothing(void **state)
{
	(void)state;
	gdrc_cache_mark_forked(cache);
	gdrc_cache_stop_host_caching(cache);
	assert_int_equal(atomic_load(&deregs), 0);
	assert_int_equal(cache->nregions, 1);
	assert_int_equal(atomic_load(&cache->cache_host), 0);
}

/* Neither that nor the statistics wait for a lock held at the fork. */
static void test_cache_forked_takes_no_lock(void **state)
{
	uint64_t v[GDRC_STAT_COUNT];
	pthread_t t;

	(void)state;
	atomic_store(&holder_stage, 0);
	assert_int_equal(pthread_create(&t, NULL, holder_main, NULL), 0);
	while (atomic_load(&holder_stage) != 1)
		usleep(1000);
	gdrc_cache_mark_forked(cache);
	alarm(10); /* a wait on the lock fails the test, not hangs it */
	gdrc_cache_stats(cache, v);
	gdrc_cache_stop_host_caching(cache);
	alarm(0);
	assert_int_equal(v[GDRC_STAT_REGIONS], 1);
	assert_int_equal(atomic_load(&deregs), 0);
	atomic_store(&holder_stage, 2);
	assert_int_equal(pthread_join(t, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_cache_forked_stop_host_caching_releases_nothing,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_cache_forked_takes_no_lock, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
