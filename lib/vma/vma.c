// SPDX-License-Identifier: BSD-3-Clause
/*
 * vma.c - the kind of mapping that holds a host range (vma.h).
 *
 * Two ways to ask the kernel, tried in this order:
 *   - PROCMAP_QUERY (Linux 6.11): an ioctl on an open /proc/self/maps
 *     returns the mapping that covers an address and its flags, without
 *     producing the text of the list (about 0.6 us a
 *     call on a 2-core x86-64 VM, one call per mapping the range
 *     spans);
 *   - the text of /proc/self/maps, read from its start until the range
 *     is passed (tens of microseconds, growing with the number of
 *     mappings below the range).
 * The cache asks only on a miss that would cache, and remembers the
 * private runs it was told of until an event touches them (cache/miss.c),
 * so the cost lands on the first miss in a mapping.
 *
 * A mapping counts as private when it is not shared: anonymous memory,
 * anonymous huge pages, and private mappings of files (a program's .data
 * and .bss), whose pages copied on write only a truncation of the file
 * takes (a gap docs/hooks.md lists).  Shared mappings' pages can be
 * punched or truncated through the file, or taken by another process.
 *
 * Locks: none.  vma_fd is opened once (a compare-and-swap settles two
 * threads opening it at once) and closed in a fork child, whose
 * /proc/self is another process.  No allocation: the callers may hold a
 * cache's write lock.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "gdrc_int.h"
#include "log/log.h"
#include "vma/vma.h"

/* The kernel's interface (linux/fs.h since 6.11), declared here: the
 * build machine's headers may be older than the kernel it runs on. */
struct vma_procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};

#define VMA_PROCMAP_QUERY _IOWR('f', 17, struct vma_procmap_query)
#define VMA_PROCMAP_SHARED 0x08

enum { VMA_TRY_QUERY, VMA_MAPS_TEXT, VMA_NONE };

static _Atomic int vma_fd = -1;
static _Atomic int vma_method = VMA_TRY_QUERY;
static char vma_why[128]; /* written once, before vma_method = VMA_NONE */
static pthread_once_t vma_atfork_once = PTHREAD_ONCE_INIT;

static void vma_atfork_child(void)
{
	int fd = atomic_exchange(&vma_fd, -1);

	if (fd >= 0)
		close(fd);
}

static void vma_atfork_install(void)
{
	if (pthread_atfork(NULL, NULL, vma_atfork_child))
		gdrc_warn("pthread_atfork failed: a fork child would ask its parent's /proc/self/maps");
}

/* The shared descriptor of /proc/self/maps, opened at the first call.
 * @return it, or -1 (errno set). */
static int vma_open(void)
{
	int fd = atomic_load(&vma_fd), mine, expect = -1;

	if (fd >= 0)
		return fd;
	pthread_once(&vma_atfork_once, vma_atfork_install);
	mine = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (mine < 0)
		return -1;
	if (atomic_compare_exchange_strong(&vma_fd, &expect, mine))
		return mine;
	close(mine); /* another thread's is in */
	return expect;
}

static void vma_give_up(const char *what, int err)
{
	snprintf(vma_why, sizeof(vma_why), "unavailable: %s: %s", what,
		 strerror(err));
	atomic_store(&vma_method, VMA_NONE);
}

/* A walk over the mappings of [start, end), at cur. */
struct vma_walk {
	uintptr_t start, end, cur, lo, hi;
	enum gdrc_vma_kind kind;
};

/* Fold one mapping [vs, ve), shared or not, into the walk.
 * @return 1 to go on at ve, 0 done (w->kind set). */

static int vma_step(struct vma_walk *w, uintptr_t vs, uintptr_t ve,
		    int private)
{
	if (vs > w->cur) {
		w->kind = GDRC_VMA_UNMAPPED;
		return 0;
	}
	if (!private) {
		w->kind = GDRC_VMA_SHARED;
		return 0;
	}
	if (w->cur == w->start)
		w->lo = vs;
	w->hi = ve;
	w->cur = ve;
	if (w->cur >= w->end) {
		w->kind = GDRC_VMA_PRIVATE;
		return 0;
	}
	return 1;
}

/* PROCMAP_QUERY, one mapping at a time.  @return 0 answered (w->kind),
 * or -1: the kernel has no such ioctl. */
static int vma_query(int fd, struct vma_walk *w)
{
	for (;;) {
		struct vma_procmap_query q = {
			.size = sizeof(q),
			.query_addr = w->cur,
		};

		if (ioctl(fd, VMA_PROCMAP_QUERY, &q)) {
			if (errno == ENOENT) {
				w->kind = GDRC_VMA_UNMAPPED;
				return 0;
			}
			if (errno == ENOTTY || errno == EINVAL ||
			    errno == EOPNOTSUPP)
				return -1;
			/* Anything else: not known to be private. */
			w->kind = GDRC_VMA_SHARED;
			return 0;
		}
		if (!vma_step(w, (uintptr_t)q.vma_start, (uintptr_t)q.vma_end,
			      !(q.vma_flags & VMA_PROCMAP_SHARED)))
			return 0;
	}
}

/*
 * One line of /proc/self/maps: "start-end perms offset major:minor inode
 * name", of which the range and the shared bit of perms are read.
 * @return 1 parsed, 0 not a mapping line.
 */
static int vma_parse_line(const char *line, uintptr_t *vs, uintptr_t *ve,
			  int *private)
{
	unsigned long s, e;
	char perms[8];

	if (sscanf(line, "%lx-%lx %7s", &s, &e, perms) < 3 ||
	    strlen(perms) < 4)
		return 0;
	*vs = s;
	*ve = e;
	*private = perms[3] != 's';
	return 1;
}

/* The text of /proc/self/maps, read from its start with a descriptor of
 * this call's own (the shared one's file position would be every
 * thread's).  @return 0 answered, or -1 (errno). */
static int vma_maps_text(struct vma_walk *w)
{
	char buf[8192];
	size_t have = 0;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	w->kind = GDRC_VMA_UNMAPPED; /* if the list ends first */
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
		char *line = buf, *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = '\0';
		while ((nl = strchr(line, '\n'))) {
			uintptr_t vs, ve;
			int private;

			*nl = '\0';
			if (vma_parse_line(line, &vs, &ve, &private) &&
			    ve > w->cur && !vma_step(w, vs, ve, private)) {
				close(fd);
				return 0;
			}
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1) {
			/* A line longer than the buffer (a path never is):
			 * not known to be private. */
			w->kind = GDRC_VMA_SHARED;
			break;
		}
	}
	close(fd);
	return 0;
}

enum gdrc_vma_kind gdrc_vma_kind(uintptr_t start, uintptr_t end,
				 uintptr_t *lo_p, uintptr_t *hi_p)
{
	struct vma_walk w = { .start = start, .end = end, .cur = start,
			      .kind = GDRC_VMA_UNKNOWN };
	int method = atomic_load_explicit(&vma_method, memory_order_relaxed);

	if (method == VMA_TRY_QUERY) {
		int fd = vma_open();

		if (fd < 0) {
			vma_give_up("open /proc/self/maps", errno);
		} else if (vma_query(fd, &w)) {
			atomic_store(&vma_method, VMA_MAPS_TEXT);
			method = VMA_MAPS_TEXT;
		}
	}
	if (method == VMA_MAPS_TEXT && vma_maps_text(&w))
		vma_give_up("read /proc/self/maps", errno);
	if (w.kind == GDRC_VMA_PRIVATE) {
		*lo_p = w.lo;
		*hi_p = w.hi;
	} else {
		*lo_p = start;
		*hi_p = end;
	}
	return w.kind;
}

const char *gdrc_vma_method(void)
{
	switch (atomic_load(&vma_method)) {
	case VMA_TRY_QUERY:
		return "PROCMAP_QUERY";
	case VMA_MAPS_TEXT:
		return "/proc/self/maps";
	}
	return vma_why;
}

void gdrc_vma_force_text(int on)
{
	atomic_store(&vma_method, on ? VMA_MAPS_TEXT : VMA_TRY_QUERY);
}
