// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_kmod_sub.c - user-space test of gdrcache.ko's host-memory half:
 * VERSION handshake, the read-only generation page, SUBSCRIBE/UNSUBSCRIBE,
 * invalidation through munmap, madvise(MADV_DONTNEED), mremap and fork
 * (copy-on-write), poll()/read() of events, input validation, ownership
 * (EACCES in a forked child) and the per-file limit (ENOSPC).
 *
 * Runs inside the VM lab guest with the module loaded:
 *   bash tests/kmod/run_kmod_tests.sh
 * Exits 0 when every check passed, 1 otherwise, 77 when /dev/gdrcache is
 * missing.  Ends with "kmod: N passed, M failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kmod_test.h"

static long pagesz;
static int fd;
static const volatile uint64_t *gen;

static uint64_t gen_word(uint32_t slot)
{
	return __atomic_load_n(&gen[slot], __ATOMIC_ACQUIRE);
}

/* SUBSCRIBE [start, start + len); on success the handle and slot. */
static int sub_at(int f, void *start, uint64_t len, uint64_t *handle,
		  uint32_t *slot)
{
	struct gdrc_subscribe_args a;
	int r = subscribe(f, (uintptr_t)start, len, &a);

	if (r == 0) {
		*handle = a.handle;
		*slot = a.slot;
	}
	return r;
}

/* Reads and discards pending events; returns their count. */
static uint64_t drain(void)
{
	uint64_t n = 0, total = 0;
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	while (read(fd, &n, sizeof(n)) == sizeof(n))
		total += n;
	fcntl(fd, F_SETFL, fl);
	return total;
}

static void *anon(size_t pages)
{
	char *p = mmap(NULL, pages * pagesz, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0x5a, pages * pagesz);
	return p;
}

static void test_version(void)
{
	struct gdrc_version_args v;

	memset(&v, 0, sizeof(v));
	v.user_version = GDRC_KMOD_ABI_VERSION;
	v.min_kernel_version = GDRC_KMOD_VERSION_MAKE(1, 0);
	CHECK(ioctl(fd, GDRC_IOCTL_VERSION, &v) == 0);
	CHECK(v.kernel_version == GDRC_KMOD_ABI_VERSION);
	CHECK(v.min_user_version <= GDRC_KMOD_ABI_VERSION);
	CHECK(v.min_user_version != 0);

	/* The module is too old for us: EPROTO, out fields still written. */
	memset(&v, 0, sizeof(v));
	v.user_version = GDRC_KMOD_ABI_VERSION;
	v.min_kernel_version = GDRC_KMOD_VERSION_MAKE(99, 0);
	CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_VERSION, &v), EPROTO);
	CHECK(v.kernel_version == GDRC_KMOD_ABI_VERSION);

	/* We are too old for the module. */
	memset(&v, 0, sizeof(v));
	v.user_version = 0;
	CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_VERSION, &v), EPROTO);
	CHECK(v.min_user_version != 0);

	memset(&v, 0, sizeof(v));
	v.user_version = GDRC_KMOD_ABI_VERSION;
	v.flags = 1;
	CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_VERSION, &v), EINVAL);
	v.flags = 0;
	v.reserved = 1;
	CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_VERSION, &v), EINVAL);
}

static void test_gen_page(void)
{
	void *p;

	p = mmap(NULL, pagesz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p == MAP_FAILED && errno == EPERM);
	p = mmap(NULL, pagesz, PROT_READ, MAP_SHARED, fd, pagesz);
	CHECK(p == MAP_FAILED && errno == EINVAL);
	p = mmap(NULL, 2 * pagesz, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(p == MAP_FAILED && errno == EINVAL);

	p = mmap(NULL, pagesz, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED);
	if (p == MAP_FAILED) {
		fprintf(stderr, "cannot map the generation page: stop\n");
		exit(1);
	}
	gen = p;
	/* VM_MAYWRITE is cleared: no upgrade to writable later. */
	CHECK_ERRNO(mprotect(p, pagesz, PROT_READ | PROT_WRITE), EACCES);
	CHECK(gen_word(0) == 0 && gen_word(GDRC_MAX_SLOTS - 1) == 0);
}

static void test_munmap_madvise(void)
{
	char *buf = anon(16);
	uint64_t h, n = 0, g;
	uint32_t slot;
	int fl;

	CHECK(buf != NULL);
	drain();
	CHECK(sub_at(fd, buf, 16 * pagesz, &h, &slot) == 0);
	CHECK(h != 0 && slot < GDRC_MAX_SLOTS);
	CHECK(gen_word(slot) == 0);
	CHECK(!readable(fd));

	/* munmap of part of the range. */
	CHECK(munmap(buf + 4 * pagesz, 2 * pagesz) == 0);
	g = gen_word(slot);
	CHECK(g >= 1);
	CHECK(readable(fd));
	CHECK(read(fd, &n, sizeof(n)) == sizeof(n));
	CHECK(n >= 1);
	CHECK(!readable(fd));
	fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	CHECK_ERRNO(read(fd, &n, sizeof(n)), EAGAIN);
	fcntl(fd, F_SETFL, fl);
	CHECK_ERRNO(read(fd, &n, 4), EINVAL);

	/* madvise(MADV_DONTNEED). */
	CHECK(madvise(buf, 2 * pagesz, MADV_DONTNEED) == 0);
	CHECK(gen_word(slot) > g);
	CHECK(readable(fd));
	g = gen_word(slot);

	/* A range outside the subscription does not bump it. */
	{
		char *other = anon(2);

		drain();
		CHECK(munmap(other, 2 * pagesz) == 0);
		CHECK(gen_word(slot) == g);
		CHECK(!readable(fd));
	}

	CHECK(unsubscribe(fd, h) == 0);
	CHECK_ERRNO(unsubscribe(fd, h), EINVAL);
	munmap(buf, 16 * pagesz);
}

static void test_mremap_fork(void)
{
	char *a = anon(4), *b = anon(4), *dst;
	uint64_t ha, hb;
	uint32_t sa, sb;
	pid_t pid;
	int st;

	CHECK(a && b);
	CHECK(sub_at(fd, a, 4 * pagesz, &ha, &sa) == 0);
	CHECK(sub_at(fd, b, 4 * pagesz, &hb, &sb) == 0);
	CHECK(sa != sb);
	drain();

	/* mremap moves the pages away from the watched range. */
	dst = mmap(NULL, 4 * pagesz, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0);
	CHECK(dst != MAP_FAILED);
	CHECK(mremap(a, 4 * pagesz, 4 * pagesz, MREMAP_MAYMOVE | MREMAP_FIXED,
		     dst) == dst);
	CHECK(gen_word(sa) >= 1);
	CHECK(readable(fd));
	drain();

	/* fork write-protects the parent's private pages (COW). */
	CHECK(gen_word(sb) == 0);
	pid = fork();
	if (pid == 0) {
		struct gdrc_subscribe_args s;
		int bad = 0;

		/* Another mm: SUBSCRIBE, UNSUBSCRIBE and mmap are refused. */
		memset(&s, 0, sizeof(s));
		s.start = (uintptr_t)b;
		s.length = pagesz;
		errno = 0;
		if (ioctl(fd, GDRC_IOCTL_SUBSCRIBE, &s) != -1 ||
		    errno != EACCES)
			bad |= 1;
		errno = 0;
		if (unsubscribe(fd, hb) != -1 || errno != EACCES)
			bad |= 2;
		if (mmap(NULL, pagesz, PROT_READ, MAP_SHARED, fd, 0) !=
		    MAP_FAILED || errno != EACCES)
			bad |= 4;
		_exit(bad);
	}
	CHECK(pid > 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fprintf(stderr, "child status %#x\n", st);
	CHECK(gen_word(sb) >= 1);
	CHECK(readable(fd));

	/* The parent's subscription survived the child's attempts. */
	CHECK(unsubscribe(fd, ha) == 0);
	CHECK(unsubscribe(fd, hb) == 0);
	munmap(dst, 4 * pagesz);
	munmap(b, 4 * pagesz);
}

static void test_unsubscribed(void)
{
	char *buf = anon(2);
	uint64_t h, g;
	uint32_t slot;

	CHECK(sub_at(fd, buf, 2 * pagesz, &h, &slot) == 0);
	CHECK(unsubscribe(fd, h) == 0);
	drain();
	g = gen_word(slot);
	CHECK(munmap(buf, 2 * pagesz) == 0);
	CHECK(gen_word(slot) == g);
	CHECK(!readable(fd));
}

static void test_bad_inputs(void)
{
	char *buf = anon(2);
	struct gdrc_subscribe_args s;
	struct gdrc_unsubscribe_args u;

#define SUB_ERR(field_setup, e)						\
	do {								\
		memset(&s, 0, sizeof(s));				\
		s.start = (uintptr_t)buf;				\
		s.length = pagesz;					\
		field_setup;						\
		CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_SUBSCRIBE, &s), e);	\
	} while (0)

	SUB_ERR(s.start += 1, EINVAL);			/* unaligned start */
	SUB_ERR(s.length = 0, EINVAL);			/* empty */
	SUB_ERR(s.length = 100, EINVAL);		/* unaligned length */
	SUB_ERR((s.start = UINT64_MAX - pagesz + 1,
		 s.length = 2 * pagesz), EINVAL);	/* wraps */
	SUB_ERR((s.start = 0x8000000000000000ULL), EINVAL); /* kernel half */
	SUB_ERR(s.flags = 1, EINVAL);
	SUB_ERR(s.reserved0 = 1, EINVAL);
	SUB_ERR(s.reserved1 = 1, EINVAL);
	CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_SUBSCRIBE, (void *)8), EFAULT);

	memset(&u, 0, sizeof(u));
	u.handle = 12345;
	CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_UNSUBSCRIBE, &u), EINVAL);
	u.handle = 0;
	CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_UNSUBSCRIBE, &u), EINVAL);
	u.flags = 1;
	CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_UNSUBSCRIBE, &u), EINVAL);

	/* Reserved for GPU pinning, not implemented: ENOTTY. */
	CHECK_ERRNO(ioctl(fd, _IO(GDRC_IOCTL_MAGIC, GDRC_IOCTL_NR_PIN)),
		    ENOTTY);
	CHECK_ERRNO(ioctl(fd, _IOWR(GDRC_IOCTL_MAGIC, GDRC_IOCTL_NR_UNPIN,
				    struct gdrc_unsubscribe_args), &u),
		    ENOTTY);
	CHECK_ERRNO(ioctl(fd, _IO(GDRC_IOCTL_MAGIC, GDRC_IOCTL_NR_QUERY)),
		    ENOTTY);
	/* A known number with the wrong size is another command. */
	CHECK_ERRNO(ioctl(fd, _IOWR(GDRC_IOCTL_MAGIC, GDRC_IOCTL_NR_SUBSCRIBE,
				    struct gdrc_unsubscribe_args), &u),
		    ENOTTY);
	munmap(buf, 2 * pagesz);
#undef SUB_ERR
}

static void test_limit(void)
{
	static uint64_t handles[GDRC_MAX_SLOTS];
	static uint8_t seen[GDRC_MAX_SLOTS];
	unsigned int max = 0, i, n = 0, dup = 0;
	char *buf = anon(1);
	uint64_t h;
	uint32_t slot;
	FILE *f;

	f = fopen("/sys/module/gdrcache/parameters/max_subs_per_file", "r");
	CHECK(f != NULL);
	if (f) {
		CHECK(fscanf(f, "%u", &max) == 1);
		fclose(f);
	}
	CHECK(max >= 1 && max <= GDRC_MAX_SLOTS);
	for (i = 0; i < max; i++) {
		if (sub_at(fd, buf, pagesz, &handles[i], &slot) != 0)
			break;
		if (slot >= GDRC_MAX_SLOTS || seen[slot]++)
			dup++;
		n++;
	}
	CHECK(n == max);
	CHECK(dup == 0);
	CHECK_ERRNO(sub_at(fd, buf, pagesz, &h, &slot), ENOSPC);
	/* Every one of them sees one munmap. */
	drain();
	CHECK(munmap(buf, pagesz) == 0);
	for (i = 0, dup = 0; i < GDRC_MAX_SLOTS; i++)
		if (seen[i] && gen_word(i) == 0)
			dup++;
	CHECK(dup == 0);
	CHECK(drain() >= n);
	for (i = 0, dup = 0; i < n; i++)
		if (unsubscribe(fd, handles[i]) != 0)
			dup++;
	CHECK(dup == 0);
	/* A freed slot is handed out again, with its word reset. */
	buf = anon(1);
	CHECK(sub_at(fd, buf, pagesz, &h, &slot) == 0);
	CHECK(gen_word(slot) == 0);
	CHECK(unsubscribe(fd, h) == 0);
	munmap(buf, pagesz);
}

static void *reader(void *arg)
{
	static uint64_t n;

	(void)arg;
	if (read(fd, &n, sizeof(n)) != sizeof(n))
		return NULL;
	return &n;
}

static void test_blocking_read(void)
{
	char *buf = anon(2);
	pthread_t t;
	uint64_t h, *n = NULL;
	uint32_t slot;

	drain();
	CHECK(sub_at(fd, buf, 2 * pagesz, &h, &slot) == 0);
	CHECK(pthread_create(&t, NULL, reader, NULL) == 0);
	usleep(100 * 1000);	/* let it block (not required to be correct) */
	CHECK(munmap(buf, 2 * pagesz) == 0);
	CHECK(pthread_join(t, (void **)&n) == 0);
	CHECK(n != NULL && *n >= 1);
	CHECK(unsubscribe(fd, h) == 0);
}

static volatile int stop_churn;
static char *churn_buf;

static void *churner(void *arg)
{
	(void)arg;
	while (!stop_churn) {
		churn_buf[0] = 1;
		madvise(churn_buf, 4 * pagesz, MADV_DONTNEED);
	}
	return NULL;
}

/*
 * SUBSCRIBE/UNSUBSCRIBE while another thread keeps invalidating the range:
 * removal races with running callbacks (run with --smp 2 to make it real);
 * the guest's dmesg check catches a WARN or oops.
 */
static void test_churn(void)
{
	pthread_t t;
	uint64_t h;
	uint32_t slot;
	int i, bad = 0;

	churn_buf = anon(4);
	CHECK(churn_buf != NULL);
	CHECK(pthread_create(&t, NULL, churner, NULL) == 0);
	for (i = 0; i < 300; i++) {
		if (sub_at(fd, churn_buf, 4 * pagesz, &h, &slot) ||
		    unsubscribe(fd, h))
			bad++;
	}
	stop_churn = 1;
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(bad == 0);
	drain();
	munmap(churn_buf, 4 * pagesz);
}

/* Subscriptions left at close() or at exit are released by the module. */
static void test_release(void)
{
	char *buf = anon(2);
	uint64_t h;
	uint32_t slot;
	pid_t pid;
	int st, f2;

	f2 = open(GDRC_DEVICE_PATH, O_RDWR);
	CHECK(f2 >= 0);
	CHECK(sub_at(f2, buf, 2 * pagesz, &h, &slot) == 0);
	CHECK(close(f2) == 0);
	CHECK(munmap(buf, pagesz) == 0);	/* nothing left to notify */

	pid = fork();
	if (pid == 0) {
		int f3 = open(GDRC_DEVICE_PATH, O_RDWR);
		char *c = anon(4);

		if (f3 < 0 || !c || sub_at(f3, c, 4 * pagesz, &h, &slot))
			_exit(1);
		_exit(0);	/* exit_mmap first, then the release */
	}
	CHECK(pid > 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	munmap(buf + pagesz, pagesz);
}

int main(void)
{
	pagesz = sysconf(_SC_PAGESIZE);
	setvbuf(stdout, NULL, _IOLBF, 0);
	fd = open(GDRC_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "open %s: %s: skipped\n", GDRC_DEVICE_PATH,
			strerror(errno));
		return 77;
	}
	test_version();
	test_gen_page();
	test_munmap_madvise();
	test_mremap_fork();
	test_unsubscribed();
	test_bad_inputs();
	test_limit();
	test_blocking_read();
	test_churn();
	test_release();
	CHECK(close(fd) == 0);
	printf("kmod: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
