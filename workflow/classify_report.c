/* Classification results: metrics (accuracy, precision, recall, confusion) and the tables. */
#include <math.h>
#include <string.h>
#include <knnwb/atomic_file.h>
#include <knnwb/classify.h>
#include <knnwb/error.h>
#include <knnwb/text_fields.h>

KnnwbClassifyMetrics *knnwb_classify_metrics_new(const int32_t *truth, const int32_t *predicted,
                                                 size_t n, size_t n_classes)
{
  KnnwbClassifyMetrics *metrics = g_new0(KnnwbClassifyMetrics, 1);
  metrics->n_classes = n_classes;
  metrics->confusion = g_new0(uint64_t, MAX(n_classes * n_classes, (size_t)1));
  for (size_t i = 0; i < n; i++) {
    if (truth[i] < 0 || predicted[i] < 0)
      continue;
    metrics->n_scored++;
    metrics->n_correct += truth[i] == predicted[i];
    metrics->confusion[(size_t)truth[i] * n_classes + (size_t)predicted[i]]++;
  }
  return metrics;
}

void knnwb_classify_metrics_free(KnnwbClassifyMetrics *metrics)
{
  if (metrics == NULL)
    return;
  g_free(metrics->confusion);
  g_free(metrics);
}

double knnwb_classify_precision(const KnnwbClassifyMetrics *metrics, size_t c)
{
  uint64_t predicted = 0;
  for (size_t t = 0; t < metrics->n_classes; t++)
    predicted += metrics->confusion[t * metrics->n_classes + c];
  return predicted ? (double)metrics->confusion[c * metrics->n_classes + c] / (double)predicted
                   : NAN;
}

double knnwb_classify_recall(const KnnwbClassifyMetrics *metrics, size_t c)
{
  uint64_t actual = 0;
  for (size_t p = 0; p < metrics->n_classes; p++)
    actual += metrics->confusion[c * metrics->n_classes + p];
  return actual ? (double)metrics->confusion[c * metrics->n_classes + c] / (double)actual : NAN;
}

double knnwb_classify_balanced_accuracy(const KnnwbClassifyMetrics *metrics)
{
  double sum = 0.0;
  size_t present = 0;
  for (size_t c = 0; c < metrics->n_classes; c++) {
    const double recall = knnwb_classify_recall(metrics, c);
    if (!isnan(recall)) {
      sum += recall;
      present++;
    }
  }
  return present ? sum / (double)present : NAN;
}

double knnwb_classify_majority_baseline(const KnnwbClassifyMetrics *metrics, size_t *majority)
{
  const size_t n = metrics->n_classes;
  uint64_t best = 0;
  size_t best_class = 0;
  for (size_t c = 0; c < n; c++) {
    uint64_t support = 0;
    for (size_t p = 0; p < n; p++)
      support += metrics->confusion[c * n + p];
    if (support > best) { /* ties: the first class (names are sorted) */
      best = support;
      best_class = c;
    }
  }
  if (majority != NULL)
    *majority = best_class;
  return metrics->n_scored ? (double)best / (double)metrics->n_scored : NAN;
}

void knnwb_classify_metrics_print(FILE *stream, const KnnwbClassifyMetrics *metrics,
                                  char *const *names)
{
  const size_t n = metrics->n_classes;
  fprintf(stream, "accuracy\t%.4f\t(%zu of %zu)\n",
          metrics->n_scored ? (double)metrics->n_correct / (double)metrics->n_scored : NAN,
          metrics->n_correct, metrics->n_scored);
  fprintf(stream, "balanced_accuracy\t%.4f\t(mean recall over the classes)\n",
          knnwb_classify_balanced_accuracy(metrics));
  size_t majority = 0;
  const double baseline = knnwb_classify_majority_baseline(metrics, &majority);
  fprintf(stream, "majority_baseline\t%.4f\t(every row called ", baseline);
  knnwb_formats_write_tsv_field(stream, n > 0 ? names[majority] : "");
  fputs(")\n", stream);
  fprintf(stream, "\nclass\tprecision\trecall\tsupport\n");
  for (size_t c = 0; c < n; c++) {
    uint64_t support = 0;
    for (size_t p = 0; p < n; p++)
      support += metrics->confusion[c * n + p];
    double precision = knnwb_classify_precision(metrics, c);
    double recall = knnwb_classify_recall(metrics, c);
    knnwb_formats_write_tsv_field(stream, names[c]); /* quoted as the other tables */
    putc('\t', stream);
    if (isnan(precision))
      fputs("-", stream);
    else
      fprintf(stream, "%.4f", precision);
    putc('\t', stream);
    if (isnan(recall))
      fputs("-", stream);
    else
      fprintf(stream, "%.4f", recall);
    fprintf(stream, "\t%" G_GUINT64_FORMAT "\n", (guint64)support);
  }
  fprintf(stream, "\nconfusion (rows: true class, columns: predicted)\n");
  fputs("true\\predicted", stream);
  for (size_t p = 0; p < n; p++) {
    putc('\t', stream);
    knnwb_formats_write_tsv_field(stream, names[p]);
  }
  putc('\n', stream);
  for (size_t t = 0; t < n; t++) {
    knnwb_formats_write_tsv_field(stream, names[t]);
    for (size_t p = 0; p < n; p++)
      fprintf(stream, "\t%" G_GUINT64_FORMAT, (guint64)metrics->confusion[t * n + p]);
    putc('\n', stream);
  }
}

gboolean knnwb_classify_write_predictions(const char *path, const KnnwbMatrix *rows,
                                          char *const *names, const int32_t *truth,
                                          const int32_t *predicted, const int32_t *votes,
                                          const int32_t *fold, size_t k, GError **error)
{
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  fputs("label\ttrue_class\tpredicted\tvotes\tfold\tcorrect\n", stream);
  for (size_t i = 0; i < rows->n_rows; i++) {
    const char *label = knnwb_matrix_row_label(rows, i);
    if (label != NULL)
      knnwb_formats_write_tsv_field(stream, label);
    else
      fprintf(stream, "%zu", i);
    putc('\t', stream);
    if (truth != NULL && truth[i] >= 0)
      knnwb_formats_write_tsv_field(stream, names[truth[i]]);
    putc('\t', stream);
    if (predicted[i] >= 0)
      knnwb_formats_write_tsv_field(stream, names[predicted[i]]);
    fprintf(stream, "\t%d/%zu\t", votes[i], k);
    if (fold != NULL && fold[i] >= 0)
      fprintf(stream, "%d", fold[i] + 1);
    putc('\t', stream);
    if (truth != NULL && truth[i] >= 0 && predicted[i] >= 0)
      fputs(truth[i] == predicted[i] ? "yes" : "no", stream);
    putc('\n', stream);
  }
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}

gboolean knnwb_classify_write_metrics(const char *path, const KnnwbClassifyMetrics *metrics,
                                      char *const *names, GError **error)
{
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  knnwb_classify_metrics_print(knnwb_atomic_file_stream(file), metrics, names);
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}
