// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_threads.c - concurrent get/put/invalidate, on ranges shared by all
 * threads and on private ones, while another thread unmaps and remaps
 * its own ranges.  Checks that every get returns a registration covering
 * the request with the rights asked for, that a thread never gets back a
 * registration older than its own last unmap of that range, and that the
 * counters add up once everyone is done.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <cmocka.h>

#include <gdrcache.h>

#define PAGE 4096UL
#define NTHREADS 6
#define ITERS 20000
#define SHARED_PAGES 8

static struct gdrc_ctx *ctx;
static char *shared_buf;
static _Atomic uint64_t gets;

struct worker {
	pthread_t tid;
	int idx;
	char *priv;   /* 4 private pages */
	int failed;   /* first failure line, or 0 */
};

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int covers(struct gdrc_mr *mr, const char *p, size_t len,
		  uint32_t access)
{
	struct gdrc_mr_info i;

	if (gdrc_mr_query(mr, &i))
		return 0;
	return i.addr <= (uintptr_t)p &&
	       i.addr + i.length >= (uintptr_t)p + len &&
	       !(access & ~i.access);
}

#define CHECK(w, cond)                                                       \
	do {                                                                 \
		if (!(cond) && !(w)->failed)                                 \
			(w)->failed = __LINE__;                              \
	} while (0)

static int report_frees; /* set before the threads start */
static atomic_ulong busy; /* gets answered GDRC_ERR_BUSY */

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(w->idx + 1);
	struct gdrc_mr *mr;

	for (int i = 0; i < ITERS && !w->failed; i++) {
		uint64_t r = xorshift(&seed);
		int shared = r & 1;
		char *base = shared ? shared_buf : w->priv;
		int npages = shared ? SHARED_PAGES : 4;
		char *p = base + ((r >> 8) % npages) * PAGE + (r >> 20) % 100;
		size_t len = 1 + (r >> 32) % (2 * PAGE);
		uint32_t access = (r >> 40) & 1 ? GDRC_ACCESS_REMOTE_READ : 0;
		gdrc_status_t st;

		if (p + len > base + npages * PAGE)
			len = (size_t)(base + npages * PAGE - p);
		if ((r >> 48) % 64 == 0) {
			CHECK(w, gdrc_invalidate(ctx, p, len) == GDRC_OK);
			continue;
		}
		/* Other workers invalidate these ranges: a miss that keeps
		 * being invalidated while it registers may say BUSY. */
		st = gdrc_mr_get(ctx, p, len, access, 0, &mr);
		if (st == GDRC_ERR_BUSY) {
			atomic_fetch_add(&busy, 1);
			continue;
		}
		CHECK(w, st == GDRC_OK);
		if (w->failed)
			break;
		atomic_fetch_add(&gets, 1);
		CHECK(w, covers(mr, p, len, access));
		gdrc_mr_put(ctx, mr);
	}
	return NULL;
}

/* Unmaps and remaps its own pages; each get after a remap must be a
 * registration made after the unmap. */
static void *unmapper_main(void *arg)
{
	struct worker *w = arg;
	struct gdrc_mr *mr;
	struct gdrc_mr_info i;
	uint64_t last_id = 0;

	for (int n = 0; n < ITERS / 10 && !w->failed; n++) {
		char *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		CHECK(w, p != MAP_FAILED);
		if (w->failed)
			break;
		CHECK(w, gdrc_mr_get(ctx, p, PAGE, 0, 0, &mr) == GDRC_OK);
		if (w->failed)
			break;
		atomic_fetch_add(&gets, 1);
		CHECK(w, gdrc_mr_query(mr, &i) == GDRC_OK);
		CHECK(w, i.id > last_id);
		last_id = i.id;
		gdrc_mr_put(ctx, mr);
		/* Without hooks (a TSan build) the caller reports its frees,
		 * as GDRC_MEM_HOOKS=none asks. */
		if (report_frees)
			CHECK(w, gdrc_invalidate(ctx, p, 2 * PAGE) == GDRC_OK);
		CHECK(w, munmap(p, 2 * PAGE) == 0);
	}
	return NULL;
}

static void run_threads(void)
{
	struct worker w[NTHREADS + 1] = { 0 };
	uint64_t hits, misses, puts, regions, pinned;

	report_frees = gdrc_hooks_status(ctx, NULL) != GDRC_OK;

	shared_buf = mmap(NULL, SHARED_PAGES * PAGE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(shared_buf != MAP_FAILED);
	for (int i = 0; i <= NTHREADS; i++) {
		w[i].idx = i;
		w[i].priv = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		assert_true(w[i].priv != MAP_FAILED);
		assert_int_equal(pthread_create(&w[i].tid, NULL,
						i < NTHREADS ? worker_main :
							       unmapper_main,
						&w[i]),
				 0);
	}
	for (int i = 0; i <= NTHREADS; i++) {
		pthread_join(w[i].tid, NULL);
		if (w[i].failed)
			fail_msg("thread %d failed at line %d", i,
				 w[i].failed);
		if (report_frees) /* the unmapper may map here next */
			assert_int_equal(gdrc_invalidate(ctx, w[i].priv,
							 4 * PAGE),
					 GDRC_OK);
		munmap(w[i].priv, 4 * PAGE);
	}
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_HITS, &hits), GDRC_OK);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_MISSES, &misses),
			 GDRC_OK);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_PUTS, &puts), GDRC_OK);
	print_message("gets %llu (and %lu busy) hits %llu misses %llu "
		      "puts %llu\n", (unsigned long long)atomic_load(&gets),
		      atomic_load(&busy),
		      (unsigned long long)hits, (unsigned long long)misses,
		      (unsigned long long)puts);
	assert_int_equal(hits + misses, atomic_load(&gets));
	assert_int_equal(puts, atomic_load(&gets));
	/* Nothing held: pinned bytes are exactly what is cached. */
	assert_int_equal(gdrc_invalidate(ctx, (void *)4096,
					 UINTPTR_MAX - 2 * 65536 - 4096),
			 GDRC_OK);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_REGIONS, &regions),
			 GDRC_OK);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_PINNED_BYTES, &pinned),
			 GDRC_OK);
	assert_int_equal(regions, 0);
	assert_int_equal(pinned, 0);
	munmap(shared_buf, SHARED_PAGES * PAGE);
}

static void test_threads_get_put_invalidate_unmap_consistent(void **state)
{
	(void)state;
	atomic_store(&gets, 0);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	run_threads();
	gdrc_fini(ctx);
}

static void test_threads_with_small_limit_consistent(void **state)
{
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_MAX_REGIONS,
		.max_regions = 3 * NTHREADS,
	};

	(void)state;
	atomic_store(&gets, 0);
	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_OK);
	run_threads();
	gdrc_fini(ctx);
}

/*
 * Gets in one thread, puts in another, while a third invalidates: every
 * registration is released once nobody holds it, whichever thread put
 * it, and the getting thread's exit lets go of what it remembered.
 */
#define XPUT_N 2000

static struct gdrc_mr *xput_slot[XPUT_N];
static _Atomic int xput_ready[XPUT_N];

static void *xput_getter(void *arg)
{
	char *buf = arg;

	for (int i = 0; i < XPUT_N; i++) {
		struct gdrc_mr *mr;
		gdrc_status_t st;

		/* The main thread invalidates these pages meanwhile: a miss
		 * invalidated three times while it registers says BUSY. */
		while ((st = gdrc_mr_get(ctx, buf + (i % 8) * PAGE, 64, 0, 0,
					 &mr)) == GDRC_ERR_BUSY)
			atomic_fetch_add(&busy, 1);
		if (st)
			return (void *)1;
		xput_slot[i] = mr;
		atomic_store(&xput_ready[i], 1);
	}
	return NULL;
}

static void *xput_putter(void *arg)
{
	(void)arg;
	for (int i = 0; i < XPUT_N; i++) {
		while (!atomic_load(&xput_ready[i]))
			sched_yield();
		gdrc_mr_put(ctx, xput_slot[i]);
	}
	return NULL;
}

static void test_threads_cross_thread_put_releases_all(void **state)
{
	char *buf = mmap(NULL, 8 * PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pthread_t g, p;
	void *ret;
	uint64_t pinned, puts, regions;

	(void)state;
	assert_true(buf != MAP_FAILED);
	for (int i = 0; i < XPUT_N; i++)
		atomic_store(&xput_ready[i], 0);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	assert_int_equal(pthread_create(&g, NULL, xput_getter, buf), 0);
	assert_int_equal(pthread_create(&p, NULL, xput_putter, NULL), 0);
	for (int i = 0; i < 200; i++)
		assert_int_equal(gdrc_invalidate(ctx, buf + (i % 8) * PAGE,
						 PAGE),
				 GDRC_OK);
	assert_int_equal(pthread_join(g, &ret), 0);
	assert_null(ret);
	assert_int_equal(pthread_join(p, NULL), 0);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_PUTS, &puts), GDRC_OK);
	assert_int_equal(puts, XPUT_N);
	/* Both threads are gone: only the cache holds anything now. */
	assert_int_equal(gdrc_invalidate(ctx, buf, 8 * PAGE), GDRC_OK);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_REGIONS, &regions),
			 GDRC_OK);
	assert_int_equal(regions, 0);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_PINNED_BYTES, &pinned),
			 GDRC_OK);
	assert_int_equal(pinned, 0);
	gdrc_fini(ctx);
	munmap(buf, 8 * PAGE);
}

/*
 * An idle thread's remembered handle keeps an invalidated registration
 * registered (never handed out again) until the thread calls again or
 * exits; then it is released.
 */
static _Atomic int idle_stage;

static void *idle_holder(void *arg)
{
	struct gdrc_mr *mr;

	/* Twice: a registration's first get is a direct reference, the
	 * second makes this thread's handle. */
	for (int i = 0; i < 2; i++) {
		if (gdrc_mr_get(ctx, arg, 64, 0, 0, &mr))
			return (void *)1;
		gdrc_mr_put(ctx, mr);
	}
	atomic_store(&idle_stage, 1);
	while (atomic_load(&idle_stage) != 2)
		sched_yield();
	return NULL; /* exits: its handle is let go */
}

static void test_threads_idle_thread_releases_at_exit(void **state)
{
	char *buf = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t pinned, deregs;
	pthread_t t;
	void *ret;

	(void)state;
	assert_true(buf != MAP_FAILED);
	atomic_store(&idle_stage, 0);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	assert_int_equal(pthread_create(&t, NULL, idle_holder, buf), 0);
	while (atomic_load(&idle_stage) != 1)
		sched_yield();
	assert_int_equal(gdrc_invalidate(ctx, buf, PAGE), GDRC_OK);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_PINNED_BYTES, &pinned),
			 GDRC_OK);
	assert_int_equal(pinned, PAGE); /* the idle thread still pins it */
	atomic_store(&idle_stage, 2);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_null(ret);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_PINNED_BYTES, &pinned),
			 GDRC_OK);
	assert_int_equal(pinned, 0);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_DEREGS, &deregs),
			 GDRC_OK);
	assert_int_equal(deregs, 1);
	gdrc_fini(ctx);
	munmap(buf, PAGE);
}

/*
 * A destructor of a thread-specific key created after the library's own
 * runs after the library let go of the thread's handles; a get there
 * must not leave a handle that nothing would let go of.
 */
static pthread_key_t late_key;
static char *late_buf;
static atomic_int late_got;

static void late_destructor(void *arg)
{
	struct gdrc_mr *mr;

	(void)arg;
	if (gdrc_mr_get(ctx, late_buf, 64, 0, 0, &mr) == GDRC_OK) {
		gdrc_mr_put(ctx, mr);
		atomic_store(&late_got, 1);
	}
}

static void *late_main(void *arg)
{
	struct gdrc_mr *mr;

	(void)arg;
	if (gdrc_mr_get(ctx, late_buf, 64, 0, 0, &mr))
		return (void *)1;
	gdrc_mr_put(ctx, mr);
	pthread_setspecific(late_key, (void *)1);
	return NULL;
}

static void test_threads_get_in_late_key_destructor_releases(void **state)
{
	struct gdrc_mr *mr;
	uint64_t pinned;
	pthread_t t;
	void *ret;

	(void)state;
	late_buf = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(late_buf != MAP_FAILED);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	/* The library's key exists before ours: its destructor runs
	 * first (glibc runs them in key order). */
	assert_int_equal(gdrc_mr_get(ctx, late_buf, 64, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(pthread_key_create(&late_key, late_destructor), 0);
	atomic_store(&late_got, 0);
	assert_int_equal(pthread_create(&t, NULL, late_main, NULL), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_null(ret);
	assert_int_equal(atomic_load(&late_got), 1);
	/* The invalidating thread lets go of its own handle at once; the
	 * exited thread holds none. */
	assert_int_equal(gdrc_invalidate(ctx, late_buf, PAGE), GDRC_OK);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_PINNED_BYTES, &pinned),
			 GDRC_OK);
	assert_int_equal(pinned, 0);
	pthread_key_delete(late_key);
	gdrc_fini(ctx);
	munmap(late_buf, PAGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_threads_get_put_invalidate_unmap_consistent),
		cmocka_unit_test(test_threads_with_small_limit_consistent),
		cmocka_unit_test(test_threads_cross_thread_put_releases_all),
		cmocka_unit_test(test_threads_idle_thread_releases_at_exit),
		cmocka_unit_test(
			test_threads_get_in_late_key_destructor_releases),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
