/* The repeated-labels warning of every reader (knnwb_formats_warn_repeated_labels). */
#include "read_internal.h"

#include <knnwb/parallel.h>

#include <string.h>

/* The labels are split by their hash into this many parts, each checked on its own: a part's table
 * of row numbers stays in a core's cache. One table for 1.5 million metafeature labels (32 MB)
 * cost a cache miss a row, most of the check's time; a GHashTable before it, a quarter of a
 * second. */
#define KNNWB_LABEL_PARTS 256

/* A labelled row and its label's hash: a part's rows, and its table's slots (row 0 = empty), so
 * that the checks read their hashes in order and compare strings only where the hashes are equal.
 */
typedef struct {
  size_t row;
  guint64 hash;
} KnnwbLabelRow;

typedef struct {
  const char *const *labels;
  size_t n_rows;
  guint64 *hashes;
  KnnwbLabelRow *order;                   /* rows by part, each part in row order */
  size_t start[KNNWB_LABEL_PARTS + 1];    /* part p: order[start[p] .. start[p + 1]) */
  size_t repeated[KNNWB_LABEL_PARTS];     /* rows that repeat an earlier row's label */
  size_t first_again[KNNWB_LABEL_PARTS];  /* the part's first such row (SIZE_MAX: none) */
  size_t first_before[KNNWB_LABEL_PARTS]; /* the row whose label it repeats */
} KnnwbLabelCheck;

static size_t knnwb_label_part(guint64 h)
{
  return (size_t)(h >> 56) % KNNWB_LABEL_PARTS;
}

/* FNV-1a over each label of rows [first, last) (0 for none or ""). */
static void knnwb_label_hash_rows(size_t first, size_t last, void *data)
{
  KnnwbLabelCheck *check = data;
  for (size_t i = first; i < last; i++) {
    const unsigned char *p = (const unsigned char *)check->labels[i];
    guint64 h = 0;
    if (p != NULL && *p != '\0') {
      h = 14695981039346656037ull;
      for (; *p != '\0'; p++)
        h = (h ^ *p) * 1099511628211ull;
      h |= 1; /* never 0, the mark of "no label" */
    }
    check->hashes[i] = h;
  }
}

/* Parts [first, last): each part's rows entered in row order into an open-addressing table of
 * row numbers, strings compared only where the hashes are equal. */
static void knnwb_label_check_parts(size_t first, size_t last, void *data)
{
  KnnwbLabelCheck *check = data;
  for (size_t p = first; p < last; p++) {
    const KnnwbLabelRow *rows = check->order + check->start[p];
    const size_t n = check->start[p + 1] - check->start[p];
    check->repeated[p] = 0;
    check->first_again[p] = SIZE_MAX;
    if (n < 2)
      continue;
    size_t size = 2;
    while (size < 2 * n)
      size *= 2;
    const size_t mask = size - 1;
    KnnwbLabelRow *table = g_new0(KnnwbLabelRow, size); /* row + 1; 0 = empty */
    for (size_t r = 0; r < n; r++) {
      const size_t i = rows[r].row;
      const guint64 h = rows[r].hash;
      for (size_t pos = (size_t)(h ^ (h >> 29)) & mask;; pos = (pos + 1) & mask) {
        const KnnwbLabelRow slot = table[pos];
        if (slot.row == 0) {
          table[pos] = (KnnwbLabelRow){i + 1, h};
          break;
        }
        if (slot.hash == h && strcmp(check->labels[slot.row - 1], check->labels[i]) == 0) {
          if (check->repeated[p]++ == 0) {
            check->first_again[p] = i;
            check->first_before[p] = slot.row - 1;
          }
          break;
        }
      }
    }
    g_free(table);
  }
}

/* Rows with a label by part, each part in row order (a counting sort). */
static void knnwb_label_order(KnnwbLabelCheck *check)
{
  memset(check->start, 0, sizeof check->start);
  for (size_t i = 0; i < check->n_rows; i++)
    if (check->hashes[i] != 0)
      check->start[knnwb_label_part(check->hashes[i]) + 1]++;
  for (size_t p = 0; p < KNNWB_LABEL_PARTS; p++)
    check->start[p + 1] += check->start[p];
  size_t next[KNNWB_LABEL_PARTS];
  memcpy(next, check->start, sizeof next);
  for (size_t i = 0; i < check->n_rows; i++)
    if (check->hashes[i] != 0)
      check->order[next[knnwb_label_part(check->hashes[i])]++] =
          (KnnwbLabelRow){i, check->hashes[i]};
}

void knnwb_formats_warn_repeated_labels(const char *path, const char *const *labels, size_t n_rows,
                                        int n_threads)
{
  if (labels == NULL || n_rows < 2)
    return;
  g_autofree KnnwbLabelCheck *check = g_new0(KnnwbLabelCheck, 1);
  check->labels = labels;
  check->n_rows = n_rows;
  check->hashes = g_new(guint64, n_rows);
  check->order = g_new(KnnwbLabelRow, n_rows);
  knnwb_parallel_for(n_threads, n_rows, 1 << 14, knnwb_label_hash_rows, check);
  knnwb_label_order(check);
  knnwb_parallel_for(n_threads, KNNWB_LABEL_PARTS, 1, knnwb_label_check_parts, check);
  size_t n_repeated = 0, part = 0;
  for (size_t p = 0; p < KNNWB_LABEL_PARTS; p++) {
    n_repeated += check->repeated[p];
    if (check->first_again[p] < check->first_again[part])
      part = p;
  }
  g_free(check->hashes);
  g_free(check->order);
  if (n_repeated > 0)
    g_warning("%s: %zu row%s repeat%s an earlier row's label (first: '%s' on rows %zu and %zu, "
              "counted from 0 as in the outputs); the rows are kept as separate points, told "
              "apart by their row numbers",
              path, n_repeated, n_repeated == 1 ? "" : "s", n_repeated == 1 ? "s" : "",
              labels[check->first_again[part]], check->first_before[part],
              check->first_again[part]);
}
