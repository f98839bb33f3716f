// SPDX-License-Identifier: BSD-3-Clause
/*
 * fuzz_cache.c - libFuzzer target: sequences of API calls and memory
 * events on host memory, GPU allocations and a multi-mapping VMM range,
 * with the cache's invariants checked after every step.
 *
 * Each input is a program over an arena of ARENA_PAGES pages, mapped
 * afresh for it, a VMM reservation of VSLOTS slots of 2 MiB
 * (FAKE_CUDA_VMM_GRANULARITY) on the fake CUDA driver, reserved afresh,
 * and a fresh context (none backend, the real glibc hooks and the CUDA
 * hooks, a small region limit so that eviction runs,
 * GDRC_WHOLE_ALLOC_MAX=8M so that VMM keys are sometimes the request
 * rounded to 64 KiB, GDRC_CHECK=1 so the cache checks its tree, LRU and
 * accounting after every change and aborts if one is broken).  Three
 * bytes an operation, [op, a, b]; op bytes below VMM_OP_BASE (0x90)
 * choose op % 9 as they always did:
 *
 *   get      [page, len, access, flags]: a registration covering it;
 *            held in one of HELD slots (the oldest is put back first)
 *   put      a held registration (host, GPU or VMM)
 *   inval    gdrc_invalidate of a range
 *   remap    mmap(MAP_FIXED) over a range (new memory at the same
 *            addresses, which the hooks must report)
 *   unmap+   munmap then mmap back a range
 *   stats    counters read and checked; with a >= 0xf0 instead a
 *            misuse, by b % 4 (GDRC_MISUSE=warn: each must be counted
 *            once in GDRC_STAT_MISUSE and change nothing):
 *              double put of a held registration (one no other held
 *              slot holds, through the same mr or another), so the
 *              second finds the handle live with
 *              no get outstanding, released, or back in its pool;
 *              a held registration put through a second context;
 *              the second context finished with a registration held,
 *              then a put of it, a get and a second gdrc_fini on it;
 *              a put of the caller's zeroed memory as if a handle
 *   galloc   a GPU allocation on the fake driver (device or pool
 *            memory, small ones sub-allocated in one 64 KiB page), at
 *            the address of a freed one when there is one
 *   gfree    a GPU free: through the driver's hooked cuMemFree_v2, or,
 *            when hits are tag checked, behind the hooks' back
 *   gget     a registration of part of a live GPU allocation
 *
 * and op bytes from VMM_OP_BASE up choose (op - VMM_OP_BASE) % 4, on
 * the VMM reservation (PyTorch's expandable segments: mappings of 1..4
 * slots, each its own physical allocation and BUFFER_ID, holes between):
 *
 *   vmap     a new allocation mapped over 1..4 free slots (the first
 *            free slot from a on)
 *   vunmap   1..3 adjacent whole mappings unmapped at once: a partial
 *            unmap of the reservation, through the hooked cuMemUnmap,
 *            or, when hits are tag checked, sometimes behind the hooks'
 *            back (fake_cuda_free, mapping by mapping)
 *   vremap   one mapping unmapped (as vunmap) and a new allocation
 *            mapped at its start, sometimes of another size: a new
 *            BUFFER_ID at the same addresses
 *   vget     a registration of a range from slot a over 1..3 adjacent
 *            mappings (sometimes all up to a hole: up to 16), into a
 *            hole where they run out, or starting in one; held like
 *            get's
 *
 * Each input runs with GDRC_VALIDATE=always or hooks (its first byte;
 * always under GDRC_MEM_HOOKS=uffd, which installs no CUDA hook).
 * Checked after every step, beyond GDRC_CHECK: a GPU registration handed
 * out carries the allocation's current BUFFER_ID (never one freed); a
 * get either fails with a documented status and leaves *mr_p alone, or
 * returns a registration whose key range covers the request; a
 * registration returned again (same id) never covers a page remapped
 * since the id first appeared (no stale hit); hits + misses + failed
 * gets = gets; puts = successful gets put; nothing is registered once
 * every held one is put and the arena is unmapped.  For VMM, against
 * this file's own model of the reservation:
 *
 *   - a vget fails with GDRC_ERR_UNSUPPORTED exactly when the request
 *     reaches a hole (else only LIMIT or NO_MEMORY), leaving *mr_p alone;
 *   - a registration first handed out is keyed as documented: the
 *     touched mappings whole if they total <= 8 MiB, else the request
 *     rounded to 64 KiB within them (maybe widened by a region of the
 *     same mappings merged in, never past them); kind VMM; its
 *     BUFFER_ID the first mapping's;
 *   - any VMM registration handed out covers the request, lies in the
 *     reservation, was first seen no earlier than the last (re)map or
 *     unmap of any slot the request touches (no stale hit, per-slot
 *     times as for host pages), and carries fake_cuda_buffer_id(key_addr)
 *     while the key's first slot is unchanged since; with
 *     GDRC_VALIDATE=hooks no slot of its key changed since at all (every
 *     unmap went through the hooks);
 *   - at the end every mapping is unmapped through the hooks and the
 *     reservation freed; in hooks mode nothing at all is left registered
 *     before any gdrc_invalidate of GPU or VMM addresses.
 *
 * Mutants these ops must catch: a tag check of only the first mapping
 * a hit touches, in either of the cache's per-mapping checks (a `break`
 * after the first iteration of gdrc_cache_segs_ok in lib/cache/region.c,
 * used past REGION_SEGS_WALK = 8 mappings; `return 1` after the first
 * query in gdrc_region_segs_walk, hit.h, for 2..8).  In always mode:
 * vget over mappings A and B (or ten one-slot mappings), B unmapped
 * behind the hooks and mapped again (vremap), vget over A and B again
 * is served the old registration (a stale hit), or a vget reaching into
 * B's hole succeeds.  Checked by hand: from corpus/ the seeds
 * vmm-remap-tag and vmm-many-tag abort at once (0.1 s); from the other
 * seeds alone the fuzzer found the first in 25 to 29 s, the second in
 * 14 to 17 s.
 *
 * io_uring mode (issue 32): an input whose length leaves one byte over
 * (3n + 1 bytes) runs the same operations on a context bound to a real
 * ring (one ring for the process, a table of 1 + last byte % 8 slots
 * registered by each input's context: below GDRC_MAX_REGIONS and HELD,
 * so a full table evicts and an all-held one refuses).  Checked after
 * every step, from the ring's fdinfo ("N: 0xADDR/LEN" a slot): each held
 * registration's slot (its lkey) holds exactly its range, no two
 * registrations share one, the slots set hold exactly
 * GDRC_STAT_PINNED_BYTES, lie in the arena, and are at least the cached
 * regions plus the held ones no longer cached; after each host get, a
 * READ_FIXED through the slot (from a file of known bytes on /dev/shm,
 * O_DIRECT) into the request's first or last bytes, zeroed first: the
 * bytes must land there (a stale slot would put them in pages mapped
 * there before a remap); GPU and VMM gets are GDRC_ERR_UNSUPPORTED,
 * *mr_p untouched.  At the end no slot is set, and gdrc_fini leaves the
 * ring without a table.  Where io_uring or O_DIRECT on /dev/shm is
 * refused, such inputs run without a ring (said once).  Seeds ring-*.
 *
 * cuFile mode (issue 33): an input of 3n + 2 bytes runs the same
 * operations on a context that registers with cuFile (GDRC_CUFILE_ALL,
 * the fake libcufile).  Checked, beyond the above: a GPU registration
 * is its whole allocation exactly (VMM: a new one the mappings the
 * request touches, each whole, whatever their size, and every one
 * registered exactly as keyed; the other VMM checks as above); after
 * every step each held registration whose memory is still there is
 * registered with cuFile at its base for at least its length (one whose
 * memory went may have lost its cuFile registration to the new memory's
 * at that base), and in hooks mode no registration outlives its memory unless
 * it is held (fake_cufile_orphans, at most the held ones invalidated):
 * every hooked free deregistered the rest before the fake driver freed;
 * at the end nothing is registered with cuFile.  Seeds cufile-*.
 *
 * Build: cmake -DGDRC_FUZZ=ON with clang (tests/fuzz/CMakeLists.txt).
 * Run:   fuzz_cache -max_total_time=60 tests/fuzz/corpus
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_DIRECT */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gdrcache.h>
#ifdef GDRC_HAVE_URING
#include <liburing.h>
#endif

#include "fake_cuda.h"
#include "fake_cufile.h"

#define ARENA_PAGES 64
#define HELD 8
#define MAX_IDS 4096
#define GPU_SLOTS 4
#define VSLOTS 16			/* slots of the VMM reservation */
#define VSLOT FAKE_CUDA_VMM_GRANULARITY	/* 2 MiB */
#define VMM_WHOLE_MAX (8UL << 20)	/* GDRC_WHOLE_ALLOC_MAX here */
#define VMM_OP_BASE 0x90		/* op bytes from here: VMM ops */
#define GPU_PAGE (64UL << 10)

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

/* ====================================================================
 * io_uring mode
 * ==================================================================== */

#define RING_SLOTS_MAX 8
#define RING_FILE (64UL << 10)
#define RING_READ_MAX 512

static int ring_mode;       /* this input's context is bound to the ring */
static int cufile_mode;     /* this input's context registers with cuFile */

#ifdef GDRC_HAVE_URING
static unsigned ring_slots; /* its table's size */
static struct io_uring ring;
static int ring_state;      /* 0: not tried; 1: ready; -1: refused */
static int ring_file = -1;  /* RING_FILE bytes of ring_byte, O_DIRECT */

/* The test file's byte at off: never 0, so a zeroed byte the read
 * missed shows. */
static uint8_t ring_byte(uint64_t off)
{
	return (uint8_t)(1 + off % 251);
}

/* The process's ring and file, made at the first ring input. */
static int ring_ready(void)
{
	static uint8_t buf[RING_FILE];
	char path[64];
	ssize_t n = -1;
	int ret, fd;

	if (ring_state)
		return ring_state > 0;
	ring_state = -1;
	ret = io_uring_queue_init(4, &ring, 0);
	if (ret) {
		fprintf(stderr, "fuzz_cache: io_uring refused (%s): ring "
				"inputs run without a ring\n", strerror(-ret));
		return 0;
	}
	for (size_t i = 0; i < RING_FILE; i++)
		buf[i] = ring_byte(i);
	snprintf(path, sizeof(path), "/dev/shm/gdrc-fuzz-%d", (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd >= 0) {
		n = pwrite(fd, buf, RING_FILE, 0);
		close(fd);
	}
	if (n == (ssize_t)RING_FILE)
		ring_file = open(path, O_RDONLY | O_DIRECT);
	unlink(path);
	if (ring_file < 0) {
		fprintf(stderr, "fuzz_cache: no O_DIRECT file on /dev/shm "
				"(%s): ring inputs run without a ring\n",
			strerror(errno));
		io_uring_queue_exit(&ring);
		return 0;
	}
	ring_state = 1;
	fprintf(stderr, "fuzz_cache: io_uring: inputs of 3n + 1 bytes run "
			"on a ring\n");
	return 1;
}

/* The ring's table per its fdinfo: each slot's range (length 0: not
 * set), how many are set, and whether there is a table at all. */
struct ring_table {
	int table;
	unsigned nset;
	uintptr_t addr[RING_SLOTS_MAX];
	size_t len[RING_SLOTS_MAX];
};

static void ring_table_read(struct ring_table *t)
{
	static int info_fd = -1; /* the ring's fdinfo, read again at 0 */
	char buf[4096], *line, *next;
	ssize_t len;

	memset(t, 0, sizeof(*t));
	if (info_fd < 0) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d",
			 ring.ring_fd);
		info_fd = open(path, O_RDONLY | O_CLOEXEC);
		CHECK(info_fd >= 0, "open %s", path);
	}
	len = pread(info_fd, buf, sizeof(buf) - 1, 0);
	CHECK(len > 0 && len < (ssize_t)sizeof(buf) - 1, "ring fdinfo: %zd",
	      len);
	buf[len] = '\0';
	for (line = buf; line && *line; line = next) {
		unsigned i;
		unsigned long a;
		size_t l;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (!strncmp(line, "UserBufs:", 9)) {
			t->table = atoi(line + 9);
		} else if (t->table && sscanf(line, " %u: 0x%lx/%zu", &i, &a,
					      &l) == 3) {
			CHECK(i < RING_SLOTS_MAX, "fdinfo: slot %u", i);
			t->addr[i] = a;
			t->len[i] = l;
			t->nset++;
		} else if (t->table && line[0] != ' ' && line[0] != '\t') {
			break;
		}
	}
}

/* After every step: the table against the held registrations and the
 * counters. */
static void ring_check(struct gdrc_ctx *ctx, struct gdrc_mr **held)
{
	uintptr_t lo = (uintptr_t)arena, hi = lo + ARENA_PAGES * page;
	uint64_t bytes = 0, rids[HELD];
	uint32_t keys[HELD];
	unsigned n = 0, not_cached = 0;
	struct ring_table t;

	ring_table_read(&t);
	CHECK(t.table == (int)ring_slots, "the ring's table: %d slots, not %u",
	      t.table, ring_slots);
	for (unsigned k = 0; k < ring_slots; k++) {
		if (!t.len[k])
			continue;
		bytes += t.len[k];
		CHECK(t.addr[k] >= lo && t.addr[k] + t.len[k] <= hi,
		      "slot %u holds %#lx+%zu, outside the arena", k,
		      (unsigned long)t.addr[k], t.len[k]);
	}
	CHECK(bytes == stat_of(ctx, GDRC_STAT_PINNED_BYTES),
	      "the slots set hold %llu bytes, pinned_bytes says %llu",
	      (unsigned long long)bytes,
	      (unsigned long long)stat_of(ctx, GDRC_STAT_PINNED_BYTES));
	for (unsigned i = 0; i < HELD; i++) {
		struct gdrc_mr_info info;
		int seen = 0;

		if (!held[i])
			continue;
		CHECK(gdrc_mr_query(held[i], &info) == GDRC_OK, "query");
		for (unsigned j = 0; j < n; j++) {
			if (rids[j] == info.id) {
				CHECK(keys[j] == info.lkey,
				      "registration %llu: two lkeys",
				      (unsigned long long)info.id);
				seen = 1;
			} else {
				CHECK(keys[j] != info.lkey,
				      "registrations %llu and %llu share "
				      "slot %u",
				      (unsigned long long)rids[j],
				      (unsigned long long)info.id, info.lkey);
			}
		}
		if (seen)
			continue;
		CHECK(info.backend == GDRC_BACKEND_IO_URING &&
			      info.lkey < ring_slots &&
			      t.addr[info.lkey] == info.addr &&
			      t.len[info.lkey] == info.length,
		      "registration %llu (%#lx+%zu) in slot %u, which holds "
		      "%#lx+%zu",
		      (unsigned long long)info.id, (unsigned long)info.addr,
		      info.length, info.lkey,
		      info.lkey < ring_slots ?
			      (unsigned long)t.addr[info.lkey] : 0UL,
		      info.lkey < ring_slots ? t.len[info.lkey] : 0);
		not_cached += !(info.flags & GDRC_MR_INFO_CACHED);
		rids[n] = info.id;
		keys[n++] = info.lkey;
	}
	CHECK(t.nset <= ring_slots &&
		      t.nset >= stat_of(ctx, GDRC_STAT_REGIONS) + not_cached,
	      "%u slots set: not the %llu cached plus %u held uncached",
	      t.nset, (unsigned long long)stat_of(ctx, GDRC_STAT_REGIONS),
	      not_cached);
}

/* After a host get of [s, e): READ_FIXED through its slot into the
 * request's first or last bytes (by b), zeroed first; they must land. */
static void ring_read_check(const struct gdrc_mr_info *info, uintptr_t s,
			    uintptr_t e, unsigned b)
{
	size_t len = e - s < RING_READ_MAX ? e - s : RING_READ_MAX;
	uint64_t off = (uint64_t)b * 211 % (RING_FILE - RING_READ_MAX);
	uint8_t *buf = (uint8_t *)(b & 1 ? e - len : s);
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	struct io_uring_cqe *cqe;
	int res = -EIO;

	CHECK(sqe, "io_uring_get_sqe");
	memset(buf, 0, len);
	io_uring_prep_read_fixed(sqe, ring_file, buf, (unsigned)len,
				 (off_t)off, (int)info->lkey);
	if (io_uring_submit(&ring) == 1 && !io_uring_wait_cqe(&ring, &cqe)) {
		res = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
	}
	CHECK(res == (int)len, "READ_FIXED of %zu bytes through slot %u: %d",
	      len, info->lkey, res);
	for (size_t i = 0; i < len; i++)
		CHECK(buf[i] == ring_byte(off + i),
		      "stale slot: registration %llu (slot %u, %#lx+%zu) read "
		      "%zu bytes that did not land at %p",
		      (unsigned long long)info->id, info->lkey,
		      (unsigned long)info->addr, info->length, len,
		      (void *)buf);
}
#endif

/* cuFile mode, after every step: each held registration whose memory is
 * still there is registered with cuFile at its base, at least as long;
 * in hooks mode only held registrations whose memory went may outlive
 * it. */
static void cufile_check(struct gdrc_mr **held, int tagged)
{
	unsigned inv_held = 0;

	for (unsigned i = 0; i < HELD; i++) {
		struct gdrc_mr_info info;
		size_t len = 0;
		int seen = 0;

		if (!held[i])
			continue;
		for (unsigned j = 0; j < i; j++)
			seen |= held[j] == held[i];
		CHECK(gdrc_mr_query(held[i], &info) == GDRC_OK, "query");
		CHECK(info.backend == GDRC_BACKEND_CUFILE,
		      "held registration %llu of backend %d",
		      (unsigned long long)info.id, info.backend);
		/* Memory gone while held: its cuFile registration may
		 * have been replaced by the new memory's at that base. */
		if ((info.flags & GDRC_MR_INFO_INVALIDATED) ||
		    (info.mem_type == GDRC_MEM_CUDA &&
		     info.buffer_id != fake_cuda_buffer_id(info.addr))) {
			if (!seen)
				inv_held++;
			continue;
		}
		CHECK(fake_cufile_registered((void *)info.addr, &len) &&
			      len >= info.length,
		      "held registration %llu (%#lx+%zu, backend %d) is not "
		      "registered with cuFile (%zu bytes there)",
		      (unsigned long long)info.id, (unsigned long)info.addr,
		      info.length, info.backend, len);
	}
	if (!tagged)
		CHECK(fake_cufile_orphans() <= inv_held,
		      "%lu cuFile registrations outlived their memory, %u "
		      "held ones were invalidated",
		      fake_cufile_orphans(), inv_held);
}

/* When id first appeared; *fresh (if given): 1 if that is now. */
static uint64_t born_of(uint64_t id, int *fresh)
{
	if (fresh)
		*fresh = 0;
	for (unsigned i = 0; i < nids; i++)
		if (ids[i].id == id)
			return ids[i].born;
	if (nids < MAX_IDS) {
		ids[nids].id = id;
		ids[nids].born = clock_now;
		nids++;
		if (fresh)
			*fresh = 1;
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

/*
 * The VMM reservation of this input, as this file models it: for each
 * slot the first slot of the mapping holding it (-1: a hole), at a
 * mapping's first slot its length in slots, and when each slot was last
 * mapped or unmapped (on clock_now, as page_time).
 */
static CUdeviceptr vva;
static int vhead[VSLOTS];
static unsigned vlen[VSLOTS];
static uint64_t vtime[VSLOTS];

static CUdeviceptr vaddr(unsigned slot)
{
	return vva + (CUdeviceptr)slot * VSLOT;
}

static unsigned vslot_of(uintptr_t p)
{
	return (unsigned)((p - vva) / VSLOT);
}

/* Free slots from slot on (0 if slot is mapped or past the end). */
static unsigned vfree_run(unsigned slot)
{
	unsigned n = 0;

	while (slot + n < VSLOTS && vhead[slot + n] < 0)
		n++;
	return n;
}

/* A new allocation of n slots (all free) mapped at slot h. */
static void vmm_map(unsigned h, unsigned n)
{
	CHECK(fake_cuda_vmm_map(vaddr(h), (size_t)n * VSLOT, 0) == 0,
	      "vmm map of slots %u+%u", h, n);
	clock_now++;
	for (unsigned q = h; q < h + n; q++) {
		vhead[q] = (int)h;
		vtime[q] = clock_now;
	}
	vlen[h] = n;
}

/* Unmap the whole mappings in slots [h, e) (h a mapping's first slot, e
 * a mapping's end, holes between allowed): one hooked cuMemUnmap, or
 * each mapping behind the hooks' back. */
static void vmm_unmap(unsigned h, unsigned e, int behind_hooks)
{
	if (behind_hooks) {
		for (unsigned q = h; q < e; q++)
			if (vhead[q] == (int)q)
				CHECK(fake_cuda_free(vaddr(q)) == 0,
				      "fake_cuda_free of mapping at slot %u", q);
	} else {
		CHECK(cuMemUnmap(vaddr(h), (size_t)(e - h) * VSLOT) ==
			      CUDA_SUCCESS,
		      "cuMemUnmap of slots [%u, %u)", h, e);
	}
	clock_now++;
	for (unsigned q = h; q < e; q++) {
		vhead[q] = -1;
		vtime[q] = clock_now;
	}
}

/* The first mapped slot from slot on, wrapping; -1 if none. */
static int vmm_mapped_from(unsigned slot)
{
	for (unsigned k = 0; k < VSLOTS; k++)
		if (vhead[(slot + k) % VSLOTS] >= 0)
			return (int)((slot + k) % VSLOTS);
	return -1;
}

static void vmm_vmap(unsigned a, unsigned b)
{
	unsigned n = 1 + b % 4, h;

	for (h = 0; h < VSLOTS; h++)
		if (vhead[(a + h) % VSLOTS] < 0)
			break;
	if (h == VSLOTS)
		return;
	h = (a + h) % VSLOTS;
	if (n > vfree_run(h))
		n = vfree_run(h);
	vmm_map(h, n);
}

/* 1..3 adjacent mappings, from the one at or after slot a. */
static void vmm_vunmap(unsigned a, unsigned b, int tagged)
{
	int s = vmm_mapped_from(a % VSLOTS);
	unsigned h, e, k = 1 + b % 3;

	if (s < 0)
		return;
	h = (unsigned)vhead[s];
	e = h + vlen[h];
	while (--k && e < VSLOTS && vhead[e] == (int)e)
		e += vlen[e];
	vmm_unmap(h, e, tagged && (b & 0x80));
}

static void vmm_vremap(unsigned a, unsigned b, int tagged)
{
	int s = vmm_mapped_from(a % VSLOTS);
	unsigned h, n;

	if (s < 0)
		return;
	h = (unsigned)vhead[s];
	n = vlen[h];
	vmm_unmap(h, h + n, tagged && (b & 0x80));
	if (b & 0x40) { /* another size */
		n = 1 + (b >> 2) % 4;
		if (n > vfree_run(h))
			n = vfree_run(h);
	}
	vmm_map(h, n);
}

/*
 * vget's request: from slot a (an offset into it from a's high bits)
 * over up to 1 + b % 3 adjacent mappings, into the hole after where
 * they run out before the reservation's end; or (b % 3 == 2 and
 * b & 0x40) over all of them up to the next hole (more than
 * REGION_SEGS_WALK, 8, take the cache's out-of-line search); from a
 * hole, a short range.
 */
static void vmm_request(unsigned a, unsigned b, uintptr_t *s_p,
			uintptr_t *e_p)
{
	unsigned slot = a % VSLOTS, end_slot;
	int all = b % 3 == 2 && (b & 0x40);
	unsigned m = all ? VSLOTS : 1 + b % 3;
	uintptr_t s = vaddr(slot) + (uintptr_t)(a >> 4) * (VSLOT / 16) +
		      (b & 0x80 ? 4000 : 0);
	uintptr_t e, top = vaddr(VSLOTS);
	int into_hole = 0;

	if (vhead[slot] < 0) {
		e = s + 1 + (uintptr_t)(b >> 2) * 65536;
	} else {
		unsigned h = (unsigned)vhead[slot];

		end_slot = h + vlen[h];
		while (--m) {
			if (end_slot < VSLOTS && vhead[end_slot] >= 0) {
				end_slot += vlen[end_slot];
			} else {
				into_hole = !all && end_slot < VSLOTS;
				break;
			}
		}
		e = vaddr(end_slot);
		if (into_hole)
			e += 1 + (uintptr_t)(b >> 3) * 4096;
		else
			e -= (uintptr_t)((b >> 5) & 3) * (VSLOT / 4) +
			     (b & 8 ? 100 : 0);
		if (e <= s)
			e = s + 1 + (b >> 2);
	}
	if (e > top)
		e = top;
	*s_p = s;
	*e_p = e;
}

/* Check a VMM registration handed out for [s, e). */
static void vmm_check(const struct gdrc_mr_info *info, uintptr_t s,
		      uintptr_t e, int tagged, uintptr_t whole_max)
{
	unsigned p0 = vslot_of(s), p1 = vslot_of(e - 1), k0, k1;
	uintptr_t ke = info->key_addr + info->key_length;
	int fresh;
	uint64_t born = born_of(info->id, &fresh);

	CHECK(info->key_addr <= s && ke >= e,
	      "vmm registration %#lx+%zu does not cover %#lx+%lu",
	      (unsigned long)info->key_addr, info->key_length,
	      (unsigned long)s, (unsigned long)(e - s));
	CHECK(info->key_addr >= vva && ke <= vaddr(VSLOTS),
	      "vmm registration %#lx+%zu outside the reservation",
	      (unsigned long)info->key_addr, info->key_length);
	CHECK(info->kind == GDRC_PTR_VMM, "vmm registration of kind %d",
	      (int)info->kind);
	k0 = vslot_of(info->key_addr);
	k1 = vslot_of(ke - 1);
	for (unsigned q = p0; q <= p1; q++)
		CHECK(vtime[q] <= born,
		      "stale vmm hit: registration %llu (from time %llu) "
		      "served slot %u, (re|un)mapped at %llu",
		      (unsigned long long)info->id, (unsigned long long)born,
		      q, (unsigned long long)vtime[q]);
	if (!tagged)
		for (unsigned q = k0; q <= k1; q++)
			CHECK(vtime[q] <= born,
			      "hooks mode: registration %llu (from time %llu) "
			      "outlived the unmap of its slot %u at %llu",
			      (unsigned long long)info->id,
			      (unsigned long long)born, q,
			      (unsigned long long)vtime[q]);
	if (vtime[k0] <= born)
		CHECK(info->buffer_id == fake_cuda_buffer_id(info->key_addr),
		      "vmm registration %llu: buffer id %llu, its first "
		      "mapping's %llu",
		      (unsigned long long)info->id,
		      (unsigned long long)info->buffer_id,
		      fake_cuda_buffer_id(info->key_addr));
	if (fresh) {
		unsigned h0 = (unsigned)vhead[p0], h1 = (unsigned)vhead[p1];
		uintptr_t ms = vaddr(h0), me = vaddr(h1 + vlen[h1]);
		uintptr_t ws = ms, we = me;

		if (me - ms > whole_max) {
			ws = s & ~(GPU_PAGE - 1);
			we = (e + GPU_PAGE - 1) & ~(GPU_PAGE - 1);
			if (ws < ms)
				ws = ms;
			if (we > me)
				we = me;
		}
		/* Rounded requests: an overlapping region of exactly these
		 * mappings is merged in (cache.c, plan_miss), so the key
		 * may be wider, never past them. */
		CHECK(info->key_addr <= ws && ke >= we &&
			      info->key_addr >= ms && ke <= me &&
			      !(info->key_addr & (GPU_PAGE - 1)) &&
			      !(ke & (GPU_PAGE - 1)),
		      "new vmm registration keyed %#lx+%zu, not %#lx+%lu "
		      "(request %#lx+%lu over slots %u..%u)",
		      (unsigned long)info->key_addr, info->key_length,
		      (unsigned long)ws, (unsigned long)(we - ws),
		      (unsigned long)s, (unsigned long)(e - s), h0,
		      h1 + vlen[h1] - 1);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int said_source;

/* The second context of the misuse ops (created when one needs it). */
static struct gdrc_ctx *ctx2;

/* Do held mrs a and b hold one registration?  Two holds of one can be
 * two mrs (a hazard cell and a direct reference), which count in one
 * state word: a double put of one takes the other's reference, as two
 * direct references (one mr) always did, so it is no misuse to look
 * for. */
static int same_registration(struct gdrc_mr *a, struct gdrc_mr *b)
{
	struct gdrc_mr_info ia, ib;

	if (!a || !b)
		return 0;
	if (a == b)
		return 1;
	CHECK(gdrc_mr_query(a, &ia) == GDRC_OK &&
		      gdrc_mr_query(b, &ib) == GDRC_OK,
	      "query of a held registration");
	return ia.id == ib.id;
}

/* A misuse op (see the file comment): @return the misuses it made. */
static unsigned misuse_op(struct gdrc_ctx *ctx, struct gdrc_mr **held,
			  unsigned a, unsigned b, uint64_t *puts)
{
	unsigned slot = (b / 4) % HELD, shared = 0;
	struct gdrc_mr *mr = held[slot], *mr2;
	uint64_t zeroed[8] = { 0 }, puts_before;

	switch (b % 4) {
	case 0: /* double put */
		for (unsigned i = 0; i < HELD; i++)
			shared += mr && same_registration(held[i], mr);
		if (!mr || shared > 1)
			return 0;
		gdrc_mr_put(ctx, mr);
		held[slot] = NULL;
		++*puts;
		gdrc_mr_put(ctx, mr);
		return 1;
	case 1: /* through another context */
		if (!mr)
			return 0;
		if (!ctx2)
			CHECK(gdrc_init(NULL, &ctx2) == GDRC_OK, "init ctx2");
		puts_before = stat_of(ctx, GDRC_STAT_PUTS);
		gdrc_mr_put(ctx2, mr);
		CHECK(stat_of(ctx, GDRC_STAT_PUTS) == puts_before &&
			      stat_of(ctx2, GDRC_STAT_PUTS) == 0,
		      "a put through the wrong context was counted");
		return 1;
	case 2: { /* fini with a held one, then calls on it */
		struct gdrc_ctx *dead;

		if (!ctx2)
			CHECK(gdrc_init(NULL, &ctx2) == GDRC_OK, "init ctx2");
		if (gdrc_mr_get(ctx2, arena + (size_t)(a % ARENA_PAGES) * page,
				page, 0, 0, &mr2) != GDRC_OK)
			mr2 = NULL;
		dead = ctx2;
		ctx2 = NULL;
		gdrc_fini(dead);
		mr = (struct gdrc_mr *)0x1;
		CHECK(gdrc_mr_get(dead, arena, page, 0, 0, &mr) ==
				      GDRC_ERR_INVALID_PARAM &&
			      mr == (struct gdrc_mr *)0x1,
		      "get on a finished context");
		gdrc_fini(dead);
		if (!mr2)
			return 2;
		gdrc_mr_put(dead, mr2);
		return 3;
	}
	default: /* not a handle */
		gdrc_mr_put(ctx, (struct gdrc_mr *)zeroed);
		return 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gdrc_mr *held[HELD] = { 0 };
	struct gdrc_ctx *ctx = NULL;
	uint64_t gets = 0, failed = 0, puts = 0, misuses = 0, misuse0;
	unsigned next = 0;

	int tagged = !size || !(data[0] & 1); /* else GDRC_VALIDATE=hooks */
	const char *mh = getenv("GDRC_MEM_HOOKS");

	/* GDRC_MEM_HOOKS=uffd (scripts/fuzz.sh's third pass) patches
	 * nothing, so no CUDA hook either: GPU memory is tag checked. */
	if (mh && !strcmp(mh, "uffd"))
		tagged = 1;

	if (!page) {
		page = (size_t)sysconf(_SC_PAGESIZE);
		setenv("GDRC_CHECK", "1", 1);
		setenv("GDRC_MAX_REGIONS", "6", 1);
		setenv("GDRC_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
		setenv("GDRC_KMOD", "off", 1);
		setenv("GDRC_LOG_LEVEL", "error", 1);
		setenv("GDRC_WHOLE_ALLOC_MAX", "8M", 1);
		setenv("GDRC_MISUSE", "warn", 1);
		setenv("GDRC_CUFILE_LIBRARY", FAKE_CUFILE_PATH, 1);
	}
	fake_cuda_reset(1);
	fake_cufile_reset();
	CHECK(cuInit(0) == CUDA_SUCCESS, "cuInit");
	memset(gpu, 0, sizeof(gpu));
	gpu_lo = gpu_hi = 0;
	vva = fake_cuda_vmm_reserve((size_t)VSLOTS * VSLOT);
	CHECK(vva != 0, "vmm reserve");
	for (unsigned q = 0; q < VSLOTS; q++) {
		vhead[q] = -1;
		vlen[q] = 0;
		vtime[q] = 0;
	}
	setenv("GDRC_VALIDATE", tagged ? "always" : "hooks", 1);
	arena = mmap(NULL, ARENA_PAGES * page, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(arena != MAP_FAILED, "mmap arena");
	memset(page_time, 0, sizeof(page_time));
	nids = 0;
	clock_now = 1;
	ring_mode = 0;
	cufile_mode = size % 3 == 2;
	if (cufile_mode) {
		struct gdrc_config cfg = {
			.field_mask = GDRC_CONFIG_FIELD_CUFILE,
			.cufile = GDRC_CUFILE_ALL,
		};

		CHECK(gdrc_init(&cfg, &ctx) == GDRC_OK, "gdrc_init, cuFile");
	}
#ifdef GDRC_HAVE_URING
	if (size % 3 == 1 && ring_ready()) {
		struct gdrc_config cfg = {
			.field_mask = GDRC_CONFIG_FIELD_IO_URING |
				      GDRC_CONFIG_FIELD_IO_URING_SLOTS,
			.ring = &ring,
		};

		ring_mode = 1;
		ring_slots = 1 + data[size - 1] % RING_SLOTS_MAX;
		cfg.ring_slots = ring_slots;
		CHECK(gdrc_init(&cfg, &ctx) == GDRC_OK, "gdrc_init on a ring");
	}
#endif
	if (!ring_mode && !cufile_mode)
		CHECK(gdrc_init(NULL, &ctx) == GDRC_OK, "gdrc_init");
	misuse0 = stat_of(ctx, GDRC_STAT_MISUSE);
	if (!said_source) {
		/* Which host source this run trusts (scripts/fuzz.sh runs
		 * it again with UCX's UCM owning glibc and checks). */
		const char *src = NULL;

		said_source = 1;
		gdrc_hooks_status(ctx, &src);
		fprintf(stderr, "fuzz_cache: host events: %s\n",
			src ? src : "none");
	}

	for (size_t i = 0; i + 3 <= size; i += 3) {
		unsigned op = data[i] < VMM_OP_BASE ?
				      data[i] % 9 :
				      9 + (data[i] - VMM_OP_BASE) % 4;
		unsigned a = data[i + 1], b = data[i + 2];
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
				uint64_t born = born_of(info.id, NULL);
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
#ifdef GDRC_HAVE_URING
			if (ring_mode)
				ring_read_check(&info, s, e, b);
#endif
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
			if (ring_mode) {
				CHECK(st == GDRC_ERR_UNSUPPORTED &&
					      mr == (struct gdrc_mr *)0x1,
				      "gpu get on a ring's context: status %d",
				      st);
				failed++;
				break;
			}
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
			CHECK(!cufile_mode ||
				      (info.addr == gpu[slot].p &&
				       info.length == gpu[slot].size),
			      "cuFile registration %#lx+%zu is not the "
			      "allocation %#lx+%zu",
			      (unsigned long)info.addr, info.length,
			      (unsigned long)gpu[slot].p, gpu[slot].size);
			held[next] = mr;
			next = (next + 1) % HELD;
			break;
		}
		case 9:
			vmm_vmap(a, b);
			break;
		case 10:
			vmm_vunmap(a, b, tagged);
			break;
		case 11:
			vmm_vremap(a, b, tagged);
			break;
		case 12: { /* vget */
			uintptr_t s, e;
			int hole = 0;

			vmm_request(a, b, &s, &e);
			for (unsigned q = vslot_of(s); q <= vslot_of(e - 1); q++)
				hole |= vhead[q] < 0;
			gets++;
			if (held[next]) {
				gdrc_mr_put(ctx, held[next]);
				held[next] = NULL;
				puts++;
			}
			st = gdrc_mr_get(ctx, (void *)s, e - s, 0, 0, &mr);
			if (ring_mode) {
				CHECK(st == GDRC_ERR_UNSUPPORTED &&
					      mr == (struct gdrc_mr *)0x1,
				      "vmm get on a ring's context: status %d",
				      st);
				failed++;
				break;
			}
			if (st != GDRC_OK) {
				CHECK(hole ? st == GDRC_ERR_UNSUPPORTED :
					     st == GDRC_ERR_LIMIT ||
						     st == GDRC_ERR_NO_MEMORY,
				      "vmm get %#lx+%lu (slots %u..%u, %s): "
				      "status %d",
				      (unsigned long)s, (unsigned long)(e - s),
				      vslot_of(s), vslot_of(e - 1),
				      hole ? "reaching a hole" : "all mapped",
				      st);
				CHECK(mr == (struct gdrc_mr *)0x1,
				      "a failed vmm get wrote *mr_p");
				failed++;
				break;
			}
			CHECK(!hole,
			      "vmm get %#lx+%lu reaching a hole (slots %u..%u) "
			      "succeeded",
			      (unsigned long)s, (unsigned long)(e - s),
			      vslot_of(s), vslot_of(e - 1));
			CHECK(gdrc_mr_query(mr, &info) == GDRC_OK, "query");
			/* cuFile: the touched mappings whole whatever
			 * their size, registered exactly as keyed. */
			vmm_check(&info, s, e, tagged,
				  cufile_mode ? UINTPTR_MAX : VMM_WHOLE_MAX);
			CHECK(!cufile_mode ||
				      (info.addr == info.key_addr &&
				       info.length == info.key_length),
			      "cuFile vmm registration %#lx+%zu is not its "
			      "key %#lx+%zu",
			      (unsigned long)info.addr, info.length,
			      (unsigned long)info.key_addr, info.key_length);
			held[next] = mr;
			next = (next + 1) % HELD;
			break;
		}
		case 5:
			if (a >= 0xf0) {
				misuses += misuse_op(ctx, held, a, b, &puts);
				CHECK(stat_of(ctx, GDRC_STAT_MISUSE) - misuse0 ==
					      misuses,
				      "misuses counted %llu, made %llu",
				      (unsigned long long)(stat_of(
						      ctx, GDRC_STAT_MISUSE) -
								   misuse0),
				      (unsigned long long)misuses);
				break;
			}
			/* fall through */
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
#ifdef GDRC_HAVE_URING
		if (ring_mode)
			ring_check(ctx, held);
#endif
		if (cufile_mode)
			cufile_check(held, tagged);
	}
	for (unsigned i = 0; i < HELD; i++)
		if (held[i])
			gdrc_mr_put(ctx, held[i]);
	CHECK(stat_of(ctx, GDRC_STAT_MISUSE) - misuse0 == misuses,
	      "misuses counted %llu, made %llu",
	      (unsigned long long)(stat_of(ctx, GDRC_STAT_MISUSE) - misuse0),
	      (unsigned long long)misuses);
	if (ctx2) {
		gdrc_fini(ctx2);
		ctx2 = NULL;
	}
	for (unsigned i = 0; i < GPU_SLOTS; i++)
		gpu_free(i, 0);
	for (unsigned q = 0; q < VSLOTS; q++)
		if (vhead[q] == (int)q)
			vmm_unmap(q, q + vlen[q], 0);
	CHECK(fake_cuda_vmm_unreserve(vva) == 0, "vmm unreserve");
	CHECK(!munmap(arena, ARENA_PAGES * page), "munmap arena");
	/* The unmap took everything: the next call applies it. */
	CHECK(gdrc_invalidate(ctx, arena, page) == GDRC_OK, "invalidate");
	/* In hooks mode every free and unmap went through the hooks: all
	 * gone now, before any invalidate of GPU addresses. */
	if (!tagged)
		CHECK(stat_of(ctx, GDRC_STAT_REGIONS) == 0,
		      "hooks mode: regions left after every free was hooked");
	/* Host regions went with the arena, GPU ones with their hooked
	 * frees; those freed behind the hooks stay until a hit's tag check
	 * or an explicit invalidate (this one). */
	if (gpu_hi)
		CHECK(gdrc_invalidate(ctx, (void *)(gpu_lo & ~(uintptr_t)65535),
				      gpu_hi - (gpu_lo & ~(uintptr_t)65535)) ==
			      GDRC_OK,
		      "invalidate gpu");
	/* VMM ones unmapped behind the hooks (always mode only) stay too;
	 * in hooks mode every unmap was reported. */
	if (tagged)
		CHECK(gdrc_invalidate(ctx, (void *)(uintptr_t)vva,
				      (size_t)VSLOTS * VSLOT) == GDRC_OK,
		      "invalidate vmm");
	CHECK(stat_of(ctx, GDRC_STAT_REGIONS) == 0, "regions left");
	CHECK(stat_of(ctx, GDRC_STAT_PINNED_BYTES) == 0, "bytes left");
#ifdef GDRC_HAVE_URING
	if (ring_mode) {
		struct ring_table t;

		ring_table_read(&t);
		CHECK(t.table && !t.nset, "%u slots still set at the end",
		      t.nset);
	}
#endif
	gdrc_fini(ctx);
	CHECK(!fake_cufile_live() && !fake_cufile_orphans(),
	      "cuFile registrations left: %lu, orphaned %lu",
	      fake_cufile_live(), fake_cufile_orphans());
#ifdef GDRC_HAVE_URING
	if (ring_mode) {
		struct ring_table t;

		ring_table_read(&t);
		CHECK(!t.table, "a table of %d slots left on the ring after "
				"gdrc_fini", t.table);
	}
#endif
	return 0;
}
