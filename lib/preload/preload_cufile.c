// SPDX-License-Identifier: BSD-3-Clause
/*
 * preload_cufile.c - libgdrcache-preload.so's part for cuFile programs:
 * their cuFileBufRegister, cuFileBufDeregister, cuFileRead and
 * cuFileWrite served from a cache that registers with GPUDirect Storage.
 *
 * A cuFile registration costs milliseconds (3-25 ms to register and
 * 0.7-5 ms to deregister, by size, on an H200 with libcufile 1.15:
 * shared/research/storage-probe.md), and programs
 * either register around every I/O (PyTorch's gds_register_buffer
 * users) or never (cuFile then reads through its bounce buffers).  Here
 * both get one registration per allocation, kept until the memory is
 * freed or evicted: one gdrc context with gdrc_config.cufile =
 * GDRC_CUFILE_ALL (GPU and host memory), made at the first
 * cuFileBufRegister, cuFileRead or cuFileWrite (never at load: its
 * cuFileDriverOpen costs 0.2-0.5 s), once.
 *
 *   cuFileBufRegister(p, len, flags): p already registered by the
 *     program: CU_FILE_MEMORY_ALREADY_REGISTERED, as cuFile answers a
 *     second registration of a pointer, with no call made.  Else a
 *     gdrc_mr_get of [p, p + len), held for the program in a table
 *     keyed by p: success.  Flags other than 0, and what the cache
 *     refuses (bad input, managed memory, a range past its allocation,
 *     limits), go to cuFile, whose status is returned; if it
 *     registered, the table notes p as cuFile's own ("passed through").
 *     So interior and overlapping registrations (other pointers) are
 *     accepted as cuFile accepts them, and bad input gets cuFile's own
 *     status.
 *   cuFileBufDeregister(p): the cache's reference is put (the
 *     registration stays cached) and success returned; a passed-through
 *     one goes to cuFile.  A p the program has not registered goes to
 *     cuFile for its error, unless a registration of the cache covers
 *     p: cuFile would deregister the cache's own registration there
 *     (the program's second deregistration of its buffer), so the
 *     answer is cuFile's for a pointer it does not hold,
 *     CU_FILE_MEMORY_NOT_REGISTERED, without a call.
 *   cuFileRead / cuFileWrite(fh, base, size, file_offset, buf_offset):
 *     a gdrc_mr_get of [base + buf_offset, size) (GPU memory: its whole
 *     allocation is registered), and the I/O made with the registered
 *     base and the offset from it, so that cuFile finds its
 *     registration; then the reference is put.  Size 0, a negative
 *     offset, a base the program registered with cuFile itself, and
 *     whatever the cache refuses go to cuFile unchanged (its bounce
 *     buffers, as without the preload).
 *
 * Registrations the program holds here are never deregistered behind
 * its back while their memory lives: the reference held keeps them,
 * and eviction never takes a held one.  When the memory is freed first
 * (cuMemFree, cudaFree, cuMemUnmap, cuMemFreeHost... without
 * cuFileBufDeregister: cuFile would keep the registration and refuse
 * the next one at that address, 5023, storage-probe.md), the library
 * calls cufile_on_free inside the free, before the driver frees
 * (gdrc_set_free_fn): each registration of the program whose memory
 * that is (the range gdrc_mr_query's key_addr and key_length give; a
 * passed-through one's allocation) is released there, the cache's by
 * gdrc_mr_put (which deregisters at once: stat free_deregs), cuFile's
 * own by cuFileBufDeregister.  Its pointer stays in the table marked
 * freed, so that the program's late cuFileBufDeregister of it still
 * succeeds as cuFile's would, and a new registration at that address is
 * accepted.  One warning says the program does this; GDRC_STATS=1
 * prints at exit how often, with what was served (a warn line: the
 * preload's lines pass gdrc_log_printf's level filter, whose default
 * is warn; a debug line without it).  Without the
 * CUDA free hooks (gdrc_set_free_fn says GDRC_ERR_UNSUPPORTED) an info
 * line says so and such registrations stay, as without the preload.
 *
 * Passed through untouched: everything with GDRC_PRELOAD_CUFILE=0, in a
 * fork child, when the context could not be made (logged once), and
 * every call made while this thread is inside a real cuFile call or a
 * gdrc call from here (libcufile may call its own exported names).
 * Without libcufile in the process (dlsym(RTLD_NEXT), then a
 * dlopen(RTLD_NOLOAD) of GDRC_CUFILE_LIBRARY for one loaded in a local
 * scope) the four return CU_FILE_DRIVER_NOT_INITIALIZED, cuFileRead and
 * cuFileWrite its negative, as cuFile's own errors come back.
 *
 * Not interposed: cuFileReadAsync, cuFileWriteAsync and
 * cuFileBatchIOSubmit.  Their I/O runs after the call returns, reading
 * its size and offsets through pointers at that time: a reference of
 * the cache would have to live until the stream or the batch reaches
 * it.  They find a registration the program made here only where its
 * pointer is the registered base (GPU memory at its allocation's start,
 * page-aligned host memory); others go through cuFile's bounce buffers.
 * A registration of interior CUDA-pinned host memory (cuMemHostAlloc)
 * that does not cover the allocation's start is not released by its
 * free (the free names the start).
 *
 * Invariant: the table holds at most one entry per pointer; a live one
 * holds one reference of the cache (mr) or stands for one cuFile
 * registration of the program's, a freed one holds nothing.
 *
 * Locks: cf_lock guards the table (a leaf: never held across a gdrc_*
 * or cuFile call, nor any other call); cf_ctx_once makes the context.
 * cufile_on_free runs inside the program's CUDA free (maybe under its
 * allocator's lock), takes cf_lock and calls gdrc_mr_put and cuFile.
 *
 * Callers: the program (the four entry points, exported unversioned by
 * preload.map); libgdrcache's CUDA free step (cufile_on_free).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gdrcache.h>

#include "cufile/cufile_types.h"

#define PRELOAD_TLS __thread __attribute__((tls_model("initial-exec")))

/* Buckets of the table of the program's registrations. */
#define CF_BUCKETS 1024u

/* cuFileBufDeregister's answer for a pointer the program has not
 * registered where the cache holds a registration (see above): what
 * libcufile 1.15.1 answers for a pointer never registered, an interior
 * one and one deregistered already (tests/gpu/cufile_semantics.c). */
#define PRELOAD_CUFILE_UNKNOWN CU_FILE_MEMORY_NOT_REGISTERED

/* libcufile's entry points, as its cufile.h declares them. */
GDRC_API CUfileError_t cuFileBufRegister(const void *base, size_t length,
					 int flags);
GDRC_API CUfileError_t cuFileBufDeregister(const void *base);
GDRC_API ssize_t cuFileRead(CUfileHandle_t fh, void *base, size_t size,
			    off_t file_offset, off_t buf_offset);
GDRC_API ssize_t cuFileWrite(CUfileHandle_t fh, const void *base, size_t size,
			     off_t file_offset, off_t buf_offset);

/* One pointer the program registered with cuFileBufRegister. */
struct cf_entry {
	struct cf_entry *next; /* in its bucket */
	const void *ptr;       /* the program's pointer: the key */
	struct gdrc_mr *mr;    /* held for the program; NULL: cuFile's own */
	int freed;             /* its memory was freed while registered:
				* released, kept for a late deregister */
	uintptr_t start, end;  /* a free overlapping this ends it */
};

static struct {
	CUfileError_t (*buf_register)(const void *, size_t, int);
	CUfileError_t (*buf_deregister)(const void *);
	ssize_t (*read)(CUfileHandle_t, void *, size_t, off_t, off_t);
	ssize_t (*write)(CUfileHandle_t, const void *, size_t, off_t, off_t);
} real;

static pthread_once_t cf_resolve_once = PTHREAD_ONCE_INIT;
static pthread_once_t cf_ctx_once = PTHREAD_ONCE_INIT;
static struct gdrc_ctx *_Atomic cf_ctx; /* set once, by cf_ctx_make */
static int cf_on;     /* GDRC_PRELOAD_CUFILE, fixed at load */
static int cf_stats;  /* GDRC_STATS, fixed at load */
static int cf_forked; /* in a fork child */

/* The table.  Under cf_lock: */
static pthread_mutex_t cf_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cf_entry *cf_bucket[CF_BUCKETS];
/* Entries whose memory lives, and those of them passed through: read
 * without the lock to skip the free walk and the read path's look. */
static atomic_ulong cf_live;
static atomic_ulong cf_npass;

/* What the exit line reports. */
static atomic_ulong cf_n_cached, cf_n_passed, cf_n_io_cached, cf_n_io_passed,
	cf_n_freed;

/* This thread is inside a real cuFile call or a gdrc call made here. */
static PRELOAD_TLS int tls_inside;

/* ------------------------------------------------------------------
 * Real cuFile.
 * ------------------------------------------------------------------ */

/* The four entry points as handle (RTLD_NEXT, or a library's) gives
 * them.  @return 1 if all four were found. */
static int cf_resolve_in(void *handle)
{
	real.buf_register = dlsym(handle, "cuFileBufRegister");
	real.buf_deregister = dlsym(handle, "cuFileBufDeregister");
	real.read = dlsym(handle, "cuFileRead");
	real.write = dlsym(handle, "cuFileWrite");
	return real.buf_register && real.buf_deregister && real.read &&
	       real.write;
}

static void cf_resolve(void)
{
	char path[PATH_MAX];
	void *h = NULL;
	int found;

	if (cf_resolve_in(RTLD_NEXT))
		return;
	/* A libcufile loaded in a local scope (a dlopen'd library's
	 * dependency, as a Python extension's) is not next in the global
	 * one: the one loaded under the name the library uses. */
	if (!gdrc_knob_value("GDRC_CUFILE_LIBRARY", path, sizeof(path)) &&
	    strcmp(path, "none"))
		h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	found = h && cf_resolve_in(h);
	if (h)
		dlclose(h); /* it stays: loaded before, by someone else */
	gdrc_log_printf(GDRC_LOG_DEBUG, "preload: cuFile entry points %s",
			found ? "found" : "missing: cuFile calls fail");
}

static CUfileError_t real_register(const void *p, size_t len, int flags)
{
	CUfileError_t e = { CU_FILE_DRIVER_NOT_INITIALIZED, 0 };

	if (real.buf_register) {
		tls_inside++;
		e = real.buf_register(p, len, flags);
		tls_inside--;
	}
	return e;
}

static CUfileError_t real_deregister(const void *p)
{
	CUfileError_t e = { CU_FILE_DRIVER_NOT_INITIALIZED, 0 };

	if (real.buf_deregister) {
		tls_inside++;
		e = real.buf_deregister(p);
		tls_inside--;
	}
	return e;
}

static ssize_t real_io(int write, CUfileHandle_t fh, void *base, size_t size,
		       off_t file_offset, off_t buf_offset)
{
	ssize_t ret = -CU_FILE_DRIVER_NOT_INITIALIZED;

	tls_inside++;
	if (write && real.write)
		ret = real.write(fh, base, size, file_offset, buf_offset);
	else if (!write && real.read)
		ret = real.read(fh, base, size, file_offset, buf_offset);
	tls_inside--;
	return ret;
}

/* ------------------------------------------------------------------
 * The context.
 * ------------------------------------------------------------------ */

static void cf_at_exit(void)
{
	unsigned long freed = atomic_load(&cf_n_freed);

	if (cf_forked)
		return;
	gdrc_log_printf(cf_stats ? GDRC_LOG_WARN : GDRC_LOG_DEBUG,
			"preload: cufile: registrations %lu served by the "
			"cache, %lu passed to cufile; i/o %lu through the "
			"cache, %lu passed to cufile; %lu freed while "
			"registered",
			atomic_load(&cf_n_cached), atomic_load(&cf_n_passed),
			atomic_load(&cf_n_io_cached),
			atomic_load(&cf_n_io_passed), freed);
}

static void cufile_on_free(void *arg, uintptr_t start, uintptr_t end);

static void cf_ctx_make(void)
{
	struct gdrc_config cfg = { .field_mask = GDRC_CONFIG_FIELD_CUFILE,
				   .cufile = GDRC_CUFILE_ALL };
	struct gdrc_ctx *ctx;
	gdrc_status_t status;
	const char *why = NULL;

	tls_inside++;
	status = gdrc_init(&cfg, &ctx);
	if (status) {
		tls_inside--;
		gdrc_log_printf(GDRC_LOG_WARN,
				"preload: no cuFile cache (%s): cuFile calls "
				"pass through",
				gdrc_status_str(status));
		return;
	}
	status = gdrc_set_free_fn(ctx, cufile_on_free, ctx);
	if (status == GDRC_ERR_UNSUPPORTED) {
		gdrc_source_status(ctx, GDRC_SOURCE_CUDA_HOOKS, &why, NULL);
		gdrc_log_printf(GDRC_LOG_INFO,
				"preload: the CUDA free hooks are off (%s): "
				"memory freed while registered with "
				"cuFileBufRegister stays registered",
				why ? why : "unknown");
	}
	tls_inside--;
	if (atexit(cf_at_exit))
		gdrc_log_printf(GDRC_LOG_DEBUG, "preload: atexit failed: "
						"no cufile line at exit");
	atomic_store_explicit(&cf_ctx, ctx, memory_order_release);
}

/* The context, made at the first call that needs it; NULL: pass
 * through. */
static struct gdrc_ctx *cf_ctx_get(void)
{
	if (!cf_on || cf_forked || tls_inside)
		return NULL;
	pthread_once(&cf_ctx_once, cf_ctx_make);
	return atomic_load_explicit(&cf_ctx, memory_order_acquire);
}

/* ------------------------------------------------------------------
 * The table.
 * ------------------------------------------------------------------ */

static struct cf_entry **cf_bucket_of(const void *p)
{
	uintptr_t k = (uintptr_t)p;

	return &cf_bucket[(k >> 6 ^ k >> 16) % CF_BUCKETS];
}

/* Under cf_lock: p's entry, or NULL. */
static struct cf_entry *cf_find(const void *p)
{
	for (struct cf_entry *e = *cf_bucket_of(p); e; e = e->next)
		if (e->ptr == p)
			return e;
	return NULL;
}

/* Under cf_lock. */
static void cf_unlink(struct cf_entry *e)
{
	struct cf_entry **pp = cf_bucket_of(e->ptr);

	while (*pp != e)
		pp = &(*pp)->next;
	*pp = e->next;
	if (!e->freed) {
		atomic_fetch_sub(&cf_live, 1);
		if (!e->mr)
			atomic_fetch_sub(&cf_npass, 1);
	}
}

/* Under cf_lock. */
static void cf_link(struct cf_entry *e)
{
	struct cf_entry **pp = cf_bucket_of(e->ptr);

	e->next = *pp;
	*pp = e;
	atomic_fetch_add(&cf_live, 1);
	if (!e->mr)
		atomic_fetch_add(&cf_npass, 1);
}

/*
 * Add e (its memory live) for e->ptr, replacing a freed entry there.
 * @return 0; -1 if the program registered e->ptr meanwhile (another
 *         thread): e is not added.
 */
static int cf_add(struct cf_entry *e)
{
	struct cf_entry *old;

	pthread_mutex_lock(&cf_lock);
	old = cf_find(e->ptr);
	if (old && !old->freed) {
		pthread_mutex_unlock(&cf_lock);
		return -1;
	}
	if (old)
		cf_unlink(old);
	cf_link(e);
	pthread_mutex_unlock(&cf_lock);
	free(old);
	return 0;
}

/* ------------------------------------------------------------------
 * The interposed calls.
 * ------------------------------------------------------------------ */

/* A registration of e->ptr served by the cache.  @return 0 (e added),
 * or -1: refused. */
static int cf_register_cached(struct gdrc_ctx *ctx, struct cf_entry *e,
			      size_t len)
{
	struct gdrc_mr_info info;
	struct gdrc_mr *mr;
	gdrc_status_t status;

	tls_inside++;
	status = gdrc_mr_get(ctx, e->ptr, len, 0, 0, &mr);
	if (!status) {
		gdrc_mr_query(mr, &info);
		e->mr = mr;
		e->start = info.key_addr;
		e->end = info.key_addr + info.key_length;
	}
	tls_inside--;
	return status ? -1 : 0;
}

/* What the cache does not serve goes to cuFile; what it registers there
 * is noted as cuFile's own, ended by its allocation's free too. */
static CUfileError_t cf_register_passed(struct gdrc_ctx *ctx,
					struct cf_entry *e, size_t len,
					int flags)
{
	struct gdrc_ptr_info pinfo;
	CUfileError_t ret;

	atomic_fetch_add_explicit(&cf_n_passed, 1, memory_order_relaxed);
	ret = real_register(e->ptr, len, flags);
	if (ret.err != CU_FILE_SUCCESS) {
		free(e);
		return ret;
	}
	e->start = (uintptr_t)e->ptr;
	e->end = (uintptr_t)e->ptr + len;
	tls_inside++;
	if (!gdrc_ptr_query(ctx, e->ptr, &pinfo) && pinfo.alloc_size) {
		if (pinfo.alloc_base < e->start)
			e->start = pinfo.alloc_base;
		if (pinfo.alloc_base + pinfo.alloc_size > e->end)
			e->end = pinfo.alloc_base + pinfo.alloc_size;
	}
	tls_inside--;
	/* Another thread's registration of the same pointer raced this
	 * one: cuFile refused one of the two, which is not in the table. */
	if (cf_add(e))
		free(e);
	return ret;
}

GDRC_API CUfileError_t cuFileBufRegister(const void *p, size_t len,
					 int flags)
{
	struct gdrc_ctx *ctx;
	struct cf_entry *e;
	int known;

	pthread_once(&cf_resolve_once, cf_resolve);
	ctx = cf_ctx_get();
	if (!ctx)
		return real_register(p, len, flags);
	pthread_mutex_lock(&cf_lock);
	e = cf_find(p);
	known = e && !e->freed;
	pthread_mutex_unlock(&cf_lock);
	if (known)
		return (CUfileError_t){ CU_FILE_MEMORY_ALREADY_REGISTERED, 0 };
	e = calloc(1, sizeof(*e));
	if (!e)
		return (CUfileError_t){ CU_FILE_NOMEM_ERROR, 0 };
	e->ptr = p;
	/* Flags (none is defined yet) are cuFile's to judge. */
	if (flags || cf_register_cached(ctx, e, len))
		return cf_register_passed(ctx, e, len, flags);
	if (cf_add(e)) {
		tls_inside++;
		gdrc_mr_put(ctx, e->mr);
		tls_inside--;
		free(e);
		return (CUfileError_t){ CU_FILE_MEMORY_ALREADY_REGISTERED, 0 };
	}
	atomic_fetch_add_explicit(&cf_n_cached, 1, memory_order_relaxed);
	return (CUfileError_t){ CU_FILE_SUCCESS, 0 };
}

GDRC_API CUfileError_t cuFileBufDeregister(const void *p)
{
	struct gdrc_ptr_info pinfo;
	struct gdrc_ctx *ctx;
	struct cf_entry *e;
	CUfileError_t ret;

	pthread_once(&cf_resolve_once, cf_resolve);
	ctx = tls_inside || cf_forked ?
		      NULL :
		      atomic_load_explicit(&cf_ctx, memory_order_acquire);
	if (!ctx)
		return real_deregister(p);
	pthread_mutex_lock(&cf_lock);
	e = cf_find(p);
	if (e)
		cf_unlink(e);
	pthread_mutex_unlock(&cf_lock);
	if (!e) {
		int ours;

		tls_inside++;
		ours = !gdrc_ptr_query(ctx, p, &pinfo) &&
		       (pinfo.flags & GDRC_PTR_INFO_CACHED);
		tls_inside--;
		if (ours)
			return (CUfileError_t){ PRELOAD_CUFILE_UNKNOWN, 0 };
		return real_deregister(p);
	}
	if (e->freed) {
		free(e);
		return (CUfileError_t){ CU_FILE_SUCCESS, 0 };
	}
	if (e->mr) {
		tls_inside++;
		gdrc_mr_put(ctx, e->mr);
		tls_inside--;
		free(e);
		return (CUfileError_t){ CU_FILE_SUCCESS, 0 };
	}
	ret = real_deregister(p);
	if (ret.err != CU_FILE_SUCCESS) {
		/* Still cuFile's, then: back in the table (unless the
		 * program registered p again meanwhile). */
		if (cf_add(e))
			free(e);
		return ret;
	}
	free(e);
	return ret;
}

/*
 * Is base a pointer the program registered with cuFile itself?  Its
 * I/O then goes to cuFile as it is: the cache would try to register the
 * same base again, and fail, at every I/O.
 */
static int cf_passed_through(const void *base)
{
	struct cf_entry *e;
	int ret;

	if (!atomic_load_explicit(&cf_npass, memory_order_relaxed))
		return 0;
	pthread_mutex_lock(&cf_lock);
	e = cf_find(base);
	ret = e && !e->mr && !e->freed;
	pthread_mutex_unlock(&cf_lock);
	return ret;
}

static ssize_t cf_io(int write, CUfileHandle_t fh, void *base, size_t size,
		     off_t file_offset, off_t buf_offset)
{
	struct gdrc_mr_info info;
	struct gdrc_ctx *ctx;
	struct gdrc_mr *mr;
	uintptr_t p = (uintptr_t)base + (uintptr_t)buf_offset;
	gdrc_status_t status;
	ssize_t ret;

	pthread_once(&cf_resolve_once, cf_resolve);
	ctx = size && base && buf_offset >= 0 ? cf_ctx_get() : NULL;
	if (!ctx || cf_passed_through(base))
		goto passed;
	tls_inside++;
	status = gdrc_mr_get(ctx, (const void *)p, size, 0, 0, &mr);
	if (!status)
		gdrc_mr_query(mr, &info);
	tls_inside--;
	if (status)
		goto passed;
	ret = real_io(write, fh, (void *)info.addr, size, file_offset,
		      (off_t)(p - info.addr));
	tls_inside++;
	gdrc_mr_put(ctx, mr);
	tls_inside--;
	atomic_fetch_add_explicit(&cf_n_io_cached, 1, memory_order_relaxed);
	return ret;
passed:
	if (ctx)
		atomic_fetch_add_explicit(&cf_n_io_passed, 1,
					  memory_order_relaxed);
	return real_io(write, fh, base, size, file_offset, buf_offset);
}

GDRC_API ssize_t cuFileRead(CUfileHandle_t fh, void *base, size_t size,
			    off_t file_offset, off_t buf_offset)
{
	return cf_io(0, fh, base, size, file_offset, buf_offset);
}

GDRC_API ssize_t cuFileWrite(CUfileHandle_t fh, const void *base, size_t size,
			     off_t file_offset, off_t buf_offset)
{
	return cf_io(1, fh, (void *)base, size, file_offset, buf_offset);
}

/* ------------------------------------------------------------------
 * Frees.
 * ------------------------------------------------------------------ */

/*
 * In the thread that frees [start, end) (a cuMemFree: [base, base + 1)),
 * inside the free, before the driver frees, after the cache released
 * its own unused registrations of it (gdrc_set_free_fn): the program's
 * registrations of that memory are released, their pointers kept as
 * freed.  Takes cf_lock, never across a call.
 */
static void cufile_on_free(void *arg, uintptr_t start, uintptr_t end)
{
	static atomic_flag said = ATOMIC_FLAG_INIT;
	struct gdrc_ctx *ctx = arg;
	struct {
		const void *ptr;
		struct gdrc_mr *mr;
	} batch[32];
	unsigned n, total = 0;

	if (!atomic_load_explicit(&cf_live, memory_order_relaxed))
		return;
	/* In batches: the lock is not held across the releases. */
	do {
		n = 0;
		pthread_mutex_lock(&cf_lock);
		for (unsigned b = 0; b < CF_BUCKETS && n < 32; b++) {
			for (struct cf_entry *e = cf_bucket[b]; e && n < 32;
			     e = e->next) {
				if (e->freed || e->start >= end ||
				    start >= e->end)
					continue;
				batch[n].ptr = e->ptr;
				batch[n].mr = e->mr;
				n++;
				/* Counted out, kept for a late deregister. */
				atomic_fetch_sub(&cf_live, 1);
				if (!e->mr)
					atomic_fetch_sub(&cf_npass, 1);
				e->freed = 1;
				e->mr = NULL;
			}
		}
		pthread_mutex_unlock(&cf_lock);
		tls_inside++;
		for (unsigned i = 0; i < n; i++) {
			if (batch[i].mr)
				gdrc_mr_put(ctx, batch[i].mr);
			else
				real_deregister(batch[i].ptr);
		}
		tls_inside--;
		total += n;
	} while (n == 32);
	if (!total)
		return;
	atomic_fetch_add(&cf_n_freed, total);
	if (!atomic_flag_test_and_set(&said))
		gdrc_log_printf(GDRC_LOG_WARN,
				"preload: the program freed memory it had "
				"registered with cuFileBufRegister without "
				"cuFileBufDeregister (%#lx): released at the "
				"free (GDRC_STATS=1 counts them at exit)",
				(unsigned long)start);
}

/* ------------------------------------------------------------------
 * Load time.
 * ------------------------------------------------------------------ */

/* A fork child: the parent's context is not its own, and a thread that
 * held cf_lock at the fork is not in the child. */
static void cf_atfork_child(void)
{
	pthread_mutex_init(&cf_lock, NULL);
	cf_forked = 1;
}

/* GDRC_PRELOAD_CUFILE and GDRC_STATS are read here, once; nothing else
 * happens at load (the context and the entry points come at the first
 * call). */
__attribute__((constructor)) static void preload_cufile_init(void)
{
	char on[8], stats[8];

	if (gdrc_knob_value("GDRC_PRELOAD_CUFILE", on, sizeof(on)) ||
	    gdrc_knob_value("GDRC_STATS", stats, sizeof(stats))) {
		gdrc_log_printf(GDRC_LOG_ERROR,
				"preload: bad GDRC_* settings: cuFile calls "
				"pass through");
		return;
	}
	if (pthread_atfork(NULL, NULL, cf_atfork_child))
		return;
	cf_stats = !strcmp(stats, "1");
	cf_on = !strcmp(on, "1");
}
