/* Stand-ins for the CUDA launchers when knnwb is built without CUDA: no device, never an error. */
#include <stdio.h>
#include "knnwb_kernels.h"

int knnwb_cuda_device_count(void)
{
  return 0;
}

int knnwb_cuda_device_count_now(void)
{
  return 0;
}

int knnwb_cuda_share_devices(int share, int shares, int *ordinals, int max)
{
  (void)share;
  (void)shares;
  (void)ordinals;
  (void)max;
  return 0;
}

int knnwb_cuda_narrow_to(const int *devices, int n_devices)
{
  (void)devices;
  (void)n_devices;
  return 0;
}

void knnwb_cuda_start(const int *devices, int n_devices, int share, int shares)
{
  (void)devices;
  (void)n_devices;
  (void)share;
  (void)shares;
}

void knnwb_cuda_start_wait(void)
{
}

void knnwb_cuda_gemm_start(const int *devices, int n_devices, int share, int shares, size_t n_query,
                           size_t n_reference, size_t dim)
{
  (void)devices;
  (void)n_devices;
  (void)share;
  (void)shares;
  (void)n_query;
  (void)n_reference;
  (void)dim;
}

void knnwb_cuda_gemm_start_wait(void)
{
}

void knnwb_cuda_rows_start(int device, const float *rows, size_t n, size_t dim,
                           double screen_row_norm)
{
  (void)device;
  (void)rows;
  (void)n;
  (void)dim;
  (void)screen_row_norm;
}

void knnwb_cuda_rows_start_drop(void)
{
}

int knnwb_cuda_gemm_known(int device, size_t n_query, size_t n_reference, size_t dim)
{
  (void)device;
  (void)n_query;
  (void)n_reference;
  (void)dim;
  return 0;
}

int knnwb_cuda_started(void)
{
  return 0;
}

const char *knnwb_cuda_blas_missing(void)
{
  return "knnwb was built without CUDA";
}

void knnwb_cuda_release_begin(void)
{
}

void knnwb_cuda_release_wait(void)
{
}

size_t knnwb_cuda_free_bytes(int device)
{
  (void)device;
  return 0;
}

int knnwb_cuda_partition_bounds(const KnnwbBoundsJob *job, char *message, size_t message_size)
{
  (void)job;
  snprintf(message, message_size, "not built with CUDA");
  return KNNWB_KERNELS_NO_DEVICE;
}

int knnwb_cuda_partition_assign(const KnnwbAssignJob *job, char *message, size_t message_size)
{
  (void)job;
  snprintf(message, message_size, "not built with CUDA");
  return KNNWB_KERNELS_NO_DEVICE;
}

void knnwb_cuda_keep_begin(void)
{
}

void knnwb_cuda_keep_end(void)
{
}

int knnwb_cuda_select(const KnnwbSelectJob *job, char *message, size_t message_size)
{
  (void)job;
  if (message != NULL && message_size > 0)
    snprintf(message, message_size,
             "knnwb was built without CUDA (reconfigure with -DKNNWB_CUDA=ON)");
  return KNNWB_KERNELS_NO_DEVICE;
}

int knnwb_cuda_select_supports_groups(void)
{
  return 0;
}
