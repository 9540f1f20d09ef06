"""The peer comparison's Flower side: the same vertical task through ``flwr.simulation.run_simulation``.

Flower's own vertical-FL design (its ``examples/vertical-fl``), on flwr's Message API: a ``ServerApp`` whose
``main`` loops over the steps, sends every party a ``train.embed`` message, fuses the M embeddings it gets
back (sum), computes the loss and the gradient with the head, and sends every party its gradient
(``train.grad``, acknowledged); a ``ClientApp`` per party keeps its bottom model between messages in a
per-partition cache of the client process (one ClientApp actor: ``client_resources.num_cpus`` = the
machine's cores, so every partition lives in one process; each party checks the step it is asked for
is the next one, so a split cache would fail loudly). Models, seeds, data and batch order are the
project's (``strategies/base/vertical.py`` seeds, ``vfl.data.sampling.Schedule``), so both systems do the same
work from the same initial weights. Run by ``simulations.benchmarks.peers`` in a subprocess; the spec
comes in ``$PEERS_SPEC`` (JSON), which Ray's workers inherit.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from typing import Any, cast

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.serde import message_to_proto
from flwr.serverapp import Grid, ServerApp

from parties.vertical.models import BOTTOMS, HEADS
from parties.vertical.wire import SERVER_ID, party_node_id
from simulations.cli.runner import resolve_config
from vfl.core.rng import derive_seed
from vfl.data.sampling import Schedule
from vfl.engine.schema import RunConfig

_PARTIES: dict[int, dict[str, Any]] = {}  # partition id -> bottom, optimizer, shard, next step (client process)


def _spec() -> dict[str, Any]:
    return json.loads(os.environ["PEERS_SPEC"])  # type: ignore[no-any-return]


def _cfg(spec: dict[str, Any]) -> RunConfig:
    return resolve_config(None, spec["sets"])


def _seeded(what: str, seed: int, node_id: int, build: Any) -> Any:
    """Same initial weights as the project's ``VerticalStrategy._seeded``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(what, seed, node_id) & 0x7FFF_FFFF_FFFF_FFFF)
        return build()


def _data(cfg: RunConfig) -> Any:
    from simulations.data.source import ConfigDataSource

    return ConfigDataSource.from_config(cfg).partition()


def _schedule(cfg: RunConfig, labels: Any) -> Schedule:
    t = cfg.train
    return Schedule(seed=cfg.seed, num_train=len(labels.y_train), num_test=len(labels.y_test),
                    batch_size=t.batch_size, eval_batch_size=max(t.batch_size, t.eval_batch_size))


def _party(context: Context) -> dict[str, Any]:
    pid = int(context.node_config["partition-id"])
    if pid not in _PARTIES:
        cfg = _cfg(_spec())
        torch.set_num_threads(cfg.train.threads_per_actor)
        shards, labels = _data(cfg)
        shard, m = shards[pid], cfg.model
        bottom = _seeded("bottom", cfg.seed, party_node_id(pid), lambda: BOTTOMS.get(m.bottom, "model.bottom")(
            input_shape=shard.input_shape, embed_dim=m.embed_dim, tanh_c=m.tanh_c, hidden=m.bottom_hidden))
        opt = torch.optim.SGD(bottom.parameters(), lr=cfg.train.lr, momentum=cfg.train.momentum)
        _PARTIES[pid] = {"bottom": bottom, "opt": opt, "shard": shard, "sched": _schedule(cfg, labels), "next": 0,
                         "out": None}
    return _PARTIES[pid]


client = ClientApp()


@client.train("embed")
def embed(msg: Message, context: Context) -> Message:
    """Forward this step's batch through the party's bottom; keep the graph for the gradient."""
    st = _party(context)
    c = msg.content.config_records["c"]
    step, epoch = cast(int, c["step"]), cast(int, c["epoch"])  # the driver sent ints
    if step != st["next"]:
        raise RuntimeError(f"partition {context.node_config['partition-id']}: asked for step {step}, "
                           f"holds {st['next']} (split ClientApp cache)")
    x = torch.from_numpy(st["shard"].x_train[st["sched"].train_ids(epoch, step)])
    st["out"] = st["bottom"](x)
    return Message(RecordDict({"e": ArrayRecord([st["out"].detach().numpy()])}), reply_to=msg)


@client.train("grad")
def grad(msg: Message, context: Context) -> Message:
    """Back-propagate the server's gradient through the kept graph and step the bottom."""
    st = _party(context)
    g = torch.from_numpy(next(iter(msg.content.array_records["g"].values())).numpy())
    st["opt"].zero_grad()
    st["out"].backward(g)
    st["opt"].step()
    st["out"], st["next"] = None, st["next"] + 1
    return Message(RecordDict({"ok": ConfigRecord({"step": st["next"]})}), reply_to=msg)


@client.evaluate("embed")
def embed_test(msg: Message, context: Context) -> Message:
    """Embeddings of the whole test split (no gradient)."""
    st = _party(context)
    with torch.no_grad():
        out = st["bottom"](torch.from_numpy(st["shard"].x_test)).numpy()
    return Message(RecordDict({"e": ArrayRecord([out])}), reply_to=msg)


server = ServerApp()


def _size(msgs: list[Message]) -> int:
    return sum(len(message_to_proto(m).SerializeToString()) for m in msgs)


def _fused(replies: list[Message]) -> torch.Tensor:
    arrs = [next(iter(r.content.array_records["e"].values())).numpy() for r in replies]
    return torch.from_numpy(np.sum(arrs, axis=0))


@server.main()
def main(grid: Grid, context: Context) -> None:
    spec = _spec()
    cfg = _cfg(spec)
    torch.set_num_threads(cfg.train.threads_per_actor)
    _, labels = _data(cfg)
    m = cfg.model
    head = _seeded("head", cfg.seed, SERVER_ID, lambda: HEADS.get(m.head, "model.head")(
        in_dim=m.embed_dim, num_classes=labels.num_classes, hidden=m.head_hidden))
    opt = torch.optim.SGD(head.parameters(), lr=cfg.train.lr, momentum=cfg.train.momentum)
    sched, loss_fn = _schedule(cfg, labels), torch.nn.CrossEntropyLoss()
    nodes: list[int] = []
    while len(nodes) < cfg.num_parties:
        nodes = sorted(grid.get_node_ids())
        time.sleep(0.01)
    t_first, ends, sizes = None, [], []
    t_prev = time.perf_counter()
    step_s: list[float] = []
    for step in range(spec["steps"]):
        cr = ConfigRecord({"epoch": 0, "step": step})
        out = [Message(RecordDict({"c": cr}), dst_node_id=n, message_type="train.embed", group_id=str(step))
               for n in nodes]
        replies = list(grid.send_and_receive(out))
        if any(r.has_error() for r in replies) or len(replies) != len(nodes):
            raise RuntimeError(f"step {step}: {[r.error for r in replies if r.has_error()]}")
        fused = _fused(replies).requires_grad_(True)
        y = torch.from_numpy(labels.y_train[sched.train_ids(0, step)]).long()
        opt.zero_grad()
        loss_fn(head(fused), y).backward()
        opt.step()
        if fused.grad is None:
            raise RuntimeError(f"step {step}: the head's loss does not depend on the fused embeddings")
        g = ArrayRecord([fused.grad.numpy()])  # sum fusion: every party's gradient is this one
        back = [Message(RecordDict({"g": g}), dst_node_id=n, message_type="train.grad", group_id=str(step))
                for n in nodes]
        acks = list(grid.send_and_receive(back))
        if any(r.has_error() for r in acks) or len(acks) != len(nodes):
            raise RuntimeError(f"step {step}: {[r.error for r in acks if r.has_error()]}")
        now = time.perf_counter()
        step_s.append(now - t_prev)
        t_prev = now
        if t_first is None:
            t_first = time.time()
        ends.append(now)
        sizes.append(_size(out) + _size(replies) + _size(back) + _size(acks))
    ev = [Message(RecordDict({"c": ConfigRecord({"step": 0})}), dst_node_id=n, message_type="evaluate.embed",
                  group_id="eval") for n in nodes]
    replies = list(grid.send_and_receive(ev))
    with torch.no_grad():
        pred = head(_fused(replies)).argmax(1).numpy()
    warm = spec["warmup"]
    result = {"system": "flower", "transport": "flwr-simulation-ray", "parties": cfg.num_parties,
              "steps": spec["steps"], "step_ms": statistics.median(step_s[warm:]) * 1e3,
              "startup_s": (t_first or time.time()) - spec["t0"],
              "bytes_per_step": statistics.median(sizes),
              "final_acc": float((pred == labels.y_test).mean()), "step_ms_all": [s * 1e3 for s in step_s]}
    with open(spec["result"], "w") as f:
        json.dump(result, f)


def run(spec: dict[str, Any]) -> None:
    """Start Flower's simulation engine (its own Ray) with M SuperNodes and one ClientApp actor."""
    import shutil
    import tempfile

    from flwr.simulation import run_simulation

    os.environ["PEERS_SPEC"] = json.dumps(spec)
    cpus = os.cpu_count() or 2
    temp = tempfile.mkdtemp(prefix="rfl", dir="/tmp")  # short: Ray's socket paths have a length limit
    try:
        _simulate(run_simulation, spec, cpus, temp)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _simulate(run_simulation: Any, spec: dict[str, Any], cpus: int, temp: str) -> None:
    run_simulation(server_app=server, client_app=client, num_supernodes=_cfg(spec).num_parties,
                   backend_config={"client_resources": {"num_cpus": cpus, "num_gpus": 0.0},
                                   "init_args": {"num_cpus": cpus, "address": "local", "include_dashboard": False,
                                                 "_temp_dir": temp}})
