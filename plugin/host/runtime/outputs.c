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
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <knnwb/atomic_file.h>
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

gboolean knnwb_host_output_replaceable(const struct stat *directory, const struct stat *file,
                                       uid_t user)
{
  /* In a sticky directory (/tmp, a shared project folder with +t) only the file's owner, the
   * directory's owner or root may rename over a file. */
  return (directory->st_mode & S_ISVTX) == 0 || user == 0 || file->st_uid == user ||
         directory->st_uid == user;
}

/* An existing target that the commit's rename could not replace, found now: another user's file
 * in a sticky directory, or a file marked immutable or append-only (chattr +i / +a). */
static gboolean knnwb_host_output_check_replaceable(const char *path, const char *dir,
                                                    const struct stat *file, GError **error)
{
  struct stat directory;
  if (stat(dir, &directory) == 0 && !knnwb_host_output_replaceable(&directory, file, geteuid())) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                "'%s' belongs to another user (uid %ju) in the sticky directory '%s', so it "
                "cannot be replaced; remove it (as its owner) or write to another name",
                path, (uintmax_t)file->st_uid, dir);
    return FALSE;
  }
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  int flags = 0;
  gboolean fixed = fd >= 0 && ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 &&
                   (flags & (FS_IMMUTABLE_FL | FS_APPEND_FL)) != 0;
  if (fd >= 0)
    close(fd);
  if (fixed)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                "'%s' is marked %s (chattr), so it cannot be replaced; clear the mark or write "
                "to another name",
                path, (flags & FS_IMMUTABLE_FL) != 0 ? "immutable" : "append-only");
  return !fixed;
}

gboolean knnwb_host_output_check(const char *path, GError **error)
{
  if (*path == '\0') {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "an output path is empty; give the file a name");
    return FALSE;
  }
  struct stat st;
  const gboolean exists = stat(path, &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
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
  return !exists || knnwb_host_output_check_replaceable(path, dir, &st, error);
}

gboolean knnwb_host_input_check(const char *path, gboolean side, GError **error)
{
  struct stat st;
  if (*path == '\0') {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "an input path is empty; name the file");
    return FALSE;
  }
  if (stat(path, &st) != 0) {
    int code = errno;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot open: %s", path, g_strerror(code));
    return FALSE;
  }
  /* open() of a FIFO without a writer (or of some devices) blocks, and no signal handler gets
   * the process out of it: a side input is refused by what stat() says, before it is opened. A
   * main input's reader decides itself (it reads /dev/zero, refuses pipes). */
  if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || (side && !S_ISREG(st.st_mode))) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                "%s: %s, not a file: knnwb reads %s from regular files (opening a pipe would wait "
                "for a writer); save it to a file first",
                path, S_ISFIFO(st.st_mode) ? "a pipe (FIFO)" : knnwb_host_file_kind(st.st_mode),
                side ? "side inputs" : "its inputs");
    return FALSE;
  }
  if (access(path, R_OK) != 0) {
    int code = errno;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot open: %s", path, g_strerror(code));
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
  /* The writers write into this empty placeholder, so only here is it known that the final
   * rename replaces data: then every file is synced before its rename (atomic_file.h). */
  if (replaces && st.st_size > 0)
    knnwb_atomic_file_sync_always();
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
      /* One true sentence: the target (never the temporary, whose name the message would carry
       * twice once the targets are named), and the earlier outputs only when some were replaced. */
      guint earlier = 0;
      for (guint i = 0; i < renamed; i++)
        earlier += replaced[i] ? 1 : 0;
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot be replaced: %s%s", output->final,
                  g_strerror(code),
                  earlier == 0    ? ""
                  : all_backed_up ? "; the outputs replaced before it were restored"
                                  : "; some outputs replaced before it could not be restored");
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

/* ---------------------------------------------------------------------------------------------- */
/* The files of a run, checked together before any work. */

typedef enum {
  KNNWB_HOST_FILE_INPUT,
  KNNWB_HOST_FILE_SIDE_INPUT,
  KNNWB_HOST_FILE_OUTPUT
} KnnwbHostFileUse;

typedef struct {
  char *path;
  char *role; /* "the input file", "-o", "the row labels of -o", ... */
  KnnwbHostFileUse use;
} KnnwbHostFile;

struct KnnwbHostFiles {
  GPtrArray *files; /* KnnwbHostFile, in declaration order */
};

static void knnwb_host_file_free(gpointer data)
{
  KnnwbHostFile *file = data;
  g_free(file->path);
  g_free(file->role);
  g_free(file);
}

KnnwbHostFiles *knnwb_host_files_new(void)
{
  KnnwbHostFiles *files = g_new0(KnnwbHostFiles, 1);
  files->files = g_ptr_array_new_with_free_func(knnwb_host_file_free);
  return files;
}

void knnwb_host_files_free(KnnwbHostFiles *files)
{
  if (files == NULL)
    return;
  g_ptr_array_unref(files->files);
  g_free(files);
}

static void knnwb_host_files_add(KnnwbHostFiles *files, const char *path, const char *role,
                                 KnnwbHostFileUse use)
{
  if (path == NULL)
    return;
  KnnwbHostFile *file = g_new0(KnnwbHostFile, 1);
  file->path = g_strdup(path);
  file->role = g_strdup(role);
  file->use = use;
  g_ptr_array_add(files->files, file);
}

void knnwb_host_files_input(KnnwbHostFiles *files, const char *path, const char *role)
{
  knnwb_host_files_add(files, path, role, KNNWB_HOST_FILE_INPUT);
}

void knnwb_host_files_side_input(KnnwbHostFiles *files, const char *path, const char *role)
{
  knnwb_host_files_add(files, path, role, KNNWB_HOST_FILE_SIDE_INPUT);
}

void knnwb_host_files_output(KnnwbHostFiles *files, const char *path, const char *role)
{
  knnwb_host_files_add(files, path, role, KNNWB_HOST_FILE_OUTPUT);
}

void knnwb_host_files_output_with_side(KnnwbHostFiles *files, const char *path, const char *role,
                                       KnnwbOutputFormat format)
{
  knnwb_host_files_output(files, path, role);
  g_autofree char *side =
      path != NULL && *path != '\0' ? knnwb_formats_side_path(path, format) : NULL;
  g_autofree char *side_role = g_strdup_printf("the side file of %s", role);
  knnwb_host_files_output(files, side, side_role);
}

gboolean knnwb_host_files_check_names(const KnnwbHostFiles *files, GError **error)
{
  for (guint i = 0; i < files->files->len; i++) {
    const KnnwbHostFile *file = files->files->pdata[i];
    if (*file->path == '\0') {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "%s: the %s path is empty",
                  file->role, file->use == KNNWB_HOST_FILE_OUTPUT ? "output" : "input");
      return FALSE;
    }
  }
  return TRUE;
}

/* One declared file against those declared before it: no output may be an input, no two outputs
 * one file (by identity: `out.tsv`, `./out.tsv`, a hard link, a link to the directory). */
static gboolean knnwb_host_files_check_aliases(const KnnwbHostFiles *files, guint i,
                                               char **identities, GError **error)
{
  const KnnwbHostFile *file = files->files->pdata[i];
  for (guint j = 0; j < i; j++) {
    const KnnwbHostFile *other = files->files->pdata[j];
    const gboolean file_out = file->use == KNNWB_HOST_FILE_OUTPUT;
    const gboolean other_out = other->use == KNNWB_HOST_FILE_OUTPUT;
    if ((!file_out && !other_out) || strcmp(identities[i], identities[j]) != 0)
      continue;
    const KnnwbHostFile *output = file_out ? file : other;
    const KnnwbHostFile *input = file_out ? other : file;
    if (file_out && other_out)
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                  "%s '%s' and %s '%s' are the same file; give each output its own name",
                  other->role, other->path, file->role, file->path);
    else
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                  "%s '%s' is the input file '%s' (%s); writing there would destroy the data",
                  output->role, output->path, input->path, input->role);
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_host_files_check(const KnnwbHostFiles *files, GError **error)
{
  if (!knnwb_host_files_check_names(files, error))
    return FALSE;
  const guint n = files->files->len;
  g_auto(GStrv) identities = g_new0(char *, n + 1);
  for (guint i = 0; i < n; i++) {
    const KnnwbHostFile *file = files->files->pdata[i];
    g_autoptr(GError) local = NULL;
    if ((file->use == KNNWB_HOST_FILE_OUTPUT && !knnwb_host_output_check(file->path, &local)) ||
        (file->use == KNNWB_HOST_FILE_SIDE_INPUT &&
         !knnwb_host_input_check(file->path, TRUE, &local))) {
      g_set_error(error, local->domain, local->code, "%s: %s", file->role, local->message);
      return FALSE;
    }
    identities[i] = knnwb_host_path_identity(file->path);
    if (!knnwb_host_files_check_aliases(files, i, identities, error))
      return FALSE;
  }
  return TRUE;
}
