"""Sample alignment by private set intersection: the label holder's and the parties' PSI sides.

Attached to the usual server / party nodes when each party brings its own table (``Node.attach``).
The label holder (server, PSI client) runs PSI with the parties one after the other, each time
over the IDs still common so far: ``I_0`` = its IDs, ``I_k = I_{k-1} ∩ S_k``. So the server learns
``I_1 ⊇ I_2 ⊇ ... ⊇ I_M`` (never a party's IDs outside them) and each party's set size; party k
learns ``|I_{k-1}|`` (the request size) and, at the end, ``I_M``, which it already holds. The
server then broadcasts the ordered common IDs — sorted, split into train and test — and every
node binds its rows in that order: batch ids index it. A party checks the lists before it binds
anything (``PartyAlignment._check``): each ID one it holds, listed once, in training or test (not both),
no more IDs than the label holder asked it about in PSI; then it broadcasts the lists' SHA-256
(``query.psi_confirm``, signed with its identity key) and binds only when every other party's digest
is its own, so a label holder cannot bind an ID some party lacks at a party that holds it. Any failed
check is one ``AlignmentRefused`` naming the party and the run, never which ID or which check.
Without a split column the split is a
uniformly random subset of fixed size drawn from the label holder's own randomness, never
stratified by label: the two ID lists every party receives tell nothing about the labels. Each
node keeps the lists in its checkpoint state, so a resume or restart trains on the same split.
Every exchange is a counted message of the ``setup`` phase with its own kind
(``query.psi_request``, ``query.psi_response``, ``query.psi_align``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from flwr.common import ArrayRecord, ConfigRecord, Message

from vfl.core.errors import AlignmentRefused, DataError, ProtocolError
from vfl.core.rng import NoiseSource
from vfl.data import psi_wire as pw
from vfl.data.dataset import KeyedLabels, KeyedTable, PartyShard
from vfl.data.psi import PsiClient, pack_ids, request_size, respond, uniform_test_mask, unpack_ids
from vfl.runtime import message as wire
from vfl.runtime.message import BROADCAST
from vfl.runtime.node import Node, handles

__all__ = ["PartyAlignment", "ServerAlignment"]  # the protocol's names: vfl.data.psi_wire (Kind, Record, Array, Key)


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
    return wire.get_array(message, pw.Record.PSI, name).tobytes()


def _u8(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def lists_digest(train_ids: Sequence[str], test_ids: Sequence[str]) -> bytes:
    """SHA-256 of the two ordered ID lists (what every party must have received alike)."""
    return hashlib.sha256(json.dumps([list(train_ids), list(test_ids)]).encode()).digest()


class PartyAlignment:
    """A passive party's side: answers the label holder's PSI request with its own IDs, checks the broadcast
    lists, confirms them with its peers and binds its rows in the broadcast order (``node.shard`` and
    ``node.schedule`` sizes)."""

    def __init__(self, node: Node, table: KeyedTable, index: int, *, peers: Sequence[int] = (),
                 run: str = "") -> None:
        self.node = node
        self.table = table
        self.index = index
        self.peers = frozenset(int(p) for p in peers) - {node.spec.node_id}  # the other parties' node ids
        self.run = run  # the run's name, in the refusal
        self.ids = [str(i) for i in table.ids]
        self.split: tuple[list[str], list[str]] | None = None  # (train IDs, test IDs) as bound
        self.asked: int | None = None  # IDs the label holder's PSI request carried (|I_{k-1}|)
        self.pending: tuple[list[str], list[str], bytes] | None = None  # lists checked, waiting for the peers
        self.confirmed: dict[int, bytes] = {}  # peer node id -> digest of the lists it received

    @handles(pw.Kind.REQUEST)
    def on_request(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        request = _bytes(m, pw.Array.REQUEST)
        self.asked, self.pending, self.confirmed = request_size(request), None, {}  # a new alignment
        setup, response = respond(request, self.ids)
        named: dict[str, ArrayRecord | ConfigRecord] = {
            pw.Record.PSI: wire.arrays(**{pw.Array.SETUP: _u8(setup), pw.Array.RESPONSE: _u8(response)}),
            pw.Record.SIZE: wire.config(**{pw.Key.SET_SIZE: len(self.ids)})}
        content = wire.records(**named)
        return [wire.reply(m, pw.Kind.RESPONSE, src=self.node.node_id, content=content)]

    @handles(pw.Kind.ALIGN)
    def on_align(self, messages: list[Message]) -> list[Message]:
        (m,) = messages

        def ids(part: str) -> list[str]:
            return unpack_ids(wire.get_array(m, pw.Record.PSI, part), wire.get_array(m, pw.Record.PSI, f"{part}_len"))

        try:
            train_ids, test_ids = ids(pw.Array.TRAIN), ids(pw.Array.TEST)
        except (ProtocolError, UnicodeDecodeError, KeyError, ValueError):
            raise self._refused() from None
        if self.asked is None or not self._check(train_ids, test_ids, asked=self.asked):
            raise self._refused()
        digest = lists_digest(train_ids, test_ids)
        self.pending = (train_ids, test_ids, digest)
        out = [wire.make(pw.Kind.CONFIRM, src=self.node.node_id, dst=BROADCAST, round=wire.round_of(m),
                         content=wire.records(**{pw.Record.PSI: wire.arrays(**{pw.Array.DIGEST: _u8(digest)})}))]
        self._bind_when_confirmed()
        return out if self.peers else []

    @handles(pw.Kind.CONFIRM)
    def on_confirm(self, messages: list[Message]) -> list[Message]:
        """A peer's digest of the lists it received (its own broadcast comes back too: skipped)."""
        for m in messages:
            src = int(m.metadata.src_node_id)
            if src == self.node.node_id:
                continue
            if src not in self.peers or src in self.confirmed:
                raise self._refused()
            self.confirmed[src] = _bytes(m, pw.Array.DIGEST)
        self._bind_when_confirmed()
        return []

    def _bind_when_confirmed(self) -> None:
        """Bind the pending lists once every peer confirmed the same digest (refuse on any other)."""
        if self.pending is None:
            return
        train_ids, test_ids, digest = self.pending
        if any(d != digest for d in self.confirmed.values()):
            raise self._refused()
        if set(self.confirmed) == self.peers:
            self.pending = None
            self._bind(train_ids, test_ids)

    def _refused(self) -> AlignmentRefused:
        return AlignmentRefused(self.node.spec.name, self.run)

    def _check(self, train_ids: list[str], test_ids: list[str], *, asked: int | None) -> bool:
        """The lists can be the PSI intersection: IDs it holds, each once, in one split, at most ``asked`` of them."""
        listed = [*train_ids, *test_ids]
        unique = set(listed)
        return (len(unique) == len(listed) and unique <= self._own
                and (asked is None or len(listed) <= asked))

    @functools.cached_property
    def _own(self) -> frozenset[str]:
        return frozenset(self.ids)

    def _bind(self, train_ids: list[str], test_ids: list[str]) -> None:
        """Bind this party's rows in the broadcast order (``node.shard`` and the schedule sizes)."""
        x_tr, x_te = self.table.rows(train_ids, test_ids)
        node: Any = self.node
        node.shard = PartyShard(self.index, x_tr, x_te, f"{len(self.table.columns)} columns of {self.table.source}")
        node.schedule = dataclasses.replace(node.schedule, num_train=len(x_tr), num_test=len(x_te))
        self.split = (list(train_ids), list(test_ids))

    def state(self) -> dict[str, Any]:
        """The split this party trains on (the ID lists it received), so a resume binds the same rows."""
        return {} if self.split is None else {"train_ids": self.split[0], "test_ids": self.split[1]}

    def load_state(self, state: dict[str, Any]) -> None:
        if state:
            train_ids, test_ids = list(state["train_ids"]), list(state["test_ids"])
            if not self._check(train_ids, test_ids, asked=None):
                raise DataError(f"{self.node.spec.name}: its checkpoint names sample IDs its table no longer holds, "
                                "or one twice")
            self._bind(train_ids, test_ids)


class ServerAlignment:
    """The label holder's side: chained PSI with every party, the split, and the broadcast order."""

    def __init__(self, node: Node, labels: KeyedLabels, *, parties: Mapping[int, str], seed: int,
                 noise_rng: str = "crypto", own: KeyedTable | None = None) -> None:
        self.node = node
        self.labels = labels
        self.own = own  # the label holder's own columns (secureboost's label_holder_features), or None
        self.parties = dict(sorted(parties.items()))
        self.seed = seed
        self.noise_rng = noise_rng
        self.split: tuple[list[str], list[str]] | None = None  # (train IDs, test IDs) as broadcast
        self.result: dict[str, Any] | None = None
        self._queue: list[int] = []
        self._common: list[str] = []
        self._client: PsiClient | None = None
        self._sizes: dict[str, int] = {}
        self._chain: dict[str, int] = {}  # |I_k| after each party
        self._warnings: list[str] = []

    @handles(pw.Kind.START)
    def on_start(self, messages: list[Message]) -> list[Message]:
        """Driver's control message: start the chain with the first party."""
        ids = {str(i) for i in self.labels.ids}
        if self.own is not None:  # its own rows: those in both of its tables
            ids &= {str(i) for i in self.own.ids}
            if not ids:
                raise DataError(f"PSI: {self.own.source} shares no sample ID with {self.labels.source} (both the "
                                "label holder's)")
        self._common = sorted(ids)
        self._sizes = {"label_holder": len(self._common)}
        self._chain, self._warnings = {}, []
        self._queue = list(self.parties)
        return [self._request(wire.round_of(messages[0]))]

    def _request(self, tag: str) -> Message:
        self._client = PsiClient(self._common)  # a fresh key per party
        return wire.make(pw.Kind.REQUEST, src=self.node.node_id, dst=self._queue[0], round=tag,
                         content=wire.records(**{pw.Record.PSI: wire.arrays(**{pw.Array.REQUEST: _u8(self._client.request())})}))

    @handles(pw.Kind.RESPONSE)
    def on_response(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        pid = int(m.metadata.src_node_id)
        if not self._queue or pid != self._queue[0] or self._client is None:
            raise ProtocolError(f"unexpected {pw.Kind.RESPONSE} from node {pid}")
        before = len(self._common)
        self._common = self._client.intersect(_bytes(m, pw.Array.SETUP), _bytes(m, pw.Array.RESPONSE))
        name = self.parties[pid]
        self._sizes[name] = int(str(wire.config_value(m, pw.Record.SIZE, pw.Key.SET_SIZE)))
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
        if lab.is_test is not None:  # the label holder's own split column, broadcast as given
            index = {str(k): i for i, k in enumerate(lab.ids)}
            is_test = lab.is_test[np.asarray([index[k] for k in self._common], dtype=np.int64)]
            if is_test.all() or not is_test.any():
                which = "training" if is_test.all() else "test"
                raise DataError(f"PSI: the {len(ids)} common samples hold no {which} row (split of {lab.source})")
        elif self.split is not None and sorted(self.split[0] + self.split[1]) == self._common:
            is_test = np.isin(ids, np.asarray(self.split[1], dtype=object))  # a restart keeps its split
        else:
            is_test = self._test_mask(len(ids))
        train_ids, test_ids = [str(k) for k in ids[~is_test]], [str(k) for k in ids[is_test]]
        self._bind(train_ids, test_ids)
        tr_blob, tr_len = pack_ids(train_ids)
        te_blob, te_len = pack_ids(test_ids)
        return wire.make(pw.Kind.ALIGN, src=self.node.node_id, dst=BROADCAST, round=tag, content=wire.records(
            **{pw.Record.PSI: wire.arrays(**{pw.Array.TRAIN: tr_blob, pw.Array.TRAIN_LEN: tr_len, pw.Array.TEST: te_blob,
                                   pw.Array.TEST_LEN: te_len})}))

    def _test_mask(self, n: int) -> np.ndarray:
        """A label-blind split of the ``n`` common samples from the label holder's own randomness
        (``privacy.noise_rng``: OS entropy; ``seeded`` reproduces it from the run seed)."""
        noise = NoiseSource.for_round(self.noise_rng, seed=self.seed, purpose="psi-split", node=self.node.node_id,
                                      phase="setup", epoch=0, step=0)
        return uniform_test_mask(n, test_fraction=self.labels.test_fraction, noise=noise)

    def _bind(self, train_ids: list[str], test_ids: list[str]) -> None:
        """The label holder's rows in the broadcast order (``node.labels`` and the schedule sizes)."""
        shard = self.labels.shard(train_ids, test_ids)
        y_tr, y_te = shard.y_train, shard.y_test
        only_test = [] if self.labels.is_regression else sorted(set(y_te.tolist()) - set(y_tr.tolist()))
        if only_test and self.labels.is_test is not None:  # the file's split: its train rows of it all unmatched
            names = self.labels.class_names or tuple(map(str, range(self.labels.num_classes)))
            raise DataError(f"PSI: class {names[only_test[0]]!r} of {self.labels.source} appears only in test rows "
                            f"of the {len(y_tr) + len(y_te)} common samples; allowed: every class in common "
                            "training rows")
        node: Any = self.node
        if self.own is not None:
            node.own_x = self.own.rows(train_ids, test_ids)  # before the labels: binding them builds its columns
        node.labels = shard
        node.schedule = dataclasses.replace(node.schedule, num_train=len(y_tr), num_test=len(y_te))
        self.split = (list(train_ids), list(test_ids))
        self.result = {"intersection": len(y_tr) + len(y_te), "num_train": len(y_tr), "num_test": len(y_te),
                       "set_sizes": dict(self._sizes)}

    def state(self) -> dict[str, Any]:
        """The split (train and test ID lists, as broadcast): a resume or restart keeps it."""
        return {} if self.split is None else {"train_ids": self.split[0], "test_ids": self.split[1]}

    def load_state(self, state: dict[str, Any]) -> None:
        if not state:
            return
        train_ids, test_ids = list(state["train_ids"]), list(state["test_ids"])
        if self._common and sorted(train_ids + test_ids) != self._common:
            raise DataError(f"PSI: the common sample IDs ({len(self._common)}) differ from the checkpoint's "
                            f"({len(train_ids) + len(test_ids)}); were the party files changed since?")
        self._bind(train_ids, test_ids)

    @handles(pw.Kind.SIZES)
    def on_query(self, messages: list[Message]) -> list[Message]:
        """Driver's control read of what it needs to drive the schedule (sizes, never IDs)."""
        if self.result is None:
            raise ProtocolError(f"{pw.Kind.SIZES} before the alignment finished")
        r = self.result
        names: Sequence[str] = list(r["set_sizes"])
        return [wire.reply(messages[0], content=wire.records(**{pw.Record.PSI: wire.config(**{
            pw.Key.INTERSECTION: r["intersection"], pw.Key.NUM_TRAIN: r["num_train"], pw.Key.NUM_TEST: r["num_test"],
            pw.Key.NAMES: list(names), pw.Key.SIZES: [int(r["set_sizes"][n]) for n in names],
            pw.Key.CHAIN: [int(self._chain.get(n, r["set_sizes"][n])) for n in names],
            pw.Key.WARNINGS: list(self._warnings) or [""]})}))]
