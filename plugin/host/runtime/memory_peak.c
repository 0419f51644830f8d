/*
 * Peak resident memory per pipeline step, without touching the process's own peak: /usr/bin/time,
 * workflow managers and wait4() read the kernel's high-water mark (VmHWM, ru_maxrss), so the host
 * never resets it (writing "5" to /proc/self/clear_refs would). A step's peak is the new process
 * high-water mark when the step raised it (exact), otherwise the largest VmRSS seen by a sampling
 * thread every few milliseconds (a lower bound: a spike shorter than the interval may be missed).
 */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include "runtime/runtime.h"

/* Sampling interval: short enough to see the tile buffers of a kNN step, long enough to cost
 * nothing (one small read of /proc per interval). */
enum { KNNWB_MEMORY_SAMPLE_MICROSECONDS = 2000 };

struct KnnwbHostMemorySampler {
  GThread *thread;
  GMutex lock;
  GCond stop_signal;
  gboolean stop;
  guint64 high_water_before; /* VmHWM when the step started */
  guint64 largest_resident;  /* largest VmRSS sample so far */
};

/* One "Name: N kB" field of /proc/self/status in bytes; 0 when absent (not Linux). */
static guint64 knnwb_host_memory_status_field(const char *name)
{
  FILE *file = fopen("/proc/self/status", "r");
  if (file == NULL)
    return 0;
  char line[256];
  size_t name_length = strlen(name);
  guint64 bytes = 0;
  while (fgets(line, sizeof line, file) != NULL)
    if (strncmp(line, name, name_length) == 0 && line[name_length] == ':') {
      unsigned long long kib = 0;
      if (sscanf(line + name_length + 1, " %llu kB", &kib) == 1)
        bytes = (guint64)kib * 1024;
      break;
    }
  fclose(file);
  return bytes;
}

guint64 knnwb_host_memory_peak(void)
{
  guint64 bytes = knnwb_host_memory_status_field("VmHWM");
  if (bytes > 0)
    return bytes;
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0)
    return (guint64)usage.ru_maxrss * 1024;
  return 0;
}

static gpointer knnwb_host_memory_sampler_main(gpointer data)
{
  KnnwbHostMemorySampler *sampler = data;
  g_mutex_lock(&sampler->lock);
  while (!sampler->stop) {
    g_mutex_unlock(&sampler->lock);
    guint64 resident = knnwb_host_memory_status_field("VmRSS");
    g_mutex_lock(&sampler->lock);
    sampler->largest_resident = MAX(sampler->largest_resident, resident);
    gint64 until = g_get_monotonic_time() + KNNWB_MEMORY_SAMPLE_MICROSECONDS;
    while (!sampler->stop && g_cond_wait_until(&sampler->stop_signal, &sampler->lock, until))
      ;
  }
  g_mutex_unlock(&sampler->lock);
  return NULL;
}

KnnwbHostMemorySampler *knnwb_host_memory_sampler_start(void)
{
  if (knnwb_host_memory_status_field("VmRSS") == 0)
    return NULL; /* no /proc: the report shows the process peak so far instead */
  KnnwbHostMemorySampler *sampler = g_new0(KnnwbHostMemorySampler, 1);
  g_mutex_init(&sampler->lock);
  g_cond_init(&sampler->stop_signal);
  sampler->high_water_before = knnwb_host_memory_peak();
  sampler->largest_resident = knnwb_host_memory_status_field("VmRSS");
  sampler->thread = g_thread_try_new("knnwb-memory", knnwb_host_memory_sampler_main, sampler, NULL);
  return sampler;
}

guint64 knnwb_host_memory_sampler_stop(KnnwbHostMemorySampler *sampler)
{
  if (sampler == NULL)
    return knnwb_host_memory_peak();
  g_mutex_lock(&sampler->lock);
  sampler->stop = TRUE;
  g_cond_signal(&sampler->stop_signal);
  g_mutex_unlock(&sampler->lock);
  if (sampler->thread != NULL)
    g_thread_join(sampler->thread);
  guint64 resident = knnwb_host_memory_status_field("VmRSS");
  guint64 high_water = knnwb_host_memory_peak();
  guint64 peak = MAX(sampler->largest_resident, resident);
  /* The kernel's mark moved during the step: the step set it, and it is exact. */
  if (high_water > sampler->high_water_before)
    peak = MAX(peak, high_water);
  g_mutex_clear(&sampler->lock);
  g_cond_clear(&sampler->stop_signal);
  g_free(sampler);
  return peak;
}
