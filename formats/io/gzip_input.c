/*
 * gzip-compressed input, recognised by its magic bytes (1f 8b) whatever the file is called: a
 * streaming zlib inflater for the text readers, the whole decompressed content in an anonymous
 * memory file for NPY (which wants to map or pread its data), and the first bytes of a file for
 * format detection. Concatenated gzip members (pigz, `cat a.gz b.gz`) are one stream, as gzip -d
 * reads them.
 */
/* memfd_create needs _GNU_SOURCE, which the build defines for every file. */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Compressed bytes read per read() call. */
enum { KNNWB_GZIP_CHUNK = 1 << 20 };

struct KnnwbGzipReader {
  int fd;
  const char *path;
  z_stream stream;
  unsigned char *compressed;
  gboolean input_ended;       /* read() returned 0 */
  gboolean member_ended;      /* the last inflate() finished a member (Z_STREAM_END) */
  gboolean finished;          /* every member read, nothing after them */
  uint64_t compressed_offset; /* bytes of the file consumed, for messages */
};

gboolean knnwb_gzip_fd_is_gzip(int fd)
{
  unsigned char magic[2];
  return pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

KnnwbGzipReader *knnwb_gzip_reader_new(int fd, const char *path, GError **error)
{
  KnnwbGzipReader *reader = g_new0(KnnwbGzipReader, 1);
  reader->fd = fd;
  reader->path = path;
  /* 16 + MAX_WBITS: gzip framing (header, CRC-32 and length checked by zlib). */
  if (inflateInit2(&reader->stream, 16 + MAX_WBITS) != Z_OK) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "%s: cannot start zlib", path);
    g_free(reader);
    return NULL;
  }
  reader->compressed = g_malloc(KNNWB_GZIP_CHUNK);
  return reader;
}

void knnwb_gzip_reader_free(KnnwbGzipReader *reader)
{
  if (reader == NULL)
    return;
  inflateEnd(&reader->stream);
  g_free(reader->compressed);
  g_free(reader);
}

/* More compressed bytes into the stream's input. FALSE on a read error. */
static gboolean knnwb_gzip_refill(KnnwbGzipReader *reader, GError **error)
{
  for (;;) {
    ssize_t got = read(reader->fd, reader->compressed, KNNWB_GZIP_CHUNK);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      int saved = errno;
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: read failed: %s", reader->path,
                  g_strerror(saved));
      return FALSE;
    }
    reader->stream.next_in = reader->compressed;
    reader->stream.avail_in = (uInt)got;
    reader->input_ended = got == 0;
    return TRUE;
  }
}

gssize knnwb_gzip_reader_read(KnnwbGzipReader *reader, void *buffer, size_t capacity,
                              GError **error)
{
  if (reader->finished || capacity == 0)
    return 0;
  capacity = MIN(capacity, (size_t)G_MAXUINT32 / 2);
  z_stream *stream = &reader->stream;
  stream->next_out = buffer;
  stream->avail_out = (uInt)capacity;
  while (stream->avail_out == capacity) {
    if (stream->avail_in == 0 && !reader->input_ended) {
      if (!knnwb_gzip_refill(reader, error))
        return -1;
    }
    if (reader->member_ended) {
      /* After a member: the end of the file, or the next member. */
      if (stream->avail_in == 0 && reader->input_ended) {
        reader->finished = TRUE;
        break;
      }
      if (stream->avail_in == 0)
        continue;
      if (stream->next_in[0] != 0x1f) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                    "%s: byte %" G_GUINT64_FORMAT ": data that is not gzip follows the compressed "
                    "stream (a damaged or wrongly concatenated file?)",
                    reader->path, (guint64)stream->total_in + reader->compressed_offset);
        return -1;
      }
      reader->compressed_offset += stream->total_in;
      inflateReset(stream);
      reader->member_ended = FALSE;
    }
    if (stream->avail_in == 0 && reader->input_ended) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                  "%s: the gzip data ends early (a truncated or partly downloaded file?)",
                  reader->path);
      return -1;
    }
    int status = inflate(stream, Z_NO_FLUSH);
    if (status == Z_STREAM_END) {
      reader->member_ended = TRUE;
    } else if (status == Z_BUF_ERROR) {
      continue; /* needs more input */
    } else if (status != Z_OK) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                  "%s: byte %" G_GUINT64_FORMAT ": the gzip data is corrupt (zlib: %s)",
                  reader->path, (guint64)stream->total_in + reader->compressed_offset,
                  stream->msg ? stream->msg : "error");
      return -1;
    }
  }
  return (gssize)(capacity - stream->avail_out);
}

int knnwb_gzip_decompress_to_memory_file(int fd, const char *path, const KnnwbReadOptions *options,
                                         GError **error)
{
  struct stat st;
  const uint64_t stored = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
  int memory = memfd_create("knnwb-gunzip", MFD_CLOEXEC);
  if (memory < 0) {
    int saved = errno;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot make a memory file: %s", path,
                g_strerror(saved));
    return -1;
  }
  KnnwbGzipReader *reader = knnwb_gzip_reader_new(fd, path, error);
  if (reader == NULL) {
    close(memory);
    return -1;
  }
  g_autofree unsigned char *buffer = g_malloc(KNNWB_GZIP_CHUNK);
  for (;;) {
    if (options != NULL && options->cancel != NULL && g_atomic_int_get(options->cancel) != 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "%s: interrupted while reading", path);
      goto failed;
    }
    gssize got = knnwb_gzip_reader_read(reader, buffer, KNNWB_GZIP_CHUNK, error);
    if (got < 0)
      goto failed;
    if (got == 0)
      break;
    if (options != NULL && options->progress != NULL && stored > 0) {
      off_t position = lseek(fd, 0, SEEK_CUR);
      if (position > 0)
        options->progress(MIN((uint64_t)position, stored), stored, options->progress_data);
    }
    for (gssize written = 0; written < got;) {
      ssize_t n = write(memory, buffer + written, (size_t)(got - written));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        int saved = errno;
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                    "%s: cannot hold the decompressed data in memory: %s", path, g_strerror(saved));
        goto failed;
      }
      written += n;
    }
  }
  knnwb_gzip_reader_free(reader);
  return memory;
failed:
  knnwb_gzip_reader_free(reader);
  close(memory);
  return -1;
}

gboolean knnwb_formats_read_head(const char *path, char *buffer, size_t capacity, size_t *length,
                                 gboolean *compressed, GError **error)
{
  *length = 0;
  *compressed = FALSE;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int saved = errno;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot open: %s", path, g_strerror(saved));
    return FALSE;
  }
  gboolean ok = TRUE;
  if (knnwb_gzip_fd_is_gzip(fd)) {
    *compressed = TRUE;
    KnnwbGzipReader *reader = knnwb_gzip_reader_new(fd, path, error);
    ok = reader != NULL;
    while (ok && *length < capacity) {
      gssize got = knnwb_gzip_reader_read(reader, buffer + *length, capacity - *length, error);
      ok = got >= 0;
      if (got <= 0)
        break;
      *length += (size_t)got;
    }
    knnwb_gzip_reader_free(reader);
  } else {
    while (*length < capacity) {
      ssize_t got = read(fd, buffer + *length, capacity - *length);
      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0) {
        int saved = errno;
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: read failed: %s", path,
                    g_strerror(saved));
        ok = FALSE;
      }
      if (got <= 0)
        break;
      *length += (size_t)got;
    }
  }
  close(fd);
  return ok;
}
