/* A plain file's bytes read on several threads straight into their place in memory. A fresh
 * buffer costs a page fault per 4 KiB on first touch, which one thread takes serially: a 785 MB
 * matrix read by one pread spends most of its time there, not in the copy from the page cache.
 * Each thread owns a contiguous range (whole 4 KiB units, so page-aligned within the buffer),
 * read in 2 MiB pieces with a cancel check between pieces; a float32 piece is checked for
 * non-finite values right after its read, while it is still in the cache. */
#include "io.h"
#include <knnwb/knn.h>
#include <knnwb/parallel.h>

#include <errno.h>
#include <unistd.h>

enum {
  KNNWB_PREAD_UNIT = 4096,              /* ranges are whole units: float- and page-aligned */
  KNNWB_PREAD_PIECE = 2 << 20,          /* one pread, one cancel check, one scan */
  KNNWB_PREAD_MIN_PER_THREAD = 1 << 20, /* a smaller read is not worth a thread */
};
G_STATIC_ASSERT(KNNWB_PREAD_PIECE % KNNWB_PREAD_UNIT == 0 && KNNWB_PREAD_UNIT % 4 == 0);

typedef struct {
  int fd;
  char *buffer;
  size_t bytes;
  uint64_t offset;
  const KnnwbPreadPlan *plan;
  size_t n_units;
  gint stop;      /* atomic: a thread failed; the others stop before their next piece */
  guint64 done;   /* atomic: bytes read, for progress */
  GMutex lock;    /* guards what follows */
  size_t fail_at; /* the lowest byte whose read failed (SIZE_MAX: none) */
  int fail_errno; /* its reason: 0 = the file ended early, ECANCELED, or pread's errno */
  gboolean non_finite;
} KnnwbPreadJob;

/* TRUE when no float32 of the piece (native byte order) is NaN or infinite. An exponent of all
 * ones is the one that carries into the sign bit when one is added to it, so an OR of
 * (exponent + 1) over the values tells: an OR over blocks of a fixed length, which the compiler
 * vectorises at -O2 (a compare-and-branch loop it leaves scalar, at a sixth of the read's time). */
static gboolean knnwb_pread_finite(const char *piece, size_t bytes)
{
  enum { BLOCK = 64 };
  uint32_t any = 0;
  size_t i = 0;
  for (; i + 4 * BLOCK <= bytes; i += 4 * BLOCK) {
    uint32_t block[BLOCK];
    memcpy(block, piece + i, sizeof block);
    for (int j = 0; j < BLOCK; j++)
      any |= (block[j] & 0x7f800000u) + 0x00800000u;
  }
  for (; i + 4 <= bytes; i += 4) {
    uint32_t bits;
    memcpy(&bits, piece + i, 4);
    any |= (bits & 0x7f800000u) + 0x00800000u;
  }
  return (any & 0x80000000u) == 0;
}

static void knnwb_pread_fail(KnnwbPreadJob *job, size_t at, int code)
{
  g_mutex_lock(&job->lock);
  if (at < job->fail_at) {
    job->fail_at = at;
    job->fail_errno = code;
  }
  g_mutex_unlock(&job->lock);
  g_atomic_int_set(&job->stop, 1);
}

/* Reads [first, last) of the job's bytes in full: FALSE with errno set (0: end of file). */
static gboolean knnwb_pread_piece(KnnwbPreadJob *job, size_t first, size_t last)
{
  size_t at = first;
  while (at < last) {
    ssize_t got = pread(job->fd, job->buffer + at, last - at, (off_t)(job->offset + at));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      if (got == 0)
        errno = 0;
      return FALSE;
    }
    at += (size_t)got;
  }
  return TRUE;
}

static void knnwb_pread_range(int thread, int n_threads, void *data)
{
  KnnwbPreadJob *job = data;
  const KnnwbPreadPlan *plan = job->plan;
  size_t first_unit, last_unit;
  knnwb_team_range(job->n_units, thread, n_threads, &first_unit, &last_unit);
  const size_t last = MIN(last_unit * KNNWB_PREAD_UNIT, job->bytes);
  gboolean finite = TRUE;
  for (size_t at = first_unit * KNNWB_PREAD_UNIT; at < last; at += KNNWB_PREAD_PIECE) {
    if (g_atomic_int_get(&job->stop) != 0)
      return;
    if (plan->cancel != NULL && g_atomic_int_get(plan->cancel) != 0) {
      knnwb_pread_fail(job, at, ECANCELED);
      return;
    }
    const size_t end = MIN(at + KNNWB_PREAD_PIECE, last);
    if (!knnwb_pread_piece(job, at, end)) {
      knnwb_pread_fail(job, at, errno);
      return;
    }
    if (plan->check_floats && finite)
      finite = knnwb_pread_finite(job->buffer + at, end - at);
    guint64 done = __atomic_add_fetch(&job->done, (guint64)(end - at), __ATOMIC_RELAXED);
    /* Only the calling thread reports: a progress callback need not be thread-safe. */
    if (thread == 0 && plan->progress != NULL)
      plan->progress(MIN(job->offset + done, plan->progress_total), plan->progress_total,
                     plan->progress_data);
  }
  if (!finite) {
    g_mutex_lock(&job->lock);
    job->non_finite = TRUE;
    g_mutex_unlock(&job->lock);
  }
}

gboolean knnwb_formats_pread_parallel(int fd, void *buffer, size_t bytes, uint64_t offset,
                                      const KnnwbPreadPlan *plan, gboolean *all_finite,
                                      int *saved_errno)
{
  KnnwbPreadJob job = {.fd = fd,
                       .buffer = buffer,
                       .bytes = bytes,
                       .offset = offset,
                       .plan = plan,
                       .n_units = (bytes + KNNWB_PREAD_UNIT - 1) / KNNWB_PREAD_UNIT,
                       .fail_at = SIZE_MAX};
  g_mutex_init(&job.lock);
  size_t most = MAX((size_t)1, bytes / KNNWB_PREAD_MIN_PER_THREAD);
  int n_threads = (int)MIN((size_t)knnwb_thread_count(plan->n_threads), most);
  n_threads = (int)MIN((size_t)n_threads, MAX(job.n_units, (size_t)1));
  knnwb_team_run(n_threads, knnwb_pread_range, &job);
  g_mutex_clear(&job.lock);
  *saved_errno = job.fail_errno;
  *all_finite = plan->check_floats && job.fail_at == SIZE_MAX && !job.non_finite;
  return job.fail_at == SIZE_MAX;
}
