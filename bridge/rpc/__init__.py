"""The pi RPC protocol: typed wire models, LF-only framing and an async client.

Pure parts (`framing`, `decode`, `commands`, `events`, `state`, `profile`,
`agent_event`) do no I/O and are tested with plain calls; `client` and `process` move
bytes around them. Import each from its module: this package imports nothing, so
importing a pure part never pulls in the client. See docs/rpc.md for how the real
agents behave and how this layer copes.
"""
