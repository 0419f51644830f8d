/*
 * One list file from every rank's rows: each rank formats its rows in memory with the same line
 * writers as one process, an exclusive prefix sum of the byte counts gives each rank its offset,
 * and every rank writes there into one file (write_file.c): the temporary of an output that rank 0
 * commits (renames into place) once every rank wrote, so readers see the old file or the whole
 * new one. The same for the undirected graph's edges (each rank's: those whose smaller end lies in
 * its range of rows). The NumPy outputs, binary and of fixed row size, are write_arrays.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <mpi.h>
#include <knnwb/distributed.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include "distributed_internal.h"

/* This rank's bytes: rank 0 adds the header, which needs the job's edge count. */
static gboolean knnwb_distributed_format(const KnnwbKnnGroup *group, KnnwbOutputFormat format,
                                         const KnnwbNeighbors *own, size_t n_rows,
                                         const char *const *labels,
                                         const KnnwbWriteControl *control, char **text,
                                         size_t *size, GError **error)
{
  int64_t edges = 0;
  for (size_t q = 0; q < own->n_queries; q++)
    edges += own->n_found[q];
  if (!group->reduce(group, &edges, 1, KNNWB_GROUP_SUM, error))
    return FALSE;
  FILE *stream = open_memstream(text, size);
  if (stream == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot format the lists: %s",
                g_strerror(errno));
    return FALSE;
  }
  gboolean ok;
  if (format == KNNWB_OUTPUT_KNN) {
    if (group->rank == 0)
      fprintf(stream, "%zu %" G_GINT64_FORMAT "\n", n_rows, edges);
    ok = knnwb_formats_write_knn_lines(stream, own, control, error);
  } else if (format == KNNWB_OUTPUT_MTX) {
    if (group->rank == 0)
      knnwb_formats_write_mtx_header(stream, FALSE, n_rows, (size_t)edges, labels != NULL);
    ok = knnwb_formats_write_mtx_lines(stream, own, control, error);
  } else {
    if (group->rank == 0)
      fputs(KNNWB_FORMATS_NEIGHBOR_TABLE_HEADER, stream);
    ok = knnwb_formats_write_neighbor_lists_lines(stream, own, labels, labels, control, error);
  }
  if (fclose(stream) != 0 && ok) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot format the lists: %s",
                g_strerror(errno));
    return FALSE;
  }
  return ok;
}

/* This rank's edges (undirected, the lower ends in its rows): rank 0 adds the header. */
static gboolean knnwb_distributed_format_edges(const KnnwbKnnGroup *group, KnnwbOutputFormat format,
                                               const KnnwbEdgeList *edges, size_t n_rows,
                                               const char *const *labels,
                                               const KnnwbWriteControl *control, char **text,
                                               size_t *size, GError **error)
{
  int64_t total = edges->n_edges;
  if (!group->reduce(group, &total, 1, KNNWB_GROUP_SUM, error))
    return FALSE;
  FILE *stream = open_memstream(text, size);
  if (stream == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot format the edges: %s",
                g_strerror(errno));
    return FALSE;
  }
  gboolean ok;
  if (format == KNNWB_OUTPUT_KNN) {
    if (group->rank == 0)
      fprintf(stream, "%zu %" G_GINT64_FORMAT "\n", n_rows, total);
    ok = knnwb_formats_write_knn_edge_lines(stream, edges, control, error);
  } else {
    if (group->rank == 0)
      knnwb_formats_write_mtx_header(stream, !edges->directed, n_rows, (size_t)total,
                                     labels != NULL);
    ok = knnwb_formats_write_mtx_edge_lines(stream, edges, control, error);
  }
  if (fclose(stream) != 0 && ok) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot format the edges: %s",
                g_strerror(errno));
    return FALSE;
  }
  return ok;
}

/* Each rank's text (formatted, ok or not) at its offset: the sum of the lower ranks' sizes. */
static gboolean knnwb_distributed_write_text(const KnnwbKnnGroup *group, const char *path,
                                             KnnwbOutputFormat format, gboolean ok,
                                             const char *text, size_t size, size_t n_rows,
                                             const char *const *labels,
                                             const KnnwbWriteControl *control, GError **error)
{
  g_autofree char *target = knnwb_distributed_root_path(group, path);
  /* The row labels of a Matrix Market file: rank 0 holds them all (the host gathers them for
   * every writer) and writes the side file, which the host commits with the output. */
  if (ok && format == KNNWB_OUTPUT_MTX && labels != NULL && group->rank == 0)
    ok = knnwb_formats_write_mtx_labels(target, n_rows, labels, error);
  if (!group->agree(group, ok, error))
    return FALSE;
  int64_t offset = 0, mine = (int64_t)size;
  MPI_Exscan(&mine, &offset, 1, MPI_INT64_T, MPI_SUM, knnwb_distributed_communicator());
  if (group->rank == 0)
    offset = 0; /* MPI_Exscan leaves rank 0's result undefined */
  KnnwbDistributedPiece piece = {.offset = offset, .data = text, .bytes = size};
  /* The formatting was the long part (and reported progress); the write is one piece. */
  const KnnwbWriteControl quiet = {.cancel = control->cancel};
  return knnwb_distributed_write_pieces(group, target, &piece, 1, &quiet, 0, size, error);
}

/* The caller's control, with the formatting threads of this rank: by default the host's cores
 * shared by the ranks on it (as the kNN step shares them), not every core for every rank. Progress
 * counts this rank's rows or bytes (only rank 0 prints it: its share stands for the job's). */
static KnnwbWriteControl knnwb_distributed_control(const KnnwbKnnGroup *group,
                                                   const KnnwbWriteControl *control)
{
  KnnwbWriteControl local = {0};
  if (control != NULL)
    local = *control;
  if (local.n_threads <= 0)
    local.n_threads = MAX(1, knnwb_thread_count(0) / MAX(1, group->local_size));
  return local;
}

gboolean knnwb_distributed_writes_in_place(KnnwbOutputFormat format)
{
  return format == KNNWB_OUTPUT_KNN || format == KNNWB_OUTPUT_NEIGHBORS_TSV ||
         format == KNNWB_OUTPUT_MTX || format == KNNWB_OUTPUT_NPY || format == KNNWB_OUTPUT_NPZ;
}

gboolean knnwb_distributed_write_lists(const KnnwbKnnGroup *group, const char *path,
                                       KnnwbOutputFormat format, const KnnwbNeighbors *own,
                                       size_t n_rows, const char *const *labels,
                                       const KnnwbWriteControl *control, GError **error)
{
  g_return_val_if_fail(knnwb_distributed_writes_in_place(format), FALSE);
  const KnnwbWriteControl local = knnwb_distributed_control(group, control);
  if (format == KNNWB_OUTPUT_NPY || format == KNNWB_OUTPUT_NPZ)
    return knnwb_distributed_write_arrays(group, path, format, own, n_rows, labels, &local, error);
  g_autofree char *text = NULL;
  size_t size = 0;
  gboolean ok =
      knnwb_distributed_format(group, format, own, n_rows, labels, &local, &text, &size, error);
  return knnwb_distributed_write_text(group, path, format, ok, text, size, n_rows, labels, &local,
                                      error);
}

gboolean knnwb_distributed_write_edges(const KnnwbKnnGroup *group, const char *path,
                                       KnnwbOutputFormat format, const KnnwbEdgeList *own,
                                       size_t n_rows, const char *const *labels,
                                       const KnnwbWriteControl *control, GError **error)
{
  g_return_val_if_fail(format == KNNWB_OUTPUT_KNN || format == KNNWB_OUTPUT_MTX, FALSE);
  const KnnwbWriteControl local = knnwb_distributed_control(group, control);
  g_autofree char *text = NULL;
  size_t size = 0;
  gboolean ok = knnwb_distributed_format_edges(group, format, own, n_rows, labels, &local, &text,
                                               &size, error);
  return knnwb_distributed_write_text(group, path, format, ok, text, size, n_rows, labels, &local,
                                      error);
}
