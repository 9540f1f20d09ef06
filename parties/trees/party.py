"""The passive party of the trees protocol: its columns, histograms of its bins, its thresholds.

It never sees a label, a leaf value or a gain. Per tree it receives every training row's encoded
(g, h) (ciphertexts with ``he: paillier``), the instance space of each node (which rows reach it,
SecureBoost's known leak: ``docs/trees.md``) and, for a split its column won, the (feature, bin,
direction) the label holder chose; it keeps the threshold in its own record table and answers with
the rows that go left. At prediction it evaluates only its own records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from flwr.common import ArrayRecord, Message

from parties.trees.codec import Codec
from parties.trees.columns import Columns, pack_mask, unpack_mask
from parties.trees.schemes import PartyScheme
from parties.trees.wire import Array, Key, Kind, Record
from vfl.core.errors import ProtocolError
from vfl.data.dataset import PartyShard
from vfl.runtime import message as wire
from vfl.runtime import profile
from vfl.runtime.node import Node, NodeSpec, handles

PHASE_HISTOGRAMS = "trees_party_histograms"  # vfl.runtime.profile category (benchmarks)


class TreeParty(Node):
    """A passive party: its columns binned by its own cuts, and its split records."""

    unviewed = frozenset({Array.CIPHER})  # the rows' ciphertexts: under the label holder's key, nothing to read

    def __init__(self, spec: NodeSpec, *, shard: PartyShard, max_bin: int, schedule: Any,
                 party_scheme: Callable[[dict[str, Any]], PartyScheme]) -> None:
        super().__init__(spec)
        self.max_bin = max_bin
        self.schedule = schedule  # sizes only (the PSI add-on rebinds them)
        self.party_scheme = party_scheme
        self.scheme: PartyScheme | None = None
        self.records: list[tuple[int, int, bool]] = []  # record id -> (feature, bin, default_left)
        self.pos = np.zeros(0, dtype=np.int64)
        self.hidden = False  # this tree's rows come per node slot (params.hide_instance_space)
        self.columns: Columns
        self.shard = shard

    @property
    def shard(self) -> PartyShard:
        return self._shard

    @shard.setter
    def shard(self, shard: PartyShard) -> None:
        """Bind the party's rows (at construction, and when PSI aligns them)."""
        self._shard = shard
        self.columns = Columns(_table(shard.x_train), _table(shard.x_test), max_bin=self.max_bin)

    def _rows(self, node: int) -> np.ndarray:
        return np.flatnonzero(self.pos == node)

    @handles(Kind.KEY)
    def on_key(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        self.scheme = self.party_scheme(dict(wire.config_of(m, Record.KEY)))
        lay = self.columns.layout
        content = wire.records(**{Record.LAYOUT: wire.arrays(**{
            Array.BINS: lay.bins, Array.IMPLICIT: lay.implicit, Array.MISSING: lay.missing.astype(np.uint8)})})
        return [wire.reply(m, Kind.LAYOUT, src=self.node_id, content=content)]

    def _load(self, m: Message) -> None:
        """The rows' encoded (g, h) of this tree (or, hidden, of this level) and whether they are hidden."""
        if self.scheme is None:
            raise ProtocolError(f"{self.spec.name}: gradients before the key set-up")
        c = wire.config_of(m, Record.CODEC)
        rows = wire.record_of(m, Record.ROWS, ArrayRecord)
        if rows is None:
            raise ProtocolError(f"{self.spec.name}: gradients without rows")
        self.scheme.load_rows({k: wire.from_array(v) for k, v in rows.items()}, Codec.from_config(c))
        self.hidden = bool(c.get(Key.HIDDEN, False))

    def _histograms(self, m: Message, build: np.ndarray) -> list[Message]:
        if self.scheme is None:
            raise ProtocolError(f"{self.spec.name}: gradients before the key set-up")
        t0 = profile.start()
        if self.hidden:  # it does not know the nodes' rows: sums over every row, the nodes apart in their slots
            n = len(self.columns.x_train)
            arrays = self.scheme.sums_hidden(self.columns, groups=self.scheme.loaded() // max(n, 1), nodes=len(build))
        else:
            arrays = self.scheme.sums(self.columns, [self._rows(int(b)) for b in build])
        profile.stop(PHASE_HISTOGRAMS, t0)
        content = wire.records(**{Record.ROWS: wire.arrays(**arrays), Record.LEVEL: wire.arrays(**{Array.BUILD: build})})
        return [wire.reply(m, Kind.HISTOGRAMS, src=self.node_id, content=content)]

    @handles(Kind.GRADIENTS)
    def on_gradients(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        self._load(m)
        self.pos = np.zeros(len(self.columns.x_train), dtype=np.int64)
        return self._histograms(m, wire.get_array(m, Record.LEVEL, Array.BUILD))

    @handles(Kind.LEVEL)
    def on_level(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        if wire.record_of(m, Record.ROWS, ArrayRecord) is not None:  # hidden: new rows, no partition
            self._load(m)
            return self._histograms(m, wire.get_array(m, Record.LEVEL, Array.BUILD))
        nodes, left, right = (wire.get_array(m, Record.LEVEL, a) for a in (Array.NODES, Array.LEFT, Array.RIGHT))
        bits = wire.get_array(m, Record.LEVEL, Array.MASK)
        at = 0
        for n, lo, hi in zip(nodes.tolist(), left.tolist(), right.tolist(), strict=True):
            rows = self._rows(n)
            size = (len(rows) + 7) // 8
            go = unpack_mask(bits[at:at + size], len(rows))
            at += size
            self.pos[rows[go]], self.pos[rows[~go]] = lo, hi
        if at != len(bits):
            raise ProtocolError(f"{self.spec.name}: level masks of {len(bits)} bytes, the nodes take {at}")
        self.note_derived(wire.round_of(m), "pos", self.pos.astype(np.int16))  # the instance spaces it now knows
        return self._histograms(m, wire.get_array(m, Record.LEVEL, Array.BUILD))

    @handles(Kind.SPLIT)
    def on_split(self, messages: list[Message]) -> list[Message]:
        out = []
        for m in messages:
            c = wire.config_of(m, Record.SPLIT)
            node, f, b = (wire.config_int(c, k) for k in (Key.NODE, Key.FEATURE, Key.BIN))
            dl = bool(c[Key.DEFAULT_LEFT])
            if not (0 <= f < self.columns.num_features and -1 <= b < int(self.columns.layout.bins[f])):
                raise ProtocolError(f"{self.spec.name}: split on feature {f} bin {b} is outside its columns")
            self.records.append((f, b, dl))
            rows = np.arange(len(self.columns.x_train)) if self.hidden else self._rows(node)
            go = self.columns.left_of(rows, f, b, dl)  # hidden: every row (it does not know the node's)
            recs: dict[str, Any] = {Record.SPLIT: wire.config(**{Key.NODE: node, Key.RECORD: len(self.records) - 1}),
                                    Record.MASKS: wire.arrays(**{Array.MASK: pack_mask(go)})}
            content = wire.records(**recs)
            out.append(wire.reply(m, Kind.PARTITION, src=self.node_id, content=content))
        return out

    @handles(Kind.ASK)
    def on_ask(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        asked = wire.get_array(m, Record.SPLIT, Array.RECORDS).astype(np.int64)
        if len(asked) and (asked.min() < 0 or asked.max() >= len(self.records)):
            raise ProtocolError(f"{self.spec.name}: asked for records it does not hold")
        x = self.columns.x_test
        parts = [pack_mask(self.columns.goes_left(x, *self.records[int(r)])) for r in asked]
        bits = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)
        return [wire.reply(m, Kind.DECISIONS, src=self.node_id, content=wire.records(**{Record.MASKS: wire.arrays(**{Array.MASK: bits})}))]

    @handles(Kind.MODEL)
    def on_model(self, messages: list[Message]) -> list[Message]:
        """The features of its records (for the report's importance; no threshold leaves)."""
        feats = np.asarray([f for f, _, _ in self.records], dtype=np.int64)
        return [wire.reply(messages[-1], content=wire.records(**{Record.MODEL: wire.arrays(**{Array.RECORDS: feats})}))]

    def state(self) -> dict[str, Any]:
        return {"records": [[f, b, int(dl)] for f, b, dl in self.records]}

    def load_state(self, state: dict[str, Any]) -> None:
        self.records = [(int(f), int(b), bool(dl)) for f, b, dl in state.get("records", [])]


def _table(x: np.ndarray) -> np.ndarray:
    """Rows of columns (an image-shaped input flattened; zero rows kept)."""
    x = np.asarray(x, dtype=np.float32)
    return x.reshape(x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64)))
