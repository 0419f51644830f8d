/* How much memory the machine can give us, for refusing hopeless runs up front. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "knn_internal.h"

size_t knnwb_memory_available(void)
{
  /* MemAvailable counts reclaimable page cache, which a large run can use; sysconf's free pages
   * do not. */
  FILE *meminfo = fopen("/proc/meminfo", "r");
  if (meminfo != NULL) {
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, meminfo) != NULL)
      if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
        break;
    fclose(meminfo);
    if (kib > 0)
      return (size_t)kib * 1024;
  }
  long pages = sysconf(_SC_AVPHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0)
    return (size_t)pages * (size_t)page_size;
  return SIZE_MAX;
}

char *knnwb_memory_format(size_t bytes)
{
  return g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);
}
