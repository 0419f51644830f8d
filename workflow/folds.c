/* Stratified folds for cross-validation. */
#include <knnwb/classify.h>
#include <knnwb/error.h>

gboolean knnwb_classify_folds(const int32_t *classes, size_t n, size_t n_folds, guint32 seed,
                              int32_t *fold, GError **error)
{
  size_t n_labelled = 0;
  int32_t n_classes = 0;
  for (size_t i = 0; i < n; i++)
    if (classes[i] >= 0) {
      n_labelled++;
      n_classes = MAX(n_classes, classes[i] + 1);
    }
  if (n_folds < 2 || n_folds > n_labelled || n_folds > G_MAXINT32) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%zu folds for %zu labelled rows: the folds must be between 2 and the number of "
                "labelled rows (or loo)",
                n_folds, n_labelled);
    return FALSE;
  }
  g_autoptr(GRand) rng = g_rand_new_with_seed(seed);
  g_autofree size_t *members = g_new(size_t, MAX(n_labelled, (size_t)1));
  size_t next = 0; /* the deal goes on across classes, so fold sizes differ by at most one */
  for (size_t i = 0; i < n; i++)
    fold[i] = -1;
  for (int32_t c = 0; c < n_classes; c++) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
      if (classes[i] == c)
        members[m++] = i;
    /* Fisher-Yates with GRand: the same shuffle on every platform for a seed. */
    for (size_t t = m; t > 1; t--) {
      size_t j = (size_t)g_rand_int_range(rng, 0, (gint32)MIN(t, (size_t)G_MAXINT32));
      size_t swap = members[t - 1];
      members[t - 1] = members[j];
      members[j] = swap;
    }
    for (size_t t = 0; t < m; t++) {
      fold[members[t]] = (int32_t)(next % n_folds);
      next++;
    }
  }
  return TRUE;
}

gboolean knnwb_classify_folds_from_string(const char *text, size_t *n_folds, GError **error)
{
  guint64 value = 0;
  if (text != NULL && g_ascii_strcasecmp(text, "loo") == 0) {
    *n_folds = 0;
    return TRUE;
  }
  if (text == NULL || !g_ascii_string_to_unsigned(text, 10, 2, G_MAXINT32, &value, NULL)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "folds must be a number of folds (2 or more) or loo (got '%s')", text ? text : "");
    return FALSE;
  }
  *n_folds = (size_t)value;
  return TRUE;
}
