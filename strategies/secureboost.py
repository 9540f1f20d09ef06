"""``secureboost``: gradient-boosted trees across parties, XGBoost-exact, under Paillier.

The label holder (the server node: labels, the private key, optionally columns of its own) encrypts
each training row's (g, h); passive parties sum ciphertexts into per-bin histograms of their own
columns (``parties/trees/``); the label holder decrypts, picks each split by XGBoost's gain and asks
the owner of the winning column which rows go left. One engine epoch is one boosting round (one tree,
or one per class for ``multi:*``), so checkpoints, resume, the ledger, tracking and sweeps work per
round. Hyper-parameters take XGBoost's names. The protocol and who learns what: ``docs/trees.md``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from parties.trees.grower import TreeParams
from parties.trees.label_dp import LabelDP
from parties.trees.label_dp import grid as label_grid
from parties.trees.objectives import OBJECTIVES, Objective
from parties.trees.wire import LABEL_HOLDER_ID, Key, Kind, Record
from parties.vertical.wire import party_node_id
from strategies.base.psi import build_aligned_node, run_alignment
from vfl.config.fields import param
from vfl.core.errors import ConfigError, DataError, ProtocolError
from vfl.data import psi
from vfl.data.dataset import DataSource, KeyedDataSource, LabelShard, PartyShard
from vfl.engine.schema import RunConfig
from vfl.engine.strategy import Progress, Strategy, register
from vfl.runtime import message as wire
from vfl.runtime.grid import Grid
from vfl.runtime.message import round_tag
from vfl.runtime.node import Node, NodeSpec

HE_MODES = ("paillier", "none")
INSECURE = "he: none sends every row's gradient and hessian to every party in the clear (insecure)"


@dataclass(frozen=True)
class LabelDPParams:
    """``params.label_dp``: discrete Gaussian noise on every row's clipped gradient, each round (label DP)."""

    noise_multiplier: float = param(gt=0, le=1e4, help="noise std / the L2 sensitivity of one row's gradient "
                                    "vector to its label: one round is a Gaussian mechanism with this multiplier")
    clip: float = param(1.0, gt=0, le=1e6, help="clip of each gradient coordinate (logistic and softmax gradients "
                        "lie in [-1, 1]: 1 clips nothing there; regression: needed, the sensitivity is 2·clip)")


@dataclass(frozen=True)
class SecureBoostParams:
    n_estimators: int = param(20, ge=1, le=100000, help="boosting rounds (one tree each; one per class for multi:*); "
                              "train.epochs follows it")
    max_depth: int = param(6, ge=1, le=30, help="depth limit of every tree (grown level by level, as XGBoost's "
                           "depthwise policy)")
    learning_rate: float = param(0.3, gt=0, le=1, help="shrinkage eta of every leaf value")
    reg_lambda: float = param(1.0, ge=0, help="L2 regularization lambda on leaf weights")
    gamma: float = param(0.0, ge=0, help="minimum loss reduction to split (min_split_loss)")
    min_child_weight: float = param(1.0, ge=0, help="minimum hessian sum of a child")
    max_bin: int = param(256, ge=2, le=65536, help="bins per feature, cut locally by each party (XGBoost's hist rule)")
    base_score: float | None = param(None, help="initial prediction (a probability for binary:logistic); null = "
                                     "XGBoost 3's estimate from the training labels, at the label holder")
    objective: str = param("binary:logistic", choices=OBJECTIVES, help="XGBoost objective; multi:* grows one tree "
                           "per class per round")
    he: str = param("paillier", choices=HE_MODES, help="how (g, h) reach the passive parties: paillier "
                    "(encrypted) or none (in the clear: needs allow_insecure)")
    allow_insecure: bool = param(False, help="allow he: none (debugging, exactness checks; the summary says insecure)")
    key_bits: int = param(2048, ge=2048, le=16384, help="Paillier modulus bits (>= 2048)")
    he_workers: int = param(1, ge=0, le=64, help="processes that precompute encryption randomness off the critical "
                            "path at the label holder (0 = inline)")
    label_holder_features: bool = param(False, help="the label holder also holds the first column block (SecureBoost's "
                                        "active party): its histograms stay plaintext; num_parties counts it; with per-party files "
                                        "data.parties[0] is its table")
    label_dp: LabelDPParams | None = param(None, help="{noise_multiplier, clip}: label DP towards the passive "
                                           "parties (epsilon_label); null = off")
    hide_instance_space: bool = param(False, help="each row's (g, h) encrypted in the slot of its node, every level: "
                                      "a passive party sums blindly and never learns which rows reach a node "
                                      "(≈ depth × the encryptions; he: paillier)")
    first_tree_label_holder_only: bool = param(False, help="the first round's trees on the label holder's columns "
                                               "only (their leaves are the purest): needs label_holder_features")


@register
class SecureBoost(Strategy):
    """Vertical gradient boosting (SecureBoost): encrypted gradients, per-owner thresholds."""

    name = "secureboost"
    summary = ("gradient-boosted trees across parties (SecureBoost): Paillier-encrypted gradients, per-bin "
               "histograms at the parties, XGBoost's splits at the label holder")
    Params = SecureBoostParams
    bottom_dp_refusal = "trees have no party bottom model (label privacy for trees: see docs/trees.md)"
    supports_regression: ClassVar[bool] = True
    supports_missing: ClassVar[bool] = True
    reads_party_files: ClassVar[bool] = True
    rounds_param: ClassVar[str] = "n_estimators"
    round_name = "tree"
    headline = ("epsilon_label", "test_auc", "test_rmse", "s_per_tree")
    final_keys = ("final_test_auc", "final_test_rmse", "n_trees", "s_per_tree", "he", "key_bits")

    @classmethod
    def round_unit(cls, cfg: RunConfig) -> str:
        """``tree``, or ``round`` for multi:* (one tree per class)."""
        return "round" if str(cfg.params.objective).startswith("multi:") else "tree"

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self._sizes = (0, 0, 2)
        self._keyed = False
        self._psi: dict[str, Any] = {}
        self._tree_s: list[float] = []

    # ---- configuration --------------------------------------------------------------------------
    @classmethod
    def validate_config(cls, cfg: RunConfig) -> None:
        p = cfg.params
        if p.he == "none" and not p.allow_insecure:
            raise ConfigError("params.he", f"got 'none'; {INSECURE}: set params.allow_insecure: true to run it anyway")
        need = 2 if p.label_holder_features else 1
        if cfg.num_parties < need:
            raise ConfigError("num_parties", f"got {cfg.num_parties}; secureboost needs at least {need} column "
                              f"block(s){' (one stays with the label holder)' if need == 2 else ''}")
        if p.hide_instance_space and p.he != "paillier":
            raise ConfigError("params.hide_instance_space", "needs params.he: paillier (in the clear a party reads "
                              "every row's node off its slots)")
        if p.first_tree_label_holder_only and not p.label_holder_features:
            raise ConfigError("params.first_tree_label_holder_only", "needs params.label_holder_features: true (the "
                              "label holder's own columns grow the first trees)")
        if p.label_dp is not None and p.base_score is None and p.objective == "reg:squarederror":
            raise ConfigError("params.base_score", "with params.label_dp a regression needs a fixed base_score (the "
                              "labels' mean would be a release no noise covers): set it, e.g. a public prior")

    def objective(self, num_classes: int) -> Objective:
        return Objective(self.params.objective, num_class=num_classes if self.params.objective.startswith("multi:") else 1)

    def label_dp(self) -> LabelDP | None:
        d = self.params.label_dp
        return None if d is None else LabelDP(noise_multiplier=float(d.noise_multiplier), clip=float(d.clip))

    def base_score(self) -> float | None:
        """``params.base_score``; with label DP and none given, a fixed one (0.5, or uniform classes): never the
        labels' estimate, which no noise would cover."""
        p = self.params
        if p.base_score is not None or p.label_dp is None:
            return p.base_score
        return 0.0 if p.objective.startswith("multi:") else 0.5

    def privacy_events(self, *, epoch: int) -> list[Any]:
        """One round of label DP: a Gaussian mechanism on every row's gradient (``parties/trees/label_dp.py``)."""
        dp = self.label_dp()
        return [] if dp is None else [label_grid(self.objective(self._sizes[2]), dp).event()]

    @classmethod
    def calibrate_to_target(cls, cfg: RunConfig) -> RunConfig:
        """``params.label_dp.noise_multiplier`` whose label ε after ``params.n_estimators`` rounds is the target."""
        import dataclasses

        from vfl.privacy.accounting.calibrate import calibrate_ldp_sigma

        p = cfg.params
        if p.label_dp is None:
            raise ConfigError("privacy.target_epsilon", "secureboost calibrates params.label_dp.noise_multiplier: set "
                              "params.label_dp.clip (e.g. --set params.label_dp={clip: 1.0, noise_multiplier: 1})")
        z, _ = calibrate_ldp_sigma(target_epsilon=float(cfg.privacy.target_epsilon or 0), delta=cfg.privacy.delta,
                                   sensitivity=1.0, epochs=cfg.train.epochs)
        dp = dataclasses.replace(p.label_dp, noise_multiplier=float(z))
        out = dataclasses.replace(cfg, params=dataclasses.replace(p, label_dp=dp))
        cls.validate_config(out)
        return out

    def epsilon_assumptions(self) -> list[str]:
        if self.params.label_dp is None:
            return []
        return ["the label holder runs the protocol as written (it holds the labels and the noise); the passive parties "
                "may pool what they see; the base score is fixed (not estimated from the labels), no early stopping "
                "reads a label metric, and the metrics the run prints go to the experimenter, not to the parties"]

    def tree_params(self) -> TreeParams:
        p = self.params
        return TreeParams(max_depth=p.max_depth, learning_rate=p.learning_rate, reg_lambda=p.reg_lambda,
                          gamma=p.gamma, min_child_weight=p.min_child_weight)

    def check_labels(self, *, num_classes: int, regression: bool, where: str) -> None:
        """The objective fits the labels (one line naming ``params.objective`` otherwise)."""
        obj = self.params.objective
        if regression != (obj == "reg:squarederror"):
            what = "a regression target" if regression else f"{num_classes} classes"
            raise ConfigError("params.objective", f"got {obj!r} but {where} has {what}; use "
                              f"{'reg:squarederror' if regression else 'binary:logistic or multi:softprob'}")
        if obj == "binary:logistic" and num_classes != 2:
            raise ConfigError("params.objective", f"got 'binary:logistic' but {where} has {num_classes} classes; "
                              "use multi:softprob or multi:softmax")

    # ---- nodes ----------------------------------------------------------------------------------
    def shard_of(self, node_id: int) -> int:
        """The column block of a party node (with label_holder_features the label holder holds block 0)."""
        return node_id if self.params.label_holder_features else node_id - 1

    def party_ids(self) -> list[int]:
        first = 1 if self.params.label_holder_features else 0
        return [party_node_id(k) - (1 if self.params.label_holder_features else 0) for k in range(first, self.cfg.num_parties)]

    def layout(self) -> list[NodeSpec]:
        specs = [NodeSpec(LABEL_HOLDER_ID, "server", "server", "server")]
        return specs + [NodeSpec(n, "party", f"party{self.shard_of(n)}", "parties") for n in self.party_ids()]

    def schedule(self, num_train: int, num_test: int) -> Any:
        from vfl.data.sampling import Schedule

        return Schedule(seed=self.cfg.seed, num_train=num_train, num_test=num_test, batch_size=1, eval_batch_size=1)

    def _scheme_factories(self) -> tuple[Any, Any]:
        from parties.trees.schemes import PlainParty, PlainScheme

        p = self.params
        if p.he == "none":
            return PlainScheme, lambda public: PlainParty()
        from parties.trees.paillier import PaillierParty, PaillierScheme

        return (lambda: PaillierScheme(key_bits=p.key_bits, workers=p.he_workers)), PaillierParty.from_public

    def server_node(self, spec: NodeSpec, labels: LabelShard, sched: Any, own: Any = None) -> Node:
        from parties.trees.label_holder import LabelHolder

        make_scheme, _ = self._scheme_factories()
        return LabelHolder(spec, labels=labels, own=own, objective=self.objective(labels.num_classes),
                           params=self.tree_params(), base_score=self.base_score(), max_bin=self.params.max_bin,
                           parties=self.party_ids(), make_scheme=make_scheme, schedule=sched, label_dp=self.label_dp(),
                           noise_rng=self.cfg.privacy.noise_rng, seed=self.cfg.seed,
                           hide=self.params.hide_instance_space, first_tree_own=self.params.first_tree_label_holder_only)

    def party_node(self, spec: NodeSpec, shard: PartyShard, sched: Any, **_: Any) -> Node:
        from parties.trees.party import TreeParty

        _, party_scheme = self._scheme_factories()
        return TreeParty(spec, shard=shard, max_bin=self.params.max_bin, schedule=sched, party_scheme=party_scheme)

    def build_node(self, spec: NodeSpec, data: DataSource) -> Node:
        if isinstance(data, KeyedDataSource):  # with label_holder_features, data.parties[0] is the label holder's
            return build_aligned_node(self, spec, data, own_table=0 if self.params.label_holder_features else None,
                                      tables={n: self.shard_of(n) for n in self.party_ids()})
        shards, labels = data.partition()
        sched = self.schedule(len(labels.y_train), len(labels.y_test))
        if spec.is_server:
            own = None
            if self.params.label_holder_features:
                own = (_table(shards[0].x_train), _table(shards[0].x_test))
            return self.server_node(spec, labels, sched, own=own)
        return self.party_node(spec, shards[self.shard_of(spec.node_id)], sched)

    # ---- driver ---------------------------------------------------------------------------------
    def prepare(self, data: DataSource) -> None:
        self._keyed = isinstance(data, KeyedDataSource)
        if self._keyed:
            psi.require()
            return
        ds = data.dataset()
        if ds.modality != "tabular":
            raise ConfigError("dataset", f"{ds.name} is {ds.modality!r}; secureboost trains on tabular columns")
        shards, labels = data.partition()
        self.check_labels(num_classes=labels.num_classes, regression=_is_regression(labels), where=f"dataset {ds.name}")
        if not _is_regression(labels) and len(np.unique(labels.y_train)) < 2:
            raise DataError(f"dataset {ds.name}: every training label is the same class; boosting needs two")
        for s in shards:
            if s.x_train.ndim != 2:
                raise ConfigError("dataset", f"{ds.name}: party {s.party} has inputs of shape {s.x_train.shape[1:]}; "
                                  "secureboost needs columns (tabular data)")
        self._sizes = (len(labels.y_train), len(labels.y_test), labels.num_classes)

    def align(self, grid: Grid) -> None:
        if self._keyed:
            self._psi = run_alignment(grid, server_id=LABEL_HOLDER_ID, num_parties=self.cfg.num_parties)
            classes = int(self._query(grid, Kind.METRICS, 0)["num_classes"])
            self._sizes = (self._psi["psi_num_train"], self._psi["psi_num_test"], classes)

    def setup(self, grid: Grid) -> None:
        """A fresh key pair at the label holder (each start, restart and resume); the parties' layouts."""
        grid.run_until_quiet([wire.make(Kind.SETUP, src=LABEL_HOLDER_ID, dst=LABEL_HOLDER_ID,
                                        round=round_tag(-1, -1, "setup"))], max_hops=4)

    def steps_per_epoch(self) -> int:
        """Trees per round (the progress bar's steps): one per class for multi:*."""
        return self.objective(self._sizes[2]).outputs

    def _query(self, grid: Grid, kind: str, epoch: int) -> dict[str, float]:
        replies = grid.send([wire.make(kind, src=LABEL_HOLDER_ID, dst=LABEL_HOLDER_ID,
                                       round=round_tag(max(epoch, 0), 0, "control"))])
        if len(replies) != 1:
            raise ProtocolError(f"{kind}: expected one reply, got {len(replies)}")
        return wire.read_metrics(replies[0].open())

    def train_epoch(self, grid: Grid, *, epoch: int, progress: Progress) -> dict[str, float]:
        outputs = self.objective(self._sizes[2]).outputs  # trees per round (the classes are known since prepare/align)
        hops = 4 * self.params.max_depth + 6
        for k in range(outputs):
            t0 = time.perf_counter()
            task = wire.config(**{Key.TREE: epoch * outputs + k, Key.OUTPUT: k})
            grid.run_until_quiet([wire.make(Kind.TREE, src=LABEL_HOLDER_ID, dst=LABEL_HOLDER_ID,
                                            round=round_tag(epoch, k), content=wire.records(**{Record.TASK: task}))],
                                 max_hops=hops)
            self._tree_s.append(time.perf_counter() - t0)
            progress(1)
        m = self._query(grid, Kind.METRICS, epoch)
        out = {k: v for k, v in m.items() if k.startswith("train_")}
        out["n_trees"] = m["n_trees"]
        out["s_per_tree"] = float(np.mean(self._tree_s[-outputs:]))
        return out

    def evaluate(self, grid: Grid, *, epoch: int) -> dict[str, float]:
        grid.run_until_quiet([wire.make(Kind.PREDICT, src=LABEL_HOLDER_ID, dst=LABEL_HOLDER_ID,
                                        round=round_tag(epoch, 0, "eval"))], max_hops=4)
        m = self._query(grid, Kind.METRICS, epoch)
        return {k: v for k, v in m.items() if k.startswith("test_")}

    def summary_extra(self, grid: Grid) -> dict[str, Any]:
        p = self.params
        out: dict[str, Any] = {"n_trees": None, "s_per_tree": float(np.mean(self._tree_s)) if self._tree_s else None,
                               "he": p.he, "objective": p.objective, "max_depth": p.max_depth,
                               "learning_rate": p.learning_rate, "max_bin": p.max_bin,
                               "hide_instance_space": p.hide_instance_space,
                               "first_tree_label_holder_only": p.first_tree_label_holder_only, **self._psi}
        if p.he == "paillier":
            out["key_bits"] = p.key_bits
        else:
            out["insecure"] = INSECURE
        if (dp := self.label_dp()) is not None:
            g = label_grid(self.objective(self._sizes[2]), dp)
            out["label_dp"] = {"noise_multiplier": dp.noise_multiplier, "clip": dp.clip, "grid_levels": g.levels,
                               "noise_multiplier_drawn": g.event().noise_multiplier, "base_score": self.base_score()}
        m = self._query(grid, Kind.METRICS, 0)
        out["n_trees"] = int(m["n_trees"])
        for key in ("test_auc", "test_rmse", "test_loss"):
            if key in m:
                out[f"final_{key}"] = m[key]
        if "test_acc" in m:
            out["final_test_acc"] = m["test_acc"]
        out["gain_importance"] = self._importance(grid)
        return out

    def _importance(self, grid: Grid) -> dict[str, Any]:
        """Total gain and split count per owner (what the label holder knows: no threshold)."""
        (rep,) = grid.send([wire.make(Kind.MODEL, src=LABEL_HOLDER_ID, dst=LABEL_HOLDER_ID,
                                      round=round_tag(0, 0, "control"))])
        m = rep.open()
        owner = wire.get_array(m, Record.MODEL, "owner")
        feature = wire.get_array(m, Record.MODEL, "feature")
        gain = wire.get_array(m, Record.MODEL, "gain")
        out: dict[str, Any] = {}
        for o in sorted(set(owner.tolist())):
            name = "label_holder" if o == LABEL_HOLDER_ID else grid.name(int(o))
            sel = owner == o
            per = {}
            for f in sorted(set(feature[sel].tolist())):
                per[str(f)] = float(gain[sel & (feature == f)].sum())
            out[name] = {"gain": float(gain[sel].sum()), "splits": int(sel.sum()), "by_feature": per}
        return out


def _table(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).reshape(len(x), -1)


def _is_regression(labels: LabelShard) -> bool:
    return str(getattr(labels, "metric", "")) == "rmse"

