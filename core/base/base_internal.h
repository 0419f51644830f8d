/* Shared by the files of core/base/: the matrix annotations (matrix_annotations.c) that matrix.c
 * copies and frees. */
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

#endif
