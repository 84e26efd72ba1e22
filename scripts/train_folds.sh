#!/usr/bin/env bash
# Trains the fold zoos of patient-wise cross-validation over every record of the split: for
# each fold k of K, the four served members (5-s and 30-s, w16-d4, both leads) into
# runs/folds-K/fold-k. Resumable: `holmes train` skips a model already finished, so a stopped
# run started again goes on where it stopped. Runs from a copy of the release binary so that
# rebuilding meanwhile leaves it alone.
#
#   nohup scripts/train_folds.sh > runs/train_folds.log 2>&1 &
#
# Environment: FOLDS (5), NICE (10: building and testing go first), HOLMES_DATA.
set -euo pipefail
cd "$(dirname "$0")/.."
folds="${FOLDS:-5}"
export HOLMES_DATA="${HOLMES_DATA:-$(cd .. && pwd)/shared/data/physionet}"
mkdir -p runs
if [ ! -x runs/holmes-train ] || [ target/release/holmes -nt runs/holmes-train ]; then
  cp target/release/holmes runs/holmes-train
fi
for k in $(seq 1 "$folds"); do
  echo "$(date -u +%FT%TZ) fold $k of $folds"
  nice -n "${NICE:-10}" runs/holmes-train train --fold "$k" --folds "$folds" \
    --only 5s-w16-d4 --only 30s-w16-d4
done
echo "$(date -u +%FT%TZ) all $folds fold zoos done"
