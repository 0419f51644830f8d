/* What the CPU select backend (core/cpu/) offers the engine: the backend itself (one
 * KnnwbSelectFunc), whether a BF16 screen runs natively here, and the k-th smallest of floats the
 * refinement shares with the selection. Its GEMMs and candidate buffers are in cpu_internal.h. */
#ifndef KNNWB_CPU_H
#define KNNWB_CPU_H

#include <glib.h>
#include <stddef.h>
#include "knnwb_kernels.h"

/** The CPU backend of a selection job. Returns a KNNWB_KERNELS_* status. */
int knnwb_cpu_select(const KnnwbSelectJob *job, char *message, size_t message_size);

/**
 * TRUE when a BF16 screen runs natively here: knnwb was built with oneDNN, the CPU has
 * AVX512_BF16 or AMX-BF16 (and the OS saves their registers), and oneDNN's BF16 matmul uses them.
 * KNNWB_CPU_GEMM=openblas in the environment says FALSE (and keeps every GEMM on OpenBLAS), for
 * tests and comparisons. The CPU and library are probed once per process; thread-safe.
 */
gboolean knnwb_cpu_gemm_has_bf16(void);

/** The k-th smallest (0 < k <= n) of values[0, n) (no NaN), which it reorders. O(n) expected. */
float knnwb_float_kth_smallest(float *values, size_t n, size_t k);

#endif
