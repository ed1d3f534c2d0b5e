#!/usr/bin/env bash
# Install the sample, pytest and vllm-omni-ci from ./wheelhouse, offline.
#
# Why: CI images must not reach a package index at build time. The host builds
# the wheels once (`vllm-omni-ci wheelhouse`) into the build context, and every
# sample Dockerfile calls this script after `COPY . .`.
set -euo pipefail

wheelhouse="${1:-wheelhouse}"
if ! compgen -G "${wheelhouse}/vllm_omni_ci-*.whl" >/dev/null; then
    echo "error: no ${wheelhouse}/vllm_omni_ci-*.whl in the build context; run 'vllm-omni-ci wheelhouse' first" >&2
    exit 1
fi
# Debian's python refuses system-wide pip installs unless told otherwise;
# --no-compile: test images gain little from precompiled bytecode, builds gain ~10 s.
export PIP_BREAK_SYSTEM_PACKAGES=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m pip install --no-index --find-links "${wheelhouse}" --no-build-isolation --no-compile \
    . vllm-omni-ci pytest
rm -rf "${wheelhouse}" build ./*.egg-info
vllm-omni-ci --list >/dev/null
python3 -c 'import omni_sample; print("omni_sample", omni_sample.__version__, "installed")'
