/* The step types built into the host: reading and writing files (formats) and clustering. */
#ifndef KNNWB_HOST_STEPS_H
#define KNNWB_HOST_STEPS_H

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

/* Shared choice lists, matching the library's *_from_string functions. */
#define KNNWB_STEP_METRICS "pearson|abs-pearson|spearman|euclidean|manhattan|cosine"
#define KNNWB_STEP_BACKENDS "auto|cpu|cuda"

#endif
