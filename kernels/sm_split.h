/*
 * Splitting one GPU's SMs between a worker's GEMM stream and its selection stream (green
 * contexts), so that a tile's GEMM and the previous tile's selection run side by side on disjoint
 * SMs instead of taking turns on all of them. Internal to kernels/ (C++).
 */
#pragma once

#include <cuda_runtime.h>

namespace knnwb_cuda
{

/* Two green contexts of one device: [0] runs the GEMMs, [1] the selection. */
struct SmSplit {
  void *context[2] = {};
  int sms[2] = {};
};

/*
 * KNNWB_CUDA_GEMM_SMS: how many SMs the GEMM stream gets (0 or unset: no split, every stream on
 * every SM). Read once.
 */
int sm_split_gemm_sms();

/*
 * Creates the split on device `ordinal` with about gemm_sms SMs for the GEMMs (rounded up to the
 * device's granularity, 8 on Hopper) and the rest for the selection, and a non-blocking stream in
 * each (the selection's at select_priority). False, with nothing created, when the driver or
 * toolkit has no green contexts or the device cannot be split so (*why says which): the caller
 * then keeps ordinary streams. O(1) driver calls.
 */
bool sm_split_create(int ordinal, int gemm_sms, int select_priority, SmSplit *split,
                     cudaStream_t *gemm_stream, cudaStream_t *select_stream, const char **why);

/* Destroys the green contexts (their streams must be destroyed first). Safe on an empty split. */
void sm_split_destroy(SmSplit *split);

} // namespace knnwb_cuda
