/*
 * The end of a partitioned run over a group's ranks (partition_ranks.c). Each rank holds lists for
 * the rows of the groups it searched (their own lists) and pieces for the rows that visited the
 * groups it searched after; every pair of rows was scored on exactly one rank, so the pieces of a
 * row, merged by (distance, row) on the rank of its block, make its list of one process.
 *
 * The pieces travel as records (row, k indices, k distances), in rounds of at most
 * KNNWB_PARTITION_ROUND_BYTES a rank. Where the ranks share a host the group lends blocks of
 * shared memory of that size: each round every rank packs its next records into its block, and
 * the others merge them in place. Otherwise they go as messages. At 10M rows and k = 30 the lists
 * are 4.8 GB, of which a share of (R - 1) / R changes rank; through blocks for the whole of it at
 * once, the first touches of their fresh pages were most of the packing (0.44-0.48 s of a
 * 0.58-0.66 s combining, two split ranks of one H100), and the blocks held that much shared memory
 * at the rank's peak. Small blocks refilled every round fault in once. The copies are what is left,
 * so every step runs on all the rank's threads.
 */
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "base/base.h"
#include "engine/engine.h"
#include "group/group.h"
#include "partition/partition_internal.h"

/* A list on the way: its row, then k indices and k distances. Row numbers (the row and its
 * indices, rows or -1) travel as int32 where every row's fits, as int64 beyond: at 10,000,000
 * rows and k = 30 a record is 364 bytes instead of 488, and the combining's cost is its copies,
 * so it goes with the bytes. */
typedef struct {
  size_t id;     /* bytes of a row number: 4 or 8 */
  size_t record; /* bytes of a record */
} KnnwbPartitionLayout;

/* This rank's wish for 64-bit row numbers: beyond 2^31 - 1 rows, or KNNWB_PARTITION_RECORD_IDS=64
 * (tests, comparisons). The ranks take the layout any of them wishes (knnwb_partition_layout). */
static int64_t knnwb_partition_ids_wide(size_t n)
{
  return n > (size_t)INT32_MAX || g_strcmp0(g_getenv("KNNWB_PARTITION_RECORD_IDS"), "64") == 0;
}

static KnnwbPartitionLayout knnwb_partition_layout(gboolean wide, size_t k)
{
  const size_t id = wide ? sizeof(int64_t) : sizeof(int32_t);
  return (KnnwbPartitionLayout){id, id + k * (id + sizeof(double))};
}

/* count row numbers into a record at `at`, id_bytes each. */
static void knnwb_partition_ids_put(char *at, const int64_t *ids, size_t count, size_t id_bytes)
{
  if (id_bytes == sizeof(int64_t)) {
    memcpy(at, ids, count * sizeof(int64_t));
    return;
  }
  for (size_t t = 0; t < count; t++) {
    const int32_t id = (int32_t)ids[t];
    memcpy(at + t * sizeof id, &id, sizeof id);
  }
}

/* count row numbers of a record at `at` (id_bytes each) into ids. */
static void knnwb_partition_ids_get(int64_t *ids, const char *at, size_t count, size_t id_bytes)
{
  if (id_bytes == sizeof(int64_t)) {
    memcpy(ids, at, count * sizeof(int64_t));
    return;
  }
  for (size_t t = 0; t < count; t++) {
    int32_t id;
    memcpy(&id, at + t * sizeof id, sizeof id);
    ids[t] = id;
  }
}
/* Rows per piece of the packing: each piece's records are counted, then copied, on one thread. */
#define KNNWB_PARTITION_PACK_ROWS ((size_t)65536)

/* The records for one rank's block. */
typedef struct {
  const KnnwbPartitionRun *run;
  KnnwbPartitionLayout layout;
  size_t first, rows; /* the block */
  int rank;           /* the block's */
  size_t pieces;
  size_t *at; /* per piece: its rows with a list, then its first record */
  size_t records;
  /* A split rank's (run->held_first): the pieces packed whole, and its lists given back below */
  size_t done, given_back;
  /* the round's: records [from, to) into out */
  size_t from, to;
  char *out;
} KnnwbPartitionPack;

/* Whether row i has a list here (a row this rank holds, with an entry). */
static inline gboolean knnwb_partition_pack_has(const KnnwbPartitionRun *run, size_t i)
{
  return (run->slot == NULL || run->slot[i] >= 0) &&
         run->lists->indices[knnwb_partition_list_at(run, i) * run->k] >= 0;
}

static void knnwb_partition_pack_count(size_t from, size_t to, void *data)
{
  KnnwbPartitionPack *pack = data;
  /* (one call may take several pieces: a loop on one thread takes them all) */
  for (size_t piece = from; piece < to; piece += KNNWB_PARTITION_PACK_ROWS) {
    const size_t last = pack->first + MIN(to, piece + KNNWB_PARTITION_PACK_ROWS);
    size_t count = 0;
    for (size_t i = pack->first + piece; i < last; i++)
      count += knnwb_partition_pack_has(pack->run, i);
    pack->at[piece / KNNWB_PARTITION_PACK_ROWS] = count;
  }
}

/* The round's records among those of one piece (rows [piece, last) of the block). */
static void knnwb_partition_pack_piece(const KnnwbPartitionPack *pack, size_t piece, size_t last)
{
  const size_t index = piece / KNNWB_PARTITION_PACK_ROWS;
  const size_t end = index + 1 < pack->pieces ? pack->at[index + 1] : pack->records;
  size_t t = pack->at[index];
  if (end <= pack->from || t >= pack->to) /* (none of the round's here: its rows not read) */
    return;
  const KnnwbNeighbors *lists = pack->run->lists;
  const size_t k = pack->run->k, id = pack->layout.id, record = pack->layout.record;
  for (size_t i = pack->first + piece; i < pack->first + last && t < pack->to; i++) {
    if (!knnwb_partition_pack_has(pack->run, i))
      continue;
    if (t++ < pack->from)
      continue;
    char *at = pack->out + (t - 1 - pack->from) * record;
    const size_t held = knnwb_partition_list_at(pack->run, i);
    const int64_t row = (int64_t)i;
    knnwb_partition_ids_put(at, &row, 1, id);
    knnwb_partition_ids_put(at + id, lists->indices + held * k, k, id);
    memcpy(at + id + k * id, lists->distances + held * k, k * sizeof(double));
  }
}

static void knnwb_partition_pack_copy(size_t from, size_t to, void *data)
{
  const KnnwbPartitionPack *pack = data;
  for (size_t piece = from; piece < to; piece += KNNWB_PARTITION_PACK_ROWS)
    knnwb_partition_pack_piece(pack, piece, MIN(to, piece + KNNWB_PARTITION_PACK_ROWS));
}

/* Counts the rows of rank to's block that have a list here (none for this rank's). */
static void knnwb_partition_pack_init(KnnwbPartitionPack *pack, const KnnwbPartitionRun *run,
                                      KnnwbPartitionLayout layout, int to)
{
  size_t last;
  knnwb_partition_block_of(run->p, run->options->group, to, &pack->first, &last);
  pack->run = run;
  pack->layout = layout;
  pack->rank = to;
  pack->given_back = run->held_first != NULL ? run->held_first[to] : 0;
  pack->rows = last - pack->first;
  pack->pieces = (pack->rows + KNNWB_PARTITION_PACK_ROWS - 1) / KNNWB_PARTITION_PACK_ROWS;
  pack->at = g_new0(size_t, MAX(pack->pieces, (size_t)1));
  if (to != run->options->group->rank) /* (this rank's own pieces are merged in place) */
    knnwb_parallel_for(run->p->threads, pack->rows, KNNWB_PARTITION_PACK_ROWS,
                       knnwb_partition_pack_count, pack);
  pack->records = 0;
  for (size_t t = 0; t < pack->pieces; t++) {
    const size_t count = pack->at[t];
    pack->at[t] = pack->records;
    pack->records += count;
  }
}

/* A split rank's lists of the rows of the pieces packed whole so far given back: they go nowhere
 * else, and a later round reads no row of such a piece (knnwb_partition_pack_piece), so the lists
 * it sends no longer add to those its block gathers. The rows of pack's block that it searched
 * in phase one have their lists at [held_first[r], held_first[r + 1]) in row order: those up to
 * the last such row of the pieces done go (phase two's, a few, stay to the end). O(rows read). */
static void knnwb_partition_pack_give_back(KnnwbPartitionPack *pack)
{
  const KnnwbPartitionRun *run = pack->run;
  if (run->held_first == NULL)
    return;
  size_t done = pack->done;
  while (done < pack->pieces &&
         (done + 1 < pack->pieces ? pack->at[done + 1] : pack->records) <= pack->to)
    done++;
  const size_t lo = run->held_first[pack->rank], hi = run->held_first[pack->rank + 1];
  const size_t from = pack->first + pack->done * KNNWB_PARTITION_PACK_ROWS;
  const size_t to = pack->first + MIN(pack->rows, done * KNNWB_PARTITION_PACK_ROWS);
  pack->done = done;
  for (size_t i = to; i > from; i--) {
    const int32_t at = run->slot[i - 1];
    if (at < 0 || (size_t)at < lo || (size_t)at >= hi)
      continue;
    knnwb_partition_lists_give_back(run->lists, pack->given_back, (size_t)at + 1);
    pack->given_back = (size_t)at + 1;
    break;
  }
}

/* Records [from, from + count) (in the block's row order) into out. */
static void knnwb_partition_pack_fill(KnnwbPartitionPack *pack, size_t from, size_t count,
                                      char *out)
{
  pack->from = from;
  pack->to = from + count;
  pack->out = out;
  if (count > 0)
    knnwb_parallel_for(pack->run->p->threads, pack->rows, KNNWB_PARTITION_PACK_ROWS,
                       knnwb_partition_pack_copy, pack);
  knnwb_partition_pack_give_back(pack);
}

/* Where the others' records for this rank's block are merged: own, its rows in order. A split
 * rank's are its block's lists going into row order (order): each batch of rows is put in order
 * before the records for its rows are merged, so they land in the fresh lists, and the places of
 * the rows the others searched are never faulted in. */
typedef struct {
  KnnwbNeighbors *own;
  KnnwbPartitionOrder *order; /* a split rank's, or NULL */
  double ordered;             /* seconds spent putting rows in order */
} KnnwbPartitionTarget;

typedef struct {
  KnnwbNeighbors *own;
  const char *records;
  KnnwbPartitionLayout layout;
  size_t k;
} KnnwbPartitionRecords;

/* Records [first, last) (distinct rows) merged into the block's lists. */
static void knnwb_partition_merge_records(size_t first, size_t last, void *data)
{
  const KnnwbPartitionRecords *m = data;
  const size_t k = m->k, id = m->layout.id, record = m->layout.record;
  int64_t *index = g_new(int64_t, 2 * k);
  double *distance = g_new(double, 2 * k);
  for (size_t t = first; t < last; t++) {
    const char *at = m->records + t * record;
    int64_t row;
    knnwb_partition_ids_get(&row, at, 1, id);
    const size_t i = (size_t)row - m->own->first_row;
    /* the row's first piece (an empty or unset list, partition_internal.h): straight in */
    if (m->own->n_found[i] < 0 || m->own->indices[i * k] < 0) {
      knnwb_partition_ids_get(m->own->indices + i * k, at + id, k, id);
      memcpy(m->own->distances + i * k, at + id + k * id, k * sizeof(double));
      m->own->n_found[i] = 0;
      continue;
    }
    /* (the records are packed bytes: their values are copied out before use) */
    knnwb_partition_ids_get(index + k, at + id, k, id);
    memcpy(distance + k, at + id + k * id, k * sizeof(double));
    knnwb_partition_merge_list(m->own->indices + i * k, m->own->distances + i * k, k, index + k,
                               distance + k, k, NULL, index, distance);
  }
  g_free(index);
  g_free(distance);
}

/* A split rank's block rows put in order up to the last row of this round's records (each rank's
 * records are in row order: its last is its highest). */
static void knnwb_partition_merge_order(const KnnwbPartitionRun *run, KnnwbPartitionLayout layout,
                                        KnnwbPartitionTarget *target, const char *const *records,
                                        const size_t *bytes)
{
  const gint64 start = g_get_monotonic_time();
  size_t end = 0; /* (block rows) */
  for (int r = 0; r < run->options->group->size; r++) {
    if (r == run->options->group->rank || bytes[r] < layout.record)
      continue;
    int64_t row;
    knnwb_partition_ids_get(&row, records[r] + (bytes[r] / layout.record - 1) * layout.record, 1,
                            layout.id);
    end = MAX(end, (size_t)row + 1 - target->own->first_row);
  }
  knnwb_partition_order_to(target->order, end, run->p->threads);
  target->ordered += (double)(g_get_monotonic_time() - start) / 1e6;
}

/* The other ranks' records for this block (records[r], bytes[r]) merged into the target, which
 * holds this rank's pieces already; the records of one rank have distinct rows, so each rank's go
 * on all threads. */
static void knnwb_partition_merge_all(const KnnwbPartitionRun *run, KnnwbPartitionLayout layout,
                                      KnnwbPartitionTarget *target, const char *const *records,
                                      const size_t *bytes)
{
  if (target->order != NULL)
    knnwb_partition_merge_order(run, layout, target, records, bytes);
  for (int r = 0; r < run->options->group->size; r++) {
    if (r == run->options->group->rank)
      continue;
    KnnwbPartitionRecords m = {
        .own = target->own, .records = records[r], .layout = layout, .k = run->k};
    knnwb_parallel_for(run->p->threads, bytes[r] / layout.record, 256,
                       knnwb_partition_merge_records, &m);
  }
}

typedef struct {
  KnnwbNeighbors *lists;
  size_t first, k;
} KnnwbPartitionAdopt;

/* Block rows [from, to) to the front of the arrays. A block of rank r >= 1 starts at or past its
 * own size (knnwb_knn_group_rows gives the earlier blocks the extra rows), so source and
 * destination never overlap. */
static void knnwb_partition_adopt_rows(size_t from, size_t to, void *data)
{
  const KnnwbPartitionAdopt *a = data;
  const size_t k = a->k;
  memcpy(a->lists->indices + from * k, a->lists->indices + (a->first + from) * k,
         (to - from) * k * sizeof(int64_t));
  memcpy(a->lists->distances + from * k, a->lists->distances + (a->first + from) * k,
         (to - from) * k * sizeof(double));
}

/* run->lists (every row) made the lists of this rank's block, rows first .. first + rows - 1: the
 * block's rows moved to the front of its arrays, on threads, and the rest given back; run->lists
 * is NULL afterwards. This rank's pieces are then in place: fresh lists for the block (2.4 GB at
 * 10,000,000 rows, k = 30, two ranks), cleared and then given this rank's pieces, were paid twice
 * in page faults and copies. Call once the other blocks are packed. Never fails. */
static KnnwbNeighbors *knnwb_partition_adopt_block(KnnwbPartitionRun *run, size_t first,
                                                   size_t rows)
{
  KnnwbNeighbors *own = g_steal_pointer(&run->lists);
  const size_t k = own->k, cells = MAX(rows * k, (size_t)1);
  KnnwbPartitionAdopt a = {.lists = own, .first = first, .k = k};
  if (first > 0) /* (rank 0's block is in place) */
    knnwb_parallel_for(run->p->threads, rows, 65536, knnwb_partition_adopt_rows, &a);
  /* (shrinking keeps the front; a refusal keeps the larger arrays, as valid) */
  int64_t *indices = g_try_realloc(own->indices, cells * sizeof(int64_t));
  double *distances = g_try_realloc(own->distances, cells * sizeof(double));
  int32_t *found = g_try_realloc(own->n_found, MAX(rows, (size_t)1) * sizeof(int32_t));
  own->indices = indices != NULL ? indices : own->indices;
  own->distances = distances != NULL ? distances : own->distances;
  own->n_found = found != NULL ? found : own->n_found;
  own->n_queries = rows;
  own->first_row = first;
  g_clear_pointer(&own->backend_used, g_free);
  return own;
}

/* This rank's block's lists where they lie in run->lists of a rank that holds every row (its rows
 * in order from place first), as the others' records are merged into them before the block is
 * moved to the front: only the rows and the arrays are set. (A split rank's go into row order
 * instead: KnnwbPartitionTarget.) */
static KnnwbNeighbors knnwb_partition_block_view(const KnnwbPartitionRun *run, size_t first)
{
  return (KnnwbNeighbors){.indices = run->lists->indices + first * run->k,
                          .distances = run->lists->distances + first * run->k,
                          .n_found = run->lists->n_found + first,
                          .k = run->k,
                          .first_row = first};
}

/* The durations of the combining's steps, summed over the rounds (seconds). */
typedef struct {
  double packed, exchanged, merged;
  double ordered; /* (a split rank's lists put in row order: within merged, and after) */
} KnnwbPartitionSteps;

/*
 * Round j through the group's shared blocks (blocks[r], rank r's): this rank's records for the
 * others packed into its block, then, once every rank's are, the others' for this block merged
 * into own; the blocks may be refilled when it returns. FALSE: the group's errors.
 */
static gboolean knnwb_partition_round_shared(const KnnwbPartitionRun *run,
                                             KnnwbPartitionPack *packs,
                                             const KnnwbPartitionRounds *x, size_t j,
                                             void *const *blocks, KnnwbPartitionTarget *target,
                                             KnnwbPartitionSteps *steps, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size, me = group->rank;
  const gint64 start = g_get_monotonic_time();
  for (int r = 0; r < size; r++)
    if (r != me)
      knnwb_partition_pack_fill(&packs[r], j * x->q, knnwb_partition_round_count(x, me, r, j),
                                (char *)blocks[me] + knnwb_partition_round_offset(x, me, r, j));
  const gint64 packed = g_get_monotonic_time();
  gboolean ok = group->share_sync(group, error);
  const gint64 synced = g_get_monotonic_time();
  const char **records = g_new(const char *, (guint)size);
  size_t *bytes = g_new(size_t, (guint)size);
  for (int s = 0; s < size; s++) {
    records[s] = (const char *)blocks[s] + knnwb_partition_round_offset(x, s, me, j);
    bytes[s] = knnwb_partition_round_count(x, s, me, j) * x->record;
  }
  if (ok)
    knnwb_partition_merge_all(run, packs[me].layout, target, records, bytes);
  g_free(records);
  g_free(bytes);
  const gint64 merged = g_get_monotonic_time();
  /* (every rank's reads done before a block is refilled; the last round's end waits anyway) */
  ok = ok && (j + 1 == x->rounds || group->share_sync(group, error));
  steps->packed += (double)(packed - start) / 1e6;
  steps->exchanged += (double)(synced - packed + g_get_monotonic_time() - merged) / 1e6;
  steps->merged += (double)(merged - synced) / 1e6;
  return ok;
}

/*
 * Every round through the group's shared blocks, each rank's of the size of its largest round.
 * *used is FALSE (on every rank alike) when the group has no blocks this time. FALSE: the group's
 * errors.
 */
static gboolean knnwb_partition_combine_shared(const KnnwbPartitionRun *run,
                                               KnnwbPartitionPack *packs,
                                               const KnnwbPartitionRounds *x,
                                               KnnwbPartitionTarget *target, gboolean *used,
                                               KnnwbPartitionSteps *steps, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const size_t first_round = knnwb_partition_round_offset(x, group->rank, group->size, 0);
  void **blocks = g_new0(void *, group->size);
  GError *local = NULL;
  *used = group->share_begin != NULL && group->share_begin(group, first_round, blocks, &local);
  if (!*used) {
    g_free(blocks);
    if (local != NULL)
      g_propagate_error(error, local);
    return local == NULL;
  }
  gboolean ok = TRUE;
  for (size_t j = 0; ok && j < x->rounds; j++)
    ok = knnwb_partition_round_shared(run, packs, x, j, blocks, target, steps, error);
  const gint64 merged = g_get_monotonic_time();
  ok = group->share_end(group, ok ? error : NULL) && ok;
  /* (the release waits for every rank's merge, then gives the window's pages back) */
  g_debug("knnwb: partition: rank %d: the shared blocks released in %.3f s", group->rank,
          (double)(g_get_monotonic_time() - merged) / 1e6);
  g_free(blocks);
  return ok;
}

/* Every round as messages (knnwb_partition_ranks_exchange). FALSE: the group's errors. */
static gboolean knnwb_partition_combine_messages(const KnnwbPartitionRun *run,
                                                 KnnwbPartitionPack *packs,
                                                 const KnnwbPartitionRounds *x,
                                                 KnnwbPartitionTarget *target,
                                                 KnnwbPartitionSteps *steps, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int me = group->rank;
  gboolean ok = TRUE;
  for (size_t j = 0; ok && j < x->rounds; j++) {
    const gint64 start = g_get_monotonic_time();
    KnnwbPartitionTransfer t;
    knnwb_partition_transfer_init(&t, group->size);
    gboolean room = TRUE;
    for (int r = 0; r < t.size; r++) {
      const size_t count = knnwb_partition_round_count(x, me, r, j);
      t.send_bytes[r] = count * x->record;
      t.send[r] = g_try_malloc(MAX(t.send_bytes[r], (size_t)1));
      room = room && t.send[r] != NULL;
      if (t.send[r] != NULL)
        knnwb_partition_pack_fill(&packs[r], j * x->q, count, t.send[r]);
    }
    const gint64 packed = g_get_monotonic_time();
    ok = knnwb_partition_ranks_exchange(group, &t, room, "the lists to send", error);
    const gint64 exchanged = g_get_monotonic_time();
    if (ok)
      knnwb_partition_merge_all(run, packs[me].layout, target, (const char *const *)t.receive,
                                t.receive_bytes);
    knnwb_partition_transfer_clear(&t);
    steps->packed += (double)(packed - start) / 1e6;
    steps->exchanged += (double)(exchanged - packed) / 1e6;
    steps->merged += (double)(g_get_monotonic_time() - exchanged) / 1e6;
  }
  return ok;
}

static void knnwb_partition_count_found(size_t first, size_t last, void *data)
{
  KnnwbNeighbors *own = data;
  for (size_t i = first; i < last; i++) {
    int32_t found = 0;
    for (size_t r = 0; r < own->k; r++)
      found += own->indices[i * own->k + r] >= 0;
    own->n_found[i] = found;
  }
}

/* The counters every rank adds to its lists (re-selected rows, the screen) made the job's. */
static gboolean knnwb_partition_counters(const KnnwbKnnGroup *group, KnnwbNeighbors *own,
                                         const KnnwbNeighbors *mine, GError **error)
{
  int64_t sum[2] = {(int64_t)mine->n_reselected, (int64_t)mine->n_exhaustive};
  int64_t screen = (int64_t)mine->screen_used;
  if (!group->reduce(group, sum, 2, KNNWB_GROUP_SUM, error) ||
      !group->reduce(group, &screen, 1, KNNWB_GROUP_MAX, error))
    return FALSE;
  own->n_reselected = (size_t)sum[0];
  own->n_exhaustive = (size_t)sum[1];
  own->screen_used = (KnnwbScreen)screen;
  return TRUE;
}

/* Every rank's record bytes for every rank, on every rank: sizes[s * R + r] from s to r. */
static gboolean knnwb_partition_sizes(const KnnwbKnnGroup *group, const KnnwbPartitionPack *packs,
                                      size_t record, size_t *sizes, GError **error)
{
  const int size = group->size;
  size_t *mine = g_new(size_t, size), *row_bytes = g_new(size_t, size);
  const void **send = g_new(const void *, size);
  void **receive = g_new(void *, size);
  for (int r = 0; r < size; r++) {
    mine[r] = packs[r].records * record;
    send[r] = mine;
    receive[r] = sizes + (size_t)r * size;
    row_bytes[r] = (size_t)size * sizeof(size_t);
  }
  const gboolean ok = group->exchange(group, (const void *const *)send, row_bytes,
                                      (void *const *)receive, row_bytes, error);
  g_free(mine);
  g_free(row_bytes);
  g_free(send);
  g_free(receive);
  return ok;
}

/* The records' layout, the same on every rank: *wide (64-bit row numbers) if any rank needs
 * them. Collective. */
static gboolean knnwb_partition_agree_layout(const KnnwbKnnGroup *group, size_t n, int64_t *wide,
                                             GError **error)
{
  *wide = knnwb_partition_ids_wide(n);
  return group->reduce(group, wide, 1, KNNWB_GROUP_MAX, error);
}

/* Every rank's block's lists (own) into every row's, on every rank. Collective. */
static KnnwbNeighbors *knnwb_partition_gather_all(const KnnwbPartitionRun *run,
                                                  const KnnwbNeighbors *own, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const size_t *start = run->p->block_start;
  if (start == NULL)
    return knnwb_knn_group_gather(group, own, run->p->n, error);
  size_t *count = g_new(size_t, (size_t)group->size);
  for (int r = 0; r < group->size; r++)
    count[r] = start[r + 1] - start[r];
  KnnwbNeighbors *all = knnwb_knn_group_gather_blocks(group, own, run->p->n, start, count, error);
  g_free(count);
  return all;
}

/* A split rank's fresh lists for its block in row order (*order, knnwb_partition_order_begin),
 * agreed: a rank short of memory stops every rank with its message. Collective. */
static gboolean knnwb_partition_combine_order_begin(KnnwbPartitionRun *run,
                                                    const KnnwbPartitionPack *mine,
                                                    KnnwbPartitionOrder *order, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  /* Test hook (as partition_split.c's KNNWB_PARTITION_SPLIT_SHORT_RANK):
   * KNNWB_PARTITION_ORDER_SHORT_RANK=r makes rank r short of memory for its block's lists in row
   * order: every rank stops with its message. */
  const char *short_rank = g_getenv("KNNWB_PARTITION_ORDER_SHORT_RANK");
  const gboolean short_here =
      short_rank != NULL && *short_rank != '\0' && atoi(short_rank) == group->rank;
  const gboolean room =
      !short_here &&
      knnwb_partition_order_begin(order, run->lists, mine->first, mine->rows, run->block_list,
                                  run->block_searched, KNNWB_PARTITION_ORDER_BATCH);
  if (short_here)
    order->ordered = NULL;
  if (!room)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the lists of this rank's %zu rows (k = %zu)", mine->rows, run->k);
  if (group->agree(group, room, error))
    return TRUE;
  g_clear_pointer(&order->ordered, knnwb_neighbors_free);
  return FALSE;
}

/* The pieces exchanged and merged, round by round: *own (NULL before) becomes this block's lists.
 * FALSE: the group's errors. */
static gboolean knnwb_partition_combine_rounds(KnnwbPartitionRun *run, KnnwbPartitionPack *packs,
                                               const size_t *sizes, KnnwbNeighbors **own,
                                               gboolean *shared, KnnwbPartitionSteps *steps,
                                               size_t *rounds, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const KnnwbPartitionPack *mine = &packs[group->rank];
  KnnwbPartitionRounds x;
  if (!knnwb_partition_rounds_plan(group, sizes, mine->layout.record, &x, error))
    return FALSE;
  *rounds = x.rounds;
  /* A split rank's lists lie by who searched them (run->block_list): its block's go into fresh
   * lists in row order as the rounds bring the others' records for them (the old given back as
   * they go), and the lists it sends are given back as they go (knnwb_partition_pack_give_back).
   * Otherwise the others' records are merged where the block's lists lie. */
  const gboolean split = run->block_list != NULL;
  KnnwbNeighbors block = {0};
  KnnwbPartitionOrder order = {0};
  KnnwbPartitionTarget target = {.own = &block};
  if (split && !knnwb_partition_combine_order_begin(run, mine, &order, error))
    return FALSE;
  if (split)
    target = (KnnwbPartitionTarget){.own = order.ordered, .order = &order};
  else
    block = knnwb_partition_block_view(run, mine->first);
  gboolean ok = knnwb_partition_combine_shared(run, packs, &x, &target, shared, steps, error);
  ok = ok && (*shared || knnwb_partition_combine_messages(run, packs, &x, &target, steps, error));
  if (!split) {
    if (ok)
      *own = knnwb_partition_adopt_block(run, mine->first, mine->rows);
    return ok;
  }
  const gint64 start = g_get_monotonic_time();
  if (ok) /* (the rows past the last record) */
    knnwb_partition_order_to(&order, mine->rows, run->p->threads);
  g_clear_pointer(&run->lists, knnwb_neighbors_free);
  if (ok) {
    knnwb_partition_lists_empty_unset(order.ordered, run->p->threads);
    *own = g_steal_pointer(&order.ordered);
  }
  knnwb_neighbors_free(order.ordered);
  steps->ordered = target.ordered + (double)(g_get_monotonic_time() - start) / 1e6;
  return ok;
}

gboolean knnwb_partition_ranks_combine(KnnwbPartitionRun *run, KnnwbNeighbors **result,
                                       GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size;
  const size_t n = run->p->n, k = run->k;
  const gint64 start = g_get_monotonic_time();
  int64_t wide = 0;
  gboolean ok = knnwb_partition_agree_layout(group, n, &wide, error);
  const KnnwbPartitionLayout layout = knnwb_partition_layout(wide != 0, k);
  KnnwbPartitionPack *packs = g_new0(KnnwbPartitionPack, size);
  for (int r = 0; r < size; r++)
    knnwb_partition_pack_init(&packs[r], run, layout, r);
  size_t *sizes = g_new0(size_t, (size_t)size * size);
  const KnnwbNeighbors counters = *run->lists; /* (its counters only) */
  KnnwbNeighbors totals = {0};
  ok = ok && knnwb_partition_sizes(group, packs, layout.record, sizes, error) &&
       knnwb_partition_counters(group, &totals, &counters, error);
  const gint64 counted = g_get_monotonic_time();
  gboolean shared = FALSE;
  KnnwbNeighbors *own = NULL;
  KnnwbPartitionSteps steps = {0};
  size_t rounds = 0;
  ok = ok &&
       knnwb_partition_combine_rounds(run, packs, sizes, &own, &shared, &steps, &rounds, error);
  for (int r = 0; r < size; r++)
    g_free(packs[r].at);
  g_free(packs);
  g_free(sizes);
  if (ok) {
    own->n_reselected = totals.n_reselected;
    own->n_exhaustive = totals.n_exhaustive;
    own->screen_used = totals.screen_used;
    knnwb_parallel_for(run->p->threads, own->n_queries, 4096, knnwb_partition_count_found, own);
    g_debug("knnwb: partition: rank %d: lists of its rows combined in %.3f s through %s in %zu "
            "round(s) (counted %.3f s, packed %.3f s, exchanged %.3f s, merged %.3f s; put in "
            "row order %.3f s)",
            group->rank, (double)(g_get_monotonic_time() - start) / 1e6,
            shared ? "shared memory" : "messages", rounds, (double)(counted - start) / 1e6,
            steps.packed, steps.exchanged, steps.merged, steps.ordered);
    if (!run->options->group_own_rows) {
      KnnwbNeighbors *all = knnwb_partition_gather_all(run, own, error);
      ok = all != NULL;
      knnwb_neighbors_free(own);
      own = all;
    }
  }
  if (ok)
    *result = own;
  else
    knnwb_neighbors_free(own);
  return ok;
}
