// SPDX-License-Identifier: BSD-3-Clause
/*
 * cuda_types_real.c - the same names as cuda_types_ours.c, valued by the
 * CUDA toolkit's own <cuda.h>.  Needs the toolkit's headers only: no
 * driver, no GPU.  A name cuda.h lacks fails the build, which is as good
 * as a failed comparison.
 */
#include <cuda.h>

#include "cuda_types_list.h"

#define GDRC_VALUE(name) (long long)(name),
#define GDRC_SIZE(type) (long long)sizeof(type),

const long long gdrc_real[] = { GDRC_CUDA_CONSTANTS(GDRC_VALUE) };
const long long gdrc_real_sizes[] = { GDRC_CUDA_TYPEDEFS(GDRC_SIZE) };
