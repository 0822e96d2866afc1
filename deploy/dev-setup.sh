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

PYTHON="$venv/bin/python" bash "$repo_root/deploy/install-agents.sh"
