#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM-Omni project
#
# Drop-in for .buildkite/release/scripts/cleanup-nightly-builds.sh: the logic
# now lives in vllm-omni-ci (`vllm-omni-ci release.cleanup-nightly`,
# ci/release/cleanup.py). Needs DOCKERHUB_USERNAME and DOCKERHUB_TOKEN, as
# before; options such as --dry-run or --keep N pass through.
set -euo pipefail
exec vllm-omni-ci release.cleanup-nightly "$@"
