/*
 * The 32-bit v1 driver ABIs (cuMemAlloc, cuMemcpyHtoD... as exported
 * before CUDA 3.2). They cannot address the memory we hand out and would be
 * unaccounted or ungated paths: refused with CUDA_ERROR_NOT_SUPPORTED.
 */
#include "client/internal.h"

#include "client/hooks_legacy.inc"
