/*
 * A stop word in shared memory for the ranks of one host: a rank interrupted alone (a batch
 * system's signal to one process, `kill` of one rank) posts its signal there, and the other ranks
 * of its host read it within a tick and stop too. Without it they learnt of the stop only at their
 * next agreement, after the phase they were in: 6.7 s after a SIGINT to rank 0 alone in a
 * two-rank CPU run of the MPI tests, against 1 s for a signal to mpirun. (Ranks on other hosts
 * still learn of it at their next agreement.) One int in an MPI-3 shared window of the ranks that
 * share this host, owned by the first of them; it lives from the job's start to its end. The
 * ranks' ticker threads (plugin/host/runtime/signals.c) read and write it with atomic operations,
 * never MPI calls.
 */
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "distributed_internal.h"

static struct {
  MPI_Comm comm; /* the ranks of this host */
  MPI_Win window;
  volatile gint *word;
} knnwb_stop = {MPI_COMM_NULL, MPI_WIN_NULL, NULL};

void knnwb_distributed_stop_open(MPI_Comm comm)
{
  /* The window's directory must have a free page (or not tell): see shared_free_bytes. */
  const char *shared = g_getenv("KNNWB_MPI_SHARED");
  const double free_bytes =
      shared == NULL || strcmp(shared, "0") != 0 ? knnwb_distributed_shared_free_bytes() : 0.0;
  int ok = free_bytes < 0 || free_bytes >= 65536.0;
  MPI_Comm local = MPI_COMM_NULL;
  int me = 0, ranks = 1;
  MPI_Comm_rank(comm, &me);
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &local) != MPI_SUCCESS)
    return;
  MPI_Comm_size(local, &ranks);
  /* Every rank of the host takes part, whatever it found, so that all return alike. */
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, local);
  if (!ok || ranks < 2) {
    MPI_Comm_free(&local);
    return;
  }
  int local_rank = 0;
  MPI_Comm_rank(local, &local_rank);
  gint *mine = NULL;
  const MPI_Aint bytes = local_rank == 0 ? (MPI_Aint)sizeof(gint) : 0;
  if (MPI_Win_allocate_shared(bytes, sizeof(gint), MPI_INFO_NULL, local, &mine,
                              &knnwb_stop.window) != MPI_SUCCESS) {
    MPI_Comm_free(&local); /* not reached: the default error handler ends the job */
    return;
  }
  MPI_Aint size = 0;
  int unit = 1;
  gint *word = NULL;
  MPI_Win_shared_query(knnwb_stop.window, 0, &size, &unit, &word);
  if (local_rank == 0)
    g_atomic_int_set(word, 0);
  MPI_Barrier(local); /* the word is clear before any rank may post */
  knnwb_stop.comm = local;
  knnwb_stop.word = word;
}

volatile gint *knnwb_distributed_stop_word(void)
{
  return knnwb_stop.word;
}

void knnwb_distributed_stop_close(void)
{
  if (knnwb_stop.window != MPI_WIN_NULL)
    MPI_Win_free(&knnwb_stop.window);
  if (knnwb_stop.comm != MPI_COMM_NULL)
    MPI_Comm_free(&knnwb_stop.comm);
  knnwb_stop.word = NULL;
}
