/* One rank's block of an input matrix (split memory under mpirun). */
#include <string.h>
#include <knnwb/error.h>
#include "runtime/split_input.h"

gboolean knnwb_host_split_offsets(const KnnwbKnnGroup *group, size_t block_rows, size_t **first_row,
                                  GError **error)
{
  const size_t ranks = (size_t)group->size;
  g_autofree int64_t *counts = g_new0(int64_t, ranks);
  if (!knnwb_knn_group_gather_values(group, (int64_t)block_rows, counts, error))
    return FALSE;
  *first_row = g_new(size_t, ranks + 1);
  (*first_row)[0] = 0;
  for (size_t r = 0; r < ranks; r++)
    (*first_row)[r + 1] = (*first_row)[r] + (size_t)counts[r];
  return TRUE;
}

/* Every rank's labels (NUL-terminated, in rank order) of the blocks read (a text file's byte
 * ranges, an NPY file's rows), for the writers of all rows and the reader's warnings (a label
 * repeated on another rank); none when no rank has labels. Collective. */
static gboolean knnwb_host_split_gather_labels(const KnnwbKnnGroup *group,
                                               KnnwbHostSplitInput *input, GError **error)
{
  const KnnwbMatrix *block = input->block;
  int64_t any = block->row_labels != NULL;
  if (!group->reduce(group, &any, 1, KNNWB_GROUP_MAX, error))
    return FALSE;
  if (any == 0)
    return TRUE;
  g_autoptr(GString) mine = g_string_new(NULL);
  for (size_t i = 0; i < block->n_rows; i++) {
    const char *label = knnwb_matrix_row_label(block, i);
    g_string_append_len(mine, label ? label : "", (gssize)strlen(label ? label : "") + 1);
  }
  size_t total;
  if (!knnwb_knn_group_gather_packed(group, mine->str, mine->len, "row labels", &input->label_bytes,
                                     &total, error))
    return FALSE;
  input->label_index = g_try_new(char *, MAX(input->n_rows, (size_t)1));
  if (input->label_index == NULL)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot hold the %zu row labels",
                input->n_rows);
  if (!group->agree(group, input->label_index != NULL, error))
    return FALSE;
  for (size_t i = 0, at = 0; i < input->n_rows && at < total; i++) {
    input->label_index[i] = input->label_bytes + at;
    at += strlen(input->label_bytes + at) + 1;
  }
  input->labels = (const char *const *)input->label_index;
  return TRUE;
}

/* The reader's warnings (rows with missing values, repeated labels) for the rows of all blocks,
 * as one process gives them: a block read leaves them to its caller, since each rank sees only
 * its rows (counted from its block's start). Collective; rank 0 speaks. */
static gboolean knnwb_host_split_warn(const KnnwbKnnGroup *group, const char *path,
                                      const KnnwbReadOptions *options, KnnwbHostSplitInput *input,
                                      GError **error)
{
  KnnwbReadInfo info = input->info;
  int64_t dropped = (int64_t)info.n_dropped_rows;
  int64_t first_line = info.first_dropped_line > 0 ? (int64_t)info.first_dropped_line : INT64_MAX;
  int64_t tiny = (int64_t)info.n_tiny_values;
  int64_t first_tiny = info.first_tiny_line > 0 ? (int64_t)info.first_tiny_line : INT64_MAX;
  if (!group->reduce(group, &dropped, 1, KNNWB_GROUP_SUM, error) ||
      !group->reduce(group, &first_line, 1, KNNWB_GROUP_MIN, error) ||
      !group->reduce(group, &tiny, 1, KNNWB_GROUP_SUM, error) ||
      !group->reduce(group, &first_tiny, 1, KNNWB_GROUP_MIN, error))
    return FALSE;
  info.n_dropped_rows = (size_t)dropped;
  info.first_dropped_line = first_line == INT64_MAX ? 0 : (size_t)first_line;
  info.n_tiny_values = (size_t)tiny;
  info.first_tiny_line = first_tiny == INT64_MAX ? 0 : (size_t)first_tiny;
  g_autofree unsigned char *absent = NULL;
  if (dropped > 0) {
    /* One byte per row of the job, as every rank's labels already are. */
    const KnnwbMatrix *block = input->block;
    g_autofree unsigned char *mine = g_new0(unsigned char, MAX(block->n_rows, (size_t)1));
    for (size_t i = 0; i < block->n_rows; i++)
      mine[i] = knnwb_matrix_row_is_absent(block, i) ? 1 : 0;
    g_autofree int64_t *counts = g_new0(int64_t, (size_t)group->size);
    if (!knnwb_knn_group_gather_values(group, (int64_t)block->n_rows, counts, error))
      return FALSE;
    g_autofree size_t *bytes = g_new(size_t, (size_t)group->size);
    for (int r = 0; r < group->size; r++)
      bytes[r] = (size_t)counts[r];
    absent = g_try_malloc(MAX(input->n_rows, (size_t)1));
    if (!group->agree(group, absent != NULL, error))
      return FALSE;
    if (!knnwb_knn_group_gather_bytes(group, mine, bytes, absent, error))
      return FALSE;
  }
  if (group->rank == 0)
    knnwb_formats_warn_read(path, options, &info, input->n_rows, input->labels, absent);
  return TRUE;
}

/* An NPY's blocks whose rows were all left out for missing values fail as one process's read of
 * the whole file does (a block alone may hold none: the job has others). Collective. */
static gboolean knnwb_host_split_check_left(const KnnwbKnnGroup *group, const char *path,
                                            const KnnwbHostSplitInput *input, GError **error)
{
  int64_t counts[2] = {(int64_t)(input->block->n_rows - input->block->n_absent_rows),
                       (int64_t)input->info.n_dropped_rows};
  if (!group->reduce(group, counts, 2, KNNWB_GROUP_SUM, error))
    return FALSE;
  if (counts[0] > 0 || input->n_rows == 0)
    return TRUE;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
              "%s: no rows are left (%lld with missing values)", path, (long long)counts[1]);
  return FALSE;
}

gboolean knnwb_host_split_read(const KnnwbKnnGroup *group, const char *path,
                               KnnwbReadOptions *options, const volatile gint *cancel,
                               KnnwbHostSplitInput *input, GError **error)
{
  memset(input, 0, sizeof *input);
  options->block_index = group->rank;
  options->block_count = group->size;
  options->group = group; /* a whole read (the fallbacks) checks each rank's share of rows */
  KnnwbMatrix *data = NULL;
  gboolean read = knnwb_formats_read_matrix(path, options, &data, &input->info, error);
  /* Byte ranges of a text file: when any rank saw a quote, a field may span lines and a range
   * may have cut a record (perhaps the cause of an error), so every rank reads it whole. Every
   * rank takes part, whatever its read did (a rank that failed may not know the format). */
  int64_t quoted =
      input->info.block_read && input->info.format != KNNWB_INPUT_NPY && input->info.quoted;
  if (!group->reduce(group, &quoted, 1, KNNWB_GROUP_MAX, error)) {
    read = FALSE;
  } else if (quoted) {
    g_clear_error(error);
    g_clear_pointer(&data, knnwb_matrix_free);
    options->block_count = 0;
    read = knnwb_formats_read_matrix(path, options, &data, &input->info, error);
  }
  if (read && cancel != NULL && *cancel) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted");
    read = FALSE;
  }
  if (!group->agree(group, read, error)) {
    knnwb_matrix_free(data);
    return FALSE;
  }
  if (input->info.block_read && input->info.format == KNNWB_INPUT_NPY) {
    /* An NPY block: its rows, and their labels when the array has a labels file. */
    input->block = data;
    input->first_row = input->info.first_row;
    input->n_rows = input->info.total_rows;
    if (!knnwb_host_split_gather_labels(group, input, error))
      return FALSE;
    return knnwb_host_split_check_left(group, path, input, error) &&
           knnwb_host_split_warn(group, path, options, input, error);
  }
  if (input->info.block_read) {
    /* A text block: where it starts and the labels follow from the other ranks' blocks. */
    input->block = data;
    g_autofree size_t *first_row = NULL;
    if (!knnwb_host_split_offsets(group, data->n_rows, &first_row, error))
      return FALSE;
    input->first_row = first_row[group->rank];
    input->n_rows = first_row[group->size];
    if (!knnwb_host_split_gather_labels(group, input, error))
      return FALSE;
    return knnwb_host_split_warn(group, path, options, input, error);
  }
  /* Read whole (gzip, quoted or transposed text, other formats, Fortran-order NPY): a view of this
   * rank's even share, with its absent-row marks, that owns the whole matrix (searches that need
   * every row take them from it instead of from the other ranks). */
  size_t first, last;
  knnwb_knn_group_rows(data->n_rows, group->rank, group->size, &first, &last);
  input->block = knnwb_matrix_new_block_of(data, first, last - first);
  for (size_t i = first; i < last && data->n_absent_rows > 0; i++)
    if (knnwb_matrix_row_is_absent(data, i))
      knnwb_matrix_set_row_absent(input->block, i - first);
  /* spearman's ranks from the values as read, when the reader kept them: this share's. */
  const float *ranks = knnwb_matrix_row_ranks(data);
  if (ranks != NULL) {
    float *share = g_new0(float, MAX((last - first) * data->n_cols, 1));
    memcpy(share, ranks + first * data->n_cols, (last - first) * data->n_cols * sizeof(float));
    knnwb_matrix_take_row_ranks(input->block, share);
  }
  /* The samples' names, for a phenotype row matched by them. */
  for (size_t j = 0; data->col_labels != NULL && j < data->n_cols; j++)
    knnwb_matrix_set_col_label(input->block, j, data->col_labels[j]);
  input->first_row = first;
  input->n_rows = data->n_rows;
  input->labels = (const char *const *)data->row_labels;
  return TRUE;
}

gboolean knnwb_host_split_relabel(const KnnwbKnnGroup *group, KnnwbHostSplitInput *input,
                                  GError **error)
{
  g_autofree size_t *first_row = NULL;
  if (!knnwb_host_split_offsets(group, input->block->n_rows, &first_row, error))
    return FALSE;
  input->first_row = first_row[group->rank];
  input->n_rows = first_row[group->size];
  g_clear_pointer(&input->label_bytes, g_free);
  g_clear_pointer(&input->label_index, g_free);
  input->labels = NULL;
  return knnwb_host_split_gather_labels(group, input, error);
}

void knnwb_host_split_input_clear(KnnwbHostSplitInput *input)
{
  g_clear_pointer(&input->block, knnwb_matrix_free);
  g_clear_pointer(&input->label_bytes, g_free);
  g_clear_pointer(&input->label_index, g_free);
  input->labels = NULL;
}

gboolean knnwb_host_split_value_finish(const KnnwbKnnGroup *group, KnnwbValue *out, GError **error)
{
  KnnwbHostSplitInput *split = g_new0(KnnwbHostSplitInput, 1);
  out->host_private = split;
  split->block = out->matrix; /* borrowed: the value owns its matrix */
  gboolean ok = knnwb_host_split_relabel(group, split, error);
  split->block = NULL;
  if (!ok)
    return FALSE;
  out->block_first = split->first_row;
  out->block_total = split->n_rows;
  out->block_labels = group->rank == 0 ? split->labels : NULL;
  return TRUE;
}

const char *const *knnwb_host_split_value_labels(const KnnwbValue *value)
{
  const KnnwbHostSplitInput *split = value->host_private;
  return split != NULL ? split->labels : NULL;
}

KnnwbMatrix *knnwb_host_split_value_whole(const KnnwbKnnGroup *group, const KnnwbValue *value,
                                          GError **error)
{
  const KnnwbMatrix *block = value->matrix;
  const size_t d = block->n_cols;
  g_autofree int64_t *sizes = g_new(int64_t, (size_t)group->size);
  if (!knnwb_knn_group_gather_values(group, (int64_t)block->n_rows, sizes, error))
    return NULL;
  g_autoptr(KnnwbMatrix) whole = knnwb_knn_group_gather_rows(group, block, sizes, error);
  if (whole == NULL)
    return NULL;
  const size_t n = whole->n_rows;
  const char *const *labels = knnwb_host_split_value_labels(value);
  for (size_t i = 0; labels != NULL && i < n; i++)
    if (labels[i] != NULL && *labels[i] != '\0')
      knnwb_matrix_set_row_label(whole, i, labels[i]);
  for (size_t j = 0; block->col_labels != NULL && j < d; j++)
    knnwb_matrix_set_col_label(whole, j, block->col_labels[j]);
  return g_steal_pointer(&whole);
}
