/* Newick text of a single-linkage merge table. */
#include <math.h>
#include <string.h>
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "clustering_internal.h"

void knnwb_clustering_newick_label(GString *text, const char *label, int64_t index)
{
  if (!label) {
    g_string_append_printf(text, "%" G_GINT64_FORMAT, (gint64)index);
    return;
  }
  /* Newick reserves these characters; a quoted label doubles its quotes. */
  if (label[0] != '\0' && strpbrk(label, " \t\n()[]':;,") == NULL) {
    g_string_append(text, label);
    return;
  }
  g_string_append_c(text, '\'');
  for (const char *p = label; *p; p++) {
    if (*p == '\'')
      g_string_append_c(text, '\'');
    g_string_append_c(text, *p);
  }
  g_string_append_c(text, '\'');
}

static void knnwb_newick_append_length(GString *text, double length)
{
  char buffer[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append_c(text, ':');
  g_string_append(text, g_ascii_formatd(buffer, sizeof buffer, "%.10g", MAX(length, 0.0)));
}

char *knnwb_clustering_newick(const igraph_matrix_t *linkage, igraph_integer_t n,
                              const char *const *labels, GError **error)
{
  igraph_integer_t rows = igraph_matrix_nrow(linkage);
  if (n < 0 || igraph_matrix_ncol(linkage) != 4 || rows > MAX(n - 1, 0)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "a linkage matrix for %" G_GINT64_FORMAT " points has at most n - 1 rows and 4 "
                "columns",
                (gint64)n);
    return NULL;
  }
  int64_t nodes = n + rows;
  int64_t *child = g_new(int64_t, MAX(2 * rows, 1));
  gboolean *used = g_new0(gboolean, MAX(nodes, 1));
  double *height = g_new0(double, MAX(nodes, 1));
  for (igraph_integer_t r = 0; r < rows; r++) {
    for (int side = 0; side < 2; side++) {
      double value = MATRIX(*linkage, r, side);
      int64_t id = (int64_t)value;
      if (value != (double)id || id < 0 || id >= n + r || used[id]) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                    "linkage row %" G_GINT64_FORMAT " names cluster %g, which is not available",
                    (gint64)r, value);
        g_free(child);
        g_free(used);
        g_free(height);
        return NULL;
      }
      used[id] = TRUE;
      child[2 * r + side] = id;
    }
    height[n + r] = MATRIX(*linkage, r, 2);
  }
  GString *text = g_string_new(NULL);
  /* An explicit stack instead of recursion: single-linkage trees can be as deep as n. Entries
   * are node ids; a negative entry -(id + 1) means "close node id". */
  GArray *stack = g_array_new(FALSE, FALSE, sizeof(int64_t));
  int64_t *parent_of = g_new(int64_t, MAX(nodes, 1));
  for (int64_t v = 0; v < nodes; v++)
    parent_of[v] = -1;
  for (igraph_integer_t r = 0; r < rows; r++)
    parent_of[child[2 * r]] = parent_of[child[2 * r + 1]] = n + r;
  for (int64_t root = nodes - 1; root >= 0; root--) {
    if (used[root])
      continue;
    /* Roots in decreasing id order: the last merges first, then points never merged. */
    g_array_append_val(stack, root);
    while (stack->len > 0) {
      int64_t entry = g_array_index(stack, int64_t, stack->len - 1);
      g_array_set_size(stack, stack->len - 1);
      if (entry == INT64_MIN) {
        g_string_append_c(text, ',');
        continue;
      }
      if (entry < 0) {
        int64_t id = -entry - 1;
        g_string_append_c(text, ')');
        if (parent_of[id] >= 0)
          knnwb_newick_append_length(text, height[parent_of[id]] - height[id]);
        continue;
      }
      if (entry < n) {
        knnwb_clustering_newick_label(text, labels ? labels[entry] : NULL, entry);
        if (parent_of[entry] >= 0)
          knnwb_newick_append_length(text, height[parent_of[entry]]);
        continue;
      }
      g_string_append_c(text, '(');
      int64_t r = entry - n, close = -entry - 1, separator = INT64_MIN;
      /* pushed in reverse: first child, ",", second child, ")" */
      g_array_append_val(stack, close);
      g_array_append_val(stack, child[2 * r + 1]);
      g_array_append_val(stack, separator);
      g_array_append_val(stack, child[2 * r]);
    }
    g_string_append(text, ";\n");
  }
  g_array_unref(stack);
  g_free(parent_of);
  g_free(child);
  g_free(used);
  g_free(height);
  return g_string_free(text, FALSE);
}
