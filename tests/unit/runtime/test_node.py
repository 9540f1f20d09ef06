"""``vfl.runtime.node``: handler dispatch by message kind, attached components, checkpoint bytes."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from vfl.core.errors import ProtocolError
from vfl.runtime import message as wire
from vfl.runtime.node import Node, NodeSpec, handles, state_from_bytes, state_to_bytes

SPEC = NodeSpec(1, "party", "alice", "parties-0")


def msg(kind: str, n: int = 0):
    return wire.make(kind, src=0, dst=1, round=f"train:0:{n}")


class Echo(Node):
    """Answers every message with one reply of kind ``<kind>_ok``; remembers each call's batch."""

    def __init__(self, spec: NodeSpec) -> None:
        super().__init__(spec)
        self.calls: list[tuple[str, list[str]]] = []

    def _answer(self, kind: str, messages):
        self.calls.append((kind, [m.metadata.group_id for m in messages]))
        return [wire.reply(m, f"{kind}_ok") for m in messages]

    @handles("train.a")
    def on_a(self, messages):
        return self._answer("train.a", messages)

    @handles("train.b")
    def on_b(self, messages):
        return self._answer("train.b", messages)


class Louder(Echo):
    """A subclass overriding one inherited handler and adding one."""

    @handles("train.a")
    def on_a_again(self, messages):
        return [wire.reply(m, "train.a_loud") for m in messages]

    @handles("train.c")
    def on_c(self, messages):
        return []


def test_one_call_per_kind_with_the_whole_batch_in_first_appearance_order():
    node = Echo(SPEC)
    out = node.handle([msg("train.b", 0), msg("train.a", 1), msg("train.b", 2), msg("train.a", 3)])
    assert node.calls == [("train.b", ["train:0:0", "train:0:2"]), ("train.a", ["train:0:1", "train:0:3"])]
    assert [m.metadata.message_type for m in out] == ["train.b_ok", "train.b_ok", "train.a_ok", "train.a_ok"]
    first = out[0].metadata
    assert (first.src_node_id, first.dst_node_id, first.group_id) == (1, 0, "train:0:0")  # a reply goes back


def test_unknown_kind_is_a_protocol_error_naming_node_and_kind():
    node = Echo(SPEC)
    with pytest.raises(ProtocolError, match=r"alice.*'query.zzz'"):
        node.handle([msg("train.a"), msg("query.zzz")])


def test_no_messages_no_replies():
    assert Echo(SPEC).handle([]) == []


def test_subclass_overrides_inherited_kind_and_adds_its_own():
    node = Louder(SPEC)
    assert [m.metadata.message_type for m in node.handle([msg("train.a"), msg("train.b"), msg("train.c")])] == ["train.a_loud", "train.b_ok"]


class Align:
    """A protocol add-on (not a Node) served through ``attach``."""

    def __init__(self) -> None:
        self.seen = 0

    @handles("query.psi_x")
    def on_x(self, messages):
        self.seen += len(messages)
        return [wire.reply(m, "query.psi_y") for m in messages]


class Clash:
    @handles("train.a")
    def on_a(self, messages):
        return []


def test_attached_component_handles_its_kinds_with_its_own_self():
    node, comp = Echo(SPEC), Align()
    node.attach(comp)
    out = node.handle([msg("query.psi_x"), msg("query.psi_x"), msg("train.a")])
    assert comp.seen == 2 and [m.metadata.message_type for m in out] == ["query.psi_y", "query.psi_y", "train.a_ok"]


def test_attach_refuses_a_kind_already_handled():
    with pytest.raises(ProtocolError, match=r"alice already handles 'train.a'"):
        Echo(SPEC).attach(Clash())


def test_node_spec_is_frozen_and_node_id_comes_from_it():
    assert Echo(SPEC).node_id == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        SPEC.node_id = 2  # type: ignore[misc]


def test_note_derived_goes_to_the_view_sink_only_when_one_is_set():
    node = Echo(SPEC)
    node.note_derived("train:0:0", "x", 1)  # no sink: nothing happens, no error
    got = []
    node.view_sink = lambda *a: got.append(a)
    node.note_derived("train:0:1", "grad", 2.5)
    assert got == [(1, "train:0:1", "grad", 2.5)]


def test_state_bytes_round_trip_tensors_and_nested_dicts():
    state = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "opt": {"step": 3, "lr": [0.1, 0.01]},
             "ids": torch.tensor([1, 2], dtype=torch.int64)}
    back = state_from_bytes(state_to_bytes(state))
    assert torch.equal(back["w"], state["w"]) and back["w"].dtype == torch.float32
    assert torch.equal(back["ids"], state["ids"]) and back["opt"] == state["opt"]
    assert Echo(SPEC).state() == {}


class Opaque:
    pass


def test_state_bytes_refuse_arbitrary_objects():
    """Checkpoint bytes load with ``weights_only``: a pickled object is not rebuilt on load."""
    data = state_to_bytes({"x": Opaque()})
    with pytest.raises(Exception):  # noqa: B017 - torch raises its own UnpicklingError subclass
        state_from_bytes(data)


@pytest.mark.parametrize("role", ["hub", "Server", "", "model_server"])
def test_a_node_spec_has_one_of_two_roles(role):
    """``server`` or ``party``: the old alias ``hub`` and anything else is a one-line protocol error."""
    assert NodeSpec(0, "server", "s", "g").is_server and not SPEC.is_server
    with pytest.raises(ProtocolError, match=f"role must be 'server' or 'party', got {role!r}"):
        NodeSpec(0, role, "s", "g")  # type: ignore[arg-type]
