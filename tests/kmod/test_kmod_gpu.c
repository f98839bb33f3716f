// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_kmod_gpu.c - GPU registrations pinned through gdrcache.ko, run in
 * a VM lab guest with the mock NVIDIA provider loaded and the fake CUDA
 * driver (tests/fakes) standing in for libcuda: with GDRC_VALIDATE=auto a
 * GPU hit makes no CUDA call at all (the kernel's word replaces the
 * BUFFER_ID query), and when the provider revokes a pin (as NVIDIA does on
 * cudaFree) the next get is a new registration; VMM memory of several
 * mappings takes one pin per mapping.  Exits 77 where the
 * module or the mock provider is missing.  Run by run_kmod_tests.sh, which
 * copies libgdrc_fakecuda.so beside this program.
 */
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <gdrcache.h>

#include "fake_cuda.h"

#define MIB (1024UL * 1024)
#define MOCK_FIRE "/sys/kernel/debug/mock_nvp2p/fire"

static char fake_path[PATH_MAX];

static struct gdrc_ctx *ctx_mode(const char *validate)
{
	struct gdrc_ctx *ctx;

	setenv("GDRC_CUDA_LIBRARY", fake_path, 1);
	if (validate)
		setenv("GDRC_VALIDATE", validate, 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_OK);
	unsetenv("GDRC_VALIDATE");
	assert_int_equal(gdrc_gpu_status(ctx, NULL), GDRC_OK);
	return ctx;
}

static struct gdrc_mr_info get_put(struct gdrc_ctx *ctx, CUdeviceptr p)
{
	struct gdrc_mr_info i;
	struct gdrc_mr *mr;

	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)p, 64, 0, 0,
				     &mr),
			 GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, &i), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	return i;
}

static uint64_t stat(struct gdrc_ctx *ctx, enum gdrc_stat s)
{
	uint64_t v;

	assert_int_equal(gdrc_stat_get(ctx, s, &v), GDRC_OK);
	return v;
}

/* What NVIDIA's driver does on cudaFree of pinned memory. */
static void provider_revokes(CUdeviceptr va)
{
	char buf[32];
	int fd = open(MOCK_FIRE, O_WRONLY);
	int n = snprintf(buf, sizeof(buf), "0x%llx\n",
			 (unsigned long long)va);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, (size_t)n), n);
	close(fd);
}

static int setup(void **state)
{
	(void)state;
	fake_cuda_reset(1);
	return cuInit(0) != CUDA_SUCCESS;
}

static void test_kmod_gpu_auto_hit_makes_no_cuda_call(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	struct gdrc_mr_info i = get_put(ctx, p);

	(void)state;
	assert_true(i.flags & GDRC_MR_INFO_KMOD);
	assert_false(i.flags & GDRC_MR_INFO_TAG_CHECKED);
	fake_cuda_calls_reset();
	for (int n = 0; n < 100; n++)
		assert_int_equal(get_put(ctx, p + 64 * n).id, i.id);
	assert_int_equal(fake_cuda_calls("cuPointerGetAttribute"), 0);
	assert_int_equal(fake_cuda_calls("cuPointerGetAttributes"), 0);
	assert_int_equal(stat(ctx, GDRC_STAT_TAG_CHECKS), 0);
	gdrc_fini(ctx);
	fake_cuda_free(p);
}

static void test_kmod_gpu_revoked_pin_gives_new_id(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0), q;
	struct gdrc_mr_info a, b;

	(void)state;
	a = get_put(ctx, p);
	(void)get_put(ctx, p); /* the next get is a fast-path one */
	assert_int_equal(fake_cuda_free(p), 0);
	provider_revokes(p);
	q = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	assert_int_equal(q, p);
	b = get_put(ctx, q);
	assert_int_not_equal(b.id, a.id);
	assert_int_not_equal(b.buffer_id, a.buffer_id);
	assert_true(stat(ctx, GDRC_STAT_INV_KMOD) >= 1);
	assert_int_equal(stat(ctx, GDRC_STAT_TAG_CHECKS), 0);
	gdrc_fini(ctx);
	fake_cuda_free(q);
}

static void test_kmod_gpu_always_mode_still_checks_tags(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode("always");
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	struct gdrc_mr_info i = get_put(ctx, p);

	(void)state;
	assert_true(i.flags & GDRC_MR_INFO_KMOD);
	assert_true(i.flags & GDRC_MR_INFO_TAG_CHECKED);
	fake_cuda_calls_reset();
	(void)get_put(ctx, p);
	assert_int_equal(fake_cuda_calls("cuPointerGetAttribute"), 1);
	gdrc_fini(ctx);
	fake_cuda_free(p);
}

/* ---- the kmod backend: the pin is the registration ---- */

#define PARAM_FILE_LIMIT "/sys/module/gdrcache/parameters/max_pinned_bytes_per_file"
#define MOCK_FAIL "/sys/kernel/debug/mock_nvp2p/fail_next"
#define KB64 (64 * 1024UL)

static void write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static char saved_limit[64];

static void limit_pins(const char *bytes)
{
	FILE *f = fopen(PARAM_FILE_LIMIT, "r");

	assert_non_null(f);
	assert_non_null(fgets(saved_limit, sizeof(saved_limit), f));
	fclose(f);
	write_text(PARAM_FILE_LIMIT, bytes);
}

static int restore_limit(void **state)
{
	(void)state;
	if (saved_limit[0])
		write_text(PARAM_FILE_LIMIT, saved_limit);
	saved_limit[0] = '\0';
	return 0;
}

static void test_kmod_gpu_backend_is_kmod(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);

	(void)state;
	assert_int_equal(gdrc_backend_status(ctx, GDRC_BACKEND_KMOD, NULL),
			 GDRC_OK);
	assert_int_equal(get_put(ctx, p).backend, GDRC_BACKEND_KMOD);
	gdrc_fini(ctx);
	fake_cuda_free(p);
}

/* The module's limit reached by unused registrations: they are evicted
 * and the pin retried. */
static void test_kmod_gpu_pin_limit_evicts_and_retries(void **state)
{
	CUdeviceptr p[5];
	struct gdrc_ctx *ctx;

	(void)state;
	limit_pins("262144"); /* four 64 KiB pins per file */
	ctx = ctx_mode(NULL);
	for (int i = 0; i < 5; i++) {
		p[i] = fake_cuda_alloc(FAKE_DEVICE, KB64, 0);
		assert_true(p[i] != 0);
	}
	for (int i = 0; i < 4; i++)
		(void)get_put(ctx, p[i]);
	assert_int_equal(stat(ctx, GDRC_STAT_REGIONS), 4);
	(void)get_put(ctx, p[4]);
	assert_true(stat(ctx, GDRC_STAT_EVICTIONS) >= 1);
	assert_int_equal(stat(ctx, GDRC_STAT_REG_FAILURES), 0);
	gdrc_fini(ctx);
	for (int i = 0; i < 5; i++)
		fake_cuda_free(p[i]);
}

/* Held registrations fill the limit: the next one fails cleanly. */
static void test_kmod_gpu_pin_limit_fails_cleanly(void **state)
{
	struct gdrc_mr *held[4], *mr = (struct gdrc_mr *)0x1;
	CUdeviceptr p[5];
	struct gdrc_ctx *ctx;

	(void)state;
	limit_pins("262144");
	ctx = ctx_mode(NULL);
	for (int i = 0; i < 5; i++)
		p[i] = fake_cuda_alloc(FAKE_DEVICE, KB64, 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)p[i], 64,
					     0, 0, &held[i]),
				 GDRC_OK);
	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)p[4], 64, 0, 0,
				     &mr),
			 GDRC_ERR_NO_MEMORY);
	assert_ptr_equal(mr, (struct gdrc_mr *)0x1);
	assert_int_equal(stat(ctx, GDRC_STAT_REG_FAILURES), 1);
	assert_int_equal(stat(ctx, GDRC_STAT_REGIONS), 4);
	for (int i = 0; i < 4; i++)
		gdrc_mr_put(ctx, held[i]);
	/* Room again once one goes. */
	assert_int_equal(gdrc_invalidate(ctx, (void *)(uintptr_t)p[0], 64),
			 GDRC_OK);
	(void)get_put(ctx, p[4]);
	gdrc_fini(ctx);
	for (int i = 0; i < 5; i++)
		fake_cuda_free(p[i]);
}

/* The provider out of memory (BAR1) once: evict, retry, done.  Any
 * other provider error: GDRC_ERR_KMOD, nothing cached. */
static void test_kmod_gpu_provider_errors(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	struct gdrc_mr *mr = (struct gdrc_mr *)0x1;

	(void)state;
	write_text(MOCK_FAIL, "12");
	assert_int_equal(get_put(ctx, p).backend, GDRC_BACKEND_KMOD);
	assert_int_equal(gdrc_invalidate(ctx, (void *)(uintptr_t)p, 64),
			 GDRC_OK);
	write_text(MOCK_FAIL, "22");
	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)p, 64, 0, 0,
				     &mr),
			 GDRC_ERR_KMOD);
	assert_ptr_equal(mr, (struct gdrc_mr *)0x1);
	assert_int_equal(stat(ctx, GDRC_STAT_REGIONS), 0);
	(void)get_put(ctx, p);
	gdrc_fini(ctx);
	fake_cuda_free(p);
}

/* The mock provider's live mappings (its stats file), or -1. */
static long mock_live(void)
{
	FILE *f = fopen("/sys/kernel/debug/mock_nvp2p/stats", "r");
	unsigned long long v;
	char name[64];
	long live = -1;

	if (!f)
		return -1;
	while (fscanf(f, "%63s %llu", name, &v) == 2)
		if (!strcmp(name, "live"))
			live = (long)v;
	fclose(f);
	return live;
}

/*
 * VMM memory of three mappings (fake reservation) registered whole by
 * the kmod backend: one pin per mapping (nvidia_p2p pins one allocation),
 * hits make no CUDA call, the provider revoking the middle mapping's pin
 * (as NVIDIA does when that memory is freed) ends the registration for
 * requests anywhere in it, and everything is unpinned at the end.
 */
static void test_kmod_gpu_vmm_pin_per_mapping(void **state)
{
	struct gdrc_ctx *ctx = ctx_mode(NULL);
	CUdeviceptr va = fake_cuda_vmm_reserve(8 * MIB);
	struct gdrc_mr_info a, b;
	struct gdrc_mr *mr;
	long live0 = mock_live();

	(void)state;
	assert_true(va != 0);
	assert_int_equal(fake_cuda_vmm_map(va, 4 * MIB, 0), 0);
	assert_int_equal(fake_cuda_vmm_map(va + 4 * MIB, 2 * MIB, 0), 0);
	assert_int_equal(fake_cuda_vmm_map(va + 6 * MIB, 2 * MIB, 0), 0);
	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)va, 8 * MIB, 0, 0,
				     &mr),
			 GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, &a), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	assert_int_equal(a.backend, GDRC_BACKEND_KMOD);
	assert_int_equal(a.key_length, 8 * MIB);
	assert_true(a.flags & GDRC_MR_INFO_KMOD);
	assert_false(a.flags & GDRC_MR_INFO_TAG_CHECKED);
	assert_int_equal(mock_live(), live0 + 3);
	fake_cuda_calls_reset();
	assert_int_equal(get_put(ctx, va + 5 * MIB).id, a.id);
	assert_int_equal(get_put(ctx, va + 7 * MIB).id, a.id);
	assert_int_equal(fake_cuda_calls("cuPointerGetAttribute"), 0);
	provider_revokes(va + 4 * MIB + 4096);
	b = get_put(ctx, va + MIB); /* inside the first, untouched one */
	assert_int_not_equal(b.id, a.id);
	assert_true(stat(ctx, GDRC_STAT_INV_KMOD) >= 1);
	gdrc_fini(ctx);
	assert_int_equal(mock_live(), live0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(
			test_kmod_gpu_auto_hit_makes_no_cuda_call, setup),
		cmocka_unit_test_setup(test_kmod_gpu_revoked_pin_gives_new_id,
				       setup),
		cmocka_unit_test_setup(
			test_kmod_gpu_always_mode_still_checks_tags, setup),
		cmocka_unit_test_setup(test_kmod_gpu_backend_is_kmod, setup),
		cmocka_unit_test_setup_teardown(
			test_kmod_gpu_pin_limit_evicts_and_retries, setup,
			restore_limit),
		cmocka_unit_test_setup_teardown(
			test_kmod_gpu_pin_limit_fails_cleanly, setup,
			restore_limit),
		cmocka_unit_test_setup(test_kmod_gpu_provider_errors, setup),
		cmocka_unit_test_setup(test_kmod_gpu_vmm_pin_per_mapping,
				       setup),
	};
	char self[PATH_MAX];
	ssize_t n;

	(void)argc;
	(void)argv;
	if (access("/dev/gdrcache", F_OK) || access(MOCK_FIRE, W_OK)) {
		printf("skipped: no gdrcache.ko or no mock NVIDIA provider\n");
		return 77;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = '\0';
	snprintf(fake_path, sizeof(fake_path), "%s/libgdrc_fakecuda.so",
		 dirname(self));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
