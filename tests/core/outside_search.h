/* The nearest-outside search's test helpers, shared by the k-d tree's and the cells' host tests
 * (test_tree.c, test_partition_outside.c): the layouts of groups they run under, and the answers
 * of knnwb_outside_search_run with a path forced through the environment. */
#ifndef KNNWB_TEST_OUTSIDE_SEARCH_H
#define KNNWB_TEST_OUTSIDE_SEARCH_H

#include <math.h>
#include <glib.h>
#include <knnwb/knnwb.h>

/* Groups of a matrix's rows: 0 scattered (row % 7), 1 regions of space (bands of the first column
 * of the given width from low: whole nodes or cells of one group), 2 one large group and
 * singletons, 3 one group of every row. */
static void outside_groups(const KnnwbMatrix *m, int layout, double low, double width,
                           int32_t *group)
{
  const size_t n = m->n_rows;
  for (size_t i = 0; i < n; i++) {
    const float x = m->values[i * m->n_cols];
    group[i] = layout == 0   ? (int32_t)(i % 7)
               : layout == 1 ? (int32_t)floor((x - low) / width)
               : layout == 2 ? (i < n - n / 20 ? 0 : (int32_t)i)
                             : 3;
  }
}

/* knnwb_outside_search_run's answers for rows (every row of m, in rows' order) with the
 * environment variable knob set to value for the search's life. */
static void outside_answers(const KnnwbMatrix *m, const KnnwbKnnOptions *o, const char *knob,
                            const char *value, const int32_t *group, const int64_t *rows,
                            int64_t *index, double *distance)
{
  g_setenv(knob, value, TRUE);
  GError *error = NULL;
  KnnwbOutsideSearch *search = knnwb_outside_search_new(m, o, &error);
  g_assert_no_error(error);
  g_assert_true(knnwb_outside_search_run(search, group, rows, m->n_rows, index, distance, &error));
  g_assert_no_error(error);
  knnwb_outside_search_free(search);
  g_unsetenv(knob);
}

#endif
