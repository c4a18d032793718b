#!/usr/bin/env bash
# GPU step (issue 32, session 25): PdlWait without griddepcontrol.launch_dependents (this build)
# against the build before it (.gpu_probe/prev/petal.xz, 83522a8) and 2ee956c
# (.gpu_probe/base/petal.xz), through bin_ab: MiniLM (1 x 128, 1024 x 128) over two rounds, then
# the 0.6b shape (1 x 128, 1 x 512, 100 x 512) over one. Carry `.gpu_bundle`, `.gpu_probe` and
# models/all-MiniLM-L6-v2/tokenizer.json. ~3 min. Results in $OUT/bin_ab-{minilm,0.6b}/.
set -uo pipefail
for b in prev base; do
  [[ -x .gpu_probe/$b/petal ]] || { xz -dk .gpu_probe/$b/petal.xz && chmod +x .gpu_probe/$b/petal; }
done
export BIN_AB_BINS="fixed=.gpu_bundle/bin/petal prev=.gpu_probe/prev/petal base=.gpu_probe/base/petal"
rc=0
BIN_AB_SHAPES=minilm BIN_AB_ROUNDS=2 BIN_AB_TAG=minilm timeout 120 bash scripts/gpu/steps/bin_ab.sh || rc=1
BIN_AB_SHAPES=0.6b BIN_AB_ROUNDS=1 BIN_AB_TAG=0.6b \
  BIN_AB_SCENARIOS=latency_1x128,latency_1x512,throughput_100x512 \
  timeout 150 bash scripts/gpu/steps/bin_ab.sh || rc=1
exit $rc
