#!/usr/bin/env bash
# One idempotent setup for a fresh Debian 12 machine: system packages, the project
# virtualenv that provides LibTorch (PyPI torch wheel) and timm for the tools, then a
# configured + built tree. Called by both README commands and by .ci/run.
#
#   scripts/setup.sh            # packages + venv + configure + build (Release)
#   CK_SKIP_BUILD=1 scripts/setup.sh   # packages + venv only
#
# Environment knobs:
#   CK_VENV   where the venv lives (default ~/.cache/corridorkey-engine/venv-torch<ver>);
#             kept outside the checkout so clean clones (CI) reuse the 3 GB download.
#   CK_BUILD  build directory (default ./build)
set -euo pipefail

TORCH_VERSION=2.15.0       # LibTorch comes from this wheel; see docs/build.md "Why LibTorch comes from the PyPI torch wheel"
TORCHVISION_VERSION=0.29.2 # only because timm imports it
TIMM_VERSION=1.0.31
OPENJD_VERSION=0.8.0       # openjd-cli: the job-export tests run real Open Job Description
OPENCV_PY_VERSION=4.11.0.86 # tools/reference_clip_loop.py: OpenCV post-processing (4.x: its wheels write EXR, 5.0 dropped it)
NUMPY_SPEC="numpy<3"
SAFETENSORS_VERSION=0.8.0  # tests write their .safetensors fixtures with the package itself
COLOUR_SCIENCE_VERSION=0.4.7 # tests: an independent LogC4 / AWG4 / gamut implementation (unit.colour_science)
NANOBIND_VERSION=3.1.0     # the Python module's bindings (python/)
SKBUILD_VERSION=1.1.2      # ... and its build backend, scikit-build-core
PYTEST_VERSION=9.2.0       # the Python module's tests (tests/python)
OIIO_PY_VERSION=3.2.2.0    # tools/examples: a LogC3 EXR read and the matte written with PyPI's openimageio
OPENEXR_PY_VERSION=3.5.3   # tests: plates written and outputs read back by OpenEXR's own Python package
OPENVINO_VERSION=2026.4.1   # bench's reference-openvino rows: the strongest CPU runtime a user could pick
PLAYWRIGHT_VERSION=1.65.3  # tests: `review` in a real browser (Debian's chromium; Playwright's own browser download is not used)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${CK_VENV:-$HOME/.cache/corridorkey-engine/venv-torch$TORCH_VERSION}
build=${CK_BUILD:-$root/build}

log() { printf '[setup] %s\n' "$*" >&2; }

# ---- 1. Debian packages -------------------------------------------------------
apt_pkgs=(build-essential cmake ninja-build ccache git pkg-config python3-venv
          libopencv-dev libopenexr-dev libyaml-cpp-dev libcli11-dev catch2
          nlohmann-json3-dev
          libjpeg-dev  # JPEG plates' streams checked by libjpeg itself (engine/src/io/jpeg_check)
          slurm-wlm munge    # a real single-node Slurm for the farm-export tests
          clang libclang-rt-14-dev   # libFuzzer + sanitizers (scripts/fuzz.sh)
          ffmpeg     # ProRes 4444 deliverables and the reference's H.264 settings (video_out)
          libopencolorio-dev python3-pyopencolorio  # colour spaces (engine/src/colour); the
                                                    # round-trip test encodes with OCIO's Python
          libopenimageio-dev openimageio-tools      # DPX plates; tests write DPX with oiiotool
          locales    # locale sources: test_locale.cpp builds de_DE.UTF-8 with localedef
          python3-dev patchelf  # the Python module (python/): headers, the wheel's RPATHs
          libcpp-httplib-dev  # `review`: the HTTP server (cpp-httplib 0.11, built as a library)
          chromium)  # `review`'s tests drive it headless through Playwright
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ---- 2. venv with the pinned torch wheel (LibTorch) and timm -------------------
py=python3
if ! "$venv/bin/python" -c "import torch, timm, sys; sys.exit(0 if torch.__version__.split('+')[0]=='$TORCH_VERSION' and timm.__version__=='$TIMM_VERSION' else 1)" 2>/dev/null; then
  log "creating venv $venv (torch $TORCH_VERSION, timm $TIMM_VERSION)"
  mkdir -p "$(dirname "$venv")"
  [ -x "$venv/bin/python" ] || $py -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION" \
      "timm==$TIMM_VERSION" "$NUMPY_SPEC"
fi
if ! "$venv/bin/python" -c "import cv2, sys; sys.exit(cv2.__version__ != \"${OPENCV_PY_VERSION%.*}\")" >/dev/null 2>&1; then
  log "installing opencv-python-headless $OPENCV_PY_VERSION into the venv (tools only)"
  "$venv/bin/pip" install -q "opencv-python-headless==$OPENCV_PY_VERSION"
fi
if ! "$venv/bin/python" -c "import safetensors, sys; sys.exit(safetensors.__version__ != '$SAFETENSORS_VERSION')" >/dev/null 2>&1; then
  log "installing safetensors $SAFETENSORS_VERSION into the venv (test fixtures)"
  "$venv/bin/pip" install -q "safetensors==$SAFETENSORS_VERSION"
fi
if ! "$venv/bin/python" -c "import colour, sys; sys.exit(colour.__version__ != '$COLOUR_SCIENCE_VERSION')" >/dev/null 2>&1; then
  log "installing colour-science $COLOUR_SCIENCE_VERSION into the venv (colour tests)"
  "$venv/bin/pip" install -q "colour-science==$COLOUR_SCIENCE_VERSION"
fi
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('playwright') != '$PLAYWRIGHT_VERSION')" >/dev/null 2>&1; then
  log "installing playwright $PLAYWRIGHT_VERSION into the venv (review tests; runs Debian's chromium)"
  "$venv/bin/pip" install -q "playwright==$PLAYWRIGHT_VERSION"
fi
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('openvino') != '$OPENVINO_VERSION')" >/dev/null 2>&1; then
  log "installing openvino $OPENVINO_VERSION into the venv (bench --profile reference-openvino)"
  "$venv/bin/pip" install -q "openvino==$OPENVINO_VERSION"
fi
if ! "$venv/bin/openjd" --version >/dev/null 2>&1; then
  log "installing openjd-cli $OPENJD_VERSION into the venv"
  "$venv/bin/pip" install -q "openjd-cli==$OPENJD_VERSION"
fi
if ! "$venv/bin/python" -c "
import importlib.metadata as m, sys
want = {'nanobind': '$NANOBIND_VERSION', 'scikit_build_core': '$SKBUILD_VERSION', 'pytest': '$PYTEST_VERSION',
        'openimageio': '$OIIO_PY_VERSION', 'openexr': '$OPENEXR_PY_VERSION'}
sys.exit(any(m.version(k) != v for k, v in want.items()))" >/dev/null 2>&1; then
  log "installing nanobind, scikit-build-core, pytest, openimageio and openexr into the venv (the Python module)"
  "$venv/bin/pip" install -q "nanobind==$NANOBIND_VERSION" "scikit-build-core==$SKBUILD_VERSION" \
      "pytest==$PYTEST_VERSION" "openimageio==$OIIO_PY_VERSION" "openexr==$OPENEXR_PY_VERSION"
fi
log "venv ok: $("$venv/bin/python" -c 'import torch,timm;print("torch",torch.__version__,"cuda",torch.version.cuda,"timm",timm.__version__)')"

[ "${CK_SKIP_BUILD:-0}" = 1 ] && exit 0

# ---- 3. configure + build -----------------------------------------------------
gen=()
[ -f "$build/CMakeCache.txt" ] || gen=(-G Ninja)
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCK_WERROR="${CK_WERROR:-OFF}" -DCK_PYTHON="$venv/bin/python" ${CK_CMAKE_ARGS:-}
cmake --build "$build" --parallel "${CK_JOBS:-$(nproc)}"

# ---- 4. the Python module into the venv ---------------------------------------
# On the build above (python/CMakeLists.txt installs it from $build); no build isolation,
# which would download torch again. docs/python.md.
log "installing the corridorkey Python module into the venv"
"$venv/bin/pip" install -q --no-build-isolation --no-deps -C "cmake.define.CK_ENGINE_BUILD=$build" "$root/python"
