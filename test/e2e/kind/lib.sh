# shellcheck shell=bash
# Helpers for run.sh. Sourced, not run.

log() { printf '\n>> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# need CMD...: fail early, naming every missing command.
need() {
  local missing=()
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || missing+=("$c")
  done
  if ((${#missing[@]})); then
    die "missing: ${missing[*]}"
  fi
}

# retry TIMEOUT_SECONDS DESCRIPTION CMD...: run CMD every 5s until it
# succeeds or the timeout passes. For conditions kubectl wait cannot
# express (objects that do not exist yet).
retry() {
  local timeout=$1 what=$2
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      printf 'timed out after %ss waiting for %s; last attempt:\n' "$timeout" "$what" >&2
      "$@" >&2 || true
      return 1
    fi
    sleep 5
  done
}

# kube CLUSTER ARGS...: kubectl against one of the kind clusters.
kube() {
  local cluster=$1
  shift
  kubectl --context "kind-${cluster}" "$@"
}
