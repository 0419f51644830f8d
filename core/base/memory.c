/* How much memory the machine can give us, for refusing hopeless runs up front; large blocks in
 * huge pages. */
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <knnwb/parallel.h>
#include "base/base.h"

/* What the machine offers: MemAvailable counts reclaimable page cache, which a large run can use;
 * sysconf's free pages do not. */
static size_t knnwb_memory_machine_available(void)
{
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

/* The first number in a small file (cgroup and proc files), or FALSE ("max" reads as FALSE). */
static gboolean knnwb_memory_read_number(const char *path, const char *key,
                                         unsigned long long *value)
{
  FILE *file = fopen(path, "r");
  if (file == NULL)
    return FALSE;
  char line[256];
  gboolean found = FALSE;
  size_t key_length = key ? strlen(key) : 0;
  while (!found && fgets(line, sizeof line, file) != NULL)
    if (key == NULL || strncmp(line, key, key_length) == 0)
      found = sscanf(line + key_length, " %llu", value) == 1;
  fclose(file);
  return found;
}

size_t knnwb_memory_available(void)
{
  size_t available = knnwb_memory_machine_available();
  /* A process limit (ulimit -v) or a container's cgroup limit can be far below what the machine
   * has; a run refused up front with those numbers beats one that fails half way. */
  struct rlimit limit;
  unsigned long long used = 0;
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      knnwb_memory_read_number("/proc/self/status", "VmSize:", &used)) {
    unsigned long long used_bytes = used * 1024;
    size_t left = limit.rlim_cur > used_bytes ? (size_t)(limit.rlim_cur - used_bytes) : 0;
    available = MIN(available, left);
  }
  unsigned long long cgroup_max = 0, cgroup_current = 0;
  if (knnwb_memory_read_number("/sys/fs/cgroup/memory.max", NULL, &cgroup_max) &&
      knnwb_memory_read_number("/sys/fs/cgroup/memory.current", NULL, &cgroup_current))
    available = MIN(available, cgroup_max > cgroup_current ? (size_t)(cgroup_max - cgroup_current)
                                                           : (size_t)0);
  return available;
}

char *knnwb_memory_format(size_t bytes)
{
  return g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);
}

static gboolean knnwb_huge_pages_wanted(void)
{
  static gsize wanted;
  if (g_once_init_enter(&wanted)) {
    const char *v = g_getenv("KNNWB_HUGE_PAGES");
    g_once_init_leave(&wanted, v != NULL && strcmp(v, "0") == 0 ? 1 : 2);
  }
  return wanted == 2;
}

void *knnwb_memory_try_alloc(size_t bytes, gboolean zeroed)
{
  void *block = zeroed ? g_try_malloc0(bytes) : g_try_malloc(bytes);
#ifdef MADV_HUGEPAGE
  const long page = sysconf(_SC_PAGESIZE);
  if (block != NULL && bytes >= KNNWB_MEMORY_HUGE_MIN && page > 0 && knnwb_huge_pages_wanted()) {
    /* The whole pages inside the block (malloc's header shares the first); the kernel maps huge
     * pages where the range holds aligned 2 MiB. A refusal (no THP in this kernel) changes
     * nothing. */
    const uintptr_t start =
        ((uintptr_t)block + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    const uintptr_t end = ((uintptr_t)block + bytes) / (uintptr_t)page * (uintptr_t)page;
    if (end > start)
      (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
  }
#endif
  return block;
}

/* Under AddressSanitizer the process's blocks come from the sanitizer's allocator, not glibc's
 * heap: there is nothing of ours to trim. */
#if defined(__SANITIZE_ADDRESS__)
#define KNNWB_MEMORY_GLIBC_HEAP 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KNNWB_MEMORY_GLIBC_HEAP 0
#endif
#endif
#ifndef KNNWB_MEMORY_GLIBC_HEAP
#define KNNWB_MEMORY_GLIBC_HEAP 1
#endif

void knnwb_memory_trim(void)
{
#if defined(__GLIBC__) && KNNWB_MEMORY_GLIBC_HEAP
  /* One caller at a time. Where another allocator has served the process (valgrind's, a
   * sanitizer's), glibc's arenas are set up by this first call; two threads doing that at once
   * both take the main arena as their own, and glibc aborts when the second one exits (split ranks
   * run as threads in the tests). */
  static GMutex lock;
  g_mutex_lock(&lock);
  (void)malloc_trim(0);
  g_mutex_unlock(&lock);
#endif
}

void knnwb_memory_give_back(void *block, size_t from, size_t to)
{
#ifdef MADV_DONTNEED
  const long page = sysconf(_SC_PAGESIZE);
  if (block == NULL || page <= 0 || to <= from)
    return;
  /* (inward to whole pages: malloc's header and the neighbours' bytes share the end pages) */
  const uintptr_t start =
      ((uintptr_t)block + from + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
  const uintptr_t end = ((uintptr_t)block + to) / (uintptr_t)page * (uintptr_t)page;
  if (end > start)
    (void)madvise((void *)start, end - start, MADV_DONTNEED);
#else
  (void)block;
  (void)from;
  (void)to;
#endif
}

size_t knnwb_memory_resident(const void *block, size_t bytes)
{
  const long page = sysconf(_SC_PAGESIZE);
  if (block == NULL || bytes == 0 || page <= 0)
    return 0;
  const uintptr_t start = (uintptr_t)block / (uintptr_t)page * (uintptr_t)page;
  const size_t pages = ((uintptr_t)block + bytes - start + (size_t)page - 1) / (size_t)page;
  g_autofree unsigned char *flags = g_try_malloc(pages);
  if (flags == NULL || mincore((void *)start, pages * (size_t)page, flags) != 0)
    return 0;
  size_t resident = 0;
  for (size_t i = 0; i < pages; i++)
    resident += flags[i] & 1;
  return resident * (size_t)page;
}
