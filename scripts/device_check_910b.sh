#!/usr/bin/env bash
# Ascend 910B check for syncguard, on one NPU host with torch_npu and CANN, from the working
# tree. Needs: torch + the torch_npu release that pairs with it, CANN sourced (set_env.sh),
# pandas, rich, pytest. No network, no install step:
#   OUT=/some/folder bash scripts/device_check_910b.sh     (or scripts/device_check.sh, which
#                                                           comes here when an NPU is visible)
# Answers, in one run, what only a 910B can:
#   host-states.txt  the three host states as a user meets them: healthy (auto must resolve to
#                    the NPU), no NPU visible (ASCEND_RT_VISIBLE_DEVICES pointing nowhere:
#                    auto falls back to the simulated npu with one note, --device npu exits 2),
#                    CANN unusable (LD_LIBRARY_PATH emptied: same, naming the library);
#   selftest.txt     planted syncs seen on the NPU;
#   calibration/     the catalogue against torch_npu's trace callbacks, calibrated op model;
#   run/             the realistic scenario, legacy and flag, with the per-step cross-check;
#   seeded/          the seeded scenario on the NPU: whether the float64 sampling math runs
#                    on a 910B and counts the same as on the simulated npu;
#   profile-910b.json the modeled timeline's parameters measured here;
#   pytest-npu.txt   the npu-marked tests.
# Exit 0 only when every part passed. Finishes within 8 minutes (timeouts add up to 470 s).
set -uo pipefail
OUT=${OUT:?set OUT to an output folder}
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
{
  date -u
  python -c "import torch, torch_npu, platform; print('torch', torch.__version__, 'torch_npu', torch_npu.__version__, 'python', platform.python_version()); print(torch.npu.get_device_name())"
  cat /usr/local/Ascend/ascend-toolkit/latest/version.cfg 2>/dev/null | head -3
  npu-smi info 2>/dev/null | head -12
  git rev-parse HEAD 2>/dev/null
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"
status=0
fail() { echo "FAIL: $*"; status=1; }

echo "== host states (healthy, no NPU visible, CANN unusable)"
{
  echo "-- healthy: auto must be the NPU"
  timeout 30 python -m syncguard selftest 2>&1 | tee "$OUT/selftest.txt"
  grep -q "^device: npu" "$OUT/selftest.txt" || echo "FAIL-MARK healthy auto did not pick the NPU"
  echo "-- no NPU visible: auto falls back with one note; --device npu exits 2"
  ASCEND_RT_VISIBLE_DEVICES=99 timeout 30 python -m syncguard selftest 2>&1
  ASCEND_RT_VISIBLE_DEVICES=99 timeout 30 python -m syncguard selftest --device npu 2>&1
  [ $? -eq 2 ] || echo "FAIL-MARK no-device --device npu did not exit 2"
  echo "-- CANN unusable: auto falls back naming the library; --device npu exits 2"
  LD_LIBRARY_PATH= timeout 30 python -m syncguard selftest 2>&1
  LD_LIBRARY_PATH= timeout 30 python -m syncguard selftest --device npu 2>&1
  [ $? -eq 2 ] || echo "FAIL-MARK broken --device npu did not exit 2"
} > "$OUT/host-states.txt" 2>&1
cat "$OUT/host-states.txt"
grep -q "FAIL-MARK\|Traceback\|internal error" "$OUT/host-states.txt" && fail "host states"


echo "== calibration (catalogue vs torch_npu trace callbacks)"
timeout 100 python -m syncguard.driving.calibration --device npu --out "$OUT/calibration" \
  2>&1 | tee "$OUT/calibration.txt" || fail "calibration"

echo "== realistic scenario, legacy and flag, with per-step cross-check"
timeout 100 python -m syncguard run realistic --device npu --paths legacy,flag \
  --out "$OUT/run" --force --crosscheck --width 120 2>&1 | tee "$OUT/run.txt" \
  || fail "run --crosscheck"

echo "== seeded scenario on the NPU (float64 sampling math), counted only"
timeout 40 python -m syncguard run seeded --device npu --no-timed --out "$OUT/seeded" \
  --force --width 120 2>&1 | tee "$OUT/seeded.txt" || fail "seeded on the NPU"

echo "== device profile for the modeled timeline"
timeout 40 python -m syncguard calibrate --device npu --profile-out "$OUT/profile-910b.json" \
  --profile-only 2>&1 | tee "$OUT/profile.txt" || fail "profile"

echo "== hardware tests"
timeout 40 python -m pytest -q -m npu tests/ -p no:cacheprovider \
  2>&1 | tee "$OUT/pytest-npu.txt" || fail "npu-marked tests"
echo "910B device check: exit $status"
exit $status
