/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gdrc-info.c - what libgdrcache can do on this machine, and why not:
 * like ucx_info or gdscheck.  Prints the library's version; its memory
 * hooks (glibc, CUDA) and kernel module; each event source, serving or
 * with the reason it is not; each registration backend, used
 * or with the reason it is not, and the per-GPU limits, for a context
 * with the first RDMA
 * device's protection domain (and without one when there is no device);
 * the CUDA driver and every GPU with its GPUDirect attributes and, where
 * NVML is installed, its BAR1 size; the RDMA devices and their ports;
 * with liburing (GDRC_INFO_URING), whether a context can register host
 * memory as fixed buffers of an io_uring here; every GDRC_* knob with its
 * value and help.
 *
 * Build (installed package):
 *   cc gdrc-info.c $(pkg-config --cflags --libs gdrcache) -libverbs -ldl
 *   (add -DGDRC_INFO_URING -luring for the io_uring part)
 * Run:   gdrc-info          (nothing needed: it reports what is missing)
 * Exit 0, or 1 when the library cannot create a context at all.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#ifdef GDRC_INFO_URING
#include <liburing.h>
#endif

#include <gdrcache.h>

static void line(const char *what, gdrc_status_t st, const char *why)
{
	printf("  %-28s %s%s%s\n", what, st == GDRC_OK ? "yes" : "no",
	       why ? ": " : "", why ? why : "");
}

/* A limit as the knobs write it. */
static const char *limit_str(uint64_t v, char *buf, size_t len)
{
	if (v == GDRC_LIMIT_NONE)
		return "none";
	snprintf(buf, len, "%llu", (unsigned long long)v);
	return buf;
}

/* The per-device limits (the same for every GPU) and what each device
 * of this context holds: nothing yet in a fresh one, but this is how a
 * program reads them (gdrc_device_stat_get). */
static void show_limits(struct gdrc_ctx *ctx)
{
	uint64_t bytes = 0, regions = 0, pinned = 0, n = 0;
	char b1[24], b2[24];

	gdrc_device_stat_get(ctx, 0, GDRC_DEVICE_STAT_MAX_BYTES, &bytes);
	gdrc_device_stat_get(ctx, 0, GDRC_DEVICE_STAT_MAX_REGIONS, &regions);
	gdrc_device_stat_get(ctx, GDRC_DEVICE_ALL,
			     GDRC_DEVICE_STAT_PINNED_BYTES, &pinned);
	gdrc_device_stat_get(ctx, GDRC_DEVICE_ALL, GDRC_DEVICE_STAT_REGIONS,
			     &n);
	printf("  %-28s bytes %s, registrations %s (GDRC_GPU_MAX_BYTES, "
	       "GDRC_GPU_MAX_REGIONS)\n", "limits per GPU",
	       limit_str(bytes, b1, sizeof(b1)),
	       limit_str(regions, b2, sizeof(b2)));
	printf("  %-28s %llu registrations, %llu bytes pinned "
	       "(gdrc_release_unused gives unused ones back)\n", "now",
	       (unsigned long long)n, (unsigned long long)pinned);
}

static void show_ctx(struct gdrc_ctx *ctx)
{
	const char *why;
	gdrc_status_t st;

	st = gdrc_gpu_status(ctx, &why);
	line("GPU support", st, why);
	st = gdrc_hooks_status(ctx, &why);
	line("host free events", st, why);
	st = gdrc_cuda_hooks_status(ctx, &why);
	line("CUDA free hooks", st, why);
	st = gdrc_kmod_status(ctx, &why);
	line("kernel module /dev/gdrcache", st, why);
	/* Every event source, in the order each kind prefers them. */
	for (int s = GDRC_SOURCE_KMOD; s <= GDRC_SOURCE_BUFFER_ID; s++) {
		char what[40];

		snprintf(what, sizeof(what), "source %s",
			 gdrc_source_name((enum gdrc_source)s));
		st = gdrc_source_status(ctx, (enum gdrc_source)s, &why, NULL);
		line(what, st, why);
	}
	/* Which kinds of host memory are cached under those sources. */
	st = gdrc_host_mem_status(ctx, GDRC_HOST_MEM_PRIVATE, &why);
	line("caches private host memory", st, why);
	st = gdrc_host_mem_status(ctx, GDRC_HOST_MEM_SHARED, &why);
	line("caches shared host memory", st, why);
	for (int b = GDRC_BACKEND_NONE; b <= GDRC_BACKEND_CUFILE; b++) {
		char what[40];

		snprintf(what, sizeof(what), "backend %s",
			 gdrc_backend_name((enum gdrc_backend)b));
		st = gdrc_backend_status(ctx, (enum gdrc_backend)b, &why);
		line(what, st, why);
	}
	show_limits(ctx);
}

/* ---- the CUDA driver and NVML, loaded at run time ---- */

static void show_gpus(void)
{
	void *cu = dlopen("libcuda.so.1", RTLD_NOW);
	int (*init)(unsigned), (*ver)(int *), (*count)(int *);
	int (*attr)(int *, int, int), (*name)(char *, int, int);
	int (*nvml_init)(void) = NULL, (*nvml_handle)(unsigned, void **) = NULL;
	int (*nvml_bar1)(void *, unsigned long long *) = NULL;
	int v = 0, n = 0;
	char cu_err[256];
	void *nvml;

	/* dlerror's text lasts until the next dl call: keep it. */
	snprintf(cu_err, sizeof(cu_err), "%s", cu ? "" : dlerror());
	nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	printf("CUDA\n");
	if (!cu) {
		printf("  driver: not installed (%s)\n", cu_err);
		return;
	}
	init = (int (*)(unsigned))dlsym(cu, "cuInit");
	ver = (int (*)(int *))dlsym(cu, "cuDriverGetVersion");
	count = (int (*)(int *))dlsym(cu, "cuDeviceGetCount");
	attr = (int (*)(int *, int, int))dlsym(cu, "cuDeviceGetAttribute");
	name = (int (*)(char *, int, int))dlsym(cu, "cuDeviceGetName");
	if (!init || !ver || !count || !attr || !name) {
		printf("  driver: libcuda.so.1 lacks basic entry points\n");
		return;
	}
	ver(&v);
	printf("  driver: CUDA %d.%d (%d)\n", v / 1000, v % 1000 / 10, v);
	if (init(0) || count(&n)) {
		printf("  cuInit failed: no usable device\n");
		return;
	}
	if (nvml) {
		nvml_init = (int (*)(void))dlsym(nvml, "nvmlInit_v2");
		nvml_handle = (int (*)(unsigned, void **))dlsym(
			nvml, "nvmlDeviceGetHandleByIndex_v2");
		nvml_bar1 = (int (*)(void *, unsigned long long *))dlsym(
			nvml, "nvmlDeviceGetBAR1MemoryInfo");
		if (!nvml_init || !nvml_handle || !nvml_bar1 || nvml_init())
			nvml_bar1 = NULL;
	}
	for (int d = 0; d < n; d++) {
		/* CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED 116,
		 * DMA_BUF_SUPPORTED 124, PCI bus 33, device 34. */
		int rdma = -1, dmabuf = -1, bus = -1, dev = -1;
		char nm[128] = "?";
		unsigned long long bar1[3] = { 0 }; /* total, free, used */
		void *h;

		name(nm, sizeof(nm), d);
		attr(&rdma, 116, d);
		attr(&dmabuf, 124, d);
		attr(&bus, 33, d);
		attr(&dev, 34, d);
		printf("  device %d: %s (PCI %02x:%02x)\n", d, nm, bus, dev);
		printf("    GPU_DIRECT_RDMA_SUPPORTED %d, DMA_BUF_SUPPORTED %d\n",
		       rdma, dmabuf);
		if (nvml_bar1 && !nvml_handle((unsigned)d, &h) &&
		    !nvml_bar1(h, bar1))
			printf("    BAR1 %llu MiB (%llu MiB used)\n",
			       bar1[0] >> 20, bar1[2] >> 20);
		else
			printf("    BAR1: unknown (%s)\n",
			       nvml ? "NVML call failed" :
				      "libnvidia-ml.so.1 not installed");
	}
}

/* ---- RDMA devices ---- */

static struct ibv_context *show_rdma(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *first = NULL;

	printf("RDMA devices\n");
	if (!list || !list[0])
		printf("  none\n");
	for (int i = 0; list && list[i]; i++) {
		struct ibv_context *c = ibv_open_device(list[i]);
		struct ibv_device_attr da;

		if (!c || ibv_query_device(c, &da)) {
			printf("  %s: cannot open\n",
			       ibv_get_device_name(list[i]));
			if (c)
				ibv_close_device(c);
			continue;
		}
		printf("  %s: fw %s, %u port(s), max MR size %llu\n",
		       ibv_get_device_name(list[i]), da.fw_ver,
		       (unsigned)da.phys_port_cnt,
		       (unsigned long long)da.max_mr_size);
		for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
			struct ibv_port_attr pa;

			if (ibv_query_port(c, p, &pa))
				continue;
			printf("    port %u: %s, %s\n", p,
			       ibv_port_state_str(pa.state),
			       pa.link_layer == IBV_LINK_LAYER_ETHERNET ?
				       "Ethernet (RoCE)" : "InfiniBand");
		}
		if (!first)
			first = c;
		else
			ibv_close_device(c);
	}
	if (list)
		ibv_free_device_list(list);
	return first;
}

#ifdef GDRC_INFO_URING
/* A context on a ring of our own: the io_uring backend and its table. */
static void show_uring(void)
{
	struct io_uring ring;
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_IO_URING,
				   .ring = &ring };
	struct gdrc_ctx *ctx;
	uint64_t slots = 0;
	gdrc_status_t st;
	int ret;
	char why[160];

	printf("A context with an io_uring ring (storage)\n");
	ret = io_uring_queue_init(4, &ring, 0);
	if (ret) {
		snprintf(why, sizeof(why), "io_uring_queue_init: %s",
			 strerror(-ret));
		line("backend io_uring", GDRC_ERR_UNSUPPORTED, why);
		return;
	}
	st = gdrc_init(&cfg, &ctx);
	if (st != GDRC_OK) {
		snprintf(why, sizeof(why), "gdrc_init: %s (logged above)",
			 gdrc_status_str(st));
		line("backend io_uring", st, why);
	} else {
		gdrc_device_stat_get(ctx, GDRC_DEVICE_HOST,
				     GDRC_DEVICE_STAT_MAX_REGIONS, &slots);
		snprintf(why, sizeof(why), "a table of %llu slots "
			 "(GDRC_IO_URING_SLOTS)", (unsigned long long)slots);
		line("backend io_uring", GDRC_OK, why);
		gdrc_fini(ctx);
	}
	io_uring_queue_exit(&ring);
}
#endif

/* A context that registers with cuFile (GPUDirect Storage): libcufile
 * loaded, its driver opened (0.2-0.5 s on a GPU machine), the pinned
 * memory cuFile allows a GPU. */
static void show_cufile(void)
{
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_CUFILE,
				   .cufile = GDRC_CUFILE_ALL };
	struct gdrc_ctx *ctx;
	uint64_t max = 0;
	gdrc_status_t st;
	char why[160];

	printf("A context that registers with cuFile (storage)\n");
	st = gdrc_init(&cfg, &ctx);
	if (st != GDRC_OK) {
		snprintf(why, sizeof(why), "gdrc_init: %s (logged above)",
			 gdrc_status_str(st));
		line("backend cufile", st, why);
		return;
	}
	if (gdrc_device_stat_get(ctx, 0, GDRC_DEVICE_STAT_MAX_BYTES, &max) ==
	    GDRC_OK && max != GDRC_LIMIT_NONE)
		snprintf(why, sizeof(why), "GPU 0 may keep %llu MiB registered "
			 "(cuFile's max_device_pinned_mem_size, or "
			 "GDRC_GPU_MAX_BYTES if lower)",
			 (unsigned long long)(max >> 20));
	else
		snprintf(why, sizeof(why), "host memory%s",
			 gdrc_gpu_status(ctx, NULL) == GDRC_OK ?
				 " and GPU memory, no per-GPU limit" :
				 " only: no GPU support");
	line("backend cufile", GDRC_OK, why);
	gdrc_fini(ctx);
}

static void show_knobs(void)
{
	const char *name, *def, *help;

	printf("Knobs (docs/env.md)\n");
	for (unsigned i = 0; gdrc_knob_describe(i, &name, &def, &help) ==
			     GDRC_OK;
	     i++) {
		const char *v = getenv(name);

		printf("  %s=%s%s\n      %s\n", name, v ? v : def,
		       v ? "" : " (default)", help);
	}
}

int main(void)
{
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_PD };
	struct ibv_context *dev;
	struct gdrc_ctx *ctx;
	gdrc_status_t st;

	printf("libgdrcache %s\n", gdrc_version_string());
	dev = show_rdma();
	show_gpus();
	if (dev)
		cfg.pd = ibv_alloc_pd(dev);
	printf("A context %s\n", cfg.pd ? "with the first device's PD" :
					  "without a PD (no RDMA device)");
	st = gdrc_init(cfg.pd ? &cfg : NULL, &ctx);
	if (st != GDRC_OK) {
		printf("  gdrc_init failed: %s\n", gdrc_status_str(st));
		return 1;
	}
	show_ctx(ctx);
	gdrc_fini(ctx);
	if (cfg.pd)
		ibv_dealloc_pd(cfg.pd);
	if (dev)
		ibv_close_device(dev);
#ifdef GDRC_INFO_URING
	show_uring();
#endif
	show_cufile();
	show_knobs();
	return 0;
}
