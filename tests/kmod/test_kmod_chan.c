// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_kmod_chan.c - the library's use of gdrcache.ko's invalidation
 * channel, run inside a VM lab guest with the module loaded and the glibc
 * hooks off (GDRC_MEM_HOOKS=none), so only the kernel can tell the cache
 * that memory went: a raw munmap or madvise system call, which no hook
 * sees, must still make the next get a new registration.  Exits 77 where
 * /dev/gdrcache is missing.  Run by run_kmod_tests.sh.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include <gdrcache.h>

#define PAGE 4096UL

static struct gdrc_ctx *ctx;

static uint64_t stat(enum gdrc_stat s)
{
	uint64_t v;

	assert_int_equal(gdrc_stat_get(ctx, s, &v), GDRC_OK);
	return v;
}

static struct gdrc_mr_info get_put(const void *p, size_t len)
{
	struct gdrc_mr_info i;
	struct gdrc_mr *mr;

	assert_int_equal(gdrc_mr_get(ctx, p, len, 0, 0, &mr), GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	return i;
}

/* mmap and munmap as raw system calls: invisible to any glibc hook. */
static char *raw_map(void *hint, size_t len)
{
	long p = syscall(SYS_mmap, hint, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS |
				 (hint ? MAP_FIXED_NOREPLACE : 0),
			 -1, 0);

	assert_true(p != -1);
	return (char *)p;
}

static int setup(void **state)
{
	(void)state;
	return gdrc_init(NULL, &ctx) != GDRC_OK;
}

static int teardown(void **state)
{
	(void)state;
	gdrc_fini(ctx);
	return 0;
}

static void test_kmod_chan_registration_is_watched(void **state)
{
	char *p = raw_map(NULL, PAGE);
	struct gdrc_mr_info i = get_put(p, 64);

	(void)state;
	assert_true(i.flags & GDRC_MR_INFO_CACHED);
	assert_true(i.flags & GDRC_MR_INFO_KMOD);
	/* Untouched: hits keep the same registration. */
	for (int n = 0; n < 100; n++)
		assert_int_equal(get_put(p + 8 * n, 8).id, i.id);
	syscall(SYS_munmap, p, PAGE);
}

static void test_kmod_chan_raw_munmap_gives_new_id(void **state)
{
	char *p = raw_map(NULL, 2 * PAGE), *q;
	uint64_t id1 = get_put(p, 64).id;

	(void)state;
	get_put(p, 64); /* remembered: the next get is a fast-path one */
	assert_int_equal(syscall(SYS_munmap, p, 2 * PAGE), 0);
	q = raw_map(p, 2 * PAGE);
	assert_ptr_equal(q, p);
	assert_true(get_put(q, 64).id > id1);
	assert_true(stat(GDRC_STAT_INV_KMOD) >= 1);
	assert_int_equal(stat(GDRC_STAT_INV_HOST_HOOK), 0);
	syscall(SYS_munmap, q, 2 * PAGE);
}

static void test_kmod_chan_raw_madvise_gives_new_id(void **state)
{
	char *p = raw_map(NULL, 2 * PAGE);
	uint64_t id1 = get_put(p, 2 * PAGE).id;

	(void)state;
	p[0] = 1;
	assert_int_equal(syscall(SYS_madvise, p + PAGE, PAGE, MADV_DONTNEED),
			 0);
	assert_true(get_put(p, 2 * PAGE).id > id1);
	syscall(SYS_munmap, p, 2 * PAGE);
}

static void test_kmod_chan_held_stays_valid_then_released(void **state)
{
	char *p = raw_map(NULL, PAGE), *q;
	struct gdrc_mr *old;
	struct gdrc_mr_info a, b;
	uint64_t deregs;

	(void)state;
	assert_int_equal(gdrc_mr_get(ctx, p, 64, 0, 0, &old), GDRC_OK);
	assert_int_equal(gdrc_mr_query(old, &a), GDRC_OK);
	assert_int_equal(syscall(SYS_munmap, p, PAGE), 0);
	q = raw_map(p, PAGE);
	b = get_put(q, 64);
	assert_true(b.id > a.id);
	assert_int_equal(gdrc_mr_query(old, &a), GDRC_OK);
	assert_true(a.flags & GDRC_MR_INFO_INVALIDATED);
	deregs = stat(GDRC_STAT_DEREGS);
	gdrc_mr_put(ctx, old);
	assert_int_equal(stat(GDRC_STAT_DEREGS), deregs + 1);
	syscall(SYS_munmap, q, PAGE);
}

/*
 * More registrations than the module has words per open file: those it
 * watches (GDRC_MR_INFO_KMOD) are renewed after a raw munmap; the others
 * are, with GDRC_MEM_HOOKS=none, the caller's to report, as documented.
 */
static void test_kmod_chan_more_than_its_slots_stay_correct(void **state)
{
	enum { N = 600 }; /* the module gives 512 words per open file */
	char *p = raw_map(NULL, N * PAGE), *q;
	uint64_t ids[N];
	int watched[N], nwatched = 0;

	(void)state;
	for (int i = 0; i < N; i++) {
		struct gdrc_mr_info info = get_put(p + i * PAGE, 64);

		ids[i] = info.id;
		watched[i] = !!(info.flags & GDRC_MR_INFO_KMOD);
		nwatched += watched[i];
	}
	assert_true(nwatched >= 500 && nwatched <= 512);
	assert_int_equal(syscall(SYS_munmap, p, N * PAGE), 0);
	q = raw_map(p, N * PAGE);
	for (int i = 0; i < N; i++)
		if (watched[i])
			assert_true(get_put(q + i * PAGE, 64).id > ids[i]);
	assert_int_equal(gdrc_invalidate(ctx, q, N * PAGE), GDRC_OK);
	syscall(SYS_munmap, q, N * PAGE);
}

/*
 * With the module loaded and GDRC_MEM_HOOKS=auto, the module is the host
 * event source: glibc is left unpatched (its munmap still starts with
 * glibc's own code, not a jump), gdrc_install_hooks too leaves it, and a
 * remap through glibc is still caught (by the kernel).
 */
static void test_kmod_chan_first_choice_leaves_glibc_alone(void **state)
{
	void *libc = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
	const unsigned char *fn;
	struct gdrc_ctx *c2;
	struct gdrc_mr_info i;
	struct gdrc_mr *mr;
	const char *why = NULL;
	uint64_t id1;
	char *p;

	(void)state;
	assert_non_null(libc);
	fn = dlvsym(libc, "munmap", "GLIBC_2.2.5");
	assert_non_null(fn);
	unsetenv("GDRC_MEM_HOOKS");
	assert_int_equal(gdrc_install_hooks(), GDRC_OK);
	assert_int_equal(gdrc_init(NULL, &c2), GDRC_OK);
	setenv("GDRC_MEM_HOOKS", "none", 1);
	assert_int_equal(gdrc_hooks_status(c2, &why), GDRC_OK);
	assert_non_null(why);
	assert_non_null(strstr(why, "gdrcache.ko"));
	assert_false(fn[0] == 0x49 && fn[1] == 0xbb); /* not our jump */

	p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(gdrc_mr_get(c2, p, 64, 0, 0, &mr), GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
	assert_true(i.flags & GDRC_MR_INFO_CACHED);
	id1 = i.id;
	gdrc_mr_put(c2, mr);
	assert_int_equal(munmap(p, PAGE), 0);
	assert_true(mmap(p, PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p);
	assert_int_equal(gdrc_mr_get(c2, p, 64, 0, 0, &mr), GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
	assert_true(i.id != id1);
	gdrc_mr_put(c2, mr);
	munmap(p, PAGE);
	/* As event sources: the module serves host memory and counted the
	 * registration it ended; glibc's patch says why it does not. */
	{
		uint64_t ended = 0;

		assert_int_equal(gdrc_source_status(c2, GDRC_SOURCE_KMOD, &why,
						    &ended),
				 GDRC_OK);
		assert_true(ended >= 1);
		assert_int_equal(gdrc_source_status(c2, GDRC_SOURCE_GLIBC,
						    &why, NULL),
				 GDRC_ERR_UNSUPPORTED);
		assert_non_null(strstr(why, "gdrcache.ko"));
	}
	gdrc_fini(c2);
	/* Asked for userfaultfd, the module still comes first. */
	setenv("GDRC_MEM_HOOKS", "uffd", 1);
	assert_int_equal(gdrc_init(NULL, &c2), GDRC_OK);
	setenv("GDRC_MEM_HOOKS", "none", 1);
	assert_int_equal(gdrc_source_status(c2, GDRC_SOURCE_KMOD, NULL, NULL),
			 GDRC_OK);
	assert_int_equal(gdrc_source_status(c2, GDRC_SOURCE_UFFD, &why, NULL),
			 GDRC_ERR_UNSUPPORTED);
	assert_non_null(strstr(why, "gdrcache.ko"));
	gdrc_fini(c2);
	dlclose(libc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kmod_chan_registration_is_watched),
		cmocka_unit_test(test_kmod_chan_raw_munmap_gives_new_id),
		cmocka_unit_test(test_kmod_chan_raw_madvise_gives_new_id),
		cmocka_unit_test(
			test_kmod_chan_held_stays_valid_then_released),
		cmocka_unit_test(
			test_kmod_chan_more_than_its_slots_stay_correct),
		cmocka_unit_test(
			test_kmod_chan_first_choice_leaves_glibc_alone),
	};

	if (access("/dev/gdrcache", F_OK)) {
		printf("skipped: no /dev/gdrcache\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
