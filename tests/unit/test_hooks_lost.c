// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_hooks_lost.c - another library patches glibc's munmap after us,
 * as UCX, libfabric and Open MPI do, so our hook stops seeing unmaps.
 * The cache must notice before serving a registration of memory that
 * was unmapped meanwhile, flush, and stop caching host memory.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include <gdrcache.h>

#define PAGE 4096UL

/* The foreign library's munmap: a raw system call, no event. */
static int foreign_munmap(void *addr, size_t len)
{
	return (int)syscall(SYS_munmap, addr, len);
}

static unsigned char saved[16];
static unsigned char *target;

/* Overwrite libc's munmap with a jump to foreign_munmap. */
static void foreign_patch(void)
{
	void *h = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
	uintptr_t page;
	unsigned char jump[13] = { 0x49, 0xbb };
	uint64_t dest = (uintptr_t)foreign_munmap;

	assert_non_null(h);
	target = dlvsym(h, "munmap", "GLIBC_2.2.5");
	assert_non_null(target);
	memcpy(jump + 2, &dest, 8);
	jump[10] = 0x41;
	jump[11] = 0xff;
	jump[12] = 0xe3;
	page = (uintptr_t)target & ~(PAGE - 1);
	assert_int_equal(mprotect((void *)page, 2 * PAGE,
				  PROT_READ | PROT_WRITE | PROT_EXEC), 0);
	memcpy(saved, target, sizeof(jump));
	memcpy(target, jump, sizeof(jump));
	assert_int_equal(mprotect((void *)page, 2 * PAGE,
				  PROT_READ | PROT_EXEC), 0);
}

static void test_hooks_lost_overwritten_patch_never_serves_stale(void **state)
{
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	struct gdrc_mr_info i;
	uint64_t id1, regions;
	char *p, *q;

	(void)state;
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(gdrc_mr_get(ctx, p, 64, 0, 0, &mr), GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
	id1 = i.id;
	gdrc_mr_put(ctx, mr);
	/* Warm the fast path: the next get of p is a remembered hit. */
	assert_int_equal(gdrc_mr_get(ctx, p, 64, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);

	foreign_patch();
	assert_int_equal(munmap(p, PAGE), 0); /* unseen by our hooks */
	q = mmap(p, PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	assert_ptr_equal(q, p);

	assert_int_equal(gdrc_mr_get(ctx, q, 64, 0, 0, &mr), GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
	assert_true(i.id != id1);
	assert_int_equal(i.flags, 0); /* no longer cached */
	gdrc_mr_put(ctx, mr);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_REGIONS, &regions),
			 GDRC_OK);
	assert_int_equal(regions, 0);
	gdrc_fini(ctx);
	munmap(q, PAGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_hooks_lost_overwritten_patch_never_serves_stale),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
