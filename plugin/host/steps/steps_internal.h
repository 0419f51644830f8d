/* Private to steps/: the step types built into the host (reading and writing files, clustering,
 * the seed's matrix steps), each defined in its own file and listed once in builtin.c, and what
 * several of them share. */
#ifndef KNNWB_HOST_STEPS_INTERNAL_H
#define KNNWB_HOST_STEPS_INTERNAL_H

#include <knnwb/knn.h>
#include <knnwb/plugin.h>

extern const KnnwbStepType knnwb_step_load_matrix;
extern const KnnwbStepType knnwb_step_load_knn;
extern const KnnwbStepType knnwb_step_write_graph;
extern const KnnwbStepType knnwb_step_write_labels;
extern const KnnwbStepType knnwb_step_spanning_forest;
extern const KnnwbStepType knnwb_step_components;
extern const KnnwbStepType knnwb_step_mst;
extern const KnnwbStepType knnwb_step_mst_knn;
extern const KnnwbStepType knnwb_step_mst_knn_distances;
extern const KnnwbStepType knnwb_step_single_linkage;
extern const KnnwbStepType knnwb_step_snn_graph;
extern const KnnwbStepType knnwb_step_community;
extern const KnnwbStepType knnwb_step_evaluate;
extern const KnnwbStepType knnwb_step_metafeatures;
extern const KnnwbStepType knnwb_step_append_phenotype;

/**
 * The exact k-nearest lists of every row of points, as a clustering step computes them itself
 * (the step's threads, memory, cancel flag and tile progress from context), for the exact MST:
 * points with absent rows (dropped by the reader) are refused up front, naming the reason.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT; as knnwb_knn_self's. O(n^2 d).
 */
gboolean knnwb_step_self_lists(KnnwbStepContext *context, const KnnwbMatrix *points,
                               KnnwbMetric metric, KnnwbBackend backend, size_t k,
                               KnnwbNeighbors **lists, GError **error);

#endif
