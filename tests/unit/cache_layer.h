/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cache_layer.h - for the tests that drive lib/cache directly, below the
 * API: a cache caching host memory, without limits, on the given
 * backend, and a miss on a host range.
 */
#ifndef GDRC_TEST_CACHE_LAYER_H
#define GDRC_TEST_CACHE_LAYER_H

#include <stdlib.h>
#include <string.h>

#include "gdrc_int.h"
#include "cache/cache.h"
#include "pin/pin.h"

/* @return the cache, or NULL.  Freed with free() after its cleanup. */
static inline struct gdrc_cache *cache_layer_new(const struct gdrc_pin_ops *ops,
						 int check)
{
	struct gdrc_cache_params p = {
		.max_regions = GDRC_LIMIT_NONE,
		.max_bytes = GDRC_LIMIT_NONE,
		.host_max_regions = GDRC_LIMIT_NONE,
		.ops = ops,
		.cache_host = 1,
		.check = check,
	};
	struct gdrc_cache *c = aligned_alloc(
		GDRC_CACHELINE, gdrc_align_up(sizeof(*c), GDRC_CACHELINE));

	if (!c)
		return NULL;
	memset(c, 0, sizeof(*c));
	if (gdrc_cache_init(c, &p) != GDRC_OK) {
		free(c);
		return NULL;
	}
	return c;
}

/* The miss path for host memory [start, end). */
static inline gdrc_status_t cache_layer_get_host(struct gdrc_cache *c,
						 uintptr_t start,
						 uintptr_t end,
						 struct gdrc_mr **mr_p)
{
	struct gdrc_cache_req req = {
		.start = start, .end = end,
		.mem_type = GDRC_MEM_HOST, .kind = GDRC_PTR_HOST,
		.device = -1,
	};

	return gdrc_cache_get_miss(c, &req, mr_p);
}

#endif /* GDRC_TEST_CACHE_LAYER_H */
