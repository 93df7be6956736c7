/*
 * Copies and sets: gated like launches, because they move residency of
 * managed memory. Each _ptds/_ptsz wrapper calls its own real pointer.
 */
#include "client/internal.h"

#include "client/hooks_memcpy.inc"
