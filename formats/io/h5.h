/* formats/io: the HDF5 pieces the AnnData reader (read/read_h5ad*.c) and writer
 * (write/write_h5ad.c) share: quiet opening, attributes, strings and numbers in bounded pieces.
 * Included only by files built with KNNWB_HAVE_HDF5. */
#ifndef KNNWB_FORMATS_IO_H5_H
#define KNNWB_FORMATS_IO_H5_H

#include <glib.h>
#include <hdf5.h>
#include <stdint.h>

G_BEGIN_DECLS

/** Turns off HDF5's printing of its error stack (knnwb reports errors itself), once. */
void knnwb_h5_quiet(void);

/** Sets KNNWB_ERROR_PARSE "path: message". */
void knnwb_h5_error(GError **error, const char *path, const char *format, ...) G_GNUC_PRINTF(3, 4);

/** Whether every link of the '/'-separated path exists under location (H5Lexists alone fails on a
 * missing intermediate group). */
gboolean knnwb_h5_exists(hid_t location, const char *path);

/** The members of group_path, comma-separated (for "there is ... instead" messages), "none" when
 * it is missing or empty; at most about 400 characters. Free with g_free. */
char *knnwb_h5_member_names(hid_t file, const char *group_path);

/** A scalar string attribute (variable or fixed length, UTF-8) as a new string; NULL when missing,
 * of another type or not UTF-8. */
char *knnwb_h5_attribute_string(hid_t object, const char *name);

/** A 1-D attribute of variable-length strings as a NULL-terminated array (g_strfreev); an empty
 * array of any type gives an empty list; NULL when missing or of another type. */
char **knnwb_h5_attribute_strings(hid_t object, const char *name);

/** A two-integer attribute (a sparse matrix's shape), both >= 0. */
gboolean knnwb_h5_attribute_shape(hid_t object, const char *name, int64_t shape[2]);

/** The length of the 1-D dataset (name for messages); -1 with error when it is not 1-D. */
int64_t knnwb_h5_length(const char *path, hid_t dataset, const char *name, GError **error);

/** Whether the dataset holds integers or floats. */
gboolean knnwb_h5_numeric(hid_t dataset);

/** Reads count elements of a 1-D dataset from start, converted by HDF5 to memory_type. */
gboolean knnwb_h5_read_range(const char *path, hid_t dataset, const char *name, hid_t memory_type,
                             size_t start, size_t count, void *out, GError **error);

/** Called with each string of knnwb_h5_for_strings. */
typedef void (*KnnwbH5StringFunc)(void *data, size_t index, const char *text);

/** Calls each(data, i, text) for the first n strings of a 1-D string dataset (variable or fixed
 * length), read in pieces of 4,096. Texts must be valid UTF-8. Errors: KNNWB_ERROR_PARSE. */
gboolean knnwb_h5_for_strings(const char *path, hid_t dataset, const char *name, size_t n,
                              KnnwbH5StringFunc each, void *data, GError **error);

/** A KnnwbH5StringFunc that appends a copy of the text to the GPtrArray data. */
void knnwb_h5_add_string(void *data, size_t index, const char *text);

G_END_DECLS

#endif
