"""``ushape-lora``: causal-LM instruction tuning over a U-shaped split (head–body–tail).

The client (data holder) keeps the embeddings and the first ``split`` blocks (head) and the last
``tail_blocks`` blocks, the final norm and the LM head (tail), each with LoRA; the model server runs
the middle blocks with LoRA. Token ids, logits and labels (the response tokens) never leave the
client (``parties/llm/ushape/wire.py``). With ``params.eta`` the head's output is ηdχ-privatized
before it leaves (SAP's release, without SAP's label exposure: the loss is the client's). Metrics:
the response tokens' loss and perplexity (train, held out) and the ROUGE-L of greedy answers to the
first ``gen_samples`` test prompts, decoded through the split (``vfl generate`` does it from a run).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from parties.llm.ushape.wire import CLIENT_ID, SERVER_ID, Kind, Record, step_config
from strategies.base.llm import LlmDriver, optimizer_factory, schedule_lr
from strategies.base.llm_params import LoraParams
from vfl.config.fields import param
from vfl.core.errors import ConfigError, DataError
from vfl.data.dataset import Dataset, DataSource
from vfl.engine.schema import RunConfig
from vfl.engine.strategy import Progress, register
from vfl.runtime import message as wire
from vfl.runtime.grid import Grid
from vfl.runtime.message import round_tag
from vfl.runtime.node import Node, NodeSpec

RESPONSE = "response"  # Dataset.extras key of the responses (train/test suffixed): simulations/data/jsonl.py


@dataclass(frozen=True)
class UShapeParams(LoraParams):
    model_dir: str | None = param(None, help="local Hugging Face causal LM directory (Llama, Mistral, Qwen, GPT-2 ...); "
                                  "required (build a tiny Llama with `vfl tiny-lm llama DIR`)")
    max_len: int = param(64, ge=4, le=131072, help="tokens per prompt + response (truncation cuts the response)")
    split: int = param(1, ge=0, le=255, help="blocks in the client's head (after the embeddings); 0 = embeddings only")
    tail_blocks: int = param(1, ge=0, le=255, help="last blocks in the client's tail (before the final norm and "
                             "the LM head)")
    eta: float | None = param(None, gt=0, help="dχ privacy parameter η of the head's output (SAP's release, noise "
                              "density ∝ exp(−η‖n‖), E‖n‖ = d/η); null = released as computed")
    gen_samples: int = param(8, ge=0, le=4096, help="test prompts answered greedily through the split after each "
                             "evaluation (ROUGE-L against their responses); 0 = no generation")
    max_new_tokens: int = param(24, ge=1, le=4096, help="tokens generated per answer at most (stops at eos)")


@register
class UShapeLora(LlmDriver):
    """U-shaped split LoRA of a causal LM: the client holds head, tail, LM head and labels."""

    name = "ushape-lora"
    headline = ("test_ppl", "rouge_l")  # a causal LM's result: held-out perplexity, ROUGE-L of the generations
    step_checkpoints = True  # train.checkpoint_every_steps: the client's state holds the epoch's loss sums
    summary = ("causal-LM instruction tuning over a U-shaped split (head + tail + LM head with the client, body "
               "with LoRA on the model server; optional dχ on the head's output); perplexity, ROUGE-L, generation")
    Params = UShapeParams
    bottom_dp_refusal = "DP-SGD of the client's adapters is not wired for the U-shaped split"

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self._samples: dict[str, list[str]] = {}

    @classmethod
    def validate_config(cls, cfg: RunConfig) -> None:
        super().validate_config(cfg)
        if not cfg.params.model_dir:
            raise ConfigError("params.model_dir", "required: a local causal LM directory (build a tiny Llama with "
                              "`vfl tiny-lm llama DIR`)")

    # ---- the model and its parts --------------------------------------------------------------
    def layout(self) -> list[NodeSpec]:
        return [NodeSpec(SERVER_ID, "server", "server", "server"), NodeSpec(CLIENT_ID, "party", "client", "client")]

    def build_node(self, spec: NodeSpec, data: DataSource) -> Node:
        from parties.llm.ushape.build import build_parts

        p, t = self.params, self.cfg.train
        head, body, tail = build_parts(self.model_path(), dtype=p.dtype, split=p.split, tail=p.tail_blocks,
                                       lora=self.lora_spec(), seed=self.cfg.seed,
                                       check=p.model_dir or self.model_path())
        if spec.is_server:  # the server gets the body only: never the data, the head, the tail or the labels
            from parties.llm.ushape.server import BodyServer

            return BodyServer(spec, body=body, device=t.device, make_optimizer=optimizer_factory(t),
                              schedule_lr=partial(schedule_lr, t))
        return self._client(spec, data.dataset(), head, tail)

    def _client(self, spec: NodeSpec, ds: Dataset, head: Any, tail: Any, **private: Any) -> Node:
        """The data holder's node (``private``: the body's adapters, the servers and the pieces' noise of
        ``ushape-p3eft``, whose client is ``PiecesClient``)."""
        from transformers import AutoConfig

        from parties.llm.common.backbone import load_tokenizer
        from parties.llm.common.tokens import max_positions
        from parties.llm.ushape.client import Samples, UClient
        from parties.llm.ushape.instruct import IGNORE, encode_instructions, prompt_ids

        p, t = self.params, self.cfg.train
        self._sizes = (ds.num_train, ds.num_test, ds.num_classes)
        tok = load_tokenizer(self.model_path())
        resp = responses(ds)
        rows = (encode_instructions(tok, ds.x_train, resp[0], max_len=p.max_len),
                encode_instructions(tok, ds.x_test, resp[1], max_len=p.max_len))
        if not (rows[0].labels != IGNORE).any():  # every response cut off: the run would train on nothing
            raise ConfigError("params.max_len", f"{p.max_len} tokens leave no response token in any training row "
                              f"(the prompts take up to {int(rows[0].prompt_lengths.max())} tokens): raise it")
        n = min(p.gen_samples, ds.num_test)
        samples = Samples(prompt_ids=[prompt_ids(tok, str(x))[: p.max_len] for x in ds.x_test[:n]],
                          prompts=[str(x) for x in ds.x_test[:n]], references=[str(r) for r in resp[1][:n]],
                          max_new=p.max_new_tokens,
                          positions=max_positions(AutoConfig.from_pretrained(self.model_path(), local_files_only=True)))
        kw = dict(rows=rows, head=head, tail=tail, tokenizer=tok, schedule=self._schedule(),
                  make_optimizer=optimizer_factory(t, self.total_steps(ds.num_train)), samples=samples,
                  eta=p.eta, noise_rng=self.cfg.privacy.noise_rng, seed=self.cfg.seed, device=t.device)
        if private:
            from parties.llm.ushape.private import PiecesClient

            return PiecesClient(spec, **private, **kw)
        return UClient(spec, **kw)

    def prepare(self, data: DataSource) -> None:
        """Instruction data (prompts with responses), a causal LM, and a cut that leaves the server a block."""
        from transformers import AutoConfig

        from parties.llm.ushape.parts import check_cut

        ds = self._text_dataset(data.dataset())
        responses(ds)
        if not self.model_arch().causal:
            raise ConfigError("params.model_dir", f"{self.model_path()} is not a decoder; {self.name} needs a causal LM")
        cfg = AutoConfig.from_pretrained(self.model_path(), local_files_only=True)
        check_cut(num_blocks=int(cfg.num_hidden_layers), split=self.params.split, tail=self.params.tail_blocks)
        self._sizes = (ds.num_train, ds.num_test, ds.num_classes)

    # ---- the driver -----------------------------------------------------------------------------
    def setup(self, grid: Grid) -> None:
        task = wire.config(total_steps=self.total_steps(self._sizes[0]))
        self._converse(grid, self._control(Kind.INIT, SERVER_ID, round_tag(-1, -1, "setup"), **{Record.TASK: task}))

    def _step(self, grid: Grid, kind: str, tag: str, epoch: int, step: int, hops: int = 16) -> None:
        self._converse(grid, self._control(kind, CLIENT_ID, tag, **{Record.STEP: step_config(epoch=epoch, step=step)}),
                       max_hops=hops)

    def _client_metrics(self, grid: Grid, epoch: int, phase: str) -> dict[str, Any]:
        return self._metrics(grid, CLIENT_ID, epoch, kind=Kind.QUERY_METRICS, record=Record.METRICS,
                             **{Record.WHICH: wire.config(phase=phase)})

    def train_epoch(self, grid: Grid, *, epoch: int, progress: Progress) -> dict[str, float]:
        for step in self.epoch_steps(epoch):
            self._step(grid, Kind.TRAIN_STEP, round_tag(epoch, step), epoch, step)
            progress(1)
        m = self._client_metrics(grid, epoch, "train")
        return {"train_loss": m["loss"], "train_ppl": m["ppl"], "step_loss": m.get("step_loss", [])}

    def evaluate(self, grid: Grid, *, epoch: int) -> dict[str, float]:
        for step in range(self._schedule().eval_steps):
            self._step(grid, Kind.EVAL_STEP, round_tag(epoch, step, "eval"), epoch, step)
        p = self.params
        if p.gen_samples:  # one hop up and one down per generated token
            self._step(grid, Kind.GENERATE, round_tag(epoch, 0, "eval"), epoch, 0, hops=2 * p.max_new_tokens + 4)
        m = self._client_metrics(grid, epoch, "eval")
        out = {"test_loss": m["loss"], "test_ppl": m["ppl"]}
        if "rouge_l" in m:
            out["rouge_l"] = m["rouge_l"]
            rep = self._query(grid, Kind.QUERY_SAMPLES, CLIENT_ID, epoch)
            self._samples = {k: wire.config_list(rep.content.config_records[Record.SAMPLES], k)
                             for k in ("prompts", "references", "generations")}
        self._last.update(out)
        return out

    def summary_extra(self, grid: Grid) -> dict[str, Any]:
        steps = max(1, self.steps_per_epoch() * self.cfg.train.epochs)
        per_step = {k: {"direction": v["direction"], "bytes": v["bytes"] / steps, "messages": v["messages"] / steps}
                    for k, v in sorted(grid.ledger.by_kind.items()) if k.startswith("train.")}
        samples = [{"prompt": q, "reference": r, "generation": g} for q, r, g in
                   zip(self._samples.get("prompts", []), self._samples.get("references", []),
                       self._samples.get("generations", []), strict=False)]
        return {"test_loss": self._last.get("test_loss"), "test_ppl": self._last.get("test_ppl"),
                "rouge_l": self._last.get("rouge_l"), "split": self.params.split,
                "tail_blocks": self.params.tail_blocks, "eta": self.params.eta, "samples": samples,
                "train_bytes_per_step": per_step}


@dataclass(frozen=True)
class UShapeP3eftParams(UShapeParams):
    servers: int = param(2, ge=2, le=16, help="model servers m, assumed not to collude: each gets one piece of "
                         "dLoss/d(body output) and runs the body with the client's adapters")
    grad_noise: float = param(30.0, gt=0, le=1e4, help="std of the random pieces / the running rms of "
                              "dLoss/d(body output)")
    theta_noise: float = param(0.0, ge=0, le=10, help="std σ of fresh Gaussian noise on every body adapter "
                               "tensor sent in training (the θ-difference attack reads the update otherwise)")


@register
class UShapeP3eft(UShapeLora):
    """``ushape-lora`` with P3EFT's private backprop: the body's adapters are the client's, and the
    gradient of the client's loss reaches the model servers only as random-looking pieces."""

    name = "ushape-p3eft"
    summary = ("ushape-lora with P3EFT's private backprop: dLoss/d(body output) split into one random piece per "
               "model server (m >= 2, not colluding); the client owns and steps the body's adapters")
    Params = UShapeP3eftParams

    def server_ids(self) -> list[int]:
        """SERVER_ID first (it answers the forwards), then ids after the client's."""
        return [SERVER_ID, *range(CLIENT_ID + 1, CLIENT_ID + self.params.servers)]

    def layout(self) -> list[NodeSpec]:
        return [NodeSpec(sid, "server", f"server{i}", f"server{i}") for i, sid in enumerate(self.server_ids())] + [
            NodeSpec(CLIENT_ID, "party", "client", "client")]

    def summary_extra(self, grid: Grid) -> dict[str, Any]:
        p = self.params
        return {**super().summary_extra(grid), "servers": p.servers, "grad_noise": p.grad_noise,
                "theta_noise": p.theta_noise}

    def build_node(self, spec: NodeSpec, data: DataSource) -> Node:
        from parties.llm.ushape.build import build_parts
        from parties.llm.ushape.private import PieceServer, body_adapters

        p, t = self.params, self.cfg.train
        head, body, tail = build_parts(self.model_path(), dtype=p.dtype, split=p.split, tail=p.tail_blocks,
                                       lora=self.lora_spec(), seed=self.cfg.seed,
                                       check=p.model_dir or self.model_path())
        if spec.is_server:
            return PieceServer(spec, body=body, answers_forward=spec.node_id == SERVER_ID, device=t.device)
        return self._client(spec, data.dataset(), head, tail, body_lora=body_adapters(body),
                            servers=self.server_ids(), grad_noise=p.grad_noise,
                            theta_noise=p.theta_noise)


def responses(ds: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """The responses of an instruction dataset (``extras['response_train' / 'response_test']``)."""
    tr, te = ds.extras.get(f"{RESPONSE}_train"), ds.extras.get(f"{RESPONSE}_test")
    if tr is None or te is None:
        raise DataError(f"{ds.name}: no responses (extras['{RESPONSE}_train' / '_test']); ushape-lora needs "
                        "instruction data: dataset tiny-instruct, or instruct-jsonl with prompt/response lines")
    if len(tr) != ds.num_train or len(te) != ds.num_test:
        raise DataError(f"{ds.name}: {len(tr)}/{len(te)} responses for {ds.num_train}/{ds.num_test} prompts")
    return np.asarray(tr, dtype=object), np.asarray(te, dtype=object)


def generate_from_run(run_dir: str, prompts: list[str], *, max_new: int | None = None) -> list[str]:
    """Greedy answers to ``prompts`` from a ``ushape-lora`` run directory's newest checkpoint: the three
    parts rebuilt from ``params.model_dir`` with the client's and the server's trained adapters, in one
    process (the one party holding both checkpoints: the experimenter's view)."""
    from parties.llm.common.backbone import load_tokenizer
    from parties.llm.common.tokens import max_positions
    from parties.llm.ushape.build import build_parts
    from parties.llm.ushape.client import load_parts
    from parties.llm.ushape.generate import generate
    from parties.llm.ushape.instruct import prompt_ids
    from vfl.engine.rundir import RunDir
    from vfl.engine.schema import load_run_config
    from vfl.runtime.node import state_from_bytes

    rd = RunDir(run_dir)
    cfg = load_run_config(rd.read_config(key="RUN_DIR"))
    if cfg.strategy not in (UShapeLora.name, UShapeP3eft.name):
        raise ConfigError("RUN_DIR", f"{run_dir} is a {cfg.strategy} run; generation needs a {UShapeLora.name} or "
                          f"{UShapeP3eft.name} run")
    ckpt = rd.load_checkpoint()
    if ckpt is None or not {CLIENT_ID, SERVER_ID} <= set(ckpt.nodes):
        raise ConfigError("RUN_DIR", f"{run_dir} has no checkpoint with both nodes' adapters (did its first epoch end?)")
    states = {nid: state_from_bytes(ckpt.nodes[nid]) for nid in (CLIENT_ID, SERVER_ID)}
    strat, p = UShapeLora(cfg), cfg.params
    head, body, tail = build_parts(strat.model_path(), dtype=p.dtype, split=p.split, tail=p.tail_blocks,
                                   lora=strat.lora_spec(), seed=cfg.seed)
    client_lora = states[CLIENT_ID]["lora"]
    load_parts(head=head, tail=tail, lora=client_lora)
    own = {k[len("body."):]: v for k, v in client_lora.items() if k.startswith("body.")}  # ushape-p3eft's
    body.load_state_dict(own or states[SERVER_ID]["lora"], strict=False)
    for part in (head, body, tail):
        part.eval()
    tok = load_tokenizer(strat.model_path())
    positions = max_positions(head.config)
    asked = [prompt_ids(tok, q) for q in prompts]
    if positions is not None and any(len(a) > positions for a in asked):
        raise ConfigError("--prompt", f"a prompt has more tokens than the model's {positions} positions")
    out = generate(head=head, body=body, tail=tail, prompts=asked, eos=tok.eos_token_id, pad=tok.pad_token_id,
                   max_new=max_new or p.max_new_tokens, positions=positions)
    return [tok.decode(t, skip_special_tokens=True).strip() for t in out]
