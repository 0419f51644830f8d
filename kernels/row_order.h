/*
 * A self job's row order (KnnwbSelectJob.row_order) as the CUDA backend honours it: the rows are
 * gathered in that order on their way to the device, so that tile rows and columns are positions
 * in the order; the per-row arrays the workers read from the job are put in that order once per
 * attempt; and every list is mapped back (its row to the row's place, its indices to the rows'
 * own numbers) before core sees it, ties included: the device's sort by (distance, index) sorts
 * the rows' own numbers. Nothing else in the backend knows of the order.
 */
#ifndef KNNWB_ROW_ORDER_H
#define KNNWB_ROW_ORDER_H

#include <knnwb_kernels.h>

#include "select_plan.h"

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include <vector>

namespace knnwb_cuda
{

/** Whether an attempt of job under plan honours job->row_order: a self job of one process (no
 * share), without groups or starting bounds, whose rows are resident on the devices (streamed
 * blocks are read from the host in place). O(1). */
bool row_order_honoured(const KnnwbSelectJob *job, const KnnwbSelectPlan &plan);

/** The job as the workers of an ordered attempt read it: the same, with the squared norms, the
 * invalid marks and the exact rows' statistics in the order (vectors owned here). The rows stay
 * where they are; Worker::upload_staged and exact_upload gather them. */
struct OrderedJob {
  KnnwbSelectJob job;
  std::vector<float> sqnorms;
  std::vector<unsigned char> invalid;
  std::vector<double> mean, squares;
  /** Builds it from job (whose row_order is a permutation of its n_query rows). O(n). Throws
   * std::bad_alloc when memory is short (the backend's entry turns that into a status). */
  void build(const KnnwbSelectJob *job);
};

/** Rows order[0 .. n) of base (dim floats each) into dst (n x dim floats), split over up to
 * threads threads, as parallel_copy splits a copy. O(n dim). */
void gather_rows(float *dst, const float *base, const int64_t *order, size_t n, size_t dim,
                 int threads);

/** The floats [first, first + count) of the row-major matrix base (dim columns) whose rows are
 * taken in order (row r of the result is base's row order[r]) into dst: gather_rows for a range
 * that may start and end inside rows (the exact rows' upload copies fixed-size chunks). */
void gather_floats(float *dst, const float *base, const int64_t *order, size_t first, size_t count,
                   size_t dim, int threads);

/** The order as device ints (int32: the backend's indices), in a cudaMalloc'd array of the
 * current device: *device is set once allocated (the caller frees it, even on a failed copy). */
cudaError_t order_to_device(const int64_t *order, size_t n, int **device, cudaStream_t stream);

} // namespace knnwb_cuda

#endif
