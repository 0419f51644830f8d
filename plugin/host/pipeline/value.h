/* What the host's own steps read of a value beyond <knnwb/plugin.h>: the labels of its vertices,
 * wherever they are kept. Read by steps/ and pipeline/; defined in value.c.
 */
#ifndef KNNWB_HOST_PIPELINE_VALUE_H
#define KNNWB_HOST_PIPELINE_VALUE_H

#include <knnwb/plugin.h>

G_BEGIN_DECLS

/**
 * The row or vertex labels of a value, or NULL when it has none: a split matrix's every-row
 * labels (rank 0), a matrix's row labels, or those of the matrix a graph or clustering was made
 * from (its points, else its source graph's). value may be NULL. Borrowed from value. O(depth of
 * source graphs).
 */
const char *const *knnwb_pipeline_value_labels(const KnnwbValue *value);

G_END_DECLS

#endif
