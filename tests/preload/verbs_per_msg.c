// SPDX-License-Identifier: BSD-3-Clause
/*
 * verbs_per_msg.c - an ordinary verbs program that knows nothing of
 * libgdrcache, for running under LD_PRELOAD=libgdrcache-preload.so.
 *
 * Two RC queue pairs on one device, connected to each other (soft-RoCE
 * loops them back), move data with RDMA writes:
 *
 *   realloc  malloc a large block (glibc mmaps it), register it, write a
 *            pattern into it, check, deregister, free; malloc again (the
 *            same address, usually), register, write another pattern,
 *            check.  A cache that served the first registration for the
 *            second block would land the write in the freed pages and
 *            the check would fail.
 *   loop     for each message: register the source buffer (SIZE bytes),
 *            fill it, RDMA write its first WRITE bytes, wait, check the
 *            destination, deregister: what a library that pins the
 *            user's buffer per message does.  Prints the time per
 *            message.
 *
 * Usage: verbs_per_msg [-d DEV] [-g GID_INDEX] [-n ITERS] [-s SIZE]
 *                      [-w WRITE] realloc|loop
 * Exit 0 when every check passed.
 */
#include <getopt.h>
#include <infiniband/verbs.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CQ_DEPTH 16
#define REALLOC_SIZE (8u << 20)

struct vp {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
	union ibv_gid gid;
	int gidx;
};

#define DIE(...)                                                             \
	do {                                                                 \
		fprintf(stderr, "verbs_per_msg: " __VA_ARGS__);              \
		fputc('\n', stderr);                                         \
		exit(1);                                                     \
	} while (0)

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	if (!list)
		DIE("ibv_get_device_list failed");
	for (int i = 0; list[i]; i++) {
		if (name && strcmp(ibv_get_device_name(list[i]), name))
			continue;
		ctx = ibv_open_device(list[i]);
		break;
	}
	ibv_free_device_list(list);
	if (!ctx)
		DIE("no device %s", name ? name : "at all");
	return ctx;
}

static void qp_connect(struct vp *v, struct ibv_qp *qp, uint32_t remote)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("qp to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = remote;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = v->gid;
	a.ah_attr.grh.sgid_index = (uint8_t)v->gidx;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				      IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER))
		DIE("qp to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("qp to RTS");
}

static void setup(struct vp *v, const char *dev)
{
	struct ibv_qp_init_attr ia;

	v->ctx = open_dev(dev);
	v->pd = ibv_alloc_pd(v->ctx);
	v->cq = ibv_create_cq(v->ctx, CQ_DEPTH, NULL, NULL, 0);
	if (!v->pd || !v->cq)
		DIE("pd or cq");
	if (ibv_query_gid(v->ctx, 1, v->gidx, &v->gid))
		DIE("ibv_query_gid %d", v->gidx);
	for (int i = 0; i < 2; i++) {
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = v->cq;
		ia.recv_cq = v->cq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = CQ_DEPTH;
		ia.cap.max_recv_wr = 1;
		ia.cap.max_send_sge = 1;
		ia.cap.max_recv_sge = 1;
		v->qp[i] = ibv_create_qp(v->pd, &ia);
		if (!v->qp[i])
			DIE("ibv_create_qp");
	}
	qp_connect(v, v->qp[0], v->qp[1]->qp_num);
	qp_connect(v, v->qp[1], v->qp[0]->qp_num);
}

/* RDMA write of len bytes from src (lkey) to dst (rkey); wait for it. */
static void write_wait(struct vp *v, void *src, uint32_t lkey, void *dst,
		       uint32_t rkey, size_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = (uint32_t)len,
			       .lkey = lkey };
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_wc wc;
	int n;

	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(v->qp[0], &wr, &bad))
		DIE("ibv_post_send");
	while ((n = ibv_poll_cq(v->cq, 1, &wc)) == 0)
		;
	if (n < 0 || wc.status != IBV_WC_SUCCESS)
		DIE("completion: %s", n < 0 ? "poll failed" :
			ibv_wc_status_str(wc.status));
}

static struct ibv_mr *reg(struct vp *v, void *p, size_t len)
{
	struct ibv_mr *mr = ibv_reg_mr(v->pd, p, len,
				       IBV_ACCESS_LOCAL_WRITE |
					       IBV_ACCESS_REMOTE_WRITE);

	if (!mr)
		DIE("ibv_reg_mr of %p+%zu", p, len);
	if (mr->addr != p || mr->length != len)
		DIE("ibv_reg_mr gave %p+%zu for %p+%zu", mr->addr,
		    mr->length, p, len);
	return mr;
}

static int check(const unsigned char *p, size_t len, unsigned char want,
		 const char *what)
{
	for (size_t i = 0; i < len; i += 4093)
		if (p[i] != want) {
			printf("FAIL %s: byte %zu is %u, want %u\n", what, i,
			       p[i], want);
			return 1;
		}
	if (p[len - 1] != want) {
		printf("FAIL %s: last byte is %u, want %u\n", what,
		       p[len - 1], want);
		return 1;
	}
	return 0;
}

static int run_realloc(struct vp *v)
{
	unsigned char *src = malloc(REALLOC_SIZE), *a;
	struct ibv_mr *src_mr, *mr;
	int bad = 0;

	void *first = NULL;

	/* A fixed threshold: glibc would otherwise raise it past the size
	 * of the first block freed, and serve the second from the heap. */
	mallopt(M_MMAP_THRESHOLD, REALLOC_SIZE / 2);
	if (!src)
		DIE("malloc");
	src_mr = reg(v, src, REALLOC_SIZE);
	for (int round = 0; round < 2; round++) {
		unsigned char pat = (unsigned char)(0x5a + round);

		a = malloc(REALLOC_SIZE);
		if (!a)
			DIE("malloc");
		memset(a, 0, REALLOC_SIZE);
		memset(src, pat, REALLOC_SIZE);
		mr = reg(v, a, REALLOC_SIZE);
		write_wait(v, src, src_mr->lkey, a, mr->rkey, REALLOC_SIZE);
		printf("realloc round %d: block %p, rkey %#x%s\n", round,
		       (void *)a, mr->rkey,
		       round && a == first ? " (the freed block's address)" :
					     "");
		first = a;
		bad |= check(a, REALLOC_SIZE, pat, round ? "second block" :
							     "first block");
		if (ibv_dereg_mr(mr))
			DIE("ibv_dereg_mr");
		free(a); /* glibc munmaps a block this large */
	}
	ibv_dereg_mr(src_mr);
	free(src);
	printf("realloc: %s\n", bad ? "FAILED" : "ok");
	return bad;
}

static int run_loop(struct vp *v, int iters, size_t size, size_t wsize)
{
	unsigned char *src = aligned_alloc(4096, size);
	unsigned char *dst = aligned_alloc(4096, size);
	struct ibv_mr *dst_mr, *mr;
	double t0, t;
	int bad = 0;

	if (!src || !dst)
		DIE("aligned_alloc");
	memset(src, 0, size);
	dst_mr = reg(v, dst, size);
	t0 = now_us();
	for (int i = 0; i < iters && !bad; i++) {
		unsigned char pat = (unsigned char)(i * 7 + 1);

		mr = reg(v, src, size);
		src[0] = pat;
		src[wsize - 1] = pat;
		write_wait(v, src, mr->lkey, dst, dst_mr->rkey, wsize);
		if (dst[0] != pat || dst[wsize - 1] != pat) {
			printf("FAIL message %d: got %u/%u, want %u\n", i,
			       dst[0], dst[wsize - 1], pat);
			bad = 1;
		}
		if (ibv_dereg_mr(mr))
			DIE("ibv_dereg_mr");
	}
	t = now_us() - t0;
	printf("loop: %d messages, register %zu bytes + write %zu + "
	       "deregister each: %.2f us per message\n", iters, size, wsize,
	       t / iters);
	ibv_dereg_mr(dst_mr);
	free(src);
	free(dst);
	return bad;
}

int main(int argc, char **argv)
{
	const char *dev = NULL;
	struct vp v = { .gidx = 1 };
	size_t size = 64 << 10, wsize = 0;
	int iters = 1000, c, bad;

	while ((c = getopt(argc, argv, "d:g:n:s:w:")) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'g': v.gidx = atoi(optarg); break;
		case 'n': iters = atoi(optarg); break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'w': wsize = strtoul(optarg, NULL, 0); break;
		default: return 2;
		}
	}
	if (!wsize)
		wsize = size;
	if (optind != argc - 1 || iters < 1 || size < 2 || wsize < 2 ||
	    wsize > size)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	setup(&v, dev);
	if (!strcmp(argv[optind], "realloc"))
		bad = run_realloc(&v);
	else if (!strcmp(argv[optind], "loop"))
		bad = run_loop(&v, iters, size, wsize);
	else
		return 2;
	for (int i = 0; i < 2; i++)
		ibv_destroy_qp(v.qp[i]);
	ibv_destroy_cq(v.cq);
	if (ibv_dealloc_pd(v.pd))
		DIE("ibv_dealloc_pd");
	ibv_close_device(v.ctx);
	return bad;
}
