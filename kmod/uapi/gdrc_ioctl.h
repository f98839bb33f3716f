/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause */
/*
 * gdrc_ioctl.h - kernel/user ABI of gdrcache.ko (/dev/gdrcache).
 *
 * Included by the module and by libgdrcache.  It uses only <linux/types.h>
 * and <linux/ioctl.h>, so it builds in user space as it is.
 *
 * Rules of this ABI:
 *  - Every struct is made of __u64 and __u32 fields, with explicit padding,
 *    so that its layout is the same for 32- and 64-bit callers.
 *  - Fields marked "in" are read by the module, "out" are written by it.
 *    Fields marked "must be 0" are checked: a nonzero value gives -EINVAL,
 *    so that they can carry meaning in a later version.
 *  - A struct never changes once released: new behaviour comes as a new
 *    command number (and is advertised by the version).
 *  - Versions are (major << 16) | minor.  GDRC_IOCTL_VERSION lets each side
 *    check the other: the user says which module version it needs at least,
 *    the module says which user version it accepts at least.
 *
 * Memory model of the generation page (see GDRC_IOCTL_SUBSCRIBE):
 * mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) maps one page of
 * GDRC_MAX_SLOTS __u64 generation words, one per subscription slot.  The
 * module increments a slot's word each time the kernel invalidates any part
 * of that subscription's range (munmap, madvise(MADV_DONTNEED), mremap,
 * copy-on-write, page migration, mprotect, process exit...).  The page is
 * read-only for user space: a writable mapping is refused with -EPERM.
 * Read a word with a single aligned 64-bit load (e.g. __atomic_load_n with
 * __ATOMIC_ACQUIRE).
 *
 * Events: poll() on the fd reports POLLIN when at least one invalidation
 * happened since the last read().  read() needs a buffer of at least 8 bytes
 * and returns exactly 8: a __u64 count of invalidation events since the
 * previous read() (resetting it to 0).  The count says *that* something
 * happened, not where: scan the generation words of the live slots to find
 * which.  read() blocks while the count is 0, or fails with -EAGAIN under
 * O_NONBLOCK.
 */
#ifndef GDRC_IOCTL_H
#define GDRC_IOCTL_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define GDRC_DEVICE_NAME	"gdrcache"
#define GDRC_DEVICE_PATH	"/dev/gdrcache"

/* ioctl type byte of /dev/gdrcache. */
#define GDRC_IOCTL_MAGIC	0xD6

#define GDRC_KMOD_VERSION_MAKE(major, minor)	(((major) << 16) | (minor))
#define GDRC_KMOD_VERSION_MAJOR(v)		((v) >> 16)
#define GDRC_KMOD_VERSION_MINOR(v)		((v) & 0xffff)

/* The ABI version this header describes. */
/* 1.1: GDRC_IOCTL_PIN, _UNPIN and _QUERY. */
#define GDRC_KMOD_ABI_VERSION	GDRC_KMOD_VERSION_MAKE(1, 1)

/* Number of __u64 generation words in the mapped page. */
#define GDRC_MAX_SLOTS		512
/* Size of the generation page mapping (offset 0 only). */
#define GDRC_GEN_PAGE_SIZE	(GDRC_MAX_SLOTS * 8)

/*
 * GDRC_IOCTL_VERSION: mutual version check.  Any process may issue it.
 * The out fields are always written.  The call fails with -EPROTO when
 * user_version < min_user_version or kernel_version < min_kernel_version;
 * the caller can then still read both out fields to say why.
 */
struct gdrc_version_args {
	__u32 user_version;		/* in: caller's GDRC_KMOD_ABI_VERSION */
	__u32 min_kernel_version;	/* in: lowest module version accepted */
	__u32 kernel_version;		/* out: module's ABI version */
	__u32 min_user_version;		/* out: lowest caller version accepted */
	__u32 flags;			/* in: must be 0 */
	__u32 reserved;			/* in: must be 0 */
};

/*
 * GDRC_IOCTL_SUBSCRIBE: watch [start, start + length) of the caller's
 * address space.  Only the process that opened the fd (same mm) may
 * subscribe: any other gets -EACCES.  The range need not be mapped.
 *
 * start and length must be page aligned, length > 0, and the range must
 * neither wrap nor exceed the user address space: otherwise -EINVAL.
 * When the fd already holds max_subs_per_file subscriptions (module
 * parameter, at most GDRC_MAX_SLOTS): -ENOSPC.
 *
 * On success the slot's generation word has been reset to 0 before the
 * watch started; every later invalidation of the range increments it.
 */
struct gdrc_subscribe_args {
	__u64 start;		/* in: page-aligned start address */
	__u64 length;		/* in: page-aligned length in bytes, > 0 */
	__u32 flags;		/* in: must be 0 */
	__u32 reserved0;	/* in: must be 0 */
	__u64 reserved1;	/* in: must be 0 */
	__u64 handle;		/* out: opaque, never 0, never reused by fd */
	__u32 slot;		/* out: index of the generation word */
	__u32 pad;		/* out: written as 0 */
};

/*
 * GDRC_IOCTL_UNSUBSCRIBE: stop watching.  When it returns, the slot's word
 * no longer changes and the slot may be handed out again by a later
 * SUBSCRIBE.  Unknown handle: -EINVAL.  Other mm than the opener: -EACCES.
 * close() of the last reference to the fd drops all subscriptions.
 */
struct gdrc_unsubscribe_args {
	__u64 handle;		/* in: from GDRC_IOCTL_SUBSCRIBE */
	__u32 flags;		/* in: must be 0 */
	__u32 reserved;		/* in: must be 0 */
};

#define GDRC_IOCTL_NR_VERSION		0x00
#define GDRC_IOCTL_NR_SUBSCRIBE		0x01
#define GDRC_IOCTL_NR_UNSUBSCRIBE	0x02
#define GDRC_IOCTL_NR_PIN		0x10
#define GDRC_IOCTL_NR_UNPIN		0x11
#define GDRC_IOCTL_NR_QUERY		0x12

/*
 * GPU memory pinning through NVIDIA's nvidia_p2p API (ABI 1.1).
 *
 * The module resolves nvidia_p2p_* at the first PIN, so it loads without
 * nvidia.ko.  A module built without nv-p2p.h answers -EOPNOTSUPP to PIN,
 * UNPIN and QUERY; one built with it answers -ENODEV to PIN while no
 * provider of the symbols is loaded.
 *
 * GDRC_IOCTL_PIN: pin [va, va + length) of GPU memory of the caller (the
 * opener's mm only: else -EACCES).  va and length must be 64 KiB aligned,
 * length > 0, no wrap: else -EINVAL.  flags: GDRC_PIN_PERSISTENT or 0, any
 * other bit -EINVAL; reserved fields must be 0.  -ENOSPC when the file's
 * pinned bytes would exceed max_pinned_bytes_per_file (module parameter)
 * or no generation slot is free.  -EDQUOT when the bytes pinned through
 * all files opened by the same uid (the opener's, whoever pins or closes
 * later) would exceed max_pinned_bytes_per_user (module parameter, 0: no
 * limit); a revoked pin counts until UNPIN or close, as it does against
 * max_pinned_bytes_per_file.  -EPROTO when the provider returns a page
 * table of an unknown major version.  Errors of nvidia_p2p_get_pages pass
 * through (-ENOMEM, -EINVAL, -ENOTSUPP...).
 *
 * A pin takes one slot of the generation page (shared with subscriptions);
 * its word is reset to 0 at PIN and incremented, with an event for poll()
 * and read(), when the NVIDIA driver revokes the pin (its free callback,
 * e.g. on cudaFree of non-persistent pinned memory).  A revoked pin keeps
 * its handle and slot until UNPIN; QUERY reports GDRC_PIN_REVOKED.
 * Persistent pins are never revoked.  close() unpins what is left.
 */
#define GDRC_PIN_PERSISTENT	(1U << 0)	/* PIN flags, QUERY state */
#define GDRC_PIN_REVOKED	(1U << 1)	/* QUERY state */

/* Alignment of va and length (the GPU page). */
#define GDRC_PIN_ALIGN		(64ULL * 1024)

#define GDRC_GPU_UUID_LEN	16

struct gdrc_pin_args {
	__u64 va;		/* in: GPU virtual address, 64 KiB aligned */
	__u64 length;		/* in: bytes, 64 KiB aligned, > 0 */
	__u32 flags;		/* in: GDRC_PIN_PERSISTENT or 0 */
	__u32 reserved0;	/* in: must be 0 */
	__u64 reserved1;	/* in: must be 0 */
	__u64 handle;		/* out: opaque, never 0, never reused by fd */
	__u32 page_size;	/* out: GPU page size in bytes */
	__u32 entries;		/* out: number of GPU pages */
	__u8 gpu_uuid[GDRC_GPU_UUID_LEN];	/* out */
	__u32 slot;		/* out: index of the generation word */
	__u32 pad;		/* out: written as 0 */
};

/* GDRC_IOCTL_UNPIN: unknown handle: -EINVAL.  Also after revocation. */
struct gdrc_unpin_args {
	__u64 handle;		/* in: from GDRC_IOCTL_PIN */
	__u32 flags;		/* in: must be 0 */
	__u32 reserved;		/* in: must be 0 */
};

/* GDRC_IOCTL_QUERY: what PIN returned, plus the pin's state. */
struct gdrc_query_args {
	__u64 handle;		/* in: from GDRC_IOCTL_PIN */
	__u32 flags;		/* in: must be 0 */
	__u32 reserved;		/* in: must be 0 */
	__u64 va;		/* out */
	__u64 length;		/* out */
	__u32 page_size;	/* out: bytes */
	__u32 entries;		/* out */
	__u8 gpu_uuid[GDRC_GPU_UUID_LEN];	/* out */
	__u32 slot;		/* out */
	__u32 state;		/* out: GDRC_PIN_PERSISTENT | GDRC_PIN_REVOKED */
};

#define GDRC_IOCTL_VERSION \
	_IOWR(GDRC_IOCTL_MAGIC, GDRC_IOCTL_NR_VERSION, struct gdrc_version_args)
#define GDRC_IOCTL_SUBSCRIBE \
	_IOWR(GDRC_IOCTL_MAGIC, GDRC_IOCTL_NR_SUBSCRIBE, \
	      struct gdrc_subscribe_args)
#define GDRC_IOCTL_UNSUBSCRIBE \
	_IOW(GDRC_IOCTL_MAGIC, GDRC_IOCTL_NR_UNSUBSCRIBE, \
	     struct gdrc_unsubscribe_args)
#define GDRC_IOCTL_PIN \
	_IOWR(GDRC_IOCTL_MAGIC, GDRC_IOCTL_NR_PIN, struct gdrc_pin_args)
#define GDRC_IOCTL_UNPIN \
	_IOW(GDRC_IOCTL_MAGIC, GDRC_IOCTL_NR_UNPIN, struct gdrc_unpin_args)
#define GDRC_IOCTL_QUERY \
	_IOWR(GDRC_IOCTL_MAGIC, GDRC_IOCTL_NR_QUERY, struct gdrc_query_args)

#endif /* GDRC_IOCTL_H */
