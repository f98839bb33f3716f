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
 * For each size of a sweep, each mode in turn (ROUNDS times over), the
 * client sends a message, the server receives it and sends it back,
 * ITERS times; the client prints, per mode and size, the median over the
 * rounds (with the fastest and slowest round) of each round's median
 * message: the time per round trip, and the time spent registering per
 * round trip: inside gdrc_mr_get + gdrc_mr_put (cache) or ibv_reg_mr +
 * ibv_dereg_mr (pin-each) for the send and the receive buffer, nothing
 * for prereg.  Then the same registering again, back to back with no
 * transfer in between ("reg b2b", the median of 15): where the CPU moves
 * the bytes (soft-RoCE, above all in an emulated guest), each transfer
 * leaves the caches cold for the registration after it.
 * Data is checked end to end: every message stamps its first and last
 * bytes, and after each size the whole buffer that came back is compared
 * with what was sent.
 *
 * The workload (--workload N) follows the sweep: N messages, in cache and
 * pin-each mode, sent from BUFS buffers of the sweep's sizes (MIN to MAX,
 * doubling, mixed) with the cache limited to BUFS/2 registrations:
 * three messages of four come from a hot quarter of the buffers, the
 * fourth from the cold rest in turn, and every eighth message first frees
 * its buffer and allocates it again (munmap + mmap for host memory, which
 * tends to give the same address back: a cache that missed the unmap
 * would send the old pages).  Every byte of every message is written
 * anew and checked when it comes back.  The client prints the cache's
 * hits, evictions and invalidations over the run.
 *
 * Buffers are host memory or, with --mem cuda, GPU memory (cuMemAlloc on
 * device 0; the CUDA driver is loaded at run time, nothing is needed at
 * build time; the NIC must reach GPU memory: nvidia-peermem or dma-buf).
 *
 * --local --mem cuda needs no RDMA device and no peer: one process, the
 * "message" a device-to-device copy there and back, so that what the
 * registration of GPU memory costs per message shows without a NIC:
 * pin-each does what a library without a cache does to hand GPU memory to
 * a NIC (classify with cuPointerGetAttributes, set SYNC_MEMOPS, export a
 * dma-buf with cuMemGetHandleForAddressRange, close it; the ibv_reg_dmabuf_mr
 * that would follow needs a NIC), cache does gdrc_mr_get + gdrc_mr_put
 * (a hit, checked against the buffer's BUFFER_ID).
 *
 * Build (installed package):
 *   cc gdrc-pingpong.c $(pkg-config --cflags --libs gdrcache) -libverbs -ldl
 * Run:
 *   server:  gdrc-pingpong -d rxe0
 *   client:  gdrc-pingpong -d rxe0 SERVER_IP
 *   or, built with MPI (-DGDRC_PINGPONG_MPI, mpicc), rank 0 the server:
 *            mpirun -np 2 gdrc-pingpong --mpi -d rxe0
 *   or, GPU memory without a NIC:  gdrc-pingpong --local --mem cuda
 * Options (the client's are sent to the server):
 *   -d DEV     RDMA device (default: the first)     -g N   GID index (1)
 *   -p PORT    TCP port of the bootstrap (18515)    -n N   iterations (50)
 *   -s MIN:MAX sizes, doubling (4K:4M)              -w N   warm-up (5)
 *   -m MODES   prereg,cache,pin-each (all three)    --mem host|cuda
 *   -r N       rounds: per size the modes take turns N times; medians (1)
 *   -o FILE    also write the table as CSV (mode,bytes,usec,mbps,reg_usec,
 *              usec_min,usec_max,reg_b2b_usec)
 *   --workload N  then N messages of the workload above (0: none)
 *   --bufs N      the workload's buffers (16; at least 4)
 *   --mpi      bootstrap through MPI instead of TCP (MPI builds only)
 *   --local    one process, no NIC (with --mem cuda only)
 *   --wc-timeout S  give up when a completion waited for does not come
 *              within S seconds (60; 0: wait for ever): a lost message
 *              on a link that will not retransmit it would otherwise
 *              hang both sides
 *   -h, --help this text
 * Exit 0 when every check passed; 3 when a completion did not come (the
 * line says which mode, size and message).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

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
	uint32_t rounds;     /* turns per size and mode; medians */
	uint32_t cuda;
	uint32_t wl_msgs;    /* --workload: messages (0: none) */
	uint32_t wl_bufs;    /* --bufs */
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
	int local;                     /* --local: no NIC, no peer */
	int timing;                    /* reg_get/reg_put add to reg_ticks */
	uint64_t reg_ticks;            /* registering, this message */
	double wc_timeout_s;           /* --wc-timeout; 0: none */
	struct {                       /* what the next wait is for, */
		int mode;              /* for the line a timeout prints */
		size_t len;
		unsigned msg;
	} at;
};

/* One round of one mode at one size, as the client saw it. */
struct sample {
	double rt_us;  /* per round trip */
	double reg_us; /* registering, per round trip */
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

/*
 * The registration timer: the time-stamp counter where there is one (a
 * read costs 11 ns in a TCG guest, clock_gettime 48, and a cache hit
 * costs about 80), converted to microseconds at the rate measured against
 * now_us() over each timed run.
 */
static inline uint64_t ticks(void)
{
#if defined(__x86_64__)
	return __rdtsc();
#else
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

/* The timer's clock over a timed run. */
struct clock_pair {
	double us;
	uint64_t ticks;
};

static struct clock_pair clock_now(void)
{
	struct clock_pair c = { now_us(), ticks() };

	return c;
}

/* Ticks per microsecond since c0. */
static double tick_rate(struct clock_pair c0)
{
	struct clock_pair c1 = clock_now();
	double us = c1.us - c0.us;

	return us > 0 ? (double)(c1.ticks - c0.ticks) / us : 1.0;
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
	int (*free)(unsigned long long);
	/* --local: what a library without a cache does per message, and the
	 * copy that stands for the transfer */
	int (*get_attrs)(unsigned, int *, void **, unsigned long long);
	int (*set_attr)(const void *, int, unsigned long long);
	int (*export)(void *, unsigned long long, size_t, int,
		      unsigned long long);
	int (*dtod)(unsigned long long, unsigned long long, size_t);
	int (*sync)(void);
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
	cu.free = (int (*)(unsigned long long))dlsym(h, "cuMemFree_v2");
	cu.get_attrs = (int (*)(unsigned, int *, void **, unsigned long long))
		dlsym(h, "cuPointerGetAttributes");
	cu.set_attr = (int (*)(const void *, int, unsigned long long))dlsym(
		h, "cuPointerSetAttribute");
	cu.export = (int (*)(void *, unsigned long long, size_t, int,
			     unsigned long long))
		dlsym(h, "cuMemGetHandleForAddressRange");
	cu.dtod = (int (*)(unsigned long long, unsigned long long, size_t))
		dlsym(h, "cuMemcpyDtoD_v2");
	cu.sync = (int (*)(void))dlsym(h, "cuCtxSynchronize");
	if (!cu.init || !cu.retain || !cu.set_current || !cu.alloc ||
	    !cu.memset8 || !cu.htod || !cu.dtoh || !cu.free ||
	    !cu.get_attrs || !cu.set_attr || !cu.export || !cu.dtod ||
	    !cu.sync || cu.init(0) ||
	    cu.retain(&pctx, 0) || cu.set_current(pctx)) {
		fprintf(stderr, "--mem cuda: no usable CUDA device 0\n");
		exit(1);
	}
}

static char *cuda_alloc(size_t len)
{
	unsigned long long d;

	if (cu.alloc(&d, len))
		die("cuMemAlloc");
	return (char *)(uintptr_t)d;
}

static char *buf_alloc(const struct pp *p, size_t len)
{
	void *h;

	if (p->plan.cuda)
		return cuda_alloc(len);
	if (posix_memalign(&h, 4096, len))
		die("posix_memalign");
	memset(h, 0, len);
	return h;
}

/* The workload's buffers: freed for real (munmap, cuMemFree), so that a
 * new one may take the old address. */
static char *wl_alloc(const struct pp *p, size_t len)
{
	void *h;

	if (p->plan.cuda)
		return cuda_alloc(len);
	h = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h == MAP_FAILED)
		die("mmap");
	return h;
}

static void wl_free(const struct pp *p, char *buf, size_t len)
{
	if (p->plan.cuda ? cu.free((uintptr_t)buf) != 0 :
			   munmap(buf, len) != 0)
		die("free");
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

	if (p->local)
		return;
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

/* The message buffers and the cache, once the plan is known.  The
 * workload gets half as many registrations as it has buffers, so that it
 * cannot keep them all. */
static void buffers_up(struct pp *p, struct gdrc_config *cfg)
{
	if (p->plan.cuda)
		cuda_open();
	p->sbuf = buf_alloc(p, p->plan.max_size);
	p->rbuf = buf_alloc(p, 2 * p->plan.max_size); /* two on the server */
	if (p->plan.wl_msgs) {
		cfg->field_mask |= GDRC_CONFIG_FIELD_MAX_REGIONS;
		cfg->max_regions = p->plan.wl_bufs / 2;
	}
	if (gdrc_init(cfg, &p->gdrc) != GDRC_OK) {
		fprintf(stderr, "gdrc_init failed\n");
		exit(1);
	}
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

	cfg.pd = p->pd;
	buffers_up(p, &cfg);
	barrier(p);
}

/* A registration of buf[0, len) in mode: its lkey, and what to drop. */
struct reg {
	struct ibv_mr *mr;      /* pin-each */
	struct gdrc_mr *gmr;    /* cache */
	int dmabuf_fd;          /* pin-each, --local: the exported dma-buf */
	uint32_t lkey;
};

enum { CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1 };

/*
 * --local pin-each: what a library without a cache does to hand GPU
 * memory to a NIC: classify the pointer (the attributes libgdrcache asks
 * for on a miss), set SYNC_MEMOPS, export the range as a dma-buf.  The
 * ibv_reg_dmabuf_mr that would take the fd needs a NIC.
 */
static int gpu_export(char *buf, size_t len)
{
	int attrs[] = { 2 /* MEMORY_TYPE */, 7 /* BUFFER_ID */,
			9 /* DEVICE_ORDINAL */, 11 /* RANGE_START_ADDR */,
			12 /* RANGE_SIZE */ };
	unsigned int type = 0;
	unsigned long long id = 0, start = 0, size = 0;
	int ordinal = -1, fd = -1, one = 1;
	void *vals[] = { &type, &id, &ordinal, &start, &size };

	if (cu.get_attrs(5, attrs, vals, (uintptr_t)buf) ||
	    type != 2 /* CU_MEMORYTYPE_DEVICE */ ||
	    cu.set_attr(&one, 6 /* SYNC_MEMOPS */, (uintptr_t)buf) ||
	    cu.export(&fd, (uintptr_t)buf, len,
		      CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)) {
		fprintf(stderr, "--local: classifying or exporting %p failed\n",
			(void *)buf);
		exit(1);
	}
	return fd;
}

static void reg_get(struct pp *p, int mode, char *buf, size_t len,
		    struct reg *r)
{
	uint64_t t;

	memset(r, 0, sizeof(*r));
	r->dmabuf_fd = -1;
	if (mode == MODE_PREREG) { /* nothing to do: not timed */
		if (!p->local)
			r->lkey = (buf == p->sbuf ? p->pre_s : p->pre_r)->lkey;
		return;
	}
	t = p->timing ? ticks() : 0;
	if (mode == MODE_CACHE) {
		gdrc_status_t s = gdrc_mr_get(p->gdrc, buf, len,
					      GDRC_ACCESS_LOCAL_WRITE, 0,
					      &r->gmr);

		if (s != GDRC_OK) {
			fprintf(stderr, "gdrc_mr_get: %s\n",
				gdrc_status_str(s));
			exit(1);
		}
		r->lkey = gdrc_mr_lkey(r->gmr);
	} else if (p->local) {
		r->dmabuf_fd = gpu_export(buf, len);
	} else {
		r->mr = ibv_reg_mr(p->pd, buf, len, ACCESS);
		if (!r->mr)
			die("ibv_reg_mr");
		r->lkey = r->mr->lkey;
	}
	if (p->timing)
		p->reg_ticks += ticks() - t;
}

static void reg_put(struct pp *p, struct reg *r)
{
	uint64_t t = p->timing ? ticks() : 0;

	if (r->gmr)
		gdrc_mr_put(p->gdrc, r->gmr);
	if (r->mr && ibv_dereg_mr(r->mr))
		die("ibv_dereg_mr");
	if (r->dmabuf_fd >= 0)
		close(r->dmabuf_fd);
	if (p->timing && (r->gmr || r->mr || r->dmabuf_fd >= 0))
		p->reg_ticks += ticks() - t;
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

/* No completion came in --wc-timeout seconds: say what was waited for
 * and stop (the peer's own wait ends the same way). */
static void wc_timed_out(const struct pp *p, int recv)
{
	fprintf(stderr,
		"gdrc-pingpong: %s: no %s completion in %.0f s (mode %s, "
		"%zu bytes, message %u); the peer or the link stopped\n",
		p->server ? "server" : "client", recv ? "receive" : "send",
		p->wc_timeout_s, mode_names[p->at.mode], p->at.len, p->at.msg);
	exit(3);
}

/* Wait for one receive (recv 1) or send (recv 0) completion; the other
 * kind seen meanwhile is counted for later. */
static void wait_wc(struct pp *p, int recv)
{
	double deadline = 0;
	unsigned idle = 0;
	struct ibv_wc wc;

	while (!p->done[recv]) {
		int k = ibv_poll_cq(p->cq, 1, &wc);

		if (k < 0)
			die("ibv_poll_cq");
		if (!k) {
			/* The clock is read once per 4096 empty polls. */
			if (p->wc_timeout_s <= 0 || ++idle % 4096)
				continue;
			if (!deadline)
				deadline = now_us() + p->wc_timeout_s * 1e6;
			else if (now_us() > deadline)
				wc_timed_out(p, recv);
			continue;
		}
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
 * Client: one round trip of len bytes of sbuf: receive posted first, then
 * sbuf sent, back into rbuf (--local: copied into rbuf).  Every
 * registration is made and dropped per message, as the mode says.
 */
static void round_trip(struct pp *p, int mode, char *sbuf, size_t len)
{
	struct reg rs, rr;

	p->at.mode = mode;
	p->at.len = len;
	p->at.msg++;
	reg_get(p, mode, p->rbuf, len, &rr);
	if (!p->local)
		post(p, 0, p->rbuf, len, rr.lkey);
	reg_get(p, mode, sbuf, len, &rs);
	if (p->local) {
		if (cu.dtod((uintptr_t)p->rbuf, (uintptr_t)sbuf, len) ||
		    cu.sync())
			die("cuMemcpyDtoD");
	} else {
		post(p, 1, sbuf, len, rs.lkey);
		wait_wc(p, 0);
		wait_wc(p, 1);
	}
	reg_put(p, &rs);
	reg_put(p, &rr);
}

/*
 * Server: echo n messages, the k-th of lens[k] bytes.  Two receive
 * buffers take turns, so that the next receive is posted before this
 * message goes back and the client never meets a receiver not ready (an
 * RNR wait costs a timer tick).  The first receive is posted before the
 * caller's barrier.
 */
static void serve_post_first(struct pp *p, int mode, size_t len,
			     struct reg *r)
{
	reg_get(p, mode, p->rbuf, len, &r[0]);
	post(p, 0, p->rbuf, len, r[0].lkey);
}

static void serve(struct pp *p, int mode, const size_t *lens, unsigned n,
		  struct reg *r)
{
	char *b[2] = { p->rbuf, p->rbuf + p->plan.max_size };

	for (unsigned k = 0; k < n; k++) {
		int x = k & 1, y = x ^ 1;

		p->at.mode = mode;
		p->at.len = lens[k];
		p->at.msg++;
		wait_wc(p, 1);
		if (k + 1 < n) {
			reg_get(p, mode, b[y], lens[k + 1], &r[y]);
			post(p, 0, b[y], lens[k + 1], r[y].lkey);
		}
		post(p, 1, b[x], lens[k], r[x].lkey);
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

static size_t *lens_alloc(unsigned n)
{
	size_t *lens = calloc(n, sizeof(*lens));

	if (!lens)
		die("calloc");
	return lens;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0, n), which it sorts. */
static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One timed run of n round trips of len in mode m (client; the server
 * echoes and returns zeros): the medians of the messages' round trips
 * and registration times (an interrupt, a host thread that takes the
 * CPU, lands in one message, not in all). */
static struct sample measure(struct pp *p, int m, size_t len,
			     unsigned char *scratch, int *bad)
{
	unsigned n = p->plan.iters, w = p->plan.warmup;
	struct sample s = { 0, 0 };
	struct reg r[2];
	struct clock_pair t0 = { 0, 0 };
	uint64_t t = 0;
	double *reg, *rt;

	if (p->server) {
		size_t *lens = lens_alloc(w + n);

		for (unsigned k = 0; k < w + n; k++)
			lens[k] = len;
		serve_post_first(p, m, len, r);
		barrier(p);
		serve(p, m, lens, w + n, r);
		free(lens);
		return s;
	}
	reg = calloc(n, sizeof(*reg));
	rt = calloc(n, sizeof(*rt));
	if (!reg || !rt)
		die("calloc");
	for (size_t i = 0; i < len; i++)
		scratch[i] = pattern(i, len, 0);
	buf_put(p, p->sbuf, scratch, len);
	barrier(p);
	for (unsigned k = 0; k < w + n; k++) {
		if (k == w) {
			p->timing = 1;
			t0 = clock_now();
		}
		p->reg_ticks = 0;
		stamp(p, len, k);
		if (k >= w)
			t = ticks();
		round_trip(p, m, p->sbuf, len);
		if (k >= w) {
			rt[k - w] = (double)(ticks() - t);
			reg[k - w] = (double)p->reg_ticks;
		}
		if (k < w + n - 1)
			*bad |= check(p, len, k, 0, scratch);
	}
	p->timing = 0;
	s.rt_us = median(rt, n) / tick_rate(t0);
	s.reg_us = median(reg, n) / tick_rate(t0);
	free(rt);
	free(reg);
	*bad |= check(p, len, w + n - 1, 1, scratch);
	return s;
}

/*
 * Registering alone, as a message does it (the receive buffer, the send
 * buffer, both let go), REPS times back to back, no transfer in between:
 * the median, in microseconds.  In a VM lab guest every byte a message
 * moves is copied and checksummed by the emulated CPU, which leaves the
 * host's caches cold for the registration that follows it; here they
 * stay warm, as they do where a NIC moves the bytes.  Client only.
 */
static double reg_b2b(struct pp *p, int m, size_t len)
{
	enum { REPS = 15 };
	double v[REPS];
	struct reg rs, rr;
	struct clock_pair t0;

	if (m == MODE_PREREG)
		return 0;
	t0 = clock_now();
	for (int k = 0; k < REPS; k++) {
		uint64_t t = ticks();

		reg_get(p, m, p->rbuf, len, &rr);
		reg_get(p, m, p->sbuf, len, &rs);
		reg_put(p, &rs);
		reg_put(p, &rr);
		v[k] = (double)(ticks() - t);
	}
	return median(v, REPS) / tick_rate(t0);
}

/*
 * The sweep: for each size, the modes one after another, ROUNDS times
 * over, so that the modes of one size are measured close together in
 * time (a busy or emulated machine drifts); each mode's median round is
 * printed, with the fastest and the slowest, then what registering
 * costs back to back (reg_b2b).
 */
static int run(struct pp *p, FILE *csv)
{
	size_t max = p->plan.max_size;
	unsigned rounds = p->plan.rounds;
	unsigned char *scratch = malloc(max);
	double *rt = calloc((size_t)MODES * rounds, sizeof(*rt));
	double *reg = calloc((size_t)MODES * rounds, sizeof(*reg));
	int bad = 0;

	if (!scratch || !rt || !reg)
		die("malloc");
	if ((p->plan.modes & (1u << MODE_PREREG)) && !p->local) {
		p->pre_s = ibv_reg_mr(p->pd, p->sbuf, max, ACCESS);
		p->pre_r = ibv_reg_mr(p->pd, p->rbuf, 2 * max, ACCESS);
		if (!p->pre_s || !p->pre_r)
			die("ibv_reg_mr (prereg)");
	}
	if (!p->server)
		printf("%-9s %10s %11s %11s %11s %11s %11s %9s\n", "mode",
		       "bytes", "usec/rt", "fastest", "slowest", "reg usec",
		       "reg b2b", "MB/s");
	for (size_t len = p->plan.min_size; len <= max; len *= 2) {
		for (unsigned rnd = 0; rnd < rounds; rnd++)
			for (int m = 0; m < MODES; m++) {
				struct sample s;

				if (!(p->plan.modes & (1u << m)))
					continue;
				s = measure(p, m, len, scratch, &bad);
				rt[m * rounds + rnd] = s.rt_us;
				reg[m * rounds + rnd] = s.reg_us;
			}
		for (int m = 0; m < MODES && !p->server; m++) {
			double *v = rt + m * rounds, us, r, b;

			if (!(p->plan.modes & (1u << m)))
				continue;
			us = median(v, rounds);
			r = median(reg + m * rounds, rounds);
			b = reg_b2b(p, m, len);
			printf("%-9s %10zu %11.2f %11.2f %11.2f %11.3f %11.3f "
			       "%9.2f\n", mode_names[m], len, us, v[0],
			       v[rounds - 1], r, b, 2.0 * (double)len / us);
			if (csv)
				fprintf(csv, "%s,%zu,%.3f,%.3f,%.4f,%.3f,%.3f,"
					"%.4f\n", mode_names[m], len, us,
					2.0 * (double)len / us, r, v[0],
					v[rounds - 1], b);
		}
	}
	free(reg);
	free(rt);
	free(scratch);
	return bad;
}

/* ---- the workload ---- */

/* Buffer of message k: three of four from the hot quarter of the
 * buffers in turn, the fourth from the cold rest in turn. */
static unsigned wl_pick(unsigned k, unsigned bufs)
{
	unsigned hot = bufs / 4;

	if (k % 4 != 3)
		return (k - k / 4) % hot;
	return hot + (k / 4) % (bufs - hot);
}

/* One message in eight frees its buffer first, a hot and a cold one in
 * turn (k % 16 == 5 is hot, 15 is cold: see wl_pick). */
static int wl_realloc(unsigned k)
{
	return k % 16 == 5 || k % 16 == 15;
}

/* Size of buffer i: one of MIN, 2 MIN, ... MAX, counted up from MIN for
 * even i and down from MAX for odd i, so that the hot quarter holds small
 * and large buffers alike. */
static size_t wl_size(const struct pp *p, unsigned i)
{
	unsigned steps = 0, j;

	while ((p->plan.min_size << (steps + 1)) <= p->plan.max_size)
		steps++;
	j = i % (steps + 1);
	return p->plan.min_size << (i % 2 ? steps - j : j);
}

/* Every byte of message k, so that old pages cannot pass for new. */
static unsigned char wl_byte(size_t i, unsigned k)
{
	return (unsigned char)(i * 7 + k * 13 + (i >> 8));
}

static uint64_t stat_of(struct pp *p, enum gdrc_stat st)
{
	uint64_t v = 0;

	gdrc_stat_get(p->gdrc, st, &v);
	return v;
}

/* The workload in mode m; the client reports.  @return 1 on a data
 * error. */
static int workload(struct pp *p, int m, unsigned char *scratch)
{
	enum { HITS, MISSES, EVICT, INVAL, NSTAT };
	static const enum gdrc_stat ids[NSTAT] = {
		GDRC_STAT_HITS, GDRC_STAT_MISSES, GDRC_STAT_EVICTIONS,
		GDRC_STAT_INVALIDATIONS
	};
	unsigned n = p->plan.wl_msgs, nb = p->plan.wl_bufs;
	unsigned reallocs = 0, same = 0, errors = 0;
	size_t top = 0;
	uint64_t st[NSTAT];
	size_t *lens = lens_alloc(n);
	char **b;
	struct reg r[2];
	struct clock_pair t0;
	uint64_t reg_total = 0;
	double us;

	for (unsigned k = 0; k < n; k++)
		lens[k] = wl_size(p, wl_pick(k, nb));
	if (p->server) {
		serve_post_first(p, m, lens[0], r);
		barrier(p);
		serve(p, m, lens, n, r);
		free(lens);
		return 0;
	}
	b = calloc(nb, sizeof(*b));
	if (!b)
		die("calloc");
	for (unsigned i = 0; i < nb; i++) {
		b[i] = wl_alloc(p, wl_size(p, i));
		if (wl_size(p, i) > top)
			top = wl_size(p, i);
	}
	for (int j = 0; j < NSTAT; j++)
		st[j] = stat_of(p, ids[j]);
	barrier(p);
	p->timing = 1;
	t0 = clock_now();
	for (unsigned k = 0; k < n; k++) {
		unsigned i = wl_pick(k, nb);
		size_t len = lens[k];

		if (wl_realloc(k)) {
			char *old = b[i];

			wl_free(p, old, len);
			b[i] = wl_alloc(p, len);
			reallocs++;
			same += b[i] == old;
		}
		for (size_t j = 0; j < len; j++)
			scratch[j] = wl_byte(j, k);
		buf_put(p, b[i], scratch, len);
		p->reg_ticks = 0;
		round_trip(p, m, b[i], len);
		reg_total += p->reg_ticks;
		buf_get(p, scratch, p->rbuf, len);
		for (size_t j = 0; j < len; j++)
			if (scratch[j] != wl_byte(j, k)) {
				if (!errors++)
					fprintf(stderr, "workload message %u: "
						"byte %zu is %u, want %u\n", k,
						j, scratch[j], wl_byte(j, k));
				break;
			}
	}
	us = (now_us() - t0.us) / n;
	p->timing = 0;
	for (int j = 0; j < NSTAT; j++)
		st[j] = stat_of(p, ids[j]) - st[j];
	printf("workload %-8s %u messages, %u buffers of %zu to %zu bytes, "
	       "%u reallocated (%u at the old address): %.1f usec/msg, "
	       "registering %.2f usec/msg", mode_names[m], n, nb,
	       p->plan.min_size, top, reallocs, same, us,
	       (double)reg_total / tick_rate(t0) / n);
	if (m == MODE_CACHE)
		printf("; cache limit %u: %" PRIu64 " gets, hits %" PRIu64
		       " (%.1f %%), evictions %" PRIu64 ", invalidations %"
		       PRIu64, nb / 2, st[HITS] + st[MISSES], st[HITS],
		       100.0 * (double)st[HITS] /
			       (double)(st[HITS] + st[MISSES] ?
						st[HITS] + st[MISSES] : 1),
		       st[EVICT], st[INVAL]);
	printf("; data errors %u\n", errors);
	for (unsigned i = 0; i < nb; i++)
		wl_free(p, b[i], wl_size(p, i));
	free(b);
	free(lens);
	return errors != 0;
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

/* --help: the comment at the top of this file, from the source when it
 * is there (an installed binary has no source beside it). */
static void usage(FILE *f)
{
	fprintf(f, "usage: gdrc-pingpong [-d DEV] [-s MIN:MAX] [-n N] [-r N] "
		   "[-w N] [-m MODES] [-o CSV]\n"
		   "                     [--mem host|cuda] [--workload N] "
		   "[--bufs N] [--wc-timeout S] [--mpi | --local]\n"
		   "                     [SERVER]\n"
		   "the options are described at the top of gdrc-pingpong.c\n");
}

/* --local: no NIC, no peer: GPU memory and the cache (no PD: it tracks
 * and checks, it registers with nothing). */
static void setup_local(struct pp *p)
{
	struct gdrc_config cfg = { 0 };

	buffers_up(p, &cfg);
}

int main(int argc, char **argv)
{
	static const struct option longs[] = { { "mem", 1, NULL, 'M' },
					       { "mpi", 0, NULL, 'P' },
					       { "local", 0, NULL, 'L' },
					       { "workload", 1, NULL, 'W' },
					       { "bufs", 1, NULL, 'B' },
					       { "wc-timeout", 1, NULL, 'T' },
					       { "help", 0, NULL, 'h' },
					       { 0, 0, 0, 0 } };
	struct pp p = { .gidx = 1, .wc_timeout_s = 60,
			.plan = { .modes = 7, .iters = 50, .warmup = 5,
				  .rounds = 1, .wl_bufs = 16,
				  .min_size = 4096, .max_size = 4 << 20 } };
	const char *dev = NULL, *csv_path = NULL;
	FILE *csv = NULL;
	int port = 18515, c, bad;
	char *e;

	while ((c = getopt_long(argc, argv, "d:g:p:n:w:s:m:o:r:h", longs,
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
		case 'L': p.local = 1; break;
		case 'W': p.plan.wl_msgs = (uint32_t)atoi(optarg); break;
		case 'B': p.plan.wl_bufs = (uint32_t)atoi(optarg); break;
		case 'T': p.wc_timeout_s = atof(optarg); break;
		case 's':
			p.plan.min_size = parse_size(optarg, &e);
			p.plan.max_size = *e == ':' ?
				parse_size(e + 1, &e) : p.plan.min_size;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!p.plan.iters || !p.plan.rounds || !p.plan.modes ||
	    p.plan.min_size < 2 || p.plan.wl_bufs < 4 ||
	    p.plan.max_size < p.plan.min_size || optind < argc - 1 ||
	    (p.local && (!p.plan.cuda || p.mpi || optind < argc))) {
		fprintf(stderr, "bad options (--local: with --mem cuda, no "
				"server, no --mpi)\n");
		return 2;
	}
	p.server = optind == argc && !p.local;
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
	if (p.local)
		setup_local(&p);
	else
		setup(&p, dev, p.server ? NULL : argv[optind], port);
	if (!p.server && csv_path && !(csv = fopen(csv_path, "w")))
		die(csv_path);
	if (csv)
		fprintf(csv, "mode,bytes,usec,mbps,reg_usec,usec_min,usec_max,"
			     "reg_b2b_usec\n");
	bad = run(&p, csv);
	if (p.plan.wl_msgs) {
		unsigned char *scratch = malloc(p.plan.max_size);

		if (!scratch)
			die("malloc");
		for (int m = MODE_CACHE; m < MODES; m++)
			if (p.plan.modes & (1u << m))
				bad |= workload(&p, m, scratch);
		free(scratch);
	}
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
	if (!p.local) {
		ibv_destroy_qp(p.qp);
		ibv_destroy_cq(p.cq);
		ibv_dealloc_pd(p.pd);
		ibv_close_device(p.ctx);
	}
#ifdef GDRC_PINGPONG_MPI
	if (p.mpi)
		MPI_Finalize();
#endif
	return bad;
}
