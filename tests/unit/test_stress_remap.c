// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_stress_remap.c - 8 threads, one arena: 6 get, put and invalidate
 * ranges of it while 2 map new memory over ranges of it (mmap MAP_FIXED,
 * or munmap and mmap back) and churn the allocator, for a bounded time;
 * no stale hit, no deadlock, the cache's memory bounded.
 *
 * Every registration served covers the range asked for.
 *
 * Stale hit: each page has a reader-writer lock; a getter holds the read
 * locks of its pages across its get, a remapper the write locks across
 * its remap, taken in page order.  A registration that first appeared at
 * clock T must never be handed out again for a page remapped after T:
 * it would map the old memory.  The clock ticks at every remap.
 *
 * Run under glibc's malloc and, by ctest, with jemalloc and mimalloc
 * preloaded, on UCM's events, on userfaultfd's, and in the VM lab with
 * gdrcache.ko as the only host source (GDRC_STRESS_TICK=start there:
 * see tick).  A host source must work (skipped without one).
 * Built twice: over 64 pages and 24 registrations (evictions all the
 * time), and as test_stress_remap_wide over 1,024 pages and 4,096
 * (each getter takes more buffers in turn than its first parked table
 * holds, so that table grows while the remappers run).
 *
 * With "uring" (issue 32), the context registers with io_uring: a ring's
 * table of MAX_REGIONS / 2 slots (so the table fills before the region
 * limit does, and slots are reused all the time).  Each getter, after a
 * get, reads through the registration's slot (READ_FIXED of a file on
 * /dev/shm opened O_DIRECT, one read at a time on the shared ring) into
 * each page it holds locked, at its own slice of the page, zeroed
 * first: the file's bytes must be there after the read.  A stale slot
 * (pinning pages mapped there before a remap) would put them in the old
 * pages and leave the slice zero.  Every slot is clear once the arena is
 * invalidated, and gdrc_fini leaves the ring without a table.  Skipped
 * where io_uring or O_DIRECT on /dev/shm is refused.
 *
 * Usage: test_stress_remap [seconds [uring]] (default 2).  Exit 0 on
 * success.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <gdrcache.h>

#ifdef GDRC_HAVE_URING
#include <liburing.h>

#include "uring_test.h"
#endif

#define GETTERS 6
#define REMAPPERS 2
#ifndef PAGES
#define PAGES 64
#endif
#define SPAN 4            /* pages a range covers at most */
#ifndef MAX_REGIONS
#define MAX_REGIONS 24
#endif
#define MAX_IDS (1u << 16)
#define WATCHDOG_S 60

static struct gdrc_ctx *ctx;
static char *arena;
static size_t page;
static pthread_rwlock_t page_lock[PAGES];
static _Atomic uint64_t page_time[PAGES];
static _Atomic uint64_t clock_now = 1;
static atomic_int stop, failed;
static atomic_ulong gets, remaps;

/* When each registration id first appeared. */
static pthread_mutex_t born_lock = PTHREAD_MUTEX_INITIALIZER;
struct born {
	uint64_t id;
	uint64_t start, end;  /* the clock before and after its first get */
	unsigned p, n;        /* the pages that get held locked */
};
static struct born born_tab[MAX_IDS];

/* The first failure is printed; every thread then stops. */
#define FAIL(...)                                                            \
	do {                                                                 \
		if (!atomic_exchange(&failed, 1))                            \
			fprintf(stderr, "test_stress_remap: " __VA_ARGS__);  \
		atomic_store(&stop, 1);                                      \
	} while (0)

/* ====================================================================
 * io_uring mode: reads through each registration's slot
 * ==================================================================== */

#define URING_FILE (1ul << 20)

static int uring;              /* the context registers with a ring */
#ifdef GDRC_HAVE_URING
static size_t slice;           /* bytes of a page each getter reads into */
static atomic_ulong reads;     /* reads through slots checked */
static struct io_uring ring;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static int file_fd = -1;       /* URING_FILE bytes of uring_word */
static char file_path[64];

/* 0, or 77 with the reason printed. */
static int uring_setup(void)
{
	int ret;

	ret = io_uring_queue_init(8, &ring, 0);
	if (ret) {
		printf("skip: io_uring refused here: %s\n", strerror(-ret));
		return 77;
	}
	file_fd = uring_test_file("stress-remap", URING_FILE, file_path,
				  sizeof(file_path));
	unlink(file_path);
	if (file_fd < 0) {
		printf("skip: no test file on /dev/shm: %s\n",
		       strerror(errno));
		return 77;
	}
	/* Each getter its own slice of every page, 8-byte words. */
	slice = page / GETTERS & ~(size_t)7;
	return 0;
}

/*
 * Through slot lkey, the file at a random offset into getter g's slice
 * of each page [p, p + n), zeroed first.  @return the first page whose
 * slice did not receive the bytes (a stale slot), or -1.
 */
static int uring_read_pages(unsigned g, unsigned *seed, uint32_t lkey,
			    unsigned p, unsigned n)
{
	for (unsigned q = p; q < p + n; q++) {
		uint64_t *buf = (uint64_t *)(arena + q * page + g * slice);
		uint64_t off = (uint64_t)rand_r(seed) %
			       ((URING_FILE - slice) / 8) * 8;
		int res;

		memset(buf, 0, slice);
		pthread_mutex_lock(&ring_lock);
		res = uring_read_fixed(&ring, file_fd, buf, slice, (off_t)off,
				       (int)lkey);
		pthread_mutex_unlock(&ring_lock);
		if (res != (int)slice) {
			FAIL("READ_FIXED through slot %u into page %u: %d "
			     "(%s)\n", lkey, q, res,
			     res < 0 ? strerror(-res) : "short");
			return (int)q;
		}
		if (!uring_holds_file(buf, slice, (off_t)off))
			return (int)q;
		atomic_fetch_add(&reads, 1);
	}
	return -1;
}
#endif

/*
 * When id first appeared: its first get's clock before and after, and
 * the pages it held locked.  Direct mapped: an older id pushed out reads
 * as newborn when seen again (the check gets laxer for it, never wrong).
 */
static struct born born_of(uint64_t id, const struct born *now)
{
	unsigned i = (unsigned)(id % MAX_IDS);
	struct born b;

	pthread_mutex_lock(&born_lock);
	if (born_tab[i].id != id)
		born_tab[i] = *now;
	b = born_tab[i];
	pthread_mutex_unlock(&born_lock);
	return b;
}

/*
 * Was page q remapped after registration b existed?  A page locked by
 * its first get could not change during it: anything after the start
 * counts.  Another page of its range (a wider registration) may have
 * been remapped during that get, before the registration was made:
 * only what came after the get counts.
 */
static int stale(const struct born *b, unsigned q)
{
	uint64_t t = atomic_load(&page_time[q]);

	return q >= b->p && q < b->p + b->n ? t > b->start : t > b->end;
}

static void lock_pages(unsigned p, unsigned n, int write)
{
	for (unsigned i = p; i < p + n; i++) {
		if (write)
			pthread_rwlock_wrlock(&page_lock[i]);
		else
			pthread_rwlock_rdlock(&page_lock[i]);
	}
}

static void unlock_pages(unsigned p, unsigned n)
{
	for (unsigned i = p; i < p + n; i++)
		pthread_rwlock_unlock(&page_lock[i]);
}

static void *getter(void *arg)
{
	unsigned g = (unsigned)(uintptr_t)arg - 1; /* 0 .. GETTERS - 1 */
	unsigned seed = (unsigned)(uintptr_t)arg * 7919u;

	while (!atomic_load(&stop)) {
		unsigned p = (unsigned)rand_r(&seed) % PAGES;
		unsigned n = 1 + (unsigned)rand_r(&seed) % SPAN;
		size_t off, len;
		struct gdrc_mr_info info;
		struct gdrc_mr *mr;
		gdrc_status_t st;
		struct born now, b;

		if (p + n > PAGES)
			n = PAGES - p;
		off = (size_t)rand_r(&seed) % page;
		len = n * page - off;
		lock_pages(p, n, 0);
		if (rand_r(&seed) % 16 == 0) {
			if (gdrc_invalidate(ctx, arena + p * page + off, len))
				FAIL("invalidate failed\n");
			unlock_pages(p, n);
			continue;
		}
		now.start = atomic_load(&clock_now);
		st = gdrc_mr_get(ctx, arena + p * page + off, len, 0, 0, &mr);
		now.end = atomic_load(&clock_now);
		if (st == GDRC_ERR_BUSY || st == GDRC_ERR_LIMIT) {
			unlock_pages(p, n);
			continue; /* documented, under this churn */
		}
		if (st != GDRC_OK || gdrc_mr_query(mr, &info)) {
			FAIL("get failed: status %d\n", (int)st);
			unlock_pages(p, n);
			break;
		}
		if (info.key_addr > (uintptr_t)arena + p * page + off ||
		    info.key_addr + info.key_length <
			    (uintptr_t)arena + (p + n) * page)
			FAIL("registration %llu (%#lx+%#lx) does not cover "
			     "pages %u+%u\n", (unsigned long long)info.id,
			     (unsigned long)info.key_addr,
			     (unsigned long)info.key_length, p, n);
		now.id = info.id;
		now.p = p;
		now.n = n;
		b = born_of(info.id, &now);
		for (unsigned q = p; q < p + n; q++)
			if (stale(&b, q))
				FAIL("stale hit: registration %llu (from %llu-%llu, "
				     "pages %u+%u) served page %u, remapped at "
				     "%llu\n",
				     (unsigned long long)info.id,
				     (unsigned long long)b.start,
				     (unsigned long long)b.end, b.p, b.n, q,
				     (unsigned long long)atomic_load(
					     &page_time[q]));
#ifdef GDRC_HAVE_URING
		if (uring) {
			int q = info.lkey >= MAX_REGIONS / 2 ? (int)p :
				uring_read_pages(g, &seed, info.lkey, p, n);

			if (info.lkey >= MAX_REGIONS / 2)
				FAIL("registration %llu in slot %u, past the "
				     "table's %u\n",
				     (unsigned long long)info.id, info.lkey,
				     MAX_REGIONS / 2);
			else if (q >= 0)
				FAIL("stale slot: registration %llu (slot %u, "
				     "%#lx+%#lx, from %llu-%llu) read into "
				     "page %u, which did not get the bytes "
				     "(remapped at %llu)\n",
				     (unsigned long long)info.id, info.lkey,
				     (unsigned long)info.key_addr,
				     (unsigned long)info.key_length,
				     (unsigned long long)b.start,
				     (unsigned long long)b.end, (unsigned)q,
				     (unsigned long long)atomic_load(
					     &page_time[q]));
		}
#else
		(void)g;
#endif
		gdrc_mr_put(ctx, mr);
		unlock_pages(p, n);
		atomic_fetch_add(&gets, 1);
	}
	return NULL;
}

/*
 * The clock ticks for a remap of pages [p, p + n) once it returned, or,
 * with GDRC_STRESS_TICK=start, before it begins: what the kernel
 * module's notifier guarantees is that every change that begins after a
 * registration exists ends it (it fires as an invalidation starts, and a
 * subscription waits out one under way; the new mapping of an
 * mmap(MAP_FIXED) fires nothing).  The glibc hooks post when the call
 * returns, so the default holds them to every remap that ends after.
 */
static int tick_at_start;

static void tick(unsigned p, unsigned n)
{
	uint64_t t = atomic_fetch_add(&clock_now, 1) + 1;

	for (unsigned q = p; q < p + n; q++)
		atomic_store(&page_time[q], t);
}

static void *remapper(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg * 104729u;

	while (!atomic_load(&stop)) {
		unsigned p = (unsigned)rand_r(&seed) % PAGES;
		unsigned n = 1 + (unsigned)rand_r(&seed) % SPAN;
		char *a;
		void *r, *junk;

		if (p + n > PAGES)
			n = PAGES - p;
		a = arena + p * page;
		lock_pages(p, n, 1);
		if (tick_at_start)
			tick(p, n);
		if (rand_r(&seed) & 1 && munmap(a, n * page))
			FAIL("munmap failed\n");
		r = mmap(a, n * page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		if (r != a)
			FAIL("mmap failed\n");
		if (!tick_at_start)
			tick(p, n);
		unlock_pages(p, n);
		atomic_fetch_add(&remaps, 1);
		/* The allocator's own unmaps and purges, meanwhile. */
		junk = malloc(64 * 1024 << (rand_r(&seed) % 5));
		if (junk)
			memset(junk, 1, 4096);
		free(junk);
	}
	return NULL;
}

static void on_alarm(int sig)
{
	static const char msg[] = "test_stress_remap: no end: deadlock\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	abort();
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0;
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_MAX_REGIONS,
				   .max_regions = MAX_REGIONS };
	pthread_t th[GETTERS + REMAPPERS];
	uint64_t regions = 0, pinned = 0, events = 0;
	const char *why = NULL, *pre = getenv("LD_PRELOAD");

	page = (size_t)sysconf(_SC_PAGESIZE);
	tick_at_start = getenv("GDRC_STRESS_TICK") &&
			!strcmp(getenv("GDRC_STRESS_TICK"), "start");
	uring = argc > 2 && !strcmp(argv[2], "uring");
	if (uring) {
#ifdef GDRC_HAVE_URING
		int ret = uring_setup();

		if (ret)
			return ret;
		cfg.field_mask |= GDRC_CONFIG_FIELD_IO_URING |
				  GDRC_CONFIG_FIELD_IO_URING_SLOTS;
		cfg.ring = &ring;
		cfg.ring_slots = MAX_REGIONS / 2;
#else
		printf("skip: built without liburing\n");
		return 77;
#endif
	}
	if (gdrc_init(&cfg, &ctx) != GDRC_OK)
		return 1;
	if (gdrc_hooks_status(ctx, &why) != GDRC_OK) {
		printf("skipped: no memory hooks (%s)\n", why);
		gdrc_fini(ctx);
		return 77;
	}
	/* A guard page each side: a page unmapped at an end of the arena
	 * must not widen the free gap beside it, where another thread's
	 * mmap (the allocator's, under the remappers' churn) would land
	 * and then be clobbered by the remap, its later munmap unmapping
	 * arena pages under their locks (seen as EFAULT from io_uring). */
	arena = mmap(NULL, (PAGES + 2) * page, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (arena == MAP_FAILED)
		return 1;
	arena += page;
	if (mmap(arena, PAGES * page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != arena)
		return 1;
	for (int i = 0; i < PAGES; i++)
		pthread_rwlock_init(&page_lock[i], NULL);
	signal(SIGALRM, on_alarm);
	alarm(WATCHDOG_S + (unsigned)secs);
	for (int i = 0; i < GETTERS + REMAPPERS; i++)
		pthread_create(&th[i], NULL, i < GETTERS ? getter : remapper,
			       (void *)(uintptr_t)(i + 1));
	usleep((useconds_t)(secs * 1e6));
	atomic_store(&stop, 1);
	for (int i = 0; i < GETTERS + REMAPPERS; i++)
		pthread_join(th[i], NULL);
	alarm(0);
	gdrc_stat_get(ctx, GDRC_STAT_MEM_EVENTS, &events);
	if (gdrc_invalidate(ctx, arena, PAGES * page) ||
	    gdrc_stat_get(ctx, GDRC_STAT_REGIONS, &regions) ||
	    gdrc_stat_get(ctx, GDRC_STAT_PINNED_BYTES, &pinned))
		FAIL("final counters\n");
	if (regions || pinned)
		FAIL("left after the last invalidate: %llu regions, %llu "
		     "bytes\n", (unsigned long long)regions,
		     (unsigned long long)pinned);
	printf("test_stress_remap (%s): %lu gets checked, %lu remaps, %llu "
	       "memory events in %.1f s; host source: %s\n",
	       pre && *pre ? pre : "glibc malloc", atomic_load(&gets),
	       atomic_load(&remaps), (unsigned long long)events, secs, why);
	if (!atomic_load(&gets) || !atomic_load(&remaps))
		FAIL("no progress\n");
#ifdef GDRC_HAVE_URING
	if (uring) {
		uint64_t evicted = 0;
		int set = uring_slots_set(ring.ring_fd);

		gdrc_stat_get(ctx, GDRC_STAT_EVICTIONS, &evicted);
		printf("on a ring of %u slots: %lu reads through slots "
		       "checked, %llu evictions\n", MAX_REGIONS / 2,
		       atomic_load(&reads), (unsigned long long)evicted);
		if (set)
			FAIL("%d slots set after the last invalidate\n", set);
		if (!atomic_load(&reads))
			FAIL("no read through a slot\n");
		gdrc_fini(ctx);
		ctx = NULL;
		if ((set = uring_slots_set(ring.ring_fd)) != -1)
			FAIL("the ring has a table after gdrc_fini (%d)\n",
			     set);
		io_uring_queue_exit(&ring);
		close(file_fd);
	}
#endif
	if (ctx)
		gdrc_fini(ctx);
	munmap(arena - page, (PAGES + 2) * page);
	return atomic_load(&failed);
}
