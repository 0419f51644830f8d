#!/usr/bin/env python3
"""PyTorch baseline for the GPU kNN benchmark: exact Pearson kNN graph by chunked fp32 GEMM + topk.

Same synthetic data recipe as bench_knn_gpu (planted modules + noise; values differ, sizes do not).
Timed from a host matrix to host neighbour lists: upload, centre/normalise, for each chunk of rows
S = X_chunk @ X.T (fp32, TF32 off), drop self, topk(k), download. No symmetry (PyTorch has none).

Usage: python3 torch_baseline.py [--n 384126,1533876] [--d 295] [--k 20] [--chunk 8192]
       python3 torch_baseline.py --npy X.npy --out G [--k 20]
The second form is the peer of the whole `knnwb knn X.npy -k K -o G.npy` command: the script's own
start (importing torch, CUDA's context), np.load, the search, np.save of the indices and distances
(G.npy, G.distances.npy), timed from the script's start.
"""
import argparse
import time

START = time.perf_counter()

import torch  # noqa: E402 (the import is part of the peer's whole command)


def synthetic(n, d, seed=12345):
    g = torch.Generator(device="cuda").manual_seed(seed)
    patterns = torch.rand(1000, d, generator=g, device="cuda") * 2 - 1
    module = torch.randint(0, 1000, (n,), generator=g, device="cuda")
    strength = torch.rand(n, 1, generator=g, device="cuda") * 2
    x = torch.empty(n, d, device="cuda")
    step = 1 << 18
    for a in range(0, n, step):
        b = min(n, a + step)
        noise = torch.rand(b - a, d, 3, generator=g, device="cuda").sum(-1) - 1.5
        x[a:b] = 8 + strength[a:b] * patterns[module[a:b]] + noise
    return x.cpu()


def knn_pearson(host, k, chunk):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    x = host.cuda()
    x = x - x.mean(dim=1, keepdim=True)
    x = x / x.norm(dim=1, keepdim=True)
    n = x.shape[0]
    chunk = max(256, min(chunk, (16 << 30) // (4 * n)))  # score block of at most 16 GiB
    indices = torch.empty(n, k, dtype=torch.int64, device="cuda")
    distances = torch.empty(n, k, dtype=torch.float32, device="cuda")
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        s = x[a:b] @ x.T
        s[torch.arange(b - a, device="cuda"), torch.arange(a, b, device="cuda")] = -float("inf")
        v, i = torch.topk(s, k, dim=1)
        indices[a:b] = i
        distances[a:b] = 1 - v
    out_i, out_d = indices.cpu(), distances.cpu()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, out_i, out_d


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", default="384126,1533876")
    p.add_argument("--d", type=int, default=295)
    p.add_argument("--k", type=int, default=20)
    p.add_argument("--chunk", type=int, default=8192)
    p.add_argument("--npy", help="a float matrix (n x d) to search instead of synthetic rows")
    p.add_argument("--out", help="with --npy: write OUT.npy and OUT.distances.npy")
    args = p.parse_args()
    if args.npy:
        import numpy as np

        host = torch.from_numpy(np.load(args.npy).astype(np.float32, copy=False))
        seconds, idx, dist = knn_pearson(host, args.k, args.chunk)
        if args.out:
            np.save(args.out + ".npy", idx.numpy())
            np.save(args.out + ".distances.npy", dist.double().numpy())
        print(f"{args.npy}: {host.shape[0]} x {host.shape[1]}, search {seconds:.2f} s, "
              f"whole script {time.perf_counter() - START:.2f} s", flush=True)
        return
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    rows = []
    for n in [int(v) for v in args.n.split(",")]:
        host = synthetic(n, args.d)
        knn_pearson(host[: min(n, 20000)], args.k, args.chunk)  # warm-up (cuBLAS, allocator)
        seconds, idx, dist = knn_pearson(host, args.k, args.chunk)
        print(f"n = {n}: {seconds:.2f} s (row 0 nearest {int(idx[0, 0])} at {float(dist[0, 0]):.6f})",
              flush=True)
        rows.append((n, seconds))
        del host, idx, dist
        torch.cuda.empty_cache()
    print("\n| n | d | k | PyTorch chunked GEMM + topk (s) |")
    print("| --- | --- | --- | --- |")
    for n, seconds in rows:
        print(f"| {n} | {args.d} | {args.k} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
