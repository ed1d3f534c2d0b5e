#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM-Omni project
#
# Drop-in for .buildkite/intel/scripts/run-xpu-test.sh: both halves now live in
# vllm-omni-ci. `build-image --platform xpu` resolves the vLLM XPU base (pull,
# local copy, VLLM_BASE, vLLM source) and builds xpu/vllm-omni-ci:$BUILDKITE_COMMIT;
# `run-tests --platform xpu` runs the checkout's .buildkite/intel/xpu-tests.txt (else
# the built-in list) in a container of it and
# removes the container and the image on every exit. Same env as before:
# VLLM_VERSION, BUILDKITE_COMMIT, VLLM_BASE, EXPORT_COMPRESSION, HF_CACHE.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
vllm-omni-ci build-image --platform xpu
exec vllm-omni-ci run-tests --platform xpu
