/* The knnwb library: include this one header. Link with `pkg-config --cflags --libs knnwb`. */
#ifndef KNNWB_H
#define KNNWB_H

#include <knnwb/error.h>
#include <knnwb/enum_names.h>
#include <knnwb/matrix.h>
#include <knnwb/knn.h>
#include <knnwb/graph.h>
#include <knnwb/version.h>
#include <knnwb/parallel.h>
#include <knnwb/formats.h>
#include <knnwb/atomic_file.h>
#include <knnwb/write_control.h>
#include <knnwb/text_fields.h>
#include <knnwb/clustering.h>
#include <knnwb/community.h>
#include <knnwb/annotation.h>
#include <knnwb/write_matrix.h>
#include <knnwb/drawing.h>
#include <knnwb/metafeatures.h>
#include <knnwb/phenotype.h>
#include <knnwb/neighbourhood.h>
#include <knnwb/classify.h>
#include <knnwb/evaluation.h>

#endif
