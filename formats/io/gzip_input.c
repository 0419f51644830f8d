/*
 * gzip-compressed input, recognised by its magic bytes (1f 8b) whatever the file is called: a
 * streaming zlib inflater for the readers (text and NPY alike: nothing is ever inflated whole),
 * with an optional cap on the bytes it yields, and the first bytes of a file for format
 * detection. Concatenated gzip members (pigz, `cat a.gz b.gz`) are one stream, as gzip -d reads
 * them.
 */
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
  uint64_t produced;          /* decompressed bytes handed out */
  uint64_t limit;             /* the most it may hand out; 0: no cap */
  const char *limit_reason;   /* what the cap is, for the message */
};

void knnwb_gzip_reader_set_limit(KnnwbGzipReader *reader, uint64_t limit, const char *reason)
{
  reader->limit = limit;
  reader->limit_reason = reason;
}

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
  /* One byte past the cap is inflated (never more), so that data ending exactly there passes. */
  if (reader->limit > 0 && reader->produced + capacity > reader->limit + 1)
    capacity = (size_t)(reader->limit + 1 - MIN(reader->produced, reader->limit));
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
  gsize got = capacity - stream->avail_out;
  reader->produced += got;
  if (reader->limit > 0 && reader->produced > reader->limit) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: the compressed data decompresses to more than %" G_GUINT64_FORMAT " MiB (%s)",
                reader->path, reader->limit >> 20, reader->limit_reason);
    return -1;
  }
  return (gssize)got;
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
