/* Comparison of a clustering with known classes, as text for the summaries of `knnwb cluster` and
 * the evaluate step, plus the contingency table file. */
#include <math.h>
#include <knnwb/atomic_file.h>
#include <knnwb/community.h>
#include <knnwb/error.h>
#include <knnwb/evaluation.h>
#include <knnwb/text_fields.h>

gboolean knnwb_evaluation_append(GString *text, const char *annotation,
                                 const igraph_vector_int_t *membership,
                                 const igraph_vector_int_t *classes, char *const *class_names,
                                 const char *contingency_path, GError **error)
{
  double ari = NAN, nmi = NAN;
  igraph_integer_t used = 0;
  igraph_matrix_int_t table;
  if (!knnwb_error_from_igraph(igraph_matrix_int_init(&table, 0, 0), "igraph_matrix_int_init",
                               error))
    return FALSE;
  if (!knnwb_clustering_compare(membership, classes, &ari, &nmi, &table, &used, error)) {
    igraph_matrix_int_destroy(&table);
    return FALSE;
  }
  igraph_integer_t n_classes = 0;
  while (class_names[n_classes])
    n_classes++;
  g_string_append_printf(text,
                         "annotation\t%s\nannotated_points\t%" IGRAPH_PRId
                         "\nclasses\t%" IGRAPH_PRId "\nari\t%.6f\nnmi\t%.6f\n",
                         annotation, used, n_classes, ari, nmi);
  gboolean ok = TRUE;
  if (contingency_path) {
    g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(contingency_path, error);
    ok = file != NULL;
    if (ok) {
      FILE *stream = knnwb_atomic_file_stream(file);
      fputs("cluster", stream);
      for (igraph_integer_t c = 0; c < n_classes; c++) {
        putc('\t', stream); /* a name with a tab or line break quoted, as the other tables */
        knnwb_formats_write_tsv_field(stream, class_names[c]);
      }
      fputc('\n', stream);
      for (igraph_integer_t r = 0; r < igraph_matrix_int_nrow(&table); r++) {
        fprintf(stream, "%" IGRAPH_PRId, r);
        for (igraph_integer_t c = 0; c < n_classes; c++)
          fprintf(stream, "\t%" IGRAPH_PRId,
                  c < igraph_matrix_int_ncol(&table) ? MATRIX(table, r, c) : 0);
        fputc('\n', stream);
      }
      ok = knnwb_atomic_file_commit(g_steal_pointer(&file), error);
    }
  }
  igraph_matrix_int_destroy(&table);
  return ok;
}
