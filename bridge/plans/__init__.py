"""Plan first, its pure part: the words the agent is given while it plans and when it
carries a plan out (`prompts.py`), and a plan's steps read off its text and ticked off
by the agent's own "Step N done" lines (`steps.py`). The conversation's part, the
phases, buttons and store, is bridge/conversation/plans.py."""
