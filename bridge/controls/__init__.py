"""The bridge's own control commands (/new, /status, /model, …) and their pickers.

`registry` says what a command is and `table` declares each command once (both pure:
the router and the platforms' converters read them); `handling` and `handlers` carry
them out (`run`, `pick`); the handlers live by subject (`session`, `settings`,
`export`) and see the conversation only through the `Target` Protocol.

Python runs this file before any module of the package, so it imports nothing: take
the table from `bridge.controls.table` and `run`/`pick` from `bridge.controls.handlers`.
"""
