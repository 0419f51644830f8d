/*
 * Split memory meets clustered rows. A split-memory self run (options->group_split: each rank
 * holds only its block of rows) compares every pair of blocks, while the partitioned search
 * compares each row with its own cluster and the few clusters its bounds cannot rule out; but
 * that search takes its groups' rows from anywhere, so every rank needs every row. When the run
 * may (options->group_split_gather), the ranks make the choice one process would make, on the
 * sample one process would take (the rows at the same positions, gathered from the blocks that
 * hold them), and if it says the partition pays and every rank has room for all rows, they put
 * their blocks together and run the whole-input partitioned search (partition_ranks.c). On
 * 400,000 x 50 rows in 50 clusters, two ranks on two cores: 79 s and up to 1.1 GB a rank split,
 * 11.25 s and up to 579 MB a rank put together, one process 12.0 s and 471 MB; the same bytes.
 * On GPUs the ranks put their rows together whatever they are (given the room) and the
 * whole-input search runs: the split search scores a visiting pair of blocks as two panels there.
 * Lists of uneven blocks are re-cut from the whole-input run's even shares.
 */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "partition/partition_internal.h"

static void knnwb_partition_values_free(void *values, size_t bytes, void *data)
{
  (void)bytes;
  (void)data;
  g_free(values);
}

static gboolean knnwb_partition_gather_room(size_t n, size_t d, size_t k, int local_size)
{
  /* the whole rows, the whole-input run's lists (an index and a distance for each of n x k) and
   * its n-long arrays (cells, reaches, members, k-th distances) */
  const double need = (double)n * ((double)d * sizeof(float) +
                                   (double)k * (sizeof(int64_t) + sizeof(double)) + 32.0);
  /* KNNWB_PARTITION_GATHER_ROOM=BYTES: the memory each rank is taken to have (tests) */
  const char *forced = g_getenv("KNNWB_PARTITION_GATHER_ROOM");
  const double available = forced != NULL && *forced != '\0'
                               ? (double)g_ascii_strtoull(forced, NULL, 10)
                               : (double)knnwb_memory_available() / (double)MAX(local_size, 1);
  /* at most half: the run's tiles, the block the rank read and the writer need the rest */
  return need <= 0.5 * available;
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
    size_t from = 0, to = 0;
    for (size_t t = 0; t < s; t++) {
      const size_t i = knnwb_partition_sample_at(n, s, t);
      if (i < first)
        from = t + 1;
      if (i < last)
        to = t + 1;
    }
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

/* Every rank's block put together into *whole on every rank (knnwb_knn_group_gather_rows). TRUE
 * with *whole NULL (on every rank alike): some rank could not allocate them, and the split search
 * runs. FALSE: the group's errors. */
static gboolean knnwb_partition_gather_blocks(const KnnwbMatrix *block, const KnnwbKnnGroup *group,
                                              const int64_t *counts, KnnwbMatrix **whole,
                                              GError **error)
{
  GError *local = NULL;
  *whole = knnwb_knn_group_gather_rows(group, block, counts, &local);
  if (*whole == NULL && g_error_matches(local, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY)) {
    g_clear_error(&local);
    return TRUE;
  }
  if (local != NULL)
    g_propagate_error(error, local);
  return *whole != NULL;
}

/* Rows [*first, *last) of the blocks counts gives (rank r's when r >= 0). */
static void knnwb_partition_block_of(const int64_t *counts, int r, size_t *first, size_t *last)
{
  *first = 0;
  for (int s = 0; s < r; s++)
    *first += (size_t)counts[s];
  *last = *first + (size_t)counts[r];
}

/* One array of the lists (width values of `size` bytes a row) sent from `from`'s rows to the
 * ranks whose blocks hold them, received into `to` (this rank's block). */
static gboolean knnwb_partition_reblock_array(const KnnwbKnnGroup *group, const int64_t *counts,
                                              size_t n, const void *from, void *to, size_t width,
                                              GError **error)
{
  const int size = group->size;
  size_t even_first, even_last, mine_first, mine_last;
  knnwb_knn_group_rows(n, group->rank, size, &even_first, &even_last);
  knnwb_partition_block_of(counts, group->rank, &mine_first, &mine_last);
  const void **send = g_new0(const void *, (size_t)size);
  void **receive = g_new0(void *, (size_t)size);
  size_t *send_bytes = g_new0(size_t, (size_t)size), *receive_bytes = g_new0(size_t, (size_t)size);
  for (int r = 0; r < size; r++) {
    size_t first, last, other_first, other_last;
    knnwb_partition_block_of(counts, r, &first, &last); /* r's block: what this rank sends it */
    first = MAX(first, even_first);
    last = MIN(last, even_last);
    if (first < last) {
      send[r] = (const char *)from + (first - even_first) * width;
      send_bytes[r] = (last - first) * width;
    }
    knnwb_knn_group_rows(n, r, size, &other_first, &other_last); /* what r sends this rank */
    other_first = MAX(other_first, mine_first);
    other_last = MIN(other_last, mine_last);
    if (other_first < other_last) {
      receive[r] = (char *)to + (other_first - mine_first) * width;
      receive_bytes[r] = (other_last - other_first) * width;
    }
  }
  const gboolean ok =
      group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error);
  g_free(send);
  g_free(receive);
  g_free(send_bytes);
  g_free(receive_bytes);
  return ok;
}

static gboolean knnwb_partition_gather_reblock(const KnnwbKnnGroup *group, const int64_t *counts,
                                               size_t n, KnnwbNeighbors **lists, GError **error)
{
  KnnwbNeighbors *even = *lists;
  const size_t k = even->k;
  size_t first, last;
  knnwb_partition_block_of(counts, group->rank, &first, &last);
  KnnwbNeighbors *block = knnwb_knn_result_new(first, last - first, k, error);
  if (!group->agree(group, block != NULL, error)) {
    knnwb_neighbors_free(block);
    return FALSE;
  }
  const gboolean ok = knnwb_partition_reblock_array(group, counts, n, even->indices, block->indices,
                                                    k * sizeof(int64_t), error) &&
                      knnwb_partition_reblock_array(group, counts, n, even->distances,
                                                    block->distances, k * sizeof(double), error) &&
                      knnwb_partition_reblock_array(group, counts, n, even->n_found, block->n_found,
                                                    sizeof(int32_t), error);
  if (!ok) {
    knnwb_neighbors_free(block);
    return FALSE;
  }
  block->backend_used = g_steal_pointer(&even->backend_used);
  block->screen_used = even->screen_used;
  block->n_reselected = even->n_reselected;
  block->n_exhaustive = even->n_exhaustive;
  knnwb_neighbors_free(even);
  *lists = block;
  return TRUE;
}

/* Whether the blocks (counts, n rows in all) are the even shares a whole-input run gives its
 * ranks: then each rank's lists of that run are its block's. */
static gboolean knnwb_partition_blocks_even(const KnnwbKnnGroup *group, const int64_t *counts,
                                            size_t n)
{
  gboolean even = TRUE;
  for (int r = 0; r < group->size; r++) {
    size_t first, last;
    knnwb_knn_group_rows(n, r, group->size, &first, &last);
    even = even && (size_t)counts[r] == last - first;
  }
  return even;
}

/* Whether every rank can hold the whole run's n rows (each says for itself), whose values are all
 * they need (no absent rows, no ranks as read: those stay with the split search). */
static gboolean knnwb_partition_gather_fits(const KnnwbMatrix *block,
                                            const KnnwbKnnOptions *options, size_t n)
{
  KnnwbKnnOptions whole = *options;
  whole.group_split = FALSE;
  return block->n_absent_rows == 0 && block->row_ranks == NULL &&
         knnwb_knn_check_sizes(n, n, block->n_cols, block->n_cols, n, n, TRUE, &whole, NULL) &&
         knnwb_partition_gather_room(n, block->n_cols, options->k, options->group->local_size);
}

/* Whether the partitioned search applies to the split run's n rows at all. */
static gboolean knnwb_partition_gather_applies(const KnnwbMatrix *block,
                                               const KnnwbKnnOptions *options,
                                               KnnwbPartitionMode mode, size_t n)
{
  return mode != KNNWB_PARTITION_OFF &&
         knnwb_partition_applies_to(options, n, block->n_cols, block->n_absent_rows) &&
         (mode != KNNWB_PARTITION_AUTO || n >= KNNWB_PARTITION_MIN_ROWS);
}

/* Whether a split run that may put its rows together does so whatever its rows: on GPUs, whose
 * backend scores a visiting pair of blocks as two panels while the whole rows' tiles are shared
 * and scored once (as `knnwb knn` takes the whole input on GPUs), or when
 * KNNWB_PARTITION_GATHER_ALWAYS=1 (tests: that path on the CPU). */
static gboolean knnwb_partition_gather_always(const KnnwbKnnOptions *options)
{
  return g_strcmp0(g_getenv("KNNWB_PARTITION_GATHER_ALWAYS"), "1") == 0 ||
         knnwb_knn_uses_gpu(options);
}

/* The whole rows' lists (the run put together: whole) made this rank's block's (counts, n rows),
 * as the split run returns them. */
static gboolean knnwb_partition_gathered_lists(const KnnwbKnnOptions *options,
                                               const int64_t *counts, size_t n,
                                               KnnwbNeighbors **result, GError **error)
{
  /* (the run's outcome is the same on every rank, so all re-cut or none) */
  if (*result == NULL || !options->group_own_rows ||
      knnwb_partition_blocks_even(options->group, counts, n))
    return TRUE;
  if (knnwb_partition_gather_reblock(options->group, counts, n, result, error))
    return TRUE;
  g_clear_pointer(result, knnwb_neighbors_free);
  return FALSE;
}

/* The split run on GPUs put together: every rank gets every row, and the whole-input search
 * (the partitioned one where it pays, else the shared tiles) runs over the ranks. */
static gboolean knnwb_partition_self_whole(const KnnwbMatrix *block, const KnnwbKnnOptions *options,
                                           const int64_t *counts, size_t n, KnnwbNeighbors **result,
                                           GError **error)
{
  const gint64 start = g_get_monotonic_time();
  KnnwbMatrix *whole = NULL;
  if (!knnwb_partition_gather_blocks(block, options->group, counts, &whole, error))
    return FALSE;
  if (whole == NULL) {
    g_debug("knnwb: partition: a rank cannot hold every row after all: the split search");
    return TRUE;
  }
  g_debug("knnwb: partition: the ranks' rows put together for the whole-input search (%zu rows) in "
          "%.3f s",
          n, (double)(g_get_monotonic_time() - start) / 1e6);
  KnnwbKnnOptions gathered = *options;
  gathered.group_split = FALSE;
  gathered.group_split_gather = FALSE;
  gboolean ok = knnwb_knn_self(whole, &gathered, result, error);
  knnwb_matrix_free(whole);
  return ok && knnwb_partition_gathered_lists(options, counts, n, result, error);
}

/* knnwb_partition_self for a split-memory run that may put its rows together (partition_gather.c
 * says when and why). TRUE with *result NULL: the split search runs instead. */
gboolean knnwb_partition_self_gathered(const KnnwbMatrix *block, const KnnwbKnnOptions *options,
                                       KnnwbPartitionMode mode, KnnwbNeighbors **result,
                                       GError **error)
{
  const KnnwbKnnGroup *group = options->group;
  const gint64 start = g_get_monotonic_time();
  g_autofree int64_t *counts = g_new(int64_t, (size_t)group->size);
  if (!knnwb_knn_group_gather_values(group, (int64_t)block->n_rows, counts, error))
    return FALSE;
  size_t n = 0;
  for (int r = 0; r < group->size; r++)
    n += (size_t)counts[r];
  /* (blocks of different widths: the split search's checks say so) */
  const gboolean fits = knnwb_partition_gather_fits(block, options, n);
  int64_t go[4] = {fits && knnwb_partition_gather_applies(block, options, mode, n),
                   fits && knnwb_partition_gather_always(options), (int64_t)block->n_cols,
                   -(int64_t)block->n_cols};
  if (!group->reduce(group, go, 4, KNNWB_GROUP_MIN, error))
    return FALSE;
  if (go[2] != -go[3])
    return TRUE;
  if (go[1])
    return knnwb_partition_self_whole(block, options, counts, n, result, error);
  if (!go[0])
    return TRUE;
  KnnwbMatrix *sample = NULL;
  if (!knnwb_partition_gather_sample(block, group, counts, n, &sample, error))
    return FALSE;
  KnnwbPartition p = {0};
  double expected = HUGE_VAL;
  gboolean made = FALSE, chosen = FALSE;
  gboolean ok =
      knnwb_partition_pick(&p, sample, n, options, mode, &expected, &made, &chosen, error);
  knnwb_matrix_free(sample);
  if (ok && made && !chosen)
    g_debug("knnwb: partition: expected %.1f%% of the work: the split search", 100.0 * expected);
  KnnwbMatrix *whole = NULL;
  if (ok && chosen) {
    const gint64 gathered = g_get_monotonic_time();
    ok = knnwb_partition_gather_blocks(block, group, counts, &whole, error);
    chosen = whole != NULL;
    if (ok && chosen)
      g_debug("knnwb: partition: the ranks' rows put together for the partitioned search (%zu "
              "rows, expected %.1f%% of the work) in %.3f s",
              n, 100.0 * expected, (double)(g_get_monotonic_time() - gathered) / 1e6);
    else if (ok)
      g_debug("knnwb: partition: a rank cannot hold every row after all: the split search");
  }
  KnnwbKnnOptions gathered = *options;
  gathered.group_split = FALSE;
  gathered.group_split_gather = FALSE;
  ok = ok && (!chosen ||
              knnwb_partition_settle(&p, whole, &gathered, made, expected, start, &chosen, error));
  if (ok && chosen)
    ok = knnwb_partition_run(whole, &gathered, &p, mode, expected, result, error);
  knnwb_partition_clear(&p);
  knnwb_matrix_free(whole);
  ok = ok && knnwb_partition_gathered_lists(options, counts, n, result, error);
  if (ok)
    g_debug("knnwb: partition: %s in %.3f s",
            *result != NULL ? "done" : "not used: the split search",
            (double)(g_get_monotonic_time() - start) / 1e6);
  return ok;
}
