"""The UI request unions are the one list of methods: what is derived from them
agrees with them, and the host's standard-library copy agrees too."""

from __future__ import annotations

import pytest

from bridge.rpc.agenthost import loop
from bridge.rpc.decode import decode_record
from bridge.rpc.events import KNOWN_TYPES
from bridge.rpc.ui import DIALOG_METHODS, KNOWN_METHODS, OtherUIRequest, is_dialog
from bridge.rpc.wire import tags


@pytest.mark.parametrize("method", sorted(KNOWN_METHODS))
def test_each_known_method_decodes_to_its_model_and_only_dialogs_are_dialogs(method: str) -> None:
    record = f'{{"type":"extension_ui_request","id":"r1","method":"{method}"}}'.encode()
    decoded = decode_record(record)
    assert getattr(decoded, "method", None) == method
    assert not isinstance(decoded, OtherUIRequest)
    assert is_dialog(decoded) == (method in DIALOG_METHODS)


def test_an_unknown_method_is_no_dialog() -> None:
    record = b'{"type":"extension_ui_request","id":"r1","method":"select2"}'
    decoded = decode_record(record)
    assert isinstance(decoded, OtherUIRequest)
    assert not is_dialog(decoded)


def test_the_dialogs_are_the_four_that_wait_for_an_answer() -> None:
    assert {"select", "confirm", "input", "editor"} == DIALOG_METHODS < KNOWN_METHODS


def test_the_hosts_own_list_of_dialog_methods_is_the_unions() -> None:
    # The host imports nothing of the bridge (it runs isolated), so it keeps a copy.
    assert loop._DIALOG_METHODS == DIALOG_METHODS


def test_every_known_event_type_is_a_type_of_the_union() -> None:
    assert "extension_ui_request" in KNOWN_TYPES
    assert {"agent_start", "compaction_start", "auto_compaction_start"} <= KNOWN_TYPES


def test_tags_refuses_what_is_not_a_union_of_models_with_a_literal_tag() -> None:
    with pytest.raises(TypeError, match="not a model"):
        tags(int, "type")
    with pytest.raises(TypeError, match="not a Literal"):
        tags(OtherUIRequest, "method")
