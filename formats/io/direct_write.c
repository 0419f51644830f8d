/* A large file written around the page cache (O_DIRECT): the bytes go from aligned copies
 * straight to the disk while they are produced, instead of into the page cache for the commit's
 * fsync to write out while the program waits. On the GPU machine two 2.4 GB list files took 2.9 s
 * through the page cache with early writeback and 2.0-2.5 s this way (the disk's own speed).
 * A file system that refuses O_DIRECT (tmpfs) leaves the file empty for the caller's ordinary
 * write. Two threads per file: ext4 writes one direct request of a file at a time, so one
 * thread copies the next block into its aligned buffer while the other's request is on the
 * disk. */
#include "io.h"
#include <knnwb/parallel.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

enum {
  KNNWB_DIRECT_ALIGN = 4096,     /* offsets, lengths and buffers: any logical block size */
  KNNWB_DIRECT_BLOCK = 16 << 20, /* one request, one cancel check */
};

typedef struct {
  int fd;
  const char *head;
  size_t head_bytes;
  const char *data;
  size_t total; /* head_bytes + the data's bytes */
  size_t n_blocks;
  const KnnwbDirectPlan *plan;
  gint quit;      /* atomic: a thread failed; the others stop before their next block */
  GMutex lock;    /* guards what follows */
  int result;     /* 1 written, 0 refused (EINVAL), -1 failed */
  int fail_errno; /* -1: the first failure's errno */
} KnnwbDirectJob;

/* The file's bytes [offset, offset + length) (header, then data) into buffer. */
static void knnwb_direct_fill(const KnnwbDirectJob *job, char *buffer, size_t offset, size_t length)
{
  size_t put = 0;
  if (offset < job->head_bytes) {
    put = MIN(length, job->head_bytes - offset);
    memcpy(buffer, job->head + offset, put);
  }
  if (put < length)
    memcpy(buffer + put, job->data + (offset + put - job->head_bytes), length - put);
}

static void knnwb_direct_stop(KnnwbDirectJob *job, int result, int code)
{
  g_mutex_lock(&job->lock);
  if (job->result == 1 || (job->result == 0 && result == -1)) {
    job->result = result;
    job->fail_errno = code;
  }
  g_mutex_unlock(&job->lock);
  g_atomic_int_set(&job->quit, 1);
}

/* One block: the aligned length (the file's last block padded with zeros, cut by the caller's
 * ftruncate). FALSE with errno set (ENOSPC for a write that stops short). */
static gboolean knnwb_direct_put(KnnwbDirectJob *job, char *buffer, size_t offset, size_t length)
{
  size_t padded = (length + KNNWB_DIRECT_ALIGN - 1) / KNNWB_DIRECT_ALIGN * KNNWB_DIRECT_ALIGN;
  knnwb_direct_fill(job, buffer, offset, length);
  memset(buffer + length, 0, padded - length);
  size_t done = 0;
  while (done < padded) {
    ssize_t put = pwrite(job->fd, buffer + done, padded - done, (off_t)(offset + done));
    if (put < 0 && errno == EINTR)
      continue;
    if (put <= 0 || put % KNNWB_DIRECT_ALIGN != 0) {
      if (put >= 0)
        errno = ENOSPC;
      return FALSE;
    }
    done += (size_t)put;
  }
  return TRUE;
}

static void knnwb_direct_thread(int thread, int n_threads, void *data)
{
  KnnwbDirectJob *job = data;
  const KnnwbDirectPlan *plan = job->plan;
  void *buffer = NULL;
  if (posix_memalign(&buffer, KNNWB_DIRECT_ALIGN, KNNWB_DIRECT_BLOCK) != 0) {
    knnwb_direct_stop(job, 0, 0); /* no memory for it: the ordinary write, then */
    return;
  }
  for (size_t b = (size_t)thread; b < job->n_blocks; b += (size_t)n_threads) {
    if (g_atomic_int_get(&job->quit) != 0 ||
        (plan->stop != NULL && g_atomic_int_get(plan->stop) != 0))
      break;
    if (plan->cancel != NULL && g_atomic_int_get(plan->cancel) != 0) {
      knnwb_direct_stop(job, -1, ECANCELED);
      break;
    }
    const size_t offset = b * (size_t)KNNWB_DIRECT_BLOCK;
    const size_t length = MIN((size_t)KNNWB_DIRECT_BLOCK, job->total - offset);
    if (!knnwb_direct_put(job, buffer, offset, length)) {
      knnwb_direct_stop(job, errno == EINVAL ? 0 : -1, errno);
      break;
    }
    const size_t head = offset < job->head_bytes ? MIN(length, job->head_bytes - offset) : 0;
    if (plan->done != NULL) /* bytes of data, as the ordinary write counts them */
      __atomic_add_fetch(plan->done, (guint64)(length - head), __ATOMIC_RELAXED);
    if (thread == 0 && plan->report != NULL)
      plan->report(plan->report_data);
  }
  free(buffer);
}

int knnwb_formats_write_direct(int fd, const void *head, size_t head_bytes, const void *data,
                               size_t bytes, const KnnwbDirectPlan *plan, int *saved_errno)
{
  *saved_errno = 0;
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_DIRECT) != 0)
    return 0;
  KnnwbDirectJob job = {.fd = fd,
                        .head = head,
                        .head_bytes = head_bytes,
                        .data = data,
                        .total = head_bytes + bytes,
                        .plan = plan,
                        .result = 1};
  job.n_blocks = (job.total + KNNWB_DIRECT_BLOCK - 1) / KNNWB_DIRECT_BLOCK;
  g_mutex_init(&job.lock);
  knnwb_team_run((int)MIN((size_t)MAX(plan->n_threads, 1), job.n_blocks), knnwb_direct_thread,
                 &job);
  g_mutex_clear(&job.lock);
  (void)fcntl(fd, F_SETFL, flags);
  if (job.result == 1 && plan->stop != NULL && g_atomic_int_get(plan->stop) != 0)
    job.result = -1; /* stopped by the other writer: no error of its own */
  /* The padded last block is cut off; a refused or failed file is emptied for what follows. */
  if (ftruncate(fd, job.result == 1 ? (off_t)job.total : 0) != 0 && job.result == 1) {
    job.result = -1;
    job.fail_errno = errno;
  }
  *saved_errno = job.result == -1 ? job.fail_errno : 0;
  return job.result;
}
