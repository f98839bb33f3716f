// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_verbs_rxe.c - the verbs backend against real libibverbs and
 * soft-RoCE (rxe0 on a dummy netdev, in a VM lab guest; run by
 * run_verbs_rxe.sh).
 *
 *   - a cached registration's keys move real data: an RDMA write from a
 *     cached source to a cached destination over a loopback RC QP;
 *   - failures: verbs asked for without a PD (GDRC_ERR_UNSUPPORTED at
 *     gdrc_init); a read-only mapping registered for local write (the
 *     kernel refuses: GDRC_ERR_VERBS, nothing cached, the failure
 *     counted);
 *   - GPU backends on a real NIC, with the fake CUDA driver beside this
 *     program: the dma-buf probe on rxe says unsupported and that is the
 *     reason recorded, no peer-memory client is loaded, no module: GPU
 *     memory falls to none (auto), or is refused (GDRC_BACKEND=dmabuf).
 *
 * Usage: test_verbs_rxe FAKE_LIBCUDA     Exit: cmocka's.
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

#include "fake_cuda.h"
#include "fake_cuda_test.h"

#define PAGE 4096UL
#define BUF (64 * 1024UL)

static const char *fake_path;

static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
} v;

static void qp_connect(struct ibv_qp *qp, uint32_t remote,
		       const union ibv_gid *gid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
						    IBV_ACCESS_REMOTE_WRITE };

	assert_int_equal(ibv_modify_qp(qp, &a,
				       IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					       IBV_QP_PORT |
					       IBV_QP_ACCESS_FLAGS),
			 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = remote;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	assert_int_equal(ibv_modify_qp(qp, &a,
				       IBV_QP_STATE | IBV_QP_AV |
					       IBV_QP_PATH_MTU |
					       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					       IBV_QP_MAX_DEST_RD_ATOMIC |
					       IBV_QP_MIN_RNR_TIMER),
			 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	assert_int_equal(ibv_modify_qp(qp, &a,
				       IBV_QP_STATE | IBV_QP_TIMEOUT |
					       IBV_QP_RETRY_CNT |
					       IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					       IBV_QP_MAX_QP_RD_ATOMIC),
			 0);
}

static int group_setup(void **state)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr ia = { 0 };
	union ibv_gid gid;

	(void)state;
	if (!list || !list[0])
		return -1;
	v.ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!v.ctx)
		return -1;
	v.pd = ibv_alloc_pd(v.ctx);
	v.cq = ibv_create_cq(v.ctx, 4, NULL, NULL, 0);
	if (!v.pd || !v.cq || ibv_query_gid(v.ctx, 1, 1, &gid))
		return -1;
	ia.send_cq = ia.recv_cq = v.cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	for (int i = 0; i < 2; i++)
		if (!(v.qp[i] = ibv_create_qp(v.pd, &ia)))
			return -1;
	qp_connect(v.qp[0], v.qp[1]->qp_num, &gid);
	qp_connect(v.qp[1], v.qp[0]->qp_num, &gid);
	setenv("GDRC_KMOD", "off", 1);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	ibv_destroy_qp(v.qp[0]);
	ibv_destroy_qp(v.qp[1]);
	ibv_destroy_cq(v.cq);
	ibv_dealloc_pd(v.pd);
	ibv_close_device(v.ctx);
	return 0;
}

static struct gdrc_ctx *ctx_pd(const char *backend, int gpu)
{
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_PD,
				   .pd = v.pd };
	struct gdrc_ctx *ctx = NULL;

	setenv("GDRC_CUDA_LIBRARY", gpu ? fake_path : "none", 1);
	if (backend)
		setenv("GDRC_BACKEND", backend, 1);
	assert_int_equal(gdrc_init(&cfg, &ctx), GDRC_OK);
	unsetenv("GDRC_BACKEND");
	return ctx;
}

/* Keys from the cache carry a real RDMA write. */
static void test_rxe_cached_keys_move_data(void **state)
{
	char *src = mmap(NULL, BUF, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *dst = mmap(NULL, BUF, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct gdrc_ctx *ctx = ctx_pd(NULL, 0);
	struct gdrc_mr *ms, *md, *again;
	struct gdrc_mr_info info;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_wc wc;
	int n;

	(void)state;
	assert_true(src != MAP_FAILED && dst != MAP_FAILED);
	memset(src, 0x5c, BUF);
	memset(dst, 0, BUF);
	assert_int_equal(gdrc_mr_get(ctx, src, BUF, 0, 0, &ms), GDRC_OK);
	assert_int_equal(gdrc_mr_get(ctx, dst, BUF,
				     GDRC_ACCESS_REMOTE_WRITE, 0, &md),
			 GDRC_OK);
	assert_int_equal(gdrc_mr_query(md, &info), GDRC_OK);
	assert_int_equal(info.backend, GDRC_BACKEND_VERBS);
	assert_int_not_equal(gdrc_mr_rkey(md), 0);
	/* A hit gives the same keys. */
	assert_int_equal(gdrc_mr_get(ctx, src + 100, 100, 0, 0, &again),
			 GDRC_OK);
	assert_int_equal(gdrc_mr_lkey(again), gdrc_mr_lkey(ms));
	gdrc_mr_put(ctx, again);

	sge = (struct ibv_sge){ .addr = (uintptr_t)src, .length = BUF,
				.lkey = gdrc_mr_lkey(ms) };
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = gdrc_mr_rkey(md);
	assert_int_equal(ibv_post_send(v.qp[0], &wr, &bad), 0);
	while ((n = ibv_poll_cq(v.cq, 1, &wc)) == 0)
		;
	assert_int_equal(n, 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(dst[0], 0x5c);
	assert_int_equal(dst[BUF - 1], 0x5c);
	gdrc_mr_put(ctx, ms);
	gdrc_mr_put(ctx, md);
	assert_int_equal(stat_of(ctx, GDRC_STAT_MISSES), 2);
	gdrc_fini(ctx);
	munmap(src, BUF);
	munmap(dst, BUF);
}

/* The kernel refuses write access to a read-only mapping. */
static void test_rxe_bad_access_fails_cleanly(void **state)
{
	char *ro = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	struct gdrc_ctx *ctx = ctx_pd(NULL, 0);
	struct gdrc_mr *mr = (struct gdrc_mr *)0x1;

	(void)state;
	assert_true(ro != MAP_FAILED);
	assert_int_equal(gdrc_mr_get(ctx, ro, PAGE, GDRC_ACCESS_LOCAL_WRITE,
				     0, &mr),
			 GDRC_ERR_VERBS);
	assert_ptr_equal(mr, (struct gdrc_mr *)0x1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REG_FAILURES), 1);
	assert_int_equal(stat_of(ctx, GDRC_STAT_REGIONS), 0);
	assert_int_equal(stat_of(ctx, GDRC_STAT_PINNED_BYTES), 0);
	/* Read access to the same page works. */
	assert_int_equal(gdrc_mr_get(ctx, ro, PAGE, 0, 0, &mr), GDRC_OK);
	gdrc_mr_put(ctx, mr);
	gdrc_fini(ctx);
	munmap(ro, PAGE);
}

static void test_rxe_verbs_without_pd_refused(void **state)
{
	struct gdrc_ctx *ctx = (struct gdrc_ctx *)0x1;

	(void)state;
	setenv("GDRC_BACKEND", "verbs", 1);
	assert_int_equal(gdrc_init(NULL, &ctx), GDRC_ERR_UNSUPPORTED);
	unsetenv("GDRC_BACKEND");
	assert_ptr_equal(ctx, (struct gdrc_ctx *)0x1);
}

/* rxe takes no dma-buf: auto records why and ends at none. */
static void test_rxe_dmabuf_probe_unsupported(void **state)
{
	struct gdrc_ctx *ctx;
	const char *why = NULL;
	CUdeviceptr p;

	(void)state;
	fake_cuda_reset(1);
	assert_int_equal(cuInit(0), CUDA_SUCCESS);
	ctx = ctx_pd(NULL, 1);
	assert_int_equal(gdrc_gpu_status(ctx, NULL), GDRC_OK);
	assert_int_equal(gdrc_backend_status(ctx, GDRC_BACKEND_DMABUF, &why),
			 GDRC_ERR_UNSUPPORTED);
	print_message("    dmabuf on rxe: %s\n", why);
	assert_non_null(strstr(why, "the NIC does not take dma-buf memory"));
	assert_int_equal(gdrc_backend_status(ctx, GDRC_BACKEND_PEERMEM, &why),
			 GDRC_ERR_UNSUPPORTED);
	print_message("    peermem: %s\n", why);
	assert_int_equal(gdrc_backend_status(ctx, GDRC_BACKEND_NONE, NULL),
			 GDRC_OK);
	p = fake_cuda_alloc(FAKE_DEVICE, 1 << 20, 0);
	assert_int_equal(get_info(ctx, p, 4096).backend, GDRC_BACKEND_NONE);
	gdrc_fini(ctx);

	/* dma-buf alone: GPU memory refused, host memory still cached. */
	ctx = ctx_pd("dmabuf", 1);
	{
		struct gdrc_mr *mr = (struct gdrc_mr *)0x1;

		assert_int_equal(gdrc_mr_get(ctx, (void *)(uintptr_t)p, 64, 0,
					     0, &mr),
				 GDRC_ERR_UNSUPPORTED);
		assert_ptr_equal(mr, (struct gdrc_mr *)0x1);
	}
	gdrc_fini(ctx);
	assert_int_equal(fake_cuda_free(p), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rxe_cached_keys_move_data),
		cmocka_unit_test(test_rxe_bad_access_fails_cleanly),
		cmocka_unit_test(test_rxe_verbs_without_pd_refused),
		cmocka_unit_test(test_rxe_dmabuf_probe_unsupported),
	};

	if (argc != 2)
		return 2;
	fake_path = argv[1];
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
