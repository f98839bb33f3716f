/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gdrc-pingpong.c - what a registration cache buys a communication
 * library: an RC ping-pong between two processes, registering the
 * message buffers three ways.
 *
 *   prereg    register both buffers once, before the loop: the floor
 *   cache     gdrc_mr_get / gdrc_mr_put around every message: a library
 *             using libgdrcache
 *   pin-each  ibv_reg_mr / ibv_dereg_mr around every message: a naive
 *             library
 *
 * For each size of a sweep, each mode in turn (ROUNDS times over, best
 * kept), the client sends a message, the server receives it and sends it
 * back, ITERS times; the client prints the time per round trip and the
 * bandwidth.  Data is checked end to
 * end: every message stamps its first and last bytes, and after each
 * size the whole buffer that came back is compared with what was sent.
 * Buffers are host memory or, with --mem cuda, GPU memory (cuMemAlloc on
 * device 0; the CUDA driver is loaded at run time, nothing is needed at
 * build time; the NIC must reach GPU memory: nvidia-peermem or dma-buf).
 *
 * Build (installed package):
 *   cc gdrc-pingpong.c $(pkg-config --cflags --libs gdrcache) -libverbs -ldl
 * Run:
 *   server:  gdrc-pingpong -d rxe0
 *   client:  gdrc-pingpong -d rxe0 SERVER_IP
 *   or, built with MPI (-DGDRC_PINGPONG_MPI, mpicc), rank 0 the server:
 *            mpirun -np 2 gdrc-pingpong --mpi -d rxe0
 * Options (the client's are sent to the server):
 *   -d DEV     RDMA device (default: the first)     -g N   GID index (1)
 *   -p PORT    TCP port of the bootstrap (18515)    -n N   iterations (50)
 *   -s MIN:MAX sizes, doubling (4K:4M)              -w N   warm-up (5)
 *   -m MODES   prereg,cache,pin-each (all three)    --mem host|cuda
 *   -r N       rounds: per size the modes take turns N times, the best
 *              round of each is printed (1)
 *   -o FILE    also write the table as CSV (mode,size,usec,mbps)
 *   --mpi      bootstrap through MPI instead of TCP (MPI builds only)
 * Exit 0 when every check passed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#ifdef GDRC_PINGPONG_MPI
#include <mpi.h>
#endif

#include <gdrcache.h>

enum { MODE_PREREG, MODE_CACHE, MODE_PIN_EACH, MODES };
static const char *const mode_names[MODES] = { "prereg", "cache",
					       "pin-each" };

/* What the client tells the server; both then run the same sweep. */
struct pp_plan {
	uint32_t modes;      /* bit per mode */
	uint32_t iters;
	uint32_t warmup;
	uint32_t rounds;     /* best of, per size and mode */
	uint32_t cuda;
	uint64_t min_size;
	uint64_t max_size;
};

struct pp_dest {
	uint32_t qpn;
	uint32_t psn;
	uint8_t gid[16];
};

struct pp {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int gidx;
	int sock;
	int mpi;                       /* bootstrap through MPI */
	int server;
	struct pp_plan plan;
	char *sbuf, *rbuf;            /* device or host addresses */
	struct gdrc_ctx *gdrc;
	struct ibv_mr *pre_s, *pre_r;  /* prereg */
	int done[2];                   /* completions seen: send, recv */
};

#define ACCESS (IBV_ACCESS_LOCAL_WRITE)

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* ---- GPU memory through the driver, loaded at run time ---- */

static struct {
	int (*init)(unsigned);
	int (*retain)(void **, int);
	int (*set_current)(void *);
	int (*alloc)(unsigned long long *, size_t);
	int (*memset8)(unsigned long long, unsigned char, size_t);
	int (*htod)(unsigned long long, const void *, size_t);
	int (*dtoh)(void *, unsigned long long, size_t);
} cu;

static void cuda_open(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	void *pctx;

	if (!h) {
		fprintf(stderr, "--mem cuda: %s\n", dlerror());
		exit(1);
	}
	cu.init = (int (*)(unsigned))dlsym(h, "cuInit");
	cu.retain = (int (*)(void **, int))dlsym(h,
						 "cuDevicePrimaryCtxRetain");
	cu.set_current = (int (*)(void *))dlsym(h, "cuCtxSetCurrent");
	cu.alloc = (int (*)(unsigned long long *, size_t))dlsym(
		h, "cuMemAlloc_v2");
	cu.memset8 = (int (*)(unsigned long long, unsigned char, size_t))
		dlsym(h, "cuMemsetD8_v2");
	cu.htod = (int (*)(unsigned long long, const void *, size_t))dlsym(
		h, "cuMemcpyHtoD_v2");
	cu.dtoh = (int (*)(void *, unsigned long long, size_t))dlsym(
		h, "cuMemcpyDtoH_v2");
	if (!cu.init || !cu.retain || !cu.set_current || !cu.alloc ||
	    !cu.memset8 || !cu.htod || !cu.dtoh || cu.init(0) ||
	    cu.retain(&pctx, 0) || cu.set_current(pctx)) {
		fprintf(stderr, "--mem cuda: no usable CUDA device 0\n");
		exit(1);
	}
}

static char *buf_alloc(const struct pp *p, size_t len)
{
	unsigned long long d;
	void *h;

	if (p->plan.cuda) {
		if (cu.alloc(&d, len))
			die("cuMemAlloc");
		return (char *)(uintptr_t)d;
	}
	if (posix_memalign(&h, 4096, len))
		die("posix_memalign");
	memset(h, 0, len);
	return h;
}

static void buf_put(const struct pp *p, char *dst, const void *src, size_t n)
{
	if (!p->plan.cuda)
		memcpy(dst, src, n);
	else if (cu.htod((uintptr_t)dst, src, n))
		die("cuMemcpyHtoD");
}

static void buf_get(const struct pp *p, void *dst, const char *src, size_t n)
{
	if (!p->plan.cuda)
		memcpy(dst, src, n);
	else if (cu.dtoh(dst, (uintptr_t)src, n))
		die("cuMemcpyDtoH");
}

/* ---- bootstrap ---- */

static void xfer(int fd, void *buf, size_t n, int out)
{
	char *c = buf;

	while (n) {
		ssize_t r = out ? write(fd, c, n) : read(fd, c, n);

		if (r <= 0)
			die(out ? "bootstrap write" : "bootstrap read");
		c += r;
		n -= (size_t)r;
	}
}

static int tcp_connect(const char *host, int port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	char ps[16];
	int fd = -1, one = 1;

	snprintf(ps, sizeof(ps), "%d", port);
	if (getaddrinfo(host, ps, &hints, &res))
		die("getaddrinfo");
	/* The server may start a moment later: retry for 30 s. */
	for (int i = 0; i < 300; i++) {
		fd = socket(res->ai_family, SOCK_STREAM, 0);
		if (fd >= 0 && !connect(fd, res->ai_addr, res->ai_addrlen))
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
		usleep(100 * 1000);
	}
	freeaddrinfo(res);
	if (fd < 0)
		die("connect");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int tcp_accept(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port) };
	int l = socket(AF_INET, SOCK_STREAM, 0), fd, one = 1;

	if (l < 0)
		die("socket");
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1))
		die("bind/listen");
	fd = accept(l, NULL, NULL);
	if (fd < 0)
		die("accept");
	close(l);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* Bootstrap messages to and from the peer: TCP, or MPI (rank 0 is the
 * server, rank 1 the client). */
static void boot_send(struct pp *p, void *buf, size_t n)
{
#ifdef GDRC_PINGPONG_MPI
	if (p->mpi) {
		MPI_Send(buf, (int)n, MPI_BYTE, p->server ? 1 : 0, 0,
			 MPI_COMM_WORLD);
		return;
	}
#endif
	xfer(p->sock, buf, n, 1);
}

static void boot_recv(struct pp *p, void *buf, size_t n)
{
#ifdef GDRC_PINGPONG_MPI
	if (p->mpi) {
		MPI_Recv(buf, (int)n, MPI_BYTE, p->server ? 1 : 0, 0,
			 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		return;
	}
#endif
	xfer(p->sock, buf, n, 0);
}

/* Both sides reach it before either goes on. */
static void barrier(struct pp *p)
{
	char c = 0;

#ifdef GDRC_PINGPONG_MPI
	if (p->mpi) {
		MPI_Barrier(MPI_COMM_WORLD);
		return;
	}
#endif
	boot_send(p, &c, 1);
	boot_recv(p, &c, 1);
}

/* ---- verbs ---- */

static void qp_up(struct pp *p, const struct pp_dest *me,
		  const struct pp_dest *peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = ACCESS };

	if (ibv_modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify QP to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
	a.ah_attr.grh.sgid_index = (uint8_t)p->gidx;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_AV |
					    IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					    IBV_QP_RQ_PSN |
					    IBV_QP_MAX_DEST_RD_ATOMIC |
					    IBV_QP_MIN_RNR_TIMER))
		die("modify QP to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = me->psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
					    IBV_QP_RETRY_CNT |
					    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					    IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify QP to RTS");
}

static void setup(struct pp *p, const char *dev, const char *host, int port)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr ia = { 0 };
	struct pp_dest me = { 0 }, peer;
	union ibv_gid gid;
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_PD };

	for (int i = 0; list && list[i]; i++) {
		if (dev && strcmp(ibv_get_device_name(list[i]), dev))
			continue;
		p->ctx = ibv_open_device(list[i]);
		break;
	}
	if (list)
		ibv_free_device_list(list);
	if (!p->ctx) {
		fprintf(stderr, "no RDMA device %s\n", dev ? dev : "at all");
		exit(1);
	}
	p->pd = ibv_alloc_pd(p->ctx);
	p->cq = ibv_create_cq(p->ctx, 4, NULL, NULL, 0);
	if (!p->pd || !p->cq)
		die("ibv_alloc_pd/ibv_create_cq");
	ia.send_cq = ia.recv_cq = p->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 2;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	p->qp = ibv_create_qp(p->pd, &ia);
	if (!p->qp || ibv_query_gid(p->ctx, 1, p->gidx, &gid))
		die("ibv_create_qp/ibv_query_gid");

	if (!p->mpi)
		p->sock = p->server ? tcp_accept(port) :
				      tcp_connect(host, port);
	if (p->server)
		boot_recv(p, &p->plan, sizeof(p->plan));
	else
		boot_send(p, &p->plan, sizeof(p->plan));
	me.qpn = p->qp->qp_num;
	me.psn = (uint32_t)(getpid() * 2654435761u) & 0xffffff;
	memcpy(me.gid, gid.raw, 16);
	if (p->server) { /* MPI sends block: one side receives first */
		boot_recv(p, &peer, sizeof(peer));
		boot_send(p, &me, sizeof(me));
	} else {
		boot_send(p, &me, sizeof(me));
		boot_recv(p, &peer, sizeof(peer));
	}
	qp_up(p, &me, &peer);

	if (p->plan.cuda)
		cuda_open();
	p->sbuf = buf_alloc(p, p->plan.max_size);
	p->rbuf = buf_alloc(p, 2 * p->plan.max_size); /* two on the server */
	cfg.pd = p->pd;
	if (gdrc_init(&cfg, &p->gdrc) != GDRC_OK) {
		fprintf(stderr, "gdrc_init failed\n");
		exit(1);
	}
	barrier(p);
}

/* A registration of buf[0, len) in mode: its lkey, and what to drop. */
struct reg {
	struct ibv_mr *mr;      /* pin-each */
	struct gdrc_mr *gmr;    /* cache */
	uint32_t lkey;
};

static void reg_get(struct pp *p, int mode, char *buf, size_t len,
		    struct reg *r)
{
	memset(r, 0, sizeof(*r));
	if (mode == MODE_PREREG) {
		r->lkey = (buf == p->sbuf ? p->pre_s : p->pre_r)->lkey;
		return;
	} else if (mode == MODE_CACHE) {
		gdrc_status_t s = gdrc_mr_get(p->gdrc, buf, len,
					      GDRC_ACCESS_LOCAL_WRITE, 0,
					      &r->gmr);

		if (s != GDRC_OK) {
			fprintf(stderr, "gdrc_mr_get: %s\n",
				gdrc_status_str(s));
			exit(1);
		}
		r->lkey = gdrc_mr_lkey(r->gmr);
	} else {
		r->mr = ibv_reg_mr(p->pd, buf, len, ACCESS);
		if (!r->mr)
			die("ibv_reg_mr");
		r->lkey = r->mr->lkey;
	}
}

static void reg_put(struct pp *p, struct reg *r)
{
	if (r->gmr)
		gdrc_mr_put(p->gdrc, r->gmr);
	if (r->mr && ibv_dereg_mr(r->mr))
		die("ibv_dereg_mr");
}

static void post(struct pp *p, int send, char *buf, size_t len,
		 uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = (uint32_t)len,
			       .lkey = lkey };
	struct ibv_send_wr swr = { .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED },
			   *sbad;
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 },
			   *rbad;

	if (send ? ibv_post_send(p->qp, &swr, &sbad) :
		   ibv_post_recv(p->qp, &rwr, &rbad))
		die(send ? "ibv_post_send" : "ibv_post_recv");
}

/* Wait for one receive (recv 1) or send (recv 0) completion; the other
 * kind seen meanwhile is counted for later. */
static void wait_wc(struct pp *p, int recv)
{
	struct ibv_wc wc;

	while (!p->done[recv]) {
		int k = ibv_poll_cq(p->cq, 1, &wc);

		if (k < 0)
			die("ibv_poll_cq");
		if (!k)
			continue;
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "completion failed: %s\n",
				ibv_wc_status_str(wc.status));
			exit(1);
		}
		p->done[wc.opcode == IBV_WC_RECV]++;
	}
	p->done[recv]--;
}

/*
 * Client: one round trip of len bytes: receive posted first, then sbuf
 * sent, back into rbuf.  Every registration is made and dropped per
 * message, as the mode says.
 */
static void round_trip(struct pp *p, int mode, size_t len)
{
	struct reg rs, rr;

	reg_get(p, mode, p->rbuf, len, &rr);
	post(p, 0, p->rbuf, len, rr.lkey);
	reg_get(p, mode, p->sbuf, len, &rs);
	post(p, 1, p->sbuf, len, rs.lkey);
	wait_wc(p, 0);
	wait_wc(p, 1);
	reg_put(p, &rs);
	reg_put(p, &rr);
}

/*
 * Server: echo n messages of len.  Two receive buffers take turns, so
 * that the next receive is posted before this message goes back and the
 * client never meets a receiver not ready (an RNR wait costs a timer
 * tick).  The first receive is posted before the caller's barrier.
 */
static void serve_post_first(struct pp *p, int mode, size_t len,
			     struct reg *r)
{
	reg_get(p, mode, p->rbuf, len, &r[0]);
	post(p, 0, p->rbuf, len, r[0].lkey);
}

static void serve(struct pp *p, int mode, size_t len, unsigned n,
		  struct reg *r)
{
	char *b[2] = { p->rbuf, p->rbuf + p->plan.max_size };

	for (unsigned k = 0; k < n; k++) {
		int x = k & 1, y = x ^ 1;

		wait_wc(p, 1);
		if (k + 1 < n) {
			reg_get(p, mode, b[y], len, &r[y]);
			post(p, 0, b[y], len, r[y].lkey);
		}
		post(p, 1, b[x], len, r[x].lkey);
		wait_wc(p, 0);
		reg_put(p, &r[x]);
	}
}

/* The byte at i of a message of len for stamp k. */
static unsigned char pattern(size_t i, size_t len, unsigned k)
{
	if (i == 0 || i == len - 1)
		return (unsigned char)(k * 31 + 7);
	return (unsigned char)(i * 131 + len);
}

/* Client: stamp message k (first and last byte). */
static void stamp(struct pp *p, size_t len, unsigned k)
{
	unsigned char b = pattern(0, len, k);

	buf_put(p, p->sbuf, &b, 1);
	buf_put(p, p->sbuf + len - 1, &b, 1);
}

/* Client: did message k come back?  full: every byte. */
static int check(struct pp *p, size_t len, unsigned k, int full,
		 unsigned char *scratch)
{
	unsigned char e[2];

	buf_get(p, &e[0], p->rbuf, 1);
	buf_get(p, &e[1], p->rbuf + len - 1, 1);
	if (e[0] != pattern(0, len, k) || e[1] != pattern(len - 1, len, k)) {
		fprintf(stderr, "size %zu message %u: stamps %u/%u, want %u\n",
			len, k, e[0], e[1], pattern(0, len, k));
		return 1;
	}
	if (!full)
		return 0;
	buf_get(p, scratch, p->rbuf, len);
	for (size_t i = 0; i < len; i++)
		if (scratch[i] != pattern(i, len, k)) {
			fprintf(stderr, "size %zu: byte %zu is %u, want %u\n",
				len, i, scratch[i], pattern(i, len, k));
			return 1;
		}
	return 0;
}

/* One timed run of n round trips of len in mode m (client); the server
 * echoes.  @return usec per round trip (client), 0 (server). */
static double measure(struct pp *p, int m, size_t len,
		      unsigned char *scratch, int *bad)
{
	unsigned n = p->plan.iters, w = p->plan.warmup;
	struct reg r[2];
	double t0 = 0;

	if (p->server) {
		serve_post_first(p, m, len, r);
		barrier(p);
		serve(p, m, len, w + n, r);
		return 0;
	}
	for (size_t i = 0; i < len; i++)
		scratch[i] = pattern(i, len, 0);
	buf_put(p, p->sbuf, scratch, len);
	barrier(p);
	for (unsigned k = 0; k < w + n; k++) {
		if (k == w)
			t0 = now_us();
		stamp(p, len, k);
		round_trip(p, m, len);
		if (k < w + n - 1)
			*bad |= check(p, len, k, 0, scratch);
	}
	t0 = (now_us() - t0) / n;
	*bad |= check(p, len, w + n - 1, 1, scratch);
	return t0;
}

/*
 * The sweep: for each size, the modes one after another, ROUNDS times
 * over, keeping each mode's best round; so the modes of one size are
 * measured close together in time (a busy or emulated machine drifts).
 */
static int run(struct pp *p, FILE *csv)
{
	size_t max = p->plan.max_size;
	unsigned char *scratch = malloc(max);
	int bad = 0;

	if (!scratch)
		die("malloc");
	if (p->plan.modes & (1u << MODE_PREREG)) {
		p->pre_s = ibv_reg_mr(p->pd, p->sbuf, max, ACCESS);
		p->pre_r = ibv_reg_mr(p->pd, p->rbuf, 2 * max, ACCESS);
		if (!p->pre_s || !p->pre_r)
			die("ibv_reg_mr (prereg)");
	}
	if (!p->server)
		printf("%-9s %10s %12s %12s\n", "mode", "bytes", "usec/iter",
		       "MB/s");
	for (size_t len = p->plan.min_size; len <= max; len *= 2) {
		double best[MODES] = { 0 };

		for (unsigned rnd = 0; rnd < p->plan.rounds; rnd++)
			for (int m = 0; m < MODES; m++) {
				double us;

				if (!(p->plan.modes & (1u << m)))
					continue;
				us = measure(p, m, len, scratch, &bad);
				if (!rnd || us < best[m])
					best[m] = us;
			}
		for (int m = 0; m < MODES && !p->server; m++) {
			if (!(p->plan.modes & (1u << m)))
				continue;
			printf("%-9s %10zu %12.2f %12.2f\n", mode_names[m], len,
			       best[m], 2.0 * (double)len / best[m]);
			if (csv)
				fprintf(csv, "%s,%zu,%.3f,%.3f\n",
					mode_names[m], len, best[m],
					2.0 * (double)len / best[m]);
		}
	}
	free(scratch);
	return bad;
}

static int parse_modes(const char *s)
{
	int bits = 0;

	for (int m = 0; m < MODES; m++) {
		const char *f = strstr(s, mode_names[m]);
		size_t l = strlen(mode_names[m]);

		/* a whole word of the comma-separated list */
		if (f && (f == s || f[-1] == ',') && (f[l] == 0 || f[l] == ','))
			bits |= 1 << m;
	}
	return bits;
}

static size_t parse_size(const char *s, char **end)
{
	size_t v = strtoull(s, end, 0);

	if (**end == 'K' || **end == 'k')
		v <<= 10, (*end)++;
	else if (**end == 'M' || **end == 'm')
		v <<= 20, (*end)++;
	return v;
}

int main(int argc, char **argv)
{
	static const struct option longs[] = { { "mem", 1, NULL, 'M' },
						{ "mpi", 0, NULL, 'P' },
						{ 0, 0, 0, 0 } };
	struct pp p = { .gidx = 1,
			.plan = { .modes = 7, .iters = 50, .warmup = 5,
				  .rounds = 1,
				  .min_size = 4096, .max_size = 4 << 20 } };
	const char *dev = NULL, *csv_path = NULL;
	FILE *csv = NULL;
	int port = 18515, c, bad;
	char *e;

	while ((c = getopt_long(argc, argv, "d:g:p:n:w:s:m:o:r:", longs,
				NULL)) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'g': p.gidx = atoi(optarg); break;
		case 'p': port = atoi(optarg); break;
		case 'n': p.plan.iters = (uint32_t)atoi(optarg); break;
		case 'w': p.plan.warmup = (uint32_t)atoi(optarg); break;
		case 'r': p.plan.rounds = (uint32_t)atoi(optarg); break;
		case 'o': csv_path = optarg; break;
		case 'm': p.plan.modes = (uint32_t)parse_modes(optarg); break;
		case 'M': p.plan.cuda = !strcmp(optarg, "cuda"); break;
		case 'P': p.mpi = 1; break;
		case 's':
			p.plan.min_size = parse_size(optarg, &e);
			p.plan.max_size = *e == ':' ?
				parse_size(e + 1, &e) : p.plan.min_size;
			break;
		default:
			fprintf(stderr, "see the comment at the top of "
					"gdrc-pingpong.c\n");
			return 2;
		}
	}
	if (!p.plan.iters || !p.plan.rounds || !p.plan.modes ||
	    p.plan.min_size < 2 ||
	    p.plan.max_size < p.plan.min_size || optind < argc - 1) {
		fprintf(stderr, "bad options\n");
		return 2;
	}
	p.server = optind == argc;
	if (p.mpi) {
#ifdef GDRC_PINGPONG_MPI
		int rank = 0, size = 0;

		MPI_Init(&argc, &argv);
		MPI_Comm_rank(MPI_COMM_WORLD, &rank);
		MPI_Comm_size(MPI_COMM_WORLD, &size);
		if (size != 2 || optind != argc) {
			fprintf(stderr, "--mpi: two ranks, no server address\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		p.server = rank == 0;
#else
		fprintf(stderr, "--mpi: built without MPI\n");
		return 2;
#endif
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	setup(&p, dev, p.server ? NULL : argv[optind], port);
	if (!p.server && csv_path && !(csv = fopen(csv_path, "w")))
		die(csv_path);
	if (csv)
		fprintf(csv, "mode,bytes,usec,mbps\n");
	bad = run(&p, csv);
	barrier(&p);
	if (csv)
		fclose(csv);
	if (!p.server)
		printf("data: %s\n", bad ? "MISMATCH" : "every message checked");
	gdrc_fini(p.gdrc);
	if (p.pre_s)
		ibv_dereg_mr(p.pre_s);
	if (p.pre_r)
		ibv_dereg_mr(p.pre_r);
	ibv_destroy_qp(p.qp);
	ibv_destroy_cq(p.cq);
	ibv_dealloc_pd(p.pd);
	ibv_close_device(p.ctx);
#ifdef GDRC_PINGPONG_MPI
	if (p.mpi)
		MPI_Finalize();
#endif
	return bad;
}
