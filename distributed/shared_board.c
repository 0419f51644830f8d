/*
 * A board of bounds in shared memory for ranks of one host (the group's board_open/lower/close):
 * each rank owns n floats of an MPI-3 shared window and posts its upper bounds there, and reads the
 * other ranks' without waiting for them. Why: the threshold rounds of a GPU self job shared by
 * ranks were collective reductions, twelve a run, and each cost 30-35 ms (two barriers, while the
 * rank's GPU sat idle after a drained stream): 0.37-0.41 s of the 1.6 s tile loop of each of two
 * ranks at 1,533,876 x 295 on two H200s. A bound another rank
 * posted stays valid whenever it is read (that rank's lists hold kc pairs at most that far, and
 * only get better), so no rank needs to wait for one. Entries are written and read whole (aligned
 * floats); MPI_Win_sync orders each rank's posts and reads against the window.
 */
#include <math.h>
#include <string.h>
#include <mpi.h>
#include "distributed_internal.h"

static struct {
  MPI_Win window; /* MPI_WIN_NULL: no board */
  MPI_Comm comm;
  int ranks, me;
  size_t n;
  float **parts; /* every rank's entries */
} knnwb_board = {MPI_WIN_NULL, MPI_COMM_NULL, 0, 0, 0, NULL};

/* KNNWB_MPI_BOARD=0: the ranks reduce their bounds in collective rounds on one host too (to
 * measure); the ranks agree on it, like on the room. */
static gboolean knnwb_board_wanted(void)
{
  const char *v = g_getenv("KNNWB_MPI_BOARD");
  return v == NULL || strcmp(v, "0") != 0;
}

gboolean knnwb_distributed_board_open(size_t n)
{
  gboolean room = FALSE;
  MPI_Comm comm = knnwb_distributed_shared_comm(n * sizeof(float), &room);
  if (comm == MPI_COMM_NULL) /* alike on every rank */
    return FALSE;
  /* Every rank takes part in the agreement, whatever it found here, so that all return alike. */
  int all_room = room && n > 0 && knnwb_board_wanted() && knnwb_board.window == MPI_WIN_NULL;
  MPI_Allreduce(MPI_IN_PLACE, &all_room, 1, MPI_INT, MPI_MIN, comm);
  if (!all_room)
    return FALSE;
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  float *mine = NULL;
  const int status = MPI_Win_allocate_shared((MPI_Aint)(n * sizeof(float)), sizeof(float), info,
                                             comm, &mine, &knnwb_board.window);
  MPI_Info_free(&info);
  if (status != MPI_SUCCESS)
    return FALSE; /* not reached: the default error handler ends the job */
  MPI_Comm_size(comm, &knnwb_board.ranks);
  MPI_Comm_rank(comm, &knnwb_board.me);
  knnwb_board.comm = comm;
  knnwb_board.n = n;
  knnwb_board.parts = g_new0(float *, knnwb_board.ranks);
  for (int r = 0; r < knnwb_board.ranks; r++) {
    MPI_Aint size = 0;
    int unit = 1;
    MPI_Win_shared_query(knnwb_board.window, r, &size, &unit, &knnwb_board.parts[r]);
  }
  for (size_t i = 0; i < n; i++)
    mine[i] = INFINITY;
  /* One passive epoch for the board's life; every rank's +inf is in place before anyone reads. */
  MPI_Win_lock_all(MPI_MODE_NOCHECK, knnwb_board.window);
  MPI_Win_sync(knnwb_board.window);
  MPI_Barrier(comm);
  return TRUE;
}

size_t knnwb_distributed_board_lower(float *values, size_t n)
{
  if (knnwb_board.window == MPI_WIN_NULL || n != knnwb_board.n)
    return 0;
  /* Plain, branch-free loops (the compiler's vector code): an aligned 4-byte entry is written and
   * read whole by the processor's loads and stores of any width, and each entry is read once.
   * With a branch per entry a round took 10 ms at 1.5 M rows (bounds below the posted one about
   * half the time: a mispredicted branch each other entry). */
  float *mine = knnwb_board.parts[knnwb_board.me];
  for (size_t i = 0; i < n; i++)
    mine[i] = values[i] < mine[i] ? values[i] : mine[i];
  MPI_Win_sync(knnwb_board.window);
  for (int r = 0; r < knnwb_board.ranks; r++) {
    if (r == knnwb_board.me)
      continue;
    const float *theirs = knnwb_board.parts[r];
    for (size_t i = 0; i < n; i++) {
      const float other = theirs[i];
      values[i] = other < values[i] ? other : values[i];
    }
  }
  /* what went down below this rank's own post (the value it came with) */
  size_t lowered = 0;
  for (size_t i = 0; i < n; i++)
    lowered += values[i] < mine[i];
  return lowered;
}

void knnwb_distributed_board_close(void)
{
  if (knnwb_board.window == MPI_WIN_NULL)
    return;
  MPI_Win_unlock_all(knnwb_board.window);
  MPI_Win_free(&knnwb_board.window); /* collective: waits until no rank reads it */
  knnwb_board.window = MPI_WIN_NULL;
  knnwb_board.comm = MPI_COMM_NULL;
  g_clear_pointer(&knnwb_board.parts, g_free);
  knnwb_board.n = 0;
}
