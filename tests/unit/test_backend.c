// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_backend.c - which backend registers GPU memory, and why the others
 * do not: GDRC_BACKEND's order, the dma-buf probe (EBADF: the NIC takes
 * dma-buf; EOPNOTSUPP: it does not), the export of a range and the fd's
 * close, peermem's sysfs marks, refusal when no listed backend works, and
 * gdrc_backend_status / gdrc_backend_name.  Verbs is replaced at link
 * time (-Wl,--wrap) with fakes that record their calls; GPU memory comes
 * from the fake driver.  Real verbs run in the VM lab (soft-RoCE, which
 * takes no dma-buf), the export on the GPU machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <infiniband/verbs.h>
#ifdef GDRC_HAVE_URING
#include <liburing.h>
#endif

#include <gdrcache.h>

#include "fake_cuda.h"
#include "fake_cuda_test.h"
#include "pin/pin.h"

#define MIB (1024UL * 1024)

static struct {
	int probe_errno;   /* what ibv_reg_dmabuf_mr(fd -1) says */
	int dmabuf_regs;
	int last_fd;
	uint64_t last_offset, last_iova;
	size_t last_length;
	int verbs_regs;
	int deregs;
	uint32_t next_key;
	int dmabuf_enomem; /* the next so many dma-buf registrations run
			    * out (ENOMEM: BAR1, the NIC's resources) */
} fake;

struct ibv_mr *__wrap_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
				       size_t length, uint64_t iova,
				       unsigned int access);
struct ibv_mr *__wrap_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
					size_t length, uint64_t iova, int fd,
					int access);
int __wrap_ibv_dereg_mr(struct ibv_mr *mr);

static struct ibv_mr *fake_mr(struct ibv_pd *pd, void *addr, size_t length)
{
	struct ibv_mr *mr = calloc(1, sizeof(*mr));

	assert_non_null(mr);
	mr->pd = pd;
	mr->addr = addr;
	mr->length = length;
	mr->lkey = ++fake.next_key;
	mr->rkey = 0x1000 + fake.next_key;
	return mr;
}

struct ibv_mr *__wrap_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
				       size_t length, uint64_t iova,
				       unsigned int access)
{
	(void)iova;
	(void)access;
	fake.verbs_regs++;
	return fake_mr(pd, addr, length);
}

struct ibv_mr *__wrap_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
					size_t length, uint64_t iova, int fd,
					int access)
{
	(void)access;
	if (fd < 0) {
		errno = fake.probe_errno;
		return NULL;
	}
	/* The fd must be open while the NIC takes it. */
	assert_true(fcntl(fd, F_GETFD) >= 0);
	if (fake.dmabuf_enomem > 0) {
		fake.dmabuf_enomem--;
		errno = ENOMEM;
		return NULL;
	}
	fake.dmabuf_regs++;
	fake.last_fd = fd;
	fake.last_offset = offset;
	fake.last_iova = iova;
	fake.last_length = length;
	return fake_mr(pd, (void *)(uintptr_t)iova, length);
}

int __wrap_ibv_dereg_mr(struct ibv_mr *mr)
{
	fake.deregs++;
	free(mr);
	return 0;
}

static struct ibv_pd *fake_pd = (struct ibv_pd *)0x1000;

static struct gdrc_ctx *ctx_backend(const char *list, int with_pd)
{
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_PD,
				   .pd = fake_pd };
	struct gdrc_ctx *ctx = NULL;

	setenv("GDRC_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
	setenv("GDRC_KMOD", "off", 1);
	if (list)
		setenv("GDRC_BACKEND", list, 1);
	assert_int_equal(gdrc_init(with_pd ? &cfg : NULL, &ctx), GDRC_OK);
	unsetenv("GDRC_BACKEND");
	return ctx;
}

static const char *reason(struct gdrc_ctx *ctx, enum gdrc_backend b)
{
	const char *why = NULL;

	assert_int_equal(gdrc_backend_status(ctx, b, &why),
			 GDRC_ERR_UNSUPPORTED);
	assert_non_null(why);
	return why;
}

static void used(struct gdrc_ctx *ctx, enum gdrc_backend b)
{
	const char *why = "unset";

	assert_int_equal(gdrc_backend_status(ctx, b, &why), GDRC_OK);
	assert_null(why);
}

static int setup(void **state)
{
	(void)state;
	memset(&fake, 0, sizeof(fake));
	fake.probe_errno = EOPNOTSUPP;
	fake_cuda_reset(1);
	return cuInit(0) != CUDA_SUCCESS;
}

/* A NIC that takes dma-buf: GPU memory goes that way, the fd is the
 * range's, at offset 0, and closed after the registration. */
static void test_backend_dmabuf_used_when_the_nic_takes_it(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, 2 * MIB, 0);
	struct gdrc_mr_info info;

	(void)state;
	fake.probe_errno = EBADF;
	ctx = ctx_backend(NULL, 1);
	used(ctx, GDRC_BACKEND_DMABUF);
	used(ctx, GDRC_BACKEND_VERBS);
	assert_string_equal(reason(ctx, GDRC_BACKEND_PEERMEM),
			    "not tried: dmabuf comes first");
	info = get_info(ctx, p + 4096, 4096);
	assert_int_equal(info.backend, GDRC_BACKEND_DMABUF);
	assert_int_equal(fake.dmabuf_regs, 1);
	assert_int_equal(fake.last_offset, 0);
	assert_int_equal(fake.last_iova, info.addr);
	assert_int_equal(fake.last_length, info.length);
	assert_int_equal(info.addr, p);
	assert_int_equal(info.length, 2 * MIB);
	assert_int_equal(fcntl(fake.last_fd, F_GETFD), -1);
	assert_int_equal(errno, EBADF);
	assert_int_not_equal(info.lkey, 0);
	/* Host memory still goes through ibv_reg_mr. */
	{
		static char host[8192] __attribute__((aligned(4096)));
		struct gdrc_mr *mr;

		assert_int_equal(gdrc_mr_get(ctx, host, 64, 0, 0, &mr),
				 GDRC_OK);
		assert_int_equal(gdrc_mr_query(mr, &info), GDRC_OK);
		assert_int_equal(info.backend, GDRC_BACKEND_VERBS);
		gdrc_mr_put(ctx, mr);
	}
	gdrc_fini(ctx);
	assert_int_equal(fake.deregs, 2);
	assert_int_equal(fake_cuda_free(p), 0);
}

/* soft-RoCE and older NICs: EOPNOTSUPP; no peer-memory client here, no
 * module: auto ends at none, every reason kept. */
static void test_backend_auto_falls_back_with_reasons(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);

	(void)state;
	ctx = ctx_backend("auto", 1);
	assert_non_null(strstr(reason(ctx, GDRC_BACKEND_DMABUF),
			       "the NIC does not take dma-buf memory"));
	assert_non_null(strstr(reason(ctx, GDRC_BACKEND_DMABUF),
			       strerror(EOPNOTSUPP)));
	if (access("/sys/module/nvidia_peermem", F_OK))
		assert_non_null(strstr(reason(ctx, GDRC_BACKEND_PEERMEM),
				       "nvidia-peermem"));
	assert_non_null(strstr(reason(ctx, GDRC_BACKEND_KMOD),
			       "gdrcache.ko is not open"));
	used(ctx, GDRC_BACKEND_NONE);
	assert_int_equal(get_info(ctx, p, 4096).backend, GDRC_BACKEND_NONE);
	assert_int_equal(fake.dmabuf_regs, 0);
	gdrc_fini(ctx);
	assert_int_equal(fake_cuda_free(p), 0);
}

/* Only dma-buf listed, and the NIC refuses it: GPU memory is refused,
 * host memory still works. */
static void test_backend_list_without_a_working_one_refuses_gpu(void **state)
{
	static char host[4096] __attribute__((aligned(4096)));
	struct gdrc_ctx *ctx;
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	struct gdrc_mr *mr = (struct gdrc_mr *)0x1;

	(void)state;
	ctx = ctx_backend("dmabuf", 1);
	assert_string_equal(reason(ctx, GDRC_BACKEND_NONE),
			    "not in GDRC_BACKEND");
	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)p, 64, 0, 0,
				     &mr),
			 GDRC_ERR_UNSUPPORTED);
	assert_ptr_equal(mr, (struct gdrc_mr *)0x1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 0);
	assert_int_equal(gdrc_mr_get(ctx, host, 64, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	assert_int_equal(fake_cuda_free(p), 0);
}

/* The list's order decides: kmod before none is skipped (no module). */
static void test_backend_list_order(void **state)
{
	struct gdrc_ctx *ctx;

	(void)state;
	fake.probe_errno = EBADF;
	ctx = ctx_backend("kmod,none,dmabuf", 1);
	used(ctx, GDRC_BACKEND_NONE);
	assert_non_null(strstr(reason(ctx, GDRC_BACKEND_KMOD),
			       "gdrcache.ko"));
	assert_string_equal(reason(ctx, GDRC_BACKEND_DMABUF),
			    "not tried: none comes first");
	assert_string_equal(reason(ctx, GDRC_BACKEND_PEERMEM),
			    "not in GDRC_BACKEND");
	gdrc_fini(ctx);
}

/* Without a PD, dma-buf and peermem cannot be used. */
static void test_backend_no_pd(void **state)
{
	struct gdrc_ctx *ctx;

	(void)state;
	fake.probe_errno = EBADF;
	ctx = ctx_backend(NULL, 0);
	assert_string_equal(reason(ctx, GDRC_BACKEND_DMABUF),
			    "no protection domain (gdrc_config.pd)");
	assert_string_equal(reason(ctx, GDRC_BACKEND_PEERMEM),
			    "no protection domain (gdrc_config.pd)");
	assert_string_equal(reason(ctx, GDRC_BACKEND_VERBS),
			    "no protection domain (gdrc_config.pd)");
	used(ctx, GDRC_BACKEND_NONE);
	gdrc_fini(ctx);
}

/* A device without dma-buf export, and a driver without the call. */
static void test_backend_driver_side_of_dmabuf(void **state)
{
	struct gdrc_ctx *ctx;

	(void)state;
	fake.probe_errno = EBADF;
	fake_cuda_fail("cuDeviceGetAttribute", CUDA_ERROR_INVALID_VALUE, -1);
	ctx = ctx_backend("dmabuf,none", 1);
	fake_cuda_fail("cuDeviceGetAttribute", CUDA_SUCCESS, 0);
	assert_string_equal(reason(ctx, GDRC_BACKEND_DMABUF),
			    "cuda device 0 does not export dma-buf");
	used(ctx, GDRC_BACKEND_NONE);
	gdrc_fini(ctx);
}

/* The range refused, the allocation holding it exported instead (pool
 * memory on driver 580): the MR starts at the range's offset in it. */
static void test_backend_export_falls_back_to_the_allocation(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr p = fake_cuda_alloc(FAKE_POOL, 4 * MIB, 0);
	struct gdrc_mr_info info;

	(void)state;
	fake.probe_errno = EBADF;
	setenv("GDRC_WHOLE_ALLOC_MAX", "1M", 1); /* keys: the request */
	ctx = ctx_backend("dmabuf", 1);
	unsetenv("GDRC_WHOLE_ALLOC_MAX");
	fake_cuda_fail("cuMemGetHandleForAddressRange",
		       CUDA_ERROR_INVALID_VALUE, 1);
	info = get_info(ctx, p + 2 * MIB + 100, 4096);
	assert_int_equal(info.backend, GDRC_BACKEND_DMABUF);
	assert_int_equal(info.addr, p + 2 * MIB);
	assert_int_equal(info.length, 64 * 1024);
	assert_int_equal(fake.last_offset, 2 * MIB);
	assert_int_equal(fake.last_iova, info.addr);
	assert_int_equal(fake.last_length, info.length);
	assert_int_equal(fake_cuda_calls("cuMemGetHandleForAddressRange"), 2);
	gdrc_fini(ctx);
	assert_int_equal(fake_cuda_free(p), 0);
}

/*
 * VMM memory: the fallback exports the one mapping holding the range,
 * never the whole reservation (which would hold mappings the
 * registration does not cover, or fail over a hole and hide that the
 * first export ran out).  Found by review.
 */
static void test_backend_export_fallback_stays_in_the_mapping(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr va = fake_cuda_vmm_reserve(16 * MIB);
	struct gdrc_mr_info info;

	(void)state;
	assert_int_equal(fake_cuda_vmm_map(va, 4 * MIB, 0), 0);
	assert_int_equal(fake_cuda_vmm_map(va + 4 * MIB, 4 * MIB, 0), 0);
	assert_int_equal(fake_cuda_vmm_map(va + 8 * MIB, 4 * MIB, 0), 0);
	fake.probe_errno = EBADF;
	setenv("GDRC_WHOLE_ALLOC_MAX", "1M", 1); /* keys: the request */
	ctx = ctx_backend("dmabuf", 1);
	unsetenv("GDRC_WHOLE_ALLOC_MAX");
	fake_cuda_fail("cuMemGetHandleForAddressRange",
		       CUDA_ERROR_INVALID_VALUE, 1);
	info = get_info(ctx, va + 6 * MIB, 4096);
	assert_int_equal(info.addr, va + 6 * MIB);
	assert_int_equal(fake.last_offset, 2 * MIB); /* in mapping B */
	/* Over two mappings, a hole past them, the first export running
	 * out: no fallback fits, and the running out is what is said. */
	assert_int_equal(cuMemUnmap(va + 8 * MIB, 4 * MIB), CUDA_SUCCESS);
	assert_int_equal(gdrc_invalidate(ctx, (void *)(uintptr_t)va,
					 16 * MIB),
			 GDRC_OK);
	fake_cuda_fail("cuMemGetHandleForAddressRange",
		       CUDA_ERROR_OUT_OF_MEMORY, 1);
	info = get_info(ctx, va + 3 * MIB, 2 * MIB);
	assert_int_equal(info.backend, GDRC_BACKEND_DMABUF);
	assert_int_equal(stat_of(ctx, GDRC_STAT_OOM_RETRIES), 1);
	gdrc_fini(ctx);
}

/* Both exports failing fail that registration cleanly (GDRC_ERR_CUDA). */
static void test_backend_export_failure(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	struct gdrc_mr *mr = (struct gdrc_mr *)0x1;

	(void)state;
	fake.probe_errno = EBADF;
	ctx = ctx_backend("dmabuf", 1);
	fake_cuda_fail("cuMemGetHandleForAddressRange",
		       CUDA_ERROR_INVALID_VALUE, 2);
	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)p, 64, 0, 0,
				     &mr),
			 GDRC_ERR_CUDA);
	assert_ptr_equal(mr, (struct gdrc_mr *)0x1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REG_FAILURES), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(get_info(ctx, p, 64).backend, GDRC_BACKEND_DMABUF);
	gdrc_fini(ctx);
	assert_int_equal(fake_cuda_free(p), 0);
}

/* ---- running out ---- */

static int warnings_ran_out;

static void count_ran_out(enum gdrc_log_level level, const char *msg,
			  void *arg)
{
	(void)arg;
	if (level == GDRC_LOG_WARN && strstr(msg, "ran out"))
		warnings_ran_out++;
}

/*
 * A GPU registration that runs out (the NIC says ENOMEM: BAR1) releases
 * that device's unused registrations, and only those, then succeeds on
 * its one retry; counted per context and per device, warned once.
 */
static void test_backend_out_of_memory_releases_the_device(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr a, b, c, other;
	char host[8192];

	(void)state;
	fake_cuda_reset(2);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	fake.probe_errno = EBADF;
	ctx = ctx_backend(NULL, 1);
	a = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	b = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	c = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	other = fake_cuda_alloc(FAKE_DEVICE, MIB, 1);
	(void)get_info(ctx, a, 64);
	(void)get_info(ctx, b, 64);
	(void)get_info(ctx, other, 64);
	(void)get_info(ctx, (CUdeviceptr)(uintptr_t)host, sizeof(host));
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_REGIONS), 2);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_DMABUFS), 2);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_PINNED_BYTES),
			 2 * MIB);
	assert_int_equal(dev_stat(ctx, GDRC_DEVICE_ALL,
				  GDRC_DEVICE_STAT_REGIONS), 4);
	warnings_ran_out = 0;
	gdrc_log_set_handler(count_ran_out, NULL);
	fake.dmabuf_enomem = 1;
	fake.deregs = 0;
	assert_int_equal(get_info(ctx, c, 64).backend, GDRC_BACKEND_DMABUF);
	assert_int_equal(fake.deregs, 2);
	assert_int_equal(stat_of(ctx, GDRC_STAT_OOM_RETRIES), 1);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_RETRIES), 1);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_EVICTIONS), 2);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_REGIONS), 1);
	assert_int_equal(dev_stat(ctx, 1, GDRC_DEVICE_STAT_REGIONS), 1);
	assert_int_equal(dev_stat(ctx, GDRC_DEVICE_HOST,
				  GDRC_DEVICE_STAT_REGIONS), 1);
	/* Running out twice in a row fails; said once. */
	fake.dmabuf_enomem = 2;
	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)a, 64, 0, 0,
				     &(struct gdrc_mr *){ NULL }),
			 GDRC_ERR_NO_MEMORY);
	assert_int_equal(stat_of(ctx, GDRC_STAT_OOM_RETRIES), 2);
	assert_int_equal(warnings_ran_out, 1);
	gdrc_log_set_handler(NULL, NULL);
	gdrc_fini(ctx);
}

/* The driver's export running out is retried the same way; running out
 * on the retry too is GDRC_ERR_NO_MEMORY. */
static void test_backend_export_out_of_memory_retried(void **state)
{
	struct gdrc_ctx *ctx;
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	struct gdrc_mr *mr = (struct gdrc_mr *)0x1;

	(void)state;
	fake.probe_errno = EBADF;
	ctx = ctx_backend("dmabuf", 1);
	/* The range and then the allocation: both run out, once. */
	fake_cuda_fail("cuMemGetHandleForAddressRange",
		       CUDA_ERROR_OUT_OF_MEMORY, 2);
	assert_int_equal(get_info(ctx, p, 64).backend, GDRC_BACKEND_DMABUF);
	assert_int_equal(stat_of(ctx, GDRC_STAT_OOM_RETRIES), 1);
	assert_int_equal(gdrc_invalidate(ctx, (void *)(uintptr_t)p, 64),
			 GDRC_OK);
	fake_cuda_fail("cuMemGetHandleForAddressRange",
		       CUDA_ERROR_OUT_OF_MEMORY, 4);
	assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)p, 64, 0, 0,
				     &mr),
			 GDRC_ERR_NO_MEMORY);
	assert_ptr_equal(mr, (struct gdrc_mr *)0x1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_OOM_RETRIES), 2);
	assert_int_equal(dev_stat(ctx, 0, GDRC_DEVICE_STAT_RETRIES), 2);
	gdrc_fini(ctx);
	assert_int_equal(fake_cuda_free(p), 0);
}

static void test_backend_none_alone(void **state)
{
	struct gdrc_ctx *ctx;

	(void)state;
	ctx = ctx_backend("none", 1);
	used(ctx, GDRC_BACKEND_NONE);
	assert_string_equal(reason(ctx, GDRC_BACKEND_VERBS),
			    "GDRC_BACKEND=none");
	assert_string_equal(reason(ctx, GDRC_BACKEND_DMABUF),
			    "GDRC_BACKEND=none");
	gdrc_fini(ctx);
}

/* peermem's marks in sysfs, under another root. */
static void test_backend_peermem_probe(void **state)
{
	char root[] = "/tmp/gdrc-peermem-XXXXXX", path[256], why[160] = "";

	(void)state;
	assert_non_null(mkdtemp(root));
	assert_int_equal(gdrc_pin_peermem_probe(root, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "nvidia-peermem"));
	snprintf(path, sizeof(path), "%s/sys", root);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/sys/module", root);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/sys/module/nvidia_peermem", root);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(gdrc_pin_peermem_probe(root, why, sizeof(why)), 1);
	assert_int_equal(rmdir(path), 0);
	snprintf(path, sizeof(path), "%s/sys/module", root);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/sys", root);
	rmdir(path);
	rmdir(root);
}

#ifdef GDRC_HAVE_URING
/* A context with an io_uring ring registers host memory only: GPU memory
 * is refused (io_uring pins host pages), each GPU backend says why, and
 * host memory is a slot of the ring's table. */
static void test_backend_uring_refuses_gpu(void **state)
{
	CUdeviceptr p = fake_cuda_alloc(FAKE_DEVICE, MIB, 0);
	static char host[8192] __attribute__((aligned(4096)));
	struct io_uring ring;
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_IO_URING,
				   .ring = &ring };
	struct gdrc_ctx *ctx = NULL;
	struct gdrc_mr *mr = NULL;
	struct gdrc_mr_info info;

	(void)state;
	if (io_uring_queue_init(4, &ring, 0))
		skip();
	setenv("GDRC_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
	setenv("GDRC_KMOD", "off", 1);
	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_OK);
	used(ctx, GDRC_BACKEND_IO_URING);
	for (int b = GDRC_BACKEND_DMABUF; b <= GDRC_BACKEND_KMOD; b++)
		assert_non_null(strstr(reason(ctx, (enum gdrc_backend)b),
				       "host memory with io_uring only"));
	assert_non_null(strstr(reason(ctx, GDRC_BACKEND_VERBS), "io_uring"));
	assert_int_equal(gdrc_mr_get(ctx, (void *)p, 4096, 0, 0, &mr),
			 GDRC_ERR_UNSUPPORTED);
	assert_null(mr);
	assert_int_equal(gdrc_mr_get(ctx, host, 64, 0, 0, &mr), GDRC_OK);
	assert_int_equal(gdrc_mr_query(mr, &info), GDRC_OK);
	assert_int_equal(info.backend, GDRC_BACKEND_IO_URING);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	io_uring_queue_exit(&ring);
	assert_int_equal(fake.verbs_regs + fake.dmabuf_regs, 0);
	assert_int_equal(fake_cuda_free(p), 0);
}
#endif

static void test_backend_status_bad_input(void **state)
{
	struct gdrc_ctx *ctx;
	const char *why = "unchanged";

	(void)state;
	assert_int_equal(gdrc_backend_status(NULL, GDRC_BACKEND_NONE, &why),
			 GDRC_ERR_INVALID_PARAM);
	ctx = ctx_backend(NULL, 0);
	assert_int_equal(gdrc_backend_status(ctx, (enum gdrc_backend)7, &why),
			 GDRC_ERR_INVALID_PARAM);
	assert_int_equal(gdrc_backend_status(ctx, (enum gdrc_backend)-1, &why),
			 GDRC_ERR_INVALID_PARAM);
	assert_string_equal(why, "unchanged");
	assert_int_equal(gdrc_backend_status(ctx, GDRC_BACKEND_NONE, NULL),
			 GDRC_OK);
	gdrc_fini(ctx);
	assert_string_equal(gdrc_backend_name(GDRC_BACKEND_DMABUF), "dmabuf");
	assert_string_equal(gdrc_backend_name(GDRC_BACKEND_PEERMEM),
			    "peermem");
	assert_string_equal(gdrc_backend_name(GDRC_BACKEND_KMOD), "kmod");
	assert_string_equal(gdrc_backend_name(GDRC_BACKEND_IO_URING),
			    "io_uring");
	assert_string_equal(gdrc_backend_name((enum gdrc_backend)9),
			    "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup(fn, setup)
		T(test_backend_dmabuf_used_when_the_nic_takes_it),
		T(test_backend_auto_falls_back_with_reasons),
		T(test_backend_list_without_a_working_one_refuses_gpu),
		T(test_backend_list_order),
		T(test_backend_no_pd),
		T(test_backend_driver_side_of_dmabuf),
		T(test_backend_export_falls_back_to_the_allocation),
		T(test_backend_export_failure),
		T(test_backend_export_fallback_stays_in_the_mapping),
		T(test_backend_out_of_memory_releases_the_device),
		T(test_backend_export_out_of_memory_retried),
		T(test_backend_none_alone),
		T(test_backend_peermem_probe),
		T(test_backend_status_bad_input),
#ifdef GDRC_HAVE_URING
		T(test_backend_uring_refuses_gpu),
#endif
#undef T
	};

	setenv("GDRC_MEM_HOOKS", "none", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
