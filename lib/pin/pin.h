/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pin.h - registration backends behind one ops table.
 *
 * A backend pins (and, with a NIC, registers) one range and releases it.
 * The cache calls these outside its lock; a backend may allocate, sleep
 * and make system calls, but never calls back into the cache.
 *
 * Backends: none (pin_none.c: registers nothing, keys 0, for tests and
 * benchmarks of the cache itself), verbs (pin_verbs.c: ibv_reg_mr on
 * host memory), and for GPU memory: dmabuf (pin_dmabuf.c: the driver's
 * dma-buf fd of the range, ibv_reg_dmabuf_mr), peermem (pin_verbs.c:
 * ibv_reg_mr on the GPU address, which nvidia-peermem resolves), kmod
 * (pin_none.c: pages pinned by gdrcache.ko, nothing given to the NIC);
 * and for storage: io_uring (pin_uring.c: host memory as fixed buffers
 * of a ring, one slot of its buffer table each).
 *
 * Depends on log/ and the public header only.
 */
#ifndef GDRC_PIN_H
#define GDRC_PIN_H

#include <stddef.h>
#include <stdint.h>

#include <gdrcache.h>

/* One registration, as the backend sees it. */
struct gdrc_pin_reg {
	uintptr_t addr;   /* in: page aligned start */
	size_t length;    /* in: page aligned length */
	uint32_t access;  /* in: GDRC_ACCESS_*, already normalised */
	int mem_type;     /* in: enum gdrc_mem_type */
	uint64_t id;      /* in: the memory's identity (a CUDA allocation's
			   * BUFFER_ID), 0 for host memory */
	void *handle;     /* out: backend's object (struct ibv_mr *) */
	uint32_t lkey;    /* out */
	uint32_t rkey;    /* out */
};

struct gdrc_pin_ops {
	const char *name;
	int backend; /* enum gdrc_backend */
	/*
	 * Register reg->addr..+length.  @return GDRC_OK;
	 * GDRC_ERR_NO_MEMORY when resources ran out, GDRC_ERR_LIMIT when
	 * the backend's own table is full (for both the cache evicts and
	 * retries once); GDRC_ERR_UNSUPPORTED for a range longer than the
	 * backend registers as one; another GDRC_ERR_* otherwise.  Logs
	 * the cause.
	 */
	gdrc_status_t (*reg)(void *be, struct gdrc_pin_reg *reg);
	/* Release what reg() made.  Logs failures; cannot fail. */
	void (*dereg)(void *be, struct gdrc_pin_reg *reg);
};

extern const struct gdrc_pin_ops gdrc_pin_none_ops;
extern const struct gdrc_pin_ops gdrc_pin_kmod_ops;
#ifdef GDRC_HAVE_VERBS
extern const struct gdrc_pin_ops gdrc_pin_verbs_ops;   /* be: the PD */
extern const struct gdrc_pin_ops gdrc_pin_peermem_ops; /* be: the PD */
extern const struct gdrc_pin_ops gdrc_pin_dmabuf_ops;  /* be: below */

struct ibv_pd;

struct ibv_mr;

/*
 * The libibverbs entry points the backends call.  Initialised to the
 * symbols themselves; the shared library (pin_ibv_resolve.c, linked into
 * libgdrcache.so and nothing else) replaces them at load with
 * libibverbs' own definitions (dlvsym, the versions rdma-core gives
 * them), so that an interposer of the same names in the process
 * (libgdrcache-preload.so, another shim) never receives the library's own
 * registrations.  The static archive keeps the direct calls, which unit
 * tests wrap with -Wl,--wrap.
 */
struct gdrc_ibv_fns {
	struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *pd, void *addr,
				       size_t length, uint64_t iova,
				       unsigned int access);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset,
					size_t length, uint64_t iova, int fd,
					int access);
	int (*dereg_mr)(struct ibv_mr *mr);
};

extern struct gdrc_ibv_fns gdrc_ibv;

/* GDRC_ACCESS_* as IBV_ACCESS_* bits. */
int gdrc_pin_ibv_access(uint32_t access);

/* What a verbs registration call gave (mr, or NULL and its errno) as a
 * status, filling reg: ENOMEM and EAGAIN are GDRC_ERR_NO_MEMORY (the
 * cache evicts and retries), anything else GDRC_ERR_VERBS. */
gdrc_status_t gdrc_pin_ibv_result(struct ibv_mr *mr, int err,
				  struct gdrc_pin_reg *reg, const char *call);

/* ibv_dereg_mr of reg->handle (logged if it fails). */
void gdrc_pin_ibv_dereg(void *be, struct gdrc_pin_reg *reg);

#define GDRC_PIN_EXPORT_FULL (-2)

/* The dmabuf backend's argument: the PD, and how to get a dma-buf fd
 * for a GPU range (the CUDA driver's cuMemGetHandleForAddressRange). */
struct gdrc_pin_dmabuf_be {
	struct ibv_pd *pd;
	/* @return a new fd whose bytes from *offset_p on are [addr,
	 * addr + len); GDRC_PIN_EXPORT_FULL when the driver ran out of
	 * memory (the cache releases unused registrations and retries);
	 * -1 otherwise (logged). */
	int (*export_fd)(void *arg, uintptr_t addr, size_t len,
			 uint64_t *offset_p);
	void *arg;
};

/*
 * Does the NIC take dma-buf registrations?  Asks ibv_reg_dmabuf_mr with
 * fd -1: EBADF means it got as far as the fd (supported),
 * EOPNOTSUPP or EPROTONOSUPPORT that it does not.
 * @return 1 supported; 0 not, with why.
 */
int gdrc_pin_dmabuf_probe(struct ibv_pd *pd, char *why, size_t why_len);

/*
 * Is a peer-memory client for NVIDIA GPUs loaded (nvidia-peermem, or
 * the older nv_peer_mem)?  Looks in sysfs under root (NULL: "/"; tests
 * point it elsewhere).  @return 1 yes; 0 no, with why.
 */
int gdrc_pin_peermem_probe(const char *root, char *why, size_t why_len);
#endif

#ifdef GDRC_HAVE_URING
struct io_uring;
struct gdrc_pin_uring;

/* be: the struct gdrc_pin_uring of gdrc_pin_uring_open. */
extern const struct gdrc_pin_ops gdrc_pin_uring_ops;

/* The kernel's bound on one fixed buffer. */
#define GDRC_PIN_URING_BUF_MAX (1ul << 30)

/*
 * Take a reference to ring (a dup of its fd) and register a sparse
 * buffer table of slots slots on it.
 * @return GDRC_OK with *u_p; GDRC_ERR_INVALID_PARAM (ring not set up:
 *         its fd is no io_uring); GDRC_ERR_UNSUPPORTED (a single-issuer
 *         ring, a kernel without sparse tables); GDRC_ERR_BUSY (the ring
 *         has a buffer table); GDRC_ERR_NO_MEMORY; GDRC_ERR_IO; with why
 *         filled when it fails.  Nothing is left on the ring then.
 */
gdrc_status_t gdrc_pin_uring_open(struct io_uring *ring, uint32_t slots,
				  struct gdrc_pin_uring **u_p, char *why,
				  size_t why_len);

/*
 * Drop the table and the reference.  Every slot must have been cleared
 * (the cache released every registration), except in a fork child
 * (forked): there the table is the parent's, and only our copy of the
 * fd is closed.  NULL is ignored.
 */
void gdrc_pin_uring_close(struct gdrc_pin_uring *u, int forked);
#endif

/* The cufile backend (pin_cufile.c): GPU and host memory registered
 * with cuFileBufRegister.  be: the struct gdrc_pin_cufile below. */
struct gdrc_cufile;
struct gdrc_cuda;
struct gdrc_pin_cufile;

extern const struct gdrc_pin_ops gdrc_pin_cufile_ops;

/* cuFile deregistrations this thread has made (the CUDA free path counts
 * the ones a free caused: stat free_deregs). */
extern __thread unsigned long gdrc_pin_cufile_thread_deregs;

/* @return GDRC_OK with *u_p (a table of registered bases, empty), or
 *         GDRC_ERR_NO_MEMORY. */
gdrc_status_t gdrc_pin_cufile_open(const struct gdrc_cufile *cf,
				   struct gdrc_pin_cufile **u_p);

/* The CUDA driver, for GPU memory's own context (NULL: host memory
 * only).  At init, before any registration. */
void gdrc_pin_cufile_set_cuda(struct gdrc_pin_cufile *u,
			      const struct gdrc_cuda *cu);

/* Free the table; every registration must have been released (the cache
 * did), except in a fork child (forked), whose are the parent's.  NULL
 * is ignored. */
void gdrc_pin_cufile_close(struct gdrc_pin_cufile *u, int forked);

#endif /* GDRC_PIN_H */
