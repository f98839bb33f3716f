// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cufile.c - the cufile backend against the fake libcufile and the
 * fake CUDA driver: what gdrc_init refuses and why, whole allocations
 * registered exactly once and shared, the registration gone when a CUDA
 * free returns (held or not, from any thread, through every free path),
 * cuFile's pinned-memory limit and refusals, host memory, VMM mappings,
 * and a base registered twice by the cache shared rather than refused.
 *
 * The fake follows libcufile 1.15 as measured on an H200
 * (shared/research/storage-probe.md): a second registration of a base
 * fails with 5023, and a registration whose memory is freed stays
 * (orphaned), so the next allocation at that address cannot be
 * registered.  fake_cufile_orphaned_total() counts registrations that
 * were still there when the fake driver freed their memory: it is the
 * witness of "deregistered before the free".
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include <gdrcache.h>

#include "fake_cuda.h"
#include "fake_cufile.h"
#include "fake_cuda_test.h"

#define KIB 1024UL
#define MIB (1024UL * 1024)

static struct gdrc_ctx *ctx_mem(uint32_t mem, gdrc_status_t want)
{
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_CUFILE,
				   .cufile = mem };
	struct gdrc_ctx *ctx = NULL;

	assert_int_equal(gdrc_init(&cfg, &ctx), want);
	return ctx;
}

static struct gdrc_ctx *ctx_all(void)
{
	return ctx_mem(GDRC_CUFILE_ALL, GDRC_OK);
}

static int setup(void **state)
{
	(void)state;
	setenv("GDRC_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
	setenv("GDRC_CUFILE_LIBRARY", FAKE_CUFILE_PATH, 1);
	unsetenv("GDRC_BACKEND");
	unsetenv("GDRC_MEM_HOOKS");
	fake_cuda_reset(2);
	fake_cufile_reset();
	return cuInit(0) != CUDA_SUCCESS;
}

/* Every context of the test is gone: the driver is closed, and nothing
 * is left registered. */
static int teardown(void **state)
{
	(void)state;
	assert_int_equal(fake_cufile_driver_use_count(), 0);
	assert_int_equal(fake_cufile_live(), 0);
	return 0;
}

static struct gdrc_mr *get(struct gdrc_ctx *ctx, uintptr_t p, size_t len)
{
	struct gdrc_mr *mr;

	assert_int_equal(gdrc_mr_get(ctx, (void *)p, len, 0, 0, &mr),
			 GDRC_OK);
	return mr;
}

static struct gdrc_mr_info info_of(const struct gdrc_mr *mr)
{
	struct gdrc_mr_info info;

	assert_int_equal(gdrc_mr_query(mr, &info), GDRC_OK);
	return info;
}

static struct gdrc_ctx *ctx_unused(struct gdrc_ctx *ctx)
{
	assert_int_equal(gdrc_release_unused(ctx, GDRC_DEVICE_ALL, NULL),
			 GDRC_OK);
	return ctx;
}

static unsigned long regs(void)
{
	return fake_cufile_calls("cuFileBufRegister");
}

/* ---- gdrc_init ---- */

static void test_cufile_init_refusals(void **state)
{
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_CUFILE };
	struct gdrc_ctx *ctx = NULL;

	(void)state;
	/* Unknown bits; a PD or a ring with it.  Nothing opened. */
	cfg.cufile = 1u << 7;
	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_ERR_INVALID_PARAM);
	cfg.cufile = GDRC_CUFILE_ALL;
	cfg.field_mask |= GDRC_CONFIG_FIELD_PD;
	cfg.pd = (struct ibv_pd *)&cfg;
	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_ERR_INVALID_PARAM);
	cfg.field_mask = GDRC_CONFIG_FIELD_CUFILE | GDRC_CONFIG_FIELD_IO_URING;
	cfg.pd = NULL;
	cfg.ring = (struct io_uring *)&cfg;
	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_ERR_INVALID_PARAM);
	assert_null(ctx);
	assert_int_equal(fake_cufile_calls("cuFileDriverOpen"), 0);

	/* No library, a file that is not libcufile, turned off. */
	setenv("GDRC_CUFILE_LIBRARY", "/nonexistent/libcufile.so.0", 1);
	ctx_mem(GDRC_CUFILE_ALL, GDRC_ERR_UNSUPPORTED);
	setenv("GDRC_CUFILE_LIBRARY", "none", 1);
	ctx_mem(GDRC_CUFILE_GPU, GDRC_ERR_UNSUPPORTED);
	setenv("GDRC_CUFILE_LIBRARY", FAKE_CUDA_PATH, 1);
	ctx_mem(GDRC_CUFILE_GPU, GDRC_ERR_UNSUPPORTED);
	setenv("GDRC_CUFILE_LIBRARY", FAKE_CUFILE_PATH, 1);

	/* GDRC_BACKEND naming GPU backends, with cufile asked for. */
	setenv("GDRC_BACKEND", "kmod,none", 1);
	ctx_mem(GDRC_CUFILE_ALL, GDRC_ERR_UNSUPPORTED);
	/* cufile only alone in the list. */
	setenv("GDRC_BACKEND", "cufile,none", 1);
	ctx_mem(GDRC_CUFILE_ALL, GDRC_ERR_INVALID_PARAM);
	unsetenv("GDRC_BACKEND");

	/* The driver will not open: nothing stays open. */
	fake_cufile_fail("cuFileDriverOpen", CU_FILE_DRIVER_NOT_INITIALIZED, 1);
	ctx_mem(GDRC_CUFILE_ALL, GDRC_ERR_NO_DEVICE);
	assert_int_equal(fake_cufile_driver_use_count(), 0);
	/* ... and the next context opens it. */
	ctx = ctx_all();
	assert_int_equal(fake_cufile_driver_use_count(), 1);
	gdrc_fini(ctx);
}

static void test_cufile_driver_open_once(void **state)
{
	struct gdrc_ctx *a, *b, *plain;
	const char *why = NULL;

	(void)state;
	a = ctx_all();
	b = ctx_mem(GDRC_CUFILE_GPU, GDRC_OK);
	assert_int_equal(fake_cufile_calls("cuFileDriverOpen"), 1);
	assert_int_equal(fake_cufile_driver_use_count(), 1);
	assert_int_equal(gdrc_backend_status(a, GDRC_BACKEND_CUFILE, &why),
			 GDRC_OK);
	assert_null(why);
	assert_int_equal(gdrc_backend_status(a, GDRC_BACKEND_DMABUF, &why),
			 GDRC_ERR_UNSUPPORTED);
	assert_string_equal(why, "the context registers with cuFile");
	/* A context without cuFile says why. */
	assert_int_equal(gdrc_init(NULL, &plain), GDRC_OK);
	assert_int_equal(gdrc_backend_status(plain, GDRC_BACKEND_CUFILE, &why),
			 GDRC_ERR_UNSUPPORTED);
	assert_non_null(strstr(why, "not asked for"));
	gdrc_fini(plain);
	gdrc_fini(a);
	assert_int_equal(fake_cufile_driver_use_count(), 1);
	gdrc_fini(b);
	assert_int_equal(fake_cufile_driver_use_count(), 0);
	assert_int_equal(fake_cufile_calls("cuFileDriverClose") +
				 fake_cufile_calls("cuFileDriverClose_v2"),
			 1);
}

static void test_cufile_backend_knob(void **state)
{
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, 1 * MIB, 0);

	(void)state;
	setenv("GDRC_BACKEND", "cufile", 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	unsetenv("GDRC_BACKEND");
	mr = get(ctx, p, 4 * KIB);
	assert_int_equal(info_of(mr).backend, GDRC_BACKEND_CUFILE);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	assert_int_equal(fake_cufile_registered((void *)p, NULL), 0);
}

/* ---- GPU memory ---- */

static void test_cufile_whole_allocation_exactly(void **state)
{
	struct gdrc_ctx *ctx = ctx_all();
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, 1000000, 0);
	CUdeviceptr big = fake_cuda_alloc(FAKE_DEVICE, 128 * MIB, 1);
	struct gdrc_mr_info info;
	struct gdrc_mr *mr, *mr2;
	size_t len = 0;

	(void)state;
	mr = get(ctx, p + 70000, 1000);
	info = info_of(mr);
	assert_int_equal(info.backend, GDRC_BACKEND_CUFILE);
	assert_int_equal(info.mem_type, GDRC_MEM_CUDA);
	assert_int_equal(info.addr, p);
	assert_int_equal(info.length, 1000000);
	assert_int_equal(info.lkey, 0);
	assert_int_equal(info.rkey, 0);
	assert_int_equal(fake_cufile_registered((void *)p, &len), 1);
	assert_int_equal(len, 1000000);
	/* Another offset, any access: the same registration, no new one. */
	mr2 = NULL;
	assert_int_equal(gdrc_mr_get(ctx, (void *)(p + 999000), 1000,
				     GDRC_ACCESS_REMOTE_WRITE, 0, &mr2),
			 GDRC_OK);
	assert_int_equal(info_of(mr2).id, info.id);
	assert_int_equal(regs(), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), 1);
	gdrc_mr_put(ctx, mr2);
	gdrc_mr_put(ctx, mr);
	/* Past GDRC_WHOLE_ALLOC_MAX (64 MiB) still whole, on device 1. */
	mr = get(ctx, big + 100 * MIB, 4 * KIB);
	info = info_of(mr);
	assert_int_equal(info.addr, big);
	assert_int_equal(info.length, 128 * MIB);
	assert_int_equal(info.device, 1);
	assert_int_equal(fake_cufile_device_bytes(1), 128 * MIB);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(gdrc_release_unused(ctx, GDRC_DEVICE_ALL, NULL),
			 GDRC_OK);
	assert_int_equal(fake_cufile_live(), 0);
	gdrc_fini(ctx);
}

/* Small allocations 512 B apart in one 64 KiB page: each registered at
 * its own base, exactly (no rounding into the neighbour). */
static void test_cufile_suballocations(void **state)
{
	struct gdrc_ctx *ctx = ctx_all();
	CUdeviceptr a = fake_cuda_alloc(FAKE_DEVICE, 512, 0);
	CUdeviceptr b = fake_cuda_alloc(FAKE_DEVICE, 512, 0);
	size_t len = 0;

	(void)state;
	assert_true(b == a + 512 || a == b + 512);
	assert_int_equal(get_info(ctx, a, 100).addr, a);
	assert_int_equal(get_info(ctx, b, 100).addr, b);
	assert_int_equal(fake_cufile_registered((void *)a, &len), 1);
	assert_int_equal(len, 512);
	assert_int_equal(fake_cufile_registered((void *)b, &len), 1);
	assert_int_equal(len, 512);
	gdrc_fini(ctx);
	assert_int_equal(fake_cufile_live(), 0);
}

/* ---- deregistered before the free ---- */

static CUresult free_v2(CUdeviceptr p, size_t size)
{
	(void)size;
	return cuMemFree_v2(p);
}

static CUresult free_async(CUdeviceptr p, size_t size)
{
	(void)size;
	return cuMemFreeAsync(p, NULL);
}

static CUresult free_unmap(CUdeviceptr p, size_t size)
{
	return cuMemUnmap(p, size);
}

/*
 * Register kind, leave it cached, free it: when the free returns the
 * registration is gone (it was gone before the driver freed: no
 * orphan), free_deregs counts it, and a registration of the memory
 * allocated again at that address, the program's own, succeeds.
 */
static void free_path(enum fake_cuda_kind kind,
		      CUresult (*do_free)(CUdeviceptr, size_t))
{
	struct gdrc_ctx *ctx = ctx_all();
	CUdeviceptr p = fake_cuda_alloc(kind, 4 * MIB, 0), q;
	CUfileError_t e;

	assert_true(p != 0);
	assert_int_equal(get_info(ctx, p + 64 * KIB, 4 * KIB).addr, p);
	assert_int_equal(fake_cufile_registered((void *)p, NULL), 1);
	assert_int_equal(do_free(p, 4 * MIB), CUDA_SUCCESS);
	assert_int_equal(fake_cufile_registered((void *)p, NULL), 0);
	assert_int_equal(fake_cufile_orphaned_total(), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_FREE_DEREGS), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_INV_CUDA_HOOK), 1);
	q = fake_cuda_alloc_at(kind, 4 * MIB, 0, p);
	assert_true(q == p);
	e = cuFileBufRegister((void *)q, 4 * MIB, 0);
	assert_int_equal(e.err, CU_FILE_SUCCESS);
	assert_int_equal(cuFileBufDeregister((void *)q).err, CU_FILE_SUCCESS);
	/* The cache registers the new allocation anew. */
	assert_int_equal(get_info(ctx, q, 4 * KIB).buffer_id,
			 fake_cuda_buffer_id(q));
	gdrc_fini(ctx);
	assert_int_equal(fake_cuda_free(q), 0);
}

static void test_cufile_free_v2(void **state)
{
	(void)state;
	free_path(FAKE_DEVICE, free_v2);
}

static void test_cufile_free_async(void **state)
{
	(void)state;
	free_path(FAKE_POOL, free_async);
}

static void test_cufile_free_unmap(void **state)
{
	(void)state;
	free_path(FAKE_VMM, free_unmap);
}

/* The control: without the CUDA hooks the registration outlives the
 * free (the program's own registration then fails with 5023, as
 * measured), and the next get's BUFFER_ID check deregisters it before
 * it registers the new allocation. */
static void test_cufile_free_without_hooks(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, 4 * MIB, 0), q;
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;

	(void)state;
	setenv("GDRC_MEM_HOOKS", "none", 1);
	ctx = ctx_all();
	unsetenv("GDRC_MEM_HOOKS");
	assert_int_equal(gdrc_set_free_fn(ctx, NULL, NULL),
			 GDRC_ERR_UNSUPPORTED);
	get_info(ctx, p, 4 * KIB);
	assert_int_equal(fake_cuda_free(p), 0);
	assert_int_equal(fake_cufile_orphaned_total(), 1);
	q = fake_cuda_alloc_at(FAKE_DEVICE, 4 * MIB, 0, p);
	assert_true(q == p);
	assert_int_equal(cuFileBufRegister((void *)q, 4 * MIB, 0).err,
			 CU_FILE_MEMORY_ALREADY_REGISTERED);
	mr = get(ctx, q, 4 * KIB);
	info = info_of(mr);
	assert_int_equal(info.buffer_id, fake_cuda_buffer_id(q));
	assert_int_equal(fake_cufile_orphans(), 0);
	assert_int_equal(fake_cufile_registered((void *)q, NULL), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_INV_TAG_CHECK), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_FREE_DEREGS), 0);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	assert_int_equal(fake_cuda_free(q), 0);
}

struct free_seen {
	struct gdrc_ctx *ctx;
	struct gdrc_mr *held;
	uintptr_t start, end;
	int calls;
	int registered_in_fn; /* the cache's own unused ones already gone */
	uintptr_t other;
};

static void on_free(void *arg, uintptr_t start, uintptr_t end)
{
	struct free_seen *s = arg;

	s->calls++;
	s->start = start;
	s->end = end;
	s->registered_in_fn = fake_cufile_registered((void *)s->other, NULL);
	if (s->held) {
		gdrc_mr_put(s->ctx, s->held);
		s->held = NULL;
	}
}

/* A registration held at the free by a caller with a free callback: its
 * put there deregisters it before the driver frees. */
static void test_cufile_free_held_with_callback(void **state)
{
	struct gdrc_ctx *ctx = ctx_all();
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, 2 * MIB, 0);
	struct free_seen s = { .ctx = ctx, .other = p };

	(void)state;
	assert_int_equal(gdrc_set_free_fn(NULL, on_free, &s),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_set_free_fn(ctx, on_free, &s), GDRC_OK);
	s.held = get(ctx, p + 4 * KIB, 4 * KIB);
	assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.start, p);
	assert_int_equal(s.end, p + 1);
	assert_int_equal(s.registered_in_fn, 1); /* held: still there */
	assert_null(s.held);
	assert_int_equal(fake_cufile_orphaned_total(), 0);
	assert_int_equal(fake_cufile_registered((void *)p, NULL), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_FREE_DEREGS), 1);
	/* Removed: no more calls. */
	assert_int_equal(gdrc_set_free_fn(ctx, NULL, NULL), GDRC_OK);
	p = fake_cuda_alloc(FAKE_DEVICE, 2 * MIB, 0);
	assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
	assert_int_equal(s.calls, 1);
	gdrc_fini(ctx);
}

/* Held without a callback: the caller freed memory it still uses; the
 * registration stays until its put (documented), and goes then. */
static void test_cufile_free_held_without_callback(void **state)
{
	struct gdrc_ctx *ctx = ctx_all();
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, 2 * MIB, 0);
	struct gdrc_mr *mr = get(ctx, p, 4 * KIB);

	(void)state;
	assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
	assert_int_equal(fake_cufile_orphaned_total(), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_FREE_DEREGS), 0);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(fake_cufile_orphans(), 0);
	assert_int_equal(fake_cufile_registered((void *)p, NULL), 0);
	gdrc_fini(ctx);
}

struct other_thread {
	struct gdrc_ctx *ctx;
	CUdeviceptr p;
	pthread_barrier_t used, freed;
};

/* Gets and puts it several times (a thread of a NIC context would keep
 * an idle handle on it), then stays alive and idle while the main
 * thread frees the memory. */
static void *use_in_thread(void *arg)
{
	struct other_thread *t = arg;

	for (int i = 0; i < 4; i++)
		gdrc_mr_put(t->ctx, get(t->ctx, t->p, 4 * KIB));
	pthread_barrier_wait(&t->used);
	pthread_barrier_wait(&t->freed);
	return NULL;
}

/* Another thread used the registration and is idle, alive: the free
 * still finds nobody holding it. */
static void test_cufile_free_after_other_thread(void **state)
{
	struct gdrc_ctx *ctx = ctx_all();
	struct other_thread t = {
		.ctx = ctx, .p = fake_cuda_alloc(FAKE_DEVICE, 2 * MIB, 0),
	};
	unsigned long orphaned;
	pthread_t th;

	(void)state;
	pthread_barrier_init(&t.used, NULL, 2);
	pthread_barrier_init(&t.freed, NULL, 2);
	assert_int_equal(pthread_create(&th, NULL, use_in_thread, &t), 0);
	pthread_barrier_wait(&t.used);
	for (int i = 0; i < 4; i++)
		gdrc_mr_put(ctx, get(ctx, t.p, 4 * KIB));
	assert_int_equal(stat_of(ctx, GDRC_STAT_HITS), 7);
	assert_int_equal(cuMemFree_v2(t.p), CUDA_SUCCESS);
	orphaned = fake_cufile_orphaned_total();
	pthread_barrier_wait(&t.freed);
	assert_int_equal(pthread_join(th, NULL), 0);
	pthread_barrier_destroy(&t.used);
	pthread_barrier_destroy(&t.freed);
	assert_int_equal(orphaned, 0);
	assert_int_equal(fake_cufile_live(), 0);
	gdrc_fini(ctx);
}

/* Threads getting and putting while another frees and allocates again
 * through the hooked free (what TSan runs): every get gets the
 * allocation at that address or a documented status, and once every
 * allocation was got again nothing outlives its memory. */
#define RACE_ALLOCS 4
#define RACE_THREADS 3

struct race {
	struct gdrc_ctx *ctx;
	CUdeviceptr p[RACE_ALLOCS];
	atomic_int stop;
	atomic_ulong gets, stale;
	/* What a getter saw that it should not have (cmocka's asserts
	 * belong to the main thread): a status, or -100 for a
	 * registration of another address. */
	atomic_int bad;
};

static void *race_getter(void *arg)
{
	struct race *r = arg;
	unsigned i = 0;

	while (!atomic_load(&r->stop)) {
		CUdeviceptr p = r->p[i++ % RACE_ALLOCS];
		struct gdrc_mr *mr;
		struct gdrc_mr_info info;
		gdrc_status_t st;

		st = gdrc_mr_get(r->ctx, (void *)(p + 4 * KIB), 4 * KIB, 0,
				 0, &mr);
		/* Freed between the read of p and the get: the driver
		 * does not know it (CUDA), or it keeps being freed (BUSY). */
		if (st != GDRC_OK) {
			if (st != GDRC_ERR_CUDA && st != GDRC_ERR_BUSY &&
			    st != GDRC_ERR_UNSUPPORTED)
				atomic_store(&r->bad, st);
			continue;
		}
		/* Between a free and the allocation again the address is
		 * nobody's: the driver calls it host memory, and this
		 * context registers that too. */
		if (gdrc_mr_query(mr, &info) != GDRC_OK ||
		    (info.mem_type == GDRC_MEM_CUDA && info.addr != p))
			atomic_store(&r->bad, -100);
		if (info.buffer_id != fake_cuda_buffer_id(p))
			atomic_fetch_add(&r->stale, 1); /* freed since: ok */
		atomic_fetch_add(&r->gets, 1);
		gdrc_mr_put(r->ctx, mr);
	}
	return NULL;
}

static void test_cufile_free_race(void **state)
{
	struct race r = { .ctx = ctx_all() };
	pthread_t th[RACE_THREADS];

	(void)state;
	for (int i = 0; i < RACE_ALLOCS; i++)
		r.p[i] = fake_cuda_alloc(FAKE_DEVICE, 1 * MIB, 0);
	for (int t = 0; t < RACE_THREADS; t++)
		assert_int_equal(pthread_create(&th[t], NULL, race_getter, &r),
				 0);
	for (int k = 0; k < 300; k++) {
		int i = k % RACE_ALLOCS;
		unsigned long seen = atomic_load(&r.gets);

		/* Some gets between two frees (on 2 cores the getters may
		 * otherwise never run before the loop ends). */
		for (int y = 0; y < 1000 && atomic_load(&r.gets) == seen; y++)
			sched_yield();
		assert_int_equal(cuMemFree_v2(r.p[i]), CUDA_SUCCESS);
		assert_true(fake_cuda_alloc_at(FAKE_DEVICE, 1 * MIB, 0,
					       r.p[i]) == r.p[i]);
	}
	atomic_store(&r.stop, 1);
	for (int t = 0; t < RACE_THREADS; t++)
		assert_int_equal(pthread_join(th[t], NULL), 0);
	assert_int_equal(atomic_load(&r.bad), 0);
	assert_true(atomic_load(&r.gets) > 0);
	/* A get that ran between a free's step and the driver's free
	 * registered memory on its way out (the getters race the free of
	 * the memory they use: the program's bug); the next get's BUFFER_ID
	 * check deregisters it.  Registrations held at their free were
	 * deregistered at their put. */
	for (int i = 0; i < RACE_ALLOCS; i++)
		assert_int_equal(get_info(r.ctx, r.p[i], 4 * KIB).buffer_id,
				 fake_cuda_buffer_id(r.p[i]));
	assert_int_equal(fake_cufile_orphans(), 0);
	assert_true(stat_of(ctx_unused(r.ctx), GDRC_STAT_FREE_DEREGS) > 0);
	gdrc_fini(r.ctx);
	for (int i = 0; i < RACE_ALLOCS; i++)
		assert_int_equal(fake_cuda_free(r.p[i]), 0);
}

/* ---- limits and refusals ---- */

static void test_cufile_pinned_limit(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr a = fake_cuda_alloc(FAKE_DEVICE, 3 * MIB, 0);
	CUdeviceptr b = fake_cuda_alloc(FAKE_DEVICE, 3 * MIB, 0);
	CUdeviceptr c = fake_cuda_alloc(FAKE_DEVICE, 3 * MIB, 1);
	struct gdrc_mr *ma, *mb;

	(void)state;
	/* Read when the driver opens. */
	fake_cufile_set_pinned_limit_kib(4096);
	ctx = ctx_all();
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_MAX_BYTES),
			 4 * MIB);
	get_info(ctx, a, 4 * KIB);
	/* b does not fit beside a: the unused a goes first. */
	mb = get(ctx, b, 4 * KIB);
	assert_int_equal(fake_cufile_registered((void *)a, NULL), 0);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_EVICTIONS), 1);
	/* Device 1 has its own budget. */
	gdrc_mr_put(ctx, get(ctx, c, 4 * KIB));
	/* b held: a cannot be registered. */
	assert_int_equal(gdrc_mr_get(ctx, (void *)a, 4 * KIB, 0, 0, &ma),
			 GDRC_ERR_LIMIT);
	assert_int_equal(fake_cufile_registered((void *)a, NULL), 0);
	gdrc_mr_put(ctx, mb);
	/* A lower GDRC_GPU_MAX_BYTES wins. */
	gdrc_fini(ctx);
	setenv("GDRC_GPU_MAX_BYTES", "1M", 1);
	ctx = ctx_all();
	unsetenv("GDRC_GPU_MAX_BYTES");
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_MAX_BYTES), MIB);
	gdrc_fini(ctx);
}

static void test_cufile_out_of_pinned_memory(void **state)
{
	struct gdrc_ctx *ctx = ctx_all();
	CUdeviceptr a = fake_cuda_alloc(FAKE_DEVICE, 1 * MIB, 0);
	CUdeviceptr b = fake_cuda_alloc(FAKE_DEVICE, 1 * MIB, 0);
	struct gdrc_mr *mr;

	(void)state;
	get_info(ctx, a, 4 * KIB);
	/* Once: the unused a released, then the retry succeeds. */
	fake_cufile_fail("cuFileBufRegister",
			 CU_FILE_GPU_MEMORY_PINNING_FAILED, 1);
	mr = get(ctx, b, 4 * KIB);
	assert_int_equal(fake_cufile_registered((void *)a, NULL), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_OOM_RETRIES), 1);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(gdrc_release_unused(ctx, GDRC_DEVICE_ALL, NULL),
			 GDRC_OK);
	/* Twice: the status, nothing registered or cached. */
	fake_cufile_fail("cuFileBufRegister", CU_FILE_NOMEM_ERROR, 2);
	assert_int_equal(gdrc_mr_get(ctx, (void *)a, 4 * KIB, 0, 0, &mr),
			 GDRC_ERR_NO_MEMORY);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(fake_cufile_live(), 0);
	gdrc_fini(ctx);
}

static void test_cufile_refused(void **state)
{
	struct gdrc_ctx *ctx = ctx_all();
	CUdeviceptr a = fake_cuda_alloc(FAKE_DEVICE, 1 * MIB, 0);
	struct gdrc_mr *mr = NULL;

	(void)state;
	fake_cufile_fail("cuFileBufRegister", CU_FILE_INTERNAL_ERROR, 1);
	assert_int_equal(gdrc_mr_get(ctx, (void *)a, 4 * KIB, 0, 0, &mr),
			 GDRC_ERR_CUFILE);
	fake_cufile_fail("cuFileBufRegister", CU_FILE_CUDA_DRIVER_ERROR, 1);
	assert_int_equal(gdrc_mr_get(ctx, (void *)a, 4 * KIB, 0, 0, &mr),
			 GDRC_ERR_CUDA);
	assert_null(mr);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REG_FAILURES), 2);
	/* The program registered the base itself: 5023, said as such. */
	assert_int_equal(cuFileBufRegister((void *)a, MIB, 0).err,
			 CU_FILE_SUCCESS);
	assert_int_equal(gdrc_mr_get(ctx, (void *)a, 4 * KIB, 0, 0, &mr),
			 GDRC_ERR_CUFILE);
	assert_int_equal(cuFileBufDeregister((void *)a).err, CU_FILE_SUCCESS);
	/* Then it works. */
	gdrc_mr_put(ctx, get(ctx, a, 4 * KIB));
	gdrc_fini(ctx);
}

/* ---- host memory ---- */

static void test_cufile_host_memory(void **state)
{
	struct gdrc_ctx *all = ctx_all();
	struct gdrc_ctx *gpu = ctx_mem(GDRC_CUFILE_GPU, GDRC_OK);
	struct gdrc_ctx *host = ctx_mem(GDRC_CUFILE_HOST, GDRC_OK);
	CUdeviceptr d = fake_cuda_alloc(FAKE_DEVICE, 1 * MIB, 0);
	char *buf = mmap(NULL, 64 * KIB, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct gdrc_mr_info info;
	struct gdrc_mr *mr = NULL;

	(void)state;
	assert_true(buf != MAP_FAILED);
	assert_int_equal(gdrc_mr_get(gpu, buf + 100, 1000, 0, 0, &mr),
			 GDRC_ERR_UNSUPPORTED);
	assert_int_equal(gdrc_mr_get(host, (void *)d, 1000, 0, 0, &mr),
			 GDRC_ERR_UNSUPPORTED);
	assert_null(mr);
	/* Refused before anything touched the allocation. */
	assert_int_equal(fake_cuda_sync_memops_count(d), 0);
	assert_int_equal(fake_cufile_live(), 0);
	info = get_info(all, (uintptr_t)buf + 100, 1000);
	assert_int_equal(info.backend, GDRC_BACKEND_CUFILE);
	assert_int_equal(info.mem_type, GDRC_MEM_HOST);
	assert_int_equal(info.addr, (uintptr_t)buf);
	assert_int_equal(fake_cufile_registered(buf, NULL), 1);
	info = get_info(host, (uintptr_t)buf + 8 * KIB, 100);
	assert_int_equal(info.backend, GDRC_BACKEND_CUFILE);
	gdrc_fini(gpu);
	gdrc_fini(host);
	gdrc_fini(all);
	assert_int_equal(fake_cufile_live(), 0);
	munmap(buf, 64 * KIB);
}

/*
 * Two regions on one base: a host range grown from its first page while
 * the shorter one is held.  cuFile would refuse the base a second time
 * (5023); the backend re-registers it longer and deregisters it once,
 * after the last region on it.
 */
static void test_cufile_shared_base(void **state)
{
	struct gdrc_ctx *ctx = ctx_all();
	char *buf = mmap(NULL, 64 * KIB, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct gdrc_mr *short_mr, *long_mr;
	size_t len = 0;

	(void)state;
	assert_true(buf != MAP_FAILED);
	short_mr = get(ctx, (uintptr_t)buf, 4 * KIB);
	long_mr = get(ctx, (uintptr_t)buf, 16 * KIB);
	assert_int_equal(info_of(long_mr).addr, (uintptr_t)buf);
	assert_int_equal(fake_cufile_registered(buf, &len), 1);
	assert_int_equal(len, 16 * KIB);
	assert_int_equal(regs(), 2);
	gdrc_mr_put(ctx, short_mr);
	assert_int_equal(fake_cufile_registered(buf, &len), 1);
	assert_int_equal(len, 16 * KIB);
	gdrc_mr_put(ctx, long_mr);
	assert_int_equal(gdrc_release_unused(ctx, GDRC_DEVICE_ALL, NULL),
			 GDRC_OK);
	assert_int_equal(fake_cufile_registered(buf, NULL), 0);
	assert_int_equal(fake_cufile_calls("cuFileBufDeregister"), 2);
	gdrc_fini(ctx);
	munmap(buf, 64 * KIB);
}

/* ---- VMM ---- */

/* VMM: a request in one mapping registers that mapping; one over two
 * registers both whole, as one cuFile buffer (cuFile takes a range over
 * adjacent mappings of one reservation); unmapping either deregisters
 * it before the unmap returns. */
static void test_cufile_vmm_mappings(void **state)
{
	struct gdrc_ctx *ctx = ctx_all();
	CUdeviceptr va = fake_cuda_vmm_reserve(8 * MIB);
	struct gdrc_mr_info info;
	size_t len = 0;

	(void)state;
	assert_true(va != 0);
	assert_int_equal(fake_cuda_vmm_map(va, 2 * MIB, 0), 0);
	assert_int_equal(fake_cuda_vmm_map(va + 2 * MIB, 2 * MIB, 0), 0);
	info = get_info(ctx, va + 2 * MIB + 4 * KIB, 4 * KIB);
	assert_int_equal(info.addr, va + 2 * MIB);
	assert_int_equal(info.length, 2 * MIB);
	info = get_info(ctx, va + 2 * MIB - 4 * KIB, 8 * KIB);
	assert_int_equal(info.addr, va);
	assert_int_equal(info.length, 4 * MIB);
	assert_int_equal(info.kind, GDRC_PTR_VMM);
	assert_int_equal(fake_cufile_registered((void *)va, &len), 1);
	assert_int_equal(len, 4 * MIB);
	/* A hole: refused, as for NICs. */
	assert_int_equal(gdrc_mr_get(ctx, (void *)(va + 4 * MIB - 4 * KIB),
				     8 * KIB, 0, 0, &(struct gdrc_mr *){ 0 }),
			 GDRC_ERR_UNSUPPORTED);
	assert_int_equal(cuMemUnmap(va + 2 * MIB, 2 * MIB), CUDA_SUCCESS);
	assert_int_equal(fake_cufile_orphaned_total(), 0);
	assert_int_equal(fake_cufile_live(), 0);
	/* One: the run's registration (B's own went when the run
	 * subsumed it). */
	assert_int_equal(stat_of(ctx, GDRC_STAT_FREE_DEREGS), 1);
	assert_int_equal(cuMemUnmap(va, 2 * MIB), CUDA_SUCCESS);
	assert_int_equal(fake_cuda_vmm_unreserve(va), 0);
	gdrc_fini(ctx);
}

static void test_cufile_free_fn_refusals(void **state)
{
	struct gdrc_ctx *plain;

	(void)state;
	assert_int_equal(gdrc_init(NULL, &plain), GDRC_OK);
	assert_int_equal(gdrc_set_free_fn(plain, on_free, NULL),
			 GDRC_ERR_UNSUPPORTED);
	gdrc_fini(plain);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_cufile_init_refusals),
		T(test_cufile_driver_open_once),
		T(test_cufile_backend_knob),
		T(test_cufile_whole_allocation_exactly),
		T(test_cufile_suballocations),
		T(test_cufile_free_v2),
		T(test_cufile_free_async),
		T(test_cufile_free_unmap),
		T(test_cufile_free_without_hooks),
		T(test_cufile_free_held_with_callback),
		T(test_cufile_free_held_without_callback),
		T(test_cufile_free_after_other_thread),
		T(test_cufile_free_race),
		T(test_cufile_pinned_limit),
		T(test_cufile_out_of_pinned_memory),
		T(test_cufile_refused),
		T(test_cufile_host_memory),
		T(test_cufile_shared_base),
		T(test_cufile_vmm_mappings),
		T(test_cufile_free_fn_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
