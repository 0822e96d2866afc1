"""pi's project code in a workspace is covered, wherever a link points it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.containment.project_code import masks

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def nothing(_: Path) -> None:
    pass


def extensions(root: Path) -> None:
    (root / "work" / ".pi" / "extensions").mkdir(parents=True)


def settings_and_packages(root: Path) -> None:
    (root / "work" / ".pi" / "npm").mkdir(parents=True)
    (root / "work" / ".pi" / "settings.json").write_text('{"packages": ["npm:x"]}')


def linked_config(root: Path) -> None:
    (root / "elsewhere" / "extensions").mkdir(parents=True)
    (root / "work").mkdir()
    (root / "work" / ".pi").symlink_to(root / "elsewhere")


def extensions_linked_to_the_workspace(root: Path) -> None:
    (root / "work" / ".atomic").mkdir(parents=True)
    (root / "work" / ".atomic" / "extensions").symlink_to(root / "work")


def dangling(root: Path) -> None:
    (root / "work" / ".pi").mkdir(parents=True)
    (root / "work" / ".pi" / "extensions").symlink_to(root / "not-yet")


@pytest.mark.parametrize(
    ("plant", "covered"),
    [
        (nothing, {}),
        (extensions, {"work/.pi/extensions": "empty"}),
        (
            settings_and_packages,
            {"work/.pi/npm": "empty", "work/.pi/settings.json": "empty.json"},
        ),
        (linked_config, {"elsewhere/extensions": "empty"}),
        (extensions_linked_to_the_workspace, {"work": "empty"}),
        (dangling, {}),  # nothing there for pi to load at this start
    ],
)
def test_what_pi_would_load_as_code_is_covered_where_it_really_is(
    tmp_path: Path, plant: Callable[[Path], None], covered: dict[str, str]
) -> None:
    root = tmp_path.resolve()
    plant(root)
    data = root / "data"
    found = {
        str(b.target.relative_to(root)): b.source.relative_to(data / "sandbox").as_posix()
        for b in masks(root / "work", data)
    }
    assert found == covered
    if "empty.json" in covered.values():  # settings that name nothing, valid JSON
        assert (data / "sandbox" / "empty.json").read_text() == "{}\n"
