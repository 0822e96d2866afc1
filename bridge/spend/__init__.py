"""What the agents' models cost: usage recorded per conversation, person and chat, and
the budgets that limit it (docs/commands.md, "Usage and budgets").

Pure: `limits` (the budget decisions), `periods` (today, this week, this month in a
time zone), `report` (the /usage table), `usage` (what is kept of an answer's cost).
The conversation's part that records usage, refuses or stops runs and tells people
is `bridge/conversation/ledger.py`.
"""
