// SPDX-License-Identifier: BSD-3-Clause
/*
 * free_probe.c - which libcuda entry points does each kind of free reach?
 *
 * A research tool, not a test: it answers the question the CUDA free
 * hooks (lib/hooks/cuhooks.c) are built on.  It finds every address the
 * driver hands out for the free functions (dlsym, and cuGetProcAddress
 * with each stream flag and version), prints the first bytes of each
 * (for the patcher's instruction decoder), then puts a breakpoint (int3)
 * on each and counts which ones every runtime and driver free reaches.
 * Built as a program (runtime frees of its own) and as a shared object
 * (probe_arm/probe_report, for python's ctypes next to PyTorch).
 *
 * Run: free_probe [dump-file]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

typedef int (*probe_gpa_fn)(const char *sym, void **pfn, int ver,
			    unsigned long long flags, int *status);

#define PROBE_MAX 128

struct probe_bp {
	const char *name;
	const char *how;
	uint8_t *addr;
	uint8_t orig;
	unsigned long hits;
};

static struct probe_bp probe_bps[PROBE_MAX];
static int probe_n;
static __thread int probe_stepping = -1;

static const char *const probe_names[] = {
	"cuMemFree", "cuMemFree_v2", "cuMemFreeAsync", "cuMemFreeAsync_ptsz",
	"cuMemUnmap", "cuMemRelease", "cuMemFreeHost", "cuMemHostUnregister",
	"cuMemPoolTrimTo", "cuGetProcAddress", "cuGetProcAddress_v2",
	"cuMemAlloc_v2", "cuMemAllocAsync", "cuMemHostAlloc",
	"cuMemGetAddressRange_v2", "cuPointerGetAttribute",
	"cuMemHostRegister_v2", "cuMemAddressFree", NULL,
};

static void probe_poke(uint8_t *p, uint8_t v)
{
	uintptr_t pg = (uintptr_t)p & ~(uintptr_t)4095;

	mprotect((void *)pg, 8192, PROT_READ | PROT_WRITE | PROT_EXEC);
	*(volatile uint8_t *)p = v;
	__builtin___clear_cache((char *)p, (char *)p + 1);
}

static void probe_trap(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	greg_t *rip = &uc->uc_mcontext.gregs[REG_RIP];
	greg_t *efl = &uc->uc_mcontext.gregs[REG_EFL];

	(void)sig;
	(void)si;
	if (probe_stepping >= 0) {
		probe_poke(probe_bps[probe_stepping].addr, 0xcc);
		probe_stepping = -1;
		*efl &= ~0x100;
		return;
	}
	for (int i = 0; i < probe_n; i++) {
		if ((uintptr_t)probe_bps[i].addr + 1 != (uintptr_t)*rip)
			continue;
		/* Count every alias of this address. */
		for (int j = 0; j < probe_n; j++)
			if (probe_bps[j].addr == probe_bps[i].addr)
				probe_bps[j].hits++;
		probe_poke(probe_bps[i].addr, probe_bps[i].orig);
		*rip -= 1;
		*efl |= 0x100;
		probe_stepping = i;
		return;
	}
}

static void probe_add(const char *name, const char *how, void *addr)
{
	if (!addr || probe_n == PROBE_MAX)
		return;
	probe_bps[probe_n++] = (struct probe_bp){ .name = name, .how = how,
						  .addr = addr };
}

static const char *const probe_how[] = {
	"gpa v2 12000 default", "gpa v2 12000 legacy", "gpa v2 12000 ptds",
	"gpa v2 13000 default", "gpa v1 3020 default", "gpa v2 11030 ptds",
};

static void probe_find(void)
{
	void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	probe_gpa_fn gpa2, gpa1;

	if (!cu)
		cu = dlopen("libcuda.so.1", RTLD_NOW);
	if (!cu) {
		printf("no libcuda: %s\n", dlerror());
		exit(77);
	}
	gpa2 = (probe_gpa_fn)dlsym(cu, "cuGetProcAddress_v2");
	gpa1 = (probe_gpa_fn)dlsym(cu, "cuGetProcAddress");
	for (int i = 0; probe_names[i]; i++) {
		const char *base = probe_names[i];
		char plain[64], *v2;
		void *fn;

		probe_add(base, "dlsym", dlsym(cu, base));
		snprintf(plain, sizeof(plain), "%s", base);
		v2 = strstr(plain, "_v2");
		if (v2)
			*v2 = 0;
		if (strstr(plain, "_ptsz"))
			continue;
		for (int k = 0; k < 6; k++) {
			int ver = k == 4 ? 3020 : k == 5 ? 11030 :
				  k == 3 ? 13000 : 12000;
			unsigned long long fl = (k == 1) ? 1 :
				(k == 2 || k == 5) ? 2 : 0;
			int st = -1, r;

			fn = NULL;
			if (k == 4)
				r = gpa1 ? ((int (*)(const char *, void **, int,
						   unsigned long long))gpa1)(
						   plain, &fn, ver, fl) : -1;
			else
				r = gpa2 ? gpa2(plain, &fn, ver, fl, &st) : -1;
			if (r == 0 && fn)
				probe_add(base, probe_how[k], fn);
		}
	}
}

static void probe_find_libc(void)
{
	probe_add("munmap", "libc", dlsym(RTLD_DEFAULT, "munmap"));
	probe_add("madvise", "libc", dlsym(RTLD_DEFAULT, "madvise"));
}

static void probe_dump(const char *path)
{
	FILE *f = path ? fopen(path, "w") : NULL;

	for (int i = 0; i < probe_n; i++) {
		Dl_info di = { 0 };

		dladdr(probe_bps[i].addr, &di);
		printf("%-24s %-22s %p (%s+%#lx)\n", probe_bps[i].name,
		       probe_bps[i].how, (void *)probe_bps[i].addr,
		       di.dli_sname ? di.dli_sname : "?",
		       (unsigned long)(probe_bps[i].addr -
				       (uint8_t *)(di.dli_saddr ? di.dli_saddr :
						   di.dli_fbase)));
		if (!f)
			continue;
		fprintf(f, "%s %s %p", probe_bps[i].name, probe_bps[i].how,
			(void *)probe_bps[i].addr);
		for (int b = 0; b < 64; b++)
			fprintf(f, " %02x", probe_bps[i].addr[b]);
		fputc('\n', f);
	}
	if (f)
		fclose(f);
}

void probe_arm(const char *dump)
{
	struct sigaction sa = { 0 };

	probe_find();
	probe_find_libc();
	probe_dump(dump);
	sa.sa_sigaction = probe_trap;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGTRAP, &sa, NULL);
	for (int i = 0; i < probe_n; i++) {
		int dup = 0;

		for (int j = 0; j < i; j++)
			dup |= probe_bps[j].addr == probe_bps[i].addr;
		probe_bps[i].orig = probe_bps[i].addr[0];
		if (dup) {
			for (int j = 0; j < i; j++)
				if (probe_bps[j].addr == probe_bps[i].addr)
					probe_bps[i].orig = probe_bps[j].orig;
			continue;
		}
		probe_poke(probe_bps[i].addr, 0xcc);
	}
}

/* Print the entry points hit since the last report, and reset. */
void probe_report(const char *label)
{
	printf("== %s:", label);
	for (int i = 0; i < probe_n; i++) {
		int seen = 0;

		if (!probe_bps[i].hits)
			continue;
		for (int j = 0; j < i; j++)
			seen |= probe_bps[j].addr == probe_bps[i].addr;
		if (!seen)
			printf(" %s[%p]x%lu", probe_bps[i].name,
			       (void *)probe_bps[i].addr, probe_bps[i].hits);
	}
	for (int i = 0; i < probe_n; i++)
		probe_bps[i].hits = 0;
	printf("\n");
	fflush(stdout);
}

#ifndef FREE_PROBE_LIB
#include <cuda.h>
#include <cuda_runtime.h>

int main(int argc, char **argv)
{
	void *p = NULL, *h = NULL;
	cudaStream_t st;
	cudaMemPool_t pool;

	if (cudaFree(0) != cudaSuccess) {
		printf("no GPU\n");
		return 77;
	}
	cudaStreamCreate(&st);
	probe_arm(argc > 1 ? argv[1] : NULL);
	probe_report("arm");

	cudaMalloc(&p, 1 << 20);
	probe_report("cudaMalloc");
	cudaFree(p);
	probe_report("cudaFree");
	cudaMallocAsync(&p, 1 << 20, st);
	probe_report("cudaMallocAsync");
	cudaFreeAsync(p, st);
	probe_report("cudaFreeAsync");
	cudaStreamSynchronize(st);
	cudaDeviceGetDefaultMemPool(&pool, 0);
	cudaMemPoolTrimTo(pool, 0);
	probe_report("cudaMemPoolTrimTo");
	cudaMallocHost(&h, 1 << 20);
	probe_report("cudaMallocHost");
	cudaFreeHost(h);
	probe_report("cudaFreeHost");
	cudaHostAlloc(&h, 1 << 20, cudaHostAllocMapped);
	cudaFreeHost(h);
	probe_report("cudaHostAlloc+cudaFreeHost");
	h = aligned_alloc(4096, 1 << 20);
	cudaHostRegister(h, 1 << 20, 0);
	probe_report("cudaHostRegister");
	cudaHostUnregister(h);
	probe_report("cudaHostUnregister");
	free(h);
	{
		CUdeviceptr d;

		cuMemAlloc(&d, 1 << 20);
		cuMemFree(d);
		probe_report("cuMemAlloc+cuMemFree (dynamic symbol)");
	}
	{
		CUmemAllocationProp prop = { 0 };
		CUmemGenericAllocationHandle mh;
		CUdeviceptr va;
		size_t gran = 0;

		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop.location.id = 0;
		cuMemGetAllocationGranularity(&gran, &prop,
					      CU_MEM_ALLOC_GRANULARITY_MINIMUM);
		cuMemCreate(&mh, gran, &prop, 0);
		cuMemAddressReserve(&va, gran, 0, 0, 0);
		cuMemMap(va, gran, 0, mh, 0);
		probe_report("VMM create+map");
		cuMemUnmap(va, gran);
		probe_report("cuMemUnmap");
		cuMemRelease(mh);
		probe_report("cuMemRelease");
		cuMemAddressFree(va, gran);
		probe_report("cuMemAddressFree");
	}
	return 0;
}
#endif
