/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * coexist_ucx.h - UCX's registration cache as the other cache of a
 * coexistence program (coexist.h): a ucs_rcache with UCM's VM_UNMAPPED
 * events, whose registrations are counted.  LINKED: libucs is linked
 * (its constructor patches glibc before main); else it is dlopened when
 * coexist_ucx_start() is called.  Header-only, one program each.
 */
#ifndef GDRC_TESTS_COEXIST_UCX_H
#define GDRC_TESTS_COEXIST_UCX_H

#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <ucs/memory/rcache.h>
#include <ucm/api/ucm.h>

#include "coexist.h"

typedef ucs_status_t (*rcache_create_fn)(const ucs_rcache_params_t *,
					 const char *, ucs_stats_node_t *,
					 ucs_rcache_t **);
typedef ucs_status_t (*rcache_get_fn)(ucs_rcache_t *, void *, size_t, int,
				      void *, ucs_rcache_region_t **);
typedef void (*rcache_put_fn)(ucs_rcache_t *, ucs_rcache_region_t *);
typedef void (*rcache_destroy_fn)(ucs_rcache_t *);

static rcache_create_fn p_create;
static rcache_get_fn p_get;
static rcache_put_fn p_put;
static rcache_destroy_fn p_destroy;

static ucs_rcache_t *rc;
static unsigned rc_regs;

static ucs_status_t rc_reg(void *c, ucs_rcache_t *r, void *arg,
			   ucs_rcache_region_t *reg, uint16_t flags)
{
	(void)c, (void)r, (void)arg, (void)reg, (void)flags;
	rc_regs++;
	return UCS_OK;
}

static void rc_dereg(void *c, ucs_rcache_t *r, ucs_rcache_region_t *reg)
{
	(void)c, (void)r, (void)reg;
}

static void rc_dump(void *c, ucs_rcache_t *r, ucs_rcache_region_t *reg,
		    char *buf, size_t max)
{
	(void)c, (void)r, (void)reg;
	snprintf(buf, max, "-");
}

static const ucs_rcache_ops_t rc_ops = { rc_reg, rc_dereg, rc_dump };

static void load_ucx(void)
{
#ifdef LINKED
	p_create = ucs_rcache_create;
	p_get = ucs_rcache_get;
	p_put = ucs_rcache_region_put;
	p_destroy = ucs_rcache_destroy;
#else
	void *ucs = dlopen("libucs.so.0", RTLD_NOW | RTLD_LOCAL);

	if (!ucs) {
		printf("SKIP: %s\n", dlerror());
		exit(77);
	}
	p_create = (rcache_create_fn)dlsym(ucs, "ucs_rcache_create");
	p_get = (rcache_get_fn)dlsym(ucs, "ucs_rcache_get");
	p_put = (rcache_put_fn)dlsym(ucs, "ucs_rcache_region_put");
	p_destroy = (rcache_destroy_fn)dlsym(ucs, "ucs_rcache_destroy");
#endif
}

static void coexist_ucx_start(void)
{
	ucs_rcache_params_t rp;
	ucs_status_t st;

	load_ucx();
	memset(&rp, 0, sizeof(rp));
	rp.region_struct_size = sizeof(ucs_rcache_region_t);
	rp.alignment = 64;
	rp.max_alignment = 4096;
	rp.ucm_events = UCM_EVENT_VM_UNMAPPED;
	rp.ucm_event_priority = 1000;
	rp.ops = &rc_ops;
	rp.max_regions = ULONG_MAX;
	rp.max_size = SIZE_MAX;
	rp.max_unreleased = SIZE_MAX;
	st = p_create(&rp, "coexist", NULL, &rc);
	if (st != UCS_OK) {
		printf("SKIP: ucs_rcache_create with UCM events: %d\n", st);
		exit(77);
	}
}

/* UCX's rcache: did this get register? */
static int ucx_registered(void *p)
{
	ucs_rcache_region_t *reg;
	unsigned before = rc_regs;

	if (p_get(rc, p, COEXIST_LEN, PROT_READ | PROT_WRITE, NULL, &reg) !=
	    UCS_OK) {
		CHECK(0, "ucs_rcache_get %p failed", p);
		return -1;
	}
	p_put(rc, reg);
	return rc_regs != before;
}

static const struct coexist_other coexist_ucx = {
	.name = "ucx's rcache",
	.warm = ucx_registered,
	.fresh = ucx_registered,
};


/* After the probes. */
static void coexist_ucx_stop(void)
{
	p_destroy(rc);
}

#endif /* GDRC_TESTS_COEXIST_UCX_H */
