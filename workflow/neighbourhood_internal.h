/* Shared by the neighbourhood search (neighbourhood.c) and its split-memory helpers
 * (neighbourhood_split.c). */
#ifndef KNNWB_NEIGHBOURHOOD_INTERNAL_H
#define KNNWB_NEIGHBOURHOOD_INTERNAL_H

#include <knnwb/neighbourhood.h>

/* The rows a search reads: the whole matrix, or (one rank of a split-memory group) this rank's
 * block, rows first[rank] .. first[rank + 1] - 1 of first[size]. */
typedef struct {
  const KnnwbMatrix *data;
  const KnnwbKnnGroup *group; /* NULL: data is whole */
  const size_t *first;        /* group: size + 1 block starts */
  size_t n_rows;              /* every rank's rows */
  /* search: stop before the ranking (members), whose rows the caller gathers */
  gboolean defer_rank;
  KnnwbMatrix **members; /* split, when not NULL: rank 0 gets the vertices' rows here */
} KnnwbNeighbourhoodRows;

/* The rank that holds row (split rows). O(ranks). */
int knnwb_neighbourhood_rows_owner(const KnnwbNeighbourhoodRows *rows, int64_t row);

/* The rows wanted (every rank passes the same list), in that order: every rank sends the ones it
 * holds; *values (n_wanted x d) on every rank, or on rank 0 only when root_only (NULL on the
 * others). Collective; the ranks agree before the exchange, so every rank returns the same result.
 * Errors: KNNWB_ERROR_NO_MEMORY (the lowest failing rank's, "rank R: " in front), transport
 * errors. */
gboolean knnwb_neighbourhood_rows_gather(const KnnwbNeighbourhoodRows *rows, const int64_t *wanted,
                                         size_t n_wanted, gboolean root_only, KnnwbMatrix **values,
                                         GError **error);

/* Rank 0's *list of *n rows to every rank (the others' *list is new, g_free). Collective. */
gboolean knnwb_neighbourhood_rows_broadcast(const KnnwbKnnGroup *group, int64_t **list, size_t *n,
                                            GError **error);

#endif
