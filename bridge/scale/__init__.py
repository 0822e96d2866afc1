"""Scale-out on Redis: frontends hold the platforms, workers own conversations.

`pi-bridge run --role frontend` admits platform updates and forwards them over a
Redis stream per conversation; `--role worker` claims conversations through leases
with fencing tokens, runs their agents, and sends its platform calls back to the
frontends over a stream of calls (docs/design.md "Scale-out").
"""
