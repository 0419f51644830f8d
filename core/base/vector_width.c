/*
 * The widest vector this CPU runs, for kernels written once with GCC vector types and compiled at
 * several widths (the margin planner's float dots, the partition's double products).
 */
#include <stdlib.h>
#include "base/base.h"

size_t knnwb_vector_lanes(size_t lane_bytes, const char *cap_variable)
{
  size_t bytes = 16; /* SSE2, NEON */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init(); /* done by a constructor already, unless called from one */
  if (__builtin_cpu_supports("avx512f"))
    bytes = 64;
  else if (__builtin_cpu_supports("avx2"))
    bytes = 32;
#endif
  size_t lanes = bytes / lane_bytes;
  const char *cap = cap_variable != NULL ? g_getenv(cap_variable) : NULL;
  if (cap != NULL) {
    const long most = atol(cap);
    while (lanes * lane_bytes > 16 && (long)lanes > most)
      lanes /= 2;
  }
  return lanes;
}
