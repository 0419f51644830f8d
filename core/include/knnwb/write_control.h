/* How a writer (or a layout run while writing) uses threads, stops when asked and reports
 * progress. */
#ifndef KNNWB_WRITE_CONTROL_H
#define KNNWB_WRITE_CONTROL_H

#include <glib.h>
#include <knnwb/knn.h>

G_BEGIN_DECLS

/** How writers run: threads, interruption and progress. Zero-initialised = all cores, no cancel,
 * no progress. */
typedef struct {
  int n_threads;               /**< formatting threads; 0 = all cores */
  const volatile gint *cancel; /**< optional: stop with KNNWB_ERROR_CANCELLED once *cancel != 0 */
  KnnwbProgressFunc progress;  /**< optional: (items written, items in total) */
  void *progress_data;
} KnnwbWriteControl;

G_END_DECLS

#endif
