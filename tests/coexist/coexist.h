/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * coexist.h - the probes shared by the programs that run gdrcache beside
 * another library's memory hooks (test_ucm_coexist.c: UCX's rcache;
 * test_mpi_coexist.c: Open MPI; test_fabric_coexist.c: libfabric;
 * test_mixed_coexist.c: UCX and libfabric at once).  Header-only, one program each.
 *
 * The program sets coexist_ctx and, where the other library has a cache
 * of its own to watch, coexist_other (and coexist_other2 for a second
 * one: coexist_ucx.h, coexist_fabric.h): warm(p) says it holds p (returns 1
 * when it had to register), and fresh(p) that it did not serve p's old
 * memory.  coexist_probes() then checks, for each way a range loses its
 * memory (munmap + mmap(MAP_FIXED) at the same address, mmap(MAP_FIXED)
 * over it, madvise(MADV_DONTNEED), an mremap that moves, free() of a
 * large malloc block), that gdrcache hits while nothing happened and
 * never hands out the old registration after.
 */
#ifndef GDRC_TESTS_COEXIST_H
#define GDRC_TESTS_COEXIST_H

#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <gdrcache.h>

#define COEXIST_LEN (256 * 1024)

static int coexist_fails;
static struct gdrc_ctx *coexist_ctx;

struct coexist_other {
	const char *name;
	int (*warm)(void *p);  /* 0 when the range was already held */
	int (*fresh)(void *p); /* 1 when the old memory was not served */
};

static const struct coexist_other *coexist_other;
static const struct coexist_other *coexist_other2; /* a second one */

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			coexist_fails++;                                     \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);          \
			printf(__VA_ARGS__);                                 \
			printf("\n");                                        \
		}                                                            \
	} while (0)

static uint64_t coexist_stat(enum gdrc_stat s)
{
	uint64_t v = 0;

	gdrc_stat_get(coexist_ctx, s, &v);
	return v;
}

/* coexist_ctx made, or the program ends (exit 1). */
static inline void coexist_open(void)
{
	gdrc_status_t st = gdrc_init(NULL, &coexist_ctx);

	if (st) {
		printf("FAIL gdrc_init: %s\n", gdrc_status_str(st));
		exit(1);
	}
}

/* Lines reach the log before a crash; what the program runs under. */
static inline void coexist_start(const char *order)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("order %s, LD_PRELOAD=%s\n", order,
	       getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "");
}

/* gdrcache's registration id for [p, p + COEXIST_LEN), taken, dropped. */
static uint64_t coexist_id(void *p)
{
	struct gdrc_mr_info i = { 0 };
	struct gdrc_mr *mr;
	gdrc_status_t st = gdrc_mr_get(coexist_ctx, p, COEXIST_LEN, 0, 0,
				       &mr);

	CHECK(st == GDRC_OK, "gdrc_mr_get %p: %s", p, gdrc_status_str(st));
	if (st)
		return 0;
	gdrc_mr_query(mr, &i);
	gdrc_mr_put(coexist_ctx, mr);
	return i.id;
}

static void *coexist_map(void *where, size_t len)
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

/* Both caches hold p: repeated gets hit. */
static uint64_t coexist_warm(void *p, const char *what)
{
	uint64_t hits = coexist_stat(GDRC_STAT_HITS);
	uint64_t a = coexist_id(p), b = coexist_id(p);

	CHECK(a && a == b, "%s: repeated gdrcache gets: ids %llu, %llu", what,
	      (unsigned long long)a, (unsigned long long)b);
	CHECK(coexist_stat(GDRC_STAT_HITS) >= hits + 1,
	      "%s: gdrcache hits %llu, expected %llu or more", what,
	      (unsigned long long)coexist_stat(GDRC_STAT_HITS),
	      (unsigned long long)hits + 1);
	for (int i = 0; i < 2; i++) {
		const struct coexist_other *o = i ? coexist_other2 :
						    coexist_other;

		if (!o)
			continue;
		o->warm(p);
		CHECK(o->warm(p) == 0, "%s: %s missed a warm range", what,
		      o->name);
	}
	return a;
}

/* After what was done to p, neither cache may hand out the old memory. */
static void coexist_fresh(void *p, uint64_t old, const char *what)
{
	uint64_t id = coexist_id(p);

	CHECK(id && id != old,
	      "%s: gdrcache served registration %llu of the old memory", what,
	      (unsigned long long)old);
	for (int i = 0; i < 2; i++) {
		const struct coexist_other *o = i ? coexist_other2 :
						    coexist_other;

		if (o)
			CHECK(o->fresh(p) == 1,
			      "%s: %s served the old memory (its events lost)",
			      what, o->name);
	}
}

static void coexist_probes(void)
{
	const size_t len = COEXIST_LEN;
	char *p, *q, *m;
	uintptr_t off, base;
	uint64_t id;

	p = coexist_map(NULL, len);
	id = coexist_warm(p, "munmap+mmap");
	munmap(p, len);
	coexist_map(p, len);
	coexist_fresh(p, id, "munmap + mmap(MAP_FIXED)");

	id = coexist_warm(p, "mmap fixed");
	coexist_map(p, len); /* straight over it */
	coexist_fresh(p, id, "mmap(MAP_FIXED) over a mapping");

	id = coexist_warm(p, "madvise");
	madvise(p, len, MADV_DONTNEED);
	coexist_fresh(p, id, "madvise(MADV_DONTNEED)");

	id = coexist_warm(p, "mremap");
	q = mremap(p, len, 2 * len, MREMAP_MAYMOVE);
	CHECK(q != MAP_FAILED, "mremap: %m");
	if (q != p) {
		coexist_map(p, len);
		coexist_fresh(p, id, "mremap that moved");
		munmap(p, len);
	}
	munmap(q, 2 * len);

#ifndef __SANITIZE_ADDRESS__ /* ASan's allocator keeps freed blocks */
	/* A fixed threshold: glibc raises its dynamic one to the size of
	 * each mapped block freed, and a second round's block would come
	 * from the heap, which the mmap(MAP_FIXED) below would wreck. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	m = malloc(8 << 20); /* over glibc's mmap threshold */
	memset(m, 1, 8 << 20);
	id = coexist_warm(m, "malloc");
	/* The block starts past its chunk header: map whole pages. */
	off = (uintptr_t)m & 4095;
	base = (uintptr_t)m - off;
	free(m); /* glibc's own munmap */
	p = coexist_map((void *)base, len + 4096);
	coexist_fresh(p + off, id, "free() of a large block");
	munmap(p, len + 4096);
#else
	(void)m, (void)off, (void)base;
#endif
}

/*
 * Host events on, from a source whose description holds want.
 * @return 0, or 77 (skip) when the other library left glibc to us.
 */
static int coexist_check_source(const char *want)
{
	const char *src = NULL;
	gdrc_status_t st;
	void *p = coexist_map(NULL, COEXIST_LEN);

	/* A get makes the library look at its hooks: a retake happens on
	 * the first slow get after another library wrote over them. */
	coexist_id(p);
	munmap(p, COEXIST_LEN);
	st = gdrc_hooks_status(coexist_ctx, &src);
	printf("host events: %s (%s)\n", st == GDRC_OK ? "on" : "off",
	       src ? src : "-");
	CHECK(st == GDRC_OK, "host events off: %s", src ? src : "?");
	CHECK(src && strstr(src, want), "expected a source with \"%s\"",
	      want);
	return 0;
}

/* Before gdrc_fini: reads the context's stats.  @return the exit code. */
static int coexist_end(void)
{
	printf("hits %llu misses %llu invalidations %llu\n",
	       (unsigned long long)coexist_stat(GDRC_STAT_HITS),
	       (unsigned long long)coexist_stat(GDRC_STAT_MISSES),
	       (unsigned long long)coexist_stat(GDRC_STAT_INVALIDATIONS));
	printf("%s\n", coexist_fails ? "FAILED" : "PASSED");
	return coexist_fails ? 1 : 0;
}

#endif /* GDRC_TESTS_COEXIST_H */
