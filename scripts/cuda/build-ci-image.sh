#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM-Omni project
#
# Drop-in for .buildkite/cuda/scripts/build-ci-image.sh: the CUDA CI image build
# now lives in vllm-omni-ci (`vllm-omni-ci build-image --platform cuda`,
# ci/images/cuda.py). Same ECR login, cache key (requirements in C byte order)
# and buildx argv; input errors now exit 2. Extra arguments go to the task.
exec vllm-omni-ci build-image --platform cuda "$@"
