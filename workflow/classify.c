/* kNN classification: the vote, query classification and cross-validation. */
#include <string.h>
#include <knnwb/classify.h>
#include <knnwb/error.h>

void knnwb_classify_vote(const KnnwbNeighbors *lists, const int32_t *reference_class,
                         size_t n_classes, int32_t *predicted, int32_t *votes)
{
  g_autofree int32_t *count = g_new0(int32_t, MAX(n_classes, (size_t)1));
  for (size_t q = 0; q < lists->n_queries; q++) {
    memset(count, 0, MAX(n_classes, (size_t)1) * sizeof(int32_t));
    const int64_t *neighbours = lists->indices + q * lists->k;
    int32_t best = 0;
    for (int32_t r = 0; r < lists->n_found[q]; r++) {
      int32_t c = reference_class[neighbours[r]];
      if (c >= 0 && ++count[c] > best) /* not MAX(): it would count twice */
        best = count[c];
    }
    predicted[q] = -1;
    votes[q] = best;
    /* Among the classes with the most votes, the nearest neighbour's (lists are in rank order). */
    for (int32_t r = 0; r < lists->n_found[q] && best > 0; r++) {
      int32_t c = reference_class[neighbours[r]];
      if (c >= 0 && count[c] == best) {
        predicted[q] = c;
        break;
      }
    }
  }
}

gboolean knnwb_classify_query(const KnnwbMatrix *reference, const int32_t *reference_class,
                              size_t n_classes, const KnnwbMatrix *query,
                              const KnnwbKnnOptions *options, int32_t *predicted, int32_t *votes,
                              GError **error)
{
  g_autofree gboolean *keep = g_new0(gboolean, MAX(reference->n_rows, (size_t)1));
  g_autofree int32_t *kept_class = g_new(int32_t, MAX(reference->n_rows, (size_t)1));
  size_t m = 0;
  for (size_t i = 0; i < reference->n_rows; i++)
    if (reference_class[i] >= 0) {
      keep[i] = TRUE;
      kept_class[m++] = reference_class[i];
    }
  if (options->k < 1 || options->k > m) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "k = %zu, but there are %zu labelled reference rows (k must be 1 .. %zu)",
                options->k, m, m);
    return FALSE;
  }
  g_autoptr(KnnwbMatrix) labelled = knnwb_matrix_select_rows(reference, keep, error);
  if (labelled == NULL)
    return FALSE;
  /* New samples from another file may list the genes in another order. */
  g_autoptr(KnnwbMatrix) matched = NULL;
  if (!knnwb_matrix_match_columns(query, reference, &matched, error))
    return FALSE;
  g_autoptr(KnnwbNeighbors) lists = NULL;
  if (!knnwb_knn_query(matched != NULL ? matched : query, labelled, options, &lists, error))
    return FALSE;
  knnwb_classify_vote(lists, kept_class, n_classes, predicted, votes);
  return TRUE;
}

gboolean knnwb_classify_cross_validate(const KnnwbMatrix *data, const KnnwbClasses *classes,
                                       size_t n_folds, guint32 seed, const KnnwbKnnOptions *options,
                                       int32_t *fold, int32_t *predicted, int32_t *votes,
                                       GError **error)
{
  const size_t n = data->n_rows;
  if (classes->n_rows != n) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "%zu class labels for %zu rows",
                classes->n_rows, n);
    return FALSE;
  }
  for (size_t i = 0; i < n; i++) {
    predicted[i] = -1;
    votes[i] = 0;
  }
  g_autofree gboolean *pick = g_new0(gboolean, MAX(n, (size_t)1));
  g_autofree size_t *rows = g_new(size_t, MAX(n, (size_t)1));
  g_autofree int32_t *sub_class = g_new(int32_t, MAX(n, (size_t)1));
  g_autofree int32_t *sub_predicted = g_new(int32_t, MAX(n, (size_t)1));
  g_autofree int32_t *sub_votes = g_new(int32_t, MAX(n, (size_t)1));
  size_t n_labelled = 0;
  for (size_t i = 0; i < n; i++)
    n_labelled += classes->of[i] >= 0;
  if (n_folds == 0) {
    /* Leave-one-out: each labelled row against all the others = the labelled rows' self lists. */
    for (size_t i = 0; i < n; i++) {
      pick[i] = classes->of[i] >= 0;
      fold[i] = -1;
    }
    if (options->k < 1 || options->k >= n_labelled) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "k = %zu, but leave-one-out over %zu labelled rows needs 1 <= k < %zu",
                  options->k, n_labelled, n_labelled);
      return FALSE;
    }
    g_autoptr(KnnwbMatrix) labelled = knnwb_matrix_select_rows(data, pick, error);
    if (labelled == NULL)
      return FALSE;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
      if (pick[i]) {
        rows[m] = i;
        sub_class[m++] = classes->of[i];
      }
    g_autoptr(KnnwbNeighbors) lists = NULL;
    if (!knnwb_knn_self(labelled, options, &lists, error))
      return FALSE;
    knnwb_classify_vote(lists, sub_class, classes->n_classes, sub_predicted, sub_votes);
    for (size_t t = 0; t < m; t++) {
      fold[rows[t]] = (int32_t)t; /* each row is its own fold */
      predicted[rows[t]] = sub_predicted[t];
      votes[rows[t]] = sub_votes[t];
    }
  } else {
    if (!knnwb_classify_folds(classes->of, n, n_folds, seed, fold, error))
      return FALSE;
    g_autofree int32_t *reference_class = g_new(int32_t, MAX(n, (size_t)1));
    for (size_t f = 0; f < n_folds; f++) {
      size_t m = 0;
      for (size_t i = 0; i < n; i++) {
        pick[i] = fold[i] == (int32_t)f;
        /* The other folds' rows are the references; this fold's and unlabelled rows are not. */
        reference_class[i] = fold[i] >= 0 && fold[i] != (int32_t)f ? classes->of[i] : -1;
        if (pick[i])
          rows[m++] = i;
      }
      g_autoptr(KnnwbMatrix) query = knnwb_matrix_select_rows(data, pick, error);
      if (query == NULL)
        return FALSE;
      if (!knnwb_classify_query(data, reference_class, classes->n_classes, query, options,
                                sub_predicted, sub_votes, error)) {
        g_prefix_error(error, "fold %zu of %zu: ", f + 1, n_folds);
        return FALSE;
      }
      for (size_t t = 0; t < m; t++) {
        predicted[rows[t]] = sub_predicted[t];
        votes[rows[t]] = sub_votes[t];
      }
    }
  }
  /* Rows of unknown class: against every labelled row. */
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    pick[i] = classes->of[i] < 0;
    if (pick[i])
      rows[m++] = i;
  }
  if (m > 0) {
    g_autoptr(KnnwbMatrix) query = knnwb_matrix_select_rows(data, pick, error);
    if (query == NULL || !knnwb_classify_query(data, classes->of, classes->n_classes, query,
                                               options, sub_predicted, sub_votes, error))
      return FALSE;
    for (size_t t = 0; t < m; t++) {
      predicted[rows[t]] = sub_predicted[t];
      votes[rows[t]] = sub_votes[t];
    }
  }
  return TRUE;
}
