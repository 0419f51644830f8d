/* The progress line on a terminal: tiles done of total, rate and time left. */
#include <stdio.h>
#include <unistd.h>
#include "host.h"

struct KnnwbHostProgress {
  char *label;
  const char *unit;
  gint64 start_us;
  gboolean printed;
};

KnnwbHostProgress *knnwb_host_progress_new(const char *label, gboolean quiet)
{
  /* Progress is for people: never into logs or pipes, where \r lines are noise. */
  if (quiet || !isatty(STDERR_FILENO) || !knnwb_host_speaks())
    return NULL;
  KnnwbHostProgress *progress = g_new0(KnnwbHostProgress, 1);
  progress->label = g_strdup(label);
  progress->unit = "tiles";
  progress->start_us = g_get_monotonic_time();
  return progress;
}

void knnwb_host_progress_update(uint64_t done, uint64_t total, void *data)
{
  KnnwbHostProgress *progress = data;
  if (progress == NULL || total == 0)
    return;
  double seconds = (double)(g_get_monotonic_time() - progress->start_us) / 1e6;
  double rate = seconds > 0 ? (double)done / seconds : 0;
  char eta[32] = "--";
  if (rate > 0 && done < total) {
    double left = (double)(total - done) / rate;
    if (left >= 3600)
      g_snprintf(eta, sizeof eta, "%dh%02dm", (int)(left / 3600), (int)(left / 60) % 60);
    else if (left >= 60)
      g_snprintf(eta, sizeof eta, "%dm%02ds", (int)(left / 60), (int)left % 60);
    else
      g_snprintf(eta, sizeof eta, "%.0fs", left);
  } else if (done >= total) {
    g_snprintf(eta, sizeof eta, "0s");
  }
  fprintf(stderr, "\r%s: %llu/%llu %s (%3.0f%%), %.1f %s/s, ETA %s   ", progress->label,
          (unsigned long long)done, (unsigned long long)total, progress->unit,
          100.0 * (double)done / (double)total, rate, progress->unit, eta);
  fflush(stderr);
  progress->printed = TRUE;
}

void knnwb_host_progress_set_unit(KnnwbHostProgress *progress, const char *unit)
{
  if (progress != NULL)
    progress->unit = unit;
}

void knnwb_host_progress_finish(KnnwbHostProgress *progress)
{
  if (progress == NULL)
    return;
  if (progress->printed)
    fputc('\n', stderr);
  g_free(progress->label);
  g_free(progress);
}
