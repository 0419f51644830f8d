/*
 * The assignment of every row to its nearest centroid on the run's GPUs, a share of the rows each
 * (kernels/partition_bounds.cu's assign_kernel), where it pays: with 305 centroids the CPU's
 * (partition_build.c) took 1.09-1.24 s of 10,000,000 rows on 16 cores, one GPU 0.23-0.24 s, two
 * 0.22-0.24 s; 228 centroids of 30,000,000 rows 1.9-2.1 s on 32 cores, one GPU 0.55-0.57 s, two
 * 0.49 s. The GPU computes core's scores and bounds bit for bit, so the cells, reaches and radii
 * are the CPU's (and MPI ranks, which compare their partitions' digests, agree whichever assigned).
 * Only the speed depends on where it runs.
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
    radius[p->cluster_of[i]] = MAX(radius[p->cluster_of[i]], *knnwb_partition_reach(p, i));
  g_mutex_lock(&r->lock);
  for (size_t c = 0; c < p->m; c++)
    p->radius[c] = MAX(p->radius[c], radius[c]);
  g_mutex_unlock(&r->lock);
  g_free(radius);
}

/* What every GPU's share of the assignment reads. */
typedef struct {
  KnnwbPartition *p;
  const KnnwbMatrix *data;
  size_t first;
  const volatile gint *cancel;
} KnnwbPartitionAssignPass;

static void knnwb_partition_assign_part(KnnwbPartitionGpuPart *part)
{
  const KnnwbPartitionAssignPass *pass = part->pass;
  KnnwbPartition *p = pass->p;
  const size_t from = pass->first + part->from;
  const KnnwbAssignJob job = {
      .values = pass->data->values + (from - p->data_first) * p->d,
      .n_rows = part->to - part->from,
      .dim = p->d,
      .space = knnwb_partition_bound_space(p->metric),
      .m = p->m,
      .centroid = p->centroid,
      .centroid_sq = p->centroid_sq,
      .margin_factor = knnwb_partition_pair_margin(p->d, 1.0),
      .device = part->device,
      .cancel = pass->cancel,
      .cell = p->cluster_of + from,
      .reach = knnwb_partition_reach(p, from),
  };
  part->status = knnwb_cuda_partition_assign(&job, part->message, sizeof part->message);
}

gboolean knnwb_partition_assign_gpu(KnnwbPartition *p, const KnnwbMatrix *data, size_t first,
                                    size_t last, const volatile gint *cancel, const int *gpus,
                                    int n_gpus, gboolean shared_cores)
{
  const double shared_work =
      shared_cores ? (double)(last - first) * (double)p->m * (double)p->d / MAX(p->threads, 1)
                   : 0.0;
  if (!knnwb_partition_assign_gpu_wanted(g_getenv("KNNWB_PARTITION_GPU_ASSIGN"), n_gpus != 0, p->m,
                                         shared_work))
    return FALSE;
  /* (the count waits for the driver a start may still be initialising; no GPU: 0) */
  const int count = knnwb_cuda_device_count();
  if (n_gpus < 0)
    n_gpus = count;
  for (int u = 0; u < n_gpus; u++)
    if ((gpus != NULL ? gpus[u] : u) >= count)
      return FALSE;
  if (n_gpus <= 0)
    return FALSE;
  const gint64 t0 = g_get_monotonic_time();
  char message[300];
  const KnnwbPartitionAssignPass pass = {p, data, first, cancel};
  if (!knnwb_partition_gpu_parts(last - first, gpus, n_gpus, knnwb_partition_assign_part, &pass,
                                 message, sizeof message)) {
    g_debug("knnwb: partition: nearest centroids on the GPUs: %s; on the CPU instead", message);
    return FALSE;
  }
  KnnwbPartitionRadii r = {.p = p, .first = first};
  g_mutex_init(&r.lock);
  knnwb_parallel_for(p->threads, last - first, 1 << 20, knnwb_partition_gpu_radii, &r);
  g_mutex_clear(&r.lock);
  g_debug("knnwb: partition: %zu rows to their nearest of %zu centroids on %d GPU(s) in %.3f s",
          last - first, p->m, n_gpus, (double)(g_get_monotonic_time() - t0) / 1e6);
  return TRUE;
}
