/* Peak resident memory per pipeline step (Linux: VmHWM, reset through /proc/self/clear_refs). */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include "host.h"

gboolean knnwb_host_memory_reset_peak(void)
{
  /* "5" resets the peak RSS counter (Linux 4.0+); without it the peak is the process's. */
  FILE *file = fopen("/proc/self/clear_refs", "w");
  if (file == NULL)
    return FALSE;
  gboolean ok = fputs("5", file) >= 0;
  ok = (fclose(file) == 0) && ok;
  return ok;
}

guint64 knnwb_host_memory_peak(void)
{
  FILE *file = fopen("/proc/self/status", "r");
  if (file != NULL) {
    char line[256];
    unsigned long long kib = 0;
    gboolean found = FALSE;
    while (fgets(line, sizeof line, file) != NULL)
      if (sscanf(line, "VmHWM: %llu kB", &kib) == 1) {
        found = TRUE;
        break;
      }
    fclose(file);
    if (found)
      return (guint64)kib * 1024;
  }
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0)
    return (guint64)usage.ru_maxrss * 1024;
  return 0;
}
