/* The first pass of a split-memory run: the schedule that brings the blocks together (self graph:
 * every pair of blocks once, the pair of step R/2 cut into chunks when the ranks share memory on
 * the CPU, into halves otherwise;
 * query run: the own query block against every reference block), each step starting from the
 * rows' thresholds (knnwb_split_best_thresholds). Each job's candidates are taken into k-wide
 * lists while their rows are present (knn_split_best.c), so each rank ends with its own rows'
 * neighbours and the bounds that certify them. Why the schedule is exact and what it costs: the
 * top of knn_split.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include "split/split_internal.h"

/* Bytes before each rank's block in a shared window: the chunk counter of knnwb_split_pair_chunks
 * (a cache line, so the block stays aligned). */
#define KNNWB_SPLIT_HEADER ((size_t)64)
/* The chunks of the pair met from both ends, in eighths of the cut rows: two large ones (each rank
 * takes one), then two small ones that go to whichever rank is free first. Every chunk costs its
 * job's lists of the other whole block (filled, finished, merged: 15-25 ms a chunk at 20,000
 * rows), so few chunks; the small ones leave an imbalance of at most an eighth of the pair. */
static const size_t knnwb_split_pair_eighths[] = {0, 3, 6, 7, 8};
#define KNNWB_SPLIT_PAIR_CHUNKS (G_N_ELEMENTS(knnwb_split_pair_eighths) - 1)

/*
 * The pair met from both ends (s = R/2, R even) when the ranks share their blocks: the lower
 * rank's rows are cut into chunks that the two ranks take from a counter in the lower rank's part
 * of the window, so a rank slowed by other work on its core takes fewer of them (as one process's
 * threads share tiles), instead of each scoring a fixed half. The lower rank scores a chunk of its
 * rows against the other block (its chunk's candidates taken into best, the other block's rows'
 * into back), the higher rank its block against a chunk (its rows' candidates taken into best, the
 * chunk rows' into their window of back: every chunk once). Each job starts from the rows'
 * thresholds then: they fall chunk by chunk, and the bounds of the lower rank's back lists tighten
 * the other block's (a pair left out at or above a bound is all the certificate needs: the top
 * of knn_split_best.c). Which rank takes which chunk varies from run to run; the lists do not:
 * each row keeps its k best of all pairs by (distance, index) whatever the order. Local, apart
 * from the counter. mine/other: this rank's block and the other's (whole); room: the pass's room
 * for the lists of this rank's rows that a job produces (knnwb_split_self_pass).
 */
static gboolean knnwb_split_pair_chunks(const KnnwbSplitRun *run, const KnnwbSplitSide *mine,
                                        const KnnwbSplitSide *other, gboolean lower, int *counter,
                                        float *bounds, float *other_bounds,
                                        const KnnwbSplitRoom *room, KnnwbSplitBest *best,
                                        KnnwbSplitBest *back, GError **error)
{
  const size_t cut = lower ? mine->count : other->count;
  const size_t chunks = MIN(cut, (size_t)KNNWB_SPLIT_PAIR_CHUNKS);
  /* Tests: this rank comes late, so the other one takes every chunk. */
  const char *late = g_getenv("KNNWB_SPLIT_LATE_RANK");
  if (late != NULL && atoi(late) == run->group->rank)
    g_usleep(50000);
  gboolean ok = TRUE;
  size_t taken = 0;
  for (size_t c; ok && (c = (size_t)__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED)) < chunks;) {
    const size_t c0 = chunks == KNNWB_SPLIT_PAIR_CHUNKS ? cut * knnwb_split_pair_eighths[c] / 8
                                                        : cut * c / chunks,
                 c1 = chunks == KNNWB_SPLIT_PAIR_CHUNKS ? cut * knnwb_split_pair_eighths[c + 1] / 8
                                                        : cut * (c + 1) / chunks;
    taken++;
    if (knnwb_split_cancelled(run, error)) {
      ok = FALSE;
      break;
    }
    knnwb_split_best_thresholds(run, best, mine->rows, mine->first, mine->rows, bounds);
    if (lower) {
      const KnnwbSplitSide a = {mine->rows, mine->first + c0, c1 - c0, mine->global + c0};
      KnnwbSplitBest b_best = knnwb_split_best_window(back, 0, other->count);
      ok = knnwb_split_select(run, &a, other, bounds + c0, other_bounds, room, best, c0, &b_best,
                              error);
      if (ok) {
        for (size_t t = 0; t < other->count; t++)
          if (!isnan(back->bound[t]))
            other_bounds[t] = MIN(other_bounds[t], back->bound[t]);
      }
    } else {
      const KnnwbSplitSide b = {other->rows, other->first + c0, c1 - c0, other->global + c0};
      KnnwbSplitBest window = knnwb_split_best_window(back, c0, c1 - c0);
      ok = knnwb_split_select(run, mine, &b, bounds, other_bounds + c0, room, best, 0, &window,
                              error);
    }
  }
  g_debug("knnwb: rank %d: %zu of the pair's %zu chunks taken", run->group->rank, taken, chunks);
  return ok;
}

/* The first pass of a self graph (knnwb_split_self_pass) as it goes: the rank's block, the rooms
 * kept for the whole pass, and the run's window of the blocks the ranks share. */
typedef struct {
  const KnnwbSplitRun *run;
  const KnnwbPrepared *own;
  const unsigned char *own_invalid;
  const KnnwbSplitBlocks *blocks;
  KnnwbSplitBest *best;
  KnnwbSplitLayout layout;
  int ranks, rank;
  size_t m;
  KnnwbSplitSide mine;
  uint64_t steps;
  /* The run's window of shared blocks (window->shared: the blocks are read in place; back_shared:
   * the lists that go back lie after each block, and their owner merges them from there). */
  KnnwbSplitWindow *window;
  KnnwbSplitRoom room;
  char *back_room, *visiting;
  float *bounds, *visiting_bounds;
  gint64 since;
} KnnwbSplitSelfPass;

/* A debug line: how much of the pass's lists room is in memory after what (sized for the largest
 * job's kc lists; with the refinement on a GPU only a declined job writes it). */
static void knnwb_split_room_debug(const KnnwbSplitSelfPass *pass, const char *what)
{
  if (g_log_writer_default_would_drop(G_LOG_LEVEL_DEBUG, G_LOG_DOMAIN))
    return;
  const KnnwbSplitRun *run = pass->run;
  const size_t rows = MAX(pass->m, pass->blocks->largest), k = run->options->k;
  const size_t lists = MAX(knnwb_split_lists_bytes(rows, run->kc), knnwb_split_best_bytes(rows, k));
  g_debug("knnwb: rank %d: the lists room after %s: %.0f of %.0f MiB in memory", run->group->rank,
          what, knnwb_memory_resident(pass->room.lists, lists) / 1048576.0, lists / 1048576.0);
}

/* Step 0: the own block against itself, in the rooms kept for the whole pass: one for the lists
 * of the own rows that each job produces (step 0, the pair or its chunks) and then for those that
 * come back, one for the lists that go back. A fresh buffer for each is fresh pages each time
 * (14-36 MB each at 40,000-100,000 rows and k = 20 on 2 ranks), which the kernel clears and faults
 * in again (glibc mmaps blocks above 32 MB afresh whatever knnwb_distributed_init asks).
 * Collective. */
static gboolean knnwb_split_self_own(KnnwbSplitSelfPass *pass, GError **error)
{
  const KnnwbSplitRun *run = pass->run;
  const size_t largest = pass->blocks->largest;
  const size_t rows = MAX(pass->m, largest), k = run->options->k;
  /* (also where the lists of this block's rows are received when they travel) */
  pass->room.lists = g_try_malloc(
      MAX(MAX(knnwb_split_lists_bytes(rows, run->kc), knnwb_split_best_bytes(rows, k)), (size_t)1));
  pass->room.refine = knnwb_split_refine_wanted(run);
  pass->room.cross = pass->ranks > 1 && knnwb_split_cross_wanted(run);
  const gboolean back_room = pass->ranks > 1 && !pass->window->back_shared;
  pass->back_room =
      back_room ? g_try_malloc(MAX(knnwb_split_best_bytes(largest, k), (size_t)1)) : NULL;
  gboolean ok = pass->room.lists != NULL && (!back_room || pass->back_room != NULL);
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate candidate lists for %zu rows x %zu candidates",
                MAX(pass->m, largest), run->kc);
  ok = ok && knnwb_split_select(run, &pass->mine, NULL, NULL, NULL, &pass->room, pass->best, 0,
                                NULL, error);
  knnwb_split_mark(run->group, "step 0 (own block) selected and merged in", &pass->since);
  knnwb_split_room_debug(pass, "step 0");
  if (!run->group->agree(run->group, ok, error))
    return FALSE;
  knnwb_split_mark(run->group, "step 0 waited for the other ranks", &pass->since);
  knnwb_split_progress(run, 1, pass->steps);
  return TRUE;
}

/* The room of a fetched block (shared: none), the own rows' thresholds, and the visiting rows'
 * (they travel with their block). Collective. */
static gboolean knnwb_split_self_visiting_rooms(KnnwbSplitSelfPass *pass, GError **error)
{
  const size_t largest = pass->blocks->largest;
  pass->visiting = pass->window->shared
                       ? NULL
                       : g_try_malloc(MAX(knnwb_split_bytes(&pass->layout, largest), (size_t)1));
  pass->bounds = g_try_new(float, MAX(pass->m, (size_t)1));
  pass->visiting_bounds = g_try_new(float, MAX(largest, (size_t)1));
  gboolean ok = (pass->window->shared || pass->visiting != NULL) && pass->bounds != NULL &&
                pass->visiting_bounds != NULL;
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate room for a visiting block of %zu rows", largest);
  return pass->run->group->agree(pass->run->group, ok, error);
}

/* The pair (mine, q's) of step s, where q = r + s: at s = R/2 it is met from both ends, so each
 * scores half (with shared blocks on the CPU: as many chunks as it takes first). b's candidates are
 * written straight into back, the lists of q's whole block, which go back to q. */
static gboolean knnwb_split_self_pair(KnnwbSplitSelfPass *pass, int s, int q, KnnwbPrepared *view,
                                      size_t q_first, size_t q_rows, KnnwbSplitBest *back,
                                      GError **error)
{
  const KnnwbSplitRun *run = pass->run;
  const int r = pass->rank;
  KnnwbSplitSide a = pass->mine, b = {view, 0, q_rows, q_first};
  /* Chunks from the counter on a two-sided backend (the CPU's: a chunk's arithmetic outweighs
   * its lists); on GPUs every chunk costs lists of the whole other block for a little arithmetic,
   * so the fixed halves (one H200, 2 ranks: the pair 1.42-1.47 s against 1.74-1.88 s real-like,
   * 2.85-3.01 s against 3.07-3.29 s on 1 M clusters). KNNWB_SPLIT_CHUNKS=0 or 1 (tests,
   * benchmarks): the halves or the chunks on any backend. */
  const char *chunks = g_getenv("KNNWB_SPLIT_CHUNKS");
  const gboolean chunked = pass->window->shared && 2 * s == pass->ranks &&
                           (chunks != NULL ? strcmp(chunks, "0") != 0 : run->two_sided);
  if (2 * s == pass->ranks && !chunked) {
    if (r < q) {
      a.count = pass->m / 2;
    } else {
      b.first = q_rows / 2;
      b.count = q_rows - q_rows / 2;
      b.global = q_first + b.first;
    }
  }
  gboolean ok;
  if (chunked) {
    const int lower = MIN(r, q);
    ok = knnwb_split_pair_chunks(run, &a, &b, r == lower, (int *)pass->window->parts[lower],
                                 pass->bounds, pass->visiting_bounds, &pass->room, pass->best, back,
                                 error);
  } else {
    KnnwbSplitBest window = knnwb_split_best_window(back, b.first, b.count);
    ok = knnwb_split_select(run, &a, &b, pass->bounds + a.first, pass->visiting_bounds + b.first,
                            &pass->room, pass->best, a.first, &window, error);
  }
  return ok;
}

/* The lists of this block's rows that rank p computed, read in place from p's part of the window
 * and merged; the parts are written again (the next step's lists) only once every owner has read
 * its own. Collective. */
static gboolean knnwb_split_self_back_shared(KnnwbSplitSelfPass *pass, int p, gboolean ok,
                                             GError **error)
{
  const KnnwbKnnGroup *group = pass->run->group;
  if (!group->agree(group, ok, error) || !group->share_sync(group, error))
    return FALSE;
  KnnwbSplitBest from_p = knnwb_split_best_over(
      (char *)pass->window->parts[p] + pass->window->back_offset, pass->m, pass->run->options->k);
  knnwb_split_best_merge(pass->best, &from_p, 0, pass->run->threads);
  return group->share_sync(group, error);
}

/* The lists of q's block (back) sent to q, and those of this block's rows that rank p computed
 * received in the pass's room and merged. After the last step (s) the window of shared blocks is
 * given back first, so the exchange can use it. Collective. */
static gboolean knnwb_split_self_back_sent(KnnwbSplitSelfPass *pass, int s, int q, int p,
                                           const KnnwbSplitBest *back, gboolean ok, GError **error)
{
  const KnnwbSplitRun *run = pass->run;
  const KnnwbKnnGroup *group = run->group;
  /* The last step has read the shared blocks (every rank reaches this, failed or not): the
   * window is free for the lists that go back. */
  if (pass->window->shared && 2 * (s + 1) > pass->ranks) {
    pass->window->shared = FALSE;
    if (!group->share_end(group, ok ? error : NULL))
      ok = FALSE;
  }
  /* Received whole over the room: nothing to empty first. */
  const size_t k = run->options->k;
  KnnwbSplitBest from_p = knnwb_split_best_over(pass->room.lists, pass->m, k);
  if (group->agree(group, ok, error)) {
    ok = knnwb_split_shift(group, q, back->buffer, knnwb_split_best_bytes(back->rows, k), p,
                           from_p.buffer, knnwb_split_best_bytes(pass->m, k), error);
    if (ok)
      knnwb_split_best_merge(pass->best, &from_p, 0, run->threads);
  } else {
    ok = FALSE;
  }
  return ok;
}

/* Step s: block A_{r+s} comes to this rank (every rank sends its block to rank r - s), the pair
 * is scored, and the visiting rows' candidates go back to their owner while this block's rows'
 * come from rank r - s. Collective. */
static gboolean knnwb_split_self_step(KnnwbSplitSelfPass *pass, int s, GError **error)
{
  const KnnwbSplitRun *run = pass->run;
  const KnnwbKnnGroup *group = run->group;
  const int R = pass->ranks, r = pass->rank;
  const int q = (r + s) % R, p = (r - s + R) % R;
  size_t q_first, q_rows;
  knnwb_split_rows_of(pass->blocks, q, &q_first, &q_rows);
  KnnwbPrepared view;
  knnwb_split_best_thresholds(run, pass->best, pass->own, 0, pass->own, pass->bounds);
  if (pass->window->shared)
    knnwb_split_view(&pass->layout, pass->own, (char *)pass->window->parts[q] + KNNWB_SPLIT_HEADER,
                     q_rows, &view);
  if ((!pass->window->shared &&
       !knnwb_split_fetch(group, &pass->layout, pass->own, pass->own_invalid, p, q, q_rows,
                          pass->visiting, &view, error)) ||
      !knnwb_split_shift(group, p, pass->bounds, pass->m * sizeof(float), q, pass->visiting_bounds,
                         q_rows * sizeof(float), error))
    return FALSE;
  knnwb_split_mark(group,
                   pass->window->shared ? "block in shared memory, bounds fetched in"
                                        : "block fetched in",
                   &pass->since);
  char *back_room = pass->window->back_shared
                        ? (char *)pass->window->parts[r] + pass->window->back_offset
                        : pass->back_room;
  KnnwbSplitBest back = {0};
  gboolean ok =
      !knnwb_split_cancelled(run, error) &&
      knnwb_split_best_init_in(&back, q_rows, run->options->k, back_room, run->threads, error) &&
      knnwb_split_self_pair(pass, s, q, &view, q_first, q_rows, &back, error);
  knnwb_split_mark(group, "pair selected and merged in", &pass->since);
  knnwb_split_room_debug(pass, "the pair");
  ok = pass->window->back_shared ? knnwb_split_self_back_shared(pass, p, ok, error)
                                 : knnwb_split_self_back_sent(pass, s, q, p, &back, ok, error);
  knnwb_split_best_clear(&back);
  knnwb_split_mark(group, "visiting rows' candidates returned and merged in", &pass->since);
  knnwb_split_progress(run, (uint64_t)s + 1, pass->steps);
  return ok;
}

/* The first pass of a self graph: every pair of blocks once (see the top of knn_split.c).
 * Collective. */
gboolean knnwb_split_self_pass(const KnnwbSplitRun *run, const KnnwbPrepared *own,
                               const unsigned char *own_invalid, const KnnwbSplitBlocks *blocks,
                               KnnwbSplitWindow *window, KnnwbSplitBest *best, GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  KnnwbSplitSelfPass pass = {.run = run,
                             .own = own,
                             .own_invalid = own_invalid,
                             .blocks = blocks,
                             .best = best,
                             .layout = knnwb_split_layout(own->metric, own->scale_exponent, own->d),
                             .ranks = group->size,
                             .rank = group->rank,
                             .steps = (uint64_t)group->size / 2 + 1,
                             .window = window,
                             .since = g_get_monotonic_time()};
  size_t first;
  knnwb_split_rows_of(blocks, pass.rank, &first, &pass.m);
  pass.mine = (KnnwbSplitSide){own, 0, pass.m, first};
  knnwb_split_progress(run, 0, pass.steps);
  gboolean ok = knnwb_split_self_own(&pass, error) && knnwb_split_self_visiting_rooms(&pass, error);
  for (int s = 1; 2 * s <= pass.ranks && ok; s++)
    ok = knnwb_split_self_step(&pass, s, error);
  /* (A window still open is the run's to close: the own rows may live there.) */
  g_free(pass.room.lists);
  g_free(pass.back_room);
  g_free(pass.visiting);
  g_free(pass.bounds);
  g_free(pass.visiting_bounds);
  return ok;
}

/* The first pass of a query run: the own query block against every reference block, its own
 * first. Collective. */
gboolean knnwb_split_query_pass(const KnnwbSplitRun *run, const KnnwbPrepared *query,
                                size_t query_first, const KnnwbPrepared *reference,
                                const unsigned char *reference_invalid,
                                const KnnwbSplitBlocks *blocks, KnnwbSplitBest *best,
                                GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  const int R = group->size, r = group->rank;
  knnwb_split_progress(run, 0, (uint64_t)R);
  const KnnwbSplitLayout layout =
      knnwb_split_layout(reference->metric, reference->scale_exponent, reference->d);
  const size_t largest = blocks->largest;
  char *visiting = g_try_malloc(MAX(knnwb_split_bytes(&layout, largest), (size_t)1));
  gboolean ok = visiting != NULL;
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate room for a visiting block of %zu rows", largest);
  float *bounds = g_try_new(float, MAX(query->n, (size_t)1));
  /* The steps' job room, kept for the whole pass (fresh pages each step cost their faults). */
  KnnwbSplitRoom room = {g_try_malloc(MAX(knnwb_split_lists_bytes(query->n, run->kc), (size_t)1)),
                         knnwb_split_refine_wanted(run), FALSE};
  if (ok && (bounds == NULL || room.lists == NULL)) {
    ok = FALSE;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the candidate lists of %zu rows x %zu candidates", query->n,
                run->kc);
  }
  ok = group->agree(group, ok, error);
  KnnwbSplitSide mine = {query, 0, query->n, query_first};
  for (int s = 0; s < R && ok; s++) {
    const int q = (r + s) % R, p = (r - s + R) % R;
    size_t q_first, q_rows;
    knnwb_split_rows_of(blocks, q, &q_first, &q_rows);
    KnnwbPrepared view;
    const KnnwbPrepared *block = reference;
    if (s > 0) {
      if (!knnwb_split_fetch(group, &layout, reference, reference_invalid, p, q, q_rows, visiting,
                             &view, error)) {
        ok = FALSE;
        break;
      }
      block = &view;
    }
    const KnnwbSplitSide b = {block, 0, q_rows, q_first};
    /* the first step has nothing to start from */
    if (s > 0)
      knnwb_split_best_thresholds(run, best, query, 0, reference, bounds);
    const gboolean local =
        !knnwb_split_cancelled(run, error) &&
        knnwb_split_panel(run, &mine, &b, s > 0 ? bounds : NULL, &room, best, 0, error);
    ok = group->agree(group, local, error);
    knnwb_split_progress(run, (uint64_t)s + 1, (uint64_t)R);
  }
  g_free(room.lists);
  g_free(visiting);
  g_free(bounds);
  return ok;
}
