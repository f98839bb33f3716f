// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_kmod_stress.c - stress tests of gdrcache.ko against
 * tests/kmod/mock_nvp2p (both loaded):
 *   race   4 threads pin/unpin distinct GPU VAs on two fds while another
 *          thread fires the mock's free callback on those VAs
 *   kill   children looping pin/subscribe/unpin (and one blocked in
 *          read()) are SIGKILLed at random moments
 *   pass   the fd passed over a UNIX socket (SCM_RIGHTS): the receiver
 *          gets EACCES, the owner keeps working, the last close (by the
 *          receiver) releases everything
 *   fuzz   random ioctls (commands, sizes, contents, bad pointers)
 * After each part the mock must report no live mapping and no API misuse.
 *
 * Runs inside the VM lab guest (bash tests/kmod/run_kmod_tests.sh).
 * Random choices come from a fixed-seed xorshift (printed; override with
 * GDRC_STRESS_SEED).  GDRC_STRESS_SCALE=N (default 1) runs the races and
 * the fuzzer N times as long.  Exits 0 when every check passed, 1 otherwise, 77
 * when /dev/gdrcache is missing.  Ends with "kmod stress: N passed, M
 * failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kmod_test.h"

#define VA_BASE		0x7e0000000000ULL	/* any 64 KiB aligned VA */

/* ---- helpers ---------------------------------------------------------- */

static uint64_t seed;
static int scale = 1; /* GDRC_STRESS_SCALE */

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Every table given back exactly once, none live, no misuse. */
static void check_clean(const char *part, struct stats s0)
{
	struct stats s1 = stats();

	printf("%s: mock: %llu pins, %llu put_pages, %llu free_page_table, "
	       "%llu callbacks, live %llu, errors %llu\n", part,
	       s1.get_pages_ok - s0.get_pages_ok, s1.put_pages - s0.put_pages,
	       s1.free_page_table - s0.free_page_table,
	       s1.callbacks - s0.callbacks, s1.live, s1.errors);
	CHECK(s1.live == 0);
	CHECK(s1.errors == 0);
	CHECK(s1.put_pages - s0.put_pages + s1.free_page_table -
	      s0.free_page_table == s1.get_pages_ok - s0.get_pages_ok);
}

/* Fires the free callback on the VAs in fire_vas[] until told to stop. */
static volatile int stop_firing;
static uint64_t fire_vas[16];
static int nfire_vas;

static void *firer(void *arg)
{
	int f = open(MOCK_DIR "fire", O_WRONLY);
	uint64_t s = seed ^ 0x5555;
	unsigned long hits = 0;
	char buf[32];
	int len;

	(void)arg;
	if (f < 0)
		return (void *)-1L;
	while (!__atomic_load_n(&stop_firing, __ATOMIC_RELAXED)) {
		uint64_t va = fire_vas[xorshift(&s) % nfire_vas];

		len = snprintf(buf, sizeof(buf), "%#llx",
			       (unsigned long long)va);
		if (pwrite(f, buf, len, 0) == len)
			hits++;
		if (xorshift(&s) % 4 == 0)
			sched_yield();
	}
	close(f);
	return (void *)hits;
}

/* ---- 1. race: threads pin/unpin while the callback fires -------------- */

#define RACE_THREADS	4
#define RACE_ITERS	(2600UL * (unsigned long)scale)	/* per thread */

struct racer {
	pthread_t t;
	int fd;
	uint64_t va;
	unsigned long pins, unpins, revoked, bad;
};

static void *racer(void *arg)
{
	struct racer *r = arg;
	uint64_t s = seed ^ r->va;
	struct gdrc_query_args q;
	struct gdrc_pin_args a;
	unsigned long i;

	for (i = 0; i < RACE_ITERS; i++) {
		uint32_t flags = i % 7 == 3 ? GDRC_PIN_PERSISTENT : 0;
		uint64_t len = (1 + xorshift(&s) % 4) * KB64;
		volatile int n;

		if (pin(r->fd, r->va, len, flags, &a)) {
			r->bad++;
			continue;
		}
		r->pins++;
		for (n = 0; n < (int)(xorshift(&s) % 2000); n++)
			;
		if (i % 3 == 0 && query(r->fd, a.handle, &q) == 0 &&
		    (q.state & GDRC_PIN_REVOKED))
			r->revoked++;
		if (unpin(r->fd, a.handle) == 0)
			r->unpins++;
		else
			r->bad++;
	}
	return NULL;
}

static void test_race(void)
{
	struct stats s0 = stats();
	struct racer r[RACE_THREADS];
	unsigned long pins = 0, unpins = 0, revoked = 0, bad = 0;
	int fds[2], i;
	double t0 = now();
	pthread_t ft;
	void *hits;

	fds[0] = open(GDRC_DEVICE_PATH, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	fds[1] = open(GDRC_DEVICE_PATH, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	CHECK(fds[0] >= 0 && fds[1] >= 0);
	CHECK(s0.live == 0);
	nfire_vas = 0;
	for (i = 0; i < RACE_THREADS; i++) {
		r[i] = (struct racer){ .fd = fds[i % 2],
				       .va = VA_BASE + i * 16 * KB64 };
		/* Inside every length the racer pins (1 to 4 pages). */
		fire_vas[nfire_vas++] = r[i].va;
	}
	stop_firing = 0;
	CHECK(pthread_create(&ft, NULL, firer, NULL) == 0);
	for (i = 0; i < RACE_THREADS; i++)
		CHECK(pthread_create(&r[i].t, NULL, racer, &r[i]) == 0);
	for (i = 0; i < RACE_THREADS; i++) {
		CHECK(pthread_join(r[i].t, NULL) == 0);
		pins += r[i].pins;
		unpins += r[i].unpins;
		revoked += r[i].revoked;
		bad += r[i].bad;
	}
	stop_firing = 1;
	CHECK(pthread_join(ft, &hits) == 0);
	CHECK(hits != (void *)-1L);
	printf("race: %d threads on 2 fds, %lu pin/unpin iterations, "
	       "%lu fires hit, %lu seen revoked by QUERY, %lu failures, "
	       "%.1f s\n", RACE_THREADS, pins, (unsigned long)hits, revoked,
	       bad, now() - t0);
	CHECK(pins == RACE_THREADS * RACE_ITERS);
	CHECK(unpins == pins);
	CHECK(bad == 0);
	CHECK(stats().callbacks > s0.callbacks);	/* the race did happen */
	check_clean("race (fds open)", s0);
	CHECK(close(fds[0]) == 0);
	CHECK(close(fds[1]) == 0);
	check_clean("race (fds closed)", s0);
}

/* ---- 2. kill -9 mid-operation ----------------------------------------- */

#define KILL_ROUNDS	24
#define KILL_KINDS	4

/* Progress counters the children bump, in memory shared with us. */
static volatile unsigned long *progress;

static void child_loop(int kind, int ready, uint64_t va)
{
	int f = open(GDRC_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	struct gdrc_subscribe_args sa;
	struct gdrc_pin_args pa;
	uint64_t n, i;
	char *p;

	if (f < 0)
		_exit(2);
	p = mmap(NULL, 16 * 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		_exit(2);
	if (kind == 3) {
		/* Blocked in read(): nothing invalidates its range. */
		if (subscribe(f, (uintptr_t)p, 4096, NULL))
			_exit(3);
		if (pin(f, va, KB64, GDRC_PIN_PERSISTENT, NULL))
			_exit(3);
		if (write(ready, "r", 1) != 1)
			_exit(2);
		for (;;)
			if (read(f, &n, sizeof(n)) < 0 && errno != EINTR)
				_exit(4);
	}
	if (write(ready, "r", 1) != 1)
		_exit(2);
	for (i = 0;; i++) {
		switch (kind) {
		case 0:	/* pin/unpin, the parent firing the callback */
			if (pin(f, va, (1 + i % 3) * KB64, 0, &pa))
				_exit(3);
			if (unpin(f, pa.handle))
				_exit(3);
			break;
		case 1:	/* subscribe, invalidate, unsubscribe */
			if (subscribe(f, (uintptr_t)p, 16 * 4096, &sa))
				_exit(3);
			p[(i % 16) * 4096] = 1;
			madvise(p, 16 * 4096, MADV_DONTNEED);
			if (unsubscribe(f, sa.handle))
				_exit(3);
			break;
		default: /* both, piling up a few, released at exit */
			if (pin(f, va + (i % 8) * KB64, KB64,
				i % 2 ? GDRC_PIN_PERSISTENT : 0, &pa))
				_exit(3);
			if (subscribe(f, (uintptr_t)p + (i % 16) * 4096, 4096,
				      &sa))
				_exit(3);
			if (i % 8 == 7) {
				/* Restart with a fresh fd. */
				close(f);
				f = open(GDRC_DEVICE_PATH, O_RDWR | O_CLOEXEC);
				if (f < 0)
					_exit(2);
			}
			break;
		}
		progress[kind]++;
	}
}

static char proc_state(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	if (!p || !(p = strrchr(buf, ')')) || !p[1])
		return '?';
	return p[2];
}

/* waitpid with a deadline: 0 when @pid was reaped, killed by SIGKILL. */
static int reap(pid_t pid, double timeout)
{
	double end = now() + timeout;
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0
									    : 1;
		if (r < 0 || now() > end)
			return -1;
		usleep(1000);
	}
}

static void test_kill(void)
{
	struct stats s0 = stats();
	uint64_t s = seed ^ 0x4b11;
	int kills = 0, reaped = 0, stuck = 0, blocked = 0, k, i;
	unsigned long before[KILL_KINDS];
	double t0 = now(), worst = 0;
	pthread_t ft;
	void *hits;

	progress = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(progress != MAP_FAILED);
	if (progress == MAP_FAILED)
		return;
	nfire_vas = 0;
	for (k = 0; k < KILL_KINDS; k++)
		fire_vas[nfire_vas++] = VA_BASE + 0x100 * KB64 + k * 16 * KB64;
	stop_firing = 0;
	CHECK(pthread_create(&ft, NULL, firer, NULL) == 0);
	memset(before, 0, sizeof(before));
	for (i = 0; i < KILL_ROUNDS; i++) {
		pid_t pids[KILL_KINDS];
		int pfd[2];
		char c;

		CHECK(pipe2(pfd, O_CLOEXEC) == 0);
		for (k = 0; k < KILL_KINDS; k++) {
			pids[k] = fork();
			if (pids[k] == 0) {
				close(pfd[0]);
				child_loop(k, pfd[1], fire_vas[k]);
			}
			CHECK(pids[k] > 0);
		}
		close(pfd[1]);
		for (k = 0; k < KILL_KINDS; k++)
			CHECK(read(pfd[0], &c, 1) == 1);
		close(pfd[0]);
		/* Kill in random order, each after a random while. */
		for (k = 0; k < KILL_KINDS; k++) {
			int j = (k + i) % KILL_KINDS;
			double t;
			int r;

			usleep(xorshift(&s) % 20000);
			if (j == 3) {
				int w;

				/* Wait until it sleeps in read(). */
				for (w = 0; w < 200 && proc_state(pids[j]) !=
				     'S'; w++)
					usleep(1000);
				if (proc_state(pids[j]) == 'S')
					blocked++;
			}
			CHECK(kill(pids[j], SIGKILL) == 0);
			kills++;
			t = now();
			r = reap(pids[j], 10.0);
			t = now() - t;
			if (t > worst)
				worst = t;
			if (r == 0)
				reaped++;
			else if (r < 0)
				stuck++;
			CHECK(r == 0);	/* died of SIGKILL, not of a failure */
		}
	}
	stop_firing = 1;
	CHECK(pthread_join(ft, &hits) == 0);
	printf("kill: %d SIGKILLs (%d while blocked in read), %d reaped, "
	       "%d stuck, slowest reap %.3f s; iterations done by the "
	       "children: pin/unpin %lu, subscribe %lu, mixed %lu; %.1f s\n",
	       kills, blocked, reaped, stuck, worst, progress[0], progress[1],
	       progress[2], now() - t0);
	CHECK(kills == KILL_ROUNDS * KILL_KINDS);
	CHECK(reaped == kills && stuck == 0);
	CHECK(blocked == KILL_ROUNDS);
	CHECK(progress[0] > 0 && progress[1] > 0 && progress[2] > 0);
	check_clean("kill", s0);
	munmap((void *)progress, 4096);
}

/* ---- 3. fd passing ------------------------------------------------------ */

static int send_fd(int sock, int f)
{
	char c = 'f';
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

	memset(&u, 0, sizeof(u));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &f, sizeof(int));
	return sendmsg(sock, &m, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
	char c;
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm;
	int f = -1;

	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	cm = CMSG_FIRSTHDR(&m);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&f, CMSG_DATA(cm), sizeof(int));
	return f;
}

/*
 * The receiver: gets the fd and the owner's handles, checks that every
 * command and mmap gives EACCES, answers with the number of failed checks,
 * then closes the fd at once (mode 'c') or when told to (mode 'h').
 */
static void receiver(int sock)
{
	uint64_t h[2];
	int bad = 0, f;
	char mode, c;
	void *m;

	if (read(sock, &mode, 1) != 1)
		_exit(2);
	f = recv_fd(sock);
	if (f < 0 || read(sock, h, sizeof(h)) != sizeof(h))
		_exit(2);
#define RCHECK(call) do { errno = 0; if ((call) != -1 || errno != EACCES) \
	{ bad++; fprintf(stderr, "receiver: %s: %s\n", #call, \
			 strerror(errno)); } } while (0)
	{
		struct gdrc_query_args q;
		char page[4096] __attribute__((aligned(4096)));

		RCHECK(pin(f, VA_BASE, KB64, 0, NULL));
		RCHECK(pin(f, VA_BASE, KB64, GDRC_PIN_PERSISTENT, NULL));
		RCHECK(subscribe(f, (uintptr_t)page, 4096, NULL));
		RCHECK(unsubscribe(f, h[1]));
		RCHECK(unpin(f, h[0]));
		RCHECK(query(f, h[0], &q));
		m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, f, 0);
		if (m != MAP_FAILED || errno != EACCES) {
			bad++;
			fprintf(stderr, "receiver: mmap: %s\n", strerror(errno));
		}
	}
#undef RCHECK
	c = (char)bad;
	if (write(sock, &c, 1) != 1)
		_exit(2);
	if (mode == 'h' && read(sock, &c, 1) != 1)	/* wait for the word */
		_exit(2);
	if (close(f))
		_exit(3);
	if (write(sock, "d", 1) != 1)
		_exit(2);
	_exit(0);
}

static void pass_once(char mode)
{
	struct stats s0 = stats();
	struct gdrc_subscribe_args sa;
	struct gdrc_query_args q;
	struct gdrc_pin_args pa, pb;
	int sv[2], f, st;
	uint64_t h[2];
	char c = 0, *buf;
	pid_t pid;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	/* Forked before the open: it gets the fd only through the socket. */
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		receiver(sv[1]);
	}
	CHECK(pid > 0);
	close(sv[1]);
	buf = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(buf != MAP_FAILED);
	f = open(GDRC_DEVICE_PATH, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	CHECK(f >= 0);
	CHECK(pin(f, VA_BASE, 2 * KB64, 0, &pa) == 0);
	CHECK(pin(f, VA_BASE + 4 * KB64, KB64, GDRC_PIN_PERSISTENT, &pb) == 0);
	CHECK(subscribe(f, (uintptr_t)buf, 4 * 4096, &sa) == 0);
	h[0] = pa.handle;
	h[1] = sa.handle;
	CHECK(write(sv[0], &mode, 1) == 1);
	CHECK(send_fd(sv[0], f) == 0);
	CHECK(write(sv[0], h, sizeof(h)) == sizeof(h));
	CHECK(read(sv[0], &c, 1) == 1);
	CHECK(c == 0);		/* every receiver check gave EACCES */
	if (mode == 'c') {
		/* The receiver closes its copy: the owner's keeps working. */
		CHECK(read(sv[0], &c, 1) == 1 && c == 'd');
		CHECK(stats().live == s0.live + 2);
		CHECK(query(f, pa.handle, &q) == 0 && q.va == VA_BASE);
		CHECK(unpin(f, pa.handle) == 0);
		CHECK(pin(f, VA_BASE + 8 * KB64, KB64, 0, &pa) == 0);
		CHECK(unsubscribe(f, sa.handle) == 0);
		CHECK(subscribe(f, (uintptr_t)buf, 4096, &sa) == 0);
		CHECK(unpin(f, pb.handle) == 0);
		CHECK(stats().live == s0.live + 1);
		CHECK(close(f) == 0);
		CHECK(stats().live == s0.live);
	} else {
		/* The owner closes first: nothing goes yet... */
		CHECK(close(f) == 0);
		CHECK(stats().live == s0.live + 2);
		/* ...the receiver's close, the last, releases all. */
		CHECK(write(sv[0], "x", 1) == 1);
		CHECK(read(sv[0], &c, 1) == 1 && c == 'd');
		CHECK(stats().live == s0.live);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(sv[0]);
	munmap(buf, 4 * 4096);
	check_clean(mode == 'c' ? "pass (receiver closes first)"
				: "pass (owner closes first)", s0);
}

static void test_pass(void)
{
	pass_once('c');
	pass_once('h');
}

/* ---- 4. ioctl fuzzer ---------------------------------------------------- */

#define FUZZ_CALLS	(120000UL * (unsigned long)scale)
#define FUZZ_BUF	(64 * 1024)

static void test_fuzz(void)
{
	static const unsigned int cmds[] = {
		GDRC_IOCTL_VERSION, GDRC_IOCTL_SUBSCRIBE,
		GDRC_IOCTL_UNSUBSCRIBE, GDRC_IOCTL_PIN, GDRC_IOCTL_UNPIN,
		GDRC_IOCTL_QUERY,
	};
	struct stats s0 = stats();
	uint64_t s = seed;
	unsigned long ok = 0, eno[8] = { 0 }, pins = 0, subs = 0;
	uint64_t max_handle = 0;
	struct gdrc_subscribe_args sa;
	struct gdrc_pin_args pa;
	double t0 = now();
	unsigned char *buf, *hole;
	uintptr_t page;
	unsigned long i;
	int f;

	f = open(GDRC_DEVICE_PATH, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	CHECK(f >= 0);
	buf = mmap(NULL, FUZZ_BUF + 4096, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(buf != MAP_FAILED);
	if (f < 0 || buf == MAP_FAILED)
		return;
	hole = buf + FUZZ_BUF;		/* unmapped page after the buffer */
	CHECK(munmap(hole, 4096) == 0);
	page = (uintptr_t)buf;
	for (i = 0; i < FUZZ_CALLS; i++) {
		uint64_t r = xorshift(&s), *w;
		unsigned int cmd, dir, size, nr, type;
		unsigned long arg;
		int k, ret;

		/* The command. */
		switch (r % 10) {
		case 0: case 1: case 2: case 3:	/* exactly one of ours */
			cmd = cmds[(r >> 8) % 6];
			break;
		case 4: case 5: case 6: case 7: case 8: /* our magic */
			nr = (r >> 8) % 4 ? (r >> 16) % 0x20 : (r >> 16) & 0xff;
			dir = (r >> 24) & 3;
			size = (r >> 26) % 8 ? (r >> 29) % 128
					     : (r >> 29) & 0x3fff;
			cmd = _IOC(dir, GDRC_IOCTL_MAGIC, nr, size);
			break;
		default:		/* anything */
			cmd = (unsigned int)(r >> 16);
			type = _IOC_TYPE(cmd);
			/*
			 * Not the VFS's own commands that act on the inode or
			 * the file system (FIFREEZE, FS_IOC_SETFLAGS ...) or
			 * the file's flags (FIONBIO, FIOASYNC): the fuzzer is
			 * for the module.
			 */
			if (type == 'X' || type == 'f' || type == 'T' ||
			    type == 0x94 || type == 0)
				cmd = _IOC(_IOC_DIR(cmd), 0x99,
					   _IOC_NR(cmd), _IOC_SIZE(cmd));
			break;
		}
		/* The contents: random, sometimes valid-looking. */
		w = (uint64_t *)(buf + (xorshift(&s) % 64) * 64);
		for (k = 0; k < 16; k++)
			w[k] = xorshift(&s);
		switch (xorshift(&s) % 6) {
		case 0:	/* a pin with maybe a bad bit here or there */
			memset(&pa, 0, sizeof(pa));
			pa.va = VA_BASE + (w[0] % 64) * KB64;
			pa.length = (1 + w[1] % 4) * KB64;
			pa.flags = w[2] % 4 ? w[2] % 2 : (uint32_t)w[2];
			if (w[3] % 4 == 0)
				pa.reserved0 = 1U << (w[3] >> 8) % 32;
			if (w[4] % 4 == 0)
				pa.reserved1 = 1ULL << (w[4] >> 8) % 64;
			if (w[5] % 8 == 0)
				pa.va += 4096;
			memcpy(w, &pa, sizeof(pa));
			break;
		case 1:	/* a subscription, likewise */
			memset(&sa, 0, sizeof(sa));
			sa.start = page + (w[0] % 16) * 4096;
			sa.length = (1 + w[1] % 4) * 4096;
			if (w[2] % 4 == 0)
				sa.flags = 1U << (w[2] >> 8) % 32;
			if (w[3] % 4 == 0)
				sa.reserved0 = 1U << (w[3] >> 8) % 32;
			if (w[4] % 4 == 0)
				sa.reserved1 = 1ULL << (w[4] >> 8) % 64;
			if (w[5] % 8 == 0)
				sa.length = w[5];
			memcpy(w, &sa, sizeof(sa));
			break;
		case 2:	/* a handle that may exist, for UNPIN etc. */
			w[0] = 1 + w[0] % (max_handle + 4);
			if (w[1] % 4)
				w[1] = 0;	/* flags, reserved */
			break;
		default:
			break;
		}
		/* The pointer. */
		switch (xorshift(&s) % 16) {
		case 0:
			arg = 0;
			break;
		case 1:
			arg = (uintptr_t)hole + xorshift(&s) % 4096;
			break;
		case 2:	/* straddling the hole */
			arg = (uintptr_t)hole - 1 - xorshift(&s) % 64;
			break;
		case 3:
			arg = 0xffffffff81000000UL + xorshift(&s) % 4096;
			break;
		case 4:
			arg = 0x8000000000000000UL >> (xorshift(&s) % 8);
			break;
		case 5:
			arg = xorshift(&s);
			break;
		case 6:
			arg = (uintptr_t)w + 1 + xorshift(&s) % 7;
			break;
		default:
			arg = (uintptr_t)w;
			break;
		}
		errno = 0;
		ret = ioctl(f, cmd, arg);
		if (ret == 0) {
			ok++;
			/* Give back what it made, so that slots stay free. */
			if (cmd == GDRC_IOCTL_PIN && arg == (uintptr_t)w) {
				memcpy(&pa, w, sizeof(pa));
				pins++;
				if (pa.handle > max_handle)
					max_handle = pa.handle;
				if (xorshift(&s) % 8)
					CHECK(unpin(f, pa.handle) == 0);
			} else if (cmd == GDRC_IOCTL_SUBSCRIBE &&
				   arg == (uintptr_t)w) {
				memcpy(&sa, w, sizeof(sa));
				subs++;
				if (sa.handle > max_handle)
					max_handle = sa.handle;
				if (xorshift(&s) % 8)
					CHECK(unsubscribe(f, sa.handle) == 0);
			}
		} else {
			switch (errno) {
			case ENOTTY: eno[0]++; break;
			case EFAULT: eno[1]++; break;
			case EINVAL: eno[2]++; break;
			case ENOSPC: eno[3]++; break;
			case EPROTO: eno[4]++; break;
			default: eno[5]++; break;
			}
		}
	}
	printf("fuzz: seed %#llx, %d ioctls in %.1f s: %lu ok (%lu pins, "
	       "%lu subscriptions made), ENOTTY %lu, EFAULT %lu, EINVAL %lu, "
	       "ENOSPC %lu, EPROTO %lu, other %lu\n",
	       (unsigned long long)seed, (int)FUZZ_CALLS, now() - t0, ok, pins,
	       subs, eno[0], eno[1], eno[2], eno[3], eno[4], eno[5]);
	CHECK(eno[0] > 0 && eno[1] > 0 && eno[2] > 0 && ok > 0);
	/* The fd still works. */
	{
		struct gdrc_version_args v;

		memset(&v, 0, sizeof(v));
		v.user_version = GDRC_KMOD_ABI_VERSION;
		CHECK(ioctl(f, GDRC_IOCTL_VERSION, &v) == 0);
		CHECK(v.kernel_version == GDRC_KMOD_ABI_VERSION);
	}
	/* A long run can leave the fd's tables full: ENOSPC, as documented;
	 * closing it gives everything back, and a new fd has room. */
	if (subscribe(f, page, 4096, &sa) == 0)
		CHECK(unsubscribe(f, sa.handle) == 0);
	else
		CHECK(errno == ENOSPC);
	if (pin(f, VA_BASE + 128 * KB64, KB64, 0, &pa) == 0)
		CHECK(unpin(f, pa.handle) == 0);
	else
		CHECK(errno == ENOSPC);
	CHECK(close(f) == 0);
	f = open(GDRC_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	CHECK(f >= 0);
	CHECK(subscribe(f, page, 4096, &sa) == 0);
	CHECK(pin(f, VA_BASE + 128 * KB64, KB64, 0, &pa) == 0);
	CHECK(unpin(f, pa.handle) == 0);
	CHECK(unsubscribe(f, sa.handle) == 0);
	CHECK(close(f) == 0);
	munmap(buf, FUZZ_BUF);
	check_clean("fuzz", s0);
}

int main(int argc, char **argv)
{
	const char *e = getenv("GDRC_STRESS_SEED");
	double t0 = now();
	int fd;

	(void)argc;
	(void)argv;
	setvbuf(stdout, NULL, _IOLBF, 0);
	seed = e ? strtoull(e, NULL, 0) : 0x9e3779b97f4a7c15ULL;
	if (!seed)
		seed = 1;
	e = getenv("GDRC_STRESS_SCALE");
	if (e && atoi(e) > 0)
		scale = atoi(e);
	printf("kmod stress: seed %#llx, scale %d\n", (unsigned long long)seed,
	       scale);
	fd = open(GDRC_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "open %s: %s: skipped\n", GDRC_DEVICE_PATH,
			strerror(errno));
		return 77;
	}
	close(fd);
	if (access(MOCK_DIR "stats", R_OK)) {
		fprintf(stderr, "%sstats: %s: is mock_nvp2p loaded?\n",
			MOCK_DIR, strerror(errno));
		return 1;
	}
	test_race();
	test_kill();
	test_pass();
	test_fuzz();
	printf("kmod stress: %.1f s in all\n", now() - t0);
	printf("kmod stress: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
