/*
 * Host work taken off the critical path of a GPU run: the pages of the host arrays a selection
 * fills are faulted in by helper threads while the GPU computes, and a run's big blocks are freed
 * by a helper thread after it returns. On the GPU machines fresh host memory is slow to fault in
 * (a virtual machine's memory grows as it is touched), and faulting in or unmapping the ~2 GB of a
 * 1.5 M-row run took about 0.4 s of host time that no number of GPUs shortened.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <knnwb/parallel.h>
#include "base/base.h"

/* Pieces of at most this many bytes are faulted in by one call, so that threads share the work. */
#define KNNWB_PREFAULT_PIECE ((size_t)64 << 20)

typedef struct {
  char *start;
  size_t bytes;
} KnnwbPrefaultPiece;

struct KnnwbPrefault {
  GThread *thread;
  int threads;
  GArray *pieces; /* KnnwbPrefaultPiece */
  gint stop;      /* no more pieces: the kernel lacks the call, or the caller no longer waits */
};

static void knnwb_prefault_pieces(size_t first, size_t last, void *user)
{
  KnnwbPrefault *prefault = user;
  for (size_t p = first; p < last; p++) {
    if (g_atomic_int_get(&prefault->stop))
      return;
#ifdef MADV_POPULATE_WRITE
    const KnnwbPrefaultPiece *piece = &g_array_index(prefault->pieces, KnnwbPrefaultPiece, p);
    /* Faults the pages in writable without writing them: the values, which the GPU's download
     * may be writing at the same time, stay as they are. Errors only leave the faults for later. */
    if (madvise(piece->start, piece->bytes, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
      g_atomic_int_set(&prefault->stop, 1); /* a kernel before 5.14 */
#else
    g_atomic_int_set(&prefault->stop, 1);
#endif
  }
}

static gpointer knnwb_prefault_run(gpointer user)
{
  KnnwbPrefault *prefault = user;
  knnwb_parallel_for(prefault->threads, prefault->pieces->len, 1, knnwb_prefault_pieces, prefault);
  return NULL;
}

KnnwbPrefault *knnwb_prefault_start(void *const *blocks, const size_t *bytes, size_t n_blocks,
                                    int threads)
{
  const long page_size = sysconf(_SC_PAGESIZE);
  if (page_size <= 0)
    return NULL;
  const uintptr_t page = (uintptr_t)page_size;
  KnnwbPrefault *prefault = g_try_new0(KnnwbPrefault, 1);
  if (prefault == NULL)
    return NULL;
  prefault->threads = MAX(1, threads);
  prefault->pieces = g_array_new(FALSE, FALSE, sizeof(KnnwbPrefaultPiece));
  for (size_t b = 0; b < n_blocks; b++) {
    if (blocks[b] == NULL)
      continue;
    /* The whole pages inside the block: its first and last partial pages fault in when used. */
    uintptr_t start = ((uintptr_t)blocks[b] + page - 1) / page * page;
    uintptr_t end = ((uintptr_t)blocks[b] + bytes[b]) / page * page;
    for (; start < end; start += KNNWB_PREFAULT_PIECE) {
      KnnwbPrefaultPiece piece = {(char *)start, MIN(KNNWB_PREFAULT_PIECE, (size_t)(end - start))};
      g_array_append_val(prefault->pieces, piece);
    }
  }
  if (prefault->pieces->len > 0)
    prefault->thread = knnwb_thread_try_start("knnwb-prefault", knnwb_prefault_run, prefault);
  if (prefault->thread == NULL) {
    g_array_free(prefault->pieces, TRUE);
    g_free(prefault);
    return NULL;
  }
  return prefault;
}

void knnwb_prefault_finish(KnnwbPrefault *prefault)
{
  if (prefault == NULL)
    return;
  /* A selection that ended first (small, cancelled, failed) does not wait for the rest: the pages
   * left fault in when written, as without the helpers. */
  g_atomic_int_set(&prefault->stop, 1);
  g_thread_join(prefault->thread);
  g_array_free(prefault->pieces, TRUE);
  g_free(prefault);
}

/* Blocks handed over and not yet freed: queued until knnwb_release_start, then counted until
 * their helper thread has freed them, so that the next run can wait for them. */
static GMutex knnwb_release_lock;
static GCond knnwb_release_done;
static GPtrArray *knnwb_release_queue;
static guint knnwb_release_pending;

static gpointer knnwb_release_run(gpointer user)
{
  GPtrArray *blocks = user;
  g_ptr_array_free(blocks, TRUE); /* its free function is g_free */
  g_mutex_lock(&knnwb_release_lock);
  knnwb_release_pending--;
  g_cond_broadcast(&knnwb_release_done);
  g_mutex_unlock(&knnwb_release_lock);
  return NULL;
}

void knnwb_release_later(void *const *blocks, const size_t *bytes, size_t n_blocks)
{
  size_t total = 0;
  for (size_t b = 0; b < n_blocks; b++)
    total += blocks[b] != NULL ? bytes[b] : 0;
  /* Freed here when small, or when memory is short: the caller's next allocations may need the
   * room at once (a process limit, a container). */
  if (total < KNNWB_RELEASE_LATER_MIN || knnwb_memory_available() / 4 < total) {
    for (size_t b = 0; b < n_blocks; b++)
      g_free(blocks[b]);
    return;
  }
  g_mutex_lock(&knnwb_release_lock);
  if (knnwb_release_queue == NULL)
    knnwb_release_queue = g_ptr_array_new_with_free_func(g_free);
  for (size_t b = 0; b < n_blocks; b++)
    if (blocks[b] != NULL)
      g_ptr_array_add(knnwb_release_queue, blocks[b]);
  g_mutex_unlock(&knnwb_release_lock);
}

void knnwb_release_start(void)
{
  g_mutex_lock(&knnwb_release_lock);
  GPtrArray *blocks = g_steal_pointer(&knnwb_release_queue);
  if (blocks != NULL)
    knnwb_release_pending++;
  g_mutex_unlock(&knnwb_release_lock);
  if (blocks == NULL)
    return;
  GThread *thread = knnwb_thread_try_start("knnwb-release", knnwb_release_run, blocks);
  if (thread == NULL)
    knnwb_release_run(blocks);
  else
    g_thread_unref(thread);
}

void knnwb_release_wait(void)
{
  knnwb_release_start();
  g_mutex_lock(&knnwb_release_lock);
  while (knnwb_release_pending > 0)
    g_cond_wait(&knnwb_release_done, &knnwb_release_lock);
  g_mutex_unlock(&knnwb_release_lock);
}
