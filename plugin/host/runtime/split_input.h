/* Reading an input matrix as one rank of an MPI job in split-memory mode: each rank holds only its
 * block of rows. Shared by `knnwb knn`, `knnwb neighbourhood` and the pipeline step load-matrix. */
#ifndef KNNWB_HOST_SPLIT_INPUT_H
#define KNNWB_HOST_SPLIT_INPUT_H

#include <glib.h>
#include <knnwb/formats.h>
#include <knnwb/knn.h>
#include <knnwb/plugin.h>

G_BEGIN_DECLS

/** One rank's share of a matrix file. */
typedef struct {
  /** This rank's rows, in file order (a block of NPY rows or of text lines read alone, or a view
   * of its block of a file that had to be read whole, which it then owns). */
  KnnwbMatrix *block;
  size_t first_row; /**< the number of block's first row among all rows */
  size_t n_rows;    /**< the rows of every rank together */
  /** n_rows labels, every rank's (borrowed from the whole matrix, or gathered), or NULL when the
   * rows have none. */
  const char *const *labels;
  KnnwbReadInfo info; /**< what the read did (block_read: this rank read only its rows) */
  /*< private >*/
  char *label_bytes;
  char **label_index;
} KnnwbHostSplitInput;

/**
 * Reads this rank's block of path (options->block_index/block_count are set here). Text read by
 * byte ranges falls back to every rank reading the file whole when any rank saw a quote (a field
 * may span lines). Collective: the ranks agree at the end, so every rank returns the same result
 * and, on failure, the error of the lowest failing rank prefixed "rank R: ". cancel (may be
 * NULL): a signal during the read fails it with KNNWB_ERROR_CANCELLED. A block read (text or
 * NPY) always gathers every rank's labels (one exchange of the label bytes): the reader's
 * warnings, given here for all rows as one process gives them, need every label (a label repeated
 * on another rank). Errors: as knnwb_formats_read_matrix, KNNWB_ERROR_CANCELLED. Memory: the block
 * (the whole matrix, for the formats read whole), plus every label.
 */
gboolean knnwb_host_split_read(const KnnwbKnnGroup *group, const char *path,
                               KnnwbReadOptions *options, const volatile gint *cancel,
                               KnnwbHostSplitInput *input, GError **error);

/**
 * After input->block was replaced (rows added or expanded on this rank): where each block starts
 * and every rank's labels again. Collective. Errors: KNNWB_ERROR_NO_MEMORY, transport errors.
 */
gboolean knnwb_host_split_relabel(const KnnwbKnnGroup *group, KnnwbHostSplitInput *input,
                                  GError **error);

/**
 * A split step's MATRIX output (out->matrix: this rank's new block, the blocks in rank order the
 * whole result): sets block_first/block_total and every rank's labels (rank 0's block_labels; all
 * of them on every rank for knnwb_host_split_value_labels). Collective. Errors: as relabel.
 */
gboolean knnwb_host_split_value_finish(const KnnwbKnnGroup *group, KnnwbValue *out, GError **error);

/** Every row's label of a split value made by load-matrix or knnwb_host_split_value_finish, on
 * every rank (NULL when the rows have none or the value is another's). */
const char *const *knnwb_host_split_value_labels(const KnnwbValue *value);

/**
 * Every rank's block of a split value put together on every rank (with every label and the column
 * labels): for steps that combine every row with every other (metafeatures of a small input).
 * Collective. Errors: KNNWB_ERROR_NO_MEMORY (agreed), transport errors. Memory: the whole matrix.
 */
KnnwbMatrix *knnwb_host_split_value_whole(const KnnwbKnnGroup *group, const KnnwbValue *value,
                                          GError **error);

/** Frees what knnwb_host_split_read filled (the struct itself is the caller's). */
void knnwb_host_split_input_clear(KnnwbHostSplitInput *input);

/**
 * The rows [first_row[r], first_row[r + 1]) that rank r holds, for r < size (size + 1 entries,
 * g_free), from every rank's block size. Collective (one exchange).
 */
gboolean knnwb_host_split_offsets(const KnnwbKnnGroup *group, size_t block_rows, size_t **first_row,
                                  GError **error);

G_END_DECLS

#endif
