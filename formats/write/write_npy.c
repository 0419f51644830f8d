/* The neighbour lists as NumPy arrays: indices int64 (n x k, -1 in unused slots) and distances
 * float64 (+inf there), or int32 and float32 (KNNWB_LISTS_DTYPE_32: each block narrowed into a
 * buffer of its own on its way to the file, so that the lists are never copied whole). `.npy` holds
 * one array per file, so the indices go to OUT and the distances to OUT's `.distances.npy`; `.npz`
 * is a zip of `indices.npy` and `distances.npy` (stored, not deflated: the lists do not compress
 * much and `np.load` then reads at disk speed). Both are raw copies of the lists in memory, written
 * in 16 MiB blocks with a cancel check between blocks, each block handed to the disk at once; the
 * two `.npy` files, and the labels side file where rows have labels, are written at the same time.
 * The labels side file's writer (knnwb_formats_labels_put) is shared with the matrix writer. The
 * headers and the zip frame are functions of their own, so that MPI ranks writing their rows in
 * place (distributed/write_arrays.c) put the same bytes around them. */
#include "write_internal.h"
#include <knnwb/parallel.h>
#include <knnwb/write_matrix.h>

#include <errno.h>
#include <math.h>
#include <zlib.h>

/* A block is one fwrite, one cancel check and one hand-over to the disk: small enough that the
 * disk starts early and Ctrl-C is seen at once, large enough that the calls cost nothing. */
enum { KNNWB_NPY_BLOCK_BYTES = 16 << 20 };

/* How far the writers of one call got: *done counts bytes of every array written (atomic), and
 * stop is raised by a writer that failed, so that the other one stops too. */
typedef struct {
  const KnnwbWriteControl *control;
  uint64_t total;
  guint64 done;
  gint stop;
} KnnwbNpyProgress;

/* One array of the lists as written: count elements of the lists' own (int64 indices or double
 * distances), item bytes each in the file (8: as they are; 4: narrowed). */
typedef struct {
  const void *data;
  gboolean distances;
  size_t count, k, first_row, item;
} KnnwbNpyArray;

static size_t knnwb_npy_item(const KnnwbWriteControl *control)
{
  return control != NULL && control->lists_dtype == KNNWB_LISTS_DTYPE_32 ? 4 : 8;
}

static KnnwbNpyArray knnwb_npy_array(const KnnwbNeighbors *nb, gboolean distances, size_t item)
{
  return (KnnwbNpyArray){.data =
                             distances ? (const void *)nb->distances : (const void *)nb->indices,
                         .distances = distances,
                         .count = nb->n_queries * nb->k,
                         .k = nb->k,
                         .first_row = nb->first_row,
                         .item = item};
}

static const char *knnwb_npy_descr(gboolean distances, size_t item)
{
  if (item == 4)
    return distances ? "f4" : "i4";
  return distances ? "f8" : "i8";
}

gboolean knnwb_formats_lists_narrow(const char *path, const void *data, gboolean distances,
                                    size_t first, size_t count, size_t k, size_t first_row,
                                    void *out, GError **error)
{
  gboolean bad = FALSE;
  if (distances) {
    const double *from = (const double *)data + first;
    float *to = out;
    for (size_t e = 0; e < count; e++) {
      to[e] = (float)from[e];
      bad |= isinf(to[e]) && !isinf(from[e]);
    }
  } else {
    const int64_t *from = (const int64_t *)data + first;
    int32_t *to = out;
    for (size_t e = 0; e < count; e++) {
      to[e] = (int32_t)from[e];
      bad |= from[e] > INT32_MAX;
    }
  }
  if (!bad)
    return TRUE;
  /* (a second pass only on failure, so that the first stays a plain vectorisable loop) */
  for (size_t e = 0; e < count; e++) {
    const size_t row = first_row + (first + e) / MAX(k, (size_t)1);
    if (distances && isinf(((const float *)out)[e]) && !isinf(((const double *)data)[first + e])) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "%s: row %zu's distance %g is beyond float32's range: write the lists as "
                  "float64",
                  path, row, ((const double *)data)[first + e]);
      return FALSE;
    }
    if (!distances && ((const int64_t *)data)[first + e] > INT32_MAX) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "%s: row %zu's neighbour %" G_GINT64_FORMAT " is beyond int32's range: write "
                  "the lists as int64",
                  path, row, ((const int64_t *)data)[first + e]);
      return FALSE;
    }
  }
  return TRUE;
}

/* Writes the array in blocks into file, each block handed to the disk at once (the commit's fsync
 * then waits for little), checking cancel before each. Progress (bytes of all arrays) is reported
 * by the reporting writer only: a callback need not be thread-safe. FALSE with error set, or with
 * none when the other writer failed first. */
static gboolean knnwb_npy_put_data(KnnwbAtomicFile *file, const char *path,
                                   const KnnwbNpyArray *array, KnnwbNpyProgress *progress,
                                   gboolean reporting, GError **error)
{
  const KnnwbWriteControl *control = progress->control;
  FILE *stream = knnwb_atomic_file_stream(file);
  const size_t bytes = array->count * array->item;
  g_autofree char *narrow =
      array->item == 8 ? NULL : g_malloc(MIN((size_t)KNNWB_NPY_BLOCK_BYTES, MAX(bytes, 1)));
  for (size_t offset = 0; offset < bytes; offset += KNNWB_NPY_BLOCK_BYTES) {
    if (g_atomic_int_get(&progress->stop) != 0 || knnwb_formats_cancelled(control, path, error))
      return FALSE;
    size_t block = MIN((size_t)KNNWB_NPY_BLOCK_BYTES, bytes - offset);
    const char *from = (const char *)array->data + offset;
    if (narrow != NULL) {
      if (!knnwb_formats_lists_narrow(path, array->data, array->distances, offset / array->item,
                                      block / array->item, array->k, array->first_row, narrow,
                                      error))
        return FALSE;
      from = narrow;
    }
    if (fwrite(from, 1, block, stream) != block) {
      int code = errno;
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: write failed: %s", path,
                  g_strerror(code));
      return FALSE;
    }
    knnwb_atomic_file_start_writeback(file);
    guint64 done = __atomic_add_fetch(&progress->done, (guint64)block, __ATOMIC_RELAXED);
    if (reporting && control != NULL && control->progress != NULL)
      control->progress(done, progress->total, control->progress_data);
  }
  return !knnwb_formats_cancelled(control, path, error);
}

static gboolean knnwb_npy_write_one(const char *path, const KnnwbNpyArray *array,
                                    const KnnwbNeighbors *nb, KnnwbNpyProgress *progress,
                                    gboolean reporting, KnnwbAtomicFile **out, GError **error)
{
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  g_autoptr(GString) header = knnwb_formats_npy_header(
      knnwb_npy_descr(array->distances, array->item), nb->n_queries, nb->k);
  fwrite(header->str, 1, header->len, stream);
  if (!knnwb_npy_put_data(file, path, array, progress, reporting, error))
    return FALSE;
  *out = g_steal_pointer(&file);
  return TRUE;
}

GString *knnwb_formats_npy_labels_array(const char *path, const char *const *labels, size_t n,
                                        gboolean *ok, GError **error)
{
  *ok = TRUE;
  if (labels == NULL)
    return NULL;
  glong width = 1;
  for (size_t i = 0; i < n; i++) {
    if (labels[i] != NULL && !g_utf8_validate(labels[i], -1, NULL)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "%s: row %zu's label is not valid UTF-8", path, i);
      *ok = FALSE;
      return NULL;
    }
    width = MAX(width, labels[i] ? g_utf8_strlen(labels[i], -1) : 0);
  }
  GString *array = g_string_new(NULL);
  /* The header of a 1-D array: knnwb_formats_npy_header's layout with shape (n,). */
  g_string_append_len(array, "\x93NUMPY\x01\x00\x00\x00", 10);
  g_string_append_printf(array, "{'descr': '<U%ld', 'fortran_order': False, 'shape': (%zu,), }",
                         (long)width, n);
  while ((array->len + 1) % 64 != 0)
    g_string_append_c(array, ' ');
  g_string_append_c(array, '\n');
  size_t length = array->len - 10;
  array->str[8] = (char)(length & 0xFF);
  array->str[9] = (char)(length >> 8);
  for (size_t i = 0; i < n; i++) {
    glong count = 0;
    g_autofree gunichar *chars = g_utf8_to_ucs4_fast(labels[i] ? labels[i] : "", -1, &count);
    for (glong c = 0; c < width; c++) {
      guint32 unit = GUINT32_TO_LE(c < count ? (guint32)chars[c] : 0);
      g_string_append_len(array, (const char *)&unit, 4);
    }
  }
  return array;
}

/* A label must fit on its line of the labels side file: FALSE with error set at the first that
 * holds a line break. */
static gboolean knnwb_npy_labels_check(const char *path, const char *const *labels, size_t n,
                                       GError **error)
{
  for (size_t i = 0; i < n; i++)
    if (labels[i] && strpbrk(labels[i], "\r\n") != NULL) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "%s: row %zu's label holds a line break; a labels file has one label per line",
                  path, i);
      return FALSE;
    }
  return TRUE;
}

/* Labels gathered into blocks of this many bytes, one fwrite each: two locked stdio calls a label
 * took 0.12 s for 1,533,876 labels, as long as writing the two arrays of their lists. */
enum { KNNWB_NPY_LABELS_BLOCK = 1 << 20 };

gboolean knnwb_formats_labels_put(KnnwbAtomicFile *file, const char *path,
                                  const char *const *labels, size_t n, GError **error)
{
  FILE *stream = knnwb_atomic_file_stream(file);
  g_autofree char *block = g_malloc(KNNWB_NPY_LABELS_BLOCK);
  size_t used = 0;
  for (size_t i = 0; i <= n; i++) {
    const size_t length = i < n && labels[i] ? strlen(labels[i]) : 0;
    /* the block out when this label does not fit (or at the end); a label longer than a block
     * goes out as it is, after it */
    const gboolean alone = i < n && length + 1 > KNNWB_NPY_LABELS_BLOCK;
    if (i == n || alone || used + length + 1 > KNNWB_NPY_LABELS_BLOCK) {
      if (fwrite(block, 1, used, stream) != used ||
          (alone &&
           (fwrite(labels[i], 1, length, stream) != length || putc('\n', stream) == EOF))) {
        int code = errno;
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: write failed: %s", path,
                    g_strerror(code));
        return FALSE;
      }
      used = 0;
      knnwb_atomic_file_start_writeback(file);
    }
    if (i == n)
      break;
    if (alone)
      continue;
    memcpy(block + used, labels[i] ? labels[i] : "", length);
    block[used + length] = '\n';
    used += length + 1;
  }
  return TRUE;
}

/* OUT's labels side file for .npy lists, left uncommitted in *out. */
static gboolean knnwb_npy_labels_file(const char *path, const char *const *labels, size_t n,
                                      KnnwbAtomicFile **out, GError **error)
{
  if (!knnwb_npy_labels_check(path, labels, n, error))
    return FALSE;
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL || !knnwb_formats_labels_put(file, path, labels, n, error))
    return FALSE;
  *out = g_steal_pointer(&file);
  return TRUE;
}

gboolean knnwb_formats_write_labels_lines(const char *path, const char *const *labels, size_t n,
                                          GError **error)
{
  KnnwbAtomicFile *file = NULL;
  return knnwb_npy_labels_file(path, labels, n, &file, error) &&
         knnwb_atomic_file_commit(file, error);
}

/* The files of knnwb_formats_write_npy_lists, one per thread: the labels side file (where there are
 * labels), the indices and the distances. Each file has its own inode lock and its own writeback,
 * so their copies into the page cache and their disk writes go on at once. With fewer threads,
 * thread t writes files t, t + threads, ... in turn. */
enum { KNNWB_NPY_LABELS, KNNWB_NPY_INDICES, KNNWB_NPY_DISTANCES, KNNWB_NPY_FILES };

typedef struct {
  const char *paths[KNNWB_NPY_FILES];
  KnnwbNpyArray arrays[KNNWB_NPY_FILES]; /* of the indices and the distances */
  const char *const *labels;             /* NULL: no labels file */
  const KnnwbNeighbors *neighbors;
  KnnwbNpyProgress progress;
  KnnwbAtomicFile *files[KNNWB_NPY_FILES];
  GError *errors[KNNWB_NPY_FILES];
} KnnwbNpyFiles;

static void knnwb_npy_files_write(int thread, int n_threads, void *data)
{
  KnnwbNpyFiles *files = data;
  const int first = files->labels != NULL ? KNNWB_NPY_LABELS : KNNWB_NPY_INDICES;
  for (int f = first + thread; f < KNNWB_NPY_FILES; f += n_threads) {
    /* The indices' writer reports the progress of both arrays (one caller of the callback); a
     * lone thread reports all the way. */
    const gboolean written =
        f == KNNWB_NPY_LABELS
            ? knnwb_npy_labels_file(files->paths[f], files->labels, files->neighbors->n_queries,
                                    &files->files[f], &files->errors[f])
            : knnwb_npy_write_one(files->paths[f], &files->arrays[f], files->neighbors,
                                  &files->progress, f == KNNWB_NPY_INDICES || n_threads == 1,
                                  &files->files[f], &files->errors[f]);
    if (!written) {
      g_atomic_int_set(&files->progress.stop, 1);
      return;
    }
  }
}

/* OUT, its distances side file and, with labels, its labels side file, each written by a thread
 * of its own and committed side files first: OUT appearing means every file is there. On failure
 * none is committed; the error is the labels' (a label with a line break stops the arrays' writers
 * at their next block), else the indices', else the distances'. */
gboolean knnwb_formats_write_npy_lists(const char *path, const KnnwbNeighbors *neighbors,
                                       const char *const *labels, const KnnwbWriteControl *control,
                                       GError **error)
{
  g_autofree char *side = knnwb_formats_side_path(path, KNNWB_OUTPUT_NPY);
  g_autofree char *labels_path = labels != NULL ? knnwb_formats_npy_labels_path(path) : NULL;
  const size_t item = knnwb_npy_item(control);
  uint64_t bytes = (uint64_t)neighbors->n_queries * neighbors->k * item;
  KnnwbNpyFiles files = {.paths = {labels_path, path, side},
                         .arrays = {{0},
                                    knnwb_npy_array(neighbors, FALSE, item),
                                    knnwb_npy_array(neighbors, TRUE, item)},
                         .labels = labels,
                         .neighbors = neighbors,
                         .progress = {.control = control, .total = 2 * bytes}};
  const int n_files = labels != NULL ? 3 : 2;
  knnwb_team_run(MIN(n_files, knnwb_formats_writer_threads(control)), knnwb_npy_files_write,
                 &files);
  gboolean ok = files.files[KNNWB_NPY_INDICES] != NULL &&
                files.files[KNNWB_NPY_DISTANCES] != NULL &&
                (labels == NULL || files.files[KNNWB_NPY_LABELS] != NULL);
  if (!ok) {
    /* A writer stopped by another's failure has no error of its own. */
    for (int f = 0; f < KNNWB_NPY_FILES; f++) {
      if (files.errors[f] != NULL && (error == NULL || *error == NULL))
        g_propagate_error(error, g_steal_pointer(&files.errors[f]));
      g_clear_error(&files.errors[f]);
      knnwb_atomic_file_abort(files.files[f]);
    }
    return FALSE;
  }
  /* The other writer may have finished after the reporting one's last report. */
  if (control != NULL && control->progress != NULL)
    control->progress(2 * bytes, 2 * bytes, control->progress_data);
  for (int f = 0; f < KNNWB_NPY_FILES; f++) {
    const int order[KNNWB_NPY_FILES] = {KNNWB_NPY_LABELS, KNNWB_NPY_DISTANCES, KNNWB_NPY_INDICES};
    KnnwbAtomicFile *file = files.files[order[f]];
    files.files[order[f]] = NULL;
    if (file != NULL && !knnwb_atomic_file_commit(file, error)) {
      for (int rest = 0; rest < KNNWB_NPY_FILES; rest++)
        knnwb_atomic_file_abort(files.files[rest]);
      return FALSE;
    }
  }
  return TRUE;
}

/* ---- .npz: a zip archive of two stored .npy entries ---- */

static void knnwb_zip_put16(GString *out, unsigned value)
{
  g_string_append_c(out, (char)(value & 0xFF));
  g_string_append_c(out, (char)((value >> 8) & 0xFF));
}

static void knnwb_zip_put32(GString *out, uint32_t value)
{
  knnwb_zip_put16(out, value & 0xFFFF);
  knnwb_zip_put16(out, value >> 16);
}

typedef struct {
  const char *name;
  uint32_t crc;
  uint64_t size;   /* NPY header + data */
  uint64_t offset; /* of the local file header */
} KnnwbZipEntry;

/* The local header (signature 0x04034b50) and the central one (0x02014b50) share these fields:
 * version needed 2.0, no flags, method 0 (stored), a fixed 1980-01-01 time (reproducible files),
 * CRC-32, sizes, name length. */
static void knnwb_zip_put_common(GString *out, const KnnwbZipEntry *entry)
{
  knnwb_zip_put16(out, 20);   /* version needed */
  knnwb_zip_put16(out, 0);    /* flags */
  knnwb_zip_put16(out, 0);    /* stored */
  knnwb_zip_put16(out, 0);    /* time */
  knnwb_zip_put16(out, 0x21); /* date: 1980-01-01 */
  knnwb_zip_put32(out, entry->crc);
  knnwb_zip_put32(out, (uint32_t)entry->size);
  knnwb_zip_put32(out, (uint32_t)entry->size);
  knnwb_zip_put16(out, (unsigned)strlen(entry->name));
  knnwb_zip_put16(out, 0); /* extra field length */
}

uint32_t knnwb_formats_crc32(uint32_t crc, const void *data, size_t bytes)
{
  uLong value = crc;
  const Bytef *p = data;
  for (size_t offset = 0; offset < bytes; offset += 1u << 30)
    value = crc32(value, p + offset, (uInt)MIN((size_t)1 << 30, bytes - offset));
  return (uint32_t)value;
}

uint32_t knnwb_formats_crc32_combine(uint32_t first, uint32_t second, uint64_t second_bytes)
{
  return (uint32_t)crc32_combine(first, second, (z_off_t)second_bytes);
}

gboolean knnwb_formats_npz_lists_frame(const char *path, size_t rows, size_t k,
                                       const uint32_t data_crc[2], GString *parts[3],
                                       GError **error)
{
  return knnwb_formats_npz_lists_frame_labelled(path, rows, k, 8, data_crc, NULL, parts, error);
}

gboolean knnwb_formats_npz_lists_frame_labelled(const char *path, size_t rows, size_t k,
                                                size_t item, const uint32_t data_crc[2],
                                                const GString *labels, GString *parts[3],
                                                GError **error)
{
  uint64_t bytes = (uint64_t)rows * k * item;
  /* Without ZIP64 every size and offset must stay below 4 GiB. */
  if (bytes * 2 + (labels ? labels->len : 0) + 4096 >= UINT32_MAX) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: the lists take %" G_GUINT64_FORMAT " bytes, beyond what a .npz without ZIP64 "
                "holds (4 GiB); write .npy instead",
                path, 2 * bytes);
    return FALSE;
  }
  KnnwbZipEntry entries[3] = {
      {"indices.npy", 0, 0, 0}, {"distances.npy", 0, 0, 0}, {"labels.npy", 0, 0, 0}};
  const int n_entries = labels ? 3 : 2;
  uint64_t offset = 0;
  for (int i = 0; i < 2; i++) {
    KnnwbZipEntry *entry = &entries[i];
    g_autoptr(GString) npy_header =
        knnwb_formats_npy_header(knnwb_npy_descr(i == 1, item), rows, k);
    /* The entry's CRC covers its NPY header and then the data, whose own CRC (computed apart,
     * by one process or by every rank for its rows) is appended by zlib's combine. */
    uLong crc = knnwb_formats_crc32(0, npy_header->str, npy_header->len);
    entry->crc = knnwb_formats_crc32_combine((uint32_t)crc, data_crc[i], bytes);
    entry->size = npy_header->len + bytes;
    entry->offset = offset;
    GString *local = parts[i] = g_string_new(NULL);
    knnwb_zip_put32(local, 0x04034b50);
    knnwb_zip_put_common(local, entry);
    g_string_append(local, entry->name);
    size_t local_header = local->len;
    g_string_append_len(local, npy_header->str, (gssize)npy_header->len);
    offset += local_header + entry->size;
  }
  /* The labels entry (whole, header and data) goes after the distances, in parts[2]. */
  GString *central = parts[2] = g_string_new(NULL);
  if (labels != NULL) {
    KnnwbZipEntry *entry = &entries[2];
    entry->crc = knnwb_formats_crc32(0, labels->str, labels->len);
    entry->size = labels->len;
    entry->offset = offset;
    knnwb_zip_put32(central, 0x04034b50);
    knnwb_zip_put_common(central, entry);
    g_string_append(central, entry->name);
    g_string_append_len(central, labels->str, (gssize)labels->len);
    offset = entry->offset + central->len;
  }
  const size_t central_start = central->len;
  for (int i = 0; i < n_entries; i++) {
    knnwb_zip_put32(central, 0x02014b50);
    knnwb_zip_put16(central, 20); /* version made by: MS-DOS, 2.0 */
    knnwb_zip_put_common(central, &entries[i]);
    knnwb_zip_put16(central, 0); /* comment length */
    knnwb_zip_put16(central, 0); /* disk number */
    knnwb_zip_put16(central, 0); /* internal attributes */
    knnwb_zip_put32(central, 0); /* external attributes */
    knnwb_zip_put32(central, (uint32_t)entries[i].offset);
    g_string_append(central, entries[i].name);
  }
  size_t central_size = central->len - central_start;
  knnwb_zip_put32(central, 0x06054b50); /* end of central directory */
  knnwb_zip_put16(central, 0);
  knnwb_zip_put16(central, 0);
  knnwb_zip_put16(central, (unsigned)n_entries);
  knnwb_zip_put16(central, (unsigned)n_entries);
  knnwb_zip_put32(central, (uint32_t)central_size);
  knnwb_zip_put32(central, (uint32_t)offset);
  knnwb_zip_put16(central, 0);
  return TRUE;
}

/* The CRC-32 of the array's bytes as written (narrowed block by block when they are). */
static gboolean knnwb_npy_array_crc(const char *path, const KnnwbNpyArray *array, uint32_t *crc,
                                    GError **error)
{
  const size_t bytes = array->count * array->item;
  if (array->item == 8) {
    *crc = knnwb_formats_crc32(0, array->data, bytes);
    return TRUE;
  }
  g_autofree char *narrow = g_malloc(MIN((size_t)KNNWB_NPY_BLOCK_BYTES, MAX(bytes, 1)));
  *crc = 0;
  for (size_t offset = 0; offset < bytes; offset += KNNWB_NPY_BLOCK_BYTES) {
    const size_t block = MIN((size_t)KNNWB_NPY_BLOCK_BYTES, bytes - offset);
    if (!knnwb_formats_lists_narrow(path, array->data, array->distances, offset / array->item,
                                    block / array->item, array->k, array->first_row, narrow, error))
      return FALSE;
    *crc = knnwb_formats_crc32(*crc, narrow, block);
  }
  return TRUE;
}

gboolean knnwb_formats_write_npz_lists(const char *path, const KnnwbNeighbors *neighbors,
                                       const char *const *labels, const KnnwbWriteControl *control,
                                       GError **error)
{
  gboolean labels_ok;
  g_autoptr(GString) labels_array =
      knnwb_formats_npy_labels_array(path, labels, neighbors->n_queries, &labels_ok, error);
  if (!labels_ok)
    return FALSE;
  const size_t item = knnwb_npy_item(control);
  const size_t bytes = neighbors->n_queries * neighbors->k * item;
  const KnnwbNpyArray arrays[2] = {knnwb_npy_array(neighbors, FALSE, item),
                                   knnwb_npy_array(neighbors, TRUE, item)};
  uint32_t data_crc[2];
  for (int i = 0; i < 2; i++)
    if (!knnwb_npy_array_crc(path, &arrays[i], &data_crc[i], error))
      return FALSE;
  GString *parts[3] = {NULL, NULL, NULL};
  if (!knnwb_formats_npz_lists_frame_labelled(path, neighbors->n_queries, neighbors->k, item,
                                              data_crc, labels_array, parts, error))
    return FALSE;
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  gboolean ok = file != NULL;
  FILE *stream = ok ? knnwb_atomic_file_stream(file) : NULL;
  KnnwbNpyProgress progress = {.control = control, .total = 2 * (uint64_t)bytes};
  for (int i = 0; i < 2 && ok; i++) {
    fwrite(parts[i]->str, 1, parts[i]->len, stream);
    ok = knnwb_npy_put_data(file, path, &arrays[i], &progress, TRUE, error);
  }
  if (ok)
    fwrite(parts[2]->str, 1, parts[2]->len, stream);
  for (int i = 0; i < 3; i++)
    g_string_free(parts[i], TRUE);
  if (!ok)
    return FALSE;
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}
