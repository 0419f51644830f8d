/*
 * The bounds pass on the run's GPUs (kernels/partition_bounds.cu), where it pays: with many cells
 * the CPU's pass (partition_visits.c) makes most of each row's products with the centroids one by
 * one, 2-4 s of 10,000,000 rows of overlapping clusters in 304 cells on 16-32 cores; a GPU makes
 * them all in a fraction of the copy of the rows to it. The GPU computes core's bounds bit for bit,
 * so the visits are the CPU pass's (tests/core/test_partition_visits.c checks both against their
 * definition). Only the speed depends on where the pass runs.
 */
#include <string.h>
#include <knnwb/parallel.h>
#include "knnwb_kernels.h"
#include "partition/partition_internal.h"

/* Cells from which the automatic choice bounds on the GPU: up to 2 x 64 cells the CPU's pass takes
 * every product from its vector kernels (partition_visits.c's knnwb_partition_row_dots) and is
 * cheap next to the GPU's copy of the rows. */
#define KNNWB_PARTITION_GPU_BOUNDS_CELLS ((size_t)129)
/* Host bytes of visits (a bit per row and group) a range of rows takes at once. */
#define KNNWB_PARTITION_GPU_BOUNDS_BYTES ((size_t)256 << 20)

/* KNNWB_PARTITION_GPU_BOUNDS: 1 always on a GPU run, 0 never; unset: from
 * KNNWB_PARTITION_GPU_BOUNDS_CELLS cells. */
static gboolean knnwb_partition_visits_gpu_wanted(const KnnwbPartitionRun *run)
{
  if (run->devices == NULL || run->gpus < 1)
    return FALSE;
  const char *v = g_getenv("KNNWB_PARTITION_GPU_BOUNDS");
  if (v != NULL && *v != '\0')
    return strcmp(v, "0") != 0;
  return run->p->m >= KNNWB_PARTITION_GPU_BOUNDS_CELLS;
}

static int knnwb_partition_bound_space(KnnwbMetric metric)
{
  switch (metric) {
  case KNNWB_METRIC_EUCLIDEAN:
    return KNNWB_BOUND_SPACE_PLAIN;
  case KNNWB_METRIC_COSINE:
    return KNNWB_BOUND_SPACE_SCALED;
  case KNNWB_METRIC_ABS_PEARSON:
    return KNNWB_BOUND_SPACE_ABS;
  default:
    return KNNWB_BOUND_SPACE_CENTRED;
  }
}

typedef struct {
  const KnnwbPartitionRun *run;
  const double *gap;
  const double *limit; /* per row of the run's, from run->first */
  uint64_t *visits;    /* the range's rows x words */
  size_t words;
  size_t from, to; /* this GPU's rows, from run->first */
  size_t base;     /* the range's first row, from run->first */
  int device;
  int status;
  char message[256];
} KnnwbPartitionGpuPart;

static gpointer knnwb_partition_bounds_part(gpointer data)
{
  KnnwbPartitionGpuPart *part = data;
  const KnnwbPartitionRun *run = part->run;
  const KnnwbPartition *p = run->p;
  const size_t first = run->first + part->from;
  const KnnwbBoundsJob job = {
      .values = run->data->values + first * p->d,
      .n_rows = part->to - part->from,
      .dim = p->d,
      .space = knnwb_partition_bound_space(p->metric),
      .cell = p->cluster_of + first,
      .limit = part->limit + part->from,
      .m = p->m,
      .groups = p->groups,
      .centroid = p->centroid,
      .centroid_sq = p->centroid_sq,
      .radius = p->radius,
      .gap = part->gap,
      .group_of = p->group_of,
      .margin_factor = knnwb_partition_pair_margin(p->d, 1.0),
      .device = part->device,
      .cancel = run->options->cancel,
      .visits = part->visits + (part->from - part->base) * part->words,
  };
  part->status = knnwb_cuda_partition_bounds(&job, part->message, sizeof part->message);
  return NULL;
}

typedef struct {
  const KnnwbPartitionRun *run;
  const uint64_t *visits; /* rows [base, ...) x words */
  size_t words, base, end;
  GArray **found;
} KnnwbPartitionGpuFound;

/* Blocks [from, to) of the range (KNNWB_PARTITION_BOUND_ROWS rows each, from its first) as the
 * CPU's pass gives them: every visit (group << 40 | row), rows ascending. */
static void knnwb_partition_gpu_found(size_t from, size_t to, void *data)
{
  const KnnwbPartitionGpuFound *f = data;
  for (size_t b = from; b < to; b++) {
    const size_t r0 = f->base + b * KNNWB_PARTITION_BOUND_ROWS;
    const size_t r1 = MIN(f->end, r0 + KNNWB_PARTITION_BOUND_ROWS);
    GArray *found = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    for (size_t r = r0; r < r1; r++) {
      const uint64_t *bits = f->visits + (r - f->base) * f->words;
      for (size_t w = 0; w < f->words; w++)
        for (uint64_t word = bits[w]; word != 0; word &= word - 1) {
          const uint64_t g = 64 * w + (uint64_t)__builtin_ctzll(word);
          const uint64_t visit = (g << 40) | (uint64_t)(f->run->first + r);
          g_array_append_val(found, visit);
        }
    }
    f->found[r0 / KNNWB_PARTITION_BOUND_ROWS] = found;
  }
}

typedef struct {
  const KnnwbPartitionRun *run;
  double *limit;
} KnnwbPartitionLimits;

static void knnwb_partition_gpu_limits(size_t from, size_t to, void *data)
{
  const KnnwbPartitionLimits *l = data;
  const KnnwbPartition *p = l->run->p;
  for (size_t i = from; i < to; i++)
    l->limit[i] = knnwb_partition_chord_limit(p->metric,
                                              knnwb_partition_kth(l->run, l->run->first + i), p->d);
}

/* Rows [base, end) of the run's (from run->first) on its GPUs, a share each, into found. FALSE
 * with the first failure in message. */
static gboolean knnwb_partition_gpu_range(const KnnwbPartitionRun *run, const double *gap,
                                          const double *limit, uint64_t *visits, size_t words,
                                          size_t base, size_t end, GArray **found, double *found_s,
                                          char *message, size_t message_size)
{
  const int gpus = run->gpus;
  KnnwbPartitionGpuPart *parts = g_new0(KnnwbPartitionGpuPart, gpus);
  GThread **threads = g_new0(GThread *, gpus);
  const size_t blocks = (end - base + KNNWB_PARTITION_BOUND_ROWS - 1) / KNNWB_PARTITION_BOUND_ROWS;
  for (int u = 0; u < gpus; u++) {
    KnnwbPartitionGpuPart *part = &parts[u];
    *part = (KnnwbPartitionGpuPart){.run = run,
                                    .gap = gap,
                                    .limit = limit,
                                    .visits = visits,
                                    .words = words,
                                    .base = base,
                                    .device = run->devices[u]};
    part->from = MIN(end, base + blocks * (size_t)u / (size_t)gpus * KNNWB_PARTITION_BOUND_ROWS);
    part->to =
        MIN(end, base + blocks * (size_t)(u + 1) / (size_t)gpus * KNNWB_PARTITION_BOUND_ROWS);
    if (part->to > part->from)
      threads[u] = g_thread_try_new("knnwb-bounds", knnwb_partition_bounds_part, part, NULL);
    if (part->to > part->from && threads[u] == NULL)
      knnwb_partition_bounds_part(part);
  }
  gboolean ok = TRUE;
  for (int u = 0; u < gpus; u++) {
    if (threads[u] != NULL)
      g_thread_join(threads[u]);
    if (ok && parts[u].status != KNNWB_KERNELS_OK) {
      g_snprintf(message, message_size, "GPU %d: %s", parts[u].device, parts[u].message);
      ok = FALSE;
    }
  }
  const gint64 t0 = g_get_monotonic_time();
  if (ok) {
    KnnwbPartitionGpuFound f = {
        .run = run, .visits = visits, .words = words, .base = base, .end = end, .found = found};
    knnwb_parallel_for(run->p->threads, blocks, 16, knnwb_partition_gpu_found, &f);
  }
  *found_s += (double)(g_get_monotonic_time() - t0) / 1e6;
  g_free(threads);
  g_free(parts);
  return ok;
}

gboolean knnwb_partition_visits_gpu(const KnnwbPartitionRun *run, const double *gap, GArray **found,
                                    size_t blocks)
{
  if (!knnwb_partition_visits_gpu_wanted(run))
    return FALSE;
  const KnnwbPartition *p = run->p;
  const size_t rows = run->last - run->first, words = (p->groups + 63) / 64;
  /* ranges of whole blocks whose visits take at most KNNWB_PARTITION_GPU_BOUNDS_BYTES */
  const size_t range = MAX((size_t)1, KNNWB_PARTITION_GPU_BOUNDS_BYTES /
                                          (words * sizeof(uint64_t)) / KNNWB_PARTITION_BOUND_ROWS) *
                       KNNWB_PARTITION_BOUND_ROWS;
  double *limit = g_try_new(double, MAX(rows, (size_t)1));
  uint64_t *visits = g_try_new(uint64_t, MIN(rows, range) * words + 1);
  gboolean ok = limit != NULL && visits != NULL;
  char message[300] = "out of host memory";
  const gint64 t0 = g_get_monotonic_time();
  double found_s = 0.0;
  if (ok) {
    KnnwbPartitionLimits l = {.run = run, .limit = limit};
    knnwb_parallel_for(p->threads, rows, 65536, knnwb_partition_gpu_limits, &l);
  }
  const gint64 t1 = g_get_monotonic_time();
  for (size_t base = 0; ok && base < rows; base += range)
    ok = knnwb_partition_gpu_range(run, gap, limit, visits, words, base, MIN(rows, base + range),
                                   found, &found_s, message, sizeof message);
  g_free(visits);
  g_free(limit);
  if (!ok) {
    g_debug("knnwb: partition: bounds on the GPU: %s; on the CPU instead", message);
    for (size_t b = 0; b < blocks; b++)
      if (found[b] != NULL)
        g_clear_pointer(&found[b], g_array_unref);
    return FALSE;
  }
  g_debug("knnwb: partition: bounds of %zu rows and %zu cells on %d GPU(s) in %.3f s (limits "
          "%.3f s, visits listed %.3f s)",
          rows, p->m, run->gpus, (double)(g_get_monotonic_time() - t0) / 1e6,
          (double)(t1 - t0) / 1e6, found_s);
  return TRUE;
}
