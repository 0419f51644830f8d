/* Shared by the files of core/base/: the matrix annotations (matrix_annotations.c) that matrix.c
 * copies and frees, and the helper threads (workers.c) of the parallel loops (parallel.c, team.c).
 */
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

/**
 * A piece of work that up to `slots` helper threads may join: each helper that takes a slot calls
 * run(task, slot) once, slots numbered 1 .. slots in the order taken. Embed it in the loop's own
 * state; the fields after run and slots belong to the pool.
 */
typedef struct KnnwbPoolTask KnnwbPoolTask;
struct KnnwbPoolTask {
  void (*run)(KnnwbPoolTask *task, int slot);
  int slots;
  int taken, active; /* slots taken; helpers still running */
  gboolean closed;
  KnnwbPoolTask *next;
};

/** Offers task's slots to the helpers, starting helpers where too few are free (up to the thread
 * limit). The caller then works on the task itself and must call knnwb_pool_close. */
void knnwb_pool_offer(KnnwbPoolTask *task);
/** Takes back the slots no helper took and waits for the helpers running the others. Returns how
 * many were taken: slots 1 .. that number ran or are done; the caller runs the rest itself, if
 * they must run. task may be freed after it returns. */
int knnwb_pool_close(KnnwbPoolTask *task);

#endif
