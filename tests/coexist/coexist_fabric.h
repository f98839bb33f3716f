/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * coexist_fabric.h - libfabric's MR cache as the other cache of a
 * coexistence program (coexist.h): a verbs domain (the only provider of
 * libfabric 1.17 with an MR cache; soft-RoCE in the VM lab) whose cache
 * watches memory with the monitor FI_MR_CACHE_MONITOR names.  A
 * registration's identity in libfabric's cache is its key (fi_mr_key): a
 * cached one comes back with the same, a new one gets another while the
 * first is held.  Header-only, one program each.
 */
#ifndef GDRC_TESTS_COEXIST_FABRIC_H
#define GDRC_TESTS_COEXIST_FABRIC_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "coexist.h"

static struct fid_fabric *fabric;
static struct fid_domain *domain;

/* Each range's registration held since its first warm (a handful). */
static struct {
	void *p;
	struct fid_mr *mr;
} held[8];

static struct fid_mr **held_of(void *p)
{
	for (unsigned i = 0; i < 8; i++)
		if (held[i].p == p || !held[i].p) {
			held[i].p = p;
			return &held[i].mr;
		}
	printf("FAIL: more ranges than the test keeps\n");
	exit(1);
}

/* Register p through the domain (its cache). */
static struct fid_mr *fabric_reg(void *p)
{
	struct fid_mr *mr;
	int ret = fi_mr_reg(domain, p, COEXIST_LEN, FI_SEND | FI_RECV, 0, 0,
			    0, &mr, NULL);

	if (ret) {
		printf("FAIL fi_mr_reg %p: %s\n", p, fi_strerror(-ret));
		exit(1);
	}
	return mr;
}

/*
 * Does a registration of p come back with the key of the one held?  A
 * cached one does; a new one cannot, while the held one lives (soft-RoCE
 * reuses a freed key index, so the held one stays open until fresh).
 */
static int fabric_same(struct fid_mr *held_mr, void *p)
{
	struct fid_mr *mr = fabric_reg(p);
	int same = fi_mr_key(mr) == fi_mr_key(held_mr);

	fi_close(&mr->fid);
	return same;
}

/* 1 when libfabric had to register p (the first time: then held). */
static int fabric_warm(void *p)
{
	struct fid_mr **h = held_of(p);

	if (!*h) {
		*h = fabric_reg(p);
		return 1;
	}
	return !fabric_same(*h, p);
}

/* 1 when libfabric did not serve p's old memory; lets go of it. */
static int fabric_fresh(void *p)
{
	struct fid_mr **h = held_of(p);
	int fresh = *h ? !fabric_same(*h, p) : 1;

	if (*h)
		fi_close(&(*h)->fid);
	*h = NULL;
	return fresh;
}

static const struct coexist_other coexist_fabric = {
	.name = "libfabric's MR cache",
	.warm = fabric_warm,
	.fresh = fabric_fresh,
};

/* @return 0; 77 when no verbs provider answers. */
static int coexist_fabric_open(void)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	int ret;

	hints->fabric_attr->prov_name = strdup("verbs");
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (ret || !info) {
		printf("no verbs provider: %s: skipped\n", fi_strerror(-ret));
		return 77;
	}
	printf("libfabric %u.%u, provider %s, domain %s\n",
	       FI_MAJOR(fi_version()), FI_MINOR(fi_version()),
	       info->fabric_attr->prov_name, info->domain_attr->name);
	ret = fi_fabric(info->fabric_attr, &fabric, NULL);
	if (!ret)
		ret = fi_domain(fabric, info, &domain, NULL);
	fi_freeinfo(info);
	if (ret) {
		printf("FAIL fi_fabric/fi_domain: %s\n", fi_strerror(-ret));
		exit(1);
	}
	return 0;
}

/*
 * gdrcache and libfabric's domain (its cache on monitor), gdrcache after
 * the domain when fabric_first.  @return 0; 77 without a verbs provider
 * (nothing is left open).
 */
static int coexist_fabric_and_gdrc(int fabric_first, const char *monitor)
{
	int ret;

	setenv("FI_MR_CACHE_MONITOR", monitor, 1);
	setenv("FI_LOG_LEVEL", "warn", 0); /* libfabric says what it refused */
	if (!fabric_first)
		coexist_open();
	ret = coexist_fabric_open();
	if (ret) {
		if (coexist_ctx)
			gdrc_fini(coexist_ctx);
		return ret;
	}
	if (fabric_first)
		coexist_open();
	return 0;
}

/* Close what was held, then the domain and the fabric: libfabric's
 * cleanup (its last cache gone) writes back the bytes it saved. */
static void coexist_fabric_close(void)
{
	for (unsigned i = 0; i < 8; i++)
		if (held[i].mr)
			fi_close(&held[i].mr->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
}

/* Is libfabric's cache on (two live registrations, one key)?  Leaves
 * nothing held. */
static int coexist_fabric_cached(void)
{
	void *p = coexist_map(NULL, COEXIST_LEN);
	int cached;

	fabric_warm(p);
	cached = !fabric_warm(p);
	fabric_fresh(p);
	memset(held, 0, sizeof(held));
	munmap(p, COEXIST_LEN);
	printf("libfabric's MR cache: %s\n", cached ? "on" : "off");
	return cached;
}

#endif /* GDRC_TESTS_COEXIST_FABRIC_H */
