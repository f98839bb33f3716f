// SPDX-License-Identifier: BSD-3-Clause
/*
 * pin_ibv_resolve.c - libgdrcache.so's own verbs calls go to libibverbs,
 * never to an interposer of the same names (gdrc_ibv, pin.h).
 *
 * A program run under LD_PRELOAD=libgdrcache-preload.so, or under any
 * other verbs shim, binds ibv_reg_mr_iova2 and ibv_dereg_mr to the
 * preloaded definitions first, the library's own references included.
 * At load, before any code of the program or the preload runs, the
 * table is pointed at libibverbs' definitions of the versions rdma-core
 * gave them.  Linked into the shared library only: the static archive,
 * which unit tests link with -Wl,--wrap, keeps its direct calls.
 */
#include <dlfcn.h>
#include <string.h>

#include "pin.h"

static void resolve(void *h, const char *name, const char *version,
		    void *slot)
{
	void *fn = dlvsym(h, name, version);

	/* A libibverbs without that version node: its default one, still
	 * from its own handle, so never an interposer's (which the direct
	 * call would reach, and the preload would then recurse on). */
	if (!fn)
		fn = dlsym(h, name);
	if (fn)
		memcpy(slot, &fn, sizeof(fn));
}

__attribute__((constructor)) static void pin_ibv_resolve(void)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);

	if (!h)
		return; /* the library links it: not reached */
	resolve(h, "ibv_reg_mr_iova2", "IBVERBS_1.8", &gdrc_ibv.reg_mr_iova2);
	resolve(h, "ibv_reg_dmabuf_mr", "IBVERBS_1.12",
		&gdrc_ibv.reg_dmabuf_mr);
	resolve(h, "ibv_dereg_mr", "IBVERBS_1.1", &gdrc_ibv.dereg_mr);
	dlclose(h); /* still loaded: the library depends on it */
}
