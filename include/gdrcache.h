/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gdrcache.h - the public interface of libgdrcache, a registration
 * (pin-down) cache for RDMA on host and GPU memory.
 *
 * Object model
 *   struct gdrc_ctx   one cache.  Created by gdrc_init(), destroyed by
 *                     gdrc_fini().  Holds the registrations made for one
 *                     protection domain (or for none: the "none" backend).
 *   struct gdrc_mr    one registration, covering a page-rounded range.
 *                     gdrc_mr_get() returns it with a reference held;
 *                     gdrc_mr_put() drops the reference.  A registration
 *                     nobody holds stays cached ("lazy unpinning") until
 *                     it is evicted (limits) or invalidated (the memory
 *                     was unmapped or freed).
 *
 * GPU memory
 *   With a CUDA driver present (loaded at run time; nothing CUDA is needed
 *   to build), every miss classifies its pointer with one
 *   cuPointerGetAttributes call: host memory (plain, registered or
 *   cuMemHostAlloc'd) takes the host path; device and stream-ordered pool
 *   memory are registered as the whole allocation rounded out to 64 KiB,
 *   VMM memory as the whole mappings (cuMemMap) the request covers;
 *   managed memory is refused (GDRC_ERR_UNSUPPORTED).  A hit is
 *   validated against the CU_POINTER_ATTRIBUTE_BUFFER_ID of each
 *   allocation or mapping it touches, so a free and reallocation, or an
 *   unmap and map, at the same address is never served stale.
 *   CU_POINTER_ATTRIBUTE_SYNC_MEMOPS is set once per allocation.  Driver
 *   calls that need a context run in the memory's own (the caller's
 *   current context is put back), from any thread.
 *
 * Invalidation
 *   Host memory: libgdrcache watches munmap, mremap, madvise(DONTNEED,
 *   FREE, REMOVE), brk/sbrk shrinking and mmap(MAP_FIXED) over an old
 *   mapping, including glibc's own internal calls (free() of a large
 *   block).  After such a call returns, the next gdrc_mr_get() on the
 *   range returns a new registration (a new id); the old one stays valid
 *   for whoever still holds it, and is released at its last put.
 *   Callers that learn of frees themselves use gdrc_invalidate().
 *
 * Thread safety
 *   Every function is safe to call from any thread at any time, except
 *   gdrc_fini(), which must not run concurrently with other calls on the
 *   same context.  Each function says so again below.
 *
 * fork()
 *   A child process must not use its parent's registrations.  In the
 *   child every call on a context created by the parent returns
 *   GDRC_ERR_FORK (gdrc_mr_put and gdrc_fini only release memory); the
 *   child may create contexts of its own.  See docs/threading.md.
 *
 * Misuse
 *   A call on a finished context (also a second gdrc_fini), and a
 *   gdrc_mr_put with no get outstanding on its handle (a double put), of
 *   a handle already let go of, of another context's registration or of
 *   a pointer that is not a registration, is detected where it is made:
 *   one error line names the call and the context or handle,
 *   GDRC_STAT_MISUSE counts it, and then GDRC_MISUSE decides: abort, or
 *   warn (the call changes nothing and returns GDRC_ERR_INVALID_PARAM
 *   where it returns a status).  Detection is by checks the library can
 *   make cheaply, not a guarantee: a pointer to unmapped memory still
 *   faults, and a handle whose memory was reused for a later get may
 *   pass as that one.  docs/reliability.md lists what is caught.
 *
 * Environment
 *   GDRC_* variables, read once at each gdrc_init (limits, backends,
 *   hooks, validation, logging, misuse policy, ...): the list, with each
 *   default and meaning, is docs/env.md, which a test keeps equal to the
 *   library's own table; at run time, gdrc_knob_describe and
 *   gdrc_knob_value, or `gdrc-info`.
 *
 * Include this header alone: it needs neither verbs.h nor a CUDA header.
 */
#ifndef GDRCACHE_H
#define GDRCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GDRC_API __attribute__((visibility("default")))
#else
#define GDRC_API
#endif

struct ibv_pd;
struct io_uring;
struct gdrc_ctx;
struct gdrc_mr;

/* ====================================================================
 * Version
 * ==================================================================== */

#define GDRC_VERSION_MAJOR 0
#define GDRC_VERSION_MINOR 1
#define GDRC_VERSION_PATCH 0
#define GDRC_VERSION                                                       \
	((GDRC_VERSION_MAJOR << 16) | (GDRC_VERSION_MINOR << 8) |          \
	 GDRC_VERSION_PATCH)

/** @return GDRC_VERSION of the library actually loaded.  Thread safe. */
GDRC_API unsigned gdrc_version(void);
/** @return "MAJOR.MINOR.PATCH" of the library loaded.  Thread safe. */
GDRC_API const char *gdrc_version_string(void);

/* ====================================================================
 * Status
 *
 * Zero is success, every error is negative.  Values are fixed: new ones
 * are appended, none is ever renumbered or removed.
 * ==================================================================== */

typedef enum gdrc_status {
	GDRC_OK = 0,
	GDRC_ERR_INVALID_PARAM = -1, /* bad argument; nothing changed */
	GDRC_ERR_NO_MEMORY = -2,     /* host memory or pinnable memory */
	GDRC_ERR_UNSUPPORTED = -3,   /* memory kind or feature not handled */
	GDRC_ERR_LIMIT = -4,         /* a configured limit would be exceeded */
	GDRC_ERR_NO_DEVICE = -5,     /* no GPU or NIC where one is needed */
	GDRC_ERR_CUDA = -6,          /* the CUDA driver failed */
	GDRC_ERR_VERBS = -7,         /* libibverbs failed */
	GDRC_ERR_KMOD = -8,          /* the gdrcache kernel module failed */
	GDRC_ERR_BUSY = -9,          /* resource in use */
	GDRC_ERR_FORK = -10,         /* context belongs to the parent process */
	GDRC_ERR_STALE = -11,        /* gdrc_mr_reget: put it and get again */
	GDRC_ERR_IO = -12,           /* io_uring refused a registration */
	GDRC_ERR_CUFILE = -13,       /* cuFile refused a registration */
} gdrc_status_t;

/**
 * Describe a status.
 * @return a static, human-readable string; never NULL, also for values
 *         that are not in the enum ("unknown status").  Thread safe.
 */
GDRC_API const char *gdrc_status_str(gdrc_status_t status);

/* ====================================================================
 * Context
 * ==================================================================== */

/* Bits of gdrc_config.field_mask: which fields the caller has set. */
#define GDRC_CONFIG_FIELD_PD (1ULL << 0)
#define GDRC_CONFIG_FIELD_MAX_REGIONS (1ULL << 1)
#define GDRC_CONFIG_FIELD_MAX_BYTES (1ULL << 2)
#define GDRC_CONFIG_FIELD_IO_URING (1ULL << 3)
#define GDRC_CONFIG_FIELD_IO_URING_SLOTS (1ULL << 4)
#define GDRC_CONFIG_FIELD_CUFILE (1ULL << 5)

/* gdrc_config.cufile: the memory a context registers with cuFile; the
 * other kind is refused (GDRC_ERR_UNSUPPORTED). */
#define GDRC_CUFILE_GPU (1u << 0)  /* GPU memory (and CUDA-pinned host
				    * memory is host memory) */
#define GDRC_CUFILE_HOST (1u << 1) /* host memory */
#define GDRC_CUFILE_ALL (GDRC_CUFILE_GPU | GDRC_CUFILE_HOST)

/* The kernel's own bounds on an io_uring buffer table. */
#define GDRC_IO_URING_SLOTS_MAX 16384u

/* "No limit" for max_regions and max_bytes. */
#define GDRC_LIMIT_NONE UINT64_MAX

/**
 * Context parameters.  A field is used only when its bit is set in
 * field_mask; otherwise its value comes from the environment (GDRC_*),
 * then from the built-in default.  Fields are only ever appended.
 */
struct gdrc_config {
	uint64_t field_mask;  /* GDRC_CONFIG_FIELD_* */
	struct ibv_pd *pd;    /* register with this PD; NULL: no NIC */
	uint64_t max_regions; /* cached registrations; GDRC_LIMIT_NONE */
	uint64_t max_bytes;   /* registered bytes; GDRC_LIMIT_NONE */
	/* Register host memory as fixed buffers of this ring
	 * (liburing's struct io_uring, set up; it must stay set up until
	 * gdrc_fini).  The context registers a sparse buffer table of
	 * ring_slots slots on it at gdrc_init and unregisters it at
	 * gdrc_fini: the program registers no buffer table of its own on
	 * that ring meanwhile.  gdrc_mr_lkey gives a registration's buffer
	 * index (io_uring_prep_read_fixed, _write_fixed); docs/backends.md,
	 * "Storage". */
	struct io_uring *ring;
	uint32_t ring_slots;  /* table size, 1 to GDRC_IO_URING_SLOTS_MAX;
			       * unset: GDRC_IO_URING_SLOTS */
	/* GDRC_CUFILE_* bits: register that memory with GPUDirect Storage
	 * (cuFileBufRegister of libcufile, loaded at run time, its driver
	 * opened at gdrc_init); keys 0, gdrc_mr_query gives the
	 * registered base for cuFileRead and cuFileWrite
	 * (docs/backends.md, "cuFile").  No PD and no ring with it.  0:
	 * no cuFile (unless GDRC_BACKEND=cufile, which means both). */
	uint32_t cufile;
};

/**
 * Create a cache.
 *
 * @param [in]  cfg    parameters, or NULL for all defaults.
 * @param [out] ctx_p  the new context.
 *
 * @return GDRC_OK;
 *         GDRC_ERR_INVALID_PARAM if ctx_p is NULL, field_mask has unknown
 *         bits, or a GDRC_* environment variable has a bad value (a log
 *         line names it);
 *         GDRC_ERR_NO_MEMORY;
 *         GDRC_ERR_LIMIT if too many contexts exist (64);
 *         GDRC_ERR_UNSUPPORTED if GDRC_BACKEND=verbs but no PD is given
 *         or the library was built without libibverbs.
 *         With GDRC_CONFIG_FIELD_IO_URING (docs/backends.md, "Storage"):
 *         GDRC_ERR_INVALID_PARAM also for a NULL ring, one that is not
 *         set up (its fd is no io_uring), a PD given as well, or
 *         ring_slots 0 or over GDRC_IO_URING_SLOTS_MAX;
 *         GDRC_ERR_UNSUPPORTED for a ring set up with
 *         IORING_SETUP_SINGLE_ISSUER (it takes registrations from one
 *         thread only, and the cache releases slots from any), a kernel
 *         without sparse buffer tables (before 5.19), GDRC_BACKEND
 *         naming neither auto nor io_uring, or a library built without
 *         liburing;
 *         GDRC_ERR_BUSY if the ring already has a buffer table;
 *         GDRC_ERR_NO_MEMORY if the kernel could not make the table.
 *         Nothing is left registered on the ring when it fails.
 *         With GDRC_CONFIG_FIELD_CUFILE and cufile nonzero
 *         (docs/backends.md, "cuFile"): GDRC_ERR_INVALID_PARAM also for
 *         unknown bits in cufile, or a PD or a ring given as well; GDRC_ERR_UNSUPPORTED when
 *         libcufile cannot be loaded (GDRC_CUFILE_LIBRARY: missing,
 *         none, or lacking an entry point) or GDRC_BACKEND names
 *         neither auto nor cufile; GDRC_ERR_NO_DEVICE when
 *         cuFileDriverOpen fails (its status is logged).
 *
 * Thread safe.  The first call installs the process-wide memory hooks.
 */
GDRC_API gdrc_status_t gdrc_init(const struct gdrc_config *cfg,
				 struct gdrc_ctx **ctx_p);

/**
 * Destroy a cache: every registration is released, including ones still
 * held (a warning names how many).  Their handles are gone with it: a
 * later gdrc_mr_put(ctx, mr) on this finished context is a detected
 * misuse that reads nothing of mr; any other use of them (gdrc_mr_query,
 * gdrc_mr_lkey, a put through another context) is undefined.  After it
 * returns, every call on ctx, a second gdrc_fini included, is a detected
 * misuse (see "Misuse"): its memory is kept for a later context, which
 * gets another pointer.  NULL is ignored.  Not to be called concurrently
 * with any other call on the same context (a call that overlaps it is
 * the caller's bug, and is not detected); safe against calls on other
 * contexts.
 */
GDRC_API void gdrc_fini(struct gdrc_ctx *ctx);

/* ====================================================================
 * Registration
 * ==================================================================== */

/* Access rights (same meaning as IBV_ACCESS_*).  REMOTE_WRITE and
 * REMOTE_ATOMIC imply LOCAL_WRITE, as verbs requires. */
#define GDRC_ACCESS_LOCAL_WRITE (1u << 0)
#define GDRC_ACCESS_REMOTE_WRITE (1u << 1)
#define GDRC_ACCESS_REMOTE_READ (1u << 2)
#define GDRC_ACCESS_REMOTE_ATOMIC (1u << 3)

/* Flags of gdrc_mr_get. */
/** Register without caching: released at the last gdrc_mr_put. */
#define GDRC_GET_UNCACHED (1u << 0)

enum gdrc_mem_type {
	GDRC_MEM_HOST = 0,
	GDRC_MEM_CUDA = 1,
};

enum gdrc_backend {
	GDRC_BACKEND_NONE = 0,    /* tracked, nothing registered; keys 0.
				   * Nothing checks the memory: an unmapped
				   * range, or a read-only one asked for
				   * REMOTE_WRITE, is accepted */
	GDRC_BACKEND_VERBS = 1,   /* ibv_reg_mr on host memory */
	GDRC_BACKEND_DMABUF = 2,  /* GPU: dma-buf fd + ibv_reg_dmabuf_mr */
	GDRC_BACKEND_PEERMEM = 3, /* GPU: ibv_reg_mr via nvidia-peermem */
	GDRC_BACKEND_KMOD = 4,    /* GPU: pinned by gdrcache.ko; keys 0 */
	GDRC_BACKEND_IO_URING = 5, /* host: fixed buffers of an io_uring;
				    * lkey is the buffer index, rkey 0 */
	GDRC_BACKEND_CUFILE = 6,   /* GPU and host: cuFileBufRegister of
				    * the range; keys 0 */
};

/** "none", "verbs", "dmabuf", "peermem", "kmod", "io_uring", "cufile",
 * or "unknown". */
GDRC_API const char *gdrc_backend_name(enum gdrc_backend backend);

/**
 * Does this context register with backend?  Host memory uses verbs
 * (with a PD) or none; GPU memory the first of GDRC_BACKEND's list that
 * works here (docs/backends.md).  gdrc_mr_query names the backend of each
 * registration.
 * @param [out] reason_p  NULL when it is used, else why not (a string
 *                        owned by ctx: "no protection domain", "the NIC
 *                        does not take dma-buf memory (...)", "not
 *                        tried: dmabuf comes first", ...); may be NULL.
 * @return GDRC_OK when used; GDRC_ERR_UNSUPPORTED when not;
 *         GDRC_ERR_INVALID_PARAM for a NULL ctx or an unknown backend.
 * Thread safe.
 */
GDRC_API gdrc_status_t gdrc_backend_status(struct gdrc_ctx *ctx,
					   enum gdrc_backend backend,
					   const char **reason_p);

/**
 * What tells the cache that memory went away (docs/hooks.md, "Event
 * sources").  Host memory is watched by the first of KMOD, UCM, GLIBC
 * that works (UFFD instead when GDRC_MEM_HOOKS=uffd); GPU memory by KMOD
 * (a pin the driver revokes), CUDA_HOOKS and BUFFER_ID as GDRC_VALIDATE
 * says (docs/validation.md).  Fixed numbers.
 */
enum gdrc_source {
	GDRC_SOURCE_KMOD = 0,       /* gdrcache.ko: its notifier watches each
				     * cached host range; the driver revokes
				     * the GPU pins it holds */
	GDRC_SOURCE_UCM = 1,        /* host: UCX's UCM events, where UCM
				     * owns glibc's memory functions */
	GDRC_SOURCE_GLIBC = 2,      /* host: our patches of glibc's memory
				     * functions */
	GDRC_SOURCE_UFFD = 3,       /* host: userfaultfd, range by range
				     * (GDRC_MEM_HOOKS=uffd) */
	GDRC_SOURCE_CUDA_HOOKS = 4, /* GPU: detours of libcuda's frees */
	GDRC_SOURCE_BUFFER_ID = 5,  /* GPU: each hit's BUFFER_ID check */
};

/** "kmod", "ucm", "glibc", "uffd", "cuda_hooks", "buffer_id", or
 * "unknown". */
GDRC_API const char *gdrc_source_name(enum gdrc_source source);

/**
 * Does source tell this context's cache that memory went away?
 * @param [out] reason_p  what it watches when it does, why not when it
 *                        does not (never NULL when set: "GDRC_MEM_HOOKS=
 *                        uffd", "libc's munmap is not UCX's", ...; a
 *                        string owned by the library); may be NULL.
 * @param [out] events_p  what it told this context so far: host ranges
 *                        posted (UCM, GLIBC, UFFD), CUDA frees posted
 *                        (CUDA_HOOKS), registrations it ended (KMOD,
 *                        BUFFER_ID); may be NULL.
 * @return GDRC_OK when it does; GDRC_ERR_UNSUPPORTED when not;
 *         GDRC_ERR_INVALID_PARAM for a NULL ctx or an unknown source.
 * Thread safe.
 */
GDRC_API gdrc_status_t gdrc_source_status(struct gdrc_ctx *ctx,
					  enum gdrc_source source,
					  const char **reason_p,
					  uint64_t *events_p);

/**
 * Kinds of host memory, by what can take their pages (docs/design.md,
 * "What takes the pages").  Fixed numbers.
 */
enum gdrc_host_mem {
	GDRC_HOST_MEM_PRIVATE = 0, /* private: the heap, stacks,
				    * mmap(MAP_PRIVATE | MAP_ANONYMOUS),
				    * anonymous huge pages, private mappings
				    * of files (a program's .data); calls on
				    * the mapping itself take its pages (and,
				    * of a file mapping, a truncation of the
				    * file: docs/hooks.md) */
	GDRC_HOST_MEM_SHARED = 1,  /* shared: memfd, shm_open, tmpfs and
				    * hugetlbfs files, SysV shm,
				    * MAP_SHARED | MAP_ANONYMOUS; a file's
				    * hole punch or truncation, or another
				    * process, can take its pages too */
};

/**
 * Is host memory of this kind cached in this context?  Only where the
 * sources in force see every way its pages can go: private memory under
 * any host source, shared memory only under gdrcache.ko (whose notifier
 * the kernel calls whoever takes the pages).  Memory of a kind that is
 * not cached is registered for each get alone and released at its put,
 * as GDRC_GET_UNCACHED asks; GDRC_STAT_UNCACHED_SHARED counts those gets.
 * Memory CUDA allocated (cuMemHostAlloc) goes with its CUDA free and is
 * not looked at here.
 * @param [out] reason_p  why it is cached or not (a string owned by the
 *                        library, never NULL when set); may be NULL.
 * @return GDRC_OK cached; GDRC_ERR_UNSUPPORTED registered per get;
 *         GDRC_ERR_INVALID_PARAM for a NULL ctx or an unknown kind.
 * Thread safe.
 */
GDRC_API gdrc_status_t gdrc_host_mem_status(struct gdrc_ctx *ctx,
					    enum gdrc_host_mem mem,
					    const char **reason_p);

/**
 * Get a registration covering [addr, addr + len) with at least the
 * requested access, from the cache or newly registered.
 *
 * @param [in]  ctx     the cache.
 * @param [in]  addr    start of the range; not NULL.
 * @param [in]  len     length in bytes; not 0, and addr + len must not
 *                      wrap the address space.
 * @param [in]  access  GDRC_ACCESS_* bits.
 * @param [in]  flags   GDRC_GET_* bits.
 * @param [out] mr_p    the registration, with a reference held for the
 *                      caller; written only on success.  Two gets served
 *                      by one registration may return different
 *                      pointers (each thread has its own handle on it,
 *                      made at its second get): gdrc_mr_info.id tells
 *                      registrations apart.
 *
 * @return GDRC_OK;
 *         GDRC_ERR_INVALID_PARAM for a NULL ctx, addr or mr_p, len 0, a
 *         wrapping range, or unknown access or flag bits (nothing
 *         changes);
 *         GDRC_ERR_LIMIT if the registrations in use alone would exceed
 *         GDRC_MAX_REGIONS or GDRC_MAX_BYTES, or, with a ring, every
 *         slot of its table is held, or the context has eight times
 *         GDRC_MAX_REGIONS registrations alive (at least 65,536, at
 *         most 2^27, and at most a sixteenth of RLIMIT_AS at 80 bytes
 *         each: cached, held, being made or being released; its region
 *         arena's size, fixed at gdrc_init);
 *         GDRC_ERR_NO_MEMORY if memory could not be pinned even after
 *         evicting every unused registration;
 *         GDRC_ERR_VERBS if ibv_reg_mr failed otherwise;
 *         GDRC_ERR_CUFILE if cuFileBufRegister refused it otherwise
 *         (its status logged: 5023 when something else registered the
 *         same base without the cache);
 *         GDRC_ERR_IO if io_uring refused the buffer otherwise (an
 *         unmapped range: EFAULT; docs/backends.md, "Storage");
 *         GDRC_ERR_UNSUPPORTED for managed (unified) memory, a range
 *         that runs past the end of its GPU allocation or into an
 *         unmapped part of a VMM reservation, VMM mappings of two
 *         devices, or GPU memory no backend of GDRC_BACKEND can
 *         register (a context with a ring registers host memory only);
 *         with a ring, a range of more than 1 GiB once rounded to pages
 *         (the kernel's bound on one fixed buffer: never split); in a
 *         cuFile context, host memory when cufile lacks
 *         GDRC_CUFILE_HOST, GPU memory when it lacks GDRC_CUFILE_GPU;
 *         GDRC_ERR_CUDA if classifying the pointer failed (also when
 *         the VMM memory's device has no context to ask in: none
 *         current and its primary one inactive, which the library does
 *         not create), or exporting it as a dma-buf;
 *         GDRC_ERR_KMOD if gdrcache.ko refused to pin GPU memory (the kmod
 *         backend) for another reason than running out;
 *         GDRC_ERR_BUSY if the range was unmapped, freed or invalidated
 *         while it was being registered, three times in a row, or once
 *         while a registration of it failed (nothing is cached; the
 *         caller may try again);
 *         GDRC_ERR_NO_DEVICE on a miss after the context's ring was torn
 *         down (io_uring_queue_exit; its fd closed or naming another
 *         file);
 *         GDRC_ERR_FORK in a child, on its parent's context.
 *
 * Thread safe.  A hit takes no lock and makes no system call.
 */
GDRC_API gdrc_status_t gdrc_mr_get(struct gdrc_ctx *ctx, const void *addr,
				   size_t len, uint32_t access, uint32_t flags,
				   struct gdrc_mr **mr_p);

/**
 * Serve a get from a registration the caller already holds, without
 * taking another reference: for a layer that keeps its last registration
 * between a "deregister" and the next "register" of the same buffer, as
 * libgdrcache-preload.so does per thread.  mr must come from a
 * gdrc_mr_get of ctx by this thread (which remembers it), cover [addr,
 * addr + len) with access, and pass every check a cached get makes (its
 * memory not freed, no unmap of it under way, its BUFFER_IDs where it is
 * tag checked).  Counted as a hit.  Hook-free, lock-free, allocates
 * nothing.
 *
 * @return GDRC_OK: use mr again (one gdrc_mr_put still drops the one
 *         reference held); GDRC_ERR_STALE: it does not serve this get
 *         now (freed, another thread's, evicted from this thread's
 *         memory, too small, or a check must run first): put it and
 *         call gdrc_mr_get; GDRC_ERR_INVALID_PARAM for a NULL ctx or mr,
 *         len 0, a range that wraps, or unknown access bits (nothing
 *         changes).  Thread safe.
 */
GDRC_API gdrc_status_t gdrc_mr_reget(struct gdrc_ctx *ctx,
				     const struct gdrc_mr *mr,
				     const void *addr, size_t len,
				     uint32_t access);

/**
 * Drop a reference taken by gdrc_mr_get.  The registration stays cached
 * unless it was invalidated meanwhile or is uncached, in which case this
 * last put releases it.  NULL ctx or mr is ignored.  A put with no get
 * of mr outstanding (a double put), of a handle already let go of, of a
 * registration of another context, or of anything else than a
 * registration, and a put on a finished context, are misuses (see
 * "Misuse"): logged, counted, then an abort or nothing at all.  Thread
 * safe; any thread may put what another thread got.
 */
GDRC_API void gdrc_mr_put(struct gdrc_ctx *ctx, struct gdrc_mr *mr);

/* What a pointer is (gdrc_ptr_query, gdrc_mr_info.kind). */
enum gdrc_ptr_kind {
	GDRC_PTR_HOST = 0,        /* host memory CUDA does not know */
	GDRC_PTR_HOST_PINNED = 1, /* cuMemHostAlloc'd or host-registered */
	GDRC_PTR_DEVICE = 2,      /* cuMemAlloc / cudaMalloc */
	GDRC_PTR_POOL = 3,        /* stream-ordered pool (cuMemAllocAsync) */
	GDRC_PTR_VMM = 4,         /* cuMemCreate + cuMemMap */
	GDRC_PTR_MANAGED = 5,     /* unified memory: never registered */
};

/* Bits of gdrc_mr_info.flags. */
#define GDRC_MR_INFO_CACHED (1u << 0)      /* findable by gdrc_mr_get */
#define GDRC_MR_INFO_INVALIDATED (1u << 1) /* removed; valid until put */
#define GDRC_MR_INFO_SYNC_MEMOPS (1u << 2) /* set on the allocation */
#define GDRC_MR_INFO_SYNC_MEMOPS_CTX (1u << 3) /* set on its context */
#define GDRC_MR_INFO_NO_SYNC_MEMOPS (1u << 4)  /* could not be set */
#define GDRC_MR_INFO_TAG_CHECKED (1u << 5) /* hits check the BUFFER_ID */
#define GDRC_MR_INFO_KMOD (1u << 6)  /* gdrcache.ko reports its invalidation */

struct gdrc_mr_info {
	uint64_t id;        /* unique in the process, never reused */
	uintptr_t addr;     /* start of the range actually registered */
	size_t length;      /* its length */
	int mem_type;       /* enum gdrc_mem_type */
	int backend;        /* enum gdrc_backend */
	int device;         /* CUDA device ordinal; -1 for host memory */
	uint32_t access;    /* GDRC_ACCESS_* actually registered */
	uint32_t lkey;      /* 0 with the none backend */
	uint32_t rkey;      /* 0 with the none backend */
	uint32_t flags;     /* GDRC_MR_INFO_* */
	int kind;           /* enum gdrc_ptr_kind */
	uint64_t buffer_id; /* GPU: the allocation's BUFFER_ID (VMM: its
			     * first mapping's); else 0 */
	uintptr_t key_addr; /* the range hits are served for: the */
	size_t key_length;  /* allocation (GPU) or addr/length (host) */
};

/**
 * Describe a registration.
 * @param [in]  mr      a registration the caller holds.
 * @param [out] info_p  filled on success.
 * @return GDRC_OK; GDRC_ERR_INVALID_PARAM if mr or info_p is NULL.
 * Thread safe.
 */
GDRC_API gdrc_status_t gdrc_mr_query(const struct gdrc_mr *mr,
				     struct gdrc_mr_info *info_p);

/** @return the local key of a held registration (0 if mr is NULL). */
GDRC_API uint32_t gdrc_mr_lkey(const struct gdrc_mr *mr);
/** @return the remote key of a held registration (0 if mr is NULL). */
GDRC_API uint32_t gdrc_mr_rkey(const struct gdrc_mr *mr);

/**
 * Called at a CUDA free in a context that registers with cuFile: start
 * is the freed allocation's base (end = start + 1), or an unmapped
 * range's (cuMemUnmap: [start, end)).
 */
typedef void (*gdrc_free_fn)(void *arg, uintptr_t start, uintptr_t end);

/**
 * Have fn called in the thread that frees GPU or CUDA-pinned host memory
 * (every free the CUDA free hooks see: docs/hooks.md), before the driver
 * frees it and after the cache released its own unused registrations of
 * it: a caller that holds registrations of memory it may see freed (a
 * layer that keeps its program's cuFileBufRegister as a held
 * registration, as libgdrcache-preload.so does) drops them there with
 * gdrc_mr_put, and the put deregisters them before the free goes on.
 * fn runs inside the program's cuMemFree: it may call gdrc_mr_put and
 * gdrc_mr_query, and must not free GPU memory or wait for a thread
 * that may be freeing some.  One per context; NULL removes it.
 *
 * @return GDRC_OK; GDRC_ERR_UNSUPPORTED if ctx does not register with
 *         cuFile or the CUDA free hooks do not work here
 *         (gdrc_source_status of GDRC_SOURCE_CUDA_HOOKS says why);
 *         GDRC_ERR_INVALID_PARAM for a NULL ctx; GDRC_ERR_FORK.
 * Thread safe.
 */
GDRC_API gdrc_status_t gdrc_set_free_fn(struct gdrc_ctx *ctx, gdrc_free_fn fn,
					void *arg);

/* ====================================================================
 * GPU memory
 * ==================================================================== */

/* Bits of gdrc_ptr_info.flags. */
#define GDRC_PTR_INFO_CACHED (1u << 0) /* answered from a registration */

struct gdrc_ptr_info {
	int mem_type;         /* enum gdrc_mem_type */
	int kind;             /* enum gdrc_ptr_kind */
	int device;           /* CUDA ordinal; -1 for host memory */
	uint32_t flags;       /* GDRC_PTR_INFO_* */
	uint64_t buffer_id;   /* CU_POINTER_ATTRIBUTE_BUFFER_ID; 0 if none */
	uintptr_t alloc_base; /* the allocation holding ptr (VMM: the one */
	size_t alloc_size;    /* mapping); 0 for plain host memory */
};

/**
 * What is this pointer?  Answered from a cached registration when one
 * covers ptr (validated like a hit), else with one
 * cuPointerGetAttributes call; without a CUDA driver, everything is
 * GDRC_PTR_HOST.
 *
 * @return GDRC_OK; GDRC_ERR_INVALID_PARAM for a NULL ctx, ptr or info_p;
 *         GDRC_ERR_UNSUPPORTED for an unmapped part of a VMM
 *         reservation; GDRC_ERR_CUDA if the driver failed; GDRC_ERR_FORK.
 * Thread safe.
 */
GDRC_API gdrc_status_t gdrc_ptr_query(struct gdrc_ctx *ctx, const void *ptr,
				      struct gdrc_ptr_info *info_p);

/**
 * Is GPU support on for this context?
 * @param [out] reason_p  set to why not (a static string), or NULL when
 *                        it is on; may be NULL.
 * @return GDRC_OK when on; GDRC_ERR_NO_DEVICE when the driver could not
 *         be loaded, has no device, or GDRC_CUDA_LIBRARY=none;
 *         GDRC_ERR_INVALID_PARAM for a NULL ctx.  Thread safe.
 */
GDRC_API gdrc_status_t gdrc_gpu_status(struct gdrc_ctx *ctx,
				       const char **reason_p);

/**
 * Are CUDA frees seen?  With GDRC_MEM_HOOKS=auto the library detours the
 * driver's free functions (cuMemFree, cuMemFreeAsync, cuMemFreeHost,
 * cuMemHostUnregister, cuMemUnmap: every runtime and driver free ends
 * there) and checks, once a CUDA context exists, that a free made through
 * cuGetProcAddress's entry points is reported (docs/hooks.md).
 * @param [out] reason_p  why not (a string owned by the library), or NULL
 *                        when they work; may be NULL.
 * @return GDRC_OK when installed and self-tested; GDRC_ERR_UNSUPPORTED
 *         when not (no driver, GDRC_MEM_HOOKS=none, a function that could
 *         not be hooked, a failed or not yet possible self test);
 *         GDRC_ERR_INVALID_PARAM for a NULL ctx.  Thread safe.
 */
GDRC_API gdrc_status_t gdrc_cuda_hooks_status(struct gdrc_ctx *ctx,
					      const char **reason_p);

/**
 * Are host frees seen process-wide (docs/hooks.md, "Event sources")?  By
 * our jumps in glibc's memory functions, or, when UCX's UCM patched them
 * first (or later), by UCM's own events.
 * @param [out] reason_p  which source serves host memory when they work
 *                        ("glibc patched (...)", "ucx ucm events (...)"),
 *                        else why not; a string owned by the library;
 *                        may be NULL.
 * @return GDRC_OK; GDRC_ERR_UNSUPPORTED (GDRC_MEM_HOOKS=none, no source
 *         could be installed, or another library overwrote it);
 *         GDRC_ERR_INVALID_PARAM for a NULL ctx.  Thread safe.
 */
GDRC_API gdrc_status_t gdrc_hooks_status(struct gdrc_ctx *ctx,
					 const char **reason_p);

/**
 * Is the kernel module's channel (/dev/gdrcache, docs/kmod.md) open?
 * @param [out] reason_p  NULL when it is, else why not; may be NULL.
 * @return GDRC_OK; GDRC_ERR_UNSUPPORTED; GDRC_ERR_INVALID_PARAM for a
 *         NULL ctx.  Thread safe.
 */
GDRC_API gdrc_status_t gdrc_kmod_status(struct gdrc_ctx *ctx,
					const char **reason_p);

/**
 * Describe knob index (0, 1, ... until GDRC_ERR_LIMIT) of docs/env.md:
 * its environment variable, default and one-line help (static strings).
 * @return GDRC_OK; GDRC_ERR_LIMIT past the last knob;
 *         GDRC_ERR_INVALID_PARAM for a NULL pointer.  Thread safe.
 */
GDRC_API gdrc_status_t gdrc_knob_describe(unsigned index,
					  const char **name_p,
					  const char **default_p,
					  const char **help_p);

/**
 * The value of the GDRC_* knob called name as the library reads it now
 * (the environment, else its default): booleans as "1" or "0", anything
 * else as written.  For layers built on the library, and tools.
 *
 * @param [in]  name  e.g. "GDRC_PRELOAD_MR".
 * @param [out] buf   the value, NUL-terminated; untouched on failure.
 * @param [in]  len   buf's size.
 * @return GDRC_OK; GDRC_ERR_INVALID_PARAM for a NULL name or buf, len 0,
 *         an unknown knob, or a value the knob does not accept (logged);
 *         GDRC_ERR_LIMIT if buf is too small.  Thread safe.
 */
GDRC_API gdrc_status_t gdrc_knob_value(const char *name, char *buf,
				       size_t len);

/**
 * Install the process-wide memory hooks now, rather than at the first
 * gdrc_init: glibc's memory functions and, when the CUDA driver can be
 * loaded, its free functions (libcuda is loaded, not initialised).  So
 * that no free made before the first context is missed, as
 * libgdrcache-preload.so does when it is loaded.  Reads GDRC_LOG_LEVEL
 * (and sets the process's log level from it, as gdrc_init does),
 * GDRC_MEM_HOOKS and GDRC_CUDA_LIBRARY; hooks already installed are left
 * as they are.
 *
 * @return GDRC_OK when the glibc hooks are in (the CUDA ones are tried
 *         as well: gdrc_cuda_hooks_status of a context says how that
 *         went); GDRC_ERR_UNSUPPORTED with GDRC_MEM_HOOKS=none, or when
 *         they could not be installed (gdrc_hooks_status of a context
 *         says why); GDRC_ERR_INVALID_PARAM for a bad GDRC_* setting
 *         (logged).  With GDRC_MEM_HOOKS=uffd nothing is patched: the
 *         userfaultfd reader is started instead (GDRC_OK, or
 *         GDRC_ERR_UNSUPPORTED when it cannot be).  Thread safe.
 */
GDRC_API gdrc_status_t gdrc_install_hooks(void);

/* ====================================================================
 * Invalidation
 * ==================================================================== */

/**
 * Tell the cache that [addr, addr + len) was freed or remapped: every
 * registration overlapping it is removed from the cache.  Held ones stay
 * valid for their holders and are released at their last put.
 *
 * @return GDRC_OK; GDRC_ERR_INVALID_PARAM for a NULL ctx or addr, len 0
 *         or a wrapping range (nothing changes); GDRC_ERR_FORK.
 * Thread safe.
 */
GDRC_API gdrc_status_t gdrc_invalidate(struct gdrc_ctx *ctx, const void *addr,
				       size_t len);

/* ====================================================================
 * Giving pinned memory back
 * ==================================================================== */

/* gdrc_release_unused's and gdrc_device_stat_get's device, besides a
 * CUDA ordinal. */
#define GDRC_DEVICE_HOST (-1) /* host memory */
#define GDRC_DEVICE_ALL (-2)  /* host memory and every device */

/**
 * Release now every cached registration of device nobody holds, so that
 * its memory can really be freed: a cudaFree or cuMemRelease returns
 * GPU memory and BAR1 space only once nothing pins it, and a large
 * allocation may need them.  Call it before such an allocation, or
 * when the device is short.
 *
 * Registrations held by a caller stay (released at their last put).  A
 * registration another thread got and put back stays registered until
 * that thread's next call on ctx or its exit: the thread's remembered
 * handle pins it (docs/design.md, "Handles").
 *
 * @param [in]  ctx         the cache.
 * @param [in]  device      a CUDA ordinal, GDRC_DEVICE_HOST or
 *                          GDRC_DEVICE_ALL.
 * @param [out] released_p  how many registrations left the cache; may be
 *                          NULL.
 * @return GDRC_OK (also when there was nothing to release);
 *         GDRC_ERR_INVALID_PARAM for a NULL ctx or a device below
 *         GDRC_DEVICE_ALL (nothing changes); GDRC_ERR_FORK.
 * Thread safe.
 */
GDRC_API gdrc_status_t gdrc_release_unused(struct gdrc_ctx *ctx, int device,
					   uint64_t *released_p);

/* Per-device counters of a context (gdrc_device_stat_get).  Values are
 * fixed; new counters are appended before GDRC_DEVICE_STAT_COUNT. */
enum gdrc_device_stat {
	GDRC_DEVICE_STAT_PINNED_BYTES = 0, /* registered now, cached or held */
	GDRC_DEVICE_STAT_REGIONS,    /* registrations alive, cached or held */
	GDRC_DEVICE_STAT_DMABUFS,    /* of them, dma-buf registrations: each
				      * keeps an exported dma-buf alive (its
				      * fd is closed at once) */
	GDRC_DEVICE_STAT_EVICTIONS,  /* removed for a limit (the context's
				      * or the device's), a retry or
				      * gdrc_release_unused */
	GDRC_DEVICE_STAT_RETRIES,    /* registrations that ran out (BAR1,
				      * memory, fds) and were retried once
				      * after the device's unused ones were
				      * released */
	GDRC_DEVICE_STAT_MAX_BYTES,  /* GDRC_GPU_MAX_BYTES (GDRC_LIMIT_NONE:
				      * none) */
	GDRC_DEVICE_STAT_MAX_REGIONS, /* GDRC_GPU_MAX_REGIONS (likewise) */
	GDRC_DEVICE_STAT_COUNT
};

/* Devices gdrc_device_stat_get and the per-device limits know of: CUDA
 * ordinals 0 to GDRC_MAX_DEVICES - 1 (a larger one is not limited). */
#define GDRC_MAX_DEVICES 64

/**
 * Read one per-device counter of ctx.  GDRC_DEVICE_HOST counts host
 * memory's registrations (its limits are GDRC_MAX_BYTES and
 * GDRC_MAX_REGIONS, reported here as GDRC_LIMIT_NONE; with a ring,
 * GDRC_DEVICE_STAT_MAX_REGIONS reads its table's slots, which bound the
 * registrations alive, cached or held); GDRC_DEVICE_ALL
 * sums host memory and every device (the limits then read
 * GDRC_LIMIT_NONE).
 * @return GDRC_OK; GDRC_ERR_INVALID_PARAM for a NULL ctx or value_p, an
 *         unknown stat or a device outside GDRC_DEVICE_ALL ..
 *         GDRC_MAX_DEVICES - 1.  Thread safe.
 */
GDRC_API gdrc_status_t gdrc_device_stat_get(struct gdrc_ctx *ctx, int device,
					    enum gdrc_device_stat stat,
					    uint64_t *value_p);

/* ====================================================================
 * Statistics
 * ==================================================================== */

/* Counters are per context and exact.  Values are fixed; new counters
 * are appended before GDRC_STAT_COUNT. */
enum gdrc_stat {
	GDRC_STAT_HITS = 0,          /* gets served from the cache */
	GDRC_STAT_MISSES,            /* gets that registered (sum of causes) */
	GDRC_STAT_EVICTIONS,         /* removed by the limits */
	GDRC_STAT_INVALIDATIONS,     /* removed because the memory went */
	GDRC_STAT_REGIONS,           /* cached now (gauge) */
	GDRC_STAT_PINNED_BYTES,      /* registered now, cached or held */
	GDRC_STAT_MISS_COLD,         /* nothing cached there before */
	GDRC_STAT_MISS_EVICTED,      /* a registration there was evicted */
	GDRC_STAT_MISS_INVALIDATED,  /* a registration there was invalidated */
	GDRC_STAT_MISS_TOO_SMALL,    /* a cached one overlapped, too short */
	GDRC_STAT_MISS_ACCESS,       /* a cached one covered, too few rights */
	GDRC_STAT_MISS_UNCACHED,     /* uncached by request or by policy */
	GDRC_STAT_PUTS,              /* references dropped */
	GDRC_STAT_REG_FAILURES,      /* backend registrations that failed */
	GDRC_STAT_DEREGS,            /* registrations released */
	GDRC_STAT_PINNED_BYTES_MAX,  /* high-water mark of PINNED_BYTES */
	GDRC_STAT_INV_EXPLICIT,      /* invalidations from gdrc_invalidate */
	GDRC_STAT_INV_HOST_HOOK,     /* invalidations from host memory hooks */
	GDRC_STAT_MEM_EVENTS,        /* host unmap events received */
	GDRC_STAT_INVQ_MERGES,       /* events merged into a wider one */
	GDRC_STAT_LIMIT_REJECTS,     /* gets refused with GDRC_ERR_LIMIT */
	GDRC_STAT_INV_TAG_CHECK,     /* invalidations by a BUFFER_ID mismatch */
	GDRC_STAT_TAG_CHECKS,        /* hits checked against BUFFER_IDs (one
				      * per hit, however many VMM mappings
				      * it asked about) */
	GDRC_STAT_SYNC_MEMOPS_SET,   /* allocations given SYNC_MEMOPS */
	GDRC_STAT_CLASSIFY_CALLS,    /* cuPointerGetAttributes on misses */
	GDRC_STAT_INV_KMOD,          /* invalidations seen by gdrcache.ko */
	GDRC_STAT_INV_CUDA_HOOK,     /* invalidations from CUDA free hooks */
	GDRC_STAT_CUDA_EVENTS,       /* CUDA free events received */
	GDRC_STAT_OOM_RETRIES,       /* registrations that ran out, retried
				      * once after releasing unused ones */
	GDRC_STAT_UCM_EVENTS,        /* of MEM_EVENTS, those that came from
					UCX's UCM (docs/hooks.md) */
	GDRC_STAT_MISUSE,            /* misuses detected in this process,
				      * by any context (GDRC_MISUSE) */
	GDRC_STAT_TREE_LOOKUPS,      /* hits and misses the lock-free page
				      * hash did not answer: asked again
				      * under the lock (docs/design.md; the
				      * name is from the tree that answered
				      * there until 2026-11-26) */
	GDRC_STAT_UFFD_EVENTS,       /* of MEM_EVENTS, those read from
				      * userfaultfd (GDRC_MEM_HOOKS=uffd) */
	GDRC_STAT_FREE_DEREGS,       /* cuFile registrations released by a
				      * CUDA free before the driver freed
				      * the memory (gdrc_set_free_fn) */
	GDRC_STAT_UNCACHED_SHARED,   /* of MISS_UNCACHED, gets of host
				      * memory no source in force watches
				      * whole (gdrc_host_mem_status) */
	GDRC_STAT_COUNT
};

/**
 * Read one counter.  Like a get, it first waits for an unmap still
 * posting its event, so an unmap that has returned is counted (with
 * GDRC_MEM_HOOKS=uffd the event is posted by the library's reader after
 * munmap returns); gdrc_stats_dump and gdrc_source_status alike.
 * @return GDRC_OK; GDRC_ERR_INVALID_PARAM for a NULL ctx or value_p or an
 *         unknown stat.  Thread safe.
 */
GDRC_API gdrc_status_t gdrc_stat_get(struct gdrc_ctx *ctx, enum gdrc_stat stat,
				     uint64_t *value_p);

/** @return the counter's name ("hits", ...); "unknown" if out of range. */
GDRC_API const char *gdrc_stat_name(enum gdrc_stat stat);

enum gdrc_dump_format {
	GDRC_DUMP_TEXT = 0, /* one "name value" line per counter */
	GDRC_DUMP_JSON = 1, /* one JSON object, counters by name */
};

/**
 * Write every counter to buf, NUL-terminated, like snprintf.
 *
 * @param [in]  buf       destination; may be NULL when buflen is 0.
 * @param [in]  buflen    its size.
 * @param [out] needed_p  length of the whole dump without the NUL; may
 *                        be NULL.
 * @return GDRC_OK; GDRC_ERR_LIMIT if buf was too small (it then holds a
 *         truncated, terminated prefix); GDRC_ERR_INVALID_PARAM for a
 *         NULL ctx, an unknown format or a NULL buf with buflen > 0.
 * Thread safe.
 */
GDRC_API gdrc_status_t gdrc_stats_dump(struct gdrc_ctx *ctx,
				       enum gdrc_dump_format format, char *buf,
				       size_t buflen, size_t *needed_p);

/* ====================================================================
 * Logging
 * ==================================================================== */

enum gdrc_log_level {
	GDRC_LOG_ERROR = 0,
	GDRC_LOG_WARN = 1,
	GDRC_LOG_INFO = 2,
	GDRC_LOG_DEBUG = 3,
	GDRC_LOG_TRACE = 4,
};

/** A log sink: gets each formatted message (no trailing newline). */
typedef void (*gdrc_log_fn)(enum gdrc_log_level level, const char *msg,
			    void *arg);

/**
 * Write a message to the library's log, through its level filter
 * (GDRC_LOG_LEVEL) and sink (gdrc_log_set_handler), prefixed as the
 * library's own: for layers built on the library (libgdrcache-preload.so
 * uses it), so that a process has one log.  An unknown level is ignored.
 * Thread safe; not for signal handlers.
 */
GDRC_API void gdrc_log_printf(enum gdrc_log_level level, const char *fmt,
			      ...) __attribute__((format(printf, 2, 3)));

/**
 * Send log messages to fn instead of stderr; NULL restores stderr.
 * Process-wide.  Thread safe; messages already being written may still
 * reach the previous sink.
 */
GDRC_API void gdrc_log_set_handler(gdrc_log_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* GDRCACHE_H */
