/* NumPy .npy (format versions 1-3): float32/float64, either byte order, C or Fortran order. */
#include "read_internal.h"
#include <knnwb/parallel.h>
#include <knnwb/write_matrix.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The header dictionary (npy_header.c), with this reader's messages. */
static gboolean knnwb_npy_parse_header(const char *path, const char *text, size_t length,
                                       size_t text_offset, KnnwbNpyHeader *header, GError **error)
{
  size_t error_at = 0;
  const char *what = NULL;
  if (!knnwb_npy_header_parse(text, length, header, &error_at, &what)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s: byte %zu: bad header: %s", path,
                text_offset + error_at, what);
    return FALSE;
  }
  if (!header->have_descr || !header->have_order || !header->have_shape) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: the header lacks 'descr', 'fortran_order' or 'shape'", path);
    return FALSE;
  }
  return TRUE;
}

static void knnwb_npy_free_values(void *values, size_t n_bytes, void *data)
{
  (void)n_bytes;
  (void)data;
  g_free(values);
}

/* Where the bytes come from: the file itself (pread at any offset), or its gzip stream, inflated
 * forward only and never past what the caller asks for: the reader asks for the preamble, the
 * header, then the data the header promises, in increasing offsets, so a gzip bomb (a small
 * header followed by gigabytes of zeros, or a header claiming more than the file can hold) costs
 * nothing beyond the promised matrix. */
typedef struct {
  int fd;
  KnnwbGzipReader *gzip; /* NULL: a plain file */
  uint64_t position;     /* gzip: decompressed bytes consumed so far */
  uint64_t stored_size;  /* the file's own size, for progress */
  GError *gzip_error;    /* gzip: why the last read failed (corrupt or truncated data) */
} KnnwbNpySource;

/* Inflates bytes from the gzip stream at offset (>= the current position: what lies between is
 * inflated into buffer and dropped). FALSE with errno set as knnwb_npy_read_watched says. */
static gboolean knnwb_npy_gzip_read(KnnwbNpySource *source, char *buffer, size_t bytes,
                                    uint64_t offset)
{
  g_assert(offset >= source->position);
  while (source->position < offset || bytes > 0) {
    const gboolean skipping = source->position < offset;
    size_t want = skipping ? (size_t)MIN(offset - source->position, (uint64_t)bytes) : bytes;
    gssize got = knnwb_gzip_reader_read(source->gzip, buffer, want, &source->gzip_error);
    if (got <= 0) {
      errno = got == 0 ? 0 : EIO;
      return FALSE;
    }
    source->position += (uint64_t)got;
    if (!skipping) {
      buffer += got;
      bytes -= (size_t)got;
    }
  }
  return TRUE;
}

/* Reads bytes at offset, in pieces of 64 MiB when options (may be NULL) has a cancel flag or a
 * progress callback: a 10 GB matrix takes seconds to read, and Ctrl-C must not wait for it.
 * FALSE with errno set (0: the file ended early; ECANCELED: the flag was raised; EIO: the gzip
 * data is corrupt, source->gzip_error says how). */
static gboolean knnwb_npy_read_watched(KnnwbNpySource *source, void *buffer, size_t bytes,
                                       uint64_t offset, const KnnwbReadOptions *options,
                                       uint64_t file_size)
{
  char *p = buffer;
  const gboolean watched = options != NULL && (options->cancel != NULL || options->progress);
  const size_t piece = source->gzip != NULL ? (size_t)1 << 20 : (size_t)64 << 20;
  while (bytes > 0) {
    if (watched && options->cancel != NULL && g_atomic_int_get(options->cancel) != 0) {
      errno = ECANCELED;
      return FALSE;
    }
    size_t want = watched || source->gzip != NULL ? MIN(bytes, piece) : bytes;
    ssize_t got;
    if (source->gzip != NULL) {
      if (!knnwb_npy_gzip_read(source, p, want, offset))
        return FALSE;
      got = (ssize_t)want;
    } else {
      got = pread(source->fd, p, want, (off_t)offset);
    }
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      if (got == 0)
        errno = 0; /* the end of the file came early */
      return FALSE;
    }
    p += got;
    bytes -= (size_t)got;
    offset += (uint64_t)got;
    if (watched && options->progress != NULL && source->gzip != NULL) {
      off_t position = lseek(source->fd, 0, SEEK_CUR); /* the compressed bytes handed to zlib */
      if (position > 0 && source->stored_size > 0)
        options->progress(MIN((uint64_t)position, source->stored_size), source->stored_size,
                          options->progress_data);
    } else if (watched && options->progress != NULL && file_size > 0) {
      options->progress(MIN(offset, file_size), file_size, options->progress_data);
    }
  }
  return TRUE;
}

static gboolean knnwb_npy_read_all(KnnwbNpySource *source, void *buffer, size_t bytes,
                                   uint64_t offset)
{
  return knnwb_npy_read_watched(source, buffer, bytes, offset, NULL, 0);
}

/* The error of a failed knnwb_npy_read_watched of the matrix's data. */
static void knnwb_npy_read_failed(KnnwbNpySource *source, const char *path, int saved,
                                  GError **error)
{
  if (source->gzip_error != NULL)
    g_propagate_error(error, g_steal_pointer(&source->gzip_error));
  else if (saved == ECANCELED)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "%s: interrupted while reading", path);
  else
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                "%s: read failed: %s (was the file rewritten while knnwb read it?)", path,
                saved != 0 ? g_strerror(saved) : "it ended early");
}

static inline uint32_t knnwb_npy_swap32(uint32_t v)
{
  return __builtin_bswap32(v);
}

static inline uint64_t knnwb_npy_swap64(uint64_t v)
{
  return __builtin_bswap64(v);
}

/* IEEE half precision to float (exact: every half is a float). */
static float knnwb_npy_half_to_float(uint16_t half)
{
  uint32_t sign = (uint32_t)(half >> 15) << 31, exponent = (half >> 10) & 0x1f,
           mantissa = half & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) { /* infinity, NaN */
    bits = sign | 0x7f800000u | mantissa << 13;
  } else if (exponent != 0) {
    bits = sign | (exponent + 112) << 23 | mantissa << 13;
  } else { /* zero or subnormal: mantissa * 2^-24 */
    float value = (float)mantissa * 0x1p-24f;
    memcpy(&bits, &value, 4);
    bits |= sign;
  }
  float out;
  memcpy(&out, &bits, 4);
  return out;
}

/* The item of size bytes at src as an unsigned integer of the host's byte order. */
static uint64_t knnwb_npy_load(const unsigned char *src, size_t size, gboolean swap)
{
  switch (size) {
  case 1:
    return src[0];
  case 2: {
    uint16_t v;
    memcpy(&v, src, 2);
    return swap ? __builtin_bswap16(v) : v;
  }
  case 4: {
    uint32_t v;
    memcpy(&v, src, 4);
    return swap ? knnwb_npy_swap32(v) : v;
  }
  default: {
    uint64_t v;
    memcpy(&v, src, 8);
    return swap ? knnwb_npy_swap64(v) : v;
  }
  }
}

/* Native float64 to float, the common case (numpy's default dtype), in blocks of a fixed length
 * that the compiler vectorises, overflow tested per block. FALSE (with the item index) on a
 * finite value beyond the float range, as knnwb_npy_convert. */
static gboolean knnwb_npy_convert_doubles(const unsigned char *src, size_t n, float *dst,
                                          size_t *bad)
{
  enum { BLOCK = 64 };
  size_t first = 0;
  for (; first + BLOCK <= n; first += BLOCK) {
    double block[BLOCK];
    memcpy(block, src + first * 8, sizeof block);
    int overflow = 0;
    for (int j = 0; j < BLOCK; j++) {
      float f = (float)block[j];
      overflow |= (fabsf(f) == INFINITY) & (fabs(block[j]) != INFINITY);
      dst[first + j] = f;
    }
    if (overflow)
      break; /* the item loop below finds which */
  }
  for (size_t i = first; i < n; i++) {
    double value;
    memcpy(&value, src + i * 8, 8);
    float f = (float)value;
    if (isinf(f) && isfinite(value)) {
      *bad = i;
      return FALSE;
    }
    dst[i] = f;
  }
  return TRUE;
}

/* Converts n stored items into floats: float16/32/64 and signed or unsigned integers of 1 to 8
 * bytes (count matrices saved from pandas are int64; integers beyond 2^24 round to the nearest
 * float, as the text readers do). Returns FALSE (with the item index) on a float64 overflow. */
static gboolean knnwb_npy_convert(const unsigned char *src, size_t n, const KnnwbNpyHeader *header,
                                  gboolean swap, float *dst, size_t *bad)
{
  const size_t size = header->item_size;
  if (header->kind == 'f' && size == 8 && !swap)
    return knnwb_npy_convert_doubles(src, n, dst, bad);
  for (size_t i = 0; i < n; i++) {
    uint64_t bits = knnwb_npy_load(src + size * i, size, swap);
    if (header->kind == 'u') {
      dst[i] = (float)bits;
    } else if (header->kind == 'i') {
      unsigned shift = (unsigned)(64 - 8 * size); /* sign-extend from size bytes */
      dst[i] = (float)((int64_t)(bits << shift) >> shift);
    } else if (size == 2) {
      dst[i] = knnwb_npy_half_to_float((uint16_t)bits);
    } else if (size == 4) {
      uint32_t narrow = (uint32_t)bits;
      memcpy(&dst[i], &narrow, 4);
    } else {
      double value;
      memcpy(&value, &bits, 8);
      float f = (float)value;
      if (isinf(f) && isfinite(value)) {
        *bad = i;
        return FALSE;
      }
      dst[i] = f;
    }
  }
  return TRUE;
}

/* Where the array lies in the file, what it holds and which part of it is read. */
typedef struct {
  KnnwbNpyHeader header;
  uint64_t file_size;
  uint64_t data_offset; /* of the first byte read (a block's rows start later) */
  size_t stored_rows, stored_cols;
  size_t count, matrix_bytes; /* values read, and their bytes as floats */
  gboolean swap;              /* stored in the other byte order than the host's */
  /* The matrix wanted is stored_rows x stored_cols, or its transpose. */
  gboolean want_transpose;
  size_t rows, cols;
  gboolean memory_is_c_order_of_wanted; /* a Fortran-order array is stored as its transpose */
  gboolean block;                       /* one rank's rows only */
  size_t block_first;
  gboolean compressed; /* gzip: file_size is only deflate's bound on what it inflates to */
  uint64_t data_end;   /* the offset just past the stored array */
} KnnwbNpyArray;

/* The longest header dictionary read from a compressed file (numpy writes about 128 bytes and by
 * default refuses to read more than 10,000): a bigger claim there is a bomb, not a header. */
#define KNNWB_NPY_GZIP_MAX_HEADER ((size_t)1 << 20)

/* Opens path into source: a plain regular file, or a gzip stream that is inflated as it is read
 * (never ahead of the reader). *file_size: the file's size, or for gzip deflate's bound on the
 * inflated size (1032 times the compressed size). FALSE with error set on failure. */
static gboolean knnwb_npy_open(const char *path, KnnwbNpySource *source, KnnwbNpyArray *array,
                               GError **error)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int saved = errno;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot open: %s", path, g_strerror(saved));
    return FALSE;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: not a regular file", path);
    close(fd);
    return FALSE;
  }
  source->fd = fd;
  source->stored_size = (uint64_t)st.st_size;
  array->file_size = (uint64_t)st.st_size;
  if (knnwb_gzip_fd_is_gzip(fd)) {
    source->gzip = knnwb_gzip_reader_new(fd, path, error);
    if (source->gzip == NULL) {
      close(fd);
      source->fd = -1;
      return FALSE;
    }
    array->compressed = TRUE;
    array->file_size =
        source->stored_size > G_MAXUINT64 / 1032 ? G_MAXUINT64 : source->stored_size * 1032;
  }
  return TRUE;
}

static void knnwb_npy_close(KnnwbNpySource *source)
{
  g_clear_pointer(&source->gzip, knnwb_gzip_reader_free);
  g_clear_error(&source->gzip_error);
  if (source->fd >= 0)
    close(source->fd);
  source->fd = -1;
}

/* The preamble and the header dictionary (npy_header.c), with this reader's messages. */
static gboolean knnwb_npy_read_header(KnnwbNpySource *source, const char *path,
                                      KnnwbNpyArray *array, GError **error)
{
  const uint64_t file_size = array->file_size;
  unsigned char preamble[12];
  unsigned major = 0;
  size_t header_length = 0, header_start = 0, available = 0;
  KnnwbNpyPreambleStatus status = KNNWB_NPY_PREAMBLE_NOT_NPY;
  /* Ten bytes first: a version 1 file's header starts there (a stream must not be read past). */
  if (file_size >= 10 && knnwb_npy_read_all(source, preamble, 10, 0)) {
    available = 10;
    if (preamble[6] != 1 && file_size >= 12 && knnwb_npy_read_all(source, preamble + 10, 2, 10))
      available = 12;
    status = knnwb_npy_preamble_parse(preamble, available, &major, &header_start, &header_length);
  }
  if (source->gzip_error != NULL) {
    g_propagate_error(error, g_steal_pointer(&source->gzip_error));
    return FALSE;
  }
  if (status == KNNWB_NPY_PREAMBLE_NOT_NPY) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: byte 0: not an NPY file (no \\x93NUMPY magic)", path);
    return FALSE;
  }
  if (status == KNNWB_NPY_PREAMBLE_TRUNCATED) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s: byte %llu: truncated header", path,
                (unsigned long long)file_size);
    return FALSE;
  }
  if (status == KNNWB_NPY_PREAMBLE_VERSION) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: byte 6: NPY format version %u is not supported (1, 2 and 3 are)", path, major);
    return FALSE;
  }
  array->data_offset = (uint64_t)header_start + header_length;
  if (array->compressed && header_length > KNNWB_NPY_GZIP_MAX_HEADER) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: byte %zu: the header claims %zu bytes; a compressed NPY header may have at "
                "most %zu (numpy writes about 128)",
                path, header_start - 4 + (major == 1 ? 2 : 0), header_length,
                KNNWB_NPY_GZIP_MAX_HEADER);
    return FALSE;
  }
  if (array->data_offset > file_size) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: byte %zu: the header claims %zu bytes but the file has %llu", path,
                header_start - 4 + (major == 1 ? 2 : 0), header_length,
                (unsigned long long)file_size);
    return FALSE;
  }
  g_autofree char *header_text = g_try_malloc(header_length + 1); /* v2/3 may claim 4 GiB */
  if (header_text == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "%s: byte %zu: cannot allocate the %zu-byte header it claims", path,
                header_start - 4 + (major == 1 ? 2 : 0), header_length);
    return FALSE;
  }
  if (!knnwb_npy_read_all(source, header_text, header_length, header_start)) {
    if (source->gzip_error != NULL)
      g_propagate_error(error, g_steal_pointer(&source->gzip_error));
    else
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot read the header%s", path,
                  array->compressed ? " (the decompressed data ends inside it)" : "");
    return FALSE;
  }
  header_text[header_length] = '\0';
  return knnwb_npy_parse_header(path, header_text, header_length, header_start, &array->header,
                                error);
}

/* The dtype, the dimensions and the data size the header announces, checked against the file. */
static gboolean knnwb_npy_check_array(const char *path, KnnwbNpyArray *array, GError **error)
{
  const KnnwbNpyHeader *header = &array->header;
  gboolean known = FALSE;
  gboolean little = knnwb_npy_header_little_endian(header, &known);
  const size_t item = header->item_size;
  const gboolean supported = header->kind == 'f' ? item == 2 || item == 4 || item == 8
                             : header->kind == 'i' || header->kind == 'u'
                                 ? item == 1 || item == 2 || item == 4 || item == 8
                                 : FALSE;
  if (!supported || !known) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: dtype '%c%c%zu' is not supported: save the array as float32 or float64 "
                "(integer and float16 arrays are read too)",
                path, header->byte_order, header->kind, header->item_size);
    return FALSE;
  }
  if (header->n_dims != 2) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: the array has %d dimension%s; a matrix needs 2 (reshape it to (n, d))", path,
                header->n_dims, KNNWB_PLURAL(header->n_dims));
    return FALSE;
  }
  G_STATIC_ASSERT(G_BYTE_ORDER == G_LITTLE_ENDIAN || G_BYTE_ORDER == G_BIG_ENDIAN);
  array->swap = little != (G_BYTE_ORDER == G_LITTLE_ENDIAN);
  size_t stored_rows = array->stored_rows = header->shape[0];
  size_t stored_cols = array->stored_cols = header->shape[1];
  const uint64_t after_header = array->file_size - array->data_offset;
  size_t data_bytes = 0;
  if (!knnwb_size_multiply(stored_rows, stored_cols, &array->count) ||
      !knnwb_size_multiply(array->count, header->item_size, &data_bytes) ||
      !knnwb_size_multiply(array->count, sizeof(float), &array->matrix_bytes) ||
      data_bytes > after_header) {
    if (array->compressed)
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                  "%s: the shape (%zu, %zu) needs more bytes of data than the %llu-byte compressed "
                  "file can hold (gzip inflates at most 1032-fold)",
                  path, stored_rows, stored_cols, (unsigned long long)array->file_size / 1032);
    else
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                  "%s: the shape (%zu, %zu) needs %s bytes of data but the file has %llu after "
                  "the header (truncated?)",
                  path, stored_rows, stored_cols, "more", (unsigned long long)after_header);
    return FALSE;
  }
  array->data_end = array->data_offset + data_bytes;
  if (data_bytes < after_header && !array->compressed) { /* gzip: checked after the data */
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s: %llu bytes follow the (%zu, %zu) array",
                path, (unsigned long long)(after_header - data_bytes), stored_rows, stored_cols);
    return FALSE;
  }
  if (array->count == 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s: the array (%zu, %zu) is empty", path,
                stored_rows, stored_cols);
    return FALSE;
  }
  return TRUE;
}

/* The matrix wanted (transposed or not) and, for one rank of a split job, its block of rows: the
 * bytes of rows [block_first, block_first + rows) only. */
static void knnwb_npy_choose_rows(const KnnwbReadOptions *options, KnnwbNpyArray *array,
                                  KnnwbReadInfo *info)
{
  const gboolean want_transpose = array->want_transpose = options->transpose;
  array->rows = want_transpose ? array->stored_cols : array->stored_rows;
  array->cols = want_transpose ? array->stored_rows : array->stored_cols;
  array->memory_is_c_order_of_wanted = array->header.fortran_order == want_transpose;
  array->block = options->block_count > 1 && !array->header.fortran_order && !want_transpose;
  const size_t all_rows = array->rows;
  if (array->block) {
    size_t block_last;
    knnwb_knn_group_rows(array->rows, options->block_index, options->block_count,
                         &array->block_first, &block_last);
    array->rows = block_last - array->block_first;
    array->count = array->rows * array->cols;
    array->matrix_bytes = array->count * sizeof(float);
    array->data_offset += (uint64_t)array->block_first * array->cols * array->header.item_size;
  }
  info->block_read = array->block;
  info->total_rows = all_rows;
  info->first_row = array->block_first;
}

/* The error for the float64 that is the item-th read (of this block) and beyond the float range. */
static void knnwb_npy_out_of_range(const char *path, const KnnwbNpyArray *array, size_t item,
                                   GError **error)
{
  const size_t k = array->block_first * array->cols + item;
  const gboolean fortran = array->header.fortran_order;
  const size_t r = fortran ? k % array->stored_rows : k / array->stored_cols;
  const size_t c = fortran ? k / array->stored_rows : k % array->stored_cols;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
              "%s: row %zu, column %zu: the float64 value is beyond the float range (+-3.4e38)",
              path, r + 1, c + 1);
}

/* Streams the stored items in chunks, converted to float; the k-th stored item is element
 * (k / inner, k % inner) of the memory order, which is the wanted matrix itself or its
 * transpose. */
static gboolean knnwb_npy_read_converted(KnnwbNpySource *source, const char *path,
                                         const KnnwbReadOptions *options,
                                         const KnnwbNpyArray *array, float *converted,
                                         GError **error)
{
  const KnnwbNpyHeader *header = &array->header;
  const size_t count = array->count;
  size_t inner = header->fortran_order ? array->stored_rows : array->stored_cols;
  size_t outer = count / inner;
  const size_t chunk_items = (size_t)(8 << 20) / header->item_size;
  g_autofree unsigned char *chunk = g_malloc(chunk_items * header->item_size);
  g_autofree float *floats = g_new(float, chunk_items);
  for (size_t first = 0; first < count; first += chunk_items) {
    size_t n = MIN(chunk_items, count - first);
    if (!knnwb_npy_read_watched(source, chunk, n * header->item_size,
                                array->data_offset + (uint64_t)first * header->item_size, options,
                                array->data_offset + (uint64_t)count * header->item_size)) {
      knnwb_npy_read_failed(source, path, errno, error);
      return FALSE;
    }
    size_t bad;
    if (!knnwb_npy_convert(chunk, n, header, array->swap, floats, &bad)) {
      knnwb_npy_out_of_range(path, array, first + bad, error);
      return FALSE;
    }
    if (array->memory_is_c_order_of_wanted) {
      memcpy(converted + first, floats, n * sizeof(float));
    } else {
      for (size_t i = 0; i < n; i++) {
        size_t k = first + i;
        converted[(k % inner) * outer + k / inner] = floats[i];
      }
    }
  }
  return TRUE;
}

/* A plain file's float32 data straight into place on the reading threads (parallel_read.c), with
 * the check for NaN and infinity done as each piece arrives: *finite is TRUE when there is none,
 * and knnwb_npy_find_missing need not look again. */
static gboolean knnwb_npy_read_plain_floats(KnnwbNpySource *source, const KnnwbReadOptions *options,
                                            const KnnwbNpyArray *array, float *values,
                                            gboolean *finite, int *saved)
{
  const KnnwbPreadPlan plan = {.n_threads = options != NULL ? options->n_threads : 0,
                               .cancel = options != NULL ? options->cancel : NULL,
                               .progress = options != NULL ? options->progress : NULL,
                               .progress_data = options != NULL ? options->progress_data : NULL,
                               .progress_total = array->data_offset + array->matrix_bytes,
                               .check_floats = TRUE};
  return knnwb_formats_pread_parallel(source->fd, values, array->matrix_bytes, array->data_offset,
                                      &plan, finite, saved);
}

/* knnwb_npy_convert as the reading threads call it (parallel_read.c). */
static gboolean knnwb_npy_convert_piece(const unsigned char *stored, size_t n, float *out,
                                        size_t *bad, void *data)
{
  const KnnwbNpyArray *array = data;
  return knnwb_npy_convert(stored, n, &array->header, array->swap, out, bad);
}

/* A plain file's items of any other type, stored in the wanted memory order, read and converted
 * into place on the reading threads (parallel_read.c), NaN and infinity checked as for float32:
 * *finite as knnwb_npy_read_plain_floats says. A float64 beyond the float range is reported at
 * the lowest one, whichever thread meets it. */
static gboolean knnwb_npy_read_plain_converted(KnnwbNpySource *source, const char *path,
                                               const KnnwbReadOptions *options,
                                               const KnnwbNpyArray *array, float *values,
                                               gboolean *finite, GError **error)
{
  const uint64_t stored_bytes = (uint64_t)array->count * array->header.item_size;
  const KnnwbPreadPlan plan = {.n_threads = options != NULL ? options->n_threads : 0,
                               .cancel = options != NULL ? options->cancel : NULL,
                               .progress = options != NULL ? options->progress : NULL,
                               .progress_data = options != NULL ? options->progress_data : NULL,
                               .progress_total = array->data_offset + stored_bytes,
                               .check_floats = TRUE,
                               .stored_item_size = array->header.item_size,
                               .convert = knnwb_npy_convert_piece,
                               .convert_data = (void *)array};
  int saved = 0;
  size_t failed_item = 0;
  if (knnwb_formats_pread_convert(source->fd, values, array->count, array->data_offset, &plan,
                                  finite, &saved, &failed_item))
    return TRUE;
  if (saved == ERANGE)
    knnwb_npy_out_of_range(path, array, failed_item, error);
  else if (saved == ENOMEM && failed_item == SIZE_MAX)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "%s: cannot allocate the buffers to read the array in", path);
  else
    knnwb_npy_read_failed(source, path, saved, error);
  return FALSE;
}

/* The values into a new matrix: float32 in the host's order and the wanted memory order straight
 * into it, any other type in that order converted into place on several threads (*finite: TRUE
 * when a plain file's values were all checked finite on the way), the rest (gzip, another memory
 * order) converted by one thread. */
static KnnwbMatrix *knnwb_npy_read_values(KnnwbNpySource *source, const char *path,
                                          const KnnwbReadOptions *options,
                                          const KnnwbNpyArray *array, gboolean *finite,
                                          GError **error)
{
  *finite = FALSE;
  float *converted = knnwb_memory_try_alloc(MAX(array->matrix_bytes, 1), FALSE);
  if (converted == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "%s: cannot allocate %zu bytes for the matrix", path, array->matrix_bytes);
    return NULL;
  }
  if (array->header.kind == 'f' && array->header.item_size == 4 && !array->swap &&
      array->memory_is_c_order_of_wanted) {
    /* Read, not mapped: a mapping dies with SIGBUS anywhere (in a worker thread, hours later) when
     * the file is truncated under us, as `np.save` to the same name does. A read is one copy
     * from the page cache and fails here, with a message, if the file shrinks meanwhile. */
    int saved = 0;
    gboolean read =
        source->gzip == NULL
            ? knnwb_npy_read_plain_floats(source, options, array, converted, finite, &saved)
            : knnwb_npy_read_watched(source, converted, array->matrix_bytes, array->data_offset,
                                     options, array->data_offset + array->matrix_bytes);
    if (!read) {
      knnwb_npy_read_failed(source, path, source->gzip == NULL ? saved : errno, error);
      g_free(converted);
      return NULL;
    }
  } else if (source->gzip == NULL && array->memory_is_c_order_of_wanted) {
    if (!knnwb_npy_read_plain_converted(source, path, options, array, converted, finite, error)) {
      g_free(converted);
      return NULL;
    }
  } else if (!knnwb_npy_read_converted(source, path, options, array, converted, error)) {
    g_free(converted);
    return NULL;
  }
  return knnwb_matrix_new_wrapped(array->rows, array->cols, converted, knnwb_npy_free_values, NULL);
}

/* A compressed file read up to the array's end must end there: one more byte is asked for (so a
 * bomb after a small array is found at once, not inflated), which also makes zlib check the
 * trailer's CRC-32 and length. A block that ends earlier leaves this to the rank with the last
 * rows. */
static gboolean knnwb_npy_check_gzip_end(KnnwbNpySource *source, const char *path,
                                         const KnnwbNpyArray *array, GError **error)
{
  if (source->gzip == NULL || source->position != array->data_end)
    return TRUE;
  char extra;
  if (knnwb_npy_read_all(source, &extra, 1, array->data_end)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: the decompressed data goes on after the (%zu, %zu) array its header "
                "describes (%llu bytes)",
                path, array->stored_rows, array->stored_cols, (unsigned long long)array->data_end);
    return FALSE;
  }
  if (source->gzip_error != NULL) {
    g_propagate_error(error, g_steal_pointer(&source->gzip_error));
    return FALSE;
  }
  return TRUE;
}

/* NaN/Inf, the text formats' missing values: an error, or (policy DROP_ROWS) the stored rows that
 * hold them marked FALSE in *keep (allocated at the first; NULL when none). Rows here are those
 * of the file as stored. As one rank of a job that fails on them, only this rank's rows are read
 * (every row is some rank's and the ranks agree on errors); dropping rows needs every rank to see
 * every row. */
static gboolean knnwb_npy_find_missing(const char *path, const KnnwbReadOptions *options,
                                       const KnnwbNpyArray *array, const KnnwbMatrix *matrix,
                                       gboolean **keep, KnnwbReadInfo *info, GError **error)
{
  const size_t rows = array->rows, cols = array->cols, stored_rows = array->stored_rows;
  const gboolean want_transpose = array->want_transpose;
  size_t scan_first = 0, scan_last = rows;
  const KnnwbKnnGroup *group = options->group;
  if (!array->block && group != NULL && group->size > 1 &&
      options->missing == KNNWB_MISSING_ERROR && !want_transpose)
    knnwb_knn_group_rows(rows, group->rank, group->size, &scan_first, &scan_last);
  for (size_t i = scan_first; i < scan_last; i++) {
    const float *row = matrix->values + i * cols;
    for (size_t j = 0; j < cols; j++) {
      if (isfinite(row[j]))
        continue;
      size_t stored_row = want_transpose ? j : array->block_first + i;
      size_t stored_col = want_transpose ? i : j;
      if (options->missing == KNNWB_MISSING_ERROR) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                    "%s: row %zu, column %zu: %s; clean the array, or choose the policy that "
                    "drops rows with missing values",
                    path, stored_row + 1, stored_col + 1, isnan(row[j]) ? "NaN" : "infinite value");
        return FALSE;
      }
      if (*keep == NULL) {
        *keep = knnwb_try_new_array(stored_rows, sizeof(gboolean), "the rows to keep", stored_rows,
                                    error);
        if (*keep == NULL) {
          g_prefix_error(error, "%s: ", path);
          return FALSE;
        }
        for (size_t r = 0; r < stored_rows; r++)
          (*keep)[r] = TRUE;
      }
      if ((*keep)[stored_row]) {
        (*keep)[stored_row] = FALSE;
        if (info->n_dropped_rows++ == 0 || stored_row + 1 < info->first_dropped_line)
          info->first_dropped_line = stored_row + 1;
      }
      if (!want_transpose)
        break; /* the rest of this row does not matter */
    }
  }
  return TRUE;
}

/* Leaves out what keep marks: rows keep their numbers (a row with missing values stays, absent,
 * with zeros); transposed, the stored rows are features (columns) here and are dropped. */
static gboolean knnwb_npy_drop_missing(const char *path, const KnnwbNpyArray *array,
                                       const gboolean *keep, KnnwbMatrix **matrix,
                                       KnnwbReadInfo *info, GError **error)
{
  if (!array->want_transpose) {
    size_t n_left = array->rows;
    for (size_t r = 0; r < array->rows; r++)
      if (!keep[array->block_first + r]) {
        memset((*matrix)->values + r * array->cols, 0, array->cols * sizeof(float));
        knnwb_matrix_set_row_absent(*matrix, r);
        n_left--;
      }
    if (n_left == 0 && !array->block) { /* a block may hold no row left: the job has others */
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                  "%s: no rows are left (%zu with missing values)", path, info->n_dropped_rows);
      return FALSE;
    }
    return TRUE;
  }
  /* Transpose, select, transpose back. */
  g_autoptr(KnnwbMatrix) flipped = knnwb_matrix_transpose(*matrix, error);
  g_autoptr(KnnwbMatrix) selected = flipped ? knnwb_matrix_select_rows(flipped, keep, error) : NULL;
  KnnwbMatrix *kept = selected ? knnwb_matrix_transpose(selected, error) : NULL;
  if (kept == NULL)
    return FALSE;
  if (kept->n_rows == 0 || kept->n_cols == 0) {
    knnwb_matrix_free(kept);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: no rows are left (%zu dropped for missing values)", path,
                info->n_dropped_rows);
    return FALSE;
  }
  knnwb_matrix_free(*matrix);
  *matrix = kept;
  info->mapped = FALSE;
  return TRUE;
}

/* The labels side file knnwb writes beside an NPY (OUT.labels.txt, see write_matrix.h), when there
 * is one and no --labels: the same file read back gets its labels back. NULL when none. */
static char *knnwb_npy_side_labels(const char *path, const KnnwbReadOptions *options)
{
  if (options->labels_path != NULL)
    return NULL;
  char *side = knnwb_formats_npy_labels_path(path);
  if (!g_file_test(side, G_FILE_TEST_IS_REGULAR))
    g_clear_pointer(&side, g_free);
  return side;
}

gboolean knnwb_formats_read_npy(const char *path, const KnnwbReadOptions *given, KnnwbMatrix **out,
                                KnnwbReadInfo *info, GError **error)
{
  /* A side file found beside the array names its rows as --labels would. */
  KnnwbReadOptions local = *given;
  g_autofree char *side = knnwb_npy_side_labels(path, given);
  if (side != NULL)
    local.labels_path = side;
  const KnnwbReadOptions *options = &local;
  KnnwbNpyArray array = {0};
  KnnwbNpySource source = {.fd = -1};
  if (!knnwb_npy_open(path, &source, &array, error))
    return FALSE;
  g_autoptr(KnnwbMatrix) matrix = NULL;
  gboolean finite = FALSE; /* every value read was checked finite already */
  gboolean ok = knnwb_npy_read_header(&source, path, &array, error) &&
                knnwb_npy_check_array(path, &array, error);
  if (ok) {
    knnwb_npy_choose_rows(options, &array, info);
    if (options->shape_known != NULL)
      options->shape_known(array.rows, array.cols, options->shape_known_data);
    matrix = knnwb_npy_read_values(&source, path, options, &array, &finite, error);
    ok = matrix != NULL && knnwb_npy_check_gzip_end(&source, path, &array, error);
  }
  knnwb_npy_close(&source);
  if (ok && options->labels_path != NULL) {
    g_autoptr(GError) side_error = NULL;
    /* (a block: its rows' labels; a block's rows are stored rows, never transposed) */
    GError **label_error = side ? &side_error : error;
    ok = array.block ? knnwb_formats_read_labels_block(options->labels_path, array.stored_rows,
                                                       array.block_first, matrix,
                                                       options->n_threads, label_error)
                     : knnwb_formats_read_labels_file(options->labels_path, array.stored_rows,
                                                      matrix, array.want_transpose,
                                                      options->n_threads, label_error);
    if (!ok && side != NULL) {
      /* A side file that does not fit is not this array's: say so, and read on without it. */
      g_warning("%s: the labels beside it are not its rows' (%s); the rows keep no labels", path,
                side_error->message);
      ok = TRUE;
    }
  }
  g_autofree gboolean *keep = NULL;
  if (ok && !finite)
    ok = knnwb_npy_find_missing(path, options, &array, matrix, &keep, info, error);
  if (ok && keep != NULL)
    ok = knnwb_npy_drop_missing(path, &array, keep, &matrix, info, error);
  if (ok)
    *out = g_steal_pointer(&matrix);
  return ok;
}
