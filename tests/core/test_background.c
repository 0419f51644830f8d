/* Host work off a GPU run's critical path (core/base/background.c): prefaulting keeps every value,
 * even while another thread writes the block; blocks handed to knnwb_release_later are freed (the
 * sanitizer build's leak check sees any that are not) and knnwb_release_wait waits for them. */
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <knnwb/knnwb.h>
#include "base/base.h"

/* 96 MiB fresh from malloc (mapped, not yet touched): the helpers fault it in while this thread
 * writes a pattern into its second half; a block filled before keeps its values too. Then every
 * byte is checked: a prefault that wrote (zeros, say) would break the pattern. */
static void test_prefault_keeps_values(void)
{
  const size_t bytes = (size_t)96 << 20, words = bytes / sizeof(guint32);
  guint32 *fresh = g_malloc(bytes);
  guint32 *filled = g_malloc(bytes / 4);
  for (size_t w = 0; w < words / 4; w++)
    filled[w] = (guint32)w * 2654435761u;
  /* Unaligned ends: the partial pages are left alone. */
  void *blocks[] = {fresh, NULL, (char *)filled + 1};
  const size_t sizes[] = {bytes, 12345, bytes / 4 - 3};
  KnnwbPrefault *prefault = knnwb_prefault_start(blocks, sizes, G_N_ELEMENTS(blocks), 3);
  for (size_t w = words / 2; w < words; w++)
    fresh[w] = (guint32)w ^ 0x5bd1e995u;
  knnwb_prefault_finish(prefault);
  for (size_t w = 0; w < words / 2; w++)
    fresh[w] = (guint32)w ^ 0x5bd1e995u;
  for (size_t w = 0; w < words; w++)
    if (fresh[w] != ((guint32)w ^ 0x5bd1e995u))
      g_error("word %zu of the fresh block changed", w);
  for (size_t w = 0; w < words / 4; w++)
    if (filled[w] != (guint32)w * 2654435761u)
      g_error("word %zu of the filled block changed", w);
  g_free(fresh);
  g_free(filled);
  /* Nothing to do: no handle. */
  void *none[] = {NULL};
  const size_t none_bytes[] = {0};
  g_assert_null(knnwb_prefault_start(none, none_bytes, 1, 2));
  knnwb_prefault_finish(NULL);
}

/* Bytes in blocks malloc maps on their own (every large block), or 0 where that is not known
 * (AddressSanitizer's allocator). */
static size_t mapped_bytes(void)
{
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
  return mallinfo2().hblkhd;
#else
  return 0;
#endif
}

/* Large blocks are queued: still mapped after knnwb_release_later, freed by a helper from
 * knnwb_release_start (first round) or knnwb_release_wait alone (second round), and unmapped once
 * knnwb_release_wait returns. Small ones are freed at once. */
static void test_release_later(void)
{
  for (int round = 0; round < 2; round++) {
    const size_t before = mapped_bytes();
    void *large[] = {g_malloc((size_t)48 << 20), NULL, g_malloc((size_t)40 << 20)};
    memset(large[0], 1, 4096);
    const size_t large_bytes[] = {(size_t)48 << 20, 0, (size_t)40 << 20};
    knnwb_release_later(large, large_bytes, G_N_ELEMENTS(large));
    void *small[] = {g_malloc(1000)};
    const size_t small_bytes[] = {1000};
    knnwb_release_later(small, small_bytes, 1);
    if (before > 0 || mapped_bytes() > 0)
      g_assert_cmpuint(mapped_bytes(), >=, before + ((size_t)88 << 20));
    if (round == 0)
      knnwb_release_start();
    knnwb_release_wait();
    g_assert_cmpuint(mapped_bytes(), <=, before);
    knnwb_release_wait(); /* nothing pending: returns */
  }
}

/* Whether the mapping that holds address p carries the "hg" flag (madvise MADV_HUGEPAGE) in
 * /proc/self/smaps. */
static gboolean mapping_asks_huge(const void *p)
{
  g_autofree char *smaps = NULL;
  g_assert_true(g_file_get_contents("/proc/self/smaps", &smaps, NULL, NULL));
  gboolean inside = FALSE, huge = FALSE;
  g_auto(GStrv) lines = g_strsplit(smaps, "\n", -1);
  for (char **line = lines; *line != NULL; line++) {
    unsigned long long from, to;
    if (sscanf(*line, "%llx-%llx ", &from, &to) == 2 && strchr(*line, '-') < strchr(*line, ' '))
      inside = (uintptr_t)p >= from && (uintptr_t)p < to;
    else if (inside && g_str_has_prefix(*line, "VmFlags:"))
      huge = strstr(*line, " hg") != NULL;
  }
  return huge;
}

/* Large blocks ask for huge pages where the kernel has them (not small ones, nor with
 * KNNWB_HUGE_PAGES=0, in a subprocess), and keep zeroes or values like any block. */
/* knnwb_memory_resident counts the pages written, not those only reserved: a fresh mapping of 64
 * pages holds none, then the three written (and the first's page twice over, counted once). */
static void test_memory_resident(void)
{
  const size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = 64 * page;
  char *block = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  g_assert_true(block != MAP_FAILED);
  g_assert_cmpuint(knnwb_memory_resident(block, bytes), ==, 0);
  block[0] = 1;
  block[1] = 2;
  block[10 * page + 7] = 3;
  block[63 * page] = 4;
  g_assert_cmpuint(knnwb_memory_resident(block, bytes), ==, 3 * page);
  /* a range inside the pages counts the pages it touches */
  g_assert_cmpuint(knnwb_memory_resident(block + 10 * page + 100, 10), ==, page);
  g_assert_cmpuint(knnwb_memory_resident(block + page, 9 * page), ==, 0);
  g_assert_cmpuint(knnwb_memory_resident(NULL, bytes), ==, 0);
  munmap(block, bytes);
}

static void test_huge_pages(void)
{
  const gboolean kernel_has =
      g_file_test("/sys/kernel/mm/transparent_hugepage/enabled", G_FILE_TEST_EXISTS);
  const size_t bytes = KNNWB_MEMORY_HUGE_MIN + 12345;
  if (g_test_subprocess()) {
    g_setenv("KNNWB_HUGE_PAGES", "0", TRUE); /* read at the first call */
    char *block = knnwb_memory_try_alloc(bytes, TRUE);
    g_assert_false(mapping_asks_huge(block + bytes / 2));
    g_free(block);
    return;
  }
  char *zeroed = knnwb_memory_try_alloc(bytes, TRUE);
  char *small = knnwb_memory_try_alloc(KNNWB_MEMORY_HUGE_MIN / 2, FALSE);
  g_assert_nonnull(zeroed);
  g_assert_nonnull(small);
  if (kernel_has)
    g_assert_true(mapping_asks_huge(zeroed + bytes / 2));
  else
    g_test_message("no transparent huge pages in this kernel: the request is not checked");
  g_assert_false(mapping_asks_huge(small + KNNWB_MEMORY_HUGE_MIN / 4));
  for (size_t i = 0; i < bytes; i += 4093)
    g_assert_cmpint(zeroed[i], ==, 0);
  memset(small, 7, KNNWB_MEMORY_HUGE_MIN / 2);
  g_assert_cmpint(small[KNNWB_MEMORY_HUGE_MIN / 2 - 1], ==, 7);
  g_free(zeroed);
  g_free(small);
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
}

typedef struct {
  GMutex lock;
  GCond all_here;
  int waiting;
} TrimStart;

enum { TRIM_THREADS = 8, TRIM_PROCESSES = 24 };

static gpointer trim_together(gpointer data)
{
  TrimStart *start = data;
  g_mutex_lock(&start->lock);
  if (++start->waiting == TRIM_THREADS)
    g_cond_broadcast(&start->all_here);
  while (start->waiting < TRIM_THREADS)
    g_cond_wait(&start->all_here, &start->lock);
  g_mutex_unlock(&start->lock);
  knnwb_memory_trim();
  return NULL;
}

/* knnwb_memory_trim from several threads at once, each in a fresh process: where glibc's heap has
 * not served the process yet (under valgrind or a sanitizer), unserialized calls each set the heap
 * up, and glibc aborts or faults as the threads exit. The race is narrow, so 24 processes try. */
static void test_memory_trim_threads(void)
{
  if (g_test_subprocess()) {
    TrimStart start = {0};
    g_mutex_init(&start.lock);
    g_cond_init(&start.all_here);
    GThread *threads[TRIM_THREADS];
    for (int i = 0; i < TRIM_THREADS; i++)
      threads[i] = g_thread_new("trim", trim_together, &start);
    for (int i = 0; i < TRIM_THREADS; i++)
      g_thread_join(threads[i]);
    g_mutex_clear(&start.lock);
    g_cond_clear(&start.all_here);
    return;
  }
  for (int i = 0; i < TRIM_PROCESSES; i++) {
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
  }
}

/* Resident pages of the whole process, from /proc/self/statm. */
static size_t resident_bytes(void)
{
  unsigned long size = 0, resident = 0;
  FILE *statm = fopen("/proc/self/statm", "r");
  g_assert_nonnull(statm);
  g_assert_cmpint(fscanf(statm, "%lu %lu", &size, &resident), ==, 2);
  fclose(statm);
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* Blocks under the mmap threshold, freed in the middle of the heap (a kept block above each run of
 * them holds the heap's top), stay resident until knnwb_memory_trim gives their pages back. */
static void test_memory_trim_gives_back(void)
{
#if defined(__SANITIZE_ADDRESS__)
  const gboolean sanitized = TRUE;
#elif defined(__has_feature)
  const gboolean sanitized = __has_feature(address_sanitizer);
#else
  const gboolean sanitized = FALSE;
#endif
  if (sanitized) {
    g_test_skip("the sanitizer's allocator serves this build: nothing of glibc's heap to trim");
    return;
  }
  enum { BLOCKS = 2048, BLOCK = 32 * 1024 };
  (void)mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  (void)mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024);
  char *blocks[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = g_malloc(BLOCK);
    memset(blocks[i], 1, BLOCK);
  }
  for (int i = 0; i < BLOCKS; i++)
    if (i % 64 != 63)
      g_clear_pointer(&blocks[i], g_free);
  const size_t before = resident_bytes();
  knnwb_memory_trim();
  const size_t after = resident_bytes();
  g_test_message("resident %zu KiB before the trim, %zu KiB after", before / 1024, after / 1024);
  /* 63 of every 64 blocks (about 63 MiB) can go; ask for half of that. */
  g_assert_cmpuint(before - MIN(before, after), >=, (size_t)BLOCKS * BLOCK / 2);
  for (int i = 0; i < BLOCKS; i++)
    g_free(blocks[i]);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/background/prefault-keeps-values", test_prefault_keeps_values);
  g_test_add_func("/background/release-later", test_release_later);
  g_test_add_func("/background/huge-pages", test_huge_pages);
  g_test_add_func("/background/memory-resident", test_memory_resident);
  g_test_add_func("/background/memory-trim-threads", test_memory_trim_threads);
  g_test_add_func("/background/memory-trim-gives-back", test_memory_trim_gives_back);
  return g_test_run();
}
