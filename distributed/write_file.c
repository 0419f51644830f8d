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
#include <knnwb/atomic_file.h>
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
 * fail (a full disk seen by one rank): before it writes anything, naming the first file, or, with
 * KNNWB_MPI_WRITE_FAIL_FILE=SUFFIX, at its first slice of the file whose name ends so (the
 * distances of .npy lists, while the indices are being written: knnwb_distributed_slice_hook);
 * KNNWB_MPI_WRITE_PAUSE=FILE has rank 0 create FILE once every rank is about to write, and every
 * rank wait there (up to 20 s) for an interruption, so that a test can signal the job in the
 * middle of its write; with KNNWB_MPI_WRITE_PAUSE_HOLD=FILE2 an interrupted rank then waits (up
 * to 20 s) until FILE2 exists, so that a test can signal it again while it stops. */
static gboolean knnwb_distributed_fails_here(const KnnwbKnnGroup *group)
{
  const char *fail = g_getenv("KNNWB_MPI_WRITE_FAIL_RANK");
  return fail != NULL && *fail != '\0' && atoi(fail) == group->rank;
}

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
    const char *hold = g_getenv("KNNWB_MPI_WRITE_PAUSE_HOLD");
    if (hold != NULL && *hold != '\0' && cancel != NULL && *cancel)
      for (int waited = 0; waited < 2000 && !g_file_test(hold, G_FILE_TEST_EXISTS); waited++)
        g_usleep(10000);
  }
  const char *file = g_getenv("KNNWB_MPI_WRITE_FAIL_FILE");
  if (knnwb_distributed_fails_here(group) && (file == NULL || *file == '\0')) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                "%s: cannot write: %s (KNNWB_MPI_WRITE_FAIL_RANK)", path, g_strerror(ENOSPC));
    return FALSE;
  }
  return TRUE;
}

/* KNNWB_MPI_WRITE_FAIL_FILE's failure, before this rank's first slice of path. */
static gboolean knnwb_distributed_slice_hook(const KnnwbKnnGroup *group, const char *path,
                                             GError **error)
{
  const char *file = g_getenv("KNNWB_MPI_WRITE_FAIL_FILE");
  if (file == NULL || *file == '\0' || !knnwb_distributed_fails_here(group) ||
      !g_str_has_suffix(path, file))
    return TRUE;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
              "%s: cannot write: %s (KNNWB_MPI_WRITE_FAIL_FILE)", path, g_strerror(ENOSPC));
  return FALSE;
}

/* Where a rank stands in one of the files it writes. */
typedef struct {
  const KnnwbDistributedFile *file;
  MPI_File handle;
  gboolean opened;
  int writeback_fd; /* this rank's own descriptor, for knnwb_distributed_writeback; -1: none */
  size_t piece;     /* the piece being written (n_pieces: all written) */
  size_t at;        /* its bytes written */
  size_t handed;    /* its bytes handed to the disk */
  gboolean started; /* a slice of the file written (or tried) */
} KnnwbDistributedCursor;

/* Descriptors a rank keeps free beyond the files' own when it checks that it can open them: Open
 * MPI 4.1's MPI_File_open (ompio) takes one more for each file (the shared file pointer's backing
 * file; a rank under `ulimit -n` with one descriptor free hung there, two went through), and a
 * rank that fails inside it leaves the others there for ever (they wait in its barriers). One
 * more in all than seen needed, for other MPI-IO components. */
#define KNNWB_OPEN_SPARE 1

/* Whether this rank can open every file for writing at once (creating it, as MPI_MODE_CREATE
 * would, when create) and still has a descriptor free for each and KNNWB_OPEN_SPARE more: a
 * directory this host does not see (a file system the hosts do not share), a per-process
 * descriptor limit. Leaves nothing open. */
static gboolean knnwb_distributed_can_open(const KnnwbDistributedCursor *cursors, size_t n_files,
                                           gboolean create, GError **error)
{
  const int flags = O_WRONLY | O_CLOEXEC | (create ? O_CREAT : 0);
  g_autofree int *fds = g_new(int, 2 * n_files + KNNWB_OPEN_SPARE);
  size_t n_open = 0;
  int saved = 0;
  for (; n_open < 2 * n_files + KNNWB_OPEN_SPARE; n_open++) {
    fds[n_open] = n_open < n_files ? open(cursors[n_open].file->path, flags, 0666) : dup(fds[0]);
    if (fds[n_open] < 0) {
      saved = errno;
      break;
    }
  }
  for (size_t i = 0; i < n_open; i++)
    close(fds[i]);
  if (n_open == 2 * n_files + KNNWB_OPEN_SPARE)
    return TRUE;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot open for writing: %s%s",
              cursors[MIN(n_open, n_files - 1)].file->path, g_strerror(saved),
              saved == ENOENT ? " (every rank writes into the output: its directory must be on a "
                                "file system that every host sees)"
                              : "");
  return FALSE;
}

/* Opens and truncates every file (collective). The ranks first agree that each can open every
 * file: MPI_File_open is collective, and one rank that fails in it alone (a per-process
 * descriptor limit, a directory its host does not see) leaves the others waiting inside it. A
 * failure after that (the ranks' file systems disagree with the check) is agreed before the
 * truncation, so that no rank skips a collective call the others make. Every rank returns the
 * same result unless a truncation fails (then the final agree of knnwb_distributed_write_files
 * makes it common); error: the lowest failing rank's ("rank R: " in front). */
static gboolean knnwb_distributed_open_files(const KnnwbKnnGroup *group,
                                             KnnwbDistributedCursor *cursors, size_t n_files,
                                             GError **error)
{
  gboolean ok = TRUE;
  /* Rank 0 first, which makes the files where they are missing; then the others, which must find
   * them there: a rank whose host has a folder of that name that is not rank 0's would otherwise
   * write its rows into a file of its own, and the output would lack them. */
  if (!group->agree(group,
                    group->rank != 0 || knnwb_distributed_can_open(cursors, n_files, TRUE, error),
                    error) ||
      !group->agree(group,
                    group->rank == 0 || knnwb_distributed_can_open(cursors, n_files, FALSE, error),
                    error))
    return FALSE;
  for (size_t f = 0; f < n_files; f++) {
    const char *path = cursors[f].file->path;
    int code = MPI_File_open(knnwb_distributed_communicator(), path,
                             MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &cursors[f].handle);
    if (code != MPI_SUCCESS && ok)
      knnwb_distributed_io_error(code, "open for writing", path, error);
    cursors[f].opened = code == MPI_SUCCESS;
    /* The ranks agree that every one opened it before any calls set_size on it (the files
     * after it are left unopened, on every rank alike). */
    if (!group->agree(group, ok && cursors[f].opened, error)) {
      ok = FALSE;
      break;
    }
    /* Truncated only when it holds bytes (rank 0's placeholders are empty): ext4 writes out a
     * file truncated to nothing and written again at its last close (auto_da_alloc; 0.11 s for
     * 288 MB on the 2-core VM), which would hold up a file left to the system's cache. The
     * ranks decide together, after every one has asked the size: a rank that asked after
     * another's MPI_File_set_size had truncated the file saw 0 and skipped the collective call,
     * and both waited for ever (2 ranks over longer old files under load: 8 runs of 28 hung). */
    MPI_Offset size = -1;
    int holds = MPI_File_get_size(cursors[f].handle, &size) != MPI_SUCCESS || size != 0;
    int any_holds = holds;
    MPI_Allreduce(&holds, &any_holds, 1, MPI_INT, MPI_LOR, knnwb_distributed_communicator());
    if (any_holds)
      code = MPI_File_set_size(cursors[f].handle, 0);
    if (code != MPI_SUCCESS) {
      knnwb_distributed_io_error(code, "truncate", path, error);
      ok = FALSE;
    }
  }
  return ok;
}

/* Writes the cursor's next slice (at most KNNWB_WRITE_SLICE bytes of its piece) and hands what
 * reached KNNWB_WRITEBACK_BYTES, or the piece's end, to the disk. *written grows by the slice. */
static gboolean knnwb_distributed_write_slice(const KnnwbKnnGroup *group,
                                              KnnwbDistributedCursor *cursor, uint64_t *written,
                                              GError **error)
{
  const KnnwbDistributedFile *file = cursor->file;
  const KnnwbDistributedPiece *piece = &file->pieces[cursor->piece];
  const gboolean first = !cursor->started;
  cursor->started = TRUE;
  if (first && !knnwb_distributed_slice_hook(group, file->path, error))
    return FALSE;
  const size_t at = cursor->at;
  int count = (int)MIN(KNNWB_WRITE_SLICE, piece->bytes - at);
  MPI_Status status;
  int code = MPI_File_write_at(cursor->handle, (MPI_Offset)(piece->offset + at),
                               (const char *)piece->data + at, count, MPI_BYTE, &status);
  int wrote = 0;
  if (code != MPI_SUCCESS) {
    knnwb_distributed_io_error(code, "write", file->path, error);
    return FALSE;
  }
  if (MPI_Get_count(&status, MPI_BYTE, &wrote) != MPI_SUCCESS || wrote != count) {
    wrote = MAX(wrote, 0);
    if (!knnwb_distributed_write_rest(file->path, piece->offset + at + (uint64_t)wrote,
                                      (const char *)piece->data + at + wrote,
                                      (size_t)(count - wrote), error))
      return FALSE;
  }
  *written += (uint64_t)count;
  const size_t end = cursor->at = at + (size_t)count;
  if (end - cursor->handed >= KNNWB_WRITEBACK_BYTES || end == piece->bytes) {
    knnwb_distributed_writeback(cursor->writeback_fd, piece->offset + cursor->handed,
                                piece->offset + end);
    cursor->handed = end;
  }
  return TRUE;
}

/* The cursor past empty pieces: FALSE once the file's pieces are all written. */
static gboolean knnwb_distributed_has_slice(KnnwbDistributedCursor *cursor)
{
  const KnnwbDistributedFile *file = cursor->file;
  while (cursor->piece < file->n_pieces && cursor->at == file->pieces[cursor->piece].bytes) {
    cursor->piece++;
    cursor->at = cursor->handed = 0;
  }
  return cursor->piece < file->n_pieces;
}

/* Every file's pieces, one slice of each file in turn, so that the files' copies into the page
 * cache and their disk writes (each handed over as it goes) run together, as one process writes
 * the two arrays of .npy lists on two threads (the group talks MPI from one thread only). Rank r
 * starts at file r mod n_files: at two ranks the one writes the indices while the other writes
 * the distances, rather than both queueing for the same file's lock (a buffered write takes the
 * inode's, each file has its own). Cancel is read before each slice; progress after each. */
static gboolean knnwb_distributed_write_turns(const KnnwbKnnGroup *group,
                                              KnnwbDistributedCursor *cursors, size_t n_files,
                                              const KnnwbWriteControl *control,
                                              uint64_t progress_done, uint64_t progress_total,
                                              GError **error)
{
  const volatile gint *cancel = control != NULL ? control->cancel : NULL;
  uint64_t written = progress_done;
  for (gboolean more = TRUE; more;) {
    more = FALSE;
    for (size_t turn = 0; turn < n_files; turn++) {
      KnnwbDistributedCursor *cursor = &cursors[(turn + (size_t)group->rank) % n_files];
      if (!knnwb_distributed_has_slice(cursor))
        continue;
      if (cancel != NULL && *cancel) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted while writing");
        return FALSE;
      }
      if (!knnwb_distributed_write_slice(group, cursor, &written, error))
        return FALSE;
      if (control != NULL && control->progress != NULL)
        control->progress(written, progress_total, control->progress_data);
      more = TRUE;
    }
  }
  return TRUE;
}

gboolean knnwb_distributed_write_files(const KnnwbKnnGroup *group,
                                       const KnnwbDistributedFile *files, size_t n_files,
                                       const KnnwbWriteControl *control, uint64_t progress_done,
                                       uint64_t progress_total, GError **error)
{
  g_return_val_if_fail(n_files > 0, FALSE);
  g_autofree KnnwbDistributedCursor *cursors = g_new0(KnnwbDistributedCursor, n_files);
  for (size_t f = 0; f < n_files; f++) {
    cursors[f].file = &files[f];
    cursors[f].writeback_fd = -1;
  }
  /* Collective calls (open, set_size, sync, close) are made by every rank whatever its own writes
   * did, so that a rank that failed does not leave the others waiting. */
  const gint64 start = g_get_monotonic_time();
  gboolean ok = knnwb_distributed_open_files(group, cursors, n_files, error);
  /* (the same on every rank: a truncation may fail on one alone) */
  const gboolean opened_all = group->agree(group, ok, error);
  ok = opened_all;
  /* Synced only where an output replaces data, as one process's files (atomic_file.h): rank 0,
   * which made the outputs' placeholders, knows; the ranks agree so that all or none sync. */
  int64_t durable = knnwb_atomic_file_syncs_always() ? 1 : 0;
  if (!group->reduce(group, &durable, 1, KNNWB_GROUP_MAX, ok ? error : NULL)) {
    ok = FALSE;
    durable = 1;
  }
  gboolean hooked = knnwb_distributed_write_hooks(
      group, files[0].path, control != NULL ? control->cancel : NULL, ok ? error : NULL);
  ok = ok && hooked;
  for (size_t f = 0; ok && durable && f < n_files; f++)
    cursors[f].writeback_fd = open(files[f].path, O_WRONLY | O_CLOEXEC);
  const gint64 opened = g_get_monotonic_time();
  ok = ok && knnwb_distributed_write_turns(group, cursors, n_files, control, progress_done,
                                           progress_total, error);
  const gint64 copied = g_get_monotonic_time();
  for (size_t f = 0; f < n_files; f++)
    if (cursors[f].writeback_fd >= 0)
      close(cursors[f].writeback_fd);
  /* Every file's last slices were handed to the disk as they were written: the syncs, one after
   * the other, wait for disk writes that already run together. None after a failed open, which
   * may have failed on some ranks only: the others would wait in the sync. (Their closes of a
   * file another rank could not open remain: MPI_File_close is collective. Open MPI's open hangs
   * or fails on every rank alike in the cases seen, and the checks before it catch the rest.) */
  for (size_t f = 0; f < n_files; f++) {
    if (!cursors[f].opened || !durable || !opened_all)
      continue;
    int code = MPI_File_sync(cursors[f].handle);
    if (ok && code != MPI_SUCCESS) {
      knnwb_distributed_io_error(code, "write", files[f].path, error);
      ok = FALSE;
    }
  }
  for (size_t f = 0; f < n_files; f++) {
    if (!cursors[f].opened)
      continue;
    int code = MPI_File_close(&cursors[f].handle);
    if (ok && code != MPI_SUCCESS) {
      knnwb_distributed_io_error(code, "close", files[f].path, error);
      ok = FALSE;
    }
  }
  const gint64 synced = g_get_monotonic_time();
  ok = group->agree(group, ok, error);
  /* where a rank's write goes: waiting for the others, copying into the page cache (the disk's
   * pace once its writeback is started: 2.1-2.4 GB/s on the GPU host), the sync */
  g_debug("distributed write: %zu file(s) opened in %.3f s, this rank's slices written in %.3f s, "
          "%s and closed in %.3f s, every rank done %.3f s later",
          n_files, (double)(opened - start) / 1e6, (double)(copied - opened) / 1e6,
          durable ? "synced" : "left to the system's cache", (double)(synced - copied) / 1e6,
          (double)(g_get_monotonic_time() - synced) / 1e6);
  return ok;
}

gboolean knnwb_distributed_write_pieces(const KnnwbKnnGroup *group, const char *path,
                                        const KnnwbDistributedPiece *pieces, size_t n_pieces,
                                        const KnnwbWriteControl *control, uint64_t progress_done,
                                        uint64_t progress_total, GError **error)
{
  const KnnwbDistributedFile file = {.path = path, .pieces = pieces, .n_pieces = n_pieces};
  return knnwb_distributed_write_files(group, &file, 1, control, progress_done, progress_total,
                                       error);
}
