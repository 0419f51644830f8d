/*
 * The tile GEMM's timed choices kept on disk (gemm_cache.cu), so that a later process on the same
 * GPU model and libraries takes its choice without timing (lt_gemm_choose, tile_scores_lt.cu).
 * Host code only (no GPU, no CUDA call): the file's lines, its path and its updates.
 */
#pragma once

#include <cstdint>
#include <string>

namespace knnwb_cuda
{

/** What a choice was timed for: the GPU model (name, compute capability, multiprocessors), the
 * libraries (cuBLASLt's version, the driver's) and the tile's shape. */
struct GemmCacheKey {
  std::string model; /* no whitespace (gemm_cache_model makes it so) */
  long cublaslt = 0, driver = 0;
  int tile = 0, dpad = 0;
};

/** A choice: cuBLASLt's algorithm (lt, its 64 opaque bytes as cuBLASLt's cublasLtMatmulAlgo_t
 * holds them) or cublasGemmEx (lt false, algo unused). */
struct GemmCacheEntry {
  GemmCacheKey key;
  bool lt = false;
  uint64_t algo[8] = {};
};

/** A model name for the key: name's whitespace as '_', then "/major.minor/multiprocessors". */
std::string gemm_cache_model(const char *name, int major, int minor, int multiprocessors);

/** The file: KNNWB_CUDA_GEMM_CACHE (a path; "0" or "" keeps none), else
 * $XDG_CACHE_HOME/knnwb/gemm-choices, else $HOME/.cache/knnwb/gemm-choices; "" when none. */
std::string gemm_cache_path();

/** One line of the file (with its '\n'). */
std::string gemm_cache_format(const GemmCacheEntry &entry);

/** Parses one line (with or without its '\n'); false for anything but a well-formed line of this
 * version ("knnwb-gemm-1"): such lines are ignored, never an error. */
bool gemm_cache_parse(const std::string &line, GemmCacheEntry *entry);

/** The entry for key in the file at path: false when there is none, or the file cannot be read.
 * Reads at most the first 1 MiB. */
bool gemm_cache_lookup(const std::string &path, const GemmCacheKey &key, GemmCacheEntry *entry);

/** Keeps entry in the file at path, in place of an entry of the same key: the file's other
 * well-formed lines are kept (the newest 255), written to a temporary beside it and renamed over
 * it, so that a reader sees the old file or the new one; the directory is made when missing.
 * false (nothing changed) when any step fails. Thread-safe (a process's stores go one at a
 * time); two processes storing at once: one's file wins, and the other's entry is timed again by
 * a later run. */
bool gemm_cache_store(const std::string &path, const GemmCacheEntry &entry);

} // namespace knnwb_cuda
