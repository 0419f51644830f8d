/* A progress callback for the tests of parallel loops that report as they go (the tree's search,
 * the metafeatures' expansion): the first report holds the reporting thread 200 ms, so that the
 * other threads go on and one of them finishes while it reports. The callback asserts that no
 * report goes back and none passes the total; the caller then asserts that the last report is the
 * whole count (the last rows must be reported even where another thread held the report). */
#ifndef KNNWB_TEST_PROGRESS_H
#define KNNWB_TEST_PROGRESS_H

#include <stdint.h>
#include <glib.h>

/* The reports so far: the last count and total, and how many there were. */
typedef struct {
  uint64_t done, total, reports;
} KnnwbTestProgress;

/* A KnnwbProgressFunc; data is a KnnwbTestProgress, zeroed before the run. */
static inline void knnwb_test_progress_held(uint64_t done, uint64_t total, void *data)
{
  KnnwbTestProgress *last = data;
  g_assert_cmpuint(done, <=, total);
  g_assert_cmpuint(done, >=, last->done); /* (never back) */
  if (last->reports++ == 0)
    g_usleep(200000);
  last->done = done;
  last->total = total;
}

#endif
