/* Writes test NPY files. */
#ifndef KNNWB_TEST_NPY_H
#define KNNWB_TEST_NPY_H

#include <string.h>
#include <glib.h>

/* A float32 C-order NPY file dir/big.npy of n x d deterministic values in [0, 1) (LCG from seed). */
static inline char *knnwb_test_write_npy(const char *dir, size_t n, size_t d, guint32 seed)
{
  g_autofree char *header =
      g_strdup_printf("{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", n, d);
  size_t padded = (10 + strlen(header) + 1 + 63) / 64 * 64 - 10; /* + the newline, 64-aligned */
  g_autoptr(GString) bytes = g_string_new_len("\x93NUMPY\x01\x00", 8);
  guint16 length = (guint16)padded;
  g_string_append_len(bytes, (const char *)&length, 2);
  g_string_append(bytes, header);
  while (bytes->len < 10 + padded - 1)
    g_string_append_c(bytes, ' ');
  g_string_append_c(bytes, '\n');
  guint32 state = seed;
  for (size_t i = 0; i < n * d; i++) {
    state = state * 1664525u + 1013904223u;
    float value = (float)(state >> 8) / 16777216.0f;
    g_string_append_len(bytes, (const char *)&value, sizeof value);
  }
  char *path = g_build_filename(dir, "big.npy", NULL);
  g_assert_true(g_file_set_contents(path, bytes->str, (gssize)bytes->len, NULL));
  return path;
}

#endif
