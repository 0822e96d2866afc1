#!/usr/bin/env bash
# Developer / CI setup, idempotent: the project venv (.venv) with the dev extras,
# then the pinned pi agents (deploy/install-agents.sh). Needs python3 >= 3.11,
# Node >= 20.6 with npm, and access to PyPI and the npm registry.
#
#   PYTHON3   interpreter used to create .venv when it is missing (default: python3)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo_root/.venv"
python3_bin="${PYTHON3:-python3}"

die() {
    echo "dev-setup: $*" >&2
    exit 1
}

if [[ ! -x "$venv/bin/python" ]]; then
    command -v "$python3_bin" >/dev/null 2>&1 || die "$python3_bin not found"
    "$python3_bin" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
        die "Python >= 3.11 required, $python3_bin is $("$python3_bin" --version 2>&1)"
    "$python3_bin" -m venv "$venv" || die "could not create $venv"
fi

# pip may warn about configured find-links locations that do not exist on this
# machine ("WARNING: Location '...' is ignored: ..."): harmless, so filtered out.
# Anything else it prints is shown; on failure everything is shown.
log="$(mktemp)"
trap 'rm -rf "$log"' EXIT
if ! (cd "$repo_root" && "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    -e '.[dev]') >"$log" 2>&1; then
    cat "$log" >&2
    die "pip install -e '.[dev]' failed"
fi
grep -v -E "^WARNING: Location '.*' is ignored" "$log" >&2 || true

# Debian packages: bubblewrap, the agents' sandbox (the bridge refuses to start agents
# without it unless PI_BRIDGE_SANDBOX=off), passt (pasta: each agent's own network) and
# a C compiler (the library that makes agents non-dumpable, built below); for the tests a real redis-server for the
# redis store tests, docker-compose and systemd-analyze to validate the deploy
# files, and espeak-ng and opusenc to speak the voice notes of the voice tests. Best effort: without them the setup still succeeds and the bridge or those
# tests say what is missing.
install_debian_packages() {
    local missing=() pair command package
    for pair in bwrap:bubblewrap pasta:passt cc:gcc redis-server:redis-server \
        docker-compose:docker-compose systemd-analyze:systemd espeak-ng:espeak-ng \
        opusenc:opus-tools; do
        command="${pair%%:*}" package="${pair#*:}"
        command -v "$command" >/dev/null 2>&1 || missing+=("$package")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    local hint="install the Debian packages ${missing[*]} yourself for the tests that need them"
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "dev-setup: apt-get is unavailable: $hint" >&2
        return 0
    fi
    local sudo=""
    if [[ "$(id -u)" -ne 0 ]]; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "dev-setup: not root and no sudo: $hint" >&2
            return 0
        fi
        sudo="sudo"
    fi
    echo "dev-setup: installing ${missing[*]} (apt-get) for the tests" >&2
    local apt="$sudo env DEBIAN_FRONTEND=noninteractive apt-get"
    # Only refresh the package lists when the install fails (they may be stale or empty).
    if ! $apt install -y -q --no-install-recommends "${missing[@]}" >/dev/null; then
        echo "dev-setup: retrying after apt-get update" >&2
        if ! { $apt update -q >/dev/null && $apt install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }; then
            echo "dev-setup: could not install ${missing[*]}: $hint" >&2
            return 0
        fi
    fi
    command -v redis-server >/dev/null 2>&1 ||
        echo "dev-setup: redis-server installed but not on PATH: $hint" >&2
}
install_debian_packages

# pasta opens the tun device as the agents' user (a root bridge's agents run as an
# unprivileged one): it must be open to everyone, as distributions make it (0666).
if [[ "$(id -u)" -eq 0 && -c /dev/net/tun && "$(stat -c %a /dev/net/tun)" != 666 ]]; then
    echo "dev-setup: opening /dev/net/tun to everyone (mode 0666, the usual default) for pasta" >&2
    chmod 0666 /dev/net/tun || echo "dev-setup: could not chmod /dev/net/tun" >&2
fi

# The library preloaded into every agent so that no tool it runs can reach its process
# (docs/security.md, "No tool reaches pi"); built from bridge/rpc/nodump.c.
"$venv/bin/python" -m bridge.rpc.nodump >/dev/null ||
    echo "dev-setup: could not build the agents' non-dumpable library; sandboxed agents will not start" >&2

PYTHON="$venv/bin/python" bash "$repo_root/deploy/install-agents.sh"
