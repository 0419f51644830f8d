/* Shared by the files of core/group/: the order-keeping float keys of the shared thresholds
 * (knn_group_bounds.c) that the candidate merge (knn_group_merge.c) also sorts by. */
#ifndef KNNWB_GROUP_INTERNAL_H
#define KNNWB_GROUP_INTERNAL_H

#include <stdint.h>
#include "group/group.h"

/** A float as an int64 key in the same order (an int64 reduction finds the smallest), and back. */
int64_t knnwb_group_bound_key(float value);
float knnwb_group_bound_value(int64_t key);

#endif
