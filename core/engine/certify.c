/*
 * The certify loop every exact search shares (one process's rounds, the split-memory ranks, the
 * nearest-outside search): the rows whose candidates the rounding-error bound could not certify
 * are selected again with four times as many candidates, refined and certified, until every row is
 * certified; once a round's window would hold a large part of all rows (dense ties: rows alike up
 * to scale, such as two-column correlations or sparse counts), or its rows are so few that their
 * exact distances to every row cost less than a screened round, the rows left are compared with
 * every row instead. The caller says how (KnnwbCertify); the loop decides when.
 */
#include <knnwb/error.h>
#include "engine/engine.h"

/* Once a round's candidates would be a quarter or more of the rows a selection job chooses from,
 * a screened round costs more than the exact distances it saves: its selection's lists (rows x kc)
 * and sorts, then maybe once more with every row (20,011 x 2 rows, abs-pearson, k = 1: 39 s with
 * rounds of 9,216 and 18,106 candidates, against 5 s compared with every row). A split rank's job
 * chooses from its block only, and its lists travel and are merged: there the quarter of a block
 * is the mark (on those rows 2 ranks spent 17 s of 34 s in a round of 2,304 candidates). */
static gboolean knnwb_certify_dense(const KnnwbCertify *certify, size_t kc)
{
  const size_t chosen_from = certify->chosen_from ? certify->chosen_from : certify->total;
  return certify->exhaustive != NULL && kc * 4 >= chosen_from;
}

/* A small round's exact distances cost less than a screened round: a GPU selection over every row
 * for a few rows is mostly fixed cost (one row against 1,533,876 x 128 rows took 0.10 s: the
 * upload, 188 tiles, the lists; a 10M-row partitioned run spent 0.9 s in 26 rounds of 1-4 rows),
 * and a row left uncertified costs another. A pair's exact distance on the host costs about
 * (d + 64) x 0.15 ns (knnwb_prepared_distance on one core here: 12 ns at d = 2, 25 ns at 128,
 * 90 ns at 512, pearson; euclidean alike; 36-40 ns at 128 streaming 1,000,000 rows), so 2^33 of
 * that work is about 1.3-1.8 CPU seconds: 45 million pairs at d = 128, about 0.1 s on 16 threads
 * split over the reference rows. A CPU selection has no such fixed cost and scores many rows at
 * SGEMM speed: 2 ranks re-selected 267 rows against 50,001 x 64 rows each in 0.1 s (two rounds),
 * where comparing them with every row took 0.6 s; 2 rows against 100,001 took 0.003 s, against
 * 0.001 s compared with every row. There 2^28 (about 0.05 CPU s: one row against 1.4 million rows
 * of 128) is about where the two cost the same. The lists are the same bytes: exhaustive lists are
 * the k best by (exact distance, index) of every row, and a certified list is the k best of its
 * candidates with every other row provably farther than its k-th. The count is the ranks' agreed
 * one, so every rank of a split job decides alike. */
#define KNNWB_CERTIFY_SMALL_WORK_DEVICE 8589934592.0
#define KNNWB_CERTIFY_SMALL_WORK_HOST 268435456.0

gboolean knnwb_certify_small(size_t pending, size_t chosen_from, size_t dim, gboolean on_host)
{
  double budget = on_host ? KNNWB_CERTIFY_SMALL_WORK_HOST : KNNWB_CERTIFY_SMALL_WORK_DEVICE;
  const char *work = g_getenv("KNNWB_CERTIFY_SMALL_WORK");
  if (work != NULL)
    budget = g_ascii_strtod(work, NULL);
  return dim > 0 && (double)pending * (double)chosen_from * (double)(dim + 64) <= budget;
}

/* The rows pending on every rank (the caller's hook), or here alone. */
static gboolean knnwb_certify_pending(const KnnwbCertify *certify, size_t mine, size_t *all,
                                      GError **error)
{
  *all = mine;
  return certify->pending == NULL || certify->pending(certify->data, mine, all, error);
}

/* The rows compared with every row: exact by construction, no certificate needed. small: chosen
 * for the few rows (knnwb_certify_small), else for their dense windows. */
static gboolean knnwb_certify_exhaustive(const KnnwbCertify *certify, GArray *rows, size_t kc,
                                         size_t pending, gboolean small, KnnwbCertifyCounts *counts,
                                         GError **error)
{
  const size_t chosen_from = certify->chosen_from ? certify->chosen_from : certify->total;
  if (small)
    g_debug("knnwb: small round: %u row(s) (%zu on every rank) compared with every row of %zu "
            "(a screened round would take %zu candidates each)",
            rows->len, pending, chosen_from, kc);
  else
    g_debug("knnwb: %u row(s) compared with every row (their windows may hold %zu or more of %zu)",
            rows->len, kc, chosen_from);
  const gint64 start = g_get_monotonic_time();
  gboolean ok =
      certify->exhaustive(certify->data, (const int64_t *)(void *)rows->data, rows->len, error);
  counts->exhaustive += rows->len;
  g_debug("knnwb: %s %.3f s", small ? "small round compared with every row" : "exhaustive rows",
          (double)(g_get_monotonic_time() - start) / 1e6);
  if (ok && certify->cancel != NULL && *certify->cancel) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "cancelled while refining rows");
    ok = FALSE;
  }
  return ok;
}

gboolean knnwb_certify_run(const KnnwbCertify *certify, size_t kc, GArray **uncertified,
                           KnnwbCertifyCounts *counts, GError **error)
{
  GArray *rows = *uncertified;
  *uncertified = NULL;
  if (rows == NULL)
    rows = g_array_new(FALSE, FALSE, sizeof(int64_t));
  gboolean ok = TRUE;
  for (;;) {
    size_t pending;
    if (!(ok = knnwb_certify_pending(certify, rows->len, &pending, error)) || pending == 0)
      break;
    if (kc >= certify->total) {
      /* Every reference was a candidate: the refine reports that as certified, so this is a bug. */
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "internal error: certification failed");
      ok = FALSE;
      break;
    }
    kc = MIN(certify->total, kc * 4);
    counts->reselected += rows->len;
    const size_t chosen_from = certify->chosen_from ? certify->chosen_from : certify->total;
    const gboolean small =
        certify->exhaustive != NULL &&
        knnwb_certify_small(pending, chosen_from, certify->dim, certify->on_host);
    if (small || knnwb_certify_dense(certify, kc)) {
      ok = knnwb_certify_exhaustive(certify, rows, kc, pending, small, counts, error);
      break;
    }
    GArray *left = g_array_new(FALSE, FALSE, sizeof(int64_t));
    ok = certify->reselect(certify->data, (const int64_t *)(void *)rows->data, rows->len, kc, left,
                           error);
    g_array_free(rows, TRUE);
    rows = left;
    if (!ok)
      break;
  }
  g_array_free(rows, TRUE);
  return ok;
}

size_t knnwb_certify_batch_rows(size_t memory_bytes, size_t kc, size_t ranks)
{
  const size_t budget = memory_bytes ? memory_bytes : (size_t)256 << 20;
  /* Candidate index, score and exact distance per cell. */
  const size_t cell = sizeof(int64_t) + sizeof(float) + sizeof(double);
  return MAX((size_t)1, budget / (MAX(kc, (size_t)1) * cell) / MAX(ranks, (size_t)1));
}
