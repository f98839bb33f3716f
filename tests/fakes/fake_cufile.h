/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_cufile.h - control API of the fake libcufile (GPUDirect Storage's
 * cuFile library), libcufile.so.0 in the build's tests/fakes/cufile/.
 *
 * Unit tests only.  A test links against the fake (which links the fake
 * CUDA driver) and points GDRC_CUFILE_LIBRARY at the same file, so the
 * library under test and the test share one instance: the test makes
 * "GPU" memory with fake_cuda_alloc, the library registers it with
 * cuFileBufRegister, and the test reads here what was registered, what
 * outlived its memory, and which I/Os found a registration.  Everything
 * is thread safe (one mutex).  See fake_cufile.c for what is and is not
 * modelled, and shared/research/storage-probe.md for the measurements
 * (libcufile 1.15.1, H200, compatibility mode) it follows.
 *
 * Entry point names (fake_cufile_fail, fake_cufile_calls) are the
 * exported symbol names, e.g. "cuFileBufRegister"; cuFileDriverClose
 * and cuFileDriverClose_v2 are counted apart.  An unknown name aborts
 * the test.
 */
#ifndef GDRC_FAKE_CUFILE_H
#define GDRC_FAKE_CUFILE_H

#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "cufile/cufile_types.h"

/* cuFileGetVersion's answer: 1000 * major + 10 * minor, libcufile 1.15. */
#define FAKE_CUFILE_VERSION 1150

/* max_device_pinned_mem_size by default, KiB per GPU (cufile.json's
 * 32 GiB). */
#define FAKE_CUFILE_PINNED_LIMIT_KIB 33554432UL

/* What cuFileBufDeregister returns for a pointer that starts no
 * registration (never registered, interior, deregistered already):
 * measured with libcufile 1.15.1 (tests/gpu/cufile_semantics.c). */
#define FAKE_CUFILE_DEREG_UNKNOWN CU_FILE_MEMORY_NOT_REGISTERED

/* Batch: most I/Os one batch holds (cuFileBatchIOSetUp's nr), as
 * max_batch_io_size by default. */
#define FAKE_CUFILE_MAX_BATCH 128

/* I/Os the log keeps (the most recent). */
#define FAKE_CUFILE_IO_LOG 64

/* One I/O as the fake did it (cuFileRead, cuFileWrite, the async and
 * batch ones). */
struct fake_cufile_io {
	const void *base;	/* the buffer argument */
	off_t buf_offset;
	size_t size;
	off_t file_offset;
	int write;		/* 1: to the file */
	int registered;		/* 1: base starts a live registration that
				 * holds the whole range; 0: bounce buffer */
	int device;		/* the memory's GPU, -1: host */
	ssize_t ret;		/* what the call returned (bytes_p's value) */
};

/* Drop everything: registrations (live and orphaned), handles, batches,
 * the I/O log and counts, call counts, failures, the driver's use count;
 * the pinned limit and the delays back to their defaults (the delays to
 * the environment's values).  The free observer stays installed. */
void fake_cufile_reset(void);

/* Whether base starts a registration: 1 live, 2 orphaned (its memory
 * was freed while registered), 0 none; *len_p (may be NULL) gets its
 * length. */
int fake_cufile_registered(const void *base, size_t *len_p);

/* Registrations now: live ones, orphaned ones. */
unsigned long fake_cufile_live(void);
unsigned long fake_cufile_orphans(void);

/* Registrations orphaned since the last reset (a deregistration does
 * not lower it). */
unsigned long fake_cufile_orphaned_total(void);

/* Bytes registered on device (0..7, as the fake CUDA's devices),
 * orphans included (they hold the library's accounting until
 * deregistered); 0 for any other device.  Host memory counts nowhere. */
size_t fake_cufile_device_bytes(int device);

/* max_device_pinned_mem_size, KiB per GPU; 0: the default. */
void fake_cufile_set_pinned_limit_kib(unsigned long kib);

/* The driver's use count, what cuFileUseCount returns: each
 * cuFileDriverOpen adds one, each close takes one off, and a
 * registration (buffer or handle) with the driver closed opens it
 * implicitly, to 1.  0: closed. */
long fake_cufile_driver_use_count(void);

/* Implicit opens (a cuFileBufRegister or cuFileHandleRegister with the
 * driver closed) since the last reset. */
unsigned long fake_cufile_implicit_opens(void);

/* Calls of fn_name so far, failed and refused ones included. */
unsigned long fake_cufile_calls(const char *fn_name);

/* Zero every call count. */
void fake_cufile_calls_reset(void);

/*
 * The next count calls of fn_name fail with err and do nothing else;
 * count -1: every call from now on, 0: stop failing.  err is a
 * CUfileOpError (e.g. CU_FILE_HANDLE_NOT_REGISTERED for what
 * cuFileHandleRegister answered in the containers).  cuFileRead and
 * cuFileWrite return -err, or -1 with errno -err for a negative err (an
 * OS error); the async calls return it; cuFileHandleDeregister and
 * cuFileBatchIODestroy do nothing; cuFileUseCount ignores it.
 */
void fake_cufile_fail(const char *fn_name, int err, int count);

/*
 * Delays, microseconds, spent in each successful cuFileBufRegister and
 * cuFileBufDeregister, outside the mutex (a sleep).  A negative value
 * restores the environment's (FAKE_CUFILE_REG_US, FAKE_CUFILE_DEREG_US,
 * read once at load; 0 if unset).  fake_cufile_set_open_delay_us: the
 * same for a driver open, explicit or implicit (FAKE_CUFILE_OPEN_US).
 */
void fake_cufile_set_delay_us(long reg_us, long dereg_us);
void fake_cufile_set_open_delay_us(long open_us);

/* I/Os done since the last reset: registered 1 those that used a
 * registration, 0 those that went through the bounce buffer, -1 all. */
unsigned long fake_cufile_io_count(int registered);

/* The most recent I/O: 0 and *io, or -1 if none since the reset. */
int fake_cufile_last_io(struct fake_cufile_io *io);

/* Up to max of the most recent I/Os (at most FAKE_CUFILE_IO_LOG), oldest
 * first; returns how many were copied. */
int fake_cufile_io_log(struct fake_cufile_io *io, int max);

/*
 * The fake's free observer, installed with fake_cuda_set_free_observer
 * when the fake is loaded: registrations starting in [base, base + size)
 * become orphans.  Exported for a test that installs an observer of its
 * own and must pass frees on.
 */
void fake_cufile_on_cuda_free(CUdeviceptr base, size_t size);

/*
 * The cuFile entry points the fake exports, for tests that call them
 * directly.  Same ABI as libcufile's.  Define FAKE_CUFILE_NO_PROTOTYPES
 * to leave them out.
 */
#ifndef FAKE_CUFILE_NO_PROTOTYPES
CUfileError_t cuFileDriverOpen(void);
CUfileError_t cuFileDriverClose(void);
CUfileError_t cuFileDriverClose_v2(void);
long cuFileUseCount(void);
CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t *props);
CUfileError_t cuFileGetVersion(int *version);
CUfileError_t cuFileBufRegister(const void *base, size_t length, int flags);
CUfileError_t cuFileBufDeregister(const void *base);
CUfileError_t cuFileHandleRegister(CUfileHandle_t *fh, CUfileDescr_t *descr);
void cuFileHandleDeregister(CUfileHandle_t fh);
ssize_t cuFileRead(CUfileHandle_t fh, void *base, size_t size,
		   off_t file_offset, off_t buf_offset);
ssize_t cuFileWrite(CUfileHandle_t fh, const void *base, size_t size,
		    off_t file_offset, off_t buf_offset);
CUfileError_t cuFileReadAsync(CUfileHandle_t fh, void *base, size_t *size_p,
			      off_t *file_offset_p, off_t *buf_offset_p,
			      ssize_t *bytes_p, CUstream stream);
CUfileError_t cuFileWriteAsync(CUfileHandle_t fh, void *base, size_t *size_p,
			       off_t *file_offset_p, off_t *buf_offset_p,
			       ssize_t *bytes_p, CUstream stream);
CUfileError_t cuFileBatchIOSetUp(CUfileBatchHandle_t *batch_p, unsigned nr);
CUfileError_t cuFileBatchIOSubmit(CUfileBatchHandle_t batch, unsigned nr,
				  CUfileIOParams_t *iocbp, unsigned flags);
CUfileError_t cuFileBatchIOGetStatus(CUfileBatchHandle_t batch,
				     unsigned min_nr, unsigned *nr,
				     CUfileIOEvents_t *iocbp,
				     struct timespec *timeout);
CUfileError_t cuFileBatchIOCancel(CUfileBatchHandle_t batch);
void cuFileBatchIODestroy(CUfileBatchHandle_t batch);
#endif

#endif /* GDRC_FAKE_CUFILE_H */
