/*
 * libFuzzer entry for one reader (chosen by KNNWB_FUZZ_<FORMAT>; DISTANCES is the clustering
 * module's labelled CSV or NPY distance matrix; GML the laid-out graph of `knnwb render`): the
 * input becomes a memfd
 * file read through the public reader; any crash, leak or sanitizer report is a bug, errors are
 * fine. Odd-sized inputs use the drop-rows missing-value policy to reach that path too.
 * GEO reads the input as a GEO series matrix (column annotations touched too). GZIP fuzzes the
 * compressed-input path with format detection: an input that starts with the gzip magic is read
 * as it is (damaged streams), any other is gzip-compressed here first (the reader then sees valid
 * gzip around fuzzed text), cut short when its size is a multiple of 5.
 */
#include <knnwb/clustering.h>
#include <knnwb/formats.h>
#include <knnwb/annotation.h>
#include <knnwb/classify.h>
#include <knnwb/phenotype.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#if defined(KNNWB_FUZZ_GZIP)
#include <zlib.h>
#endif
#include <sys/mman.h>
#include <unistd.h>

static void fuzz_quiet(const gchar *domain, GLogLevelFlags level, const gchar *message,
                       gpointer data)
{
  (void)domain;
  (void)level;
  (void)message;
  (void)data;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static int fd = -1;
  static char path[64];
  if (fd < 0) {
    fd = memfd_create("knnwb-fuzz", 0);
    if (fd < 0)
      return 0;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    igraph_set_error_handler(igraph_error_handler_ignore);
    g_log_set_handler("knnwb", G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE, fuzz_quiet, NULL);
  }
#if defined(KNNWB_FUZZ_GZIP)
  uint8_t *compressed = NULL;
  if (size < 2 || data[0] != 0x1f || data[1] != 0x8b) {
    z_stream stream = {0};
    if (deflateInit2(&stream, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      return 0;
    size_t bound = deflateBound(&stream, (uLong)size);
    compressed = g_malloc(bound);
    stream.next_in = (Bytef *)data;
    stream.avail_in = (uInt)size;
    stream.next_out = compressed;
    stream.avail_out = (uInt)bound;
    int status = deflate(&stream, Z_FINISH);
    size_t produced = stream.total_out;
    deflateEnd(&stream);
    if (status != Z_STREAM_END) {
      g_free(compressed);
      return 0;
    }
    data = compressed;
    size = size % 5 == 0 && produced > 4 ? produced - 4 : produced;
  }
#endif
  if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != (ssize_t)size))
    return 0;
  GError *error = NULL;
#if defined(KNNWB_FUZZ_DISTANCES)
  /* The labelled CSV distance matrix of the mst-knn-distances step (formats/read/read_distance.c),
   * or its NPY form when the input starts with the NPY magic (the header of io/npy_header.c). */
  igraph_matrix_t distances;
  char **labels = NULL;
  igraph_matrix_init(&distances, 0, 0);
  gboolean npy = size >= 6 && memcmp(data, "\x93NUMPY", 6) == 0;
  if (npy ? knnwb_formats_read_distance_npy(path, &distances, &error)
          : knnwb_formats_read_distance_csv(path, &distances, size % 2 ? &labels : NULL, &error)) {
    volatile double sum = 0;
    for (igraph_integer_t i = 0; i < igraph_matrix_size(&distances); i++)
      sum += VECTOR(distances.data)[i];
    for (char **label = labels; label && *label; label++)
      sum += (double)(*label)[0];
    (void)sum;
  }
  g_strfreev(labels);
  igraph_matrix_destroy(&distances);
#elif defined(KNNWB_FUZZ_ANNOTATION)
  /* The annotation table reader, then the phenotype and class matching on what it read, against a
   * 2 x 4 matrix whose rows and samples are named like the seed corpus (S1..S4, r1, r2). */
  KnnwbAnnotationTable *table = knnwb_annotation_read(path, &error);
  if (table != NULL) {
    KnnwbMatrix *matrix = knnwb_matrix_new(2, 4, NULL);
    for (size_t j = 0; j < 4; j++) {
      char name[8];
      snprintf(name, sizeof name, "S%zu", j + 1);
      knnwb_matrix_set_col_label(matrix, j, name);
    }
    knnwb_matrix_set_row_label(matrix, 0, "r1");
    knnwb_matrix_set_row_label(matrix, 1, "r2");
    const char *column = table->header[table->n_columns - 1];
    float *values = NULL;
    g_clear_error(&error);
    if (knnwb_phenotype_values(matrix, table, NULL, column, &values, &error))
      knnwb_phenotype_append_row(&matrix, values, "fuzz-phenotype", NULL);
    g_free(values);
    g_clear_error(&error);
    KnnwbClasses *classes = NULL;
    if (knnwb_classes_from_table(matrix, table, NULL, column, &classes, &error))
      knnwb_classes_free(classes);
    knnwb_matrix_free(matrix);
    knnwb_annotation_free(table);
  }
#elif defined(KNNWB_FUZZ_GML)
  /* The laid-out GML of `knnwb render` (formats/read/read_gml.c). */
  KnnwbDrawing *drawing = knnwb_formats_read_gml(path, &error);
  if (drawing != NULL) {
    volatile double sum = 0;
    for (guint v = 0; v < drawing->nodes->len; v++)
      sum += g_array_index(drawing->nodes, KnnwbDrawingNode, v).x;
    (void)sum;
    knnwb_drawing_free(drawing);
  }
#elif defined(KNNWB_FUZZ_KNN)
  igraph_t graph;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  if (knnwb_formats_read_knn(path, size % 2, &graph, &weights, &error))
    igraph_destroy(&graph);
  igraph_vector_destroy(&weights);
#else
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
#if defined(KNNWB_FUZZ_CIBM)
  options.format = KNNWB_INPUT_CIBM;
#elif defined(KNNWB_FUZZ_CSV)
  options.format = KNNWB_INPUT_CSV;
#elif defined(KNNWB_FUZZ_TSV)
  options.format = KNNWB_INPUT_TSV;
#elif defined(KNNWB_FUZZ_GCT)
  options.format = KNNWB_INPUT_GCT;
#elif defined(KNNWB_FUZZ_NPY)
  options.format = KNNWB_INPUT_NPY;
#elif defined(KNNWB_FUZZ_GEO)
  options.format = KNNWB_INPUT_GEO;
#endif
  options.missing = size % 2 ? KNNWB_MISSING_DROP_ROWS : KNNWB_MISSING_ERROR;
  options.transpose = size % 3 == 0;
  options.rank_rows = size % 4 < 2; /* the spearman ranks taken while parsing */
  KnnwbMatrix *matrix = NULL;
  if (knnwb_formats_read_matrix(path, &options, &matrix, NULL, &error)) {
    /* Touch everything the reader claims to have produced. */
    volatile float sum = 0;
    for (size_t i = 0; i < matrix->n_rows * matrix->n_cols; i++)
      sum += matrix->values[i];
    const float *ranks = knnwb_matrix_row_ranks(matrix);
    for (size_t i = 0; ranks && i < matrix->n_rows * matrix->n_cols; i++)
      sum += ranks[i];
    for (size_t i = 0; matrix->row_labels && i < matrix->n_rows; i++)
      sum += (float)matrix->row_labels[i][0];
    for (int axis = KNNWB_MATRIX_ROWS; axis <= KNNWB_MATRIX_COLUMNS; axis++) {
      const char **keys = knnwb_matrix_annotation_keys(matrix, (KnnwbMatrixAxis)axis);
      size_t length = axis == KNNWB_MATRIX_ROWS ? matrix->n_rows : matrix->n_cols;
      for (const char **key = keys; *key; key++) {
        const char *const *values = knnwb_matrix_annotation(matrix, (KnnwbMatrixAxis)axis, *key);
        for (size_t i = 0; i < length; i++)
          sum += values[i] ? (float)values[i][0] : 0.0f;
      }
      g_free(keys);
    }
    (void)sum;
    knnwb_matrix_free(matrix);
  }
#endif
  g_clear_error(&error);
#if defined(KNNWB_FUZZ_GZIP)
  g_free(compressed);
#endif
  return 0;
}
