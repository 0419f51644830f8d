/*
 * The k-means++ seeds of the partition's k-means (partition_build.c), on threads. Each seed is
 * drawn with probability proportional to a subset row's squared distance to its nearest seed so
 * far; updating those distances after each seed is the O(rows d) part, split over threads. The
 * draw itself reads the running sums of the distances in row order, one thread at a time, so the
 * seeds are the same, bit for bit, for any number of threads (and the same as one thread drew
 * them before the update ran on threads): no sum depends on where a thread's rows begin.
 */
#include <string.h>
#include <knnwb/parallel.h>
#include "partition/partition_internal.h"

/* The subset's rows a thread at least: each seed ends in a meeting of the threads (a few
 * microseconds), which fewer rows would not pay for. */
#define KNNWB_PARTITION_SEED_THREAD_ROWS ((size_t)256)

typedef struct {
  const KnnwbPartitionBlock *sample;
  size_t m, subset;
  double *nearest; /* subset: squared distance to the nearest seed so far */
  double *running; /* subset: running sums of nearest, in row order */
  size_t *seed;    /* m: each seed's subset row */
  GRand *rand;
  GMutex lock;
  GCond met;
  int team; /* the threads that work (0 until they all started) */
  int arrived;
  guint meeting; /* meetings held */
} KnnwbPartitionSeeds;

typedef struct {
  KnnwbPartitionSeeds *seeds;
  int thread;
} KnnwbPartitionSeedThread;

/* Subset row u's row of the sample (the subset is evenly spread). */
static const double *knnwb_partition_seed_row(const KnnwbPartitionSeeds *s, size_t u)
{
  return s->sample->v + ((u * s->sample->rows) / s->subset) * s->sample->d;
}

static void knnwb_partition_seed_keep(KnnwbPartitionSeeds *s, size_t c, size_t u, double sq)
{
  s->nearest[u] = c == 0 ? sq : MIN(s->nearest[u], sq);
}

/* Subset rows [first, last) after seed c, four at a time (knnwb_partition_sq_distances4; the
 * rest with copies of the first row, whose sums are dropped): the same sums as one row at a time.
 */
static void knnwb_partition_seed_distances(KnnwbPartitionSeeds *s, size_t c, size_t first,
                                           size_t last)
{
  const double *centre = knnwb_partition_seed_row(s, s->seed[c]);
  for (size_t u = first; u < last; u += 4) {
    const size_t n = MIN((size_t)4, last - u);
    const double *rows[4];
    for (size_t q = 0; q < 4; q++)
      rows[q] = knnwb_partition_seed_row(s, u + (q < n ? q : 0));
    double sq[4];
    knnwb_partition_sq_distances4(centre, rows, s->sample->d, 1.0, sq);
    for (size_t q = 0; q < n; q++)
      knnwb_partition_seed_keep(s, c, u + q, sq[q]);
  }
}

/* The next seed: the first subset row whose running sum of distances passes a uniform draw below
 * their total (the last row when rounding leaves none). The running sums never decrease (the
 * distances are not negative), so the first is found by bisection. */
static size_t knnwb_partition_seed_draw(KnnwbPartitionSeeds *s)
{
  double total = 0.0;
  for (size_t u = 0; u < s->subset; u++) {
    total += s->nearest[u];
    s->running[u] = total;
  }
  const double target = g_rand_double(s->rand) * total;
  size_t low = 0, high = s->subset;
  while (low < high) {
    const size_t middle = low + (high - low) / 2;
    if (s->running[middle] > target)
      high = middle;
    else
      low = middle + 1;
  }
  return MIN(low, s->subset - 1);
}

/* Waits for every thread to have updated its rows after seed c; the last to arrive draws seed
 * c + 1 for all of them (under the lock, which also makes every thread's rows visible to it). */
static void knnwb_partition_seed_meet(KnnwbPartitionSeeds *s, size_t c)
{
  g_mutex_lock(&s->lock);
  const guint meeting = s->meeting;
  if (++s->arrived == s->team) {
    s->seed[c + 1] = knnwb_partition_seed_draw(s);
    s->arrived = 0;
    s->meeting++;
    g_cond_broadcast(&s->met);
  } else {
    while (s->meeting == meeting)
      g_cond_wait(&s->met, &s->lock);
  }
  g_mutex_unlock(&s->lock);
}

static gpointer knnwb_partition_seed_work(gpointer data)
{
  const KnnwbPartitionSeedThread *w = data;
  KnnwbPartitionSeeds *s = w->seeds;
  g_mutex_lock(&s->lock);
  while (s->team == 0)
    g_cond_wait(&s->met, &s->lock);
  const int team = s->team;
  g_mutex_unlock(&s->lock);
  size_t first, last;
  knnwb_team_range(s->subset, w->thread, team, &first, &last);
  /* the last seed's distances would serve no draw */
  for (size_t c = 0; c + 1 < s->m; c++) {
    knnwb_partition_seed_distances(s, c, first, last);
    knnwb_partition_seed_meet(s, c);
  }
  return NULL;
}

void knnwb_partition_seed(const KnnwbPartitionBlock *sample, size_t m, int threads,
                          double *centroid)
{
  const size_t d = sample->d;
  KnnwbPartitionSeeds s = {.sample = sample,
                           .m = m,
                           .subset = MIN(sample->rows, MAX((size_t)4096, 4 * m)),
                           .rand = g_rand_new_with_seed(20240611u)};
  s.nearest = g_new(double, s.subset);
  s.running = g_new(double, s.subset);
  s.seed = g_new0(size_t, m);
  g_mutex_init(&s.lock);
  g_cond_init(&s.met);
  threads = (int)MAX((size_t)1,
                     MIN((size_t)MAX(threads, 1), s.subset / KNNWB_PARTITION_SEED_THREAD_ROWS));
  KnnwbPartitionSeedThread *w = g_new(KnnwbPartitionSeedThread, threads);
  GThread **workers = g_new0(GThread *, threads);
  /* The threads wait until it is known how many started: they split the rows among those. */
  int started = 1;
  g_mutex_lock(&s.lock);
  for (int t = 0; t < threads; t++)
    w[t] = (KnnwbPartitionSeedThread){&s, t};
  while (started < threads) {
    workers[started] =
        knnwb_thread_try_start("knnwb-seeds", knnwb_partition_seed_work, &w[started]);
    if (workers[started] == NULL)
      break;
    started++;
  }
  s.team = started;
  g_cond_broadcast(&s.met);
  g_mutex_unlock(&s.lock);
  knnwb_partition_seed_work(&w[0]);
  for (int t = 1; t < started; t++)
    g_thread_join(workers[t]);
  for (size_t c = 0; c < m; c++)
    memcpy(centroid + c * d, knnwb_partition_seed_row(&s, s.seed[c]), d * sizeof(double));
  g_free(workers);
  g_free(w);
  g_cond_clear(&s.met);
  g_mutex_clear(&s.lock);
  g_rand_free(s.rand);
  g_free(s.seed);
  g_free(s.running);
  g_free(s.nearest);
}
