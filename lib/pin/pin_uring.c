// SPDX-License-Identifier: BSD-3-Clause
/*
 * pin_uring.c - host memory registered as fixed buffers of an io_uring
 * (the kernel's storage registration: READ_FIXED and WRITE_FIXED on such
 * a buffer skip the per-I/O page pinning).
 *
 * A context bound to a ring owns a sparse buffer table on it, registered
 * at open and dropped at close; each registration is one slot of it, set
 * with the range and cleared at dereg.  The slot's index is the
 * registration's lkey.  The table is the cache's alone: the program
 * registers no table of its own on that ring meanwhile (the kernel
 * refuses a second one, EBUSY, which open reports).
 *
 * Our own reference.  Open takes a dup of the ring's fd and makes every
 * call on it, never on the program's: so the table and every page it
 * pins go with close (gdrc_fini), whatever the program did to its ring,
 * and a slot is never set or cleared on another ring that reused the
 * program's fd number.  Each registration first checks, with kcmp, that
 * the program's fd still names our ring: a ring torn down (or set up
 * again in the same struct) gets GDRC_ERR_NO_DEVICE, not slots of a ring
 * nobody submits to.  Where kcmp is refused (a seccomp profile), only a
 * closed fd is seen.
 *
 * Tags are 0: a tagged buffer makes the kernel post a completion when it
 * drops it, into the program's own completion queue.  Clearing a slot
 * while reads or writes on it are in flight is safe (the kernel drops
 * the old pages once they complete); the cache clears one only when no
 * reference is held anyway.
 *
 * Refusals: a range over 1 GiB (the kernel's bound on one buffer) is
 * GDRC_ERR_UNSUPPORTED before any call; no free slot is GDRC_ERR_LIMIT
 * and ENOMEM (RLIMIT_MEMLOCK, charged unless CAP_IPC_LOCK) is
 * GDRC_ERR_NO_MEMORY, both of which make the cache evict and retry once;
 * EFAULT (an unmapped range) and anything else is GDRC_ERR_IO.
 *
 * Locks: u->lock guards the free-slot stack only, never held across a
 * system call.  Called outside the cache lock.  fork: a child inherits
 * our fd, which names the parent's ring; the cache never registers or
 * releases in a child, and close there only closes the copy.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/kcmp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log/log.h"
#include "pin.h"

struct gdrc_pin_uring {
	int ring_fd;           /* the program's fd for the ring, as given */
	struct io_uring own;   /* ring_fd: our dup; all else zero */
	int kcmp_ok;           /* kcmp answers here */
	uint32_t nslots;
	pthread_mutex_t lock;  /* guards nfree, free */
	uint32_t nfree;
	uint32_t free[];       /* free slots, a stack */
};

/* Does the program's fd still name our ring?  (Its number as gdrc_init
 * saw it: the program's struct io_uring is not read after open, as it
 * may be gone with the ring.) */
static int uring_same(struct gdrc_pin_uring *u)
{
	int fd = u->ring_fd;

	if (u->kcmp_ok)
		return syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, fd,
			       u->own.ring_fd) == 0;
	return fcntl(fd, F_GETFD) >= 0;
}

static gdrc_status_t uring_errno(int err, const char *what,
				 const struct gdrc_pin_reg *reg)
{
	gdrc_debug("io_uring %s of %#lx+%zu failed: %s", what,
		   (unsigned long)reg->addr, reg->length, strerror(err));
	return err == ENOMEM ? GDRC_ERR_NO_MEMORY : GDRC_ERR_IO;
}

static gdrc_status_t pin_uring_reg(void *be, struct gdrc_pin_reg *reg)
{
	struct gdrc_pin_uring *u = be;
	struct iovec iov = { (void *)reg->addr, reg->length };
	__u64 tag = 0;
	uint32_t slot;
	int ret;

	if (reg->length > GDRC_PIN_URING_BUF_MAX) {
		gdrc_debug("io_uring: %#lx+%zu is over the kernel's 1 GiB a "
			   "fixed buffer", (unsigned long)reg->addr,
			   reg->length);
		return GDRC_ERR_UNSUPPORTED;
	}
	if (!uring_same(u)) {
		gdrc_debug("io_uring: the context's ring was torn down");
		return GDRC_ERR_NO_DEVICE;
	}
	pthread_mutex_lock(&u->lock);
	if (!u->nfree) {
		pthread_mutex_unlock(&u->lock);
		return GDRC_ERR_LIMIT;
	}
	slot = u->free[--u->nfree];
	pthread_mutex_unlock(&u->lock);

	ret = io_uring_register_buffers_update_tag(&u->own, slot, &iov, &tag,
						   1);
	if (ret != 1) {
		pthread_mutex_lock(&u->lock);
		u->free[u->nfree++] = slot;
		pthread_mutex_unlock(&u->lock);
		return uring_errno(ret < 0 ? -ret : EIO, "registration", reg);
	}
	reg->handle = (void *)(uintptr_t)(slot + 1); /* never NULL */
	reg->lkey = slot;
	reg->rkey = 0;
	return GDRC_OK;
}

static void pin_uring_dereg(void *be, struct gdrc_pin_reg *reg)
{
	struct gdrc_pin_uring *u = be;
	uint32_t slot = (uint32_t)((uintptr_t)reg->handle - 1);
	struct iovec iov = { NULL, 0 };
	__u64 tag = 0;
	int ret;

	ret = io_uring_register_buffers_update_tag(&u->own, slot, &iov, &tag,
						   1);
	if (ret != 1) {
		/* Left out of the free stack: a slot in an unknown state is
		 * never handed out again. */
		gdrc_warn("io_uring: clearing slot %u (%#lx+%zu) failed: %s",
			  slot, (unsigned long)reg->addr, reg->length,
			  strerror(ret < 0 ? -ret : EIO));
		return;
	}
	pthread_mutex_lock(&u->lock);
	u->free[u->nfree++] = slot;
	pthread_mutex_unlock(&u->lock);
}

const struct gdrc_pin_ops gdrc_pin_uring_ops = {
	.name = "io_uring",
	.backend = GDRC_BACKEND_IO_URING,
	.reg = pin_uring_reg,
	.dereg = pin_uring_dereg,
};

static gdrc_status_t open_refusal(int err, char *why, size_t why_len)
{
	switch (err) {
	case EBADF:
	case EOPNOTSUPP:
		snprintf(why, why_len, "the ring is not set up (its fd is no "
				       "io_uring)");
		return GDRC_ERR_INVALID_PARAM;
	case EBUSY:
		snprintf(why, why_len, "the ring already has a buffer table");
		return GDRC_ERR_BUSY;
	case EINVAL:
		snprintf(why, why_len, "the kernel has no sparse buffer tables "
				       "(5.19 and later)");
		return GDRC_ERR_UNSUPPORTED;
	case ENOMEM:
		snprintf(why, why_len, "no memory for the buffer table");
		return GDRC_ERR_NO_MEMORY;
	default:
		snprintf(why, why_len, "registering a buffer table: %s",
			 strerror(err));
		return GDRC_ERR_IO;
	}
}

gdrc_status_t gdrc_pin_uring_open(struct io_uring *ring, uint32_t slots,
				  struct gdrc_pin_uring **u_p, char *why,
				  size_t why_len)
{
	struct gdrc_pin_uring *u;
	gdrc_status_t status;
	int fd, ret;

#ifdef IORING_SETUP_SINGLE_ISSUER
	if (ring->flags & IORING_SETUP_SINGLE_ISSUER) {
		snprintf(why, why_len, "the ring is single-issuer: it takes "
				       "registrations from one thread, and "
				       "the cache releases slots from any");
		return GDRC_ERR_UNSUPPORTED;
	}
#endif
	fd = fcntl(ring->ring_fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return open_refusal(errno, why, why_len);
	u = calloc(1, sizeof(*u) + slots * sizeof(u->free[0]));
	if (!u) {
		close(fd);
		snprintf(why, why_len, "out of memory");
		return GDRC_ERR_NO_MEMORY;
	}
	u->ring_fd = ring->ring_fd;
	u->own.ring_fd = fd;
	u->nslots = slots;
	ret = io_uring_register_buffers_sparse(&u->own, slots);
	if (ret) {
		status = open_refusal(-ret, why, why_len);
		close(fd);
		free(u);
		return status;
	}
	u->kcmp_ok = syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, fd,
			     fd) == 0;
	if (!u->kcmp_ok)
		gdrc_debug("io_uring: kcmp refused (%s): a torn down ring is "
			   "seen only when its fd is closed",
			   strerror(errno));
	pthread_mutex_init(&u->lock, NULL);
	/* Slot 0 on top: the first registrations take the lowest. */
	for (uint32_t i = 0; i < slots; i++)
		u->free[i] = slots - 1 - i;
	u->nfree = slots;
	*u_p = u;
	return GDRC_OK;
}

void gdrc_pin_uring_close(struct gdrc_pin_uring *u, int forked)
{
	int ret;

	if (!u)
		return;
	if (!forked) {
		if (u->nfree != u->nslots)
			gdrc_warn("io_uring: %u slots still set at close",
				  u->nslots - u->nfree);
		ret = io_uring_unregister_buffers(&u->own);
		if (ret)
			gdrc_warn("io_uring: unregistering the buffer table "
				  "failed: %s", strerror(-ret));
		pthread_mutex_destroy(&u->lock);
	}
	/* A fork child's lock may be held by a thread it lacks: left. */
	close(u->own.ring_fd);
	free(u);
}
