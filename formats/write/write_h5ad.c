/* The kNN graph as AnnData .h5ad, laid out as scanpy's neighbors writes it: obsp['distances'] (CSR,
 * each cell's k neighbours, the cell itself left out), obsp['connectivities'] (symmetric CSR
 * weights) and uns['neighbors'] (connectivities_key, distances_key, params: n_neighbors counting
 * the cell itself as scanpy does, method, metric), so that scanpy's leiden and umap run on the
 * file. UMAP weights follow umap-learn's fuzzy_simplicial_set (smooth_knn_dist's binary search for
 * each cell's sigma and rho, local_connectivity 1, 64 steps, tolerance 1e-5; exp(-(d - rho) /
 * sigma) in float32; then the fuzzy union a + b - ab). A fresh file gets obs_names and empty var;
 * with `into`, the keys go into a copy of that file (the caller's temporary: never the file
 * itself). */
#include "write_internal.h"

#ifdef KNNWB_HAVE_HDF5

#include "../io/h5.h"
#include <knnwb/atomic_file.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <unistd.h>

/* One directed entry of the kNN lists. */
typedef struct {
  int64_t row, column;
  float weight;
  double distance;
} KnnwbH5adEntry;

static int knnwb_h5ad_entry_compare(const void *a, const void *b)
{
  const KnnwbH5adEntry *x = a, *y = b;
  if (x->row != y->row)
    return x->row < y->row ? -1 : 1;
  return x->column < y->column ? -1 : x->column > y->column;
}

/* umap-learn's smooth_knn_dist for one cell: rho (the nearest nonzero distance) and sigma, so that
 * the cell's k weights sum to log2(k + 1) (scanpy's n_neighbors counts the cell itself). */
static void knnwb_h5ad_smooth(const float *distances, size_t count, size_t k, double mean_all,
                              float *rho, float *sigma)
{
  const double target = log2((double)(k + 1));
  float nearest = 0.0f;
  double sum = 0.0;
  for (size_t j = 0; j < count; j++) {
    sum += distances[j];
    if (distances[j] > 0.0f && (nearest == 0.0f || distances[j] < nearest))
      nearest = distances[j];
  }
  *rho = nearest;
  double low = 0.0, high = INFINITY, mid = 1.0;
  for (int step = 0; step < 64; step++) {
    double psum = 0.0;
    for (size_t j = 0; j < count; j++) {
      float d = distances[j] - *rho;
      psum += d > 0.0f ? exp(-((double)d / mid)) : 1.0;
    }
    if (fabs(psum - target) < 1e-5)
      break;
    if (psum > target) {
      high = mid;
      mid = (low + high) / 2.0;
    } else {
      low = mid;
      mid = isinf(high) ? mid * 2.0 : (low + high) / 2.0;
    }
  }
  float result = (float)mid;
  /* The mean over k + 1 distances: scanpy's lists hold the cell itself at distance 0. */
  double floor_at = 1e-3 * (*rho > 0.0f ? sum / (double)(count + 1) : mean_all);
  if (result < floor_at)
    result = (float)floor_at;
  *sigma = result;
}

/* The directed weight of every listed neighbour, per the chosen kind. */
static void knnwb_h5ad_directed(const KnnwbNeighbors *lists, KnnwbH5adWeights kind,
                                KnnwbH5adEntry *entries, size_t *n_entries)
{
  const size_t n = lists->n_queries, k = lists->k;
  g_autofree float *row_distances = g_new(float, MAX(k, (size_t)1));
  g_autofree double *sigma_sq = g_new0(double, MAX(n, (size_t)1));
  double total = 0.0;
  size_t total_count = 0;
  for (size_t i = 0; i < n * k; i++)
    if (lists->indices[i] >= 0) {
      total += (float)lists->distances[i];
      total_count++;
    }
  const double mean_all = total / (double)MAX(total_count + n, (size_t)1);
  if (kind == KNNWB_H5AD_WEIGHTS_GAUSS)
    for (size_t i = 0; i < n; i++) {
      /* sigma_i^2: the median squared distance to the cell's neighbours (scanpy's sparse path). */
      size_t count = (size_t)lists->n_found[i];
      g_autofree double *squares = g_new(double, MAX(count, (size_t)1));
      for (size_t j = 0; j < count; j++)
        squares[j] = lists->distances[i * k + j] * lists->distances[i * k + j];
      sigma_sq[i] = count == 0       ? 0.0
                    : count % 2 == 1 ? squares[count / 2]
                                     : (squares[count / 2 - 1] + squares[count / 2]) / 2.0;
    }
  *n_entries = 0;
  for (size_t i = 0; i < n; i++) {
    size_t count = 0;
    for (size_t j = 0; j < k; j++)
      if (lists->indices[i * k + j] >= 0)
        row_distances[count++] = (float)lists->distances[i * k + j];
    float rho = 0.0f, sigma = 0.0f;
    if (kind == KNNWB_H5AD_WEIGHTS_UMAP)
      knnwb_h5ad_smooth(row_distances, count, k, mean_all, &rho, &sigma);
    for (size_t j = 0; j < k; j++) {
      int64_t neighbour = lists->indices[i * k + j];
      if (neighbour < 0 || (size_t)neighbour == i)
        continue;
      double d = lists->distances[i * k + j];
      float weight = 1.0f;
      if (kind == KNNWB_H5AD_WEIGHTS_UMAP) {
        float shifted = (float)d - rho;
        weight = shifted <= 0.0f || sigma == 0.0f ? 1.0f : expf(-(shifted / sigma));
      } else if (kind == KNNWB_H5AD_WEIGHTS_GAUSS) {
        double si = sigma_sq[i], sj = sigma_sq[neighbour], sum = si + sj;
        weight =
            sum > 0.0 ? (float)(sqrt(2.0 * sqrt(si) * sqrt(sj) / sum) * exp(-d * d / sum)) : 1.0f;
      } else if (kind == KNNWB_H5AD_WEIGHTS_SIMILARITY) {
        weight = (float)(1.0 / (1.0 + d));
      }
      entries[(*n_entries)++] = (KnnwbH5adEntry){i, neighbour, weight, d};
    }
  }
}

/* Each cell's set {i} and its listed neighbours, sorted (n sets of k + 1 slots, -1 padded at the
 * end), for the Jaccard weights. */
static int knnwb_h5ad_index_compare(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  /* -1 (an unused slot) sorts last. */
  if ((x < 0) != (y < 0))
    return x < 0 ? 1 : -1;
  return x < y ? -1 : x > y;
}

static int64_t *knnwb_h5ad_sets(const KnnwbNeighbors *lists)
{
  const size_t n = lists->n_queries, k = lists->k, width = k + 1;
  int64_t *sets = g_new(int64_t, MAX(n * width, (size_t)1));
  for (size_t i = 0; i < n; i++) {
    int64_t *set = sets + i * width;
    set[0] = (int64_t)i;
    for (size_t j = 0; j < k; j++) {
      int64_t u = lists->indices[i * k + j];
      set[j + 1] = u == (int64_t)i ? -1 : u;
    }
    qsort(set, width, sizeof *set, knnwb_h5ad_index_compare);
  }
  return sets;
}

/* |N(a) ∩ N(b)| / |N(a) ∪ N(b)| by merging the two sorted sets (PhenoGraph's shared-neighbour
 * weight, each cell in its own set). O(k). */
static float knnwb_h5ad_jaccard(const int64_t *sets, size_t width, int64_t a, int64_t b)
{
  const int64_t *x = sets + (size_t)a * width, *y = sets + (size_t)b * width;
  size_t i = 0, j = 0, shared = 0, size_x = 0, size_y = 0;
  while (size_x < width && x[size_x] >= 0)
    size_x++;
  while (size_y < width && y[size_y] >= 0)
    size_y++;
  while (i < size_x && j < size_y) {
    if (x[i] == y[j]) {
      shared++;
      i++;
      j++;
    } else if (x[i] < y[j]) {
      i++;
    } else {
      j++;
    }
  }
  return (float)shared / (float)(size_x + size_y - shared);
}

/* Looks up the directed weight of (row, column) among the sorted entries; 0 when absent. */
static float knnwb_h5ad_lookup(const KnnwbH5adEntry *entries, size_t n_entries, int64_t row,
                               int64_t column)
{
  KnnwbH5adEntry key = {row, column, 0.0f, 0.0};
  const KnnwbH5adEntry *found =
      bsearch(&key, entries, n_entries, sizeof key, knnwb_h5ad_entry_compare);
  return found != NULL ? found->weight : 0.0f;
}

/* The symmetric connectivities: every entry and its mirror, sorted, merged (UMAP: the fuzzy union
 * a + b - ab in float32, as scipy computes it on float32 matrices; the others: the larger). */
static KnnwbH5adEntry *knnwb_h5ad_symmetric(const KnnwbNeighbors *lists, KnnwbH5adWeights kind,
                                            const KnnwbH5adEntry *entries, size_t n_entries,
                                            size_t *n_out)
{
  KnnwbH5adEntry *both = g_new(KnnwbH5adEntry, 2 * n_entries + 1);
  for (size_t e = 0; e < n_entries; e++) {
    both[2 * e] = entries[e];
    both[2 * e + 1] =
        (KnnwbH5adEntry){entries[e].column, entries[e].row, 0.0f, entries[e].distance};
  }
  qsort(both, 2 * n_entries, sizeof *both, knnwb_h5ad_entry_compare);
  g_autofree int64_t *sets = kind == KNNWB_H5AD_WEIGHTS_JACCARD ? knnwb_h5ad_sets(lists) : NULL;
  size_t kept = 0;
  for (size_t e = 0; e < 2 * n_entries; e++) {
    if (kept > 0 && both[kept - 1].row == both[e].row && both[kept - 1].column == both[e].column)
      continue;
    KnnwbH5adEntry entry = both[e];
    float a = knnwb_h5ad_lookup(entries, n_entries, entry.row, entry.column);
    float b = knnwb_h5ad_lookup(entries, n_entries, entry.column, entry.row);
    if (kind == KNNWB_H5AD_WEIGHTS_UMAP) {
      volatile float sum = a + b, product = a * b; /* float32 steps, as scipy's */
      entry.weight = sum - product;
    } else if (kind == KNNWB_H5AD_WEIGHTS_JACCARD) {
      entry.weight = knnwb_h5ad_jaccard(sets, lists->k + 1, entry.row, entry.column);
    } else {
      entry.weight = MAX(a, b);
    }
    if (entry.weight != 0.0f)
      both[kept++] = entry;
  }
  *n_out = kept;
  return both;
}

/* ---- the file ---- */

static void knnwb_h5ad_attribute(hid_t object, const char *name, const char *value)
{
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  hid_t space = H5Screate(H5S_SCALAR);
  if (H5Aexists(object, name) > 0)
    H5Adelete(object, name);
  hid_t attribute = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attribute, type, &value);
  H5Aclose(attribute);
  H5Sclose(space);
  H5Tclose(type);
}

/* anndata's element encoding: encoding-type and encoding-version attributes. */
static void knnwb_h5ad_encoding(hid_t object, const char *type, const char *version)
{
  knnwb_h5ad_attribute(object, "encoding-type", type);
  knnwb_h5ad_attribute(object, "encoding-version", version);
}

/* Opens group name under parent, made (as an anndata dict) when missing. */
static hid_t knnwb_h5ad_group(hid_t parent, const char *name, const char *type, const char *version)
{
  if (H5Lexists(parent, name, H5P_DEFAULT) > 0)
    return H5Gopen2(parent, name, H5P_DEFAULT);
  hid_t group = H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (group >= 0)
    knnwb_h5ad_encoding(group, type, version);
  return group;
}

/* A 1-D dataset of n values of memory_type stored as file_type. */
static gboolean knnwb_h5ad_dataset(hid_t parent, const char *name, hid_t file_type,
                                   hid_t memory_type, size_t n, const void *values,
                                   const char *encoding)
{
  if (H5Lexists(parent, name, H5P_DEFAULT) > 0)
    H5Ldelete(parent, name, H5P_DEFAULT);
  hsize_t dims = n;
  hid_t space = n == 1 && encoding != NULL && !g_str_equal(encoding, "array") &&
                        !g_str_equal(encoding, "string-array")
                    ? H5Screate(H5S_SCALAR)
                    : H5Screate_simple(1, &dims, NULL);
  hid_t dataset = H5Dcreate2(parent, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  gboolean ok = dataset >= 0 && (n == 0 || H5Dwrite(dataset, memory_type, H5S_ALL, H5S_ALL,
                                                    H5P_DEFAULT, values) >= 0);
  if (ok && encoding != NULL)
    knnwb_h5ad_encoding(dataset, encoding, "0.2.0");
  if (dataset >= 0)
    H5Dclose(dataset);
  H5Sclose(space);
  return ok;
}

static gboolean knnwb_h5ad_strings(hid_t parent, const char *name, const char *const *texts,
                                   size_t n, const char *encoding)
{
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  gboolean ok = knnwb_h5ad_dataset(parent, name, type, type, n, texts, encoding);
  H5Tclose(type);
  return ok;
}

/* A CSR matrix group (anndata csr_matrix 0.1.0) of n x n from sorted entries: data as float32
 * (connectivities) or float64 (distances). */
static gboolean knnwb_h5ad_csr(hid_t parent, const char *name, size_t n,
                               const KnnwbH5adEntry *entries, size_t n_entries, gboolean distances)
{
  if (H5Lexists(parent, name, H5P_DEFAULT) > 0)
    H5Ldelete(parent, name, H5P_DEFAULT);
  hid_t group = H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (group < 0)
    return FALSE;
  knnwb_h5ad_encoding(group, "csr_matrix", "0.1.0");
  int64_t shape[2] = {(int64_t)n, (int64_t)n};
  hsize_t two = 2;
  hid_t space = H5Screate_simple(1, &two, NULL);
  hid_t attribute = H5Acreate2(group, "shape", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attribute, H5T_NATIVE_INT64, shape);
  H5Aclose(attribute);
  H5Sclose(space);
  g_autofree int64_t *indptr = g_new0(int64_t, n + 1);
  g_autofree int64_t *indices = g_new(int64_t, MAX(n_entries, (size_t)1));
  g_autofree double *data64 = distances ? g_new(double, MAX(n_entries, (size_t)1)) : NULL;
  g_autofree float *data32 = distances ? NULL : g_new(float, MAX(n_entries, (size_t)1));
  for (size_t e = 0; e < n_entries; e++) {
    indptr[entries[e].row + 1]++;
    indices[e] = entries[e].column;
    if (distances)
      data64[e] = entries[e].distance;
    else
      data32[e] = entries[e].weight;
  }
  for (size_t i = 0; i < n; i++)
    indptr[i + 1] += indptr[i];
  gboolean ok =
      knnwb_h5ad_dataset(group, "indptr", H5T_STD_I64LE, H5T_NATIVE_INT64, n + 1, indptr, NULL) &&
      knnwb_h5ad_dataset(group, "indices", H5T_STD_I64LE, H5T_NATIVE_INT64, n_entries, indices,
                         NULL) &&
      (distances ? knnwb_h5ad_dataset(group, "data", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n_entries,
                                      data64, NULL)
                 : knnwb_h5ad_dataset(group, "data", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, n_entries,
                                      data32, NULL));
  H5Gclose(group);
  return ok;
}

/* A fresh AnnData skeleton: root encoding, obs (the names), empty var, the dict groups. */
static gboolean knnwb_h5ad_skeleton(hid_t file, size_t n, const char *const *labels)
{
  knnwb_h5ad_encoding(file, "anndata", "0.1.0");
  g_autofree char **names = g_new0(char *, MAX(n, (size_t)1));
  g_autoptr(GPtrArray) owned = g_ptr_array_new_with_free_func(g_free);
  for (size_t i = 0; i < n; i++) {
    if (labels != NULL && labels[i] != NULL) {
      names[i] = (char *)labels[i];
    } else {
      names[i] = g_strdup_printf("%zu", i);
      g_ptr_array_add(owned, names[i]);
    }
  }
  gboolean ok = TRUE;
  const char *frames[2] = {"obs", "var"};
  for (int f = 0; f < 2 && ok; f++) {
    hid_t frame = knnwb_h5ad_group(file, frames[f], "dataframe", "0.2.0");
    knnwb_h5ad_attribute(frame, "_index", "_index");
    hsize_t zero = 0;
    hid_t space = H5Screate_simple(1, &zero, NULL);
    hid_t order =
        H5Acreate2(frame, "column-order", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Aclose(order);
    H5Sclose(space);
    ok = knnwb_h5ad_strings(frame, "_index", (const char *const *)names, f == 0 ? n : 0,
                            "string-array");
    H5Gclose(frame);
  }
  const char *dicts[] = {"obsm", "obsp", "varm", "varp", "layers", "uns"};
  for (size_t d = 0; d < G_N_ELEMENTS(dicts) && ok; d++) {
    hid_t group = knnwb_h5ad_group(file, dicts[d], "dict", "0.1.0");
    ok = group >= 0;
    if (ok)
      H5Gclose(group);
  }
  return ok;
}

/* uns['neighbors'] as scanpy's neighbors writes it. */
static gboolean knnwb_h5ad_uns(hid_t file, size_t k, const KnnwbH5adOutput *output)
{
  hid_t uns = knnwb_h5ad_group(file, "uns", "dict", "0.1.0");
  if (uns < 0)
    return FALSE;
  if (H5Lexists(uns, "neighbors", H5P_DEFAULT) > 0)
    H5Ldelete(uns, "neighbors", H5P_DEFAULT);
  hid_t neighbors = knnwb_h5ad_group(uns, "neighbors", "dict", "0.1.0");
  hid_t params = neighbors >= 0 ? knnwb_h5ad_group(neighbors, "params", "dict", "0.1.0") : -1;
  static const char *const methods[] = {"umap", "gauss", "jaccard", "similarity"};
  const char *connectivities = "connectivities", *distances = "distances";
  const char *method = methods[output->weights], *metric = output->metric;
  int64_t n_neighbors = (int64_t)k + 1; /* scanpy counts the cell itself */
  gboolean ok = params >= 0 &&
                knnwb_h5ad_strings(neighbors, "connectivities_key", &connectivities, 1, "string") &&
                knnwb_h5ad_strings(neighbors, "distances_key", &distances, 1, "string") &&
                knnwb_h5ad_dataset(params, "n_neighbors", H5T_STD_I64LE, H5T_NATIVE_INT64, 1,
                                   &n_neighbors, "numeric-scalar") &&
                knnwb_h5ad_strings(params, "method", &method, 1, "string") &&
                knnwb_h5ad_strings(params, "metric", &metric, 1, "string") &&
                (output->use_rep == NULL ||
                 knnwb_h5ad_strings(params, "use_rep", &output->use_rep, 1, "string"));
  if (params >= 0)
    H5Gclose(params);
  if (neighbors >= 0)
    H5Gclose(neighbors);
  H5Gclose(uns);
  return ok;
}

/* The caller's temporary (the program's empty placeholder) removed before the file is made anew:
 * ext4 writes out, at its last close, a file that was truncated to nothing and written again
 * (auto_da_alloc), which a fresh file is not. */
static void knnwb_h5ad_remove_placeholder(const char *path)
{
  (void)unlink(path); /* (absent: nothing to remove; else the creation says what is wrong) */
}

/* Where an output of the process replaces data (atomic_file.h), the finished file is synced
 * before the caller renames it, as the other writers' files are. */
static gboolean knnwb_h5ad_sync(const char *path, GError **error)
{
  if (!knnwb_atomic_file_syncs_always())
    return TRUE;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  const gboolean synced = fd >= 0 && fsync(fd) == 0;
  const int saved = errno;
  if (fd >= 0)
    close(fd);
  if (!synced)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: fsync failed: %s", path,
                g_strerror(saved));
  return synced;
}

/* Copies from into to (the caller's temporary) in 4 MiB pieces, polling cancel between them; the
 * original is only read. */
static gboolean knnwb_h5ad_copy(const char *from, const char *to, const volatile gint *cancel,
                                GError **error)
{
  enum { PIECE = 4 << 20 };
  int in = open(from, O_RDONLY | O_CLOEXEC);
  if (in >= 0)
    knnwb_h5ad_remove_placeholder(to);
  int out = in >= 0 ? open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
  g_autofree char *buffer = g_malloc(PIECE);
  const char *failed = in < 0 ? from : out < 0 ? to : NULL;
  int saved = errno;
  while (failed == NULL) {
    if (cancel != NULL && g_atomic_int_get(cancel) != 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "%s: interrupted while copying %s", to,
                  from);
      break;
    }
    ssize_t got = read(in, buffer, PIECE);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      failed = got < 0 ? from : NULL;
      saved = errno;
      break;
    }
    for (ssize_t done = 0; done < got && failed == NULL;) {
      ssize_t put = write(out, buffer + done, (size_t)(got - done));
      if (put < 0 && errno != EINTR) {
        failed = to;
        saved = errno;
      }
      done += put > 0 ? put : 0;
    }
  }
  if (failed != NULL)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: %s", failed, g_strerror(saved));
  if (out >= 0 && close(out) != 0 && failed == NULL && (error == NULL || *error == NULL)) {
    failed = to;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: %s", to, g_strerror(errno));
  }
  if (in >= 0)
    close(in);
  return failed == NULL && (error == NULL || *error == NULL);
}

/* The number of cells of an existing AnnData (its obs names), or -1 with error. */
static int64_t knnwb_h5ad_cells(hid_t file, const char *into, GError **error)
{
  hid_t obs = knnwb_h5_exists(file, "obs") ? H5Gopen2(file, "obs", H5P_DEFAULT) : -1;
  g_autofree char *index = obs >= 0 ? knnwb_h5_attribute_string(obs, "_index") : NULL;
  hid_t names = obs >= 0 && knnwb_h5_exists(obs, index != NULL ? index : "_index")
                    ? H5Dopen2(obs, index != NULL ? index : "_index", H5P_DEFAULT)
                    : -1;
  int64_t n = names >= 0 ? knnwb_h5_length(into, names, "obs/_index", error) : -1;
  if (names < 0)
    knnwb_h5_error(error, into, "not an AnnData file with obs names (obs/_index)");
  if (names >= 0)
    H5Dclose(names);
  if (obs >= 0)
    H5Gclose(obs);
  return n;
}

static gboolean knnwb_h5ad_open_output(const char *path, size_t n, const char *const *labels,
                                       const KnnwbH5adOutput *output, hid_t *file, GError **error)
{
  knnwb_h5_quiet();
  if (output->into == NULL) {
    knnwb_h5ad_remove_placeholder(path);
    *file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (*file < 0 || !knnwb_h5ad_skeleton(*file, n, labels)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot write the HDF5 file", path);
      return FALSE;
    }
    return TRUE;
  }
  if (!knnwb_h5ad_copy(output->into, path, output->cancel, error))
    return FALSE;
  *file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  if (*file < 0) {
    knnwb_h5_error(error, output->into, "not an HDF5 file that libhdf5 can open");
    return FALSE;
  }
  int64_t cells = knnwb_h5ad_cells(*file, output->into, error);
  if (cells >= 0 && (size_t)cells != n)
    knnwb_h5_error(error, output->into,
                   "%" G_GINT64_FORMAT " cells, but the graph has %zu: --into takes the file "
                   "the graph was computed from",
                   cells, n);
  return cells >= 0 && (size_t)cells == n;
}

gboolean knnwb_formats_write_h5ad(const char *path, const KnnwbNeighbors *lists,
                                  const char *const *labels, const KnnwbH5adOutput *output,
                                  GError **error)
{
  const size_t n = lists->n_queries;
  g_autofree KnnwbH5adEntry *entries = g_new(KnnwbH5adEntry, MAX(n * lists->k, (size_t)1));
  size_t n_entries = 0, n_symmetric = 0;
  knnwb_h5ad_directed(lists, output->weights, entries, &n_entries);
  qsort(entries, n_entries, sizeof *entries, knnwb_h5ad_entry_compare);
  g_autofree KnnwbH5adEntry *symmetric =
      knnwb_h5ad_symmetric(lists, output->weights, entries, n_entries, &n_symmetric);
  hid_t file = -1;
  if (output->cancel != NULL && g_atomic_int_get(output->cancel) != 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "%s: interrupted", path);
    return FALSE;
  }
  if (!knnwb_h5ad_open_output(path, n, labels, output, &file, error)) {
    if (file >= 0)
      H5Fclose(file);
    return FALSE;
  }
  hid_t obsp = knnwb_h5ad_group(file, "obsp", "dict", "0.1.0");
  gboolean ok = obsp >= 0 && knnwb_h5ad_csr(obsp, "distances", n, entries, n_entries, TRUE) &&
                knnwb_h5ad_csr(obsp, "connectivities", n, symmetric, n_symmetric, FALSE) &&
                knnwb_h5ad_uns(file, lists->k, output);
  if (obsp >= 0)
    H5Gclose(obsp);
  ok = H5Fclose(file) >= 0 && ok;
  if (!ok) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: writing the AnnData file failed", path);
    return FALSE;
  }
  return knnwb_h5ad_sync(path, error);
}

#else

gboolean knnwb_formats_write_h5ad(const char *path, const KnnwbNeighbors *lists,
                                  const char *const *labels, const KnnwbH5adOutput *output,
                                  GError **error)
{
  (void)lists;
  (void)labels;
  (void)output;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
              "%s: .h5ad output needs libhdf5, and this knnwb was built without it (Debian: "
              "libhdf5-dev)",
              path);
  return FALSE;
}

#endif

static const KnnwbEnumName knnwb_h5ad_weights_names[] = {
    KNNWB_H5AD_WEIGHTS_NAMES(KNNWB_ENUM_ENTRY)};
const KnnwbEnumTable knnwb_h5ad_weights_table = KNNWB_ENUM_TABLE(
    knnwb_h5ad_weights_names, 0, " or ", "unknown weights ", ": use ", "", "(null)");
