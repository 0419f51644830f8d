/* Shared by the files of core/base/: the matrix annotations (matrix_annotations.c) that matrix.c
 * copies and frees; the kept worker threads (thread_pool.c) that the parallel loops (parallel.c)
 * and teams (team.c) run on. */
#ifndef KNNWB_BASE_INTERNAL_H
#define KNNWB_BASE_INTERNAL_H

#include "base/base.h"

/** Frees every annotation (their strings live in the matrix's chunk). */
void knnwb_matrix_annotations_clear(KnnwbMatrix *matrix);
/** Copies from's annotations along from_axis to to's along to_axis, entry i kept when keep is NULL
 * or keep[i] (kept entries packed in order). */
void knnwb_matrix_annotations_copy(KnnwbMatrix *to, KnnwbMatrixAxis to_axis,
                                   const KnnwbMatrix *from, KnnwbMatrixAxis from_axis,
                                   const gboolean *keep);
/** Every per-row annotation of matrix grown from n_rows to n_rows + 1 entries, the new one NULL
 * (before n_rows grows). */
void knnwb_matrix_annotations_grow_rows(KnnwbMatrix *matrix);

/** Tasks handed to kept workers by one caller, waited for together. */
typedef struct {
  int running; /* tasks handed out and not returned */
  GMutex lock; /* running */
  GCond done;
} KnnwbPoolGroup;

/** Whether workers wait for the next task after theirs (thread_pool.c): a thread's default stack
 * of at most 64 MiB, and KNNWB_THREAD_POOL not 0. */
gboolean knnwb_pool_keeps(void);
/** Makes group empty. */
void knnwb_pool_group_init(KnnwbPoolGroup *group);
/**
 * Runs task(data) on an idle kept worker, else on a new thread, counted in group; never queued
 * behind a busy worker, so tasks of one group run at once. FALSE (nothing run) when no thread can
 * start: the caller does that share itself. O(1) with a worker idle.
 */
gboolean knnwb_pool_run(KnnwbPoolGroup *group, void (*task)(void *data), void *data);
/** Waits until every task run in group has returned, then clears group; joins the workers that
 * left meanwhile. */
void knnwb_pool_group_wait(KnnwbPoolGroup *group);

#endif
