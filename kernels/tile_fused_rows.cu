/*
 * The fused tile for narrow rows on Hopper (dpad <= 128 halves, the small-d case: single-cell
 * matrices, metafeatures of a few hundred samples): the FP16 score GEMM on wgmma and the threshold
 * filter in one kernel, each block's 128 query rows against a strip of the tile's columns.
 *
 * Why not tile_fused_wgmma.cu's kernel: it does one block of 128 x 128 products per launch block,
 * so every block waits for its operands, does a few MMAs (two K steps at dpad 128), then tests
 * them while its tensor cores idle, and copies every block with a pass (almost all of them, after
 * a row's first tiles: about one pass per row and column of a tile) to shared memory for the
 * exact passes behind two block-wide barriers. Here:
 *   - a block's query rows (A, at most 2 boxes of 128 x 64 halves) are copied once and stay; the
 *     strip's 128-column blocks (B) come through two buffers, the next one's copy in flight while
 *     this one is multiplied and tested, a buffer refilled once both warpgroups' MMAs read it
 *     (an "empty" mbarrier of two arrivals);
 *   - the tests and the exact passes are warp-local: a row's 128 products are in one quad of
 *     lanes, which tests them against the row's threshold (loaded once a block) and appends the
 *     passing ones itself; a column's 16 products of a warp are in 8 lanes, tested by the warp
 *     against the column's threshold, appended by the warp. No block barrier after the MMAs, no
 *     copy to shared memory: the other warpgroup and the SM's other block keep the tensor cores
 *     busy meanwhile.
 * The grid is sized so that every block is resident at once (two an SM), so a block's strip is
 * the tile's columns divided among gridDim.x blocks of the same rows.
 *
 * The tests are those of the filter kernel on the half tile cuBLAS would write: the accumulators
 * times alpha rounded to half, a row (column) tested by its largest product, each product of a
 * passing line tested exactly (score < threshold, invalid references, the self pair on rows). The
 * lists then follow from core's certificate as for any FP16 screen, whatever the order of a sum.
 *
 * Built only for sm_90a (kernels/CMakeLists.txt), like tile_fused_wgmma.cu, whose launcher calls
 * this one for narrow rows (KNNWB_CUDA_FUSED_MMA=block keeps the per-block kernel).
 */
#include "tile_wgmma.cuh"

#include <algorithm>
#include <math.h>

namespace knnwb_cuda
{

#if defined(KNNWB_WGMMA)
namespace
{

constexpr int kThreads = 256;
constexpr int kMaxBoxes = 2; /* dpad <= 128 */
constexpr int kBlocksPerSm = 2;

/* Arms bar for B's boxes of the columns n0.. and copies them to dst. One thread. */
template <int kBoxes>
__device__ __forceinline__ void load_columns(uint32_t dst, uint32_t bar, const CUtensorMap &map_r,
                                             int n0)
{
  barrier_expect(bar, kBoxes * kOperandBytes);
#pragma unroll
  for (int kb = 0; kb < kBoxes; kb++)
    copy_box(dst + kb * kOperandBytes, map_r, kb * kBlockK, n0, bar);
}

/*
 * This lane's column thresholds of the 128 columns n0..: columns (2 (lane / 4) + t) 8 +
 * 2 (lane mod 4) + e for t, e in {0, 1}, the ones it tests after the column reductions; -inf
 * (nothing passes) past the tile or without a column pass.
 */
__device__ __forceinline__ void column_thresholds(const SelectState &st, const TileGeom &g, int n0,
                                                  float (&thr)[2][2])
{
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int t = 0; t < 2; t++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const int j = n0 + (2 * (lane >> 2) + t) * 8 + 2 * (lane & 3) + e;
      thr[t][e] = g.do_cols && j < g.n_cols ? st.thr[g.col_state0 + j] : -INFINITY;
    }
}

/* The score of a product held as half x (times tile_scale), as the filter kernel computes it. */
template <int kKind> __device__ __forceinline__ float half_score(float x, float scale)
{
  return 1.0f - magnitude<kKind>(x * scale);
}

/*
 * The block's passing pairs, staged in shared memory until the kernel ends: appending a pair to
 * its row's candidate buffer takes an atomic on the row's count in global memory, a round trip
 * to L2 that the warp (and, through the warpgroup's MMAs, the block) would wait for in every
 * column block with a pass. Staged, a pair costs a shared-memory atomic; the block's pairs then
 * reserve their slots all at once (flush_staged). A pair is (entry: tile-local line, kColumnFlag
 * for a column, as the merge queue takes it; candidate; score).
 */
constexpr int kStageCap = 1024;
constexpr int kStageBytes = kStageCap * 12 + 16;

struct Staging {
  int *count;
  int *entry;
  int *cand;
  float *score;
};

__device__ __forceinline__ Staging staging_at(unsigned char *p)
{
  Staging s;
  s.count = reinterpret_cast<int *>(p);
  s.entry = reinterpret_cast<int *>(p + 16);
  s.cand = s.entry + kStageCap;
  s.score = reinterpret_cast<float *>(s.cand + kStageCap);
  return s;
}

/* A's boxes, then two buffers of B's, the staging, plus the slack that aligns the boxes to 1024
 * bytes (dynamic shared memory is only 16-byte aligned by contract). */
template <int kBoxes> constexpr int rows_smem_bytes()
{
  return 3 * kBoxes * kOperandBytes + kStageBytes + 1024;
}

/* Appends one pair to its state row's candidate buffer now (reserve_candidates). */
__device__ __forceinline__ void append_now(const SelectState &st, const TileGeom &g, int entry,
                                           int cand, float score)
{
  const int row = (uint32_t)entry & kColumnFlag
                      ? g.col_state0 + (int)((uint32_t)entry & ~kColumnFlag)
                      : g.row_state0 + entry;
  const int pos = reserve_candidates(st, row, 1, entry);
  if (pos < st.cap) {
    st.cand_score[(size_t)row * st.cap + pos] = score;
    st.cand_index[(size_t)row * st.cap + pos] = cand;
  }
}

/* Stages one pair, or appends it now once the staging is full. */
__device__ __forceinline__ void stage_pair(const SelectState &st, const TileGeom &g,
                                           const Staging &s, int entry, int cand, float score)
{
  const int pos = atomicAdd(s.count, 1);
  if (pos < kStageCap) {
    s.entry[pos] = entry;
    s.cand[pos] = cand;
    s.score[pos] = score;
  } else {
    append_now(st, g, entry, cand, score);
  }
}

/* Appends every staged pair (the whole block, after a block barrier). */
__device__ __forceinline__ void flush_staged(const SelectState &st, const TileGeom &g,
                                             const Staging &s)
{
  const int n = min(*s.count, kStageCap);
  for (int e = threadIdx.x; e < n; e += blockDim.x)
    append_now(st, g, s.entry[e], s.cand[e], s.score[e]);
}

/*
 * The exact pass of tile row i in this lane (its half products v[nt][h]: columns n0 + 8 nt +
 * col_base + e), for lanes whose quad found the row's largest product passing: each product
 * against the row's threshold, invalid references and the self pair excluded.
 */
template <int kKind>
__device__ __forceinline__ void stage_row(const SelectState &st, const TileGeom &g,
                                          const Staging &s, const __half2 (&v)[16][2], int h, int i,
                                          int n0, int col_base, float thr)
{
#pragma unroll
  for (int nt = 0; nt < 16; nt++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const int j = n0 + nt * 8 + col_base + e;
      const int cand = g.col_global0 + j;
      const float score =
          half_score<kKind>(e ? __high2float(v[nt][h]) : __low2float(v[nt][h]), g.tile_scale);
      if (j < g.n_cols && score < thr && !(g.invalid && g.invalid[cand]) &&
          !(g.self && cand == g.row_global0 + i))
        stage_pair(st, g, s, i, cand, score);
    }
}

/*
 * The exact passes of the columns whose bit is set in some lane's col_bits (bit 2 t + e: column
 * (2 (lane / 4) + t) 8 + 2 (lane mod 4) + e of the block, its threshold col_thr[t][e]), one column
 * at a time over the warp's 16 rows (rows row_base + 8 h of the lanes with the column's lane mod
 * 4), invalid references excluded. Every lane calls it.
 */
template <int kKind>
__device__ __forceinline__ void
stage_columns(const SelectState &st, const TileGeom &g, const Staging &s, const __half2 (&v)[16][2],
              unsigned col_bits, const float (&col_thr)[2][2], int m0, int n0, int row_base)
{
  const int lane = threadIdx.x & 31;
  for (;;) {
    const unsigned who = __ballot_sync(kFullMask, col_bits != 0);
    if (!who)
      return;
    const int src = __ffs(who) - 1;
    const int bit = __ffs(__shfl_sync(kFullMask, col_bits, src)) - 1;
    if (lane == src)
      col_bits &= col_bits - 1;
    const int t = bit >> 1, e = bit & 1;
    const int nt = 2 * (src >> 2) + t;
    const int j = n0 + nt * 8 + 2 * (src & 3) + e;
    const float mine =
        t ? (e ? col_thr[1][1] : col_thr[1][0]) : (e ? col_thr[0][1] : col_thr[0][0]);
    const float thr = __shfl_sync(kFullMask, mine, src);
    if ((lane & 3) != (src & 3))
      continue;
    /* the column's products in this lane (nt is the same in every lane: selects, no local array) */
    __half2 x2[2] = {v[0][0], v[0][1]};
#pragma unroll
    for (int u = 1; u < 16; u++)
      if (u == nt) {
        x2[0] = v[u][0];
        x2[1] = v[u][1];
      }
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int i = m0 + row_base + 8 * h;
      const int cand = g.row_global0 + i;
      const float score =
          half_score<kKind>(e ? __high2float(x2[h]) : __low2float(x2[h]), g.tile_scale);
      if (i < g.n_rows && score < thr && !(g.invalid && g.invalid[cand]))
        stage_pair(st, g, s, (int)(kColumnFlag | (uint32_t)j), cand, score);
    }
  }
}

/*
 * The filter of one 128 x 128 block of products in a warpgroup's accumulators (acc[nt 4 + h 2 +
 * e]: block row row_base + 8 h, column 8 nt + col_base + e; see tile_fused_wgmma.cu), rounded to
 * the half tile's values: rows by their quads, columns by each warp's 16 rows.
 */
template <int kKind>
__device__ __forceinline__ void
filter_block(const SelectState &st, const TileGeom &g, const Staging &stage, float (&acc)[64],
             int m0, int n0, int row_base, const float (&row_thr)[2], const float (&col_thr)[2][2])
{
  const int lane = threadIdx.x & 31;
  const int col_base = (lane & 3) * 2;
  /* NaN marks products outside the tile: __hmax2 and fmaxf skip it, every comparison fails */
  if (m0 + kFusedBlock > g.n_rows || n0 + kFusedBlock > g.n_cols) {
    const float nan = __int_as_float(0x7fc00000);
#pragma unroll
    for (int i = 0; i < 64; i++) {
      const int il = row_base + ((i >> 1) & 1) * 8, jl = (i >> 2) * 8 + col_base + (i & 1);
      if (m0 + il >= g.n_rows || n0 + jl >= g.n_cols)
        acc[i] = nan;
    }
  }
  /* alpha is a power of two, so this is cuBLAS's rounding of the sum to the half tile */
  __half2 v[16][2];
#pragma unroll
  for (int nt = 0; nt < 16; nt++)
#pragma unroll
    for (int h = 0; h < 2; h++)
      v[nt][h] =
          __floats2half2_rn(acc[nt * 4 + h * 2] * g.alpha, acc[nt * 4 + h * 2 + 1] * g.alpha);

#pragma unroll
  for (int h = 0; h < 2; h++) {
    __half2 best = magnitude2<kKind>(v[0][h]);
#pragma unroll
    for (int nt = 1; nt < 16; nt++)
      best = __hmax2(best, magnitude2<kKind>(v[nt][h]));
    best = __hmax2(best, __shfl_xor_sync(kFullMask, best, 1));
    best = __hmax2(best, __shfl_xor_sync(kFullMask, best, 2));
    if (half_score<kKind>(pair_max(best), g.tile_scale) < row_thr[h])
      stage_row<kKind>(st, g, stage, v, h, m0 + row_base + 8 * h, n0, col_base, row_thr[h]);
  }
  if (!g.do_cols)
    return;
  /* a column pair's largest product over the warp's 16 rows, kept by the lanes that test it */
  __half2 mine[2] = {v[0][0], v[0][0]};
#pragma unroll
  for (int nt = 0; nt < 16; nt++) {
    __half2 best = __hmax2(magnitude2<kKind>(v[nt][0]), magnitude2<kKind>(v[nt][1]));
    best = __hmax2(best, __shfl_xor_sync(kFullMask, best, 4));
    best = __hmax2(best, __shfl_xor_sync(kFullMask, best, 8));
    best = __hmax2(best, __shfl_xor_sync(kFullMask, best, 16));
    if ((nt >> 1) == (lane >> 2))
      mine[nt & 1] = best;
  }
  unsigned col_bits = 0;
#pragma unroll
  for (int t = 0; t < 2; t++) {
    col_bits |= (unsigned)(half_score<kKind>(__low2float(mine[t]), g.tile_scale) < col_thr[t][0])
                << (2 * t);
    col_bits |= (unsigned)(half_score<kKind>(__high2float(mine[t]), g.tile_scale) < col_thr[t][1])
                << (2 * t + 1);
  }
  if (__any_sync(kFullMask, col_bits != 0))
    stage_columns<kKind>(st, g, stage, v, col_bits, col_thr, m0, n0, row_base);
}

/*
 * Grid: (strips, ceil(n_rows / 128)): block (x, y) takes query rows 128 y.. against the column
 * blocks x, x + gridDim.x, ... of the tile; block: 2 warpgroups, warpgroup w the rows 64 w.. of
 * the block. map_q, map_r: the TMA maps of g.q_rows and g.r_rows; kBoxes: ceil(dpad / 64).
 */
template <int kKind, int kBoxes>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    fused_rows_kernel(const __grid_constant__ SelectState st, const __grid_constant__ TileGeom g,
                      const __grid_constant__ CUtensorMap map_q,
                      const __grid_constant__ CUtensorMap map_r)
{
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t bar_a, bar_full[2], bar_empty[2];
  const uint32_t a_smem = (shared_address(smem_raw) + 1023u) & ~1023u;
  const uint32_t b_smem = a_smem + kBoxes * kOperandBytes;
  const int m0 = blockIdx.y * kFusedBlock;
  const int blocks = (g.n_cols + kFusedBlock - 1) / kFusedBlock;
  const int step = (int)gridDim.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wg = threadIdx.x >> 7;

  const Staging stage =
      staging_at(smem_raw + (a_smem - shared_address(smem_raw)) + 3 * kBoxes * kOperandBytes);
  if (threadIdx.x == 0) {
    *stage.count = 0;
    barrier_init(shared_address(&bar_a), 1);
    for (int b = 0; b < 2; b++) {
      barrier_init(shared_address(&bar_full[b]), 1);
      barrier_init(shared_address(&bar_empty[b]), 2); /* one arrival a warpgroup */
    }
    barrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    barrier_expect(shared_address(&bar_a), kBoxes * kOperandBytes);
#pragma unroll
    for (int kb = 0; kb < kBoxes; kb++)
      copy_box(a_smem + kb * kOperandBytes, map_q, kb * kBlockK, m0, shared_address(&bar_a));
    for (int b = 0; b < 2 && (int)blockIdx.x + b * step < blocks; b++)
      load_columns<kBoxes>(b_smem + b * kBoxes * kOperandBytes, shared_address(&bar_full[b]), map_r,
                           ((int)blockIdx.x + b * step) * kFusedBlock);
  }
  /* this thread's two rows of the block (h = 0, 1) and their thresholds, read once */
  const int row_base = wg * 64 + (warp & 3) * 16 + (lane >> 2);
  float row_thr[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int i = m0 + row_base + 8 * h;
    row_thr[h] = i < g.n_rows ? st.thr[g.row_state0 + i] : -INFINITY;
  }
  barrier_wait(shared_address(&bar_a), 0);

  int it = 0;
  for (int cb = (int)blockIdx.x; cb < blocks; cb += step, it++) {
    const int buf = it & 1;
    const uint32_t parity = (uint32_t)(it >> 1) & 1u;
    const uint32_t b = b_smem + buf * kBoxes * kOperandBytes;
    const int n0 = cb * kFusedBlock;
    float col_thr[2][2];
    column_thresholds(st, g, n0, col_thr);
    barrier_wait(shared_address(&bar_full[buf]), parity);
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
      acc[i] = 0.0f;
    fence_accumulators(acc);
    wgmma_fence();
    /* every step of 16 of both boxes, also past dpad (zeros): see tile_fused_wgmma.cu */
#pragma unroll
    for (int kb = 0; kb < kBoxes; kb++)
#pragma unroll
      for (int s = 0; s < kBlockK / 16; s++)
        wgmma_m64n128k16(acc, smem_descriptor(a_smem + kb * kOperandBytes + wg * 64 * 128 + s * 32),
                         smem_descriptor(b + kb * kOperandBytes + s * 32));
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators(acc);
    /* this warpgroup has read the buffer; once both have, it takes the block after next */
    if ((threadIdx.x & 127) == 0)
      barrier_arrive(shared_address(&bar_empty[buf]));
    if (threadIdx.x == 0 && cb + 2 * step < blocks) {
      barrier_wait(shared_address(&bar_empty[buf]), parity);
      load_columns<kBoxes>(b, shared_address(&bar_full[buf]), map_r, (cb + 2 * step) * kFusedBlock);
    }
    filter_block<kKind>(st, g, stage, acc, m0, n0, row_base, row_thr, col_thr);
  }
  __syncthreads(); /* every pair staged */
  flush_staged(st, g, stage);
}

/* One device's answer: 0 unknown, else 1 + the blocks an SM holds at once times its SMs, or -1. */
int rows_state[64];

/* Whether the kernels run on the current device (as wgmma_ready in tile_fused_wgmma.cu), and
 * how many blocks are resident at once (*resident). */
bool rows_ready(int *resident)
{
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64)
    return false;
  int state = __atomic_load_n(&rows_state[device], __ATOMIC_RELAXED);
  if (state == 0) {
    int major = 0, minor = 0, sms = 0, per_sm = 0;
    bool ok =
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
        major == 9 && minor == 0 && tensor_map_encoder() != nullptr;
    for (auto kernel :
         {fused_rows_kernel<KNNWB_SCORE_DOT, 1>, fused_rows_kernel<KNNWB_SCORE_DOT, 2>,
          fused_rows_kernel<KNNWB_SCORE_ABS_DOT, 1>, fused_rows_kernel<KNNWB_SCORE_ABS_DOT, 2>})
      ok = ok &&
           cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                rows_smem_bytes<kMaxBoxes>()) == cudaSuccess &&
           cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                cudaSharedmemCarveoutMaxShared) == cudaSuccess;
    /* the wider kernel's count, which the narrower one's is at least */
    ok = ok &&
         cudaOccupancyMaxActiveBlocksPerMultiprocessor(
             &per_sm, fused_rows_kernel<KNNWB_SCORE_DOT, kMaxBoxes>, kThreads,
             rows_smem_bytes<kMaxBoxes>()) == cudaSuccess &&
         per_sm > 0;
    if (!ok)
      (void)cudaGetLastError(); /* a refused attribute is an answer, not a pending error */
    state = ok ? 1 + per_sm * sms : -1;
    __atomic_store_n(&rows_state[device], state, __ATOMIC_RELAXED);
  }
  *resident = state - 1;
  return state > 0;
}

template <int kBoxes>
void launch_rows(const SelectState &state, const TileGeom &geom, const CUtensorMap &map_q,
                 const CUtensorMap &map_r, dim3 grid, cudaStream_t stream)
{
  if (geom.kind == KNNWB_SCORE_ABS_DOT)
    fused_rows_kernel<KNNWB_SCORE_ABS_DOT, kBoxes>
        <<<grid, kThreads, rows_smem_bytes<kBoxes>(), stream>>>(state, geom, map_q, map_r);
  else
    fused_rows_kernel<KNNWB_SCORE_DOT, kBoxes>
        <<<grid, kThreads, rows_smem_bytes<kBoxes>(), stream>>>(state, geom, map_q, map_r);
}

} // namespace

cudaError_t launch_fused_rows(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  int resident = 0;
  if (geom.dpad > kMaxBoxes * kBlockK || !rows_ready(&resident))
    return cudaErrorNotSupported;
  CUtensorMap map_q, map_r;
  if (!encode_rows(&map_q, geom.q_rows, geom.n_rows, geom.dpad) ||
      !encode_rows(&map_r, geom.r_rows, geom.n_cols, geom.dpad))
    return cudaErrorInvalidValue;
  const int row_blocks = (geom.n_rows + kFusedBlock - 1) / kFusedBlock;
  const int col_blocks = (geom.n_cols + kFusedBlock - 1) / kFusedBlock;
  /* every block resident at once where the rows allow: each takes a share of the columns */
  const dim3 grid(std::max(1, std::min(col_blocks, resident / row_blocks)), row_blocks);
  const cudaError_t err = cudaMemsetAsync(state.merge_count, 0, 2 * sizeof(int), stream);
  if (err != cudaSuccess)
    return err;
  if (geom.dpad > kBlockK)
    launch_rows<2>(state, geom, map_q, map_r, grid, stream);
  else
    launch_rows<1>(state, geom, map_q, map_r, grid, stream);
  return cudaGetLastError();
}

#else

cudaError_t launch_fused_rows(const SelectState &, const TileGeom &, cudaStream_t)
{
  return cudaErrorNotSupported;
}

#endif

} // namespace knnwb_cuda
