/*
 * Page faults taken ahead of use, on cores that would idle: while a GPU computes the tile loop,
 * the host's threads make the pages of the candidate arrays resident (first touch of fresh memory
 * cost about 4-5 GB/s on the GPU machines: the extraction's host copies of 1.1 GB of candidates at
 * n = 1.5 M took 0.22-0.25 s, 0.05 s once resident). It starts when the GPU's tile loop does
 * (KnnwbSelectJob.tiles_started): started before, it slowed the GPU's set-up and upload (pinned
 * allocations wait for the address-space lock). MADV_POPULATE_WRITE (Linux 5.14) maps
 * the pages writable without changing a byte, so the owner of the memory may write it while this
 * runs; on older kernels it fails at once and nothing is done.
 */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>
#include "knn_internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Bytes per madvise call: 2 MiB, so that the address-space lock it holds is released often (a
 * GPU's pinned allocations wait for it). */
#define KNNWB_PREFAULT_CHUNK ((size_t)2 << 20)
#define KNNWB_PREFAULT_REGIONS 16

struct KnnwbPrefault {
  gint started;
  GThread *thread;
  KnnwbPrefaultRegion regions[KNNWB_PREFAULT_REGIONS];
  size_t count, current;
  int threads;
  gint unsupported;
  gint64 seconds_us;
  size_t bytes;
};

/* The page-aligned inside of a region: pages the region shares with other memory stay as they
 * are. */
static void knnwb_prefault_span(const KnnwbPrefaultRegion *region, char **start, size_t *bytes)
{
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t begin = ((uintptr_t)region->data + page - 1) & ~(page - 1);
  uintptr_t end = ((uintptr_t)region->data + region->bytes) & ~(page - 1);
  *start = (char *)begin;
  *bytes = end > begin ? end - begin : 0;
}

static void knnwb_prefault_chunks(size_t first, size_t last, void *user)
{
  KnnwbPrefault *prefault = user;
  char *start;
  size_t bytes;
  knnwb_prefault_span(&prefault->regions[prefault->current], &start, &bytes);
  for (size_t c = first; c < last && !g_atomic_int_get(&prefault->unsupported); c++) {
    const size_t at = c * KNNWB_PREFAULT_CHUNK, length = MIN(KNNWB_PREFAULT_CHUNK, bytes - at);
    if (madvise(start + at, length, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
      g_atomic_int_set(&prefault->unsupported, 1);
  }
}

static gpointer knnwb_prefault_main(gpointer user)
{
  KnnwbPrefault *prefault = user;
  const gint64 start = g_get_monotonic_time();
  for (prefault->current = 0; prefault->current < prefault->count; prefault->current++) {
    char *first;
    size_t bytes;
    knnwb_prefault_span(&prefault->regions[prefault->current], &first, &bytes);
    knnwb_parallel_for(prefault->threads, (bytes + KNNWB_PREFAULT_CHUNK - 1) / KNNWB_PREFAULT_CHUNK,
                       1, knnwb_prefault_chunks, prefault);
  }
  prefault->seconds_us = g_get_monotonic_time() - start;
  return NULL;
}

KnnwbPrefault *knnwb_prefault_new(const KnnwbPrefaultRegion *regions, size_t count, int threads)
{
  KnnwbPrefault *prefault = g_new0(KnnwbPrefault, 1);
  for (size_t r = 0; r < count && prefault->count < KNNWB_PREFAULT_REGIONS; r++)
    if (regions[r].data != NULL && regions[r].bytes > 0) {
      prefault->regions[prefault->count++] = regions[r];
      prefault->bytes += regions[r].bytes;
    }
  prefault->threads = MAX(1, threads);
  return prefault;
}

void knnwb_prefault_begin(KnnwbPrefault *prefault)
{
  if (prefault != NULL && prefault->count > 0 &&
      g_atomic_int_compare_and_exchange(&prefault->started, 0, 1))
    prefault->thread = knnwb_thread_try_start("knnwb-prefault", knnwb_prefault_main, prefault);
}

KnnwbPrefault *knnwb_prefault_start(const KnnwbPrefaultRegion *regions, size_t count, int threads)
{
  KnnwbPrefault *prefault = knnwb_prefault_new(regions, count, threads);
  knnwb_prefault_begin(prefault);
  return prefault;
}

void knnwb_prefault_finish(KnnwbPrefault *prefault)
{
  if (prefault == NULL)
    return;
  const gint64 waiting = g_get_monotonic_time();
  if (prefault->thread != NULL) {
    g_thread_join(prefault->thread);
    g_debug("knnwb: %zu MiB of fresh memory made resident in %.3f s on %d thread(s)%s, waited "
            "%.3f s",
            prefault->bytes >> 20, (double)prefault->seconds_us / 1e6, prefault->threads,
            prefault->unsupported ? " (not supported by this kernel: nothing done)" : "",
            (double)(g_get_monotonic_time() - waiting) / 1e6);
  }
  g_free(prefault);
}
