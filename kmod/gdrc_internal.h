/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gdrc_internal.h - state shared by the files of gdrcache.ko.
 */
#ifndef GDRC_INTERNAL_H
#define GDRC_INTERNAL_H

#include <linux/atomic.h>
#include <linux/mm_types.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/uidgid.h>
#include <linux/wait.h>

#include "uapi/gdrc_ioctl.h"

/* Lowest user-space ABI version this module accepts. */
#define GDRC_MIN_USER_VERSION	GDRC_KMOD_VERSION_MAKE(1, 0)

extern unsigned int gdrc_max_subs_per_file;
extern unsigned long long gdrc_max_pinned_bytes_per_file;
extern unsigned long long gdrc_max_pinned_bytes_per_user;

struct gdrc_pin;

/*
 * One subscription: an mmu interval notifier on the opener's mm, and the
 * slot of the generation page it bumps.
 */
struct gdrc_sub {
	struct mmu_interval_notifier notifier;
	struct gdrc_file *gf;		/* owner; outlives the notifier */
	u64 handle;
	u32 slot;
	/*
	 * Serialises the generation bump and mmu_interval_set_seq() between
	 * invalidate callbacks that run concurrently on one range (munmap
	 * holds mmap_lock for write, but madvise(DONTNEED) only for read).
	 * A spinlock: the callback must not sleep.  It will also be the lock
	 * that mmu_interval_read_retry() pairs with once pinning comes.
	 */
	spinlock_t lock;
};

/* Per open file of /dev/gdrcache. */
struct gdrc_file {
	/*
	 * The opener's mm (mmgrab'ed: the struct stays, not the address
	 * space).  Only this mm may subscribe or map the generation page.
	 */
	struct mm_struct *mm;
	/*
	 * The opener's uid (current_uid() at open), charged for this file's
	 * pinned bytes in the per-user table of gdrc_pin.c, whoever later
	 * releases the pins (fd passed, close in another process).
	 */
	kuid_t uid;
	/*
	 * The generation page: GDRC_MAX_SLOTS __u64 words, zeroed at open,
	 * mapped read-only into user space, written only by the invalidate
	 * callbacks (WRITE_ONCE) and by SUBSCRIBE (reset of a fresh slot).
	 */
	struct page *gen_page;
	__u64 *gen;

	/* Invalidations since the last read(); wakes @wq when raised. */
	atomic64_t events;
	wait_queue_head_t wq;

	/*
	 * @lock protects @subs, @nr_subs, @pins, @nr_pins, @pinned_bytes and
	 * @next_handle.  A slot is free when both @subs and @pins are NULL
	 * there; handles of both kinds come from @next_handle.  Lock order:
	 * gf->lock, then mmap_lock (mmu_interval_notifier_insert may take
	 * it).  So nothing that runs under mmap_lock (mmap, faults, the
	 * invalidate callback) may take gf->lock.
	 */
	struct mutex lock;
	struct gdrc_sub *subs[GDRC_MAX_SLOTS];
	unsigned int nr_subs;
	struct gdrc_pin *pins[GDRC_MAX_SLOTS];
	unsigned int nr_pins;
	u64 pinned_bytes;
	u64 next_handle;
};

long gdrc_subscribe(struct gdrc_file *gf, void __user *uarg);
long gdrc_unsubscribe(struct gdrc_file *gf, void __user *uarg);
void gdrc_release_subs(struct gdrc_file *gf);

/* A handle carries its slot in its low bits, above them a per-file count. */
#define GDRC_SLOT_BITS	9
#define GDRC_SLOT_MASK	((1ULL << GDRC_SLOT_BITS) - 1)

/* gdrc_pin.c */
long gdrc_pin(struct gdrc_file *gf, void __user *uarg);
long gdrc_unpin(struct gdrc_file *gf, void __user *uarg);
long gdrc_query(struct gdrc_file *gf, void __user *uarg);
void gdrc_release_pins(struct gdrc_file *gf);
void gdrc_pin_exit(void);

#endif /* GDRC_INTERNAL_H */
