/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 02_limits_and_stats.c - bounding the cache: at most 4 registrations are
 * kept, the least recently used unused one is evicted first, and the
 * counters (dumped as JSON) say why each get missed.
 *
 * Prerequisites: libgdrcache installed; no NIC needed.
 * Build:  cc 02_limits_and_stats.c $(pkg-config --cflags --libs gdrcache)
 * Run:    ./a.out      (GDRC_MAX_REGIONS=2 ./a.out overrides nothing:
 *                       fields set in gdrc_config win over the env)
 */
#include <stdio.h>
#include <stdlib.h>

#include <gdrcache.h>

#define NBUF 8
#define BUFLEN 65536

int main(void)
{
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_MAX_REGIONS,
		.max_regions = 4,
	};
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	char *bufs[NBUF];
	char dump[2048];
	gdrc_status_t status;
	int round, i;

	status = gdrc_init(&cfg, &ctx);
	if (status != GDRC_OK) {
		fprintf(stderr, "gdrc_init: %s\n", gdrc_status_str(status));
		return 1;
	}
	for (i = 0; i < NBUF; i++) {
		bufs[i] = malloc(BUFLEN);
		if (!bufs[i])
			return 1;
	}
	/* Cycle through 8 buffers with room for 4: every get misses. */
	for (round = 0; round < 3; round++) {
		for (i = 0; i < NBUF; i++) {
			status = gdrc_mr_get(ctx, bufs[i], BUFLEN, 0, 0, &mr);
			if (status != GDRC_OK) {
				fprintf(stderr, "gdrc_mr_get: %s\n",
					gdrc_status_str(status));
				return 1;
			}
			gdrc_mr_put(ctx, mr);
		}
	}
	status = gdrc_stats_dump(ctx, GDRC_DUMP_JSON, dump, sizeof(dump),
				 NULL);
	if (status != GDRC_OK) {
		fprintf(stderr, "gdrc_stats_dump: %s\n",
			gdrc_status_str(status));
		return 1;
	}
	printf("%s\n", dump);
	gdrc_fini(ctx);
	for (i = 0; i < NBUF; i++)
		free(bufs[i]);
	return 0;
}
