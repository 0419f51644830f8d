/* Reader of a labelled square distance matrix in CSV (as R's write.csv writes it) or TSV. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/clustering.h>
#include <knnwb/error.h>

/* Splits one line into fields at delimiter; double-quoted fields may hold the delimiter and ""
 * for a quote. */
static GPtrArray *knnwb_clustering_csv_split(const char *line, char delimiter, gboolean *ok)
{
  GPtrArray *fields = g_ptr_array_new_with_free_func(g_free);
  const char *p = line;
  *ok = TRUE;
  for (;;) {
    GString *field = g_string_new(NULL);
    if (*p == '"') {
      p++;
      for (;;) {
        if (*p == '\0') {
          *ok = FALSE; /* unterminated quote */
          break;
        }
        if (*p == '"') {
          if (p[1] == '"') {
            g_string_append_c(field, '"');
            p += 2;
            continue;
          }
          p++;
          break;
        }
        g_string_append_c(field, *p++);
      }
      if (*ok && *p != delimiter && *p != '\0')
        *ok = FALSE; /* text after a closing quote */
    } else {
      while (*p != delimiter && *p != '\0')
        g_string_append_c(field, *p++);
    }
    g_ptr_array_add(fields, g_string_free(field, FALSE));
    if (!*ok || *p == '\0')
      break;
    p++; /* the delimiter */
  }
  return fields;
}

gboolean knnwb_clustering_read_distance_csv(const char *path, igraph_matrix_t *distances,
                                            char ***labels, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr(GError) io_error = NULL;
  if (!g_file_get_contents(path, &text, NULL, &io_error)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s", io_error->message);
    return FALSE;
  }
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  size_t n_lines = g_strv_length(lines);
  /* Drop carriage returns and trailing empty lines. */
  for (size_t i = 0; i < n_lines; i++)
    g_strchomp(lines[i]);
  while (n_lines > 0 && lines[n_lines - 1][0] == '\0')
    n_lines--;
  if (n_lines == 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:1: empty file", path);
    return FALSE;
  }
  gboolean ok;
  /* TSV when the header has a tab (labels may hold commas), else CSV. */
  char delimiter = strchr(lines[0], '\t') ? '\t' : ',';
  g_autoptr(GPtrArray) header = knnwb_clustering_csv_split(lines[0], delimiter, &ok);
  if (!ok) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:1: malformed quoted field", path);
    return FALSE;
  }
  size_t n = header->len - 1;
  if (n_lines - 1 != n) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s:%zu: the header names %zu column%s but there %s %zu data line%s (not square)",
                path, n_lines, n, KNNWB_PLURAL(n), n_lines - 1 == 1 ? "is" : "are", n_lines - 1,
                KNNWB_PLURAL(n_lines - 1));
    return FALSE;
  }
  igraph_error_t code = igraph_matrix_resize(distances, (igraph_integer_t)n, (igraph_integer_t)n);
  if (!knnwb_error_from_igraph(code, "allocating the distance matrix", error))
    return FALSE;
  char **row_labels = knnwb_try_new0_array(n + 1, sizeof(char *), "the row labels", n, error);
  if (row_labels == NULL)
    return FALSE;
  for (size_t i = 0; i < n; i++) {
    size_t line_number = i + 2;
    g_autoptr(GPtrArray) fields = knnwb_clustering_csv_split(lines[i + 1], delimiter, &ok);
    if (!ok || fields->len != n + 1) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                  ok ? "%s:%zu: expected %zu fields, found %u" : "%s:%zu: malformed quoted field",
                  path, line_number, n + 1, fields->len); /* n + 1 >= 2 */
      g_strfreev(row_labels);
      return FALSE;
    }
    const char *label = g_ptr_array_index(fields, 0);
    if (strcmp(label, g_ptr_array_index(header, i + 1)) != 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                  "%s:%zu: row label \"%s\" differs from column label \"%s\"", path, line_number,
                  label, (const char *)g_ptr_array_index(header, i + 1));
      g_strfreev(row_labels);
      return FALSE;
    }
    row_labels[i] = g_strdup(label);
    for (size_t j = 0; j < n; j++) {
      const char *field = g_ptr_array_index(fields, j + 1);
      char *end = NULL;
      errno = 0;
      double value = g_ascii_strtod(field, &end);
      while (end && (*end == ' ' || *end == '\t'))
        end++;
      if (field[0] == '\0' || !end || *end != '\0' || errno == ERANGE) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                    "%s:%zu: field %zu (\"%s\") is not a number", path, line_number, j + 2, field);
        g_strfreev(row_labels);
        return FALSE;
      }
      MATRIX(*distances, i, j) = value;
    }
  }
  if (labels)
    *labels = row_labels;
  else
    g_strfreev(row_labels);
  return TRUE;
}
