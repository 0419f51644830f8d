/* What a split-memory run reports while it works, and how it stops: rank 0's progress line in
 * steps of the schedule (a job's tiles filling in its step), the cancel flag checked between
 * steps, and each rank's debug timing lines (G_MESSAGES_DEBUG=all). */
#include <time.h>
#include <knnwb/error.h>
#include "split/split_internal.h"

/* Shows rank 0's progress: units thousandths of a step (KNNWB_SPLIT_PROGRESS_UNIT). */
static void knnwb_split_show(const KnnwbSplitRun *run, uint64_t units)
{
  KnnwbSplitProgress *p = run->progress;
  /* Re-selection jobs after the pass would count past its end. */
  if (p == NULL || units <= p->shown || units > p->steps * KNNWB_SPLIT_PROGRESS_UNIT)
    return;
  p->shown = units;
  run->options->progress(units, p->steps * KNNWB_SPLIT_PROGRESS_UNIT, run->options->progress_data);
}

/* A job's tiles as a share of the step it belongs to (the select's progress, called by one
 * thread at a time). */
void knnwb_split_job_progress(uint64_t done, uint64_t total, void *data)
{
  const KnnwbSplitRun *run = data;
  if (total > 0)
    knnwb_split_show(run, run->progress->step * KNNWB_SPLIT_PROGRESS_UNIT +
                              MIN(done, total) * (KNNWB_SPLIT_PROGRESS_UNIT - 1) / total);
}

/* A debug line with the seconds since *since (then reset) and the process's CPU seconds so far:
 * where a rank's time goes (on a shared machine the CPU time is the steadier figure). */
void knnwb_split_mark(const KnnwbKnnGroup *group, const char *what, gint64 *since)
{
  const gint64 now = g_get_monotonic_time();
  struct timespec cpu = {0};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  g_debug("knnwb: rank %d: %s %.3f s (CPU time so far %.3f s)", group->rank, what,
          (double)(now - *since) / 1e6, (double)cpu.tv_sec + (double)cpu.tv_nsec / 1e9);
  *since = now;
}

/* Rank 0 shows the job's progress in steps of the schedule: done of total steps are over (the
 * next job's tiles count towards step done). */
void knnwb_split_progress(const KnnwbSplitRun *run, uint64_t done, uint64_t total)
{
  if (run->progress == NULL)
    return;
  run->progress->steps = total;
  run->progress->step = done;
  if (done == 0) /* a pass begins */
    run->progress->shown = 0;
  knnwb_split_show(run, done * KNNWB_SPLIT_PROGRESS_UNIT);
}

gboolean knnwb_split_cancelled(const KnnwbSplitRun *run, GError **error)
{
  if (run->options->cancel != NULL && *run->options->cancel) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "cancelled");
    return TRUE;
  }
  return FALSE;
}
