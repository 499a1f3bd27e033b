#!/usr/bin/env bash
# CUDA ground-truth check for syncguard, on one NVIDIA GPU, from the working tree.
# Needs: torch (CUDA build), pandas, rich, pytest. No network, no install step:
#   OUT=/some/folder bash scripts/device_check.sh
# Writes under $OUT: versions.txt, calibration/ (catalogue vs sync debug mode and trace
# callbacks, calibrated op model), run/ (realistic scenario, legacy and flag, counted + timed
# passes, device time, per-step and per-site cross-check), profile-cuda.json (the modeled
# timeline's parameters measured here), model/ (the same scenario modeled on the simulated
# device with that profile, its 20 ms modeled forward left out) and modeled-vs-measured.txt,
# pytest-cuda.txt.
# Finishes within 8 minutes (the timeouts below add up to 480 s). Exit 0 only when every part
# passed: calibration without unexplained disagreements, a run whose cross-check agrees, a
# profile that loads, and the cuda-marked tests (the modeled-vs-measured error is reported,
# aim within 15%, not gated).
set -uo pipefail  # pipefail: a crash or a timeout before "| tee" must fail the script
OUT=${OUT:?set OUT to an output folder}
cd "$(dirname "$0")/.."
# An Ascend host (torch_npu loads and sees an NPU): the 910B section instead.
if python -c "import sys, torch, torch_npu; sys.exit(0 if torch.npu.is_available() else 1)" \
    >/dev/null 2>&1; then
  exec bash scripts/device_check_910b.sh
fi
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
# The calibration also lists the backend questions decided from source (catalogue.QUESTIONS:
# a Python number written through an index, torch.tensor of 0-d device tensors, zero-element
# copies) with "confirmed" or "CORRECT THE MODEL" (syncguard/core/opmodels/cuda.json says where).
echo "== calibration (catalogue vs native ground truth)"
timeout 120 python -m syncguard.driving.calibration --device cuda --out "$OUT/calibration" \
  2>&1 | tee "$OUT/calibration.txt" || { echo "FAIL: calibration"; status=1; }
echo "== realistic scenario, legacy and flag, with per-step cross-check"
timeout 150 python -m syncguard run realistic --device cuda --paths legacy,flag \
  --out "$OUT/run" --force --crosscheck --width 120 2>&1 | tee "$OUT/run.txt" \
  || { echo "FAIL: run --crosscheck"; status=1; }

echo "== device profile for the modeled timeline (launch, sync round trip, bandwidth, matmul)"
timeout 40 python -m syncguard calibrate --device cuda --profile-out "$OUT/profile-cuda.json" \
  --profile-only 2>&1 | tee "$OUT/profile.txt" || { echo "FAIL: profile"; status=1; }
echo "== modeled (simulated device, calibrated profile) vs measured step latency, realistic"
sed '/^forward_ms/d' sglang_ascend_sampling/scenarios/realistic.toml > "$OUT/realistic-noforward.toml"
timeout 70 python -m syncguard run "$OUT/realistic-noforward.toml" --device sim \
  --profile "$OUT/profile-cuda.json" --paths legacy,flag --steps 8 --no-timed \
  --out "$OUT/model" --force --width 120 > "$OUT/model.txt" 2>&1 \
  && python -m syncguard.driving.calibration --modeled-vs-measured "$OUT/model/result.jsonl" \
     "$OUT/run/result.jsonl" 2>&1 | tee "$OUT/modeled-vs-measured.txt" \
  || { echo "FAIL: modeled vs measured"; status=1; }
echo "== hardware tests"
timeout 100 python -m pytest -q -m cuda tests/ -k "not calibrate" -p no:cacheprovider \
  2>&1 | tee "$OUT/pytest-cuda.txt" || { echo "FAIL: cuda-marked tests"; status=1; }
echo "device check: exit $status"
exit $status
