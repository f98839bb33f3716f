/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 03_explicit_invalidate.c - for callers that know when memory goes away
 * (their own allocator, shared memory): gdrc_invalidate removes the
 * registrations of a range; one still held stays valid until its put.
 *
 * Prerequisites: libgdrcache installed; no NIC needed.
 * Build:  cc 03_explicit_invalidate.c $(pkg-config --cflags --libs gdrcache)
 * Run:    GDRC_MEM_HOOKS=none ./a.out   (hooks off: the caller reports)
 */
#include <stdio.h>
#include <stdlib.h>

#include <gdrcache.h>

int main(void)
{
	static char pool[1 << 16];
	struct gdrc_ctx *ctx;
	struct gdrc_mr *held, *fresh;
	struct gdrc_mr_info a, b;

	if (gdrc_init(NULL, &ctx) != GDRC_OK)
		return 1;
	if (gdrc_mr_get(ctx, pool, sizeof(pool), 0, 0, &held) != GDRC_OK)
		return 1;
	/* Our allocator recycles the pool: tell the cache. */
	if (gdrc_invalidate(ctx, pool, sizeof(pool)) != GDRC_OK)
		return 1;
	if (gdrc_mr_get(ctx, pool, sizeof(pool), 0, 0, &fresh) != GDRC_OK)
		return 1;
	gdrc_mr_query(held, &a);
	gdrc_mr_query(fresh, &b);
	printf("old registration %llu %s, new one %llu %s\n",
	       (unsigned long long)a.id,
	       (a.flags & GDRC_MR_INFO_INVALIDATED) ? "invalidated" : "cached",
	       (unsigned long long)b.id,
	       (b.flags & GDRC_MR_INFO_CACHED) ? "cached" : "not cached");
	gdrc_mr_put(ctx, held); /* released now */
	gdrc_mr_put(ctx, fresh);
	gdrc_fini(ctx);
	return a.id != b.id ? 0 : 1;
}
