/* The outputs of a run: targets checked before any work, written to temporaries beside them and
 * renamed into place together, last, and only when no cancellation is pending. Shared by
 * `knnwb knn` and `knnwb run` (and by any phase added to them: poll the cancel flag, write to the
 * temporary, let the commit decide). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <knnwb/error.h>
#include "runtime/runtime_internal.h"

/* Temporaries are recognisable (`find DIR -name '.knnwb-tmp-*'` finds a crashed run's litter). */
#define KNNWB_HOST_TEMPORARY_PREFIX ".knnwb-tmp-"

static const char *knnwb_host_file_kind(mode_t mode)
{
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

static gboolean knnwb_host_pseudo_file_system(__fsword_t type)
{
  switch ((unsigned long)type) {
  case PROC_SUPER_MAGIC:
  case SYSFS_MAGIC:
  case CGROUP_SUPER_MAGIC:
  case CGROUP2_SUPER_MAGIC:
  case DEBUGFS_MAGIC:
  case SECURITYFS_MAGIC:
    return TRUE;
  default:
    return FALSE;
  }
}

gboolean knnwb_host_output_check(const char *path, GError **error)
{
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                "'%s' is %s; an output must be a regular file (it would be replaced by one)", path,
                knnwb_host_file_kind(st.st_mode));
    return FALSE;
  }
  g_autofree char *dir = g_path_get_dirname(path);
  if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "'%s': output directory '%s' does not exist",
                path, dir);
    return FALSE;
  }
  /* Without side effects: access() (which says yes to root everywhere), the mount's read-only
   * flag, and the kernel's pseudo file systems, which take no new regular files whoever asks. The
   * run itself proves writability by creating its temporaries before any work. */
  struct statvfs vfs;
  struct statfs fs;
  int code = 0;
  if (access(dir, W_OK | X_OK) != 0)
    code = errno;
  else if (statvfs(dir, &vfs) == 0 && (vfs.f_flag & ST_RDONLY) != 0)
    code = EROFS;
  else if (statfs(dir, &fs) == 0 && knnwb_host_pseudo_file_system(fs.f_type))
    code = EACCES;
  if (code != 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                "'%s': output directory '%s' cannot be written: %s", path, dir, g_strerror(code));
    return FALSE;
  }
  return TRUE;
}

char *knnwb_host_path_identity(const char *path)
{
  struct stat st;
  if (stat(path, &st) == 0)
    return g_strdup_printf("inode %ju:%ju", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
  g_autofree char *dir = g_path_get_dirname(path);
  g_autofree char *base = g_path_get_basename(path);
  char *real = realpath(dir, NULL);
  if (real == NULL)
    return g_canonicalize_filename(path, NULL);
  char *identity = g_build_filename(real, base, NULL);
  free(real);
  return identity;
}

/* The most bytes of the target's name kept at the end of its temporary's name: the extension (what
 * writers look at) survives, and the whole name stays far below NAME_MAX. */
#define KNNWB_HOST_TEMPORARY_TAIL 64

/* Several outputs may share a directory: the counter keeps their temporaries apart, the process
 * id keeps runs apart, and the end of the basename keeps the extension writers look at. */
static char *knnwb_host_output_temporary_name(const char *final)
{
  static guint counter;
  g_autofree char *dir = g_path_get_dirname(final);
  g_autofree char *base = g_path_get_basename(final);
  const char *tail = base;
  size_t length = strlen(base);
  if (length > KNNWB_HOST_TEMPORARY_TAIL) {
    tail = base + length - KNNWB_HOST_TEMPORARY_TAIL;
    while (*tail != '\0' && ((unsigned char)*tail & 0xc0) == 0x80)
      tail++; /* not in the middle of a UTF-8 character */
  }
  g_autofree char *name =
      g_strdup_printf(KNNWB_HOST_TEMPORARY_PREFIX "%d-%u-%s", (int)getpid(), ++counter, tail);
  return g_build_filename(dir, name, NULL);
}

/* Creates output's temporary (O_EXCL, a fresh name on a clash) empty, with the permission bits of
 * the regular file final (never s/t bits) or, for a new final or a symbolic link, 0666 less the
 * umask, plus the owner's write bit, and records it as the untouched placeholder. errno-style
 * code, 0 on success. */
static int knnwb_host_output_create(KnnwbPipelineOutput *output, gboolean fresh_names)
{
  /* The temporary's name is short whatever final is called: a final name the file system cannot
   * take must be found now, not at the rename after all the work. */
  g_autofree char *dir = g_path_get_dirname(output->final);
  g_autofree char *base = g_path_get_basename(output->final);
  long name_max = pathconf(dir, _PC_NAME_MAX);
  if (strlen(base) > (size_t)(name_max > 0 ? name_max : NAME_MAX))
    return ENAMETOOLONG;
  struct stat st;
  const gboolean replaces = lstat(output->final, &st) == 0 && S_ISREG(st.st_mode);
  const mode_t kept = replaces ? st.st_mode & 0777 : 0;
  int fd = -1;
  int code = EEXIST;
  for (int attempt = 0; attempt < 100 && fd < 0 && code == EEXIST; attempt++) {
    if (fresh_names) {
      g_free(output->temporary);
      output->temporary = knnwb_host_output_temporary_name(output->final);
    }
    fd = open(output->temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
              replaces ? S_IRUSR | S_IWUSR : 0666);
    code = fd < 0 ? errno : 0;
    if (!fresh_names)
      break;
  }
  if (fd < 0)
    return code;
  if (replaces)
    (void)fchmod(fd, kept | S_IWUSR);
  struct stat made;
  if (fstat(fd, &made) == 0) {
    output->mode = replaces ? kept : made.st_mode & 0777;
    output->placeholder = TRUE;
    output->placeholder_device = made.st_dev;
    output->placeholder_inode = made.st_ino;
    output->placeholder_mtime = made.st_mtim;
  }
  close(fd);
  return 0;
}

const char *knnwb_host_outputs_add(GPtrArray *outputs, const char *final, GError **error)
{
  KnnwbPipelineOutput *output = g_new0(KnnwbPipelineOutput, 1);
  output->final = g_strdup(final);
  int code = knnwb_host_output_create(output, TRUE);
  if (code != 0) {
    g_autofree char *dir = g_path_get_dirname(final);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot create a file in '%s': %s", final,
                dir, g_strerror(code));
    knnwb_host_output_free(output);
    return NULL;
  }
  g_ptr_array_add(outputs, output);
  return output->temporary;
}

void knnwb_host_outputs_add_side_file(GPtrArray *outputs, const char *temporary, const char *final)
{
  KnnwbPipelineOutput *output = g_new0(KnnwbPipelineOutput, 1);
  output->final = g_strdup(final);
  output->temporary = g_strdup(temporary);
  /* The writer names it after the main temporary: no fresh name. Should it exist already, the
   * writer replaces it as before, and the commit sets the mode. */
  (void)knnwb_host_output_create(output, FALSE);
  g_ptr_array_add(outputs, output);
}

/* TRUE when output's temporary is still the empty placeholder made up front (the step did not
 * write this output): the same file, unmodified and empty. */
static gboolean knnwb_host_output_untouched(const KnnwbPipelineOutput *output)
{
  struct stat st;
  return output->placeholder && lstat(output->temporary, &st) == 0 &&
         st.st_dev == output->placeholder_device && st.st_ino == output->placeholder_inode &&
         st.st_size == 0 && st.st_mtim.tv_sec == output->placeholder_mtime.tv_sec &&
         st.st_mtim.tv_nsec == output->placeholder_mtime.tv_nsec;
}

void knnwb_host_output_free(gpointer data)
{
  KnnwbPipelineOutput *output = data;
  if (output == NULL)
    return;
  g_free(output->temporary);
  g_free(output->final);
  g_free(output);
}

void knnwb_host_outputs_discard(GPtrArray *outputs)
{
  for (guint i = 0; i < outputs->len; i++) {
    const KnnwbPipelineOutput *output = outputs->pdata[i];
    if (unlink(output->temporary) != 0 && errno != ENOENT)
      g_printerr("knnwb: cannot remove temporary %s: %s\n", output->temporary, g_strerror(errno));
  }
}

void knnwb_host_outputs_name_targets(const GPtrArray *outputs, GError *error)
{
  if (error == NULL)
    return;
  for (guint i = 0; i < outputs->len; i++) {
    const KnnwbPipelineOutput *output = outputs->pdata[i];
    if (strstr(error->message, output->temporary) == NULL)
      continue;
    g_autoptr(GString) message = g_string_new(error->message);
    g_string_replace(message, output->temporary, output->final, 0);
    g_free(error->message);
    error->message = g_string_free(g_steal_pointer(&message), FALSE);
  }
}

/* The renames, all or nothing: existing targets are first hard-linked to backups (the old file
 * stays where it is), then each temporary is renamed over its target (with the mode it was made
 * with);
 * if a rename fails, the targets already replaced get their backups back (or are removed when
 * there was none) and the remaining temporaries are deleted. Where hard links are not possible, a
 * target that was already replaced cannot be restored and the message says so. */
static gboolean knnwb_host_outputs_rename(GPtrArray *outputs, GError **error)
{
  const guint n = outputs->len;
  g_autofree char **backups = g_new0(char *, n + 1);
  g_autofree gboolean *existed = g_new0(gboolean, n + 1);
  gboolean all_backed_up = TRUE;
  for (guint i = 0; i < n; i++) {
    const KnnwbPipelineOutput *output = outputs->pdata[i];
    if (knnwb_host_output_untouched(output))
      unlink(output->temporary); /* an output the step chose not to write (nothing to write) */
    if (!g_file_test(output->temporary, G_FILE_TEST_EXISTS))
      continue;
    /* A replaced file keeps its permission bits (a shared result stays readable by the group),
     * as when its temporary was made (less the owner's write bit added for the writer, where the
     * file had none); a symbolic link is replaced, not followed. */
    if (output->placeholder)
      (void)chmod(output->temporary, output->mode);
    struct stat st;
    if (lstat(output->final, &st) != 0)
      continue;
    existed[i] = TRUE;
    backups[i] = g_strconcat(output->temporary, ".previous", NULL);
    unlink(backups[i]);
    if (link(output->final, backups[i]) != 0) {
      g_clear_pointer(&backups[i], g_free);
      all_backed_up = FALSE;
    }
  }
  gboolean ok = TRUE;
  g_autofree gboolean *replaced = g_new0(gboolean, n + 1);
  guint renamed = 0;
  for (; renamed < n; renamed++) {
    const KnnwbPipelineOutput *output = outputs->pdata[renamed];
    if (!g_file_test(output->temporary, G_FILE_TEST_EXISTS))
      continue; /* an output the step chose not to write (nothing to write) */
    replaced[renamed] = rename(output->temporary, output->final) == 0;
    if (!replaced[renamed]) {
      int code = errno;
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "cannot rename %s to %s: %s%s",
                  output->temporary, output->final, g_strerror(code),
                  all_backed_up ? "; the earlier outputs were restored"
                                : "; some earlier outputs could not be restored");
      ok = FALSE;
      break;
    }
  }
  for (guint i = 0; i < n; i++) {
    const KnnwbPipelineOutput *output = outputs->pdata[i];
    if (!ok && replaced[i]) {
      /* Undo: the old file back, or no file where there was none. */
      if (backups[i] != NULL)
        rename(backups[i], output->final);
      else if (!existed[i])
        unlink(output->final);
    }
    if (!ok && i >= renamed)
      unlink(output->temporary);
    if (backups[i] != NULL) {
      unlink(backups[i]);
      g_free(backups[i]);
    }
  }
  return ok;
}

gboolean knnwb_host_outputs_commit(GPtrArray *outputs, const volatile gint *cancel, GError **error)
{
  /* From here a first signal no longer stops anything and a second one no longer kills: the
   * renames take milliseconds and must not stop half-way. */
  knnwb_host_signals_committing(TRUE);
  if (cancel != NULL && *cancel) {
    knnwb_host_signals_committing(FALSE);
    knnwb_host_outputs_discard(outputs);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED,
                "interrupted before the outputs were put in place");
    return FALSE;
  }
  gboolean ok = knnwb_host_outputs_rename(outputs, error);
  knnwb_host_signals_committing(FALSE);
  return ok;
}
