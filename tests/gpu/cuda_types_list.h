/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_types_list.h - every constant and type lib/cuda/cuda_types.h
 * declares, as X-macro lists, for test_cuda_types: cuda_types_ours.c
 * expands them against our header, cuda_types_real.c against the
 * toolkit's <cuda.h>, and the test compares the two.  Keep in step with
 * lib/cuda/cuda_types.h (test_cuda_types checks that no constant there
 * is missing here).  Names of our own (GDRC_*) are not listed: cuda.h
 * has no such thing.
 */
#ifndef GDRC_TEST_CUDA_TYPES_LIST_H
#define GDRC_TEST_CUDA_TYPES_LIST_H

#define GDRC_CUDA_CONSTANTS(X)                                               \
	X(CUDA_SUCCESS)                                                      \
	X(CUDA_ERROR_INVALID_VALUE)                                          \
	X(CUDA_ERROR_OUT_OF_MEMORY)                                          \
	X(CUDA_ERROR_NOT_INITIALIZED)                                        \
	X(CUDA_ERROR_DEINITIALIZED)                                          \
	X(CUDA_ERROR_STUB_LIBRARY)                                           \
	X(CUDA_ERROR_NO_DEVICE)                                              \
	X(CUDA_ERROR_INVALID_DEVICE)                                         \
	X(CUDA_ERROR_INVALID_CONTEXT)                                        \
	X(CUDA_ERROR_NOT_FOUND)                                              \
	X(CUDA_ERROR_NOT_SUPPORTED)                                          \
	X(CU_POINTER_ATTRIBUTE_CONTEXT)                                      \
	X(CU_POINTER_ATTRIBUTE_MEMORY_TYPE)                                  \
	X(CU_POINTER_ATTRIBUTE_DEVICE_POINTER)                               \
	X(CU_POINTER_ATTRIBUTE_HOST_POINTER)                                 \
	X(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)                                  \
	X(CU_POINTER_ATTRIBUTE_BUFFER_ID)                                    \
	X(CU_POINTER_ATTRIBUTE_IS_MANAGED)                                   \
	X(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)                               \
	X(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)                             \
	X(CU_POINTER_ATTRIBUTE_RANGE_SIZE)                                   \
	X(CU_POINTER_ATTRIBUTE_MAPPED)                                       \
	X(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE)                   \
	X(CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE)                   \
	X(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE)                               \
	X(CU_MEMORYTYPE_HOST)                                                \
	X(CU_MEMORYTYPE_DEVICE)                                              \
	X(CU_MEMORYTYPE_ARRAY)                                               \
	X(CU_MEMORYTYPE_UNIFIED)                                             \
	X(CU_CTX_SYNC_MEMOPS)                                                \
	X(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)           \
	X(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED)                     \
	X(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)                              \
	X(CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD)

/* Types: compared by size (the ABI of the entry points using them). */
#define GDRC_CUDA_TYPEDEFS(X)                                                \
	X(CUresult)                                                          \
	X(CUdevice)                                                          \
	X(CUcontext)                                                         \
	X(CUmemoryPool)                                                      \
	X(CUdeviceptr)                                                       \
	X(CUmemGenericAllocationHandle)

/* Values by our header (cuda_types_ours.c) and by cuda.h
 * (cuda_types_real.c), in list order. */
extern const long long gdrc_ours[];
extern const long long gdrc_real[];
extern const char *const gdrc_names[];
extern const long long gdrc_ours_sizes[];
extern const long long gdrc_real_sizes[];
extern const char *const gdrc_type_names[];

#endif /* GDRC_TEST_CUDA_TYPES_LIST_H */
