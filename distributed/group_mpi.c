/*
 * The MPI side of a group: joining the job, and the three collective operations core's
 * KnnwbKnnGroup asks for (agree on success or the first failure, all-to-all of byte blocks,
 * reductions). Only the calling thread talks MPI (MPI_THREAD_FUNNELED): core calls the group from
 * the thread that called it, never from its worker threads.
 */
#include <limits.h>
#include <sched.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include <knnwb/distributed.h>
#include <knnwb/error.h>
#include "distributed_internal.h"

/* Messages larger than this go in pieces: MPI counts are int. */
#define KNNWB_DISTRIBUTED_PIECE ((size_t)1 << 30)

static KnnwbKnnGroup knnwb_distributed_group;
static MPI_Comm knnwb_distributed_comm = MPI_COMM_NULL;
static gboolean knnwb_distributed_joined;

MPI_Comm knnwb_distributed_communicator(void)
{
  return knnwb_distributed_comm;
}

/* The environment variables that Open MPI's, MPICH's and PMIx launchers set in every rank. */
static gboolean knnwb_distributed_launched(void)
{
  const char *choice = g_getenv("KNNWB_MPI");
  if (choice != NULL && strcmp(choice, "0") == 0)
    return FALSE;
  return knnwb_distributed_launch_size() > 0 || knnwb_distributed_launch_rank() >= 0;
}

/* An error that agree() already made the job's carries the failing rank in front: keep it as is. */
static gboolean knnwb_distributed_has_rank_prefix(const char *message)
{
  if (!g_str_has_prefix(message, "rank "))
    return FALSE;
  const char *p = message + 5;
  if (!g_ascii_isdigit(*p))
    return FALSE;
  while (g_ascii_isdigit(*p))
    p++;
  return g_str_has_prefix(p, ": ");
}

/* Waits for a request without spinning: a rank that finished its share early (or waits for the
 * lowest rank's message) must not take a core from the ranks still computing on the same host. */
static void knnwb_distributed_wait(MPI_Request *request)
{
  int done = 0;
  MPI_Test(request, &done, MPI_STATUS_IGNORE);
  while (!done) {
    g_usleep(200);
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
  }
}

/* Waits for transfers between ranks that are all here (an exchange follows an agree): the shared-
 * memory transport moves a large message only while both sides call into MPI, so a sleeping poll
 * would cap the bandwidth (a 200 us nap per few fragments). Yielding keeps the copies going at
 * full speed on idle cores and still hands the core over when ranks outnumber cores. */
static void knnwb_distributed_wait_transfers(MPI_Request *requests, int count)
{
  int done = 0;
  MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
  while (!done) {
    sched_yield();
    MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
  }
}

static gboolean knnwb_distributed_agree(const KnnwbKnnGroup *group, gboolean ok, GError **error)
{
  int mine = ok ? INT_MAX : group->rank, lowest = INT_MAX;
  MPI_Request request;
  MPI_Iallreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, knnwb_distributed_comm, &request);
  knnwb_distributed_wait(&request);
  if (lowest == INT_MAX)
    return TRUE;
  /* The lowest failing rank sends its error: domain name, code, message. */
  g_autofree char *packed = NULL;
  int length = 0;
  if (group->rank == lowest) {
    const GError *own = error != NULL ? *error : NULL;
    const char *domain = own ? g_quark_to_string(own->domain) : g_quark_to_string(KNNWB_ERROR);
    const char *message = own ? own->message : "failed without a message";
    g_autofree char *text = knnwb_distributed_has_rank_prefix(message)
                                ? g_strdup(message)
                                : g_strdup_printf("rank %d: %s", lowest, message);
    g_autofree char *code = g_strdup_printf("%d", own ? own->code : KNNWB_ERROR_FAILED);
    size_t total = strlen(domain) + 1 + strlen(code) + 1 + strlen(text) + 1;
    packed = g_malloc(total);
    char *p = packed;
    for (const char *part[] = {domain, code, text}, **q = part; q < part + 3; q++) {
      size_t n = strlen(*q) + 1;
      memcpy(p, *q, n);
      p += n;
    }
    length = (int)MIN(total, (size_t)INT_MAX);
  }
  MPI_Bcast(&length, 1, MPI_INT, lowest, knnwb_distributed_comm);
  if (group->rank != lowest)
    packed = g_malloc0((size_t)length + 1);
  MPI_Bcast(packed, length, MPI_CHAR, lowest, knnwb_distributed_comm);
  const char *domain = packed;
  const char *code = domain + strlen(domain) + 1;
  const char *text = code + strlen(code) + 1;
  if (error != NULL) {
    g_clear_error(error);
    g_set_error_literal(error, g_quark_from_string(domain), atoi(code), text);
  }
  return FALSE;
}

static gboolean knnwb_distributed_exchange(const KnnwbKnnGroup *group, const void *const *send,
                                           const size_t *send_bytes, void *const *receive,
                                           const size_t *receive_bytes, GError **error)
{
  (void)error; /* MPI's default handler ends the job on transport errors */
  const int ranks = group->size, me = group->rank;
  if (knnwb_distributed_shared_exchange(send, send_bytes, receive, receive_bytes))
    return TRUE;
  size_t n_requests = 0;
  for (int r = 0; r < ranks; r++)
    if (r != me)
      n_requests += (send_bytes[r] + KNNWB_DISTRIBUTED_PIECE - 1) / KNNWB_DISTRIBUTED_PIECE +
                    (receive_bytes[r] + KNNWB_DISTRIBUTED_PIECE - 1) / KNNWB_DISTRIBUTED_PIECE;
  MPI_Request *requests = g_new(MPI_Request, MAX(n_requests, (size_t)1));
  size_t used = 0;
  for (int r = 0; r < ranks; r++) {
    if (r == me)
      continue;
    for (size_t at = 0, piece = 0; at < receive_bytes[r]; at += KNNWB_DISTRIBUTED_PIECE, piece++)
      MPI_Irecv((char *)receive[r] + at, (int)MIN(KNNWB_DISTRIBUTED_PIECE, receive_bytes[r] - at),
                MPI_BYTE, r, (int)piece, knnwb_distributed_comm, &requests[used++]);
  }
  for (int r = 0; r < ranks; r++) {
    if (r == me)
      continue;
    for (size_t at = 0, piece = 0; at < send_bytes[r]; at += KNNWB_DISTRIBUTED_PIECE, piece++)
      MPI_Isend((const char *)send[r] + at, (int)MIN(KNNWB_DISTRIBUTED_PIECE, send_bytes[r] - at),
                MPI_BYTE, r, (int)piece, knnwb_distributed_comm, &requests[used++]);
  }
  if (send_bytes[me] > 0)
    memmove(receive[me], send[me], MIN(send_bytes[me], receive_bytes[me]));
  knnwb_distributed_wait_transfers(requests, (int)used);
  g_free(requests);
  return TRUE;
}

static gboolean knnwb_distributed_reduce(const KnnwbKnnGroup *group, int64_t *values, size_t count,
                                         KnnwbGroupReduction reduction, GError **error)
{
  (void)group;
  (void)error;
  if (knnwb_distributed_shared_reduce(values, count, reduction))
    return TRUE;
  MPI_Op op = reduction == KNNWB_GROUP_MIN   ? MPI_MIN
              : reduction == KNNWB_GROUP_MAX ? MPI_MAX
                                             : MPI_SUM;
  MPI_Allreduce(MPI_IN_PLACE, values, (int)count, MPI_INT64_T, op, knnwb_distributed_comm);
  return TRUE;
}

static gboolean knnwb_distributed_share_begin(const KnnwbKnnGroup *group, size_t bytes,
                                              void **blocks, GError **error)
{
  (void)group;
  (void)error;
  return knnwb_distributed_shared_begin(bytes, blocks);
}

static gboolean knnwb_distributed_share_sync(const KnnwbKnnGroup *group, GError **error)
{
  (void)group;
  (void)error;
  knnwb_distributed_shared_sync();
  return TRUE;
}

static gboolean knnwb_distributed_share_end(const KnnwbKnnGroup *group, GError **error)
{
  (void)group;
  (void)error;
  knnwb_distributed_shared_end();
  return TRUE;
}

static gboolean knnwb_distributed_group_board_open(const KnnwbKnnGroup *group, size_t n,
                                                   GError **error)
{
  (void)group;
  (void)error;
  return knnwb_distributed_board_open(n);
}

static size_t knnwb_distributed_group_board_lower(const KnnwbKnnGroup *group, float *values,
                                                  size_t n)
{
  (void)group;
  return knnwb_distributed_board_lower(values, n);
}

static gboolean knnwb_distributed_group_board_close(const KnnwbKnnGroup *group, GError **error)
{
  (void)group;
  (void)error;
  knnwb_distributed_board_close();
  return TRUE;
}

/*
 * A rank runs its share as a row of jobs (step 0, the pair's chunks, the lists going back, the
 * re-selection), each allocating candidate lists, tiles and screen copies of 1-30 MB and freeing
 * them at its end. glibc's defaults serve most of those with fresh mmaps (or trim them off the
 * heap's top) and give them back to the kernel, so every job faults its buffers in again and the
 * kernel clears each page anew: on the 2-core VM the 2-rank job of the MPI CPU scaling check
 * (40,000 x 128, k = 20, BF16 screen) took 130,000 page faults and 0.33-0.40 s of system time
 * against 54,000 and 0.16-0.19 s for one process with two threads. Blocks up to 32 MB (glibc's
 * largest mmap threshold) from the heap, and up to 64 MB of free heap top kept: 70,000 faults,
 * 0.22-0.30 s. The memory stays the process's until a later allocation reuses it or the rank exits
 * (a rank's job is its whole life); the peak is unchanged. A user's own GLIBC_TUNABLES for malloc
 * is kept.
 */
static void knnwb_distributed_keep_freed_memory(void)
{
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
  const char *tunables = g_getenv("GLIBC_TUNABLES");
  if (tunables != NULL && strstr(tunables, "glibc.malloc.") != NULL)
    return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

/* Knobs each rank may hold for itself: KNNWB_MPI decides before MPI starts whether the process
 * joins at all, KNNWB_MPI_VERBOSE only whether the rank's own output is shown. */
static gboolean knnwb_distributed_own_knob(const char *name)
{
  return !g_str_has_prefix(name, "KNNWB_") || strcmp(name, "KNNWB_MPI") == 0 ||
         strcmp(name, "KNNWB_MPI_VERBOSE") == 0;
}

/* Rank 0's KNNWB_* knobs as "NAME=VALUE" strings one after another, each ended by a NUL. */
static GString *knnwb_distributed_knobs_pack(void)
{
  GString *packed = g_string_new(NULL);
  g_auto(GStrv) names = g_listenv();
  for (char **name = names; *name != NULL; name++)
    if (!knnwb_distributed_own_knob(*name)) {
      g_string_append_printf(packed, "%s=%s", *name, g_getenv(*name));
      g_string_append_c(packed, '\0');
    }
  return packed;
}

/*
 * Every rank takes rank 0's KNNWB_* environment (knnwb_distributed_own_knob aside): the knobs
 * choose collective paths (KNNWB_MPI_SHARED: a shared window or messages; KNNWB_PARTITION: the
 * partitioned search; test hooks that pause or fail a rank), and ranks started with different
 * environments (an MPMD launch, `mpirun -np 1 env X=1 knnwb ... : -np 1 knnwb ...`, or hosts whose
 * shells set different values) would call different collectives and wait for each other for
 * ever, or mismatch and abort. Rank 0 warns once, naming the lowest rank that differed. Collective;
 * before any other thread of knnwb's exists (g_setenv). O(size of the environment).
 */
static void knnwb_distributed_knobs_common(const KnnwbKnnGroup *group)
{
  MPI_Comm comm = knnwb_distributed_comm;
  g_autoptr(GString) packed =
      group->rank == 0 ? knnwb_distributed_knobs_pack() : g_string_new(NULL);
  int length = (int)packed->len;
  MPI_Bcast(&length, 1, MPI_INT, 0, comm);
  g_string_set_size(packed, (gsize)length);
  MPI_Bcast(packed->str, length, MPI_CHAR, 0, comm);
  g_autoptr(GString) differ = g_string_new(NULL);
  if (group->rank != 0) {
    g_autoptr(GHashTable) root = g_hash_table_new(g_str_hash, g_str_equal);
    for (char *entry = packed->str, *next; entry < packed->str + packed->len; entry = next) {
      next = entry + strlen(entry) + 1;
      char *equals = strchr(entry, '=');
      *equals = '\0'; /* the name ends there, its value follows */
      g_hash_table_insert(root, entry, equals + 1);
    }
    g_auto(GStrv) names = g_listenv();
    for (char **name = names; *name != NULL; name++)
      if (!knnwb_distributed_own_knob(*name) && !g_hash_table_contains(root, *name)) {
        g_string_append_printf(differ, "%s%s='%s' here, unset on rank 0", differ->len ? ", " : "",
                               *name, g_getenv(*name));
        g_unsetenv(*name);
      }
    GHashTableIter at;
    gpointer name, value;
    g_hash_table_iter_init(&at, root);
    while (g_hash_table_iter_next(&at, &name, &value)) {
      const char *mine = g_getenv(name);
      if (g_strcmp0(mine, value) == 0)
        continue;
      if (mine != NULL)
        g_string_append_printf(differ, "%s%s='%s' here, '%s' on rank 0", differ->len ? ", " : "",
                               (const char *)name, mine, (const char *)value);
      else
        g_string_append_printf(differ, "%s%s unset here, '%s' on rank 0", differ->len ? ", " : "",
                               (const char *)name, (const char *)value);
      g_setenv(name, value, TRUE);
    }
  }
  /* The ranks' one agreement: the lowest rank that differed tells rank 0 how. */
  g_autoptr(GError) note = NULL;
  if (differ->len > 0)
    g_set_error_literal(&note, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, differ->str);
  if (!group->agree(group, differ->len == 0, &note) && group->rank == 0)
    g_warning("the ranks' KNNWB_* environments differ (%s): every rank uses rank 0's values",
              note->message);
}

gboolean knnwb_distributed_init(int *argc, char ***argv, const KnnwbKnnGroup **group,
                                GError **error)
{
  *group = NULL;
  if (knnwb_distributed_joined || !knnwb_distributed_launched())
    return TRUE;
  /* Every rank on this host (Open MPI's launcher says so before MPI starts): ranks talk through
   * shared memory only, and Open MPI's default probing of the UCX messaging layer at MPI_Init
   * costs about 0.2 s of a run's start (the MPI CPU scaling check: 0.35 s -> 0.15 s for a small
   * job). Ranks that mpirun does not bind (--bind-to none) also build their own hwloc topology in
   * MPI_Init, I/O devices included (PCI configuration space, block and network devices: slow in a
   * VM), which only tells which network card or GPU is near which core; shared memory needs none
   * of that (MPI_Init 43 -> 28 ms wall, 24 -> 15 ms CPU a rank on the 2-core VM). A choice of
   * the user's (--mca pml, OMPI_MCA_pml, HWLOC_COMPONENTS) is kept. */
  const char *world_ranks = g_getenv("OMPI_COMM_WORLD_SIZE");
  const char *local_ranks = g_getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (world_ranks != NULL && local_ranks != NULL && strcmp(world_ranks, local_ranks) == 0) {
    g_setenv("OMPI_MCA_pml", "ob1", FALSE);
    g_setenv("HWLOC_COMPONENTS", "-pci,-linuxio", FALSE);
  }
  knnwb_distributed_keep_freed_memory();
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "MPI_Init_thread failed");
    return FALSE;
  }
  knnwb_distributed_joined = TRUE;
  MPI_Comm_dup(MPI_COMM_WORLD, &knnwb_distributed_comm);
  int rank = 0, size = 1, local_size = 1, local_rank = 0;
  MPI_Comm_rank(knnwb_distributed_comm, &rank);
  MPI_Comm_size(knnwb_distributed_comm, &size);
  MPI_Comm local;
  MPI_Comm_split_type(knnwb_distributed_comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &local_size);
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_free(&local);
  knnwb_distributed_group = (KnnwbKnnGroup){.rank = rank,
                                            .size = size,
                                            .local_size = local_size,
                                            .local_rank = local_rank,
                                            .agree = knnwb_distributed_agree,
                                            .exchange = knnwb_distributed_exchange,
                                            .reduce = knnwb_distributed_reduce,
                                            .share_begin = knnwb_distributed_share_begin,
                                            .share_sync = knnwb_distributed_share_sync,
                                            .share_end = knnwb_distributed_share_end,
                                            .board_open = knnwb_distributed_group_board_open,
                                            .board_lower = knnwb_distributed_group_board_lower,
                                            .board_close = knnwb_distributed_group_board_close};
  /* The knobs are made common first: the shared window's set-up reads one. */
  if (size > 1)
    knnwb_distributed_knobs_common(&knnwb_distributed_group);
  knnwb_distributed_shared_init(knnwb_distributed_comm, local_size);
  if (size > 1) {
    knnwb_distributed_stop_open(knnwb_distributed_comm);
    *group = &knnwb_distributed_group;
  }
  return TRUE;
}

void knnwb_distributed_finalize(void)
{
  if (!knnwb_distributed_joined)
    return;
  knnwb_distributed_board_close();
  knnwb_distributed_stop_close();
  knnwb_distributed_shared_finalize();
  MPI_Comm_free(&knnwb_distributed_comm);
  MPI_Finalize();
  knnwb_distributed_joined = FALSE;
}
