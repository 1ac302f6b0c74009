#!/usr/bin/env bash
# Prepare a fresh Debian 12 machine (as root) for devsy's tests: system packages, a running Docker engine, the
# project virtualenv and the guest image. Idempotent: every step checks first and does nothing when already done.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

# docker-registry and skopeo: fixtures/oci_registry.py runs its own loopback registry and pushes to it.
# bindfs: the msb simulator presents a --mount-dir's owner (uid=,gid=) through it (fixtures/msb_sim/views.py).
PACKAGES=(docker.io mmdebstrap git openssh-client docker-registry skopeo bindfs)
POLICY_RC=/usr/sbin/policy-rc.d
DOCKERD_LOG="${DEVSY_DOCKERD_LOG:-/var/log/devsy-dockerd.log}"
DOCKERD_WAIT_S="${DEVSY_DOCKERD_WAIT_S:-60}"
PYTHON="${PYTHON:-python3}"

log() { printf '[bootstrap] %s\n' "$*" >&2; }

now_us() { echo "${EPOCHREALTIME//[!0-9]/}"; }

# step NAME FUNCTION: run FUNCTION and print how long it took.
step() {
    local name="$1" started
    started="$(now_us)"
    shift
    "$@"
    local us=$(($(now_us) - started))
    log "$(printf '%-12s done in %d.%d s' "$name" $((us / 1000000)) $((us / 100000 % 10)))"
}

is_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

install_packages() {
    local missing=() pkg
    for pkg in "${PACKAGES[@]}"; do
        is_installed "$pkg" || missing+=("$pkg")
    done
    if ((${#missing[@]} == 0)); then
        log "packages: all present (${PACKAGES[*]})"
        return
    fi
    log "packages: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    timeout 300 apt-get update -qq
    if [[ " ${missing[*]} " == *" docker-registry "* && ! -e "$POLICY_RC" ]]; then
        # The package would start a system registry on :5000; tests run their own, so its service never starts.
        # Only it is held back (docker.io may still start its engine) and only when no policy is in place already.
        printf '#!/bin/sh\ncase "$1" in docker-registry|docker-registry.service) exit 101 ;; esac\nexit 0\n' \
            >"$POLICY_RC"
        chmod 755 "$POLICY_RC"
        trap 'rm -f "$POLICY_RC"' EXIT # also when the install fails or times out
    fi
    timeout 900 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if [[ " ${missing[*]} " == *" docker-registry "* && -d /run/systemd/system ]]; then
        systemctl disable docker-registry.service >/dev/null 2>&1 || true # nor at the next boot
    fi
}

docker_answers() {
    timeout 10 docker info >/dev/null 2>&1
}

start_docker() {
    if docker_answers; then
        log "docker: engine already answers"
        return
    fi
    log "docker: no engine answers; starting dockerd (log: $DOCKERD_LOG)"
    mkdir -p "$(dirname "$DOCKERD_LOG")"
    # setsid + nohup + no inherited stdio: dockerd must outlive this script and its caller's session.
    setsid nohup dockerd --bridge=none --iptables=false >>"$DOCKERD_LOG" 2>&1 </dev/null &
    local pid=$! deadline=$((SECONDS + DOCKERD_WAIT_S))
    until docker_answers; do
        if ! kill -0 "$pid" 2>/dev/null; then
            log "docker: dockerd (pid $pid) exited before answering; log tail:"
            tail -n 40 "$DOCKERD_LOG" >&2 || true
            exit 1
        fi
        if ((SECONDS >= deadline)); then
            log "docker: dockerd (pid $pid) did not answer \`docker info\` within ${DOCKERD_WAIT_S} s; log tail:"
            tail -n 40 "$DOCKERD_LOG" >&2 || true
            exit 1
        fi
        sleep 0.5 # poll interval of a real condition, not a synchronization
    done
    log "docker: dockerd (pid $pid) answers"
}

setup_venv() {
    if [[ ! -x .venv/bin/python ]]; then
        log "venv: creating .venv with $($PYTHON --version 2>&1)"
        if ! "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
            # Debian's own python3 needs python3-venv for ensurepip.
            DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq python3-venv >/dev/null
        fi
        "$PYTHON" -m venv .venv
    fi
    # tests/test_update_remote_user_uid.py runs devsy as a non-root user: the interpreter must be reachable by
    # others (a pyenv Python under root's 0700 home is not). Search permission on its folders only: nothing listed.
    local dir
    dir=$(dirname "$(readlink -f .venv/bin/python)")
    while [[ "$dir" != / ]]; do chmod o+x "$dir"; dir=$(dirname "$dir"); done
    log "venv: pip install -e '.[test,dev]' (compat mode)"
    # Compat mode: a .pth that puts the checkout on sys.path, instead of setuptools' import-hook finder, whose
    # import of pathlib and importlib.util cost every devsy process (CLI, provider, SSH master) ~10 ms at start.
    timeout 600 .venv/bin/pip install -q --disable-pip-version-check -e '.[test,dev]' \
        --config-settings editable_mode=compat
    # An editable install leaves devsy's own modules without bytecode, and these machines set
    # PYTHONDONTWRITEBYTECODE=1, so every devsy process would compile them again (~50 ms each start). `pip install .`
    # writes it; so does this.
    timeout 300 .venv/bin/python -m compileall -q devsy fixtures harness >/dev/null
}

build_guest_image() {
    # Every guest image (the default one and the two without python: issue 18), each cached by its recipe's key.
    timeout 1800 .venv/bin/python -m fixtures.guest_image --all
}

step packages install_packages
step docker start_docker
step venv setup_venv
step guest-image build_guest_image
log "ready"
