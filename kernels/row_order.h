/*
 * A self job's rows visited grouped by their nearest centroid (KnnwbSelectJob.order_centroids), as
 * the CUDA backend does it: once the rows are resident, each GPU finds the nearest centroid of its
 * slice of them, the host sorts the rows by centroid (rows ascending within one) into an order,
 * and every GPU gathers its rows, squared norms and invalid marks into that order, so that tile
 * rows and columns are places in the order. The exact rows and their statistics are gathered on
 * their way up, and every list is mapped back (its row to the row's own place, its indices to the
 * rows' own numbers) before core sees it, ties included: the device's sort by (distance, index)
 * sorts the rows' own numbers. Nothing else in the backend knows of the order. Whether a run groups
 * its rows is the planner's (knnwb_select_plan_groups_rows).
 */
#ifndef KNNWB_ROW_ORDER_H
#define KNNWB_ROW_ORDER_H

#include <knnwb_kernels.h>

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include <memory>

namespace knnwb_cuda
{

/** The order of a grouped attempt's rows, built once every row's nearest centroid is known. */
struct RowOrder {
  size_t n = 0;
  std::unique_ptr<int64_t[]> order; /* n: place r holds the job's row order[r] */
  std::unique_ptr<int[]> narrow;    /* the same as ints, for the devices */
  /** The order of job's rows by cell[i] (each row's nearest centroid, < job->order_cells), rows
   * ascending within a cell and invalid rows last, counted and placed by up to threads threads
   * (the same order for any number). O(n + cells threads). Throws std::bad_alloc when memory is
   * short (the backend's entry turns that into a status). */
  void build(const KnnwbSelectJob *job, const int32_t *cell, int threads);
};

/** The floats [first, first + count) of the row-major matrix base (dim columns) whose rows are
 * taken in order (row r of the result is base's row order[r]) into dst, split over up to threads
 * threads: a range may start and end inside rows (the exact rows' upload copies fixed-size
 * chunks). O(count). */
void gather_floats(float *dst, const float *base, const int64_t *order, size_t first, size_t count,
                   size_t dim, int threads);

/** cell[r] = the nearest of m centroids (halves, dpad a row, scaled as the rows) to row r of the n
 * resident half rows (dpad halves each), by the largest r . c - half_sq[c]. O(n m dpad). */
cudaError_t launch_nearest_cells(const void *rows, size_t n, int dpad, const void *centroids,
                                 const float *half_sq, int m, int32_t *cell, cudaStream_t stream);

/** dst[r] = src[order[r]] for n items of item_bytes each. O(n item_bytes). */
cudaError_t launch_gather_items(const void *src, void *dst, const int *order, size_t n,
                                size_t item_bytes, cudaStream_t stream);

/** The order as device ints (int32: the backend's indices), in a cudaMalloc'd array of the
 * current device: *device is set once allocated (the caller frees it, even on a failed copy). */
cudaError_t order_to_device(const RowOrder &order, int **device, cudaStream_t stream);

} // namespace knnwb_cuda

#endif
