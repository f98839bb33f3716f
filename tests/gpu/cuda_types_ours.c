// SPDX-License-Identifier: BSD-3-Clause
/*
 * cuda_types_ours.c - the values of lib/cuda/cuda_types.h, for
 * test_cuda_types to compare with the toolkit's (cuda_types_real.c).
 * Built without the CUDA include directory, so only our header is seen.
 */
#include "cuda/cuda_types.h"

#include "cuda_types_list.h"

#define GDRC_VALUE(name) (long long)(name),
#define GDRC_NAME(name) #name,
#define GDRC_SIZE(type) (long long)sizeof(type),

const long long gdrc_ours[] = { GDRC_CUDA_CONSTANTS(GDRC_VALUE) };
const char *const gdrc_names[] = { GDRC_CUDA_CONSTANTS(GDRC_NAME) };
const long long gdrc_ours_sizes[] = { GDRC_CUDA_TYPEDEFS(GDRC_SIZE) };
const char *const gdrc_type_names[] = { GDRC_CUDA_TYPEDEFS(GDRC_NAME) };
