/*
 * The partitioned search over a group's ranks, every rank holding every row (the whole-input mode
 * of MPI runs). The ranks agree on one partition (each computes it: the same code on the same rows;
 * a digest proves it), then share the groups: each group's own lists are searched on one rank, its
 * visitors on one rank (both chosen by work, largest first, to the least loaded rank). Each rank
 * bounds the rows of its block against every group, and the visitors travel to the ranks that
 * search their groups. At the end every pair of rows has been scored on exactly one rank, so each
 * row's pieces (its own list, and what its visits found) come to the rank of its block and are
 * merged by (distance, row): the lists of one process, byte for byte (partition_combine.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "engine/engine.h"
#include "group/group.h"
#include "partition/partition_internal.h"

static uint64_t knnwb_partition_digest_bytes(uint64_t h, const void *bytes, size_t n)
{
  const unsigned char *b = bytes;
  for (size_t i = 0; b != NULL && i < n; i++) {
    h ^= b[i];
    h *= UINT64_C(1099511628211); /* FNV-1a */
  }
  return h;
}

/* Rows' cells a chunk of the digest: each chunk is hashed on its own, two cells a step, on
 * threads, and the chunks' digests in order make the rows' part, the same on any number of
 * threads. Byte by byte on one thread the cells of 10,000,000 rows took 0.06-0.07 s, on every
 * rank, between the assignment and the search. */
#define KNNWB_PARTITION_DIGEST_ROWS ((size_t)1 << 18)

typedef struct {
  const int32_t *cells;
  size_t n;
  uint64_t *chunk;
} KnnwbPartitionDigestCells;

static void knnwb_partition_digest_chunks(size_t first, size_t last, void *data)
{
  const KnnwbPartitionDigestCells *d = data;
  for (size_t c = first; c < last; c++) {
    const size_t from = c * KNNWB_PARTITION_DIGEST_ROWS,
                 to = MIN(d->n, from + KNNWB_PARTITION_DIGEST_ROWS);
    uint64_t h = UINT64_C(14695981039346656037) ^ c;
    for (size_t i = from; i < to; i += 2) {
      const uint64_t high = i + 1 < to ? (uint64_t)(uint32_t)d->cells[i + 1] << 32 : 0;
      h ^= (uint64_t)(uint32_t)d->cells[i] | high;
      h *= UINT64_C(0x9E3779B97F4A7C15);
      h ^= h >> 29;
    }
    d->chunk[c] = h;
  }
}

/* A positive digest of everything the search takes from p (what it has so far: the centroids
 * alone before the rows are assigned). O(n / threads + m d). */
static int64_t knnwb_partition_digest(const KnnwbPartition *p)
{
  uint64_t h = UINT64_C(14695981039346656037);
  const size_t sizes[] = {p->n, p->d, p->m, p->groups};
  h = knnwb_partition_digest_bytes(h, sizes, sizeof sizes);
  h = knnwb_partition_digest_bytes(h, p->centroid, p->m * p->d * sizeof(double));
  h = knnwb_partition_digest_bytes(h, p->radius, p->m * sizeof(double));
  h = knnwb_partition_digest_bytes(h, p->group_of, p->m * sizeof(int32_t));
  h = knnwb_partition_digest_bytes(h, p->centroid_sq, p->m * sizeof(double));
  if (p->cluster_of != NULL) {
    const size_t chunks = (p->n + KNNWB_PARTITION_DIGEST_ROWS - 1) / KNNWB_PARTITION_DIGEST_ROWS;
    KnnwbPartitionDigestCells d = {p->cluster_of, p->n, g_new(uint64_t, MAX(chunks, (size_t)1))};
    knnwb_parallel_for(p->threads, chunks, 1, knnwb_partition_digest_chunks, &d);
    h = knnwb_partition_digest_bytes(h, d.chunk, chunks * sizeof(uint64_t));
    g_free(d.chunk);
  }
  return (int64_t)(h >> 1) | 1;
}

gboolean knnwb_partition_ranks_agree(const KnnwbKnnGroup *group, const KnnwbPartition *p,
                                     gboolean chosen, const char *otherwise, gboolean *same,
                                     GError **error)
{
  const gint64 start = g_get_monotonic_time();
  int64_t digest = chosen ? knnwb_partition_digest(p) : 0;
  /* Test hook (as distributed/'s KNNWB_MPI_WRITE_FAIL_RANK): KNNWB_PARTITION_DIFFER_RANK=r gives
   * rank r another digest, as a rank on a CPU whose arithmetic differs would have. */
  const char *differ = g_getenv("KNNWB_PARTITION_DIFFER_RANK");
  if (chosen && differ != NULL && *differ != '\0' && atoi(differ) == group->rank)
    digest ^= 2;                    /* (still odd and positive) */
  int64_t v[2] = {digest, -digest}; /* minima: the lowest digest, and minus the highest */
  *same = FALSE;
  if (!group->reduce(group, v, 2, KNNWB_GROUP_MIN, error))
    return FALSE;
  *same = v[0] > 0 && v[0] == -v[1];
  g_debug("knnwb: partition: rank %d: the ranks' partitions compared in %.3f s", group->rank,
          (double)(g_get_monotonic_time() - start) / 1e6);
  if (chosen && !*same)
    g_debug("knnwb: partition: the ranks' partitions differ (digests %" G_GINT64_FORMAT
            " .. %" G_GINT64_FORMAT "): %s",
            v[0], -v[1], otherwise);
  return TRUE;
}

static int knnwb_partition_ranks_compare(const void *a, const void *b, void *data)
{
  const double *work = data;
  const size_t x = *(const size_t *)a, y = *(const size_t *)b;
  if (work[x] != work[y])
    return work[x] > work[y] ? -1 : 1;
  return x < y ? -1 : (x > y);
}

/* What taking group g costs rank r besides the group's work (extra NULL: nothing). */
static inline double knnwb_partition_ranks_extra(const double *extra, size_t g, int size, int r)
{
  return extra != NULL ? extra[g * (size_t)size + (size_t)r] : 0.0;
}

void knnwb_partition_ranks_assign(const double *work, const double *extra, size_t groups, int size,
                                  int32_t *owner)
{
  size_t *order = g_new(size_t, MAX(groups, (size_t)1));
  double *load = g_new0(double, (size_t)size);
  for (size_t g = 0; g < groups; g++)
    order[g] = g;
  g_qsort_with_data(order, (gint)groups, sizeof(size_t), knnwb_partition_ranks_compare,
                    (gpointer)work);
  for (size_t t = 0; t < groups; t++) {
    const size_t g = order[t];
    int best = 0;
    for (int r = 1; r < size; r++)
      if (load[r] + knnwb_partition_ranks_extra(extra, g, size, r) <
          load[best] + knnwb_partition_ranks_extra(extra, g, size, best))
        best = r;
    owner[g] = (int32_t)best;
    load[best] += work[g] + knnwb_partition_ranks_extra(extra, g, size, best);
  }
  g_free(load);
  g_free(order);
}

void knnwb_partition_transfer_init(KnnwbPartitionTransfer *t, int size)
{
  t->size = size;
  t->send = g_new0(char *, size);
  t->receive = g_new0(char *, size);
  t->send_bytes = g_new0(size_t, size);
  t->receive_bytes = g_new0(size_t, size);
}

void knnwb_partition_transfer_clear(KnnwbPartitionTransfer *t)
{
  for (int r = 0; r < t->size; r++) {
    g_free(t->send[r]);
    g_free(t->receive[r]);
  }
  g_clear_pointer(&t->send, g_free);
  g_clear_pointer(&t->receive, g_free);
  g_clear_pointer(&t->send_bytes, g_free);
  g_clear_pointer(&t->receive_bytes, g_free);
}

gboolean knnwb_partition_ranks_exchange(const KnnwbKnnGroup *group, KnnwbPartitionTransfer *t,
                                        gboolean room, const char *what, GError **error)
{
  const int size = group->size;
  if (!room)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate %s", what);
  const void **size_send = g_new(const void *, size);
  void **size_receive = g_new(void *, size);
  size_t *eight = g_new(size_t, size);
  for (int r = 0; r < size; r++) {
    size_send[r] = &t->send_bytes[r];
    size_receive[r] = &t->receive_bytes[r];
    eight[r] = sizeof(size_t);
    g_clear_pointer(&t->receive[r], g_free);
  }
  gboolean ok = group->agree(group, room, error) &&
                group->exchange(group, (const void *const *)size_send, eight,
                                (void *const *)size_receive, eight, error);
  room = TRUE;
  for (int r = 0; ok && r < size; r++) {
    t->receive[r] = t->receive_bytes[r] > 0 ? g_try_malloc(t->receive_bytes[r]) : NULL;
    room = room && (t->receive_bytes[r] == 0 || t->receive[r] != NULL);
  }
  if (ok && !room)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the lists that other ranks send");
  ok = ok && group->agree(group, room, error) &&
       group->exchange(group, (const void *const *)t->send, t->send_bytes,
                       (void *const *)t->receive, t->receive_bytes, error);
  for (int r = 0; r < size; r++) {
    g_clear_pointer(&t->send[r], g_free);
    if (!ok)
      g_clear_pointer(&t->receive[r], g_free);
  }
  g_free(eight);
  g_free(size_receive);
  g_free(size_send);
  return ok;
}

typedef struct {
  const KnnwbPartitionRun *run;
  guint8 *mine; /* per row: whether a group of this rank holds it */
} KnnwbPartitionOthers;

static void knnwb_partition_mark_mine(size_t first, size_t last, void *data)
{
  const KnnwbPartitionOthers *o = data;
  const KnnwbPartition *p = o->run->p;
  for (size_t g = first; g < last; g++)
    for (size_t t = p->start[g];
         o->run->owner[g] == o->run->options->group->rank && t < p->start[g + 1]; t++)
      o->mine[knnwb_partition_list_at(o->run, (size_t)p->members[t])] = 1;
}

static void knnwb_partition_empty_rows(size_t first, size_t last, void *data)
{
  const KnnwbPartitionOthers *o = data;
  for (size_t i = first; i < last;) {
    size_t j = i;
    while (j < last && !o->mine[j])
      j++;
    if (j > i)
      knnwb_knn_result_empty_rows(o->run->lists, i, j);
    i = j + 1;
  }
}

void knnwb_partition_ranks_empty_others(KnnwbPartitionRun *run, int threads)
{
  /* (the rows this rank holds lists for: every row, or a split rank's) */
  const size_t held = run->lists->n_queries;
  KnnwbPartitionOthers o = {run, g_new0(guint8, MAX(held, (size_t)1))};
  knnwb_parallel_for(threads, run->p->groups, 1, knnwb_partition_mark_mine, &o);
  knnwb_parallel_for(threads, held, 65536, knnwb_partition_empty_rows, &o);
  g_free(o.mine);
}

/*
 * Each row's k-th distance after phase one goes from the rank that searched its group to the rank
 * that bounds it (its block, run->first .. run->last), and no further: the bounds pass reads its
 * block's, and phase two's visitors take theirs along (knnwb_partition_ranks_visitors). A group's
 * members in a block are one range of its ascending members, so both sides know which row each
 * value is and only the values travel: 8 bytes a row over the job, where a value for every row
 * on every rank (the all-reduce this replaces) cost each rank 8 bytes a row of the whole input.
 */
/* How many of group g's members lie below row x. O(log size). */
static size_t knnwb_partition_members_below(const KnnwbPartition *p, size_t g, size_t x)
{
  const int64_t *members = p->members + p->start[g];
  size_t lo = 0, hi = p->start[g + 1] - p->start[g];
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if ((size_t)members[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

typedef struct {
  KnnwbPartitionRun *run;
  const size_t *mine; /* this rank's phase-one groups, ascending */
  size_t *cut;        /* per group of mine, size + 1: its members below each rank's block */
  size_t *at;         /* per group of mine, size: where its values for rank r go in send[r] */
  double **send;
} KnnwbPartitionKthPack;

/* The k-th distances of mine[from .. to)'s rows into what goes to the ranks of their blocks
 * (+inf where a list has no k-th: never, as a group holds more than k rows, but the all-reduce's
 * minimum gave +inf there too). */
static void knnwb_partition_kth_pack(size_t from, size_t to, void *data)
{
  const KnnwbPartitionKthPack *x = data;
  const KnnwbPartitionRun *run = x->run;
  const KnnwbPartition *p = run->p;
  const size_t size = (size_t)run->options->group->size, k = run->k;
  const size_t self = (size_t)run->options->group->rank;
  for (size_t j = from; j < to; j++) {
    const int64_t *members = p->members + p->start[x->mine[j]];
    const size_t *cut = x->cut + j * (size + 1), count = cut[size];
    size_t r = 0;
    for (size_t t = 0; t < count; t++) {
      while (t >= cut[r + 1])
        r++;
      const double kth =
          run->lists->distances[knnwb_partition_list_at(run, (size_t)members[t]) * k + k - 1];
      const double sent = kth <= INFINITY ? kth : INFINITY;
      if (r == self) /* (this rank's block: in place) */
        memcpy(&run->kth[(size_t)members[t] - run->first], &sent, sizeof(int64_t));
      else
        x->send[r][x->at[j * size + r] + t - cut[r]] = sent;
    }
  }
}

typedef struct {
  KnnwbPartitionRun *run;
  size_t *lo, *hi; /* per group: its members in this rank's block */
  size_t *at;      /* per group: where its values are in receive[owner] */
  char **receive;
} KnnwbPartitionKthTake;

static void knnwb_partition_kth_take(size_t from, size_t to, void *data)
{
  const KnnwbPartitionKthTake *x = data;
  KnnwbPartitionRun *run = x->run;
  const KnnwbPartition *p = run->p;
  for (size_t g = from; g < to; g++) {
    const double *values = (const double *)(const void *)x->receive[run->owner[g]] + x->at[g];
    for (size_t t = x->lo[g]; t < x->hi[g]; t++)
      memcpy(&run->kth[(size_t)p->members[p->start[g] + t] - run->first], &values[t - x->lo[g]],
             sizeof(int64_t));
  }
}

/* What goes to each other rank (t->send, counted in t->send_bytes; this rank's block's straight
 * into run->kth); FALSE: memory. */
static gboolean knnwb_partition_kth_send(KnnwbPartitionRun *run, KnnwbPartitionTransfer *t)
{
  const KnnwbPartition *p = run->p;
  const KnnwbKnnGroup *group = run->options->group;
  const size_t size = (size_t)group->size;
  size_t n_mine = 0;
  size_t *mine = g_new(size_t, MAX(p->groups, (size_t)1));
  for (size_t g = 0; g < p->groups; g++)
    if (run->owner[g] == group->rank)
      mine[n_mine++] = g;
  KnnwbPartitionKthPack x = {.run = run,
                             .mine = mine,
                             .cut = g_new(size_t, MAX(n_mine, (size_t)1) * (size + 1)),
                             .at = g_new(size_t, MAX(n_mine, (size_t)1) * size),
                             .send = (double **)t->send};
  size_t *count = g_new0(size_t, size);
  for (size_t j = 0; j < n_mine; j++) {
    size_t *cut = x.cut + j * (size + 1);
    for (size_t r = 0; r < size; r++) {
      size_t first, last;
      knnwb_partition_block_of(p, group, (int)r, &first, &last);
      cut[r] = knnwb_partition_members_below(p, mine[j], first);
      if (r + 1 == size)
        cut[size] = knnwb_partition_members_below(p, mine[j], last);
    }
    for (size_t r = 0; r < size; r++) {
      x.at[j * size + r] = count[r];
      count[r] += r == (size_t)group->rank ? 0 : cut[r + 1] - cut[r];
    }
  }
  gboolean room = TRUE;
  for (size_t r = 0; r < size; r++) {
    t->send[r] = g_try_malloc(MAX(count[r], (size_t)1) * sizeof(double));
    t->send_bytes[r] = count[r] * sizeof(double);
    room = room && t->send[r] != NULL;
  }
  if (room)
    knnwb_parallel_for(p->threads, n_mine, 16, knnwb_partition_kth_pack, &x);
  g_free(count);
  g_free(x.at);
  g_free(x.cut);
  g_free(mine);
  return room;
}

/* run->kth of this rank's block from what the other ranks sent (in their groups' order); FALSE with
 * *error when the counts disagree (a fault: the ranks hold the same members). */
static gboolean knnwb_partition_kth_receive(KnnwbPartitionRun *run, KnnwbPartitionTransfer *t,
                                            GError **error)
{
  const KnnwbPartition *p = run->p;
  KnnwbPartitionKthTake x = {.run = run,
                             .lo = g_new(size_t, MAX(p->groups, (size_t)1)),
                             .hi = g_new(size_t, MAX(p->groups, (size_t)1)),
                             .at = g_new(size_t, MAX(p->groups, (size_t)1)),
                             .receive = t->receive};
  size_t *count = g_new0(size_t, (size_t)t->size);
  for (size_t g = 0; g < p->groups; g++) {
    const gboolean mine = run->owner[g] == run->options->group->rank; /* (written in place) */
    x.lo[g] = mine ? 0 : knnwb_partition_members_below(p, g, run->first);
    x.hi[g] = mine ? 0 : knnwb_partition_members_below(p, g, run->last);
    x.at[g] = count[run->owner[g]];
    count[run->owner[g]] += x.hi[g] - x.lo[g];
  }
  gboolean ok = TRUE;
  for (int r = 0; r < t->size; r++)
    ok = ok && count[r] * sizeof(double) == t->receive_bytes[r];
  if (ok)
    knnwb_parallel_for(p->threads, p->groups, 16, knnwb_partition_kth_take, &x);
  else
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                "the k-th distances the ranks sent do not match this rank's rows");
  g_free(count);
  g_free(x.at);
  g_free(x.hi);
  g_free(x.lo);
  return ok;
}

gboolean knnwb_partition_ranks_kth(KnnwbPartitionRun *run, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const size_t block = run->last - run->first;
  run->kth = g_try_new(int64_t, MAX(block, (size_t)1));
  KnnwbPartitionTransfer t;
  knnwb_partition_transfer_init(&t, group->size);
  const gboolean room = run->kth != NULL && knnwb_partition_kth_send(run, &t);
  gboolean ok =
      knnwb_partition_ranks_exchange(group, &t, room, "the k-th distances to send", error);
  const gboolean taken = ok && knnwb_partition_kth_receive(run, &t, error);
  ok = ok && group->agree(group, taken, error);
  knnwb_partition_transfer_clear(&t);
  return ok;
}

/* Visits of this rank's block to the groups owner[] gives rank `to`, two words each: (group << 40
 * | row) and the bits of the row's k-th distance after phase one. */
static char *knnwb_partition_ranks_visits_to(const KnnwbPartitionRun *run, int to, size_t *bytes)
{
  size_t count = 0;
  for (size_t g = 0; g < run->p->groups; g++)
    if (run->owner[g] == to)
      count += (size_t)(run->query_start[g + 1] - run->query_start[g]);
  uint64_t *out = g_try_new(uint64_t, 2 * MAX(count, (size_t)1));
  size_t at = 0;
  for (size_t g = 0; out != NULL && g < run->p->groups; g++)
    for (int64_t t = run->query_start[g]; run->owner[g] == to && t < run->query_start[g + 1]; t++) {
      out[at++] = ((uint64_t)g << 40) | (uint64_t)run->queries[t];
      out[at++] = (uint64_t)run->kth[(size_t)run->queries[t] - run->first];
    }
  *bytes = out != NULL ? 2 * count * sizeof(uint64_t) : 0;
  return (char *)out;
}

/* The visitors received (senders in rank order, so each group's rows ascend) as the run's, with
 * their k-th distances (run->query_kth). */
static gboolean knnwb_partition_ranks_take_visits(KnnwbPartitionRun *run, char **receive,
                                                  const size_t *bytes, GError **error)
{
  const size_t groups = run->p->groups;
  const int size = run->options->group->size;
  size_t total = 0;
  g_clear_pointer(&run->query_start, g_free);
  g_clear_pointer(&run->queries, g_free);
  g_clear_pointer(&run->query_kth, g_free);
  run->query_start = g_new0(int64_t, groups + 1);
  for (int r = 0; r < size; r++)
    for (size_t t = 0; t < bytes[r] / sizeof(uint64_t); t += 2) {
      run->query_start[(((const uint64_t *)(const void *)receive[r])[t] >> 40) + 1]++;
      total++;
    }
  for (size_t g = 0; g < groups; g++)
    run->query_start[g + 1] += run->query_start[g];
  run->queries = g_try_new(int64_t, MAX(total, (size_t)1));
  run->query_kth = g_try_new(double, MAX(total, (size_t)1));
  if (run->queries == NULL || run->query_kth == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the %zu visitors of this rank's groups", total);
    return FALSE;
  }
  int64_t *next = g_new(int64_t, groups);
  memcpy(next, run->query_start, groups * sizeof(int64_t));
  for (int r = 0; r < size; r++)
    for (size_t t = 0; t < bytes[r] / sizeof(uint64_t); t += 2) {
      const uint64_t *visit = (const uint64_t *)(const void *)receive[r] + t;
      const int64_t at = next[visit[0] >> 40]++;
      run->queries[at] = (int64_t)(visit[0] & ((UINT64_C(1) << 40) - 1));
      memcpy(&run->query_kth[at], &visit[1], sizeof(double));
    }
  g_free(next);
  return TRUE;
}

/* How many of group g's members lie outside rank r's block: the rows rank r must bring to search
 * g, when it keeps to its block. O(log n). */
static size_t knnwb_partition_members_away(const KnnwbPartitionRun *run, size_t g, size_t r)
{
  const KnnwbPartition *p = run->p;
  size_t from, to;
  knnwb_partition_block_of(p, run->options->group, (int)r, &from, &to);
  const size_t inside =
      knnwb_partition_members_below(p, g, to) - knnwb_partition_members_below(p, g, from);
  return p->start[g + 1] - p->start[g] - inside;
}

/*
 * Phase one's groups to the ranks (run->owner) by their pairs, most first, to the rank where each
 * ends soonest (knnwb_partition_ranks_assign). Also agrees on the work model phase two gives its
 * groups out by (run->owner_gpu): the GPU's only where every rank searches on GPUs. A job may mix
 * hosts with and without GPUs (the partitioned search runs each group on one rank, on its own
 * backend), and ranks that weighed phase two's groups by different models gave them out
 * differently: visitors went to ranks that did not search their groups, and the lists were wrong
 * (the test /distributed/group/partitioned-mixed-models). Collective. O(groups (log groups +
 * size)).
 */
gboolean knnwb_partition_ranks_assign_own(KnnwbPartitionRun *run, GError **error)
{
  const KnnwbPartition *p = run->p;
  const KnnwbKnnGroup *group = run->options->group;
  /* Test hook (as KNNWB_PARTITION_DIFFER_RANK): KNNWB_PARTITION_GPU_MODEL_RANK=r makes rank r
   * vote for the GPU's model, as a rank on a GPU among ranks on CPUs would. */
  const char *model_rank = g_getenv("KNNWB_PARTITION_GPU_MODEL_RANK");
  int64_t gpu = run->devices != NULL ||
                (model_rank != NULL && *model_rank != '\0' && atoi(model_rank) == group->rank);
  if (!group->reduce(group, &gpu, 1, KNNWB_GROUP_MIN, error))
    return FALSE;
  run->owner_gpu = gpu != 0;
  double *work = g_new(double, MAX(p->groups, (size_t)1));
  for (size_t g = 0; g < p->groups; g++)
    work[g] =
        0.5 * (double)(p->start[g + 1] - p->start[g]) * (double)(p->start[g + 1] - p->start[g]);
  run->owner = g_new(int32_t, MAX(p->groups, (size_t)1));
  knnwb_partition_ranks_assign(work, NULL, p->groups, group->size, run->owner);
  g_free(work);
  return TRUE;
}

/*
 * Phase two's groups to the ranks (run->owner, phase one's until now), each group with visitors
 * by its work (its pairs, one sub-search and a row searched a visitor, in pairs of the plain
 * search: knnwb_partition_work), most first, to the rank where it ends soonest. Ranks that keep
 * to their blocks (run->slot) hold a group's rows only on the rank that searched it in phase one,
 * besides the members in their own block: another rank must first bring the rest, counted as a
 * row searched each (bringing a row through shared memory took 0.14 us on an H100's host, where
 * a row searched costs the GPU about 0.1 us). By pairs alone, two ranks sharing a GPU at
 * 10,000,000 x 50 rows (27 visits in all, ~5e6 pairs) spread the visited groups over the ranks as
 * if free: rank 0, which brought no rows, waited 2.6 s in the exchange of the rows brought, where
 * the visits took 0.06 s. A group without visitors keeps its rank (it is not searched again). The
 * same on every rank: count[g] is the job's visitors of group g. O(groups size log n).
 */
static void knnwb_partition_ranks_assign_visits(KnnwbPartitionRun *run, const int64_t *count)
{
  const KnnwbPartition *p = run->p;
  const KnnwbKnnGroup *group = run->options->group;
  const size_t groups = p->groups, size = (size_t)group->size;
  const gboolean gpu = run->owner_gpu;
  int32_t *first = g_memdup2(run->owner, MAX(groups, (size_t)1) * sizeof(int32_t));
  double *work = g_new0(double, MAX(groups, (size_t)1));
  double *extra = run->slot != NULL ? g_new0(double, MAX(groups * size, (size_t)1)) : NULL;
  for (size_t g = 0; g < groups; g++) {
    const size_t members = p->start[g + 1] - p->start[g];
    if (count[g] == 0)
      continue;
    work[g] = knnwb_partition_work(gpu, (double)count[g] * (double)members, 1.0, (double)count[g]);
    for (size_t r = 0; extra != NULL && r < size; r++)
      if ((int32_t)r != first[g])
        extra[g * size + r] =
            knnwb_partition_work(gpu, 0.0, 0.0, (double)knnwb_partition_members_away(run, g, r));
  }
  knnwb_partition_ranks_assign(work, extra, groups, group->size, run->owner);
  for (size_t g = 0; g < groups; g++)
    if (count[g] == 0)
      run->owner[g] = first[g];
  g_free(extra);
  g_free(work);
  g_free(first);
}

gboolean knnwb_partition_ranks_visitors(KnnwbPartitionRun *run, gboolean local_ok,
                                        gboolean *give_up, double *pairs, double *visits,
                                        GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const KnnwbPartition *p = run->p;
  const size_t groups = p->groups;
  int64_t *count = g_new0(int64_t, groups + 1);
  for (size_t g = 0; local_ok && g < groups; g++)
    count[g] = run->query_start[g + 1] - run->query_start[g];
  count[groups] = local_ok ? 0 : 1; /* ranks short of memory */
  gboolean ok = group->reduce(group, count, groups + 1, KNNWB_GROUP_SUM, error);
  *give_up = !ok || count[groups] > 0;
  *pairs = *visits = 0.0;
  for (size_t g = 0; g < groups; g++) {
    *pairs += (double)count[g] * (double)(p->start[g + 1] - p->start[g]);
    *visits += (double)count[g];
  }
  if (!*give_up)
    knnwb_partition_ranks_assign_visits(run, count);
  g_free(count);
  if (*give_up)
    return ok;
  KnnwbPartitionTransfer t;
  knnwb_partition_transfer_init(&t, group->size);
  gboolean room = TRUE;
  for (int r = 0; r < t.size; r++) {
    t.send[r] = knnwb_partition_ranks_visits_to(run, r, &t.send_bytes[r]);
    room = room && t.send[r] != NULL;
  }
  ok = knnwb_partition_ranks_exchange(group, &t, room, "the visitors to send", error);
  const gboolean taken =
      ok && knnwb_partition_ranks_take_visits(run, t.receive, t.receive_bytes, error);
  ok = ok && group->agree(group, taken, error);
  knnwb_partition_transfer_clear(&t);
  return ok;
}
