/*
 * Exchanges and reductions between ranks of one host through an MPI-3 shared-memory window
 * (MPI_Win_allocate_shared, Open MPI's osc/sm). Three uses: the group's share_begin/sync/end lend
 * the window to core, which packs a self job's candidates into it and merges the other ranks' in
 * place (nothing copied between ranks: 0.65 s of exchange became 0.34 s of packing and merging on
 * two H200s); the group's exchange copies in and out of it on the rank's threads (383 MiB at
 * 1.3-2.3 GB/s, Open MPI's messages 1.0-1.2 GB/s there, CMA no faster); its reduce (the threshold
 * rounds' 12 MB, twelve times a run) combines the ranks' parts of a window kept between calls
 * (3-4 ms against 7-10 ms). Used only when every rank of the job is on this host (one communicator
 * of type MPI_COMM_TYPE_SHARED), for at least KNNWB_SHARED_WINDOW_MIN bytes, and when the window's
 * directory (/dev/shm, Open MPI's osc_sm_backing_directory) has room: a container's /dev/shm is
 * often 64 MiB, and touching a page beyond it would end the process with SIGBUS. Every decision is
 * taken the same on every rank (one small reduction), so the collective calls always match.
 * KNNWB_MPI_SHARED=0 turns the window off, =1 uses it for every size (tests), unset: from the
 * threshold on.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <mpi.h>
#include <knnwb/knn.h>
#include <knnwb/parallel.h>
#include "distributed_internal.h"

/* Below this, messages cost less than the window's synchronisation (two barriers). */
#define KNNWB_SHARED_WINDOW_MIN ((size_t)1 << 20)
/* A window up to this size stays allocated for the next exchange or reduction (threshold rounds
 * come twelve times per run); larger ones are given back at once, so a run does not keep its
 * largest exchange in shared memory. A window lent to the caller (share_begin) is given back at
 * share_end whatever its size: a lender such as a split rank's bringing of rows goes on to search
 * for tens of seconds, and a kept 32 MiB round block was a tenth of its memory meanwhile (1,000,000
 * rows, k = 30, four ranks); the next lending or exchange takes a fresh window (one collective
 * allocation, a few milliseconds). */
#define KNNWB_SHARED_WINDOW_KEEP ((size_t)64 << 20)
/* Copies smaller than this stay on the calling thread. */
#define KNNWB_SHARED_COPY_PIECE ((size_t)8 << 20)

typedef enum { KNNWB_SHARED_OFF, KNNWB_SHARED_AUTO, KNNWB_SHARED_ALWAYS } KnnwbSharedUse;

static struct {
  MPI_Comm comm; /* the job's communicator when all its ranks share this host, else NULL */
  KnnwbSharedUse use;
  int ranks, me, threads;
  MPI_Win window;
  size_t capacity; /* bytes per rank */
  char **bases;    /* every rank's part of the window */
  gboolean lent;   /* between share_begin and share_end: the window is the caller's */
  GThread *giving; /* this rank's part's pages being given back (knnwb_shared_release) */
  gboolean spent;  /* the window's pages are given back: freed, not reused, at the next acquire */
} knnwb_shared = {MPI_COMM_NULL, KNNWB_SHARED_OFF, 1, 0, 1, MPI_WIN_NULL, 0, NULL, FALSE, NULL,
                  FALSE};

void knnwb_distributed_shared_init(MPI_Comm comm, int local_size)
{
  int ranks = 1, me = 0;
  MPI_Comm_size(comm, &ranks);
  MPI_Comm_rank(comm, &me);
  const char *choice = g_getenv("KNNWB_MPI_SHARED");
  knnwb_shared.use = choice == NULL             ? KNNWB_SHARED_AUTO
                     : strcmp(choice, "0") == 0 ? KNNWB_SHARED_OFF
                     : strcmp(choice, "1") == 0 ? KNNWB_SHARED_ALWAYS
                                                : KNNWB_SHARED_AUTO;
  /* local_size is the same on every rank exactly when all are on one host or all are not. */
  if (local_size != ranks || ranks < 2)
    knnwb_shared.use = KNNWB_SHARED_OFF;
  knnwb_shared.comm = comm;
  knnwb_shared.ranks = ranks;
  knnwb_shared.me = me;
  knnwb_shared.threads = MAX(1, knnwb_thread_count(0) / MAX(1, local_size));
  knnwb_shared.bases = g_new0(char *, ranks);
}

static void knnwb_shared_window_free(void)
{
  if (knnwb_shared.giving != NULL)
    g_thread_join(g_steal_pointer(&knnwb_shared.giving));
  if (knnwb_shared.window != MPI_WIN_NULL) {
    MPI_Win_unlock_all(knnwb_shared.window);
    MPI_Win_free(&knnwb_shared.window);
  }
  knnwb_shared.window = MPI_WIN_NULL;
  knnwb_shared.capacity = 0;
  knnwb_shared.spent = FALSE;
}

void knnwb_distributed_shared_finalize(void)
{
  knnwb_shared_window_free();
  g_clear_pointer(&knnwb_shared.bases, g_free);
  knnwb_shared.use = KNNWB_SHARED_OFF;
}

double knnwb_distributed_shared_free_bytes(void)
{
  const char *directory = g_getenv("OMPI_MCA_osc_sm_backing_directory");
  if (directory == NULL)
    directory = "/dev/shm";
  struct statvfs vfs;
  if (statvfs(directory, &vfs) != 0)
    return -1.0;
  return (double)vfs.f_bavail * (double)vfs.f_frsize;
}

/* Room in the window's directory for every rank's part (TRUE when it cannot be told: Open MPI
 * then reports a failed allocation itself). */
static gboolean knnwb_shared_room(size_t bytes_per_rank)
{
  /* Tests: this rank sees no room, so that every rank must fall back to messages together. */
  const char *no_room = g_getenv("KNNWB_MPI_SHARED_NO_ROOM_RANK");
  if (no_room != NULL && atoi(no_room) == knnwb_shared.me)
    return FALSE;
  const double free_bytes = knnwb_distributed_shared_free_bytes();
  /* Half of what is free: the transport's own segments and other jobs live there too. */
  return free_bytes < 0 || (double)bytes_per_rank * knnwb_shared.ranks <= free_bytes / 2;
}

MPI_Comm knnwb_distributed_shared_comm(size_t bytes_per_rank, gboolean *room)
{
  *room = knnwb_shared.use != KNNWB_SHARED_OFF && knnwb_shared_room(bytes_per_rank);
  return knnwb_shared.use == KNNWB_SHARED_OFF ? MPI_COMM_NULL : knnwb_shared.comm;
}

/*
 * Collective: a window of at least need bytes per rank, or FALSE (on every rank) when the path is
 * off, need is small, or there is no room. need is this rank's; the ranks agree on the largest.
 */
static gboolean knnwb_shared_acquire(size_t need)
{
  if (knnwb_shared.use == KNNWB_SHARED_OFF)
    return FALSE;
  /* A window whose pages are given back (knnwb_shared_release; every rank alike) counts as none:
   * it is freed, not reused, once a window is wanted again, and a new one's room is checked. Small
   * exchanges meanwhile go as messages and leave its pages to their thread (the write that follows
   * a partitioned run's combining asks a few such questions at once). */
  const gboolean given_back = knnwb_shared.spent;
  const size_t usable = given_back ? 0 : knnwb_shared.capacity;
  /* [largest need, no room anywhere] */
  int64_t agreed[2] = {(int64_t)need, 0};
  const gboolean grow = need > usable;
  agreed[1] = grow && !knnwb_shared_room(need) ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, agreed, 2, MPI_INT64_T, MPI_MAX, knnwb_shared.comm);
  const size_t largest = (size_t)agreed[0];
  if (largest == 0 || (knnwb_shared.use == KNNWB_SHARED_AUTO && largest < KNNWB_SHARED_WINDOW_MIN))
    return FALSE;
  if (given_back)
    knnwb_shared_window_free();
  if (largest <= knnwb_shared.capacity)
    return TRUE;
  if (agreed[1] != 0)
    return FALSE;
  knnwb_shared_window_free();
  char *base = NULL;
  MPI_Info info;
  MPI_Info_create(&info);
  /* Each rank's part on its own pages: the copies of different ranks never share a page. */
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  int status = MPI_Win_allocate_shared((MPI_Aint)largest, 1, info, knnwb_shared.comm, &base,
                                       &knnwb_shared.window);
  MPI_Info_free(&info);
  if (status != MPI_SUCCESS)
    return FALSE; /* not reached: the default error handler ends the job */
  knnwb_shared.capacity = largest;
  for (int r = 0; r < knnwb_shared.ranks; r++) {
    MPI_Aint size = 0;
    int unit = 1;
    MPI_Win_shared_query(knnwb_shared.window, r, &size, &unit, &knnwb_shared.bases[r]);
  }
  /* One passive epoch for the window's life; MPI_Win_sync + barrier order the copies. */
  MPI_Win_lock_all(MPI_MODE_NOCHECK, knnwb_shared.window);
  return TRUE;
}

/* A barrier whose waiting rank sleeps between polls: nothing moves through it, and a rank that
 * waits (for one slowed by other work, or for the last chunk of a pair) must not spin on a core
 * the others need (Open MPI's MPI_Barrier polls without pause: a 2-rank run on the 2-core VM
 * under load used 0.2-0.3 s more CPU). */
static void knnwb_shared_barrier(void)
{
  MPI_Request request;
  int done = 0;
  MPI_Ibarrier(knnwb_shared.comm, &request);
  MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  while (!done) {
    g_usleep(100);
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  }
}

/* After the copies into the window: every rank's copies are visible to every other. */
static void knnwb_shared_publish(void)
{
  MPI_Win_sync(knnwb_shared.window);
  knnwb_shared_barrier();
  MPI_Win_sync(knnwb_shared.window);
}

/* This rank's part of the window, whole pages only: [*start, *start + *bytes). */
static void knnwb_shared_own_pages(char **start, size_t *bytes)
{
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  const uintptr_t base = (uintptr_t)knnwb_shared.bases[knnwb_shared.me];
  const uintptr_t first = (base + page - 1) / page * page;
  const uintptr_t end = (base + knnwb_shared.capacity) / page * page;
  *start = (char *)first;
  *bytes = end > first ? (size_t)(end - first) : 0;
}

/* The helper thread: this rank's part's pages after its first (given back already, and more than
 * one: knnwb_shared_give_back_started) back to the system (MADV_REMOVE punches them out of the
 * window's shared file, whatever maps it). */
static gpointer knnwb_shared_give_pages(gpointer data)
{
  (void)data;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char *start;
  size_t bytes;
  knnwb_shared_own_pages(&start, &bytes);
  (void)madvise(start + page, bytes - page, MADV_REMOVE);
  return NULL;
}

/* Collective: whether every rank can give its part's pages back on a thread (its first page given
 * back at once, which tells whether the window's file lets it), and then the thread started. */
static gboolean knnwb_shared_give_back_started(void)
{
#ifdef MADV_REMOVE
  char *start;
  size_t bytes;
  knnwb_shared_own_pages(&start, &bytes);
  int given = bytes > (size_t)sysconf(_SC_PAGESIZE) &&
              madvise(start, (size_t)sysconf(_SC_PAGESIZE), MADV_REMOVE) == 0;
  MPI_Allreduce(MPI_IN_PLACE, &given, 1, MPI_INT, MPI_MIN, knnwb_shared.comm);
  if (given)
    knnwb_shared.giving = g_thread_try_new("knnwb-shm-give", knnwb_shared_give_pages, NULL, NULL);
  g_debug("knnwb: shared blocks: this rank's %zu MiB %s", bytes >> 20,
          given ? "given back on a thread" : "given back with the window");
  /* (a rank without a thread gives its pages back when the window is freed, as without this) */
  return given;
#else
  return FALSE;
#endif
}

/* After the copies out of the window: nobody reads it any more; large windows, and any lent one
 * (KNNWB_SHARED_WINDOW_KEEP), go back. Their pages are given back on a thread of each rank while
 * the caller goes on (the window is freed at the next acquire or at the end, its pages gone by
 * then): freeing 3.6 GB of pages (10M rows, k = 30, two ranks) took the rank whose MPI_Win_free
 * came last 0.35 s, which the other rank then waited for at the write. Collective (lent alike on
 * every rank). */
static void knnwb_shared_release(gboolean lent)
{
  knnwb_shared_barrier();
  if (knnwb_shared.capacity <= KNNWB_SHARED_WINDOW_KEEP && !lent)
    return;
  if (knnwb_shared_give_back_started())
    knnwb_shared.spent = TRUE;
  else
    knnwb_shared_window_free();
}

typedef struct {
  char *const *to;
  const char *const *from;
  const size_t *bytes;
  size_t count;
  size_t total, pieces;
} KnnwbSharedCopy;

typedef struct {
  const KnnwbSharedCopy *copy;
  size_t piece;
} KnnwbSharedCopyPart;

/* Piece p of the concatenation of every block: [total * p / pieces, total * (p + 1) / pieces). */
static gpointer knnwb_shared_copy_part(gpointer user)
{
  const KnnwbSharedCopyPart *part = user;
  const KnnwbSharedCopy *c = part->copy;
  size_t begin = c->total * part->piece / c->pieces, end = c->total * (part->piece + 1) / c->pieces;
  size_t at = 0;
  for (size_t b = 0; b < c->count && at < end; at += c->bytes[b], b++) {
    const size_t lo = MAX(begin, at), hi = MIN(end, at + c->bytes[b]);
    if (lo < hi)
      memcpy(c->to[b] + (lo - at), c->from[b] + (lo - at), hi - lo);
  }
  return NULL;
}

/* Copies count blocks, split evenly over the rank's threads (large copies only). */
static void knnwb_shared_copy(char *const *to, const char *const *from, const size_t *bytes,
                              size_t count)
{
  KnnwbSharedCopy c = {to, from, bytes, count, 0, 1};
  for (size_t b = 0; b < count; b++)
    c.total += bytes[b];
  c.pieces = MIN((size_t)knnwb_shared.threads, MAX((size_t)1, c.total / KNNWB_SHARED_COPY_PIECE));
  g_autofree KnnwbSharedCopyPart *parts = g_new(KnnwbSharedCopyPart, c.pieces);
  g_autofree GThread **threads = g_new0(GThread *, c.pieces);
  for (size_t p = 0; p < c.pieces; p++) {
    parts[p] = (KnnwbSharedCopyPart){&c, p};
    /* A thread that cannot start leaves its piece to this one. */
    if (p > 0)
      threads[p] = g_thread_try_new("knnwb-copy", knnwb_shared_copy_part, &parts[p], NULL);
  }
  knnwb_shared_copy_part(&parts[0]);
  for (size_t p = 1; p < c.pieces; p++) {
    if (threads[p] != NULL)
      g_thread_join(threads[p]);
    else
      knnwb_shared_copy_part(&parts[p]);
  }
}

gboolean knnwb_distributed_shared_begin(size_t bytes, void **blocks)
{
  if (knnwb_shared.lent || !knnwb_shared_acquire(bytes))
    return FALSE;
  knnwb_shared.lent = TRUE;
  for (int r = 0; r < knnwb_shared.ranks; r++)
    blocks[r] = knnwb_shared.bases[r];
  return TRUE;
}

void knnwb_distributed_shared_sync(void)
{
  knnwb_shared_publish();
}

void knnwb_distributed_shared_end(void)
{
  knnwb_shared.lent = FALSE;
  knnwb_shared_release(TRUE);
}

gboolean knnwb_distributed_shared_exchange(const void *const *send, const size_t *send_bytes,
                                           void *const *receive, const size_t *receive_bytes)
{
  const int ranks = knnwb_shared.ranks, me = knnwb_shared.me;
  if (knnwb_shared.use == KNNWB_SHARED_OFF)
    return FALSE;
  /* This rank's part holds its messages in rank order; the receivers learn their offsets. */
  g_autofree uint64_t *offset_out = g_new0(uint64_t, ranks);
  g_autofree uint64_t *offset_in = g_new0(uint64_t, ranks);
  size_t need = 0;
  for (int r = 0; r < ranks; r++) {
    offset_out[r] = need;
    if (r != me)
      need += send_bytes[r];
  }
  /* While the caller holds the window (share_begin), its small exchanges go as messages. */
  if (knnwb_shared.use == KNNWB_SHARED_OFF || knnwb_shared.lent || !knnwb_shared_acquire(need))
    return FALSE;
  MPI_Alltoall(offset_out, 1, MPI_UINT64_T, offset_in, 1, MPI_UINT64_T, knnwb_shared.comm);
  g_autofree char **to = g_new0(char *, ranks);
  g_autofree const char **from = g_new0(const char *, ranks);
  g_autofree size_t *bytes = g_new0(size_t, ranks);
  size_t count = 0;
  for (int r = 0; r < ranks; r++)
    if (r != me && send_bytes[r] > 0) {
      to[count] = knnwb_shared.bases[me] + offset_out[r];
      from[count] = send[r];
      bytes[count++] = send_bytes[r];
    }
  knnwb_shared_copy(to, from, bytes, count);
  knnwb_shared_publish();
  count = 0;
  for (int r = 0; r < ranks; r++)
    if (r != me && receive_bytes[r] > 0) {
      to[count] = receive[r];
      from[count] = knnwb_shared.bases[r] + offset_in[r];
      bytes[count++] = receive_bytes[r];
    }
  if (send_bytes[me] > 0)
    memmove(receive[me], send[me], MIN(send_bytes[me], receive_bytes[me]));
  knnwb_shared_copy(to, from, bytes, count);
  knnwb_shared_release(FALSE);
  return TRUE;
}

/* Values a thread of the reduction combines at least (the threshold rounds' 1.5 M stay on one or
 * two; the partitioned search's k-th distances, 10 M at 10,000,000 rows, take every thread). */
#define KNNWB_SHARED_REDUCE_PIECE ((size_t)1 << 20)

typedef struct {
  int64_t *values;
  KnnwbGroupReduction reduction;
  const int64_t *other;
} KnnwbSharedReduce;

static void knnwb_shared_reduce_part(size_t first, size_t last, void *data)
{
  const KnnwbSharedReduce *x = data;
  int64_t *values = x->values;
  const int64_t *other = x->other;
  switch (x->reduction) {
  case KNNWB_GROUP_MIN:
    for (size_t i = first; i < last; i++)
      values[i] = MIN(values[i], other[i]);
    break;
  case KNNWB_GROUP_MAX:
    for (size_t i = first; i < last; i++)
      values[i] = MAX(values[i], other[i]);
    break;
  default:
    for (size_t i = first; i < last; i++)
      values[i] = (int64_t)((uint64_t)values[i] + (uint64_t)other[i]);
  }
}

gboolean knnwb_distributed_shared_reduce(int64_t *values, size_t count,
                                         KnnwbGroupReduction reduction)
{
  const int ranks = knnwb_shared.ranks, me = knnwb_shared.me;
  if (knnwb_shared.use == KNNWB_SHARED_OFF || knnwb_shared.lent ||
      !knnwb_shared_acquire(count * sizeof(int64_t)))
    return FALSE;
  char *to = knnwb_shared.bases[me];
  const char *from = (const char *)values;
  const size_t bytes = count * sizeof(int64_t);
  knnwb_shared_copy(&to, &from, &bytes, 1);
  knnwb_shared_publish();
  /* Every rank combines all parts in rank order: the same result everywhere (int64 is exact). */
  KnnwbSharedReduce x = {values, reduction, NULL};
  for (int r = 0; r < ranks; r++) {
    if (r == me)
      continue;
    x.other = (const int64_t *)(void *)knnwb_shared.bases[r];
    knnwb_parallel_for(knnwb_shared.threads, count, KNNWB_SHARED_REDUCE_PIECE,
                       knnwb_shared_reduce_part, &x);
  }
  knnwb_shared_release(FALSE);
  return TRUE;
}
