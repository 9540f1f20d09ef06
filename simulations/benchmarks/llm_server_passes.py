"""A P3EFT model server's backprop call with and without gradient checkpointing and batched VJPs:
seconds per ``backprop_many`` call and the activation bytes the differentiable forward keeps
(autograd's saved tensors, counted by hooks: the CPU stand-in for a GPU's peak memory).

Random Llama built from a config (no download), all-linear LoRA, k cotangent pieces on every row.
``python -m simulations.benchmarks.llm_server_passes [--hidden 256 --blocks 4 --batch 16 --width 64]``
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import torch


def saved_activation_bytes(server: Any, ids: torch.Tensor, lengths: torch.Tensor) -> int:
    """Bytes of the tensors autograd keeps for the backward of ``server.activations`` (not weights)."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.is_floating_point() and not (t.requires_grad and t.is_leaf):
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        server.activations(ids, lengths)
    frozen = {p.untyped_storage().data_ptr() for p in server.encoder.parameters()}
    return sum(n for ptr, n in seen.items() if ptr not in frozen)


def measure(*, hidden: int, blocks: int, batch: int, width: int, pieces: int, rank: int, repeats: int
            ) -> list[dict[str, Any]]:
    """One row per (checkpointing, batched_vjp): median seconds per call and saved activation bytes."""
    from transformers import LlamaConfig, LlamaModel

    from parties.llm.common.arch import arch_of
    from parties.llm.common.lora import lora_spec_for
    from parties.llm.p3eft.adapters import LoraEncoder, init_adapters

    cfg = LlamaConfig(vocab_size=1000, hidden_size=hidden, intermediate_size=int(hidden * 2.6875),
                      num_hidden_layers=blocks, num_attention_heads=max(1, hidden // 32),
                      num_key_value_heads=max(1, hidden // 32), max_position_embeddings=2 * width)
    gen = torch.Generator().manual_seed(0)
    ids, lengths = torch.randint(0, 1000, (batch, width), generator=gen), torch.full((batch,), width)
    cotangents = torch.randn(pieces, batch, hidden, generator=gen)
    rows = []
    for checkpointing in (False, True):
        for batched in (False, True):
            with torch.random.fork_rng():
                torch.manual_seed(0)
                model = LlamaModel(cfg).eval()
            server = LoraEncoder(model, lora_spec_for(arch_of(model), rank=rank, alpha=2.0 * rank,
                                                      targets=("all-linear",)),
                                 pooling="last", checkpointing=checkpointing, batched_vjp=batched)
            adapter = init_adapters(server.shapes, generator=torch.Generator().manual_seed(1))
            server.backprop_many(ids, lengths, adapter, cotangents)  # warm-up
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                server.backprop_many(ids, lengths, adapter, cotangents)
                times.append(time.perf_counter() - t0)
            rows.append({"checkpointing": checkpointing, "batched_vjp": batched,
                         "ms": round(1000 * sorted(times)[len(times) // 2], 1),
                         "saved_bytes": saved_activation_bytes(server, ids, lengths)})
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--pieces", type=int, default=2)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = measure(hidden=a.hidden, blocks=a.blocks, batch=a.batch, width=a.width, pieces=a.pieces,
                   rank=a.rank, repeats=a.repeats)
    for row in rows:
        print(json.dumps(row))
    return rows


if __name__ == "__main__":
    main()
