/*
 * The end of a partitioned run over a group's ranks (partition_ranks.c). Each rank holds lists for
 * the rows of the groups it searched (their own lists) and pieces for the rows that visited the
 * groups it searched after; every pair of rows was scored on exactly one rank, so the pieces of a
 * row, merged by (distance, row) on the rank of its block, make its list of one process.
 *
 * The pieces travel as records (row, k indices, k distances). Where the ranks share a host the
 * group lends blocks of shared memory: each rank packs its records once into its block and the
 * others merge them in place. Otherwise they go as messages. The blocks are lent as phase one ends
 * (knnwb_partition_ranks_window_early), for the most a rank can send, and the part its own
 * groups' rows will fill faults in on helper threads while it bounds and visits: those first
 * touches were most of the packing (0.33-0.43 s of a 0.57-0.61 s combining at 10M rows, k = 30,
 * two ranks of one H200; then 0.25-0.33 s). At 10M rows and k = 30 the lists are
 * 4.8 GB, of which a share of (R - 1) / R changes rank: the copies are what this costs, so every
 * step runs on all the rank's threads.
 */
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "base/base.h"
#include "engine/engine.h"
#include "group/group.h"
#include "partition/partition_internal.h"

/* A list on the way: its row, then k indices and k distances. Row numbers (the row and its
 * indices, rows or -1) travel as int32 where every row's fits, as int64 beyond: at 10,000,000
 * rows and k = 30 a record is 364 bytes instead of 488, and the packing's cost is mostly the
 * shared window's fresh pages, so it goes with the bytes. */
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
/* Rows per piece of the packing (the first touch of a buffer's pages is much of its cost). */
#define KNNWB_PARTITION_PACK_ROWS ((size_t)65536)

/* The records for one rank's block. */
typedef struct {
  const KnnwbPartitionRun *run;
  KnnwbPartitionLayout layout;
  size_t first, rows; /* the block */
  size_t *at;         /* per piece: its rows with a list, then its first record */
  size_t records;
  char *out;
} KnnwbPartitionPack;

static void knnwb_partition_pack_count(size_t from, size_t to, void *data)
{
  KnnwbPartitionPack *pack = data;
  const size_t k = pack->run->k;
  const KnnwbPartitionRun *run = pack->run;
  size_t count = 0;
  for (size_t i = pack->first + from; i < pack->first + to; i++)
    count += (run->slot == NULL || run->slot[i] >= 0) &&
             run->lists->indices[knnwb_partition_at(run, i) * k] >= 0;
  pack->at[from / KNNWB_PARTITION_PACK_ROWS] = count;
}

static void knnwb_partition_pack_copy(size_t from, size_t to, void *data)
{
  KnnwbPartitionPack *pack = data;
  const KnnwbNeighbors *lists = pack->run->lists;
  const size_t k = pack->run->k, id = pack->layout.id, record = pack->layout.record;
  char *at = pack->out + pack->at[from / KNNWB_PARTITION_PACK_ROWS] * record;
  const int32_t *slot = pack->run->slot;
  for (size_t i = pack->first + from; i < pack->first + to; i++) {
    const size_t held = knnwb_partition_at(pack->run, i);
    if ((slot != NULL && slot[i] < 0) || lists->indices[held * k] < 0)
      continue;
    const int64_t row = (int64_t)i;
    knnwb_partition_ids_put(at, &row, 1, id);
    knnwb_partition_ids_put(at + id, lists->indices + held * k, k, id);
    memcpy(at + id + k * id, lists->distances + held * k, k * sizeof(double));
    at += record;
  }
}

/* Counts the rows of rank to's block that have a list here (none for this rank's). */
static void knnwb_partition_pack_init(KnnwbPartitionPack *pack, const KnnwbPartitionRun *run,
                                      KnnwbPartitionLayout layout, int to)
{
  size_t last;
  knnwb_partition_block_of(run->p, run->options->group, to, &pack->first, &last);
  pack->run = run;
  pack->layout = layout;
  pack->rows = last - pack->first;
  const size_t pieces = (pack->rows + KNNWB_PARTITION_PACK_ROWS - 1) / KNNWB_PARTITION_PACK_ROWS;
  pack->at = g_new0(size_t, MAX(pieces, (size_t)1));
  if (to != run->options->group->rank) /* (this rank's own pieces are merged in place) */
    knnwb_parallel_for(run->p->threads, pack->rows, KNNWB_PARTITION_PACK_ROWS,
                       knnwb_partition_pack_count, pack);
  pack->records = 0;
  for (size_t t = 0; t < pieces; t++) {
    const size_t count = pack->at[t];
    pack->at[t] = pack->records;
    pack->records += count;
  }
}

/* The records into out (room for pack->records of them). */
static void knnwb_partition_pack_fill(KnnwbPartitionPack *pack, char *out)
{
  pack->out = out;
  knnwb_parallel_for(pack->run->p->threads, pack->rows, KNNWB_PARTITION_PACK_ROWS,
                     knnwb_partition_pack_copy, pack);
}

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
    if (m->own->indices[i * k] < 0) { /* the row's first piece: straight in */
      knnwb_partition_ids_get(m->own->indices + i * k, at + id, k, id);
      memcpy(m->own->distances + i * k, at + id + k * id, k * sizeof(double));
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

/* The other ranks' records for this block (records[r], bytes[r]) merged into own, which holds
 * this rank's pieces already; the records of one rank have distinct rows, so each rank's go on all
 * threads. */
static void knnwb_partition_merge_all(const KnnwbPartitionRun *run, KnnwbPartitionLayout layout,
                                      KnnwbNeighbors *own, const char *const *records,
                                      const size_t *bytes)
{
  for (int r = 0; r < run->options->group->size; r++) {
    if (r == run->options->group->rank)
      continue;
    KnnwbPartitionRecords m = {.own = own, .records = records[r], .layout = layout, .k = run->k};
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
  if (first > 0 && run->slot == NULL) /* (rank 0's block, and a split rank's, are in place) */
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

/*
 * Through the group's shared blocks: sizes[s * R + r] bytes go from rank s to rank r; *own (NULL
 * before) becomes this block's lists once the others are packed (knnwb_partition_adopt_block).
 * *used is FALSE (on every rank alike, *own left NULL) when the group has no blocks this time.
 * FALSE: the group's errors.
 */
static gboolean knnwb_partition_combine_shared(KnnwbPartitionRun *run, KnnwbPartitionPack *packs,
                                               const size_t *sizes, KnnwbNeighbors **own,
                                               gboolean *used, gint64 *marks, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size, me = group->rank;
  size_t mine = 0;
  for (int r = 0; r < size; r++)
    mine += sizes[(size_t)me * size + r];
  void **blocks = g_steal_pointer(&run->window.blocks); /* (held since phase one) */
  g_clear_pointer(&run->window.prefault, knnwb_prefault_finish);
  if (blocks == NULL) {
    blocks = g_new0(void *, size);
    *used = group->share_begin != NULL && group->share_begin(group, mine, blocks, error);
  } else {
    *used = TRUE;
    g_assert(mine <= run->window.bytes);
  }
  if (!*used) {
    g_free(blocks);
    return error == NULL || *error == NULL;
  }
  size_t at = 0;
  for (int r = 0; r < size; r++) {
    if (r != me)
      knnwb_partition_pack_fill(&packs[r], (char *)blocks[me] + at);
    at += sizes[(size_t)me * size + r];
  }
  *own = knnwb_partition_adopt_block(run, packs[me].first, packs[me].rows);
  marks[0] = g_get_monotonic_time();
  gboolean ok = group->share_sync(group, error);
  marks[1] = g_get_monotonic_time();
  if (ok) {
    const char **records = g_new(const char *, (guint)size);
    size_t *bytes = g_new(size_t, (guint)size);
    for (int s = 0; s < size; s++) {
      size_t offset = 0;
      for (int r = 0; r < me; r++)
        offset += sizes[(size_t)s * size + r];
      records[s] = (const char *)blocks[s] + offset;
      bytes[s] = sizes[(size_t)s * size + me];
    }
    knnwb_partition_merge_all(run, packs[me].layout, *own, records, bytes);
    g_free(records);
    g_free(bytes);
  }
  const gint64 merged = g_get_monotonic_time();
  ok = group->share_end(group, ok ? error : NULL) && ok;
  /* (the release waits for every rank's merge, then gives the window's pages back) */
  g_debug("knnwb: partition: rank %d: the others' records merged in %.3f s, the shared blocks "
          "released in %.3f s",
          me, (double)(merged - marks[1]) / 1e6, (double)(g_get_monotonic_time() - merged) / 1e6);
  g_free(blocks);
  return ok;
}

/* As messages (knnwb_partition_ranks_exchange); *own as for the shared blocks. */
static gboolean knnwb_partition_combine_messages(KnnwbPartitionRun *run, KnnwbPartitionPack *packs,
                                                 KnnwbNeighbors **own, gint64 *marks,
                                                 GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const size_t record = packs[0].layout.record;
  KnnwbPartitionTransfer t;
  knnwb_partition_transfer_init(&t, group->size);
  gboolean room = TRUE;
  for (int r = 0; r < t.size; r++) {
    t.send_bytes[r] = packs[r].records * record;
    t.send[r] = g_try_malloc(MAX(t.send_bytes[r], (size_t)1));
    room = room && t.send[r] != NULL;
    if (t.send[r] != NULL && r != group->rank)
      knnwb_partition_pack_fill(&packs[r], t.send[r]);
  }
  *own = knnwb_partition_adopt_block(run, packs[group->rank].first, packs[group->rank].rows);
  marks[0] = g_get_monotonic_time();
  const gboolean ok = knnwb_partition_ranks_exchange(group, &t, room, "the lists to send", error);
  marks[1] = g_get_monotonic_time();
  if (ok)
    knnwb_partition_merge_all(run, packs[0].layout, *own, (const char *const *)t.receive,
                              t.receive_bytes);
  knnwb_partition_transfer_clear(&t);
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

gboolean knnwb_partition_ranks_window_early(KnnwbPartitionRun *run, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size, me = group->rank;
  /* (split ranks learn their visitors later: the blocks are taken at the end) */
  if (group->share_begin == NULL || run->slot != NULL)
    return TRUE;
  int64_t wide;
  if (!knnwb_partition_agree_layout(group, run->p->n, &wide, error))
    return FALSE;
  run->window.agreed = TRUE;
  run->window.wide = wide;
  const KnnwbPartitionLayout layout = knnwb_partition_layout(wide != 0, run->k);
  /* What this rank sends at most (each row of the other blocks once), and what its own groups'
   * rows there make of it already. */
  size_t first, last, owned = 0;
  knnwb_partition_block_of(run->p, group, me, &first, &last);
  for (int r = 0; r < size; r++) {
    if (r == me)
      continue;
    KnnwbPartitionPack pack;
    knnwb_partition_pack_init(&pack, run, layout, r);
    owned += pack.records;
    g_free(pack.at);
  }
  const size_t most = (run->p->n - (last - first)) * layout.record;
  void **blocks = g_new0(void *, size);
  if (!group->share_begin(group, most, blocks, error)) {
    g_free(blocks);
    return error == NULL || *error == NULL;
  }
  run->window.blocks = blocks;
  run->window.bytes = most;
  void *mine[1] = {blocks[me]};
  const size_t bytes[1] = {owned * layout.record};
  run->window.prefault = knnwb_prefault_start(mine, bytes, 1, MAX(1, run->p->threads / 2));
  return TRUE;
}

gboolean knnwb_partition_ranks_window_drop(KnnwbPartitionRun *run)
{
  g_clear_pointer(&run->window.prefault, knnwb_prefault_finish);
  if (run->window.blocks == NULL)
    return TRUE;
  g_clear_pointer(&run->window.blocks, g_free);
  return run->options->group->share_end(run->options->group, NULL);
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

gboolean knnwb_partition_ranks_combine(KnnwbPartitionRun *run, KnnwbNeighbors **result,
                                       GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size;
  const size_t n = run->p->n, k = run->k;
  /* start, counted and agreed, packed (and the block's lists made), exchanged, merged */
  gint64 marks[5] = {g_get_monotonic_time()};
  int64_t wide = run->window.wide;
  gboolean ok = run->window.agreed || knnwb_partition_agree_layout(group, n, &wide, error);
  const KnnwbPartitionLayout layout = knnwb_partition_layout(wide != 0, k);
  KnnwbPartitionPack *packs = g_new0(KnnwbPartitionPack, size);
  for (int r = 0; r < size; r++)
    knnwb_partition_pack_init(&packs[r], run, layout, r);
  size_t *sizes = g_new0(size_t, (size_t)size * size);
  const KnnwbNeighbors counters = *run->lists; /* (its counters only) */
  KnnwbNeighbors totals = {0};
  ok = ok && knnwb_partition_sizes(group, packs, layout.record, sizes, error) &&
       knnwb_partition_counters(group, &totals, &counters, error);
  marks[1] = marks[2] = marks[3] = g_get_monotonic_time();
  gboolean shared = FALSE;
  KnnwbNeighbors *own = NULL;
  ok = ok && knnwb_partition_combine_shared(run, packs, sizes, &own, &shared, marks + 2, error);
  ok = ok && (shared || knnwb_partition_combine_messages(run, packs, &own, marks + 2, error));
  for (int r = 0; r < size; r++)
    g_free(packs[r].at);
  g_free(packs);
  g_free(sizes);
  if (ok) {
    own->n_reselected = totals.n_reselected;
    own->n_exhaustive = totals.n_exhaustive;
    own->screen_used = totals.screen_used;
    knnwb_parallel_for(run->p->threads, own->n_queries, 4096, knnwb_partition_count_found, own);
    marks[4] = g_get_monotonic_time();
    g_debug("knnwb: partition: rank %d: lists of its rows combined in %.3f s through %s (counted "
            "%.3f s, packed %.3f s, exchanged %.3f s, merged %.3f s)",
            group->rank, (double)(marks[4] - marks[0]) / 1e6, shared ? "shared memory" : "messages",
            (double)(marks[1] - marks[0]) / 1e6, (double)(marks[2] - marks[1]) / 1e6,
            (double)(marks[3] - marks[2]) / 1e6, (double)(marks[4] - marks[3]) / 1e6);
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
