/*
 * One file written by every rank at once (MPI-IO): each rank puts its pieces (bytes at offsets it
 * knows) into the file that rank 0 names, the temporary of an output rank 0 commits once all
 * wrote. The writers of distributed/ (text lists, NumPy arrays) differ only in the bytes and
 * offsets they pass here.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include <knnwb/error.h>
#include "distributed_internal.h"

/* Bytes a rank writes between two hand-overs to the disk (knnwb_distributed_writeback). */
#define KNNWB_WRITEBACK_BYTES ((size_t)16 << 20)

/* Asks the system to start writing [from, to) of the file to the disk, without waiting (Linux
 * sync_file_range on a descriptor of this rank's own: MPI-IO does not show its own; elsewhere
 * nothing). Left to itself the kernel starts only past its dirty-memory threshold (10% of memory:
 * never, for the 4.8 GB of 10M x 30 lists on a 128 GiB host), and MPI_File_sync would then write
 * everything while the ranks wait, as one process did before it started early. Changes no byte
 * and reports nothing: a failed write shows in the sync. */
static void knnwb_distributed_writeback(int fd, uint64_t from, uint64_t to)
{
#ifdef SYNC_FILE_RANGE_WRITE
  if (fd >= 0 && to > from)
    (void)sync_file_range(fd, (off_t)from, (off_t)(to - from), SYNC_FILE_RANGE_WRITE);
#else
  (void)fd;
  (void)from;
  (void)to;
#endif
}

/* Each rank writes its bytes in slices of this size (MPI counts are int; a slice also bounds the
 * time between two looks at cancel). Small: in the MPI CPU scaling check (2 ranks, 12 MB of .knn
 * each, Open MPI 4.1's ompio on ext4) each rank's one 12 MB MPI_File_write_at spent 29-32 ms in
 * its pwrite (strace -T) and the write phase took 0.08-0.13 s; in 1 MB slices both ranks' 24
 * pwrites took 10-11 ms in all and the phase 0.06-0.09 s (6 alternating runs each). Why the one
 * large call is slow there is not known: two processes of a test program writing 12 MB each
 * into one file, one call each, took 3-7 ms a call. */
#define KNNWB_WRITE_SLICE ((size_t)1 << 20)

static void knnwb_distributed_io_error(int code, const char *what, const char *path, GError **error)
{
  char text[MPI_MAX_ERROR_STRING] = "";
  int length = 0;
  MPI_Error_string(code, text, &length);
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot %s: %s", path, what, text);
}

/* Open MPI 4.1's MPI_File_write_at returns MPI_SUCCESS for a short write (a full disk, a file size
 * limit: it wrote what fitted and says so only in the status's count), so a file the ranks
 * believed whole would be committed truncated. The rest goes through write(2) at its offset, which
 * either finishes it or gives the reason ("No space left on device", "File too large"): the one
 * process's message. */
static gboolean knnwb_distributed_write_rest(const char *path, uint64_t offset, const char *data,
                                             size_t bytes, GError **error)
{
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    int saved = errno;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: write failed: %s", path,
                g_strerror(saved));
    return FALSE;
  }
  while (bytes > 0) {
    ssize_t n = pwrite(fd, data, bytes, (off_t)offset);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int saved = n < 0 ? errno : ENOSPC;
      close(fd);
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: write failed: %s", path,
                  g_strerror(saved));
      return FALSE;
    }
    data += n;
    offset += (uint64_t)n;
    bytes -= (size_t)n;
  }
  if (close(fd) != 0) {
    int saved = errno;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: write failed: %s", path,
                g_strerror(saved));
    return FALSE;
  }
  return TRUE;
}

char *knnwb_distributed_root_path(const KnnwbKnnGroup *group, const char *path)
{
  MPI_Comm comm = knnwb_distributed_communicator();
  int length = group->rank == 0 ? (int)strlen(path) : 0;
  MPI_Bcast(&length, 1, MPI_INT, 0, comm);
  char *target = g_malloc0((size_t)length + 1);
  if (group->rank == 0)
    memcpy(target, path, (size_t)length);
  MPI_Bcast(target, length, MPI_CHAR, 0, comm);
  return target;
}

/* Test hooks, as KNNWB_MPI_SHARED_NO_ROOM_RANK: KNNWB_MPI_WRITE_FAIL_RANK=r makes rank r's writes
 * fail (a full disk seen by one rank); KNNWB_MPI_WRITE_PAUSE=FILE has rank 0 create FILE once
 * every rank is about to write, and every rank wait there (up to 20 s) for an interruption, so
 * that a test can signal the job in the middle of its write. */
static gboolean knnwb_distributed_write_hooks(const KnnwbKnnGroup *group, const char *path,
                                              const volatile gint *cancel, GError **error)
{
  const char *pause = g_getenv("KNNWB_MPI_WRITE_PAUSE");
  if (pause != NULL && *pause != '\0') {
    MPI_Barrier(knnwb_distributed_communicator());
    if (group->rank == 0)
      g_file_set_contents(pause, "writing\n", -1, NULL);
    for (int waited = 0; waited < 2000 && (cancel == NULL || !*cancel); waited++)
      g_usleep(10000);
  }
  const char *fail = g_getenv("KNNWB_MPI_WRITE_FAIL_RANK");
  if (fail != NULL && *fail != '\0' && atoi(fail) == group->rank) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                "%s: cannot write: %s (KNNWB_MPI_WRITE_FAIL_RANK)", path, g_strerror(ENOSPC));
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_distributed_write_pieces(const KnnwbKnnGroup *group, const char *path,
                                        const KnnwbDistributedPiece *pieces, size_t n_pieces,
                                        const KnnwbWriteControl *control, uint64_t progress_done,
                                        uint64_t progress_total, GError **error)
{
  const volatile gint *cancel = control != NULL ? control->cancel : NULL;
  uint64_t written = progress_done;
  MPI_Comm comm = knnwb_distributed_communicator();
  MPI_File file;
  int code = MPI_File_open(comm, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &file);
  if (code != MPI_SUCCESS) {
    /* MPI_File_open is collective and fails on every rank alike. */
    knnwb_distributed_io_error(code, "open for writing", path, error);
    return group->agree(group, FALSE, error);
  }
  /* Collective calls (set_size, sync, close) are made by every rank whatever its own writes did,
   * so that a rank that failed does not leave the others waiting. */
  gboolean ok = TRUE;
  if ((code = MPI_File_set_size(file, 0)) != MPI_SUCCESS) {
    knnwb_distributed_io_error(code, "truncate", path, error);
    ok = FALSE;
  }
  gboolean hooked = knnwb_distributed_write_hooks(group, path, cancel, ok ? error : NULL);
  ok = ok && hooked;
  const int writeback_fd = ok ? open(path, O_WRONLY | O_CLOEXEC) : -1;
  for (size_t p = 0; ok && p < n_pieces; p++)
    for (size_t at = 0, handed = 0; ok && at < pieces[p].bytes; at += KNNWB_WRITE_SLICE) {
      if (cancel != NULL && *cancel) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted while writing");
        ok = FALSE;
        break;
      }
      int count = (int)MIN(KNNWB_WRITE_SLICE, pieces[p].bytes - at);
      MPI_Status status;
      code = MPI_File_write_at(file, (MPI_Offset)(pieces[p].offset + at),
                               (const char *)pieces[p].data + at, count, MPI_BYTE, &status);
      int wrote = 0;
      if (code != MPI_SUCCESS) {
        knnwb_distributed_io_error(code, "write", path, error);
        ok = FALSE;
      } else if (MPI_Get_count(&status, MPI_BYTE, &wrote) != MPI_SUCCESS || wrote != count) {
        ok = knnwb_distributed_write_rest(path, pieces[p].offset + at + (uint64_t)MAX(wrote, 0),
                                          (const char *)pieces[p].data + at + MAX(wrote, 0),
                                          (size_t)(count - MAX(wrote, 0)), error);
      }
      written += (uint64_t)count;
      const size_t end = at + (size_t)count;
      if (ok && (end - handed >= KNNWB_WRITEBACK_BYTES || end == pieces[p].bytes)) {
        knnwb_distributed_writeback(writeback_fd, pieces[p].offset + handed,
                                    pieces[p].offset + end);
        handed = end;
      }
      if (ok && control != NULL && control->progress != NULL)
        control->progress(written, progress_total, control->progress_data);
    }
  if (writeback_fd >= 0)
    close(writeback_fd);
  code = MPI_File_sync(file);
  if (ok && code != MPI_SUCCESS) {
    knnwb_distributed_io_error(code, "write", path, error);
    ok = FALSE;
  }
  code = MPI_File_close(&file);
  if (ok && code != MPI_SUCCESS) {
    knnwb_distributed_io_error(code, "close", path, error);
    ok = FALSE;
  }
  return group->agree(group, ok, error);
}
