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
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "coexist.h"

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static int fabric_cached; /* libfabric's cache holds what it registered */

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

static const struct coexist_other fabric_other = {
	.name = "libfabric's MR cache",
	.warm = fabric_warm,
	.fresh = fabric_fresh,
};

/* @return 0; 77 when no verbs provider answers. */
static int fabric_open(void)
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

static void gdrc_open(void)
{
	gdrc_status_t st = gdrc_init(NULL, &coexist_ctx);

	if (st) {
		printf("FAIL gdrc_init: %s\n", gdrc_status_str(st));
		exit(1);
	}
}

int main(int argc, char **argv)
{
	int fabric_first = argc > 1 && !strcmp(argv[1], "fabric-first");
	void *p;
	int ret;

	if (argc != 2 || (!fabric_first && strcmp(argv[1], "gdrc-first"))) {
		fprintf(stderr, "usage: %s fabric-first|gdrc-first\n",
			argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach the log before a crash */
	printf("order %s, LD_PRELOAD=%s\n", argv[1],
	       getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "");
	setenv("FI_MR_CACHE_MONITOR", "memhooks", 1);
	setenv("FI_LOG_LEVEL", "warn", 0); /* libfabric says what it refused */
	if (!fabric_first)
		gdrc_open();
	ret = fabric_open();
	if (ret) {
		if (coexist_ctx)
			gdrc_fini(coexist_ctx);
		return ret;
	}
	if (fabric_first)
		gdrc_open();

	/* Is libfabric's cache on (two live registrations, one key)? */
	p = coexist_map(NULL, COEXIST_LEN);
	fabric_warm(p);
	fabric_cached = !fabric_warm(p);
	fabric_fresh(p);
	memset(held, 0, sizeof(held));
	munmap(p, COEXIST_LEN);
	printf("libfabric's MR cache: %s\n", fabric_cached ? "on" : "off");
	CHECK(fabric_cached, "libfabric's cache is off");
	if (fabric_cached)
		coexist_other = &fabric_other;

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
	for (unsigned i = 0; i < 8; i++)
		if (held[i].mr)
			fi_close(&held[i].mr->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
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
