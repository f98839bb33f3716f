// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_pin_verbs.c - the verbs backend, with ibv_reg_mr_iova2 and
 * ibv_dereg_mr replaced at link time (-Wl,--wrap) by fakes that record
 * their calls and fail on demand.  Checks the access translation, the
 * keys handed out, one deregistration per registration, the error
 * mapping, evict-and-retry on ENOMEM, and a registration widened over a
 * neighbour whose page went retried over the caller's range alone (the
 * fake fails on an unmapped page, as the kernel does).  Real verbs on
 * soft-RoCE run in the VM lab.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

#include <gdrcache.h>

#define PAGE 4096UL

static struct {
	int regs;        /* successful registrations */
	int deregs;
	int calls;       /* every call of reg */
	int fail_next;   /* fail this many next calls ... */
	int fail_errno;  /* ... with this errno */
	int last_access;
	int fails_efault; /* calls over an unmapped page */
	uint32_t next_key;
} fake;

struct ibv_mr *__wrap_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
				       size_t length, uint64_t iova,
				       unsigned int access);
int __wrap_ibv_dereg_mr(struct ibv_mr *mr);

struct ibv_mr *__wrap_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
				       size_t length, uint64_t iova,
				       unsigned int access)
{
	struct ibv_mr *mr;
	unsigned char vec[32];

	fake.calls++;
	fake.last_access = (int)access;
	if (fake.fail_next > 0) {
		fake.fail_next--;
		errno = fake.fail_errno;
		return NULL;
	}
	/* As the kernel does: an unmapped page in the range fails it.
	 * (mincore fails with ENOMEM there; unlike msync it reads nothing
	 * of the range, which valgrind would report.) */
	assert_true(length <= (sizeof(vec) - 1) * PAGE);
	if (mincore((void *)((uintptr_t)addr & ~(PAGE - 1)),
		    length + ((uintptr_t)addr & (PAGE - 1)), vec)) {
		fake.fails_efault++;
		errno = EFAULT;
		return NULL;
	}
	assert_int_equal(iova, (uintptr_t)addr);
	mr = calloc(1, sizeof(*mr));
	mr->pd = pd;
	mr->addr = addr;
	mr->length = length;
	mr->lkey = ++fake.next_key;
	mr->rkey = 0x1000 + fake.next_key;
	fake.regs++;
	return mr;
}

int __wrap_ibv_dereg_mr(struct ibv_mr *mr)
{
	fake.deregs++;
	free(mr);
	return 0;
}

static struct ibv_pd *fake_pd = (struct ibv_pd *)0x1000;
static char *buf;

static struct gdrc_ctx *verbs_ctx(uint64_t max_regions)
{
	struct gdrc_config cfg = {
		.field_mask = GDRC_CONFIG_FIELD_PD |
			      GDRC_CONFIG_FIELD_MAX_REGIONS,
		.pd = fake_pd,
		.max_regions = max_regions,
	};
	struct gdrc_ctx *ctx;

	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_OK);
	return ctx;
}

/* verbs_ctx with the knob var set to val while the context is made. */
static struct gdrc_ctx *verbs_ctx_knob(const char *var, const char *val)
{
	struct gdrc_ctx *ctx;

	setenv(var, val, 1);
	ctx = verbs_ctx(GDRC_LIMIT_NONE);
	unsetenv(var);
	return ctx;
}

static int setup(void **state)
{
	(void)state;
	memset(&fake, 0, sizeof(fake));
	buf = mmap(NULL, 16 * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return buf == MAP_FAILED;
}

static int teardown(void **state)
{
	(void)state;
	/* Every registration was released exactly once. */
	assert_int_equal(fake.regs, fake.deregs);
	return munmap(buf, 16 * PAGE);
}

static void test_pin_verbs_keys_and_access_reach_caller(void **state)
{
	struct gdrc_ctx *ctx = verbs_ctx(GDRC_LIMIT_NONE);
	struct gdrc_mr *mr, *again;
	struct gdrc_mr_info i, j;

	(void)state;
	assert_int_equal(gdrc_mr_get(ctx, buf + 10, 100,
				     GDRC_ACCESS_REMOTE_WRITE, 0, &mr),
			 GDRC_OK);
	assert_int_equal(fake.last_access,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
	assert_int_equal(i.backend, GDRC_BACKEND_VERBS);
	assert_int_equal(i.lkey, 1);
	assert_int_equal(i.rkey, 0x1001);
	assert_int_equal(gdrc_mr_lkey(mr), 1);
	assert_int_equal(gdrc_mr_rkey(mr), 0x1001);
	assert_int_equal(gdrc_mr_get(ctx, buf, 8, GDRC_ACCESS_LOCAL_WRITE, 0,
				     &again),
			 GDRC_OK);
	assert_int_equal(gdrc_mr_query(again, &j), GDRC_OK);
	assert_int_equal(j.id, i.id);
	assert_int_equal(fake.calls, 1);
	gdrc_mr_put(ctx, again);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(fake.deregs, 0); /* cached */
	gdrc_fini(ctx);
	assert_int_equal(fake.deregs, 1);
}

static void test_pin_verbs_every_access_bit_translated(void **state)
{
	struct gdrc_ctx *ctx = verbs_ctx(GDRC_LIMIT_NONE);
	struct gdrc_mr *mr;

	(void)state;
	assert_int_equal(gdrc_mr_get(ctx, buf, 8,
				     GDRC_ACCESS_REMOTE_READ |
					     GDRC_ACCESS_REMOTE_ATOMIC,
				     GDRC_GET_UNCACHED, &mr),
			 GDRC_OK);
	assert_int_equal(fake.last_access,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
				 IBV_ACCESS_REMOTE_ATOMIC);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(fake.deregs, 1); /* uncached: released at put */
	gdrc_fini(ctx);
}

static void test_pin_verbs_einval_is_verbs_error(void **state)
{
	struct gdrc_ctx *ctx = verbs_ctx(GDRC_LIMIT_NONE);
	struct gdrc_mr *mr = NULL;
	uint64_t v;

	(void)state;
	fake.fail_next = 1;
	fake.fail_errno = EINVAL;
	assert_int_equal(gdrc_mr_get(ctx, buf, 8, 0, 0, &mr), GDRC_ERR_VERBS);
	assert_null(mr);
	assert_int_equal(fake.calls, 1); /* no retry for EINVAL */
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_REG_FAILURES, &v),
			 GDRC_OK);
	assert_int_equal(v, 1);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_REGIONS, &v), GDRC_OK);
	assert_int_equal(v, 0);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_PINNED_BYTES, &v),
			 GDRC_OK);
	assert_int_equal(v, 0);
	gdrc_fini(ctx);
}

static void test_pin_verbs_enomem_evicts_and_retries_once(void **state)
{
	struct gdrc_ctx *ctx = verbs_ctx(GDRC_LIMIT_NONE);
	struct gdrc_mr *mr, *held;
	uint64_t v;

	(void)state;
	for (int p = 0; p < 4; p++) {
		assert_int_equal(gdrc_mr_get(ctx, buf + p * PAGE, PAGE, 0, 0,
					     &mr),
				 GDRC_OK);
		if (p == 0)
			held = mr; /* in use: must survive the eviction */
		else
			gdrc_mr_put(ctx, mr);
	}
	fake.fail_next = 1;
	fake.fail_errno = ENOMEM;
	assert_int_equal(gdrc_mr_get(ctx, buf + 8 * PAGE, PAGE, 0, 0, &mr),
			 GDRC_OK);
	assert_int_equal(fake.deregs, 3);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_REGIONS, &v), GDRC_OK);
	assert_int_equal(v, 2);
	gdrc_mr_put(ctx, mr);

	/* Failing twice: the retry fails too, cleanly. */
	fake.fail_next = 2;
	fake.fail_errno = EAGAIN;
	assert_int_equal(gdrc_mr_get(ctx, buf + 9 * PAGE, PAGE, 0, 0, &mr),
			 GDRC_ERR_NO_MEMORY);
	assert_int_equal(gdrc_stat_get(ctx, GDRC_STAT_PINNED_BYTES, &v),
			 GDRC_OK);
	assert_int_equal(v, PAGE); /* only the held one */
	gdrc_mr_put(ctx, held);
	gdrc_fini(ctx);
}

static void test_pin_verbs_backend_none_makes_no_verbs_call(void **state)
{
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	struct gdrc_mr_info i;

	(void)state;
	ctx = verbs_ctx_knob("GDRC_BACKEND", "none");
	assert_int_equal(gdrc_mr_get(ctx, buf, 8, 0, 0, &mr), GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
	assert_int_equal(i.backend, GDRC_BACKEND_NONE);
	assert_int_equal(fake.calls, 0);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
}

/*
 * A registration widened over a cached neighbour fails when a page only
 * the neighbour covered is gone (unmapped here with no monitor to see
 * it, GDRC_MEM_HOOKS=none; with one, another thread's unmap during the
 * miss): the get is retried over the caller's own range alone.
 */
static void test_pin_verbs_widened_failure_retried_alone(void **state)
{
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	struct gdrc_mr_info i;

	(void)state;
	ctx = verbs_ctx_knob("GDRC_MEM_HOOKS", "none");
	assert_int_equal(gdrc_mr_get(ctx, buf, 2 * PAGE, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(munmap(buf, PAGE), 0);
	assert_int_equal(gdrc_mr_get(ctx, buf + PAGE, 2 * PAGE, 0, 0, &mr),
			 GDRC_OK);
	assert_int_equal(fake.fails_efault, 1); /* the widened try */
	assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
	assert_int_equal(i.addr, (uintptr_t)buf + PAGE);
	assert_int_equal(i.length, 2 * PAGE);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_pin_verbs_keys_and_access_reach_caller),
		T(test_pin_verbs_every_access_bit_translated),
		T(test_pin_verbs_einval_is_verbs_error),
		T(test_pin_verbs_enomem_evicts_and_retries_once),
		T(test_pin_verbs_backend_none_makes_no_verbs_call),
		T(test_pin_verbs_widened_failure_retried_alone),
	};

	/* Host memory only: on a GPU machine the GPU backends' probe would
	 * call the real ibv_reg_dmabuf_mr on the fake PD. */
	setenv("GDRC_CUDA_LIBRARY", "none", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
