"""Peak GPU memory of a P3EFT model server's calls on a Llama-shaped model built from a config (random
weights, no download): the frozen weights after loading, a forward call, and a ``train.backprop`` call
(k cotangent pieces, float32 VJPs) per (micro-batch, checkpointing) setting, in bf16 and NF4, beside
docs/llm-p3eft.md's arithmetic for the same shapes (``predicted``).

``python -m simulations.benchmarks.llm_memory --out DIR --preset 7b`` (a CUDA device; NF4 also needs
bitsandbytes). ``--preset tiny`` runs the same path anywhere (on a CPU the memory columns are None).
Writes ``DIR/llm_memory.json`` after every phase, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path
from typing import Any

import torch

GB = 1e9
# Llama-2-7B's shape (docs/llm-p3eft.md "Memory of a 7B model server"); tiny: the same path in seconds on a CPU
PRESETS: dict[str, dict[str, Any]] = {
    "7b": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096},
    "tiny": {"hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 4, "vocab_size": 400, "max_position_embeddings": 512},
}


def predicted(*, d: int, f: int, layers: int, vocab: int, rank: int, tokens: int, checkpointing: bool,
              quantization: str, pieces: int) -> dict[str, float]:
    """docs/llm-p3eft.md's formulas in bytes: frozen weights during a backprop call (fp32 upcast, or NF4 +
    fp32 embeddings/norms), LoRA slots, VJP results, and the activations kept for ``tokens`` tokens."""
    linear = layers * (4 * d * d + 3 * d * f)  # quantized (or plain) linear weights of the blocks
    rest = vocab * d + (2 * layers + 1) * d  # embeddings + norms
    if quantization == "nf4":
        weights = linear * 0.5 + linear * (8 / 64 + 32 / (64 * 256)) / 8 + rest * 4
    else:
        weights = 4 * (linear + rest)
    slots = 4 * layers * rank * (4 * 2 * d + 2 * (d + f) + (f + d))
    block = 8 * d + 4 * f + 7 * rank + 6  # float32 values kept per token and block (test_docs_activation_formula)
    act = 4 * tokens * ((layers * d + block) if checkpointing else layers * block)
    return {"weights": weights, "lora_slots": slots, "vjp_results": (pieces + 1) * slots, "activations": act,
            "total": weights + slots + (pieces + 1) * slots + act}


def build_model(preset: str, *, layers: int, device: str) -> Any:
    """A Llama base model (``AutoModel``: no lm_head) of ``preset``'s shape in bf16, initialised on ``device``."""
    from transformers import AutoModel, LlamaConfig

    kwargs: dict[str, Any] = {**PRESETS[preset], **({"num_hidden_layers": layers} if layers else {})}
    cfg = LlamaConfig(**kwargs)
    with torch.device(device):
        model = AutoModel.from_config(cfg, dtype=torch.bfloat16)
    return model.eval()


def _gpu(device: str) -> bool:
    return device.startswith("cuda") and torch.cuda.is_available()


def _peak(device: str, call: Any) -> tuple[float | None, float | None, float]:
    """(GB allocated before, peak GB during, seconds) of ``call()`` on ``device`` (None off a GPU)."""
    if _gpu(device):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated() / GB
    t = time.perf_counter()
    call()
    if _gpu(device):
        torch.cuda.synchronize()
        return before, torch.cuda.max_memory_allocated() / GB, time.perf_counter() - t
    return None, None, time.perf_counter() - t


def measure_server(model: Any, *, device: str, label: str, settings: list[tuple[int, bool]], seq_len: int,
                   pieces: int, rank: int, write: Any) -> None:
    """Wrap ``model`` in a LoRA model server (all-linear, ``rank``) and measure its forward and its
    backprop for each (micro_batch, checkpointing) setting; no-checkpointing settings must come first
    (checkpointing wraps the blocks in place)."""
    from parties.llm.common.arch import arch_of
    from parties.llm.common.checkpointing import checkpoint_blocks
    from parties.llm.common.lora import lora_spec_for
    from parties.llm.p3eft.adapters import LoraEncoder, init_adapters

    quantization = "nf4" if getattr(model, "hf_quantizer", None) is not None else "none"
    cfg = model.config
    server = LoraEncoder(model, lora_spec_for(arch_of(model), rank=rank, alpha=2.0 * rank, targets=("all-linear",)),
                         pooling="last", device=device)
    gen = torch.Generator().manual_seed(0)
    adapter = {k: v if ".lora_A." in k else 0.01 * torch.randn(v.shape, generator=gen)
               for k, v in init_adapters(server.shapes, generator=gen).items()}
    server.load(adapter)
    loaded = torch.cuda.memory_allocated() / GB if _gpu(device) else None
    write({"label": label, "phase": "loaded", "allocated_gb": loaded, "quantization": quantization,
           "predicted_weights_gb": predicted(d=cfg.hidden_size, f=cfg.intermediate_size, layers=cfg.num_hidden_layers,
                                             vocab=cfg.vocab_size, rank=rank, tokens=0, checkpointing=False,
                                             quantization=quantization, pieces=pieces)["weights"] / GB})
    for micro_batch, checkpointing in settings:
        if checkpointing:
            checkpoint_blocks(server.encoder)
        server.micro_batch = micro_batch
        ids = torch.randint(0, cfg.vocab_size, (micro_batch, seq_len), generator=gen)
        lengths = torch.full((micro_batch,), seq_len)
        g = 0.01 * torch.randn(pieces, micro_batch, cfg.hidden_size, generator=gen)
        before, fwd_peak, fwd_s = _peak(device, lambda: server.forward(ids, lengths, adapter))  # noqa: B023
        _, peak, seconds = _peak(device, lambda: server.backprop_many(ids, lengths, adapter, g))  # noqa: B023
        pred = predicted(d=cfg.hidden_size, f=cfg.intermediate_size, layers=cfg.num_hidden_layers,
                         vocab=cfg.vocab_size, rank=rank, tokens=micro_batch * seq_len,
                         checkpointing=checkpointing, quantization=quantization, pieces=pieces)
        write({"label": label, "phase": "backprop", "quantization": quantization, "micro_batch": micro_batch,
               "checkpointing": checkpointing, "tokens": micro_batch * seq_len, "pieces": pieces,
               "allocated_before_gb": before, "forward_peak_gb": fwd_peak, "forward_s": round(fwd_s, 3),
               "backprop_peak_gb": peak, "backprop_s": round(seconds, 3),
               "predicted_gb": {k: round(v / GB, 3) for k, v in pred.items()}})


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="7b")
    ap.add_argument("--layers", type=int, default=0, help="blocks (0: the preset's)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--quantization", nargs="+", choices=("none", "nf4"), default=["none", "nf4"])
    ap.add_argument("--settings", nargs="+", default=["8:off", "16:on"],
                    help="micro_batch:checkpointing pairs, e.g. 8:off 16:on (checkpointing on after off)")
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--pieces", type=int, default=2)
    ap.add_argument("--rank", type=int, default=16)
    args = ap.parse_args(argv)
    settings = sorted(((int(m), c == "on") for m, c in (s.split(":") for s in args.settings)), key=lambda s: s[1])
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"preset": args.preset, "layers": args.layers or PRESETS[args.preset]["num_hidden_layers"],
                              "device": args.device, "seq_len": args.seq_len, "rank": args.rank, "rows": [],
                              "gpu": torch.cuda.get_device_name() if _gpu(args.device) else None,
                              "torch": torch.__version__}

    def write(row: dict[str, Any]) -> None:
        result["rows"].append(row)
        (args.out / "llm_memory.json").write_text(json.dumps(result, indent=1))
        print(json.dumps(row), flush=True)

    t = time.perf_counter()
    model = build_model(args.preset, layers=args.layers, device=args.device)
    write({"phase": "built", "seconds": round(time.perf_counter() - t, 1),
           "parameters": sum(p.numel() for p in model.parameters())})
    model_dir = args.out / "model"
    if "nf4" in args.quantization:  # NF4 loads through from_pretrained (the runs' path): save once
        t = time.perf_counter()
        model.save_pretrained(model_dir)
        write({"phase": "saved", "seconds": round(time.perf_counter() - t, 1)})
    if "none" in args.quantization:
        measure_server(model, device=args.device, label="bf16", settings=settings, seq_len=args.seq_len,
                       pieces=args.pieces, rank=args.rank, write=write)
    del model
    gc.collect()  # the LoRA-injected model sits in reference cycles: free it before the NF4 load is measured
    if _gpu(args.device):
        torch.cuda.empty_cache()
    if "nf4" in args.quantization:
        from parties.llm.common.backbone import load_encoder

        t = time.perf_counter()
        model = load_encoder(str(model_dir), dtype="bf16", quantization="nf4", device=args.device)
        write({"phase": "loaded-nf4", "seconds": round(time.perf_counter() - t, 1)})
        measure_server(model, device=args.device, label="nf4", settings=settings, seq_len=args.seq_len,
                       pieces=args.pieces, rank=args.rank, write=write)
    return result


if __name__ == "__main__":
    main()
