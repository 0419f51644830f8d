/* What an MPI launcher tells a process before it joins the job: its environment. Built with and
 * without MPI, so that a build without it can still tell that it was started as one of several
 * ranks, and a run that asks only for help need not join. */
#include <stdlib.h>
#include <knnwb/distributed.h>

/* The first of names set in the environment, or NULL: Open MPI's, then PMIx's, then MPICH's and
 * Slurm's PMI. */
static const char *knnwb_distributed_launch_getenv(const char *const names[3])
{
  for (int i = 0; i < 3; i++) {
    const char *value = g_getenv(names[i]);
    if (value != NULL && *value != '\0')
      return value;
  }
  return NULL;
}

int knnwb_distributed_launch_rank(void)
{
  static const char *const names[3] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
  const char *rank = knnwb_distributed_launch_getenv(names);
  return rank != NULL ? atoi(rank) : -1;
}

int knnwb_distributed_launch_size(void)
{
  static const char *const names[3] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"};
  const char *size = knnwb_distributed_launch_getenv(names);
  return size != NULL ? atoi(size) : 0;
}
