// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_mpi_coexist.c - gdrcache inside an Open MPI process.
 *
 * With the UCX pml, MPI_Init loads libucs (whose UCM patches glibc) and
 * then Open MPI's own memory patcher writes over glibc's functions too,
 * reporting frees to UCX through ucm_vm_munmap (Open MPI 4.1,
 * opal_common_ucx_opal_mem_hooks).  gdrcache must keep caching host
 * memory without taking those events away: its patch goes over Open
 * MPI's and calls it (chained, docs/hooks.md).  With ob1 nothing patches
 * glibc and gdrcache's plain patch is expected.
 *
 * argv[1]: "gdrc-first" (gdrc_init before MPI_Init: our patch is written
 * over twice, and taken back at the next get) or "mpi-first"; argv[2]:
 * a part of the host source's description expected.  Run under mpirun
 * with one rank.  The probes are in coexist.h; where libucm is loaded, a
 * VM_UNMAPPED handler of our own checks that UCX still hears of each
 * free.  Exit 0 pass, 1 fail.
 *
 * Also run under LD_PRELOAD=libgdrcache-preload.so (ctest
 * mpi_*_preload_*): the preload's hooks go in before main; in the
 * mpi-first order with the UCX pml, MPI_Init writes over them before
 * gdrc_init, which must take them back, chained, and cache host memory
 * (it left host caching off before: found by this test).
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "coexist.h"

/* UCM's ABI, the part used here (ucm/api/ucm.h). */
#define UCM_EVENT_VM_UNMAPPED (1 << 17)
#define UCM_EVENT_FLAG_NO_INSTALL (1 << 24)

struct vm_event {
	void *address;
	size_t size;
};

typedef void (*ucm_cb_t)(int type, struct vm_event *ev, void *arg);

static volatile uintptr_t watch_lo, watch_hi;
static volatile unsigned watch_seen;

static void ucm_seen(int type, struct vm_event *ev, void *arg)
{
	uintptr_t a = (uintptr_t)ev->address;

	(void)type, (void)arg;
	if (a < watch_hi && a + ev->size > watch_lo)
		watch_seen++;
}

static int ucx_warm(void *p)
{
	watch_lo = (uintptr_t)p;
	watch_hi = (uintptr_t)p + COEXIST_LEN;
	watch_seen = 0;
	return 0;
}

static int ucx_fresh(void *p)
{
	(void)p;
	return watch_seen > 0;
}

static const struct coexist_other ucx_side = {
	.name = "ucx (ucm's VM_UNMAPPED, fed by open mpi's hooks)",
	.warm = ucx_warm,
	.fresh = ucx_fresh,
};

/* Where MPI loaded UCX, hear what UCM hears. */
static void watch_ucm(void)
{
	void *h = dlopen("libucm.so.0", RTLD_NOLOAD | RTLD_LAZY);
	int (*set)(int, int, ucm_cb_t, void *);

	if (!h) {
		printf("libucm not loaded: gdrcache only\n");
		return;
	}
	set = (int (*)(int, int, ucm_cb_t, void *))dlsym(
		h, "ucm_set_event_handler");
	if (set && !set(UCM_EVENT_VM_UNMAPPED | UCM_EVENT_FLAG_NO_INSTALL, 0,
			ucm_seen, NULL))
		coexist_other = &ucx_side;
}

int main(int argc, char **argv)
{
	const char *order = argc > 1 ? argv[1] : "gdrc-first";
	gdrc_status_t st;
	int rc;

	if (!strcmp(order, "gdrc-first")) {
		st = gdrc_init(NULL, &coexist_ctx);
		MPI_Init(&argc, &argv);
	} else {
		MPI_Init(&argc, &argv);
		st = gdrc_init(NULL, &coexist_ctx);
	}
	if (st) {
		printf("FAIL gdrc_init: %s\n", gdrc_status_str(st));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	coexist_start(order);
	watch_ucm();
	coexist_check_source(argc > 2 ? argv[2] : "glibc patched");
	coexist_probes();
	/* Our own patch (chained or not) reports: nothing came from UCM. */
	CHECK(coexist_stat(GDRC_STAT_UCM_EVENTS) == 0 &&
		      coexist_stat(GDRC_STAT_MEM_EVENTS) > 0,
	      "ucm_events %llu, mem_events %llu",
	      (unsigned long long)coexist_stat(GDRC_STAT_UCM_EVENTS),
	      (unsigned long long)coexist_stat(GDRC_STAT_MEM_EVENTS));
	rc = coexist_end();
	gdrc_fini(coexist_ctx);
	MPI_Finalize();
	return rc;
}
