/* Helpers shared by the host tests: running the knnwb program, temporary directories. */
#ifndef KNNWB_HOST_TEST_UTIL_H
#define KNNWB_HOST_TEST_UTIL_H

#include <glib.h>
#include <glib/gstdio.h>
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>

/* Runs the knnwb program with the given arguments (NULL-terminated) in directory cwd (NULL: the
 * current one); returns its exit status (128 + signal when killed) and its output. */
static inline int host_test_run(const char *cwd, char **out, char **err, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_ptr_array_add(argv, (gpointer)KNNWB_HOST_PROGRAM);
  va_list args;
  va_start(args, err);
  const char *arg;
  while ((arg = va_arg(args, const char *)) != NULL)
    g_ptr_array_add(argv, (gpointer)arg);
  va_end(args);
  g_ptr_array_add(argv, NULL);
  /* The host must find the plugin of this build wherever the test runs it from. */
  g_auto(GStrv) envp = g_get_environ();
  g_autofree char *plugin_dir = g_path_get_dirname(KNNWB_KNN_PLUGIN_FILE);
  envp = g_environ_setenv(envp, "KNNWB_PLUGIN_PATH", plugin_dir, TRUE);
  int status = -1;
  g_autoptr(GError) error = NULL;
  char *stdout_text = NULL, *stderr_text = NULL;
  gboolean spawned = g_spawn_sync(cwd, (char **)argv->pdata, envp, G_SPAWN_DEFAULT, NULL, NULL,
                                  &stdout_text, &stderr_text, &status, &error);
  g_assert_no_error(error);
  g_assert_true(spawned);
  if (out)
    *out = stdout_text;
  else
    g_free(stdout_text);
  if (err)
    *err = stderr_text;
  else
    g_free(stderr_text);
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return -1;
}

static inline char *host_test_tmpdir(void)
{
  g_autoptr(GError) error = NULL;
  char *dir = g_dir_make_tmp("knnwb-host-XXXXXX", &error);
  g_assert_no_error(error);
  return dir;
}

static inline char *host_test_write(const char *dir, const char *name, const char *text)
{
  char *path = g_build_filename(dir, name, NULL);
  g_autoptr(GError) error = NULL;
  g_file_set_contents(path, text, -1, &error);
  g_assert_no_error(error);
  return path;
}

/* Number of entries in dir (to prove nothing, not even a temporary, was left behind). */
static inline guint host_test_count_files(const char *dir)
{
  g_autoptr(GDir) handle = g_dir_open(dir, 0, NULL);
  g_assert_nonnull(handle);
  guint n = 0;
  while (g_dir_read_name(handle) != NULL)
    n++;
  return n;
}

static inline void host_test_rmtree(const char *dir)
{
  g_autoptr(GDir) handle = g_dir_open(dir, 0, NULL);
  if (handle == NULL)
    return;
  const char *name;
  while ((name = g_dir_read_name(handle)) != NULL) {
    g_autofree char *path = g_build_filename(dir, name, NULL);
    if (g_file_test(path, G_FILE_TEST_IS_DIR))
      host_test_rmtree(path);
    else
      g_unlink(path);
  }
  g_rmdir(dir);
}

/* Whether out holds the usage line "PREFIX [OPTION…] REST\n". GLib writes the ellipsis as "…" in
 * a UTF-8 locale and as "?" or "..." in the C locale, so the bracket's inside is not compared: the
 * tests pass in any locale. */
static inline gboolean host_test_has_usage_line(const char *out, const char *prefix,
                                                const char *rest)
{
  g_autofree char *start = g_strconcat(prefix, " [OPTION", NULL);
  for (const char *at = strstr(out, start); at != NULL; at = strstr(at + 1, start)) {
    const char *close = strchr(at + strlen(start), ']');
    const char *end_of_line = strchr(at, '\n');
    if (close == NULL || (end_of_line != NULL && close > end_of_line))
      continue;
    if (strncmp(close + 1, rest, strlen(rest)) == 0)
      return TRUE;
  }
  return FALSE;
}

#endif
