"""Does row order change the tile loop? Writes the real-like matrix in three row orders: shuffled,
grouped by k-means cells of about one tile (8,192 rows) each, and grouped by cells of about a
quarter tile; knnwb's lists are the same in every order up to the renumbering, so the search time
is all that changes. Needs torch with a GPU (k-means on the GPU). Usage: order_check.py IN.npy DIR"""
import sys, numpy as np, torch

src, out = sys.argv[1], sys.argv[2]
x = np.load(src, mmap_mode="r")
n = x.shape[0]
dev = torch.device("cuda")
z = torch.from_numpy(np.ascontiguousarray(x)).to(dev)
z = z - z.mean(1, keepdim=True)
z = z / z.norm(dim=1, keepdim=True).clamp_min(1e-12)  # Pearson: cosine of centred rows


def kmeans_order(cells, iters=8, seed=1):
    g = torch.Generator(device="cpu").manual_seed(seed)
    c = z[torch.randperm(n, generator=g)[:cells].to(dev)].clone()
    for _ in range(iters):
        lab = torch.empty(n, dtype=torch.long, device=dev)
        for s in range(0, n, 1 << 18):
            lab[s:s + (1 << 18)] = (z[s:s + (1 << 18)] @ c.T).argmax(1)
        c.zero_().index_add_(0, lab, z)
        c = c / c.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return torch.argsort(lab * n + torch.arange(n, device=dev)).cpu().numpy()


rng = np.random.default_rng(7)
orders = {"shuffled": rng.permutation(n), "cells1": kmeans_order((n + 8191) // 8192),
          "cells4": kmeans_order(4 * ((n + 8191) // 8192))}
for name, perm in orders.items():
    np.save(f"{out}/{name}.npy", np.ascontiguousarray(np.asarray(x)[perm]))
    np.save(f"{out}/{name}.perm.npy", perm.astype(np.int64))
    print(name, "written", flush=True)
