"""What splitting costs per training step: a split-LLM strategy run in-process (every node, every message)
against the same model fine-tuned with peft LoRA in one process, on the same batches, in one process.

    python -m simulations.benchmarks.split_cost --out DIR [--steps 12] [--repeats 3] [--llama-blocks 4]

Rows (``DIR/split_cost.json``, also printed as a table): ``strategy``, ``model``, ``split_s_per_step`` (the
median step of the run, the first step left out as warm-up; timed by the engine's ``on_step``),
``single_s_per_step`` (the median step of the one-process trainer: the model with peft LoRA on the same
targets and rank, in eval mode as the model servers run it, the same head or the model's own LM loss, AdamW,
on the batches the run's client drew), ``ratio`` (their quotient; the median over ``--repeats`` rounds,
each round timing both sides one after the other) and the rounds' ratios. Models: the packaged MiniLM
(``split-lora``, ``p3eft``), a random d = 512 Llama (every strategy: ``--llama-blocks`` blocks, width 512,
8 heads, saved with the tiny models' byte-level tokenizer) and the tiny Llama of ``vfl tiny-lm``
(``ushape-lora``, ``ushape-p3eft``). ``p3eft`` runs two adapter sets and two pieces per step: its row is
beside the others, not held to the same goal. ``--rows split-lora+fresh:minilm`` times the model server
without its kept graph (two forwards per step, as before), the control. One torch thread throughout (the machine may be shared:
the ratios, taken within a round, are what to read).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

import strategies  # noqa: F401  (declares the strategies the rows run)

# (strategy, model): the rows of the default run
ROWS = (("split-lora", "minilm"), ("p3eft", "minilm"), ("split-lora", "llama512"), ("p3eft", "llama512"),
        ("ushape-lora", "tiny-llama"), ("ushape-lora", "llama512"), ("ushape-p3eft", "llama512"))
CAUSAL = ("ushape-lora", "ushape-p3eft")


def llama512(root: Path, *, blocks: int) -> str:
    """A random Llama of width 512 (8 heads, MLP 1,376) with the tiny models' byte-level tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from parties.llm.common.tiny import EOT, byte_tokenizer

    tok = byte_tokenizer()
    eot = tok.convert_tokens_to_ids(EOT)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=512, intermediate_size=1376, num_hidden_layers=blocks,
                      num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=128,
                      bos_token_id=eot, eos_token_id=eot)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        LlamaForCausalLM(cfg).save_pretrained(root)
    tok.save_pretrained(root)
    return str(root)


def run_config(strategy: str, model_dir: str | None, *, steps: int, batch: int) -> dict[str, Any]:
    """The run's config: ``steps`` training steps of ``batch`` texts, a small evaluation, no attacks."""
    causal = strategy in CAUSAL
    params: dict[str, Any] = {"model_dir": model_dir, "lora_rank": 8, "max_len": 40 if causal else 32}
    if causal:
        params.update(gen_samples=0, lora_targets=["all-linear"])
    else:
        params.update(leak_theta_steps=0, servers=2 if strategy == "p3eft" else 1)
    return {"name": f"split-cost-{strategy}", "strategy": strategy, "num_parties": 1, "seed": 0,
            "dataset": "tiny-instruct" if causal else "rt-polarity",
            "data": {"train_subsample": steps * batch, "test_subsample": 8},
            "train": {"epochs": 1, "batch_size": batch, "optimizer": "adamw", "lr": 1e-3, "threads_per_actor": 1,
                      "driver_threads": 1},
            "params": params}


def split_steps(cfg: Any) -> tuple[list[float], Any]:
    """Seconds of each training step of ``cfg`` run in-process, and the run's client node."""
    from simulations.data.source import ConfigDataSource
    from vfl.engine.engine import Engine
    from vfl.runtime.transport.inprocess import InProcessTransport

    stamps: list[float] = []
    engine = Engine(cfg, InProcessTransport(), ConfigDataSource.from_config(cfg), progress=False,
                    on_step=lambda epoch, done, eng: stamps.append(time.perf_counter()))
    engine.on_started = lambda eng: stamps.append(time.perf_counter())
    engine.run()
    transport: Any = engine.transport
    nodes = {nid: n for h in transport.hosts.values() for nid, n in h.nodes.items()}
    client = next(n for n in nodes.values() if hasattr(n, "schedule"))
    return [b - a for a, b in zip(stamps, stamps[1:], strict=False)], client


def single_classifier_steps(cfg: Any, client: Any, model_dir: str) -> list[float]:
    """The same classifier trained in one process: peft LoRA in the model, the pooled features, a linear head."""
    from parties.llm.common.arch import arch_of
    from parties.llm.common.backbone import load_encoder, pool
    from parties.llm.common.lora import inject_lora, lora_spec_for
    from parties.llm.p3eft.adapters import attention_mask
    from strategies.base.llm import optimizer_factory

    encoder = load_encoder(model_dir, device="cpu")
    arch = arch_of(encoder)
    inject_lora(encoder, lora_spec_for(arch, rank=cfg.params.lora_rank, alpha=cfg.params.lora_alpha))
    head = torch.nn.Linear(arch.output_size(encoder.config), 2)
    params = [p for n, p in encoder.named_parameters() if "lora_" in n] + list(head.parameters())
    for p in params:
        p.requires_grad_(True)
    opt = optimizer_factory(cfg.train)(params)
    ids_all, lengths_all = client.tokens["train"]
    labels = torch.as_tensor(client.y_used.copy())
    times = []
    for step in range(client.schedule.steps):
        sel = client.schedule.train_ids(0, step)
        t0 = time.perf_counter()
        lengths = torch.as_tensor(lengths_all[sel]).long()
        width = int(lengths.max())
        ids = torch.as_tensor(ids_all[sel][:, :width]).long()
        mask = attention_mask(lengths, width)
        h = pool(encoder(input_ids=ids, attention_mask=mask).last_hidden_state, mask, arch.check_pooling(None))
        loss = torch.nn.functional.cross_entropy(head(h), labels[sel])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return times


def single_causal_steps(cfg: Any, client: Any, model_dir: str) -> list[float]:
    """The same causal LM trained in one process: peft LoRA in every block, its own forward, the response loss."""
    from parties.llm.ushape.build import build_split
    from parties.llm.ushape.instruct import response_nll
    from parties.llm.ushape.parts import real_mask
    from strategies.base.llm import optimizer_factory
    from vfl.engine.strategy import STRATEGIES

    p, strategy = cfg.params, STRATEGIES.get(cfg.strategy)(cfg)
    lm, _ = build_split(model_dir, dtype="fp32", split=p.split, tail=p.tail_blocks,
                        lora=strategy.lora_spec(), seed=cfg.seed)  # type: ignore[attr-defined]
    opt = optimizer_factory(cfg.train)([q for n, q in lm.named_parameters() if "lora_" in n])
    rows, times = client.train_rows, []
    for step in range(client.schedule.steps):
        sel = client.schedule.train_ids(0, step)
        t0 = time.perf_counter()
        width = int(rows.lengths[sel].max())
        mask = real_mask(torch.as_tensor(rows.lengths[sel]), width)
        logits = lm(input_ids=torch.as_tensor(rows.ids[sel][:, :width]), attention_mask=mask).logits
        nll, count = response_nll(logits, torch.as_tensor(rows.labels[sel][:, :width]))
        opt.zero_grad(set_to_none=True)
        (nll / max(count, 1)).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return times


def measure(strategy: str, model: str, model_dir: str | None, *, steps: int, batch: int, repeats: int
            ) -> dict[str, Any]:
    """One row: ``repeats`` rounds of (the split run, the one-process trainer) on the same batches.
    ``strategy`` + ``+fresh``: the P3EFT-family model server without the kept graph (the backprop runs
    its own forward: what it did before), the control of the one-forward step."""
    from contextlib import nullcontext
    from unittest import mock

    from parties.llm.p3eft.adapters import LoraEncoder
    from vfl.engine.schema import load_run_config

    name, fresh = strategy.removesuffix("+fresh"), strategy.endswith("+fresh")
    cfg = load_run_config(run_config(name, model_dir, steps=steps, batch=batch))
    path = model_dir or str(_packaged())
    rounds = []
    for _ in range(repeats):
        with mock.patch.object(LoraEncoder, "keeps_graphs", lambda self, rows: False) if fresh else nullcontext():
            split, client = split_steps(cfg)
        single = (single_causal_steps if name in CAUSAL else single_classifier_steps)(cfg, client, path)
        s, o = statistics.median(split[1:]), statistics.median(single[1:])
        rounds.append((s, o))
    ratios = [s / o for s, o in rounds]
    best = sorted(range(repeats), key=lambda i: ratios[i])[repeats // 2]  # the round with the median ratio
    return {"strategy": strategy, "model": model, "split_s_per_step": rounds[best][0],
            "single_s_per_step": rounds[best][1], "ratio": ratios[best], "ratios": ratios, "steps": steps,
            "batch_size": batch, "repeats": repeats}


def _packaged() -> Path:
    from parties.llm.common.backbone import resolve_model_dir

    return Path(resolve_model_dir(None))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for split_cost.json")
    ap.add_argument("--steps", type=int, default=12, help="training steps per run (the first is warm-up)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3, help="rounds per row (the row keeps the median ratio)")
    ap.add_argument("--llama-blocks", type=int, default=4, help="blocks of the d = 512 Llama")
    ap.add_argument("--rows", nargs="*", default=None, help="strategy:model pairs (default: every row)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [tuple(r.split(":", 1)) for r in args.rows] if args.rows else list(ROWS)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        dirs: dict[str, str | None] = {"minilm": None}
        if any(m == "llama512" for _, m in rows):
            dirs["llama512"] = llama512(Path(tmp) / "llama512", blocks=args.llama_blocks)
        if any(m == "tiny-llama" for _, m in rows):
            from parties.llm.common.tiny import tiny_lm_dir

            dirs["tiny-llama"] = tiny_lm_dir(Path(tmp) / "tiny-llama", "llama")
        for strategy, model in rows:
            row = measure(strategy, model, dirs[model], steps=args.steps, batch=args.batch, repeats=args.repeats)
            results.append(row)
            print(f"{strategy:>13} {model:>10}  split {row['split_s_per_step'] * 1e3:8.1f} ms/step  single "
                  f"{row['single_s_per_step'] * 1e3:8.1f} ms/step  ratio {row['ratio']:.3f}  "
                  f"(rounds {', '.join(f'{r:.3f}' for r in row['ratios'])})", flush=True)
    (out / "split_cost.json").write_text(json.dumps({"rows": results, "threads": 1}, indent=1) + "\n")
    print(f"wrote {out / 'split_cost.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
