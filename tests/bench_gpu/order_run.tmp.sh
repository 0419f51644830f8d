. .gpu/env.sh
b=/tmp/knnwb-whole; d=/tmp/ord; mkdir -p $d $OUT/o
cmake -S . -B $b -DKNNWB_CUDA=ON -DKNNWB_MPI=OFF -DKNNWB_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >$OUT/o/build.log 2>&1 && cmake --build $b -j16 --target knnwb_host knnwb_knn_plugin >>$OUT/o/build.log 2>&1 || { tail -20 $OUT/o/build.log; exit 1; }
k=$b/bin/knnwb
$k metafeatures .gpu/all876.tsv --ops all -o $d/real.npy -q
for t in 8192 4096 2048 6144; do
  KNNWB_CUDA_MAX_TILE=$t KNNWB_CUDA_TRACE=1 G_MESSAGES_DEBUG=all $k knn $d/real.npy -k 20 -m pearson -o $d/g.npy > $OUT/o/$t.log 2>&1
  echo "== tile $t: $(grep -E '^knnwb: [0-9]+ x' $OUT/o/$t.log) $(sha256sum $d/g.npy | cut -c1-16)"
  grep -E "selection kernels|timeline|select [0-9.]+ s" $OUT/o/$t.log | head -3 | cut -c1-250
done
