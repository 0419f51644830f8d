/* The obs and var parts of an AnnData .h5ad file: obs_names label the rows (the cells), var_names
 * the columns of X or a layer, and each obs column becomes a row annotation under its name
 * (knnwb_matrix_annotation): strings, numbers (integers as written, floats in their shortest
 * round-trip form, NaN as unknown), booleans (True/False), categoricals decoded to their category
 * (code -1 unknown) and nullable integers or booleans (masked entries unknown). A column of
 * another kind is left out with a warning: annotations are extras, the matrix is still good. */
#include "read_internal.h"

#ifdef KNNWB_HAVE_HDF5

#include <inttypes.h>
#include <math.h>

/* Entries per piece of a numeric column. */
enum { KNNWB_H5AD_COLUMN_PIECE = 1 << 16 };

typedef struct {
  KnnwbMatrix *matrix;
  const char *name;
  gboolean rows; /* labels of rows (obs) or of columns (var) */
} KnnwbH5adLabelTarget;

static void knnwb_h5ad_set_annotation(void *data, size_t index, const char *text)
{
  KnnwbH5adLabelTarget *target = data;
  knnwb_matrix_set_annotation(target->matrix, KNNWB_MATRIX_ROWS, target->name, index, text);
}

static void knnwb_h5ad_set_label(void *data, size_t index, const char *text)
{
  KnnwbH5adLabelTarget *target = data;
  if (target->rows)
    knnwb_matrix_set_row_label(target->matrix, index, text);
  else
    knnwb_matrix_set_col_label(target->matrix, index, text);
}

gboolean knnwb_h5ad_check_kind(const char *path, hid_t file, GError **error)
{
  if (knnwb_h5_exists(file, "matrix/barcodes")) {
    knnwb_h5_error(error, path,
                   "a 10x Genomics HDF5 matrix (.h5), which knnwb does not read: give it the "
                   "matrix directory instead (filtered_feature_bc_matrix/ with matrix.mtx.gz, "
                   "barcodes.tsv.gz, features.tsv.gz)");
    return FALSE;
  }
  if (knnwb_h5_exists(file, "row_attrs") || knnwb_h5_exists(file, "col_attrs")) {
    knnwb_h5_error(error, path,
                   "a loom file, which knnwb does not read: convert it to .h5ad (Python: "
                   "anndata.read_loom(\"x.loom\").write_h5ad(\"x.h5ad\"))");
    return FALSE;
  }
  H5O_info_t obs;
  if (!knnwb_h5_exists(file, "obs") || H5Oget_info_by_name(file, "obs", &obs, H5P_DEFAULT) < 0) {
    g_autofree char *members = knnwb_h5_member_names(file, "/");
    knnwb_h5_error(error, path, "an HDF5 file but not AnnData: no obs (found: %s)", members);
    return FALSE;
  }
  if (obs.type != H5O_TYPE_GROUP) {
    knnwb_h5_error(error, path,
                   "obs is a table of records, as anndata before 0.7 wrote it, which knnwb does "
                   "not read: read it and write it again with a current anndata "
                   "(anndata.read_h5ad(f).write_h5ad(f2))");
    return FALSE;
  }
  return TRUE;
}

/* Sets annotation entries from a numeric dataset (integers exactly, floats shortest, NaN and
 * masked entries unknown); mask (a dataset of booleans, or -1) marks unknown entries. */
static gboolean knnwb_h5ad_obs_numbers(const char *path, hid_t dataset, hid_t mask,
                                       const char *name, gboolean boolean, KnnwbMatrix *matrix,
                                       GError **error)
{
  hid_t type = H5Dget_type(dataset);
  const gboolean integer = type >= 0 && (H5Tget_class(type) == H5T_INTEGER || boolean);
  /* float32 columns (anndata's n_counts, say) print as the float they hold, not its double. */
  const gboolean single = type >= 0 && !integer && H5Tget_size(type) == 4;
  if (type >= 0)
    H5Tclose(type);
  g_autofree double *reals = g_new(double, KNNWB_H5AD_COLUMN_PIECE);
  g_autofree int64_t *whole = g_new(int64_t, KNNWB_H5AD_COLUMN_PIECE);
  g_autofree int64_t *masked = mask >= 0 ? g_new(int64_t, KNNWB_H5AD_COLUMN_PIECE) : NULL;
  const size_t n = matrix->n_rows;
  for (size_t first = 0; first < n; first += KNNWB_H5AD_COLUMN_PIECE) {
    size_t count = MIN((size_t)KNNWB_H5AD_COLUMN_PIECE, n - first);
    if (!knnwb_h5_read_range(path, dataset, name, integer ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE,
                             first, count, integer ? (void *)whole : (void *)reals, error) ||
        (mask >= 0 &&
         !knnwb_h5_read_range(path, mask, name, H5T_NATIVE_INT64, first, count, masked, error)))
      return FALSE;
    for (size_t i = 0; i < count; i++) {
      char text[48];
      if ((masked != NULL && masked[i] != 0) || (!integer && isnan(reals[i])))
        continue;
      if (boolean)
        g_strlcpy(text, whole[i] != 0 ? "True" : "False", sizeof text);
      else if (integer)
        g_snprintf(text, sizeof text, "%" PRId64, whole[i]);
      else if (single)
        knnwb_formats_format_float(text, sizeof text, (float)reals[i]);
      else
        knnwb_formats_format_double(text, sizeof text, reals[i]);
      knnwb_matrix_set_annotation(matrix, KNNWB_MATRIX_ROWS, name, first + i, text);
    }
  }
  return TRUE;
}

/* A categorical column: categories (strings or numbers) indexed by codes (-1: unknown). */
static gboolean knnwb_h5ad_obs_categorical(const char *path, hid_t group, const char *name,
                                           KnnwbMatrix *matrix, GError **error)
{
  hid_t categories = H5Dopen2(group, "categories", H5P_DEFAULT);
  hid_t codes = H5Dopen2(group, "codes", H5P_DEFAULT);
  g_autoptr(GPtrArray) texts = g_ptr_array_new_with_free_func(g_free);
  g_autofree int64_t *piece = g_new(int64_t, KNNWB_H5AD_COLUMN_PIECE);
  g_autofree char *codes_name = g_strdup_printf("obs/%s/codes", name);
  gboolean ok = FALSE;
  int64_t n_categories = categories < 0 ? -1 : knnwb_h5_length(path, categories, name, error);
  int64_t n_codes =
      codes < 0 || n_categories < 0 ? -1 : knnwb_h5_length(path, codes, codes_name, error);
  if (categories < 0 || codes < 0) {
    knnwb_h5_error(error, path, "obs/%s: a categorical without categories and codes", name);
    goto out;
  }
  if (n_codes < 0)
    goto out;
  if ((size_t)n_codes != matrix->n_rows) {
    knnwb_h5_error(error, path, "obs/%s: %" G_GINT64_FORMAT " codes for %zu cells", name, n_codes,
                   matrix->n_rows);
    goto out;
  }
  if (knnwb_h5_numeric(categories)) {
    /* Numeric categories: formatted once, as a numeric column would be. */
    g_autofree double *values = g_new(double, MAX(n_categories, 1));
    if (!knnwb_h5_read_range(path, categories, name, H5T_NATIVE_DOUBLE, 0, (size_t)n_categories,
                             values, error))
      goto out;
    for (int64_t c = 0; c < n_categories; c++) {
      char text[48];
      knnwb_formats_format_double(text, sizeof text, values[c]);
      g_ptr_array_add(texts, g_strdup(text));
    }
  } else if (!knnwb_h5_for_strings(path, categories, name, (size_t)n_categories,
                                   knnwb_h5_add_string, texts, error)) {
    goto out;
  }
  for (size_t first = 0; first < matrix->n_rows; first += KNNWB_H5AD_COLUMN_PIECE) {
    size_t count = MIN((size_t)KNNWB_H5AD_COLUMN_PIECE, matrix->n_rows - first);
    if (!knnwb_h5_read_range(path, codes, codes_name, H5T_NATIVE_INT64, first, count, piece, error))
      goto out;
    for (size_t i = 0; i < count; i++) {
      if (piece[i] < -1 || piece[i] >= n_categories) {
        knnwb_h5_error(error, path,
                       "%s: entry %zu is %" PRId64 ", not a category (-1 to %" PRId64 ")",
                       codes_name, first + i, piece[i], n_categories - 1);
        goto out;
      }
      if (piece[i] >= 0)
        knnwb_matrix_set_annotation(matrix, KNNWB_MATRIX_ROWS, name, first + i,
                                    g_ptr_array_index(texts, piece[i]));
    }
  }
  ok = TRUE;
out:
  if (categories >= 0)
    H5Dclose(categories);
  if (codes >= 0)
    H5Dclose(codes);
  return ok;
}

/* A plain dataset column: strings, numbers or booleans (h5py's enum of FALSE and TRUE). */
static gboolean knnwb_h5ad_obs_dataset(const char *path, hid_t obs, const char *name,
                                       KnnwbMatrix *matrix, GError **error)
{
  hid_t dataset = H5Dopen2(obs, name, H5P_DEFAULT);
  if (dataset < 0) {
    knnwb_h5_error(error, path, "obs/%s: cannot be opened", name);
    return FALSE;
  }
  hid_t type = H5Dget_type(dataset);
  H5T_class_t class = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
  if (type >= 0)
    H5Tclose(type);
  int64_t length = knnwb_h5_length(path, dataset, name, error);
  gboolean ok = length >= 0;
  if (ok && (size_t)length != matrix->n_rows) {
    knnwb_h5_error(error, path, "obs/%s: %" G_GINT64_FORMAT " entries for %zu cells", name, length,
                   matrix->n_rows);
    ok = FALSE;
  } else if (ok && class == H5T_STRING) {
    KnnwbH5adLabelTarget target = {matrix, name, TRUE};
    ok = knnwb_h5_for_strings(path, dataset, name, matrix->n_rows, knnwb_h5ad_set_annotation,
                              &target, error);
  } else if (ok && (class == H5T_INTEGER || class == H5T_FLOAT || class == H5T_ENUM)) {
    ok = knnwb_h5ad_obs_numbers(path, dataset, -1, name, class == H5T_ENUM, matrix, error);
  } else if (ok) {
    g_warning("%s: obs column '%s' is of a type knnwb does not read; it is left out", path, name);
  }
  H5Dclose(dataset);
  return ok;
}

/* One obs column by its kind (a dataset, or a categorical or nullable group). */
static gboolean knnwb_h5ad_obs_column(const char *path, hid_t obs, const char *name,
                                      KnnwbMatrix *matrix, GError **error)
{
  H5O_info_t object;
  if (!knnwb_h5_exists(obs, name) || H5Oget_info_by_name(obs, name, &object, H5P_DEFAULT) < 0) {
    knnwb_h5_error(error, path, "obs: column '%s' is listed in column-order but missing", name);
    return FALSE;
  }
  if (object.type == H5O_TYPE_DATASET)
    return knnwb_h5ad_obs_dataset(path, obs, name, matrix, error);
  hid_t group = H5Gopen2(obs, name, H5P_DEFAULT);
  g_autofree char *encoding = group >= 0 ? knnwb_h5_attribute_string(group, "encoding-type") : NULL;
  gboolean ok = TRUE;
  if (g_strcmp0(encoding, "categorical") == 0) {
    ok = knnwb_h5ad_obs_categorical(path, group, name, matrix, error);
  } else if (g_strcmp0(encoding, "nullable-integer") == 0 ||
             g_strcmp0(encoding, "nullable-boolean") == 0) {
    hid_t values = H5Dopen2(group, "values", H5P_DEFAULT);
    hid_t mask = H5Dopen2(group, "mask", H5P_DEFAULT);
    int64_t n_values = values >= 0 ? knnwb_h5_length(path, values, name, error) : -1;
    int64_t n_mask = mask >= 0 && n_values >= 0 ? knnwb_h5_length(path, mask, name, error) : -1;
    ok = n_values >= 0 && n_mask >= 0;
    if (!ok || (size_t)n_values != matrix->n_rows || (size_t)n_mask != matrix->n_rows) {
      g_clear_error(error);
      knnwb_h5_error(error, path, "obs/%s: a nullable column needs values and mask of %zu entries",
                     name, matrix->n_rows);
      ok = FALSE;
    } else {
      ok = knnwb_h5ad_obs_numbers(path, values, mask, name, encoding[9] == 'b', matrix, error);
    }
    if (values >= 0)
      H5Dclose(values);
    if (mask >= 0)
      H5Dclose(mask);
  } else {
    g_warning("%s: obs column '%s' is of encoding '%s', which knnwb does not read; it is left out",
              path, name, encoding != NULL ? encoding : "unknown");
  }
  if (group >= 0)
    H5Gclose(group);
  return ok;
}

/* The names of a data frame (obs or var) into the matrix's row or column labels: the dataset its
 * _index attribute names (anndata's default "_index"). Numbers are formatted. */
static gboolean knnwb_h5ad_names(const char *path, hid_t frame, const char *frame_name, size_t n,
                                 KnnwbMatrix *matrix, gboolean rows, GError **error)
{
  g_autofree char *index = knnwb_h5_attribute_string(frame, "_index");
  const char *index_name = index != NULL ? index : "_index";
  if (!knnwb_h5_exists(frame, index_name)) {
    knnwb_h5_error(error, path, "%s: no names (no dataset '%s')", frame_name, index_name);
    return FALSE;
  }
  hid_t dataset = H5Dopen2(frame, index_name, H5P_DEFAULT);
  g_autofree char *full = g_strdup_printf("%s/%s", frame_name, index_name);
  int64_t length = dataset >= 0 ? knnwb_h5_length(path, dataset, full, error) : -1;
  gboolean ok = length >= 0;
  if (ok && (size_t)length != n) {
    knnwb_h5_error(error, path, "%s has %" G_GINT64_FORMAT " names, the matrix %zu %s", full,
                   length, n, rows ? "rows (cells)" : "columns (features)");
    ok = FALSE;
  }
  KnnwbH5adLabelTarget target = {matrix, NULL, rows};
  if (ok && knnwb_h5_numeric(dataset)) {
    g_autofree double *values = g_new(double, MAX(n, 1));
    ok = knnwb_h5_read_range(path, dataset, full, H5T_NATIVE_DOUBLE, 0, n, values, error);
    for (size_t i = 0; ok && i < n; i++) {
      char text[48];
      knnwb_formats_format_double(text, sizeof text, values[i]);
      knnwb_h5ad_set_label(&target, i, text);
    }
  } else if (ok) {
    ok = knnwb_h5_for_strings(path, dataset, full, n, knnwb_h5ad_set_label, &target, error);
  }
  if (dataset >= 0)
    H5Dclose(dataset);
  else if (error != NULL && *error == NULL)
    knnwb_h5_error(error, path, "%s cannot be opened", full);
  return ok;
}

gboolean knnwb_h5ad_read_obs(const char *path, hid_t file, const char *element, KnnwbMatrix *matrix,
                             GError **error)
{
  hid_t obs = H5Gopen2(file, "obs", H5P_DEFAULT);
  if (obs < 0) {
    knnwb_h5_error(error, path, "obs cannot be opened");
    return FALSE;
  }
  gboolean ok = knnwb_h5ad_names(path, obs, "obs", matrix->n_rows, matrix, TRUE, error);
  g_auto(GStrv) columns = ok ? knnwb_h5_attribute_strings(obs, "column-order") : NULL;
  g_autofree char *index = ok ? knnwb_h5_attribute_string(obs, "_index") : NULL;
  for (char **column = columns; ok && column != NULL && *column != NULL; column++)
    if (g_strcmp0(*column, index != NULL ? index : "_index") != 0 && **column != '\0')
      ok = knnwb_h5ad_obs_column(path, obs, *column, matrix, error);
  H5Gclose(obs);
  /* var names the columns of X and of the layers (obsm's columns are components, not genes). */
  if (ok && !g_str_has_prefix(element, "obsm/") && knnwb_h5_exists(file, "var")) {
    hid_t var = H5Gopen2(file, "var", H5P_DEFAULT);
    ok = var >= 0 && knnwb_h5ad_names(path, var, "var", matrix->n_cols, matrix, FALSE, error);
    if (var >= 0)
      H5Gclose(var);
  }
  return ok;
}

#endif
