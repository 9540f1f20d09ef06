"""Secure aggregation under a dropout: M parties train PBM-VFL with secure aggregation; one party
dies in round r (step r of epoch 0) after the others masked; ``train.on_dropout: skip-party``
finishes the round with the survivors. An honest-but-curious server that keeps every message it
received (the real wire bytes, the dead party's late vector included) then tries to unmask
(a) the dead party's vectors of rounds < r, (b) its late vector of round r, (c) every single
survivor's vector of round r.

    python -m simulations.benchmarks.secagg_dropout --out bench-out [--parties 5 20 100]

Runs in-process through the real nodes, flwr messages and driver (fault injection VFL_FAULT_INJECT);
the true inputs come from ``pbm-audited`` (below: a PBM whose parties also keep their plain integer
inputs and whose server keeps each unmasked sum, registered only when this module is imported). Writes ``DIR/secagg_dropout.json`` with a list
``results``, one object per M: ``parties``, ``survivor_sum_exact``, ``past_rounds_unmasked``,
``late_vector_unmasked``, ``single_survivor_unmasked``, ``setup_bytes``, ``recovery_bytes``
(the recovered round), and more (bytes of a normal round's unmask exchange, timings).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from flwr.common import Message

import strategies  # noqa: F401  (registers the strategies)
from parties.secagg import wire as sw
from parties.secagg.party import SecAggParty
from parties.secagg.server import SecAggActiveServer
from parties.secagg.view import view_from_wires
from parties.vertical import wire as vw
from parties.vertical.wire import SERVER_ID
from strategies.base.secure import shamir_threshold
from strategies.base.vertical import VerticalStrategy
from strategies.npq_secagg import NPQSecAgg
from strategies.pbm import PBM
from vfl.attacks.secagg.curious import unmasked
from vfl.core.errors import ProtocolError
from vfl.data.dataset import Dataset, LabelShard, PartyShard
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import register
from vfl.runtime import message as wire
from vfl.runtime.faults import FAULT_ENV
from vfl.runtime.host import NodeBuilder
from vfl.runtime.message import Wire
from vfl.runtime.mods import Mod, ModContext
from vfl.runtime.transport.inprocess import InProcessTransport
from vfl.secagg import SecAggServer

SERVER_GROUP = "server"
AUDIT = "audit"  # the audited party's mod-state key of its plain inputs


def keep_input(message: Message, ctx: ModContext) -> Message:
    """A mod before ``secagg_mod``: the party keeps its own plain integer input of the round."""
    q = wire.get_array(message, vw.Record.EMB, vw.Array.INTS)
    ctx.state.setdefault(AUDIT, {})[wire.round_of(message)] = np.array(q, copy=True)
    return message


class AuditedParty(SecAggParty):
    """A SecAgg party that also hands out its plain inputs (its own data) per round."""

    def audit_inputs(self) -> dict[str, list[int]]:
        return {r: np.asarray(q).ravel().tolist() for r, q in self.mod_state.get(AUDIT, {}).items()}


class AuditedServer(SecAggActiveServer):
    """The SecAgg server that also keeps each round's unmasked integer sum and the parties summed."""

    def _server(self) -> SecAggServer:
        server = super()._server()
        if not hasattr(self, "audit"):
            self.audit: dict[str, tuple[list[int], list[int]]] = {}
            real = server.result

            def result(rnd: int | str) -> tuple[npt.NDArray[np.int64], tuple[int, ...]]:
                total, summed = real(rnd)
                self.audit[str(rnd)] = (np.asarray(total).ravel().tolist(), list(summed))
                return total, summed

            server.result = result  # type: ignore[method-assign,assignment]
        return server

    def audit_sums(self) -> dict[str, tuple[list[int], list[int]]]:
        return dict(getattr(self, "audit", {}))


class Audited:
    """Mixin for a SecAgg strategy: the audited nodes, and ``keep_input`` just before the masking mod."""

    party_class: type[SecAggParty] = AuditedParty
    server_class: type[SecAggActiveServer] = AuditedServer

    def party_mods(self, index: int) -> list[Mod]:
        mods = super().party_mods(index)  # type: ignore[misc]
        return [*mods[:-1], keep_input, mods[-1]]


@register
class AuditedPBM(Audited, PBM):
    name = "pbm-audited"


@register
class AuditedNPQSecAgg(Audited, NPQSecAgg):
    name = "npq+secagg-audited"


@dataclass(frozen=True)
class Blobs:
    """Gaussian blobs, two features per party (no files, deterministic)."""

    num_parties: int
    num_train: int = 100
    num_test: int = 40
    seed: int = 0

    def dataset(self) -> Dataset:
        rng = np.random.default_rng(self.seed)
        f, n = 2 * self.num_parties, self.num_train + self.num_test
        y = rng.integers(0, 3, size=n)
        x = (rng.normal(0, 2, size=(3, f))[y] + rng.normal(0, 1, size=(n, f))).astype(np.float32)
        return Dataset("blobs", x[: self.num_train], y[: self.num_train], x[self.num_train :], y[self.num_train :], 3)

    def partition(self) -> tuple[list[PartyShard], LabelShard]:
        d = self.dataset()
        shards = [PartyShard(i, d.x_train[:, 2 * i : 2 * i + 2], d.x_test[:, 2 * i : 2 * i + 2])
                  for i in range(self.num_parties)]
        return shards, LabelShard(d.y_train, d.y_test, 3)


class RecordingTransport(InProcessTransport):
    """In-process transport that keeps every wire the server host received or sent (its view)."""

    def __init__(self) -> None:
        super().__init__()
        self.server_wires: list[Wire] = []
        self.nodes: dict[int, Any] = {}

    def start(self, groups: Any, build: NodeBuilder, *, threads: int = 1) -> None:
        super().start(groups, build, threads=threads)
        for host in self.hosts.values():
            self.nodes.update(host.nodes)
        host = self.hosts[SERVER_GROUP]
        deliver = host.deliver

        def recorded(wires: Any) -> list[Wire]:
            self.server_wires.extend(w for w in wires if w.dst == SERVER_ID)
            out = deliver(wires)
            self.server_wires.extend(out)
            return out

        host.deliver = recorded  # type: ignore[method-assign]


def run_one(m: int, *, round_r: int, seed: int) -> dict[str, Any]:
    dead = m // 2  # party index; node id dead + 1
    saved = {FAULT_ENV: os.environ.get(FAULT_ENV)}
    os.environ[FAULT_ENV] = f"party{dead}@0:{round_r}"
    cfg = load_run_config({
        "name": f"secagg-dropout-{m}", "strategy": "pbm-audited", "num_parties": m, "seed": seed,
        "model": {"embed_dim": 8, "bottom_hidden": [8], "head_hidden": [16]},
        "train": {"epochs": 1, "batch_size": 20, "lr": 0.05, "on_dropout": "skip-party"},
        "transport": {"parties_per_actor": 1},  # one host per party: exactly one party dies
        "params": {"b": 16, "beta": 0.25}})
    transport = RecordingTransport()
    engine = Engine(cfg, transport, Blobs(m, seed=seed), progress=False)
    t0 = time.perf_counter()
    try:
        result = engine.run()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    wall = time.perf_counter() - t0
    (record,) = result.summary["dropouts"]
    did = dead + 1
    server = transport.nodes[SERVER_ID]
    sums = server.audit_sums()
    rnd = f"train:0:{round_r}"
    late = [w for w in (Wire.of(x) for x in transport.late_replies(f"parties-{dead}")) if w.round == rnd]
    refused = _late_vector_refused(server, late)
    view = view_from_wires([*transport.server_wires, *late], parties=[p + 1 for p in range(m)],
                           threshold=shamir_threshold(m, 0), sums=sums)
    truth = {(r, p): np.asarray(v, dtype=np.int64) for p, node in transport.nodes.items() if p != SERVER_ID
             for r, v in node.audit_inputs().items()}
    total, summed = sums[rnd]
    exact = bool(np.array_equal(np.asarray(total), sum(truth[(rnd, p)] for p in summed) % (1 << view.k)))
    past = sum(unmasked(view, did, f"train:0:{r}", truth[(f"train:0:{r}", did)]) for r in range(round_r))
    late_open = int(unmasked(view, did, rnd, truth[(rnd, did)])) if (rnd, did) in view.vectors else -1
    single = sum(unmasked(view, p, rnd, truth[(rnd, p)]) for p in summed)
    ledger = engine.ledger
    unmask_normal = sum(row["bytes"] for kind, row in ledger.by_kind.items() if kind == sw.Kind.UNMASK) \
        - record["recovery_bytes"]
    steps = engine.strategy.steps_per_epoch()
    return {
        "parties": m, "threshold": view.threshold, "dropped_party": record["party"], "round": rnd,
        "survivor_sum_exact": exact, "survivors_summed": len(summed),
        "past_rounds_unmasked": int(past), "past_rounds_tried": round_r,
        "late_vector_unmasked": late_open, "late_vector_refused_by_server": refused,
        "single_survivor_unmasked": int(single), "single_survivors_tried": len(summed),
        "setup_bytes": result.summary["setup_bytes"], "recovery_bytes": record["recovery_bytes"],
        "recovery_bytes_total": result.summary["recovery_bytes"],
        "unmask_bytes_per_normal_round": unmask_normal / max(1, steps - 1 + _eval_rounds(engine)),
        "train_bytes_up": result.summary["total_bytes_up"], "epsilon": result.summary.get("epsilon"),
        "wall_s": wall,
    }


def _eval_rounds(engine: Engine) -> int:
    strategy = engine.strategy
    if not isinstance(strategy, VerticalStrategy):
        raise TypeError(f"expected a vertical strategy, got {type(strategy).__name__}")
    return int(strategy.schedule(strategy._num_train, strategy._num_test).eval_steps)


def _late_vector_refused(server: Any, late: list[Wire]) -> bool:
    """Hand the late vector to the real server node: it must refuse it (ProtocolError)."""
    if not late:
        return False
    try:
        server.handle([w.open() for w in late])
    except ProtocolError:
        return True
    return False


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="bench-out/", help="output directory (default bench-out/)")
    p.add_argument("--parties", type=int, nargs="+", default=[5, 20, 100], help="values of M")
    p.add_argument("--round", type=int, default=3, help="the step of epoch 0 in which a party dies (r)")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = _parser().parse_args(argv)
    rows = [run_one(m, round_r=args.round, seed=args.seed) for m in args.parties]
    head = (f"{'M':>4} {'t':>3} {'sum exact':>9} {'past':>6} {'late':>5} {'single':>7} {'setup B':>9} "
            f"{'recovery B':>10} {'unmask B/rnd':>12} {'wall s':>7}")
    print(head)
    for r in rows:
        print(f"{r['parties']:>4} {r['threshold']:>3} {r['survivor_sum_exact']!s:>9} "
              f"{r['past_rounds_unmasked']}/{r['past_rounds_tried']:<4} {r['late_vector_unmasked']:>5} "
              f"{r['single_survivor_unmasked']}/{r['single_survivors_tried']:<5} {r['setup_bytes']:>9} "
              f"{r['recovery_bytes']:>10} {r['unmask_bytes_per_normal_round']:>12.0f} {r['wall_s']:>7.1f}")
    result = {"results": rows, "round": args.round,
              "units": "bytes = serialized flwr messages as counted by the ledger; attack columns = rounds or "
                       "vectors the curious server reconstructed exactly (must be 0)"}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "secagg_dropout.json").write_text(json.dumps(result, indent=2))
    print(f"\nwrote {out / 'secagg_dropout.json'}")
    return result


if __name__ == "__main__":
    main()
