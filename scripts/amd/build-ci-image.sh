#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM-Omni project
#
# Drop-in for .buildkite/amd/scripts/build-ci-image.sh: the ROCm CI image build
# now lives in vllm-omni-ci (`vllm-omni-ci build-image --platform rocm`,
# ci/images/rocm.py). Same env (ROCM_CI_IMAGE_REGISTRY, PYTORCH_ROCM_ARCH,
# BUILDKITE_COMMIT), same cache key and buildx argv; input errors now exit 2.
# Extra arguments go to the task, e.g. --dry-run or --builder engine.
exec vllm-omni-ci build-image --platform rocm "$@"
