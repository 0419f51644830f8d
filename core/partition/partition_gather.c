/*
 * Split memory meets clustered rows. A split-memory self run (options->group_split: each rank
 * holds only its block of rows) compares every pair of blocks, while the partitioned search
 * compares each row with its own cluster and the few clusters its bounds cannot rule out. The ranks
 * make the choice one process would make, on the sample one process would take (the rows at the
 * same positions, gathered from the blocks that hold them), and where it says the partition pays:
 *
 * - each rank keeps to its block and brings only the rows it searches (partition_split.c): it
 *   holds less than ranks that put their rows together, in no more time (below);
 * - with KNNWB_PARTITION_SPLIT=0, where the run may (options->group_split_gather) and every rank
 * has room for all rows, they put their blocks together and run the whole-input partitioned search
 *   (partition_ranks.c) with the engine's steps for it (core/engine/knn_together.c: the room, the
 *   rows, the lists of uneven blocks). (On GPUs the engine puts the rows together before this is
 *   asked, unless `--mpi-input split` keeps each rank to its block.)
 *
 * Either way the split search on clustered rows takes many times longer: 400,000 x 50 rows in 50
 * clusters, two ranks on two cores, 79 s split against 11.25 s put together; 10,000,000 x 50 in 50
 * clusters on two ranks of one H200 each, 44 s split against 7 s with the input read whole.
 */
#include <math.h>
#include <string.h>
#include "partition/partition_internal.h"

static void knnwb_partition_values_free(void *values, size_t bytes, void *data)
{
  (void)bytes;
  (void)data;
  g_free(values);
}

static gboolean knnwb_partition_gather_sample(const KnnwbMatrix *block, const KnnwbKnnGroup *group,
                                              const int64_t *counts, size_t n, KnnwbMatrix **sample,
                                              GError **error)
{
  const size_t d = block->n_cols, s = knnwb_partition_sample_rows(n, d);
  const int size = group->size;
  size_t *bytes = g_new0(size_t, (size_t)size);
  size_t first = 0, mine_from = 0, mine_to = 0;
  for (int r = 0; r < size; r++) {
    const size_t last = first + (size_t)counts[r];
    /* the sample's rows are ascending: each block holds a run of them */
    const size_t from = knnwb_partition_sample_below(n, s, first);
    const size_t to = knnwb_partition_sample_below(n, s, last);
    bytes[r] = (to - from) * d * sizeof(float);
    if (r == group->rank) {
      mine_from = from;
      mine_to = to;
    }
    first = last;
  }
  size_t block_first = 0;
  for (int r = 0; r < group->rank; r++)
    block_first += (size_t)counts[r];
  float *mine = g_new(float, MAX((mine_to - mine_from) * d, (size_t)1));
  for (size_t t = mine_from; t < mine_to; t++)
    memcpy(mine + (t - mine_from) * d,
           block->values + (knnwb_partition_sample_at(n, s, t) - block_first) * d,
           d * sizeof(float));
  float *all = g_new(float, s *d);
  const gboolean ok = knnwb_knn_group_gather_bytes(group, mine, bytes, all, error);
  g_free(mine);
  g_free(bytes);
  if (!ok) {
    g_free(all);
    return FALSE;
  }
  *sample = knnwb_matrix_new_wrapped(s, d, all, knnwb_partition_values_free, NULL);
  return TRUE;
}

/* Whether the partitioned search applies to the split run's n rows at all. */
static gboolean knnwb_partition_gather_applies(const KnnwbMatrix *block,
                                               const KnnwbKnnOptions *options,
                                               KnnwbPartitionMode mode, size_t n)
{
  return mode != KNNWB_PARTITION_OFF &&
         knnwb_partition_applies_to(options, n, block->n_cols, block->n_absent_rows) &&
         (mode != KNNWB_PARTITION_AUTO || knnwb_partition_enough_rows(options, n));
}

/* Whether the ranks put their rows together where they may and have room: KNNWB_PARTITION_SPLIT=0
 * (comparisons, tests). By default each keeps to its block: on 1,000,000 x 50 rows in 50 clusters
 * (k = 30, two cores) that held 0.65-0.69 GB a rank against 0.94 GB put together at 2 ranks,
 * 0.43-0.50 GB against 0.86-0.87 GB at 4, and took no longer (16.4-16.6 s against 17.5-18.3 s,
 * 19.7-19.9 s against 22.1-22.7 s); on 300,001 rows of overlapping clusters, most of whose work
 * is visits, a little less memory and up to a tenth longer at 2 ranks (docs/performance-mpi.md). */
static gboolean knnwb_partition_together_wanted(void)
{
  return g_strcmp0(g_getenv("KNNWB_PARTITION_SPLIT"), "0") == 0;
}

/* The ranks' rows put together where they may and have room (*whole; NULL on every rank alike
 * where a rank has none after all). FALSE: the group's errors. */
static gboolean knnwb_partition_gather_whole(const KnnwbMatrix *block, const KnnwbKnnGroup *group,
                                             const KnnwbTogether *t, double expected,
                                             KnnwbMatrix **whole, GError **error)
{
  const gint64 gathered = g_get_monotonic_time();
  if (!knnwb_knn_together_rows(block, group, t, whole, error))
    return FALSE;
  if (*whole != NULL)
    g_debug("knnwb: partition: the ranks' rows put together for the partitioned search (%zu "
            "rows, expected %.1f%% of the work) in %.3f s",
            t->n, 100.0 * expected, (double)(g_get_monotonic_time() - gathered) / 1e6);
  else
    g_debug("knnwb: partition: a rank cannot hold every row after all: each keeps its block");
  return TRUE;
}

/* knnwb_partition_self for a split-memory run (partition_gather.c says when the ranks put their
 * rows together, and when each keeps its block). TRUE with *result NULL: the split search runs
 * instead. */
gboolean knnwb_partition_self_gathered(const KnnwbMatrix *block, const KnnwbKnnOptions *options,
                                       KnnwbPartitionMode mode, KnnwbNeighbors **result,
                                       GError **error)
{
  const KnnwbKnnGroup *group = options->group;
  const gint64 start = g_get_monotonic_time();
  g_auto(KnnwbTogether) t = {0};
  if (!knnwb_knn_together_counts(block, group, &t, error))
    return FALSE;
  const size_t n = t.n;
  if (!knnwb_knn_together_agree(block, options,
                                knnwb_partition_gather_applies(block, options, mode, n), &t, error))
    return FALSE;
  if (!t.apply)
    return TRUE;
  KnnwbMatrix *sample = NULL;
  if (!knnwb_partition_gather_sample(block, group, t.counts, n, &sample, error))
    return FALSE;
  KnnwbPartition p = {0};
  double expected = HUGE_VAL;
  gboolean made = FALSE, chosen = FALSE;
  gboolean ok = knnwb_partition_pick(&p, sample, n, options, mode, "the split search", &expected,
                                     &made, &chosen, error);
  if (ok && made && !chosen)
    g_debug("knnwb: partition: expected %.1f%% of the work: the split search", 100.0 * expected);
  /* (the same on every rank: t.go and the environment are agreed, the choice compared) */
  KnnwbMatrix *whole = NULL;
  if (ok && chosen && t.go && options->group_split_gather && knnwb_partition_together_wanted())
    ok = knnwb_partition_gather_whole(block, group, &t, expected, &whole, error);
  if (ok && chosen && whole == NULL) {
    ok = knnwb_partition_split_run(block, &sample, t.counts, &p, options, mode, made, expected,
                                   start, result, error);
  } else if (ok && chosen) {
    KnnwbKnnOptions gathered = *options;
    gathered.group_split = FALSE;
    gathered.group_split_gather = FALSE;
    ok = knnwb_partition_settle(&p, whole, NULL, &gathered, made, expected, start,
                                "the split search", &chosen, error) &&
         (!chosen || knnwb_partition_run(whole, &gathered, &p, mode, expected, "the split search",
                                         result, error)) &&
         knnwb_knn_together_lists(options, &t, result, error);
  }
  knnwb_matrix_free(sample);
  knnwb_partition_clear(&p);
  knnwb_matrix_free(whole);
  if (ok)
    g_debug("knnwb: partition: %s in %.3f s",
            *result != NULL ? "done" : "not used: the split search",
            (double)(g_get_monotonic_time() - start) / 1e6);
  return ok;
}
