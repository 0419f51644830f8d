/*
 * The selection of a fresh tile (TileGeom.fresh: rows that have seen no pair yet, their diagonal
 * tile or a panel's first; row pass only) in one kernel, a block per row:
 *   1. the keys of the row's list and pending candidates, and of every step-th column of its line
 *      (about kFreshSample), go to shared memory; their kc-th smallest bounds the row's kc-th from
 *      above (a subset's kc-th is never smaller);
 *   2. the line is read once, and the keys at most that bound (about kc * step of them) are kept in
 *      a room with their places (list, candidates, then the line's columns);
 *   3. a radix select (four passes of 8 bits) over the room gives the kc-th key; the keys below it
 *      and, of the keys equal to it, the first-placed ones become the row's list.
 * A row whose room overflows (many keys equal to the bound) takes the radix select and the ordered
 * pass over its whole line instead, reading it again from the cache (rare).
 *
 * Why: with +inf thresholds every pair passes a filter, so tile_select.cu filters such a tile in
 * column stages of doubling width, a filter and a merge launched over all the tile's rows each
 * time (about 20 launches a tile: 2.15 ms for a tile of 16,384 columns on an H200; this kernel
 * 0.96 ms). A first version that kept the whole line's keys in shared memory and selected over
 * them all was bound by its instructions (1.3-1.6 ms). Where it is taken instead of the stages:
 * knnwb_select_plan_fresh_kernel (select_plan.h says why).
 */
#include "tile_common.cuh"

#include <math.h>
#include <string.h>

namespace knnwb_cuda
{
namespace
{

constexpr int kFreshThreads = 256;
constexpr int kFreshWarps = kFreshThreads / 32;
constexpr uint32_t kFreshEmpty = 0xffffffffu;
/* the line's columns in the sample, at most; the room for the keys under the sample's bound */
constexpr int kFreshSample = 1024;
constexpr int kFreshRoom = 2048;
/* the sample's slots, which later hold the places of the room's keys equal to the pivot */
constexpr int kFreshSampleSlots = kFreshSample > kFreshRoom ? kFreshSample : kFreshRoom;
/* list and candidate slots (kc + cap) a row may hold for this kernel; larger k takes the stages */
constexpr int kFreshHeld = 512;

static_assert(kFreshThreads == 256, "one thread a radix bin (RadixShared)");
static_assert((kFreshHeld + kFreshSampleSlots + 2 * kFreshRoom) * 4 + kFreshHeld * 4 <= 48 * 1024,
              "the dynamic shared memory needs no opt-in");

struct FreshShared {
  RadixShared radix; /* its warp_total also serves list_from_places' counts */
  unsigned n_room;
  unsigned n_out;
  unsigned n_equal;
};

/* What a block knows of its row. */
struct FreshRow {
  const void *line;
  int self;
  int group;
  float thr;
  int held; /* list and candidate slots before the line's places */
};

/* The key of line column t of a row with score s: its own, or kFreshEmpty where the pair may not
 * enter (the row itself, an invalid reference, the row's own group), as the filter decides: only
 * a score strictly below the row's threshold, never NaN. */
__device__ __forceinline__ uint32_t score_key(const TileGeom &g, const FreshRow &r, float s, int t)
{
  const int cand = g.col_global0 + t;
  const bool ok = cand != r.self && !(g.invalid && g.invalid[cand]) &&
                  !(g.row_group && g.col_group[cand] == r.group) && s < r.thr;
  return ok ? float_key(s) : kFreshEmpty;
}

/* The key of line column t with product v. */
__device__ __forceinline__ uint32_t line_key(const TileGeom &g, const FreshRow &r, float v, int t)
{
  const int cand = g.col_global0 + t;
  return score_key(g, r, score_of(g.kind, v, g.kind == KNNWB_SCORE_L2 ? g.sqnorms[cand] : 0.0f), t);
}

__device__ __forceinline__ uint32_t column_key(const TileGeom &g, const FreshRow &r, int t)
{
  return line_key(g, r, tile_value(r.line, g.half_tile != 0, g.tile_scale, (size_t)t), t);
}

/* Key of place p: a held slot's (held_key) or line column p - held's, read again from the tile. */
struct PlaceKey {
  const TileGeom &g;
  const FreshRow &r;
  const uint32_t *held_key;
  __device__ uint32_t operator()(int p) const
  {
    return p < r.held ? held_key[p] : column_key(g, r, p - r.held);
  }
};

/* Keys of an array in shared memory. */
struct ArrayKey {
  const uint32_t *keys;
  __device__ uint32_t operator()(int p) const
  {
    return keys[p];
  }
};

/*
 * The key of the kprime-th smallest (1-based) of key(0 .. n-1); on return sh.radix.kprime is how
 * many keys equal to it belong to the kprime smallest, sh.radix.equal_total how many keys equal
 * it (radix_pivot). Every thread calls it.
 */
template <typename Key>
__device__ uint32_t keys_pivot(Key key, int n, unsigned kprime, FreshShared &sh)
{
  if (threadIdx.x == 0)
    sh.radix.kprime = kprime;
  /* every lane of a warp runs the same iterations (histogram_add's warp intrinsics); the
   * radix_pivot's first barrier makes kprime visible */
  return radix_pivot(sh.radix, [&](uint32_t prefix, uint32_t high_mask, int shift) {
    for (int base = 0; base < n; base += kFreshThreads) {
      const int t = base + (int)threadIdx.x;
      const uint32_t k = t < n ? key(t) : 0u;
      histogram_add(sh.radix.hist, t < n && (k & high_mask) == prefix, (k >> shift) & 0xffu);
    }
  });
}

/* Appends (key, place) to the room where keep (sh.n_room counts, past kFreshRoom too): one atomic
 * per warp. Every lane of the warp calls it. */
__device__ __forceinline__ void room_append(bool keep, uint32_t key, int place, uint32_t *room_key,
                                            int *room_place, FreshShared &sh)
{
  const unsigned ballot = __ballot_sync(kFullMask, keep);
  if (!ballot)
    return;
  const int lane = threadIdx.x & 31;
  int first = 0;
  if (lane == 0)
    first = (int)atomicAdd(&sh.n_room, (unsigned)__popc(ballot));
  first = __shfl_sync(kFullMask, first, 0);
  const int at = first + __popc(ballot & ((1u << lane) - 1u));
  if (keep && at < kFreshRoom) {
    room_key[at] = key;
    room_place[at] = place;
  }
}

/*
 * Reads the row's line once and appends its keys at most bound to the room. Each product's score
 * is first compared with the bound's (a float compare: the key order is the scores' order), and
 * only where a lane of the warp passes that do the other tests (line_key) and the appends run:
 * about kc * step columns of the line's. Half tiles of aligned rows are read 8 halves a load,
 * four loads of a thread in flight at once. Every thread calls it.
 */
template <int kKind>
__device__ void line_under(const TileGeom &g, const FreshRow &r, uint32_t bound, uint32_t *room_key,
                           int *room_place, FreshShared &sh)
{
  const float bound_score = bound == kFreshEmpty ? __int_as_float(0x7f800000) : key_float(bound);
  int vectored = 0;
  if (g.half_tile && g.ld % 8 == 0 && reinterpret_cast<uintptr_t>(g.tile) % 16 == 0) {
    const uint4 *vectors = static_cast<const uint4 *>(r.line);
    const int n_vectors = g.n_cols / 8;
    /* rounds of whole warps (room_append's ballots) */
    const int rounds = (n_vectors + kFreshThreads - 1) / kFreshThreads;
    for (int round0 = 0; round0 < rounds; round0 += 4) {
      uint4 raw[4];
#pragma unroll
      for (int q = 0; q < 4; q++) {
        const int v = (round0 + q) * kFreshThreads + (int)threadIdx.x;
        raw[q] = v < n_vectors ? __ldg(vectors + v) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int q = 0; q < 4; q++) {
        if (round0 + q >= rounds)
          break; /* the same in every thread */
        const int v = (round0 + q) * kFreshThreads + (int)threadIdx.x;
        const uint32_t words[4] = {raw[q].x, raw[q].y, raw[q].z, raw[q].w};
        float score[8];
        unsigned under = 0;
#pragma unroll
        for (int u = 0; u < 8; u++) {
          __half2 pair;
          memcpy(&pair, &words[u / 2], sizeof pair);
          const float2 f = __half22float2(pair);
          const float sq = kKind == KNNWB_SCORE_L2 && v < n_vectors
                               ? g.sqnorms[g.col_global0 + 8 * v + u]
                               : 0.0f;
          score[u] = kind_score<kKind>((u % 2 ? f.y : f.x) * g.tile_scale, sq);
          under |= (unsigned)(v < n_vectors && score[u] <= bound_score) << u;
        }
        if (!__any_sync(kFullMask, under))
          continue;
          /* the key of the very score compared: the room holds every key of this pass at most
           * bound */
#pragma unroll
        for (int u = 0; u < 8; u++) {
          const uint32_t key =
              (under >> u) & 1u ? score_key(g, r, score[u], 8 * v + u) : kFreshEmpty;
          room_append(key != kFreshEmpty && key <= bound, key, r.held + 8 * v + u, room_key,
                      room_place, sh);
        }
      }
    }
    vectored = 8 * n_vectors;
  }
  for (int base = vectored; base < g.n_cols; base += kFreshThreads) {
    const int t = base + (int)threadIdx.x;
    const uint32_t key = t < g.n_cols ? column_key(g, r, t) : kFreshEmpty;
    room_append(key != kFreshEmpty && key <= bound, key, r.held + t, room_key, room_place, sh);
  }
}

/* line_under for the kind of g's scores (a compile-time kind: no switch a product). */
__device__ void line_under_kind(const TileGeom &g, const FreshRow &r, uint32_t bound,
                                uint32_t *room_key, int *room_place, FreshShared &sh)
{
  switch (g.kind) {
  case KNNWB_SCORE_DOT:
    line_under<KNNWB_SCORE_DOT>(g, r, bound, room_key, room_place, sh);
    break;
  case KNNWB_SCORE_ABS_DOT:
    line_under<KNNWB_SCORE_ABS_DOT>(g, r, bound, room_key, room_place, sh);
    break;
  case KNNWB_SCORE_L2:
    line_under<KNNWB_SCORE_L2>(g, r, bound, room_key, room_place, sh);
    break;
  default:
    line_under<-1>(g, r, bound, room_key, room_place, sh);
    break;
  }
}

/* Writes (key, index) at slot of the row's list. */
__device__ __forceinline__ void list_put(const SelectState &st, const TileGeom &g, int row,
                                         int slot, uint32_t key, int place, const FreshRow &r,
                                         const int *held_index)
{
  st.list_index[(size_t)row * st.kc + slot] =
      place < r.held ? held_index[place] : g.col_global0 + (place - r.held);
  st.list_score[(size_t)row * st.kc + slot] = key_float(key);
}

/*
 * The list from the room (it holds every key at most pivot): keys below pivot at slots counted
 * from 0, the take_equal first-placed keys equal to pivot after them. When only some of the equal
 * keys are taken, their places are gathered in equal_place (room for the room's size) and ranked
 * there. Every thread calls it.
 */
__device__ void list_from_room(const SelectState &st, const TileGeom &g, int row, const FreshRow &r,
                               uint32_t pivot, int take_equal, int n_room, const uint32_t *room_key,
                               const int *room_place, const int *held_index, int *equal_place,
                               FreshShared &sh)
{
  const int less = st.kc - take_equal; /* pivot is the kc-th key when the list is full */
  const bool every_equal = take_equal == (int)sh.radix.equal_total;
  if (threadIdx.x == 0)
    sh.n_equal = 0;
  __syncthreads();
  for (int e = threadIdx.x; e < n_room; e += kFreshThreads) {
    const uint32_t key = room_key[e];
    if (key < pivot)
      list_put(st, g, row, (int)atomicAdd(&sh.n_out, 1u), key, room_place[e], r, held_index);
    else if (key == pivot && take_equal > 0 && every_equal)
      list_put(st, g, row, less + (int)atomicAdd(&sh.n_equal, 1u), key, room_place[e], r,
               held_index);
    else if (key == pivot && take_equal > 0)
      equal_place[atomicAdd(&sh.n_equal, 1u)] = room_place[e];
  }
  __syncthreads();
  if (take_equal == 0 || every_equal)
    return;
  /* rank among the equal keys by place: O(equal keys^2), few except on rows of many ties */
  const int n_equal = (int)sh.n_equal;
  for (int e = threadIdx.x; e < n_equal; e += kFreshThreads) {
    int rank = 0;
    for (int o = 0; o < n_equal; o++)
      rank += equal_place[o] < equal_place[e];
    if (rank < take_equal)
      list_put(st, g, row, less + rank, pivot, equal_place[e], r, held_index);
  }
}

/*
 * The list from every place (the room overflowed): keys below pivot anywhere, and the take_equal
 * first-placed keys equal to it, found by rounds over the places in order. Every thread calls it.
 */
template <typename Key>
__device__ void list_from_places(const SelectState &st, const TileGeom &g, int row,
                                 const FreshRow &r, Key key_of, int n, uint32_t pivot,
                                 int take_equal, const int *held_index, FreshShared &sh)
{
  const int less = st.kc - take_equal;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int equal_before = 0; /* equal keys at earlier places, the same in every thread */
  for (int base = 0; base < n; base += kFreshThreads) {
    const int p = base + (int)threadIdx.x;
    const uint32_t key = p < n ? key_of(p) : kFreshEmpty;
    if (p < n && key < pivot)
      list_put(st, g, row, (int)atomicAdd(&sh.n_out, 1u), key, p, r, held_index);
    const bool equal = p < n && key == pivot;
    const unsigned ballot = __ballot_sync(kFullMask, equal);
    if (lane == 0)
      sh.radix.warp_total[warp] = (unsigned)__popc(ballot);
    __syncthreads();
    int rank = equal_before + __popc(ballot & ((1u << lane) - 1u)), round_equal = 0;
    for (int w = 0; w < kFreshWarps; w++) {
      rank += w < warp ? (int)sh.radix.warp_total[w] : 0;
      round_equal += (int)sh.radix.warp_total[w];
    }
    if (equal && rank < take_equal)
      list_put(st, g, row, less + rank, key, p, r, held_index);
    equal_before += round_equal;
    __syncthreads();
  }
}

/*
 * Grid: one block of kFreshThreads per row of the tile; dynamic shared memory for the keys of the
 * held slots and the sample, the room's keys and places, and the held slots' indices
 * (fresh_shared_bytes). Reads the row's list, its pending candidates (at most cap: a fresh row has
 * not overflowed) and its line; writes its list, threshold and count.
 */
/* five blocks an SM: at most 51 registers a thread (at six, 42, the compiler spilled) */
__global__ void __launch_bounds__(kFreshThreads, 5) fresh_kernel(SelectState st, TileGeom g)
{
  extern __shared__ __align__(16) uint32_t fresh_shared[];
  __shared__ FreshShared sh;
  const int i = blockIdx.x, row = g.row_state0 + i;
  const size_t elem = g.half_tile ? sizeof(__half) : sizeof(float);
  FreshRow r;
  r.line = static_cast<const char *>(g.tile) + (size_t)i * g.ld * elem;
  r.self = g.self ? g.row_global0 + i : -1;
  r.group = g.row_group ? g.row_group[g.row_global0 + i] : 0;
  r.thr = st.thr[row];
  r.held = st.kc + st.cap;
  const int step = g.n_cols > kFreshSample ? (g.n_cols + kFreshSample - 1) / kFreshSample : 1;
  const int n_sample = (g.n_cols + step - 1) / step;
  uint32_t *sample_key = fresh_shared; /* held slots' keys, then the sample's */
  uint32_t *room_key = sample_key + r.held + kFreshSampleSlots;
  int *room_place = reinterpret_cast<int *>(room_key + kFreshRoom);
  int *held_index = room_place + kFreshRoom;
  if (threadIdx.x == 0) {
    sh.n_room = 0;
    sh.n_out = 0;
  }

  const int buffered = min(st.count[row], st.cap);
  for (int t = threadIdx.x; t < r.held; t += kFreshThreads) {
    int idx = -1;
    float score = 0.0f;
    if (t < st.kc) {
      idx = st.list_index[(size_t)row * st.kc + t];
      score = st.list_score[(size_t)row * st.kc + t];
    } else if (t - st.kc < buffered) {
      idx = st.cand_index[(size_t)row * st.cap + (t - st.kc)];
      score = st.cand_score[(size_t)row * st.cap + (t - st.kc)];
    }
    sample_key[t] = idx < 0 ? kFreshEmpty : float_key(score);
    held_index[t] = idx;
  }
#pragma unroll 8
  for (int s = threadIdx.x; s < n_sample; s += kFreshThreads)
    sample_key[r.held + s] = column_key(g, r, s * step);
  __syncthreads();

  /* 1. the bound (kFreshEmpty while fewer than kc keys are valid: every valid key is kept) */
  const uint32_t bound = keys_pivot(ArrayKey{sample_key}, r.held + n_sample, (unsigned)st.kc, sh);
  /* 2. the held slots and the line under it */
  for (int base = 0; base < r.held; base += kFreshThreads) {
    const int t = base + (int)threadIdx.x;
    const uint32_t key = t < r.held ? sample_key[t] : kFreshEmpty;
    room_append(key != kFreshEmpty && key <= bound, key, t, room_key, room_place, sh);
  }
  line_under_kind(g, r, bound, room_key, room_place, sh);
  __syncthreads();

  /* 3. the list. The room holds the line's keys at most bound (every valid key when bound is
   * kFreshEmpty, fewer than kc keys in the sample being valid); it gives the list unless it
   * overflowed or holds fewer than kc keys under a bound below kFreshEmpty (the sample's keys
   * rounded otherwise than the line's). Fewer than kc valid keys are all taken, and the list keeps
   * empty slots. */
  const int n_room = (int)sh.n_room;
  bool full;
  uint32_t pivot = kFreshEmpty;
  int take_equal = 0;
  if (n_room <= kFreshRoom && (bound == kFreshEmpty || n_room >= st.kc)) {
    full = n_room >= st.kc;
    if (full) {
      pivot = keys_pivot(ArrayKey{room_key}, n_room, (unsigned)st.kc, sh);
      take_equal = (int)sh.radix.kprime;
    }
    /* the sample's keys are no longer needed: their place holds the equal keys' places */
    list_from_room(st, g, row, r, pivot, take_equal, n_room, room_key, room_place, held_index,
                   reinterpret_cast<int *>(sample_key), sh);
  } else {
    const PlaceKey key_of{g, r, sample_key};
    pivot = keys_pivot(key_of, r.held + g.n_cols, (unsigned)st.kc, sh);
    full = pivot != kFreshEmpty;
    take_equal = full ? (int)sh.radix.kprime : 0;
    list_from_places(st, g, row, r, key_of, r.held + g.n_cols, pivot, take_equal, held_index, sh);
  }
  __syncthreads();
  const int taken = full ? st.kc : (int)sh.n_out;
  const float inf = __int_as_float(0x7f800000);
  for (int t = taken + (int)threadIdx.x; t < st.kc; t += kFreshThreads) {
    st.list_index[(size_t)row * st.kc + t] = -1;
    st.list_score[(size_t)row * st.kc + t] = inf;
  }
  if (threadIdx.x == 0) {
    /* min: a row may hold a bound imported from another GPU's lists, never loosened */
    st.thr[row] = fminf(r.thr, full ? key_float(pivot) : inf);
    st.count[row] = 0;
    if (st.stats) {
      atomicAdd(&st.stats[0], (unsigned long long)taken);
      atomicAdd(&st.stats[1], 1ull);
    }
  }
}

size_t fresh_shared_bytes(const SelectState &state)
{
  const size_t held = (size_t)state.kc + (size_t)state.cap;
  return (held + kFreshSampleSlots + 2 * (size_t)kFreshRoom) * sizeof(uint32_t) +
         held * sizeof(int);
}

} // namespace

bool fresh_select_fits(const SelectState &state, const TileGeom &geom)
{
  return state.fresh_kernel && geom.tile && geom.fresh && !geom.do_cols &&
         state.kc + state.cap <= kFreshHeld && state.kc <= kFreshRoom / 2;
}

cudaError_t launch_fresh_select(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  const size_t shared = fresh_shared_bytes(state);
  fresh_kernel<<<geom.n_rows, kFreshThreads, shared, stream>>>(state, geom);
  return cudaGetLastError();
}

} // namespace knnwb_cuda
