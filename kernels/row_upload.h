/*
 * Rows from host memory to a device through pinned staging (row_upload.cu): shared by the
 * select's workers and by the rows uploaded ahead of a search (rows_start.cu).
 */
#ifndef KNNWB_ROW_UPLOAD_H
#define KNNWB_ROW_UPLOAD_H

#include <cuda_runtime.h>
#include <knnwb_kernels.h>

#include <functional>
#include <stddef.h>

namespace knnwb_cuda
{

/** Host rows a worker uploads: given (rows), or derived on demand from a job's rows_fill. */
struct HostRows {
  const float *rows = nullptr;
  KnnwbRowsFill fill = nullptr;
  const void *source = nullptr;
  size_t first = 0; /* the source's row that is row 0 here */

  bool derived() const
  {
    return rows == nullptr && fill != nullptr;
  }
  /** The rows from row `by` on. */
  HostRows from(size_t by, size_t dim) const
  {
    HostRows h = *this;
    if (h.rows != nullptr)
      h.rows += by * dim;
    else
      h.first += by;
    return h;
  }
  /** Rows [at, at + count) as count x dim floats into out (derived rows: filled). */
  void copy(size_t at, size_t count, size_t dim, float *out) const;
};

/** Side 0 (query) or 1 (reference) of job as HostRows. */
HostRows job_rows(const KnnwbSelectJob *job, int side);

/** What upload_rows moves and through what. */
struct RowUpload {
  char *dst;        /* device rows of row_bytes each */
  size_t row_bytes; /* dpad halves (convert) or dpad floats */
  int dpad;         /* convert: halves a device row holds (the rest of dim zero) */
  bool convert;     /* FP16: scaled by 2^exponent and rounded to halves */
  int exponent;
  const float *src; /* host rows of dim floats, or NULL where derived is */
  HostRows derived; /* rows filled into the staging chunk by chunk (needs staging) */
  size_t rows, dim;
  void *staging[2]; /* pinned host buffers of staging_bytes, or NULL: copies from src itself */
  size_t staging_bytes;
  float *scratch[2]; /* device buffers of scratch_bytes each: a chunk's floats before conversion */
  size_t scratch_bytes;
  cudaEvent_t done[2]; /* recorded when a chunk's buffers are free again */
  cudaStream_t stream;
  int threads; /* host threads of each chunk's copy into the staging */
  /* the chunks this upload takes: chunk_first, chunk_first + chunk_step, ... (upload_lanes) */
  size_t chunk_first = 0, chunk_step = 1;
  /* polled before each chunk, when set: true stops the upload (a cancelled search, rows no longer
   * wanted), so that a stop waits for one chunk, not for gigabytes */
  std::function<bool()> stop;
};

/**
 * u.src's rows into u.dst in chunks that alternate between the two staging and scratch buffers:
 * each chunk copied into its staging buffer by up to u.threads threads (so the copy engine reads
 * pinned memory), sent to its scratch buffer, then converted into place (or, without convert,
 * copied with the device rows' pitch); the host copies chunk c + 1 while the device takes chunk c.
 * Chunks of min(staging_bytes, scratch_bytes) (scratch_bytes without staging) / (dim floats) rows:
 * at least one must fit (else cudaErrorInvalidValue). Derived rows (u.derived) are filled into the
 * staging buffer by up to u.threads threads instead of copied, and need staging (else
 * cudaErrorInvalidValue). Returns the first CUDA error; the stream is
 * synchronized before it returns. When u.stop said so, *stopped (if given) is set, the rows are
 * incomplete and the return is cudaSuccess unless a CUDA call failed. O(rows dim).
 */
cudaError_t upload_rows(const RowUpload &u, bool *stopped = nullptr);

/**
 * One upload dealt over n lanes (each an upload_rows of its own chunks, on a thread of its own;
 * lane 0 on the caller's), whose staging, scratch, events and streams are their own and whose
 * buffer sizes are equal (else cudaErrorInvalidValue): lane l takes chunks l, l + n, ...; the
 * chunk_first and chunk_step given are ignored. Each lane makes device current first (the
 * caller's thread too).
 * Why lanes: a chunk's copy split over threads waits for the slowest of them, and beside other
 * busy threads (the duplicate search, the margin planner) one of them is often descheduled for a
 * time slice; a lane held back delays only its own chunks. The first error of any lane is
 * returned; *stopped as upload_rows. O(rows dim).
 */
cudaError_t upload_lanes(RowUpload *lanes, int n, int device, bool *stopped = nullptr);

} // namespace knnwb_cuda

#endif
