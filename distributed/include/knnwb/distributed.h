/*
 * Running knnwb as several processes (MPI ranks): the one module that talks MPI. Everything else
 * sees a KnnwbKnnGroup (core's plain C interface) and the functions below; without MPI in the
 * build they report that a launch with several ranks cannot work.
 */
#ifndef KNNWB_DISTRIBUTED_H
#define KNNWB_DISTRIBUTED_H

#include <glib.h>
#include <knnwb/formats.h>
#include <knnwb/knn.h>

G_BEGIN_DECLS

/**
 * Joins the job when an MPI launcher (mpirun, srun) started this process, and sets *group to the
 * job's group, which the caller passes to each kNN run (KnnwbKnnOptions.group) and NPY read
 * (KnnwbReadOptions.group) the ranks share: there is no default group. *group is NULL when the
 * process runs alone (no launcher, one rank, or KNNWB_MPI=0 in the environment). Errors:
 * KNNWB_ERROR_FAILED when launched as one of several ranks by a build without MPI, or when MPI
 * cannot start. Call once, before any other thread exists.
 */
gboolean knnwb_distributed_init(int *argc, char ***argv, const KnnwbKnnGroup **group,
                                GError **error);

/** Leaves the job (MPI_Finalize) when knnwb_distributed_init joined one. */
void knnwb_distributed_finalize(void);

/**
 * The job's stop word on this host, or NULL (alone, or no shared memory): an int in memory that
 * every rank of the job on this host maps, 0 until a rank posts the signal that interrupted it.
 * Read and written with atomic operations only (g_atomic_int_*), from any thread; no MPI call.
 * Valid from knnwb_distributed_init until knnwb_distributed_finalize: the caller stops using it
 * before the latter. O(1).
 */
volatile gint *knnwb_distributed_stop_word(void);

/**
 * The rank an MPI launcher (mpirun, srun) gave this process, read from the environment it set
 * (Open MPI's, PMIx's or PMI's), without joining the job; -1 when no launcher started it. With
 * and without MPI in the build. O(1), never fails.
 */
int knnwb_distributed_launch_rank(void);

/**
 * The number of ranks the launcher started (its environment), or 0 when it does not say (no
 * launcher, or PMIx, which sets no size there: a launch rank above 0 still tells). O(1).
 */
int knnwb_distributed_launch_size(void);

/**
 * Whether knnwb_distributed_write_lists writes format in place: KNN, NEIGHBORS_TSV, MTX, NPY, NPZ
 * (the outputs of the directed graph that are written row by row). O(1), never fails.
 */
gboolean knnwb_distributed_writes_in_place(KnnwbOutputFormat format);

/**
 * Writes the directed kNN graph (or its lists) from every rank's own rows (lists from a group run
 * with group_own_rows; rank r's rows follow rank r - 1's), with no rank holding more than its
 * rows: into path, which rank 0 names (the other ranks' path is ignored): the temporary of an
 * output rank 0 commits afterwards, so the target appears whole or not at all. Text (KNN, MTX,
 * NEIGHBORS_TSV): each rank formats its rows in memory and writes them at its offset (the sum of
 * the lower ranks' byte counts); rank 0 adds the header (the job's edge count) and, for MTX with
 * labels, writes the .rows.txt side file of path. NPY (path, and its .distances.npy side file) and
 * NPZ: each rank writes its arrays' bytes at first_row x k x 8 after the header; rank 0 the
 * headers and the zip frame (CRCs combined from every rank's). The bytes equal the single-process
 * writer's (knnwb_formats_write_lists). n_rows: all rows of the run; labels: NULL or n_rows labels
 * (used by TSV and MTX). control (may be NULL): cancel (stop with KNNWB_ERROR_CANCELLED once
 * set), the formatting threads (0: the host's cores divided by the ranks on it) and progress (this
 * rank's rows formatted, or for NPY/NPZ its bytes written).
 * Collective. Errors: KNNWB_ERROR_IO naming the file, KNNWB_ERROR_CANCELLED, KNNWB_ERROR_NO_MEMORY,
 * KNNWB_ERROR_INVALID_ARGUMENT (a .npz past 4 GiB), the same on every rank (the lowest failing
 * rank's, "rank R: " in front); files written so far are left for the caller's cleanup. Memory:
 * this rank's text for the text formats, nothing beyond the lists for NPY/NPZ.
 */
gboolean knnwb_distributed_write_lists(const KnnwbKnnGroup *group, const char *path,
                                       KnnwbOutputFormat format, const KnnwbNeighbors *own,
                                       size_t n_rows, const char *const *labels,
                                       const KnnwbWriteControl *control, GError **error);

/**
 * knnwb_distributed_write_lists for the undirected (union or mutual) graph: own holds this rank's
 * edges (knnwb_graph_edges_from_own_neighbors: those whose smaller end lies in its range of rows,
 * in order), written as KNN or MTX (`symmetric`) at the rank's offset, rank 0 adding the header
 * (the job's edge count) and the MTX labels. The bytes equal knnwb_formats_write_edges' of the
 * single process's edge list. Same contract, errors and memory (this rank's text) otherwise.
 */
gboolean knnwb_distributed_write_edges(const KnnwbKnnGroup *group, const char *path,
                                       KnnwbOutputFormat format, const KnnwbEdgeList *own,
                                       size_t n_rows, const char *const *labels,
                                       const KnnwbWriteControl *control, GError **error);

G_END_DECLS

#endif
