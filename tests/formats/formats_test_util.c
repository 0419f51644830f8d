/* Helpers for the formats tests: temporary files and error assertions. */
#include "formats_test_util.h"

#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

static char *formats_test_directory;

static void formats_test_cleanup(void)
{
  if (formats_test_directory == NULL)
    return;
  GDir *dir = g_dir_open(formats_test_directory, 0, NULL);
  if (dir != NULL) {
    const char *name;
    while ((name = g_dir_read_name(dir)) != NULL) {
      g_autofree char *path = g_build_filename(formats_test_directory, name, NULL);
      g_unlink(path);
    }
    g_dir_close(dir);
  }
  g_rmdir(formats_test_directory);
}

const char *formats_test_dir(void)
{
  if (formats_test_directory == NULL) {
    GError *error = NULL;
    formats_test_directory = g_dir_make_tmp("knnwb-formats-XXXXXX", &error);
    g_assert_no_error(error);
    atexit(formats_test_cleanup);
  }
  return formats_test_directory;
}

char *formats_test_write(const char *name, const char *content, gssize length)
{
  char *path = g_build_filename(formats_test_dir(), name, NULL);
  GError *error = NULL;
  g_file_set_contents(path, content, length, &error);
  g_assert_no_error(error);
  return path;
}

guint formats_test_count_entries(const char *directory)
{
  GDir *dir = g_dir_open(directory, 0, NULL);
  g_assert_nonnull(dir);
  guint count = 0;
  while (g_dir_read_name(dir) != NULL)
    count++;
  g_dir_close(dir);
  return count;
}

void formats_test_expect_parse_error(const char *path, const KnnwbReadOptions *options, int line,
                                     const char *needle)
{
  KnnwbMatrix *matrix = NULL;
  GError *error = NULL;
  gboolean ok = knnwb_formats_read_matrix(path, options, &matrix, NULL, &error);
  if (ok) {
    g_test_message("%s: expected an error containing '%s', got a %zu x %zu matrix", path, needle,
                   matrix->n_rows, matrix->n_cols);
    knnwb_matrix_free(matrix);
    g_test_fail();
    return;
  }
  g_assert_null(matrix);
  g_assert_nonnull(error);
  g_autofree char *prefix =
      line > 0 ? g_strdup_printf("%s:%d:", path, line) : g_strdup_printf("%s: ", path);
  if (error->domain != KNNWB_ERROR || error->code != KNNWB_ERROR_PARSE ||
      !g_str_has_prefix(error->message, prefix) || strstr(error->message, needle) == NULL) {
    g_test_message("expected a parse error starting '%s' containing '%s'; got code %d: %s", prefix,
                   needle, error->code, error->message);
    g_test_fail();
  }
  g_error_free(error);
}
