# shellcheck shell=bash
# Helpers of .ci/run, kept apart so that tests can source and exercise them:
# timed phases, services started in the background and waited for with a
# bound, and stopping exactly the services this run started.
#
# Needs LOG_DIR set by the caller. Keeps its state in STARTED_PIDS, PHASE,
# PHASE_START.

STARTED_PIDS=()
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

# Print the last lines of a log to stderr, to explain a failure where it happens.
show_log() {
  echo "--- last lines of $1:" >&2
  tail -n 20 "$1" >&2 || true
}

# Start a service in the background, logging to $LOG_DIR/NAME.log; remember its pid.
start() {
  local name=$1
  shift
  "$@" >"$LOG_DIR/$name.log" 2>&1 &
  STARTED_PIDS+=("$!")
  echo "started $name (pid $!): $*"
}

# wait_for LIMIT NAME WHAT COMMAND...: run COMMAND until it succeeds, at most
# LIMIT seconds. If the service NAME that this run started last exits first,
# fail at once. Either failure names WHAT and shows NAME's log.
wait_for() {
  local limit=$1 name=$2 what=$3
  shift 3
  local pid=""
  if ((${#STARTED_PIDS[@]})); then
    pid=${STARTED_PIDS[${#STARTED_PIDS[@]} - 1]}
  fi
  local begin=$SECONDS
  until "$@" >/dev/null 2>&1; do
    if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
      echo "error: $what exited before answering" >&2
      show_log "$LOG_DIR/$name.log"
      return 1
    fi
    if ((SECONDS - begin >= limit)); then
      echo "error: $what did not answer within ${limit}s" >&2
      show_log "$LOG_DIR/$name.log"
      return 1
    fi
    sleep 1
  done
  echo "$what answers after $((SECONDS - begin))s"
}

# Stop only the services this run started: SIGTERM, then wait up to 30 s each.
stop_started() {
  local pid
  for pid in "${STARTED_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${STARTED_PIDS[@]}"; do
    for _ in $(seq 1 150); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "warning: pid $pid still running 30s after SIGTERM" >&2
    fi
  done
}
