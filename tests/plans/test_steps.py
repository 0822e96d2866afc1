"""A plan's steps and the agent's "Step N done" marks (bridge/plans/steps.py)."""

from __future__ import annotations

import pytest

from bridge.plans.steps import MAX_STEPS, checklist, steps, ticked

PLANS: list[tuple[str, str, list[str]]] = [
    ("numbered", "Plan:\n1. read the code\n2. write tests\n3. fix it", [
        "read the code", "write tests", "fix it"]),
    ("parenthesised", "1) one\n2) two", ["one", "two"]),
    ("bullets", "- look\n* change\n• check", ["look", "change", "check"]),
    ("task boxes", "- [ ] first\n- [x] second", ["first", "second"]),
    ("numbers win over bullets", "- context\n1. real step\n2. another", [
        "real step", "another"]),
    ("sub-points stay out", "1. build\n   - with make\n   2. nested\n2. test", [
        "build", "test"]),
    ("bold titles lose their stars", "1. **Read** the file\n2. __Edit__ it", [
        "Read the file", "Edit it"]),
    ("no list", "I would just change the config.", []),
    ("prose numbers are no steps", "There are 3 files.\nVersion 2.0 is out.", []),
    ("empty", "", []),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), [p[1:] for p in PLANS], ids=[p[0] for p in PLANS])
def test_a_plans_list_items_are_its_steps(text: str, expected: list[str]) -> None:
    assert steps(text) == expected


def test_a_long_plan_keeps_its_first_steps_and_clips_long_ones() -> None:
    text = "\n".join(f"{n}. {'x' * 300}" for n in range(1, MAX_STEPS + 5))
    found = steps(text)
    assert len(found) == MAX_STEPS
    assert all(len(step) == 200 and step.endswith("…") for step in found)


MARKS: list[tuple[str, str, int, set[int]]] = [
    ("one line", "Step 1 done", 3, {1}),
    ("several, any case", "step 2 DONE.\nStep 3 is complete", 3, {2, 3}),
    ("inside a sentence", "OK, step 1 finished and Step #2 completed.", 3, {1, 2}),
    ("out of range", "Step 4 done, step 0 done", 3, set()),
    ("not yet", "Starting step 2 now", 3, set()),
    ("no mark", "done with everything", 3, set()),
]


@pytest.mark.parametrize(
    ("text", "count", "expected"), [m[1:] for m in MARKS], ids=[m[0] for m in MARKS]
)
def test_only_the_agents_step_n_done_ticks_a_step(
    text: str, count: int, expected: set[int]
) -> None:
    assert ticked(text, count) == expected


def test_the_checklist_ticks_the_steps_done() -> None:
    assert checklist(["a", "b", "c"], [2]) == "☐ 1. a\n☑ 2. b\n☐ 3. c"
