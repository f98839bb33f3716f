/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kchan.h - the user side of gdrcache.ko's invalidation channel.
 *
 * When /dev/gdrcache is there and its ABI matches, each cached host
 * registration is subscribed: the module bumps the registration's word in
 * a read-only page mapped from the device whenever the kernel invalidates
 * any part of the range (munmap, madvise, mremap, COW, migration, also
 * raw system calls that no glibc hook sees).  A hit then checks its
 * registration with one load.  Each open file has GDRC_MAX_SLOTS words.
 *
 * Depends on log/ and kmod/uapi/gdrc_ioctl.h.  Not hook-safe; the
 * subscribe and unsubscribe calls are system calls, made outside any
 * cache lock.
 */
#ifndef GDRC_KCHAN_H
#define GDRC_KCHAN_H

#include <stddef.h>
#include <stdint.h>

#include <gdrcache.h>

/* Where the module's device lives (GDRC_DEVICE_PATH of the uapi). */
#define GDRC_KCHAN_PATH "/dev/gdrcache"

struct gdrc_kchan {
	int fd;                       /* /dev/gdrcache */
	const volatile uint64_t *gen; /* generation words, read-only */
	size_t gen_len;               /* bytes mapped */
};

/*
 * Open the device at path and check versions both ways.
 * @return GDRC_OK; GDRC_ERR_NO_DEVICE if there is no such device (why
 *         says so); GDRC_ERR_KMOD if it refused us or we refused it.
 */
gdrc_status_t gdrc_kchan_open(const char *path, struct gdrc_kchan **ch_p,
			      char *why, size_t why_len);

void gdrc_kchan_close(struct gdrc_kchan *ch);

/* Watch [start, start + len) (page aligned).  @return 0 or -errno. */
int gdrc_kchan_subscribe(struct gdrc_kchan *ch, uintptr_t start, size_t len,
			 int *slot_p, uint64_t *handle_p);

void gdrc_kchan_unsubscribe(struct gdrc_kchan *ch, uint64_t handle);

/*
 * Pin GPU memory [va, va + len) (64 KiB aligned) through the module's
 * nvidia_p2p provider; its word moves when NVIDIA revokes the pin (the
 * memory was freed).  @return 0 or -errno (ENODEV: no provider;
 * EOPNOTSUPP: module built without nv-p2p.h).
 */
int gdrc_kchan_pin(struct gdrc_kchan *ch, uintptr_t va, size_t len,
		   int *slot_p, uint64_t *handle_p);

void gdrc_kchan_unpin(struct gdrc_kchan *ch, uint64_t handle);

#endif /* GDRC_KCHAN_H */
