// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_mixed_coexist.c - gdrcache in a process that also runs UCX's
 * registration cache and libfabric's, as a program mixing communication
 * libraries does (issue 14: "UCX rcache + libfabric + gdrcache linked +
 * preload"): libucs linked (UCM patches glibc in its constructor, before
 * main), a libfabric verbs domain whose MR cache watches memory with the
 * monitor given (memhooks: it patches glibc too; uffd: userfaultfd, no
 * patch), and gdrcache linked, in either order with libfabric, and run
 * under LD_PRELOAD=libgdrcache-preload.so by run_fabric_vm.sh's
 * preload-* orders.
 *
 * What must hold: all three caches on; gdrcache hits while nothing
 * happens and, after each way a range loses its memory (coexist.h),
 * hands out a new registration, and so do UCX's rcache and libfabric's
 * cache.  With libfabric on userfaultfd (the default) UCM keeps glibc and
 * gdrcache takes UCM's events.  With libfabric's memhooks (an order
 * "...+memhooks") libfabric writes over UCM's patch and UCX's rcache
 * loses its events whatever gdrcache does (it does so with gdrcache's
 * hooks off too: docs/hooks.md); gdrcache, chained over libfabric's
 * patch, and libfabric must still hold, UCX's cache is not checked, and
 * the library must have said once what went wrong and what to set.
 *
 * Usage: test_mixed_coexist fabric-first|gdrc-first[+memhooks]
 * Exit: 0 passed; 1 a check failed; 77 no verbs provider, or no UCM
 * events.
 */
#define LINKED
#include "coexist_fabric.h"
#include "coexist_ucx.h"

/* The library's warning that libfabric's hooks stand over UCM's. */
static int ucm_lost_said;

static void log_sink(enum gdrc_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level <= GDRC_LOG_WARN && strstr(msg, "libfabric's hooks") &&
	    strstr(msg, "userfaultfd"))
		ucm_lost_said++;
	fprintf(stderr, "%s\n", msg);
}

int main(int argc, char **argv)
{
	const char *order = argc == 2 ? argv[1] : "";
	int memhooks = !!strstr(order, "+memhooks");
	int fabric_first = !strncmp(order, "fabric-first", 12);
	int ret;

	if (!fabric_first && strncmp(order, "gdrc-first", 10)) {
		fprintf(stderr, "usage: %s fabric-first|gdrc-first[+memhooks]\n",
			argv[0]);
		return 2;
	}
	coexist_start(order);
	gdrc_log_set_handler(log_sink, NULL);
	coexist_ucx_start();
	ret = coexist_fabric_and_gdrc(fabric_first,
				      memhooks ? "memhooks" : "userfaultfd");
	if (ret) {
		coexist_ucx_stop();
		return ret;
	}

	CHECK(coexist_fabric_cached(), "libfabric's cache is off");
	coexist_other = &coexist_fabric;
	if (memhooks) {
		printf("UCX's rcache not checked: libfabric's memhooks wrote "
		       "over UCM's patch\n");
		coexist_check_source("chained to the hooks of");
		CHECK(ucm_lost_said == 1, "warned %d times that libfabric's "
		      "hooks stand over UCM's, expected once", ucm_lost_said);
	} else {
		coexist_other2 = &coexist_ucx;
		coexist_check_source("ucx ucm");
		CHECK(!ucm_lost_said, "warned that libfabric's hooks stand "
		      "over UCM's, but UCM has glibc");
	}
	coexist_probes();

	ret = coexist_end();
	coexist_fabric_close();
	coexist_ucx_stop();
	gdrc_fini(coexist_ctx);
	return ret;
}
