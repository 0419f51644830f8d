/* HDF5 helpers of the AnnData reader and writer (see h5.h). */
#ifdef KNNWB_HAVE_HDF5

#include "h5.h"

#include <knnwb/error.h>
#include <string.h>

/* Strings per piece of a string dataset. */
enum { KNNWB_H5_STRINGS = 4096 };

void knnwb_h5_quiet(void)
{
  static gsize done = 0;
  if (g_once_init_enter(&done)) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    g_once_init_leave(&done, 1);
  }
}

void knnwb_h5_error(GError **error, const char *path, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s: %s", path, message);
}

/* Calls each(i, text) for the n strings of dataset name (1-D, variable or fixed length), in pieces
 * of KNNWB_H5_STRINGS. Texts must be UTF-8 without NUL bytes. */

gboolean knnwb_h5_for_strings(const char *path, hid_t dataset, const char *name, size_t n,
                              KnnwbH5StringFunc each, void *data, GError **error)
{
  hid_t file_type = H5Dget_type(dataset);
  const gboolean variable = file_type >= 0 && H5Tis_variable_str(file_type) > 0;
  const size_t fixed = file_type >= 0 ? H5Tget_size(file_type) : 0;
  hid_t memory_type = H5Tcopy(H5T_C_S1);
  H5Tset_size(memory_type, variable ? H5T_VARIABLE : MAX(fixed, 1));
  /* Fixed-length strings fill their size (NULLPAD, as numpy's S dtype): a C string type of the
   * same size would lose the last character to its terminator. */
  if (!variable)
    H5Tset_strpad(memory_type, H5T_STR_NULLPAD);
  /* HDF5 converts no strings between character sets: read them in the file's (ASCII or UTF-8). */
  H5Tset_cset(memory_type, file_type >= 0 ? H5Tget_cset(file_type) : H5T_CSET_UTF8);
  hid_t space = H5Dget_space(dataset);
  gboolean ok = FALSE;
  char **pointers = variable ? g_new0(char *, KNNWB_H5_STRINGS) : NULL;
  char *bytes = variable ? NULL : g_malloc((size_t)KNNWB_H5_STRINGS * MAX(fixed, 1));
  g_autofree char *text = variable ? NULL : g_malloc(MAX(fixed, 1) + 1);
  for (size_t first = 0; first < n; first += KNNWB_H5_STRINGS) {
    hsize_t start = first, count = MIN((size_t)KNNWB_H5_STRINGS, n - first);
    hid_t memory_space = H5Screate_simple(1, &count, NULL);
    herr_t read = H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, NULL, &count, NULL) < 0
                      ? -1
                      : H5Dread(dataset, memory_type, memory_space, space, H5P_DEFAULT,
                                variable ? (void *)pointers : (void *)bytes);
    gboolean valid = read >= 0;
    for (size_t i = 0; valid && i < count; i++) {
      const char *s = variable ? (pointers[i] != NULL ? pointers[i] : "") : text;
      if (!variable) {
        size_t length = strnlen(bytes + i * fixed, fixed);
        memcpy(text, bytes + i * fixed, length);
        text[length] = '\0';
      }
      if (!g_utf8_validate(s, -1, NULL)) {
        knnwb_h5_error(error, path, "%s: entry %zu is not valid UTF-8", name, first + i);
        valid = FALSE;
        read = 0;
        break;
      }
      each(data, first + i, s);
    }
    if (variable && read >= 0)
      H5Dvlen_reclaim(memory_type, memory_space, H5P_DEFAULT, pointers);
    H5Sclose(memory_space);
    if (!valid) {
      if (read < 0)
        knnwb_h5_error(error, path, "%s: cannot read strings %zu to %zu", name, first,
                       first + (size_t)count - 1);
      goto out;
    }
  }
  ok = TRUE;
out:
  g_free(pointers);
  g_free(bytes);
  H5Sclose(space);
  H5Tclose(memory_type);
  if (file_type >= 0)
    H5Tclose(file_type);
  return ok;
}

void knnwb_h5_add_string(void *data, size_t index, const char *text)
{
  (void)index;
  g_ptr_array_add(data, g_strdup(text));
}

/* ---- the parts of the file ---- */

/* The names of group's members (for messages: what there is instead), comma-separated. */
static herr_t knnwb_h5_collect_name(hid_t group, const char *name, const H5L_info_t *info,
                                    void *data)
{
  (void)group;
  (void)info;
  GString *names = data;
  g_string_append_printf(names, "%s%s", names->len > 0 ? ", " : "", name);
  return names->len > 400 ? 1 : 0;
}

char *knnwb_h5_member_names(hid_t file, const char *group_path)
{
  GString *names = g_string_new(NULL);
  if (H5Lexists(file, group_path, H5P_DEFAULT) > 0) {
    hid_t group = H5Gopen2(file, group_path, H5P_DEFAULT);
    if (group >= 0) {
      hsize_t index = 0;
      H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &index, knnwb_h5_collect_name, names);
      H5Gclose(group);
    }
  }
  if (names->len == 0)
    g_string_append(names, "none");
  return g_string_free(names, FALSE);
}

gboolean knnwb_h5_exists(hid_t location, const char *path)
{
  /* H5Lexists fails (rather than answering no) when an intermediate group is missing. */
  g_auto(GStrv) parts = g_strsplit(path, "/", -1);
  g_autoptr(GString) prefix = g_string_new(NULL);
  for (char **part = parts; *part != NULL; part++) {
    if (**part == '\0')
      return FALSE;
    g_string_append_printf(prefix, "%s%s", prefix->len > 0 ? "/" : "", *part);
    if (H5Lexists(location, prefix->str, H5P_DEFAULT) <= 0)
      return FALSE;
  }
  return TRUE;
}

char *knnwb_h5_attribute_string(hid_t object, const char *name)
{
  if (H5Aexists(object, name) <= 0)
    return NULL;
  hid_t attribute = H5Aopen(object, name, H5P_DEFAULT);
  if (attribute < 0)
    return NULL;
  hid_t type = H5Aget_type(attribute);
  hid_t space = H5Aget_space(attribute);
  char *result = NULL;
  if (type >= 0 && H5Tget_class(type) == H5T_STRING && space >= 0 &&
      H5Sget_simple_extent_npoints(space) == 1) {
    hid_t memory_type = H5Tcopy(H5T_C_S1);
    H5Tset_cset(memory_type, H5Tget_cset(type));
    if (H5Tis_variable_str(type) > 0) {
      H5Tset_size(memory_type, H5T_VARIABLE);
      char *text = NULL;
      if (H5Aread(attribute, memory_type, &text) >= 0 && text != NULL) {
        result = g_strdup(text);
        H5free_memory(text);
      }
    } else {
      size_t size = H5Tget_size(type);
      if (size > 0 && size < (1u << 20)) {
        H5Tset_size(memory_type, size);
        H5Tset_strpad(memory_type, H5T_STR_NULLPAD);
        g_autofree char *text = g_malloc0(size + 1);
        if (H5Aread(attribute, memory_type, text) >= 0)
          result = g_strndup(text, size);
      }
    }
    H5Tclose(memory_type);
  }
  if (result != NULL && !g_utf8_validate(result, -1, NULL))
    g_clear_pointer(&result, g_free);
  if (space >= 0)
    H5Sclose(space);
  if (type >= 0)
    H5Tclose(type);
  H5Aclose(attribute);
  return result;
}

/* A 1-D string attribute (obs's column-order) into a NULL-terminated array; an empty array of any
 * type (anndata writes an empty float array when there are no columns) gives an empty list. NULL
 * when missing or not strings. */
char **knnwb_h5_attribute_strings(hid_t object, const char *name)
{
  if (H5Aexists(object, name) <= 0)
    return NULL;
  hid_t attribute = H5Aopen(object, name, H5P_DEFAULT);
  hid_t type = attribute >= 0 ? H5Aget_type(attribute) : -1;
  hid_t space = attribute >= 0 ? H5Aget_space(attribute) : -1;
  hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
  char **result = NULL;
  if (n == 0) {
    result = g_new0(char *, 1);
  } else if (n > 0 && n < (1 << 24) && type >= 0 && H5Tget_class(type) == H5T_STRING &&
             H5Tis_variable_str(type) > 0) {
    hid_t memory_type = H5Tcopy(H5T_C_S1);
    H5Tset_size(memory_type, H5T_VARIABLE);
    H5Tset_cset(memory_type, H5Tget_cset(type));
    char **texts = g_new0(char *, (size_t)n);
    if (H5Aread(attribute, memory_type, texts) >= 0) {
      result = g_new0(char *, (size_t)n + 1);
      for (hssize_t i = 0; i < n; i++)
        result[i] = g_strdup(texts[i] != NULL ? texts[i] : "");
      H5Dvlen_reclaim(memory_type, space, H5P_DEFAULT, texts);
    }
    g_free(texts);
    H5Tclose(memory_type);
  }
  if (space >= 0)
    H5Sclose(space);
  if (type >= 0)
    H5Tclose(type);
  if (attribute >= 0)
    H5Aclose(attribute);
  return result;
}

/* An integer pair attribute (a sparse matrix's shape). */
gboolean knnwb_h5_attribute_shape(hid_t object, const char *name, int64_t shape[2])
{
  if (H5Aexists(object, name) <= 0)
    return FALSE;
  hid_t attribute = H5Aopen(object, name, H5P_DEFAULT);
  hid_t type = attribute >= 0 ? H5Aget_type(attribute) : -1;
  hid_t space = attribute >= 0 ? H5Aget_space(attribute) : -1;
  gboolean ok = type >= 0 && H5Tget_class(type) == H5T_INTEGER && space >= 0 &&
                H5Sget_simple_extent_npoints(space) == 2 &&
                H5Aread(attribute, H5T_NATIVE_INT64, shape) >= 0 && shape[0] >= 0 && shape[1] >= 0;
  if (space >= 0)
    H5Sclose(space);
  if (type >= 0)
    H5Tclose(type);
  if (attribute >= 0)
    H5Aclose(attribute);
  return ok;
}

/* A 1-D dataset's length, or -1 (with error) when it is missing or not 1-D. */
int64_t knnwb_h5_length(const char *path, hid_t dataset, const char *name, GError **error)
{
  hid_t space = H5Dget_space(dataset);
  hsize_t dims[2] = {0, 0};
  int rank = space >= 0 ? H5Sget_simple_extent_dims(space, dims, NULL) : -1;
  if (space >= 0)
    H5Sclose(space);
  if (rank != 1) {
    knnwb_h5_error(error, path, "%s: expected a 1-D array, found %d dimensions", name, rank);
    return -1;
  }
  return (int64_t)dims[0];
}

/* Reads count elements of a 1-D numeric dataset from start, converted by HDF5 to memory_type. */
gboolean knnwb_h5_read_range(const char *path, hid_t dataset, const char *name, hid_t memory_type,
                             size_t start, size_t count, void *out, GError **error)
{
  if (count == 0)
    return TRUE;
  hid_t space = H5Dget_space(dataset);
  hsize_t offset = start, n = count;
  hid_t memory_space = H5Screate_simple(1, &n, NULL);
  herr_t read = space < 0 || H5Sselect_hyperslab(space, H5S_SELECT_SET, &offset, NULL, &n, NULL) < 0
                    ? -1
                    : H5Dread(dataset, memory_type, memory_space, space, H5P_DEFAULT, out);
  H5Sclose(memory_space);
  if (space >= 0)
    H5Sclose(space);
  if (read < 0)
    knnwb_h5_error(error, path, "%s: cannot read entries %zu to %zu as numbers", name, start,
                   start + count - 1);
  return read >= 0;
}

/* Whether dataset holds numbers HDF5 converts (integers or floats). */
gboolean knnwb_h5_numeric(hid_t dataset)
{
  hid_t type = H5Dget_type(dataset);
  H5T_class_t class = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
  if (type >= 0)
    H5Tclose(type);
  return class == H5T_INTEGER || class == H5T_FLOAT;
}

#endif
