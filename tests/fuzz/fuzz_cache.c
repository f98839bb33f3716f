// SPDX-License-Identifier: BSD-3-Clause
/*
 * fuzz_cache.c - libFuzzer target: sequences of API calls and memory
 * events on host memory, with the cache's invariants checked after every
 * step.
 *
 * Each input is a program over an arena of ARENA_PAGES pages, mapped
 * afresh for it, and a fresh context (none backend, the real glibc
 * hooks, a small region limit so that eviction runs, GDRC_CHECK=1 so the
 * cache checks its tree, LRU and accounting after every change and
 * aborts if one is broken).  Three bytes an operation:
 *
 *   get      [page, len, access, flags]: a registration covering it;
 *            held in one of HELD slots (the oldest is put back first)
 *   put      a held registration
 *   inval    gdrc_invalidate of a range
 *   remap    mmap(MAP_FIXED) over a range (new memory at the same
 *            addresses, which the hooks must report)
 *   unmap+   munmap then mmap back a range
 *   stats    counters read and checked
 *   galloc   a GPU allocation on the fake driver (device or pool
 *            memory, small ones sub-allocated in one 64 KiB page), at
 *            the address of a freed one when there is one
 *   gfree    a GPU free: through the driver's hooked cuMemFree_v2, or,
 *            when hits are tag checked, behind the hooks' back
 *   gget     a registration of part of a live GPU allocation
 *
 * Each input runs with GDRC_VALIDATE=always or hooks (its first byte).
 * Checked after every step, beyond GDRC_CHECK: a GPU registration handed
 * out carries the allocation's current BUFFER_ID (never one freed); a get either fails with a
 * documented status and leaves *mr_p alone, or returns a registration
 * whose key range covers the request; a registration returned again (same
 * id) never covers a page remapped since the id first appeared (no stale
 * hit); hits + misses + failed gets = gets; puts = successful gets put;
 * nothing is registered once every held one is put and the arena is
 * unmapped.
 *
 * Build: cmake -DGDRC_FUZZ=ON with clang (tests/fuzz/CMakeLists.txt).
 * Run:   fuzz_cache -max_total_time=60 tests/fuzz/corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gdrcache.h>

#include "fake_cuda.h"

#define ARENA_PAGES 64
#define HELD 8
#define MAX_IDS 4096
#define GPU_SLOTS 4

static size_t page;
static char *arena;
static uint64_t clock_now;
static uint64_t page_time[ARENA_PAGES]; /* when last remapped */

/* Ids seen in this input, and when each first appeared. */
static struct {
	uint64_t id;
	uint64_t born;
} ids[MAX_IDS];
static unsigned nids;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "fuzz_cache: " __VA_ARGS__);          \
			fputc('\n', stderr);                                 \
			abort();                                             \
		}                                                            \
	} while (0)

static uint64_t stat_of(struct gdrc_ctx *ctx, enum gdrc_stat s)
{
	uint64_t v = 0;

	CHECK(gdrc_stat_get(ctx, s, &v) == GDRC_OK, "gdrc_stat_get %d", s);
	return v;
}

static uint64_t born_of(uint64_t id)
{
	for (unsigned i = 0; i < nids; i++)
		if (ids[i].id == id)
			return ids[i].born;
	if (nids < MAX_IDS) {
		ids[nids].id = id;
		ids[nids].born = clock_now;
		nids++;
	}
	return clock_now;
}

/* New memory at pages [p, p + n): MAP_FIXED over it. */
static void remap(unsigned p, unsigned n, int unmap_first)
{
	char *a = arena + (size_t)p * page;
	void *r;

	if (unmap_first)
		CHECK(!munmap(a, n * page), "munmap");
	r = mmap(a, n * page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	CHECK(r == a, "mmap MAP_FIXED");
	clock_now++;
	for (unsigned i = p; i < p + n; i++)
		page_time[i] = clock_now;
}

/* GPU allocations of this input: live ones, and freed addresses. */
static struct {
	CUdeviceptr p;
	size_t size;
	int kind;
	int live;
} gpu[GPU_SLOTS];

static const enum fake_cuda_kind gpu_kinds[] = { FAKE_DEVICE, FAKE_POOL };
static uintptr_t gpu_lo, gpu_hi; /* every GPU address of this input */

static void gpu_alloc(unsigned slot, unsigned a, unsigned b)
{
	int kind = gpu_kinds[b & 1];
	size_t size = (a & 1) ? 512 * (1 + (b >> 1) % 8) :
				(size_t)(1 + b % 16) << 16;
	CUdeviceptr p = 0;

	if (gpu[slot].live)
		return;
	/* Back at the freed address when it fits: the case that matters. */
	if (gpu[slot].p && (a & 2))
		p = fake_cuda_alloc_at(kind, size, 0, gpu[slot].p);
	if (!p)
		p = fake_cuda_alloc(kind, size, 0);
	if (!p)
		return;
	if (!gpu_lo || p < gpu_lo)
		gpu_lo = (uintptr_t)p;
	if (p + size + 65536 > gpu_hi)
		gpu_hi = (uintptr_t)p + size + 65536;
	gpu[slot].p = p;
	gpu[slot].size = size;
	gpu[slot].kind = kind;
	gpu[slot].live = 1;
}

static void gpu_free(unsigned slot, int behind_hooks)
{
	if (!gpu[slot].live)
		return;
	if (behind_hooks)
		CHECK(fake_cuda_free(gpu[slot].p) == 0, "fake_cuda_free");
	else
		CHECK(cuMemFree_v2(gpu[slot].p) == CUDA_SUCCESS, "cuMemFree");
	gpu[slot].live = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gdrc_mr *held[HELD] = { 0 };
	struct gdrc_ctx *ctx;
	uint64_t gets = 0, failed = 0, puts = 0;
	unsigned next = 0;

	int tagged = !size || !(data[0] & 1); /* else GDRC_VALIDATE=hooks */

	if (!page) {
		page = (size_t)sysconf(_SC_PAGESIZE);
		setenv("GDRC_CHECK", "1", 1);
		setenv("GDRC_MAX_REGIONS", "6", 1);
		setenv("GDRC_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
		setenv("GDRC_KMOD", "off", 1);
		setenv("GDRC_LOG_LEVEL", "error", 1);
	}
	fake_cuda_reset(1);
	CHECK(cuInit(0) == CUDA_SUCCESS, "cuInit");
	memset(gpu, 0, sizeof(gpu));
	gpu_lo = gpu_hi = 0;
	setenv("GDRC_VALIDATE", tagged ? "always" : "hooks", 1);
	arena = mmap(NULL, ARENA_PAGES * page, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(arena != MAP_FAILED, "mmap arena");
	memset(page_time, 0, sizeof(page_time));
	nids = 0;
	clock_now = 1;
	CHECK(gdrc_init(NULL, &ctx) == GDRC_OK, "gdrc_init");

	for (size_t i = 0; i + 3 <= size; i += 3) {
		unsigned op = data[i] % 9, a = data[i + 1], b = data[i + 2];
		unsigned p = a % ARENA_PAGES, n = 1 + b % 8;
		struct gdrc_mr *mr = (struct gdrc_mr *)0x1;
		struct gdrc_mr_info info;
		gdrc_status_t st;

		if (p + n > ARENA_PAGES)
			n = ARENA_PAGES - p;
		switch (op) {
		case 0: { /* get */
			size_t off = (size_t)(b & 0x3f) * 61;
			size_t len = 1 + (size_t)((a >> 6) + 1) * (b + 1) * 37;
			uint32_t access = (b >> 4) &
					  (GDRC_ACCESS_LOCAL_WRITE |
					   GDRC_ACCESS_REMOTE_WRITE |
					   GDRC_ACCESS_REMOTE_READ |
					   GDRC_ACCESS_REMOTE_ATOMIC);
			uint32_t flags = (a & 0x80) && (b & 1) ?
				GDRC_GET_UNCACHED : 0;
			uintptr_t s = (uintptr_t)arena + (size_t)p * page + off;
			uintptr_t e;

			if (s + len > (uintptr_t)arena + ARENA_PAGES * page)
				len = (uintptr_t)arena + ARENA_PAGES * page - s;
			e = s + len;
			gets++;
			if (held[next]) {
				gdrc_mr_put(ctx, held[next]);
				held[next] = NULL;
				puts++;
			}
			st = gdrc_mr_get(ctx, (void *)s, len, access, flags,
					 &mr);
			if (st != GDRC_OK) {
				CHECK(st == GDRC_ERR_LIMIT ||
					      st == GDRC_ERR_NO_MEMORY,
				      "get: status %d", st);
				CHECK(mr == (struct gdrc_mr *)0x1,
				      "a failed get wrote *mr_p");
				failed++;
				break;
			}
			CHECK(gdrc_mr_query(mr, &info) == GDRC_OK, "query");
			CHECK(info.key_addr <= s &&
				      info.key_addr + info.key_length >= e,
			      "registration %#lx+%zu does not cover %#lx+%zu",
			      (unsigned long)info.key_addr, info.key_length,
			      (unsigned long)s, len);
			CHECK((info.access & access) == access,
			      "access %#x missing from %#x", access,
			      info.access);
			{
				uint64_t born = born_of(info.id);
				unsigned p0 = (unsigned)((s - (uintptr_t)arena) /
							 page);
				unsigned p1 = (unsigned)((e - 1 -
							  (uintptr_t)arena) /
							 page);

				for (unsigned q = p0; q <= p1; q++)
					CHECK(page_time[q] <= born,
					      "stale hit: registration %llu "
					      "(from time %llu) served page %u "
					      "remapped at %llu",
					      (unsigned long long)info.id,
					      (unsigned long long)born, q,
					      (unsigned long long)page_time[q]);
			}
			held[next] = mr;
			next = (next + 1) % HELD;
			break;
		}
		case 1: /* put */
			if (held[a % HELD]) {
				gdrc_mr_put(ctx, held[a % HELD]);
				held[a % HELD] = NULL;
				puts++;
			}
			break;
		case 2: /* inval */
			CHECK(gdrc_invalidate(ctx, arena + (size_t)p * page,
					      n * page) == GDRC_OK,
			      "invalidate");
			break;
		case 3:
			remap(p, n, 0);
			break;
		case 4:
			remap(p, n, 1);
			break;
		case 6:
			gpu_alloc(a % GPU_SLOTS, a, b);
			break;
		case 7:
			gpu_free(a % GPU_SLOTS, tagged && (b & 1));
			break;
		case 8: { /* gget */
			unsigned slot = a % GPU_SLOTS;
			size_t off, len;
			uintptr_t s;

			if (!gpu[slot].live)
				break;
			off = (size_t)b * 61 % gpu[slot].size;
			len = 1 + (size_t)(a >> 2) * 97 % (gpu[slot].size - off);
			s = (uintptr_t)gpu[slot].p + off;
			gets++;
			if (held[next]) {
				gdrc_mr_put(ctx, held[next]);
				held[next] = NULL;
				puts++;
			}
			st = gdrc_mr_get(ctx, (void *)s, len, 0, 0, &mr);
			if (st != GDRC_OK) {
				CHECK(st == GDRC_ERR_LIMIT ||
					      st == GDRC_ERR_NO_MEMORY,
				      "gpu get: status %d", st);
				failed++;
				break;
			}
			CHECK(gdrc_mr_query(mr, &info) == GDRC_OK, "query");
			CHECK(info.buffer_id == fake_cuda_buffer_id(s),
			      "stale gpu registration: buffer id %llu, the "
			      "allocation's %llu",
			      (unsigned long long)info.buffer_id,
			      fake_cuda_buffer_id(s));
			CHECK(info.key_addr <= s &&
				      info.key_addr + info.key_length >= s + len,
			      "gpu registration does not cover the request");
			held[next] = mr;
			next = (next + 1) % HELD;
			break;
		}
		default: /* stats */
			CHECK(stat_of(ctx, GDRC_STAT_HITS) +
					      stat_of(ctx, GDRC_STAT_MISSES) +
					      failed ==
				      gets,
			      "hits + misses + failures != gets");
			CHECK(stat_of(ctx, GDRC_STAT_PUTS) == puts,
			      "puts counted %llu, made %llu",
			      (unsigned long long)stat_of(ctx,
							  GDRC_STAT_PUTS),
			      (unsigned long long)puts);
			CHECK(stat_of(ctx, GDRC_STAT_REGIONS) <= 6,
			      "more regions than the limit");
			break;
		}
	}
	for (unsigned i = 0; i < HELD; i++)
		if (held[i])
			gdrc_mr_put(ctx, held[i]);
	for (unsigned i = 0; i < GPU_SLOTS; i++)
		gpu_free(i, 0);
	CHECK(!munmap(arena, ARENA_PAGES * page), "munmap arena");
	/* The unmap took everything: the next call applies it. */
	CHECK(gdrc_invalidate(ctx, arena, page) == GDRC_OK, "invalidate");
	/* Host regions went with the arena, GPU ones with their hooked
	 * frees; those freed behind the hooks stay until a hit's tag check
	 * or an explicit invalidate (this one). */
	if (gpu_hi)
		CHECK(gdrc_invalidate(ctx, (void *)(gpu_lo & ~(uintptr_t)65535),
				      gpu_hi - (gpu_lo & ~(uintptr_t)65535)) ==
			      GDRC_OK,
		      "invalidate gpu");
	CHECK(stat_of(ctx, GDRC_STAT_REGIONS) == 0, "regions left");
	CHECK(stat_of(ctx, GDRC_STAT_PINNED_BYTES) == 0, "bytes left");
	gdrc_fini(ctx);
	return 0;
}
