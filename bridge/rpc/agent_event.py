"""What an agent's client hands the bridge, one item at a time (pure, no I/O).

A decoded record of the agent's stdout, or a signal the client derives from the
records and the process (a run started or ended, a dialog expired, the agent gone).
"""

from __future__ import annotations

from bridge.rpc.decode import Decoded
from bridge.rpc.signals import Signal

AgentEvent = Decoded | Signal
