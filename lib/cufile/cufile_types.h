/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cufile_types.h - the few cuFile (GPUDirect Storage) types and values
 * the library, the preload and the fake libcufile use, declared here so
 * that nothing needs NVIDIA's cufile.h to build.  Layouts and numbers are
 * those of libcufile 1.15 (CUDA 13.0's cufile.h, read on the GPU machine
 * 2026-11-27); only what is used is declared.
 *
 * Depends on cuda/cuda_types.h (CUresult) only.
 */
#ifndef GDRC_CUFILE_TYPES_H
#define GDRC_CUFILE_TYPES_H

#include <stddef.h>
#include <sys/types.h>

#include "cuda/cuda_types.h"

/* CUfileOpError: the status of a cuFile call (0 or 5000 + n). */
typedef enum CUfileOpError {
	CU_FILE_SUCCESS = 0,
	CU_FILE_DRIVER_NOT_INITIALIZED = 5001,
	CU_FILE_PLATFORM_NOT_SUPPORTED = 5007,
	CU_FILE_CUDA_DRIVER_ERROR = 5011,
	CU_FILE_CUDA_POINTER_INVALID = 5012,
	CU_FILE_CUDA_MEMORY_TYPE_INVALID = 5013,
	CU_FILE_CUDA_POINTER_RANGE_ERROR = 5014,
	CU_FILE_CUDA_CONTEXT_MISMATCH = 5015,
	CU_FILE_INVALID_VALUE = 5022,
	CU_FILE_MEMORY_ALREADY_REGISTERED = 5023,
	CU_FILE_MEMORY_NOT_REGISTERED = 5024,
	CU_FILE_DRIVER_ALREADY_OPEN = 5026,
	CU_FILE_HANDLE_NOT_REGISTERED = 5027,
	CU_FILE_INTERNAL_ERROR = 5030,
	CU_FILE_GPU_MEMORY_PINNING_FAILED = 5036,
	CU_FILE_NOMEM_ERROR = 5043,
	CU_FILE_IO_ERROR = 5044,
	CU_FILE_INTERNAL_BUF_REGISTER_ERROR = 5045,
} CUfileOpError;

/* Returned by value (8 bytes: in a register on x86-64). */
typedef struct CUfileError {
	CUfileOpError err;
	CUresult cu_err; /* with CU_FILE_CUDA_DRIVER_ERROR */
} CUfileError_t;

typedef struct CUfileDrvProps {
	struct {
		unsigned int major_version;
		unsigned int minor_version;
		size_t poll_thresh_size;
		size_t max_direct_io_size;
		unsigned int dstatusflags;
		unsigned int dcontrolflags;
	} nvfs;
	unsigned int fflags;
	unsigned int max_device_cache_size;      /* KiB */
	unsigned int per_buffer_cache_size;      /* KiB */
	unsigned int max_device_pinned_mem_size; /* KiB, per GPU */
	unsigned int max_batch_io_size;
	unsigned int max_batch_io_timeout_msecs;
} CUfileDrvProps_t;

enum CUfileFileHandleType {
	CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1,
	CU_FILE_HANDLE_TYPE_OPAQUE_WIN32 = 2,
	CU_FILE_HANDLE_TYPE_USERSPACE_FS = 3,
};

typedef struct CUfileDescr_t {
	enum CUfileFileHandleType type;
	union {
		int fd;
		void *handle;
	} handle;
	const void *fs_ops; /* const CUfileFSOps_t *: never used here */
} CUfileDescr_t;

typedef void *CUfileHandle_t;

/* Batch I/O (cuFileBatchIOSubmit's parameters). */
typedef enum CUfileOpcode { CUFILE_READ = 0, CUFILE_WRITE } CUfileOpcode_t;
typedef enum cufileBatchMode { CUFILE_BATCH = 1 } CUfileBatchMode_t;
typedef struct CUfileIOParams {
	CUfileBatchMode_t mode;
	union {
		struct {
			void *devPtr_base;
			off_t file_offset;
			off_t devPtr_offset;
			size_t size;
		} batch;
	} u;
	CUfileHandle_t fh;
	CUfileOpcode_t opcode;
	void *cookie;
} CUfileIOParams_t;
typedef void *CUfileBatchHandle_t;

/* Batch completions (cuFileBatchIOGetStatus), and the stream of the
 * asynchronous calls. */
typedef enum CUfileStatus {
	CUFILE_WAITING = 0x01,
	CUFILE_PENDING = 0x02,
	CUFILE_INVALID = 0x04,
	CUFILE_CANCELED = 0x08,
	CUFILE_COMPLETE = 0x10,
	CUFILE_TIMEOUT = 0x20,
	CUFILE_FAILED = 0x40,
} CUfileStatus_t;

typedef struct CUfileIOEvents {
	void *cookie;
	CUfileStatus_t status;
	size_t ret; /* bytes moved, or a negative status */
} CUfileIOEvents_t;

typedef struct CUstream_st *CUstream;

#endif /* GDRC_CUFILE_TYPES_H */
