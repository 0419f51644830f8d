/* A query's columns matched to a reference's by name: the same genes in another order must not be
 * compared position by position. */
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/matrix.h>

/* "'a', 'b', 'c'" and "... (N in all)" for at most three names. */
static void knnwb_matrix_append_names(GString *text, const char *const *names, size_t n)
{
  for (size_t i = 0; i < n && i < 3; i++)
    g_string_append_printf(text, "%s'%s'", i > 0 ? ", " : "", names[i]);
  if (n > 3)
    g_string_append_printf(text, ", ... (%zu in all)", n);
}

gboolean knnwb_matrix_match_columns(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                                    KnnwbMatrix **matched, GError **error)
{
  *matched = NULL;
  const size_t d = reference->n_cols;
  if (query->col_labels == NULL || reference->col_labels == NULL)
    return TRUE; /* NPY and headerless files: by position, as given */
  gboolean same = query->n_cols == d;
  for (size_t j = 0; same && j < d; j++)
    same = g_strcmp0(query->col_labels[j], reference->col_labels[j]) == 0;
  if (same)
    return TRUE;
  g_autoptr(GHashTable) query_column = g_hash_table_new(g_str_hash, g_str_equal);
  g_autoptr(GHashTable) query_repeated = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t j = query->n_cols; j-- > 0;) {
    const char *name = query->col_labels[j];
    if (name == NULL)
      continue;
    if (g_hash_table_contains(query_column, name))
      g_hash_table_add(query_repeated, (gpointer)name);
    g_hash_table_insert(query_column, (gpointer)name, GSIZE_TO_POINTER(j + 1));
  }
  const char *repeated = NULL; /* a name the match needs that the query holds twice */
  g_autofree size_t *source = g_new(size_t, MAX(d, (size_t)1));
  g_autoptr(GPtrArray) missing = g_ptr_array_new();
  g_autoptr(GHashTable) reference_names = g_hash_table_new(g_str_hash, g_str_equal);
  const char *reference_repeated = NULL;
  for (size_t j = 0; j < d; j++) {
    const char *name = reference->col_labels[j];
    gpointer hit = name != NULL ? g_hash_table_lookup(query_column, name) : NULL;
    if (name != NULL && !g_hash_table_add(reference_names, (gpointer)name) &&
        reference_repeated == NULL)
      reference_repeated = name;
    if (hit == NULL)
      g_ptr_array_add(missing, (gpointer)(name != NULL ? name : ""));
    else
      source[j] = GPOINTER_TO_SIZE(hit) - 1;
    if (hit != NULL && repeated == NULL && g_hash_table_contains(query_repeated, name))
      repeated = name;
  }
  if (missing->len == d) {
    /* No name in common: other names for the same columns (probe ids against symbols). The user
     * asked for these two files; keep the positions, and say so. */
    if (query->n_cols == d)
      g_warning("the query's columns share no name with the reference's (query: '%s', ..., "
                "reference: '%s', ...); they are compared by position",
                query->col_labels[0] ? query->col_labels[0] : "",
                reference->col_labels[0] ? reference->col_labels[0] : "");
    return TRUE; /* a different count is the kNN call's error */
  }
  if (missing->len > 0 || repeated != NULL || reference_repeated != NULL) {
    g_autoptr(GString) text = g_string_new(NULL);
    if (missing->len > 0) {
      g_string_append_printf(text,
                             "the query's columns are matched to the reference's by name, and %u "
                             "of the reference's %zu column%s %s not in the query (",
                             missing->len, d, d == 1 ? "" : "s", missing->len == 1 ? "is" : "are");
      knnwb_matrix_append_names(text, (const char *const *)missing->pdata, missing->len);
      g_string_append(text, ")");
    } else {
      g_string_append_printf(text,
                             "the query's columns are matched to the reference's by name, and "
                             "the %s names column '%s' twice",
                             reference_repeated != NULL ? "reference" : "query",
                             reference_repeated != NULL ? reference_repeated : repeated);
    }
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "%s", text->str);
    return FALSE;
  }
  KnnwbMatrix *result = knnwb_matrix_new(query->n_rows, d, error);
  if (result == NULL)
    return FALSE;
  for (size_t i = 0; i < query->n_rows; i++) {
    const float *from = query->values + i * query->n_cols;
    float *to = result->values + i * d;
    for (size_t j = 0; j < d; j++)
      to[j] = from[source[j]];
    if (query->row_labels != NULL)
      knnwb_matrix_set_row_label(result, i, query->row_labels[i]);
    if (query->row_classes != NULL)
      knnwb_matrix_set_row_class(result, i, query->row_classes[i]);
    if (knnwb_matrix_row_is_absent(query, i))
      knnwb_matrix_set_row_absent(result, i);
  }
  for (size_t j = 0; j < d; j++)
    knnwb_matrix_set_col_label(result, j, reference->col_labels[j]);
  if (query->n_cols > d)
    g_message("the query's %zu columns were matched to the reference's %zu by name; %zu not in "
              "the reference are left out",
              query->n_cols, d, query->n_cols - d);
  *matched = result;
  return TRUE;
}
