"""The bridge's own control commands (/new, /status, /model, …) and their pickers.

`registry` declares what a command is; `table` declares each command once and
carries them out; the handlers live by subject (`session`, `settings`,
`export`) and see the conversation only through the `Target` Protocol.
"""

from bridge.controls.table import COMMANDS, pick, run
from bridge.controls.target import Target

__all__ = ["COMMANDS", "Target", "pick", "run"]
