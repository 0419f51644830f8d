/*
 * Rows of floats to the FP16 screen's resident rows on the host (row_halves.c): the bytes that the
 * device's conversion (launch_rows_to_half, tile_scores_screen.cu) writes, made while the rows are
 * copied into the pinned staging, so that the upload sends half the bytes and needs no conversion
 * kernel (row_upload.cu). Host-only C, no CUDA: tests/kernels/test_row_halves.c runs it where no
 * GPU exists.
 */
#ifndef KNNWB_ROW_HALVES_H
#define KNNWB_ROW_HALVES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The IEEE binary16 value nearest x (ties to even; overflow to infinity, NaN kept a quiet NaN),
 * as CUDA's __float2half_rn gives it. O(1).
 */
uint16_t knnwb_half_from_float(float x);

/**
 * Rows [0, rows) of src (dim floats each) times 2^exponent, to halves at dst (dpad halves a row,
 * dpad >= dim; halves dim .. dpad - 1 zero): as knnwb_half_from_float on each product, which in
 * float is exact but for overflow. With the CPU's conversion instructions (F16C) where it has
 * them. O(rows dpad).
 */
void knnwb_row_halves(uint16_t *dst, size_t dpad, const float *src, size_t rows, size_t dim,
                      int exponent);

/** Whether knnwb_row_halves runs on conversion instructions (x86-64 with F16C): otherwise it
 * converts one value at a time, slower than the device. O(1). */
int knnwb_row_halves_fast(void);

#ifdef __cplusplus
}
#endif

#endif
