#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM-Omni project
#
# Drop-in for .buildkite/npu/scripts/build-npu-image.sh: the build now lives in
# vllm-omni-ci (`vllm-omni-ci build-image --platform npu`, ci/images/npu.py).
# Same arguments; the device suffix selects the variant (none = a2). Extra
# arguments go to the task, e.g. --install-buildctl, which the old script did
# implicitly and which is now opt-in. The build context is the current
# directory, as before.
#
# Usage: build-npu-image.sh <dockerfile> <image_tag> [device_suffix] [task options...]
# (give an empty device_suffix "" before task options for A2)
set -euo pipefail
dockerfile=${1:?Dockerfile is required}
image_tag=${2:?Image tag is required}
device_suffix=${3:-}
variant=${device_suffix#-}
exec vllm-omni-ci build-image --platform npu --repo . --variant "${variant:-a2}" \
  --dockerfile "${dockerfile}" --tag "${image_tag}" "${@:4}"
