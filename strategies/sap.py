"""SAP: split-and-privatize fine-tuning of a pretrained LM (Shen et al., "A Split-and-Privatize
Framework for Large Language Model Fine-Tuning", arXiv:2312.15603).

The vendor (the server side) splits its model, ships the bottom to the customer (party) and trains LoRA +
head on the top; the customer releases ηdχ-privatized bottom representations (CTI: less noise on
class-skewed tokens) and answers logits with dLoss/dlogits, which exposes every label to the vendor
(its only negative entry; SAP protects the inputs, not the labels). After training
the vendor runs embedding-inversion and attribute-inference attacks on what it received; the
driver scores them against the customer's truth: EP = 1 − attack success.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import numpy as np

from parties.llm.sap.customer import Privatizer, SapCustomer
from parties.llm.sap.vendor import AttackBudget, SapVendor
from parties.llm.sap.wire import CUSTOMER_ID, VENDOR_ID, Kind, Record, split_packed, step_config
from strategies.base.llm import LlmDriver, optimizer_factory, schedule_lr, text_pairs
from strategies.base.llm_params import LoraParams
from vfl.attacks.attribute import PROBES, bootstrap_ci, majority_rate, split_labeled
from vfl.attacks.inversion import token_recovery, token_recovery_counts
from vfl.config.fields import param
from vfl.core.errors import ConfigError, DataError
from vfl.core.logs import get_logger
from vfl.data.dataset import Dataset, DataSource
from vfl.data.sampling import derive_seed
from vfl.engine.schema import RunConfig
from vfl.engine.strategy import Progress, register
from vfl.runtime import message as wire
from vfl.runtime.grid import Grid
from vfl.runtime.message import round_tag
from vfl.runtime.node import Node, NodeSpec


@dataclass(frozen=True)
class SapParams(LoraParams):
    split: int = param(0, ge=0, le=63, help="encoder blocks in the customer's bottom (0 = embedding layer only)")
    frozen_bottom: bool = param(True, help="frozen: release every sample once; else privatize each batch and "
                                "train the bottom with the gradient the vendor sends back")
    eta: float | Literal["auto"] | None = param(100.0, gt=0, help="dχ privacy parameter η, noise density ∝ "
                                                "exp(−η‖n‖); null = no privatization (E‖n‖ = d/η; MiniLM: d = 384); "
                                                "auto (split 0) = the η whose nearest-neighbour EIA success on a "
                                                "public sample of the embedding table is params.eia_target")
    eia_target: float = param(0.1, gt=0, lt=1, help="eta auto: the nearest-neighbour EIA success η is calibrated to "
                              "(an empirical target against that attack, not a guarantee)")
    santext_epsilon: float | None = param(None, gt=0, help="SanText baseline: replace each token by one drawn ∝ "
                                          "exp(−ε‖e_x − e_y‖/2) over the embedding table before the bottom "
                                          "(ε·d metric LDP per token); null = off")
    snap: bool = param(True, help="split 0 only: replace each noisy vector by its nearest token embedding")
    cti: bool = param(False, help="contributing-token identification: less noise on class-skewed tokens")
    cti_fraction: float = param(0.01, gt=0, le=1, help="contributing tokens cover at most this share of token occurrences")
    cti_factor: float = param(0.0, ge=0, le=1, help="noise multiplier on contributing tokens (η/factor); 0 = released "
                              "exact, as SAP's Algorithm 1 (noise on non-contributing tokens only)")
    cti_smoothing: float = param(1.0, gt=0, help="Laplace smoothing of the per-class token frequencies")
    lora_dropout: float = param(0.0, ge=0, lt=1, help="dropout on the LoRA path (0 keeps calls deterministic)")
    pooling: str | None = param(None, choices=("mean", "cls", "last"), help="sentence pooling before the head; "
                                "null = the model's default (encoder: mean, decoder: last real token)")
    upload_chunk: int = param(256, ge=1, help="samples per message when a frozen bottom uploads a whole split")
    eia_samples: int = param(16, ge=0, help="training samples the vendor tries to invert (0 = no EIA)")
    eia_steps: int = param(100, ge=1, help="Adam steps of the optimization-based inversion (split >= 1)")
    eia_lr: float = param(0.1, gt=0, help="learning rate of the optimization-based inversion")
    eia_temperature: float = param(1.0, gt=0, help="softmax temperature of the relaxed token selection")
    inverter_samples: int = param(512, ge=0, help="public token sequences the vendor's learned inverter trains on "
                                  "(through its public bottom and the public mechanism); 0 = that attack is off")
    inverter_epochs: int = param(4, ge=1, le=1000, help="training epochs of the learned inverter")
    aia_attribute: str | None = param("source", help="Dataset.extras column the vendor tries to infer (null = no AIA)")
    aia_labeled_frac: float = param(0.5, gt=0, lt=1, help="share of training samples whose attribute the attacker knows")
    aia_finetune_epochs: int = param(3, ge=0, le=100, help="epochs the AIA attacker fine-tunes a copy of the vendor's "
                                     "top (LoRA + a fresh head) on the token representations it received, the "
                                     "paper's attacker and fifth probe (0 = off: the four pooled/length probes only)")
    aia_finetune_lr: float = param(1e-3, gt=0, le=1, help="AdamW learning rate of that fine-tuning")
    attack_every: int = param(0, ge=0, help="run the attacks every N epochs (0 = after the last epoch only)")
    log_mb: int = param(64, ge=0, help="MB of received arrays the vendor keeps in its message log")


def attribute_codes(ds: Dataset, name: str | None) -> np.ndarray | None:
    """The private attribute of the training samples as integer codes (None if the data has none)."""
    if name is None:
        return None
    col = ds.extras.get(f"{name}_train", ds.extras.get(name))
    if col is None:
        return None
    col = np.asarray(col)
    if len(col) == ds.num_train + ds.num_test and len(col) != ds.num_train:
        col = col[: ds.num_train]  # extras laid out as train then test
    if len(col) != ds.num_train:
        raise DataError(f"{ds.name}: extras[{name!r}] has {len(col)} values for {ds.num_train} training samples")
    return np.unique(col, return_inverse=True)[1].astype(np.int64)


@register
class SAP(LlmDriver):
    """Split-and-privatize: customer bottom + dχ privatization, vendor top + LoRA; the vendor sees the labels."""

    name = "sap"
    headline = ("ep_eia", "ep_aia")  # 1 - the vendor's inversion / attribute-inference success
    summary = "split-and-privatize LM fine-tuning: dχ-privatized bottom outputs, LoRA top at the vendor, EIA/AIA"
    Params = SapParams
    bottom_dp_refusal = ("the vendor trains on each sample's dχ-privatized representation (metric DP, not composed "
                         "by the accountant), so a DP-SGD epsilon of the customer's part would not bound what it learns")

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self._uploaded = {"train": False, "eval": False}

    @classmethod
    def validate_config(cls, cfg: RunConfig) -> None:
        super().validate_config(cfg)
        if cfg.params.cti and cfg.params.eta is None:
            raise ConfigError("params.cti", "CTI lowers the dχ noise on some tokens; it needs params.eta")
        if cfg.params.eta == "auto" and cfg.params.split != 0:
            raise ConfigError("params.eta", f"got auto with split {cfg.params.split}; auto calibrates against the "
                              "nearest-neighbour EIA on the embedding table, so it needs split 0 (give a number)")

    def layout(self) -> list[NodeSpec]:
        return [NodeSpec(VENDOR_ID, "server", "vendor", "vendor"), NodeSpec(CUSTOMER_ID, "party", "customer", "customer")]

    def build_node(self, spec: NodeSpec, data: DataSource) -> Node:
        from parties.llm.common.backbone import load_encoder, load_tokenizer
        from parties.llm.sap.split import self_check

        p, t, path = self.params, self.cfg.train, self.model_path()
        priv = Privatizer(eta=p.eta, snap=p.snap, cti=p.cti, cti_fraction=p.cti_fraction, cti_factor=p.cti_factor,
                          cti_smoothing=p.cti_smoothing, eia_target=p.eia_target, santext_epsilon=p.santext_epsilon)
        if spec.is_server:  # the vendor learns the task sizes from the driver at setup, never the data
            arch, encoder = self.model_arch(), load_encoder(path, dtype=p.dtype)
            self_check(encoder, split=p.split, pooling=p.pooling, model_dir=p.model_dir or path)  # or refused
            return SapVendor(spec, encoder=encoder, split=p.split, pooling=arch.check_pooling(p.pooling),
                             lora=self.lora_spec(),
                             make_optimizer=optimizer_factory(t), seed=self.cfg.seed, device=t.device,
                             schedule_lr=partial(schedule_lr, t),
                             attack=AttackBudget(p.eia_samples, p.eia_steps, p.eia_lr, p.eia_temperature,
                                                 aia_epochs=p.aia_finetune_epochs if p.aia_attribute else 0,
                                                 aia_lr=p.aia_finetune_lr, inverter_samples=p.inverter_samples if
                                                 p.eia_samples else 0, inverter_epochs=p.inverter_epochs,
                                                 mechanism=priv),
                             log_bytes=p.log_mb << 20)
        ds = data.dataset()
        return SapCustomer(spec, texts=(ds.x_train, ds.x_test), labels=(ds.y_train, ds.y_test),
                           num_classes=ds.num_classes, tokenizer=load_tokenizer(path), max_len=p.max_len,
                           split=p.split, frozen=p.frozen_bottom, privatizer=priv,
                           schedule=self._schedule(ds.num_train, ds.num_test),
                           make_optimizer=optimizer_factory(t, self.total_steps(ds.num_train)),
                           seed=self.cfg.seed, upload_chunk=p.upload_chunk,
                           attribute=attribute_codes(ds, p.aia_attribute), noise_rng=self.cfg.privacy.noise_rng,
                           device=t.device, pairs=text_pairs(ds), token_types=self.token_types(ds))

    # ---- driver ------------------------------------------------------------------------------
    def prepare(self, data: DataSource) -> None:
        """Check the data is text and the split fits the model; learn the split sizes."""
        from transformers import AutoConfig

        ds = self._text_dataset(data.dataset())
        self.model_arch().check_pooling(self.params.pooling)
        blocks = AutoConfig.from_pretrained(self.model_path(), local_files_only=True).num_hidden_layers
        if self.params.split >= blocks:
            raise ConfigError("params.split", f"got {self.params.split}; the model has {blocks} blocks, "
                              f"allowed: 0..{blocks - 1}")
        if self.params.split == 0 and self.token_types(ds):
            raise ConfigError("params.split", "got 0 with sentence pairs on a model with token types: split 0 "
                              "releases word vectors only and the segment ids would have to cross the wire; "
                              f"allowed: 1..{blocks - 1} (the types enter the customer's bottom)")
        self._sizes = (ds.num_train, ds.num_test, ds.num_classes)

    def setup(self, grid: Grid) -> None:
        n_train, n_test, classes = self._sizes
        sched = self._schedule()
        task = wire.config(num_train=n_train, num_test=n_test, num_classes=classes, batch_size=sched.batch_size,
                           eval_batch_size=sched.eval_batch_size, total_steps=self.total_steps(n_train))
        self._converse(grid, self._control(Kind.INIT, VENDOR_ID, round_tag(-1, -1, "setup"), **{Record.TASK: task}))

    def _step(self, epoch: int, step: int) -> Any:
        return step_config(epoch=epoch, step=step)

    def train_epoch(self, grid: Grid, *, epoch: int, progress: Progress) -> dict[str, float]:
        frozen = self.params.frozen_bottom
        if frozen and not self._uploaded["train"]:
            self._converse(grid, self._control(Kind.TRAIN_UPLOAD, CUSTOMER_ID, round_tag(epoch, 0), **{Record.STEP: self._step(epoch, 0)}))
            self._uploaded["train"] = True
        kind, node = (Kind.TRAIN_STEP, VENDOR_ID) if frozen else (Kind.TRAIN_FORWARD, CUSTOMER_ID)
        for step in range(self.steps_per_epoch()):
            self._converse(grid, self._control(kind, node, round_tag(epoch, step), **{Record.STEP: self._step(epoch, step)}))
            progress(1)
        return {}

    def evaluate(self, grid: Grid, *, epoch: int) -> dict[str, float]:
        frozen = self.params.frozen_bottom
        if frozen and not self._uploaded["eval"]:
            self._converse(grid, self._control(Kind.EVAL_UPLOAD, CUSTOMER_ID, round_tag(epoch, 0, "eval"),
                                               **{Record.STEP: self._step(epoch, 0)}))
            self._uploaded["eval"] = True
        kind, node = (Kind.EVAL_STEP, VENDOR_ID) if frozen else (Kind.EVAL_FORWARD, CUSTOMER_ID)
        for step in range(self._schedule().eval_steps):
            self._converse(grid, self._control(kind, node, round_tag(epoch, step, "eval"), **{Record.STEP: self._step(epoch, step)}))
        return {}  # the customer holds the labels: test_acc comes with epoch_metrics

    def attacks(self, grid: Grid, *, epoch: int) -> dict[str, float]:
        """EIA and AIA by the vendor on what it received, scored against the customer's truth."""
        p = self.params
        out: dict[str, float] = {}
        eia = self._query(grid, Kind.QUERY_EIA, VENDOR_ID, epoch) if p.eia_samples else None
        sample = wire.get_array(eia, Record.EIA, "sample") if eia is not None else np.zeros(0, np.int64)
        ask = np.unique(sample)
        truth = self._query(grid, Kind.QUERY_TRUTH, CUSTOMER_ID, epoch, **{Record.ASK: wire.arrays(ids=ask)})
        get = lambda name: wire.get_array(truth, Record.TRUTH, name)  # noqa: E731
        if eia is not None and len(ask):
            guesses = split_packed(wire.get_array(eia, Record.EIA, "tokens"), wire.get_array(eia, Record.EIA, "lengths"))
            by_sample = [[g for s, g in zip(sample, guesses, strict=True) if s == sid] for sid in ask]
            truth_tokens = split_packed(get("tokens"), get("lengths"))
            rate = token_recovery(predicted=by_sample, truth=truth_tokens, ignore=get("special").tolist())
            out.update(eia_rate=rate, ep_eia=1.0 - rate)
            hits, totals = token_recovery_counts(predicted=by_sample, truth=truth_tokens, ignore=get("special").tolist())
            lo, hi = bootstrap_ci(hits, totals, rng=np.random.default_rng(derive_seed("sap-eia-ci", self.cfg.seed, epoch)))
            out.update(ep_eia_ci_low=1.0 - hi, ep_eia_ci_high=1.0 - lo)  # 95 % bootstrap over the attacked samples
            if wire.has_array(eia, Record.EIA, "tokens_learned"):  # the learned inverter, same observations
                learned = split_packed(wire.get_array(eia, Record.EIA, "tokens_learned"),
                                       wire.get_array(eia, Record.EIA, "lengths"))
                by_sample = [[g for s, g in zip(sample, learned, strict=True) if s == sid] for sid in ask]
                rate = token_recovery(predicted=by_sample, truth=truth_tokens, ignore=get("special").tolist())
                out.update(inverter_rate=rate, ep_inverter=1.0 - rate)
        attr = get("attribute") if wire.has_array(truth, Record.TRUTH, "attribute") else np.zeros(0, np.int64)
        if len(np.unique(attr)) > 1:  # a constant attribute has nothing to infer
            rng = np.random.default_rng(derive_seed("sap-aia", self.cfg.seed, epoch))
            known, _ = split_labeled(n=len(attr), fraction=p.aia_labeled_frac, rng=rng)
            rep = self._query(grid, Kind.QUERY_AIA, VENDOR_ID, epoch,
                              **{Record.AUX: wire.arrays(ids=known.astype(np.int64), values=attr[known])})
            ids, pred = wire.get_array(rep, Record.AIA, "ids"), wire.get_array(rep, Record.AIA, "pred")
            if len(ids):
                correct = (pred == attr[ids]).astype(np.float64)
                acc = float(correct.mean())
                out.update(aia_acc=acc, aia_majority=majority_rate(attr[ids]), ep_aia=1.0 - acc, aia_targets=len(ids))
                for probe in PROBES:  # each probe's reading: linear = the old pooled-only one, length = the confound
                    if wire.has_array(rep, Record.AIA, f"pred_{probe}"):
                        got = wire.get_array(rep, Record.AIA, f"pred_{probe}")
                        out[f"aia_{probe}_acc"] = float((got == attr[ids]).mean())
                if wire.has_array(rep, Record.AIA, "probe"):  # the probe the attacker chose (index in PROBES)
                    out["aia_probe"] = int(wire.get_array(rep, Record.AIA, "probe")[0])
                lo, hi = bootstrap_ci(correct, rng=np.random.default_rng(derive_seed("sap-aia-ci", self.cfg.seed, epoch)))
                out.update(ep_aia_ci_low=1.0 - hi, ep_aia_ci_high=1.0 - lo)
        return out

    def epoch_metrics(self, grid: Grid, *, epoch: int) -> dict[str, float]:
        out: dict[str, Any] = self._metrics(grid, CUSTOMER_ID, epoch, kind=Kind.QUERY_METRICS, record=Record.METRICS)
        eta = out.pop("eta_used", None)  # the η the customer released with (eta auto: the calibrated one)
        out.update(eta=eta if self.params.eta == "auto" else self.params.eta, split=self.params.split)
        if self.params.eta == "auto" and eta is not None and "eta_used" not in self._last:
            out["eta_used"] = eta
            get_logger(__name__).warning("sap: params.eta auto -> η = %.4g (nearest-neighbour EIA success %.3f on a "
                                         "public sample of the embedding table; target %g)", eta,
                                         out.get("eta_calibrated_eia", float("nan")), self.params.eia_target)
        every = self.params.attack_every
        if epoch == self.cfg.train.epochs - 1 or (every and (epoch + 1) % every == 0):
            out.update(self.attacks(grid, epoch=epoch))
        self._last.update(out)
        return out

    def summary_extra(self, grid: Grid) -> dict[str, Any]:
        p = self.params
        keys = ("test_acc", "test_f1", "test_mcc", "ep_eia", "ep_aia", "eia_rate", "aia_acc", "aia_majority",
                "cti_tokens", "ep_eia_ci_low", "ep_eia_ci_high", "ep_aia_ci_low", "ep_aia_ci_high", "aia_linear_acc",
                "aia_length_acc", "aia_mlp_acc", "aia_linear_length_acc", "aia_probe", "aia_targets",
                "aia_transformer_acc", "inverter_rate", "ep_inverter", "eta_used", "eta_calibrated_eia",
                "santext_changed")
        probe = self._last.get("aia_probe")
        santext = {} if p.santext_epsilon is None else {  # metric LDP per token: its own ε, not the accountant's
            "santext_epsilon": p.santext_epsilon, "santext_epsilon_scope": "per token, metric LDP: "
            "P(y|x)/P(y|x') <= exp(ε·‖e_x − e_x'‖) on the embedding table",
            "santext_epsilon_is_guarantee": self.cfg.privacy.noise_rng == "crypto"}
        eta = self._last.get("eta_used") if p.eta == "auto" else p.eta
        return {**{k: self._last.get(k) for k in keys}, "eta": eta, "split": p.split,
                "aia_probe_name": PROBES[int(probe)] if probe is not None and probe >= 0 else None,
                "frozen_bottom": p.frozen_bottom, "cti": p.cti, "eia_target": p.eia_target if p.eta == "auto" else None,
                **santext}
