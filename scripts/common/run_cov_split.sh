#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM-Omni project
#
# Shim for .buildkite/common/scripts/run_cov_split.sh: the logic now lives in
# vllm-omni-ci (`vllm-omni-ci cov-split`, ci/covsplit.py). Same arguments, same
# exit codes, except that a flag without its value is a usage error (exit 2).
#
# Usage: run_cov_split.sh --model-id <id> [--offline <path>]... [--online <path>]... \
#                         [-- <pytest args...>]
set -euo pipefail
exec vllm-omni-ci cov-split "$@"
