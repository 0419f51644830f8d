/* What core/split/ offers the engine: the split-memory run of a group, each rank holding a share of
 * the rows. The run's own pieces are in split_internal.h. */
#ifndef KNNWB_SPLIT_H
#define KNNWB_SPLIT_H

#include <glib.h>
#include <knnwb/knn.h>
#include <knnwb/knn_group.h>
#include "engine/engine.h"

/**
 * The split-memory run of a group (options->group_split, knn_split.c): query_block (and
 * reference_block, NULL for the self graph) are this rank's blocks. given must be NULL.
 * Collective; the same result or error on every rank.
 */
gboolean knnwb_knn_split_run(const KnnwbMatrix *query_block, const KnnwbMatrix *reference_block,
                             const KnnwbPrepared *given, const KnnwbKnnOptions *options,
                             const KnnwbKnnGroup *group, KnnwbNeighbors **result, GError **error);

#endif
