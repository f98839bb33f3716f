// SPDX-License-Identifier: BSD-3-Clause
/*
 * linked_user.c - a program that links libgdrcache.so itself, run with
 * and without LD_PRELOAD=libgdrcache-preload.so (run_linked.sh): either
 * way the process holds one libgdrcache, its memory hooks are on, a
 * repeated get is a hit, and a mapping replaced at the same address
 * (mmap MAP_FIXED) is never served its old registration.  Before the
 * preload became a layer over the shared library it carried a copy of
 * its own, whose hooks made this program's refuse to install ("another
 * copy of libgdrcache") and every get a miss.
 *
 * Usage: linked_user [--preloaded]   (exit 0 when every check holds)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gdrcache.h>

static int failures;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);          \
			printf(__VA_ARGS__);                                 \
			printf("\n");                                        \
			failures++;                                          \
		}                                                            \
	} while (0)

struct objs {
	int lib;     /* libgdrcache.so.* */
	int preload; /* libgdrcache-preload.so */
};

static int count_obj(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct objs *o = arg;
	const char *base = strrchr(info->dlpi_name, '/');

	(void)size;
	base = base ? base + 1 : info->dlpi_name;
	if (!strncmp(base, "libgdrcache-preload.so", 22))
		o->preload++;
	else if (!strncmp(base, "libgdrcache.so", 14))
		o->lib++;
	return 0;
}

static uint64_t stat_of(struct gdrc_ctx *ctx, enum gdrc_stat s)
{
	uint64_t v = 0;

	gdrc_stat_get(ctx, s, &v);
	return v;
}

/* Get and put [p, p + len); @return the registration's id, 0 if none. */
static uint64_t get_id(struct gdrc_ctx *ctx, void *p, size_t len)
{
	struct gdrc_mr_info info = { 0 };
	struct gdrc_mr *mr;
	gdrc_status_t s = gdrc_mr_get(ctx, p, len, GDRC_ACCESS_LOCAL_WRITE,
				      0, &mr);

	CHECK(s == GDRC_OK, "gdrc_mr_get: %s", gdrc_status_str(s));
	if (s)
		return 0;
	gdrc_mr_query(mr, &info);
	gdrc_mr_put(ctx, mr);
	return info.id;
}

int main(int argc, char **argv)
{
	int preloaded = argc > 1 && !strcmp(argv[1], "--preloaded");
	size_t len = 2 * (size_t)sysconf(_SC_PAGESIZE);
	struct objs o = { 0 };
	struct gdrc_ctx *ctx;
	const char *why = "unset";
	uint64_t a, b, c;
	gdrc_status_t s;
	char *buf, *again;

	dl_iterate_phdr(count_obj, &o);
	CHECK(o.lib == 1, "%d copies of libgdrcache.so loaded", o.lib);
	CHECK(o.preload == preloaded, "libgdrcache-preload.so loaded %d "
	      "times, expected %d", o.preload, preloaded);
	s = gdrc_init(NULL, &ctx);
	CHECK(s == GDRC_OK, "gdrc_init: %s", gdrc_status_str(s));
	if (s)
		return 1;
	s = gdrc_hooks_status(ctx, &why);
	CHECK(s == GDRC_OK, "hooks: %s (%s)", gdrc_status_str(s),
	      why ? why : "no reason");

	buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(buf != MAP_FAILED, "mmap");
	if (buf == MAP_FAILED)
		return 1;
	memset(buf, 1, len);
	a = get_id(ctx, buf, len);
	b = get_id(ctx, buf, len);
	CHECK(a && a == b, "repeated get: ids %llu then %llu",
	      (unsigned long long)a, (unsigned long long)b);
	CHECK(stat_of(ctx, GDRC_STAT_HITS) == 1, "hits %llu, expected 1",
	      (unsigned long long)stat_of(ctx, GDRC_STAT_HITS));

	/* New memory at the same address, as an allocator that reuses it. */
	again = mmap(buf, len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	CHECK(again == buf, "mmap MAP_FIXED");
	memset(buf, 2, len);
	c = get_id(ctx, buf, len);
	CHECK(c && c != a, "after mmap(MAP_FIXED) the old registration "
	      "(id %llu) was served again", (unsigned long long)a);
	CHECK(stat_of(ctx, GDRC_STAT_INV_HOST_HOOK) >= 1,
	      "the remap was not seen by the hooks");
	munmap(buf, len);
	gdrc_fini(ctx);
	printf("linked_user%s: %s (%d failure%s)\n",
	       preloaded ? " under the preload" : "",
	       failures ? "FAILED" : "ok", failures,
	       failures == 1 ? "" : "s");
	return failures ? 1 : 0;
}
