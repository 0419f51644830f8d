/*
 * The tile GEMM's choice begun ahead (gemm_start.cu; begun by knnwb_cuda_gemm_start,
 * knnwb_kernels.h): what the other helpers of a search's start ask of it.
 */
#ifndef KNNWB_GEMM_START_H
#define KNNWB_GEMM_START_H

namespace knnwb_cuda
{

/**
 * Returns once no GEMM of a choice begun ahead is timed or will be: at once when none runs, as soon
 * as the choice knows that every GPU of it takes its choice from this process or from the disk
 * cache (no timing: it only loads cuBLAS's kernels), else when the choice ends. Why: the rows'
 * upload ahead would disturb the timings, but waiting for a choice that times nothing kept it idle
 * while the GPU's context and cuBLAS loaded (0.13 s of a whole command on an H200). A choice from
 * the disk that cuBLASLt then refuses on the device is timed beside the upload (a slower choice
 * may then be kept: never other lists). Thread-safe.
 */
void gemm_start_wait_untimed();

} // namespace knnwb_cuda

#endif
