// SPDX-License-Identifier: GPL-2.0
/*
 * gdrc_main.c - /dev/gdrcache, the companion module of libgdrcache.
 *
 * Host-memory half: per open file, a read-only generation page and
 * subscriptions (mmu interval notifiers) on ranges of the opener's address
 * space.  When the kernel invalidates a watched range, the subscription's
 * generation word is bumped and poll() on the fd turns readable, so a
 * registration cache learns that a cached registration went stale without
 * hooking munmap in user space.  The ABI is uapi/gdrc_ioctl.h.
 *
 * GPU half (gdrc_pin.c): PIN, UNPIN and QUERY of GPU memory through
 * nvidia_p2p, resolved at run time; revocations by the NVIDIA driver bump
 * the pin's generation word like an invalidation does.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/kernel.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "gdrc_internal.h"

unsigned int gdrc_max_subs_per_file = GDRC_MAX_SLOTS;
module_param_named(max_subs_per_file, gdrc_max_subs_per_file, uint, 0444);
MODULE_PARM_DESC(max_subs_per_file,
		 "Subscriptions one open file may hold (1..512, default 512)");

unsigned long long gdrc_max_pinned_bytes_per_file = 1ULL << 30;
module_param_named(max_pinned_bytes_per_file, gdrc_max_pinned_bytes_per_file,
		   ullong, 0644);
MODULE_PARM_DESC(max_pinned_bytes_per_file,
		 "GPU bytes one open file may pin (default 1 GiB)");

unsigned long long gdrc_max_pinned_bytes_per_user = 4ULL << 30;
module_param_named(max_pinned_bytes_per_user, gdrc_max_pinned_bytes_per_user,
		   ullong, 0644);
MODULE_PARM_DESC(max_pinned_bytes_per_user,
		 "GPU bytes the files opened by one uid may pin together (default 4 GiB, 0 = no limit)");

static_assert(sizeof(struct gdrc_version_args) == 24);
static_assert(sizeof(struct gdrc_subscribe_args) == 48);
static_assert(sizeof(struct gdrc_unsubscribe_args) == 16);

/* vm_flags became read-only in 6.3: use the helpers where they exist. */
static void gdrc_vma_flags_mod(struct vm_area_struct *vma, vm_flags_t set,
			       vm_flags_t clear)
{
#ifdef HAVE_VM_FLAGS_MOD
	vm_flags_mod(vma, set, clear);
#else
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
#endif
}

static int gdrc_open(struct inode *inode, struct file *file)
{
	struct gdrc_file *gf;

	/* Kernel threads have no address space to watch. */
	if (!current->mm)
		return -EPERM;

	gf = kzalloc(sizeof(*gf), GFP_KERNEL);
	if (!gf)
		return -ENOMEM;
	gf->gen_page = alloc_page(GFP_KERNEL | __GFP_ZERO);
	if (!gf->gen_page)
		goto err_free_gf;
	gf->gen = page_address(gf->gen_page);

	mutex_init(&gf->lock);
	init_waitqueue_head(&gf->wq);
	atomic64_set(&gf->events, 0);
	gf->next_handle = 1;	/* so that no handle is 0 */
	mmgrab(current->mm);
	gf->mm = current->mm;
	gf->uid = current_uid();

	file->private_data = gf;
	stream_open(inode, file);
	return 0;

err_free_gf:
	kfree(gf);
	return -ENOMEM;
}

/*
 * Runs when the last reference to the file goes, possibly in another
 * process than the opener (fd passed, forked child) and possibly after the
 * opener's mm was torn down: the notifiers hold their own mmgrab, so
 * removing them is still valid.  Never under mmap_lock (the final fput of
 * a mapping of the generation page is deferred to task work).
 */
static int gdrc_release(struct inode *inode, struct file *file)
{
	struct gdrc_file *gf = file->private_data;

	gdrc_release_pins(gf);
	gdrc_release_subs(gf);
	mmdrop(gf->mm);
	__free_page(gf->gen_page);
	mutex_destroy(&gf->lock);
	kfree(gf);
	return 0;
}

/*
 * Maps the generation page, read-only, at offset 0.  Called with mmap_lock
 * held for write: must not take gf->lock (see the lock order).
 */
static int gdrc_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct gdrc_file *gf = file->private_data;

	BUILD_BUG_ON(GDRC_GEN_PAGE_SIZE > PAGE_SIZE);
	if (vma->vm_mm != gf->mm)
		return -EACCES;
	if (vma->vm_pgoff || vma->vm_end - vma->vm_start != PAGE_SIZE)
		return -EINVAL;
	if (vma->vm_flags & VM_WRITE)
		return -EPERM;
	/*
	 * No mprotect(PROT_WRITE) later, no growth by mremap, nothing in core
	 * dumps, and a forked child does not inherit the mapping.
	 */
	gdrc_vma_flags_mod(vma, VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP,
			   VM_MAYWRITE);
	return vm_insert_page(vma, vma->vm_start, gf->gen_page);
}

static __poll_t gdrc_poll(struct file *file, poll_table *wait)
{
	struct gdrc_file *gf = file->private_data;

	poll_wait(file, &gf->wq, wait);
	if (atomic64_read(&gf->events))
		return EPOLLIN | EPOLLRDNORM;
	return 0;
}

/*
 * Returns one __u64: the number of invalidation events since the previous
 * read(), and resets it.  Blocks while it is 0 (-EAGAIN if O_NONBLOCK).
 */
static ssize_t gdrc_read(struct file *file, char __user *buf, size_t count,
			 loff_t *ppos)
{
	struct gdrc_file *gf = file->private_data;
	u64 n;
	int ret;

	if (count < sizeof(n))
		return -EINVAL;
	for (;;) {
		/* Full barrier: generation words read after it are current. */
		n = atomic64_xchg(&gf->events, 0);
		if (n)
			break;
		if (file->f_flags & O_NONBLOCK)
			return -EAGAIN;
		ret = wait_event_interruptible(gf->wq,
					       atomic64_read(&gf->events));
		if (ret)
			return ret;
	}
	if (copy_to_user(buf, &n, sizeof(n))) {
		atomic64_add(n, &gf->events);	/* not consumed after all */
		return -EFAULT;
	}
	return sizeof(n);
}

static long gdrc_ioctl_version(void __user *uarg)
{
	struct gdrc_version_args args;

	if (copy_from_user(&args, uarg, sizeof(args)))
		return -EFAULT;
	if (args.flags || args.reserved)
		return -EINVAL;
	args.kernel_version = GDRC_KMOD_ABI_VERSION;
	args.min_user_version = GDRC_MIN_USER_VERSION;
	if (copy_to_user(uarg, &args, sizeof(args)))
		return -EFAULT;
	if (args.user_version < GDRC_MIN_USER_VERSION ||
	    args.kernel_version < args.min_kernel_version) {
		pr_debug("version mismatch: user %#x (min kernel %#x)\n",
			 args.user_version, args.min_kernel_version);
		return -EPROTO;
	}
	return 0;
}

static long gdrc_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct gdrc_file *gf = file->private_data;
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case GDRC_IOCTL_VERSION:
		return gdrc_ioctl_version(uarg);
	case GDRC_IOCTL_SUBSCRIBE:
		return gdrc_subscribe(gf, uarg);
	case GDRC_IOCTL_UNSUBSCRIBE:
		return gdrc_unsubscribe(gf, uarg);
	case GDRC_IOCTL_PIN:
		return gdrc_pin(gf, uarg);
	case GDRC_IOCTL_UNPIN:
		return gdrc_unpin(gf, uarg);
	case GDRC_IOCTL_QUERY:
		return gdrc_query(gf, uarg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations gdrc_fops = {
	.owner		= THIS_MODULE,
	.open		= gdrc_open,
	.release	= gdrc_release,
	.mmap		= gdrc_mmap,
	.poll		= gdrc_poll,
	.read		= gdrc_read,
	.unlocked_ioctl	= gdrc_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= no_llseek,
};

static struct miscdevice gdrc_miscdev = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= GDRC_DEVICE_NAME,
	.fops	= &gdrc_fops,
	/* Each opener only watches its own address space. */
	.mode	= 0666,
};

static int __init gdrc_init(void)
{
	int ret;

	if (!gdrc_max_subs_per_file ||
	    gdrc_max_subs_per_file > GDRC_MAX_SLOTS) {
		pr_err("max_subs_per_file=%u: must be 1..%u\n",
		       gdrc_max_subs_per_file, GDRC_MAX_SLOTS);
		return -EINVAL;
	}
	ret = misc_register(&gdrc_miscdev);
	if (ret) {
		pr_err("misc_register failed: %d\n", ret);
		return ret;
	}
	pr_info("ABI %u.%u, /dev/%s, max_subs_per_file=%u\n",
		GDRC_KMOD_VERSION_MAJOR(GDRC_KMOD_ABI_VERSION),
		GDRC_KMOD_VERSION_MINOR(GDRC_KMOD_ABI_VERSION), GDRC_DEVICE_NAME,
		gdrc_max_subs_per_file);
	return 0;
}

static void __exit gdrc_exit(void)
{
	misc_deregister(&gdrc_miscdev);
	gdrc_pin_exit();
}

module_init(gdrc_init);
module_exit(gdrc_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("gdrcache: invalidation notices and GPU pins for registration caches");
MODULE_VERSION("0.1.0");
