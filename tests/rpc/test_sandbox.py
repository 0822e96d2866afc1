"""The agent's sandbox: the bwrap command line, the private config, and real agents in it.

The command line and `contain` are checked on their own (tables); then `pi-bridge run`
as a real subprocess, holding a bot token in its environment, serves two Telegram
users whose real agents run bash tools against the scripted fake LLM: one plants a
note in its workspace, the other scans every `/proc/*/environ` it can read for the
token and tries the data dir, the store and the first one's workspace. With the
sandbox nothing of those is there; with `PI_BRIDGE_SANDBOX=off` the non-dumpable
bridge (and an agent without capabilities, as root) still keeps the token unread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import pytest

from bridge.containment.sandbox import config_of, contain, home_of, probe
from bridge.options import AgentOptions, BridgeOptions, ChatOptions, SandboxOptions
from bridge.rpc import nodump
from bridge.rpc.errors import AgentStartError
from bridge.rpc.process import AgentSpec, keeper_arguments, spawn, terminate_group
from bridge.rpc.reaper import children, parent_of
from bridge.rpc.sandbox import STDIO_SHIM, Bind, Network, Sandbox, bwrap_argv
from tests.support.agents import SUITE_USER
from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, stop, write_config
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_telegram import ALICE, TOKEN, FakeTelegram
from tests.support.paths import REPO

if TYPE_CHECKING:
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

BWRAP = "/usr/bin/bwrap"
DATA = Path("/srv/data")
WORK = DATA / "workspaces" / "tg_1"
SESSION = DATA / "sessions" / "tg_1"


def mounts(argv: list[str]) -> list[tuple[str, ...]]:
    """The mount options after the fixed ones, as (option, path[, path]) tuples."""
    out: list[tuple[str, ...]] = []
    rest = argv[argv.index("/tmp") + 1 : argv.index("--chdir")]
    while rest and rest[0] != "--remount-ro":
        option = rest.pop(0)
        count = 1 if option == "--tmpfs" else 2
        out.append((option, *rest[:count]))
        del rest[:count]
    return out


@pytest.mark.parametrize(
    ("sandbox", "command", "expected"),
    [
        pytest.param(
            Sandbox(BWRAP, writable=(WORK, SESSION), hidden=(DATA,)),
            ["/usr/bin/pi"],
            [
                ("--tmpfs", str(DATA)),
                ("--bind", str(SESSION), str(SESSION)),
                ("--bind", str(WORK), str(WORK)),
            ],
            id="the data dir is hidden, then the conversation's own dirs are bound back",
        ),
        pytest.param(
            Sandbox(BWRAP, writable=(Path("/srv"), SESSION), hidden=(DATA,)),
            ["/usr/bin/pi"],
            [
                ("--bind", "/srv", "/srv"),
                ("--tmpfs", str(DATA)),
                ("--bind", str(SESSION), str(SESSION)),
            ],
            id="a workspace holding the data dir still has the data dir hidden",
        ),
        pytest.param(
            Sandbox(BWRAP, writable=(DATA,), hidden=(DATA,)),
            ["/usr/bin/pi"],
            [("--tmpfs", str(DATA)), ("--bind", str(DATA), str(DATA))],
            id="at equal depth the writable mount comes last",
        ),
        pytest.param(
            Sandbox(BWRAP, binds=(Bind(Path("/etc/pi/ext"), Path("/c/pi/extensions")),)),
            ["/tmp/ci/repo/.agents/pi", "-e", "/tmp/x/ext.ts", "--flag=/tmp/y/z", "/tmp/top"],
            [
                ("--ro-bind-try", "/tmp/ci", "/tmp/ci"),
                ("--ro-bind-try", "/tmp/top", "/tmp/top"),
                ("--ro-bind-try", "/tmp/x", "/tmp/x"),
                ("--ro-bind-try", "/tmp/y", "/tmp/y"),
                ("--ro-bind-try", "/etc/pi/ext", "/c/pi/extensions"),
            ],
            id="what the command names under the private /tmp is bound back read-only",
        ),
    ],
)
def test_the_mounts_are_ordered_so_the_deeper_one_wins(
    sandbox: Sandbox, command: list[str], expected: list[tuple[str, ...]]
) -> None:
    argv = bwrap_argv(sandbox, WORK, command)
    assert mounts(argv) == expected
    remounted = [argv[i + 1] for i, a in enumerate(argv) if a == "--remount-ro"]
    assert remounted == [str(p) for p in sandbox.hidden]  # the covers, read-only at the end
    # The agent is started by the shim that moves its pipes back from fds 3 and 4.
    assert argv[-len(command) - len(STDIO_SHIM) - 1 :] == ["--", *STDIO_SHIM, *command]


@pytest.mark.parametrize(
    ("network", "shared", "connected"),
    [("host", True, False), ("isolated", False, True), ("off", False, False)],
)
def test_every_namespace_is_new_and_the_network_is_shared_only_with_the_host(
    network: Network, shared: bool, connected: bool
) -> None:
    argv = bwrap_argv(Sandbox(BWRAP, network=network), WORK, ["pi"])
    assert argv[:2] == [BWRAP, "--unshare-all"]
    assert ("--share-net" in argv) is shared
    # Isolated: bwrap names its new namespace to the keeper and waits for pasta; the
    # agent is uid 0 of its own user namespace, so that bwrap nests no second one that
    # pasta, run by a bridge that is not root, could not join.
    assert ("--info-fd" in argv and "--block-fd" in argv) is connected
    uid = argv[argv.index("--uid") + 1] if "--uid" in argv else None
    assert uid == ("0" if connected else None)
    assert {"--die-with-parent", "--cap-drop"} <= set(argv)
    assert "--new-session" not in argv  # the agent stays in the group the bridge signals
    assert argv[argv.index("--ro-bind") : argv.index("--ro-bind") + 3] == ["--ro-bind", "/", "/"]


def test_a_hidden_file_is_covered_with_dev_null() -> None:
    argv = bwrap_argv(Sandbox(BWRAP, hidden_files=(Path("/etc/pi-bridge.toml"),)), WORK, ["pi"])
    assert mounts(argv) == [("--ro-bind", "/dev/null", "/etc/pi-bridge.toml")]


def options(
    tmp_path: Path, mode: str = "bwrap", chats: dict[str, ChatOptions] | None = None
) -> BridgeOptions:
    home = tmp_path / "operator"
    agent_dir = home / ".pi" / "agent"
    (agent_dir / "extensions").mkdir(parents=True)
    (agent_dir / "sessions").mkdir()
    (agent_dir / "models.json").write_text('{"providers": {}}')
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
    sandbox = SandboxOptions(mode="bwrap" if mode == "bwrap" else "off", user=SUITE_USER)
    return BridgeOptions(
        data_dir=tmp_path / "data",
        agent=AgentOptions(argv=("/usr/bin/true",), env=env, sandbox=sandbox),
        chats=chats or {},
    )


def spec_for(opts: BridgeOptions, key: str, workspace: Path | None = None) -> AgentSpec:
    cwd = workspace or opts.workspace(key)
    cwd.mkdir(parents=True, exist_ok=True)
    opts.session_dir(key).mkdir(parents=True, exist_ok=True)
    spec = AgentSpec(argv=["/usr/bin/true"], cwd=cwd, env=opts.agent.env)
    return contain(spec, opts, key, opts.session_dir(key))


def test_with_the_sandbox_off_the_agent_is_only_made_non_dumpable(tmp_path: Path) -> None:
    opts = options(tmp_path, mode="off")
    spec = AgentSpec(argv=["/usr/bin/true"], cwd=tmp_path, env=opts.agent.env)
    contained = contain(spec, opts, "tg:1", tmp_path)
    assert contained == dataclasses.replace(
        spec, env={**spec.env, "LD_PRELOAD": str(nodump.LIBRARY)}
    )


def test_the_agent_alone_is_preloaded_non_dumpable() -> None:
    # bwrap itself must stay dumpable (it writes its own uid map), so the library is
    # set for the sandboxed command only, and bound back wherever it lies.
    library = Path("/tmp/ci/libnodump.so")
    argv = bwrap_argv(Sandbox(BWRAP, preload=library), WORK, ["pi"])
    assert argv[argv.index("--setenv") : argv.index("--setenv") + 3] == [
        "--setenv",
        "LD_PRELOAD",
        str(library),
    ]
    assert ("--ro-bind-try", str(library), str(library)) in mounts(argv)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is checked by test_bwrap_...")
def test_the_agent_gets_a_private_home_and_a_fresh_copy_of_the_operators_config(
    tmp_path: Path,
) -> None:
    opts = options(tmp_path)
    spec = spec_for(opts, "tg:1")
    private = config_of(opts, "tg:1").resolve() / "pi_coding_agent_dir"
    assert spec.env["HOME"] == str(home_of(opts, "tg:1").resolve())
    assert spec.env["PI_CODING_AGENT_DIR"] == str(private)
    assert (private / "models.json").read_text() == '{"providers": {}}'
    assert spec.sandbox is not None
    operator = (tmp_path / "operator" / ".pi" / "agent").resolve()
    # Extensions run code: bound read-only, never copied; the operator's sessions stay out.
    assert spec.sandbox.binds == (Bind(operator / "extensions", private / "extensions"),)
    assert opts.data_dir.resolve() in spec.sandbox.hidden


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is checked by test_bwrap_...")
def test_a_link_the_last_run_left_in_its_config_is_removed_not_written_through(
    tmp_path: Path,
) -> None:
    opts = options(tmp_path)
    spec_for(opts, "tg:1")
    victim = tmp_path / "store-like-file"
    victim.write_text("precious")
    private = config_of(opts, "tg:1") / "pi_coding_agent_dir"
    (private / "models.json").unlink()
    (private / "models.json").symlink_to(victim)
    spec_for(opts, "tg:1")
    assert victim.read_text() == "precious"
    assert not (private / "models.json").is_symlink()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is checked by test_bwrap_...")
def test_other_conversations_configured_workspaces_are_hidden_and_a_clash_is_refused(
    tmp_path: Path,
) -> None:
    repo_a, repo_b = tmp_path / "repo-a", tmp_path / "repo-b"
    repo_b.mkdir()
    chats = {"tg:1": ChatOptions(workspace=repo_a), "tg:2": ChatOptions(workspace=repo_b)}
    opts = options(tmp_path, chats=chats)
    spec = spec_for(opts, "tg:1", repo_a)
    assert spec.sandbox is not None
    assert repo_b.resolve() in spec.sandbox.hidden
    assert repo_a.resolve() not in spec.sandbox.hidden
    clash = options(tmp_path / "x", chats={"tg:1": ChatOptions(workspace=tmp_path / "x" / "data")})
    with pytest.raises(AgentStartError, match="refusing to give the agent write access"):
        spec_for(clash, "tg:1", tmp_path / "x" / "data")


def test_bwrap_is_installed_and_starts_a_sandbox_here() -> None:
    # The setup installs bubblewrap: a machine where it cannot start fails here, loudly,
    # rather than running the suite's sandboxed journeys unsandboxed.
    assert probe() is None


# --- real agents in a real bridge process -------------------------------------------------

BOB = {"id": 43, "is_bot": False, "first_name": "Bob", "username": "bob"}


def probe_script(data: Path) -> str:
    """A bash tool's look around: what of the bridge's secrets and data it can reach."""
    store, other = data / "bridge.sqlite3", data / "workspaces" / "tg_43" / "note.txt"
    return "\n".join(
        [
            "n=0; found=0",
            "for f in /proc/[0-9]*/environ; do",
            '  if tr "\\0" "\\n" < "$f" > /tmp/env.txt 2>/dev/null; then',
            "    n=$((n+1))",
            f"    grep -q -F '{TOKEN}' /tmp/env.txt && found=$((found+1))",
            "  fi",
            "done",
            'echo "environs-read=$n token-found=$found"',
            # The scan's own means work: a process reads its own environment. (The
            # agent's other processes are non-dumpable now, so their files are closed.)
            "grep -q -F PATH /proc/self/environ && echo self-environ=read",
            'echo "processes=$(ls -d /proc/[0-9]* | wc -l)"',
            f'echo "data-entries=$(ls -A {data} 2>/dev/null | wc -l)"',
            f'test -e {store} && echo "store=visible" || echo "store=absent"',
            f"echo tampered >> {store} 2>/dev/null && echo store-write=yes || echo store-write=no",
            f'cat {other} 2>/dev/null || echo "other=absent"',
            'echo mine > own.txt && echo "own-write=ok"',
            'echo bad > "$PI_CODING_AGENT_DIR/extensions/planted.ts" 2>/dev/null'
            ' && echo "extension-write=yes" || echo "extension-write=no"',
        ]
    )


def report(llm: FakeLLM) -> dict[str, str]:
    """The probe's `name=value` lines, from the tool result the agent sent the model."""
    text = next(str(r.messages) for r in llm.requests if "environs-read=" in str(r.messages))
    return dict(re.findall(r"([a-z-]+)=([A-Za-z0-9-]+)", text.replace("\\n", "\n")))


@pytest.mark.anyio
@pytest.mark.agent
@pytest.mark.parametrize("mode", ["bwrap", "off"])
async def test_an_agent_finds_no_bridge_secret_in_proc_and_with_the_sandbox_no_data(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome, mode: str
) -> None:
    data = tmp_path / "data"
    plant = Reply(tool_calls=[ToolCall("bash", {"command": "echo b-private > note.txt"})])
    fake_llm.add("PLANT", plant, Reply(text="Planted."))
    look = Reply(tool_calls=[ToolCall("bash", {"command": probe_script(data)})])
    fake_llm.add("PROBE", look, Reply(text="Probed."))
    config = write_config(tmp_path, "[telegram]\npoll_timeout = 1\n")
    extensions = agent_home.agent_dir / "extensions"
    extensions.mkdir()
    try:
        async with FakeTelegram() as telegram:
            env = cli_env(
                tmp_path,
                agent_home,
                PI_BRIDGE_CONFIG=config,
                PI_BRIDGE_SANDBOX=mode,
                # The probe writes outside its workspace on purpose: the approval gate
                # would rightly ask first; this test is about what the sandbox stops.
                PI_BRIDGE_APPROVALS="off",
                TELEGRAM_BOT_TOKEN=TOKEN,
                TELEGRAM_API_BASE_URL=telegram.base_url,
                TELEGRAM_FILE_BASE_URL=telegram.base_file_url,
                TELEGRAM_ALLOWED_USERS=f"{ALICE['id']},{BOB['id']}",
            )
            async with bridge_process(tmp_path, env, f"{mode}.log") as process:
                telegram.message(43, "PLANT a note", user=BOB)
                await telegram.bot_message("Planted.", 43, within=WAIT)
                telegram.message(42, "PROBE around")
                await telegram.bot_message("Probed.", 42, within=WAIT)
                assert await stop(process) == 0
    finally:
        kill_agents(data)

    seen = report(fake_llm)
    assert seen["own-write"] == "ok"
    assert (data / "workspaces" / "tg_42" / "own.txt").read_text() == "mine\n"
    assert seen["self-environ"] == "read"  # the scan's means work
    assert seen["token-found"] == "0"
    assert (data / "workspaces" / "tg_43" / "note.txt").read_text() == "b-private\n"
    if mode == "bwrap":
        # Its own PID namespace: bwrap's init, the agent, its shell, the probe's commands.
        assert int(seen["processes"]) < 10
        assert seen["data-entries"] == "4"  # mount points: its workspace, session, home, config
        assert seen["store"] == "absent"
        assert seen["store-write"] == "no"
        assert seen["other"] == "absent"
        assert b"tampered" not in (data / "bridge.sqlite3").read_bytes()
        # The operator's extensions are read-only: nothing planted runs anywhere else.
        assert seen["extension-write"] == "no"
        assert not (extensions / "planted.ts").exists()


# --- the bridge's own process -------------------------------------------------------------

CANARY = "canary-4f1c9e"


def without_capabilities() -> list[str]:
    """A prefix that runs a command as this user with no capabilities at all: as root,
    an empty bounding set means exec grants none (what the keeper does for agents)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "setpriv (util-linux) is needed to drop capabilities"
    return [setpriv, "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]


@pytest.mark.parametrize(
    ("undumpable", "readable"),
    [(False, True), (True, False)],
    ids=["a dumpable process's environ is readable", "a non-dumpable one's is not"],
)
def test_a_non_dumpable_process_keeps_its_environment_from_the_same_user(
    undumpable: bool, readable: bool
) -> None:
    # Both sides without capabilities, so only the dumpable flag decides (with them,
    # root reads anything; the keeper and bwrap make sure an agent has none).
    code = "import sys, time; from bridge.containment.sandbox import make_undumpable; "
    code += "sys.exit(3) if not make_undumpable() else None; " if undumpable else ""
    code += "print('ready', flush=True); time.sleep(30)"
    env = {"PATH": os.environ.get("PATH", os.defpath), "PYTHONPATH": str(REPO), "SECRET": CANARY}
    with subprocess.Popen(
        [*without_capabilities(), sys.executable, "-c", code], env=env, stdout=subprocess.PIPE
    ) as subject:
        try:
            assert subject.stdout is not None
            assert subject.stdout.readline() == b"ready\n"
            reader = subprocess.run(
                [*without_capabilities(), "cat", f"/proc/{subject.pid}/environ"],
                capture_output=True,
                check=False,
            )
        finally:
            subject.kill()
    assert (CANARY.encode() in reader.stdout) is readable
    if not readable:
        assert b"Permission denied" in reader.stderr


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("network", "listed", "reached"),
    [
        ("host", False, True),
        ("off", False, False),
        ("isolated", False, False),
        ("isolated", True, True),
    ],
    ids=["host", "off", "isolated", "isolated, the port listed"],
)
async def test_only_a_listed_port_of_the_hosts_loopback_is_reached_unless_on_the_host(
    tmp_path: Path, network: Network, listed: bool, reached: bool
) -> None:
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        dial = f"import socket; socket.create_connection(('127.0.0.1', {port}), 5).send(b'hi')"
        opts = options(tmp_path)
        ports = (port,) if listed else ()
        sandbox = dataclasses.replace(opts.agent.sandbox, network=network, host_ports=ports)
        opts = dataclasses.replace(opts, agent=dataclasses.replace(opts.agent, sandbox=sandbox))
        spec = dataclasses.replace(spec_for(opts, "tg:1"), argv=[sys.executable, "-c", dial])
        code, received = await dialled(listener, spec, reached)
    assert (code == 0) is reached
    assert (received == [b"hi"]) is reached


async def dialled(
    listener: anyio.abc.Listener[anyio.abc.SocketStream], spec: AgentSpec, reached: bool
) -> tuple[int | None, list[bytes]]:
    """Run `spec` (which dials `listener` and says "hi"): its exit code, what arrived."""
    received: list[bytes] = []

    async def serve(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            received.append(await stream.receive())

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        process = await spawn(spec)
        with anyio.fail_after(20):
            code = await process.wait()
            while reached and not received:  # noqa: ASYNC110 (the server task records it)
                await anyio.sleep(0.01)
        await terminate_group(process)
        tg.cancel_scope.cancel()
    return code, received


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "reached"), [("off", True), ("bwrap", False)])
async def test_the_systems_sockets_under_run_are_out_of_a_sandboxed_agents_reach(
    tmp_path: Path, mode: str, reached: bool
) -> None:
    # Read-only mounts do not stop connect(): a root agent would pass the permission
    # check of a root-only socket such as Docker's. Here a stand-in for one.
    run = Path("/run")
    if not os.access(run, os.W_OK):
        pytest.skip("needs a /run this user can create a socket in (as in CI, root)")
    path = run / f"pi-bridge-test-{os.getpid()}-{mode}.sock"
    dial = (
        f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r}); s.send(b'hi')"
    )
    opts = options(tmp_path, mode=mode)
    spec = dataclasses.replace(spec_for(opts, "tg:1"), argv=[sys.executable, "-c", dial])
    try:
        async with await anyio.create_unix_listener(path) as listener:
            code, received = await dialled(listener, spec, reached)
    finally:
        path.unlink(missing_ok=True)
    assert (code == 0) is reached
    assert (received == [b"hi"]) is reached


@pytest.mark.anyio
async def test_an_isolated_agent_reaches_its_listed_port_from_its_first_instruction(
    tmp_path: Path,
) -> None:
    # pasta sets the namespace's route up before it listens on the forwarded ports: an
    # agent let go at the route alone was refused now and then (3 of 100 under load),
    # and a run whose first model request is refused fails. Many at once, as under load.
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        # bash dials at once, where an interpreter would first take its time starting.
        dial = ["/bin/bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo hi >&3"]
        codes: list[int | None] = []

        async def serve(stream: anyio.abc.SocketStream) -> None:
            async with stream:
                await stream.receive()

        async def one(key: str) -> None:
            opts = options(tmp_path / key)
            sandbox = dataclasses.replace(opts.agent.sandbox, host_ports=(port,))
            opts = dataclasses.replace(opts, agent=dataclasses.replace(opts.agent, sandbox=sandbox))
            spec = dataclasses.replace(spec_for(opts, key), argv=dial)
            process = await spawn(spec)
            codes.append(await process.wait())
            await terminate_group(process)

        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, serve)
            with anyio.fail_after(60):
                async with anyio.create_task_group() as agents:
                    for n in range(20):
                        agents.start_soon(one, f"tg:{n}")
            tg.cancel_scope.cancel()
    assert codes == [0] * 20


REAPER = REPO / "bridge" / "rpc" / "reaper.py"
HELD = 3.0  # s bwrap's child is held at most, for a pasta started too soon to act


def lo_up(pid: int) -> bool:
    """Whether the loopback of `pid`'s network namespace is up (it then has ::1)."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/net/if_inet6") as addresses:
        return any(row.split()[-1:] == ["lo"] for row in addresses)
    return False


def holder_of(keeper: int) -> int | None:
    """bwrap's child (the keeper's grandchild): it holds the sandbox's namespaces."""
    return next((h for b in children(keeper) for h in children(b)), None)


def map_user(pid: int) -> None:
    """The uid and gid maps of `pid`'s new user namespace (what bwrap leaves to whoever
    holds it with --userns-block-fd): this user as 0, as bwrap's --uid 0 --gid 0."""
    Path(f"/proc/{pid}/uid_map").write_text(f"0 {os.getuid()} 1")
    Path(f"/proc/{pid}/setgroups").write_text("deny")
    Path(f"/proc/{pid}/gid_map").write_text(f"0 {os.getgid()} 1")


def test_pasta_joins_the_sandbox_only_once_bwrap_has_set_its_loopback_up(tmp_path: Path) -> None:
    # bwrap names its namespace's holder on --info-fd before that child sets the loopback
    # up (an exclusive RTM_NEWADDR of 127.0.0.1). pasta sets lo up too, and the kernel
    # gives an up lo 127.0.0.1: with pasta first, bwrap failed ("loopback: Failed
    # RTM_NEWADDR", exit 1) and the agent died at its start, with the conversation's
    # first message (a few starts in a hundred on a loaded two-core machine). Here
    # bwrap's child is held (--userns-block-fd) until its lo is up or HELD has passed.
    opts = options(tmp_path)
    spec = dataclasses.replace(spec_for(opts, "tg:1"), argv=["/bin/true"])
    flags, found, command = keeper_arguments(spec)
    low, release = os.pipe()
    hold = fcntl.fcntl(low, fcntl.F_DUPFD, 10)  # above the fds the keeper places (0-6)
    os.close(low)
    command = [command[0], "--unshare-user", "--userns-block-fd", str(hold), *command[1:]]
    keeper = [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), *flags, found, *command]
    process = subprocess.Popen(
        keeper,
        pass_fds=(hold,),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    os.close(hold)
    try:
        deadline = time.monotonic() + HELD
        holder = None
        while time.monotonic() < deadline and (holder is None or not lo_up(holder)):
            holder = holder or holder_of(process.pid)
            time.sleep(0.01)
        assert holder is not None, "bwrap made no sandbox"
        map_user(holder)
        os.write(release, b"1")
        _, err = process.communicate(timeout=30)
    finally:
        os.close(release)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert b"loopback" not in err, err
    assert process.returncode == 0, err


@pytest.mark.parametrize(
    "user",
    [
        SUITE_USER,
        pytest.param(
            "",  # a root bridge's default: nobody; pasta runs as that user (--runas)
            marks=pytest.mark.skipif(os.geteuid() != 0, reason="a root bridge's case"),
            id="as nobody",
        ),
    ],
    ids=lambda user: f"as {user}",
)
@pytest.mark.parametrize("watcher_too", [False, True], ids=["keeper", "keeper and watcher"])
def test_pasta_ends_with_its_keeper_even_when_the_keeper_is_killed(
    tmp_path: Path, user: str, watcher_too: bool
) -> None:
    # The keeper ends pasta when the agent exits; a keeper SIGKILLed (the OOM killer, a
    # kill -9) ran no code, and pasta, which holds the namespace itself, stayed for good
    # (the suite's restart tests left one per killed agent). The kernel's parent-death
    # signal alone is cleared where pasta changes user: a watcher of ours ends it.
    opts = options(tmp_path)
    sandbox = dataclasses.replace(opts.agent.sandbox, user=user)
    opts = dataclasses.replace(opts, agent=dataclasses.replace(opts.agent, sandbox=sandbox))
    for step in (tmp_path, *tmp_path.parents):  # the sandbox's user passes through
        if step == step.parent:
            break
        step.chmod(step.stat().st_mode | 0o011)
    spec = dataclasses.replace(spec_for(opts, "tg:1"), argv=["/bin/sleep", "60"])
    flags, found, command = keeper_arguments(spec)
    keeper = [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), *flags, found, *command]
    process = subprocess.Popen(
        keeper,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        pasta = None
        deadline = time.monotonic() + 30
        while pasta is None and time.monotonic() < deadline:
            # The keeper's child is pasta's watcher; pasta is the watcher's child.
            below = [p for c in children(process.pid) for p in (c, *children(c))]
            pasta = next((p for p in below if _is_pasta(p)), None)
            time.sleep(0.02)
        assert pasta is not None, "no pasta started"
        if watcher_too:  # as the suite's kill_agents does: every process in the workspace
            if user != SUITE_USER:
                pytest.skip("pasta, another user, holds no parent-death signal of its own")
            os.kill(parent_of(Path(f"/proc/{pasta}/stat").read_text()), signal.SIGKILL)
        process.send_signal(signal.SIGKILL)
        process.wait()
        deadline = time.monotonic() + 5
        while _alive(pasta) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(pasta)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _is_pasta(pid: int) -> bool:
    """By its arguments: pasta may exec another binary (passt.avx2) under its name."""
    with contextlib.suppress(OSError):
        return b"--config-net" in Path(f"/proc/{pid}/cmdline").read_bytes()
    return False


def _alive(pid: int) -> bool:
    """Running, not a zombie nobody reaped yet (init reaps an orphan's soon)."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False
