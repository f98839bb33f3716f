// SPDX-License-Identifier: BSD-3-Clause
/*
 * fake_cufile.c - a fake libcufile (GPUDirect Storage's cuFile library),
 * libcufile.so.0.  Test-only.
 *
 * What it fakes: the cuFile entry points a registration cache and its
 * tests use (driver open and close, properties, version, buffer and file
 * handle registration, synchronous, stream and batch I/O), with the real
 * ABI (CUfileError_t by value), over the fake CUDA driver's memory
 * (fake_cuda.c): it asks fake_cuda_alloc_range what a pointer is.
 * Behaviour follows what libcufile 1.15.1 did on an H200 in
 * compatibility mode, no nvidia-fs (shared/research/storage-probe.md):
 *   - cuFileBufRegister: NULL base or length 0 is CU_FILE_INVALID_VALUE;
 *     a base that already starts a registration, live or orphaned (see
 *     below), is CU_FILE_MEMORY_ALREADY_REGISTERED (measured: the second
 *     registration of a pointer, and the first of memory that cudaMalloc
 *     gave back at the address of a freed registered buffer).  Ranges
 *     that overlap a registration, or start inside one unaligned, are
 *     registrations of their own (measured), keyed by their base;
 *   - GPU memory is what the fake CUDA knows on a device: the whole
 *     range must lie in the span the driver gives for its start
 *     (CU_POINTER_ATTRIBUTE_RANGE_START_ADDR and RANGE_SIZE: the
 *     allocation, or for VMM memory the whole reservation), else
 *     CU_FILE_CUDA_POINTER_RANGE_ERROR (measured: past a cudaMalloc's
 *     end, even rounded up to 64 KiB, 5014; over two adjacent VMM
 *     mappings of one reservation, accepted; tests/gpu/cufile_semantics.c).  Host memory (malloc'd, or the
 *     fake's pinned FAKE_HOST_PINNED) registers (measured for malloc);
 *   - each GPU's registered bytes are held to max_device_pinned_mem_size
 *     (cufile.json's 32 GiB by default; fake_cufile_set_pinned_limit_kib):
 *     a registration that would exceed it is
 *     CU_FILE_GPU_MEMORY_PINNING_FAILED;
 *   - a registration outlives its memory: when the fake CUDA frees an
 *     allocation (the free observer, installed at load), registrations
 *     starting in it become orphans, still listed, so their base cannot
 *     be registered again until deregistered, and deregistering one
 *     succeeds (both measured); they still count in their GPU's bytes
 *     (not measured);
 *   - cuFileBufDeregister takes the exact base of a registration, live
 *     or orphaned; anything else is FAKE_CUFILE_DEREG_UNKNOWN
 *     (CU_FILE_MEMORY_NOT_REGISTERED, 5024, measured for a pointer never
 *     registered, an interior one and one deregistered already; NULL is
 *     CU_FILE_INVALID_VALUE, not measured);
 *   - a buffer registration opens the driver if it is closed (the real
 *     library does), and so does a handle registration here (not
 *     measured): implicit opens, counted apart;
 *   - I/O is compatibility mode's: POSIX reads and writes.  Host memory
 *     is read into and written from for real (pread/pwrite at
 *     base + buf_offset, looping to the full size or end of file).  The
 *     fake's device memory is PROT_NONE: a read goes to a scratch buffer
 *     (so a short read at end of file returns what pread did) and a write
 *     writes zeros.  An I/O is "registered" when base starts a live
 *     registration whose length holds [buf_offset, buf_offset + size);
 *     anything else (unregistered, orphaned, an interior pointer, a range
 *     past the registration) goes "through the bounce buffer".  Every
 *     I/O is logged (fake_cufile_io_log) and counted by kind;
 *   - statuses of I/O calls: a handle that is not registered is
 *     -CU_FILE_HANDLE_NOT_REGISTERED, bad arguments -CU_FILE_INVALID_VALUE,
 *     device memory the range overruns -CU_FILE_CUDA_POINTER_RANGE_ERROR
 *     (cuFile's errors come back negative; which one for each case is
 *     not measured), and an OS error -1 with errno (a buffer in freed
 *     device VA: EFAULT);
 *   - cuFileHandleRegister takes CU_FILE_HANDLE_TYPE_OPAQUE_FD with an
 *     open fd, anything else is CU_FILE_INVALID_VALUE; the containers'
 *     CU_FILE_HANDLE_NOT_REGISTERED is injected with fake_cufile_fail.
 *
 * What it does not fake: nvidia-fs, GPU pinning and BAR mapping, O_DIRECT
 * rules (alignment, the filesystem), cufile.json and cufile.log, the
 * other cuFile calls (stream registration, parameters, statistics), a
 * CUDA context or stream (the stream argument is ignored), a driver close
 * dropping registrations (they stay), or queued I/O: the async calls and
 * batch submissions move the data before they return, and a batch's
 * events are all complete (CUFILE_COMPLETE, or CUFILE_FAILED with the
 * negative status in ret) when read, so GetStatus never waits (min_nr and
 * the timeout are not used) and Cancel finds nothing to cancel.  Times
 * are not modelled unless asked: FAKE_CUFILE_REG_US, FAKE_CUFILE_DEREG_US
 * and FAKE_CUFILE_OPEN_US (read once, at load) or the delay controls add
 * a sleep (clock_nanosleep to an absolute CLOCK_MONOTONIC deadline, not a
 * spin) to each successful registration, deregistration, and first open.
 *
 * Also: call counting and failure injection per entry point, and what
 * the tests read (fake_cufile.h).
 *
 * Locks: one mutex, lock, guards all of st (registrations, per-GPU bytes,
 * handles, batches, the I/O log, counts, failures, settings).  It is
 * taken before the fake CUDA's mutex (fake_cuda_alloc_range is called
 * under it, so a registration and the free of its memory are ordered)
 * and never the other way: the fake CUDA calls the free observer with
 * its own mutex dropped.  Delays, pread and pwrite run with lock
 * dropped.  A registration racing with the free of its memory may stay
 * live, as a program doing that has no order either.
 *
 * The library is linked -z nodelete: the fake CUDA holds a pointer to its
 * observer, which an unload would leave dangling.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cufile/cufile_types.h"
#include "fake_cuda.h"
#include "fake_cufile.h"

#define SCRATCH_CHUNK (1UL << 20)	/* device I/O moves this at a time */

/* ====================================================================
 * State
 * ==================================================================== */

#define FAKE_CUFILE_ENTRY_POINTS(X)	\
	X(cuFileDriverOpen)		\
	X(cuFileDriverClose)		\
	X(cuFileDriverClose_v2)		\
	X(cuFileUseCount)		\
	X(cuFileDriverGetProperties)	\
	X(cuFileGetVersion)		\
	X(cuFileBufRegister)		\
	X(cuFileBufDeregister)		\
	X(cuFileHandleRegister)		\
	X(cuFileHandleDeregister)	\
	X(cuFileRead)			\
	X(cuFileWrite)			\
	X(cuFileReadAsync)		\
	X(cuFileWriteAsync)		\
	X(cuFileBatchIOSetUp)		\
	X(cuFileBatchIOSubmit)		\
	X(cuFileBatchIOGetStatus)	\
	X(cuFileBatchIOCancel)		\
	X(cuFileBatchIODestroy)

enum fn_id {
#define X(name) FN_##name,
	FAKE_CUFILE_ENTRY_POINTS(X)
#undef X
	FN_COUNT
};

static const char *const fn_names[FN_COUNT] = {
#define X(name) [FN_##name] = #name,
	FAKE_CUFILE_ENTRY_POINTS(X)
#undef X
};

struct fn_state {
	unsigned long calls;
	int fail_err;
	int fail_left;		/* -1: forever */
};

/* A buffer registration, keyed by its base. */
struct reg {
	uintptr_t base;
	size_t len;
	int device;		/* -1: host memory */
	bool orphan;		/* its memory was freed while registered */
};

/* A CUfileHandle_t points at one of these, on st.handles. */
struct fh {
	struct fh *next;
	int fd;
};

/* A CUfileBatchHandle_t points at one of these, on st.batches. */
struct batch {
	struct batch *next;
	unsigned nr;		/* I/Os it holds: submitted, not yet read */
	unsigned busy;		/* slots taken by submissions in progress */
	unsigned nevents;	/* events[0..nevents) await GetStatus */
	CUfileIOEvents_t events[];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
	struct reg *regs;	/* sorted by base, bases distinct */
	size_t nregs, regs_cap;
	unsigned long orphans;	/* of nregs */
	unsigned long orphaned_total;
	size_t dev_bytes[FAKE_CUDA_MAX_DEVICES];
	size_t pinned_limit;	/* bytes per GPU */

	long use_count;
	unsigned long implicit_opens;

	struct fh *handles;
	struct batch *batches;

	struct fake_cufile_io log[FAKE_CUFILE_IO_LOG];	/* a ring */
	unsigned long io_total, io_registered;

	long reg_us, dereg_us, open_us;
	long env_reg_us, env_dereg_us, env_open_us;	/* read at load */

	struct fn_state fn[FN_COUNT];
} st = {
	.pinned_limit = FAKE_CUFILE_PINNED_LIMIT_KIB << 10,
};

static void lock_state(void)
{
	pthread_mutex_lock(&lock);
}

static void unlock_state(void)
{
	pthread_mutex_unlock(&lock);
}

static void *xrealloc(void *p, size_t size)
{
	p = realloc(p, size);
	if (!p) {
		fprintf(stderr, "fake_cufile: out of memory\n");
		abort();
	}
	return p;
}

static CUfileError_t status(int err)
{
	CUfileError_t e = { .err = (CUfileOpError)err, .cu_err = 0 };

	return e;
}

/*
 * Count a call of fn and say whether it goes ahead: 0, or the injected
 * failure's err.  Lock held.
 */
static int enter(enum fn_id fn)
{
	struct fn_state *s = &st.fn[fn];

	s->calls++;
	if (!s->fail_left)
		return 0;
	if (s->fail_left > 0)
		s->fail_left--;
	return s->fail_err;
}

/* As enter, taking the lock. */
static int enter_unlocked(enum fn_id fn)
{
	int err;

	lock_state();
	err = enter(fn);
	unlock_state();
	return err;
}

/* Sleep us microseconds, whatever signals come; lock not held. */
static void spend_us(long us)
{
	struct timespec t;

	if (us <= 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += us / 1000000;
	t.tv_nsec += (us % 1000000) * 1000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) ==
	       EINTR)
		;
}

/* Open the driver implicitly if it is closed: whether it was (the open
 * then costs open_us).  Lock held. */
static bool open_implicitly(void)
{
	if (st.use_count)
		return false;
	st.use_count = 1;
	st.implicit_opens++;
	return true;
}

/* ====================================================================
 * The registration table
 * ==================================================================== */

/* Index of the first registration whose base is >= base. */
static size_t reg_lower(uintptr_t base)
{
	size_t lo = 0, hi = st.nregs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (st.regs[mid].base < base)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The registration starting at base, or NULL. */
static struct reg *reg_find(uintptr_t base)
{
	size_t i = reg_lower(base);

	return i < st.nregs && st.regs[i].base == base ? &st.regs[i] : NULL;
}

static void reg_insert(uintptr_t base, size_t len, int device)
{
	size_t i = reg_lower(base);

	if (st.nregs == st.regs_cap) {
		st.regs_cap = st.regs_cap ? st.regs_cap * 2 : 64;
		st.regs = xrealloc(st.regs, st.regs_cap * sizeof(*st.regs));
	}
	memmove(&st.regs[i + 1], &st.regs[i],
		(st.nregs - i) * sizeof(*st.regs));
	st.nregs++;
	st.regs[i].base = base;
	st.regs[i].len = len;
	st.regs[i].device = device;
	st.regs[i].orphan = false;
	if (device >= 0)
		st.dev_bytes[device] += len;
}

static void reg_remove(struct reg *r)
{
	size_t i = r - st.regs;

	if (r->device >= 0)
		st.dev_bytes[r->device] -= r->len;
	if (r->orphan)
		st.orphans--;
	memmove(r, r + 1, (st.nregs - i - 1) * sizeof(*r));
	st.nregs--;
}

void fake_cufile_on_cuda_free(CUdeviceptr base, size_t size)
{
	size_t i;

	lock_state();
	for (i = reg_lower(base);
	     i < st.nregs && st.regs[i].base - base < size; i++) {
		if (st.regs[i].orphan)
			continue;
		st.regs[i].orphan = true;
		st.orphans++;
		st.orphaned_total++;
	}
	unlock_state();
}

/* ====================================================================
 * Load, and the control API
 * ==================================================================== */

static long env_us(const char *name)
{
	const char *v = getenv(name);
	long us = v ? strtol(v, NULL, 10) : 0;

	return us > 0 ? us : 0;
}

__attribute__((constructor)) static void fake_cufile_load(void)
{
	lock_state();
	st.env_reg_us = env_us("FAKE_CUFILE_REG_US");
	st.env_dereg_us = env_us("FAKE_CUFILE_DEREG_US");
	st.env_open_us = env_us("FAKE_CUFILE_OPEN_US");
	st.reg_us = st.env_reg_us;
	st.dereg_us = st.env_dereg_us;
	st.open_us = st.env_open_us;
	unlock_state();
	fake_cuda_set_free_observer(fake_cufile_on_cuda_free);
}

void fake_cufile_reset(void)
{
	struct fh *h, *hnext;
	struct batch *b, *bnext;

	lock_state();
	h = st.handles;
	b = st.batches;
	st.handles = NULL;
	st.batches = NULL;
	st.nregs = 0;
	st.orphans = 0;
	st.orphaned_total = 0;
	memset(st.dev_bytes, 0, sizeof(st.dev_bytes));
	st.pinned_limit = FAKE_CUFILE_PINNED_LIMIT_KIB << 10;
	st.use_count = 0;
	st.implicit_opens = 0;
	memset(st.log, 0, sizeof(st.log));
	st.io_total = 0;
	st.io_registered = 0;
	st.reg_us = st.env_reg_us;
	st.dereg_us = st.env_dereg_us;
	st.open_us = st.env_open_us;
	memset(st.fn, 0, sizeof(st.fn));
	unlock_state();

	for (; h; h = hnext) {
		hnext = h->next;
		free(h);
	}
	for (; b; b = bnext) {
		bnext = b->next;
		free(b);
	}
}

int fake_cufile_registered(const void *base, size_t *len_p)
{
	struct reg *r;
	int ret = 0;

	lock_state();
	r = reg_find((uintptr_t)base);
	if (r) {
		ret = r->orphan ? 2 : 1;
		if (len_p)
			*len_p = r->len;
	}
	unlock_state();
	return ret;
}

unsigned long fake_cufile_live(void)
{
	unsigned long n;

	lock_state();
	n = st.nregs - st.orphans;
	unlock_state();
	return n;
}

unsigned long fake_cufile_orphans(void)
{
	unsigned long n;

	lock_state();
	n = st.orphans;
	unlock_state();
	return n;
}

unsigned long fake_cufile_orphaned_total(void)
{
	unsigned long n;

	lock_state();
	n = st.orphaned_total;
	unlock_state();
	return n;
}

size_t fake_cufile_device_bytes(int device)
{
	size_t n = 0;

	lock_state();
	if (device >= 0 && device < FAKE_CUDA_MAX_DEVICES)
		n = st.dev_bytes[device];
	unlock_state();
	return n;
}

void fake_cufile_set_pinned_limit_kib(unsigned long kib)
{
	lock_state();
	st.pinned_limit = (size_t)(kib ? kib : FAKE_CUFILE_PINNED_LIMIT_KIB)
			  << 10;
	unlock_state();
}

long fake_cufile_driver_use_count(void)
{
	long n;

	lock_state();
	n = st.use_count;
	unlock_state();
	return n;
}

unsigned long fake_cufile_implicit_opens(void)
{
	unsigned long n;

	lock_state();
	n = st.implicit_opens;
	unlock_state();
	return n;
}

static enum fn_id fn_lookup(const char *name)
{
	size_t i;

	for (i = 0; name && i < FN_COUNT; i++)
		if (!strcmp(fn_names[i], name))
			return (enum fn_id)i;
	fprintf(stderr, "fake_cufile: no entry point named \"%s\"\n",
		name ? name : "(null)");
	abort();
}

unsigned long fake_cufile_calls(const char *fn_name)
{
	enum fn_id fn = fn_lookup(fn_name);
	unsigned long n;

	lock_state();
	n = st.fn[fn].calls;
	unlock_state();
	return n;
}

void fake_cufile_calls_reset(void)
{
	size_t i;

	lock_state();
	for (i = 0; i < FN_COUNT; i++)
		st.fn[i].calls = 0;
	unlock_state();
}

void fake_cufile_fail(const char *fn_name, int err, int count)
{
	enum fn_id fn = fn_lookup(fn_name);

	lock_state();
	st.fn[fn].fail_err = err;
	st.fn[fn].fail_left = count < 0 ? -1 : count;
	unlock_state();
}

void fake_cufile_set_delay_us(long reg_us, long dereg_us)
{
	lock_state();
	st.reg_us = reg_us < 0 ? st.env_reg_us : reg_us;
	st.dereg_us = dereg_us < 0 ? st.env_dereg_us : dereg_us;
	unlock_state();
}

void fake_cufile_set_open_delay_us(long open_us)
{
	lock_state();
	st.open_us = open_us < 0 ? st.env_open_us : open_us;
	unlock_state();
}

unsigned long fake_cufile_io_count(int registered)
{
	unsigned long n;

	lock_state();
	if (registered < 0)
		n = st.io_total;
	else if (registered)
		n = st.io_registered;
	else
		n = st.io_total - st.io_registered;
	unlock_state();
	return n;
}

int fake_cufile_last_io(struct fake_cufile_io *io)
{
	int ret = -1;

	lock_state();
	if (st.io_total) {
		*io = st.log[(st.io_total - 1) % FAKE_CUFILE_IO_LOG];
		ret = 0;
	}
	unlock_state();
	return ret;
}

int fake_cufile_io_log(struct fake_cufile_io *io, int max)
{
	unsigned long n, i;

	lock_state();
	n = st.io_total < FAKE_CUFILE_IO_LOG ? st.io_total
					     : FAKE_CUFILE_IO_LOG;
	if (max < 0)
		max = 0;
	if (n > (unsigned long)max)
		n = max;
	for (i = 0; i < n; i++)
		io[i] = st.log[(st.io_total - n + i) % FAKE_CUFILE_IO_LOG];
	unlock_state();
	return (int)n;
}

/* ====================================================================
 * Driver
 * ==================================================================== */

CUfileError_t cuFileDriverOpen(void)
{
	long delay = 0;
	int err;

	lock_state();
	err = enter(FN_cuFileDriverOpen);
	if (!err && st.use_count++ == 0)
		delay = st.open_us;
	unlock_state();
	spend_us(delay);
	return status(err);
}

static CUfileError_t driver_close(enum fn_id fn)
{
	int err;

	lock_state();
	err = enter(fn);
	if (!err && !st.use_count)
		err = CU_FILE_DRIVER_NOT_INITIALIZED;
	else if (!err)
		st.use_count--;
	unlock_state();
	return status(err);
}

CUfileError_t cuFileDriverClose(void)
{
	return driver_close(FN_cuFileDriverClose);
}

CUfileError_t cuFileDriverClose_v2(void)
{
	return driver_close(FN_cuFileDriverClose_v2);
}

long cuFileUseCount(void)
{
	long n;

	lock_state();
	enter(FN_cuFileUseCount);
	n = st.use_count;
	unlock_state();
	return n;
}

/* Harmless values but the pinned limit: no nvidia-fs (compatibility
 * mode), cufile.json's defaults. */
CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t *props)
{
	size_t kib;
	int err;

	lock_state();
	err = enter(FN_cuFileDriverGetProperties);
	if (!err && !props)
		err = CU_FILE_INVALID_VALUE;
	else if (!err && !st.use_count)
		err = CU_FILE_DRIVER_NOT_INITIALIZED;
	if (!err) {
		memset(props, 0, sizeof(*props));
		props->nvfs.poll_thresh_size = 4;		/* KiB */
		props->nvfs.max_direct_io_size = 16384;		/* KiB */
		props->max_device_cache_size = 131072;		/* KiB */
		props->per_buffer_cache_size = 1024;		/* KiB */
		kib = st.pinned_limit >> 10;
		props->max_device_pinned_mem_size =
			kib > UINT_MAX ? UINT_MAX : (unsigned)kib;
		props->max_batch_io_size = FAKE_CUFILE_MAX_BATCH;
		props->max_batch_io_timeout_msecs = 5;
	}
	unlock_state();
	return status(err);
}

CUfileError_t cuFileGetVersion(int *version)
{
	int err = enter_unlocked(FN_cuFileGetVersion);

	if (!err && !version)
		err = CU_FILE_INVALID_VALUE;
	if (!err)
		*version = FAKE_CUFILE_VERSION;
	return status(err);
}

/* ====================================================================
 * Buffer registration
 * ==================================================================== */

/* Checks and inserts [b, b + length) (see the top of the file); lock
 * held. */
static int buf_register(uintptr_t b, size_t length)
{
	CUdeviceptr abase;
	size_t asize;
	int device;

	if (reg_find(b))
		return CU_FILE_MEMORY_ALREADY_REGISTERED;
	if (fake_cuda_alloc_range(b, &abase, &asize, &device))
		device = -1;
	/* The driver's span for b: for VMM memory the reservation. */
	if (device >= 0 &&
	    (cuPointerGetAttribute(&abase,
				   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, b) ||
	     cuPointerGetAttribute(&asize, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
				   b)))
		return CU_FILE_CUDA_POINTER_INVALID;
	if (device >= 0 && length > abase + asize - b)
		return CU_FILE_CUDA_POINTER_RANGE_ERROR;
	if (device >= 0 && (length > st.pinned_limit ||
			    st.dev_bytes[device] > st.pinned_limit - length))
		return CU_FILE_GPU_MEMORY_PINNING_FAILED;
	reg_insert(b, length, device);
	return 0;
}

CUfileError_t cuFileBufRegister(const void *base, size_t length, int flags)
{
	bool opened = false;
	long delay = 0;
	int err;

	lock_state();
	err = enter(FN_cuFileBufRegister);
	if (!err && (!base || !length))
		err = CU_FILE_INVALID_VALUE;
	if (!err) {
		opened = open_implicitly();
		err = buf_register((uintptr_t)base, length);
	}
	delay = (opened ? st.open_us : 0) + (err ? 0 : st.reg_us);
	unlock_state();
	spend_us(delay);
	return status(err);
}

CUfileError_t cuFileBufDeregister(const void *base)
{
	struct reg *r;
	long delay = 0;
	int err;

	lock_state();
	err = enter(FN_cuFileBufDeregister);
	r = err || !base ? NULL : reg_find((uintptr_t)base);
	if (!err && !base)
		err = CU_FILE_INVALID_VALUE;
	else if (!err && !r)
		err = FAKE_CUFILE_DEREG_UNKNOWN;
	if (!err) {
		reg_remove(r);
		delay = st.dereg_us;
	}
	unlock_state();
	spend_us(delay);
	return status(err);
}

/* ====================================================================
 * File handles
 * ==================================================================== */

/* The fd of handle fh, -1 if fh is not a registered handle; lock held. */
static int handle_fd(CUfileHandle_t fh)
{
	struct fh *h;

	for (h = st.handles; h; h = h->next)
		if (h == fh)
			return h->fd;
	return -1;
}

CUfileError_t cuFileHandleRegister(CUfileHandle_t *fh, CUfileDescr_t *descr)
{
	bool opened = false;
	struct fh *h;
	long delay;
	int err;

	lock_state();
	err = enter(FN_cuFileHandleRegister);
	if (!err && (!fh || !descr ||
		     descr->type != CU_FILE_HANDLE_TYPE_OPAQUE_FD ||
		     descr->handle.fd < 0 ||
		     fcntl(descr->handle.fd, F_GETFD) < 0))
		err = CU_FILE_INVALID_VALUE;
	if (!err) {
		h = malloc(sizeof(*h));
		if (!h) {
			err = CU_FILE_NOMEM_ERROR;
		} else {
			opened = open_implicitly();
			h->fd = descr->handle.fd;
			h->next = st.handles;
			st.handles = h;
			*fh = h;
		}
	}
	delay = opened ? st.open_us : 0;
	unlock_state();
	spend_us(delay);
	return status(err);
}

void cuFileHandleDeregister(CUfileHandle_t fh)
{
	struct fh **pp, *gone = NULL;

	lock_state();
	if (!enter(FN_cuFileHandleDeregister)) {
		for (pp = &st.handles; *pp; pp = &(*pp)->next) {
			if (*pp == fh) {
				gone = *pp;
				*pp = gone->next;
				break;
			}
		}
	}
	unlock_state();
	free(gone);
}

/* ====================================================================
 * I/O
 * ==================================================================== */

/*
 * size bytes between fd at off and p, looping until done, end of file
 * or an error: the bytes moved, or -1 with errno if none was.
 */
static ssize_t move(int fd, char *p, size_t size, off_t off, bool write)
{
	size_t done = 0;
	ssize_t n;

	while (done < size) {
		if (write)
			n = pwrite(fd, p + done, size - done, off + done);
		else
			n = pread(fd, p + done, size - done, off + done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return done ? (ssize_t)done : -1;
		if (n == 0)
			break;
		done += n;
	}
	return done;
}

/* As move, for device memory nothing may touch: reads land in a scratch
 * buffer, writes write zeros. */
static ssize_t move_device(int fd, size_t size, off_t off, bool write)
{
	size_t done = 0, chunk;
	ssize_t n;
	char *buf;

	buf = calloc(1, size < SCRATCH_CHUNK ? (size ? size : 1)
					     : SCRATCH_CHUNK);
	if (!buf) {
		errno = ENOMEM;
		return -1;
	}
	while (done < size) {
		chunk = size - done < SCRATCH_CHUNK ? size - done
						    : SCRATCH_CHUNK;
		n = move(fd, buf, chunk, off + done, write);
		if (n < 0) {
			if (!done) {
				free(buf);
				return -1;
			}
			break;
		}
		done += n;
		if ((size_t)n < chunk)
			break;
	}
	free(buf);
	return done;
}

static void log_io(const struct fake_cufile_io *io)
{
	st.log[st.io_total % FAKE_CUFILE_IO_LOG] = *io;
	st.io_total++;
	if (io->registered)
		st.io_registered++;
}

/*
 * One I/O of cuFileRead, cuFileWrite, the async and batch calls, after
 * the entry point's own counting: what cuFileRead returns (see the top
 * of the file).
 */
static ssize_t do_io(CUfileHandle_t fh, const void *base, size_t size,
		     off_t file_offset, off_t buf_offset, bool write)
{
	struct fake_cufile_io io = {
		.base = base, .buf_offset = buf_offset, .size = size,
		.file_offset = file_offset, .write = write, .device = -1,
	};
	uintptr_t p = (uintptr_t)base + (uintptr_t)buf_offset;
	CUdeviceptr abase;
	struct reg *r;
	size_t asize;
	int fd, saved;

	lock_state();
	fd = handle_fd(fh);
	if (fd < 0) {
		unlock_state();
		return -CU_FILE_HANDLE_NOT_REGISTERED;
	}
	if (!base || file_offset < 0 || buf_offset < 0 ||
	    size > (size_t)SSIZE_MAX) {
		unlock_state();
		return -CU_FILE_INVALID_VALUE;
	}
	r = reg_find((uintptr_t)base);
	io.registered = r && !r->orphan && (size_t)buf_offset <= r->len &&
			size <= r->len - (size_t)buf_offset;
	if (fake_cuda_alloc_range(p, &abase, &asize, &io.device))
		io.device = -1;
	if (io.device >= 0 && size > abase + asize - p) {
		unlock_state();
		return -CU_FILE_CUDA_POINTER_RANGE_ERROR;
	}
	unlock_state();

	if (io.device >= 0)
		io.ret = move_device(fd, size, file_offset, write);
	else
		io.ret = move(fd, (char *)p, size, file_offset, write);
	saved = errno;

	lock_state();
	log_io(&io);
	unlock_state();
	errno = saved;
	return io.ret;
}

/* An injected failure as cuFileRead returns it. */
static ssize_t io_failure(int err)
{
	if (err < 0) {
		errno = -err;
		return -1;
	}
	return -(ssize_t)err;
}

ssize_t cuFileRead(CUfileHandle_t fh, void *base, size_t size,
		   off_t file_offset, off_t buf_offset)
{
	int err = enter_unlocked(FN_cuFileRead);

	if (err)
		return io_failure(err);
	return do_io(fh, base, size, file_offset, buf_offset, false);
}

ssize_t cuFileWrite(CUfileHandle_t fh, const void *base, size_t size,
		    off_t file_offset, off_t buf_offset)
{
	int err = enter_unlocked(FN_cuFileWrite);

	if (err)
		return io_failure(err);
	return do_io(fh, base, size, file_offset, buf_offset, true);
}

/* The stream calls: done at once, the outcome in *bytes_p (a negative
 * status or -1 as cuFileRead's); the stream is not looked at. */
static CUfileError_t io_async(enum fn_id fn, CUfileHandle_t fh, void *base,
			      size_t *size_p, off_t *file_offset_p,
			      off_t *buf_offset_p, ssize_t *bytes_p,
			      bool write)
{
	int err = enter_unlocked(fn);

	if (err)
		return status(err);
	if (!size_p || !file_offset_p || !buf_offset_p || !bytes_p)
		return status(CU_FILE_INVALID_VALUE);
	*bytes_p = do_io(fh, base, *size_p, *file_offset_p, *buf_offset_p,
			 write);
	return status(CU_FILE_SUCCESS);
}

CUfileError_t cuFileReadAsync(CUfileHandle_t fh, void *base, size_t *size_p,
			      off_t *file_offset_p, off_t *buf_offset_p,
			      ssize_t *bytes_p, CUstream stream)
{
	return io_async(FN_cuFileReadAsync, fh, base, size_p, file_offset_p,
			buf_offset_p, bytes_p, false);
}

CUfileError_t cuFileWriteAsync(CUfileHandle_t fh, void *base, size_t *size_p,
			       off_t *file_offset_p, off_t *buf_offset_p,
			       ssize_t *bytes_p, CUstream stream)
{
	return io_async(FN_cuFileWriteAsync, fh, base, size_p, file_offset_p,
			buf_offset_p, bytes_p, true);
}

/* ====================================================================
 * Batch I/O
 * ==================================================================== */

/* Whether b is a batch set up and not destroyed; lock held. */
static bool batch_known(const struct batch *b)
{
	const struct batch *i;

	for (i = st.batches; i; i = i->next)
		if (i == b)
			return true;
	return false;
}

CUfileError_t cuFileBatchIOSetUp(CUfileBatchHandle_t *batch_p, unsigned nr)
{
	struct batch *b = NULL;
	int err;

	lock_state();
	err = enter(FN_cuFileBatchIOSetUp);
	if (!err && (!batch_p || !nr || nr > FAKE_CUFILE_MAX_BATCH))
		err = CU_FILE_INVALID_VALUE;
	if (!err) {
		b = calloc(1, sizeof(*b) + nr * sizeof(b->events[0]));
		if (!b) {
			err = CU_FILE_NOMEM_ERROR;
		} else {
			b->nr = nr;
			b->next = st.batches;
			st.batches = b;
			*batch_p = b;
		}
	}
	unlock_state();
	return status(err);
}

/*
 * Every I/O is checked first (mode, opcode, a registered handle); then
 * each is done at once and its event kept for GetStatus.  The batch
 * holds at most its nr I/Os not yet read.
 */
CUfileError_t cuFileBatchIOSubmit(CUfileBatchHandle_t batch, unsigned nr,
				  CUfileIOParams_t *iocbp, unsigned flags)
{
	struct batch *b = batch;
	CUfileIOEvents_t *ev;
	unsigned i;
	ssize_t n;
	int err;

	lock_state();
	err = enter(FN_cuFileBatchIOSubmit);
	if (!err && (!batch_known(b) || !iocbp || !nr ||
		     nr > b->nr - b->nevents - b->busy))
		err = CU_FILE_INVALID_VALUE;
	for (i = 0; !err && i < nr; i++) {
		if (iocbp[i].mode != CUFILE_BATCH ||
		    (iocbp[i].opcode != CUFILE_READ &&
		     iocbp[i].opcode != CUFILE_WRITE) ||
		    handle_fd(iocbp[i].fh) < 0)
			err = CU_FILE_INVALID_VALUE;
	}
	if (!err)
		b->busy += nr;
	unlock_state();
	if (err)
		return status(err);

	ev = xrealloc(NULL, nr * sizeof(*ev));
	for (i = 0; i < nr; i++) {
		n = do_io(iocbp[i].fh, iocbp[i].u.batch.devPtr_base,
			  iocbp[i].u.batch.size, iocbp[i].u.batch.file_offset,
			  iocbp[i].u.batch.devPtr_offset,
			  iocbp[i].opcode == CUFILE_WRITE);
		ev[i].cookie = iocbp[i].cookie;
		ev[i].status = n < 0 ? CUFILE_FAILED : CUFILE_COMPLETE;
		ev[i].ret = (size_t)n;
	}

	lock_state();
	if (batch_known(b)) {	/* else destroyed meanwhile */
		b->busy -= nr;
		memcpy(&b->events[b->nevents], ev, nr * sizeof(*ev));
		b->nevents += nr;
	}
	unlock_state();
	free(ev);
	return status(CU_FILE_SUCCESS);
}

/* Up to *nr events, oldest first, each returned once; *nr gets how many.
 * Nothing is ever pending, so nothing waits. */
CUfileError_t cuFileBatchIOGetStatus(CUfileBatchHandle_t batch,
				     unsigned min_nr, unsigned *nr,
				     CUfileIOEvents_t *iocbp,
				     struct timespec *timeout)
{
	struct batch *b = batch;
	unsigned n = 0;
	int err;

	lock_state();
	err = enter(FN_cuFileBatchIOGetStatus);
	if (!err && (!batch_known(b) || !nr || !iocbp || min_nr > *nr))
		err = CU_FILE_INVALID_VALUE;
	if (!err) {
		n = *nr < b->nevents ? *nr : b->nevents;
		memcpy(iocbp, b->events, n * sizeof(*iocbp));
		memmove(b->events, &b->events[n],
			(b->nevents - n) * sizeof(b->events[0]));
		b->nevents -= n;
		*nr = n;
	}
	unlock_state();
	return status(err);
}

CUfileError_t cuFileBatchIOCancel(CUfileBatchHandle_t batch)
{
	int err;

	lock_state();
	err = enter(FN_cuFileBatchIOCancel);
	if (!err && !batch_known(batch))
		err = CU_FILE_INVALID_VALUE;
	unlock_state();
	return status(err);
}

void cuFileBatchIODestroy(CUfileBatchHandle_t batch)
{
	struct batch **pp, *gone = NULL;

	lock_state();
	if (!enter(FN_cuFileBatchIODestroy)) {
		for (pp = &st.batches; *pp; pp = &(*pp)->next) {
			if (*pp == batch) {
				gone = *pp;
				*pp = gone->next;
				break;
			}
		}
	}
	unlock_state();
	free(gone);
}
