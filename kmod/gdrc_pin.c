// SPDX-License-Identifier: GPL-2.0
/*
 * gdrc_pin.c - GPU memory pinning through NVIDIA's nvidia_p2p API.
 *
 * Built with nv-p2p.h (make NV_P2P_INCLUDE=<dir holding nv-p2p.h>), the
 * module resolves the nvidia_p2p_* entry points with symbol_get() at the
 * first PIN and keeps them until it is unloaded, so it loads without
 * nvidia.ko and never depends on its symbol CRCs.  Built without the
 * header, PIN, UNPIN and QUERY answer -EOPNOTSUPP.
 *
 * Locks: gf->lock (mutex, per file) owns the slot table, the byte count
 * and the lifetime of a struct gdrc_pin.  gdrc_pin_lock (spinlock, global)
 * protects the ticket table and every pin's @state and @pt; it is the only
 * lock the free callback takes.  Order: gf->lock, then NVIDIA's own locks
 * (taken inside get_pages/put_pages), then gdrc_pin_lock, then the wait
 * queue's lock.  Nothing under gdrc_pin_lock calls into NVIDIA.
 * gdrc_user_lock (spinlock, global) protects the per-user byte table; it
 * is a leaf: taken under gf->lock (PIN, UNPIN, close), never together with
 * gdrc_pin_lock, never by the free callback.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/errno.h>
#include <linux/hashtable.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/overflow.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/uidgid.h>

#include "gdrc_internal.h"

static_assert(sizeof(struct gdrc_pin_args) == 72);
static_assert(sizeof(struct gdrc_unpin_args) == 16);
static_assert(sizeof(struct gdrc_query_args) == 64);

#ifdef GDRC_HAVE_NV_P2P

#include <nv-p2p.h>

/*
 * The page-table ABI majors this file knows: 1.x (up to R575) and 2.x
 * (R580+, adds a flags field after gpu_uuid, which is not read here).
 * Only fields common to both are used.
 */
#if NVIDIA_P2P_MAJOR_VERSION(NVIDIA_P2P_PAGE_TABLE_VERSION) != 1 && \
	NVIDIA_P2P_MAJOR_VERSION(NVIDIA_P2P_PAGE_TABLE_VERSION) != 2
#error "nv-p2p.h: unsupported page table major version"
#endif
#define GDRC_PT_VERSION_OK(v) \
	(NVIDIA_P2P_MAJOR_VERSION(v) == 1 || NVIDIA_P2P_MAJOR_VERSION(v) == 2)

/*
 * States of a pin; transitions only under gdrc_pin_lock.
 *
 *   PINNING --get_pages ok--> ACTIVE --UNPIN/close--> (gone)
 *      |                        |
 *      +------callback------> REVOKED --UNPIN/close--> (gone)
 *
 * A pin is in the ticket table from before get_pages until UNPIN, close
 * or a failed PIN removes it (under gdrc_pin_lock); the callback only
 * touches pins it finds there.  @pt is owned by whoever moves the pin out
 * of ACTIVE: the callback frees it (free_page_table), UNPIN or close
 * releases it (put_pages).  A callback during PINNING leaves the table to
 * the PIN path, which frees it once get_pages has returned.
 */
enum gdrc_pin_state {
	GDRC_PS_PINNING,
	GDRC_PS_ACTIVE,
	GDRC_PS_REVOKED,
};

struct gdrc_pin {
	struct hlist_node node;		/* in gdrc_pin_table, by @ticket */
	u64 ticket;			/* global, never reused */
	struct gdrc_file *gf;
	u64 handle;
	u32 slot;
	bool persistent;
	enum gdrc_pin_state state;	/* gdrc_pin_lock */
	struct nvidia_p2p_page_table *pt;	/* gdrc_pin_lock */
	u64 va;
	u64 length;
	u32 page_size;
	u32 entries;
	u8 gpu_uuid[GDRC_GPU_UUID_LEN];
};

/*
 * Pinned bytes per uid (the opener's, see gf->uid), against
 * max_pinned_bytes_per_user.  An entry exists while its uid has bytes
 * pinned; a revoked pin stays charged until UNPIN or close releases it.
 */
struct gdrc_user {
	struct hlist_node node;		/* in gdrc_user_table, by @uid */
	kuid_t uid;
	u64 pinned_bytes;
};

static DEFINE_SPINLOCK(gdrc_user_lock);
static DEFINE_HASHTABLE(gdrc_user_table, 6);

/* Called with gdrc_user_lock held. */
static struct gdrc_user *gdrc_user_lookup(kuid_t uid)
{
	struct gdrc_user *u;

	hash_for_each_possible(gdrc_user_table, u, node, __kuid_val(uid))
		if (uid_eq(u->uid, uid))
			return u;
	return NULL;
}

/*
 * Charges @bytes to @uid: -EDQUOT beyond max_pinned_bytes_per_user (0: no
 * limit), -ENOMEM.  May sleep (allocates before taking the spinlock).
 */
static int gdrc_user_charge(kuid_t uid, u64 bytes)
{
	u64 limit = READ_ONCE(gdrc_max_pinned_bytes_per_user);
	struct gdrc_user *u, *fresh;
	int ret = 0;
	u64 total;

	fresh = kzalloc(sizeof(*fresh), GFP_KERNEL);
	if (!fresh)
		return -ENOMEM;
	spin_lock(&gdrc_user_lock);
	u = gdrc_user_lookup(uid);
	if (check_add_overflow(u ? u->pinned_bytes : 0, bytes, &total) ||
	    (limit && total > limit)) {
		ret = -EDQUOT;
	} else if (u) {
		u->pinned_bytes = total;
	} else {
		fresh->uid = uid;
		fresh->pinned_bytes = total;
		hash_add(gdrc_user_table, &fresh->node, __kuid_val(uid));
		fresh = NULL;
	}
	spin_unlock(&gdrc_user_lock);
	kfree(fresh);
	return ret;
}

static void gdrc_user_uncharge(kuid_t uid, u64 bytes)
{
	struct gdrc_user *u, *gone = NULL;

	spin_lock(&gdrc_user_lock);
	u = gdrc_user_lookup(uid);
	if (WARN_ON_ONCE(!u || u->pinned_bytes < bytes)) {
		spin_unlock(&gdrc_user_lock);
		return;
	}
	u->pinned_bytes -= bytes;
	if (!u->pinned_bytes) {
		hash_del(&u->node);
		gone = u;
	}
	spin_unlock(&gdrc_user_lock);
	kfree(gone);
}

static DEFINE_SPINLOCK(gdrc_pin_lock);
static DEFINE_HASHTABLE(gdrc_pin_table, 8);
static u64 gdrc_next_ticket = 1;	/* gdrc_pin_lock */

/* The provider's entry points, resolved at first use. */
struct gdrc_nv_ops {
	typeof(&nvidia_p2p_get_pages) get_pages;
	typeof(&nvidia_p2p_put_pages) put_pages;
	typeof(&nvidia_p2p_free_page_table) free_page_table;
#ifdef NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API
	typeof(&nvidia_p2p_get_pages_persistent) get_pages_persistent;
	typeof(&nvidia_p2p_put_pages_persistent) put_pages_persistent;
#endif
};

static DEFINE_MUTEX(gdrc_nv_mutex);
static struct gdrc_nv_ops gdrc_nv;
static bool gdrc_nv_ready;	/* set once, under gdrc_nv_mutex */

static void gdrc_nv_put(void)
{
	if (gdrc_nv.get_pages)
		symbol_put(nvidia_p2p_get_pages);
	if (gdrc_nv.put_pages)
		symbol_put(nvidia_p2p_put_pages);
	if (gdrc_nv.free_page_table)
		symbol_put(nvidia_p2p_free_page_table);
#ifdef NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API
	if (gdrc_nv.get_pages_persistent)
		symbol_put(nvidia_p2p_get_pages_persistent);
	if (gdrc_nv.put_pages_persistent)
		symbol_put(nvidia_p2p_put_pages_persistent);
#endif
	memset(&gdrc_nv, 0, sizeof(gdrc_nv));
}

/*
 * Resolves the provider at first use; a failure is not remembered, so a
 * PIN after loading nvidia.ko succeeds.  The references are kept until
 * the module is unloaded (gdrc_pin_exit): pins never outlive the module,
 * and nvidia.ko stays loaded while gdrcache.ko is.
 */
static int gdrc_nv_get(void)
{
	int ret = 0;

	/* Pairs with the release below: the ops are visible once ready. */
	if (smp_load_acquire(&gdrc_nv_ready))
		return 0;
	mutex_lock(&gdrc_nv_mutex);
	if (gdrc_nv_ready)
		goto out;
	gdrc_nv.get_pages = symbol_get(nvidia_p2p_get_pages);
	gdrc_nv.put_pages = symbol_get(nvidia_p2p_put_pages);
	gdrc_nv.free_page_table = symbol_get(nvidia_p2p_free_page_table);
	if (!gdrc_nv.get_pages || !gdrc_nv.put_pages ||
	    !gdrc_nv.free_page_table) {
		gdrc_nv_put();
		ret = -ENODEV;
		goto out;
	}
#ifdef NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API
	gdrc_nv.get_pages_persistent =
		symbol_get(nvidia_p2p_get_pages_persistent);
	gdrc_nv.put_pages_persistent =
		symbol_get(nvidia_p2p_put_pages_persistent);
	if (!gdrc_nv.get_pages_persistent || !gdrc_nv.put_pages_persistent) {
		/* Non-persistent pins still work. */
		if (gdrc_nv.get_pages_persistent)
			symbol_put(nvidia_p2p_get_pages_persistent);
		if (gdrc_nv.put_pages_persistent)
			symbol_put(nvidia_p2p_put_pages_persistent);
		gdrc_nv.get_pages_persistent = NULL;
		gdrc_nv.put_pages_persistent = NULL;
	}
#endif
	smp_store_release(&gdrc_nv_ready, true);
	pr_info("nvidia_p2p provider resolved\n");
out:
	mutex_unlock(&gdrc_nv_mutex);
	return ret;
}

void gdrc_pin_exit(void)
{
	/* No file is open (each holds a module reference): no pin is left. */
	WARN_ON_ONCE(!hash_empty(gdrc_pin_table));
	WARN_ON_ONCE(!hash_empty(gdrc_user_table));
	gdrc_nv_put();
}

static bool gdrc_nv_has_persistent(void)
{
#ifdef NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API
	return gdrc_nv.get_pages_persistent && gdrc_nv.put_pages_persistent;
#else
	return false;
#endif
}

/* Called with gdrc_pin_lock held. */
static struct gdrc_pin *gdrc_pin_lookup_ticket(u64 ticket)
{
	struct gdrc_pin *pin;

	hash_for_each_possible(gdrc_pin_table, pin, node, ticket)
		if (pin->ticket == ticket)
			return pin;
	return NULL;
}

/* Called with gdrc_pin_lock held: bump the slot's word, raise an event. */
static void gdrc_pin_notify(struct gdrc_pin *pin)
{
	struct gdrc_file *gf = pin->gf;
	__u64 *word = &gf->gen[pin->slot];

	WRITE_ONCE(*word, READ_ONCE(*word) + 1);
	smp_wmb();	/* the word before the count, as in gdrc_invalidate */
	atomic64_inc(&gf->events);
	wake_up_interruptible_poll(&gf->wq, EPOLLIN | EPOLLRDNORM);
}

/*
 * gdrc_pin_free_cb - the NVIDIA driver revokes a non-persistent pin.
 *
 * Context: called by nvidia.ko when the memory goes away under us
 * (cudaFree, cuMemFree, destruction of the CUDA context, close of the
 * process's NVIDIA fds at exit), in the task doing that, with RM's internal
 * locks held; possibly before nvidia_p2p_get_pages has even returned to
 * gdrc_pin(), and concurrently with UNPIN or close of our file.  When it
 * returns, the driver considers the pages gone.
 *
 * @data is a ticket (the pin's id), not a pointer: the pin may have been
 * unpinned and freed already, so it is looked up under gdrc_pin_lock.
 *
 * It must not: take gf->lock or gdrc_nv_mutex (PIN and UNPIN hold gf->lock
 * while inside nvidia_p2p_get_pages/put_pages, which take RM's locks:
 * AB-BA), sleep, allocate with GFP_KERNEL, or call nvidia_p2p_put_pages
 * (it waits for this very callback).  It takes only gdrc_pin_lock (irqsave:
 * the calling context is not ours to know) and the wait queue's lock, and
 * releases the table with nvidia_p2p_free_page_table as the API demands.
 */
static void gdrc_pin_free_cb(void *data)
{
	u64 ticket = (uintptr_t)data;
	struct nvidia_p2p_page_table *pt = NULL;
	struct gdrc_pin *pin;
	unsigned long flags;

	spin_lock_irqsave(&gdrc_pin_lock, flags);
	pin = gdrc_pin_lookup_ticket(ticket);
	if (!pin || pin->state == GDRC_PS_REVOKED) {
		/* UNPIN or close got there first: they release the pages. */
		spin_unlock_irqrestore(&gdrc_pin_lock, flags);
		return;
	}
	if (pin->state == GDRC_PS_ACTIVE) {
		pt = pin->pt;
		pin->pt = NULL;
	}
	/* PINNING: gdrc_pin() frees the table once get_pages returned it. */
	pin->state = GDRC_PS_REVOKED;
	gdrc_pin_notify(pin);
	spin_unlock_irqrestore(&gdrc_pin_lock, flags);

	if (pt)
		gdrc_nv.free_page_table(pt);
}

/* Releases what the pin still holds.  Called with gf->lock held. */
static void gdrc_pin_destroy(struct gdrc_file *gf, struct gdrc_pin *pin)
{
	struct nvidia_p2p_page_table *pt;
	enum gdrc_pin_state state;
	unsigned long flags;
	int ret;

	lockdep_assert_held(&gf->lock);
	gf->pins[pin->slot] = NULL;
	gf->nr_pins--;
	gf->pinned_bytes -= pin->length;
	gdrc_user_uncharge(gf->uid, pin->length);

	/* From here on the callback cannot find the pin. */
	spin_lock_irqsave(&gdrc_pin_lock, flags);
	hash_del(&pin->node);
	state = pin->state;
	pt = pin->pt;
	pin->pt = NULL;
	spin_unlock_irqrestore(&gdrc_pin_lock, flags);

	/*
	 * ACTIVE: the pages are ours to give back.  A callback that started
	 * meanwhile found nothing and left them to us; put_pages waits for
	 * it to return (it does not take any lock we hold).  REVOKED: the
	 * callback already freed the table.
	 */
	if (state == GDRC_PS_ACTIVE && pt) {
#ifdef NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API
		if (pin->persistent)
			ret = gdrc_nv.put_pages_persistent(pin->va, pt, 0);
		else
#endif
			ret = gdrc_nv.put_pages(0, 0, pin->va, pt);
		if (ret)
			pr_warn("put_pages(%#llx) failed: %d\n", pin->va, ret);
	}
	pr_debug("slot %u unpinned, handle %#llx\n", pin->slot, pin->handle);
	kfree(pin);
}

static u32 gdrc_page_size_bytes(u32 type)
{
	switch (type) {
	case NVIDIA_P2P_PAGE_SIZE_4KB:
		return 4 * 1024;
	case NVIDIA_P2P_PAGE_SIZE_64KB:
		return 64 * 1024;
	case NVIDIA_P2P_PAGE_SIZE_128KB:
		return 128 * 1024;
	default:
		return 0;
	}
}

long gdrc_pin(struct gdrc_file *gf, void __user *uarg)
{
	struct nvidia_p2p_page_table *pt = NULL, *late_pt = NULL;
	struct gdrc_pin_args args;
	struct gdrc_pin *pin;
	unsigned long flags;
	unsigned int slot;
	u64 end, bytes;
	u32 version = 0;
	long ret;

	if (current->mm != gf->mm)
		return -EACCES;
	if (copy_from_user(&args, uarg, sizeof(args)))
		return -EFAULT;
	if (args.reserved0 || args.reserved1 ||
	    (args.flags & ~GDRC_PIN_PERSISTENT))
		return -EINVAL;
	if (!args.length || !IS_ALIGNED(args.va, GDRC_PIN_ALIGN) ||
	    !IS_ALIGNED(args.length, GDRC_PIN_ALIGN) ||
	    check_add_overflow(args.va, args.length, &end))
		return -EINVAL;
	ret = gdrc_nv_get();
	if (ret)
		return ret;
	if ((args.flags & GDRC_PIN_PERSISTENT) && !gdrc_nv_has_persistent())
		return -EOPNOTSUPP;

	pin = kzalloc(sizeof(*pin), GFP_KERNEL);
	if (!pin)
		return -ENOMEM;
	pin->gf = gf;
	pin->va = args.va;
	pin->length = args.length;
	pin->persistent = args.flags & GDRC_PIN_PERSISTENT;
	pin->state = GDRC_PS_PINNING;

	/*
	 * gf->lock is held across get_pages: the callback never takes it,
	 * and no UNPIN of this file can see a half-made pin.
	 */
	mutex_lock(&gf->lock);
	if (check_add_overflow(gf->pinned_bytes, args.length, &bytes) ||
	    bytes > gdrc_max_pinned_bytes_per_file) {
		ret = -ENOSPC;
		goto err_unlock;
	}
	for (slot = 0; slot < GDRC_MAX_SLOTS; slot++)
		if (!gf->subs[slot] && !gf->pins[slot])
			break;
	if (slot == GDRC_MAX_SLOTS) {
		ret = -ENOSPC;
		goto err_unlock;
	}
	ret = gdrc_user_charge(gf->uid, args.length);
	if (ret)
		goto err_unlock;
	pin->slot = slot;
	pin->handle = (gf->next_handle++ << GDRC_SLOT_BITS) | slot;
	WRITE_ONCE(gf->gen[slot], 0);

	spin_lock_irqsave(&gdrc_pin_lock, flags);
	pin->ticket = gdrc_next_ticket++;
	hash_add(gdrc_pin_table, &pin->node, pin->ticket);
	spin_unlock_irqrestore(&gdrc_pin_lock, flags);

#ifdef NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API
	if (pin->persistent)
		ret = gdrc_nv.get_pages_persistent(args.va, args.length, &pt,
						   0);
	else
#endif
		ret = gdrc_nv.get_pages(0, 0, args.va, args.length, &pt,
					gdrc_pin_free_cb,
					(void *)(uintptr_t)pin->ticket);

	/*
	 * Under gdrc_pin_lock the callback cannot free an ACTIVE pin's table
	 * while it is read; a table revoked during get_pages is still ours
	 * until we free it below.
	 */
	spin_lock_irqsave(&gdrc_pin_lock, flags);
	if (ret) {
		hash_del(&pin->node);
	} else {
		version = pt->version;
		if (GDRC_PT_VERSION_OK(version)) {
			pin->page_size = gdrc_page_size_bytes(pt->page_size);
			pin->entries = pt->entries;
			if (pt->gpu_uuid)
				memcpy(pin->gpu_uuid, pt->gpu_uuid,
				       GDRC_GPU_UUID_LEN);
		}
		if (pin->state == GDRC_PS_REVOKED) {
			late_pt = pt;
		} else {
			pin->state = GDRC_PS_ACTIVE;
			pin->pt = pt;
		}
	}
	spin_unlock_irqrestore(&gdrc_pin_lock, flags);
	if (ret) {
		pr_debug("get_pages(%#llx, %#llx) failed: %ld\n", args.va,
			 args.length, ret);
		gdrc_user_uncharge(gf->uid, args.length);
		goto err_unlock;
	}
	if (late_pt)
		gdrc_nv.free_page_table(late_pt);

	/* From here on gdrc_pin_destroy() undoes the pin. */
	gf->pins[slot] = pin;
	gf->nr_pins++;
	gf->pinned_bytes += pin->length;

	if (!GDRC_PT_VERSION_OK(version)) {
		pr_warn("page table version %#x not supported\n", version);
		gdrc_pin_destroy(gf, pin);	/* put_pages */
		mutex_unlock(&gf->lock);
		return -EPROTO;
	}

	args.handle = pin->handle;
	args.page_size = pin->page_size;
	args.entries = pin->entries;
	memcpy(args.gpu_uuid, pin->gpu_uuid, GDRC_GPU_UUID_LEN);
	args.slot = slot;
	args.pad = 0;
	if (copy_to_user(uarg, &args, sizeof(args))) {
		gdrc_pin_destroy(gf, pin);
		mutex_unlock(&gf->lock);
		return -EFAULT;
	}
	mutex_unlock(&gf->lock);
	pr_debug("slot %u pinned [%#llx, +%#llx), handle %#llx\n", slot,
		 args.va, args.length, args.handle);
	return 0;

err_unlock:
	mutex_unlock(&gf->lock);
	kfree(pin);
	return ret;
}

/* Called with gf->lock held. */
static struct gdrc_pin *gdrc_pin_find(struct gdrc_file *gf, u64 handle)
{
	struct gdrc_pin *pin = gf->pins[handle & GDRC_SLOT_MASK];

	if (!pin || pin->handle != handle)
		return NULL;
	return pin;
}

long gdrc_unpin(struct gdrc_file *gf, void __user *uarg)
{
	struct gdrc_unpin_args args;
	struct gdrc_pin *pin;
	long ret = 0;

	if (current->mm != gf->mm)
		return -EACCES;
	if (copy_from_user(&args, uarg, sizeof(args)))
		return -EFAULT;
	if (args.flags || args.reserved)
		return -EINVAL;
	mutex_lock(&gf->lock);
	pin = gdrc_pin_find(gf, args.handle);
	if (pin)
		gdrc_pin_destroy(gf, pin);
	else
		ret = -EINVAL;
	mutex_unlock(&gf->lock);
	return ret;
}

long gdrc_query(struct gdrc_file *gf, void __user *uarg)
{
	struct gdrc_query_args args;
	struct gdrc_pin *pin;
	unsigned long flags;

	if (current->mm != gf->mm)
		return -EACCES;
	if (copy_from_user(&args, uarg, sizeof(args)))
		return -EFAULT;
	if (args.flags || args.reserved)
		return -EINVAL;
	mutex_lock(&gf->lock);
	pin = gdrc_pin_find(gf, args.handle);
	if (!pin) {
		mutex_unlock(&gf->lock);
		return -EINVAL;
	}
	args.va = pin->va;
	args.length = pin->length;
	args.page_size = pin->page_size;
	args.entries = pin->entries;
	memcpy(args.gpu_uuid, pin->gpu_uuid, GDRC_GPU_UUID_LEN);
	args.slot = pin->slot;
	args.state = pin->persistent ? GDRC_PIN_PERSISTENT : 0;
	spin_lock_irqsave(&gdrc_pin_lock, flags);
	if (pin->state == GDRC_PS_REVOKED)
		args.state |= GDRC_PIN_REVOKED;
	spin_unlock_irqrestore(&gdrc_pin_lock, flags);
	mutex_unlock(&gf->lock);
	if (copy_to_user(uarg, &args, sizeof(args)))
		return -EFAULT;
	return 0;
}

/*
 * Last reference to the file is gone, maybe in another process than the
 * opener: unpins all.  (Non-persistent put_pages from a foreign process is
 * what NVIDIA advises against; it is still better than leaking the pin.)
 */
void gdrc_release_pins(struct gdrc_file *gf)
{
	unsigned int slot;

	mutex_lock(&gf->lock);
	for (slot = 0; slot < GDRC_MAX_SLOTS; slot++)
		if (gf->pins[slot])
			gdrc_pin_destroy(gf, gf->pins[slot]);
	WARN_ON_ONCE(gf->nr_pins || gf->pinned_bytes);
	mutex_unlock(&gf->lock);
}

#else /* !GDRC_HAVE_NV_P2P: built without nv-p2p.h */

long gdrc_pin(struct gdrc_file *gf, void __user *uarg)
{
	return -EOPNOTSUPP;
}

long gdrc_unpin(struct gdrc_file *gf, void __user *uarg)
{
	return -EOPNOTSUPP;
}

long gdrc_query(struct gdrc_file *gf, void __user *uarg)
{
	return -EOPNOTSUPP;
}

void gdrc_release_pins(struct gdrc_file *gf)
{
}

void gdrc_pin_exit(void)
{
}

#endif /* GDRC_HAVE_NV_P2P */
