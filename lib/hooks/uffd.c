// SPDX-License-Identifier: BSD-3-Clause
/*
 * uffd.c - host memory events from userfaultfd, for GDRC_MEM_HOOKS=uffd:
 * nothing patched, range by range.
 *
 * Purpose: report the unmap, removal (madvise DONTNEED, REMOVE, FREE)
 * and move (mremap) of every range the cache asked to watch, through the
 * same subscribers and the same busy window as the glibc hooks
 * (hooks.c), so that the cache's guarantee holds unchanged: once munmap
 * has returned, no get returns a registration made before it for that
 * range.
 *
 * How the guarantee carries over.  The kernel makes the unmapping
 * thread wait until its event has been read from the descriptor (for
 * UNMAP, REMOVE and REMAP events).  The reader thread enters the busy
 * window (gdrc_hooks_enter) after poll says an event is there and before
 * it reads, and leaves it after every event read has been dispatched.  So
 * when munmap returns, either the window is open (a get goes slow and
 * waits for it: gdrc_hooks_wait_idle) or the event is queued in every
 * subscribing cache.  The glibc hooks' order, with the reader in the
 * unmapping thread's place.
 *
 * Ranges are registered in write-protect mode and never write-protected:
 * no page fault of the program ever comes here (missing-page mode would
 * turn first touches into round trips to the reader, and with
 * UFFD_USER_MODE_ONLY a system call writing to such a page would fail
 * with EFAULT).  Events are per descriptor, whatever the mode.  A range
 * stays registered until it is unmapped (registrations overlap, and
 * unregistering one range would blind another's); each later unmap or
 * removal of it waits for the reader.  File mappings other than shmem
 * cannot be registered, and a range with a hole in it is not watched
 * (gdrc_uffd_watch): the cache serves those uncached.
 *
 * Threads: one reader, made at start, all signals blocked; it never
 * allocates, logs or takes a lock while an event is in hand, and never
 * waits for a cache queue's lock (gdrc_invq_nowait_thread: its posts try
 * it a few times, then mark "everything"), whose holder may be an
 * unmapping thread that waits in the kernel for this reader, perhaps
 * from a signal handler that interrupted it inside a post or a drain.
 * A fork child has no reader, and its mappings no registration (no
 * UFFD_FEATURE_EVENT_FORK: the kernel drops them from the child).
 *
 * Depends on hooks.c (dispatch, busy window), log/, and cache/invq.h
 * for gdrc_invq_nowait_thread alone.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cache/invq.h"
#include "gdrc_int.h"
#include "hooks_int.h"
#include "log/log.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

#define UFFD_FEATURES                                                         \
	(UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE |               \
	 UFFD_FEATURE_EVENT_REMAP)

static int uffd_fd = -1;
static atomic_int uffd_on;             /* started and self tested */
static _Atomic uint64_t uffd_events;   /* ranges reported */
static pthread_once_t uffd_once = PTHREAD_ONCE_INIT;
static char uffd_why[160];             /* why not, when uffd_on is 0 */

/* The reader: every event read is dispatched before the window closes. */
static void *uffd_reader(void *arg)
{
	struct uffd_msg msg[16];

	(void)arg;
	gdrc_invq_nowait_thread();
	for (;;) {
		struct pollfd p = { .fd = uffd_fd, .events = POLLIN };
		unsigned s;
		ssize_t n;

		if (poll(&p, 1, -1) < 0 || !(p.revents & POLLIN))
			continue;
		s = gdrc_hooks_enter();
		n = read(uffd_fd, msg, sizeof(msg));
		for (ssize_t i = 0; i < n / (ssize_t)sizeof(msg[0]); i++) {
			uintptr_t start, len;

			switch (msg[i].event) {
			case UFFD_EVENT_UNMAP:
			case UFFD_EVENT_REMOVE:
				start = msg[i].arg.remove.start;
				len = msg[i].arg.remove.end - start;
				break;
			case UFFD_EVENT_REMAP:
				start = msg[i].arg.remap.from;
				len = msg[i].arg.remap.len;
				break;
			default:
				continue; /* no other event is asked for */
			}
			atomic_fetch_add_explicit(&uffd_events, 1,
						  memory_order_relaxed);
			gdrc_hooks_report_src(start, len, GDRC_HOOKS_SRC_UFFD);
		}
		gdrc_hooks_leave(s);
	}
	return NULL;
}

/* The descriptor with the events asked for.  @return 0, or -1 (why). */
static int uffd_open(void)
{
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURES };
	int fd;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	/* Unprivileged (vm.unprivileged_userfaultfd=0): user-mode faults
	 * only, which is all write-protect mode never asks for anyway. */
	if (fd < 0 && errno == EPERM)
		fd = (int)syscall(SYS_userfaultfd,
				  O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0) {
		snprintf(uffd_why, sizeof(uffd_why), "userfaultfd: %s",
			 strerror(errno));
		return -1;
	}
	if (ioctl(fd, UFFDIO_API, &api) ||
	    (api.features & UFFD_FEATURES) != UFFD_FEATURES) {
		snprintf(uffd_why, sizeof(uffd_why),
			 "userfaultfd: unmap, remove and remap events unsupported (%s)",
			 strerror(errno));
		close(fd);
		return -1;
	}
	uffd_fd = fd;
	return 0;
}

/* One page registered and unmapped must be reported.  @return 0 or -1. */
static int uffd_self_test(void)
{
	uint64_t before = atomic_load(&uffd_events);
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || gdrc_uffd_watch((uintptr_t)p, 4096)) {
		snprintf(uffd_why, sizeof(uffd_why),
			 "userfaultfd: cannot register anonymous memory (%s)",
			 strerror(errno));
		if (p != MAP_FAILED)
			munmap(p, 4096);
		return -1;
	}
	munmap(p, 4096); /* returns once the reader read the event */
	gdrc_hooks_wait_idle();
	if (atomic_load(&uffd_events) == before) {
		snprintf(uffd_why, sizeof(uffd_why),
			 "userfaultfd: an unmap of a registered page was not reported");
		return -1;
	}
	return 0;
}

/* A fork child: the descriptor is its parent's (its registrations would
 * land in the parent's address space) and no reader runs here. */
static void uffd_atfork_child(void)
{
	if (uffd_fd >= 0)
		close(uffd_fd);
	uffd_fd = -1;
	atomic_store(&uffd_on, 0);
	snprintf(uffd_why, sizeof(uffd_why),
		 "userfaultfd: a fork child (the descriptor is its parent's)");
}

static void uffd_start_once(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int err;

	if (uffd_open())
		goto fail;
	if (pthread_atfork(NULL, NULL, uffd_atfork_child)) {
		snprintf(uffd_why, sizeof(uffd_why),
			 "userfaultfd: pthread_atfork failed");
		goto fail_fd;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	err = pthread_create(&t, &attr, uffd_reader, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		snprintf(uffd_why, sizeof(uffd_why),
			 "userfaultfd: no reader thread (%s)", strerror(err));
		goto fail_fd;
	}
	if (uffd_self_test())
		goto fail; /* the reader stays, idle: nothing is registered */
	atomic_store(&uffd_on, 1);
	gdrc_debug("userfaultfd watches cached host ranges (fd %d)", uffd_fd);
	return;
fail_fd:
	close(uffd_fd);
	uffd_fd = -1;
fail:
	gdrc_debug("%s", uffd_why);
}

gdrc_status_t gdrc_uffd_start(void)
{
	pthread_once(&uffd_once, uffd_start_once);
	return atomic_load(&uffd_on) ? GDRC_OK : GDRC_ERR_UNSUPPORTED;
}

int gdrc_uffd_watch(uintptr_t start, size_t len)
{
	struct uffdio_register reg = {
		.range = { .start = start, .len = len },
		.mode = UFFDIO_REGISTER_MODE_WP,
	};

	if (uffd_fd < 0)
		return -ENODEV;
	if (ioctl(uffd_fd, UFFDIO_REGISTER, &reg))
		return -errno;
	/* UFFDIO_REGISTER registers the mappings in the range and passes
	 * over a hole without an error: a page mapped into it afterwards
	 * is not watched, and a registration over it would never see that
	 * page go (a miss widened over a neighbour's range while another
	 * thread was between munmap and mmap there: 1 % of the TSan remap
	 * stress runs served such a registration stale).  So a range with
	 * a hole is not watched.  msync(MS_ASYNC) writes nothing back and
	 * fails with ENOMEM when part of the range is unmapped. */
	if (msync((void *)start, len, MS_ASYNC))
		return -errno;
	return 0;
}

const char *gdrc_uffd_reason(void)
{
	return atomic_load(&uffd_on) ? NULL :
	       uffd_why[0]	     ? uffd_why :
				       "userfaultfd: not started";
}
