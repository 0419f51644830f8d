/* What core/base/ offers the rest of core beyond the public <knnwb/matrix.h>, <knnwb/parallel.h>
 * and <knnwb/error.h>: host work off a GPU run's critical path (background.c), the finite check of
 * a block of rows (matrix.c), the CPU's vector width (vector_width.c), a selection of the first
 * elements of an array (KNNWB_DEFINE_SELECT_FIRST, here). */
#ifndef KNNWB_BASE_H
#define KNNWB_BASE_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>
#include <knnwb/matrix.h>

/**
 * Defines static void name(type *pool, size_t count, size_t k), which moves the k first elements
 * of pool[0, count) (count > k >= 1) by before(const type *, const type *) (a strict order) to its
 * front, in any order: Hoare's selection with a median of three, expected O(count). For the merges
 * of candidate lists, where sorting every candidate cost more than the rest of the merge.
 */
#define KNNWB_DEFINE_SELECT_FIRST(name, type, before)                                              \
  static void name(type *pool, size_t count, size_t k)                                             \
  {                                                                                                \
    size_t lo = 0, hi = count - 1;                                                                 \
    while (lo < hi) {                                                                              \
      const size_t mid = lo + (hi - lo) / 2;                                                       \
      type t;                                                                                      \
      if (before(&pool[mid], &pool[lo]))                                                           \
        (t = pool[mid], pool[mid] = pool[lo], pool[lo] = t);                                       \
      if (before(&pool[hi], &pool[lo]))                                                            \
        (t = pool[hi], pool[hi] = pool[lo], pool[lo] = t);                                         \
      if (before(&pool[hi], &pool[mid]))                                                           \
        (t = pool[hi], pool[hi] = pool[mid], pool[mid] = t);                                       \
      const type pivot = pool[mid];                                                                \
      size_t i = lo, j = hi;                                                                       \
      for (;;) {                                                                                   \
        while (before(&pool[i], &pivot))                                                           \
          i++;                                                                                     \
        while (before(&pivot, &pool[j]))                                                           \
          j--;                                                                                     \
        if (i >= j)                                                                                \
          break;                                                                                   \
        (t = pool[i], pool[i] = pool[j], pool[j] = t);                                             \
        i++;                                                                                       \
        j--;                                                                                       \
      }                                                                                            \
      /* [lo, j] <= pivot <= [j + 1, hi] */                                                        \
      if (k - 1 <= j)                                                                              \
        hi = j;                                                                                    \
      else                                                                                         \
        lo = j + 1;                                                                                \
    }                                                                                              \
  }

/* A neighbour found: its exact distance and its row. Lists of them are ordered by (distance,
 * index), the order of every kNN list knnwb writes. */
typedef struct {
  double distance;
  int64_t index;
} KnnwbNeighbour;

static inline gboolean knnwb_neighbour_before(const KnnwbNeighbour *x, const KnnwbNeighbour *y)
{
  return x->distance != y->distance ? x->distance < y->distance : x->index < y->index;
}

/** qsort's form of knnwb_neighbour_before. */
static inline int knnwb_neighbour_compare(const void *a, const void *b)
{
  const KnnwbNeighbour *x = a, *y = b;
  if (x->distance != y->distance)
    return x->distance < y->distance ? -1 : 1;
  return x->index < y->index ? -1 : (x->index > y->index);
}

typedef struct KnnwbPrefault KnnwbPrefault;
/**
 * Faults in the whole pages of blocks[b] (bytes[b] each; NULL blocks skipped) writable, on a
 * helper thread that uses up to threads threads, without changing their values: other threads
 * (a GPU's download) may write them meanwhile. Needs Linux >= 5.14 (MADV_POPULATE_WRITE); else,
 * or when no thread can start, nothing is done. Returns the handle for knnwb_prefault_finish,
 * or NULL when nothing was started. O(bytes) time, on the helpers.
 */
KnnwbPrefault *knnwb_prefault_start(void *const *blocks, const size_t *bytes, size_t n_blocks,
                                    int threads);
/** Stops the helper after the pieces (64 MiB) it is faulting in, waits for it (NULL: nothing to
 * wait for) and frees the handle. */
void knnwb_prefault_finish(KnnwbPrefault *prefault);

/** The bytes of [block, block + bytes) in memory now (whole pages, mincore), for debug lines
 * that name what holds a process's memory; 0 where it cannot tell. O(bytes / page size). */
size_t knnwb_memory_resident(const void *block, size_t bytes);

/** The whole pages of bytes [from, to) of block (an allocation of knnwb_memory_try_alloc or
 * g_malloc, still to be freed with g_free) given back to the system now: a pass that has read
 * them lowers the process's memory as it goes. They read as zeros afterwards. Linux (madvise
 * MADV_DONTNEED); elsewhere nothing. O(pages). */
void knnwb_memory_give_back(void *block, size_t from, size_t to);

/** The free parts of the heap given back to the system now: memory a pass freed (buffers under
 * the mmap threshold, or placed in a freed part of the heap) stays in the process until a later
 * allocation reuses it. glibc (malloc_trim), one thread at a time; under AddressSanitizer and
 * elsewhere nothing. Safe from any thread. O(heap), a few milliseconds. */
void knnwb_memory_trim(void);

/** Below this many bytes in all, knnwb_release_later frees at once (a thread costs more). */
#define KNNWB_RELEASE_LATER_MIN ((size_t)64 << 20)
/**
 * Hands blocks[0 .. n_blocks) (bytes[b] each, for the total; NULL allowed) over to be freed: at
 * once when the total is small or memory is short (a quarter of knnwb_memory_available), else
 * queued, and freed by a helper thread from knnwb_release_start on, so that unmapping gigabytes
 * holds up neither the caller nor a GPU's next pinned allocations.
 */
void knnwb_release_later(void *const *blocks, const size_t *bytes, size_t n_blocks);
/** Starts a helper thread freeing every queued block (frees them here when none can start). */
void knnwb_release_start(void);
/** knnwb_release_start, then waits until every block handed over so far is freed. */
void knnwb_release_wait(void);

/** Average ranks (1-based, ties sharing their mean rank) of row's d values into ranks (d floats).
 * O(d log d). */
void knnwb_row_ranks(const float *row, size_t d, float *ranks);

/** Whether d floats hold neither NaN nor an infinity (exponent bits all ones). O(d), vectorised. */
gboolean knnwb_floats_finite(const float *values, size_t d);

/**
 * knnwb_matrix_check_finite over rows [first, last) only. Messages name row i as numbered_from + i
 * (its label still matrix's row i): 0 for a whole matrix, the first row's number in the whole run
 * for a rank's block. Errors: KNNWB_ERROR_INVALID_DATA naming the first such row and its first such
 * column. O((last - first) d), on every core.
 */
gboolean knnwb_matrix_check_finite_rows(const KnnwbMatrix *matrix, size_t first, size_t last,
                                        size_t numbered_from, GError **error);

/* Lanes of lane_bytes in the widest vector this CPU runs: 64 bytes with AVX-512F, 32 with AVX2,
 * else 16 (SSE2, NEON), halved down to the lanes the environment variable cap_variable names
 * when it is set (tests compare the widths), but never below 16 bytes. O(1). */
size_t knnwb_vector_lanes(size_t lane_bytes, const char *cap_variable);

#endif
