#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM-Omni project
#
# Drop-in for .buildkite/amd/scripts/run-amd-test.sh: the native ROCm runner now
# lives in vllm-omni-ci. Commands come from $TEST_COMMANDS, else from the
# arguments (joined by spaces, as before); `--` keeps them away from option parsing.
exec vllm-omni-ci run-tests --platform rocm -- "$@"
