#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM-Omni project
#
# Drop-in for .buildkite/release/scripts/publish-release-images.sh: the logic
# now lives in vllm-omni-ci (`vllm-omni-ci release.publish-images`,
# ci/release/publish.py). Same argument and tags; a bad mode still exits 2.
#
# Usage: publish-release-images.sh [release|nightly] [--dry-run]
# The mode is the first argument, as before; options after it (--dry-run) pass
# through, so a dry run never publishes by accident.
set -euo pipefail
exec vllm-omni-ci release.publish-images --mode "${1:-release}" "${@:2}"
