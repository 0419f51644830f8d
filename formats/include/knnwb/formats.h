/* Matrix readers (CIBM, CSV/TSV, GCT, NPY) and graph/table writers (.knn, yEd GML, GraphML, TSV).
 */
#ifndef KNNWB_FORMATS_H
#define KNNWB_FORMATS_H

#include <glib.h>
#include <igraph.h>
#include <stddef.h>
#include <knnwb/atomic_file.h>
#include <knnwb/drawing.h>
#include <knnwb/knn.h>
#include <knnwb/annotation.h>
#include <knnwb/matrix.h>
#include <knnwb/write_control.h>

G_BEGIN_DECLS

/* ------------------------------------------------------------------------------------------ */
/* Reading matrices                                                                           */
/* ------------------------------------------------------------------------------------------ */

/** Input formats. Rows of the file are the points unless the read options ask to transpose. */
typedef enum {
  KNNWB_INPUT_AUTO, /**< by extension (.npy .gct .csv .tsv .tab), then by content */
  KNNWB_INPUT_CIBM, /**< the GPU-FS-kNN microarray format: <MicroarrayData>, `n m`, rows, ... */
  KNNWB_INPUT_CSV,  /**< comma-separated, RFC 4180 quoting */
  KNNWB_INPUT_TSV,  /**< tab-separated, same rules as CSV with a tab */
  KNNWB_INPUT_GCT,  /**< the Broad's GCT 1.2 or 1.3 */
  KNNWB_INPUT_NPY,  /**< NumPy .npy, float32/float64, C or Fortran order, header versions 1-3 */
  KNNWB_INPUT_GEO,  /**< NCBI GEO series matrix (GSE..._series_matrix.txt): the table between
                         !series_matrix_table_begin and _end, ID_REF labels, and each sample's
                         !Sample_ lines as column annotations (see knnwb_matrix_annotation) */
  KNNWB_INPUT_H5AD, /**< AnnData .h5ad (HDF5): the observations (cells) are the points, labelled
                         by obs_names; X dense or sparse (CSR, CSC), or obsm[use_rep] or
                         layers[layer]; obs columns become row annotations; var_names column
                         labels */
  KNNWB_INPUT_10X   /**< 10x Genomics Market Exchange: a directory with matrix.mtx, barcodes.tsv
                         and features.tsv (or v2's genes.tsv), each gzip-compressed or not, or a
                         bare Matrix Market .mtx file: the matrix's columns (barcodes, cells) are
                         the points, labelled by barcode; features name the columns */
} KnnwbInputFormat;

/* The names of KnnwbInputFormat (<knnwb/enum_names.h>). */
/* clang-format off */
#define KNNWB_INPUT_NAMES(X)                                                                       \
  X(KNNWB_INPUT_AUTO, "auto")                                                                      \
  X(KNNWB_INPUT_CIBM, "cibm")                                                                      \
  X(KNNWB_INPUT_CSV, "csv")                                                                        \
  X(KNNWB_INPUT_TSV, "tsv")                                                                        \
  X(KNNWB_INPUT_GCT, "gct")                                                                        \
  X(KNNWB_INPUT_NPY, "npy")                                                                        \
  X(KNNWB_INPUT_GEO, "geo")                                                                        \
  X(KNNWB_INPUT_H5AD, "h5ad")                                                                      \
  X(KNNWB_INPUT_10X, "10x")
/* clang-format on */
extern const KnnwbEnumTable knnwb_input_table;

/** Parses "auto", "cibm", "csv", "tsv", "gct", "npy", "geo", "h5ad", "10x" (case-insensitive).
 * Errors: INVALID_ARGUMENT. Every format may be gzip-compressed (recognised by content, any name).
 */
gboolean knnwb_formats_input_from_string(const char *name, KnnwbInputFormat *format,
                                         GError **error);
/** The name knnwb_formats_input_from_string() accepts. */
const char *knnwb_formats_input_to_string(KnnwbInputFormat format);

/**
 * Decides the format of path: _series_matrix.txt, .npy, .gct, .csv, .tsv/.tab by extension (a
 * trailing .gz ignored); otherwise (and for .txt) by content: NPY magic, `#1.2`/`#1.3`,
 * `<MicroarrayData>`, `!Series_` (GEO), else TSV when the first line has a tab, CSV when it has a
 * comma. Reads at most the first 64 KiB (decompressed when the file is gzip). A name whose format
 * the content contradicts (a .tsv holding an NPY array, a zip archive, GML, an HTML page) is an
 * error that says what the file looks like.
 * Errors: KNNWB_ERROR_IO (cannot open), KNNWB_ERROR_PARSE (empty or unrecognisable file).
 */
gboolean knnwb_formats_detect_input(const char *path, KnnwbInputFormat *format, GError **error);

/** Whether the first record of a delimited file holds column names. */
typedef enum {
  KNNWB_HEADER_AUTO, /**< a header when some field other than the label is not a number */
  KNNWB_HEADER_YES,
  KNNWB_HEADER_NO
} KnnwbHeaderMode;

/** What to do with missing values: empty fields, NA, NaN (any case); Inf counts as missing too. */
typedef enum {
  KNNWB_MISSING_ERROR,    /**< a parse error at file:line:column (the default) */
  KNNWB_MISSING_DROP_ROWS /**< leave the row out, with one warning naming the rows: it stays in
                               the matrix, absent (zeros, knnwb_matrix_row_is_absent), so rows keep
                               their input numbers and it gets no edges; with transpose the file's
                               row is a feature and is removed */
} KnnwbMissingPolicy;

/* The names of KnnwbHeaderMode and KnnwbMissingPolicy (<knnwb/enum_names.h>); unknown names are
 * reported by the option or parameter that carries them. */
/* clang-format off */
#define KNNWB_HEADER_NAMES(X)                                                                      \
  X(KNNWB_HEADER_AUTO, "auto")                                                                     \
  X(KNNWB_HEADER_YES, "yes")                                                                       \
  X(KNNWB_HEADER_NO, "no")
#define KNNWB_MISSING_NAMES(X)                                                                     \
  X(KNNWB_MISSING_ERROR, "error")                                                                  \
  X(KNNWB_MISSING_DROP_ROWS, "drop-rows")
/* clang-format on */
extern const KnnwbEnumTable knnwb_header_table;
extern const KnnwbEnumTable knnwb_missing_table;

/** Options of knnwb_formats_read_matrix(). Initialise with knnwb_formats_read_options_init(). */
typedef struct {
  KnnwbInputFormat format; /**< default AUTO */
  gboolean transpose;      /**< file columns become the points (samples as rows); default FALSE */
  KnnwbHeaderMode header;  /**< CSV/TSV only; default AUTO */
  int label_column;        /**< CSV/TSV: 0-based column of the row labels, -1 = none; default 0 */
  const char *label_column_name; /**< CSV/TSV: the header name of the label column; overrides
                                      label_column when not NULL (the file must have a header) */
  KnnwbMissingPolicy missing;    /**< default KNNWB_MISSING_ERROR */
  const char *labels_path; /**< optional side file, one label per row of the file as stored (any
                                format; they replace the file's own row labels; transposed, they
                                name the features) */
  /** Text formats (CSV/TSV/GCT/GEO/CIBM): also rank each point's values as read, in double, before
   * they are rounded to float32 (knnwb_matrix_row_ranks), for the spearman metric; default FALSE.
   * NPY values are ranked as stored (float32 files hold no more digits; float64 ones are rounded
   * first). */
  gboolean rank_rows;
  /** CSV/TSV: annotation columns to leave out, comma-separated header names or 1-based numbers
   * (GEO GDS tables' IDENTIFIER, gene symbols beside probe IDs); NULL: none named, and a second
   * column that holds text in the first data row (the label column being the first, with a
   * header) is left out as an annotation column, with a warning that names it. */
  const char *skip_columns;
  const char *use_rep; /**< H5AD: read obsm[use_rep] (X_pca, say) instead of X; NULL = X */
  const char *layer;   /**< H5AD: read layers[layer] instead of X; NULL = X */
  /** block_count > 1: read only block block_index, for one rank of a split-memory job. NPY: the
   * rows knnwb_knn_group_rows(n, block_index, block_count), only their bytes read (C-order arrays
   * without transpose or labels_path). CSV/TSV (not gzip-compressed, not transposed): the rows
   * whose line starts in byte range block_index of block_count equal ranges of the file (the
   * lines before are skipped but counted, so messages keep their line numbers; line ranges that a
   * quoted field could straddle are flagged in info->quoted: the caller must then read whole).
   * Other formats and cases are read whole; info->block_read tells which happened. Values are
   * checked in the block only. */
  int block_index;
  int block_count;
  /** Optional: the ranks that read this same file whole together (NULL: this process alone).
   * NPY, whole read, KNNWB_MISSING_ERROR, not transposed: each rank checks only its share of rows
   * (knnwb_knn_group_rows) for missing values, as every row is some rank's and the ranks agree on
   * errors; a rank's message names the row it found. Nothing is collective here. */
  const KnnwbKnnGroup *group;
  /** Optional: stop with KNNWB_ERROR_CANCELLED ("path: interrupted while reading") once *cancel
   * != 0, checked every few MiB of the file (text formats, gzip-compressed or not, and NPY). */
  const volatile gint *cancel;
  /** Optional: (bytes of the file read, the file's bytes; for a block read, up to the block's
   * end), reported every few MiB. */
  KnnwbProgressFunc progress;
  void *progress_data;
  /** Threads that read a plain (not compressed) float32 NPY's data; 0 (the default): every
   * usable core. The matrix is the same with any number. */
  int n_threads;
  /** Optional: called once with the matrix's rows and columns (this rank's block for a block
   * read) as soon as they are known and before the values are read, for work that depends on the
   * shape alone (knnwb_knn_devices_prepare). Only the NPY reader calls it (from its header); the
   * matrix read may still fail, or have fewer rows (KNNWB_MISSING_DROP_ROWS). */
  void (*shape_known)(size_t rows, size_t cols, void *data);
  void *shape_known_data;
} KnnwbReadOptions;

/** Fills options with the defaults listed in KnnwbReadOptions. */
void knnwb_formats_read_options_init(KnnwbReadOptions *options);

/**
 * Parses the label column as users write it, the one convention of `knnwb knn --label-column`
 * and the pipeline parameter `label-column`: a 1-based column number ("1" is the first column),
 * "none", or a column name from the header (any text that is not a positive number). Sets
 * options->label_column (0-based) or options->label_column_name (pointing into text, which must
 * outlive the read). Errors: KNNWB_ERROR_INVALID_ARGUMENT ("0", empty text).
 */
gboolean knnwb_formats_label_column_from_string(const char *text, KnnwbReadOptions *options,
                                                GError **error);

/** What a read did, for reports. */
typedef struct {
  KnnwbInputFormat format;   /**< the format actually read (never AUTO) */
  size_t n_dropped_rows;     /**< rows left out for missing values (policy DROP_ROWS) */
  size_t first_dropped_line; /**< 1-based line (NPY: row) of the first dropped row, 0 if none */
  gboolean mapped;           /**< always FALSE: files are read, never mapped (a mapped file
                                  truncated during a run would kill the process with SIGBUS) */
  gboolean block_read;       /**< the matrix is block block_index only (see KnnwbReadOptions) */
  size_t total_rows;         /**< block_read: the rows of the whole array */
  size_t first_row;          /**< block_read NPY: the number of the block's first row (text: 0,
                                  unknown; the rows of the blocks before it) */
  gboolean quoted;           /**< block_read text: a '"' was seen, so a field may span lines and
                                  the byte ranges may cut a record: read the file whole instead */
  size_t n_tiny_values;      /**< CSV/TSV/GCT/GEO: nonzero values below float's normal range
                                  (1.2e-38), read as subnormals with fewer digits or as 0 */
  size_t first_tiny_line;    /**< 1-based line of the first of them, 0 if none */
} KnnwbReadInfo;

/**
 * Reads path into a new matrix (*out, freed with knnwb_matrix_free). Row labels come from the label
 * column (CSV/TSV), the first field (CIBM) or Name (GCT); column labels from the header,
 * <SamplesNames> or the GCT header; <SamplesClasses> become col_classes. Transposing swaps these.
 * Values are parsed to the nearest float (exactly as strtof would); UTF-8 BOM, CRLF, trailing
 * blanks and blank lines are accepted; quoted CSV/TSV fields may hold delimiters, quotes ("") and
 * newlines; labels must be valid UTF-8. info may be NULL.
 *
 * Errors: KNNWB_ERROR_IO (open/read failed), KNNWB_ERROR_PARSE with the message
 * "path:line:column: what is wrong" (NPY: "path: ..." with the byte offset or row), and
 * KNNWB_ERROR_NO_MEMORY when declared or actual sizes overflow or cannot be allocated: absurd
 * header dimensions are checked against the file size before anything is allocated. Complexity: one
 * streaming pass, O(file size) time; memory: the matrix plus a 4 MiB buffer and the labels (a
 * transposed read holds two copies of the matrix briefly). NPY float32 in C order (or Fortran order
 * with transpose) is read straight into the matrix with no conversion; it is not memory-mapped, so
 * a file truncated or rewritten during a run cannot crash it (a read that ends early is an error).
 */
gboolean knnwb_formats_read_matrix(const char *path, const KnnwbReadOptions *options,
                                   KnnwbMatrix **out, KnnwbReadInfo *info, GError **error);

/**
 * The warnings of a read (rows with missing values: count, the first few by row number and label;
 * repeated row labels), which knnwb_formats_read_matrix gives itself except for a block read
 * (info->block_read): the caller of block reads gives them once for the rows of all blocks, with
 * info's counts summed (first_dropped_line: the smallest), labels (may be NULL) and absent
 * (n_rows flags, may be NULL when no row is absent) of every row in order. O(n_rows) time.
 */
void knnwb_formats_warn_read(const char *path, const KnnwbReadOptions *options,
                             const KnnwbReadInfo *info, size_t n_rows, const char *const *labels,
                             const unsigned char *absent);

/* ------------------------------------------------------------------------------------------ */
/* Writing graphs and tables. Every writer is atomic (see atomic_file.h).                     */
/* ------------------------------------------------------------------------------------------ */

/** Output formats. */
typedef enum {
  KNNWB_OUTPUT_AUTO,          /**< by extension, see knnwb_formats_output_from_path() */
  KNNWB_OUTPUT_KNN,           /**< the seed's .knn: `n m`, then `source target distance`, 0-based */
  KNNWB_OUTPUT_GML,           /**< GML for yEd, with graphics, layout and colours */
  KNNWB_OUTPUT_GRAPHML,       /**< GraphML for Cytoscape and Gephi */
  KNNWB_OUTPUT_LABELS_TSV,    /**< cluster labels: row, label, cluster, cluster size */
  KNNWB_OUTPUT_NEIGHBORS_TSV, /**< neighbour table: label, rank, neighbour label, distance */
  KNNWB_OUTPUT_NPY, /**< NumPy: two files, OUT (indices, int64 n x k) and OUT's `.distances.npy` */
  KNNWB_OUTPUT_NPZ, /**< NumPy zip: arrays `indices` (int64 n x k) and `distances` (float64) */
  KNNWB_OUTPUT_MTX, /**< Matrix Market sparse n x n distance matrix, 1-based; labels beside */
  KNNWB_OUTPUT_H5AD /**< AnnData with scanpy's neighbors keys (knnwb knn only) */
} KnnwbOutputFormat;

/* KnnwbWriteControl (threads, interruption, progress): <knnwb/write_control.h>. */

/**
 * Edges to write without an igraph_t: edge e runs from from[e * stride] to to[e * stride] with
 * distance weights[e] (weights NULL = 1). An igraph_t gives from = VECTOR(graph->from), to =
 * VECTOR(graph->to), stride 1; an interleaved edge vector (a b a b ...) gives stride 2.
 */
typedef struct {
  igraph_integer_t n_vertices, n_edges;
  gboolean directed;
  const igraph_integer_t *from, *to;
  size_t stride;
  const double *weights;
} KnnwbEdgeList;

/* The names of KnnwbOutputFormat (<knnwb/enum_names.h>). A graph is written in all but the NumPy
 * arrays, which only knnwb knn writes (KNNWB_OUTPUT_GRAPH_NAMES: the write-graph step's). */
/* clang-format off */
#define KNNWB_OUTPUT_NAMES(X)                                                                      \
  KNNWB_OUTPUT_TABLE_NAMES(X)                                                                      \
  X(KNNWB_OUTPUT_NPY, "npy")                                                                       \
  X(KNNWB_OUTPUT_NPZ, "npz")                                                                       \
  KNNWB_OUTPUT_MTX_NAME(X)                                                                         \
  X(KNNWB_OUTPUT_H5AD, "h5ad")
#define KNNWB_OUTPUT_GRAPH_NAMES(X)                                                                \
  KNNWB_OUTPUT_TABLE_NAMES(X)                                                                      \
  KNNWB_OUTPUT_MTX_NAME(X)
#define KNNWB_OUTPUT_TABLE_NAMES(X)                                                                \
  X(KNNWB_OUTPUT_AUTO, "auto")                                                                     \
  X(KNNWB_OUTPUT_KNN, "knn")                                                                       \
  X(KNNWB_OUTPUT_GML, "gml")                                                                       \
  X(KNNWB_OUTPUT_GRAPHML, "graphml")                                                               \
  X(KNNWB_OUTPUT_LABELS_TSV, "labels")                                                             \
  X(KNNWB_OUTPUT_NEIGHBORS_TSV, "neighbors")
#define KNNWB_OUTPUT_MTX_NAME(X)                                                                   \
  X(KNNWB_OUTPUT_MTX, "mtx")
/* clang-format on */
extern const KnnwbEnumTable knnwb_output_table;

/** Parses "auto", "knn", "gml", "graphml", "labels", "neighbors"/"neighbours", "npy", "npz",
 * "mtx". Errors: INVALID_ARGUMENT. */
gboolean knnwb_formats_output_from_string(const char *name, KnnwbOutputFormat *format,
                                          GError **error);
/** The name knnwb_formats_output_from_string() accepts. */
const char *knnwb_formats_output_to_string(KnnwbOutputFormat format);

/**
 * Picks the output format from path's extension (case-insensitive): .knn, .gml, .graphml,
 * .labels.tsv or .clusters.tsv (labels), any other .tsv (neighbours), .npy, .npz, .mtx.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT for other extensions (the message lists the known ones).
 */
gboolean knnwb_formats_output_from_path(const char *path, KnnwbOutputFormat *format,
                                        GError **error);

/* Layouts and the appearance options of the GML and GraphML writers (KnnwbDrawingOptions):
 * <knnwb/drawing.h>. */

/**
 * A per-vertex column that the GML and GraphML writers add to each node (a sample annotation such
 * as tissue or age, for yEd, Cytoscape, Gephi and knnwb render --color-by). A column whose every
 * value reads as a finite number (C locale) is written as numbers (GML reals, GraphML double),
 * otherwise as strings escaped as labels are. A vertex whose value is NULL, empty or a missing
 * token (NA, NaN, ...) has no such attribute. In GML the key is name with what GML keys cannot
 * hold removed and the next letter capitalised ("disease state" -> "diseaseState",
 * "Sample_title" -> "SampleTitle"; "attr" before a leading digit or a key the writer uses itself);
 * in GraphML attr.name is name as it is.
 */
typedef struct {
  const char *name;
  const char *const *values; /**< one per vertex */
} KnnwbNodeAttribute;

/** Everything a graph writer may use. Only graph is required. */
typedef struct {
  const igraph_t *graph;
  const igraph_vector_t *weights;        /**< per-edge distance; NULL = 1 everywhere */
  const char *const *labels;             /**< per-vertex labels; NULL = vertex numbers */
  const igraph_vector_int_t *membership; /**< per-vertex cluster (0-based); may be NULL */
  const KnnwbDrawingOptions *gml;        /**< layout and appearance; NULL = defaults */
  const KnnwbWriteControl *control;      /**< threads, cancel, progress; NULL = defaults */
  const KnnwbNodeAttribute *attributes;  /**< node attributes (GML, GraphML); may be NULL */
  size_t n_attributes;
} KnnwbGraphOutput;

/**
 * Writes the graph in the given format (AUTO = from path's extension). LABELS_TSV needs a
 * membership. Errors: as the individual writers below, KNNWB_ERROR_INVALID_ARGUMENT when the
 * format needs something missing.
 */
gboolean knnwb_formats_write_graph(const char *path, KnnwbOutputFormat format,
                                   const KnnwbGraphOutput *output, GError **error);

/**
 * Writes the seed's .knn format: first line `vertices edges`, then one `source target distance`
 * line per edge in igraph edge order, 0-based; each distance in the shortest of %.15g, %.16g and
 * %.17g that reads back as the identical double (the distances are doubles; the seed's 6 decimals
 * would not round-trip). weights NULL writes distance 1. Direction is not stored (the reader is
 * told). Errors: KNNWB_ERROR_IO, KNNWB_ERROR_INVALID_ARGUMENT (weights of the wrong length).
 * Complexity: O(V + E) time, O(1) extra memory.
 */
gboolean knnwb_formats_write_knn(const char *path, const igraph_t *graph,
                                 const igraph_vector_t *weights, GError **error);

/**
 * Writes the directed kNN graph straight from neighbour lists, without an igraph_t: row i's edges
 * are i -> its list in rank order (slots with index -1 skipped), the edge order of
 * knnwb_graph_from_neighbors(DIRECTED). Formats: KNN, MTX (coordinate real general), NEIGHBORS_TSV
 * (labels for both ends), NPY and NPZ (the lists as n x k arrays: indices int64 with -1 in unused
 * slots, distances float64 with +inf there; int32 and float32 with control->lists_dtype
 * KNNWB_LISTS_DTYPE_32, which fails as knnwb_formats_lists_narrow does). labels may be NULL;
 * control may be NULL. Output is byte-identical whatever the thread count. Errors: KNNWB_ERROR_IO,
 * KNNWB_ERROR_CANCELLED, KNNWB_ERROR_INVALID_ARGUMENT (a format that needs a graph).
 * Complexity: O(n k) time; memory O(threads x chunk) beyond the lists.
 */
gboolean knnwb_formats_write_lists(const char *path, KnnwbOutputFormat format,
                                   const KnnwbNeighbors *neighbors, const char *const *labels,
                                   const KnnwbWriteControl *control, GError **error);

/** The connectivities of an .h5ad output (obsp['connectivities']). */
typedef enum {
  KNNWB_H5AD_WEIGHTS_UMAP,      /**< scanpy's default: umap-learn's fuzzy_simplicial_set */
  KNNWB_H5AD_WEIGHTS_GAUSS,     /**< a Gaussian kernel, each cell's width the median distance to
                                     its neighbours (scanpy's method='gauss' on kNN distances) */
  KNNWB_H5AD_WEIGHTS_JACCARD,   /**< shared neighbours over all, each cell in its own set */
  KNNWB_H5AD_WEIGHTS_SIMILARITY /**< 1 / (1 + distance), the larger of the two directions */
} KnnwbH5adWeights;

/* clang-format off */
#define KNNWB_H5AD_WEIGHTS_NAMES(X)                                                                \
  X(KNNWB_H5AD_WEIGHTS_UMAP, "umap")                                                               \
  X(KNNWB_H5AD_WEIGHTS_GAUSS, "gauss")                                                             \
  X(KNNWB_H5AD_WEIGHTS_JACCARD, "jaccard")                                                         \
  X(KNNWB_H5AD_WEIGHTS_SIMILARITY, "similarity")
/* clang-format on */
extern const KnnwbEnumTable knnwb_h5ad_weights_table;

/** What an .h5ad output holds besides the lists. */
typedef struct {
  KnnwbH5adWeights weights;
  const char *metric;  /**< the metric's name, for uns['neighbors']['params']['metric'] */
  const char *into;    /**< NULL: a new AnnData of the graph alone (obs names from labels); else
                            an AnnData file whose copy gets the keys (same cell count) */
  const char *use_rep; /**< optional: the obsm entry the graph was computed from, recorded as
                            params['use_rep'] as scanpy does (sc.tl.umap then starts from it) */
  const volatile gint *cancel; /**< optional: stop with KNNWB_ERROR_CANCELLED once *cancel != 0
                                    (polled between pieces of the copy and between the parts) */
} KnnwbH5adOutput;

/**
 * Writes the kNN lists as AnnData, as scanpy's neighbors lays them out: obsp['distances'] (CSR
 * float64, each row's found neighbours, the cell itself left out, columns sorted),
 * obsp['connectivities'] (symmetric CSR float32 of output->weights) and uns['neighbors']
 * (connectivities_key, distances_key, params n_neighbors = k + 1 as scanpy counts the cell itself,
 * method, metric, use_rep when given). path is written whole as a new file (any file there is
 * removed first; with into: a byte copy of into, then the keys replaced or added; into itself is
 * only read): give it a temporary. It is synced once written when the process asked for syncs
 * (knnwb_atomic_file_sync_always), as atomic files are.
 * Errors: KNNWB_ERROR_IO, KNNWB_ERROR_CANCELLED, KNNWB_ERROR_PARSE (into is not AnnData or has
 * another cell count), KNNWB_ERROR_INVALID_ARGUMENT (built without libhdf5). Complexity: O(n k
 * log(n k)) time, O(n k) memory (into: copied in 4 MiB pieces); jaccard O(n k log k) more.
 */
gboolean knnwb_formats_write_h5ad(const char *path, const KnnwbNeighbors *lists,
                                  const char *const *labels, const KnnwbH5adOutput *output,
                                  GError **error);

/**
 * Writes an edge list (no igraph_t needed) as KNN or MTX (undirected: `symmetric`, each edge once
 * in the lower triangle). Same contract as knnwb_formats_write_lists.
 */
gboolean knnwb_formats_write_edges(const char *path, KnnwbOutputFormat format,
                                   const KnnwbEdgeList *edges, const char *const *labels,
                                   const KnnwbWriteControl *control, GError **error);

/** The edge list view of a graph (no copy; valid while graph and weights live). */
void knnwb_formats_edges_of_graph(const igraph_t *graph, const igraph_vector_t *weights,
                                  KnnwbEdgeList *edges);

/**
 * The side files of a format: for MTX the row labels (`g.mtx` -> `g.rows.txt`), for NPY the
 * distances (`g.npy` -> `g.distances.npy`); NULL for other formats. Free with g_free.
 */
char *knnwb_formats_side_path(const char *path, KnnwbOutputFormat format);

/**
 * Reads a .knn file into graph (uninitialised on entry; initialised on success only) and weights
 * (an initialised vector, resized to the edge count). Strict: exactly `n m` then m lines of
 * `source target distance` (whitespace separated, CRLF and trailing blank lines allowed), vertices
 * in [0, n), finite weights, nothing after the m-th edge. Errors: KNNWB_ERROR_PARSE
 * "path:line:column: message", KNNWB_ERROR_IO, KNNWB_ERROR_NO_MEMORY (declared sizes are checked
 * against the file size before allocating), KNNWB_ERROR_IGRAPH. Complexity: O(file size).
 */
gboolean knnwb_formats_read_knn(const char *path, igraph_bool_t directed, igraph_t *graph,
                                igraph_vector_t *weights, GError **error);

/**
 * Streams GML that yEd lays out and colours: node `id`, `label`, `graphics [ x y w h type fill
 * outline ]`, `LabelGraphics [ text fontSize ]`, and keys `cluster`, `clusterSize`, `focus`; edges
 * with `weight` and `graphics [ fill width ]` (targetArrow only for directed graphs). Nodes are
 * coloured by cluster (a fixed 20-colour palette, grey without membership); focus nodes are
 * hexagons twice the size with a red outline. Strings are ASCII with &-entities (GML's rule).
 * Errors: KNNWB_ERROR_IO, KNNWB_ERROR_IGRAPH (layout), KNNWB_ERROR_INVALID_ARGUMENT (vector sizes).
 * Complexity: O(V + E) plus the layout.
 */
gboolean knnwb_formats_write_gml(const char *path, const KnnwbGraphOutput *output, GError **error);

/**
 * Streams GraphML with keys label (string), cluster (int), x, y (double, when a layout is computed
 * or given), focus (boolean) on nodes and weight (double) on edges.
 * Errors and complexity as knnwb_formats_write_gml().
 */
gboolean knnwb_formats_write_graphml(const char *path, const KnnwbGraphOutput *output,
                                     GError **error);

/**
 * Writes the cluster table: header `row<TAB>label<TAB>cluster<TAB>size` (row: 0-based, as in .knn
 * and GML ids; labels may repeat), then one line per vertex in order: its label (or number), its
 * cluster (0-based) and that cluster's size. labels may be NULL. Errors: KNNWB_ERROR_IO,
 * KNNWB_ERROR_INVALID_ARGUMENT (negative cluster id). Complexity: O(n + number of clusters).
 */
gboolean knnwb_formats_write_labels_tsv(const char *path, const igraph_vector_int_t *membership,
                                        const char *const *labels, GError **error);

/**
 * Writes the neighbour table of a graph: header
 * `row<TAB>label<TAB>rank<TAB>neighbor_row<TAB>neighbor<TAB>distance`, then for each vertex its
 * neighbours (out-neighbours if directed) sorted by (distance, vertex id), rank from 1. For a graph
 * from knnwb_graph_from_neighbors (directed) this is the kNN list. Errors: KNNWB_ERROR_IO,
 * KNNWB_ERROR_IGRAPH. Complexity: O(V + E log(max degree)).
 */
gboolean knnwb_formats_write_neighbors_tsv(const char *path, const igraph_t *graph,
                                           const igraph_vector_t *weights,
                                           const char *const *labels, GError **error);

/**
 * The same table straight from neighbour lists (also query-vs-reference): query_labels label
 * the queries, reference_labels the neighbours (either may be NULL = numbers). Slots with index -1
 * (rows without neighbours) are skipped. Errors: KNNWB_ERROR_IO. Complexity: O(n k).
 */
gboolean knnwb_formats_write_neighbor_lists_tsv(const char *path, const KnnwbNeighbors *neighbors,
                                                const char *const *query_labels,
                                                const char *const *reference_labels,
                                                GError **error);

/**
 * The lines of a .knn file (`source target distance`, no `n m` header) for the rows of lists:
 * row first_row + q's found neighbours in rank order, as knnwb_formats_write_knn writes the
 * directed kNN graph, byte for byte. For writers that put several processes' rows into one file.
 * Formatted in parallel chunks like the file writers (control: threads and cancel; NULL = all
 * cores, no cancel; progress is not reported). Errors: KNNWB_ERROR_IO, KNNWB_ERROR_CANCELLED.
 * Complexity: O(rows k).
 */
gboolean knnwb_formats_write_knn_lines(FILE *stream, const KnnwbNeighbors *lists,
                                       const KnnwbWriteControl *control, GError **error);

/**
 * The data lines of knnwb_formats_write_neighbor_lists_tsv (no header line) for the rows of lists
 * (row numbers first_row + q; query_labels are indexed by the global row), formatted like it.
 * control as knnwb_formats_write_knn_lines. Errors: KNNWB_ERROR_IO, KNNWB_ERROR_CANCELLED.
 * Complexity: O(rows k).
 */
gboolean knnwb_formats_write_neighbor_lists_lines(FILE *stream, const KnnwbNeighbors *lists,
                                                  const char *const *query_labels,
                                                  const char *const *reference_labels,
                                                  const KnnwbWriteControl *control, GError **error);

/** The header line of the neighbour table. */
#define KNNWB_FORMATS_NEIGHBOR_TABLE_HEADER "row\tlabel\trank\tneighbor_row\tneighbor\tdistance\n"

/**
 * The data lines of knnwb_formats_write_lists' MTX (`i j distance`, 1-based, no header) for the
 * rows of lists (row first_row + q), byte for byte as the file writer formats them. control as
 * knnwb_formats_write_knn_lines. Errors: KNNWB_ERROR_IO, KNNWB_ERROR_CANCELLED.
 * Complexity: O(rows k).
 */
gboolean knnwb_formats_write_mtx_lines(FILE *stream, const KnnwbNeighbors *lists,
                                       const KnnwbWriteControl *control, GError **error);

/**
 * The data lines of knnwb_formats_write_edges (no header) for edges, byte for byte as the file
 * writer formats them: KNN (`a b weight`, undirected edges smaller end first) or MTX (1-based,
 * undirected edges in the lower triangle). For writers that put several processes' edges into one
 * file. control as knnwb_formats_write_knn_lines. Errors: KNNWB_ERROR_IO,
 * KNNWB_ERROR_CANCELLED. Complexity: O(edges).
 */
gboolean knnwb_formats_write_knn_edge_lines(FILE *stream, const KnnwbEdgeList *edges,
                                            const KnnwbWriteControl *control, GError **error);
/** See knnwb_formats_write_knn_edge_lines. */
gboolean knnwb_formats_write_mtx_edge_lines(FILE *stream, const KnnwbEdgeList *edges,
                                            const KnnwbWriteControl *control, GError **error);

/**
 * The three header lines of a Matrix Market kNN file (`general` or `symmetric`, n x n, nnz
 * entries; labelled: a comment names the .rows.txt side file). Never fails (the stream's error
 * flag tells). O(1).
 */
void knnwb_formats_write_mtx_header(FILE *stream, gboolean symmetric, size_t n, size_t nnz,
                                    gboolean labelled);

/**
 * Writes the row labels of the Matrix Market file path into its side file
 * (knnwb_formats_side_path, atomically): one label per line, row 1 first, newlines and tabs in a
 * label turned into spaces; labels[i] NULL gives the row number. Errors: KNNWB_ERROR_IO. O(n).
 */
gboolean knnwb_formats_write_mtx_labels(const char *path, size_t n, const char *const *labels,
                                        GError **error);

/**
 * The NPY 1.0 header of a C-order rows x columns array of descr ("i8", "f8": NumPy's type code
 * without byte order; the host's order is written): magic, version, length, the dict padded so that
 * the data starts at a multiple of 64 bytes. Free with g_string_free. Never fails. O(1).
 */
GString *knnwb_formats_npy_header(const char *descr, size_t rows, size_t columns);

/** zlib's CRC-32 of bytes, continuing crc (0 to start), for any size. O(bytes). */
uint32_t knnwb_formats_crc32(uint32_t crc, const void *data, size_t bytes);

/** The CRC-32 of two byte runs one after the other from each run's CRC and the second's length
 * (zlib's crc32_combine), so that pieces written by different processes get one CRC. O(log n). */
uint32_t knnwb_formats_crc32_combine(uint32_t first, uint32_t second, uint64_t second_bytes);

/**
 * The bytes of knnwb_formats_write_lists' NPZ (a zip of stored `indices.npy` and `distances.npy`
 * for rows x k lists) around the two arrays' data: parts[0] goes before the indices' data (local
 * header, name, NPY header), parts[1] between the indices and the distances, parts[2] after the
 * distances (central directory, end record). data_crc: the CRC-32 (knnwb_formats_crc32) of each
 * array's data bytes alone (rows x k x 8 each). The lengths of the parts do not depend on the CRCs.
 * Free the parts with g_string_free. Errors: KNNWB_ERROR_INVALID_ARGUMENT naming path when the
 * archive would pass 4 GiB (no ZIP64); the parts are then unset. O(1).
 */
gboolean knnwb_formats_npz_lists_frame(const char *path, size_t rows, size_t k,
                                       const uint32_t data_crc[2], GString *parts[3],
                                       GError **error);
/**
 * knnwb_formats_npz_lists_frame with a third member `labels.npy` (labels: its whole NPY bytes, a
 * 1-D '<U' array; NULL: none), stored after the distances in parts[2], before the central
 * directory. Same errors. O(labels).
 */
/**
 * The rows' labels as a whole NPY file in memory (header and data): a 1-D array of fixed-width
 * UTF-32 strings ('<U{w}', w the longest label in code points, at least 1) that np.load reads
 * without pickle; a NULL label is "". Returns NULL with *ok TRUE when labels is NULL; NULL with *ok
 * FALSE and KNNWB_ERROR_INVALID_ARGUMENT naming path for a label that is not UTF-8. Free with
 * g_string_free. O(n w).
 */
GString *knnwb_formats_npy_labels_array(const char *path, const char *const *labels, size_t n,
                                        gboolean *ok, GError **error);

/**
 * Writes labels one per line into path (atomic), as the NPY reader's side file (.labels.txt). A
 * NULL label is an empty line. Errors: KNNWB_ERROR_INVALID_ARGUMENT for a label holding a line
 * break, KNNWB_ERROR_IO. O(n).
 */
gboolean knnwb_formats_write_labels_lines(const char *path, const char *const *labels, size_t n,
                                          GError **error);

/* knnwb_formats_npz_lists_frame_labelled (documented with knnwb_formats_npz_lists_frame above)
 * for arrays of `item` bytes an element: 8 (int64 and float64) or 4 (int32 and float32,
 * KNNWB_LISTS_DTYPE_32); data_crc then covers rows x k x item bytes each. */
gboolean knnwb_formats_npz_lists_frame_labelled(const char *path, size_t rows, size_t k,
                                                size_t item, const uint32_t data_crc[2],
                                                const GString *labels, GString *parts[3],
                                                GError **error);

/**
 * Elements [first, first + count) of a lists array (int64 indices, or double distances when
 * distances is TRUE) in 32 bits, into out: indices as int32 (-1 stays -1), distances as float32
 * rounded to nearest (+inf stays +inf), for KNNWB_LISTS_DTYPE_32. k and first_row (the array's
 * first row, of the job) let a message name the row: first_row + element / k. Errors:
 * KNNWB_ERROR_INVALID_ARGUMENT naming path when an index passes INT32_MAX or a finite distance
 * passes float32's range (it would read as +inf, the mark of an empty slot), the first such
 * element of the range. O(count).
 */
gboolean knnwb_formats_lists_narrow(const char *path, const void *data, gboolean distances,
                                    size_t first, size_t count, size_t k, size_t first_row,
                                    void *out, GError **error);

/**
 * Writes a scipy-style linkage matrix (rows (a, b, distance, size), as
 * knnwb_clustering_single_linkage returns it): as NPY float64 of shape (rows, 4) when path ends in
 * .npy (numpy.load, then scipy.cluster.hierarchy.dendrogram / fcluster), else as TSV with the
 * header `cluster_a<TAB>cluster_b<TAB>distance<TAB>size` (distances round-trip, %.17g). Errors:
 * KNNWB_ERROR_IO, KNNWB_ERROR_INVALID_ARGUMENT (not 4 columns). Complexity: O(rows).
 */
gboolean knnwb_formats_write_linkage(const char *path, const igraph_matrix_t *linkage,
                                     GError **error);

/**
 * Writes MST-kNN's split hierarchy (the vectors of KnnwbMstKnnHierarchy) as TSV: header
 * `node<TAB>parent<TAB>size<TAB>k<TAB>cluster`, one line per node in order; parent is NA for the
 * root, cluster NA for a set that was split (else the final cluster id of the cluster table).
 * Errors: KNNWB_ERROR_IO, KNNWB_ERROR_INVALID_ARGUMENT (lengths differ). Complexity: O(nodes).
 */
gboolean knnwb_formats_write_hierarchy_tsv(const char *path, const igraph_vector_int_t *parent,
                                           const igraph_vector_int_t *size,
                                           const igraph_vector_int_t *k,
                                           const igraph_vector_int_t *cluster, GError **error);

/**
 * Known classes for the points labels[0..n-1] from one column of an annotation table
 * (knnwb_annotation_read: TSV or CSV with a header; the first column holds the row names). column
 * is a header name or a 1-based column number (2 or more). classes (initialised) is resized to n:
 * each point's class numbered 0, 1, ... in order of first appearance among the points, or -1 when
 * its label is not in the table or the value is empty, NA, N/A, NaN or null; class_names (may be
 * NULL) receives a NULL-terminated array of the class names (g_strfreev); n_matched (may be NULL)
 * the number of points with a class. Errors: those of knnwb_annotation_read, KNNWB_ERROR_PARSE
 * ("path:line: message": no such column, a row name twice). Complexity: O(file size + n).
 */
gboolean knnwb_formats_read_annotation(const char *path, const char *column,
                                       const char *const *labels, size_t n,
                                       igraph_vector_int_t *classes, char ***class_names,
                                       size_t *n_matched, GError **error);

/**
 * knnwb_formats_read_annotation on a table already read (or built from the matrix's own
 * annotation, knnwb_annotation_from_matrix), the names taken from id_column (NULL or empty: the
 * first column). n_named (may be NULL) receives the number of points the table names, with a value
 * or without: 0 means the table does not describe these points at all. Errors: KNNWB_ERROR_PARSE
 * (no such column, the names' column as the classes, a name twice), KNNWB_ERROR_INVALID_ARGUMENT
 * (no id_column), KNNWB_ERROR_NO_MEMORY. Complexity: O(records + n).
 */
gboolean knnwb_formats_annotation_classes(const KnnwbAnnotationTable *table, const char *id_column,
                                          const char *column, const char *const *labels, size_t n,
                                          igraph_vector_int_t *classes, char ***class_names,
                                          size_t *n_matched, size_t *n_named, GError **error);

/* ---------------------------------------------------------------------------------------------- */
/* Distance matrices (MST-kNN's input). */

/**
 * Reads a labelled square distance matrix in CSV as R's write.csv writes it (for example
 * share/data/dslanguages.csv), or the same layout in TSV (tab-separated when the header line holds
 * a tab): a header line with an empty first field and n column labels, then n lines
 * "label,d1,...,dn". Labels may be double-quoted. distances (initialised) is resized to n x
 * n; labels (may be NULL) receives a NULL-terminated array of the n row labels (free with
 * g_strfreev). Errors: KNNWB_ERROR_IO, KNNWB_ERROR_PARSE ("file:line: message": wrong field count,
 * bad number, not square, row and column labels differ). Complexity: O(n^2).
 */
gboolean knnwb_formats_read_distance_csv(const char *path, igraph_matrix_t *distances,
                                         char ***labels, GError **error);

/**
 * Reads a square distance matrix from NPY (numpy.save of an n x n float64 or float32 array, C or
 * Fortran order; values kept in double). Errors: KNNWB_ERROR_IO, KNNWB_ERROR_PARSE (not NPY, other
 * dtype, not 2-D square, truncated). Complexity: O(n^2) time and memory (the file is read whole).
 */
gboolean knnwb_formats_read_distance_npy(const char *path, igraph_matrix_t *distances,
                                         GError **error);

/**
 * Either reader by the file name: .npy (then *labels = NULL) or CSV/TSV. Errors: as the readers.
 */
gboolean knnwb_formats_read_distance_matrix(const char *path, igraph_matrix_t *distances,
                                            char ***labels, GError **error);

/* ---------------------------------------------------------------------------------------------- */
/* Laid-out graphs (the input of `knnwb render`). */

/** The most bytes knnwb_formats_read_gml reads (16 GiB: a 1.5M-node graph with its edges is a few
 * GB). */
#define KNNWB_GML_MAX_BYTES (G_GUINT64_CONSTANT(16) << 30)

/**
 * Reads a GML file (knnwb's or any with `graphics [ x y ]` on every node) into a new drawing (free
 * with knnwb_drawing_free): node positions, sizes, shapes, fills, outlines, labels and font sizes,
 * every other scalar node key as an attribute (cluster, annotations), edge weights, colours and
 * widths, as the GML writer puts them (missing keys get the writer's defaults). Only a regular
 * file of at most max_bytes (0: KNNWB_GML_MAX_BYTES) is read, in 1 MiB chunks, checking cancel
 * (may be NULL) before each; lists may nest to any depth (parsed without recursion).
 * Errors: KNNWB_ERROR_IO (not a regular file, a read error), KNNWB_ERROR_PARSE "path:line:
 * message", KNNWB_ERROR_INVALID_DATA (a node without coordinates, a file over the cap),
 * KNNWB_ERROR_CANCELLED. Complexity: O(file size) time; memory O(nodes + edges), not the file.
 */
KnnwbDrawing *knnwb_formats_read_gml_full(const char *path, guint64 max_bytes,
                                          const volatile gint *cancel, GError **error);
/** knnwb_formats_read_gml_full(path, 0, NULL, error). */
KnnwbDrawing *knnwb_formats_read_gml(const char *path, GError **error);

G_END_DECLS

#endif
