#!/usr/bin/env bash
# Installs the Debian packages infinipot builds and tests with; does nothing when all are there.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config python3 python3-pip unzip
      ocl-icd-opencl-dev opencl-headers clinfo pocl-opencl-icd libclblast-dev
      libfmt-dev libcli11-dev nlohmann-json3-dev libpcre2-dev
      libgtest-dev libgmock-dev libbenchmark-dev python3-matplotlib
      libcpp-httplib-dev curl
      oclgrind)  # a second OpenCL implementation that checks GPU rules: scripts/test-oclgrind.sh
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The server's tests talk to it through the official OpenAI client (tests/server/test_serve.py).
if ! python3 -c "import openai" 2>/dev/null; then
  echo "deps: installing the openai Python package"
  python3 -m pip install --quiet --disable-pip-version-check openai==3.57.0
fi
# The model families' tests regenerate their GGUF files with PyPI's gguf package
# (scripts/reference/make_family_models.py), pinned so the files come out byte for byte.
if ! python3 -c "import gguf, numpy; from importlib.metadata import version; assert version('gguf') == '0.19.0'" 2>/dev/null; then
  echo "deps: installing the gguf Python package"
  python3 -m pip install --quiet --disable-pip-version-check gguf==0.19.0
fi
