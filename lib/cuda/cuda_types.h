/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_types.h - the few CUDA driver API types and constants libgdrcache
 * uses, declared here so that no CUDA toolkit is needed to build.  The
 * values are the driver ABI's; tests/gpu/test_cuda_types.c compares
 * every one with the real cuda.h on a machine that has it.
 *
 * Also used by the fake driver in tests/fakes.  Depends on nothing.
 */
#ifndef GDRC_CUDA_TYPES_H
#define GDRC_CUDA_TYPES_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

/* CUresult */
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_DEINITIALIZED 4
#define CUDA_ERROR_STUB_LIBRARY 34
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_NOT_FOUND 500
#define CUDA_ERROR_NOT_SUPPORTED 801

/* CUpointer_attribute */
#define CU_POINTER_ATTRIBUTE_CONTEXT 1
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_POINTER 3
#define CU_POINTER_ATTRIBUTE_HOST_POINTER 4
#define CU_POINTER_ATTRIBUTE_SYNC_MEMOPS 6
#define CU_POINTER_ATTRIBUTE_BUFFER_ID 7
#define CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE 10
#define CU_POINTER_ATTRIBUTE_RANGE_START_ADDR 11
#define CU_POINTER_ATTRIBUTE_RANGE_SIZE 12
#define CU_POINTER_ATTRIBUTE_MAPPED 13
#define CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE 15
#define CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE 17

/* CUmemorytype */
#define CU_MEMORYTYPE_HOST 1
#define CU_MEMORYTYPE_DEVICE 2
#define CU_MEMORYTYPE_ARRAY 3
#define CU_MEMORYTYPE_UNIFIED 4

/* CUctx_flags */
#define CU_CTX_SYNC_MEMOPS 0x80

/* CUdevice_attribute (for diagnostics) */
#define CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED 102
#define CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED 116
#define CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124

/* CUmemRangeHandleType */
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 0x1

/* The GPU page: what nvidia_p2p pins and BAR1 maps. */
#define GDRC_GPU_PAGE_SIZE (64UL * 1024)

#endif /* GDRC_CUDA_TYPES_H */
