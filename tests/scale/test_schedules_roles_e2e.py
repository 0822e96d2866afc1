"""Scheduled work under the roles, as processes: a frontend and two workers on a real
redis-server, the fake Telegram and the real agent. Both workers tick (every 0.3 s
here); each run due is carried out once, by whichever worker owns the
conversation, and shown in the chat once: the "⏰ scheduled" line and the agent's
answer. The schedules are put in the store directly, due seconds from now, so the
test waits for no clock but its own few seconds."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.store.redis import RedisStore
from bridge.store.schedule_record import ScheduleRecord
from tests.support.cli import WAIT, bridge_process, cli_env, kill_agents, role_env, stop
from tests.support.fake_llm import Reply
from tests.support.fake_telegram import TOKEN, FakeTelegram
from tests.support.redis_server import RedisServer, redis_server_bin

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.agent,
    pytest.mark.skipif(redis_server_bin() is None, reason="needs redis-server"),
]

CHAT = 42
DUE_IN = 4.0  # seconds: the processes are up by then


def role(tmp_path: Path, env: dict[str, str], name: str) -> dict[str, str]:
    config = (
        f'[telegram]\npoll_timeout = 1\n[worker]\nname = "{name}"\nlease_ttl = 60\n'
        "[schedules]\ntick = 0.3\n"
    )
    return role_env(tmp_path, env, name, config)


def schedule(schedule_id: str, prompt: str, now: float, **rule: object) -> ScheduleRecord:
    return ScheduleRecord.model_validate(
        {
            "id": schedule_id,
            "key": f"tg:{CHAT}",
            "chat_id": str(CHAT),
            "owner": str(CHAT),
            "words": "soon",
            "prompt": prompt,
            "state": "active",
            "created_at": now,
            "done_until": now,
            **rule,
        }
    )


async def test_workers_run_each_scheduled_occurrence_once_in_its_chat(
    tmp_path: Path, fake_llm: FakeLLM, agent_home: AgentHome
) -> None:
    fake_llm.add("ROLES-ONCE", Reply(text="One-shot answered."))
    fake_llm.add("ROLES-EVERY", Reply(text="Recurring answered."))
    with RedisServer(tmp_path / "redis") as redis:
        async with FakeTelegram() as telegram:
            env = cli_env(
                tmp_path,
                agent_home,
                PI_BRIDGE_STORE=redis.url,
                PI_BRIDGE_APPROVALS="off",
                TELEGRAM_BOT_TOKEN=TOKEN,
                TELEGRAM_API_BASE_URL=telegram.base_url,
                TELEGRAM_FILE_BASE_URL=telegram.base_file_url,
                TELEGRAM_ALLOWED_USERS=str(CHAT),
            )
            store = await RedisStore.open(redis.url)
            try:
                async with contextlib.AsyncExitStack() as stack:
                    start = stack.enter_async_context
                    names = ("f1", "w1", "w2")
                    procs = [
                        await start(bridge_process(tmp_path, role(tmp_path, env, n), f"{n}.log"))
                        for n in names
                    ]
                    now = time.time()
                    await store.put_schedule(
                        schedule("once", "ROLES-ONCE do it", now, at=now + DUE_IN)
                    )
                    # A minute's span made a minute ago, less DUE_IN: due once in the test.
                    made = now - 60 + DUE_IN
                    await store.put_schedule(schedule("every", "ROLES-EVERY again", made, span=60))
                    await telegram.bot_message("One-shot answered.", CHAT, within=WAIT)
                    await telegram.bot_message("Recurring answered.", CHAT, within=WAIT)
                    await anyio.sleep(3)  # both workers keep ticking meanwhile
                    for proc in reversed(procs):
                        assert await stop(proc) == 0
            finally:
                await store.aclose()
                kill_agents(tmp_path / "data")
    texts = [m.text for m in telegram.bot_messages(CHAT)]
    assert len([t for t in texts if "⏰ scheduled: soon — ROLES-ONCE" in t]) == 1, texts
    assert len([t for t in texts if "⏰ scheduled: soon — ROLES-EVERY" in t]) == 1, texts
    assert len([t for t in texts if "One-shot answered." in t]) == 1, texts
    assert len([t for t in texts if "Recurring answered." in t]) == 1, texts
    assert len([r for r in fake_llm.requests if "ROLES-ONCE" in r.last_user_text]) == 1
