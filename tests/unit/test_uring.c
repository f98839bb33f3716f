// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_uring.c - the io_uring backend on this machine's own kernel: host
 * memory as fixed buffers of a real ring, read into with READ_FIXED from
 * a file on /dev/shm opened O_DIRECT.
 *
 * What a context with a ring promises (docs/backends.md, "Storage"): the
 * lkey is a slot of its table holding exactly the registered range; a hit
 * makes no system call; the table's size bounds the registrations alive
 * (LRU eviction, GDRC_ERR_LIMIT when all are held); each refusal has its
 * status and leaves nothing behind (no slot set, no page pinned: the
 * ring's fdinfo lists every slot, /proc/self/status's VmPin counts the
 * pinned pages); gdrc_fini leaves the ring without a table.
 *
 * Skips (77, with the reason) where io_uring, sparse tables or O_DIRECT on
 * /dev/shm are refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <liburing.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <gdrcache.h>

#include "uring_test.h"

#define PAGE 4096ul
#define FILE_SIZE (4ul << 20)

static char file_path[64];
static int file_fd = -1; /* the test file, O_DIRECT where tmpfs takes it */
static struct io_uring ring;

/* READ_FIXED of len bytes of the test file at off into buf through slot
 * idx of r.  @return the completion's result. */
static int read_fixed(struct io_uring *r, void *buf, size_t len, off_t off,
		      int idx)
{
	return uring_read_fixed(r, file_fd, buf, len, off, idx);
}

/* Slots set on r's table (-1: none), per its fdinfo. */
static int slots_set(const struct io_uring *r)
{
	int n = uring_slots_set(r->ring_fd);

	assert_true(n >= -1);
	return n;
}

/* Pinned memory of this process in KiB (VmPin). */
static long vm_pin_kib(void)
{
	char line[128];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmPin:", 6))
			v = atol(line + 6);
	fclose(f);
	return v;
}

static gdrc_status_t ctx_on(struct io_uring *r, uint32_t slots,
			    struct gdrc_ctx **ctx_p)
{
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_IO_URING |
			      GDRC_CONFIG_FIELD_IO_URING_SLOTS,
		.ring = r,
		.ring_slots = slots,
	};

	return gdrc_init(&cfg, ctx_p);
}

static struct gdrc_ctx *ctx_new(uint32_t slots)
{
	struct gdrc_ctx *ctx = NULL;

	assert_int_equal(ctx_on(&ring, slots, &ctx), GDRC_OK);
	return ctx;
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	memset(p, 0xa5, len);
	return p;
}

static uint64_t stat_of(struct gdrc_ctx *ctx, enum gdrc_stat s)
{
	uint64_t v = 0;

	assert_int_equal(gdrc_stat_get(ctx, s, &v), GDRC_OK);
	return v;
}

static int setup(void **state)
{
	(void)state;
	return io_uring_queue_init(8, &ring, 0);
}

static int teardown(void **state)
{
	(void)state;
	io_uring_queue_exit(&ring);
	return 0;
}

/* ====================================================================
 * Registrations
 * ==================================================================== */

static void test_uring_get_reads_through_its_slot(void **state)
{
	struct gdrc_ctx *ctx = ctx_new(16);
	size_t len = 64 << 10;
	char *buf = map(len);
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;
	const char *why = NULL;

	(void)state;
	assert_int_equal(gdrc_backend_status(ctx, GDRC_BACKEND_IO_URING, &why),
			 GDRC_OK);
	assert_null(why);
	assert_int_equal(gdrc_backend_status(ctx, GDRC_BACKEND_VERBS, &why),
			 GDRC_ERR_UNSUPPORTED);
	assert_non_null(strstr(why, "io_uring"));
	assert_int_equal(slots_set(&ring), 0);
	assert_int_equal(gdrc_mr_get(ctx, buf + 100, 5000,
				     GDRC_ACCESS_LOCAL_WRITE, 0, &mr),
			 GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, &info), GDRC_OK);
	assert_int_equal(info.backend, GDRC_BACKEND_IO_URING);
	assert_int_equal(info.addr, (uintptr_t)buf);
	assert_int_equal(info.length, 2 * PAGE);
	assert_int_equal(info.rkey, 0);
	assert_true(info.lkey < 16);
	assert_int_equal(slots_set(&ring), 1);
	assert_int_equal(read_fixed(&ring, buf, 2 * PAGE, 8192,
				    (int)gdrc_mr_lkey(mr)),
			 (int)(2 * PAGE));
	assert_true(uring_holds_file(buf, 2 * PAGE, 8192));
	/* Past the registered range: the kernel refuses it. */
	assert_true(read_fixed(&ring, buf, 3 * PAGE, 0,
			       (int)gdrc_mr_lkey(mr)) < 0);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(slots_set(&ring), 1); /* cached */
	gdrc_fini(ctx);
	assert_int_equal(slots_set(&ring), -1); /* no table left */
	munmap(buf, len);
}

/* A child says which check failed by its exit status (its line). */
#define CHILD_CHECK(cond)                                  \
	do {                                               \
		if (!(cond))                               \
			_exit(__LINE__ % 250 + 1);         \
	} while (0)

static void child_wait(pid_t pid)
{
	int st;

	assert_true(pid >= 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
		skip();
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fail_msg("child failed near line %d (status %#x)",
			 WIFEXITED(st) ? WEXITSTATUS(st) - 1 : -1, st);
}

/* A cached registration is served with no system call: in a child whose
 * io_uring_register seccomp refuses (EPERM), a hit still works and a
 * miss fails with GDRC_ERR_IO, leaving nothing set. */
static void hit_child(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_register, 0,
			 1),
		BPF_STMT(BPF_RET | BPF_K,
			 SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	struct io_uring r;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	char *buf;

	CHILD_CHECK(!io_uring_queue_init(4, &r, 0));
	CHILD_CHECK(ctx_on(&r, 4, &ctx) == GDRC_OK);
	buf = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHILD_CHECK(buf != MAP_FAILED);
	CHILD_CHECK(gdrc_mr_get(ctx, buf, PAGE, GDRC_ACCESS_LOCAL_WRITE, 0,
				&mr) == GDRC_OK);
	gdrc_mr_put(ctx, mr);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		_exit(77);
	for (int i = 0; i < 3; i++) {
		CHILD_CHECK(gdrc_mr_get(ctx, buf, PAGE,
					GDRC_ACCESS_LOCAL_WRITE, 0, &mr) ==
			    GDRC_OK);
		CHILD_CHECK(read_fixed(&r, buf, PAGE, PAGE,
				       (int)gdrc_mr_lkey(mr)) == (int)PAGE);
		CHILD_CHECK(uring_holds_file(buf, PAGE, PAGE));
		gdrc_mr_put(ctx, mr);
	}
	CHILD_CHECK(stat_of(ctx, GDRC_STAT_HITS) == 3);
	mr = NULL;
	CHILD_CHECK(gdrc_mr_get(ctx, buf + PAGE, PAGE, 0, 0, &mr) ==
		    GDRC_ERR_IO);
	CHILD_CHECK(!mr && slots_set(&r) == 1);
	_exit(0);
}

static void test_uring_hit_makes_no_syscall(void **state)
{
	pid_t pid;

	(void)state;
	fflush(NULL);
	pid = fork();
	if (!pid)
		hit_child();
	child_wait(pid);
}

static void test_uring_uncached_slot_cleared_at_put(void **state)
{
	struct gdrc_ctx *ctx = ctx_new(4);
	char *buf = map(4 * PAGE);
	struct gdrc_mr *mr;

	(void)state;
	assert_int_equal(gdrc_mr_get(ctx, buf, 4 * PAGE,
				     GDRC_ACCESS_LOCAL_WRITE,
				     GDRC_GET_UNCACHED, &mr),
			 GDRC_OK);
	assert_int_equal(slots_set(&ring), 1);
	assert_int_equal(read_fixed(&ring, buf, 4 * PAGE, 0,
				    (int)gdrc_mr_lkey(mr)),
			 (int)(4 * PAGE));
	assert_true(uring_holds_file(buf, 4 * PAGE, 0));
	gdrc_mr_put(ctx, mr);
	assert_int_equal(slots_set(&ring), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISS_UNCACHED), 1);
	gdrc_fini(ctx);
	munmap(buf, 4 * PAGE);
}

/* Two overlapping gets: the second registration is widened over the
 * first and is one slot; the first goes once put. */
static void test_uring_widened_registration_one_slot(void **state)
{
	struct gdrc_ctx *ctx = ctx_new(8);
	char *buf = map(4 * PAGE);
	struct gdrc_mr *a, *b;
	struct gdrc_mr_info info;

	(void)state;
	assert_int_equal(gdrc_mr_get(ctx, buf, 2 * PAGE, 0, 0, &a), GDRC_OK);
	gdrc_mr_put(ctx, a);
	assert_int_equal(gdrc_mr_get(ctx, buf + PAGE, 2 * PAGE, 0, 0, &b),
			 GDRC_OK);
	assert_int_equal(gdrc_mr_query(b, &info), GDRC_OK);
	assert_int_equal(info.addr, (uintptr_t)buf);
	assert_int_equal(info.length, 3 * PAGE);
	assert_int_equal(slots_set(&ring), 1);
	assert_int_equal(read_fixed(&ring, buf, 3 * PAGE, PAGE,
				    (int)gdrc_mr_lkey(b)),
			 (int)(3 * PAGE));
	assert_true(uring_holds_file(buf, 3 * PAGE, PAGE));
	gdrc_mr_put(ctx, b);
	gdrc_fini(ctx);
	munmap(buf, 4 * PAGE);
}

/* ====================================================================
 * The table's size
 * ==================================================================== */

static void test_uring_full_table_evicts_lru(void **state)
{
	struct gdrc_ctx *ctx = ctx_new(4);
	char *buf = map(8 * PAGE);
	struct gdrc_mr *mr;
	uint64_t alive = 0, max = 0;

	(void)state;
	for (int i = 0; i < 8; i++) {
		assert_int_equal(gdrc_mr_get(ctx, buf + i * PAGE, PAGE,
					     GDRC_ACCESS_LOCAL_WRITE, 0, &mr),
				 GDRC_OK);
		assert_int_equal(read_fixed(&ring, buf + i * PAGE, PAGE,
					    i * PAGE, (int)gdrc_mr_lkey(mr)),
				 (int)PAGE);
		assert_true(uring_holds_file(buf + i * PAGE, PAGE, i * PAGE));
		gdrc_mr_put(ctx, mr);
		assert_true(slots_set(&ring) <= 4);
	}
	assert_int_equal(slots_set(&ring), 4);
	assert_int_equal(stat_of(ctx, GDRC_STAT_EVICTIONS), 4);
	assert_int_equal(gdrc_device_stat_get(ctx, GDRC_DEVICE_HOST,
					      GDRC_DEVICE_STAT_REGIONS,
					      &alive),
			 GDRC_OK);
	assert_int_equal(alive, 4);
	assert_int_equal(gdrc_device_stat_get(ctx, GDRC_DEVICE_HOST,
					      GDRC_DEVICE_STAT_MAX_REGIONS,
					      &max),
			 GDRC_OK);
	assert_int_equal(max, 4);
	/* The last four are cached, the first four were evicted. */
	assert_int_equal(gdrc_mr_get(ctx, buf + 7 * PAGE, PAGE, 0, 0, &mr),
			 GDRC_OK);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), 1);
	assert_int_equal(gdrc_mr_get(ctx, buf, PAGE, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISS_EVICTED), 1);
	gdrc_fini(ctx);
	munmap(buf, 8 * PAGE);
}

/* Every slot held: the next miss is GDRC_ERR_LIMIT and changes nothing;
 * one put makes room. */
static void test_uring_all_slots_held_limit(void **state)
{
	struct gdrc_ctx *ctx = ctx_new(4);
	char *buf = map(8 * PAGE);
	struct gdrc_mr *held[4], *mr = NULL;

	(void)state;
	for (int i = 0; i < 4; i++)
		assert_int_equal(gdrc_mr_get(ctx, buf + i * PAGE, PAGE, 0, 0,
					     &held[i]),
				 GDRC_OK);
	assert_int_equal(gdrc_mr_get(ctx, buf + 5 * PAGE, PAGE, 0, 0, &mr),
			 GDRC_ERR_LIMIT);
	assert_null(mr);
	assert_int_equal(gdrc_mr_get(ctx, buf + 5 * PAGE, PAGE, 0,
				     GDRC_GET_UNCACHED, &mr),
			 GDRC_ERR_LIMIT);
	assert_int_equal(slots_set(&ring), 4);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 4);
	/* Still served: the held ones are hits. */
	assert_int_equal(gdrc_mr_get(ctx, buf, PAGE, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	gdrc_mr_put(ctx, held[2]);
	assert_int_equal(gdrc_mr_get(ctx, buf + 5 * PAGE, PAGE, 0, 0, &mr),
			 GDRC_OK);
	assert_int_equal(read_fixed(&ring, buf + 5 * PAGE, PAGE, 0,
				    (int)gdrc_mr_lkey(mr)),
			 (int)PAGE);
	assert_int_equal(slots_set(&ring), 4);
	gdrc_mr_put(ctx, mr);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			gdrc_mr_put(ctx, held[i]);
	gdrc_fini(ctx);
	assert_int_equal(slots_set(&ring), -1);
	munmap(buf, 8 * PAGE);
}

/* ====================================================================
 * Refusals
 * ==================================================================== */

static void test_uring_over_1gib_unsupported(void **state)
{
	struct gdrc_ctx *ctx = ctx_new(4);
	size_t len = (1ul << 30) + PAGE;
	char *va = mmap(NULL, len, PROT_NONE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct gdrc_mr *mr = NULL;

	(void)state;
	assert_true(va != MAP_FAILED);
	assert_int_equal(gdrc_mr_get(ctx, va, len, 0, 0, &mr),
			 GDRC_ERR_UNSUPPORTED);
	assert_null(mr);
	/* Not a page short of it either: rounding counts. */
	assert_int_equal(gdrc_mr_get(ctx, va + 1, 1ul << 30, 0, 0, &mr),
			 GDRC_ERR_UNSUPPORTED);
	assert_int_equal(slots_set(&ring), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REG_FAILURES), 2);
	gdrc_fini(ctx);
	munmap(va, len);
}

/* Two registrations whose union passes 1 GiB: the second is not widened
 * over the first, never split: it gets a slot of its own. */
static void test_uring_widening_past_1gib_stays_narrow(void **state)
{
	struct gdrc_ctx *ctx = ctx_new(4);
	size_t half = 600ul << 20;
	char *buf = mmap(NULL, 2 * half, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct gdrc_mr *a, *b;
	struct gdrc_mr_info info;

	(void)state;
	assert_true(buf != MAP_FAILED);
	assert_int_equal(gdrc_mr_get(ctx, buf, half, 0, 0, &a), GDRC_OK);
	assert_int_equal(gdrc_mr_get(ctx, buf + half - PAGE, half, 0, 0, &b),
			 GDRC_OK);
	assert_int_equal(gdrc_mr_query(b, &info), GDRC_OK);
	assert_int_equal(info.addr, (uintptr_t)(buf + half - PAGE));
	assert_int_equal(info.length, half);
	assert_int_not_equal(gdrc_mr_lkey(a), gdrc_mr_lkey(b));
	assert_int_equal(slots_set(&ring), 2);
	gdrc_mr_put(ctx, a);
	gdrc_mr_put(ctx, b);
	gdrc_fini(ctx);
	munmap(buf, 2 * half);
}

static void test_uring_unmapped_range_io_error(void **state)
{
	struct gdrc_ctx *ctx = ctx_new(4);
	char *buf = map(4 * PAGE);
	struct gdrc_mr *mr = NULL;
	long pinned = vm_pin_kib();

	(void)state;
	assert_int_equal(munmap(buf + PAGE, PAGE), 0);
	assert_int_equal(gdrc_mr_get(ctx, buf, 3 * PAGE, 0, 0, &mr),
			 GDRC_ERR_IO);
	assert_null(mr);
	assert_int_equal(slots_set(&ring), 0);
	assert_int_equal(vm_pin_kib(), pinned);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	/* Every slot is still free. */
	for (int i = 0; i < 4; i++) {
		struct gdrc_mr *h;

		assert_int_equal(gdrc_mr_get(ctx, buf + (i == 1 ? 3 : i) * PAGE,
					     PAGE, 0, GDRC_GET_UNCACHED, &h),
				 GDRC_OK);
	}
	gdrc_fini(ctx); /* releases the four held, with a warning */
	assert_int_equal(vm_pin_kib(), pinned);
	munmap(buf, 4 * PAGE);
}

/*
 * RLIMIT_MEMLOCK, which the kernel charges fixed buffers to without
 * CAP_IPC_LOCK: run as nobody in a child, with 256 KiB.  A buffer over it
 * is GDRC_ERR_NO_MEMORY after the one retry and pins nothing; one that
 * fits once the unused ones are released is registered after that retry.
 */
static void memlock_child(void)
{
	struct rlimit rl = { 256 << 10, 256 << 10 };
	struct io_uring r;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr = NULL, *m[3];
	char *buf;

	CHILD_CHECK(!setrlimit(RLIMIT_MEMLOCK, &rl));
	CHILD_CHECK(!setresgid(65534, 65534, 65534));
	CHILD_CHECK(!setresuid(65534, 65534, 65534));
	CHILD_CHECK(!io_uring_queue_init(4, &r, 0));
	CHILD_CHECK(ctx_on(&r, 16, &ctx) == GDRC_OK);
	buf = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	CHILD_CHECK(buf != MAP_FAILED);
	CHILD_CHECK(gdrc_mr_get(ctx, buf, 512 << 10, 0, 0, &mr) ==
		    GDRC_ERR_NO_MEMORY);
	CHILD_CHECK(!mr && vm_pin_kib() == 0 && slots_set(&r) == 0);
	CHILD_CHECK(stat_of(ctx, GDRC_STAT_OOM_RETRIES) == 1);
	/* Three of 64 KiB cached and unused, then 200 KiB: over the limit
	 * until they are released. */
	for (int i = 0; i < 3; i++) {
		CHILD_CHECK(gdrc_mr_get(ctx, buf + i * (64 << 10), 64 << 10,
					0, 0, &m[i]) == GDRC_OK);
		gdrc_mr_put(ctx, m[i]);
	}
	CHILD_CHECK(vm_pin_kib() == 192);
	CHILD_CHECK(gdrc_mr_get(ctx, buf + (512 << 10), 200 << 10, 0, 0,
				&mr) == GDRC_OK);
	CHILD_CHECK(stat_of(ctx, GDRC_STAT_OOM_RETRIES) == 2);
	CHILD_CHECK(stat_of(ctx, GDRC_STAT_EVICTIONS) == 3);
	CHILD_CHECK(vm_pin_kib() == 200 && slots_set(&r) == 1);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	CHILD_CHECK(vm_pin_kib() == 0);
	io_uring_queue_exit(&r);
	_exit(0);
}

static void test_uring_memlock_exceeded_no_memory(void **state)
{
	pid_t pid;

	(void)state;
	if (geteuid()) {
		print_message("skip: needs root to become nobody\n");
		skip();
	}
	fflush(NULL);
	pid = fork();
	if (!pid)
		memlock_child();
	child_wait(pid);
}

static void test_uring_ring_torn_down_no_device(void **state)
{
	struct gdrc_ctx *ctx = ctx_new(4);
	char *buf = map(4 * PAGE);
	struct gdrc_mr *mr = NULL;
	long pinned = vm_pin_kib();

	(void)state;
	assert_int_equal(gdrc_mr_get(ctx, buf, PAGE, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	io_uring_queue_exit(&ring);
	mr = NULL;
	assert_int_equal(gdrc_mr_get(ctx, buf + PAGE, PAGE, 0, 0, &mr),
			 GDRC_ERR_NO_DEVICE);
	assert_null(mr);
	/* Set up again in the same struct (likely the same fd number): still
	 * not the context's ring, and left untouched. */
	assert_int_equal(io_uring_queue_init(8, &ring, 0), 0);
	assert_int_equal(gdrc_mr_get(ctx, buf + PAGE, PAGE, 0, 0, &mr),
			 GDRC_ERR_NO_DEVICE);
	assert_int_equal(slots_set(&ring), -1);
	gdrc_fini(ctx);
	/* The old ring, and the page it pinned, went with the context. */
	assert_true(vm_pin_kib() < pinned || pinned == 0);
	assert_int_equal(vm_pin_kib(), 0);
	munmap(buf, 4 * PAGE);
}

/* A fork child may not use its parent's slots: its calls are refused,
 * its puts and fini release nothing, and the parent's reads still land
 * in the parent's memory. */
static void test_uring_fork_child_refused_parent_intact(void **state)
{
	struct gdrc_ctx *ctx = ctx_new(4);
	char *buf = map(4 * PAGE);
	struct gdrc_mr *mr, *other = NULL;
	int st;
	pid_t pid;

	(void)state;
	assert_int_equal(gdrc_mr_get(ctx, buf, 4 * PAGE,
				     GDRC_ACCESS_LOCAL_WRITE, 0, &mr),
			 GDRC_OK);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		CHILD_CHECK(gdrc_mr_get(ctx, buf, PAGE, 0, 0, &other) ==
			    GDRC_ERR_FORK);
		memset(buf, 0, 4 * PAGE); /* the child's copy */
		gdrc_mr_put(ctx, mr);
		gdrc_fini(ctx);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(slots_set(&ring), 1);
	memset(buf, 0, 4 * PAGE);
	assert_int_equal(read_fixed(&ring, buf, 4 * PAGE, 4 * PAGE,
				    (int)gdrc_mr_lkey(mr)),
			 (int)(4 * PAGE));
	assert_true(uring_holds_file(buf, 4 * PAGE, 4 * PAGE));
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	assert_int_equal(slots_set(&ring), -1);
	munmap(buf, 4 * PAGE);
}

/* Each bad ring or configuration: its status, and nothing left on the
 * ring. */
static void test_uring_init_refusals(void **state)
{
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_IO_URING,
	};
	struct io_uring zero, si;
	struct gdrc_ctx *ctx = NULL;

	(void)state;
	/* No ring. */
	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_ERR_INVALID_PARAM);
	/* A ring and a PD. */
	cfg.ring = &ring;
	cfg.field_mask |= GDRC_CONFIG_FIELD_PD;
	cfg.pd = (struct ibv_pd *)&zero; /* never used */
	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_ERR_INVALID_PARAM);
	/* Slots out of bounds. */
	cfg.field_mask = GDRC_CONFIG_FIELD_IO_URING |
			 GDRC_CONFIG_FIELD_IO_URING_SLOTS;
	cfg.pd = NULL;
	cfg.ring_slots = 0;
	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_ERR_INVALID_PARAM);
	cfg.ring_slots = GDRC_IO_URING_SLOTS_MAX + 1;
	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_ERR_INVALID_PARAM);
	/* Not set up: a zeroed struct's fd 0 is no io_uring. */
	memset(&zero, 0, sizeof(zero));
	assert_int_equal(ctx_on(&zero, 4, &ctx), GDRC_ERR_INVALID_PARAM);
	zero.ring_fd = -1;
	assert_int_equal(ctx_on(&zero, 4, &ctx), GDRC_ERR_INVALID_PARAM);
	assert_null(ctx);
	assert_int_equal(slots_set(&ring), -1);
	/* A ring with a table of the program's own: busy, and its table
	 * untouched. */
	assert_int_equal(io_uring_register_buffers_sparse(&ring, 2), 0);
	assert_int_equal(ctx_on(&ring, 4, &ctx), GDRC_ERR_BUSY);
	assert_int_equal(slots_set(&ring), 0);
	assert_int_equal(io_uring_unregister_buffers(&ring), 0);
	/* Single issuer. */
	if (!io_uring_queue_init(4, &si, IORING_SETUP_SINGLE_ISSUER)) {
		assert_int_equal(ctx_on(&si, 4, &ctx), GDRC_ERR_UNSUPPORTED);
		assert_int_equal(slots_set(&si), -1);
		io_uring_queue_exit(&si);
	}
	/* GDRC_BACKEND other than auto. */
	setenv("GDRC_BACKEND", "none", 1);
	assert_int_equal(ctx_on(&ring, 4, &ctx), GDRC_ERR_UNSUPPORTED);
	unsetenv("GDRC_BACKEND");
	assert_null(ctx);
	assert_int_equal(slots_set(&ring), -1);
	/* And a good one still works after them all. */
	assert_int_equal(ctx_on(&ring, 4, &ctx), GDRC_OK);
	assert_int_equal(slots_set(&ring), 0);
	gdrc_fini(ctx);
}

/* GDRC_IO_URING_SLOTS sizes the table when the config does not. */
static void test_uring_slots_knob_sizes_table(void **state)
{
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_IO_URING,
		.ring = &ring,
	};
	struct gdrc_ctx *ctx;
	uint64_t max = 0;

	(void)state;
	setenv("GDRC_IO_URING_SLOTS", "3", 1);
	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_OK);
	unsetenv("GDRC_IO_URING_SLOTS");
	assert_int_equal(gdrc_device_stat_get(ctx, GDRC_DEVICE_HOST,
					      GDRC_DEVICE_STAT_MAX_REGIONS,
					      &max),
			 GDRC_OK);
	assert_int_equal(max, 3);
	gdrc_fini(ctx);
	setenv("GDRC_IO_URING_SLOTS", "16385", 1);
	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_ERR_INVALID_PARAM);
	unsetenv("GDRC_IO_URING_SLOTS");
	assert_int_equal(slots_set(&ring), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_uring_get_reads_through_its_slot),
		T(test_uring_hit_makes_no_syscall),
		T(test_uring_uncached_slot_cleared_at_put),
		T(test_uring_widened_registration_one_slot),
		T(test_uring_full_table_evicts_lru),
		T(test_uring_all_slots_held_limit),
		T(test_uring_over_1gib_unsupported),
		T(test_uring_widening_past_1gib_stays_narrow),
		T(test_uring_unmapped_range_io_error),
		T(test_uring_memlock_exceeded_no_memory),
		T(test_uring_ring_torn_down_no_device),
		T(test_uring_fork_child_refused_parent_intact),
		T(test_uring_init_refusals),
		T(test_uring_slots_knob_sizes_table),
#undef T
	};
	int ret;

	setenv("GDRC_MISUSE", "abort", 1);
	ret = uring_usable();
	if (ret)
		return ret;
	file_fd = uring_test_file("test-uring", FILE_SIZE, file_path,
				  sizeof(file_path));
	if (file_fd < 0) {
		printf("skip: no test file on /dev/shm: %s\n",
		       strerror(errno));
		unlink(file_path);
		return 77;
	}
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	close(file_fd);
	unlink(file_path);
	return ret;
}
