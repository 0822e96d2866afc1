"""The bridge's own control commands (/new, /status, /model, …) and their pickers.

`registry` says what a command is; `table` declares each command once (pure: the
router reads it); `handlers` carries them out (`run`, `pick`); the handlers live by
subject (`session`, `settings`, `export`) and see the conversation only through the
`Target` Protocol. Importing this package imports the handlers: import `table` and
`handlers` by their own names.
"""

from bridge.controls.handlers import pick, run
from bridge.controls.table import COMMANDS
from bridge.controls.target import Target

__all__ = ["COMMANDS", "Target", "pick", "run"]
