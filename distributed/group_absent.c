/* A build without MPI: alone is fine; a launch as one of several ranks is refused, since every
 * rank would otherwise compute (and write) the whole job on its own. */
#include <stdlib.h>
#include <knnwb/distributed.h>
#include <knnwb/error.h>

gboolean knnwb_distributed_init(int *argc, char ***argv, const KnnwbKnnGroup **group,
                                GError **error)
{
  (void)argc;
  (void)argv;
  *group = NULL;
  const int size = knnwb_distributed_launch_size();
  if (size > 1 || knnwb_distributed_launch_rank() > 0) {
    g_autofree char *ranks = size > 1 ? g_strdup_printf("%d", size) : g_strdup("several");
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                "started as one of %s MPI ranks, but this knnwb was built without MPI "
                "(build with -DKNNWB_MPI=ON, or run it without mpirun)",
                ranks);
    return FALSE;
  }
  return TRUE;
}

void knnwb_distributed_finalize(void)
{
}

volatile gint *knnwb_distributed_stop_word(void)
{
  return NULL;
}

gboolean knnwb_distributed_writes_in_place(KnnwbOutputFormat format)
{
  (void)format;
  return FALSE;
}

gboolean knnwb_distributed_write_lists(const KnnwbKnnGroup *group, const char *path,
                                       KnnwbOutputFormat format, const KnnwbNeighbors *own,
                                       size_t n_rows, const char *const *labels,
                                       const KnnwbWriteControl *control, GError **error)
{
  (void)group;
  (void)format;
  (void)own;
  (void)n_rows;
  (void)labels;
  (void)control;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "%s: knnwb was built without MPI", path);
  return FALSE;
}

gboolean knnwb_distributed_write_edges(const KnnwbKnnGroup *group, const char *path,
                                       KnnwbOutputFormat format, const KnnwbEdgeList *own,
                                       size_t n_rows, const char *const *labels,
                                       const KnnwbWriteControl *control, GError **error)
{
  (void)group;
  (void)format;
  (void)own;
  (void)n_rows;
  (void)labels;
  (void)control;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "%s: knnwb was built without MPI", path);
  return FALSE;
}
