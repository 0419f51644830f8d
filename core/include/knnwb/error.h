/* knnwb error domain shared by every module. */
#ifndef KNNWB_ERROR_H
#define KNNWB_ERROR_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

G_BEGIN_DECLS

/** The GError domain of every knnwb function. */
#define KNNWB_ERROR (knnwb_error_quark())
GQuark knnwb_error_quark(void);

/** Codes of KNNWB_ERROR. Messages always say what is wrong and, where it helps, what to do. */
typedef enum {
  KNNWB_ERROR_INVALID_ARGUMENT, /**< a parameter is out of range (k, sizes, options) */
  KNNWB_ERROR_INVALID_DATA,     /**< the data cannot be used (NaN, constant row, ...) */
  KNNWB_ERROR_PARSE,            /**< an input file is malformed (message is file:line: ...) */
  KNNWB_ERROR_IO,               /**< reading or writing a file failed */
  KNNWB_ERROR_NO_MEMORY,        /**< an allocation failed or a size overflowed */
  KNNWB_ERROR_CANCELLED,        /**< the caller asked to stop */
  KNNWB_ERROR_DEVICE,           /**< a GPU call failed or no GPU is usable */
  KNNWB_ERROR_IGRAPH,           /**< an igraph call failed */
  KNNWB_ERROR_FAILED            /**< anything else */
} KnnwbError;

/** Multiplies two sizes; FALSE (and *out untouched) when the product overflows size_t. */
static inline gboolean knnwb_size_multiply(size_t a, size_t b, size_t *out)
{
  if (a != 0 && b > SIZE_MAX / a)
    return FALSE;
  *out = a * b;
  return TRUE;
}

/**
 * An array of count elements of size bytes whose size the input decides: g_try_malloc_n (zeroed
 * with knnwb_try_new0_array), so a failure, or count * size overflowing, is KNNWB_ERROR_NO_MEMORY
 * "cannot allocate WHAT for ROWS rows (N MiB)" instead of GLib's abort. count 0 gives a valid
 * block. Free with g_free. O(count * size) for the zeroed form, O(1) otherwise.
 */
void *knnwb_try_new_array(size_t count, size_t size, const char *what, size_t rows, GError **error);
void *knnwb_try_new0_array(size_t count, size_t size, const char *what, size_t rows,
                           GError **error);

/**
 * Turns an igraph error code into a GError naming the failed operation.
 * Returns FALSE when code is an error (so it can end a boundary function), TRUE otherwise.
 */
gboolean knnwb_error_from_igraph(int code, const char *what, GError **error);

/** "s" unless count is 1: messages say "1 field" and "2 fields" ("%zu field%s", n,
 * KNNWB_PLURAL(n)). count is evaluated once. */
#define KNNWB_PLURAL(count) ((count) == 1 ? "" : "s")

G_END_DECLS

#endif
