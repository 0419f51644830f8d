/* The pieces of a split-memory group run that hold and move data (knn_split_data.c): prepared
 * rows travelling between ranks, candidate lists, where each rank's block lies. The schedule that
 * uses them is knn_split.c; each function's contract is beside its definition. */
#ifndef KNNWB_KNN_SPLIT_INTERNAL_H
#define KNNWB_KNN_SPLIT_INTERNAL_H

#include "knn_internal.h"

/* The per-row arrays of a prepared set, in the order they travel (doubles first, for alignment).
 * Which ones a set has depends on the metric and the shared scale only: the same on every rank. */
enum { KNNWB_SPLIT_SEGMENTS = 7 };

typedef struct {
  size_t row_bytes[KNNWB_SPLIT_SEGMENTS]; /* 0: absent */
} KnnwbSplitLayout;

/* rows x kc candidates (global index, screen score, exact distance) in one buffer, which is also
 * what travels: indices, then distances, then scores. */
typedef struct {
  size_t rows, kc;
  char *buffer;
  gboolean borrowed; /* buffer belongs to someone else */
  int64_t *index;
  double *distance;
  float *score;
} KnnwbSplitLists;

/* Where every rank's block lies: rows [first[r], first[r] + count[r]) of n, in rank order. */
typedef struct {
  int ranks;
  size_t n, largest;
  size_t *first, *count;
} KnnwbSplitBlocks;

KnnwbSplitLayout knnwb_split_layout(KnnwbMetric metric, int scale_exponent, size_t d);
void knnwb_split_arrays(const KnnwbPrepared *p, const unsigned char *invalid, const void **arrays);
size_t knnwb_split_bytes(const KnnwbSplitLayout *layout, size_t rows);
void knnwb_split_view(const KnnwbSplitLayout *layout, const KnnwbPrepared *like, char *buffer,
                      size_t rows, KnnwbPrepared *view);
void knnwb_split_pack(const KnnwbSplitLayout *layout, const KnnwbPrepared *p,
                      const unsigned char *invalid, const int64_t *rows, size_t count, char *out);
size_t knnwb_split_lists_bytes(size_t rows, size_t kc);
gboolean knnwb_split_lists_init_in(KnnwbSplitLists *lists, size_t rows, size_t kc, char *room,
                                   GError **error);
gboolean knnwb_split_lists_init(KnnwbSplitLists *lists, size_t rows, size_t kc, GError **error);
KnnwbSplitLists knnwb_split_lists_window(const KnnwbSplitLists *lists, size_t first, size_t rows);
void knnwb_split_lists_clear(KnnwbSplitLists *lists);
void knnwb_split_merge(KnnwbSplitLists *lists, const KnnwbSplitLists *incoming, size_t at,
                       int threads);
gboolean knnwb_split_shift(const KnnwbKnnGroup *group, int to, const void *send, size_t send_bytes,
                           int from, void *receive, size_t receive_bytes, GError **error);
gboolean knnwb_split_blocks_init(const KnnwbKnnGroup *group, size_t mine, KnnwbSplitBlocks *blocks,
                                 GError **error);
void knnwb_split_blocks_clear(KnnwbSplitBlocks *blocks);
void knnwb_split_rows_of(const KnnwbSplitBlocks *blocks, int rank, size_t *first, size_t *count);
gboolean knnwb_split_fetch(const KnnwbKnnGroup *group, const KnnwbSplitLayout *layout,
                           const KnnwbPrepared *own, const unsigned char *own_invalid, int to,
                           int from, size_t rows, char *buffer, KnnwbPrepared *view,
                           GError **error);

#endif
