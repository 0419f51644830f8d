/* How a writer (or a layout run while writing) uses threads, stops when asked and reports
 * progress. */
#ifndef KNNWB_WRITE_CONTROL_H
#define KNNWB_WRITE_CONTROL_H

#include <glib.h>
#include <knnwb/knn.h>

G_BEGIN_DECLS

/** The element types of the lists' NumPy outputs (.npy, .npz). */
typedef enum {
  KNNWB_LISTS_DTYPE_64 = 0, /**< int64 indices, float64 distances: the exact doubles */
  KNNWB_LISTS_DTYPE_32      /**< int32 indices, float32 distances rounded to nearest: half the
                                 bytes (the lists, their order and ties are the same) */
} KnnwbListsDtype;

/** How writers run: threads, interruption and progress, and the lists' NumPy element types.
 * Zero-initialised = all cores, no cancel, no progress, int64 and float64. */
typedef struct {
  int n_threads;               /**< formatting threads; 0 = all cores */
  const volatile gint *cancel; /**< optional: stop with KNNWB_ERROR_CANCELLED once *cancel != 0 */
  KnnwbProgressFunc progress;  /**< optional: (items written, items in total) */
  void *progress_data;
  KnnwbListsDtype lists_dtype; /**< .npy/.npz lists (knnwb_formats_write_lists); others ignore it */
} KnnwbWriteControl;

G_END_DECLS

#endif
