/* --confine DIR: a pipeline from someone else may only read and write inside DIR.
 *
 * Paths are resolved with realpath(3), so "..", symbolic links and bind-style aliases all count
 * where they lead, not how they are spelled. An output that does not exist yet is judged by its
 * directory (resolved) plus its name. The check runs when the pipeline is loaded, before any work;
 * a link swapped afterwards by someone who can write inside DIR is outside what this promises. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "pipeline/pipeline_internal.h"

static gboolean knnwb_pipeline_inside(const char *root, const char *resolved)
{
  size_t length = strlen(root);
  if (length == 1 && root[0] == '/')
    return TRUE;
  return strncmp(resolved, root, length) == 0 &&
         (resolved[length] == '\0' || resolved[length] == '/');
}

gboolean knnwb_pipeline_confined(const char *confine, const char *path, gboolean output,
                                 char **reason)
{
  g_autofree char *root = realpath(confine, NULL);
  if (root == NULL) {
    *reason = g_strdup_printf("--confine directory '%s' cannot be resolved: %s", confine,
                              g_strerror(errno));
    return FALSE;
  }
  struct stat st;
  g_autofree char *resolved = NULL;
  if (!output || lstat(path, &st) == 0) {
    resolved = realpath(path, NULL);
    if (resolved == NULL && output && errno == ENOENT) {
      *reason = g_strdup_printf("'%s' is a symbolic link to nothing; under --confine an output "
                                "must be a file or not exist",
                                path);
      return FALSE;
    }
    if (resolved == NULL) {
      *reason = g_strdup_printf("'%s' cannot be resolved: %s", path, g_strerror(errno));
      return FALSE;
    }
  } else {
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *name = g_path_get_basename(path);
    g_autofree char *resolved_dir = realpath(dir, NULL);
    if (resolved_dir == NULL) {
      *reason =
          g_strdup_printf("the directory of '%s' cannot be resolved: %s", path, g_strerror(errno));
      return FALSE;
    }
    if (strcmp(name, "..") == 0 || strcmp(name, ".") == 0 || strcmp(name, "/") == 0) {
      *reason = g_strdup_printf("'%s' does not name a file", path);
      return FALSE;
    }
    resolved = g_build_filename(resolved_dir, name, NULL);
  }
  if (!knnwb_pipeline_inside(root, resolved)) {
    *reason = g_strcmp0(resolved, path) == 0
                  ? g_strdup_printf("'%s' is outside the --confine directory '%s'", path, root)
                  : g_strdup_printf("'%s' (that is '%s') is outside the --confine directory '%s'",
                                    path, resolved, root);
    return FALSE;
  }
  return TRUE;
}
