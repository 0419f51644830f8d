/* A plain file's bytes read on several threads straight into their place in memory. A fresh
 * buffer costs a page fault per 4 KiB on first touch, which one thread takes serially: a 785 MB
 * matrix read by one pread spends most of its time there, not in the copy from the page cache.
 * Each thread owns a contiguous range (whole 4 KiB units of the output, so page-aligned within
 * the buffer), read in 2 MiB pieces with a cancel check between pieces; the floats of a piece are
 * checked for non-finite values right after they land, while they are still in the cache. Stored
 * items of another type (float64, float16, integers, the other byte order) are read the same way
 * into a buffer of the thread's own and converted into place: one thread converting a 1.5 GB
 * float64 array took 0.7 s where the float32 read of the same shape takes 0.05 s. */
#include "io.h"
#include <knnwb/knn.h>
#include <knnwb/parallel.h>

#include <errno.h>
#include <unistd.h>

enum {
  KNNWB_PREAD_UNIT = 4096,              /* ranges are whole units of output: page-aligned */
  KNNWB_PREAD_PIECE = 2 << 20,          /* stored bytes per pread, cancel check and scan */
  KNNWB_PREAD_MIN_PER_THREAD = 1 << 20, /* a smaller read is not worth a thread */
};
G_STATIC_ASSERT(KNNWB_PREAD_PIECE % KNNWB_PREAD_UNIT == 0 && KNNWB_PREAD_UNIT % 4 == 0);

/* A plain read is one of bytes (an item is a byte, stored and in the output); a converted read
 * one of items of stored_size bytes, each becoming a float. Positions below count items. */
typedef struct {
  int fd;
  char *out; /* item i's place: out + i * out_size */
  size_t n_items;
  size_t stored_size, out_size;
  size_t unit_items, piece_items;
  char *scratch; /* converted reads: each thread's piece buffer, piece_bytes apart */
  size_t piece_bytes;
  uint64_t offset;
  const KnnwbPreadPlan *plan;
  size_t n_units;
  guint64 done;   /* atomic: stored bytes read, for progress */
  GMutex lock;    /* guards what follows; fail_at is also read without it, atomically */
  size_t fail_at; /* the lowest item whose read or conversion failed (SIZE_MAX: none) */
  int fail_errno; /* its reason: 0 = the file ended early, ECANCELED, ERANGE (refused by
                     plan->convert), or pread's errno */
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
    __atomic_store_n(&job->fail_at, at, __ATOMIC_RELAXED);
    job->fail_errno = code;
  }
  g_mutex_unlock(&job->lock);
}

/* Reads the stored bytes of items [first, last) in full into dest: FALSE with errno set (0: end
 * of file). */
static gboolean knnwb_pread_piece(KnnwbPreadJob *job, char *dest, size_t first, size_t last)
{
  const size_t bytes = (last - first) * job->stored_size;
  const uint64_t offset = job->offset + (uint64_t)first * job->stored_size;
  size_t at = 0;
  while (at < bytes) {
    ssize_t got = pread(job->fd, dest + at, bytes - at, (off_t)(offset + at));
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

/* One piece: read (into the scratch buffer when converting), converted into place, scanned.
 * FALSE after recording the failure. */
static gboolean knnwb_pread_one(KnnwbPreadJob *job, char *scratch, size_t at, size_t end,
                                gboolean *finite)
{
  const KnnwbPreadPlan *plan = job->plan;
  char *out = job->out + at * job->out_size;
  if (!knnwb_pread_piece(job, scratch != NULL ? scratch : out, at, end)) {
    knnwb_pread_fail(job, at, errno);
    return FALSE;
  }
  size_t bad = 0;
  if (scratch != NULL && !plan->convert((const unsigned char *)scratch, end - at, (float *)out,
                                        &bad, plan->convert_data)) {
    knnwb_pread_fail(job, at + bad, ERANGE);
    return FALSE;
  }
  if (plan->check_floats && *finite)
    *finite = knnwb_pread_finite(out, (end - at) * job->out_size);
  return TRUE;
}

static void knnwb_pread_range(int thread, int n_threads, void *data)
{
  KnnwbPreadJob *job = data;
  const KnnwbPreadPlan *plan = job->plan;
  size_t first_unit, last_unit;
  knnwb_team_range(job->n_units, thread, n_threads, &first_unit, &last_unit);
  const size_t last = MIN(last_unit * job->unit_items, job->n_items);
  char *scratch = job->scratch != NULL ? job->scratch + (size_t)thread * job->piece_bytes : NULL;
  gboolean finite = TRUE;
  for (size_t at = first_unit * job->unit_items; at < last; at += job->piece_items) {
    /* Only a failure below stops this range: the lowest failure is then the one reported,
     * whichever thread meets its own first. */
    if (__atomic_load_n(&job->fail_at, __ATOMIC_RELAXED) < at)
      return;
    if (plan->cancel != NULL && g_atomic_int_get(plan->cancel) != 0) {
      knnwb_pread_fail(job, at, ECANCELED);
      return;
    }
    const size_t end = MIN(at + job->piece_items, last);
    if (!knnwb_pread_one(job, scratch, at, end, &finite))
      return;
    guint64 done =
        __atomic_add_fetch(&job->done, (guint64)((end - at) * job->stored_size), __ATOMIC_RELAXED);
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

/* Runs the job (its item sizes set) on as many threads as it is worth. */
static gboolean knnwb_pread_run(KnnwbPreadJob *job, gboolean *all_finite, int *saved_errno)
{
  const KnnwbPreadPlan *plan = job->plan;
  job->unit_items = KNNWB_PREAD_UNIT / job->out_size;
  job->piece_items = MAX(job->unit_items, KNNWB_PREAD_PIECE / job->stored_size);
  job->n_units = (job->n_items + job->unit_items - 1) / job->unit_items;
  job->fail_at = SIZE_MAX;
  const size_t bytes = job->n_items * job->stored_size;
  size_t most = MAX((size_t)1, bytes / KNNWB_PREAD_MIN_PER_THREAD);
  int n_threads = (int)MIN((size_t)knnwb_thread_count(plan->n_threads), most);
  n_threads = (int)MIN((size_t)n_threads, MAX(job->n_units, (size_t)1));
  g_autofree char *scratch = NULL;
  if (plan->convert != NULL) {
    /* A piece is never longer than the longest range: a small array gets small buffers. */
    const size_t longest = (job->n_units + (size_t)n_threads - 1) / (size_t)n_threads;
    job->piece_bytes = MIN(job->piece_items, longest * job->unit_items) * job->stored_size;
    scratch = job->scratch = g_try_malloc(MAX(job->piece_bytes * (size_t)n_threads, 1));
    if (scratch == NULL) {
      *saved_errno = ENOMEM;
      *all_finite = FALSE;
      return FALSE;
    }
  }
  g_mutex_init(&job->lock);
  knnwb_team_run(n_threads, knnwb_pread_range, job);
  g_mutex_clear(&job->lock);
  *saved_errno = job->fail_errno;
  *all_finite = plan->check_floats && job->fail_at == SIZE_MAX && !job->non_finite;
  return job->fail_at == SIZE_MAX;
}

gboolean knnwb_formats_pread_parallel(int fd, void *buffer, size_t bytes, uint64_t offset,
                                      const KnnwbPreadPlan *plan, gboolean *all_finite,
                                      int *saved_errno)
{
  g_return_val_if_fail(plan->convert == NULL, FALSE);
  KnnwbPreadJob job = {.fd = fd,
                       .out = buffer,
                       .n_items = bytes,
                       .stored_size = 1,
                       .out_size = 1,
                       .offset = offset,
                       .plan = plan};
  return knnwb_pread_run(&job, all_finite, saved_errno);
}

gboolean knnwb_formats_pread_convert(int fd, float *floats, size_t n_items, uint64_t offset,
                                     const KnnwbPreadPlan *plan, gboolean *all_finite,
                                     int *saved_errno, size_t *failed_item)
{
  g_return_val_if_fail(plan->convert != NULL && plan->stored_item_size > 0, FALSE);
  KnnwbPreadJob job = {.fd = fd,
                       .out = (char *)floats,
                       .n_items = n_items,
                       .stored_size = plan->stored_item_size,
                       .out_size = sizeof(float),
                       .offset = offset,
                       .plan = plan};
  gboolean ok = knnwb_pread_run(&job, all_finite, saved_errno);
  *failed_item = job.fail_at;
  return ok;
}
