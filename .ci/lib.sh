# shellcheck shell=bash
# Helpers of .ci/run, kept apart so that tests can source and exercise them:
# timed phases and the disk report. Starting and stopping services is
# `vllm-omni-ci sandbox up` / `down`, not bash.
#
# Keeps its state in PHASE and PHASE_START.

PHASE=""
PHASE_START=$SECONDS

# Begin a phase, printing how long the previous one took.
phase() {
  if [[ -n "$PHASE" ]]; then
    echo "+++ phase '$PHASE' took $((SECONDS - PHASE_START))s"
  fi
  PHASE=$1
  PHASE_START=$SECONDS
  echo "--- $PHASE"
}

# One line: the space left on the filesystem of /.
free_disk() {
  echo "free disk $1: $(df -h --output=avail / | tail -n 1 | tr -d ' ') of $(df -h --output=size / | tail -n 1 | tr -d ' ')"
}
