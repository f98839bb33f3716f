/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kmod_test.h - what the user-space tests of gdrcache.ko share: the
 * pass/fail counters and CHECK macros, thin ioctl wrappers that zero the
 * argument struct first (so a test states only the fields it means), and
 * the mock_nvp2p debugfs controls.
 *
 * Header-only on purpose: run_kmod_tests.sh builds each test from one .c
 * file inside the VM lab guest, and every test is its own program, so the
 * counters are one per program.  Each test includes this once.
 */
#ifndef GDRC_KMOD_TEST_H
#define GDRC_KMOD_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "../../kmod/uapi/gdrc_ioctl.h"

static int passed, failed;

/* The uid is printed because test_kmod_quota checks from other users. */
#define CHECK(cond)							\
	do {								\
		if (cond) {						\
			passed++;					\
		} else {						\
			failed++;					\
			fprintf(stderr, "%s:%d: [uid %d] CHECK failed: %s" \
				" (last errno %d %s)\n", __FILE__, __LINE__, \
				(int)getuid(), #cond, errno,		\
				strerror(errno));			\
		}							\
	} while (0)

/* @call must fail with -1 and exactly errno @e. */
#define CHECK_ERRNO(call, e)						\
	do {								\
		errno = 0;						\
		long r_ = (call);					\
		CHECK(r_ == -1 && errno == (e));			\
	} while (0)

#define KB64		(64ULL * 1024)
#define MOCK_DIR	"/sys/kernel/debug/mock_nvp2p/"

/* ---- ioctl wrappers ---------------------------------------------------- */

static inline int pin(int f, uint64_t va, uint64_t len, uint32_t flags,
		      struct gdrc_pin_args *out)
{
	struct gdrc_pin_args a;
	int r;

	memset(&a, 0, sizeof(a));
	a.va = va;
	a.length = len;
	a.flags = flags;
	r = ioctl(f, GDRC_IOCTL_PIN, &a);
	if (out)
		*out = a;
	return r;
}

static inline int unpin(int f, uint64_t handle)
{
	struct gdrc_unpin_args a;

	memset(&a, 0, sizeof(a));
	a.handle = handle;
	return ioctl(f, GDRC_IOCTL_UNPIN, &a);
}

static inline int query(int f, uint64_t handle, struct gdrc_query_args *q)
{
	memset(q, 0, sizeof(*q));
	q->handle = handle;
	return ioctl(f, GDRC_IOCTL_QUERY, q);
}

static inline int subscribe(int f, uint64_t start, uint64_t len,
			    struct gdrc_subscribe_args *out)
{
	struct gdrc_subscribe_args a;
	int r;

	memset(&a, 0, sizeof(a));
	a.start = start;
	a.length = len;
	r = ioctl(f, GDRC_IOCTL_SUBSCRIBE, &a);
	if (out)
		*out = a;
	return r;
}

static inline int unsubscribe(int f, uint64_t handle)
{
	struct gdrc_unsubscribe_args a;

	memset(&a, 0, sizeof(a));
	a.handle = handle;
	return ioctl(f, GDRC_IOCTL_UNSUBSCRIBE, &a);
}

/* poll() with timeout 0: 1 if @f has an event to read. */
static inline int readable(int f)
{
	struct pollfd p = { .fd = f, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* ---- sysfs / debugfs files --------------------------------------------- */

static inline int write_str(const char *path, const char *s)
{
	int f = open(path, O_WRONLY);
	ssize_t n;
	int e;

	if (f < 0)
		return -1;
	n = write(f, s, strlen(s));
	e = errno;
	close(f);
	errno = e;
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

static inline int write_u64(const char *path, unsigned long long v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%#llx", v);
	return write_str(path, buf);
}

/* ~0 when the file is missing or holds no number. */
static inline unsigned long long read_u64(const char *path)
{
	unsigned long long v = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return ~0ULL;
	if (fscanf(f, "%lli", &v) != 1)
		v = ~0ULL;
	fclose(f);
	return v;
}

/* The mock's free callback on the pin covering @va, as nvidia.ko would. */
static inline int fire(uint64_t va)
{
	return write_u64(MOCK_DIR "fire", va);
}

/* The mock's counters (all ~0 when the mock is not loaded). */
struct stats {
	unsigned long long get_pages, get_pages_ok, put_pages, free_page_table;
	unsigned long long callbacks, live, errors, put_revoked;
};

static inline struct stats stats(void)
{
	static const struct {
		const char *name;
		size_t off;
	} fields[] = {
		{ "get_pages", offsetof(struct stats, get_pages) },
		{ "get_pages_ok", offsetof(struct stats, get_pages_ok) },
		{ "put_pages", offsetof(struct stats, put_pages) },
		{ "free_page_table", offsetof(struct stats, free_page_table) },
		{ "callbacks", offsetof(struct stats, callbacks) },
		{ "live", offsetof(struct stats, live) },
		{ "errors", offsetof(struct stats, errors) },
		{ "put_revoked", offsetof(struct stats, put_revoked) },
	};
	struct stats s;
	char name[64];
	unsigned long long v;
	FILE *f = fopen(MOCK_DIR "stats", "r");
	size_t i;

	memset(&s, 0xff, sizeof(s));
	if (!f)
		return s;
	while (fscanf(f, "%63s %llu", name, &v) == 2)
		for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
			if (!strcmp(name, fields[i].name))
				*(unsigned long long *)((char *)&s +
							fields[i].off) = v;
	fclose(f);
	return s;
}

#endif /* GDRC_KMOD_TEST_H */
