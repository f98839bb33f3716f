// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_uring_stale.c - no stale slot, whatever takes the memory away
 * (issue 32).  A context bound to a real ring (a table of 2 slots, 1 in
 * one case, so that slots are reused and the table fills), a file of
 * known words on /dev/shm opened O_DIRECT.
 *
 * The hazard (../shared/research/storage-probe.md): a slot keeps the
 * pages it was set with; after a remap at the same address a READ_FIXED
 * through it succeeds and lands in the old pages, and the program sees
 * nothing.  So each case reads through a registration's slot into the
 * memory, replaces the memory, gets again and reads through the slot it
 * is given: the bytes must arrive in the memory the program holds now
 * (zeroed before each read), and where the old pages are still
 * reachable (a second mapping of a memfd; the pages mremap moved) they
 * must not change.  Every registration handed out is also checked in the
 * ring's fdinfo: its slot holds exactly its range.  Counters: where the
 * memory really went (a page of the old range unmapped or no longer
 * resident, per mincore), GDRC_STAT_INVALIDATIONS and
 * GDRC_STAT_INV_HOST_HOOK moved, the serving host source counted
 * events, and the next get is a miss; where it did not, a hit.  (Under
 * gdrcache.ko the counters differ, the data checks do not: see below.)
 *
 * Ways memory goes: munmap then mmap(MAP_FIXED) at the same address,
 * mmap(MAP_FIXED) over a shared memfd mapping, free and malloc (glibc's
 * own, as it comes, and with its top trimmed so a new block has new
 * pages at the old address), realloc growing and shrinking an mmap'ed
 * block, madvise(MADV_DONTNEED), mremap moving a block (and its old
 * address mapped anew); also a remap while the old registration is held
 * (its slot stays set until its put, the new one gets another), and a
 * full table when the memory goes.  Not yet handled, so run only with
 * GDRC_TEST_KNOWN_GAPS=1: a memfd's pages lost behind a shared mapping
 * of it (a hole punched, the file truncated), which no hook source sees
 * (gdrcache.ko's notifier does: under it they always run).
 *
 * ctest runs it once per host event source: GDRC_TEST_HOST_SOURCE names
 * the one that must serve ("glibc"; "uffd" with GDRC_MEM_HOOKS=uffd;
 * "ucm" with libucs preloaded), checked with gdrc_source_status.
 * gdrcache.ko's notifier is the fourth source, in the VM lab only
 * (ctest kmod_subscribe runs it with GDRC_TEST_HOST_SOURCE=kmod; its
 * guest's tmpfs reads without O_DIRECT, and its 6.1 kernel shows an
 * unset slot in the fdinfo as io_uring's dummy buffer, 0xffff...ff/1).
 * There the cache learns of the memory going lazily: the notifier moves
 * the registration's kernel word, and the region is dropped, counted in
 * GDRC_STAT_INV_KMOD (which gdrc_source_status reports as the source's
 * events), only when a get reaches its range (lookup.c refuses it,
 * miss.c plan_miss drops it), or evicted like any other before that.
 * So under kmod: where the next get overlaps the old range,
 * INVALIDATIONS and INV_KMOD moved by then; where it lands elsewhere,
 * neither has yet (the old region waits, kernel-stale, holding its
 * slot); a full table evicts the stale one rather than dropping it.  And
 * a first get of zero pages (read, never written) registers twice: the
 * pin's write faults replace them, which the notifier of the
 * subscription just made reports, so miss.c throws that registration
 * away and makes it again (test_uring_stale_zero_pages_first_get).
 * Skips (77, with the reason) where io_uring, sparse tables or a file on
 * /dev/shm are refused, or the source named does not serve.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <gdrcache.h>

#include "uring_test.h"

#include "ctx_stat.h"
#include "libc_sym.h"
#include "map_pages.h"

#define PAGE 4096ul
#define LEN (1ul << 20)           /* the measured hazard's size */
#define FILE_SIZE (4ul << 20)

static char file_path[64];
static int file_fd = -1; /* O_DIRECT where tmpfs takes it */
static struct io_uring ring;
static struct gdrc_ctx *ctx;
static enum gdrc_source host_src;

/* glibc's own allocator, taken by version: under ASan and TSan too the
 * heap cases run glibc's free, trim and mremap (valgrind's replacement
 * stands in for it there; the bytes must land all the same). */
static void *(*libc_malloc)(size_t);
static void *(*libc_realloc)(void *, size_t);
static void (*libc_free)(void *);
static int (*libc_mallopt)(int, int);

/* ====================================================================
 * The file, the reads, the ring's table
 * ==================================================================== */

/* READ_FIXED of len bytes of the file at off into buf through slot idx:
 * the completion's result. */
static int read_fixed(void *buf, size_t len, off_t off, unsigned idx)
{
	return uring_read_fixed(&ring, file_fd, buf, len, off, (int)idx);
}

static int all_bytes(const void *buf, size_t len, unsigned char c)
{
	const unsigned char *b = buf;

	for (size_t i = 0; i < len; i++)
		if (b[i] != c)
			return 0;
	return 1;
}

/* The ring's table per its fdinfo (uring_test.h): the number of slots
 * set, and slot idx's range in *addr_p, *len_p (0, 0 when unset). */
static int table_read(unsigned idx, uintptr_t *addr_p, size_t *len_p)
{
	int n = uring_table_read(ring.ring_fd, idx, addr_p, len_p);

	assert_true(n >= -1);
	return n;
}

static int slots_set(void)
{
	return table_read(UINT32_MAX, NULL, NULL);
}

/* ====================================================================
 * Gets, reads, counters
 * ==================================================================== */

/* A get of [p, p + len) for writing, its slot checked: it holds exactly
 * the registered range. */
static struct gdrc_mr *get_checked(void *p, size_t len,
				   struct gdrc_mr_info *info)
{
	struct gdrc_mr *mr = NULL;
	uintptr_t a;
	size_t l;

	assert_int_equal(gdrc_mr_get(ctx, p, len, GDRC_ACCESS_LOCAL_WRITE, 0,
				     &mr),
			 GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, info), GDRC_OK);
	assert_int_equal(info->backend, GDRC_BACKEND_IO_URING);
	assert_int_equal(info->lkey, gdrc_mr_lkey(mr));
	assert_true(info->addr <= (uintptr_t)p &&
		    info->addr + info->length >= (uintptr_t)p + len);
	assert_true(table_read(info->lkey, &a, &l) >= 1);
	assert_int_equal(a, info->addr);
	assert_int_equal(l, info->length);
	return mr;
}

/* Through mr's slot, the file at off into [p, p + len), zeroed first:
 * the bytes must be in p now. */
static void read_lands(struct gdrc_mr *mr, void *p, size_t len, off_t off)
{
	memset(p, 0, len);
	assert_int_equal(read_fixed(p, len, off, gdrc_mr_lkey(mr)), (int)len);
	if (!uring_holds_file(p, len, off))
		fail_msg("READ_FIXED through slot %u reported %zu bytes, but "
			 "%p+%zu does not hold them: a stale slot",
			 gdrc_mr_lkey(mr), len, p, len);
}

/* A get of [p, p + len), a read through it that must land in p, a put.
 * @return the registration's info. */
static struct gdrc_mr_info get_read_put(void *p, size_t len, off_t off)
{
	struct gdrc_mr_info info;
	struct gdrc_mr *mr = get_checked(p, len, &info);

	read_lands(mr, p, len, off);
	gdrc_mr_put(ctx, mr);
	return info;
}

struct snap {
	uint64_t hits, misses, inval, host_inv, kmod_inv, evictions, deregs,
		src_events, uncached, unseen;
};

static uint64_t src_events(void)
{
	uint64_t ev = 0;

	assert_int_equal(gdrc_source_status(ctx, host_src, NULL, &ev),
			 GDRC_OK);
	return ev;
}

static struct snap snap_take(void)
{
	struct snap s = {
		.hits = ctx_stat(ctx, GDRC_STAT_HITS),
		.misses = ctx_stat(ctx, GDRC_STAT_MISSES),
		.inval = ctx_stat(ctx, GDRC_STAT_INVALIDATIONS),
		.host_inv = ctx_stat(ctx, GDRC_STAT_INV_HOST_HOOK),
		.kmod_inv = ctx_stat(ctx, GDRC_STAT_INV_KMOD),
		.evictions = ctx_stat(ctx, GDRC_STAT_EVICTIONS),
		.deregs = ctx_stat(ctx, GDRC_STAT_DEREGS),
		.src_events = src_events(),
		.uncached = ctx_stat(ctx, GDRC_STAT_MISS_UNCACHED),
		.unseen = ctx_stat(ctx, GDRC_STAT_UNCACHED_SHARED),
	};

	return s;
}

/*
 * Did the memory of a registered range go: a page of it unmapped, or no
 * longer resident (every page was, since each was read into)?
 */
static int went(const struct gdrc_mr_info *old)
{
	size_t n = old->length / PAGE;
	unsigned char v[n];

	if (mincore((void *)old->addr, old->length, v))
		return errno == ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!(v[i] & 1))
			return 1;
	return 0;
}

/* Do the registered ranges of a and b overlap? */
static int overlap(const struct gdrc_mr_info *a, const struct gdrc_mr_info *b)
{
	return a->addr < b->addr + b->length && b->addr < a->addr + a->length;
}

/*
 * The memory of old went, and a get since: it was removed by the host
 * source, and that get (now's, one miss and no hit) registered anew.
 * Under gdrcache.ko, removed lazily (see the top): by now's miss where
 * now overlaps old, counted in INV_KMOD (the source's events) and not
 * as a hook's; elsewhere not yet, and nothing counted.
 */
static void expect_removed(const struct snap *s,
			   const struct gdrc_mr_info *old,
			   const struct gdrc_mr_info *now)
{
	assert_int_not_equal(now->id, old->id);
	if (host_src != GDRC_SOURCE_KMOD) {
		assert_true(ctx_stat(ctx, GDRC_STAT_INVALIDATIONS) > s->inval);
		assert_true(ctx_stat(ctx, GDRC_STAT_INV_HOST_HOOK) >
			    s->host_inv);
		assert_true(src_events() > s->src_events);
	} else if (overlap(old, now)) {
		assert_true(ctx_stat(ctx, GDRC_STAT_INVALIDATIONS) > s->inval);
		assert_true(ctx_stat(ctx, GDRC_STAT_INV_KMOD) > s->kmod_inv);
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_INV_HOST_HOOK),
				 s->host_inv);
		assert_true(src_events() > s->src_events);
	} else {
		print_message("    (kmod: the old registration waits, "
			      "kernel-stale, for a get of its range)\n");
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_INVALIDATIONS),
				 s->inval);
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_INV_KMOD),
				 s->kmod_inv);
	}
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), s->misses + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_HITS), s->hits);
}

/* Nothing happened to old's memory, and one get since: a hit on it, no
 * registration, no invalidation. */
static void expect_hit(const struct snap *s, const struct gdrc_mr_info *old,
		       const struct gdrc_mr_info *now)
{
	assert_int_equal(now->id, old->id);
	assert_int_equal(now->lkey, old->lkey);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_HITS), s->hits + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), s->misses);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_INVALIDATIONS), s->inval);
}

/*
 * One get of shared memory since s, as the sources in force treat it:
 * under gdrcache.ko a cached miss like any other; under the hooks and
 * userfaultfd, which cannot see a file's hole punch or another process,
 * registered for that get alone (counted uncached and unseen) and its
 * slot cleared at the put.  @return whether it was cached.
 */
static int expect_shared_get(const struct snap *s)
{
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), s->misses + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_HITS), s->hits);
	if (host_src == GDRC_SOURCE_KMOD) {
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_UNCACHED_SHARED),
				 s->unseen);
		return 1;
	}
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISS_UNCACHED),
			 s->uncached + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_UNCACHED_SHARED),
			 s->unseen + 1);
	assert_int_equal(slots_set(), 0);
	return 0;
}

/* New anonymous pages at exactly at. */
static char *map_fixed(void *at, size_t len)
{
	char *p = mmap(at, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

	assert_ptr_equal(p, at);
	return p;
}

/* ====================================================================
 * Setup: a ring and a context on it, prestate the table's slots
 * ==================================================================== */

static int setup(void **state)
{
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_IO_URING |
			      GDRC_CONFIG_FIELD_IO_URING_SLOTS,
		.ring = &ring,
		.ring_slots = (uint32_t)(uintptr_t)*state,
	};

	if (io_uring_queue_init(8, &ring, 0))
		return -1;
	if (gdrc_init(&cfg, &ctx) != GDRC_OK) {
		io_uring_queue_exit(&ring);
		return -1;
	}
	return 0;
}

/* gdrc_fini leaves the ring without a table, whatever was cached. */
static int teardown(void **state)
{
	int left;

	(void)state;
	gdrc_fini(ctx);
	ctx = NULL;
	left = slots_set();
	io_uring_queue_exit(&ring);
	if (left != -1) {
		print_error("a table is left on the ring (%d slots set)\n",
			    left);
		return -1;
	}
	return 0;
}

/* ====================================================================
 * The control: memory untouched
 * ==================================================================== */

/* Written by the program between reads but never replaced: every get
 * after the first is a hit on one slot, no registration again. */
static void test_uring_stale_untouched_hits_no_register(void **state)
{
	char *p = map_at(NULL, LEN);
	struct gdrc_mr_info first, now;
	struct snap s;

	(void)state;
	first = get_read_put(p, LEN, 0);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), 1);
	for (int i = 1; i <= 3; i++) {
		memset(p, i, LEN);
		assert_false(went(&first));
		s = snap_take();
		now = get_read_put(p, LEN, (off_t)(i * PAGE));
		expect_hit(&s, &first, &now);
	}
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_INVALIDATIONS), 0);
	assert_int_equal(slots_set(), 1);
	munmap(p, LEN);
}

/*
 * Zero pages (read, never written) at the first get: the pin for
 * writing replaces each with a page of its own, a copy-on-write fault.
 * The data lands, one miss, nothing invalidated, and the next get is a
 * hit.  The hooks' sources see no such fault: one registration.  Under
 * gdrcache.ko, the notifier of the subscription made just before the
 * pin reports each replaced page (MMU_NOTIFY_CLEAR), so the kernel word
 * of the registration just made has moved: miss.c throws it away and
 * registers again (one DEREG, uncounted as a miss or an invalidation).
 * A cost, not a stale slot; once the library avoids it (faulting the
 * range in before subscribing, or ignoring its own pin's faults), this
 * expects no DEREG under kmod either.
 */
static void test_uring_stale_zero_pages_first_get(void **state)
{
	char *p = map_at(NULL, LEN);
	struct gdrc_mr_info first, now;
	struct snap s;

	(void)state;
	assert_true(all_bytes(p, LEN, 0)); /* maps the zero page */
	s = snap_take();
	first = get_read_put(p, LEN, 0);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES), s.misses + 1);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_HITS), s.hits);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_INVALIDATIONS), s.inval);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS),
			 s.deregs + (host_src == GDRC_SOURCE_KMOD));
	assert_int_equal(slots_set(), 1);
	s = snap_take();
	now = get_read_put(p, LEN, PAGE);
	expect_hit(&s, &first, &now);
	assert_int_equal(ctx_stat(ctx, GDRC_STAT_DEREGS), s.deregs);
	munmap(p, LEN);
}

/* ====================================================================
 * Mappings replaced
 * ==================================================================== */

/* (a) munmap, then new pages mmap(MAP_FIXED) at the same address. */
static void test_uring_stale_munmap_map_fixed_new_slot(void **state)
{
	char *p = map_at(NULL, LEN);
	struct gdrc_mr_info old, now;
	struct snap s;

	(void)state;
	old = get_read_put(p, LEN, 0);
	s = snap_take();
	assert_int_equal(munmap(p, LEN), 0);
	map_fixed(p, LEN);
	assert_true(went(&old));
	now = get_read_put(p, LEN, LEN);
	expect_removed(&s, &old, &now);
	/* The new registration is cached in its turn. */
	s = snap_take();
	old = now;
	now = get_read_put(p, LEN, 2 * LEN);
	expect_hit(&s, &old, &now);
	munmap(p, LEN);
}

/* (a) mmap(MAP_FIXED) straight over a shared mapping of a memfd whose
 * pages a second mapping keeps: the read after lands in the new pages,
 * and the old ones, still reachable, see none of it. */
static void test_uring_stale_map_fixed_over_memfd_old_pages_untouched(
	void **state)
{
	int fd = memfd_create("gdrc-stale", 0), cached;
	char *p, *keep;
	struct gdrc_mr_info old, now;
	struct snap s;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, LEN), 0);
	p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	keep = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED && keep != MAP_FAILED);
	s = snap_take();
	old = get_read_put(p, LEN, 0);
	cached = expect_shared_get(&s);
	assert_true(uring_holds_file(keep, LEN, 0)); /* the same pages */
	s = snap_take();
	map_fixed(p, LEN);
	assert_true(went(&old));
	memset(keep, 0xee, LEN);
	now = get_read_put(p, LEN, LEN);
	if (cached) {
		expect_removed(&s, &old, &now);
	} else {
		/* Nothing was cached to remove: a miss on private pages. */
		assert_int_not_equal(now.id, old.id);
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_MISSES),
				 s.misses + 1);
		assert_int_equal(ctx_stat(ctx, GDRC_STAT_UNCACHED_SHARED),
				 s.unseen);
	}
	assert_true(all_bytes(keep, LEN, 0xee));
	munmap(p, LEN);
	munmap(keep, LEN);
	close(fd);
}

/* The measured hazard itself: a table of one slot, so the registration
 * after the remap is set in slot 0 again, at the same address and
 * length (the fdinfo reads the same): only where the bytes land tells
 * the new pages from the old. */
static void test_uring_stale_one_slot_reused_after_remap(void **state)
{
	char *p = map_at(NULL, LEN);
	struct gdrc_mr_info old, now;
	struct snap s;

	(void)state;
	old = get_read_put(p, LEN, 0);
	assert_int_equal(old.lkey, 0);
	s = snap_take();
	assert_int_equal(munmap(p, LEN), 0);
	map_fixed(p, LEN);
	now = get_read_put(p, LEN, LEN);
	assert_int_equal(now.lkey, 0);
	expect_removed(&s, &old, &now);
	assert_int_equal(slots_set(), 1);
	munmap(p, LEN);
}

/* A remap while the old registration is held: that slot stays set for
 * its holder; the get after is a new registration in the other slot,
 * whose read lands in the new pages; the put of the old clears its
 * slot. */
static void test_uring_stale_remap_while_held_new_slot(void **state)
{
	char *p = map_at(NULL, LEN);
	struct gdrc_mr_info old, now;
	struct gdrc_mr *held, *mr;
	struct snap s;
	uintptr_t a;
	size_t l;

	(void)state;
	held = get_checked(p, LEN, &old);
	read_lands(held, p, LEN, 0);
	s = snap_take();
	map_fixed(p, LEN);
	mr = get_checked(p, LEN, &now);
	assert_int_not_equal(now.lkey, old.lkey);
	read_lands(mr, p, LEN, LEN);
	expect_removed(&s, &old, &now);
	assert_int_equal(table_read(old.lkey, &a, &l), 2);
	assert_int_equal(a, old.addr);
	gdrc_mr_put(ctx, held);
	assert_int_equal(table_read(old.lkey, &a, &l), 1);
	assert_int_equal(l, 0);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(slots_set(), 1);
	munmap(p, LEN);
}

/* The table full of cached registrations when one's memory goes: a get
 * of a third buffer finds a slot (the removed one's, or an evicted
 * one's), and the remapped buffer's next read lands in its new pages. */
static void test_uring_stale_full_table_remap_new_slot(void **state)
{
	char *a = map_at(NULL, LEN), *b = map_at(NULL, LEN);
	char *c = map_at(NULL, LEN);
	struct gdrc_mr_info old, now;
	struct snap s;

	(void)state;
	old = get_read_put(a, LEN, 0);
	get_read_put(b, LEN, LEN);
	assert_int_equal(slots_set(), 2);
	s = snap_take();
	assert_int_equal(munmap(a, LEN), 0);
	map_fixed(a, LEN);
	get_read_put(c, LEN, 2 * LEN);
	assert_true(slots_set() <= 2);
	now = get_read_put(a, LEN, 3 * LEN);
	assert_int_not_equal(now.id, old.id);
	if (host_src != GDRC_SOURCE_KMOD) {
		assert_true(ctx_stat(ctx, GDRC_STAT_INVALIDATIONS) > s.inval);
		assert_true(src_events() > s.src_events);
	} else {
		/* Still cached, kernel-stale, when c needed a slot: evicted
		 * for it (the least recently used), or else dropped at a's
		 * get. */
		assert_true(ctx_stat(ctx, GDRC_STAT_INVALIDATIONS) +
				    ctx_stat(ctx, GDRC_STAT_EVICTIONS) >
			    s.inval + s.evictions);
	}
	assert_true(slots_set() <= 2);
	munmap(a, LEN);
	munmap(b, LEN);
	munmap(c, LEN);
}

/* ====================================================================
 * The heap
 * ==================================================================== */

/* (b) A block freed and a block of the same size allocated, four times,
 * as glibc does it (its first free of an mmap'ed block unmaps it and
 * raises its threshold, so the next comes from the heap; freeing that
 * and allocating again reuses the same pages): the read lands in the
 * block the program holds; the counters follow what the memory did. */
static void test_uring_stale_free_malloc_lands_in_new_block(void **state)
{
	char *blk = libc_malloc(LEN);
	struct gdrc_mr_info old, now;
	struct snap s;

	(void)state;
	assert_non_null(blk);
	old = get_read_put(blk, LEN, 0);
	for (int i = 1; i <= 4; i++) {
		int gone;
		char *was = blk;

		s = snap_take();
		libc_free(blk);
		gone = went(&old);
		blk = libc_malloc(LEN);
		assert_non_null(blk);
		now = get_read_put(blk, LEN, (off_t)(i * PAGE * 3));
		print_message("    round %d: %s, the new block %s\n", i,
			      gone ? "the memory went" : "the memory stayed",
			      blk == was ? "at the same address" :
					   "elsewhere");
		if (gone)
			expect_removed(&s, &old, &now);
		else if (now.addr >= old.addr &&
			 now.addr + now.length <= old.addr + old.length)
			expect_hit(&s, &old, &now);
		old = now;
	}
	libc_free(blk);
}

/* (b) The heap's top trimmed at each free (no mmap'ed blocks, no pad):
 * the block allocated again is at the same address, on new pages past
 * what glibc kept. */
static void test_uring_stale_heap_trimmed_same_address_new_pages(
	void **state)
{
	struct gdrc_mr_info old, now;
	struct snap s;
	char *blk, *was;
	int gone;

	(void)state;
	libc_mallopt(M_MMAP_THRESHOLD, 64 << 20);
	libc_mallopt(M_TRIM_THRESHOLD, 0);
	libc_mallopt(M_TOP_PAD, 0);
	blk = libc_malloc(LEN);
	assert_non_null(blk);
	old = get_read_put(blk, LEN, 0);
	s = snap_take();
	libc_free(blk);
	gone = went(&old);
	was = blk;
	blk = libc_malloc(LEN);
	assert_non_null(blk);
	now = get_read_put(blk, LEN, 5 * PAGE);
	print_message("    %s, the new block %s\n",
		      gone ? "trimmed" : "not trimmed",
		      blk == was ? "at the same address" : "elsewhere");
	if (gone)
		expect_removed(&s, &old, &now);
	libc_free(blk);
	libc_mallopt(M_MMAP_THRESHOLD, 128 << 10);
	libc_mallopt(M_TRIM_THRESHOLD, 128 << 10);
	libc_mallopt(M_TOP_PAD, 128 << 10);
}

/* (b) realloc of an mmap'ed block: grown (mremap, moved or in place),
 * then shrunk in place (its tail unmapped). */
static void test_uring_stale_realloc_grow_shrink_lands(void **state)
{
	struct gdrc_mr_info old, now;
	struct snap s;
	char *blk, *was;
	int gone;

	(void)state;
	libc_mallopt(M_MMAP_THRESHOLD, 128 << 10);
	blk = libc_malloc(LEN);
	assert_non_null(blk);
	old = get_read_put(blk, LEN, 0);
	s = snap_take();
	was = blk;
	blk = libc_realloc(blk, 3 * LEN);
	assert_non_null(blk);
	gone = went(&old);
	now = get_read_put(blk, 3 * LEN, PAGE);
	print_message("    grown %s\n", blk == was ? "in place" : "moved");
	if (gone)
		expect_removed(&s, &old, &now);
	old = now;
	s = snap_take();
	was = blk;
	blk = libc_realloc(blk, LEN / 2);
	assert_non_null(blk);
	gone = went(&old);
	now = get_read_put(blk, LEN / 2, 2 * PAGE);
	print_message("    shrunk %s, %s\n", blk == was ? "in place" : "moved",
		      gone ? "the tail went" : "nothing went");
	if (gone)
		expect_removed(&s, &old, &now);
	libc_free(blk);
}

/* ====================================================================
 * Pages dropped, mappings moved
 * ==================================================================== */

/* (c) madvise(MADV_DONTNEED) on private anonymous memory: the old pages
 * are gone, zero pages come on the next touch; the read must land in
 * what the program reads now. */
static void test_uring_stale_madvise_dontneed_lands_in_new_pages(
	void **state)
{
	char *p = map_at(NULL, LEN);
	struct gdrc_mr_info old, now;
	struct snap s;

	(void)state;
	old = get_read_put(p, LEN, 0);
	s = snap_take();
	assert_int_equal(madvise(p, LEN, MADV_DONTNEED), 0);
	assert_true(went(&old));
	assert_true(all_bytes(p, LEN, 0));
	now = get_read_put(p, LEN, LEN);
	expect_removed(&s, &old, &now);
	/* Part of the range only: the whole registration goes. */
	old = now;
	s = snap_take();
	assert_int_equal(madvise(p + LEN / 2, PAGE, MADV_DONTNEED), 0);
	now = get_read_put(p, LEN, 2 * LEN);
	expect_removed(&s, &old, &now);
	munmap(p, LEN);
}

/* (d) mremap moving the block away (grown, with the page after it
 * mapped: it cannot grow in place; no MREMAP_FIXED, which UCX 1.13's
 * UCM refuses), and its old address mapped anew: the read at the old
 * address lands there, and the moved pages (the old registration's,
 * still reachable) keep the first read's bytes; the moved block is
 * registered in its own right. */
static void test_uring_stale_mremap_moved_old_address_mapped_anew(
	void **state)
{
	char *p = map_at(NULL, LEN + PAGE), *q;
	struct gdrc_mr_info old, now;
	struct snap s;

	(void)state;
	old = get_read_put(p, LEN, 0);
	s = snap_take();
	q = mremap(p, LEN, 2 * LEN, MREMAP_MAYMOVE);
	assert_true(q != MAP_FAILED && q != p);
	assert_true(went(&old));
	map_fixed(p, LEN);
	now = get_read_put(p, LEN, LEN);
	expect_removed(&s, &old, &now);
	assert_true(uring_holds_file(q, LEN, 0));
	now = get_read_put(q, 2 * LEN, 2 * LEN);
	assert_int_not_equal(now.id, old.id);
	assert_true(uring_holds_file(p, LEN, LEN));
	munmap(p, LEN + PAGE);
	munmap(q, 2 * LEN);
}

/* ====================================================================
 * Shared memory: pages the file or another process takes
 * ==================================================================== */

/* The ways a shared mapping's pages go without a call on the mapping in
 * this process. */
enum shared_loss {
	LOSS_PUNCH,        /* fallocate(PUNCH_HOLE) on the file */
	LOSS_TRUNCATE,     /* ftruncate down and up again */
	LOSS_CHILD_REMOVE, /* a fork child's madvise(MADV_REMOVE) */
	LOSS_CHILD_PUNCH,  /* a fork child punches the hole */
	LOSS_REMAP_PAGES,  /* remap_file_pages() of the mapping's pages */
};

/* Take the pages of [p, p + len), a shared mapping of fd (-1: shared
 * anonymous memory, which only MADV_REMOVE reaches), as how says. */
static void take_pages(int fd, char *p, size_t len, enum shared_loss how)
{
	pid_t child;
	int st, r;

	switch (how) {
	case LOSS_PUNCH:
		assert_int_equal(fallocate(fd, FALLOC_FL_PUNCH_HOLE |
						       FALLOC_FL_KEEP_SIZE,
					   0, (off_t)len),
				 0);
		return;
	case LOSS_TRUNCATE:
		assert_int_equal(ftruncate(fd, 0), 0);
		assert_int_equal(ftruncate(fd, (off_t)len), 0);
		return;
	case LOSS_REMAP_PAGES:
		/* The first half now shows the file's second half.  valgrind
		 * implements no remap_file_pages (ENOSYS). */
		r = remap_file_pages(p, len / 2, 0, len / 2 / PAGE, 0);
		if (r && errno == ENOSYS) {
			print_message("    skip: remap_file_pages: %s\n",
				      strerror(errno));
			munmap(p, len);
			close(fd);
			skip();
		}
		assert_int_equal(r, 0);
		return;
	case LOSS_CHILD_REMOVE:
	case LOSS_CHILD_PUNCH:
		break;
	}
	child = fork();
	assert_true(child >= 0);
	if (!child) {
		r = how == LOSS_CHILD_REMOVE ?
			    madvise(p, len, MADV_REMOVE) :
			    fallocate(fd, FALLOC_FL_PUNCH_HOLE |
						  FALLOC_FL_KEEP_SIZE,
				      0, (off_t)len);
		_exit(r ? 1 : 0);
	}
	assert_int_equal(waitpid(child, &st, 0), child);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/*
 * A shared mapping (of a memfd, or shared anonymous memory when memfd
 * is 0) loses its pages without a call on the mapping in this process:
 * the old pages stay pinned by whatever registered them, and the
 * program's next touch maps new ones.  No hook source sees the file's
 * calls or another process, so under them shared memory is never cached
 * (expect_shared_get): the get after the loss registers the pages the
 * mapping has now, and the read lands there.  gdrcache.ko's notifier
 * sees the pages go (the kernel unmaps them from every mapping of the
 * file): under it the memory is cached, and removed when it goes.
 */
static void shared_loses_pages(int memfd, enum shared_loss how)
{
	int fd = memfd ? memfd_create("gdrc-stale-fd", 0) : -1, cached;
	struct gdrc_mr_info old, now;
	struct snap s;
	char *p;

	if (memfd) {
		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, LEN), 0);
	}
	p = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
		 MAP_SHARED | (memfd ? 0 : MAP_ANONYMOUS), fd, 0);
	assert_true(p != MAP_FAILED);
	s = snap_take();
	old = get_read_put(p, LEN, 0);
	cached = expect_shared_get(&s);
	s = snap_take();
	take_pages(fd, p, LEN, how);
	/* After remap_file_pages both halves show the same file pages: a
	 * read of the first half alone tells where it landed. */
	now = get_read_put(p, how == LOSS_REMAP_PAGES ? LEN / 2 : LEN, LEN);
	assert_int_not_equal(now.id, old.id);
	if (cached)
		expect_removed(&s, &old, &now);
	else
		expect_shared_get(&s);
	munmap(p, LEN);
	if (fd >= 0)
		close(fd);
}

static void test_uring_stale_memfd_hole_punched_lands_in_new_pages(
	void **state)
{
	(void)state;
	shared_loses_pages(1, LOSS_PUNCH);
}

static void test_uring_stale_memfd_truncated_lands_in_new_pages(
	void **state)
{
	(void)state;
	shared_loses_pages(1, LOSS_TRUNCATE);
}

static void test_uring_stale_memfd_child_removes_lands_in_new_pages(
	void **state)
{
	(void)state;
	shared_loses_pages(1, LOSS_CHILD_REMOVE);
}

static void test_uring_stale_memfd_child_punches_lands_in_new_pages(
	void **state)
{
	(void)state;
	shared_loses_pages(1, LOSS_CHILD_PUNCH);
}

static void test_uring_stale_shared_anon_child_removes_lands_in_new_pages(
	void **state)
{
	(void)state;
	shared_loses_pages(0, LOSS_CHILD_REMOVE);
}

static void test_uring_stale_memfd_remap_file_pages_lands_in_new_pages(
	void **state)
{
	(void)state;
	shared_loses_pages(1, LOSS_REMAP_PAGES);
}

/* Does this kernel's io_uring take SysV shared memory at p as a fixed
 * buffer?  (Linux 6.1 refuses it: its file is not a shmem file.) */
static int sysv_registrable(void *p)
{
	struct gdrc_mr *mr;
	gdrc_status_t st = gdrc_mr_get(ctx, p, PAGE, GDRC_ACCESS_LOCAL_WRITE,
				       GDRC_GET_UNCACHED, &mr);

	if (st == GDRC_ERR_IO) {
		print_message("    skip: io_uring refuses SysV shared memory "
			      "on this kernel\n");
		return 0;
	}
	assert_int_equal(st, GDRC_OK);
	gdrc_mr_put(ctx, mr);
	return 1;
}

/* SysV shared memory: shared like a memfd, and detached and replaced by
 * another segment at the same address (shmdt is not a call the hooks
 * see): never cached but under gdrcache.ko, and the read after the
 * replacement lands in the new segment. */
static void test_uring_stale_sysv_shm_replaced_lands_in_new_segment(
	void **state)
{
	int a = shmget(IPC_PRIVATE, LEN, IPC_CREAT | 0600);
	int b = shmget(IPC_PRIVATE, LEN, IPC_CREAT | 0600);
	struct gdrc_mr_info old, now;
	struct snap s;
	char *p, *q;

	(void)state;
	assert_true(a >= 0 && b >= 0);
	p = shmat(a, NULL, 0);
	assert_true(p != (void *)-1);
	if (!sysv_registrable(p)) {
		shmdt(p);
		shmctl(a, IPC_RMID, NULL);
		shmctl(b, IPC_RMID, NULL);
		skip();
	}
	s = snap_take();
	old = get_read_put(p, LEN, 0);
	expect_shared_get(&s);
	assert_int_equal(shmdt(p), 0);
	q = shmat(b, p, 0);
	assert_ptr_equal(q, p);
	s = snap_take();
	now = get_read_put(q, LEN, LEN);
	assert_int_not_equal(now.id, old.id);
	if (host_src != GDRC_SOURCE_KMOD)
		expect_shared_get(&s);
	assert_int_equal(shmdt(q), 0);
	shmctl(a, IPC_RMID, NULL);
	shmctl(b, IPC_RMID, NULL);
}

/*
 * shmat(SHM_REMAP) over cached private memory: the segment replaces the
 * pages at the same address.  glibc's hooks see it (shmat is patched),
 * and so does UCX's UCM; the kernel sends userfaultfd no event for it
 * (do_shmat maps with no unmap notice), a known gap of that source, run
 * there only with GDRC_TEST_KNOWN_GAPS=1.  The get after it is of the
 * segment: shared memory, cached only under gdrcache.ko.
 */
static void test_uring_stale_shmat_remap_over_cached_lands_in_segment(
	void **state)
{
	int id = shmget(IPC_PRIVATE, LEN, IPC_CREAT | 0600);
	char *p = map_at(NULL, LEN), *q;
	struct gdrc_mr_info old, now;
	struct snap s;

	(void)state;
	if (host_src == GDRC_SOURCE_UFFD && !getenv("GDRC_TEST_KNOWN_GAPS")) {
		print_message("    skip: a known gap, userfaultfd reports no "
			      "shmat(SHM_REMAP) (GDRC_TEST_KNOWN_GAPS=1 runs "
			      "it)\n");
		munmap(p, LEN);
		shmctl(id, IPC_RMID, NULL);
		skip();
	}
	assert_true(id >= 0);
	q = shmat(id, NULL, 0);
	assert_true(q != (void *)-1);
	if (!sysv_registrable(q)) {
		shmdt(q);
		munmap(p, LEN);
		shmctl(id, IPC_RMID, NULL);
		skip();
	}
	assert_int_equal(shmdt(q), 0);
	old = get_read_put(p, LEN, 0);
	s = snap_take();
	q = shmat(id, p, SHM_REMAP);
	assert_ptr_equal(q, p);
	assert_true(went(&old)); /* the segment, not yet touched */
	now = get_read_put(q, LEN, LEN);
	assert_int_not_equal(now.id, old.id);
	if (host_src != GDRC_SOURCE_KMOD) {
		assert_true(ctx_stat(ctx, GDRC_STAT_INVALIDATIONS) > s.inval);
		expect_shared_get(&s);
	}
	assert_int_equal(shmdt(q), 0);
	shmctl(id, IPC_RMID, NULL);
}

/*
 * madvise(MADV_DONTNEED) submitted through io_uring: the kernel drops
 * the pages with no libc function called.  Userfaultfd reports it (the
 * kernel's madvise path sends the event, whoever submits it), and
 * gdrcache.ko sees it; glibc's patch and UCM do not, a known gap of
 * theirs, run under them only with GDRC_TEST_KNOWN_GAPS=1.
 */
static void test_uring_stale_ring_madvise_lands_in_new_pages(void **state)
{
	char *p = map_at(NULL, LEN);
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct gdrc_mr_info old, now;
	struct snap s;

	(void)state;
	if ((host_src == GDRC_SOURCE_GLIBC || host_src == GDRC_SOURCE_UCM) &&
	    !getenv("GDRC_TEST_KNOWN_GAPS")) {
		print_message("    skip: a known gap, no libc function runs "
			      "for IORING_OP_MADVISE (GDRC_TEST_KNOWN_GAPS=1 "
			      "runs it)\n");
		munmap(p, LEN);
		skip();
	}
	old = get_read_put(p, LEN, 0);
	s = snap_take();
	sqe = io_uring_get_sqe(&ring);
	assert_non_null(sqe);
	io_uring_prep_madvise(sqe, p, LEN, MADV_DONTNEED);
	assert_int_equal(io_uring_submit_and_wait(&ring, 1), 1);
	assert_int_equal(io_uring_wait_cqe(&ring, &cqe), 0);
	if (cqe->res == -EINVAL || cqe->res == -EOPNOTSUPP) {
		io_uring_cqe_seen(&ring, cqe);
		munmap(p, LEN);
		skip(); /* a kernel without IORING_OP_MADVISE */
	}
	assert_int_equal(cqe->res, 0);
	io_uring_cqe_seen(&ring, cqe);
	assert_true(went(&old));
	now = get_read_put(p, LEN, LEN);
	expect_removed(&s, &old, &now);
	munmap(p, LEN);
}

/* ====================================================================
 * Main
 * ==================================================================== */

/* 77 with the reason where this machine or the source named cannot
 * run the tests; 1 on a broken setup; else 0. */
static int check_machine(void)
{
	static const char *const names[] = { "kmod", "ucm", "glibc", "uffd" };
	const char *want = getenv("GDRC_TEST_HOST_SOURCE"), *why = NULL;
	struct gdrc_ctx *c;
	int ret, s;

	ret = uring_usable();
	if (ret)
		return ret;
	file_fd = uring_test_file("test-uring-stale", FILE_SIZE, file_path,
				  sizeof(file_path));
	if (file_fd < 0) {
		printf("skip: no test file on /dev/shm: %s\n",
		       strerror(errno));
		return 77;
	}
	if (gdrc_init(NULL, &c))
		return 1;
	ret = gdrc_hooks_status(c, &why);
	if (ret) {
		printf("skip: no host event source here (%s)\n",
		       why ? why : "?");
		gdrc_fini(c);
		return 77;
	}
	printf("host events: %s\n", why);
	for (s = 0; s < 4; s++)
		if (want ? !strcmp(want, names[s]) :
			   gdrc_source_status(c, (enum gdrc_source)s, NULL,
					      NULL) == GDRC_OK)
			break;
	if (s == 4) {
		printf("GDRC_TEST_HOST_SOURCE=%s: unknown\n", want);
		gdrc_fini(c);
		return 1;
	}
	host_src = (enum gdrc_source)s;
	why = NULL;
	ret = gdrc_source_status(c, host_src, &why, NULL);
	gdrc_fini(c);
	if (ret) {
		printf("skip: the host source %s does not serve here (%s)\n",
		       names[s], why ? why : "?");
		return 77;
	}
	libc_malloc = (void *(*)(size_t))libc_sym("malloc");
	libc_realloc = (void *(*)(void *, size_t))libc_sym("realloc");
	libc_free = (void (*)(void *))libc_sym("free");
	libc_mallopt = (int (*)(int, int))libc_sym("mallopt");
	if (!libc_malloc || !libc_realloc || !libc_free || !libc_mallopt) {
		printf("glibc's malloc, realloc, free or mallopt not found\n");
		return 1;
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f, slots)                                                          \
	cmocka_unit_test_prestate_setup_teardown(f, setup, teardown,         \
						 (void *)(uintptr_t)(slots))
		T(test_uring_stale_untouched_hits_no_register, 2),
		T(test_uring_stale_zero_pages_first_get, 2),
		T(test_uring_stale_munmap_map_fixed_new_slot, 2),
		T(test_uring_stale_map_fixed_over_memfd_old_pages_untouched, 2),
		T(test_uring_stale_one_slot_reused_after_remap, 1),
		T(test_uring_stale_remap_while_held_new_slot, 2),
		T(test_uring_stale_full_table_remap_new_slot, 2),
		T(test_uring_stale_free_malloc_lands_in_new_block, 2),
		T(test_uring_stale_heap_trimmed_same_address_new_pages, 2),
		T(test_uring_stale_realloc_grow_shrink_lands, 2),
		T(test_uring_stale_madvise_dontneed_lands_in_new_pages, 2),
		T(test_uring_stale_mremap_moved_old_address_mapped_anew, 2),
		T(test_uring_stale_memfd_hole_punched_lands_in_new_pages, 2),
		T(test_uring_stale_memfd_truncated_lands_in_new_pages, 2),
		T(test_uring_stale_memfd_child_removes_lands_in_new_pages, 2),
		T(test_uring_stale_memfd_child_punches_lands_in_new_pages, 2),
		T(test_uring_stale_shared_anon_child_removes_lands_in_new_pages,
		  2),
		T(test_uring_stale_memfd_remap_file_pages_lands_in_new_pages, 2),
		T(test_uring_stale_sysv_shm_replaced_lands_in_new_segment, 2),
		T(test_uring_stale_shmat_remap_over_cached_lands_in_segment, 2),
		T(test_uring_stale_ring_madvise_lands_in_new_pages, 2),
#undef T
	};
	int ret = check_machine();

	if (!ret)
		ret = cmocka_run_group_tests(tests, NULL, NULL);
	if (file_fd >= 0)
		close(file_fd);
	if (file_path[0])
		unlink(file_path);
	return ret;
}
