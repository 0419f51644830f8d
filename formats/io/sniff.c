/* What a file looks like from its first bytes, so that a wrong format or a misnamed file gets a
 * message that says what it is. */
#include "io.h"

#include <string.h>

static gboolean knnwb_sniff_prefix(const char *head, size_t length, const char *prefix,
                                   size_t prefix_length)
{
  return length >= prefix_length && memcmp(head, prefix, prefix_length) == 0;
}

/* The first occurrence of needle in the first length bytes (head may hold NUL bytes). */
static const char *knnwb_sniff_find(const char *head, size_t length, const char *needle)
{
  size_t n = strlen(needle);
  for (size_t i = 0; i + n <= length; i++)
    if (head[i] == needle[0] && memcmp(head + i, needle, n) == 0)
      return head + i;
  return NULL;
}

/* Sets the kind and description found and returns TRUE from a knnwb_sniff_* step. */
#define KNNWB_SNIFF(kind, text)                                                                    \
  do {                                                                                             \
    *description = text;                                                                           \
    *found = kind;                                                                                 \
    return TRUE;                                                                                   \
  } while (0)

/* Binary signatures: they sit at byte 0. Single-cell and R exports a user may well try are named,
 * with how to get a matrix out of them. */
static gboolean knnwb_sniff_binary(const char *head, size_t length, KnnwbContentKind *found,
                                   const char **description)
{
  if (knnwb_sniff_prefix(head, length, "\x93NUMPY", 6))
    KNNWB_SNIFF(KNNWB_CONTENT_NPY, "a NumPy .npy array");
  if (knnwb_sniff_prefix(head, length, "\x1f\x8b", 2))
    KNNWB_SNIFF(KNNWB_CONTENT_GZIP,
                "gzip data inside gzip data (compressed twice: gunzip it once)");
  if (knnwb_sniff_prefix(head, length, "\x89HDF\r\n\x1a\n", 8))
    KNNWB_SNIFF(KNNWB_CONTENT_HDF5, "an HDF5 file (AnnData .h5ad, loom, 10x Genomics .h5)");
  if (knnwb_sniff_prefix(head, length, "\xff\xfe", 2) ||
      knnwb_sniff_prefix(head, length, "\xfe\xff", 2))
    KNNWB_SNIFF(KNNWB_CONTENT_FOREIGN,
                "UTF-16 text (as Excel's 'Unicode Text' saves), which knnwb does not read: save "
                "it as 'CSV UTF-8', or convert it: iconv -f utf-16 -t utf-8 IN > OUT");
  if (knnwb_sniff_prefix(head, length, "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", 8))
    KNNWB_SNIFF(KNNWB_CONTENT_FOREIGN,
                "an Excel workbook (.xls), which knnwb does not read: save the sheet as CSV");
  if (knnwb_sniff_prefix(head, length, "RDX2\n", 5) ||
      knnwb_sniff_prefix(head, length, "RDX3\n", 5) ||
      knnwb_sniff_prefix(head, length, "X\n\0\0", 4))
    KNNWB_SNIFF(KNNWB_CONTENT_FOREIGN,
                "an R data file (.rds, .RData), which knnwb does not read: write the matrix from R "
                "with write.csv(m, file) or write.table(m, file, sep = \"\\t\")");
  if ((knnwb_sniff_prefix(head, length, "PK\x03\x04", 4) &&
       (knnwb_sniff_find(head, length, "[Content_Types].xml") != NULL ||
        knnwb_sniff_find(head, length, "xl/") != NULL)))
    KNNWB_SNIFF(KNNWB_CONTENT_FOREIGN,
                "an Excel workbook (.xlsx), which knnwb does not read: save the sheet as CSV "
                "(CSV UTF-8)");
  if (knnwb_sniff_prefix(head, length, "PK\x03\x04", 4) ||
      knnwb_sniff_prefix(head, length, "PK\x05\x06", 4))
    KNNWB_SNIFF(KNNWB_CONTENT_ZIP,
                "a zip archive (an .npz or .zip: unzip it and read the .npy or text file inside)");
  if (knnwb_sniff_prefix(head, length, "BZh", 3))
    KNNWB_SNIFF(KNNWB_CONTENT_OTHER_COMPRESSION,
                "bzip2-compressed data (decompress it with bunzip2, or recompress it with gzip)");
  if (knnwb_sniff_prefix(head, length,
                         "\xfd"
                         "7zXZ",
                         5))
    KNNWB_SNIFF(KNNWB_CONTENT_OTHER_COMPRESSION,
                "xz-compressed data (decompress it with unxz, or recompress it with gzip)");
  if (knnwb_sniff_prefix(head, length, "\x28\xb5\x2f\xfd", 4))
    KNNWB_SNIFF(KNNWB_CONTENT_OTHER_COMPRESSION,
                "zstd-compressed data (decompress it with unzstd, or recompress it with gzip)");
  if (memchr(head, '\0', length) != NULL)
    KNNWB_SNIFF(KNNWB_CONTENT_BINARY, "binary data (it holds NUL bytes)");
  return FALSE;
}

/* Text that starts with a known signature (after a BOM and blanks). */
static gboolean knnwb_sniff_text_signature(const char *text, size_t rest, KnnwbContentKind *found,
                                           const char **description)
{
  const char *end = text + rest;
  if (knnwb_sniff_prefix(text, rest, "%%MatrixMarket", 14) ||
      knnwb_sniff_prefix(text, rest, "%MatrixMarket", 13))
    KNNWB_SNIFF(KNNWB_CONTENT_MTX, "a Matrix Market sparse matrix (as 10x Genomics' matrix.mtx)");
  if (knnwb_sniff_prefix(text, rest, "^DATABASE", 9) ||
      knnwb_sniff_prefix(text, rest, "^SERIES", 7) ||
      knnwb_sniff_prefix(text, rest, "^PLATFORM", 9) ||
      knnwb_sniff_prefix(text, rest, "^SAMPLE", 7))
    KNNWB_SNIFF(
        KNNWB_CONTENT_FOREIGN,
        "an NCBI GEO SOFT file (family.soft or a GDS/GSM record), which knnwb does not read: "
        "take the series matrix (GSE..._series_matrix.txt.gz, under 'Series Matrix "
        "File(s)' on the series' GEO page)");
  if (knnwb_sniff_prefix(text, rest, "#1.2", 4) || knnwb_sniff_prefix(text, rest, "#1.3", 4))
    KNNWB_SNIFF(KNNWB_CONTENT_GCT, "a GCT file");
  if (knnwb_sniff_prefix(text, rest, "<MicroarrayData>", 16))
    KNNWB_SNIFF(KNNWB_CONTENT_CIBM, "a CIBM microarray file");
  if (knnwb_sniff_prefix(text, rest, "!Series_", 8) ||
      knnwb_sniff_prefix(text, rest, "!series_matrix_table_begin", 26) ||
      knnwb_sniff_prefix(text, rest, "!Sample_", 8))
    KNNWB_SNIFF(KNNWB_CONTENT_GEO, "an NCBI GEO series matrix");
  if (text < end && *text == '<') {
    if (knnwb_sniff_find(text, rest, "<graphml") != NULL)
      KNNWB_SNIFF(KNNWB_CONTENT_GRAPHML, "GraphML (a graph, not a matrix)");
    if (knnwb_sniff_find(text, rest, "<MicroarrayData>") != NULL)
      KNNWB_SNIFF(KNNWB_CONTENT_CIBM, "a CIBM microarray file");
    if (knnwb_sniff_find(text, rest, "<html") != NULL ||
        knnwb_sniff_find(text, rest, "<HTML") != NULL ||
        knnwb_sniff_find(text, rest, "<!DOCTYPE html") != NULL)
      KNNWB_SNIFF(KNNWB_CONTENT_XML, "an HTML page (an error page saved instead of the data?)");
    KNNWB_SNIFF(KNNWB_CONTENT_XML, "XML that is not a CIBM microarray file");
  }
  return FALSE;
}

/* GML: `graph [` after optional Creator/Version lines (igraph, yEd, Cytoscape write these). */
static gboolean knnwb_sniff_gml(const char *text, size_t rest, KnnwbContentKind *found,
                                const char **description)
{
  const char *end = text + rest;
  if (knnwb_sniff_prefix(text, rest, "Creator", 7) || knnwb_sniff_prefix(text, rest, "graph", 5)) {
    for (const char *graph = knnwb_sniff_find(text, rest, "graph"); graph != NULL;
         graph = knnwb_sniff_find(graph + 5, (size_t)(end - graph - 5), "graph")) {
      const char *p = graph + 5;
      while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
      if (p < end && *p == '[')
        KNNWB_SNIFF(KNNWB_CONTENT_GML, "GML (a graph, not a matrix)");
    }
  }
  return FALSE;
}

KnnwbContentKind knnwb_formats_sniff(const char *head, size_t length, const char **description)
{
  KnnwbContentKind kind = KNNWB_CONTENT_EMPTY;
  *description = "an empty file";
  if (length == 0 || knnwb_sniff_binary(head, length, &kind, description))
    return kind;
  const char *text = head;
  const char *end = head + length;
  if (knnwb_sniff_prefix(text, length, "\xef\xbb\xbf", 3))
    text += 3;
  while (text < end && (*text == ' ' || *text == '\r' || *text == '\n' || *text == '\t'))
    text++;
  size_t rest = (size_t)(end - text);
  if (knnwb_sniff_text_signature(text, rest, &kind, description) ||
      knnwb_sniff_gml(text, rest, &kind, description))
    return kind;
  const char *newline = memchr(text, '\n', rest);
  size_t first_line = newline != NULL ? (size_t)(newline - text) : rest;
  if (memchr(text, '\t', first_line) != NULL)
    *description = "tab-separated text";
  else if (memchr(text, ',', first_line) != NULL)
    *description = "comma-separated text";
  else
    *description = "text without a tab or comma on its first line";
  return KNNWB_CONTENT_TEXT;
}

#undef KNNWB_SNIFF
