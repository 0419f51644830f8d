/*
 * Running knnwb as several processes (MPI ranks): the one module that talks MPI. Everything else
 * sees a KnnwbKnnGroup (core's plain C interface) and the functions below; without MPI in the
 * build they report that a launch with several ranks cannot work.
 */
#ifndef KNNWB_DISTRIBUTED_H
#define KNNWB_DISTRIBUTED_H

#include <glib.h>
#include <knnwb/knn.h>

G_BEGIN_DECLS

/**
 * Joins the job when an MPI launcher (mpirun, srun) started this process, and makes the job's
 * group the default of every kNN run (knnwb_knn_group_set_default). *group is NULL when the process
 * runs alone (no launcher, one rank, or KNNWB_MPI=0 in the environment). Errors:
 * KNNWB_ERROR_FAILED when launched as one of several ranks by a build without MPI, or when MPI
 * cannot start. Call once, before any other thread exists.
 */
gboolean knnwb_distributed_init(int *argc, char ***argv, const KnnwbKnnGroup **group,
                                GError **error);

/** Leaves the job (MPI_Finalize) when knnwb_distributed_init joined one. */
void knnwb_distributed_finalize(void);

/** Which list table knnwb_distributed_write_lists writes. */
typedef enum {
  KNNWB_DISTRIBUTED_LISTS_KNN, /**< the .knn file of the directed kNN graph */
  KNNWB_DISTRIBUTED_LISTS_TSV  /**< the neighbour table (.tsv) */
} KnnwbDistributedLists;

/**
 * Writes one file from every rank's own rows (lists from a group run with group_own_rows): each
 * rank formats its rows, the ranks learn each other's byte counts, and every rank writes its bytes
 * at its offset of path (MPI-IO), which rank 0 names (the other ranks' path is ignored): the
 * temporary of an output rank 0 commits afterwards, so the target appears whole or not at all.
 * The bytes equal the single-process writer's (knnwb_formats_write_knn of the directed graph, or
 * knnwb_formats_write_neighbor_lists_tsv). n_rows: all rows of the run; labels: NULL or n_rows
 * labels. Collective. Errors: KNNWB_ERROR_IO naming the file, the same on every rank. Memory:
 * this rank's text.
 */
gboolean knnwb_distributed_write_lists(const KnnwbKnnGroup *group, const char *path,
                                       KnnwbDistributedLists table, const KnnwbNeighbors *own,
                                       size_t n_rows, const char *const *labels, GError **error);

G_END_DECLS

#endif
