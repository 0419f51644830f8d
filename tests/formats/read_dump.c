/*
 * Reads a matrix with knnwb_formats_read_matrix and prints what the reader made of it as JSON
 * (sizes, row and column labels, row annotations, absent rows, values as %.9g, which reads back
 * as the same float), for the Python tests of the single-cell readers to compare with anndata and
 * scipy. usage: read_dump PATH [--use-rep NAME] [--layer NAME] [--format F] [--drop-missing]
 * [--transpose] [--sum] [--cancelled] (--sum: only the sizes and the sum of the values, for
 * timing large reads; --cancelled: the read's cancel flag is raised from the start).
 * On a read error: the message on stderr, exit 1.
 */
#include <knnwb/error.h>
#include <knnwb/formats.h>

#include <glib.h>
#include <stdio.h>
#include <string.h>

static void json_string(FILE *f, const char *s)
{
  if (s == NULL) {
    fputs("null", f);
    return;
  }
  putc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      putc(*p, f);
  }
  putc('"', f);
}

static void json_strings(FILE *f, const char *const *texts, size_t n)
{
  putc('[', f);
  for (size_t i = 0; i < n; i++) {
    if (i > 0)
      putc(',', f);
    json_string(f, texts != NULL ? texts[i] : NULL);
  }
  putc(']', f);
}

static void dump(const KnnwbMatrix *m)
{
  printf("{\"rows\":%zu,\"cols\":%zu,\"row_labels\":", m->n_rows, m->n_cols);
  json_strings(stdout, (const char *const *)m->row_labels, m->row_labels ? m->n_rows : 0);
  printf(",\"col_labels\":");
  json_strings(stdout, (const char *const *)m->col_labels, m->col_labels ? m->n_cols : 0);
  printf(",\"annotations\":{");
  const char **keys = knnwb_matrix_annotation_keys(m, KNNWB_MATRIX_ROWS);
  for (size_t k = 0; keys[k] != NULL; k++) {
    if (k > 0)
      putc(',', stdout);
    json_string(stdout, keys[k]);
    putc(':', stdout);
    json_strings(stdout, knnwb_matrix_annotation(m, KNNWB_MATRIX_ROWS, keys[k]), m->n_rows);
  }
  g_free(keys);
  printf("},\"absent\":[");
  for (size_t i = 0, shown = 0; i < m->n_rows; i++)
    if (knnwb_matrix_row_is_absent(m, i))
      printf("%s%zu", shown++ > 0 ? "," : "", i);
  printf("],\"values\":[");
  for (size_t i = 0; i < m->n_rows; i++) {
    printf("%s[", i > 0 ? "," : "");
    for (size_t j = 0; j < m->n_cols; j++)
      printf("%s%.9g", j > 0 ? "," : "", (double)m->values[i * m->n_cols + j]);
    putc(']', stdout);
  }
  printf("]}\n");
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: read_dump PATH [--use-rep NAME] [--layer NAME] [--format F] "
                    "[--drop-missing] [--transpose]\n");
    return 2;
  }
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  GError *error = NULL;
  gboolean sum_only = FALSE;
  static volatile gint raised = 1;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--use-rep") == 0 && i + 1 < argc)
      options.use_rep = argv[++i];
    else if (strcmp(argv[i], "--layer") == 0 && i + 1 < argc)
      options.layer = argv[++i];
    else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc &&
             knnwb_formats_input_from_string(argv[i + 1], &options.format, NULL))
      i++;
    else if (strcmp(argv[i], "--drop-missing") == 0)
      options.missing = KNNWB_MISSING_DROP_ROWS;
    else if (strcmp(argv[i], "--transpose") == 0)
      options.transpose = TRUE;
    else if (strcmp(argv[i], "--sum") == 0)
      sum_only = TRUE;
    else if (strcmp(argv[i], "--cancelled") == 0)
      options.cancel = &raised;
    else {
      fprintf(stderr, "read_dump: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  KnnwbMatrix *matrix = NULL;
  if (!knnwb_formats_read_matrix(argv[1], &options, &matrix, NULL, &error)) {
    fprintf(stderr, "%s\n", error->message);
    g_error_free(error);
    return 1;
  }
  if (sum_only) {
    double sum = 0.0;
    for (size_t i = 0; i < matrix->n_rows * matrix->n_cols; i++)
      sum += matrix->values[i];
    printf("%zu x %zu, sum %.17g\n", matrix->n_rows, matrix->n_cols, sum);
  } else {
    dump(matrix);
  }
  knnwb_matrix_free(matrix);
  return 0;
}
