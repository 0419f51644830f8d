/*
 * The partitioned search of split ranks that keep to their blocks (when: partition_gather.c).
 * Each rank holds its block of rows. The partition is made as ranks that hold every row make it
 * (the choice on the sample one process takes, each rank's block assigned to the cells, the cells
 * shared, a digest compared), and then each rank brings only the rows it searches: the rows of the
 * groups it is given for phase one, and, for phase two, the visitors of its groups that it does not
 * hold yet. A row travels once to each rank that searches it; each row's pieces go back to its
 * block's rank and are merged there as for ranks that hold every row (partition_combine.c), so the
 * lists are those of one process.
 *
 * Memory per rank: its block, the rows of its groups and of their visitors, lists for every row it
 * searches (16 bytes an entry: the lists of its block's rows that other ranks search are touched
 * only as their pieces come in, run->block_list), n-long arrays of 16 bytes a row (each row's cell
 * and place, the members) and 16 bytes a row of its block (reaches and k-th distances). Ranks that
 * hold every row keep n rows and n lists each. Nothing of the bringing outlives it: the group's
 * shared blocks that carried the rows go back at share_end (32 MiB a rank, else kept through the
 * search), and the rows brought go back to the system with the heap's free parts before the
 * combining (partition.c), and the sample the cells were chosen on goes once they are made
 * (knnwb_partition_split_run): at 1,000,000 x 50 rows, k = 30, four ranks, a rank's peak is its
 * search, 287-301 MiB (the combining's 250-270), against 190 MiB for a quarter of one process's
 * and 48 MiB for its block (docs/performance-mpi.md).
 */
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "engine/engine.h"
#include "partition/partition_internal.h"

/* The rank that searches row i's group in the phase at hand (run->owner). */
static inline int knnwb_partition_split_owner(const KnnwbPartitionRun *run, size_t i)
{
  const KnnwbPartition *p = run->p;
  return run->owner[p->group_of[p->cluster_of[i]]];
}

/* lists grown to rows rows, the new ones empty. FALSE (lists as they were): memory. */
static gboolean knnwb_partition_split_grow(KnnwbNeighbors *lists, size_t rows)
{
  const size_t k = lists->k, before = lists->n_queries, cells = MAX(rows * k, (size_t)1);
  int64_t *indices = g_try_realloc(lists->indices, cells * sizeof(int64_t));
  lists->indices = indices != NULL ? indices : lists->indices;
  double *distances =
      indices != NULL ? g_try_realloc(lists->distances, cells * sizeof(double)) : NULL;
  lists->distances = distances != NULL ? distances : lists->distances;
  int32_t *found = distances != NULL
                       ? g_try_realloc(lists->n_found, MAX(rows, (size_t)1) * sizeof(int32_t))
                       : NULL;
  if (found == NULL)
    return FALSE;
  lists->n_found = found;
  memset(found + before, 0, (rows - before) * sizeof(int32_t));
  lists->n_queries = rows;
  knnwb_knn_result_empty_rows(lists, before, rows);
  return TRUE;
}

/* The most rows a rank holds: KNNWB_PARTITION_SPLIT_MAX_HELD, less with the test hook
 * KNNWB_PARTITION_SPLIT_MAX_HELD=N (so that the tests reach the refusal). */
static size_t knnwb_partition_split_max_held(void)
{
  const char *hook = g_getenv("KNNWB_PARTITION_SPLIT_MAX_HELD");
  const gint64 rows = hook != NULL ? g_ascii_strtoll(hook, NULL, 10) : 0;
  return rows > 0 ? MIN((size_t)rows, KNNWB_PARTITION_SPLIT_MAX_HELD)
                  : KNNWB_PARTITION_SPLIT_MAX_HELD;
}

/* Rows a piece of the passes below takes on a thread. */
#define KNNWB_PARTITION_SPLIT_PIECE ((size_t)65536)

/* What a pass over rows picks: the rows of another block that this rank searches in phase one
 * (numbered after the rows held), the rows it wants for phase two (slot -2, numbered likewise),
 * the rows of its block by the rank that searches them in phase one (listed per rank), or the
 * rows of its block by whether this rank searches them (their places in run->block_list). */
typedef enum {
  KNNWB_PARTITION_SPLIT_SEARCHED,
  KNNWB_PARTITION_SPLIT_WANTED,
  KNNWB_PARTITION_SPLIT_OWNERS,
  KNNWB_PARTITION_SPLIT_BLOCK
} KnnwbPartitionSplitPick;

/* A pass over rows [first, last), piece by piece on threads: counted first, then numbered in order
 * (each piece from its first number on), so the numbers are those of one thread. */
typedef struct {
  KnnwbPartitionRun *run;
  KnnwbPartitionSplitPick pick;
  size_t first, last;
  int ways;      /* the lists the rows go to: 1, or the ranks (owners) */
  size_t *count; /* per piece, per way: its rows, then its first number */
  int64_t base;  /* the first slot the rows are given (searched, wanted) */
  int64_t **ids; /* per way: the rows, ascending, or NULL (searched) */
} KnnwbPartitionSplitPass;

/* Which way row i goes (-1: none). */
static inline int knnwb_partition_split_way(const KnnwbPartitionSplitPass *x, size_t i)
{
  const KnnwbPartitionRun *run = x->run;
  const int me = run->options->group->rank;
  switch (x->pick) {
  case KNNWB_PARTITION_SPLIT_SEARCHED:
    return knnwb_partition_split_owner(run, i) == me ? 0 : -1;
  case KNNWB_PARTITION_SPLIT_WANTED:
    return run->slot[i] == -2 ? 0 : -1;
  case KNNWB_PARTITION_SPLIT_BLOCK:
    return knnwb_partition_split_owner(run, i) == me ? 0 : 1;
  default: {
    const int r = knnwb_partition_split_owner(run, i);
    return r != me ? r : -1;
  }
  }
}

static void knnwb_partition_split_count(size_t from, size_t to, void *data)
{
  KnnwbPartitionSplitPass *x = data;
  for (size_t piece = from; piece < to; piece += KNNWB_PARTITION_SPLIT_PIECE) {
    size_t *count = x->count + (piece / KNNWB_PARTITION_SPLIT_PIECE) * (size_t)x->ways;
    const size_t last = x->first + MIN(to, piece + KNNWB_PARTITION_SPLIT_PIECE);
    for (size_t i = x->first + piece; i < last; i++) {
      const int way = knnwb_partition_split_way(x, i);
      if (way >= 0)
        count[way]++;
    }
  }
}

static void knnwb_partition_split_fill(size_t from, size_t to, void *data)
{
  KnnwbPartitionSplitPass *x = data;
  int64_t *next = g_new(int64_t, x->ways);
  for (size_t piece = from; piece < to; piece += KNNWB_PARTITION_SPLIT_PIECE) {
    const size_t *count = x->count + (piece / KNNWB_PARTITION_SPLIT_PIECE) * (size_t)x->ways;
    for (int w = 0; w < x->ways; w++)
      next[w] = (int64_t)count[w];
    const size_t last = x->first + MIN(to, piece + KNNWB_PARTITION_SPLIT_PIECE);
    for (size_t i = x->first + piece; i < last; i++) {
      const int way = knnwb_partition_split_way(x, i);
      if (way >= 0 && x->ids != NULL)
        x->ids[way][next[way]] = (int64_t)i;
      if (x->pick == KNNWB_PARTITION_SPLIT_BLOCK) {
        x->run->block_list[i - x->first] = (int32_t)next[way];
        if (way == 1) /* (unset: partition_internal.h) */
          x->run->lists->n_found[next[way]] = -1;
      } else if (way >= 0 && x->pick != KNNWB_PARTITION_SPLIT_OWNERS)
        x->run->slot[i] = (int32_t)(x->base + next[way]);
      else if (x->pick == KNNWB_PARTITION_SPLIT_SEARCHED) /* (not held) */
        x->run->slot[i] = -1;
      if (way >= 0)
        next[way]++;
    }
  }
  g_free(next);
}

/* Counts the rows each way takes (total[w]) and makes each piece's count its first number. */
static void knnwb_partition_split_begin(KnnwbPartitionSplitPass *x, size_t *total)
{
  const size_t pieces =
      (x->last - x->first + KNNWB_PARTITION_SPLIT_PIECE - 1) / KNNWB_PARTITION_SPLIT_PIECE;
  x->count = g_new0(size_t, MAX(pieces, (size_t)1) * (size_t)x->ways);
  knnwb_parallel_for(x->run->p->threads, x->last - x->first, KNNWB_PARTITION_SPLIT_PIECE,
                     knnwb_partition_split_count, x);
  for (int w = 0; w < x->ways; w++) {
    size_t at = 0;
    for (size_t t = 0; t < pieces; t++) {
      const size_t rows = x->count[t * (size_t)x->ways + (size_t)w];
      x->count[t * (size_t)x->ways + (size_t)w] = at;
      at += rows;
    }
    total[w] = at;
  }
}

/* Numbers the rows (slots from x->base, ids where x->ids is set). */
static void knnwb_partition_split_end(KnnwbPartitionSplitPass *x)
{
  knnwb_parallel_for(x->run->p->threads, x->last - x->first, KNNWB_PARTITION_SPLIT_PIECE,
                     knnwb_partition_split_fill, x);
  g_clear_pointer(&x->count, g_free);
}

typedef struct {
  const KnnwbPartitionRun *run;
  const int64_t *ids; /* rows of this rank's block */
  float *out;
} KnnwbPartitionSplitPack;

static void knnwb_partition_split_pack_rows(size_t from, size_t to, void *data)
{
  const KnnwbPartitionSplitPack *x = data;
  const size_t d = x->run->d;
  for (size_t t = from; t < to; t++)
    memcpy(x->out + t * d, x->run->data->values + ((size_t)x->ids[t] - x->run->first) * d,
           d * sizeof(float));
}

/* count rows of this rank's block (ids) as d floats each into out, on threads. */
static void knnwb_partition_split_pack(const KnnwbPartitionRun *run, const int64_t *ids,
                                       size_t count, float *out)
{
  KnnwbPartitionSplitPack x = {run, ids, out};
  knnwb_parallel_for(run->p->threads, count, 4096, knnwb_partition_split_pack_rows, &x);
}

typedef struct {
  float *to;
  const float *from;
} KnnwbPartitionSplitCopy;

static void knnwb_partition_split_copy_values(size_t first, size_t last, void *data)
{
  const KnnwbPartitionSplitCopy *x = data;
  memcpy(x->to + first, x->from + first, (last - first) * sizeof(float));
}

/* Where round j of the rows this rank brings from rank s goes in held (x's rounds, rows as
 * records; call only for a round that brings some): the rows each rank sends this one lie in
 * held in rank order from held_from, each rank's ascending, q of them a round. O(R). */
static float *knnwb_partition_split_round_into(const KnnwbPartitionRun *run,
                                               const KnnwbPartitionRounds *x, size_t held_from,
                                               int s, size_t j)
{
  size_t into = held_from;
  for (int t = 0; t < s; t++)
    into += x->sizes[(size_t)t * x->size + run->options->group->rank] / x->record;
  return run->held.values + (into + j * x->q) * run->d;
}

/*
 * Through the group's shared blocks (*used FALSE when it lends none this time), round by round:
 * this rank packs its next rows for every rank into its block, then, once every rank's are,
 * copies its own out of the others' into held. FALSE: the group's errors.
 */
static gboolean knnwb_partition_split_shared(KnnwbPartitionRun *run, const int64_t *const *ids,
                                             const KnnwbPartitionRounds *x, size_t held_from,
                                             gboolean *used, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size, me = group->rank;
  void **blocks = g_new0(void *, size);
  GError *local = NULL;
  *used = group->share_begin != NULL &&
          group->share_begin(group, knnwb_partition_round_offset(x, me, size, 0), blocks, &local);
  if (!*used) {
    g_free(blocks);
    if (local != NULL)
      g_propagate_error(error, local);
    return local == NULL;
  }
  gboolean ok = TRUE;
  for (size_t j = 0; ok && j < x->rounds; j++) {
    for (int r = 0; r < size; r++) {
      const size_t rows = knnwb_partition_round_count(x, me, r, j);
      if (rows > 0)
        knnwb_partition_split_pack(
            run, ids[r] + j * x->q, rows,
            (float *)((char *)blocks[me] + knnwb_partition_round_offset(x, me, r, j)));
    }
    ok = group->share_sync(group, error);
    for (int s = 0; ok && s < size; s++) {
      const size_t rows = knnwb_partition_round_count(x, s, me, j);
      if (rows == 0)
        continue;
      KnnwbPartitionSplitCopy c = {
          knnwb_partition_split_round_into(run, x, held_from, s, j),
          (const float *)((const char *)blocks[s] + knnwb_partition_round_offset(x, s, me, j))};
      knnwb_parallel_for(run->p->threads, rows * run->d, (size_t)1 << 18,
                         knnwb_partition_split_copy_values, &c);
    }
    /* (every rank's reads done before a block is refilled; the last round's end waits anyway) */
    ok = ok && (j + 1 == x->rounds || group->share_sync(group, error));
  }
  ok = group->share_end(group, ok ? error : NULL) && ok;
  g_free(blocks);
  return ok;
}

/* As messages, round by round, each rank's next rows packed for every rank and received straight
 * into held. FALSE: the group's errors (a rank short of memory for its sends stops them all). */
static gboolean knnwb_partition_split_messages(KnnwbPartitionRun *run, const int64_t *const *ids,
                                               const KnnwbPartitionRounds *x, size_t held_from,
                                               GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size, me = group->rank;
  float **send = g_new0(float *, size);
  size_t *send_bytes = g_new(size_t, size), *receive_bytes = g_new(size_t, size);
  void **receive = g_new0(void *, size);
  /* Test hook (as KNNWB_PARTITION_SPLIT_SHORT_RANK): KNNWB_PARTITION_SEND_SHORT_RANK=r makes rank
   * r short of memory for its sends from the second round on, once rows have gone: every rank
   * stops with its message. */
  const char *short_rank = g_getenv("KNNWB_PARTITION_SEND_SHORT_RANK");
  const gboolean short_here = short_rank != NULL && *short_rank != '\0' && atoi(short_rank) == me;
  gboolean ok = TRUE;
  for (size_t j = 0; ok && j < x->rounds; j++) {
    gboolean room = TRUE;
    for (int r = 0; r < size; r++) {
      const size_t rows = knnwb_partition_round_count(x, me, r, j);
      send_bytes[r] = rows * x->record;
      send[r] = rows > 0 && !(short_here && j > 0) ? g_try_malloc(send_bytes[r]) : NULL;
      room = room && (rows == 0 || send[r] != NULL);
      if (send[r] != NULL)
        knnwb_partition_split_pack(run, ids[r] + j * x->q, rows, send[r]);
      receive_bytes[r] = knnwb_partition_round_count(x, r, me, j) * x->record;
      receive[r] =
          receive_bytes[r] > 0 ? knnwb_partition_split_round_into(run, x, held_from, r, j) : NULL;
    }
    if (!room)
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                  "cannot allocate the rows this rank sends to the others");
    ok = group->agree(group, room, error) &&
         group->exchange(group, (const void *const *)send, send_bytes, (void *const *)receive,
                         receive_bytes, error);
    for (int r = 0; r < size; r++)
      g_clear_pointer(&send[r], g_free);
  }
  g_free(send);
  g_free(send_bytes);
  g_free(receive_bytes);
  g_free(receive);
  return ok;
}

/*
 * Rows of this rank's block to the others: rank r gets ids[r] (count[r] rows, ascending), and this
 * rank the rows each rank sends it into run->held.values from row held_from, in rank order (the
 * order it placed them in). In rounds of at most KNNWB_PARTITION_ROUND_BYTES a rank
 * (partition_rounds.c): through the group's shared blocks where the ranks share a host (a copy
 * each way: at 10,000,000 x 50 rows, 2 ranks on two cores, 2.5 M rows a rank took 3.1 s as
 * messages), else as messages. room: this rank has its places (else every rank fails with the
 * rows it lacks room for; too_many: more than knnwb_partition_split_max_held()). Collective.
 */
static gboolean knnwb_partition_split_ship(KnnwbPartitionRun *run, int64_t *const *ids,
                                           const size_t *count, size_t held_from, size_t wanted,
                                           gboolean room, gboolean too_many, const char **how,
                                           GError **error)
{
  *how = "messages";
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size;
  if (!room) {
    g_autofree char *limit =
        too_many ? g_strdup_printf(": a rank holds at most %zu rows; run more ranks",
                                   knnwb_partition_split_max_held())
                 : g_strdup("");
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the rows this rank searches (%zu rows of %zu values)%s", wanted,
                run->d, limit);
  }
  if (!group->agree(group, room, error))
    return FALSE;
  /* every rank's counts for every rank: where its rows lie in the others' blocks */
  const size_t row_bytes = run->d * sizeof(float);
  int64_t *mine = g_new(int64_t, size), *all = g_new(int64_t, (size_t)size * size);
  size_t *bytes = g_new(size_t, size), *sizes = g_new(size_t, (size_t)size * size);
  for (int r = 0; r < size; r++) {
    mine[r] = (int64_t)count[r];
    bytes[r] = (size_t)size * sizeof(int64_t);
  }
  gboolean used = FALSE;
  KnnwbPartitionRounds x;
  gboolean ok = knnwb_knn_group_gather_bytes(group, mine, bytes, all, error);
  for (size_t t = 0; ok && t < (size_t)size * size; t++)
    sizes[t] = (size_t)all[t] * row_bytes;
  ok = ok && knnwb_partition_rounds_plan(group, sizes, row_bytes, &x, error) &&
       knnwb_partition_split_shared(run, (const int64_t *const *)ids, &x, held_from, &used, error);
  ok = ok && (used || knnwb_partition_split_messages(run, (const int64_t *const *)ids, &x,
                                                     held_from, error));
  *how = used ? "shared memory" : "messages";
  g_free(mine);
  g_free(all);
  g_free(bytes);
  g_free(sizes);
  return ok;
}

static void knnwb_partition_split_ids_free(int64_t **ids, int size)
{
  for (int r = 0; ids != NULL && r < size; r++)
    g_free(ids[r]);
  g_free(ids);
}

/* The rows of this rank's block per rank that searches them in phase one (count[r] each,
 * ascending); NULL: memory. */
static int64_t **knnwb_partition_split_owners(KnnwbPartitionRun *run, size_t *count)
{
  const int size = run->options->group->size;
  KnnwbPartitionSplitPass x = {.run = run,
                               .pick = KNNWB_PARTITION_SPLIT_OWNERS,
                               .first = run->first,
                               .last = run->last,
                               .ways = size};
  knnwb_partition_split_begin(&x, count);
  x.ids = g_new0(int64_t *, size);
  gboolean room = TRUE;
  for (int r = 0; r < size; r++) {
    x.ids[r] = g_try_new(int64_t, MAX(count[r], (size_t)1));
    room = room && x.ids[r] != NULL;
  }
  if (!room) {
    g_clear_pointer(&x.count, g_free);
    knnwb_partition_split_ids_free(x.ids, size);
    return NULL;
  }
  knnwb_partition_split_end(&x);
  return x.ids;
}

static void knnwb_partition_split_block_places(size_t first, size_t last, void *data)
{
  KnnwbPartitionRun *run = data;
  for (size_t t = first; t < last; t++)
    run->slot[run->first + t] = (int32_t)t;
}

/* Places in slot: this rank's block first, then the rows of the other blocks that it searches in
 * phase one, rank by rank and ascending (from run->held_first[r]), counted per block in
 * receive_rows; -1 for the rest.
 * Returns the rows it brings. O(n) on threads. */
static size_t knnwb_partition_split_places(KnnwbPartitionRun *run, size_t *receive_rows)
{
  const KnnwbKnnGroup *group = run->options->group;
  const size_t block = run->last - run->first;
  knnwb_parallel_for(run->p->threads, block, KNNWB_PARTITION_SPLIT_PIECE,
                     knnwb_partition_split_block_places, run);
  size_t held = 0;
  run->held_first = g_new(size_t, (size_t)group->size + 1);
  for (int r = 0; r < group->size; r++) {
    run->held_first[r] = block + held;
    if (r == group->rank)
      continue;
    KnnwbPartitionSplitPass x = {.run = run, .pick = KNNWB_PARTITION_SPLIT_SEARCHED, .ways = 1};
    knnwb_partition_block_of(run->p, group, r, &x.first, &x.last);
    x.base = (int64_t)(block + held);
    knnwb_partition_split_begin(&x, &receive_rows[r]);
    knnwb_partition_split_end(&x);
    held += receive_rows[r];
  }
  run->held_first[group->size] = block + held;
  return held;
}

/* run->block_list (partition_internal.h): the block's rows this rank searches in phase one at the
 * front of its lists, the others after them, each in row order and marked unset. FALSE: memory.
 * O(block) on threads. */
static gboolean knnwb_partition_split_block_lists(KnnwbPartitionRun *run)
{
  run->block_list = g_try_new(int32_t, MAX(run->last - run->first, (size_t)1));
  if (run->block_list == NULL)
    return FALSE;
  KnnwbPartitionSplitPass x = {.run = run,
                               .pick = KNNWB_PARTITION_SPLIT_BLOCK,
                               .first = run->first,
                               .last = run->last,
                               .ways = 2};
  size_t total[2];
  knnwb_partition_split_begin(&x, total);
  /* (the others follow the rows searched here) */
  for (size_t t = 0; t * KNNWB_PARTITION_SPLIT_PIECE < x.last - x.first; t++)
    x.count[t * 2 + 1] += total[0];
  knnwb_partition_split_end(&x);
  run->block_searched = total[0];
  return TRUE;
}

gboolean knnwb_partition_split_own_rows(KnnwbPartitionRun *run, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size, me = group->rank;
  const size_t block = run->last - run->first;
  const gint64 start = g_get_monotonic_time();
  size_t *receive_rows = g_new0(size_t, size), *send_rows = g_new0(size_t, size);
  run->slot = g_try_new(int32_t, MAX(run->p->n, (size_t)1));
  gboolean room = run->slot != NULL;
  /* Test hook (as partition.c's KNNWB_PARTITION_BOUNDS_SHORT_RANK):
   * KNNWB_PARTITION_SPLIT_SHORT_RANK=r makes rank r short of memory for the rows it searches: every
   * rank stops with its message. */
  const char *short_rank = g_getenv("KNNWB_PARTITION_SPLIT_SHORT_RANK");
  const gboolean short_here = short_rank != NULL && *short_rank != '\0' && atoi(short_rank) == me;
  const size_t held = room && block <= knnwb_partition_split_max_held()
                          ? knnwb_partition_split_places(run, receive_rows)
                          : 0;
  const gint64 placed = g_get_monotonic_time();
  /* (the places were numbered past 32 bits: never used) */
  const gboolean too_many = block + held > knnwb_partition_split_max_held();
  room = room && !too_many;
  run->held.values = room && !short_here ? g_try_new(float, MAX(held * run->d, (size_t)1)) : NULL;
  run->held.rows = held;
  room = room && run->held.values != NULL;
  run->lists = room ? knnwb_knn_result_new_unset(0, block + held, run->k, NULL) : NULL;
  room = room && run->lists != NULL && knnwb_partition_split_block_lists(run);
  /* (each rank's rows of this block, ascending: the order that rank placed them in) */
  int64_t **ids = room ? knnwb_partition_split_owners(run, send_rows) : NULL;
  room = room && ids != NULL;
  if (!room)
    memset(send_rows, 0, size * sizeof(size_t));
  const gint64 listed = g_get_monotonic_time();
  const char *how = NULL;
  const gboolean ok =
      knnwb_partition_split_ship(run, ids, send_rows, 0, held, room, too_many, &how, error);
  g_debug("knnwb: partition: rank %d: holds its block's %zu rows and %zu rows of its groups from "
          "the other blocks (brought in %.3f s through %s: placed %.3f s, listed %.3f s, sent "
          "%.3f s)",
          me, block, held, (double)(g_get_monotonic_time() - start) / 1e6, how,
          (double)(placed - start) / 1e6, (double)(listed - placed) / 1e6,
          (double)(g_get_monotonic_time() - listed) / 1e6);
  knnwb_partition_split_ids_free(ids, size);
  g_free(receive_rows);
  g_free(send_rows);
  return ok;
}

/* The rows this rank searches in phase two that it does not hold (the rows of the groups with
 * visitors it is given, run->owner, which phase one may have given another rank, and their
 * visitors) marked -2 in slot, then placed after the rows held, rank by rank and ascending; ask[r]:
 * the rows asked of rank r (count[r]). Returns how many. O(n + visitors). */
static size_t knnwb_partition_split_wanted(KnnwbPartitionRun *run, int64_t **ask, size_t *count)
{
  const KnnwbKnnGroup *group = run->options->group;
  const KnnwbPartition *p = run->p;
  const size_t visits = (size_t)run->query_start[p->groups];
  /* (-2: wanted; a row may visit several groups) */
  for (size_t t = 0; t < visits; t++)
    if (run->slot[run->queries[t]] == -1)
      run->slot[run->queries[t]] = -2;
  /* (a group without visitors is not searched again: its rows stay where they are) */
  for (size_t g = 0; g < p->groups; g++) {
    if (run->owner[g] != group->rank || run->query_start[g + 1] == run->query_start[g])
      continue;
    for (size_t t = p->start[g]; t < p->start[g + 1]; t++)
      if (run->slot[p->members[t]] == -1)
        run->slot[p->members[t]] = -2;
  }
  size_t wanted = 0;
  for (int r = 0; r < group->size; r++) {
    if (r == group->rank) /* (its own rows are all held) */
      continue;
    KnnwbPartitionSplitPass x = {.run = run, .pick = KNNWB_PARTITION_SPLIT_WANTED, .ways = 1};
    knnwb_partition_block_of(p, group, r, &x.first, &x.last);
    x.base = (int64_t)(run->lists->n_queries + wanted);
    knnwb_partition_split_begin(&x, &count[r]);
    ask[r] = g_new(int64_t, MAX(count[r], (size_t)1));
    x.ids = &ask[r];
    knnwb_partition_split_end(&x);
    wanted += count[r];
  }
  return wanted;
}

gboolean knnwb_partition_split_visitor_rows(KnnwbPartitionRun *run, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size;
  const gint64 start = g_get_monotonic_time();
  int64_t **ask = g_new0(int64_t *, size);
  size_t *count = g_new0(size_t, size);
  const size_t wanted = knnwb_partition_split_wanted(run, ask, count);
  const size_t before = run->lists->n_queries, held_before = run->held.rows;
  /* the asks out, each rank's asks of this one in */
  KnnwbPartitionTransfer t;
  knnwb_partition_transfer_init(&t, size);
  for (int r = 0; r < size; r++) {
    t.send_bytes[r] = count[r] * sizeof(int64_t);
    t.send[r] = (char *)g_steal_pointer(&ask[r]);
  }
  g_free(ask);
  gboolean ok = knnwb_partition_ranks_exchange(group, &t, TRUE, "the rows asked for", error);
  /* room for the rows asked for, then the rows each rank asked of this one (the places were
   * numbered past 32 bits where too many: never used) */
  const gboolean too_many = before + wanted > knnwb_partition_split_max_held();
  gboolean room = ok && !too_many;
  if (room && wanted > 0) {
    float *values = g_try_realloc(run->held.values,
                                  MAX((held_before + wanted) * run->d, (size_t)1) * sizeof(float));
    run->held.values = values != NULL ? values : run->held.values;
    room = values != NULL && knnwb_partition_split_grow(run->lists, before + wanted);
  }
  size_t *asked = g_new0(size_t, size);
  for (int r = 0; ok && r < size; r++) {
    asked[r] = t.receive_bytes[r] / sizeof(int64_t);
    const int64_t *rows = (const int64_t *)(void *)t.receive[r];
    for (size_t u = 0; u < asked[r]; u++) /* (the ranks' own bookkeeping: never fails) */
      g_assert((size_t)rows[u] >= run->first && (size_t)rows[u] < run->last);
  }
  if (ok && !room)
    memset(asked, 0, size * sizeof(size_t));
  const char *how = "messages";
  ok = ok && knnwb_partition_split_ship(run, (int64_t *const *)(void *)t.receive, asked,
                                        held_before, wanted, room, too_many, &how, error);
  knnwb_partition_transfer_clear(&t);
  if (ok)
    run->held.rows = held_before + wanted;
  g_debug("knnwb: partition: rank %d: %zu rows of its groups' visits brought in %.3f s through %s",
          group->rank, wanted, (double)(g_get_monotonic_time() - start) / 1e6, how);
  g_free(asked);
  g_free(count);
  return ok;
}

gboolean knnwb_partition_split_run(const KnnwbMatrix *block, KnnwbMatrix **sample,
                                   const int64_t *counts, KnnwbPartition *p,
                                   const KnnwbKnnOptions *options, KnnwbPartitionMode mode,
                                   gboolean made, double expected, gint64 start,
                                   KnnwbNeighbors **result, GError **error)
{
  const KnnwbKnnGroup *group = options->group;
  p->block_start = g_new(size_t, (size_t)group->size + 1);
  p->block_start[0] = 0;
  for (int r = 0; r < group->size; r++)
    p->block_start[r + 1] = p->block_start[r] + (size_t)counts[r];
  p->data_first = p->block_start[group->rank];
  KnnwbKnnOptions split = *options;
  split.group_split = FALSE;
  split.group_split_gather = FALSE;
  gboolean chosen = TRUE;
  g_debug("knnwb: partition: each rank keeps its block of rows and brings the rows it searches");
  const gboolean settled = knnwb_partition_settle(p, block, *sample, &split, made, expected, start,
                                                  "the split search", &chosen, error);
  /* (the sample served the choice and the groups: 6.5 MiB at 1,000,000 x 50 rows) */
  g_clear_pointer(sample, knnwb_matrix_free);
  return settled && (!chosen || knnwb_partition_run(block, &split, p, mode, expected,
                                                    "the split search", result, error));
}
