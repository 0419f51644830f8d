/* What an MPI launcher tells a process before it joins the job: its environment. Built with and
 * without MPI, so that a build without it can still tell that it was started as one of several
 * ranks, and a run that asks only for help need not join. */
#include <stdlib.h>
#include <knnwb/distributed.h>

/* The first of names (NULL-terminated) set in the environment, or NULL. */
static const char *knnwb_distributed_launch_getenv(const char *const *names)
{
  for (; *names != NULL; names++) {
    const char *value = g_getenv(*names);
    if (value != NULL && *value != '\0')
      return value;
  }
  return NULL;
}

int knnwb_distributed_launch_rank(void)
{
  /* Open MPI's, PMIx's (Slurm's srun --mpi=pmix too), then MPICH's and Intel MPI's PMI */
  static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", NULL};
  const char *rank = knnwb_distributed_launch_getenv(names);
  return rank != NULL ? atoi(rank) : -1;
}

int knnwb_distributed_launch_size(void)
{
  /* PMIx sets no size in the environment: there only a rank above 0 tells */
  static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
  const char *size = knnwb_distributed_launch_getenv(names);
  return size != NULL ? atoi(size) : 0;
}
