/* The window of a self run's blocks where the ranks share memory (one host): each rank publishes
 * its prepared block once, the others read it in place, and the lists that go back to a rank lie
 * after its block. Open from the first pass to the end of the certify rounds when the lists go
 * back through it (the own rows then live there alone: knn_split.c), else closed by the pass. */
#include <string.h>
#include <knnwb/error.h>
#include "base/base.h"
#include "split/split_internal.h"

gboolean knnwb_split_window_begin(const KnnwbKnnGroup *group, const KnnwbSplitLayout *layout,
                                  size_t k, const KnnwbSplitBlocks *blocks, int threads,
                                  KnnwbSplitWindow *window, GError **error)
{
  memset(window, 0, sizeof *window);
  if (group->share_begin == NULL || group->size <= 1)
    return TRUE;
  window->parts = g_new0(void *, (size_t)group->size);
  size_t first, m;
  knnwb_split_rows_of(blocks, group->rank, &first, &m);
  const size_t block = KNNWB_SPLIT_HEADER + knnwb_split_bytes(layout, m);
  /* The same on every rank (the largest block's end, on a cache line), so each finds the others'.
   */
  const size_t largest_block = KNNWB_SPLIT_HEADER + knnwb_split_bytes(layout, blocks->largest);
  const size_t back_offset =
      (largest_block + KNNWB_SPLIT_HEADER - 1) / KNNWB_SPLIT_HEADER * KNNWB_SPLIT_HEADER;
  const size_t back = knnwb_split_best_bytes(blocks->largest, k);
  size_t part_bytes = block;
  /* KNNWB_SPLIT_BACK_SHARED=0 (tests, benchmarks): the lists go back as an exchange. */
  if (g_strcmp0(g_getenv("KNNWB_SPLIT_BACK_SHARED"), "0") != 0) {
    window->shared = group->share_begin(group, back_offset + back, window->parts, error);
    window->back_shared = window->shared;
    window->back_offset = back_offset;
    part_bytes = back_offset + back;
  }
  if (!window->shared && (error == NULL || *error == NULL)) {
    window->shared = group->share_begin(group, block, window->parts, error);
    part_bytes = block;
  }
  if (!window->shared) /* FALSE with *error unset: not shared */
    return error == NULL || *error == NULL;
  /* Fresh shared pages are slow to fault in (4 KiB pages of a shared file, 1 GB of them for a
   * real-like rank at 2 ranks): they fault in on helper threads while the rank prepares its rows
   * (KNNWB_SPLIT_WINDOW_AHEAD=0: when the pack writes them). */
  if (g_strcmp0(g_getenv("KNNWB_SPLIT_WINDOW_AHEAD"), "0") != 0)
    window->ahead = knnwb_prefault_start(&window->parts[group->rank], &part_bytes, 1, threads);
  return TRUE;
}

gboolean knnwb_split_window_fill(const KnnwbSplitRun *run, const KnnwbPrepared *own,
                                 const unsigned char *own_invalid, const KnnwbSplitBlocks *blocks,
                                 KnnwbSplitWindow *window, GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  g_clear_pointer(&window->ahead, knnwb_prefault_finish);
  if (!window->shared)
    return TRUE;
  size_t first, m;
  knnwb_split_rows_of(blocks, group->rank, &first, &m);
  const KnnwbSplitLayout layout = knnwb_split_layout(own->metric, own->scale_exponent, own->d);
  char *part = window->parts[group->rank];
  *(int *)part = 0; /* the chunk counter of the pair this rank's block is cut for */
  knnwb_split_pack_block(&layout, own, own_invalid, m, part + KNNWB_SPLIT_HEADER, run->threads);
  if (group->share_sync(group, error))
    return TRUE;
  window->shared = window->back_shared = FALSE;
  group->share_end(group, NULL);
  return FALSE;
}

gboolean knnwb_split_window_close(const KnnwbKnnGroup *group, KnnwbSplitWindow *window,
                                  GError **error)
{
  gboolean ok = TRUE;
  /* (before the pages go: the helpers may still be faulting them in) */
  g_clear_pointer(&window->ahead, knnwb_prefault_finish);
  if (window->shared)
    ok = group->share_end(group, error);
  window->shared = window->back_shared = FALSE;
  g_clear_pointer(&window->parts, g_free);
  return ok;
}
