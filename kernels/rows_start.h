/*
 * Rows uploaded ahead of a search (rows_start.cu; begun by knnwb_cuda_rows_start, knnwb_kernels.h):
 * what the select asks of them.
 */
#ifndef KNNWB_ROWS_START_H
#define KNNWB_ROWS_START_H

#include <stddef.h>

namespace knnwb_cuda
{

/**
 * The device rows that knnwb_cuda_rows_start uploaded, when they are rows (n x dim host floats) as
 * a resident FP16 plan on GPU ordinal lays them out (dpad halves scaled by 2^exponent, row_bytes a
 * row): the caller owns them from then on (keep_free on ordinal). Otherwise nullptr, and rows
 * uploaded for anything else are freed, so that the caller's memory is its own (ordinal -1: just
 * that). Waits for an upload of these rows under way; one of other rows stops at its next chunk.
 * Thread-safe. O(1) besides the wait.
 */
void *rows_start_claim(int ordinal, const float *rows, size_t n, size_t dim, int dpad,
                       size_t row_bytes, int exponent);

/** Device bytes on GPU ordinal that rows begun by knnwb_cuda_rows_start hold now (0 for none, for
 * an upload that has not allocated yet, which the driver counts as free already, and for one that
 * failed): free for a search of this process, which takes or frees them. */
size_t rows_start_bytes(int ordinal);

} // namespace knnwb_cuda

#endif
