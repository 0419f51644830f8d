/*
 * The bounds pass on the run's GPUs (kernels/partition_bounds.cu), where it pays: with many cells
 * the CPU's pass (partition_visits.c) makes most of each row's products with the centroids one by
 * one, 2-4 s of 10,000,000 rows of overlapping clusters in 304 cells on 16-32 cores; a GPU takes
 * 0.2-0.3 s, most of it copying the rows to it. The GPU computes core's bounds bit for bit,
 * so the visits are the CPU pass's (tests/core/test_partition_visits.c checks both against their
 * definition). Only the speed depends on where the pass runs.
 */
#include <string.h>
#include <knnwb/parallel.h>
#include "knnwb_kernels.h"
#include "partition/partition_internal.h"

/* Host bytes of visits (a bit per row and group) the pass may take: beyond them (10,000,000 rows
 * of more than 832 groups) the CPU's pass runs. */
#define KNNWB_PARTITION_GPU_BOUNDS_BYTES ((size_t)1 << 30)
/* Rows per part of the index's passes (whole words of bits each). */
#define KNNWB_PARTITION_GPU_INDEX_ROWS ((size_t)65536)

/* From KNNWB_PARTITION_GPU_MIN_CELLS cells: up to 2 x 64 cells the CPU's bounds pass takes every
 * product from its vector kernels (partition_visits.c's knnwb_partition_row_dots) and is cheap
 * next to the GPU's copy of the rows (about 0.3 s for 10 M rows of 50). */
static gboolean knnwb_partition_gpu_rule(const char *setting, gboolean has_gpu, size_t m)
{
  if (!has_gpu)
    return FALSE;
  if (setting != NULL && *setting != '\0')
    return strcmp(setting, "0") != 0;
  return m >= KNNWB_PARTITION_GPU_MIN_CELLS;
}

gboolean knnwb_partition_gpu_wanted(const char *knob, gboolean has_gpu, size_t m)
{
  return knnwb_partition_gpu_rule(g_getenv(knob), has_gpu, m);
}

/* Ranks that share a host's cores assign on its GPUs from any number of centroids where their
 * CPU's assignment is long: each runs on its share of the cores. Two ranks sharing an H200 and 16
 * cores, 76 centroids of 10,000,000 x 50 (2.4e9 multiply-adds a thread): 0.30-0.35 s a rank's
 * block on the GPU against 0.36-0.44 s on the cores. Three ranks, 61 centroids of 2,000,001 rows
 * (4e8 a thread): the GPU took 0.32 s, most of it waiting for the GPU's start, where one process
 * took 0.06 s of every row on the cores. One process keeps its cores below
 * KNNWB_PARTITION_GPU_MIN_CELLS (0.34-0.39 s at 10,000,000 rows on 16 cores against 0.40-0.41 s
 * on the GPU). */
gboolean knnwb_partition_assign_gpu_wanted(const char *setting, gboolean has_gpu, size_t m,
                                           double shared_work)
{
  return knnwb_partition_gpu_rule(setting, has_gpu,
                                  shared_work >= KNNWB_PARTITION_GPU_ASSIGN_SHARED_WORK
                                      ? MAX(m, KNNWB_PARTITION_GPU_MIN_CELLS)
                                      : m);
}

int knnwb_partition_bound_space(KnnwbMetric metric)
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

static gpointer knnwb_partition_gpu_part(gpointer data)
{
  KnnwbPartitionGpuPart *part = data;
  part->work(part);
  return NULL;
}

gboolean knnwb_partition_gpu_parts(size_t rows, const int *devices, int n_gpus,
                                   void (*work)(KnnwbPartitionGpuPart *part), const void *pass,
                                   char *message, size_t message_size)
{
  KnnwbPartitionGpuPart *parts = g_new0(KnnwbPartitionGpuPart, MAX(n_gpus, 1));
  GThread **threads = g_new0(GThread *, MAX(n_gpus, 1));
  for (int u = 0; u < n_gpus; u++) {
    KnnwbPartitionGpuPart *part = &parts[u];
    part->from = rows * (size_t)u / (size_t)n_gpus;
    part->to = rows * (size_t)(u + 1) / (size_t)n_gpus;
    part->device = devices != NULL ? devices[u] : u;
    part->pass = pass;
    part->work = work;
    if (part->to > part->from)
      threads[u] = g_thread_try_new("knnwb-gpu-part", knnwb_partition_gpu_part, part, NULL);
    if (part->to > part->from && threads[u] == NULL)
      knnwb_partition_gpu_part(part);
  }
  gboolean ok = TRUE;
  for (int u = 0; u < n_gpus; u++) {
    if (threads[u] != NULL)
      g_thread_join(threads[u]);
    if (ok && parts[u].to > parts[u].from && parts[u].status != KNNWB_KERNELS_OK) {
      g_snprintf(message, message_size, "GPU %d: %s", parts[u].device, parts[u].message);
      ok = FALSE;
    }
  }
  g_free(threads);
  g_free(parts);
  return ok;
}

/* What every GPU's share of the bounds pass reads. */
typedef struct {
  const KnnwbPartitionRun *run;
  const double *gap;
  const double *limit; /* per row of the run's, from run->first */
  uint64_t *visits;    /* per row of the run's: words of bits */
  size_t words;
} KnnwbPartitionBoundsPass;

static void knnwb_partition_bounds_part(KnnwbPartitionGpuPart *part)
{
  const KnnwbPartitionBoundsPass *pass = part->pass;
  const KnnwbPartitionRun *run = pass->run;
  const KnnwbPartition *p = run->p;
  const size_t first = run->first + part->from;
  const KnnwbBoundsJob job = {
      .values = knnwb_partition_row(run, first),
      .n_rows = part->to - part->from,
      .dim = p->d,
      .space = knnwb_partition_bound_space(p->metric),
      .cell = p->cluster_of + first,
      .limit = pass->limit + part->from,
      .m = p->m,
      .groups = p->groups,
      .centroid = p->centroid,
      .centroid_sq = p->centroid_sq,
      .radius = p->radius,
      .gap = pass->gap,
      .group_of = p->group_of,
      .margin_factor = knnwb_partition_pair_margin(p->d, 1.0),
      .device = part->device,
      .cancel = run->options->cancel,
      .visits = pass->visits + part->from * pass->words,
  };
  part->status = knnwb_cuda_partition_bounds(&job, part->message, sizeof part->message);
}

/* The visitor index from the bits, in two passes over parts of KNNWB_PARTITION_GPU_INDEX_ROWS
 * rows: each part's count per group, then each part's rows at its offsets (rows ascending within
 * each group, as the parts are in order). */
typedef struct {
  KnnwbPartitionRun *run;
  const uint64_t *visits;
  size_t words, rows, groups;
  int64_t *at; /* parts x groups: counts, then offsets */
} KnnwbPartitionGpuIndex;

static void knnwb_partition_gpu_count(size_t from, size_t to, void *data)
{
  const KnnwbPartitionGpuIndex *x = data;
  for (size_t part = from; part < to; part++) {
    int64_t *count = x->at + part * x->groups;
    const size_t last = MIN(x->rows, (part + 1) * KNNWB_PARTITION_GPU_INDEX_ROWS);
    for (size_t r = part * KNNWB_PARTITION_GPU_INDEX_ROWS; r < last; r++)
      for (size_t w = 0; w < x->words; w++)
        for (uint64_t bits = x->visits[r * x->words + w]; bits != 0; bits &= bits - 1)
          count[64 * w + (size_t)__builtin_ctzll(bits)]++;
  }
}

static void knnwb_partition_gpu_fill(size_t from, size_t to, void *data)
{
  const KnnwbPartitionGpuIndex *x = data;
  for (size_t part = from; part < to; part++) {
    int64_t *at = x->at + part * x->groups;
    const size_t last = MIN(x->rows, (part + 1) * KNNWB_PARTITION_GPU_INDEX_ROWS);
    for (size_t r = part * KNNWB_PARTITION_GPU_INDEX_ROWS; r < last; r++)
      for (size_t w = 0; w < x->words; w++)
        for (uint64_t bits = x->visits[r * x->words + w]; bits != 0; bits &= bits - 1)
          x->run->queries[at[64 * w + (size_t)__builtin_ctzll(bits)]++] =
              (int64_t)(x->run->first + r);
  }
}

gboolean knnwb_partition_visits_from_bits(KnnwbPartitionRun *run, const uint64_t *visits,
                                          size_t words, size_t rows)
{
  const size_t groups = run->p->groups;
  const size_t parts =
      MAX((size_t)1, (rows + KNNWB_PARTITION_GPU_INDEX_ROWS - 1) / KNNWB_PARTITION_GPU_INDEX_ROWS);
  KnnwbPartitionGpuIndex x = {.run = run,
                              .visits = visits,
                              .words = words,
                              .rows = rows,
                              .groups = groups,
                              .at = g_try_new0(int64_t, parts * groups)};
  if (x.at == NULL)
    return FALSE;
  knnwb_parallel_for(run->p->threads, parts, 1, knnwb_partition_gpu_count, &x);
  int64_t *start = g_new0(int64_t, groups + 1);
  for (size_t g = 0; g < groups; g++) {
    int64_t at = start[g];
    for (size_t part = 0; part < parts; part++) {
      const int64_t count = x.at[part * groups + g];
      x.at[part * groups + g] = at;
      at += count;
    }
    start[g + 1] = at;
  }
  run->queries = g_try_new(int64_t, MAX((size_t)start[groups], (size_t)1));
  if (run->queries != NULL) {
    knnwb_parallel_for(run->p->threads, parts, 1, knnwb_partition_gpu_fill, &x);
    run->query_start = start;
  } else {
    g_free(start);
  }
  g_free(x.at);
  return run->queries != NULL;
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

gboolean knnwb_partition_visits_gpu(KnnwbPartitionRun *run, const double *gap)
{
  if (!knnwb_partition_gpu_wanted("KNNWB_PARTITION_GPU_BOUNDS",
                                  run->devices != NULL && run->gpus > 0, run->p->m))
    return FALSE;
  const KnnwbPartition *p = run->p;
  const size_t rows = run->last - run->first, words = (p->groups + 63) / 64;
  if (rows > KNNWB_PARTITION_GPU_BOUNDS_BYTES / (words * sizeof(uint64_t)))
    return FALSE;
  const gint64 t0 = g_get_monotonic_time();
  double *limit = g_try_new(double, MAX(rows, (size_t)1));
  uint64_t *visits = g_try_new(uint64_t, MAX(rows * words, (size_t)1));
  gboolean ok = limit != NULL && visits != NULL;
  char message[300] = "out of host memory";
  if (ok) {
    KnnwbPartitionLimits l = {.run = run, .limit = limit};
    knnwb_parallel_for(p->threads, rows, 65536, knnwb_partition_gpu_limits, &l);
  }
  const gint64 t1 = g_get_monotonic_time();
  const KnnwbPartitionBoundsPass pass = {run, gap, limit, visits, words};
  ok = ok && knnwb_partition_gpu_parts(rows, run->devices, run->gpus, knnwb_partition_bounds_part,
                                       &pass, message, sizeof message);
  const gint64 t2 = g_get_monotonic_time();
  ok = ok && knnwb_partition_visits_from_bits(run, visits, words, rows);
  g_free(visits);
  g_free(limit);
  if (!ok) {
    g_debug("knnwb: partition: bounds on the GPU: %s; on the CPU instead", message);
    return FALSE;
  }
  g_debug("knnwb: partition: bounds of %zu rows and %zu cells on %d GPU(s) in %.3f s (limits "
          "%.3f s, GPUs %.3f s, index %.3f s)",
          rows, p->m, run->gpus, (double)(g_get_monotonic_time() - t0) / 1e6,
          (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
          (double)(g_get_monotonic_time() - t2) / 1e6);
  return TRUE;
}
