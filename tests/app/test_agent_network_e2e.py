"""An agent has a network of its own: the bridge's ports are out of its reach.

`pi-bridge run` as a process, Telegram in webhook mode, Slack in HTTP mode, the metrics
endpoint on, a real redis-server on the host's loopback, and a real agent whose bash
tool probes them all, then leaves a process behind that holds the webhook's port.
With the default isolated
network it reaches none of them (only the fake LLM, the port the operator listed), and
the bridge, restarted while that process still runs (its agent detached, as
`on_stop = "detach"` keeps them), takes its webhook port again and answers. With
`network = "host"`, kept on purpose, the agent reaches them all.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, stop, write_config
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_slack import ALICE, FakeSlack
from tests.support.fake_telegram import SECRET, TOKEN, FakeTelegram
from tests.support.loopback import free_port, until
from tests.support.redis_server import RedisServer, redis_server_bin

if TYPE_CHECKING:
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]
CHAT = 42


def probe(ports: dict[str, int], folder: Path) -> str:
    """A bash tool's look at the host's ports, then a holder of the webhook's port."""
    dial = "; ".join(
        f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 3)'"
        f" 2>/dev/null && echo {name}=reached || echo {name}=refused"
        for name, port in ports.items()
    )
    # It waits for the port to come free (the bridge holds it until it stops), then
    # keeps it: on the host's network the restarted bridge could not listen there.
    hold = (
        "import socket, time\n"
        "for _ in range(1200):\n"
        "    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"    try: s.bind(('127.0.0.1', {ports['webhook']})); s.listen(); break\n"
        "    except OSError: s.close(); time.sleep(0.05)\n"
        "time.sleep(600)\n"
    )
    Path(folder, "hold.py").write_text(hold)
    return f"{dial}; (setsid python3 {folder}/hold.py >/dev/null 2>&1 &); echo held=yes"


@pytest.mark.parametrize("network", ["isolated", "host"])
async def test_an_agent_reaches_no_port_of_the_bridge_and_cannot_take_the_webhooks(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome, network: str
) -> None:
    if redis_server_bin() is None:
        pytest.skip("redis-server is not installed")
    hook, metrics, slack_http = free_port(), free_port(), free_port()
    with RedisServer(tmp_path / "redis") as redis:
        ports = {"webhook": hook, "metrics": metrics, "slack": slack_http, "redis": redis.port}
        look = Reply(tool_calls=[ToolCall("bash", {"command": probe(ports, tmp_path)})])
        fake_llm.add("PROBE", look, Reply(text="Probed."))
        fake_llm.add("AGAIN", Reply(text="Here again."))
        events = f"http://127.0.0.1:{slack_http}/slack/events"
        # The holder's script is read from here, which the sandbox's private /tmp hides.
        config = f'[slack]\nhttp_host = "127.0.0.1"\n[sandbox]\nread_only = ["{tmp_path}"]\n'
        async with FakeTelegram() as telegram, FakeSlack(events_url=events) as slack:
            env = cli_env(
                tmp_path,
                agent_home,
                PI_BRIDGE_CONFIG=write_config(tmp_path, config),
                PI_BRIDGE_NETWORK=network,
                PI_BRIDGE_ON_STOP="detach",  # the agent and what it left outlive the bridge
                PI_BRIDGE_APPROVALS="off",
                PI_BRIDGE_METRICS_PORT=str(metrics),
                TELEGRAM_BOT_TOKEN=TOKEN,
                TELEGRAM_API_BASE_URL=telegram.base_url,
                TELEGRAM_FILE_BASE_URL=telegram.base_file_url,
                TELEGRAM_ALLOWED_USERS=str(CHAT),
                TELEGRAM_WEBHOOK_URL=f"http://127.0.0.1:{hook}/telegram/hook",
                TELEGRAM_WEBHOOK_SECRET=SECRET,
                TELEGRAM_WEBHOOK_PORT=str(hook),
                SLACK_BOT_TOKEN=slack.bot_token,
                SLACK_API_BASE_URL=slack.base_url,
                SLACK_ALLOWED_USERS=ALICE,
                SLACK_SIGNING_SECRET=slack.signing_secret,
                SLACK_HTTP_PORT=str(slack_http),
            )
            try:
                async with bridge_process(tmp_path, env, "first.log") as process:
                    await until(lambda: telegram.webhook, WAIT)
                    telegram.message(CHAT, "PROBE the host")
                    await telegram.push()
                    await telegram.bot_message("Probed.", CHAT, within=WAIT)
                    assert await stop(process) == 0
                tool = next(
                    str(r.messages) for r in fake_llm.requests if "held=" in str(r)
                ).replace("\\n", "\n")
                seen = dict(re.findall(r"\b(webhook|metrics|slack|redis|held)=([a-z]+)", tool))
                expected = "refused" if network == "isolated" else "reached"
                assert seen == dict.fromkeys(ports, expected) | {"held": "yes"}
                if network == "host":
                    return  # on the host's network the holder has the port: on purpose
                telegram.webhook = ""
                async with bridge_process(tmp_path, env, "second.log") as process:
                    await until(lambda: telegram.webhook, WAIT)  # it serves the port again
                    telegram.message(CHAT, "AGAIN, are you there?")
                    assert await telegram.push() == [200]
                    await telegram.bot_message("Here again.", CHAT, within=WAIT)
                    assert await stop(process) == 0
            finally:
                kill_agents(tmp_path / "data")
