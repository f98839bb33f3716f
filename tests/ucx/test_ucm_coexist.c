// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_ucm_coexist.c - gdrcache and UCX's registration cache in one
 * process, as every UCX-based MPI or communication library runs them.
 *
 * Built twice: linked with libucs (-DLINKED: libucs's constructor patches
 * glibc before main, so UCM is first whatever the call order), and with
 * libucs dlopened at the chosen step (gdrcache first when UCX comes
 * second: UCM then writes over our patch, and the cache must move to
 * UCM's events).  argv[1]: "gdrc-first" or "ucx-first"; argv[2]: the host
 * source expected ("ucm" or "glibc").
 *
 * Checks, for both caches, on the same ranges: repeated gets hit; after
 * munmap + mmap(MAP_FIXED) at the same address, madvise(MADV_DONTNEED),
 * an mremap that moves, and free() of a large malloc block, the next get
 * is a new registration (never the old one, whose id it would carry);
 * and UCX's rcache still registers anew after each (its events were not
 * taken away).  Exit 0 pass, 1 fail, 77 skip (UCM not patching glibc:
 * under a sanitizer, say).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gdrcache.h>
#include <ucs/memory/rcache.h>
#include <ucm/api/ucm.h>

#define LEN (256 * 1024)

static int fails;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fails++;                                             \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);          \
			printf(__VA_ARGS__);                                 \
			printf("\n");                                        \
		}                                                            \
	} while (0)

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

static struct gdrc_ctx *ctx;
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

static void start_ucx(void)
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

static void start_gdrc(void)
{
	gdrc_status_t st = gdrc_init(NULL, &ctx);

	if (st) {
		printf("FAIL gdrc_init: %s\n", gdrc_status_str(st));
		exit(1);
	}
}

static uint64_t stat_of(enum gdrc_stat s)
{
	uint64_t v = 0;

	gdrc_stat_get(ctx, s, &v);
	return v;
}

/* gdrcache's registration id for [p, p + LEN), taken and dropped. */
static uint64_t gdrc_id(void *p)
{
	struct gdrc_mr_info i = { 0 };
	struct gdrc_mr *mr;
	gdrc_status_t st = gdrc_mr_get(ctx, p, LEN, 0, 0, &mr);

	CHECK(st == GDRC_OK, "gdrc_mr_get %p: %s", p, gdrc_status_str(st));
	if (st)
		return 0;
	gdrc_mr_query(mr, &i);
	gdrc_mr_put(ctx, mr);
	return i.id;
}

/* UCX's rcache: did this get register? */
static int ucx_registered(void *p)
{
	ucs_rcache_region_t *reg;
	unsigned before = rc_regs;

	if (p_get(rc, p, LEN, PROT_READ | PROT_WRITE, NULL, &reg) != UCS_OK) {
		CHECK(0, "ucs_rcache_get %p failed", p);
		return -1;
	}
	p_put(rc, reg);
	return rc_regs != before;
}

static void *map_len_at(void *where, size_t len)
{
	void *p = mmap(where, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (where ? MAP_FIXED : 0),
		       -1, 0);

	if (p == MAP_FAILED) {
		printf("FAIL mmap: %m\n");
		exit(1);
	}
	memset(p, 1, len);
	return p;
}

static void *map_at(void *where)
{
	return map_len_at(where, LEN);
}

/* Both caches hold p: repeated gets hit on both sides. */
static uint64_t warm(void *p, const char *what)
{
	uint64_t hits = stat_of(GDRC_STAT_HITS);
	uint64_t a = gdrc_id(p), b = gdrc_id(p);

	CHECK(a && a == b, "%s: repeated gdrcache gets: ids %llu, %llu", what,
	      (unsigned long long)a, (unsigned long long)b);
	CHECK(stat_of(GDRC_STAT_HITS) >= hits + 1,
	      "%s: gdrcache hits %llu, expected %llu or more", what,
	      (unsigned long long)stat_of(GDRC_STAT_HITS),
	      (unsigned long long)hits + 1);
	ucx_registered(p);
	CHECK(ucx_registered(p) == 0, "%s: ucx's rcache missed a warm range",
	      what);
	return a;
}

/* After what was done to p, neither cache may hand out the old one. */
static void fresh(void *p, uint64_t old, const char *what)
{
	uint64_t id = gdrc_id(p);

	CHECK(id && id != old,
	      "%s: gdrcache served registration %llu of the old memory", what,
	      (unsigned long long)old);
	CHECK(ucx_registered(p) == 1,
	      "%s: ucx's rcache served the old memory (its events lost)",
	      what);
}

static void probes(void)
{
	char *p, *q, *m;
	uintptr_t off, base;
	uint64_t id;

	p = map_at(NULL);
	id = warm(p, "munmap+mmap");
	munmap(p, LEN);
	map_at(p);
	fresh(p, id, "munmap + mmap(MAP_FIXED)");

	id = warm(p, "mmap fixed");
	map_at(p); /* straight over it */
	fresh(p, id, "mmap(MAP_FIXED) over a mapping");

	id = warm(p, "madvise");
	madvise(p, LEN, MADV_DONTNEED);
	fresh(p, id, "madvise(MADV_DONTNEED)");

	id = warm(p, "mremap");
	q = mremap(p, LEN, 2 * LEN, MREMAP_MAYMOVE);
	CHECK(q != MAP_FAILED, "mremap: %m");
	if (q != p) {
		map_at(p);
		fresh(p, id, "mremap that moved");
		munmap(p, LEN);
	}
	munmap(q, 2 * LEN);

#ifndef __SANITIZE_ADDRESS__ /* ASan's allocator keeps freed blocks */
	m = malloc(8 << 20); /* over glibc's mmap threshold */
	memset(m, 1, 8 << 20);
	id = warm(m, "malloc");
	/* The block starts past its chunk header: map whole pages. */
	off = (uintptr_t)m & 4095;
	base = (uintptr_t)m - off;
	free(m); /* glibc's own munmap */
	p = map_len_at((void *)base, LEN + 4096);
	fresh(p + off, id, "free() of a large block");
	munmap(p, LEN + 4096);
#else
	(void)m, (void)off, (void)base;
#endif
}

int main(int argc, char **argv)
{
	const char *order = argc > 1 ? argv[1] : "gdrc-first";
	const char *want = argc > 2 ? argv[2] : "ucm";
	const char *src = NULL;
	gdrc_status_t st;

	if (!strcmp(order, "gdrc-first")) {
		start_gdrc();
		start_ucx();
	} else {
		start_ucx();
		start_gdrc();
	}
	/* A get makes the library look at its hooks (a retake happens
	 * on the first slow get after UCM wrote over them). */
	{
		void *p = map_at(NULL);

		gdrc_id(p);
		munmap(p, LEN);
	}
	st = gdrc_hooks_status(ctx, &src);
	printf("order %s: host events: %s (%s)\n", order,
	       st == GDRC_OK ? "on" : "off", src ? src : "-");
	if (st != GDRC_OK && !strcmp(want, "ucm") && src &&
	    strstr(src, "not patched")) {
		printf("SKIP: ucm did not patch glibc here\n");
		return 77;
	}
	CHECK(st == GDRC_OK, "host events off: %s", src ? src : "?");
	CHECK(src && strstr(src, !strcmp(want, "ucm") ? "ucx ucm" : "glibc"),
	      "expected the %s source, got %s", want, src ? src : "none");
	probes();
	p_destroy(rc);
	printf("hits %llu misses %llu invalidations %llu\n",
	       (unsigned long long)stat_of(GDRC_STAT_HITS),
	       (unsigned long long)stat_of(GDRC_STAT_MISSES),
	       (unsigned long long)stat_of(GDRC_STAT_INVALIDATIONS));
	gdrc_fini(ctx);
	printf("%s\n", fails ? "FAILED" : "PASSED");
	return fails ? 1 : 0;
}
