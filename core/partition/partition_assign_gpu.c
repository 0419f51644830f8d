/*
 * The assignment of every row to its nearest centroid on a GPU (kernels/partition_bounds.cu), where
 * it pays: with 305 centroids the CPU's (partition_build.c) took 1.25-1.33 s of 10,000,000 rows on
 * 16 cores, 0.74-0.93 s on 32, products in double one centroid after another. The GPU computes
 * core's scores and bounds bit for bit, so the cells, reaches and radii are the CPU's (and MPI
 * ranks, which compare their partitions' digests, agree whichever assigned). Only the speed depends
 * on where it runs.
 */
#include <knnwb/parallel.h>
#include "knnwb_kernels.h"
#include "partition/partition_internal.h"

typedef struct {
  KnnwbPartition *p;
  size_t first;
  GMutex lock;
} KnnwbPartitionRadii;

/* The radii grown to the reaches of rows first + [from, to). */
static void knnwb_partition_gpu_radii(size_t from, size_t to, void *data)
{
  KnnwbPartitionRadii *r = data;
  KnnwbPartition *p = r->p;
  double *radius = g_new0(double, p->m);
  for (size_t i = r->first + from; i < r->first + to; i++)
    radius[p->cluster_of[i]] = MAX(radius[p->cluster_of[i]], p->reach[i]);
  g_mutex_lock(&r->lock);
  for (size_t c = 0; c < p->m; c++)
    p->radius[c] = MAX(p->radius[c], radius[c]);
  g_mutex_unlock(&r->lock);
  g_free(radius);
}

gboolean knnwb_partition_assign_gpu(KnnwbPartition *p, const KnnwbMatrix *data, size_t first,
                                    size_t last, const volatile gint *cancel, int gpu)
{
  /* (the count waits for the driver a start may still be initialising; no GPU: 0) */
  if (!knnwb_partition_gpu_wanted("KNNWB_PARTITION_GPU_ASSIGN", gpu >= 0, p->m) ||
      gpu >= knnwb_cuda_device_count())
    return FALSE;
  const gint64 t0 = g_get_monotonic_time();
  const KnnwbAssignJob job = {
      .values = data->values + first * p->d,
      .n_rows = last - first,
      .dim = p->d,
      .space = knnwb_partition_bound_space(p->metric),
      .m = p->m,
      .centroid = p->centroid,
      .centroid_sq = p->centroid_sq,
      .margin_factor = knnwb_partition_pair_margin(p->d, 1.0),
      .device = gpu,
      .cancel = cancel,
      .cell = p->cluster_of + first,
      .reach = p->reach + first,
  };
  char message[256];
  const int status = knnwb_cuda_partition_assign(&job, message, sizeof message);
  if (status != KNNWB_KERNELS_OK) {
    g_debug("knnwb: partition: nearest centroids on GPU %d: %s; on the CPU instead", gpu, message);
    return FALSE;
  }
  KnnwbPartitionRadii r = {.p = p, .first = first};
  g_mutex_init(&r.lock);
  knnwb_parallel_for(p->threads, last - first, 1 << 20, knnwb_partition_gpu_radii, &r);
  g_mutex_clear(&r.lock);
  g_debug("knnwb: partition: %zu rows to their nearest of %zu centroids on GPU %d in %.3f s",
          last - first, p->m, gpu, (double)(g_get_monotonic_time() - t0) / 1e6);
  return TRUE;
}
