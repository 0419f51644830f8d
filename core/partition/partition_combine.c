/*
 * The end of a partitioned run over a group's ranks (partition_ranks.c). Each rank holds lists for
 * the rows of the groups it searched (their own lists) and pieces for the rows that visited the
 * groups it searched after; every pair of rows was scored on exactly one rank, so the pieces of a
 * row, merged by (distance, row) on the rank of its block, make its list of one process.
 *
 * The pieces travel as records (row, k indices, k distances). Where the ranks share a host the
 * group lends blocks of shared memory: each rank packs its records once into its block and the
 * others merge them in place. Otherwise they go as messages. The blocks are lent as phase one ends
 * (knnwb_partition_ranks_window_early), for the most a rank can send, and the records of its own
 * groups' rows, final but for the visits this rank searches, are packed there on a helper thread
 * while it bounds (section A of its block, one part for each other rank); the combining packs the
 * visitors' pieces after them (section B), and packs again only the pieces of section A whose rows
 * this rank's visits changed. First touches of the fresh pages were most of the packing (0.33-0.43
 * s of a 0.57-0.61 s combining at 10M rows, k = 30, two ranks of one H200), the copies the rest.
 * At 10M rows and k = 30 the lists are 4.8 GB, of which a share of (R - 1) / R changes rank, so
 * every step runs on all the rank's threads.
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
#define KNNWB_PARTITION_PACK_DEFAULT ((size_t)65536)

/* KNNWB_PARTITION_PACK_ROWS: the pieces' rows (tests: pieces of a few rows in small runs, so
 * that a chunk of the threads' loop holds several); else 65,536. Read once. */
static size_t knnwb_partition_pack_rows(void)
{
  static gsize rows = 0;
  if (g_once_init_enter(&rows)) {
    const char *v = g_getenv("KNNWB_PARTITION_PACK_ROWS");
    const long long given = v != NULL ? g_ascii_strtoll(v, NULL, 10) : 0;
    g_once_init_leave(&rows, given >= 1 ? (gsize)given : KNNWB_PARTITION_PACK_DEFAULT);
  }
  return rows;
}
#define KNNWB_PARTITION_PACK_ROWS (knnwb_partition_pack_rows())

/* Which rows of a block a pack takes: every row with a list here; the rows of this rank's groups
 * (run->mine), listed or not (an empty record merges as nothing); the other rows with a list
 * here, the pieces of the visits this rank searched. */
typedef enum {
  KNNWB_PARTITION_TAKE_LISTED,
  KNNWB_PARTITION_TAKE_OWN,
  KNNWB_PARTITION_TAKE_VISITED
} KnnwbPartitionTake;

/* The records for one rank's block. */
typedef struct {
  const KnnwbPartitionRun *run;
  KnnwbPartitionLayout layout;
  KnnwbPartitionTake take;
  size_t first, rows; /* the block */
  size_t *at;         /* per piece: its rows taken, then its first record */
  guint8 *dirty;      /* per piece, for TAKE_OWN: a visit here changed a row since it was packed */
  size_t records;
  char *out;
} KnnwbPartitionPack;

static gboolean knnwb_partition_pack_takes(const KnnwbPartitionPack *pack, size_t i)
{
  const KnnwbPartitionRun *run = pack->run;
  switch (pack->take) {
  case KNNWB_PARTITION_TAKE_OWN:
    return run->mine[i] != 0;
  case KNNWB_PARTITION_TAKE_VISITED:
    return !run->mine[i] && run->lists->indices[i * run->k] >= 0;
  default:
    return run->lists->indices[i * run->k] >= 0;
  }
}

/* Rows [from, to) of the block, whole pieces of KNNWB_PARTITION_PACK_ROWS (a chunk of the
 * threads' loop may hold several): each piece's count. */
static void knnwb_partition_pack_count(size_t from, size_t to, void *data)
{
  KnnwbPartitionPack *pack = data;
  for (size_t piece = from; piece < to; piece += KNNWB_PARTITION_PACK_ROWS) {
    size_t count = 0;
    for (size_t i = pack->first + piece;
         i < pack->first + MIN(to, piece + KNNWB_PARTITION_PACK_ROWS); i++)
      count += knnwb_partition_pack_takes(pack, i);
    pack->at[piece / KNNWB_PARTITION_PACK_ROWS] = count;
  }
}

/* The records of rows [from, to) of the block, whole pieces, each at its piece's place. */
static void knnwb_partition_pack_copy(size_t from, size_t to, void *data)
{
  KnnwbPartitionPack *pack = data;
  const KnnwbNeighbors *lists = pack->run->lists;
  const size_t k = pack->run->k, id = pack->layout.id, record = pack->layout.record;
  for (size_t piece = from; piece < to; piece += KNNWB_PARTITION_PACK_ROWS) {
    char *at = pack->out + pack->at[piece / KNNWB_PARTITION_PACK_ROWS] * record;
    for (size_t i = pack->first + piece;
         i < pack->first + MIN(to, piece + KNNWB_PARTITION_PACK_ROWS); i++) {
      if (!knnwb_partition_pack_takes(pack, i))
        continue;
      const int64_t row = (int64_t)i;
      knnwb_partition_ids_put(at, &row, 1, id);
      knnwb_partition_ids_put(at + id, lists->indices + i * k, k, id);
      memcpy(at + id + k * id, lists->distances + i * k, k * sizeof(double));
      at += record;
    }
  }
}

/* Counts the rows of rank to's block that the pack takes (none for this rank's), on threads. */
static void knnwb_partition_pack_init(KnnwbPartitionPack *pack, const KnnwbPartitionRun *run,
                                      KnnwbPartitionLayout layout, int to, KnnwbPartitionTake take)
{
  size_t last;
  knnwb_knn_group_rows(run->p->n, to, run->options->group->size, &pack->first, &last);
  pack->run = run;
  pack->layout = layout;
  pack->take = take;
  pack->dirty = NULL;
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

/* The records into out (room for pack->records of them), on threads. */
static void knnwb_partition_pack_fill(KnnwbPartitionPack *pack, char *out, int threads)
{
  pack->out = out;
  knnwb_parallel_for(threads, pack->rows, KNNWB_PARTITION_PACK_ROWS, knnwb_partition_pack_copy,
                     pack);
}

static void knnwb_partition_packs_free(KnnwbPartitionPack *packs, int size)
{
  for (int r = 0; packs != NULL && r < size; r++) {
    g_free(packs[r].at);
    g_free(packs[r].dirty);
  }
  g_free(packs);
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

/* What this rank's block in the shared window holds: for every rank r, section A's records
 * (sections[0][r]) one after another, then section B's (sections[1][r]). */
typedef struct {
  KnnwbPartitionPack *sections[2];
  const size_t *sizes[2]; /* sizes[x][s * R + r]: section x's bytes from rank s to rank r */
} KnnwbPartitionBlockLayout;

/* Where in rank s's block section x's records for rank r begin. */
static size_t knnwb_partition_block_offset(const KnnwbPartitionBlockLayout *b, int size, int s,
                                           int x, int r)
{
  size_t offset = 0;
  for (int t = 0; t < (x == 0 ? r : size); t++)
    offset += b->sizes[0][(size_t)s * size + t];
  for (int t = 0; x == 1 && t < r; t++)
    offset += b->sizes[1][(size_t)s * size + t];
  return offset;
}

/* Every other rank's records for this block, both sections, merged into own. */
static void knnwb_partition_merge_block(const KnnwbPartitionRun *run,
                                        const KnnwbPartitionBlockLayout *b, KnnwbNeighbors *own,
                                        void *const *blocks)
{
  const int size = run->options->group->size, me = run->options->group->rank;
  const char **records = g_new(const char *, (guint)size);
  size_t *bytes = g_new(size_t, (guint)size);
  for (int x = 0; x < 2; x++) {
    for (int s = 0; s < size; s++) {
      records[s] = (const char *)blocks[s] + knnwb_partition_block_offset(b, size, s, x, me);
      bytes[s] = b->sizes[x][(size_t)s * size + me];
    }
    knnwb_partition_merge_all(run, b->sections[0][0].layout, own, records, bytes);
  }
  g_free(records);
  g_free(bytes);
}

/*
 * Through the group's shared blocks (held since phase one, or taken now): section A as packed
 * early (or packed now: every listed row), section B packed now after it; *own (NULL before)
 * becomes this block's lists once the others are packed (knnwb_partition_adopt_block). *used is
 * FALSE (on every rank alike, *own left NULL) when the group has no blocks this time. FALSE: the
 * group's errors.
 */
static gboolean knnwb_partition_combine_shared(KnnwbPartitionRun *run,
                                               const KnnwbPartitionBlockLayout *b, gboolean early,
                                               KnnwbNeighbors **own, gboolean *used, gint64 *marks,
                                               GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size, me = group->rank;
  size_t mine = 0;
  for (int r = 0; r < size; r++)
    mine += b->sizes[0][(size_t)me * size + r] + b->sizes[1][(size_t)me * size + r];
  void **blocks = g_steal_pointer(&run->window.blocks); /* (held since phase one) */
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
  for (int x = early ? 1 : 0; x < 2; x++)
    for (int r = 0; r < size; r++)
      if (r != me)
        knnwb_partition_pack_fill(
            &b->sections[x][r],
            (char *)blocks[me] + knnwb_partition_block_offset(b, size, me, x, r), run->p->threads);
  *own = knnwb_partition_adopt_block(run, b->sections[0][me].first, b->sections[0][me].rows);
  marks[0] = g_get_monotonic_time();
  gboolean ok = group->share_sync(group, error);
  marks[1] = g_get_monotonic_time();
  if (ok)
    knnwb_partition_merge_block(run, b, *own, blocks);
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
      knnwb_partition_pack_fill(&packs[r], t.send[r], run->p->threads);
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

/* The packing of this rank's groups' rows into its block, begun as phase one ends. */
struct KnnwbPartitionEarly {
  KnnwbPartitionRun *run;
  KnnwbPartitionPack *packs; /* section A: for each rank, the rows of this rank's groups */
  char *out;                 /* this rank's block */
  int threads;
  GThread *thread; /* the packing, until joined */
  gint64 began, ended;
};

static void knnwb_partition_early_fill(KnnwbPartitionEarly *early)
{
  const int size = early->run->options->group->size, me = early->run->options->group->rank;
  size_t at = 0;
  for (int r = 0; r < size; r++) {
    if (r != me)
      knnwb_partition_pack_fill(&early->packs[r], early->out + at, early->threads);
    at += early->packs[r].records * early->packs[r].layout.record;
  }
  early->ended = g_get_monotonic_time();
}

static gpointer knnwb_partition_early_body(gpointer data)
{
  knnwb_partition_early_fill(data);
  return NULL;
}

/* The early packing finished (joined); the time waited for it, in s. */
static double knnwb_partition_early_join(KnnwbPartitionEarly *early)
{
  const gint64 start = g_get_monotonic_time();
  if (early != NULL && early->thread != NULL)
    g_thread_join(g_steal_pointer(&early->thread));
  return (double)(g_get_monotonic_time() - start) / 1e6;
}

static void knnwb_partition_early_free(KnnwbPartitionEarly *early)
{
  knnwb_partition_early_join(early);
  knnwb_partition_packs_free(early->packs, early->run->options->group->size);
  g_free(early);
}

gboolean knnwb_partition_ranks_window_early(KnnwbPartitionRun *run, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size, me = group->rank;
  if (group->share_begin == NULL)
    return TRUE;
  int64_t wide;
  if (!knnwb_partition_agree_layout(group, run->p->n, &wide, error))
    return FALSE;
  run->window.agreed = TRUE;
  run->window.wide = wide;
  const KnnwbPartitionLayout layout = knnwb_partition_layout(wide != 0, run->k);
  /* What this rank sends at most: each row of the other blocks once. */
  size_t first, last;
  knnwb_knn_group_rows(run->p->n, me, size, &first, &last);
  const size_t most = (run->p->n - (last - first)) * layout.record;
  void **blocks = g_new0(void *, size);
  if (!group->share_begin(group, most, blocks, error)) {
    g_free(blocks);
    return error == NULL || *error == NULL;
  }
  run->window.blocks = blocks;
  run->window.bytes = most;
  /* Section A: the rows of this rank's groups (run->mine, set beside phase one), packed on a
   * helper thread while the rank bounds; joined before the visits change any of them. */
  KnnwbPartitionEarly *early = g_new0(KnnwbPartitionEarly, 1);
  early->run = run;
  early->packs = g_new0(KnnwbPartitionPack, size);
  for (int r = 0; r < size; r++)
    knnwb_partition_pack_init(&early->packs[r], run, layout, r, KNNWB_PARTITION_TAKE_OWN);
  early->out = blocks[me];
  early->threads = MAX(1, run->p->threads / 2);
  early->began = g_get_monotonic_time();
  early->thread = knnwb_thread_try_start("knnwb-pack", knnwb_partition_early_body, early);
  if (early->thread == NULL) { /* (no thread: packed here) */
    early->threads = run->p->threads;
    knnwb_partition_early_fill(early);
  }
  run->window.early = early;
  return TRUE;
}

void knnwb_partition_ranks_window_wait(KnnwbPartitionRun *run)
{
  if (run->window.early == NULL)
    return;
  const double waited = knnwb_partition_early_join(run->window.early);
  g_debug("knnwb: partition: rank %d: its groups' rows packed for the other ranks in %.3f s beside "
          "the bounds, then waited %.3f s for them",
          run->options->group->rank,
          (double)(run->window.early->ended - run->window.early->began) / 1e6, waited);
}

gboolean knnwb_partition_ranks_window_drop(KnnwbPartitionRun *run)
{
  g_clear_pointer(&run->window.early, knnwb_partition_early_free);
  if (run->window.blocks == NULL)
    return TRUE;
  g_clear_pointer(&run->window.blocks, g_free);
  return run->options->group->share_end(run->options->group, NULL);
}

typedef struct {
  KnnwbPartitionPack *pack;
  size_t pieces;
} KnnwbPartitionRepack;

static void knnwb_partition_repack_pieces(size_t first, size_t last, void *data)
{
  const KnnwbPartitionRepack *r = data;
  for (size_t t = first; t < last; t++)
    if (r->pack->dirty[t])
      knnwb_partition_pack_copy(t * KNNWB_PARTITION_PACK_ROWS,
                                MIN((t + 1) * KNNWB_PARTITION_PACK_ROWS, r->pack->rows), r->pack);
}

/* Section A's pieces whose rows of this rank's groups the visits this rank searched changed
 * (run->queries), packed again in place; *rows: how many such rows. */
static void knnwb_partition_repack_visited(KnnwbPartitionRun *run, KnnwbPartitionPack *packs,
                                           size_t *rows)
{
  const int size = run->options->group->size, me = run->options->group->rank;
  const size_t total = run->query_start != NULL ? (size_t)run->query_start[run->p->groups] : 0;
  *rows = 0;
  for (int r = 0; r < size; r++) {
    const size_t pieces =
        (packs[r].rows + KNNWB_PARTITION_PACK_ROWS - 1) / KNNWB_PARTITION_PACK_ROWS;
    packs[r].dirty = g_new0(guint8, MAX(pieces, (size_t)1));
  }
  for (size_t t = 0; t < total; t++) {
    const size_t i = (size_t)run->queries[t];
    if (!run->mine[i])
      continue;
    int r = 0;
    while (r + 1 < size && i >= packs[r + 1].first)
      r++;
    if (r != me) {
      packs[r].dirty[(i - packs[r].first) / KNNWB_PARTITION_PACK_ROWS] = 1;
      (*rows)++;
    }
  }
  for (int r = 0; r < size; r++) {
    KnnwbPartitionRepack repack = {&packs[r], (packs[r].rows + KNNWB_PARTITION_PACK_ROWS - 1) /
                                                  KNNWB_PARTITION_PACK_ROWS};
    if (r != me && *rows > 0)
      knnwb_parallel_for(run->p->threads, repack.pieces, 1, knnwb_partition_repack_pieces, &repack);
  }
}

gboolean knnwb_partition_ranks_combine(KnnwbPartitionRun *run, KnnwbNeighbors **result,
                                       GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size;
  const size_t n = run->p->n;
  /* start, counted and agreed, packed (and the block's lists made), exchanged, merged */
  gint64 marks[5] = {g_get_monotonic_time()};
  int64_t wide = run->window.wide;
  gboolean ok = run->window.agreed || knnwb_partition_agree_layout(group, n, &wide, error);
  const KnnwbPartitionLayout layout = knnwb_partition_layout(wide != 0, run->k);
  /* Section A packed early where the blocks are held (its changed pieces packed again), section
   * B the visited rows; else section A is every listed row and B is empty. */
  KnnwbPartitionEarly *early = g_steal_pointer(&run->window.early);
  const gboolean prepacked = early != NULL;
  knnwb_partition_early_join(early);
  KnnwbPartitionPack *sections[2] = {early != NULL ? g_steal_pointer(&early->packs)
                                                   : g_new0(KnnwbPartitionPack, size),
                                     g_new0(KnnwbPartitionPack, size)};
  size_t changed = 0;
  if (early != NULL)
    knnwb_partition_repack_visited(run, sections[0], &changed);
  for (int r = 0; r < size; r++) {
    if (early == NULL)
      knnwb_partition_pack_init(&sections[0][r], run, layout, r, KNNWB_PARTITION_TAKE_LISTED);
    if (early != NULL)
      knnwb_partition_pack_init(&sections[1][r], run, layout, r, KNNWB_PARTITION_TAKE_VISITED);
    else
      sections[1][r] = (KnnwbPartitionPack){.run = run, .layout = layout};
  }
  g_clear_pointer(&early, knnwb_partition_early_free);
  size_t *sizes[2] = {g_new0(size_t, (size_t)size * size), g_new0(size_t, (size_t)size * size)};
  const KnnwbNeighbors counters = *run->lists; /* (its counters only) */
  KnnwbNeighbors totals = {0};
  ok = ok && knnwb_partition_sizes(group, sections[0], layout.record, sizes[0], error) &&
       knnwb_partition_sizes(group, sections[1], layout.record, sizes[1], error) &&
       knnwb_partition_counters(group, &totals, &counters, error);
  marks[1] = marks[2] = marks[3] = g_get_monotonic_time();
  gboolean shared = FALSE;
  KnnwbNeighbors *own = NULL;
  const KnnwbPartitionBlockLayout block = {{sections[0], sections[1]}, {sizes[0], sizes[1]}};
  ok =
      ok && knnwb_partition_combine_shared(run, &block, prepacked, &own, &shared, marks + 2, error);
  /* (messages only where no blocks were held: section B is empty then) */
  ok = ok && (shared || knnwb_partition_combine_messages(run, sections[0], &own, marks + 2, error));
  for (int x = 0; x < 2; x++) {
    knnwb_partition_packs_free(sections[x], size);
    g_free(sizes[x]);
  }
  if (ok) {
    own->n_reselected = totals.n_reselected;
    own->n_exhaustive = totals.n_exhaustive;
    own->screen_used = totals.screen_used;
    knnwb_parallel_for(run->p->threads, own->n_queries, 4096, knnwb_partition_count_found, own);
    marks[4] = g_get_monotonic_time();
    g_debug("knnwb: partition: rank %d: lists of its rows combined in %.3f s through %s (counted "
            "%.3f s, packed %.3f s, exchanged %.3f s, merged %.3f s; %zu of its groups' rows "
            "changed by its visits after they were packed)",
            group->rank, (double)(marks[4] - marks[0]) / 1e6, shared ? "shared memory" : "messages",
            (double)(marks[1] - marks[0]) / 1e6, (double)(marks[2] - marks[1]) / 1e6,
            (double)(marks[3] - marks[2]) / 1e6, (double)(marks[4] - marks[3]) / 1e6, changed);
    if (!run->options->group_own_rows) {
      KnnwbNeighbors *all = knnwb_knn_group_gather(group, own, n, error);
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
