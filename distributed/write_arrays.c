/*
 * The NumPy outputs of the lists (.npy: indices in OUT, distances in its side file; .npz: both in
 * one stored zip) from every rank's own rows, in place: a row takes k x 8 bytes in each array (k x
 * 4 in 32-bit lists, which each rank narrows first), so rank r's rows start at first_row x k x 8
 * after the header, and each rank writes its arrays
 * there with no formatting and no copy. Rank 0 writes the NPY headers (formats' own, from the
 * job's row count) and, for .npz, the zip frame, whose CRC-32s it combines from every rank's
 * (zlib's crc32_combine: the CRC of a concatenation from the pieces' CRCs and lengths). The
 * members are stored, as one process writes them: a deflated member could not be cut into
 * pieces that ranks compress apart without changing its bytes.
 */
#include <stdint.h>
#include <string.h>
#include <knnwb/distributed.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include <knnwb/parallel.h>
#include <knnwb/write_matrix.h>
#include "distributed_internal.h"

/* Every rank's row count, and (for .npz) every rank's data CRCs, on every rank; data: this rank's
 * two arrays as written, item bytes an element. */
static gboolean knnwb_distributed_array_layout(const KnnwbKnnGroup *group,
                                               const KnnwbNeighbors *own, size_t n_rows,
                                               const void *const data[2], size_t item,
                                               gboolean with_crc, uint32_t data_crc[2],
                                               GError **error)
{
  const size_t ranks = (size_t)group->size, bytes = own->n_queries * own->k * item;
  g_autofree int64_t *rows = g_new(int64_t, ranks);
  if (!knnwb_knn_group_gather_values(group, (int64_t)own->n_queries, rows, error))
    return FALSE;
  size_t total = 0;
  for (size_t r = 0; r < ranks; r++)
    total += (size_t)rows[r];
  if (total != n_rows) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "the ranks hold %zu rows' lists, not the run's %zu", total, n_rows);
    return FALSE;
  }
  if (!with_crc)
    return TRUE;
  g_autofree int64_t *crcs = g_new(int64_t, ranks);
  for (int a = 0; a < 2; a++) {
    if (!knnwb_knn_group_gather_values(group, knnwb_formats_crc32(0, data[a], bytes), crcs, error))
      return FALSE;
    /* In rank order: the data of the array is rank 0's rows, then rank 1's, ... */
    uint32_t crc = 0;
    for (size_t r = 0; r < ranks; r++)
      crc = knnwb_formats_crc32_combine(crc, (uint32_t)crcs[r], (uint64_t)rows[r] * own->k * item);
    data_crc[a] = crc;
  }
  return TRUE;
}

typedef struct {
  const char *path;
  const KnnwbNeighbors *own;
  gboolean distances;
  void *out;
  GMutex lock;
  size_t failed_at; /* the first failing range's start (SIZE_MAX: none) */
  GError *error;
} KnnwbDistributedNarrow;

static void knnwb_distributed_narrow_range(size_t first, size_t last, void *data)
{
  KnnwbDistributedNarrow *n = data;
  const KnnwbNeighbors *own = n->own;
  const void *from = n->distances ? (const void *)own->distances : (const void *)own->indices;
  GError *error = NULL;
  if (knnwb_formats_lists_narrow(n->path, from, n->distances, first, last - first, own->k,
                                 own->first_row, (char *)n->out + first * 4, &error))
    return;
  /* the lowest failing range's message, whatever the threads' order */
  g_mutex_lock(&n->lock);
  if (first < n->failed_at) {
    g_clear_error(&n->error);
    n->error = g_steal_pointer(&error);
    n->failed_at = first;
  }
  g_mutex_unlock(&n->lock);
  g_clear_error(&error);
}

/* One array of this rank's lists in 32 bits into out, on the writer's threads (each rank holds
 * a share of the lists: 1.2 GB an array at 10M rows, k = 30 and 2 ranks). */
static gboolean knnwb_distributed_narrow(const char *path, const KnnwbNeighbors *own,
                                         gboolean distances, void *out,
                                         const KnnwbWriteControl *control, GError **error)
{
  KnnwbDistributedNarrow n = {
      .path = path, .own = own, .distances = distances, .out = out, .failed_at = SIZE_MAX};
  g_mutex_init(&n.lock);
  knnwb_parallel_for(control != NULL ? control->n_threads : 0, own->n_queries * own->k,
                     (size_t)1 << 20, knnwb_distributed_narrow_range, &n);
  g_mutex_clear(&n.lock);
  if (n.error == NULL)
    return TRUE;
  g_propagate_error(error, n.error);
  return FALSE;
}

gboolean knnwb_distributed_write_arrays(const KnnwbKnnGroup *group, const char *path,
                                        KnnwbOutputFormat format, const KnnwbNeighbors *own,
                                        size_t n_rows, const char *const *labels,
                                        const KnnwbWriteControl *control, GError **error)
{
  if (group->rank != 0)
    labels = NULL; /* rank 0 writes the labels, as it writes the headers */
  const size_t item = control != NULL && control->lists_dtype == KNNWB_LISTS_DTYPE_32 ? 4 : 8;
  const size_t k = own->k, bytes = own->n_queries * k * item;
  const int64_t row_offset = (int64_t)(own->first_row * k * item);
  const void *data[2] = {own->indices, own->distances};
  g_autofree char *target = knnwb_distributed_root_path(group, path);
  /* 32-bit elements: this rank's rows narrowed once (half their bytes), then written as they are */
  g_autofree void *narrow = item == 4 ? g_try_malloc(MAX(2 * bytes, (size_t)1)) : NULL;
  gboolean ok = item == 8 || narrow != NULL;
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "%s: no memory for the 32-bit lists",
                target);
  /* the distances' file: OUT's side file for .npy, the archive for .npz (messages name it) */
  g_autofree char *distances_path = format == KNNWB_OUTPUT_NPY
                                        ? knnwb_formats_side_path(target, KNNWB_OUTPUT_NPY)
                                        : g_strdup(target);
  for (int a = 0; ok && item == 4 && a < 2; a++) {
    void *to = (char *)narrow + (size_t)a * bytes;
    ok =
        knnwb_distributed_narrow(a == 1 ? distances_path : target, own, a == 1, to, control, error);
    data[a] = to;
  }
  /* (collective: a rank whose rows do not fit 32 bits stops every rank here) */
  if (item == 4 && !group->agree(group, ok, error))
    return FALSE;
  uint32_t data_crc[2] = {0, 0};
  const gint64 entered = g_get_monotonic_time();
  ok = knnwb_distributed_array_layout(group, own, n_rows, data, item, format == KNNWB_OUTPUT_NPZ,
                                      data_crc, error);
  if (!group->agree(group, ok, error))
    return FALSE;
  /* the first collective of the write: a rank that finished its lists early waits here */
  g_debug("distributed write: every rank's lists ready after %.3f s",
          (double)(g_get_monotonic_time() - entered) / 1e6);

  if (format == KNNWB_OUTPUT_NPY) {
    /* Two files, OUT and its side file of distances (distances_path), each written by every rank.
     */
    /* The labels side file (OUT.labels.txt), whole, by rank 0. */
    g_autofree char *labels_path = labels ? knnwb_formats_npy_labels_path(target) : NULL;
    ok = labels == NULL || knnwb_formats_write_labels_lines(labels_path, labels, n_rows, error);
    if (!group->agree(group, ok, error))
      return FALSE;
    /* Both at once (write_file.c): the two files' disk writes overlap, as one process's do. */
    g_autoptr(GString) indices_header =
        knnwb_formats_npy_header(item == 4 ? "i4" : "i8", n_rows, k);
    g_autoptr(GString) distances_header =
        knnwb_formats_npy_header(item == 4 ? "f4" : "f8", n_rows, k);
    const GString *headers[2] = {indices_header, distances_header};
    KnnwbDistributedPiece pieces[2][2];
    KnnwbDistributedFile files[2];
    for (int a = 0; a < 2; a++) {
      pieces[a][0] = (KnnwbDistributedPiece){
          .offset = (int64_t)headers[a]->len + row_offset, .data = data[a], .bytes = bytes};
      pieces[a][1] =
          (KnnwbDistributedPiece){.offset = 0, .data = headers[a]->str, .bytes = headers[a]->len};
      files[a] = (KnnwbDistributedFile){.path = a == 0 ? target : distances_path,
                                        .pieces = pieces[a],
                                        .n_pieces = group->rank == 0 ? 2 : 1};
    }
    /* Progress: this rank's bytes of both arrays (rank 0's line stands for the job). */
    return knnwb_distributed_write_files(group, files, 2, control, 0, 2 * (uint64_t)bytes, error);
  }

  /* .npz: head, indices, middle, distances, tail. Every rank builds the frame for its lengths;
   * only rank 0's carries the combined CRCs, and only rank 0 writes it. */
  GString *parts[3] = {NULL, NULL, NULL};
  /* Rank 0's labels member goes at the end (parts[2]): no other rank's offset depends on it. */
  g_autoptr(GString) labels_array =
      knnwb_formats_npy_labels_array(target, labels, n_rows, &ok, error);
  ok = ok && knnwb_formats_npz_lists_frame_labelled(target, n_rows, k, item, data_crc, labels_array,
                                                    parts, error);
  if (!group->agree(group, ok, error))
    return FALSE;
  const int64_t array_bytes = (int64_t)(n_rows * k * item);
  const int64_t head = (int64_t)parts[0]->len, middle = (int64_t)parts[1]->len;
  KnnwbDistributedPiece pieces[5] = {
      {.offset = head + row_offset, .data = data[0], .bytes = bytes},
      {.offset = head + array_bytes + middle + row_offset, .data = data[1], .bytes = bytes},
      {.offset = 0, .data = parts[0]->str, .bytes = parts[0]->len},
      {.offset = head + array_bytes, .data = parts[1]->str, .bytes = parts[1]->len},
      {.offset = head + array_bytes + middle + array_bytes,
       .data = parts[2]->str,
       .bytes = parts[2]->len}};
  ok = knnwb_distributed_write_pieces(group, target, pieces, group->rank == 0 ? 5 : 2, control, 0,
                                      2 * (uint64_t)bytes, error);
  for (int i = 0; i < 3; i++)
    g_string_free(parts[i], TRUE);
  return ok;
}
