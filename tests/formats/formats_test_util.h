/* Helpers for the formats tests: temporary files and error assertions. */
#ifndef KNNWB_FORMATS_TEST_UTIL_H
#define KNNWB_FORMATS_TEST_UTIL_H

#include <knnwb/error.h>
#include <knnwb/formats.h>
#include <glib.h>

/** A per-process temporary directory, removed (with its files) at exit. */
const char *formats_test_dir(void);

/** Writes length bytes (strlen when length is -1) to a new file in the test dir; returns its path.
 */
char *formats_test_write(const char *name, const char *content, gssize length);

/** Number of entries in a directory (to prove no temporary file was left behind). */
guint formats_test_count_entries(const char *directory);

/**
 * Reads path with options (format set by the caller), expects KNNWB_ERROR_PARSE whose message
 * starts with "path:LINE:" (line > 0) or "path: " (line == 0) and contains needle.
 */
void formats_test_expect_parse_error(const char *path, const KnnwbReadOptions *options, int line,
                                     const char *needle);

#endif
