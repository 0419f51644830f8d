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
#if defined(KNNWB_FUZZ_H5AD)
#include <hdf5.h>
#include <math.h>
#endif
#include <fcntl.h>
#include <glib/gstdio.h>
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

/* The readers allocate a matrix of the size a header declares with g_try_malloc0 and report NULL
 * as an error ("cannot allocate ... bytes"); ASan aborts on an allocation it cannot map instead of
 * returning NULL (a 10x header of 21,111,111,111 barcodes asked for 506 GB), which is not the
 * program's behaviour. Plain g_malloc still aborts on NULL, so those remain findings. Above 2 GiB
 * an allocation fails here, as on a small machine: ASan writes the shadow of every byte it frees
 * (an eighth of it), so a header's 17 GB zeroed matrix, virtual in the program, took 2.1 GB of
 * resident memory here when it was freed, past the run's cap. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
  return "allocator_may_return_null=1:max_allocation_size_mb=2048";
}

#if defined(KNNWB_FUZZ_H5AD)
/* The next byte of the input, 0 past its end. */
static unsigned fuzz_byte(const uint8_t **data, const uint8_t *end)
{
  return *data < end ? *(*data)++ : 0u;
}

static void fuzz_h5_write(hid_t parent, const char *name, hid_t type, size_t n, const void *values)
{
  hsize_t dims = n;
  hid_t space = H5Screate_simple(1, &dims, NULL);
  hid_t dataset = H5Dcreate2(parent, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (n > 0)
    H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
  H5Dclose(dataset);
  H5Sclose(space);
}

static void fuzz_h5_attribute(hid_t object, const char *name, const char *value)
{
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attribute = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attribute, type, &value);
  H5Aclose(attribute);
  H5Sclose(space);
  H5Tclose(type);
}

/* Builds an AnnData file at path from input bytes that are not HDF5 themselves (structure-aware
 * fuzzing of the reader's checks): the kind of matrix (dense X, CSR or CSC X, obsm, a sparse
 * layer), sizes, names whose count may differ, indptr that may decrease, indices that may fall
 * outside, values that may be NaN, a categorical column whose codes may exceed its categories. */
static void fuzz_h5ad_build(const char *path, const uint8_t *data, size_t size)
{
  const uint8_t *end = data + size;
  unsigned kind = fuzz_byte(&data, end) % 5, n = fuzz_byte(&data, end) % 9;
  unsigned m = fuzz_byte(&data, end) % 7, skew = fuzz_byte(&data, end);
  hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0)
    return;
  hid_t obs = H5Gcreate2(file, "obs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  fuzz_h5_attribute(obs, "_index", "_index");
  size_t n_names = skew % 5 == 0 ? (n + skew / 5) % 10 : n;
  const char *names[10] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
  hid_t strings = H5Tcopy(H5T_C_S1);
  H5Tset_size(strings, H5T_VARIABLE);
  fuzz_h5_write(obs, "_index", strings, n_names, names);
  hid_t column = H5Gcreate2(obs, "type", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  fuzz_h5_attribute(column, "encoding-type", skew % 7 == 0 ? "nullable-integer" : "categorical");
  fuzz_h5_write(column, "categories", strings, 2, names);
  int8_t codes[16];
  for (unsigned i = 0; i < 16; i++)
    codes[i] = (int8_t)(fuzz_byte(&data, end) % 5) - 1;
  fuzz_h5_write(column, "codes", H5T_NATIVE_INT8, n, codes);
  H5Gclose(column);
  hsize_t one = 1;
  hid_t space = H5Screate_simple(1, &one, NULL);
  hid_t order = H5Acreate2(obs, "column-order", strings, space, H5P_DEFAULT, H5P_DEFAULT);
  const char *type_name = "type";
  H5Awrite(order, strings, &type_name);
  H5Aclose(order);
  H5Sclose(space);
  H5Gclose(obs);
  H5Tclose(strings);
  /* The values: n x m dense, or compressed along rows (CSR) or columns (CSC). */
  double values[64];
  int32_t indptr[16] = {0}, indices[64];
  for (unsigned e = 0; e < 64; e++) {
    unsigned byte = fuzz_byte(&data, end);
    values[e] = byte == 255 ? NAN : (double)(int8_t)byte;
    indices[e] = (int32_t)(byte % (MAX(m, n) + 2)) - (byte == 254);
  }
  const unsigned major = kind == 2 ? m : n;
  for (unsigned r = 1; r <= major; r++) {
    unsigned step = fuzz_byte(&data, end);
    indptr[r] = step == 250 ? indptr[r - 1] - 1 : MIN(indptr[r - 1] + (int32_t)(step % 4), 64);
  }
  hid_t parent = kind == 3   ? H5Gcreate2(file, "obsm", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                 : kind == 4 ? H5Gcreate2(file, "layers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                             : file;
  const char *name = kind == 3 ? "X_pca" : kind == 4 ? "counts" : "X";
  if (kind == 0 || kind == 3) {
    hsize_t dims[2] = {n, m};
    hid_t matrix_space = H5Screate_simple(2, dims, NULL);
    hid_t dataset = H5Dcreate2(parent, name, H5T_NATIVE_DOUBLE, matrix_space, H5P_DEFAULT,
                               H5P_DEFAULT, H5P_DEFAULT);
    if (n * m > 0)
      H5Dwrite(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
    H5Dclose(dataset);
    H5Sclose(matrix_space);
  } else {
    hid_t group = H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    fuzz_h5_attribute(group, "encoding-type", kind == 2 ? "csc_matrix" : "csr_matrix");
    int64_t shape[2] = {n, (skew % 3 == 0) ? (int64_t)m + 1 : (int64_t)m};
    hsize_t two = 2;
    hid_t shape_space = H5Screate_simple(1, &two, NULL);
    hid_t attribute =
        H5Acreate2(group, "shape", H5T_NATIVE_INT64, shape_space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attribute, H5T_NATIVE_INT64, shape);
    H5Aclose(attribute);
    H5Sclose(shape_space);
    size_t nnz = indptr[major] < 0 ? 0 : (size_t)indptr[major] + (skew % 11 == 0);
    fuzz_h5_write(group, "indptr", H5T_NATIVE_INT32, major + 1 - (skew % 13 == 0), indptr);
    fuzz_h5_write(group, "indices", H5T_NATIVE_INT32, MIN(nnz, (size_t)64), indices);
    fuzz_h5_write(group, "data", H5T_NATIVE_DOUBLE, MIN(nnz, (size_t)64), values);
    H5Gclose(group);
  }
  if (parent != file)
    H5Gclose(parent);
  H5Fclose(file);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static int fd = -1;
  static char path[4096];
  if (fd < 0) {
#if defined(KNNWB_FUZZ_H5AD)
    /* libhdf5 resolves the real path of what it opens, which a memfd has not: a temporary file. */
    char *name = NULL;
    fd = g_file_open_tmp("knnwb-fuzz-XXXXXX.h5ad", &name, NULL);
    if (fd < 0)
      return 0;
    g_strlcpy(path, name, sizeof path);
    g_free(name);
#else
    fd = memfd_create("knnwb-fuzz", 0);
    if (fd < 0)
      return 0;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
#endif
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
#if defined(KNNWB_FUZZ_H5AD)
  /* The input describes an AnnData file, built here (fuzz_h5ad_build). With KNNWB_FUZZ_H5AD_RAW
   * set, an input with the HDF5 signature is the file itself (corpus/h5ad-raw): that fuzzes
   * libhdf5's own parser, where Debian's 1.10.8 has memory errors on damaged heaps (H5HG_read), so
   * only by hand, not in the smoke runs. */
  static int raw = -1;
  if (raw < 0)
    raw = g_getenv("KNNWB_FUZZ_H5AD_RAW") != NULL;
  if (!raw || size < 8 || memcmp(data, "\x89HDF\r\n\x1a\n", 8) != 0) {
    fuzz_h5ad_build(path, data, size);
    size = 0;
  }
  if (size > 0 && (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size))
    return 0;
#else
  if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != (ssize_t)size))
    return 0;
#endif
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
#elif defined(KNNWB_FUZZ_10X)
  /* A 10x directory made of the input's parts (matrix, barcodes, features). */
  static char *directory = NULL;
  if (directory == NULL)
    directory = g_dir_make_tmp("knnwb-fuzz-10x-XXXXXX", NULL);
  if (directory == NULL)
    return 0;
  const char *names[3] = {"matrix.mtx", "barcodes.tsv", "features.tsv"};
  const uint8_t *part = data, *end = data + size;
  int n_parts = 0;
  for (; n_parts < 3; n_parts++) {
    const uint8_t *stop = n_parts < 2 ? memchr(part, '\0', (size_t)(end - part)) : NULL;
    if (stop == NULL)
      stop = end;
    g_autofree char *file = g_build_filename(directory, names[n_parts], NULL);
    /* Plain writes: g_file_set_contents syncs a file it replaces, 100 times slower. */
    int out = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out >= 0) {
      if (stop > part && write(out, part, (size_t)(stop - part)) < 0)
        n_parts = 3;
      close(out);
    }
    if (stop == end) {
      n_parts++;
      break;
    }
    part = stop + 1;
  }
  for (int i = n_parts; i < 3; i++) {
    g_autofree char *file = g_build_filename(directory, names[i], NULL);
    g_unlink(file);
  }
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.missing = size % 2 ? KNNWB_MISSING_DROP_ROWS : KNNWB_MISSING_ERROR;
  g_autofree char *matrix_file = g_build_filename(directory, "matrix.mtx", NULL);
  KnnwbMatrix *matrix = NULL;
  if (knnwb_formats_read_matrix(size % 3 == 0 ? matrix_file : directory, &options, &matrix, NULL,
                                &error)) {
    volatile float sum = 0;
    for (size_t i = 0; i < matrix->n_rows * matrix->n_cols; i++)
      sum += matrix->values[i];
    for (size_t i = 0; matrix->row_labels && i < matrix->n_rows; i++)
      sum += (float)matrix->row_labels[i][0];
    for (size_t j = 0; matrix->col_labels && j < matrix->n_cols; j++)
      sum += (float)matrix->col_labels[j][0];
    (void)sum;
    knnwb_matrix_free(matrix);
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
#elif defined(KNNWB_FUZZ_H5AD)
  options.format = KNNWB_INPUT_H5AD;
  options.use_rep = size % 4 == 1 ? "X_pca" : NULL;
  options.layer = size % 4 == 2 ? "counts" : NULL;
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
#if defined(KNNWB_FUZZ_H5AD)
  /* libhdf5 frees handles left open only at exit (no leak report): every one must be closed. */
  if (H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) != 0)
    abort();
#endif
#endif
  g_clear_error(&error);
#if defined(KNNWB_FUZZ_GZIP)
  g_free(compressed);
#endif
  return 0;
}
