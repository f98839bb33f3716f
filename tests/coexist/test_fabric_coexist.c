// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_fabric_coexist.c - gdrcache linked into a program that also opens
 * a libfabric domain whose MR cache watches memory with libfabric's own
 * glibc patches (the memhooks monitor, FI_MR_CACHE_MONITOR=memhooks), in
 * either order: "fabric-first" opens the domain (libfabric patches
 * glibc) before gdrc_init, "gdrc-first" after it.  Needs a verbs device
 * (the VM lab's soft-RoCE: run_fabric_vm.sh), the only provider of
 * libfabric 1.17 with an MR cache.
 *
 * What must hold (issue 14): both caches on; gdrcache caches host memory
 * (repeated gets hit), chained over libfabric's patch in either order
 * (gdrc-first: libfabric writes over our patch, which it does not take
 * for its own, and the next slow get takes it back), and after each way
 * a range loses its memory (coexist.h) both hand out a new registration.
 * Before our patch changed form, libfabric refused to patch over it in
 * the gdrc-first order, kept its cache on, and served old registrations.  A registration's identity in
 * libfabric's cache is its key (fi_mr_key): a cached one comes back with
 * the same, a new one gets another while the first is held.
 *
 * Then libfabric closes its domain, and its cleanup writes back what it
 * saved: gdrcache must own glibc again, chained to nothing, and pass the
 * probes alone.
 *
 * Also run under LD_PRELOAD=libgdrcache-preload.so (run_fabric_vm.sh's
 * preload-* orders): the preload's hooks go in before main, so in
 * fabric-first libfabric patches over them before gdrc_init, which must
 * take them back, chained, for host caching to be on.
 *
 * Usage: test_fabric_coexist fabric-first|gdrc-first
 * Exit: 0 passed; 1 a check failed; 77 no verbs provider here.
 */
#include "coexist_fabric.h"

int main(int argc, char **argv)
{
	int fabric_first = argc > 1 && !strcmp(argv[1], "fabric-first");
	int fabric_cached; /* libfabric's cache holds what it registered */
	int ret;

	if (argc != 2 || (!fabric_first && strcmp(argv[1], "gdrc-first"))) {
		fprintf(stderr, "usage: %s fabric-first|gdrc-first\n",
			argv[0]);
		return 2;
	}
	coexist_start(argv[1]);
	ret = coexist_fabric_and_gdrc(fabric_first, "memhooks");
	if (ret)
		return ret;

	fabric_cached = coexist_fabric_cached();
	CHECK(fabric_cached, "libfabric's cache is off");
	if (fabric_cached)
		coexist_other = &coexist_fabric;

	/* Either order ends chained over libfabric's patch: first, or
	 * when libfabric wrote over ours and the next slow get took it
	 * back (the check's first get). */
	coexist_check_source("chained to the hooks of");
	coexist_check_source("libfabric");
	coexist_probes();

	/* libfabric's cleanup (its last cache gone) writes back the bytes
	 * it saved: glibc's own (libfabric first) or our plain patch
	 * (gdrcache first).  Either way gdrcache must take glibc back for
	 * itself, chained to nothing, and stay right. */
	coexist_fabric_close();
	coexist_other = NULL;
	coexist_check_source("glibc patched");
	{
		const char *src = NULL;

		gdrc_hooks_status(coexist_ctx, &src);
		CHECK(src && !strstr(src, "chained"),
		      "still chained after libfabric's cleanup: %s",
		      src ? src : "?");
	}
	coexist_probes();
	ret = coexist_end();
	gdrc_fini(coexist_ctx);
	return ret;
}
