// SPDX-License-Identifier: GPL-2.0
/*
 * mock_nvp2p.c - TEST ONLY: a stand-in for nvidia.ko's nvidia_p2p_* API,
 * so that gdrcache.ko's pinning can be tested without a GPU.
 *
 * It exports nvidia_p2p_get_pages, _put_pages, _free_page_table and the
 * _persistent variants with the prototypes of NVIDIA's nv-p2p.h (built
 * with NV_P2P_INCLUDE, so a mismatch does not compile), GPL-only as the
 * open driver does (NV_EXPORT_SYMBOL is EXPORT_SYMBOL_GPL there): Debian's
 * 6.1 kernel, like mainline since 6.5, refuses symbol_get() of a symbol
 * that is not GPL-only.  Any 64 KiB
 * aligned "GPU VA" range can be pinned: each 64 KiB GPU page is backed by
 * one host page of ours (alloc_page), whose physical address goes in the
 * page table.  Nothing is ever mapped or DMA'd.
 *
 * Like the real driver, it holds one big lock ("RM lock", a mutex) across
 * get_pages, put_pages and the invocation of a free callback, so put_pages
 * waits for a callback in flight, and a client callback that took a lock
 * held around put_pages would deadlock here too.
 *
 * Control, in /sys/kernel/debug/mock_nvp2p/:
 *   fire       write a VA: fire the free callback of every live
 *              non-persistent mapping containing it (as cudaFree does);
 *              -ENOENT when there is none
 *   fail_next  write an errno (12 ENOMEM, 22 EINVAL, 524 ENOTSUPP): the
 *              next get_pages fails with it
 *   stats      read: call counters, live mappings, and API misuse errors
 * Parameters (/sys/module/mock_nvp2p/parameters/): page_table_version
 * (e.g. 0x00010002 or 0x00020000), fire_in_get_pages (fire the callback
 * before get_pages returns), callback_delay_ms (sleep, holding the RM
 * lock, between choosing a mapping to revoke and calling its callback),
 * max_entries.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/kernel.h>
#include <linux/io.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>

#include <nv-p2p.h>

#define MOCK_GPU_PAGE	(64ULL * 1024)

static uint page_table_version = NVIDIA_P2P_PAGE_TABLE_VERSION;
module_param(page_table_version, uint, 0644);
MODULE_PARM_DESC(page_table_version, "version written in page tables");

static bool fire_in_get_pages;
module_param(fire_in_get_pages, bool, 0644);
MODULE_PARM_DESC(fire_in_get_pages,
		 "fire the free callback before get_pages returns");

static uint callback_delay_ms;
module_param(callback_delay_ms, uint, 0644);
MODULE_PARM_DESC(callback_delay_ms,
		 "sleep between deciding to revoke and calling the callback");

static uint max_entries = 32768;
module_param(max_entries, uint, 0644);
MODULE_PARM_DESC(max_entries, "largest pin in 64 KiB pages (-ENOMEM beyond)");

enum mock_state { MOCK_LIVE, MOCK_REVOKING, MOCK_REVOKED };

struct mock_map {
	struct list_head node;
	u64 va;
	u64 len;
	bool persistent;
	enum mock_state state;
	void (*free_cb)(void *data);
	void *data;
	struct nvidia_p2p_page_table *pt;
	struct nvidia_p2p_page *entries;
	struct nvidia_p2p_page **entry_ptrs;
	struct page **backing;
	u32 nr;
};

static u8 mock_uuid[NVIDIA_P2P_GPU_UUID_LEN] = "mock-gpu-uuid-01";

static DEFINE_MUTEX(mock_rm_lock);	/* the "RM lock" */
static DEFINE_SPINLOCK(mock_list_lock);	/* mock_maps, states, counters */
static LIST_HEAD(mock_maps);
static int mock_fail_next;

static struct {
	u64 get_pages, get_pages_ok, put_pages, free_page_table, callbacks;
	u64 live, errors;
	u64 put_revoked;	/* put_pages of a table whose callback fired */
} mock_stats;

static struct dentry *mock_dir;

static void mock_map_free(struct mock_map *m)
{
	u32 i;

	if (m->backing)
		for (i = 0; i < m->nr; i++)
			if (m->backing[i])
				__free_page(m->backing[i]);
	kvfree(m->backing);
	kvfree(m->entries);
	kvfree(m->entry_ptrs);
	kfree(m->pt);
	kfree(m);
}

static struct mock_map *mock_map_alloc(u64 va, u64 len)
{
	struct mock_map *m;
	u32 i;

	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return NULL;
	m->va = va;
	m->len = len;
	m->nr = len / MOCK_GPU_PAGE;
	m->backing = kvcalloc(m->nr, sizeof(*m->backing), GFP_KERNEL);
	m->entries = kvcalloc(m->nr, sizeof(*m->entries), GFP_KERNEL);
	m->entry_ptrs = kvcalloc(m->nr, sizeof(*m->entry_ptrs), GFP_KERNEL);
	/* Room for the 2.x flags field after gpu_uuid. */
	m->pt = kzalloc(sizeof(*m->pt) + sizeof(u64), GFP_KERNEL);
	if (!m->backing || !m->entries || !m->entry_ptrs || !m->pt)
		goto err;
	for (i = 0; i < m->nr; i++) {
		m->backing[i] = alloc_page(GFP_KERNEL);
		if (!m->backing[i])
			goto err;
		m->entries[i].physical_address = page_to_phys(m->backing[i]);
		m->entry_ptrs[i] = &m->entries[i];
	}
	m->pt->version = READ_ONCE(page_table_version);
	m->pt->page_size = NVIDIA_P2P_PAGE_SIZE_64KB;
	m->pt->pages = m->entry_ptrs;
	m->pt->entries = m->nr;
	m->pt->gpu_uuid = mock_uuid;
	return m;
err:
	mock_map_free(m);
	return NULL;
}

/* Called with mock_list_lock held. */
static struct mock_map *mock_find_pt(struct nvidia_p2p_page_table *pt)
{
	struct mock_map *m;

	list_for_each_entry(m, &mock_maps, node)
		if (m->pt == pt)
			return m;
	return NULL;
}

static void mock_error(const char *what)
{
	spin_lock(&mock_list_lock);
	mock_stats.errors++;
	spin_unlock(&mock_list_lock);
	pr_warn("API misuse: %s\n", what);
}

/* Called with mock_rm_lock held: runs @m's callback as the driver does. */
static void mock_fire_locked(struct mock_map *m)
{
	struct mock_map *it;

	/* Widens the window in which the client unpins concurrently. */
	if (READ_ONCE(callback_delay_ms))
		msleep(READ_ONCE(callback_delay_ms));
	/* m->state is MOCK_REVOKING: nobody else frees @m meanwhile... */
	m->free_cb(m->data);
	/* ...except the client's free_page_table, from the callback. */
	spin_lock(&mock_list_lock);
	mock_stats.callbacks++;
	list_for_each_entry(it, &mock_maps, node)
		if (it == m) {
			m->state = MOCK_REVOKED;
			break;
		}
	spin_unlock(&mock_list_lock);
}

static int mock_get_pages(u64 va, u64 len,
			  struct nvidia_p2p_page_table **page_table,
			  void (*free_cb)(void *data), void *data,
			  bool persistent)
{
	struct mock_map *m;
	int fail;

	spin_lock(&mock_list_lock);
	mock_stats.get_pages++;
	fail = mock_fail_next;
	mock_fail_next = 0;
	spin_unlock(&mock_list_lock);
	if (fail)
		return -fail;
	if (!page_table || (!persistent && !free_cb))
		return -EINVAL;
	if (!len || !IS_ALIGNED(va, MOCK_GPU_PAGE) ||
	    !IS_ALIGNED(len, MOCK_GPU_PAGE) || va + len < va)
		return -EINVAL;
	if (len / MOCK_GPU_PAGE > READ_ONCE(max_entries))
		return -ENOMEM;

	m = mock_map_alloc(va, len);
	if (!m)
		return -ENOMEM;
	m->persistent = persistent;
	m->free_cb = free_cb;
	m->data = data;
	m->state = MOCK_LIVE;

	mutex_lock(&mock_rm_lock);
	spin_lock(&mock_list_lock);
	list_add_tail(&m->node, &mock_maps);
	mock_stats.get_pages_ok++;
	mock_stats.live++;
	spin_unlock(&mock_list_lock);
	*page_table = m->pt;
	if (!persistent && READ_ONCE(fire_in_get_pages)) {
		/* The memory is freed while the pin is being made. */
		m->state = MOCK_REVOKING;
		mock_fire_locked(m);
	}
	mutex_unlock(&mock_rm_lock);
	return 0;
}

int nvidia_p2p_get_pages(uint64_t p2p_token, uint32_t va_space,
			 uint64_t virtual_address, uint64_t length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	if (p2p_token || va_space)
		return -EINVAL;
	return mock_get_pages(virtual_address, length, page_table,
			      free_callback, data, false);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages);

int nvidia_p2p_get_pages_persistent(uint64_t virtual_address,
				    uint64_t length,
				    struct nvidia_p2p_page_table **page_table,
				    uint32_t flags)
{
	if (flags)
		return -EINVAL;
	return mock_get_pages(virtual_address, length, page_table, NULL,
			      NULL, true);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages_persistent);

static int mock_put_pages(u64 va, struct nvidia_p2p_page_table *pt,
			  bool persistent)
{
	struct mock_map *m;

	/* Waits, like the driver, for a callback in flight. */
	mutex_lock(&mock_rm_lock);
	spin_lock(&mock_list_lock);
	mock_stats.put_pages++;
	m = mock_find_pt(pt);
	if (m && m->va == va && m->persistent == persistent) {
		/* Also a revoked one the client never freed (it lost the
		 * race with its own UNPIN): success, as the driver does. */
		if (m->state != MOCK_LIVE)
			mock_stats.put_revoked++;
		list_del(&m->node);
		mock_stats.live--;
	} else {
		m = NULL;
	}
	spin_unlock(&mock_list_lock);
	mutex_unlock(&mock_rm_lock);
	if (!m) {
		mock_error("put_pages of an unknown table");
		return -EINVAL;
	}
	mock_map_free(m);
	return 0;
}

int nvidia_p2p_put_pages(uint64_t p2p_token, uint32_t va_space,
			 uint64_t virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	return mock_put_pages(virtual_address, page_table, false);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages);

int nvidia_p2p_put_pages_persistent(uint64_t virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    uint32_t flags)
{
	return mock_put_pages(virtual_address, page_table, true);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages_persistent);

/*
 * Legal only for a table whose callback has fired (from the callback or
 * after it).  No RM lock: the client calls it from the callback.
 */
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	struct mock_map *m;

	spin_lock(&mock_list_lock);
	mock_stats.free_page_table++;
	m = mock_find_pt(page_table);
	if (m && m->state != MOCK_LIVE) {
		list_del(&m->node);
		mock_stats.live--;
	} else {
		m = NULL;
	}
	spin_unlock(&mock_list_lock);
	if (!m) {
		mock_error("free_page_table of an unknown or live table");
		return -EINVAL;
	}
	mock_map_free(m);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_page_table);

static ssize_t mock_fire_write(struct file *file, const char __user *ubuf,
			       size_t count, loff_t *ppos)
{
	struct mock_map *m;
	int fired = 0;
	u64 va;
	int ret;

	ret = kstrtou64_from_user(ubuf, count, 0, &va);
	if (ret)
		return ret;
	mutex_lock(&mock_rm_lock);
	for (;;) {
		struct mock_map *found = NULL;

		spin_lock(&mock_list_lock);
		list_for_each_entry(m, &mock_maps, node)
			if (m->state == MOCK_LIVE && !m->persistent &&
			    va >= m->va && va - m->va < m->len) {
				m->state = MOCK_REVOKING;
				found = m;
				break;
			}
		spin_unlock(&mock_list_lock);
		if (!found)
			break;
		mock_fire_locked(found);
		fired++;
	}
	mutex_unlock(&mock_rm_lock);
	return fired ? count : -ENOENT;
}

static ssize_t mock_fail_write(struct file *file, const char __user *ubuf,
			       size_t count, loff_t *ppos)
{
	int err, ret;

	ret = kstrtoint_from_user(ubuf, count, 0, &err);
	if (ret)
		return ret;
	if (err < 0)
		err = -err;
	if (err > MAX_ERRNO)
		return -EINVAL;
	spin_lock(&mock_list_lock);
	mock_fail_next = err;
	spin_unlock(&mock_list_lock);
	return count;
}

static int mock_stats_show(struct seq_file *s, void *unused)
{
	typeof(mock_stats) st;

	spin_lock(&mock_list_lock);
	st = mock_stats;
	spin_unlock(&mock_list_lock);
	seq_printf(s, "get_pages %llu\nget_pages_ok %llu\nput_pages %llu\n"
		   "free_page_table %llu\ncallbacks %llu\nlive %llu\n"
		   "errors %llu\nput_revoked %llu\n", st.get_pages,
		   st.get_pages_ok, st.put_pages, st.free_page_table,
		   st.callbacks, st.live, st.errors, st.put_revoked);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(mock_stats);

static const struct file_operations mock_fire_fops = {
	.owner	= THIS_MODULE,
	.write	= mock_fire_write,
	.llseek	= noop_llseek,
};

static const struct file_operations mock_fail_fops = {
	.owner	= THIS_MODULE,
	.write	= mock_fail_write,
	.llseek	= noop_llseek,
};

static int __init mock_init(void)
{
	mock_dir = debugfs_create_dir("mock_nvp2p", NULL);
	debugfs_create_file("fire", 0200, mock_dir, NULL, &mock_fire_fops);
	debugfs_create_file("fail_next", 0200, mock_dir, NULL,
			    &mock_fail_fops);
	debugfs_create_file("stats", 0444, mock_dir, NULL, &mock_stats_fops);
	pr_info("loaded (TEST ONLY), page table version %#x\n",
		page_table_version);
	return 0;
}

static void __exit mock_exit(void)
{
	struct mock_map *m, *tmp;

	debugfs_remove_recursive(mock_dir);
	/* Clients hold a module reference (symbol_get): none is left. */
	list_for_each_entry_safe(m, tmp, &mock_maps, node) {
		pr_warn("mapping %#llx leaked by a client\n", m->va);
		list_del(&m->node);
		mock_map_free(m);
	}
}

module_init(mock_init);
module_exit(mock_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("TEST ONLY: mock of NVIDIA's nvidia_p2p API");
