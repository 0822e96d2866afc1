"""An agent's host: holds one agent while bridges come and go (docs/rpc.md, "Hosts").

Run as a script (`python -I -S <this folder> --socket PATH [options] -- [--no-caps] EXE ARGS...`),
started by the bridge in a session of its own, so that neither a SIGTERM nor a SIGKILL
of the bridge reaches it. It starts the agent under the keeper (`reaper.py`, which it
names as the process whose death ends the agent: the host, not the bridge), owns the
agent's stdin and stdout, numbers every record the agent writes, and keeps those not
yet acknowledged in a bounded buffer (memory, then a spill file, then the oldest
`message_update`s and `tool_execution_update`s dropped; never a record that starts,
ends or asks something). One bridge at a time talks to it over a unix socket (mode
0600); a newer connection replaces an older one.

The socket speaks lines. The bridge opens with `pi-host 1 <after>`; the host answers
`pi-host 1 <host pid> <keeper pid> <oldest kept seq> <next seq>`, then sends every
kept record after `<after>` as `<seq> <record>`, then the live stream, and at the end
`exit <code> <stderr tail as a JSON string>`. The bridge sends `w <record>` (to the
agent's stdin), `ack <seq>` (records up to it need not be kept), `stop` (end the
agent) and `bye` (the bridge detaches). A bridge speaking a newer version is answered
with this one's and may choose to speak it.

With no bridge for `--detach-timeout` seconds, the host cancels the agent's open
dialogs (nobody is there to answer), lets a running run finish (for at most
`--run-limit` seconds more), then ends the agent and exits: no agent runs unattended
for ever.

Standard library only, and nothing imported from the bridge: it runs isolated (`-I -S`),
as a folder (`__main__.py`), whose modules import each other by their own names then:
`buffer` (what is kept), `loop` (the host), `__main__` (its command line).
"""
