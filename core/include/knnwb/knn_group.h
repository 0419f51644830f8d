/*
 * A group of processes that compute one kNN run together (MPI ranks, for instance), seen by the
 * core only through these plain C operations: the core stays free of any message-passing library.
 * The `distributed/` module implements them with MPI; tests may implement them with anything.
 */
#ifndef KNNWB_KNN_GROUP_H
#define KNNWB_KNN_GROUP_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>
#include <knnwb/matrix.h>

G_BEGIN_DECLS

typedef enum { KNNWB_GROUP_MIN, KNNWB_GROUP_MAX, KNNWB_GROUP_SUM } KnnwbGroupReduction;

/**
 * The ranks of one job. Every operation is collective: every rank calls it, in the same order, with
 * matching sizes. Each returns FALSE with error set when the transport fails (the job cannot go
 * on). A rank that fails in its own computation must still reach the next agree() so that the
 * others learn it and stop too.
 */
typedef struct KnnwbKnnGroup KnnwbKnnGroup;
struct KnnwbKnnGroup {
  int rank;       /**< 0 <= rank < size */
  int size;       /**< number of ranks; 1 means no distribution */
  int local_size; /**< ranks on this host (shares its cores and GPUs), >= 1 */
  int local_rank; /**< this rank among those of its host, 0 <= local_rank < local_size */
  /**
   * Every rank passes ok (and, when !ok, its error). Returns TRUE when every rank was ok.
   * Otherwise returns FALSE on every rank, with *error replaced by the error of the lowest failing
   * rank, its message prefixed "rank R: " (domain and code kept, so a cancellation stays one).
   */
  gboolean (*agree)(const KnnwbKnnGroup *group, gboolean ok, GError **error);
  /**
   * All-to-all: send[r] (send_bytes[r] bytes) goes to rank r, receive[r] (receive_bytes[r] bytes)
   * comes from rank r. The sizes must match pairwise. Buffers of size 0 may be NULL.
   */
  gboolean (*exchange)(const KnnwbKnnGroup *group, const void *const *send,
                       const size_t *send_bytes, void *const *receive, const size_t *receive_bytes,
                       GError **error);
  /** Element-wise reduction of count values over all ranks, result on every rank (in place). */
  gboolean (*reduce)(const KnnwbKnnGroup *group, int64_t *values, size_t count,
                     KnnwbGroupReduction reduction, GError **error);
  /**
   * Optional (NULL when the ranks cannot share memory): blocks every rank can read, for exchanges
   * without a copy. Collective: each rank asks for bytes of its own (0 too). TRUE (on every rank
   * alike): blocks[r] is rank r's block; a rank writes only its own, calls share_sync, may then
   * read every block, and may write its own again after a further share_sync (every rank's reads
   * before it are done: the rounds of partition_combine.c), and calls share_end when done (also
   * without share_sync, on every rank alike, when the blocks go unused). FALSE with *error unset
   * (on every rank alike): no blocks this time (too small to be worth it, no room); use exchange.
   * FALSE with *error set: the transport failed.
   */
  gboolean (*share_begin)(const KnnwbKnnGroup *group, size_t bytes, void **blocks, GError **error);
  /** Collective: every rank's writes to its block are seen by all once it returns. */
  gboolean (*share_sync)(const KnnwbKnnGroup *group, GError **error);
  /** Collective: nobody reads the blocks any more (they may be freed). */
  gboolean (*share_end)(const KnnwbKnnGroup *group, GError **error);
  /**
   * Optional (NULL when the ranks cannot share memory): a board of n floats a rank, for values
   * that only ever go down (upper bounds), which each rank posts and reads without waiting for
   * the others. board_open is collective: TRUE (on every rank alike) with every rank's entries
   * +inf; FALSE with *error unset (on every rank alike): no board this time (use reduce); FALSE
   * with *error set: the transport failed. One board at a time.
   */
  gboolean (*board_open)(const KnnwbKnnGroup *group, size_t n, GError **error);
  /**
   * Not collective, never waits: values[i] (this rank's, none above what it posted before) is
   * posted as this rank's entry i, then replaced by the lowest entry i any rank has posted so far.
   * Another rank's entries written meanwhile are seen old or new, each whole. Returns how many
   * values went down. O(n x size).
   */
  size_t (*board_lower)(const KnnwbKnnGroup *group, float *values, size_t n);
  /** Collective: the board is given back once no rank reads it any more. */
  gboolean (*board_close)(const KnnwbKnnGroup *group, GError **error);
  void *data; /**< the implementation's */
};

/** Every rank's value, in rank order, into values (group->size entries) on every rank: the
 * layout of blocks of any sizes, say. Collective. Errors: the group's. */
gboolean knnwb_knn_group_gather_values(const KnnwbKnnGroup *group, int64_t value, int64_t *values,
                                       GError **error);

/** Every rank's block of bytes, one after another in rank order, into all on every rank: rank r
 * sends bytes[r] (known to every rank, e.g. from knnwb_knn_group_gather_values) from mine, and all
 * holds their sum. Collective. Errors: the group's. O(sum of bytes). */
gboolean knnwb_knn_group_gather_bytes(const KnnwbKnnGroup *group, const void *mine,
                                      const size_t *bytes, void *all, GError **error);

/** Every rank's block of bytes of its own length (length bytes from mine here: packed strings,
 * say), one after another in rank order, into a new buffer *all (g_free it) of *total bytes on
 * every rank. The ranks agree on the buffer's memory: where one cannot allocate it, every rank
 * fails with KNNWB_ERROR_NO_MEMORY ("cannot allocate the N bytes of every rank's WHAT").
 * Collective. Errors: that, the group's. O(total). */
gboolean knnwb_knn_group_gather_packed(const KnnwbKnnGroup *group, const void *mine, size_t length,
                                       const char *what, char **all, size_t *total, GError **error);

/** Every rank's block of rows (sizes[r] rows from rank r, in rank order, known to every rank,
 * as knnwb_knn_group_gather_values gives them) put together into one matrix on every rank: the
 * values, and the ranks as read where the blocks carry them (no labels). Collective. NULL with
 * error on every rank alike: KNNWB_ERROR_NO_MEMORY from the lowest rank that could not allocate
 * the matrix ("rank R: ..."), the group's errors. O(n d) time and memory. */
KnnwbMatrix *knnwb_knn_group_gather_rows(const KnnwbKnnGroup *group, const KnnwbMatrix *block,
                                         const int64_t *sizes, GError **error);

/** The rows [*first, *last) that rank owns when n rows are cut into size contiguous shares. */
void knnwb_knn_group_rows(size_t n, int rank, int size, size_t *first, size_t *last);

G_END_DECLS

#endif
