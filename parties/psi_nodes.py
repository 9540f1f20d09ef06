"""Sample alignment by private set intersection: the label holder's and the parties' PSI sides.

Attached to the usual server / party nodes when each party brings its own table (``Node.attach``).
The label holder (server, PSI client) runs PSI with the parties one after the other, each time
over the IDs still common so far: ``I_0`` = its IDs, ``I_k = I_{k-1} ∩ S_k``. So the server learns
``I_1 ⊇ I_2 ⊇ ... ⊇ I_M`` (never a party's IDs outside them) and each party's set size; party k
learns ``|I_{k-1}|`` (the request size) and, at the end, ``I_M``, which it already holds. The
server then broadcasts the ordered common IDs — sorted, split into train and test — and every
node binds its rows in that order: batch ids index it. Every exchange is a counted message of the
``setup`` phase with its own kind (``query.psi_request``, ``query.psi_response``, ``query.psi_align``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from flwr.common import Message

from vfl import message as wire
from vfl import psi_wire as pw
from vfl.data import KeyedLabels, KeyedTable, LabelShard, PartyShard, stratified_test_mask
from vfl.errors import DataError, ProtocolError
from vfl.message import BROADCAST
from vfl.node import Node, handles
from vfl.psi import PsiClient, pack_ids, respond, unpack_ids
from vfl.psi_wire import ALIGN, KIND_PREFIX, REQUEST, RESPONSE, START
from vfl.psi_wire import RECORD as PSI
from vfl.psi_wire import SIZES as QUERY

__all__ = ["ALIGN", "KIND_PREFIX", "PSI", "QUERY", "REQUEST", "RESPONSE", "START", "PartyAlignment",
           "ServerAlignment"]  # the kinds and PSI record are re-exported from vfl.psi_wire (their home)


SHRINK_WARN = 0.5  # warn when a party shares fewer than this share of the IDs it could share


def shrink_warning(name: str, *, before: int, own: int, after: int) -> str | None:
    """One line when party ``name`` shares far fewer IDs than it could (``min(before, own)``): the
    usual cause is an ID written differently in two files; sizes only, never an ID."""
    could = min(before, own)
    if could == 0 or after >= SHRINK_WARN * could:
        return None
    return (f"PSI: {name} shares {after} of the {before} IDs common so far ({own} in its file; at most {could} "
            f"could match, below {SHRINK_WARN:.0%}): check that every file writes its IDs the same way (vfl "
            "ignores surrounding spaces and an all-digit ID's leading zeros; case and prefixes count)")


def _bytes(message: Message, name: str) -> bytes:
    return wire.get_array(message, PSI, name).tobytes()


def _u8(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


class PartyAlignment:
    """A passive party's side: answers the label holder's PSI request with its own IDs, then binds
    its rows in the broadcast order (``node.shard`` and ``node.schedule`` sizes)."""

    def __init__(self, node: Node, table: KeyedTable, index: int) -> None:
        self.node = node
        self.table = table
        self.index = index
        self.ids = [str(i) for i in table.ids]

    @handles(REQUEST)
    def on_request(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        setup, response = respond(_bytes(m, pw.REQUEST_BLOB), self.ids)
        content = wire.records(**{PSI: wire.arrays(**{pw.SETUP_BLOB: _u8(setup), pw.RESPONSE_BLOB: _u8(response)}),
                                  pw.SIZE_RECORD: wire.config(**{pw.SET_SIZE: len(self.ids)})})
        return [wire.reply(m, RESPONSE, src=self.node.node_id, content=content)]

    @handles(ALIGN)
    def on_align(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        row = {k: i for i, k in enumerate(self.ids)}

        def rows(part: str) -> np.ndarray:
            ids = unpack_ids(wire.get_array(m, PSI, part), wire.get_array(m, PSI, f"{part}_len"))
            if any(k not in row for k in ids):  # only a PSI false positive (probability FPR) or a lying server
                raise ProtocolError(f"{self.node.spec.name}: {ALIGN} names IDs it does not hold")
            return np.asarray([row[k] for k in ids], dtype=np.int64)

        tr, te = rows(pw.TRAIN_IDS), rows(pw.TEST_IDS)
        x_tr, x_te = self.table.x[tr], self.table.x[te]
        if self.table.standardize:
            mu, sd = x_tr.mean(axis=0), x_tr.std(axis=0)
            sd = np.where(sd > 0, sd, 1.0)
            x_tr, x_te = ((x_tr - mu) / sd).astype(np.float32), ((x_te - mu) / sd).astype(np.float32)
        node: Any = self.node
        node.shard = PartyShard(self.index, x_tr, x_te, f"{len(self.table.columns)} columns of {self.table.source}")
        node.schedule = dataclasses.replace(node.schedule, num_train=len(tr), num_test=len(te))
        return []


class ServerAlignment:
    """The label holder's side: chained PSI with every party, the split, and the broadcast order."""

    def __init__(self, node: Node, labels: KeyedLabels, *, parties: Mapping[int, str], seed: int) -> None:
        self.node = node
        self.labels = labels
        self.parties = dict(sorted(parties.items()))
        self.seed = seed
        self.result: dict[str, Any] | None = None
        self._queue: list[int] = []
        self._common: list[str] = []
        self._client: PsiClient | None = None
        self._sizes: dict[str, int] = {}
        self._chain: dict[str, int] = {}  # |I_k| after each party
        self._warnings: list[str] = []

    @handles(START)
    def on_start(self, messages: list[Message]) -> list[Message]:
        """Driver's control message: start the chain with the first party."""
        self._common = sorted(str(i) for i in self.labels.ids)
        self._sizes = {"label_holder": len(self._common)}
        self._chain, self._warnings = {}, []
        self._queue = list(self.parties)
        return [self._request(wire.round_of(messages[0]))]

    def _request(self, tag: str) -> Message:
        self._client = PsiClient(self._common)  # a fresh key per party
        return wire.make(REQUEST, src=self.node.node_id, dst=self._queue[0], round=tag,
                         content=wire.records(**{PSI: wire.arrays(**{pw.REQUEST_BLOB: _u8(self._client.request())})}))

    @handles(RESPONSE)
    def on_response(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        pid = int(m.metadata.src_node_id)
        if not self._queue or pid != self._queue[0] or self._client is None:
            raise ProtocolError(f"unexpected {RESPONSE} from node {pid}")
        before = len(self._common)
        self._common = self._client.intersect(_bytes(m, pw.SETUP_BLOB), _bytes(m, pw.RESPONSE_BLOB))
        name = self.parties[pid]
        self._sizes[name] = int(str(wire.config_value(m, pw.SIZE_RECORD, pw.SET_SIZE)))
        self._chain[name] = len(self._common)
        warning = shrink_warning(name, before=before, own=self._sizes[name], after=len(self._common))
        if warning and self._common:  # the driver logs it and puts it in summary.json (psi_warnings)
            self._warnings.append(warning)
        done = list(self.parties)[: len(self.parties) - len(self._queue)]
        if not self._common:
            if not done:
                raise DataError(f"PSI: {name} shares no sample ID with the label holder ({self._sizes[name]} vs "
                                f"{before} IDs); check both files' id columns use the same ID format")
            raise DataError(f"PSI: {name} holds none of the {before} sample IDs common to the label holder and "
                            f"{', '.join(self.parties[p] for p in done)}; nothing to train on")
        self._queue.pop(0)
        tag = wire.round_of(m)
        return [self._request(tag)] if self._queue else [self._align(tag)]

    def _align(self, tag: str) -> Message:
        lab = self.labels
        ids = np.asarray(self._common, dtype=object)  # sorted: the shared sample order
        index = {str(k): i for i, k in enumerate(lab.ids)}
        rows = np.asarray([index[k] for k in self._common], dtype=np.int64)
        y = lab.y[rows]
        is_test = (lab.is_test[rows] if lab.is_test is not None
                   else stratified_test_mask(y, test_fraction=lab.test_fraction, seed=self.seed))
        if is_test.all() or not is_test.any():
            which = "training" if is_test.all() else "test"
            raise DataError(f"PSI: the {len(ids)} common samples hold no {which} row (split of {lab.source})")
        only_test = sorted(set(y[is_test].tolist()) - set(y[~is_test].tolist()))
        if only_test and lab.is_test is not None:  # the file's split: its train rows of it all unmatched
            names = lab.class_names or tuple(map(str, range(lab.num_classes)))
            raise DataError(f"PSI: class {names[only_test[0]]!r} of {lab.source} appears only in test rows "
                            f"of the {len(ids)} common samples; allowed: every class in common training rows")
        node: Any = self.node
        node.labels = LabelShard(y[~is_test], y[is_test], lab.num_classes, lab.metric)
        node.schedule = dataclasses.replace(node.schedule, num_train=int((~is_test).sum()),
                                            num_test=int(is_test.sum()))
        self.result = {"intersection": len(ids), "num_train": node.schedule.num_train,
                       "num_test": node.schedule.num_test, "set_sizes": dict(self._sizes)}
        tr_blob, tr_len = pack_ids(list(ids[~is_test]))
        te_blob, te_len = pack_ids(list(ids[is_test]))
        return wire.make(ALIGN, src=self.node.node_id, dst=BROADCAST, round=tag, content=wire.records(
            **{PSI: wire.arrays(**{pw.TRAIN_IDS: tr_blob, pw.TRAIN_LEN: tr_len, pw.TEST_IDS: te_blob,
                                   pw.TEST_LEN: te_len})}))

    @handles(QUERY)
    def on_query(self, messages: list[Message]) -> list[Message]:
        """Driver's control read of what it needs to drive the schedule (sizes, never IDs)."""
        if self.result is None:
            raise ProtocolError(f"{QUERY} before the alignment finished")
        r = self.result
        names: Sequence[str] = list(r["set_sizes"])
        return [wire.reply(messages[0], content=wire.records(**{PSI: wire.config(**{
            pw.INTERSECTION: r["intersection"], pw.NUM_TRAIN: r["num_train"], pw.NUM_TEST: r["num_test"],
            pw.NAMES: list(names), pw.SIZES_KEY: [int(r["set_sizes"][n]) for n in names],
            pw.CHAIN_KEY: [int(self._chain.get(n, r["set_sizes"][n])) for n in names],
            pw.WARNINGS: list(self._warnings) or [""]})}))]
