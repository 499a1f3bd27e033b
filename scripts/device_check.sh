#!/usr/bin/env bash
# CUDA ground-truth check for syncguard, on one NVIDIA GPU, from the working tree.
# Needs: torch (CUDA build), pandas, rich, pytest. No network, no install step:
#   OUT=/some/folder bash scripts/device_check.sh
# Writes under $OUT: versions.txt, calibration/ (catalogue vs sync debug mode and trace
# callbacks, calibrated op model), run/ (realistic scenario, legacy and flag, counted + timed
# passes, device time, per-step and per-site cross-check), pytest-cuda.txt.
# Finishes within 8 minutes (the timeouts below add up to 450 s). Exit 0 only when every part
# passed: calibration without unexplained disagreements, a run whose cross-check agrees, and
# the cuda-marked tests.
set -uo pipefail  # pipefail: a crash or a timeout before "| tee" must fail the script
OUT=${OUT:?set OUT to an output folder}
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
{
  date -u
  python -c "import torch, platform; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', platform.python_version()); print(torch.cuda.get_device_name())"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  git rev-parse HEAD 2>/dev/null
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"
python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" \
  || { echo "FAIL: torch.cuda.is_available() is False: no usable GPU here"; exit 2; }
status=0
echo "== calibration (catalogue vs native ground truth)"
timeout 150 python -m syncguard.calibration --device cuda --out "$OUT/calibration" \
  2>&1 | tee "$OUT/calibration.txt" || { echo "FAIL: calibration"; status=1; }
echo "== realistic scenario, legacy and flag, with per-step cross-check"
timeout 200 python -m syncguard run realistic --device cuda --paths legacy,flag \
  --out "$OUT/run" --force --crosscheck --width 120 2>&1 | tee "$OUT/run.txt" \
  || { echo "FAIL: run --crosscheck"; status=1; }
echo "== hardware tests"
timeout 100 python -m pytest -q -m cuda tests/ -k "not calibrate" -p no:cacheprovider \
  2>&1 | tee "$OUT/pytest-cuda.txt" || { echo "FAIL: cuda-marked tests"; status=1; }
echo "device check: exit $status"
exit $status
