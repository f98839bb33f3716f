// SPDX-License-Identifier: GPL-2.0
/*
 * gdrc_sub.c - subscriptions: mmu interval notifiers that bump a slot of
 * the generation page when the kernel invalidates a watched range.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "gdrc_internal.h"

static_assert(GDRC_MAX_SLOTS == 1 << GDRC_SLOT_BITS);

/*
 * gdrc_invalidate - the range of @mni is being invalidated.
 *
 * Context: runs in whichever task changes the mapping, between
 * invalidate_range_start and _end: munmap, mremap, madvise(MADV_DONTNEED),
 * a copy-on-write fault, fork (write-protecting the parent's pages), page
 * migration or compaction, reclaim, khugepaged, the OOM reaper, and
 * exit_mmap (event MMU_NOTIFY_RELEASE).  Often with mmap_lock held, and for
 * rmap-driven invalidations with page and i_mmap locks held.  When
 * mmu_notifier_range_blockable(@range) is false it must not block at all.
 *
 * So it must not sleep, allocate with GFP_KERNEL, take gf->lock or
 * mmap_lock, touch user memory, or call mmu_interval_notifier_insert() or
 * _remove().  It takes only the subscription's spinlock and the wait queue's
 * internal lock, never blocks, and so always returns true.
 */
static bool gdrc_invalidate(struct mmu_interval_notifier *mni,
			    const struct mmu_notifier_range *range,
			    unsigned long cur_seq)
{
	struct gdrc_sub *sub = container_of(mni, struct gdrc_sub, notifier);
	struct gdrc_file *gf = sub->gf;
	__u64 *word = &gf->gen[sub->slot];

	spin_lock(&sub->lock);
	mmu_interval_set_seq(mni, cur_seq);
	/* User space reads the word with one 64-bit load: no tearing. */
	WRITE_ONCE(*word, READ_ONCE(*word) + 1);
	spin_unlock(&sub->lock);

	/*
	 * Whoever sees the event count raised (read(), poll()) must then see
	 * the new generation word: order the word before the count.
	 */
	smp_wmb();
	atomic64_inc(&gf->events);
	wake_up_interruptible_poll(&gf->wq, EPOLLIN | EPOLLRDNORM);

	pr_debug("slot %u invalidated [%#lx, %#lx) event %d\n", sub->slot,
		 range->start, range->end, range->event);
	return true;
}

static const struct mmu_interval_notifier_ops gdrc_sub_ops = {
	.invalidate = gdrc_invalidate,
};

/* Called with gf->lock held; may sleep (waits for running callbacks). */
static void gdrc_sub_destroy(struct gdrc_file *gf, struct gdrc_sub *sub)
{
	lockdep_assert_held(&gf->lock);
	gf->subs[sub->slot] = NULL;
	gf->nr_subs--;
	/* Once this returns, no callback of @sub runs or will run. */
	mmu_interval_notifier_remove(&sub->notifier);
	pr_debug("slot %u unsubscribed, handle %#llx\n", sub->slot,
		 sub->handle);
	kfree(sub);
}

static int gdrc_check_range(u64 start, u64 length)
{
	u64 end;

	if (!length || !PAGE_ALIGNED(start) || !PAGE_ALIGNED(length))
		return -EINVAL;
	if (check_add_overflow(start, length, &end) || end > TASK_SIZE)
		return -EINVAL;
	return 0;
}

long gdrc_subscribe(struct gdrc_file *gf, void __user *uarg)
{
	struct gdrc_subscribe_args args;
	struct gdrc_sub *sub;
	unsigned int slot;
	long ret;

	if (current->mm != gf->mm)
		return -EACCES;
	if (copy_from_user(&args, uarg, sizeof(args)))
		return -EFAULT;
	if (args.flags || args.reserved0 || args.reserved1)
		return -EINVAL;
	ret = gdrc_check_range(args.start, args.length);
	if (ret)
		return ret;

	sub = kzalloc(sizeof(*sub), GFP_KERNEL);
	if (!sub)
		return -ENOMEM;
	spin_lock_init(&sub->lock);
	sub->gf = gf;

	mutex_lock(&gf->lock);
	if (gf->nr_subs >= gdrc_max_subs_per_file) {
		ret = -ENOSPC;
		goto err_unlock;
	}
	for (slot = 0; slot < GDRC_MAX_SLOTS; slot++)
		if (!gf->subs[slot] && !gf->pins[slot])
			break;
	if (slot == GDRC_MAX_SLOTS) {
		/* All slots held, some by pins. */
		ret = -ENOSPC;
		goto err_unlock;
	}
	sub->slot = slot;
	sub->handle = (gf->next_handle++ << GDRC_SLOT_BITS) | slot;
	/* No callback can write this slot now: it has no notifier. */
	WRITE_ONCE(gf->gen[slot], 0);
	ret = mmu_interval_notifier_insert(&sub->notifier, gf->mm, args.start,
					   args.length, &gdrc_sub_ops);
	if (ret)
		goto err_unlock;
	/*
	 * An invalidation already under way in this mm when the notifier went
	 * in never calls it (the insert is deferred to its end): wait it out,
	 * so that whatever user space does with the range next (pin it, cache
	 * it) sees the range after that change, and every later change calls
	 * gdrc_invalidate.  Without this, a madvise(MADV_DONTNEED) zapping the
	 * range under mmap_lock held for read could race a get_user_pages()
	 * that pins the old page, and the word would never move.  Sleeps only
	 * while an invalidation is running; its callbacks never take gf->lock.
	 */
	mmu_interval_read_begin(&sub->notifier);
	gf->subs[slot] = sub;
	gf->nr_subs++;

	args.handle = sub->handle;
	args.slot = slot;
	args.pad = 0;
	/*
	 * Copied out under gf->lock, so that no UNSUBSCRIBE with a guessed
	 * handle can free @sub before the failure path below.  A fault here
	 * takes mmap_lock after gf->lock, the documented order.
	 */
	if (copy_to_user(uarg, &args, sizeof(args))) {
		ret = -EFAULT;
		goto err_remove;
	}
	mutex_unlock(&gf->lock);
	pr_debug("slot %u subscribed [%#llx, +%#llx), handle %#llx\n", slot,
		 args.start, args.length, args.handle);
	return 0;

err_remove:
	gdrc_sub_destroy(gf, sub);
	mutex_unlock(&gf->lock);
	return ret;
err_unlock:
	mutex_unlock(&gf->lock);
	kfree(sub);
	return ret;
}

long gdrc_unsubscribe(struct gdrc_file *gf, void __user *uarg)
{
	struct gdrc_unsubscribe_args args;
	struct gdrc_sub *sub;
	long ret = 0;

	if (current->mm != gf->mm)
		return -EACCES;
	if (copy_from_user(&args, uarg, sizeof(args)))
		return -EFAULT;
	if (args.flags || args.reserved)
		return -EINVAL;

	mutex_lock(&gf->lock);
	sub = gf->subs[args.handle & GDRC_SLOT_MASK];
	if (!sub || sub->handle != args.handle) {
		ret = -EINVAL;
		goto out_unlock;
	}
	/*
	 * Removed under gf->lock, so that the slot cannot be handed out again
	 * while a callback of the old subscription may still bump it.
	 */
	gdrc_sub_destroy(gf, sub);
out_unlock:
	mutex_unlock(&gf->lock);
	return ret;
}

/* Last reference to the file is gone: no ioctl can run concurrently. */
void gdrc_release_subs(struct gdrc_file *gf)
{
	unsigned int slot;

	mutex_lock(&gf->lock);
	for (slot = 0; slot < GDRC_MAX_SLOTS; slot++)
		if (gf->subs[slot])
			gdrc_sub_destroy(gf, gf->subs[slot]);
	WARN_ON_ONCE(gf->nr_subs);
	mutex_unlock(&gf->lock);
}
