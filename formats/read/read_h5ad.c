/* AnnData .h5ad through libhdf5: the observations (cells) are the points. The matrix is X (a 2-D
 * dataset, or a CSR/CSC group of data, indices and indptr), obsm[use_rep] or layers[layer]; the
 * obs and var parts (names, annotations) are read_h5ad_obs.c's. Values are read in bounded pieces
 * (1 Mi values, 1 Mi sparse entries) straight into the float matrix, so a sparse X never has a
 * dense double copy, and the cancel flag is polled between pieces. */
#include "read_internal.h"

#ifdef KNNWB_HAVE_HDF5

#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

/* Values per piece of a dense read (8 MiB of doubles) and entries per piece of a sparse one. */
enum { KNNWB_H5AD_DENSE_VALUES = 1 << 20, KNNWB_H5AD_SPARSE_ENTRIES = 1 << 20 };

typedef struct {
  const char *path;
  const char *element; /* "X", "obsm/X_pca", "layers/counts" */
  const KnnwbReadOptions *options;
  KnnwbReadInfo *info;
  uint64_t file_size;
  uint64_t total_values, done_values; /* for progress, in stored entries */
} KnnwbH5adRead;

/* Polls the cancel flag and reports progress in the file's bytes, scaled from the entries read. */
static gboolean knnwb_h5ad_tick(KnnwbH5adRead *read, uint64_t values, GError **error)
{
  const KnnwbReadOptions *options = read->options;
  read->done_values += values;
  if (options->cancel != NULL && g_atomic_int_get(options->cancel) != 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "%s: interrupted while reading",
                read->path);
    return FALSE;
  }
  if (options->progress != NULL && read->total_values > 0 && read->file_size > 0) {
    double part = (double)MIN(read->done_values, read->total_values) / (double)read->total_values;
    options->progress((uint64_t)(part * (double)read->file_size), read->file_size,
                      options->progress_data);
  }
  return TRUE;
}

/* A value that is not finite: an error naming it, or (drop-rows) the row marked absent. */
static gboolean knnwb_h5ad_missing(KnnwbH5adRead *read, KnnwbMatrix *matrix, size_t row,
                                   size_t column, double value, GError **error)
{
  if (read->options->missing != KNNWB_MISSING_DROP_ROWS) {
    knnwb_h5_error(error, read->path,
                   "%s: row %zu, column %zu: %s (a missing value; --drop-missing leaves such "
                   "rows without edges)",
                   read->element, row, column, isnan(value) ? "NaN" : "an infinite value");
    return FALSE;
  }
  knnwb_matrix_set_row_absent(matrix, row);
  return TRUE;
}

/* A dense 2-D dataset of n_rows x n_cols numbers, in pieces of whole rows. */
static gboolean knnwb_h5ad_read_dense(KnnwbH5adRead *read, hid_t dataset, KnnwbMatrix *matrix,
                                      GError **error)
{
  const size_t n = matrix->n_rows, m = matrix->n_cols;
  const size_t rows_per_piece = MAX((size_t)1, KNNWB_H5AD_DENSE_VALUES / MAX(m, (size_t)1));
  g_autofree double *piece = knnwb_try_new_array(MIN(rows_per_piece, MAX(n, (size_t)1)) * m + 1,
                                                 sizeof(double), "a piece of the matrix", n, error);
  if (piece == NULL)
    return FALSE;
  hid_t space = H5Dget_space(dataset);
  gboolean ok = TRUE;
  for (size_t first = 0; ok && first < n && m > 0; first += rows_per_piece) {
    hsize_t start[2] = {first, 0}, count[2] = {MIN(rows_per_piece, n - first), m};
    hid_t memory_space = H5Screate_simple(2, count, NULL);
    ok = H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
         H5Dread(dataset, H5T_NATIVE_DOUBLE, memory_space, space, H5P_DEFAULT, piece) >= 0;
    H5Sclose(memory_space);
    if (!ok) {
      knnwb_h5_error(error, read->path, "%s: cannot read rows %zu to %zu as numbers", read->element,
                     first, first + (size_t)count[0] - 1);
      break;
    }
    for (size_t r = 0; ok && r < count[0]; r++) {
      float *row = matrix->values + (first + r) * m;
      const double *in = piece + r * m;
      for (size_t j = 0; j < m; j++) {
        if (!isfinite(in[j])) {
          ok = knnwb_h5ad_missing(read, matrix, first + r, j, in[j], error);
          break;
        }
        row[j] = (float)in[j];
      }
    }
    ok = ok && knnwb_h5ad_tick(read, count[0] * m, error);
  }
  H5Sclose(space);
  return ok;
}

/* The compressed axis' pointers (major + 1 of them), checked: from 0, never decreasing, ending at
 * the entry count. */
static int64_t *knnwb_h5ad_read_indptr(KnnwbH5adRead *read, hid_t group, size_t major, int64_t *nnz,
                                       GError **error)
{
  g_autofree char *name = g_strdup_printf("%s/indptr", read->element);
  hid_t pointers = H5Dopen2(group, "indptr", H5P_DEFAULT);
  hid_t data = H5Dopen2(group, "data", H5P_DEFAULT);
  hid_t indices = H5Dopen2(group, "indices", H5P_DEFAULT);
  int64_t *indptr = NULL;
  if (pointers < 0 || data < 0 || indices < 0) {
    g_autofree char *found = knnwb_h5_member_names(group, ".");
    knnwb_h5_error(error, read->path,
                   "%s: a sparse matrix needs the datasets data, indices and indptr (found: %s)",
                   read->element, found);
    goto out;
  }
  int64_t n_pointers = knnwb_h5_length(read->path, pointers, name, error);
  int64_t n_data = n_pointers < 0 ? -1 : knnwb_h5_length(read->path, data, "data", error);
  int64_t n_indices = n_data < 0 ? -1 : knnwb_h5_length(read->path, indices, "indices", error);
  if (n_indices < 0)
    goto out;
  if ((uint64_t)n_pointers != (uint64_t)major + 1 || n_data != n_indices ||
      !knnwb_h5_numeric(pointers) || !knnwb_h5_numeric(indices) || !knnwb_h5_numeric(data)) {
    knnwb_h5_error(error, read->path,
                   "%s: indptr has %" G_GINT64_FORMAT " entries for %zu %s (expected %zu), data "
                   "%" G_GINT64_FORMAT " and indices %" G_GINT64_FORMAT
                   " (they must be equal and numeric)",
                   read->element, n_pointers, major, "compressed rows or columns", major + 1,
                   n_data, n_indices);
    goto out;
  }
  indptr =
      knnwb_try_new_array(major + 1, sizeof(int64_t), "the sparse matrix's indptr", major, error);
  if (indptr == NULL || !knnwb_h5_read_range(read->path, pointers, name, H5T_NATIVE_INT64, 0,
                                             major + 1, indptr, error)) {
    g_clear_pointer(&indptr, g_free);
    goto out;
  }
  for (size_t r = 0; r <= major; r++)
    if ((r == 0 && indptr[0] != 0) || (r > 0 && indptr[r] < indptr[r - 1]) ||
        (r == major && indptr[r] != n_data)) {
      knnwb_h5_error(
          error, read->path,
          "%s: entry %zu is %" G_GINT64_FORMAT
          " (the pointers must start at 0, never decrease and end at the %" G_GINT64_FORMAT
          " entries of data)",
          name, r, indptr[r], n_data);
      g_clear_pointer(&indptr, g_free);
      goto out;
    }
  *nnz = n_data;
out:
  if (pointers >= 0)
    H5Dclose(pointers);
  if (data >= 0)
    H5Dclose(data);
  if (indices >= 0)
    H5Dclose(indices);
  return indptr;
}

/* Scatters one piece of sparse entries [first, first + count) into the matrix; *major is the
 * compressed row (CSR) or column (CSC) of entry first, advanced. Repeated entries add up, as
 * scipy's toarray() sums them. */
static gboolean knnwb_h5ad_scatter(KnnwbH5adRead *read, KnnwbMatrix *matrix, gboolean csr,
                                   const int64_t *indptr, size_t *major, size_t first, size_t count,
                                   const int64_t *minor, const double *values, GError **error)
{
  const size_t n_minor = csr ? matrix->n_cols : matrix->n_rows;
  for (size_t e = 0; e < count; e++) {
    const size_t position = first + e;
    while ((uint64_t)indptr[*major + 1] <= position)
      (*major)++;
    if (minor[e] < 0 || (uint64_t)minor[e] >= n_minor) {
      knnwb_h5_error(error, read->path,
                     "%s/indices: entry %zu is %" G_GINT64_FORMAT ", outside 0 to %zu",
                     read->element, position, minor[e], n_minor - 1);
      return FALSE;
    }
    const size_t row = csr ? *major : (size_t)minor[e];
    const size_t column = csr ? (size_t)minor[e] : *major;
    if (!isfinite(values[e])) {
      if (!knnwb_h5ad_missing(read, matrix, row, column, values[e], error))
        return FALSE;
      continue;
    }
    matrix->values[row * matrix->n_cols + column] += (float)values[e];
  }
  return TRUE;
}

/* A CSR or CSC group densified into the (zeroed) matrix, a piece of entries at a time. */
static gboolean knnwb_h5ad_read_sparse(KnnwbH5adRead *read, hid_t group, gboolean csr,
                                       KnnwbMatrix *matrix, GError **error)
{
  const size_t major_count = csr ? matrix->n_rows : matrix->n_cols;
  int64_t nnz = 0;
  g_autofree int64_t *indptr = knnwb_h5ad_read_indptr(read, group, major_count, &nnz, error);
  if (indptr == NULL)
    return FALSE;
  read->total_values = (uint64_t)nnz;
  const size_t piece = MIN((size_t)KNNWB_H5AD_SPARSE_ENTRIES, MAX((size_t)nnz, (size_t)1));
  g_autofree int64_t *minor =
      knnwb_try_new_array(piece, sizeof(int64_t), "sparse indices", piece, error);
  g_autofree double *values =
      minor ? knnwb_try_new_array(piece, sizeof(double), "sparse values", piece, error) : NULL;
  if (values == NULL)
    return FALSE;
  hid_t data = H5Dopen2(group, "data", H5P_DEFAULT);
  hid_t indices = H5Dopen2(group, "indices", H5P_DEFAULT);
  g_autofree char *data_name = g_strdup_printf("%s/data", read->element);
  g_autofree char *indices_name = g_strdup_printf("%s/indices", read->element);
  gboolean ok = TRUE;
  size_t major = 0;
  for (size_t first = 0; ok && first < (size_t)nnz; first += piece) {
    size_t count = MIN(piece, (size_t)nnz - first);
    ok =
        knnwb_h5_read_range(read->path, indices, indices_name, H5T_NATIVE_INT64, first, count,
                            minor, error) &&
        knnwb_h5_read_range(read->path, data, data_name, H5T_NATIVE_DOUBLE, first, count, values,
                            error) &&
        knnwb_h5ad_scatter(read, matrix, csr, indptr, &major, first, count, minor, values, error) &&
        knnwb_h5ad_tick(read, count, error);
  }
  H5Dclose(data);
  H5Dclose(indices);
  return ok;
}

/* The element to read: X, obsm[use_rep] or layers[layer], with a message listing what there is
 * when it is missing. */
static gboolean knnwb_h5ad_element(const char *path, hid_t file, const KnnwbReadOptions *options,
                                   char **element, GError **error)
{
  if (options->use_rep != NULL && options->layer != NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--use-rep and --layer name two matrices: give one of them");
    return FALSE;
  }
  const char *group = options->use_rep != NULL ? "obsm" : options->layer != NULL ? "layers" : NULL;
  const char *name = options->use_rep != NULL ? options->use_rep : options->layer;
  if (name != NULL && (*name == '\0' || strchr(name, '/') != NULL || strcmp(name, ".") == 0)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s name '%s': expected the name of one entry of %s",
                options->use_rep != NULL ? "--use-rep" : "--layer", name, group);
    return FALSE;
  }
  *element = group != NULL ? g_strdup_printf("%s/%s", group, name) : g_strdup("X");
  if (knnwb_h5_exists(file, *element))
    return TRUE;
  g_autofree char *obsm = knnwb_h5_member_names(file, "obsm");
  g_autofree char *layers = knnwb_h5_member_names(file, "layers");
  if (group == NULL)
    knnwb_h5_error(error, path,
                   "no X (this AnnData has no main matrix): name one with --use-rep (obsm: %s) "
                   "or --layer (layers: %s)",
                   obsm, layers);
  else
    knnwb_h5_error(error, path, "no %s[%s] (%s: %s)", group, name, group,
                   group[0] == 'o' ? obsm : layers);
  g_clear_pointer(element, g_free);
  return FALSE;
}

/* A sparse group's kind and shape, from anndata's encoding-type and shape attributes, or the
 * h5sparse_format and h5sparse_shape of files written before anndata 0.7. */
static gboolean knnwb_h5ad_sparse_kind(const char *path, const char *element, hid_t group,
                                       gboolean *csr, int64_t shape[2], GError **error)
{
  g_autofree char *encoding = knnwb_h5_attribute_string(group, "encoding-type");
  g_autofree char *old_format = knnwb_h5_attribute_string(group, "h5sparse_format");
  const char *kind = encoding != NULL ? encoding : old_format != NULL ? old_format : "";
  *csr = g_str_equal(kind, "csr_matrix") || g_str_equal(kind, "csr");
  gboolean csc = g_str_equal(kind, "csc_matrix") || g_str_equal(kind, "csc");
  if (!*csr && !csc) {
    knnwb_h5_error(error, path,
                   "%s is a group of encoding '%s', not a matrix knnwb reads (a dense array or a "
                   "csr_matrix or csc_matrix)",
                   element, kind);
    return FALSE;
  }
  if (!knnwb_h5_attribute_shape(group, encoding != NULL ? "shape" : "h5sparse_shape", shape)) {
    knnwb_h5_error(error, path, "%s: a sparse matrix without its shape (two integers)", element);
    return FALSE;
  }
  return TRUE;
}

/* Reads the element (a dataset or a sparse group) into a new matrix of its shape. */
static gboolean knnwb_h5ad_read_element(KnnwbH5adRead *read, hid_t file, KnnwbMatrix **out,
                                        GError **error)
{
  H5O_info_t object;
  if (H5Oget_info_by_name(file, read->element, &object, H5P_DEFAULT) < 0) {
    knnwb_h5_error(error, read->path, "%s: cannot be opened", read->element);
    return FALSE;
  }
  int64_t shape[2] = {0, 0};
  gboolean csr = FALSE, sparse = object.type == H5O_TYPE_GROUP;
  hid_t handle = sparse ? H5Gopen2(file, read->element, H5P_DEFAULT)
                        : H5Dopen2(file, read->element, H5P_DEFAULT);
  if (handle < 0) {
    knnwb_h5_error(error, read->path, "%s: cannot be opened", read->element);
    return FALSE;
  }
  gboolean ok = FALSE;
  if (sparse) {
    if (!knnwb_h5ad_sparse_kind(read->path, read->element, handle, &csr, shape, error))
      goto out;
  } else {
    hid_t space = H5Dget_space(handle);
    hsize_t dims[3] = {0, 0, 0};
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    if (rank == 2)
      H5Sget_simple_extent_dims(space, dims, NULL);
    if (space >= 0)
      H5Sclose(space);
    if (rank != 2 || !knnwb_h5_numeric(handle)) {
      knnwb_h5_error(error, read->path,
                     "%s: expected a 2-D array of numbers (cells x features), found %d "
                     "dimension%s%s",
                     read->element, rank, rank == 1 ? "" : "s",
                     knnwb_h5_numeric(handle) ? "" : " of another type");
      goto out;
    }
    shape[0] = (int64_t)dims[0];
    shape[1] = (int64_t)dims[1];
  }
  GError *local = NULL;
  KnnwbMatrix *matrix = knnwb_matrix_new((size_t)shape[0], (size_t)shape[1], &local);
  if (matrix == NULL) {
    g_set_error(error, KNNWB_ERROR, local->code,
                "%s: %s is %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT ": %s", read->path,
                read->element, shape[0], shape[1], local->message);
    g_error_free(local);
    goto out;
  }
  *out = matrix;
  read->total_values = (uint64_t)shape[0] * (uint64_t)shape[1];
  ok = sparse ? knnwb_h5ad_read_sparse(read, handle, csr, matrix, error)
              : knnwb_h5ad_read_dense(read, handle, matrix, error);
out:
  if (sparse)
    H5Gclose(handle);
  else
    H5Dclose(handle);
  return ok;
}

/* Rows marked absent (drop-rows) get zeros and are counted, as the other readers do. */
static void knnwb_h5ad_finish_absent(KnnwbMatrix *matrix, KnnwbReadInfo *info)
{
  for (size_t i = 0; i < matrix->n_rows && matrix->n_absent_rows > 0; i++) {
    if (!knnwb_matrix_row_is_absent(matrix, i))
      continue;
    memset(matrix->values + i * matrix->n_cols, 0, matrix->n_cols * sizeof(float));
    if (info->n_dropped_rows++ == 0)
      info->first_dropped_line = i + 1;
  }
}

/* Opens path read-only without HDF5's file locking (a file another program reads or shares over
 * NFS opens all the same). */
static hid_t knnwb_h5ad_open(const char *path, GError **error)
{
  knnwb_h5_quiet();
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  const gboolean compressed = fd >= 0 && knnwb_gzip_fd_is_gzip(fd);
  if (fd >= 0)
    close(fd);
  if (compressed) {
    /* HDF5 reads its file at random offsets; a compressed stream has none. */
    knnwb_h5_error(error, path,
                   "a gzip-compressed HDF5 file, which libhdf5 cannot read: gunzip it "
                   "first (HDF5 compresses inside the file: anndata's write_h5ad(compression="
                   "\"gzip\"))");
    return -1;
  }
  hid_t access = H5Pcreate(H5P_FILE_ACCESS);
#if H5_VERSION_GE(1, 10, 7)
  H5Pset_file_locking(access, FALSE, TRUE);
#endif
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, access);
  H5Pclose(access);
  if (file < 0)
    knnwb_h5_error(error, path, "not an HDF5 file that libhdf5 can open (damaged or truncated?)");
  return file;
}

gboolean knnwb_formats_read_h5ad(const char *path, const KnnwbReadOptions *options,
                                 KnnwbMatrix **out, KnnwbReadInfo *info, GError **error)
{
  hid_t file = knnwb_h5ad_open(path, error);
  if (file < 0)
    return FALSE;
  g_autoptr(KnnwbMatrix) matrix = NULL;
  g_autofree char *element = NULL;
  gboolean ok = knnwb_h5ad_check_kind(path, file, error) &&
                knnwb_h5ad_element(path, file, options, &element, error);
  if (ok) {
    struct stat st;
    KnnwbH5adRead read = {.path = path,
                          .element = element,
                          .options = options,
                          .info = info,
                          .file_size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0};
    ok = knnwb_h5ad_read_element(&read, file, &matrix, error) &&
         knnwb_h5ad_read_obs(path, file, element, matrix, error);
  }
  H5Fclose(file);
  if (!ok)
    return FALSE;
  knnwb_h5ad_finish_absent(matrix, info);
  if (info->n_dropped_rows == matrix->n_rows && matrix->n_rows > 0) {
    knnwb_h5_error(error, path, "%s: every row has a missing value", element);
    return FALSE;
  }
  *out = g_steal_pointer(&matrix);
  return TRUE;
}

#else

gboolean knnwb_formats_read_h5ad(const char *path, const KnnwbReadOptions *options,
                                 KnnwbMatrix **out, KnnwbReadInfo *info, GError **error)
{
  (void)options;
  (void)out;
  (void)info;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
              "%s: an AnnData .h5ad file, but this knnwb was built without libhdf5 (Debian: "
              "libhdf5-dev; rebuild, or save the matrix as NPY: numpy.save(\"x.npy\", "
              "adata.X.toarray()))",
              path);
  return FALSE;
}

#endif
