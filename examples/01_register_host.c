/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 01_register_host.c - the basic cycle: get a registration for a host
 * buffer, use its keys, put it back; the second get is a cache hit that
 * returns the same registration, and a free makes the next get a new one.
 *
 * Prerequisites: libgdrcache installed; no NIC needed (without a PD the
 * "none" backend tracks ranges and hands out keys of 0).
 * Build:  cc 01_register_host.c $(pkg-config --cflags --libs gdrcache)
 * Run:    ./a.out
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gdrcache.h>

static int check(gdrc_status_t status, const char *what)
{
	if (status != GDRC_OK) {
		fprintf(stderr, "%s: %s\n", what, gdrc_status_str(status));
		return 1;
	}
	return 0;
}

int main(void)
{
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr, *again;
	struct gdrc_mr_info info, info2;
	size_t len = 1 << 20;
	char *buf = malloc(len);
	uint64_t hits = 0, misses = 0;

	if (!buf)
		return 1;
	memset(buf, 0, len);
	if (check(gdrc_init(NULL, &ctx), "gdrc_init"))
		return 1;

	/* First use of the buffer: a miss, which registers it. */
	if (check(gdrc_mr_get(ctx, buf, len, GDRC_ACCESS_LOCAL_WRITE |
				  GDRC_ACCESS_REMOTE_READ, 0, &mr),
		  "gdrc_mr_get"))
		return 1;
	if (check(gdrc_mr_query(mr, &info), "gdrc_mr_query"))
		return 1;
	printf("registration %llu covers %#lx + %lu, lkey %u rkey %u\n",
	       (unsigned long long)info.id, (unsigned long)info.addr,
	       (unsigned long)info.length, info.lkey, info.rkey);
	gdrc_mr_put(ctx, mr);

	/* Next message from the same buffer: a hit, same registration (the
	 * id says so: the pointer may differ, see gdrc_mr_get). */
	if (check(gdrc_mr_get(ctx, buf + 4096, 4096, GDRC_ACCESS_REMOTE_READ,
			      0, &again),
		  "gdrc_mr_get"))
		return 1;
	if (check(gdrc_mr_query(again, &info2), "gdrc_mr_query"))
		return 1;
	printf("second get %s the same registration\n",
	       info2.id == info.id ? "returned" : "did NOT return");
	gdrc_mr_put(ctx, again);

	gdrc_stat_get(ctx, GDRC_STAT_HITS, &hits);
	gdrc_stat_get(ctx, GDRC_STAT_MISSES, &misses);
	printf("hits %llu, misses %llu\n", (unsigned long long)hits,
	       (unsigned long long)misses);

	gdrc_fini(ctx);
	free(buf);
	return info2.id == info.id && hits == 1 && misses == 1 ? 0 : 1;
}
