"""Scheduled work: prompts that run on a schedule and report into the chat.

`when.py` (pure) reads the plain words people type (`weekdays 9:00`, `in 30m`) into
rules; `occurrences.py` (pure) says when a rule runs and what a tick must do;
`rules.py` (pure) reads a stored schedule's rule (the record itself is
`bridge/store/schedule_record.py`); `ticker.py` fires the due ones, once over all
workers, as ordinary messages of their conversations.
"""
