// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_kmod_quota.c - the per-user limit on pinned GPU bytes of
 * gdrcache.ko (module parameter max_pinned_bytes_per_user), against
 * tests/kmod/mock_nvp2p (both loaded), as root:
 *   - the limit is set to 256 KiB through /sys/module; uid 0 pins up to
 *     it on one fd, a pin on another fd of uid 0 gets EDQUOT, an UNPIN
 *     gives the bytes back;
 *   - a revoked pin (the mock's free callback) still counts until UNPIN;
 *   - a child that became uid 65534 has its own quota (pins 256 KiB while
 *     uid 0 is at its limit), cannot reach uid 0's handles through its
 *     own fd (EINVAL) nor use uid 0's fd (inherited: EACCES);
 *   - a file opened by uid 0 and closed last by the uid 65534 child gives
 *     the bytes back to uid 0;
 *   - 0 means no limit; after all closes the full quota can be pinned
 *     again.  The parameter is restored at the end;
 *   - /dev/gdrcache is a character device of mode 0666.
 *
 * Runs inside the VM lab guest (bash tests/kmod/run_kmod_tests.sh).
 * Exits 0 when every check passed, 1 otherwise, 77 when /dev/gdrcache or
 * the parameter is missing.  Ends with "kmod quota: N passed, M failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kmod_test.h"

#define QUOTA		(4 * KB64)
#define VA_BASE		0x7e0000000000ULL	/* any 64 KiB aligned VA */
#define VA_CHILD	0x7f0000000000ULL
#define PARAM		"/sys/module/gdrcache/parameters/max_pinned_bytes_per_user"
#define NOBODY		65534

/* PIN without flags; *handle gets the handle, 0 on failure. */
static int pin_h(int f, uint64_t va, uint64_t len, uint64_t *handle)
{
	struct gdrc_pin_args a;
	int r = pin(f, va, len, 0, &a);

	if (handle)
		*handle = r == 0 ? a.handle : 0;
	return r;
}

static int dev_open(void)
{
	return open("/dev/" GDRC_DEVICE_NAME, O_RDWR | O_CLOEXEC);
}

static int param_read(char *buf, size_t len)
{
	int f = open(PARAM, O_RDONLY);
	ssize_t n;

	if (f < 0)
		return -1;
	n = read(f, buf, len - 1);
	close(f);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static int become_nobody(void)
{
	return setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY) ? -1 : 0;
}

/* Runs @fn in a child; returns its failed-check count (or 100). */
static int in_child(int (*fn)(void *), void *arg)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		passed = failed = 0;
		fn(arg);
		printf("  child uid %d: %d passed, %d failed\n", (int)getuid(),
		       passed, failed);
		fflush(stdout);
		_exit(failed > 99 ? 99 : failed);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 100;
	return WEXITSTATUS(st);
}

struct other_args {
	int root_fd;		/* uid 0's fd, inherited */
	uint64_t root_handle;	/* a live pin of it */
};

/* uid 65534: own quota, no access to uid 0's pins. */
static int other_user(void *p)
{
	struct other_args *a = p;
	struct gdrc_query_args q;
	uint64_t h1, h2, h3;
	int f;

	CHECK(become_nobody() == 0);
	CHECK(getuid() == NOBODY);
	f = dev_open();
	CHECK(f >= 0);
	/*
	 * uid 0's handle means nothing on its own fd.  Checked while this fd
	 * holds no pin: handles are per file, so one of its own pins could
	 * carry the same number.
	 */
	CHECK_ERRNO(unpin(f, a->root_handle), EINVAL);
	CHECK_ERRNO(query(f, a->root_handle, &q), EINVAL);
	/* Its own 256 KiB, while uid 0 is at its limit. */
	CHECK(pin_h(f, VA_CHILD, 2 * KB64, &h1) == 0);
	CHECK(pin_h(f, VA_CHILD + 2 * KB64, 2 * KB64, &h2) == 0);
	CHECK_ERRNO(pin_h(f, VA_CHILD + 4 * KB64, KB64, NULL), EDQUOT);
	CHECK(query(f, h2, &q) == 0 && q.va == VA_CHILD + 2 * KB64);
	/* uid 0's fd: not the opener's mm. */
	CHECK_ERRNO(unpin(a->root_fd, a->root_handle), EACCES);
	CHECK_ERRNO(query(a->root_fd, a->root_handle, &q), EACCES);
	CHECK_ERRNO(pin_h(a->root_fd, VA_CHILD + 8 * KB64, KB64, NULL), EACCES);
	/* Unpin gives its bytes back; close the rest. */
	CHECK(unpin(f, h1) == 0);
	CHECK(pin_h(f, VA_CHILD + 4 * KB64, 2 * KB64, &h3) == 0);
	CHECK_ERRNO(pin_h(f, VA_CHILD + 8 * KB64, KB64, NULL), EDQUOT);
	CHECK(close(f) == 0);
	/* All closed: its full quota again. */
	f = dev_open();
	CHECK(pin_h(f, VA_CHILD, QUOTA, NULL) == 0);
	CHECK(close(f) == 0);
	return 0;
}

/* uid 65534 holds the last reference to a file uid 0 opened and pinned. */
static int last_closer(void *p)
{
	int f = *(int *)p;

	CHECK(become_nobody() == 0);
	CHECK(close(f) == 0);	/* releases uid 0's pins, charged to uid 0 */
	return 0;
}

int main(void)
{
	char orig[64];
	struct gdrc_query_args q;
	struct other_args oa;
	uint64_t h[4];
	int fa, fb, fc, r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (access("/dev/" GDRC_DEVICE_NAME, R_OK | W_OK) ||
	    param_read(orig, sizeof(orig))) {
		fprintf(stderr, "kmod quota: /dev/%s or %s missing: skipped\n",
			GDRC_DEVICE_NAME, PARAM);
		return 77;
	}
	/* 0. The node: a character device any user may open (each open
	 * file's handles are its own; the quota is per user). */
	{
		struct stat st;

		CHECK(stat("/dev/" GDRC_DEVICE_NAME, &st) == 0);
		CHECK(S_ISCHR(st.st_mode));
		CHECK((st.st_mode & 0777) == 0666);
	}
	printf("max_pinned_bytes_per_user was %s\n", orig);
	CHECK(strcmp(orig, "4294967296") == 0);	/* the default, 4 GiB */
	CHECK(write_str(PARAM, "262144") == 0);

	/* 1. uid 0 pins up to the limit on fa; fb is of the same user. */
	fa = dev_open();
	fb = dev_open();
	CHECK(fa >= 0 && fb >= 0);
	CHECK(pin_h(fa, VA_BASE, 2 * KB64, &h[0]) == 0);
	CHECK(pin_h(fa, VA_BASE + 2 * KB64, 2 * KB64, &h[1]) == 0);
	CHECK_ERRNO(pin_h(fb, VA_BASE + 4 * KB64, KB64, NULL), EDQUOT);
	CHECK_ERRNO(pin_h(fa, VA_BASE + 4 * KB64, KB64, NULL), EDQUOT);
	/* The per-file limit still answers ENOSPC first. */
	CHECK(write_str(PARAM, "0") == 0);
	{
		FILE *pf = fopen("/sys/module/gdrcache/parameters/"
				 "max_pinned_bytes_per_file", "r+");
		char old[64] = "";

		CHECK(pf && fgets(old, sizeof(old), pf));
		if (pf) {
			rewind(pf);
			fprintf(pf, "262144\n");
			fclose(pf);
		}
		CHECK_ERRNO(pin_h(fa, VA_BASE + 4 * KB64, KB64, NULL), ENOSPC);
		/* 0 per user: no user limit, fb pins beyond 256 KiB. */
		CHECK(pin_h(fb, VA_BASE + 4 * KB64, KB64, &h[2]) == 0);
		CHECK(unpin(fb, h[2]) == 0);
		pf = fopen("/sys/module/gdrcache/parameters/"
			   "max_pinned_bytes_per_file", "w");
		if (pf) {
			fputs(old, pf);
			fclose(pf);
		}
	}
	CHECK(write_str(PARAM, "262144") == 0);
	CHECK_ERRNO(pin_h(fb, VA_BASE + 4 * KB64, KB64, NULL), EDQUOT);

	/* 2. A revoked pin counts until UNPIN. */
	CHECK(fire(VA_BASE) == 0);
	CHECK(query(fa, h[0], &q) == 0 && (q.state & GDRC_PIN_REVOKED));
	CHECK_ERRNO(pin_h(fb, VA_BASE + 4 * KB64, KB64, NULL), EDQUOT);
	CHECK(unpin(fa, h[0]) == 0);
	CHECK(pin_h(fb, VA_BASE + 4 * KB64, KB64, &h[2]) == 0);
	CHECK(pin_h(fb, VA_BASE + 5 * KB64, KB64, &h[3]) == 0);
	CHECK_ERRNO(pin_h(fb, VA_BASE + 6 * KB64, KB64, NULL), EDQUOT);
	CHECK(unpin(fb, h[3]) == 0);
	/* uid 0 is at 192 KiB: 64 KiB left. */

	/* 3. Another user: own quota, no access to uid 0's pins. */
	CHECK(pin_h(fb, VA_BASE + 5 * KB64, KB64, &h[3]) == 0);	/* at 256 */
	oa.root_fd = fa;
	oa.root_handle = h[1];
	r = in_child(other_user, &oa);
	CHECK(r == 0);
	/* uid 0 unchanged by all that: still at its limit, h[1] alive. */
	CHECK_ERRNO(pin_h(fa, VA_BASE + 6 * KB64, KB64, NULL), EDQUOT);
	CHECK(query(fa, h[1], &q) == 0 && !(q.state & GDRC_PIN_REVOKED));

	/* 4. Last close by another process, another uid: uid 0 gets the
	 * bytes back. */
	CHECK(close(fb) == 0);		/* 128 KiB freed: 128 KiB pinned */
	fc = dev_open();
	CHECK(pin_h(fc, VA_BASE + 8 * KB64, 2 * KB64, NULL) == 0);	/* 256 */
	CHECK_ERRNO(pin_h(fa, VA_BASE + 10 * KB64, KB64, NULL), EDQUOT);
	{
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			/* Hold fc, let the parent close its copy, close last. */
			usleep(200 * 1000);
			passed = failed = 0;
			last_closer(&fc);
			printf("  child uid %d: %d passed, %d failed\n",
			       (int)getuid(), passed, failed);
			_exit(failed);
		}
		CHECK(pid > 0);
		CHECK(close(fc) == 0);	/* the child's copy keeps it open */
		CHECK_ERRNO(pin_h(fa, VA_BASE + 10 * KB64, KB64, NULL), EDQUOT);
		CHECK(pid > 0 && waitpid(pid, &st, 0) == pid &&
		      WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	CHECK(pin_h(fa, VA_BASE + 10 * KB64, 2 * KB64, &h[2]) == 0);	/* 256 */
	CHECK_ERRNO(pin_h(fa, VA_BASE + 12 * KB64, KB64, NULL), EDQUOT);

	/* 5. All closed: the accounting is back to zero. */
	CHECK(close(fa) == 0);
	fa = dev_open();
	fb = dev_open();
	CHECK(pin_h(fa, VA_BASE, 2 * KB64, NULL) == 0);
	CHECK(pin_h(fb, VA_BASE + 2 * KB64, 2 * KB64, NULL) == 0);
	CHECK_ERRNO(pin_h(fb, VA_BASE + 4 * KB64, KB64, NULL), EDQUOT);
	CHECK(close(fa) == 0);
	CHECK(close(fb) == 0);
	fa = dev_open();
	CHECK(pin_h(fa, VA_BASE, QUOTA, NULL) == 0);
	CHECK(close(fa) == 0);

	CHECK(write_str(PARAM, orig) == 0);
	{
		char now[64];

		CHECK(param_read(now, sizeof(now)) == 0 &&
		      strcmp(now, orig) == 0);
	}
	printf("kmod quota: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
