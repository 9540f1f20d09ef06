"""The label holder of the trees protocol (SecureBoost's active party): labels, key, tree growth.

It holds the labels, the private key and optionally columns of its own (whose histograms it builds
in plaintext). Per tree it encodes every training row's (g, h) for the passive parties, decrypts
their bin sums, picks each node's split (``grower.py``), asks the owner of a winning column for the
rows that go left, and keeps the leaf values, the trees' shape and the margins: no passive party
sees a label, a gain or a leaf. Test rows are routed by asking each owner for its own records'
decisions only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from flwr.common import ArrayRecord, Message

from parties.trees.codec import make_codec
from parties.trees.columns import Columns, Layout, pack_mask, unpack_mask
from parties.trees.grower import Grower, TreeParams
from parties.trees.label_dp import LabelDP, noisy_gradients
from parties.trees.objectives import Objective
from parties.trees.schemes import Scheme
from parties.trees.tree import Tree
from parties.trees.wire import LABEL_HOLDER_ID, Array, Key, Kind, Record
from vfl.core.errors import ProtocolError
from vfl.core.rng import NoiseSource
from vfl.data.dataset import LabelShard
from vfl.runtime import message as wire
from vfl.runtime import profile
from vfl.runtime.message import BROADCAST, parse_round
from vfl.runtime.node import Node, NodeSpec, handles

PHASE_GRADIENTS, PHASE_ENCRYPT, PHASE_DECRYPT = "trees_gradients", "trees_encrypt", "trees_decrypt"
PHASE_OWN, PHASE_SPLITS = "trees_own_histograms", "trees_splits"  # vfl.runtime.profile categories (benchmarks)


def _arrays(m: Message, record: str) -> dict[str, np.ndarray]:
    rec = wire.record_of(m, record, ArrayRecord)
    if rec is None:
        raise ProtocolError(f"{m.metadata.message_type} from node {m.metadata.src_node_id} has no record {record}")
    return {k: wire.from_array(v) for k, v in rec.items()}


class LabelHolder(Node):
    """The server node of ``secureboost``."""

    def __init__(self, spec: NodeSpec, *, labels: LabelShard, own: tuple[np.ndarray, np.ndarray] | None,
                 objective: Objective, params: TreeParams, base_score: float | None, max_bin: int,
                 parties: list[int], make_scheme: Callable[[], Scheme], schedule: Any,
                 label_dp: LabelDP | None = None, noise_rng: str = "crypto", seed: int = 0, hide: bool = False,
                 first_tree_own: bool = False) -> None:
        super().__init__(spec)
        self.hide, self.first_tree_own = hide, first_tree_own
        self.objective, self.params, self.base_score, self.max_bin = objective, params, base_score, max_bin
        self.label_dp, self.noise_rng, self.seed = label_dp, noise_rng, seed
        self.parties, self.make_scheme, self.schedule = list(parties), make_scheme, schedule
        self.own_x = own
        self.scheme: Scheme | None = None
        self.layouts: dict[int, Layout] = {}
        self.trees: list[Tree] = []
        self.outputs: list[int] = []  # the class (output) of each tree
        self.applied = 0  # trees already added to the test margins
        self.own_records: list[tuple[int, int, bool]] = []
        self.margins: np.ndarray | None = None
        self.test_margins: np.ndarray | None = None
        self._round: list[tuple[np.ndarray, np.ndarray]] = []
        self._grower: Grower | None = None
        self._tree_tag = ""  # the round tag of the tree growing now
        self._masks: dict[int, np.ndarray] = {}
        self._asked: dict[int, list[int]] = {}
        self._scored: tuple[tuple[int, int], dict[str, float]] = ((-1, -1), {})
        self.columns: Columns | None = None
        self.labels = labels

    # ---- data --------------------------------------------------------------------------------
    @property
    def labels(self) -> LabelShard:
        return self._labels

    @labels.setter
    def labels(self, labels: LabelShard) -> None:
        """Bind the label holder's rows (at construction, and when PSI aligns them)."""
        self._labels = labels
        if self.own_x is not None and len(self.own_x[0]) == len(labels.y_train):
            self.columns = Columns(self.own_x[0], self.own_x[1], max_bin=self.max_bin, implicit=False)
        k = self.objective.outputs
        self.margins = np.tile(self.objective.base_margin(labels.y_train, self.base_score), (len(labels.y_train), 1)
                               ) if len(labels.y_train) else np.zeros((0, k), dtype=np.float32)
        self.test_margins = np.tile(self.margins[:1] if len(self.margins) else np.zeros((1, k), np.float32),
                                    (len(labels.y_test), 1)).astype(np.float32)
        self.trees, self.outputs, self.applied = [], [], 0
        self._scored = ((-1, -1), {})

    def _owners(self) -> dict[int, Layout]:
        """Every owner's layout in tie-break order: the label holder's columns, then the parties'."""
        out = {LABEL_HOLDER_ID: self.columns.layout} if self.columns is not None else {}
        out.update({p: self.layouts[p] for p in self.parties})
        return out

    # ---- set-up ------------------------------------------------------------------------------
    @handles(Kind.SETUP)
    def on_setup(self, messages: list[Message]) -> list[Message]:
        """A fresh key (and scheme) for this attempt; every party answers with its layout."""
        if self.scheme is not None:
            self.scheme.close()  # its randomizer workers stop: a new attempt gets a new key
        self.scheme = self.make_scheme()
        self.scheme.prefill(len(self.labels.y_train))  # the first tree's randomness, while the parties answer
        self.layouts = {}
        m = messages[-1]
        return [wire.make(Kind.KEY, src=self.node_id, dst=BROADCAST, round=wire.round_of(m),
                          content=wire.records(**{Record.KEY: wire.config(**self.scheme.public())}))]

    @handles(Kind.LAYOUT)
    def on_layout(self, messages: list[Message]) -> list[Message]:
        for m in messages:
            src = m.metadata.src_node_id
            if src not in self.parties:
                raise ProtocolError(f"layout from node {src}, which is not a party of this run")
            a = _arrays(m, Record.LAYOUT)
            lay = Layout(bins=a[Array.BINS].astype(np.int64), implicit=a[Array.IMPLICIT].astype(np.int64),
                         missing=a[Array.MISSING].astype(bool))
            if len(lay.bins) == 0 or lay.bins.min() < 1 or np.any(lay.implicit >= lay.bins):
                raise ProtocolError(f"layout of node {src} is malformed")
            self.layouts[src] = lay
        return []

    # ---- one tree ----------------------------------------------------------------------------
    @handles(Kind.TREE)
    def on_tree(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        c = wire.config_of(m, Record.TASK)
        k = wire.config_int(c, Key.OUTPUT)
        if set(self.layouts) != set(self.parties) or self.scheme is None or self.margins is None:
            raise ProtocolError("tree before the set-up finished (keys and every party's layout)")
        t0 = profile.start()
        round_ = parse_round(wire.round_of(m))[1]
        if k == 0 or not self._round:  # XGBoost: one gradient per round, every class's tree from it
            self._round = self._gradients(round_)
        g, h = self._round[k]
        codec, gi, hi = make_codec(g, h)
        alone = self.first_tree_own and round_ == 0  # the first round's trees on its own columns only
        owners = {LABEL_HOLDER_ID: self._owners()[LABEL_HOLDER_ID]} if alone else self._owners()
        self._grower = Grower(g=gi, h=hi, codec=codec, layouts=owners, params=self.params)
        self._tree_tag, self._output = wire.round_of(m), k
        profile.stop(PHASE_GRADIENTS, t0)
        if alone:
            return self._grow_alone()
        return [wire.make(Kind.GRADIENTS, src=self.node_id, dst=BROADCAST, round=self._tree_tag,
                          content=self._rows_content(self._grower))]

    def _rows_content(self, gr: Grower) -> Any:
        """The rows' encoded (g, h) and the nodes to build: once per tree, or per level when hidden."""
        assert self.scheme is not None
        t0 = profile.start()
        if self.hide:
            payload = self.scheme.encode_hidden(gr.codec, gr.g, gr.h, gr.pos, gr.build)
        else:
            payload = self.scheme.encode_rows(gr.codec, gr.g, gr.h)
        profile.stop(PHASE_ENCRYPT, t0)
        recs: dict[str, Any] = {Record.ROWS: wire.arrays(**payload),
                                Record.CODEC: wire.config(**gr.codec.to_config(), **{Key.HIDDEN: self.hide}),
                                Record.LEVEL: wire.arrays(**{Array.BUILD: np.asarray(gr.build, dtype=np.int64)})}
        return wire.records(**recs)

    def _gradients(self, round_: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """(g, h) per output for this round: XGBoost's, or with ``label_dp`` the gradients clipped and noised
        before anything leaves (the hessians do not depend on the labels)."""
        assert self.margins is not None
        y, outputs = self.labels.y_train, range(self.objective.outputs)
        exact = [self.objective.gradients(self.margins, y, j) for j in outputs]
        if self.label_dp is None:
            return exact
        noise = NoiseSource.for_round(self.noise_rng, seed=self.seed, purpose="trees-label-dp", node=self.node_id,
                                      phase="train", epoch=round_, step=0)
        g = noisy_gradients(objective=self.objective, margins=self.margins, y=y, dp=self.label_dp, noise=noise)
        return [(g[:, j], exact[j][1]) for j in outputs]

    def _build_own(self, gr: Grower) -> None:
        t0 = profile.start()
        if self.columns is not None:
            for node in gr.build:
                gr.add(LABEL_HOLDER_ID, node, self.columns.plain_sums(gr.rows_of(node), gr.g, gr.h))
        profile.stop(PHASE_OWN, t0)

    def _decide(self, gr: Grower) -> list[Message]:
        """Pick every node's split: its own applied now, each party's asked of its owner (SPLIT)."""
        self._build_own(gr)
        out = []
        self._masks = {}
        t0 = profile.start()
        choices = gr.decide()
        profile.stop(PHASE_SPLITS, t0)
        if self.view_sink is not None:  # the decrypted histograms it now holds (for the report's attacks)
            for node in gr.frontier:
                for owner in self.parties:
                    if owner in gr.hist.get(node, {}):
                        self.note_derived(self._tree_tag, f"hist:{owner}:{node}", gr.hist[node][owner][0][:, 1])
        for ch in choices:
            cand = ch.candidate
            if ch.owner == LABEL_HOLDER_ID:
                assert self.columns is not None
                go = self.columns.left_of(gr.rows_of(ch.node), cand.feature, cand.bin, cand.default_left)
                self.own_records.append((cand.feature, cand.bin, cand.default_left))
                self._masks[ch.node] = pack_mask(go)
                gr.apply(ch.node, go, record=len(self.own_records) - 1)
            else:
                split = wire.config(**{Key.NODE: ch.node, Key.FEATURE: cand.feature, Key.BIN: cand.bin,
                                       Key.DEFAULT_LEFT: cand.default_left})
                out.append(wire.make(Kind.SPLIT, src=self.node_id, dst=ch.owner, round=self._tree_tag,
                                     content=wire.records(**{Record.SPLIT: split})))
        return out

    def _grow_alone(self) -> list[Message]:
        """A tree on the label holder's columns only (``first_tree_label_holder_only``): no message leaves."""
        gr = self._grower
        assert gr is not None
        while self._grower is not None:
            self._decide(gr)
            self._advance(alone=True)
        return []

    @handles(Kind.HISTOGRAMS)
    def on_histograms(self, messages: list[Message]) -> list[Message]:
        gr = self._grower
        if gr is None or self.scheme is None:
            raise ProtocolError("histograms with no tree growing")
        got = {m.metadata.src_node_id: m for m in messages}
        if set(got) != set(self.parties):
            raise ProtocolError(f"histograms from {sorted(got)}, expected every party {self.parties}")
        build = list(gr.build)
        for src, m in got.items():
            echo = wire.get_array(m, Record.LEVEL, Array.BUILD).tolist()
            if echo != build:
                raise ProtocolError(f"histograms of nodes {echo} from node {src}, asked for {build}")
            slots = self.layouts[src].num_slots()
            t0 = profile.start()
            if self.hide:
                sums = self.scheme.decode_hidden(_arrays(m, Record.ROWS), gr.codec, slots, build)
            else:
                sums = self.scheme.decode_sums(_arrays(m, Record.ROWS), gr.codec, [slots] * len(build),
                                               [gr.counts[n] for n in build])
            profile.stop(PHASE_DECRYPT, t0)
            for node, s in zip(build, sums, strict=True):
                gr.add(src, node, s)
        return self._decide(gr) or self._advance()

    @handles(Kind.PARTITION)
    def on_partition(self, messages: list[Message]) -> list[Message]:
        gr = self._grower
        if gr is None:
            raise ProtocolError("partition with no tree growing")
        for m in messages:
            c = wire.config_of(m, Record.SPLIT)
            node, record = wire.config_int(c, Key.NODE), wire.config_int(c, Key.RECORD)
            pending = gr.pending.get(node)
            if pending is None or pending.owner != m.metadata.src_node_id:
                raise ProtocolError(f"partition of node {node} from node {m.metadata.src_node_id}, which does not own it")
            bits = wire.get_array(m, Record.MASKS, Array.MASK)
            rows = gr.rows_of(node)
            if self.hide:  # the owner answered for every row (it does not know the node's): keep the node's
                go = unpack_mask(bits, len(gr.pos))[rows]
                bits = pack_mask(go)
            else:
                go = unpack_mask(bits, len(rows))
            self._masks[node] = bits
            gr.apply(node, go, record=record)
        return self._advance()

    def _advance(self, *, alone: bool = False) -> list[Message]:
        gr = self._grower
        assert gr is not None
        t = gr.tree
        for n in gr.frontier:
            if not t.is_leaf(n):  # what it chose and who owns it (for the report's attacks, when views are kept)
                self.note_derived(self._tree_tag, "split", np.asarray(
                    [n, t.owner[n], t.feature[n], t.bin[n], int(t.default_left[n]), t.left[n], t.right[n]], np.int64))
        splits = gr.advance()
        self.note_derived(self._tree_tag, "pos", gr.pos.astype(np.int16))
        if gr.done:
            values = gr.finish()
            assert self.margins is not None
            self.margins[:, self._output] = (self.margins[:, self._output] + values).astype(np.float32)
            self.trees.append(gr.tree)
            self.outputs.append(self._output)
            self._grower = None
            if self._output == self.objective.outputs - 1:
                self._round = []
            return []
        if alone:
            return []
        if self.hide:  # no partition leaves: the next level's rows, each in its node's slot
            self._masks = {}
            return [wire.make(Kind.LEVEL, src=self.node_id, dst=BROADCAST, round=self._tree_tag,
                              content=self._rows_content(gr))]
        masks = [self._masks[n] for n, _, _ in splits]
        level = {Array.NODES: np.asarray([n for n, _, _ in splits], dtype=np.int64),
                 Array.LEFT: np.asarray([lo for _, lo, _ in splits], dtype=np.int64),
                 Array.RIGHT: np.asarray([hi for _, _, hi in splits], dtype=np.int64),
                 Array.MASK: np.concatenate(masks) if masks else np.zeros(0, dtype=np.uint8),
                 Array.BUILD: np.asarray(gr.build, dtype=np.int64)}
        self._masks = {}
        return [wire.make(Kind.LEVEL, src=self.node_id, dst=BROADCAST, round=self._tree_tag,
                          content=wire.records(**{Record.LEVEL: wire.arrays(**level)}))]

    # ---- prediction on the test rows -----------------------------------------------------------
    @handles(Kind.PREDICT)
    def on_predict(self, messages: list[Message]) -> list[Message]:
        """Ask every owner for its records' decisions on the test rows of the trees not yet applied."""
        tag = wire.round_of(messages[-1])
        self._asked = {p: sorted({t.record[n] for t in self.trees[self.applied:] for n in t.splits_of(p)})
                       for p in self.parties}
        out = [wire.make(Kind.ASK, src=self.node_id, dst=p, round=tag, content=wire.records(**{
            Record.SPLIT: wire.arrays(**{Array.RECORDS: np.asarray(r, dtype=np.int64)})}))
            for p, r in self._asked.items() if r]
        if not out:
            self._route({})
        return out

    @handles(Kind.DECISIONS)
    def on_decisions(self, messages: list[Message]) -> list[Message]:
        n = len(self.labels.y_test)
        size = (n + 7) // 8
        decisions: dict[tuple[int, int], np.ndarray] = {}
        for m in messages:
            src = m.metadata.src_node_id
            asked = self._asked.get(src, [])
            bits = wire.get_array(m, Record.MASKS, Array.MASK)
            if len(bits) != size * len(asked):
                raise ProtocolError(f"decisions of node {src}: {len(bits)} bytes for {len(asked)} records")
            for i, r in enumerate(asked):
                decisions[(src, r)] = unpack_mask(bits[i * size:(i + 1) * size], n)
        self._route(decisions)
        return []

    def _route(self, decisions: dict[tuple[int, int], np.ndarray]) -> None:
        assert self.test_margins is not None
        n = len(self.labels.y_test)
        for tree, k in zip(self.trees[self.applied:], self.outputs[self.applied:], strict=True):
            goes: dict[int, np.ndarray] = {}
            for node in range(tree.size):
                if tree.is_leaf(node):
                    continue
                owner, rec = tree.owner[node], tree.record[node]
                if owner == LABEL_HOLDER_ID:
                    assert self.columns is not None
                    goes[node] = self.columns.goes_left(self.columns.x_test, *self.own_records[rec])
                elif (owner, rec) in decisions:
                    goes[node] = decisions[(owner, rec)]
                else:
                    raise ProtocolError(f"no decision of node {owner} for its record {rec}")
            leaf = tree.route(goes, n)
            self.test_margins[:, k] = (self.test_margins[:, k] + tree.leaf_values()[leaf]).astype(np.float32)
        self.applied = len(self.trees)

    # ---- what the driver reads ----------------------------------------------------------------
    @handles(Kind.METRICS)
    def on_metrics(self, messages: list[Message]) -> list[Message]:
        assert self.margins is not None and self.test_margins is not None
        out: dict[str, float] = {"n_trees": float(len(self.trees)), "outputs": float(self.objective.outputs),
                                 "num_classes": float(self.labels.num_classes)}
        key = (len(self.trees), self.applied)  # the metrics of these margins, computed once (AUC sorts every row)
        if self._scored[0] != key:
            scored = self.objective.metrics(self.margins, self.labels.y_train, "train_")
            if self.applied == len(self.trees):
                scored.update(self.objective.metrics(self.test_margins, self.labels.y_test, "test_"))
            self._scored = (key, scored)
        out.update(self._scored[1])
        return [wire.metrics_reply(messages[-1], **out)]

    @handles(Kind.MODEL)
    def on_model(self, messages: list[Message]) -> list[Message]:
        """Gain importance by (owner, owner-local feature): what the label holder knows of the model."""
        rows = [(t.owner[n], t.feature[n], t.gain[n]) for t in self.trees for n in range(t.size) if not t.is_leaf(n)]
        arrs = {"owner": np.asarray([r[0] for r in rows], dtype=np.int64),
                "feature": np.asarray([r[1] for r in rows], dtype=np.int64),
                "gain": np.asarray([r[2] for r in rows], dtype=np.float64),
                "own_feature": np.asarray([f for f, _, _ in self.own_records], dtype=np.int64)}
        return [wire.reply(messages[-1], content=wire.records(**{Record.MODEL: wire.arrays(**arrs)}))]

    # ---- checkpoints ----------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        assert self.margins is not None and self.test_margins is not None
        return {"trees": [t.state() for t in self.trees], "outputs": list(self.outputs), "applied": self.applied,
                "own_records": [[f, b, int(dl)] for f, b, dl in self.own_records],
                "margins": torch.from_numpy(self.margins.copy()), "test_margins": torch.from_numpy(self.test_margins.copy())}

    def load_state(self, state: dict[str, Any]) -> None:
        if not state:
            return
        self.trees = [Tree.from_state(s) for s in state["trees"]]
        self.outputs = [int(k) for k in state["outputs"]]
        self.applied = int(state["applied"])
        self.own_records = [(int(f), int(b), bool(dl)) for f, b, dl in state["own_records"]]
        margins, test = state["margins"].numpy(), state["test_margins"].numpy()
        if self.margins is None or self.test_margins is None or margins.shape != self.margins.shape \
                or test.shape != self.test_margins.shape:
            raise ProtocolError("the checkpoint's margins do not fit this run's rows")
        self.margins, self.test_margins = margins.astype(np.float32), test.astype(np.float32)
        self._round, self._grower = [], None
