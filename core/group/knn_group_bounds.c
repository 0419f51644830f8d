/*
 * A shared self job's thresholds made common between the ranks (KnnwbSelectJob.share_bounds):
 * each rank's backend hands in its upper bounds on every row's kc-th best score and gets the
 * minimum over the ranks, so that it filters its tiles against the whole job's thresholds. Ranks
 * of one host post their bounds on the group's board and read each other's there without waiting
 * (a bound another rank posted is valid whenever it is read: its lists only get better). Otherwise
 * the rounds are collective reductions: the ranks agree on their number before the selection, and
 * whatever a backend did not use (a CPU rank, a failure, cancellation, several GPUs in one rank)
 * is completed after it, so every rank makes the same reductions in the same order.
 */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include "group/group_internal.h"

/* Rounds a GPU rank may use: one after the diagonal phase, then at even steps of its tiles. Each
 * moves n x 8 bytes per rank (0.1 s in all at n = 1.5 M on one host's shared memory). */
#define KNNWB_GROUP_BOUND_ROUNDS 12
/* With a board a round waits for nobody: a copy of n floats each way between the GPU and the host
 * and a pass over the other ranks' entries (a few ms at n = 1.5 M). */
#define KNNWB_GROUP_BOARD_ROUNDS 24

/* Floats as int64 keys in the same order (a reduction of int64 is all the group offers). */
int64_t knnwb_group_bound_key(float value)
{
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  return (bits & 0x80000000u) ? -(int64_t)(bits & 0x7fffffffu) : (int64_t)bits;
}

float knnwb_group_bound_value(int64_t key)
{
  const uint32_t bits = key < 0 ? 0x80000000u | (uint32_t)-key : (uint32_t)key;
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

gboolean knnwb_group_bounds_init(KnnwbGroupBounds *bounds, const KnnwbKnnGroup *group, size_t n,
                                 gboolean wanted, GError **error)
{
  *bounds = (KnnwbGroupBounds){.group = group, .n = n};
  int64_t rounds = wanted && n > 0 ? KNNWB_GROUP_BOUND_ROUNDS : 0;
  if (!group->reduce(group, &rounds, 1, KNNWB_GROUP_MIN, error))
    return FALSE;
  bounds->rounds = (int)rounds;
  if (rounds > 0 && group->board_open != NULL) {
    GError *open_error = NULL;
    bounds->board = group->board_open(group, n, &open_error);
    if (open_error != NULL) {
      g_propagate_error(error, open_error);
      return FALSE;
    }
  }
  if (bounds->board)
    bounds->rounds = KNNWB_GROUP_BOARD_ROUNDS;
  else if (rounds > 0)
    bounds->keys = g_try_malloc(n * sizeof(int64_t));
  return TRUE;
}

gboolean knnwb_group_bounds_ready(const KnnwbGroupBounds *bounds)
{
  return bounds->rounds == 0 || bounds->board || bounds->keys != NULL;
}

/* A round on the board: this rank's bounds posted, the other ranks' taken. */
static int knnwb_group_bounds_board(KnnwbGroupBounds *bounds, float *values, size_t n)
{
  if (values == NULL || n != bounds->n)
    return 0;
  bounds->done++;
  const gint64 start = g_get_monotonic_time();
  bounds->tightened += (int64_t)bounds->group->board_lower(bounds->group, values, n);
  bounds->seconds += (double)(g_get_monotonic_time() - start) / 1e6;
  return 1;
}

int knnwb_group_bounds_share(float *values, size_t n, void *data)
{
  KnnwbGroupBounds *bounds = data;
  if (bounds->done >= bounds->rounds || bounds->failed)
    return 0;
  if (bounds->board)
    return knnwb_group_bounds_board(bounds, values, n);
  if (n != bounds->n) {
    values = NULL; /* not this job's rows: take part in the round with nothing to give */
    n = bounds->n;
  }
  bounds->done++;
  const gint64 start = g_get_monotonic_time();
  for (size_t i = 0; i < n; i++)
    bounds->keys[i] = values ? knnwb_group_bound_key(values[i]) : INT64_MAX;
  GError *error = NULL;
  if (!bounds->group->reduce(bounds->group, bounds->keys, n, KNNWB_GROUP_MIN, &error)) {
    /* A transport failure: the job cannot go on; the next agreement reports it. */
    g_debug("knnwb: sharing thresholds: %s", error->message);
    g_error_free(error);
    bounds->failed = TRUE;
    return 0;
  }
  int64_t own = 0;
  if (values != NULL)
    for (size_t i = 0; i < n; i++)
      if (bounds->keys[i] != INT64_MAX) {
        const float common = knnwb_group_bound_value(bounds->keys[i]);
        own += common < values[i];
        values[i] = common;
      }
  bounds->tightened += own;
  bounds->seconds += (double)(g_get_monotonic_time() - start) / 1e6;
  return values != NULL;
}

void knnwb_group_bounds_finish(KnnwbGroupBounds *bounds)
{
  const int used = bounds->done;
  while (!bounds->board && bounds->done < bounds->rounds && !bounds->failed)
    knnwb_group_bounds_share(NULL, bounds->n, bounds);
  if (bounds->rounds > 0)
    g_debug("knnwb: rank %d: thresholds shared in %d of %d rounds%s (%.3f s), %" G_GINT64_FORMAT
            " tightened by the other ranks",
            bounds->group->rank, used, bounds->rounds, bounds->board ? " on the board" : "",
            bounds->seconds, bounds->tightened);
  knnwb_group_bounds_clear(bounds);
}

void knnwb_group_bounds_clear(KnnwbGroupBounds *bounds)
{
  if (bounds->board) {
    GError *error = NULL;
    if (!bounds->group->board_close(bounds->group, &error)) {
      /* A transport failure: the next agreement reports it. */
      g_debug("knnwb: giving the board back: %s", error->message);
      g_error_free(error);
    }
    bounds->board = FALSE;
  }
  g_clear_pointer(&bounds->keys, g_free);
}
