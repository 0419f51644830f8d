/*
 * knnwb_prefault_start/finish (core/prefault.c): the pages of fresh memory become resident while
 * another thread writes some of them, and no byte changes (a GPU backend fills the candidate
 * arrays while they are made resident).
 */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "knn_internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static size_t resident_pages(void *start, size_t bytes)
{
  const size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = bytes / page;
  g_autofree unsigned char *vector = g_malloc(pages);
  g_assert_cmpint(mincore(start, pages * page, vector), ==, 0);
  size_t resident = 0;
  for (size_t p = 0; p < pages; p++)
    resident += vector[p] & 1;
  return resident;
}

static void test_prefault_keeps_bytes(void)
{
  const size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = (size_t)40 << 20;
  unsigned char *map =
      mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  g_assert_true(map != MAP_FAILED);
  /* Does this kernel populate? (Linux 5.14 and later.) */
  const gboolean supported = madvise(map, page, MADV_POPULATE_WRITE) == 0;
  /* Two regions that do not start or end on a page boundary, and one empty. */
  KnnwbPrefaultRegion regions[] = {{map + 100, (size_t)24 << 20},
                                   {map + ((size_t)25 << 20) + 7, ((size_t)14 << 20) - 100},
                                   {NULL, 0}};
  KnnwbPrefault *prefault = knnwb_prefault_start(regions, G_N_ELEMENTS(regions), 3);
  /* The owner writes while the pages are populated: every 3rd page gets its number. */
  for (size_t p = 0; p < bytes / page; p += 3)
    memcpy(map + p * page + 17, &p, sizeof p);
  knnwb_prefault_finish(prefault);
  for (size_t p = 0; p < bytes / page; p++) {
    size_t got;
    memcpy(&got, map + p * page + 17, sizeof got);
    g_assert_cmpuint(got, ==, p % 3 == 0 ? p : 0);
    for (size_t b = 0; b < page; b += 509)
      if (b < 17 || b >= 17 + sizeof got)
        g_assert_cmpuint(map[p * page + b], ==, 0);
  }
  if (supported) {
    /* Inside the regions every page is resident now, not just the written third. */
    g_assert_cmpuint(resident_pages(map + page, (size_t)24 << 20), ==, ((size_t)24 << 20) / page);
  } else {
    g_test_message("MADV_POPULATE_WRITE not supported here: only the bytes were checked");
  }
  munmap(map, bytes);
  knnwb_prefault_finish(NULL);
  /* Work never begun (the backend failed before its tile loop) is just dropped. */
  knnwb_prefault_finish(knnwb_prefault_new(regions, G_N_ELEMENTS(regions), 2));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/core/prefault/keeps-bytes", test_prefault_keeps_bytes);
  return g_test_run();
}
