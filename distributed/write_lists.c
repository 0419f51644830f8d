/*
 * One list file from every rank's rows: each rank formats its rows in memory with the same line
 * writers as one process, an exclusive prefix sum of the byte counts gives each rank its offset,
 * and every rank writes there into one file (MPI-IO): the temporary of an output that rank 0
 * commits (renames into place) once every rank wrote, so readers see the old file or the whole
 * new one.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <mpi.h>
#include <knnwb/distributed.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include "distributed_internal.h"

#define KNNWB_WRITE_PIECE ((size_t)1 << 30)

static void knnwb_distributed_io_error(int code, const char *what, const char *path, GError **error)
{
  char text[MPI_MAX_ERROR_STRING] = "";
  int length = 0;
  MPI_Error_string(code, text, &length);
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot %s: %s", path, what, text);
}

/* This rank's bytes: rank 0 adds the header, which needs the job's edge count. */
static gboolean knnwb_distributed_format(const KnnwbKnnGroup *group, KnnwbDistributedLists table,
                                         const KnnwbNeighbors *own, size_t n_rows,
                                         const char *const *labels, char **text, size_t *size,
                                         GError **error)
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
  if (table == KNNWB_DISTRIBUTED_LISTS_KNN) {
    if (group->rank == 0)
      fprintf(stream, "%zu %" G_GINT64_FORMAT "\n", n_rows, edges);
    ok = knnwb_formats_write_knn_lines(stream, own, error);
  } else {
    if (group->rank == 0)
      fputs(KNNWB_FORMATS_NEIGHBOR_TABLE_HEADER, stream);
    ok = knnwb_formats_write_neighbor_lists_lines(stream, own, labels, labels, error);
  }
  if (fclose(stream) != 0 && ok) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot format the lists: %s",
                g_strerror(errno));
    return FALSE;
  }
  return ok;
}

gboolean knnwb_distributed_write_lists(const KnnwbKnnGroup *group, const char *path,
                                       KnnwbDistributedLists table, const KnnwbNeighbors *own,
                                       size_t n_rows, const char *const *labels, GError **error)
{
  MPI_Comm comm = knnwb_distributed_communicator();
  g_autofree char *text = NULL;
  size_t size = 0;
  gboolean ok = knnwb_distributed_format(group, table, own, n_rows, labels, &text, &size, error);
  if (!group->agree(group, ok, error))
    return FALSE;

  /* Rank 0's path for all, and each rank's offset. */
  int length = group->rank == 0 ? (int)strlen(path) + 1 : 0;
  MPI_Bcast(&length, 1, MPI_INT, 0, comm);
  g_autofree char *target = g_malloc0((size_t)length + 1);
  if (group->rank == 0)
    memcpy(target, path, (size_t)length);
  MPI_Bcast(target, length, MPI_CHAR, 0, comm);
  int64_t offset = 0, mine = (int64_t)size;
  MPI_Exscan(&mine, &offset, 1, MPI_INT64_T, MPI_SUM, comm);
  if (group->rank == 0)
    offset = 0; /* MPI_Exscan leaves rank 0's result undefined */

  MPI_File file;
  int code = MPI_File_open(comm, target, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &file);
  if (code != MPI_SUCCESS) {
    /* MPI_File_open is collective and fails on every rank alike. */
    knnwb_distributed_io_error(code, "open for writing", target, error);
    return group->agree(group, FALSE, error);
  }
  if ((code = MPI_File_set_size(file, 0)) != MPI_SUCCESS) {
    knnwb_distributed_io_error(code, "truncate", target, error);
    ok = FALSE;
  }
  for (size_t at = 0; ok && at < size; at += KNNWB_WRITE_PIECE) {
    int count = (int)MIN(KNNWB_WRITE_PIECE, size - at);
    MPI_Status status;
    code = MPI_File_write_at(file, (MPI_Offset)((size_t)offset + at), text + at, count, MPI_BYTE,
                             &status);
    if (code != MPI_SUCCESS) {
      knnwb_distributed_io_error(code, "write", target, error);
      ok = FALSE;
    }
  }
  if (ok && (code = MPI_File_sync(file)) != MPI_SUCCESS) {
    knnwb_distributed_io_error(code, "write", target, error);
    ok = FALSE;
  }
  code = MPI_File_close(&file);
  if (ok && code != MPI_SUCCESS) {
    knnwb_distributed_io_error(code, "close", target, error);
    ok = FALSE;
  }
  return group->agree(group, ok, error);
}
