/*
 * The threshold filters of half-precision tiles of DOT and ABS_DOT scores (the FP16 screens of
 * every metric but euclidean; see tile_filter.cu for the others and select_internal.h for the
 * state): filter_half_stream_kernel streams ordinary tiles, filter_half_kernel filters the column
 * stages of fresh tiles, where most pairs pass.
 */
#include "tile_filter_exact.cuh"

#include <stdlib.h>
#include <string.h>

namespace knnwb_cuda
{
namespace
{

constexpr int kFilterThreads = 256;

/*
 * The half-tile filter for DOT and ABS_DOT (the FP16 screens of every metric but euclidean): as
 * filter_kernel, but each thread reads 8 adjacent halves per 16-byte load (8 rows x 8 columns, the
 * 128 bytes in flight per thread of the float kernel) and the tests reduce in half precision: the
 * largest product (magnitude) of a row or column, converted and scaled once. Conversion and
 * scaling by a power of two are monotone, so that equals the largest of the scaled float products
 * filter_kernel takes, bit for bit: the same rows and columns go to the exact passes, and the
 * same candidates pass. Grid: (ceil(n_cols / 2048), ceil(n_rows / 8)); needs ld, the tile's column
 * offset and every stage start a multiple of 8.
 * Measured (one H200, ncu and the trace): 72-77 us per 8192^2 tile of 1,533,876 x 295 rows, as
 * the 4-column kernel, at 37-40% of DRAM bandwidth. Moving the exact passes into a kernel of their
 * own (the filter queuing its warps with a pass) was slower (0.180 ms per tile in the loop). Now
 * used for the column stages of fresh tiles, where most pairs pass and short rows of the grid keep
 * every multiprocessor busy; ordinary tiles stream (filter_half_stream_kernel).
 */
constexpr int kHalfFilterRows = 8;
constexpr int kHalfFilterCols = kFilterThreads * 8;

template <int kKind> __device__ __forceinline__ __half2 half_magnitude(__half2 v)
{
  return kKind == KNNWB_SCORE_ABS_DOT ? __habs2(v) : v;
}

/* The largest of 8 products (magnitudes for ABS_DOT); NaNs (outside the tile) are ignored. */
template <int kKind> __device__ __forceinline__ __half2 half_max8(const uint4 &raw)
{
  __half2 a, b, c, d;
  memcpy(&a, &raw.x, sizeof a);
  memcpy(&b, &raw.y, sizeof b);
  memcpy(&c, &raw.z, sizeof c);
  memcpy(&d, &raw.w, sizeof d);
  return __hmax2(__hmax2(half_magnitude<kKind>(a), half_magnitude<kKind>(b)),
                 __hmax2(half_magnitude<kKind>(c), half_magnitude<kKind>(d)));
}

/* raw with the halves at columns j0 + p >= n_cols replaced by NaN (not pairs). */
__device__ __forceinline__ uint4 half_mask_columns(uint4 raw, int j0, int n_cols)
{
  uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int p = 0; p < 8; p++)
    if (j0 + p >= n_cols)
      w[p / 2] = (w[p / 2] & (p % 2 ? 0x0000ffffu : 0xffff0000u)) | (p % 2 ? 0x7e000000u : 0x7e00u);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

/*
 * The fast tests of filter_half_kernel for the thread's 8 rows i0.. and 8 columns j0..: bit r of
 * *row_hits when a product of row i0 + r beats its threshold, bit u of *col_hits (do_cols) when
 * one of column j0 + u beats the column's. Reads the 8 x 8 halves with 8 16-byte loads.
 */
template <int kKind, int kRows>
__device__ __forceinline__ void half_hits(const SelectState &st, const TileGeom &g, int i0, int j0,
                                          unsigned *row_hits, unsigned *col_hits)
{
  const float inf = __int_as_float(0x7f800000);
  const uint4 outside = make_uint4(0x7e007e00u, 0x7e007e00u, 0x7e007e00u, 0x7e007e00u);
  const __half *tile = static_cast<const __half *>(g.tile);
  uint4 raw[kRows];
#pragma unroll
  for (int r = 0; r < kRows; r++) {
    const int i = i0 + r;
    raw[r] = (i < g.n_rows && j0 < g.n_cols)
                 ? __ldg(reinterpret_cast<const uint4 *>(tile + (size_t)i * g.ld + j0))
                 : outside;
  }
  float row_thr[kRows];
#pragma unroll
  for (int r = 0; r < kRows; r++)
    row_thr[r] = i0 + r < g.n_rows ? st.thr[g.row_state0 + i0 + r] : -inf;
  unsigned rows = 0;
  const __half2 nan2 = __halves2half2(__ushort_as_half(0x7e00), __ushort_as_half(0x7e00));
  __half2 col_max[4] = {nan2, nan2, nan2, nan2};
#pragma unroll
  for (int r = 0; r < kRows; r++) {
    uint4 v = raw[r];
    if (j0 + 8 > g.n_cols)
      v = half_mask_columns(v, j0, g.n_cols);
    const __half2 m2 = half_max8<kKind>(v);
    const float largest = fmaxf(__low2float(m2), __high2float(m2)) * g.tile_scale;
    rows |= (unsigned)(1.0f - largest < row_thr[r]) << r;
    if (g.do_cols) {
      __half2 h[4];
      memcpy(h, &v, sizeof h);
#pragma unroll
      for (int w = 0; w < 4; w++)
        col_max[w] = __hmax2(col_max[w], half_magnitude<kKind>(h[w]));
    }
  }
  unsigned cols = 0;
  if (g.do_cols) {
#pragma unroll
    for (int u = 0; u < 8; u++) {
      const int j = j0 + u;
      const float thr = j < g.n_cols ? st.thr[g.col_state0 + j] : -inf;
      const float largest =
          (u % 2 ? __high2float(col_max[u / 2]) : __low2float(col_max[u / 2])) * g.tile_scale;
      cols |= (unsigned)(1.0f - largest < thr) << u;
    }
  }
  *row_hits = rows;
  *col_hits = cols;
}

/* kRows: 8 (the default), or 4 with 8 blocks per multiprocessor instead of 4 (to compare). */
template <int kKind, bool kGroups, int kRows>
__global__ void __launch_bounds__(kFilterThreads, kRows <= 4 ? 8 : 4)
    filter_half_kernel(const __grid_constant__ SelectState st, const __grid_constant__ TileGeom g)
{
  const int j0 = blockIdx.x * kHalfFilterCols + threadIdx.x * 8;
  const int i0 = blockIdx.y * kRows;
  unsigned row_hits, col_hits;
  half_hits<kKind, kRows>(st, g, i0, j0, &row_hits, &col_hits);
  const unsigned warp_rows = __reduce_or_sync(kFullMask, row_hits);
  if (warp_rows)
    filter_rows_exact<8, kKind, kGroups>(st, g, warp_rows, i0, j0);
  if (col_hits)
    filter_cols_exact<kRows, kKind, kGroups>(st, g, col_hits, i0, j0);
}

/*
 * The streaming half filter of an ordinary tile (rows with thresholds): grid (ceil(n_cols / 2048),
 * ceil(n_rows / 64)); each thread walks 8 adjacent columns down the block's 64 rows (16 chunks of
 * 4 rows, see stream_chunk_row), a chunk at a time, with the next 4 rows' loads (and their
 * thresholds) in flight while it tests the current ones, and (kPrefetch) the chunk after that on
 * its way to L2. The tests are filter_half_kernel's, bit for bit: each row's largest product
 * against its threshold, each column's largest over the block's rows against the column's; the
 * exact passes, the same functions, run after the walk for the rows and columns found. So the same
 * pairs pass, in another order (the candidate buffers are unordered).
 *
 * Why: after a row's first tile almost nothing passes (about 10,000 candidates per 8,192^2 tile of
 * 1,533,876 x 128 Pearson rows), yet filter_half_kernel, whose threads read one 8 x 8 block and
 * exit, ran at half the DRAM bandwidth (ncu, one H200, a mid-loop tile: 57 us, 2.39 TB/s, 28.8%
 * achieved occupancy of 50%, warps waiting on their loads half of the time): a thread's loads
 * were in flight only at its start, and a block's slot waited for its slowest warp.
 */
constexpr int kStreamChunk = 4; /* rows tested at once; the next chunk's loads are in flight */

/* Rows i0 .. i0 + kStreamChunk - 1 of the thread's 8 columns, with the rows' thresholds; rows at
 * or past `limit` (the block's end) and columns past the tile: NaN products, -inf thresholds. */
__device__ __forceinline__ void stream_load(const SelectState &st, const TileGeom &g, int limit,
                                            int i0, int j0, uint4 *raw, float *thr)
{
  const uint4 outside = make_uint4(0x7e007e00u, 0x7e007e00u, 0x7e007e00u, 0x7e007e00u);
  const float inf = __int_as_float(0x7f800000);
  const __half *tile = static_cast<const __half *>(g.tile);
#pragma unroll
  for (int r = 0; r < kStreamChunk; r++) {
    const int i = i0 + r;
    raw[r] = (i < limit && j0 < g.n_cols)
                 ? __ldg(reinterpret_cast<const uint4 *>(tile + (size_t)i * g.ld + j0))
                 : outside;
    thr[r] = i < limit ? st.thr[g.row_state0 + i] : -inf;
  }
}

/* Asks L2 for rows i0 .. i0 + kStreamChunk - 1 (below limit) of the thread's columns (no
 * registers held). */
__device__ __forceinline__ void stream_prefetch(const TileGeom &g, int limit, int i0, int j0)
{
  const __half *tile = static_cast<const __half *>(g.tile);
#pragma unroll
  for (int r = 0; r < kStreamChunk; r++)
    if (i0 + r < limit && j0 < g.n_cols)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(tile + (size_t)(i0 + r) * g.ld + j0));
}

/* The first row of chunk c of this block: chunks are dealt to the blocks of a column in turn, so
 * that the blocks running at once read neighbouring rows (a block owning 64 contiguous rows made
 * them read 1 MiB apart: 233 us a tile at 13% of DRAM bandwidth). */
__device__ __forceinline__ int stream_chunk_row(int c)
{
  return (c * (int)gridDim.y + (int)blockIdx.y) * kStreamChunk;
}

/* The exact column pass of filter_half_stream_kernel: as filter_cols_exact, for the thread's
 * columns j0 + u with bit u of col_hits set, over the block's chunks of rows. */
template <int kKind, bool kGroups, int kStreamChunks>
__device__ __noinline__ void stream_cols_exact(const SelectState &st, const TileGeom &g,
                                               unsigned col_hits, int j0)
{
  for (; col_hits; col_hits &= col_hits - 1) {
    const int j = j0 + __ffs(col_hits) - 1;
    const int row = g.col_state0 + j;
    const float thr = st.thr[row];
    const int col_grp = kGroups ? g.col_group[g.col_global0 + j] : -1;
    unsigned long long ok = 0; /* bit c * kStreamChunk + r: row r of chunk c passes */
    for (int c = 0; c < kStreamChunks; c++) {
      const int i0 = stream_chunk_row(c);
#pragma unroll
      for (int r = 0; r < kStreamChunk; r++) {
        const int rg = g.row_global0 + i0 + r;
        const bool pass = kind_score<kKind>(tile_product(g, i0 + r, j), 0.0f) < thr &&
                          !(g.invalid && g.invalid[rg]) && (!kGroups || g.row_group[rg] != col_grp);
        ok |= (unsigned long long)pass << (c * kStreamChunk + r);
      }
    }
    if (ok == 0)
      continue;
    int pos = reserve_candidates(st, row, __popcll(ok), (int)(kColumnFlag | (uint32_t)j));
    for (; ok; ok &= ok - 1) {
      const int bit = __ffsll(ok) - 1;
      const int i = stream_chunk_row(bit / kStreamChunk) + bit % kStreamChunk;
      if (pos < st.cap) {
        st.cand_score[(size_t)row * st.cap + pos] = kind_score<kKind>(tile_product(g, i, j), 0.0f);
        st.cand_index[(size_t)row * st.cap + pos] = g.row_global0 + i;
      }
      pos++;
    }
  }
}

/* kStreamRows: rows of a block (64, or 16 to compare), which the column tests span. */
template <int kKind, bool kGroups, int kStreamRows>
__global__ void __launch_bounds__(kFilterThreads, 4)
    filter_half_stream_kernel(const __grid_constant__ SelectState st,
                              const __grid_constant__ TileGeom g)
{
  static_assert(kStreamRows <= 64 && kStreamRows % kStreamChunk == 0, "a block's rows in 64 bits");
  constexpr int kStreamChunks = kStreamRows / kStreamChunk;
  const int j0 = blockIdx.x * kHalfFilterCols + threadIdx.x * 8;
  const __half2 nan2 = __halves2half2(__ushort_as_half(0x7e00), __ushort_as_half(0x7e00));
  __half2 col_max[4] = {nan2, nan2, nan2, nan2};
  uint4 raw[kStreamChunk], next[kStreamChunk];
  float thr[kStreamChunk], next_thr[kStreamChunk];
  /* bit c * kStreamChunk + r: some lane's columns of row r of chunk c beat the row's threshold */
  unsigned long long pending = 0;
  stream_load(st, g, g.n_rows, stream_chunk_row(0), j0, raw, thr);
  if (kStreamChunks > 1)
    stream_prefetch(g, g.n_rows, stream_chunk_row(1), j0);
  for (int c = 0; c < kStreamChunks && stream_chunk_row(c) < g.n_rows; c++) {
    /* past the last chunk: loads nothing (rows at n_rows and beyond are outside) */
    stream_load(st, g, g.n_rows, c + 1 < kStreamChunks ? stream_chunk_row(c + 1) : g.n_rows, j0,
                next, next_thr);
    if (c + 2 < kStreamChunks)
      stream_prefetch(g, g.n_rows, stream_chunk_row(c + 2), j0);
    unsigned rows = 0;
#pragma unroll
    for (int r = 0; r < kStreamChunk; r++) {
      uint4 v = raw[r];
      if (j0 + 8 > g.n_cols)
        v = half_mask_columns(v, j0, g.n_cols);
      const __half2 m2 = half_max8<kKind>(v);
      const float largest = fmaxf(__low2float(m2), __high2float(m2)) * g.tile_scale;
      rows |= (unsigned)(1.0f - largest < thr[r]) << r;
      if (g.do_cols) {
        __half2 h[4];
        memcpy(h, &v, sizeof h);
#pragma unroll
        for (int w = 0; w < 4; w++)
          col_max[w] = __hmax2(col_max[w], half_magnitude<kKind>(h[w]));
      }
    }
    /* no call inside the loop: registers live across a call wait for their loads and spill */
    pending |= (unsigned long long)__reduce_or_sync(kFullMask, rows) << (c * kStreamChunk);
#pragma unroll
    for (int r = 0; r < kStreamChunk; r++) {
      raw[r] = next[r];
      thr[r] = next_thr[r];
    }
  }
  /* the exact row passes of the rows some lane of the warp found (re-read from the caches);
   * pending is the same in every lane */
  while (pending) {
    const int c = (__ffsll(pending) - 1) / kStreamChunk;
    const unsigned chunk_mask = (1u << kStreamChunk) - 1;
    const unsigned bits = (unsigned)(pending >> (c * kStreamChunk)) & chunk_mask;
    filter_rows_exact<8, kKind, kGroups>(st, g, bits, stream_chunk_row(c), j0);
    pending &= ~((unsigned long long)chunk_mask << (c * kStreamChunk));
  }
  if (!g.do_cols)
    return;
  const float inf = __int_as_float(0x7f800000);
  unsigned cols = 0;
#pragma unroll
  for (int u = 0; u < 8; u++) {
    const int j = j0 + u;
    const float col_thr = j < g.n_cols ? st.thr[g.col_state0 + j] : -inf;
    const float largest =
        (u % 2 ? __high2float(col_max[u / 2]) : __low2float(col_max[u / 2])) * g.tile_scale;
    cols |= (unsigned)(1.0f - largest < col_thr) << u;
  }
  if (cols != 0)
    stream_cols_exact<kKind, kGroups, kStreamChunks>(st, g, cols, j0);
}

/* KNNWB_CUDA_HALF_FILTER: "block" (the default) filters every half tile with filter_half_kernel,
 * "block4" with its 4-row variant, "stream" and "stream16" stream ordinary tiles in blocks of 64 or
 * 16 rows (to compare). */
enum HalfFilterMode { kHalfBlock, kHalfBlock4, kHalfStream, kHalfStream16 };

HalfFilterMode half_filter_mode(void)
{
  /* read at every launch (well under a microsecond against a tile's 50), so tests can switch it */
  const char *v = getenv("KNNWB_CUDA_HALF_FILTER");
  if (v == nullptr)
    return kHalfBlock;
  if (strcmp(v, "block4") == 0)
    return kHalfBlock4;
  if (strcmp(v, "stream") == 0)
    return kHalfStream;
  if (strcmp(v, "stream16") == 0)
    return kHalfStream16;
  return kHalfBlock;
}

template <int kKind, bool kGroups, int kRows>
void launch_filter_half_block(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  const dim3 grid((geom.n_cols + kHalfFilterCols - 1) / kHalfFilterCols,
                  (geom.n_rows + kRows - 1) / kRows);
  filter_half_kernel<kKind, kGroups, kRows><<<grid, kFilterThreads, 0, stream>>>(state, geom);
}

template <int kKind, bool kGroups, int kRows>
void launch_filter_half_stream(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  const dim3 grid((geom.n_cols + kHalfFilterCols - 1) / kHalfFilterCols,
                  (geom.n_rows + kRows - 1) / kRows);
  filter_half_stream_kernel<kKind, kGroups, kRows>
      <<<grid, kFilterThreads, 0, stream>>>(state, geom);
}

template <int kKind, bool kGroups>
void launch_filter_half_kind(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  const HalfFilterMode mode = geom.fresh ? kHalfBlock : half_filter_mode();
  if (mode == kHalfBlock4)
    launch_filter_half_block<kKind, kGroups, 4>(state, geom, stream);
  else if (mode == kHalfStream)
    launch_filter_half_stream<kKind, kGroups, 64>(state, geom, stream);
  else if (mode == kHalfStream16)
    launch_filter_half_stream<kKind, kGroups, 16>(state, geom, stream);
  else
    launch_filter_half_block<kKind, kGroups, kHalfFilterRows>(state, geom, stream);
}

template <bool kGroups>
void launch_filter_half_groups(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  if (geom.kind == KNNWB_SCORE_DOT)
    launch_filter_half_kind<KNNWB_SCORE_DOT, kGroups>(state, geom, stream);
  else
    launch_filter_half_kind<KNNWB_SCORE_ABS_DOT, kGroups>(state, geom, stream);
}

} // namespace

void launch_filter_half(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  if (geom.row_group)
    launch_filter_half_groups<true>(state, geom, stream);
  else
    launch_filter_half_groups<false>(state, geom, stream);
}

} // namespace knnwb_cuda
