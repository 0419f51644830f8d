/* A clustering compared with known classes: the text of `knnwb cluster`'s summary and of the
 * evaluate step, and the contingency table file. */
#ifndef KNNWB_EVALUATION_H
#define KNNWB_EVALUATION_H

#include <glib.h>
#include <igraph.h>

G_BEGIN_DECLS

/**
 * Compares membership with classes (knnwb_clustering_compare; class -1 = not annotated) and
 * appends "annotation, annotated_points, classes, ari, nmi" lines (key<TAB>value) to text; with
 * contingency_path, writes the contingency table there (atomically): a header `cluster` + the
 * class names, then one line per cluster with its counts. Errors: KNNWB_ERROR_IO and those of
 * knnwb_clustering_compare.
 */
gboolean knnwb_evaluation_append(GString *text, const char *annotation,
                                 const igraph_vector_int_t *membership,
                                 const igraph_vector_int_t *classes, char *const *class_names,
                                 const char *contingency_path, GError **error);

G_END_DECLS

#endif
