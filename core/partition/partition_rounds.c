/*
 * What travels between the ranks of a partitioned run in bulk (the rows a split rank brings for
 * phase one, partition_split.c; every rank's lists at the end, partition_combine.c) goes in
 * rounds of at most KNNWB_PARTITION_ROUND_BYTES a rank, the same rounds on every rank. Through
 * the group's shared blocks a round's block is faulted in once and refilled every round, and the
 * group keeps blocks of that size between calls, so the bringing and the combining reuse one;
 * blocks sized for all of it were most of the cost (their fresh pages) and sat in the ranks'
 * memory: 868 MB a rank for the lists at 10,000,000 rows, k = 30, two ranks.
 */
#include "group/group.h"
#include "partition/partition_internal.h"

size_t knnwb_partition_round_count(const KnnwbPartitionRounds *x, int s, int r, size_t j)
{
  const size_t all = s == r ? 0 : x->sizes[(size_t)s * x->size + r] / x->record, done = j * x->q;
  return all > done ? MIN(x->q, all - done) : 0;
}

size_t knnwb_partition_round_offset(const KnnwbPartitionRounds *x, int s, int r, size_t j)
{
  size_t records = 0;
  for (int t = 0; t < r; t++)
    records += knnwb_partition_round_count(x, s, t, j);
  return records * x->record;
}

gboolean knnwb_partition_rounds_plan(const KnnwbKnnGroup *group, const size_t *sizes, size_t record,
                                     KnnwbPartitionRounds *x, GError **error)
{
  /* Test hook: KNNWB_PARTITION_ROUND_BYTES=N, so that small runs take several rounds. */
  const char *hook = g_getenv("KNNWB_PARTITION_ROUND_BYTES");
  const gint64 asked = hook != NULL ? g_ascii_strtoll(hook, NULL, 10) : 0;
  const size_t bytes = asked > 0 ? (size_t)asked : KNNWB_PARTITION_ROUND_BYTES;
  int64_t q = (int64_t)MAX((size_t)1, bytes / (record * (size_t)MAX(group->size - 1, 1)));
  if (!group->reduce(group, &q, 1, KNNWB_GROUP_MIN, error))
    return FALSE;
  *x =
      (KnnwbPartitionRounds){.sizes = sizes, .record = record, .q = (size_t)q, .size = group->size};
  size_t most = 0; /* (records on the way between two ranks, at most) */
  for (size_t t = 0; t < (size_t)group->size * group->size; t++)
    most = MAX(most, sizes[t] / record);
  x->rounds = (most + x->q - 1) / x->q;
  return TRUE;
}
