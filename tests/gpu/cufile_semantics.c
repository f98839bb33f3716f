// SPDX-License-Identifier: BSD-3-Clause
/*
 * cufile_semantics.c - what libcufile answers in the cases the cufile
 * backend and the fake libcufile (tests/fakes/fake_cufile.c) depend on,
 * printed one line each.  Not a test: a probe, run on the GPU machine by
 * scripts/gpu-check.sh, whose output docs/backends.md quotes.
 *
 *   nvcc -O2 cufile_semantics.c -lcufile -lcuda -o cufile_semantics
 *
 * Cases: deregistering a pointer never registered, an interior one, one
 * already deregistered; the driver opened twice and closed once, then a
 * registration (is the driver use-counted?); a range past the
 * allocation, an unaligned length, a range over two VMM mappings, one
 * VMM mapping; a registration with another device's context current
 * (two GPUs only); cuFileUseCount along the way.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cufile.h>
#include <stdio.h>
#include <string.h>

static void say(const char *what, CUfileError_t e)
{
	printf("%-58s %d%s\n", what, (int)e.err,
	       e.err == CU_FILE_CUDA_DRIVER_ERROR ? " (cuda)" : "");
}

/* Two VMM mappings of one granule each, adjacent, in one reservation. */
static CUdeviceptr vmm_two(size_t *gran_p)
{
	CUmemAllocationProp prop;
	CUmemAccessDesc acc;
	CUmemGenericAllocationHandle h[2];
	CUdeviceptr va = 0;
	size_t gran = 0;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
	if (cuMemGetAllocationGranularity(&gran, &prop,
					  CU_MEM_ALLOC_GRANULARITY_MINIMUM))
		return 0;
	if (cuMemAddressReserve(&va, 2 * gran, 0, 0, 0))
		return 0;
	memset(&acc, 0, sizeof(acc));
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	for (int i = 0; i < 2; i++) {
		if (cuMemCreate(&h[i], gran, &prop, 0) ||
		    cuMemMap(va + i * gran, gran, 0, h[i], 0) ||
		    cuMemSetAccess(va + i * gran, gran, &acc, 1))
			return 0;
		cuMemRelease(h[i]);
	}
	*gran_p = gran;
	return va;
}

int main(void)
{
	void *g = NULL, *h = NULL;
	size_t gran = 0;
	CUdeviceptr v;
	int ndev = 0;

	cudaFree(0);
	cudaGetDeviceCount(&ndev);
	printf("cuFileUseCount before open: %ld\n", cuFileUseCount());
	say("cuFileDriverOpen", cuFileDriverOpen());
	say("cuFileDriverOpen again", cuFileDriverOpen());
	printf("cuFileUseCount after two opens: %ld\n", cuFileUseCount());
	say("cuFileDriverClose once", cuFileDriverClose());
	printf("cuFileUseCount after one close: %ld\n", cuFileUseCount());

	cudaMalloc(&g, 4 << 20);
	say("register after 2 opens + 1 close", cuFileBufRegister(g, 4 << 20, 0));
	say("deregister it", cuFileBufDeregister(g));
	say("deregister it again", cuFileBufDeregister(g));
	say("deregister never registered (g + 1 MiB)",
	    cuFileBufDeregister((char *)g + (1 << 20)));
	say("register g", cuFileBufRegister(g, 4 << 20, 0));
	say("deregister interior (g + 4096)",
	    cuFileBufDeregister((char *)g + 4096));
	say("deregister g", cuFileBufDeregister(g));
	say("register past the allocation (4 MiB + 64 KiB)",
	    cuFileBufRegister(g, (4 << 20) + (64 << 10), 0));
	cudaMalloc(&h, 1000000);
	say("register an unaligned length (1,000,000 of 1,000,000)",
	    cuFileBufRegister(h, 1000000, 0));
	say("deregister it", cuFileBufDeregister(h));
	say("register 1,000,000 rounded to 64 KiB (1,048,576)",
	    cuFileBufRegister(h, 1048576, 0));
	cuFileBufDeregister(h);
	v = vmm_two(&gran);
	if (v) {
		printf("vmm: two mappings of %zu bytes at %#llx\n", gran,
		       (unsigned long long)v);
		say("register one VMM mapping",
		    cuFileBufRegister((void *)v, gran, 0));
		say("deregister it", cuFileBufDeregister((void *)v));
		say("register over two VMM mappings",
		    cuFileBufRegister((void *)v, 2 * gran, 0));
		cuFileBufDeregister((void *)v);
	} else {
		printf("vmm: could not map two granules\n");
	}
	if (ndev >= 2) {
		void *d1 = NULL;

		cudaSetDevice(1);
		cudaMalloc(&d1, 4 << 20);
		cudaSetDevice(0);
		say("register device 1 memory, device 0 current",
		    cuFileBufRegister(d1, 4 << 20, 0));
		say("deregister it, device 0 current", cuFileBufDeregister(d1));
	} else {
		printf("one GPU: the other device's context not tried\n");
	}
	printf("cuFileUseCount at the end: %ld\n", cuFileUseCount());
	say("cuFileDriverClose", cuFileDriverClose());
	printf("cuFileUseCount after the last close: %ld\n", cuFileUseCount());
	say("register with the driver closed (implicit open?)",
	    cuFileBufRegister(g, 4 << 20, 0));
	printf("cuFileUseCount now: %ld\n", cuFileUseCount());
	cuFileBufDeregister(g);
	return 0;
}
