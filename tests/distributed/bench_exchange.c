/*
 * How fast the group's exchange and reduce move bytes between MPI ranks: the transports the kNN run
 * uses for the candidate exchange and the threshold rounds, measured alone. Each rank sends
 * --mib MiB to every other rank (fresh buffers each repetition, as the kNN run allocates them) and
 * reduces --reduce int64 values; the content is checked after each transfer, so a fast wrong
 * transport fails. Run it twice to compare the paths: KNNWB_MPI_SHARED=0 (Open MPI's messages)
 * and unset (the shared-memory window when all ranks share a host).
 * The board of bounds (ranks of one host) is checked with --reduce floats after the reduce, and the
 * blocks lent by share_begin (4 MiB a rank: read by all, given back at share_end) after that.
 * Usage: mpirun -np R bench_exchange [--mib M] [--reduce N] [--reps R]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <glib.h>
#include <knnwb/distributed.h>
#include <knnwb/knn_group.h>

static double knnwb_bench_now(void)
{
  return (double)g_get_monotonic_time() / 1e6;
}

/* The board of bounds (ranks of one host): a value is never raised, a first post already sees
 * whatever the others posted before it (between the own and the lowest value), and once every
 * rank has posted, every rank reads the lowest. The board is there exactly when the shared window
 * is used (KNNWB_MPI_SHARED=1), on every rank alike. Returns the failures. */
static int check_board(const KnnwbKnnGroup *group, size_t n)
{
  const int me = group->rank;
  int failures = 0;
  const gboolean open = group->board_open(group, n, NULL);
  int64_t agreed[2] = {open, open};
  group->reduce(group, &agreed[0], 1, KNNWB_GROUP_MIN, NULL);
  group->reduce(group, &agreed[1], 1, KNNWB_GROUP_MAX, NULL);
  /* KNNWB_MPI_SHARED=1: a board (on one host); =0: none; unset: either, on every rank alike. */
  const char *shared = g_getenv("KNNWB_MPI_SHARED");
  const int expect = shared == NULL ? -1 : strcmp(shared, "1") == 0 && n > 0;
  if (agreed[0] != agreed[1] || (expect >= 0 && open != expect)) {
    fprintf(stderr, "rank %d: board %s, expected %s, ranks agree: %s\n", me,
            open ? "open" : "not open",
            expect > 0    ? "open"
            : expect == 0 ? "none"
                          : "either",
            agreed[0] == agreed[1] ? "yes" : "no");
    return 1;
  }
  if (!open)
    return 0;
  float *values = g_new(float, n), *lowest = g_new(float, n);
  for (size_t i = 0; i < n; i++) {
    values[i] = (float)((i * 7 + (size_t)me * 13) % 101) - 50.0f;
    lowest[i] = INFINITY;
    for (int r = 0; r < group->size; r++)
      lowest[i] = MIN(lowest[i], (float)((i * 7 + (size_t)r * 13) % 101) - 50.0f);
  }
  group->board_lower(group, values, n);
  size_t expected_lowered = 0;
  for (size_t i = 0; i < n && failures < 10; i++) {
    const float own = (float)((i * 7 + (size_t)me * 13) % 101) - 50.0f;
    if (values[i] > own || values[i] < lowest[i]) {
      fprintf(stderr, "rank %d: board entry %zu read %g outside [%g, %g]\n", me, i, values[i],
              lowest[i], own);
      failures++;
    }
    expected_lowered += lowest[i] < values[i];
  }
  group->agree(group, TRUE, NULL); /* every rank has posted */
  const size_t lowered = group->board_lower(group, values, n);
  for (size_t i = 0; i < n && failures < 10; i++) {
    if (values[i] != lowest[i]) {
      fprintf(stderr, "rank %d: board entry %zu read %g, the lowest posted is %g\n", me, i,
              values[i], lowest[i]);
      failures++;
    }
  }
  if (lowered != expected_lowered) {
    fprintf(stderr, "rank %d: %zu entries lowered on the second read, %zu expected\n", me, lowered,
            expected_lowered);
    failures++;
  }
  group->board_close(group, NULL);
  g_free(values);
  g_free(lowest);
  return failures;
}

/* Pages of [block, block + bytes) in memory now (0 once unmapped: mincore fails). */
static size_t resident_pages(const void *block, size_t bytes)
{
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const uintptr_t start = (uintptr_t)block / page * page;
  const size_t pages = ((uintptr_t)block + bytes - start + page - 1) / page;
  g_autofree unsigned char *in = g_new0(unsigned char, pages);
  if (mincore((void *)start, pages * page, in) != 0)
    return 0;
  size_t count = 0;
  for (size_t t = 0; t < pages; t++)
    count += in[t] & 1;
  return count;
}

/* Blocks lent by share_begin (ranks of one host, KNNWB_MPI_SHARED=1): every rank reads the
 * others' words, and once share_end returns the rank's block goes back to the system (a lender
 * searches on for a long time; the block is freed, not reused, at the next share_begin), within
 * 10 s (its pages are given back on a thread), but for the pages it shares with its neighbours at
 * either end. Calling it again checks a fresh block after one
 * given back. Returns the failures. */
static int check_lent(const KnnwbKnnGroup *group, size_t bytes)
{
  const int me = group->rank;
  g_autofree void **blocks = g_new0(void *, group->size);
  if (group->share_begin == NULL || !group->share_begin(group, bytes, blocks, NULL))
    return g_strcmp0(g_getenv("KNNWB_MPI_SHARED"), "1") == 0 ? 1 : 0;
  const size_t words = bytes / sizeof(uint64_t);
  uint64_t *mine = blocks[me];
  for (size_t w = 0; w < words; w++)
    mine[w] = ((uint64_t)me << 48) ^ w;
  group->share_sync(group, NULL);
  int failures = 0;
  for (int r = 0; r < group->size; r++) {
    const uint64_t *theirs = blocks[r];
    for (size_t w = 0; w < words && failures == 0; w++)
      if (theirs[w] != (((uint64_t)r << 48) ^ w)) {
        fprintf(stderr, "rank %d: lent word %zu of rank %d is wrong\n", me, w, r);
        failures++;
      }
  }
  group->share_end(group, NULL);
  size_t left = resident_pages(mine, bytes);
  for (int wait = 0; wait < 1000 && left > 2; wait++) {
    g_usleep(10000);
    left = resident_pages(mine, bytes);
  }
  if (left > 2) {
    fprintf(stderr, "rank %d: %zu pages of its lent block kept after share_end\n", me, left);
    failures++;
  }
  return failures;
}

int main(int argc, char **argv)
{
  const KnnwbKnnGroup *group = NULL;
  GError *error = NULL;
  if (!knnwb_distributed_init(&argc, &argv, &group, &error) || group == NULL) {
    fprintf(stderr, "bench_exchange: run under mpirun with 2 or more ranks (%s)\n",
            error ? error->message : "one rank");
    return 1;
  }
  gint64 mib = 384, reduce_count = 1533876, reps = 3;
  GOptionEntry entries[] = {
      {"mib", 0, 0, G_OPTION_ARG_INT64, &mib, "MiB sent to each other rank", "M"},
      {"reduce", 0, 0, G_OPTION_ARG_INT64, &reduce_count, "int64 values reduced", "N"},
      {"reps", 0, 0, G_OPTION_ARG_INT64, &reps, "repetitions", "R"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new("- group exchange bandwidth");
  g_option_context_add_main_entries(context, entries, NULL);
  if (!g_option_context_parse(context, &argc, &argv, &error)) {
    fprintf(stderr, "bench_exchange: %s\n", error->message);
    return 2;
  }
  const int ranks = group->size, me = group->rank;
  const size_t bytes = (size_t)mib << 20, words = bytes / sizeof(uint64_t);
  int failures = 0;
  for (gint64 rep = 0; rep < reps; rep++) {
    g_autofree const void **send = g_new0(const void *, ranks);
    g_autofree void **receive = g_new0(void *, ranks);
    g_autofree size_t *sizes = g_new0(size_t, ranks);
    for (int r = 0; r < ranks; r++) {
      if (r == me)
        continue;
      uint64_t *out = g_malloc(bytes);
      for (size_t w = 0; w < words; w++)
        out[w] = ((uint64_t)me << 48) ^ ((uint64_t)r << 40) ^ w;
      send[r] = out;
      receive[r] = g_malloc(bytes); /* untouched: its page faults count, as in the kNN run */
      sizes[r] = bytes;
    }
    group->agree(group, TRUE, NULL);
    double start = knnwb_bench_now();
    group->exchange(group, send, sizes, receive, sizes, NULL);
    double exchanged = knnwb_bench_now() - start;
    for (int r = 0; r < ranks; r++) {
      if (r == me)
        continue;
      const uint64_t *in = receive[r];
      for (size_t w = 0; w < words && failures < 10; w++)
        if (in[w] != (((uint64_t)r << 48) ^ ((uint64_t)me << 40) ^ w)) {
          fprintf(stderr, "rank %d: word %zu from rank %d is wrong\n", me, w, r);
          failures++;
        }
      g_free((void *)send[r]);
      g_free(receive[r]);
    }
    int64_t *values = g_new(int64_t, MAX(reduce_count, 1));
    for (gint64 i = 0; i < reduce_count; i++)
      values[i] = (i * 7 + me * 13) % 101;
    group->agree(group, TRUE, NULL);
    start = knnwb_bench_now();
    group->reduce(group, values, (size_t)reduce_count, KNNWB_GROUP_MIN, NULL);
    double reduced = knnwb_bench_now() - start;
    for (gint64 i = 0; i < reduce_count && failures < 10; i++) {
      int64_t expected = INT64_MAX;
      for (int r = 0; r < ranks; r++)
        expected = MIN(expected, (i * 7 + r * 13) % 101);
      if (values[i] != expected) {
        fprintf(stderr, "rank %d: reduced value %" G_GINT64_FORMAT " is wrong\n", me, i);
        failures++;
      }
    }
    g_free(values);
    failures += check_board(group, (size_t)reduce_count);
    failures += check_lent(group, (size_t)4 << 20);
    if (me == 0)
      printf("exchange %" G_GINT64_FORMAT " MiB to each of %d rank(s): %.3f s (%.2f GB/s "
             "received per rank); reduce of %" G_GINT64_FORMAT " int64: %.4f s (shared: %s)\n",
             mib, ranks - 1, exchanged, (double)bytes * (ranks - 1) / exchanged / 1e9, reduce_count,
             reduced, g_getenv("KNNWB_MPI_SHARED") ? g_getenv("KNNWB_MPI_SHARED") : "auto");
  }
  gboolean ok = group->agree(group, failures == 0, &error);
  knnwb_distributed_finalize();
  return ok ? 0 : 1;
}
