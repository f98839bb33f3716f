// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_kmod_pin.c - user-space test of gdrcache.ko's GPU half: PIN, UNPIN
 * and QUERY against tests/kmod/mock_nvp2p (a mock of nvidia.ko's
 * nvidia_p2p API), revocation by the free callback (generation word,
 * poll, QUERY), fault injection, page-table versions, the byte limit, the
 * callback racing UNPIN and close, and release of pins at close.
 *
 * Runs inside the VM lab guest (bash tests/kmod/run_kmod_tests.sh):
 *   test_kmod_pin                with gdrcache.ko and mock_nvp2p.ko loaded
 *   test_kmod_pin --no-provider  gdrcache.ko only: PIN gives ENODEV
 *   test_kmod_pin --compiled-out gdrcache.ko built without nv-p2p.h
 * Exits 0 when every check passed, 1 otherwise, 77 when /dev/gdrcache is
 * missing.  Ends with "kmod pin: N passed, M failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
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

#define VA_BASE		0x7f0000000000ULL	/* any 64 KiB aligned VA */
#define MOCK_PARAM	"/sys/module/mock_nvp2p/parameters/"
#define GDRC_PARAM	"/sys/module/gdrcache/parameters/"
#ifndef ENOTSUPP
#define ENOTSUPP	524	/* kernel-internal, seen as is in user space */
#endif

static int fd;
static const volatile uint64_t *gen;

static uint64_t gen_word(uint32_t slot)
{
	return __atomic_load_n(&gen[slot], __ATOMIC_ACQUIRE);
}

static void drain(void)
{
	uint64_t n;

	while (read(fd, &n, sizeof(n)) == sizeof(n))
		;
}

static void test_basic(void)
{
	struct stats s0 = stats(), s1;
	struct gdrc_pin_args a;
	struct gdrc_query_args q;

	CHECK(s0.live != ~0ULL);
	CHECK(pin(fd, VA_BASE, 4 * KB64, 0, &a) == 0);
	CHECK(a.handle != 0 && a.slot < GDRC_MAX_SLOTS && a.pad == 0);
	CHECK(a.page_size == KB64);
	CHECK(a.entries == 4);
	CHECK(memcmp(a.gpu_uuid, "mock-gpu-uuid-01", 16) == 0);
	CHECK(gen_word(a.slot) == 0);
	CHECK(query(fd, a.handle, &q) == 0);
	CHECK(q.va == VA_BASE && q.length == 4 * KB64);
	CHECK(q.page_size == KB64 && q.entries == 4 && q.slot == a.slot);
	CHECK(q.state == 0);
	CHECK(memcmp(q.gpu_uuid, a.gpu_uuid, 16) == 0);
	s1 = stats();
	CHECK(s1.live == s0.live + 1 && s1.get_pages_ok == s0.get_pages_ok + 1);
	CHECK(unpin(fd, a.handle) == 0);
	CHECK_ERRNO(unpin(fd, a.handle), EINVAL);
	CHECK_ERRNO(query(fd, a.handle, &q), EINVAL);
	s1 = stats();
	CHECK(s1.live == s0.live && s1.put_pages == s0.put_pages + 1);
	CHECK(s1.errors == 0);
}

static void test_bad_inputs(void)
{
	struct stats s0 = stats();
	struct gdrc_pin_args a;
	struct gdrc_unpin_args u;
	struct gdrc_query_args q;

	CHECK_ERRNO(pin(fd, VA_BASE + 4096, KB64, 0, NULL), EINVAL);
	CHECK_ERRNO(pin(fd, VA_BASE, KB64 + 4096, 0, NULL), EINVAL);
	CHECK_ERRNO(pin(fd, VA_BASE, 4096, 0, NULL), EINVAL);
	CHECK_ERRNO(pin(fd, VA_BASE, 0, 0, NULL), EINVAL);
	CHECK_ERRNO(pin(fd, ~0ULL & ~(KB64 - 1), 2 * KB64, 0, NULL), EINVAL);
	CHECK_ERRNO(pin(fd, VA_BASE, KB64, 4, NULL), EINVAL);
	memset(&a, 0, sizeof(a));
	a.va = VA_BASE;
	a.length = KB64;
	a.reserved0 = 1;
	CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_PIN, &a), EINVAL);
	a.reserved0 = 0;
	a.reserved1 = 1;
	CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_PIN, &a), EINVAL);
	CHECK(stats().get_pages == s0.get_pages);	/* never reached */

	CHECK(pin(fd, VA_BASE, KB64, 0, &a) == 0);
	memset(&u, 0, sizeof(u));
	u.handle = a.handle;
	u.reserved = 1;
	CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_UNPIN, &u), EINVAL);
	u.reserved = 0;
	u.flags = 1;
	CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_UNPIN, &u), EINVAL);
	memset(&q, 0, sizeof(q));
	q.handle = a.handle;
	q.flags = 1;
	CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_QUERY, &q), EINVAL);
	CHECK_ERRNO(unpin(fd, a.handle + (1 << 9)), EINVAL);
	CHECK_ERRNO(unpin(fd, 0), EINVAL);
	CHECK(unpin(fd, a.handle) == 0);
	CHECK(stats().live == s0.live);
}

/* Pins and subscriptions share the generation page's slots. */
static void test_slots_shared(void)
{
	struct gdrc_subscribe_args s;
	struct gdrc_unsubscribe_args us;
	struct gdrc_pin_args a;
	void *buf = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(buf != MAP_FAILED);
	memset(&s, 0, sizeof(s));
	s.start = (uintptr_t)buf;
	s.length = 4096;
	CHECK(ioctl(fd, GDRC_IOCTL_SUBSCRIBE, &s) == 0);
	CHECK(pin(fd, VA_BASE, KB64, 0, &a) == 0);
	CHECK(a.slot != s.slot);
	/* A pin's handle is no subscription handle and vice versa. */
	memset(&us, 0, sizeof(us));
	us.handle = a.handle;
	CHECK_ERRNO(ioctl(fd, GDRC_IOCTL_UNSUBSCRIBE, &us), EINVAL);
	CHECK_ERRNO(unpin(fd, s.handle), EINVAL);
	CHECK(unpin(fd, a.handle) == 0);
	us.handle = s.handle;
	CHECK(ioctl(fd, GDRC_IOCTL_UNSUBSCRIBE, &us) == 0);
	munmap(buf, 4096);
}

static void test_revoke(void)
{
	struct stats s0 = stats(), s1;
	struct gdrc_pin_args a, b;
	struct gdrc_query_args q;
	uint64_t n;

	drain();
	CHECK(pin(fd, VA_BASE, 2 * KB64, 0, &a) == 0);
	CHECK(pin(fd, VA_BASE + 16 * KB64, KB64, 0, &b) == 0);
	CHECK(gen_word(a.slot) == 0);
	CHECK(!readable(fd));
	CHECK(fire(VA_BASE + KB64) == 0);	/* inside a, not b */
	CHECK(gen_word(a.slot) == 1);
	CHECK(gen_word(b.slot) == 0);
	CHECK(readable(fd));
	CHECK(read(fd, &n, sizeof(n)) == sizeof(n) && n == 1);
	CHECK(!readable(fd));
	CHECK(query(fd, a.handle, &q) == 0);
	CHECK(q.state == GDRC_PIN_REVOKED);
	CHECK(query(fd, b.handle, &q) == 0);
	CHECK(q.state == 0);
	/* Already revoked: the mock finds nothing live there. */
	CHECK_ERRNO(fire(VA_BASE), ENOENT);
	s1 = stats();
	CHECK(s1.callbacks == s0.callbacks + 1);
	CHECK(s1.free_page_table == s0.free_page_table + 1);
	CHECK(unpin(fd, a.handle) == 0);
	CHECK(unpin(fd, b.handle) == 0);
	s1 = stats();
	CHECK(s1.put_pages == s0.put_pages + 1);	/* b only */
	CHECK(s1.live == s0.live && s1.errors == 0);
}

/* The driver may call the callback before get_pages has returned. */
static void test_fire_in_get_pages(void)
{
	struct stats s0 = stats(), s1;
	struct gdrc_pin_args a;
	struct gdrc_query_args q;

	drain();
	CHECK(write_str(MOCK_PARAM "fire_in_get_pages", "Y") == 0);
	CHECK(pin(fd, VA_BASE, KB64, 0, &a) == 0);
	CHECK(write_str(MOCK_PARAM "fire_in_get_pages", "N") == 0);
	CHECK(gen_word(a.slot) == 1);
	CHECK(readable(fd));
	CHECK(query(fd, a.handle, &q) == 0);
	CHECK(q.state == GDRC_PIN_REVOKED);
	CHECK(unpin(fd, a.handle) == 0);
	s1 = stats();
	CHECK(s1.callbacks == s0.callbacks + 1);
	CHECK(s1.free_page_table == s0.free_page_table + 1);
	CHECK(s1.put_pages == s0.put_pages);
	CHECK(s1.live == s0.live && s1.errors == 0);
	drain();
}

static void test_inject(void)
{
	struct stats s0 = stats();
	struct gdrc_pin_args a;

	CHECK(write_str(MOCK_DIR "fail_next", "12") == 0);
	CHECK_ERRNO(pin(fd, VA_BASE, KB64, 0, NULL), ENOMEM);
	CHECK(write_str(MOCK_DIR "fail_next", "22") == 0);
	CHECK_ERRNO(pin(fd, VA_BASE, KB64, 0, NULL), EINVAL);
	CHECK(write_str(MOCK_DIR "fail_next", "524") == 0);
	CHECK_ERRNO(pin(fd, VA_BASE, KB64, 0, NULL), ENOTSUPP);
	/* The failed pins left no slot or bytes behind. */
	CHECK(pin(fd, VA_BASE, KB64, 0, &a) == 0);
	CHECK(unpin(fd, a.handle) == 0);
	CHECK(stats().get_pages == s0.get_pages + 4);
	CHECK(stats().live == s0.live);
}

static void test_persistent(void)
{
	struct stats s0 = stats(), s1;
	struct gdrc_pin_args a;
	struct gdrc_query_args q;

	CHECK(pin(fd, VA_BASE, 2 * KB64, GDRC_PIN_PERSISTENT, &a) == 0);
	CHECK(a.entries == 2 && a.page_size == KB64);
	CHECK(query(fd, a.handle, &q) == 0);
	CHECK(q.state == GDRC_PIN_PERSISTENT);
	CHECK_ERRNO(fire(VA_BASE), ENOENT);	/* never revoked */
	CHECK(gen_word(a.slot) == 0);
	CHECK(unpin(fd, a.handle) == 0);
	s1 = stats();
	CHECK(s1.put_pages == s0.put_pages + 1);
	CHECK(s1.live == s0.live && s1.errors == 0);
}

static void test_table_versions(void)
{
	unsigned long long v0 = read_u64(MOCK_PARAM "page_table_version");
	struct stats s0 = stats();
	struct gdrc_pin_args a;

	CHECK(v0 >> 16 == 1 || v0 >> 16 == 2);
	CHECK(write_u64(MOCK_PARAM "page_table_version", 0x00010002) == 0);
	CHECK(pin(fd, VA_BASE, KB64, 0, &a) == 0);
	CHECK(unpin(fd, a.handle) == 0);
	CHECK(write_u64(MOCK_PARAM "page_table_version", 0x00020000) == 0);
	CHECK(pin(fd, VA_BASE, KB64, 0, &a) == 0);
	CHECK(unpin(fd, a.handle) == 0);
	CHECK(write_u64(MOCK_PARAM "page_table_version", 0x00030000) == 0);
	CHECK_ERRNO(pin(fd, VA_BASE, KB64, 0, NULL), EPROTO);
	CHECK(write_u64(MOCK_PARAM "page_table_version", 0x00000001) == 0);
	CHECK_ERRNO(pin(fd, VA_BASE, KB64, 0, NULL), EPROTO);
	CHECK(write_u64(MOCK_PARAM "page_table_version", v0) == 0);
	CHECK(stats().live == s0.live);		/* rejected tables put back */
	CHECK(stats().errors == 0);
}

static void test_limit(void)
{
	unsigned long long lim = read_u64(GDRC_PARAM "max_pinned_bytes_per_file");
	struct stats s0 = stats();
	struct gdrc_pin_args a, b;

	CHECK(lim == 1ULL << 30);
	/* Beyond 1 GiB: refused before the provider is asked. */
	CHECK_ERRNO(pin(fd, VA_BASE, (1ULL << 30) + KB64, 0, NULL), ENOSPC);
	CHECK(stats().get_pages == s0.get_pages);
	CHECK(write_u64(GDRC_PARAM "max_pinned_bytes_per_file", 4 * KB64) == 0);
	CHECK(pin(fd, VA_BASE, 3 * KB64, 0, &a) == 0);
	CHECK_ERRNO(pin(fd, VA_BASE + 16 * KB64, 2 * KB64, 0, NULL), ENOSPC);
	CHECK(pin(fd, VA_BASE + 16 * KB64, KB64, 0, &b) == 0);
	CHECK_ERRNO(pin(fd, VA_BASE + 32 * KB64, KB64, 0, NULL), ENOSPC);
	CHECK(unpin(fd, a.handle) == 0);
	CHECK(pin(fd, VA_BASE, 3 * KB64, 0, &a) == 0);
	CHECK(unpin(fd, a.handle) == 0);
	/* Revoked pins count until unpinned. */
	CHECK(fire(VA_BASE + 16 * KB64) == 0);
	CHECK_ERRNO(pin(fd, VA_BASE, 4 * KB64, 0, NULL), ENOSPC);
	CHECK(unpin(fd, b.handle) == 0);
	CHECK(write_u64(GDRC_PARAM "max_pinned_bytes_per_file", lim) == 0);
	CHECK(stats().live == s0.live);
	drain();
}

static volatile int stop_firing;
static uint64_t fire_va;

static void *firer(void *arg)
{
	int f = open(MOCK_DIR "fire", O_WRONLY);
	char buf[32];
	unsigned long hits = 0;
	int len;

	(void)arg;
	if (f < 0)
		return (void *)-1L;
	len = snprintf(buf, sizeof(buf), "%#llx", (unsigned long long)fire_va);
	while (!__atomic_load_n(&stop_firing, __ATOMIC_RELAXED)) {
		if (pwrite(f, buf, len, 0) == len)
			hits++;
	}
	close(f);
	return (void *)hits;
}

/* A short, varying wait, so that callbacks land in every window. */
static void spin(int i)
{
	volatile int n;

	for (n = 0; n < (i % 8) * 500; n++)
		;
	if (i % 16 == 15)
		sched_yield();
}

/* The callback racing UNPIN, close, and PIN itself. */
static void test_race(void)
{
	struct stats s0 = stats(), s1;
	unsigned long unpinned = 0, revoked = 0, closed = 0;
	struct gdrc_query_args q;
	struct gdrc_pin_args a;
	pthread_t t;
	void *hits;
	int i;

	fire_va = VA_BASE + 8 * KB64;
	stop_firing = 0;
	CHECK(pthread_create(&t, NULL, firer, NULL) == 0);
	for (i = 0; i < 400; i++) {
		if (pin(fd, VA_BASE, 16 * KB64, 0, &a)) {
			CHECK(0);
			break;
		}
		spin(i);
		if (i % 3 == 0 && query(fd, a.handle, &q) == 0 &&
		    (q.state & GDRC_PIN_REVOKED))
			revoked++;
		if (unpin(fd, a.handle) == 0)
			unpinned++;
	}
	CHECK(unpinned == 400);
	for (i = 0; i < 200; i++) {
		int f = open(GDRC_DEVICE_PATH, O_RDWR);

		if (f < 0 || pin(f, VA_BASE, 16 * KB64, 0, NULL) ||
		    pin(f, VA_BASE + 32 * KB64, KB64, 0, NULL)) {
			CHECK(0);
			if (f >= 0)
				close(f);
			break;
		}
		spin(i);
		if (close(f) == 0)
			closed++;
	}
	CHECK(closed == 200);
	stop_firing = 1;
	CHECK(pthread_join(t, &hits) == 0);
	CHECK(hits != (void *)-1L);
	s1 = stats();
	printf("race: %llu callbacks fired, %lu seen revoked by QUERY, "
	       "%llu put_pages after a callback that found no pin\n",
	       s1.callbacks - s0.callbacks, revoked,
	       s1.put_revoked - s0.put_revoked);
	CHECK(s1.callbacks > s0.callbacks);	/* the race did happen */
	CHECK(s1.live == s0.live);
	CHECK(s1.errors == 0);
	/* Each table went back exactly once, one way or the other. */
	CHECK(s1.put_pages - s0.put_pages + s1.free_page_table -
	      s0.free_page_table == s1.get_pages_ok - s0.get_pages_ok);
	drain();
}

static void *fire_once(void *arg)
{
	return (void *)(long)fire((uintptr_t)arg);
}

/*
 * UNPIN (or close) while the driver is already inside the callback for
 * the same pin: the callback finds no pin and does nothing; put_pages
 * waits for it and releases the table.
 */
static void test_unpin_during_callback(int by_close)
{
	struct stats s0 = stats(), s1;
	struct gdrc_pin_args a;
	pthread_t t;
	void *r;
	int f = by_close ? open(GDRC_DEVICE_PATH, O_RDWR) : fd;

	CHECK(f >= 0);
	CHECK(write_str(MOCK_PARAM "callback_delay_ms", "300") == 0);
	CHECK(pin(f, VA_BASE, KB64, 0, &a) == 0);
	CHECK(pthread_create(&t, NULL, fire_once,
			     (void *)(uintptr_t)VA_BASE) == 0);
	usleep(100 * 1000);	/* the mock has chosen the pin, is sleeping */
	if (by_close)
		CHECK(close(f) == 0);
	else
		CHECK(unpin(f, a.handle) == 0);
	CHECK(pthread_join(t, &r) == 0);
	CHECK(r == NULL);	/* the callback was called */
	CHECK(write_str(MOCK_PARAM "callback_delay_ms", "0") == 0);
	s1 = stats();
	CHECK(s1.callbacks == s0.callbacks + 1);
	CHECK(s1.put_revoked == s0.put_revoked + 1);
	CHECK(s1.free_page_table == s0.free_page_table);
	CHECK(s1.live == s0.live && s1.errors == 0);
	if (!by_close)
		CHECK(gen_word(a.slot) == 0);	/* nothing left to notify */
	drain();
}

/* close() and exit release what is left, persistent pins included. */
static void test_close_releases(void)
{
	struct stats s0 = stats(), s1;
	int f2, st;
	pid_t pid;

	f2 = open(GDRC_DEVICE_PATH, O_RDWR);
	CHECK(f2 >= 0);
	CHECK(pin(f2, VA_BASE, KB64, 0, NULL) == 0);
	CHECK(pin(f2, VA_BASE + KB64, 2 * KB64, GDRC_PIN_PERSISTENT, NULL) == 0);
	CHECK(pin(f2, VA_BASE + 4 * KB64, KB64, 0, NULL) == 0);
	CHECK(fire(VA_BASE + 4 * KB64) == 0);	/* one revoked first */
	CHECK(stats().live == s0.live + 2);
	CHECK(close(f2) == 0);
	s1 = stats();
	CHECK(s1.live == s0.live);
	CHECK(s1.put_pages == s0.put_pages + 2);
	CHECK(s1.free_page_table == s0.free_page_table + 1);

	pid = fork();
	if (pid == 0) {
		int f3 = open(GDRC_DEVICE_PATH, O_RDWR);

		if (f3 < 0 || pin(f3, VA_BASE, 4 * KB64, 0, NULL) ||
		    pin(f3, VA_BASE + 8 * KB64, KB64, GDRC_PIN_PERSISTENT, NULL))
			_exit(1);
		_exit(0);	/* the release runs at exit */
	}
	CHECK(pid > 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	s1 = stats();
	CHECK(s1.live == s0.live);
	CHECK(s1.errors == 0);
}

static int simple_mode(int expect)
{
	struct gdrc_pin_args a;
	struct gdrc_query_args q;

	CHECK_ERRNO(pin(fd, VA_BASE, KB64, 0, &a), expect);
	CHECK_ERRNO(pin(fd, VA_BASE, KB64, GDRC_PIN_PERSISTENT, NULL), expect);
	if (expect == ENODEV) {
		/* Arguments are still checked first. */
		CHECK_ERRNO(pin(fd, VA_BASE + 4096, KB64, 0, NULL), EINVAL);
		CHECK_ERRNO(unpin(fd, 1), EINVAL);
		CHECK_ERRNO(query(fd, 1, &q), EINVAL);
	} else {
		CHECK_ERRNO(unpin(fd, 1), expect);
		CHECK_ERRNO(query(fd, 1, &q), expect);
	}
	printf("kmod pin (%s): %d passed, %d failed\n",
	       expect == ENODEV ? "no provider" : "compiled out", passed,
	       failed);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct gdrc_version_args v;

	setvbuf(stdout, NULL, _IOLBF, 0);
	fd = open(GDRC_DEVICE_PATH, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		fprintf(stderr, "open %s: %s: skipped\n", GDRC_DEVICE_PATH,
			strerror(errno));
		return 77;
	}
	memset(&v, 0, sizeof(v));
	v.user_version = GDRC_KMOD_ABI_VERSION;
	v.min_kernel_version = GDRC_KMOD_VERSION_MAKE(1, 1);
	CHECK(ioctl(fd, GDRC_IOCTL_VERSION, &v) == 0);
	if (argc > 1 && !strcmp(argv[1], "--no-provider"))
		return simple_mode(ENODEV);
	if (argc > 1 && !strcmp(argv[1], "--compiled-out"))
		return simple_mode(EOPNOTSUPP);

	gen = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (gen == MAP_FAILED) {
		perror("mmap generation page");
		return 1;
	}
	if (access(MOCK_DIR "stats", R_OK)) {
		fprintf(stderr, "%sstats: %s: is mock_nvp2p loaded?\n",
			MOCK_DIR, strerror(errno));
		return 1;
	}
	test_basic();
	test_bad_inputs();
	test_slots_shared();
	test_revoke();
	test_fire_in_get_pages();
	test_inject();
	test_persistent();
	test_table_versions();
	test_limit();
	test_race();
	test_unpin_during_callback(0);
	test_unpin_during_callback(1);
	test_close_releases();
	CHECK(close(fd) == 0);
	printf("kmod pin: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
