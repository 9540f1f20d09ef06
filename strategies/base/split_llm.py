"""The shared driver of split fine-tuning over a model-server API (P3EFT: Zmushko et al., "Label Privacy
in Split Learning for Large Models with Parameter-Efficient Training", ICLR 2025), and its baselines.

One client (party) holds texts, labels and the head; S model servers hold the frozen
model and answer stateless forward/backprop calls for adapters sent with each call. Baselines
of P3EFT's Table 1: ``head-only`` (frozen features + head), ``split-lora`` (Regular FT: one LoRA,
plain backprop), ``dcor`` (+ λ·log dCor²(h, y)), ``pslf`` (randomized-response labels). After each
epoch the driver drains every server's message log and scores the label leakage of what that
server saw (activations and gradients) against the true labels: the experimenter's view.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import numpy as np

from parties.llm.common.quantization import QUANTIZATIONS, check_quantization
from parties.llm.p3eft.client import Recipe
from parties.llm.p3eft.wire import Kind, Record, StepTag, step_record
from strategies.base.llm import optimizer_factory, text_pairs
from strategies.base.llm_dp import DpLoraDriver
from strategies.base.llm_leak import LeakTracker
from strategies.base.llm_params import LoraParams, ModelParams
from vfl.config.fields import param
from vfl.core.errors import ProtocolError
from vfl.data.dataset import DataSource
from vfl.engine.progress import Phase, announce
from vfl.engine.schema import RunConfig
from vfl.engine.strategy import Progress
from vfl.runtime import message as wire
from vfl.runtime.grid import Grid
from vfl.runtime.message import round_tag
from vfl.runtime.node import Node, NodeSpec


@dataclass(frozen=True)
class LlmParams(ModelParams):
    servers: int = param(1, ge=1, le=8, help="model servers, each hosting the same frozen model")
    pooling: str | None = param(None, choices=("mean", "cls", "last"), help="h(x, θ): mean of the last hidden "
                                "states over real tokens, the first ([CLS]) or the last real token's state; "
                                "null = the model's default (encoder: mean, decoder: last)")
    head_hidden: int = param(0, ge=0, le=4096, help="client head: 0 = linear, else one hidden ReLU layer")
    t5_stack: str = param("encoder", choices=("encoder", "encoder-decoder"), help="T5-family models only: "
                          "'encoder' = T5's encoder alone; 'encoder-decoder' = the whole T5 with LoRA in both "
                          "stacks, h = the decoder's states on the text shifted right (P3EFT's Flan-T5: "
                          "T5ForSequenceClassification's vector with pooling last, the default then)")
    micro_batch: int = param(0, ge=0, help="rows per forward/backward pass on the model servers (0 = the whole "
                             "batch): bounds their activation memory; exact (examples are independent)")
    gradient_checkpointing: bool = param(False, help="model servers keep only each transformer block's input "
                                         "and re-run the block in the backward (activation memory of one block "
                                         "instead of all; one extra forward per backprop call); exact")
    leak_window: int = param(512, ge=16, help="rows per window of the leak metrics (per epoch: max over windows)")
    quantization: str = param("none", choices=QUANTIZATIONS, help="frozen weights on the model servers: none = "
                              "params.dtype; nf4 = 4-bit NormalFloat (QLoRA: bitsandbytes, CUDA only, matmuls in "
                              "params.dtype, backprop in float32)")


@dataclass(frozen=True)
class SplitLoraParams(LoraParams, LlmParams):
    leak_theta_steps: int = param(2, ge=0, le=100_000, help="pairs of successive adapter states each model server "
                                  "attacks per epoch and adapter set (θ-difference attack: leak_theta); 0 = off")
    leak_theta_iters: int = param(60, ge=1, le=10_000, help="least-squares (CGLS) iterations of that attack")
    resend_adapters: bool = param(False, help="send every adapter set whole with every request (the old wire); "
                                  "false = a server gets only the adapter tensors changed since it last received "
                                  "that set (it keeps its last copy; same results, fewer bytes)")


class SplitLlm(DpLoraDriver):  # privacy.bottom_dp: DP-SGD of the client's adapters + head (strategies/base/llm_dp.py)
    """Shared driver of the split-LLM strategies; subclasses give the client's ``Recipe``."""

    Params: ClassVar[type] = LlmParams
    headline: ClassVar[tuple[str, ...]] = ("leak", "leak_partial")  # the worst label leakage any server's view
    # allowed, and which attack was off when it is partial
    step_checkpoints = True  # train.checkpoint_every_steps: the nodes' states hold the epoch's sums and logs

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self._steps_run = 0
        self._step_times: list[float] = []
        self._busy: dict[int, float] = {}
        self._leak: LeakTracker | None = None

    @classmethod
    def validate_config(cls, cfg: RunConfig) -> None:
        super().validate_config(cfg)
        check_quantization(cfg.params.quantization, device=cfg.train.device, machine=False)

    # ---- what varies between algorithms -------------------------------------------------------
    def recipe(self) -> Recipe:
        raise NotImplementedError

    def curious(self) -> Any:
        """The attacks every model server runs on what it keeps (``parties.llm.p3eft.curious.Curious``), with
        the client's optimizer as public knowledge; None for head-only (no adapters)."""
        from parties.llm.p3eft.curious import Curious, OptimizerGuess

        p, t = self.params, self.cfg.train
        if not hasattr(p, "leak_theta_steps") or self.recipe().adapters == 0:
            return None
        return Curious(OptimizerGuess(t.optimizer, t.lr, t.momentum, t.weight_decay), steps=p.leak_theta_steps,
                       iters=p.leak_theta_iters, steps_per_epoch=self.steps_per_epoch())

    # ---- topology ---------------------------------------------------------------------------
    @property
    def client_id(self) -> int:
        return int(self.params.servers)

    def layout(self) -> list[NodeSpec]:
        servers = [NodeSpec(s, "server", f"server-{s}", f"server-{s}") for s in range(self.params.servers)]
        return [*servers, NodeSpec(self.client_id, "party", "client", "client")]

    def build_node(self, spec: NodeSpec, data: DataSource) -> Node:
        from transformers import AutoConfig

        from parties.llm.common.backbone import load_encoder, load_tokenizer
        from parties.llm.p3eft.adapters import LoraEncoder, adapter_shapes
        from parties.llm.p3eft.server import ModelServer

        p, t, lora, path = self.params, self.cfg.train, self.lora_spec(), self.model_path()
        if spec.is_server:  # the server gets the model only: never the data or the labels
            pooling = self.model_arch().check_pooling(p.pooling)
            encoder = load_encoder(path, dtype=p.dtype, stack=p.t5_stack, quantization=p.quantization, device=t.device)
            model = LoraEncoder(encoder, lora, pooling=pooling, device=t.device, micro_batch=p.micro_batch,
                                checkpointing=p.gradient_checkpointing)
            model.self_check(model_dir=p.model_dir or path, what=f"{self.name}'s model server")  # or refused
            return ModelServer(spec, model=model, curious=self.curious())
        ds = data.dataset()
        model_cfg = AutoConfig.from_pretrained(path, local_files_only=True)
        self._sizes = (ds.num_train, ds.num_test, ds.num_classes)
        client_cls, dp_kwargs = self.client_class()  # LlmClient, or DpLlmClient with privacy.bottom_dp
        return client_cls(spec, texts=(ds.x_train, ds.x_test), labels=(ds.y_train, ds.y_test), **dp_kwargs,
                         num_classes=ds.num_classes, tokenizer=load_tokenizer(path), max_len=p.max_len,
                         shapes=adapter_shapes(model_cfg, lora, stack=p.t5_stack) if lora else {}, dim=self.model_arch().output_size(model_cfg),
                         recipe=self.recipe(), schedule=self._schedule(), server_ids=list(range(p.servers)),
                         make_optimizer=optimizer_factory(t, self.total_steps(ds.num_train)),
                         head_hidden=p.head_hidden, seed=self.cfg.seed,
                         noise_rng=self.cfg.privacy.noise_rng, pairs=text_pairs(ds), token_types=self.token_types(ds),
                         resend_adapters=bool(getattr(p, "resend_adapters", False)))

    def prepare(self, data: DataSource) -> None:
        """Text data only; the model must load and the pooling and LoRA targets fit it; keep the true
        labels for scoring."""
        from transformers import AutoConfig

        from parties.llm.p3eft.adapters import adapter_shapes

        ds = self._text_dataset(data.dataset())
        check_quantization(self.params.quantization, device=self.cfg.train.device,
                           machine=not self.cfg.transport.address)  # a cluster's hosts check at load
        self.model_arch().check_pooling(self.params.pooling)
        lora = self.lora_spec()
        if lora is not None:
            adapter_shapes(AutoConfig.from_pretrained(self.model_path(), local_files_only=True), lora,
                           stack=self.params.t5_stack)
        self._sizes = (ds.num_train, ds.num_test, ds.num_classes)
        self._leak = LeakTracker(y_train=np.asarray(ds.y_train), schedule=self._schedule(),
                                 window=self.params.leak_window, seed=self.cfg.seed)

    # ---- conversations ----------------------------------------------------------------------
    def _client_metrics(self, grid: Grid, epoch: int, phase: str) -> dict[str, Any]:
        return self._metrics(grid, self.client_id, epoch, kind=Kind.QUERY_METRICS, record=Record.METRICS,
                             **{Record.WHICH: wire.config(phase=phase)})

    # ---- driver round logic -----------------------------------------------------------------
    def driver_state(self) -> dict[str, Any]:
        return {"steps_run": self._steps_run, "step_times": list(self._step_times),
                "busy": {str(k): v for k, v in self._busy.items()}, "leak": self._leak.state() if self._leak else {}}

    def load_driver_state(self, state: dict[str, Any]) -> None:
        self._steps_run = int(state.get("steps_run", 0))
        self._step_times = [float(t) for t in state.get("step_times", [])]
        self._busy = {int(k): float(v) for k, v in (state.get("busy") or {}).items()}
        if self._leak is not None and state.get("leak"):
            self._leak.load_state(state["leak"])

    def train_epoch(self, grid: Grid, *, epoch: int, progress: Progress) -> dict[str, Any]:
        steps = self.epoch_steps(epoch)
        if steps.start == 0:
            self._step_times = []
        for step in steps:
            t0 = time.perf_counter()
            self._converse(grid, self._control(Kind.TRAIN_STEP, self.client_id, round_tag(epoch, step),
                                               **{Record.STEP: step_record(StepTag(epoch, step))}))
            self._step_times.append(time.perf_counter() - t0)
            self._steps_run += 1
            progress(1)
        m = self._client_metrics(grid, epoch, "train")
        return {"train_loss": m["loss"], "train_acc": m["acc"], "step_loss": m.get("step_loss", [])}

    def evaluate(self, grid: Grid, *, epoch: int) -> dict[str, float]:
        eval_steps = self._schedule().eval_steps
        for step in range(eval_steps):
            self._converse(grid, self._control(Kind.EVAL_STEP, self.client_id, round_tag(epoch, step, "eval"),
                                               **{Record.STEP: step_record(StepTag(epoch, step))}))
        m = self._client_metrics(grid, epoch, "eval")
        self._last.update(test_acc=m["acc"], test_f1=m["f1"], test_mcc=m["mcc"])
        return {"test_acc": m["acc"], "test_loss": m["loss"], "test_f1": m["f1"], "test_mcc": m["mcc"]}

    def partial_leak(self) -> str | None:
        """Why the ``leak`` headline misses an attack the run could have played (None: it has every one):
        ``params.leak_theta_steps: 0`` switches the θ-difference attack off, the strongest on P3EFT."""
        p = self.params
        if getattr(p, "leak_theta_steps", None) == 0 and self.recipe().adapters:
            return "no leak_theta (params.leak_theta_steps=0): the theta-difference attack was not played"
        return None

    def epoch_metrics(self, grid: Grid, *, epoch: int) -> dict[str, Any]:
        """Leakage of what each server saw this epoch, and step timing (measured and parallel-server). The
        scoring (each server's attacks at ``query.log``, then the driver's probes) says what it runs and
        what it cost beside the epoch's training (``leak_scoring_s``)."""
        if self._leak is None:
            raise ProtocolError("epoch_metrics before prepare(): no labels to score the leakage with")
        p, busy, t0 = self.params, [], time.perf_counter()
        theta = getattr(p, "leak_theta_steps", 0) if self.recipe().adapters else 0
        what = (f"θ-difference attack on {theta} adapter-state pair(s) per adapter set, {p.leak_theta_iters} CGLS "
                "iterations each, then " if theta else "") + "the label probes"
        for s in range(p.servers):
            with Phase(f"epoch {epoch + 1}: leak scoring, server {s + 1}/{p.servers} ({what})"):
                rep = self._query(grid, Kind.QUERY_LOG, s, epoch)
                self._leak.observe(server=s, log=partial(wire.get_array, rep, Record.LOG))
            total = wire.metric_floats(rep.content.metric_records[Record.STATS])["busy_train_s"]
            busy.append(total - self._busy.get(s, 0.0))
            self._busy[s] = total
        out: dict[str, Any] = dict(self._leak.epoch_summary())
        steps = max(1, len(self._step_times))
        step_s = float(np.mean(self._step_times)) if self._step_times else math.nan
        train_s, scoring_s = float(sum(self._step_times)), time.perf_counter() - t0
        out.update(step_s=step_s, server_s_per_step=sum(busy) / steps,
                   step_s_parallel=step_s - (sum(busy) - max(busy, default=0.0)) / steps, leak_scoring_s=scoring_s)
        if scoring_s >= 3.0:
            cut = ("params.leak_theta_steps / leak_theta_iters set the θ-difference attack's share (0 steps: off)"
                   if theta else "params.leak_window sets the probes' windows")
            announce(f"epoch {epoch + 1}: leak scoring took {scoring_s:.0f} s, {scoring_s / max(train_s, 1e-9):.1f}× "
                     f"the epoch's {train_s:.0f} s of training steps; {cut}")
        if (why := self.partial_leak()) is not None:
            out["leak_partial"] = why
        self._last.update(out)
        return out

    def summary_extra(self, grid: Grid) -> dict[str, Any]:
        steps = max(1, self._steps_run)
        per_step = {k: {"direction": v["direction"], "bytes": v["bytes"] / steps, "messages": v["messages"] / steps}
                    for k, v in sorted(grid.ledger.by_kind.items()) if k.startswith("train.")}
        worst = self._leak.worst() if self._leak else {}
        if (why := self.partial_leak()) is not None:
            worst["leak_partial"] = why
        return {"test_acc": self._last.get("test_acc"), "test_f1": self._last.get("test_f1"),
                "test_mcc": self._last.get("test_mcc"), **worst,
                "step_s": self._last.get("step_s"), "step_s_parallel": self._last.get("step_s_parallel"),
                "servers": self.params.servers,
                "train_bytes_per_step": per_step}
