// SPDX-License-Identifier: BSD-3-Clause
/*
 * cuhooks.c - CUDA free events: the driver's free functions, detoured.
 *
 * Purpose: a registration of GPU (or CUDA-pinned host) memory must be
 * dropped when the memory is freed, before the address can be handed out
 * again.  Programs free through the driver (cuMemFree), the runtime
 * (cudaFree, dynamic or static cudart), PyTorch's allocator, or pointers
 * fetched with cuGetProcAddress, cudaGetDriverEntryPoint or dlsym.  All
 * of them end in the same few functions inside libcuda (measured on
 * driver 580 with tests/gpu/free_probe.c: docs/hooks.md), so those
 * functions' entries are detoured (detour_x86_64.c) to replacements here
 * that report the freed range and then run the original.
 *
 * Which functions: every distinct address libcuda gives out for
 * cuMemFree (v1 and v2), cuMemFreeAsync (and _ptsz), cuMemFreeHost,
 * cuMemHostUnregister and cuMemUnmap, through dlsym on the handle and
 * through cuGetProcAddress for each stream flavour and for this driver's
 * version, so a per-thread-stream variant is not missed.  cuMemRelease
 * and cuMemPoolTrimTo are not hooked: neither changes what is mapped at
 * an address (a released handle's memory stays mapped until cuMemUnmap;
 * a trim gives back blocks already freed with cuMemFreeAsync).
 *
 * What is reported: a free names only the allocation's base, so the
 * event is [base, base + 1) with source GDRC_HOOKS_SRC_CUDA, and the
 * cache matches it against each registration's allocation range; an
 * unmap names its whole range.  Async frees are reported when called,
 * not when the stream reaches them: the registration must not outlive
 * the caller's claim on the memory.
 *
 * Hook context: the replacements run in any application thread, maybe
 * under its allocator's lock (PyTorch's); they call the subscribers,
 * which only queue, and never allocate, log or call CUDA before the
 * original.
 *
 * Locks: cuhooks_lock serializes install (once per process) and the
 * self test; the replacements take none.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "gdrc_int.h"
#include "hooks_int.h"
#include "log/log.h"

/* The driver's types, as far as these functions need them. */
typedef int cuhk_res;                 /* CUresult */
typedef unsigned long long cuhk_ptr;  /* CUdeviceptr */
typedef int (*cuhk_gpa2_fn)(const char *sym, void **pfn, int ver,
			    unsigned long long flags, int *status);
typedef int (*cuhk_gpa1_fn)(const char *sym, void **pfn, int ver,
			    unsigned long long flags);

/* cuGetProcAddress flags: default, legacy stream, per-thread stream. */
static const unsigned long long cuhk_gpa_flags[] = { 0, 1, 2 };
/* A version below 3020 asks for the 32-bit v1 API: never requested. */
#define CUHK_MIN_VERSION 3020

/* Distinct addresses one function may have (symbol, _v2, _ptsz, ...). */
#define CUHK_SLOTS 3

enum cuhk_fn {
	CUHK_FREE_V1, /* cuMemFree of the 32-bit API: its own symbol */
	CUHK_FREE,
	CUHK_FREE_ASYNC,
	CUHK_FREE_HOST,
	CUHK_HOST_UNREGISTER,
	CUHK_UNMAP,
	CUHK_COUNT
};

struct cuhk_site {
	const char *gpa_name;          /* for cuGetProcAddress, or NULL */
	const char *syms[CUHK_SLOTS];  /* for dlsym */
	void *repl[CUHK_SLOTS];        /* one replacement per slot */
	struct gdrc_detour det[CUHK_SLOTS];
};

static struct cuhk_site cuhk_sites[CUHK_COUNT];

/* Call the original code behind slot i of fn. */
#define CUHK_ORIG(fn, i, type) ((type)cuhk_sites[fn].det[i].orig)

/* ------------------------------------------------------------------
 * Hook context: the replacements.
 * ------------------------------------------------------------------ */

GDRC_HOOK_CONTEXT
static inline void cuhk_base(cuhk_ptr p)
{
	if (p)
		gdrc_hooks_report_cuda((uintptr_t)p, (uintptr_t)p + 1);
}

#define CUHK_DEFINE(i)                                                      \
	GDRC_HOOK_CONTEXT                                                    \
	static cuhk_res cuhk_free_v1_##i(unsigned int p)                     \
	{                                                                    \
		cuhk_base(p);                                                \
		return CUHK_ORIG(CUHK_FREE_V1, i,                            \
				 cuhk_res (*)(unsigned int))(p);             \
	}                                                                    \
	GDRC_HOOK_CONTEXT                                                    \
	static cuhk_res cuhk_free_##i(cuhk_ptr p)                            \
	{                                                                    \
		cuhk_base(p);                                                \
		return CUHK_ORIG(CUHK_FREE, i, cuhk_res (*)(cuhk_ptr))(p);   \
	}                                                                    \
	GDRC_HOOK_CONTEXT                                                    \
	static cuhk_res cuhk_free_async_##i(cuhk_ptr p, void *stream)        \
	{                                                                    \
		cuhk_base(p);                                                \
		return CUHK_ORIG(CUHK_FREE_ASYNC, i,                         \
				 cuhk_res (*)(cuhk_ptr, void *))(p, stream); \
	}                                                                    \
	GDRC_HOOK_CONTEXT                                                    \
	static cuhk_res cuhk_free_host_##i(void *p)                          \
	{                                                                    \
		cuhk_base((uintptr_t)p);                                     \
		return CUHK_ORIG(CUHK_FREE_HOST, i, cuhk_res (*)(void *))(p);\
	}                                                                    \
	GDRC_HOOK_CONTEXT                                                    \
	static cuhk_res cuhk_host_unregister_##i(void *p)                    \
	{                                                                    \
		cuhk_base((uintptr_t)p);                                     \
		return CUHK_ORIG(CUHK_HOST_UNREGISTER, i,                    \
				 cuhk_res (*)(void *))(p);                   \
	}                                                                    \
	GDRC_HOOK_CONTEXT                                                    \
	static cuhk_res cuhk_unmap_##i(cuhk_ptr p, size_t size)              \
	{                                                                    \
		if (p && size && size - 1 <= UINTPTR_MAX - p)                \
			gdrc_hooks_report_cuda((uintptr_t)p,                 \
					       (uintptr_t)p + size);         \
		return CUHK_ORIG(CUHK_UNMAP, i,                              \
				 cuhk_res (*)(cuhk_ptr, size_t))(p, size);   \
	}

CUHK_DEFINE(0)
CUHK_DEFINE(1)
CUHK_DEFINE(2)

#define CUHK_REPL(name) { name##_0, name##_1, name##_2 }

#define CUHK_SITE(gpa, sym1, sym2, name)                                     \
	{ .gpa_name = gpa, .syms = { sym1, sym2 }, .repl = CUHK_REPL(name) }

static struct cuhk_site cuhk_sites[CUHK_COUNT] = {
	[CUHK_FREE_V1] = CUHK_SITE(NULL, "cuMemFree", NULL, cuhk_free_v1),
	[CUHK_FREE] = CUHK_SITE("cuMemFree", "cuMemFree_v2", NULL, cuhk_free),
	[CUHK_FREE_ASYNC] = CUHK_SITE("cuMemFreeAsync", "cuMemFreeAsync",
				      "cuMemFreeAsync_ptsz", cuhk_free_async),
	[CUHK_FREE_HOST] = CUHK_SITE("cuMemFreeHost", "cuMemFreeHost", NULL,
				     cuhk_free_host),
	[CUHK_HOST_UNREGISTER] = CUHK_SITE("cuMemHostUnregister",
					   "cuMemHostUnregister", NULL,
					   cuhk_host_unregister),
	[CUHK_UNMAP] = CUHK_SITE("cuMemUnmap", "cuMemUnmap", NULL, cuhk_unmap),
};

/* ------------------------------------------------------------------
 * Install time (may log, lock, allocate).
 * ------------------------------------------------------------------ */

/* gdrc_probe_none (hooks.c) until installed. */
const uint64_t *_Atomic gdrc_cuhooks_probe_addr = &gdrc_probe_none;
uint64_t gdrc_cuhooks_probe_val;

static pthread_mutex_t cuhooks_lock = PTHREAD_MUTEX_INITIALIZER;
static int cuhooks_tried;               /* under cuhooks_lock */
static atomic_int cuhooks_on;
static char cuhooks_why[256];           /* final once cuhooks_tried */
static cuhk_gpa2_fn cuhk_gpa2;
static cuhk_gpa1_fn cuhk_gpa1;
static int cuhk_version;

static void *cuhk_gpa(const char *name, int ver, unsigned long long flags)
{
	void *fn = NULL;
	int st = 0;

	if (cuhk_gpa2) {
		if (cuhk_gpa2(name, &fn, ver, flags, &st) || st != 0)
			return NULL; /* 0: CU_GET_PROC_ADDRESS_SUCCESS */
	} else if (!cuhk_gpa1 || cuhk_gpa1(name, &fn, ver, flags)) {
		return NULL;
	}
	return fn;
}

/* Is addr hooked already (by any site)? */
static int cuhk_known(const void *addr)
{
	for (int f = 0; f < CUHK_COUNT; f++)
		for (int i = 0; i < CUHK_SLOTS; i++)
			if (cuhk_sites[f].det[i].fn == addr)
				return 1;
	return 0;
}

static void cuhk_remove_all(void)
{
	for (int f = 0; f < CUHK_COUNT; f++)
		for (int i = 0; i < CUHK_SLOTS; i++)
			gdrc_detour_remove(&cuhk_sites[f].det[i]);
}

/* Detour addr for site f in its next free slot.  @return 0 or -1. */
static int cuhk_add(enum cuhk_fn f, void *addr, const char *how, char *why,
		    size_t why_len)
{
	struct cuhk_site *s = &cuhk_sites[f];
	char err[160];
	int i;

	if (!addr || cuhk_known(addr))
		return 0;
	for (i = 0; i < CUHK_SLOTS && s->det[i].fn; i++)
		;
	if (i == CUHK_SLOTS) {
		snprintf(why, why_len,
			 "libcuda gives out more than %d addresses for %s",
			 CUHK_SLOTS, how);
		return -1;
	}
	if (gdrc_detour_install(&s->det[i], addr, s->repl[i], err,
				sizeof(err))) {
		snprintf(why, why_len, "cannot hook %s at %p: %s", how, addr,
			 err);
		return -1;
	}
	if (s->det[i].chained)
		gdrc_info("cuda hook on %s chains to an earlier hook", how);
	return 0;
}

static int cuhk_install_all(void *libcuda, char *why, size_t why_len)
{
	int (*get_version)(int *) = (int (*)(int *))dlsym(libcuda,
							  "cuDriverGetVersion");

	cuhk_gpa2 = (cuhk_gpa2_fn)dlsym(libcuda, "cuGetProcAddress_v2");
	cuhk_gpa1 = (cuhk_gpa1_fn)dlsym(libcuda, "cuGetProcAddress");
	if (!get_version || get_version(&cuhk_version) ||
	    cuhk_version < CUHK_MIN_VERSION)
		cuhk_version = 12000;
	for (int f = 0; f < CUHK_COUNT; f++) {
		struct cuhk_site *s = &cuhk_sites[f];

		for (int k = 0; k < CUHK_SLOTS && s->syms[k]; k++)
			if (cuhk_add(f, dlsym(libcuda, s->syms[k]), s->syms[k],
				     why, why_len))
				return -1;
		if (!s->gpa_name)
			continue;
		for (size_t j = 0; j < GDRC_ARRAY_SIZE(cuhk_gpa_flags); j++)
			if (cuhk_add(f, cuhk_gpa(s->gpa_name, cuhk_version,
						 cuhk_gpa_flags[j]),
				     s->gpa_name, why, why_len))
				return -1;
	}
	if (!cuhk_sites[CUHK_FREE].det[0].fn) {
		snprintf(why, why_len, "libcuda has no cuMemFree_v2");
		return -1;
	}
	return 0;
}

gdrc_status_t gdrc_cuhooks_install(void *libcuda)
{
	gdrc_status_t status;

	pthread_mutex_lock(&cuhooks_lock);
	if (!cuhooks_tried) {
		cuhooks_tried = 1;
#if defined(__x86_64__) && !defined(GDRC_HOOKS_NO_CUDA)
		if (cuhk_install_all(libcuda, cuhooks_why,
				     sizeof(cuhooks_why))) {
			cuhk_remove_all();
			gdrc_info("cuda free hooks unavailable: %s",
				  cuhooks_why);
		} else {
			uint8_t *fn = cuhk_sites[CUHK_FREE].det[0].fn;

			cuhooks_why[0] = '\0';
			gdrc_code_read((uint8_t *)&gdrc_cuhooks_probe_val, fn,
				       sizeof(gdrc_cuhooks_probe_val));
			atomic_store(&gdrc_cuhooks_probe_addr,
				     (const uint64_t *)(void *)fn);
			atomic_store(&cuhooks_on, 1);
			gdrc_debug("cuda free hooks installed");
		}
#else
		(void)libcuda;
		snprintf(cuhooks_why, sizeof(cuhooks_why),
			 "no cuda free hooks for this architecture or build");
#endif
	}
	status = atomic_load(&cuhooks_on) ? GDRC_OK : GDRC_ERR_UNSUPPORTED;
	pthread_mutex_unlock(&cuhooks_lock);
	return status;
}

int gdrc_cuhooks_active(void)
{
	return atomic_load_explicit(&cuhooks_on, memory_order_acquire);
}

const char *gdrc_cuhooks_reason(void)
{
	const char *why;

	pthread_mutex_lock(&cuhooks_lock);
	why = !cuhooks_tried ? "cuda free hooks not installed yet" :
	      atomic_load(&cuhooks_on) ? NULL : cuhooks_why;
	pthread_mutex_unlock(&cuhooks_lock);
	return why;
}

int gdrc_cuhooks_intact(void)
{
	if (!gdrc_cuhooks_active())
		return 0;
	for (int f = 0; f < CUHK_COUNT; f++)
		for (int i = 0; i < CUHK_SLOTS; i++)
			if (cuhk_sites[f].det[i].fn &&
			    !gdrc_detour_intact(&cuhk_sites[f].det[i]))
				return 0;
	return 1;
}

/*
 * Allocate and free one small buffer with the entry points a runtime
 * gets (cuGetProcAddress, this driver's version): the free must be
 * reported.  Needs a current context.
 */
int gdrc_cuhooks_self_test(char *why, size_t why_len)
{
	cuhk_res (*alloc)(cuhk_ptr *, size_t);
	cuhk_res (*release)(cuhk_ptr);
	uint64_t before;
	cuhk_ptr p = 0;
	int res;

	if (!gdrc_cuhooks_active()) {
		snprintf(why, why_len, "%s", gdrc_cuhooks_reason());
		return -1;
	}
	pthread_mutex_lock(&cuhooks_lock);
	alloc = (cuhk_res (*)(cuhk_ptr *, size_t))cuhk_gpa("cuMemAlloc",
							    cuhk_version, 0);
	release = (cuhk_res (*)(cuhk_ptr))cuhk_gpa("cuMemFree", cuhk_version,
						   0);
	pthread_mutex_unlock(&cuhooks_lock);
	if (!alloc || !release) {
		snprintf(why, why_len,
			 "self test: cuGetProcAddress has no cuMemAlloc/cuMemFree");
		return -1;
	}
	res = alloc(&p, 4096);
	if (res) {
		snprintf(why, why_len, "self test: cuMemAlloc failed (%d)",
			 res);
		return -1;
	}
	before = gdrc_hooks_cuda_event_count();
	release(p);
	if (gdrc_hooks_cuda_event_count() == before) {
		snprintf(why, why_len,
			 "self test: a cuMemFree through cuGetProcAddress was not seen");
		return -1;
	}
	return 0;
}
