/* `knnwb neighbourhood --plots DIR`: for each focus, a scatter plot per top hit of its values
 * against the focus row (the phenotype) across samples, and an overview of the hits' r. */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>
#include <knnwb/drawing.h>
#include <knnwb/error.h>
#include <knnwb/neighbourhood.h>
#include "options.h"
#include "runtime/runtime.h"

/* A file name from a label: letters, digits, '.', '-', '_' kept, the rest '_' (at most 60). */
static char *knnwb_plots_file_name(const char *prefix, size_t rank, const char *label)
{
  GString *name = g_string_new(prefix);
  if (rank > 0)
    g_string_append_printf(name, "%02zu-", rank);
  for (const char *c = label; *c != '\0' && name->len < 80; c++)
    g_string_append_c(name, g_ascii_isalnum(*c) || *c == '.' || *c == '-' || *c == '_' ? *c : '_');
  g_string_append(name, ".png");
  return g_string_free(name, FALSE);
}

/* The colour group of each sample: a sample annotation of the input or a table's column, matched
 * by sample name (NULL entries: no group). */
static gboolean knnwb_plots_groups(const char *spec, const KnnwbMatrix *data,
                                   const char *input_name, const char ***groups,
                                   GStringChunk *strings, GError **error)
{
  g_autoptr(KnnwbAnnotationTable) table = NULL;
  g_autofree char *column = NULL;
  if (!knnwb_host_annotation_table(spec, "--plots-color-by", data, KNNWB_MATRIX_COLUMNS, input_name,
                                   &table, &column, error))
    return FALSE;
  size_t value = 0;
  if (!knnwb_annotation_column(table, column, &value, error))
    return FALSE;
  g_autoptr(GHashTable) value_of = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t r = 0; r < table->n_records; r++)
    g_hash_table_insert(value_of, (gpointer)knnwb_annotation_field(table, r, 0),
                        (gpointer)knnwb_annotation_field(table, r, value));
  *groups = g_new0(const char *, MAX(data->n_cols, (size_t)1));
  for (size_t j = 0; j < data->n_cols; j++) {
    char scratch[32];
    const char *name = data->col_labels ? data->col_labels[j] : NULL;
    if (name == NULL) {
      g_snprintf(scratch, sizeof scratch, "%zu", j);
      name = scratch;
    }
    const char *found = g_hash_table_lookup(value_of, name);
    (*groups)[j] = found ? g_string_chunk_insert(strings, found) : NULL;
  }
  return TRUE;
}

/* Pearson's r in double, for metrics that are not correlations. */
static double knnwb_plots_pearson(const double *x, const double *y, size_t n)
{
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; i++) {
    mx += x[i];
    my += y[i];
  }
  mx /= (double)n;
  my /= (double)n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; i++) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / sqrt(sxx * syy);
}

/* One focus: its top hits' scatter plots and the overview, into temporaries of outputs. */
static gboolean knnwb_plots_focus(const KnnwbHostPlots *plots, const KnnwbNeighbourhood *found,
                                  size_t f, const KnnwbMatrix *data, const char *const *groups,
                                  GPtrArray *outputs, GError **error)
{
  const size_t d = data->n_cols;
  const int64_t focus = found->focus[f];
  const char *focus_label = knnwb_matrix_row_label(data, (size_t)focus);
  g_autofree char *focus_name =
      focus_label ? g_strdup(focus_label) : g_strdup_printf("%" G_GINT64_FORMAT, (gint64)focus);
  g_autofree char *prefix = found->n_focus > 1 ? g_strdup_printf("%s-", focus_name) : g_strdup("");
  g_autofree double *x = g_new(double, MAX(d, (size_t)1));
  g_autofree double *y = g_new(double, MAX(d, (size_t)1));
  for (size_t j = 0; j < d; j++)
    x[j] = data->values[(size_t)focus * d + j];
  g_autoptr(GPtrArray) labels = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GArray) rs = g_array_new(FALSE, FALSE, sizeof(double));
  for (size_t i = 0; i < found->n_members; i++) {
    const KnnwbNeighbourhoodMember *member = &found->members[i];
    if (member->focus != f || member->rank > (size_t)plots->top)
      continue;
    for (size_t j = 0; j < d; j++)
      y[j] = data->values[(size_t)member->row * d + j];
    const char *label = knnwb_matrix_row_label(data, (size_t)member->row);
    g_autofree char *name =
        label ? g_strdup(label) : g_strdup_printf("%" G_GINT64_FORMAT, (gint64)member->row);
    const double r = isnan(member->r) ? knnwb_plots_pearson(x, y, d) : member->r;
    g_autofree char *title = g_strdup_printf("%s (rank %zu): r = %.3f, p = %.3g", name,
                                             member->rank, r, knnwb_correlation_p_value(r, d));
    KnnwbScatter scatter = {.title = title,
                            .x_label = focus_name,
                            .y_label = name,
                            .x = x,
                            .y = y,
                            .n = d,
                            .groups = groups};
    g_autofree char *file = knnwb_plots_file_name(prefix, member->rank, name);
    g_autofree char *path = g_build_filename(plots->dir, file, NULL);
    const char *temporary = knnwb_host_outputs_add(outputs, path, error);
    if (temporary == NULL || !knnwb_drawing_scatter_png(temporary, &scatter, error))
      return FALSE;
    g_ptr_array_add(labels, g_steal_pointer(&name));
    g_array_append_val(rs, r);
  }
  g_autofree char *file = g_strdup_printf("%soverview.png", prefix);
  g_autofree char *path = g_build_filename(plots->dir, file, NULL);
  g_autofree char *title = g_strdup_printf("%s: r of the %u nearest", focus_name, labels->len);
  const char *temporary = knnwb_host_outputs_add(outputs, path, error);
  return temporary != NULL &&
         knnwb_drawing_r_panel_png(temporary, title, (const char *const *)labels->pdata,
                                   (const double *)(void *)rs->data, labels->len, 0, error);
}

gboolean knnwb_host_plots_check(const KnnwbHostPlots *plots, GError **error)
{
  if (plots->dir == NULL)
    return TRUE;
  if (plots->top < 1 || plots->top > 1000) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--plots-top must be between 1 and 1000");
    return FALSE;
  }
  if (g_mkdir_with_parents(plots->dir, 0777) != 0 || !g_file_test(plots->dir, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "--plots %s: cannot make the directory: %s",
                plots->dir, g_strerror(errno));
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_host_plots_write(const KnnwbHostPlots *plots, const KnnwbNeighbourhood *found,
                                const KnnwbMatrix *data, const char *input_name, GPtrArray *outputs,
                                GError **error)
{
  if (data == NULL || data->n_cols == 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--plots needs the whole input in one process (not a split run under mpirun)");
    return FALSE;
  }
  GStringChunk *strings = g_string_chunk_new(1024);
  g_autofree const char **groups = NULL;
  gboolean ok = plots->color_by == NULL ||
                knnwb_plots_groups(plots->color_by, data, input_name, &groups, strings, error);
  for (size_t f = 0; ok && f < found->n_focus; f++)
    ok = knnwb_plots_focus(plots, found, f, data, groups, outputs, error);
  g_string_chunk_free(strings);
  return ok;
}
