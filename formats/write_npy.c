/* The neighbour lists as NumPy arrays: indices int64 (n x k, -1 in unused slots) and distances
 * float64 (+inf there). `.npy` holds one array per file, so the indices go to OUT and the distances
 * to OUT's `.distances.npy`; `.npz` is a zip of `indices.npy` and `distances.npy` (stored, not
 * deflated: the lists do not compress much and `np.load` then reads at disk speed). Both are raw
 * copies of the lists in memory, written in 64 MiB blocks with a cancel check between blocks. */
#include "formats_internal.h"

#include <errno.h>
#include <zlib.h>

enum { KNNWB_NPY_BLOCK_BYTES = 64 << 20 };

/* NPY format 1.0: magic, version, header length, then the header dict padded with spaces to a
 * multiple of 64 bytes and ended by a newline. */
static GString *knnwb_npy_header(const char *descr, size_t rows, size_t columns)
{
  GString *header = g_string_new(NULL);
  g_string_append_len(header, "\x93NUMPY\x01\x00\x00\x00", 10);
  g_string_append_printf(header, "{'descr': '%c%s', 'fortran_order': False, 'shape': (%zu, %zu), }",
                         G_BYTE_ORDER == G_LITTLE_ENDIAN ? '<' : '>', descr, rows, columns);
  while ((header->len + 1) % 64 != 0)
    g_string_append_c(header, ' ');
  g_string_append_c(header, '\n');
  size_t length = header->len - 10;
  header->str[8] = (char)(length & 0xFF);
  header->str[9] = (char)(length >> 8);
  return header;
}

/* Writes bytes in blocks, reporting progress (in bytes of this array) and checking cancel. */
static gboolean knnwb_npy_put_data(FILE *stream, const char *path, const void *data, size_t bytes,
                                   const KnnwbWriteControl *control, uint64_t done, uint64_t total,
                                   GError **error)
{
  const char *p = data;
  for (size_t offset = 0; offset < bytes; offset += KNNWB_NPY_BLOCK_BYTES) {
    if (knnwb_formats_cancelled(control, path, error))
      return FALSE;
    size_t block = MIN((size_t)KNNWB_NPY_BLOCK_BYTES, bytes - offset);
    if (fwrite(p + offset, 1, block, stream) != block) {
      int code = errno;
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: write failed: %s", path,
                  g_strerror(code));
      return FALSE;
    }
    if (control != NULL && control->progress != NULL)
      control->progress(done + offset + block, total, control->progress_data);
  }
  return !knnwb_formats_cancelled(control, path, error);
}

static gboolean knnwb_npy_write_one(const char *path, const char *descr, const void *data,
                                    const KnnwbNeighbors *nb, const KnnwbWriteControl *control,
                                    uint64_t done, uint64_t total, KnnwbAtomicFile **out,
                                    GError **error)
{
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  g_autoptr(GString) header = knnwb_npy_header(descr, nb->n_queries, nb->k);
  fwrite(header->str, 1, header->len, stream);
  if (!knnwb_npy_put_data(stream, path, data, nb->n_queries * nb->k * 8, control, done, total,
                          error))
    return FALSE;
  *out = g_steal_pointer(&file);
  return TRUE;
}

gboolean knnwb_formats_write_npy_lists(const char *path, const KnnwbNeighbors *neighbors,
                                       const KnnwbWriteControl *control, GError **error)
{
  g_autofree char *side = knnwb_formats_side_path(path, KNNWB_OUTPUT_NPY);
  uint64_t bytes = (uint64_t)neighbors->n_queries * neighbors->k * 8;
  KnnwbAtomicFile *indices = NULL, *distances = NULL;
  if (!knnwb_npy_write_one(path, "i8", neighbors->indices, neighbors, control, 0, 2 * bytes,
                           &indices, error))
    return FALSE;
  if (!knnwb_npy_write_one(side, "f8", neighbors->distances, neighbors, control, bytes, 2 * bytes,
                           &distances, error)) {
    knnwb_atomic_file_abort(indices);
    return FALSE;
  }
  /* Both complete: commit the side file first, so that OUT appearing means both are there. */
  if (!knnwb_atomic_file_commit(distances, error)) {
    knnwb_atomic_file_abort(indices);
    return FALSE;
  }
  return knnwb_atomic_file_commit(indices, error);
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
  const void *data;
  GString *npy_header;
  uint32_t crc;
  uint64_t size;   /* header + data */
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

static uint32_t knnwb_zip_crc(const GString *header, const void *data, size_t bytes)
{
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, (const Bytef *)header->str, (uInt)header->len);
  const Bytef *p = data;
  for (size_t offset = 0; offset < bytes; offset += 1u << 30)
    crc = crc32(crc, p + offset, (uInt)MIN((size_t)1 << 30, bytes - offset));
  return (uint32_t)crc;
}

gboolean knnwb_formats_write_npz_lists(const char *path, const KnnwbNeighbors *neighbors,
                                       const KnnwbWriteControl *control, GError **error)
{
  size_t bytes = neighbors->n_queries * neighbors->k * 8;
  KnnwbZipEntry entries[2] = {{"indices.npy", neighbors->indices, NULL, 0, 0, 0},
                              {"distances.npy", neighbors->distances, NULL, 0, 0, 0}};
  /* Without ZIP64 every size and offset must stay below 4 GiB. */
  if ((uint64_t)bytes * 2 + 4096 >= UINT32_MAX) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: the lists take %zu bytes, beyond what a .npz without ZIP64 holds (4 GiB); "
                "write .npy instead",
                path, 2 * bytes);
    return FALSE;
  }
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  uint64_t offset = 0;
  gboolean ok = TRUE;
  for (int i = 0; i < 2 && ok; i++) {
    KnnwbZipEntry *entry = &entries[i];
    entry->npy_header = knnwb_npy_header(i == 0 ? "i8" : "f8", neighbors->n_queries, neighbors->k);
    entry->crc = knnwb_zip_crc(entry->npy_header, entry->data, bytes);
    entry->size = entry->npy_header->len + bytes;
    entry->offset = offset;
    g_autoptr(GString) local = g_string_new(NULL);
    knnwb_zip_put32(local, 0x04034b50);
    knnwb_zip_put_common(local, entry);
    g_string_append(local, entry->name);
    fwrite(local->str, 1, local->len, stream);
    fwrite(entry->npy_header->str, 1, entry->npy_header->len, stream);
    ok = knnwb_npy_put_data(stream, path, entry->data, bytes, control, (uint64_t)i * bytes,
                            2 * (uint64_t)bytes, error);
    offset += local->len + entry->size;
  }
  if (ok) {
    g_autoptr(GString) central = g_string_new(NULL);
    for (int i = 0; i < 2; i++) {
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
    size_t central_size = central->len;
    knnwb_zip_put32(central, 0x06054b50); /* end of central directory */
    knnwb_zip_put16(central, 0);
    knnwb_zip_put16(central, 0);
    knnwb_zip_put16(central, 2);
    knnwb_zip_put16(central, 2);
    knnwb_zip_put32(central, (uint32_t)central_size);
    knnwb_zip_put32(central, (uint32_t)offset);
    knnwb_zip_put16(central, 0);
    fwrite(central->str, 1, central->len, stream);
  }
  for (int i = 0; i < 2; i++)
    if (entries[i].npy_header != NULL)
      g_string_free(entries[i].npy_header, TRUE);
  if (!ok)
    return FALSE;
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}
