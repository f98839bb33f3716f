// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_uffd.c - GDRC_MEM_HOOKS=uffd (ctest sets it): host memory cached
 * with nothing patched, each cached range watched by userfaultfd.
 * Public API, none backend.
 *
 * Each way memory goes away must end the registration before the next
 * get: munmap (through glibc and as a raw system call, which the glibc
 * hooks never see), mmap(MAP_FIXED) over it, madvise(MADV_DONTNEED),
 * mremap moving it.  A range userfaultfd cannot watch (a file mapping)
 * is registered uncached, and so is a range with a hole in it (the hole
 * would stay unwatched once mapped).  A fork child, whose descriptor is its
 * parent's, caches no host memory and never waits on a reader.
 * Skipped (77) where userfaultfd is unavailable.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctx_stat.h"

#include "map_pages.h"

#include <gdrcache.h>

#define PAGE 4096UL

static struct gdrc_ctx *ctx;

/* The id of a get of [p, p + len), put again. */
static uint64_t got_id(void *p, size_t len)
{
	struct gdrc_mr *mr;
	struct gdrc_mr_info i;

	assert_int_equal(gdrc_mr_get(ctx, p, len, 0, 0, &mr), GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	return i.id;
}

/* Two pages, got twice: the second is a hit on the first's
 * registration.  @return the id. */
static uint64_t cached_pair(char *p)
{
	uint64_t hits = ctx_stat(ctx, GDRC_STAT_HITS), id = got_id(p, 2 * PAGE);

	assert_int_equal(got_id(p, 2 * PAGE), id);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_HITS), hits + 1);
	return id;
}

/* New pages at at exactly (the old ones unmapped first). */
static char *map_same(void *at, size_t len)
{
	char *p = map_at(at, len);

	assert_ptr_equal(p, at);
	return p;
}

static void test_uffd_status(void **state)
{
	const char *why = NULL;

	(void)state;
	assert_int_equal(gdrc_hooks_status(ctx, &why), GDRC_OK);
	assert_non_null(why);
	assert_non_null(strstr(why, "userfaultfd"));
}

/* The control: nothing happens to the memory, the registration stays. */
static void test_uffd_kept_while_mapped(void **state)
{
	char *p = map_at(NULL, 2 * PAGE);
	uint64_t id = cached_pair(p);

	(void)state;
	memset(p, 1, 2 * PAGE);
	assert_int_equal(got_id(p, 2 * PAGE), id);
	assert_int_equal(gdrc_invalidate(ctx, p, 2 * PAGE), GDRC_OK);
	munmap(p, 2 * PAGE);
}

/* Unmapped and mapped anew at the same address, by glibc's munmap or by
 * a raw system call. */
static void unmap_remap(int raw)
{
	char *p = map_at(NULL, 2 * PAGE);
	uint64_t id = cached_pair(p);
	uint64_t ev = ctx_stat(ctx, GDRC_STAT_UFFD_EVENTS),
		 inv = ctx_stat(ctx, GDRC_STAT_INV_HOST_HOOK);

	if (raw)
		assert_int_equal(syscall(SYS_munmap, p, 2 * PAGE), 0);
	else
		assert_int_equal(munmap(p, 2 * PAGE), 0);
	map_same(p, 2 * PAGE);
	assert_int_not_equal(got_id(p, 2 * PAGE), id);
	assert_true(ctx_stat(ctx, GDRC_STAT_UFFD_EVENTS) > ev);
	assert_true(ctx_stat(ctx, GDRC_STAT_INV_HOST_HOOK) > inv);
	/* The new registration is cached (its range watched anew). */
	id = got_id(p, 2 * PAGE);
	assert_int_equal(got_id(p, 2 * PAGE), id);
	munmap(p, 2 * PAGE);
}

static void test_uffd_munmap(void **state)
{
	(void)state;
	unmap_remap(0);
}

static void test_uffd_raw_syscall_munmap(void **state)
{
	(void)state;
	unmap_remap(1);
}

/* gdrc_invalidate, like a get, applies an unmap that returned before
 * it, although userfaultfd's reader posts the event after the unmapping
 * thread went on (found by the fuzzer: the region count lagged). */
static void test_uffd_invalidate_applies_an_unmap(void **state)
{
	char *other = map_at(NULL, PAGE);

	(void)state;
	for (int i = 0; i < 200; i++) {
		char *p = map_at(NULL, 2 * PAGE);

		cached_pair(p);
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 1);
		munmap(p, 2 * PAGE);
		assert_int_equal(gdrc_invalidate(ctx, other, PAGE), GDRC_OK);
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_REGIONS), 0);
	}
	munmap(other, PAGE);
}

static void test_uffd_map_fixed_over(void **state)
{
	char *p = map_at(NULL, 2 * PAGE);
	uint64_t id = cached_pair(p);

	(void)state;
	assert_true(mmap(p + PAGE, PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			 0) == p + PAGE);
	assert_int_not_equal(got_id(p, 2 * PAGE), id);
	munmap(p, 2 * PAGE);
}

static void test_uffd_madvise_dontneed(void **state)
{
	char *p = map_at(NULL, 2 * PAGE);
	uint64_t id;

	(void)state;
	memset(p, 1, 2 * PAGE);
	id = cached_pair(p);
	assert_int_equal(madvise(p + PAGE, PAGE, MADV_DONTNEED), 0);
	assert_int_not_equal(got_id(p, 2 * PAGE), id);
	/* A system call writing into the emptied page still works: the
	 * range is watched for events only, no fault comes to us. */
	{
		int fds[2];

		assert_int_equal(pipe(fds), 0);
		assert_int_equal(write(fds[1], "x", 1), 1);
		assert_int_equal(read(fds[0], p + PAGE, 1), 1);
		assert_int_equal(p[PAGE], 'x');
		close(fds[0]);
		close(fds[1]);
	}
	munmap(p, 2 * PAGE);
}

/* Moved away by mremap, and the old addresses mapped anew. */
static void test_uffd_mremap(void **state)
{
	char *p = map_at(NULL, 2 * PAGE), *q;
	uint64_t id = cached_pair(p);

	(void)state;
	q = mremap(p, 2 * PAGE, 4 * PAGE, MREMAP_MAYMOVE);
	assert_true(q != MAP_FAILED);
	if (q == p) { /* grown in place: move it for real */
		char *r = map_at(NULL, 4 * PAGE);

		q = mremap(p, 4 * PAGE, 4 * PAGE,
			   MREMAP_MAYMOVE | MREMAP_FIXED, r);
		assert_true(q == r);
	}
	map_same(p, 2 * PAGE);
	assert_int_not_equal(got_id(p, 2 * PAGE), id);
	munmap(p, 2 * PAGE);
	munmap(q, 4 * PAGE);
}

/* A mapping of a file on disk cannot be watched: every get registers. */
static void test_uffd_file_mapping_uncached(void **state)
{
	struct statfs fs;
	uint64_t uncached = ctx_stat(ctx, GDRC_STAT_MISS_UNCACHED);
	char *p;
	int fd;

	(void)state;
	fd = open(".", O_TMPFILE | O_RDWR, 0600);
	if (fd < 0 || fstatfs(fd, &fs) || fs.f_type == TMPFS_MAGIC ||
	    ftruncate(fd, 2 * PAGE)) {
		if (fd >= 0)
			close(fd);
		skip(); /* tmpfs is shmem, which userfaultfd can watch */
	}
	p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	assert_int_not_equal(got_id(p, 2 * PAGE), got_id(p, 2 * PAGE));
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISS_UNCACHED), uncached + 2);
	munmap(p, 2 * PAGE);
	close(fd);
}

/*
 * A range with a hole: userfaultfd would watch the mappings around it and
 * pass over the hole, so a page mapped there later would go unseen.  Such
 * a range is registered uncached; once the hole is mapped it is cached,
 * and the page that filled it, mapped over again, ends the registration.
 */
static void test_uffd_hole_uncached(void **state)
{
	uint64_t uncached = ctx_stat(ctx, GDRC_STAT_MISS_UNCACHED), id;
	char *p = map_at(NULL, 3 * PAGE);

	(void)state;
	assert_int_equal(munmap(p + PAGE, PAGE), 0);
	assert_int_not_equal(got_id(p, 3 * PAGE), got_id(p, 3 * PAGE));
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISS_UNCACHED), uncached + 2);
	map_same(p + PAGE, PAGE);
	id = got_id(p, 3 * PAGE);
	assert_int_equal(got_id(p, 3 * PAGE), id);
	assert_int_equal(munmap(p + PAGE, PAGE), 0);
	map_same(p + PAGE, PAGE);
	assert_int_not_equal(got_id(p, 3 * PAGE), id);
	munmap(p, 3 * PAGE);
}

/* A fork child: its own context caches no host memory (the descriptor
 * is the parent's), and its unmaps of ranges the parent watched do not
 * wait for a reader that is not there. */
static void test_uffd_fork_child(void **state)
{
	char *p = map_at(NULL, 2 * PAGE);
	int status;
	pid_t pid;

	(void)state;
	cached_pair(p);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct gdrc_ctx *c2;
		const char *why = NULL;
		char *q;
		int bad = 0;

		alarm(20);
		munmap(p, 2 * PAGE);
		if (gdrc_init(NULL, &c2))
			_exit(2);
		bad |= gdrc_hooks_status(c2, &why) != GDRC_ERR_UNSUPPORTED;
		bad |= !why || !strstr(why, "fork child");
		q = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		for (int i = 0; i < 2 && q != MAP_FAILED; i++) {
			struct gdrc_mr *mr;
			struct gdrc_mr_info info;

			bad |= gdrc_mr_get(c2, q, PAGE, 0, 0, &mr) != GDRC_OK;
			if (!bad) {
				gdrc_mr_query(mr, &info);
				bad |= !!(info.flags & GDRC_MR_INFO_CACHED);
				gdrc_mr_put(c2, mr);
			}
		}
		munmap(q, PAGE);
		gdrc_fini(c2);
		_exit(bad);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	munmap(p, 2 * PAGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uffd_status),
		cmocka_unit_test(test_uffd_kept_while_mapped),
		cmocka_unit_test(test_uffd_munmap),
		cmocka_unit_test(test_uffd_raw_syscall_munmap),
		cmocka_unit_test(test_uffd_invalidate_applies_an_unmap),
		cmocka_unit_test(test_uffd_map_fixed_over),
		cmocka_unit_test(test_uffd_madvise_dontneed),
		cmocka_unit_test(test_uffd_mremap),
		cmocka_unit_test(test_uffd_file_mapping_uncached),
		cmocka_unit_test(test_uffd_hole_uncached),
		cmocka_unit_test(test_uffd_fork_child),
	};
	const char *why = NULL;
	int rc;

	if (gdrc_init(NULL, &ctx))
		return 1;
	if (gdrc_hooks_status(ctx, &why) != GDRC_OK) {
		printf("skipped: GDRC_MEM_HOOKS=uffd unavailable (%s)\n",
		       why ? why : "?");
		gdrc_fini(ctx);
		return 77;
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	gdrc_fini(ctx);
	return rc;
}
