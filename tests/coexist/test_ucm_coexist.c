// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_ucm_coexist.c - gdrcache and UCX's registration cache in one
 * process, as every UCX-based MPI or communication library runs them.
 *
 * Built twice: linked with libucs (-DLINKED: libucs's constructor patches
 * glibc before main, so UCM is first whatever the call order), and with
 * libucs dlopened at the chosen step (gdrcache first when UCX comes
 * second: UCM then writes over our patch, and the cache must move to
 * UCM's events).  argv[1]: "gdrc-first" or "ucx-first"; argv[2]: a part
 * of the host source's description expected ("ucx ucm" by default).
 *
 * Checks, for both caches, on the same ranges: repeated gets hit; after
 * munmap + mmap(MAP_FIXED) at the same address, madvise(MADV_DONTNEED),
 * an mremap that moves, and free() of a large malloc block, the next get
 * is a new registration (never the old one, whose id it would carry);
 * and UCX's rcache still registers anew after each (its events were not
 * taken away).  The probes are in coexist.h.  Exit 0 pass, 1 fail, 77
 * skip (no libucs, or no UCM events).
 */
#include <stdio.h>
#include <string.h>

#include <gdrcache.h>

#include "coexist_ucx.h"

int main(int argc, char **argv)
{
	const char *order = argc > 1 ? argv[1] : "gdrc-first";
	int ret;

	if (!strcmp(order, "gdrc-first")) {
		coexist_open();
		coexist_ucx_start();
	} else {
		coexist_ucx_start();
		coexist_open();
	}
	coexist_start(order);
	coexist_other = &coexist_ucx;
	coexist_check_source(argc > 2 ? argv[2] : "ucx ucm");
	coexist_probes();
	/* The events came from UCM, and say so. */
	CHECK(coexist_stat(GDRC_STAT_UCM_EVENTS) > 0 &&
		      coexist_stat(GDRC_STAT_UCM_EVENTS) <=
			      coexist_stat(GDRC_STAT_MEM_EVENTS),
	      "ucm_events %llu of mem_events %llu",
	      (unsigned long long)coexist_stat(GDRC_STAT_UCM_EVENTS),
	      (unsigned long long)coexist_stat(GDRC_STAT_MEM_EVENTS));
	ret = coexist_end();
	coexist_ucx_stop();
	gdrc_fini(coexist_ctx);
	return ret;
}
