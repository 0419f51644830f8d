/* formats/io: what the readers and writers of formats/ share from io/ (numbers, messages, gzip,
 * content sniffing, line input, matrix building, chunked parallel output, escaping, NPY headers).
 * Read by formats/ only; not installed. */
#ifndef KNNWB_FORMATS_IO_H
#define KNNWB_FORMATS_IO_H

#include <knnwb/error.h>
#include <knnwb/formats.h>
#include <knnwb/matrix.h>
#include <knnwb/text_fields.h>

#include <glib.h>
#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

G_BEGIN_DECLS

/* ---- numbers (float_parse.c, format_double.c) ---- */

/* Parsing (float_parse.h, inlined into the row loops). */
#include "float_parse.h"

/** Formats a double so that strtod gives it back exactly, in the shortest of %.15g/%.16g/%.17g. */
int knnwb_formats_format_double(char *buffer, size_t size, double value);

/** Formats a float so that strtof gives it back exactly, in the shortest of %.6g to %.9g (of the
 * value as a double), as printf would. Needs 32 bytes for the fast path. Returns the length. */
int knnwb_formats_format_float(char *buffer, size_t size, float value);

/* ---- errors ---- */

/** Sets KNNWB_ERROR_PARSE "path:line:column: message" (column 0: "path:line: message"). */
void knnwb_formats_parse_error(GError **error, const char *path, size_t line, size_t column,
                               const char *format, ...) G_GNUC_PRINTF(5, 6);

/* ---- what the file is (detect.c) ---- */

/**
 * The format to read path with: requested when not AUTO, else from the name (a trailing .gz
 * ignored), else from the content. Fails with what the file looks like when the content cannot
 * be read in that format (NPY as text, a zip archive, GML, HTML...). Reads the first 64 KiB,
 * decompressed when gzip. Errors: KNNWB_ERROR_IO, KNNWB_ERROR_PARSE.
 */
gboolean knnwb_formats_resolve_input(const char *path, KnnwbInputFormat requested,
                                     KnnwbInputFormat *format, GError **error);
/* ---- gzip-compressed input (gzip_input.c) ---- */

/** Streaming gzip decompression of a file descriptor (not owned). */
typedef struct KnnwbGzipReader KnnwbGzipReader;

/** TRUE when the file behind fd starts with the gzip magic bytes 1f 8b (pread: offset kept). */
gboolean knnwb_gzip_fd_is_gzip(int fd);
/** Starts decompressing fd from its current offset. Errors: KNNWB_ERROR_NO_MEMORY. */
KnnwbGzipReader *knnwb_gzip_reader_new(int fd, const char *path, GError **error);
/**
 * Up to capacity decompressed bytes into buffer: > 0 bytes, 0 at the end of the last member, -1 on
 * error (KNNWB_ERROR_IO for read failures, KNNWB_ERROR_PARSE "path: byte N: ..." for corrupt,
 * truncated or trailing non-gzip data). Concatenated members read as one stream.
 */
gssize knnwb_gzip_reader_read(KnnwbGzipReader *reader, void *buffer, size_t capacity,
                              GError **error);
/** NULL is fine. */
void knnwb_gzip_reader_free(KnnwbGzipReader *reader);
/**
 * Caps the decompressed bytes the reader hands out at limit (0: none): the read that would pass it
 * fails with KNNWB_ERROR_PARSE "path: the compressed data decompresses to more than N MiB
 * (reason)", having inflated at most one byte past the cap. reason (static) says what the cap is.
 */
void knnwb_gzip_reader_set_limit(KnnwbGzipReader *reader, uint64_t limit, const char *reason);
/**
 * The first bytes of path, decompressed when it is gzip (*compressed set): up to capacity bytes
 * into buffer, *length of them. Errors: KNNWB_ERROR_IO, KNNWB_ERROR_PARSE (corrupt gzip).
 */
gboolean knnwb_formats_read_head(const char *path, char *buffer, size_t capacity, size_t *length,
                                 gboolean *compressed, GError **error);

/* ---- a plain file read on several threads (parallel_read.c) ---- */

/**
 * Turns n stored items (the file's bytes, as read) into n floats at out; FALSE with *bad (< n)
 * at the first item it refuses. Called on several threads at once, on disjoint pieces.
 */
typedef gboolean (*KnnwbPreadConvertFunc)(const unsigned char *stored, size_t n, float *out,
                                          size_t *bad, void *data);

/** How knnwb_formats_pread_parallel() reads: threads, interruption, progress, a float check. */
typedef struct {
  int n_threads;               /* 0: every usable core; fewer when the read is small */
  const volatile gint *cancel; /* optional: stop (ECANCELED) once *cancel != 0 */
  KnnwbProgressFunc progress;  /* optional: (offset + bytes read, progress_total), called on
                                  the calling thread only */
  void *progress_data;
  uint64_t progress_total;
  gboolean check_floats; /* the floats written: say whether all are finite */
  /* knnwb_formats_pread_convert() only (NULL/0 for a plain read): */
  size_t stored_item_size; /* bytes of one stored item */
  KnnwbPreadConvertFunc convert;
  void *convert_data;
} KnnwbPreadPlan;

/**
 * Reads bytes at offset of the regular file fd into buffer, each thread a contiguous range in
 * 2 MiB pieces (cancel checked before each). On failure returns FALSE and *saved_errno says why,
 * for the failure at the lowest offset: 0 (the file ended early), ECANCELED, or pread's errno
 * (a failure stops only the ranges above it); the buffer's contents are then unspecified.
 * *all_finite: TRUE when plan->check_floats and every float32 read is finite (no NaN, no
 * infinity). Time O(bytes / threads); no allocation.
 */
gboolean knnwb_formats_pread_parallel(int fd, void *buffer, size_t bytes, uint64_t offset,
                                      const KnnwbPreadPlan *plan, gboolean *all_finite,
                                      int *saved_errno);

/**
 * Reads n_items stored items of plan->stored_item_size bytes at offset of fd and converts them
 * with plan->convert into floats[0, n_items): each thread owns a contiguous range of items (whole
 * 4 KiB pages of floats), read in pieces of about 2 MiB into a buffer of its own and converted
 * into place, cancel checked before each piece, the floats scanned for NaN and infinity while
 * they are in the cache (*all_finite as for knnwb_formats_pread_parallel()). On failure returns
 * FALSE with *saved_errno and *failed_item for the failure at the lowest item, whatever the thread
 * count (a failure stops only the ranges above it): 0 (the file ended early), ECANCELED, pread's
 * errno (those three at the first item of the piece), ENOMEM (the piece buffers, *failed_item
 * SIZE_MAX), or ERANGE: plan->convert refused item *failed_item. The floats' contents are then
 * unspecified. Time O(n_items / threads); memory one piece (about 2 MiB) per thread.
 */
gboolean knnwb_formats_pread_convert(int fd, float *floats, size_t n_items, uint64_t offset,
                                     const KnnwbPreadPlan *plan, gboolean *all_finite,
                                     int *saved_errno, size_t *failed_item);

/* ---- what a file looks like, for messages (sniff.c) ---- */

/** The kinds of content knnwb_formats_sniff() tells apart. */
typedef enum {
  KNNWB_CONTENT_EMPTY,
  KNNWB_CONTENT_TEXT, /**< text without a recognised signature (CSV/TSV candidates) */
  KNNWB_CONTENT_NPY,
  KNNWB_CONTENT_GZIP,              /**< still gzip after one decompression (compressed twice) */
  KNNWB_CONTENT_ZIP,               /**< zip archive: .npz, .zip, .xlsx */
  KNNWB_CONTENT_OTHER_COMPRESSION, /**< bzip2, xz, zstd */
  KNNWB_CONTENT_GCT,
  KNNWB_CONTENT_CIBM,
  KNNWB_CONTENT_GEO,     /**< NCBI GEO series matrix */
  KNNWB_CONTENT_GML,     /**< a graph, not a matrix */
  KNNWB_CONTENT_GRAPHML, /**< a graph, not a matrix */
  KNNWB_CONTENT_XML,     /**< other XML or HTML (an error page saved instead of the file?) */
  KNNWB_CONTENT_BINARY,  /**< NUL bytes or other binary data */
  KNNWB_CONTENT_HDF5,    /**< HDF5: AnnData .h5ad (read), loom or 10x .h5 (refused by the reader) */
  KNNWB_CONTENT_MTX,     /**< a Matrix Market file (10x Genomics' matrix.mtx) */
  KNNWB_CONTENT_FOREIGN  /**< a known kind knnwb does not read: Excel, R data */
} KnnwbContentKind;

/**
 * Classifies the first bytes of a file (decompressed already when it was gzip). *description is a
 * static phrase for messages, e.g. "a NumPy .npy array", "a zip archive (an .npz?)". O(length).
 */
KnnwbContentKind knnwb_formats_sniff(const char *head, size_t length, const char **description);

/* ---- buffered line input ---- */

/**
 * Streaming line reader over large read() calls. A line is returned without its "\n" or "\r\n"
 * and stays valid until the next call. A UTF-8 byte-order mark at the start is skipped.
 */
typedef struct {
  const char *path;
  int fd;
  char *buffer;
  size_t capacity;
  size_t filled;     /* valid bytes in buffer */
  size_t line_begin; /* offset of the current line */
  size_t line_end;   /* offset just past the current line's terminator */
  size_t line_number;
  uint64_t file_size;  /* bytes the input yields when known (a plain regular file), else 0 */
  uint64_t size_bound; /* an upper bound on the bytes the input yields (gzip: 1032 x the compressed
                          size, deflate's largest ratio), 0 when unknown; for plausibility checks */
  KnnwbGzipReader *gzip; /* non-NULL when the file is gzip-compressed */
  gboolean eof;
  gboolean started;
  uint64_t base; /* file offset of buffer[0] */
  /* A byte window (knnwb_text_input_set_window): next_line skips (but counts) the lines that start
   * before window_start and ends at the first that starts at window_end or later; quoted tells
   * whether any line it returned or skipped held a '"'. */
  gboolean windowed;
  uint64_t window_start, window_end;
  gboolean quoted;
  /* From the read options (knnwb_text_input_watch): polled and reported at every buffer fill. */
  const volatile gint *cancel;
  KnnwbProgressFunc progress;
  void *progress_data;
  uint64_t stored_size; /* the file's own size (compressed for gzip), for progress */
} KnnwbTextInput;

/** Takes options' cancel flag and progress callback (either may be NULL) for input: a raised flag
 * makes the next buffer fill fail with KNNWB_ERROR_CANCELLED, and each fill reports the bytes of
 * the file read so far. A long read of a large or compressed file then stops within a buffer
 * (4 MiB) of Ctrl-C, and shows its progress. */
void knnwb_text_input_watch(KnnwbTextInput *input, const KnnwbReadOptions *options);

/** Opens path, gzip-compressed or not (by content). Errors: KNNWB_ERROR_IO. */
gboolean knnwb_text_input_open(KnnwbTextInput *input, const char *path, GError **error);
/** Closes and frees the buffer; safe on a zeroed or closed input. */
void knnwb_text_input_close(KnnwbTextInput *input);
/** From the next line on, returns only the lines that start in [start, end) (file offsets); the
 * line numbers still count every line. For one rank's rows of a text file. */
void knnwb_text_input_set_window(KnnwbTextInput *input, uint64_t start, uint64_t end);
/** The file offset where the current line starts. */
uint64_t knnwb_text_input_line_offset(const KnnwbTextInput *input);
/** Next line: 1 = a line, 0 = end of file, -1 = read error (KNNWB_ERROR_IO set). */
int knnwb_text_input_next_line(KnnwbTextInput *input, const char **line, size_t *length,
                               GError **error);
/**
 * Appends the next physical line to the current one (for quoted newlines): *line is the whole
 * record from its first line, with the inner "\n" kept. 0 = end of file (record unchanged).
 */
int knnwb_text_input_extend_line(KnnwbTextInput *input, const char **line, size_t *length,
                                 GError **error);

/* ---- building a matrix row by row ---- */

/** Grows the value array geometrically with realloc (mremap for large blocks: no copy, no peak). */
typedef struct {
  size_t n_cols;
  size_t n_rows;
  size_t capacity_rows;
  float *values;
  GStringChunk *labels_chunk;
  GPtrArray *row_labels; /* char* into labels_chunk, or NULL when rows are unlabelled */
  GPtrArray *col_labels; /* owned strings (g_free) */
  GPtrArray *col_classes;
  GArray *absent_rows; /* size_t row numbers of the rows kept without values, or NULL */
  /* Ranks from the values as read (knnwb_matrix_builder_keep_ranks): along rows, each committed
   * row's ranks into ranks (capacity_rows rows) from the double scratch exact_row; along
   * columns (a transposed read), every value kept as double in exact until finish. */
  int rank_axis; /* 0: none, 1: rows, 2: columns */
  double *exact_row;
  float *ranks;
  double *exact;
} KnnwbMatrixBuilder;

void knnwb_matrix_builder_init(KnnwbMatrixBuilder *builder, size_t n_cols, gboolean row_labels);
/**
 * Asks the builder for average ranks computed from the values as read, in double (the spearman
 * metric's input: values that differ only beyond float32 precision must not tie): along each row,
 * or along each column when columns is TRUE (a read that will be transposed; ranked at finish,
 * absent rows left out, in the transposed layout). Call before the first row; the reader then
 * writes each value's double into knnwb_matrix_builder_exact_row() beside its float. The finished
 * matrix carries them (knnwb_matrix_row_ranks). Memory: 4 bytes per value (rows), 8 more per value
 * until finish (columns).
 */
void knnwb_matrix_builder_keep_ranks(KnnwbMatrixBuilder *builder, gboolean columns);
/** The double storage of the row next_row returned, or NULL when no ranks are kept. */
double *knnwb_matrix_builder_exact_row(KnnwbMatrixBuilder *builder);
/** Makes room for at least rows rows. Errors: KNNWB_ERROR_NO_MEMORY. */
gboolean knnwb_matrix_builder_reserve(KnnwbMatrixBuilder *builder, size_t rows, GError **error);
/** The storage of the next row (not yet counted); grows as needed. NULL + error on failure. */
float *knnwb_matrix_builder_next_row(KnnwbMatrixBuilder *builder, GError **error);
/** Counts the row written into knnwb_matrix_builder_next_row()'s storage, with its label. */
void knnwb_matrix_builder_commit_row(KnnwbMatrixBuilder *builder, const char *label,
                                     size_t label_length);
/**
 * Counts the row in knnwb_matrix_builder_next_row()'s storage as absent (missing values, policy
 * DROP_ROWS): its values become zeros, its label stays, and the matrix marks it absent, so rows
 * keep their input numbers and the row gets no edges.
 */
void knnwb_matrix_builder_commit_absent_row(KnnwbMatrixBuilder *builder, const char *label,
                                            size_t label_length);
/** Turns the builder into a matrix (the builder is emptied). Errors: KNNWB_ERROR_NO_MEMORY. */
KnnwbMatrix *knnwb_matrix_builder_finish(KnnwbMatrixBuilder *builder, GError **error);
/**
 * The readers' common ending: an error at line when every row was dropped for missing values,
 * otherwise the finished matrix into *out. Returns FALSE on error.
 */
gboolean knnwb_matrix_builder_finish_rows(KnnwbMatrixBuilder *builder, const char *path,
                                          size_t line, const KnnwbReadInfo *info, KnnwbMatrix **out,
                                          GError **error);
void knnwb_matrix_builder_clear(KnnwbMatrixBuilder *builder);

/* ---- chunked parallel output (chunk_writer.c) ---- */

/** A growing text buffer that one thread formats into (see knnwb_formats_write_chunks). */
typedef struct {
  char *data;
  size_t length, capacity;
} KnnwbTextChunk;

/** Grows chunk so that `more` bytes fit after its length (g_realloc: aborts only when out of
 * memory for a few megabytes). */
void knnwb_text_chunk_grow(KnnwbTextChunk *chunk, size_t more);

/** Room for `more` bytes at the end of chunk; returns where to write them (then add to length). */
static inline char *knnwb_text_chunk_room(KnnwbTextChunk *chunk, size_t more)
{
  if (chunk->capacity - chunk->length < more)
    knnwb_text_chunk_grow(chunk, more);
  return chunk->data + chunk->length;
}

static inline void knnwb_text_chunk_append(KnnwbTextChunk *chunk, const char *text, size_t length)
{
  memcpy(knnwb_text_chunk_room(chunk, length), text, length);
  chunk->length += length;
}

static inline void knnwb_text_chunk_puts(KnnwbTextChunk *chunk, const char *text)
{
  knnwb_text_chunk_append(chunk, text, strlen(text));
}

static inline void knnwb_text_chunk_putc(KnnwbTextChunk *chunk, char c)
{
  *knnwb_text_chunk_room(chunk, 1) = c;
  chunk->length++;
}

/** Appends an integer in decimal (the hot path of big graphs: no printf). */
static inline void knnwb_text_chunk_put_int(KnnwbTextChunk *chunk, int64_t value)
{
  char digits[24];
  int n = 0;
  uint64_t v = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  char *p = knnwb_text_chunk_room(chunk, 24);
  if (value < 0)
    *p++ = '-';
  while (n > 0)
    *p++ = digits[--n];
  chunk->length = (size_t)(p - chunk->data);
}

/** Appends knnwb_formats_format_double's text of value. */
static inline void knnwb_text_chunk_put_double(KnnwbTextChunk *chunk, double value)
{
  char *p = knnwb_text_chunk_room(chunk, 40);
  chunk->length += (size_t)knnwb_formats_format_double(p, 40, value);
}

/** Formats items [first, last) into out (appending). Called from worker threads, in the C locale.
 */
typedef void (*KnnwbChunkFormatFunc)(void *context, size_t first, size_t last, KnnwbTextChunk *out);

/**
 * Writes n_items formatted by format in chunks of grain items: the chunks are formatted in
 * parallel (control's thread count) and written to stream in order, so the output equals a
 * sequential formatting. Checks control's cancel flag after each chunk (and every 100 ms while
 * waiting) and reports progress as progress_done + items written out of progress_total.
 * Errors: KNNWB_ERROR_CANCELLED, KNNWB_ERROR_IO. Memory: 2 x threads chunk buffers.
 */
gboolean knnwb_formats_write_chunks(FILE *stream, const char *path, size_t n_items, size_t grain,
                                    KnnwbChunkFormatFunc format, void *context,
                                    const KnnwbWriteControl *control, uint64_t progress_done,
                                    uint64_t progress_total, GError **error);

/** Worker threads for a writer: control's count, 0 or no control = all cores. */
int knnwb_formats_writer_threads(const KnnwbWriteControl *control);

/** TRUE (and KNNWB_ERROR_CANCELLED set) once control's cancel flag is raised. */
gboolean knnwb_formats_cancelled(const KnnwbWriteControl *control, const char *path,
                                 GError **error);

/* ---- label text for the graph writers (escape.c) ---- */

/**
 * Appends text as XML 1.0 character data, safe in element content and in double-quoted
 * attributes: markup and '"' escaped, tab/LF/CR as character references, code points XML 1.0
 * cannot hold at all (other C0 controls, U+FFFE, U+FFFF) and invalid UTF-8 as U+FFFD. O(length).
 */
void knnwb_formats_put_xml_text(KnnwbTextChunk *out, const char *text);

/**
 * Appends text as a quoted GML string: ASCII only, '"', '&', controls and every non-ASCII code
 * point as &-entities (&quot; &amp; &#N;), which networkx, igraph and yEd decode; invalid UTF-8
 * repaired first. O(length).
 */
void knnwb_formats_put_gml_string(KnnwbTextChunk *out, const char *text);

/* ---- NPY headers (npy_header.c) ---- */

/* The .npy container (format versions 1-3) that the NPY readers (read_npy.c, read_distance.c) and
 * writers (write_npy.c, write_matrix.c, write_linkage.c) share. One byte-order policy: writers
 * store the host's byte order and say so in 'descr'; readers accept either order and swap
 * (knnwb_npy_header_little_endian). */

/** What knnwb_npy_preamble_parse found. */
typedef enum {
  KNNWB_NPY_PREAMBLE_OK,
  KNNWB_NPY_PREAMBLE_NOT_NPY,  /**< fewer than 10 bytes, or no \x93NUMPY magic */
  KNNWB_NPY_PREAMBLE_VERSION,  /**< a format version other than 1, 2, 3 */
  KNNWB_NPY_PREAMBLE_TRUNCATED /**< version 2 or 3 with fewer than 12 bytes */
} KnnwbNpyPreambleStatus;

/**
 * Reads the fixed start of an .npy file from its first available bytes (at most 12 are looked at):
 * the magic, the format version (*major) and where the header dictionary starts (*header_start,
 * 10 or 12) and how long it claims to be (*header_length, little-endian u16 or u32). O(1).
 */
KnnwbNpyPreambleStatus knnwb_npy_preamble_parse(const unsigned char *bytes, size_t available,
                                                unsigned *major, size_t *header_start,
                                                size_t *header_length);

/** The parsed header dictionary. */
typedef struct {
  char byte_order; /**< '<', '>', '|' or '=' */
  char kind;       /**< 'f', 'i' or 'u' (any letter the descr held) */
  size_t item_size;
  gboolean fortran_order;
  size_t shape[2]; /**< the first two sizes */
  int n_dims;
  gboolean have_descr, have_order, have_shape;
} KnnwbNpyHeader;

/**
 * Parses the header dictionary "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }" in
 * [text, text + length): Python literals as NumPy writes them (single or double quotes, blanks,
 * trailing commas, Python 2 longs). FALSE on the first thing it cannot read, with *error_at the
 * offset in text and *what a phrase ("expected ':' after a key") for the reader's message;
 * missing keys are not an error here (the have_ flags tell). O(length).
 */
gboolean knnwb_npy_header_parse(const char *text, size_t length, KnnwbNpyHeader *header,
                                size_t *error_at, const char **what);

/** The byte order of the header's data, the one reading policy: TRUE little-endian ('<', '=' and
 * one-byte '|'), FALSE big-endian ('>'); *known FALSE for anything else. O(1). */
gboolean knnwb_npy_header_little_endian(const KnnwbNpyHeader *header, gboolean *known);

/* knnwb_formats_npy_header (<knnwb/formats.h>) writes the version 1.0 header of a C-order
 * rows x columns array in the host's byte order, padded so the data starts at 64 bytes. */

/** Writes knnwb_formats_npy_header(descr, rows, columns) to stream (errors stay in the stream's
 * error flag). O(1). */
void knnwb_npy_header_write(FILE *stream, const char *descr, size_t rows, size_t columns);

G_END_DECLS

#endif
