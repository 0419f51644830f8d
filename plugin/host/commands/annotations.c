/* Where a command's sample annotations come from: a table's column (TABLE:COLUMN) or, by a bare
 * name, the input's own annotation (GEO characteristics, AnnData obs columns). */
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/text_fields.h>
#include "options.h"

gboolean knnwb_host_annotation_is_bare(const char *spec, const KnnwbMatrix *data,
                                       KnnwbMatrixAxis axis)
{
  return strchr(spec, ':') == NULL ||
         (data != NULL && knnwb_matrix_annotation(data, axis, spec) != NULL);
}

gboolean knnwb_host_annotation_table(const char *spec, const char *option, const KnnwbMatrix *data,
                                     KnnwbMatrixAxis axis, const char *input_name,
                                     KnnwbAnnotationTable **table, char **column, GError **error)
{
  if (spec == NULL || *spec == '\0') {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: give TABLE:COLUMN or the name of a sample annotation of the input", option);
    return FALSE;
  }
  if (knnwb_host_annotation_is_bare(spec, data, axis)) {
    *table =
        knnwb_annotation_from_matrix(data, axis, spec, input_name ? input_name : "INPUT", error);
    if (*table == NULL) {
      g_prefix_error(error, "%s: ", option);
      return FALSE;
    }
    *column = g_strdup(spec);
    return TRUE;
  }
  g_autofree char *path = NULL;
  if (!knnwb_annotation_parse_spec(spec, &path, column, error)) {
    g_prefix_error(error, "%s: ", option);
    return FALSE;
  }
  *table = knnwb_annotation_read(path, error);
  if (*table == NULL) {
    g_clear_pointer(column, g_free);
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_host_sample_labels(KnnwbMatrix *data, KnnwbMatrixAxis axis, const char *key,
                                  const char *input_name, GError **error)
{
  const char *const *values = knnwb_matrix_annotation(data, axis, key);
  if (values == NULL) {
    g_autoptr(KnnwbAnnotationTable) none =
        knnwb_annotation_from_matrix(data, axis, key, input_name, error);
    (void)none; /* made only for its error, which lists the names there are */
    g_prefix_error(error, "--sample-labels: ");
    return FALSE;
  }
  const size_t n = axis == KNNWB_MATRIX_ROWS ? data->n_rows : data->n_cols;
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t i = 0; i < n; i++) {
    if (values[i] == NULL || *values[i] == '\0') {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                  "--sample-labels: %s: sample %zu has no '%s' to be labelled by", input_name, i,
                  key);
      return FALSE;
    }
    if (!g_hash_table_add(seen, (gpointer)values[i])) {
      g_autofree char *shown = knnwb_formats_quote_field(values[i], strlen(values[i]));
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                  "--sample-labels: %s: %s is the '%s' of two samples (the second: sample %zu); "
                  "labels must name one sample each",
                  input_name, shown, key, i);
      return FALSE;
    }
  }
  for (size_t i = 0; i < n; i++)
    if (axis == KNNWB_MATRIX_ROWS)
      knnwb_matrix_set_row_label(data, i, values[i]);
    else
      knnwb_matrix_set_col_label(data, i, values[i]);
  return TRUE;
}

/* The sentence of a table that names none of the points: both sides' first names. */
static void knnwb_host_annotation_no_match(const KnnwbAnnotationTable *table, size_t id,
                                           const KnnwbMatrix *data, const char *id_option,
                                           GError **error)
{
  const size_t n = data->n_rows;
  const char *first = n > 0 ? knnwb_matrix_row_label(data, 0) : NULL;
  const char *second = n > 1 ? knnwb_matrix_row_label(data, 1) : NULL;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
              "%s: none of the matrix's %zu rows is named in the table's column '%s': the rows "
              "are named like '%s'%s%s%s, the column holds '%s'%s%s%s (another column of names: "
              "%s; samples as rows: --transpose)",
              table->path, n, table->header[id], first ? first : "0", n > 1 ? ", '" : "",
              n > 1 ? (second ? second : "1") : "", n > 1 ? "'" : "",
              table->n_records > 0 ? knnwb_annotation_field(table, 0, id) : "",
              table->n_records > 1 ? ", '" : "",
              table->n_records > 1 ? knnwb_annotation_field(table, 1, id) : "",
              table->n_records > 1 ? "'" : "", id_option);
}

gboolean knnwb_host_annotation_classes(const char *spec, const char *id_column, const char *option,
                                       const char *id_option, const KnnwbMatrix *data,
                                       const char *input_name, igraph_vector_int_t *classes,
                                       char ***class_names, GError **error)
{
  g_autoptr(KnnwbAnnotationTable) table = NULL;
  g_autofree char *column = NULL;
  if (!knnwb_host_annotation_table(spec, option, data, KNNWB_MATRIX_ROWS, input_name, &table,
                                   &column, error))
    return FALSE;
  const gboolean bare = knnwb_host_annotation_is_bare(spec, data, KNNWB_MATRIX_ROWS);
  size_t id = 0, matched = 0, named = 0;
  if (!knnwb_annotation_column(table, bare ? NULL : id_column, &id, error) ||
      !knnwb_formats_annotation_classes(table, bare ? NULL : id_column, column,
                                        (const char *const *)data->row_labels, data->n_rows,
                                        classes, class_names, &matched, &named, error))
    return FALSE;
  if (named == 0 && data->n_rows > 0) {
    knnwb_host_annotation_no_match(table, id, data, id_option, error);
    g_clear_pointer(class_names, g_strfreev);
    return FALSE;
  }
  if (matched < data->n_rows)
    g_warning("%s: %zu of the %zu rows have no value in column '%s' (not in the table, or NA, "
              "empty or NaN): they are left out of the comparison with the clusters",
              table->path, data->n_rows - matched, data->n_rows, column);
  return TRUE;
}

void knnwb_host_attributes_clear(KnnwbHostAttributes *attributes)
{
  for (size_t a = 0; a < attributes->n; a++) {
    g_free(attributes->names[a]);
    g_free(attributes->values[a]);
  }
  g_free(attributes->names);
  g_free(attributes->values);
  if (attributes->strings != NULL)
    g_string_chunk_free(attributes->strings);
  memset(attributes, 0, sizeof *attributes);
}

/* One column of a table, per row by label (NULL where the table has no such row). */
static gboolean knnwb_host_attribute_from_table(const KnnwbAnnotationTable *table, const char *name,
                                                GHashTable *record_of, const char *const *labels,
                                                size_t n, KnnwbHostAttributes *attributes,
                                                GError **error)
{
  size_t column = 0;
  guint64 number = 0;
  /* A column by number, as --annotation compares it (the first column holds the names). */
  if (!knnwb_annotation_column(table, name, &column, NULL)) {
    if (!g_ascii_string_to_unsigned(name, 10, 2, table->n_columns, &number, NULL))
      return knnwb_annotation_column(table, name, &column, error);
    column = (size_t)number - 1;
  }
  const char **values = g_new0(const char *, MAX(n, (size_t)1));
  for (size_t i = 0; i < n; i++) {
    char scratch[32];
    const char *label = labels ? labels[i] : NULL;
    if (label == NULL) {
      g_snprintf(scratch, sizeof scratch, "%zu", i);
      label = scratch;
    }
    gpointer hit = g_hash_table_lookup(record_of, label);
    if (hit != NULL)
      values[i] = knnwb_annotation_field(table, GPOINTER_TO_SIZE(hit) - 1, column);
  }
  attributes->names[attributes->n] =
      g_strdup(*table->header[column] ? table->header[column] : name);
  attributes->values[attributes->n++] = values;
  return TRUE;
}

gboolean knnwb_host_attributes_read(const char *spec, const char *id_column, const char *id_option,
                                    const KnnwbMatrix *data, const char *const *labels, size_t n,
                                    const char *input_name, KnnwbHostAttributes *attributes,
                                    GError **error)
{
  g_autofree char *path = NULL, *columns = NULL;
  const gboolean bare = knnwb_host_annotation_is_bare(spec, data, KNNWB_MATRIX_ROWS);
  if (!bare && !knnwb_annotation_parse_spec(spec, &path, &columns, error)) {
    g_prefix_error(error, "--annotation: ");
    return FALSE;
  }
  g_auto(GStrv) names = g_strsplit(bare ? spec : columns, ",", -1);
  const size_t count = g_strv_length(names);
  attributes->names = g_new0(char *, count + 1);
  attributes->values = g_new0(const char **, count + 1);
  attributes->strings = g_string_chunk_new(4096);
  if (bare) {
    for (size_t a = 0; a < count; a++) {
      if (data == NULL) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                    "--annotation %s: the input's own annotations are not at hand here; give "
                    "TABLE:COLUMN",
                    names[a]);
        return FALSE;
      }
      g_autoptr(KnnwbAnnotationTable) check =
          knnwb_annotation_from_matrix(data, KNNWB_MATRIX_ROWS, names[a], input_name, error);
      if (check == NULL) {
        g_prefix_error(error, "--annotation: ");
        return FALSE;
      }
      const char *const *values = knnwb_matrix_annotation(data, KNNWB_MATRIX_ROWS, names[a]);
      const char **copy = g_new0(const char *, MAX(n, (size_t)1));
      for (size_t i = 0; i < n && i < data->n_rows; i++)
        copy[i] = values[i] ? g_string_chunk_insert(attributes->strings, values[i]) : NULL;
      attributes->names[attributes->n] = g_strdup(names[a]);
      attributes->values[attributes->n++] = copy;
    }
    return TRUE;
  }
  g_autoptr(KnnwbAnnotationTable) table = knnwb_annotation_read(path, error);
  size_t id = 0;
  if (table == NULL || !knnwb_annotation_column(table, id_column, &id, error))
    return FALSE;
  g_autoptr(GHashTable) record_of = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t r = 0; r < table->n_records; r++)
    g_hash_table_insert(
        record_of, g_string_chunk_insert(attributes->strings, knnwb_annotation_field(table, r, id)),
        GSIZE_TO_POINTER(r + 1));
  size_t named = 0;
  for (size_t i = 0; i < n; i++)
    named += labels != NULL && labels[i] != NULL && g_hash_table_contains(record_of, labels[i]);
  if (named == 0 && n > 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "%s: none of the %zu rows is named in the table's column '%s' (rows named like "
                "'%s'; another column of names: %s)",
                path, n, table->header[id], labels && labels[0] ? labels[0] : "0", id_option);
    return FALSE;
  }
  for (size_t a = 0; a < count; a++)
    if (!knnwb_host_attribute_from_table(table, names[a], record_of, labels, n, attributes, error))
      return FALSE;
  /* The values live in the table, which goes: keep copies. */
  for (size_t a = 0; a < attributes->n; a++)
    for (size_t i = 0; i < n; i++)
      if (attributes->values[a][i] != NULL)
        attributes->values[a][i] =
            g_string_chunk_insert(attributes->strings, attributes->values[a][i]);
  return TRUE;
}

KnnwbNodeAttribute *knnwb_host_attributes_nodes(const KnnwbHostAttributes *attributes,
                                                const int64_t *rows, size_t n_vertices,
                                                const char ***owned)
{
  if (attributes->n == 0)
    return NULL;
  KnnwbNodeAttribute *nodes = g_new0(KnnwbNodeAttribute, attributes->n);
  const char **per_vertex =
      rows != NULL ? g_new0(const char *, attributes->n *MAX(n_vertices, (size_t)1)) : NULL;
  if (owned != NULL)
    *owned = per_vertex;
  for (size_t a = 0; a < attributes->n; a++) {
    nodes[a].name = attributes->names[a];
    if (rows == NULL) {
      nodes[a].values = attributes->values[a];
      continue;
    }
    const char **values = per_vertex + a * n_vertices;
    for (size_t v = 0; v < n_vertices; v++)
      values[v] = attributes->values[a][rows[v]];
    nodes[a].values = values;
  }
  return nodes;
}

char *knnwb_host_annotation_first(const char *spec, const KnnwbMatrix *data)
{
  const char *colon =
      knnwb_host_annotation_is_bare(spec, data, KNNWB_MATRIX_ROWS) ? NULL : strrchr(spec, ':');
  const char *columns = colon ? colon + 1 : spec;
  const char *comma = strchr(columns, ',');
  if (comma == NULL || (data != NULL && knnwb_matrix_annotation(data, KNNWB_MATRIX_ROWS, spec)))
    return g_strdup(spec);
  return g_strndup(spec, (gsize)(comma - spec));
}
