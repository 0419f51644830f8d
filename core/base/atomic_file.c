/* Atomic file replacement: temporary file in the target's directory (created with the target's
 * permission bits), rename; fsync before the rename (and of the directory after it) where the
 * rename replaces data (atomic_file.h says why only there). */
#include <knnwb/atomic_file.h>
#include <knnwb/error.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct KnnwbAtomicFile {
  char *path;
  char *temp_path;
  char *directory;
  FILE *stream;
  char *buffer;
  int fd;
  int write_errno;  /* the first failed write's errno: stdio's ferror() forgets why */
  off_t handed;     /* bytes already handed to the disk by knnwb_atomic_file_start_writeback */
  gboolean durable; /* synced before the rename: it replaces data, or every file is */
};

/* Set once by knnwb_atomic_file_sync_always; read by every open. */
static gint knnwb_atomic_sync_every;

void knnwb_atomic_file_sync_always(void)
{
  g_atomic_int_set(&knnwb_atomic_sync_every, 1);
}

gboolean knnwb_atomic_file_syncs_always(void)
{
  return g_atomic_int_get(&knnwb_atomic_sync_every) != 0;
}

gboolean knnwb_atomic_file_durable(const KnnwbAtomicFile *file)
{
  return file->durable;
}

/* The stream's write function: plain write(2), remembering the reason of a failure so the commit
 * can say "No space left on device" rather than a generic I/O error. */
static ssize_t knnwb_atomic_file_write(void *cookie, const char *buffer, size_t size)
{
  KnnwbAtomicFile *file = cookie;
  size_t done = 0;
  while (done < size) {
    ssize_t written = write(file->fd, buffer + done, size - done);
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0) {
      if (file->write_errno == 0)
        file->write_errno = written < 0 ? errno : ENOSPC;
      return done > 0 ? (ssize_t)done : -1;
    }
    done += (size_t)written;
  }
  return (ssize_t)done;
}

static int knnwb_atomic_file_close(void *cookie)
{
  KnnwbAtomicFile *file = cookie;
  int result = close(file->fd);
  file->fd = -1;
  return result;
}

enum { KNNWB_ATOMIC_BUFFER_BYTES = 1 << 20 };

static void knnwb_atomic_file_free(KnnwbAtomicFile *file)
{
  g_free(file->path);
  g_free(file->temp_path);
  g_free(file->directory);
  g_free(file->buffer);
  g_free(file);
}

/* The permission bits the new file gets: a regular file's own (never setuid, setgid or sticky: a
 * rewritten file is not the program or directory those were set for), else (no file, or a
 * symbolic link, which is replaced and not followed) 0666 less the umask. *exists: a regular file
 * is replaced; *holds_data: one of at least a byte. FALSE (error set) when path is something a
 * rename would destroy. */
static gboolean knnwb_atomic_file_mode(const char *path, mode_t *mode, gboolean *exists,
                                       gboolean *holds_data, GError **error)
{
  struct stat st;
  *exists = FALSE;
  *holds_data = FALSE;
  *mode = 0666;
  if (lstat(path, &st) != 0 || S_ISLNK(st.st_mode))
    return TRUE;
  if (!S_ISREG(st.st_mode)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                "%s: exists and is not a regular file; write to a file path instead", path);
    return FALSE;
  }
  *exists = TRUE;
  *holds_data = st.st_size > 0;
  *mode = st.st_mode & 0777;
  return TRUE;
}

KnnwbAtomicFile *knnwb_atomic_file_open(const char *path, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  mode_t mode;
  gboolean exists, holds_data;
  if (!knnwb_atomic_file_mode(path, &mode, &exists, &holds_data, error))
    return NULL;
  KnnwbAtomicFile *file = g_new0(KnnwbAtomicFile, 1);
  file->path = g_strdup(path);
  file->durable = holds_data || g_atomic_int_get(&knnwb_atomic_sync_every);
  file->directory = g_path_get_dirname(path);
  /* open(O_EXCL) with the final mode rather than mkstemp (always 0600): a new file honours the
   * umask like fopen would (changing the umask to read it is not thread-safe), and a replaced
   * file's contents are never more visible in the temporary than in the file (a 0600 file is
   * written into a 0600 temporary); the umask may take bits away, which fchmod puts back. */
  int fd = -1;
  int saved = EEXIST;
  for (int attempt = 0; attempt < 100 && fd < 0 && saved == EEXIST; attempt++) {
    /* Recognisable litter should the process be killed, and short whatever the target is
     * called (a 255-byte name is legal; a prefix on it is not): `.knnwb-tmp-PID-RANDOM`. */
    g_autofree char *name =
        g_strdup_printf(".knnwb-tmp-%d-%08x%08x", (int)getpid(), g_random_int(), g_random_int());
    g_free(file->temp_path);
    file->temp_path = g_build_filename(file->directory, name, NULL);
    fd = open(file->temp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    saved = fd < 0 ? errno : 0;
  }
  if (fd < 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot create a temporary file in %s: %s",
                path, file->directory, g_strerror(saved));
    knnwb_atomic_file_free(file);
    return NULL;
  }
  /* A replaced file keeps its permissions (a shared result stays readable by the group). */
  if (exists)
    (void)fchmod(fd, mode);
  file->fd = fd;
  cookie_io_functions_t functions = {.read = NULL,
                                     .write = knnwb_atomic_file_write,
                                     .seek = NULL,
                                     .close = knnwb_atomic_file_close};
  file->stream = fopencookie(file, "w", functions);
  if (file->stream == NULL) {
    saved = errno;
    close(fd);
    unlink(file->temp_path);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: %s", path, g_strerror(saved));
    knnwb_atomic_file_free(file);
    return NULL;
  }
  file->buffer = g_malloc(KNNWB_ATOMIC_BUFFER_BYTES);
  setvbuf(file->stream, file->buffer, _IOFBF, KNNWB_ATOMIC_BUFFER_BYTES);
  return file;
}

FILE *knnwb_atomic_file_stream(KnnwbAtomicFile *file)
{
  return file->stream;
}

const char *knnwb_atomic_file_path(const KnnwbAtomicFile *file)
{
  return file->path;
}

void knnwb_atomic_file_start_writeback(KnnwbAtomicFile *file)
{
#ifdef SYNC_FILE_RANGE_WRITE
  if (!file->durable)
    return; /* no fsync follows: the page cache takes the bytes at memory speed */
  /* Left to itself the kernel starts writing a file out only past the dirty-memory threshold (10%
   * of memory: never, for a few GB on a large host), so the commit's fsync would write it all
   * while the program waits. A write failure here is found again by fflush or fsync. */
  if (fflush(file->stream) != 0)
    return;
  off_t end = lseek(file->fd, 0, SEEK_CUR);
  if (end > file->handed) {
    (void)sync_file_range(file->fd, file->handed, end - file->handed, SYNC_FILE_RANGE_WRITE);
    file->handed = end;
  }
#else
  (void)file; /* no such call: the commit's fsync writes everything */
#endif
}

/* Moves the temporary to the target. A file that is not synced takes the place of an empty file
 * (the program's placeholders) by exchanging the two names, then removes the old file: ext4 writes
 * out the data of a file renamed over another within the rename (its auto_da_alloc: 65-80 ms for
 * each 245 MB array on the GPU host), which an exchange does not. Where there is no exchange (other
 * systems, file systems without it) or the target changed, a plain rename. */
static gboolean knnwb_atomic_file_move(const KnnwbAtomicFile *file)
{
#ifdef RENAME_EXCHANGE
  struct stat st;
  if (!file->durable && lstat(file->path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0 &&
      renameat2(AT_FDCWD, file->temp_path, AT_FDCWD, file->path, RENAME_EXCHANGE) == 0) {
    (void)unlink(file->temp_path); /* the empty file it replaced */
    return TRUE;
  }
#endif
  return rename(file->temp_path, file->path) == 0;
}

gboolean knnwb_atomic_file_commit(KnnwbAtomicFile *file, GError **error)
{
  g_return_val_if_fail(file != NULL, FALSE);
  int saved = 0;
  const char *step = NULL;
  if (ferror(file->stream) || fflush(file->stream) != 0) {
    saved = file->write_errno != 0 ? file->write_errno : EIO;
    step = "write";
  } else if (file->durable && fsync(file->fd) != 0 && errno != EINVAL) {
    saved = errno;
    step = "fsync";
  }
  if (fclose(file->stream) != 0 && step == NULL) {
    saved = errno;
    step = "close";
  }
  file->stream = NULL;
  if (step == NULL && !knnwb_atomic_file_move(file)) {
    saved = errno;
    step = "rename";
  }
  if (step != NULL) {
    unlink(file->temp_path);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: %s failed: %s", file->path, step,
                g_strerror(saved));
    knnwb_atomic_file_free(file);
    return FALSE;
  }
  /* The rename is durable only once the directory entry is on disk. */
  int dir_fd = file->durable ? open(file->directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (dir_fd >= 0) {
    (void)fsync(dir_fd);
    close(dir_fd);
  }
  knnwb_atomic_file_free(file);
  return TRUE;
}

void knnwb_atomic_file_abort(KnnwbAtomicFile *file)
{
  if (file == NULL)
    return;
  if (file->stream != NULL)
    fclose(file->stream);
  unlink(file->temp_path);
  knnwb_atomic_file_free(file);
}
