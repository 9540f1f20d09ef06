"""The runtime's dispatch changes no number: an in-process run (hosts, nodes, driver, authenticated
wire) trains the same parameters, bit for bit, as the split floor's math on the same seeds and batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from simulations.benchmarks import floors
from simulations.cli.runner import resolve_config
from simulations.data.fixtures import write_har
from simulations.data.source import ConfigDataSource
from vfl.engine.engine import Engine
from vfl.runtime.transport.inprocess import InProcessTransport


@pytest.mark.parametrize("auth", ["true", "false"])
def test_inprocess_run_trains_the_split_floors_parameters(tmp_path, auth):
    write_har(tmp_path, np.random.default_rng(0), sizes=(130, 40))
    cfg = resolve_config(None, ["name=same", "strategy=npq", "dataset=har", "num_parties=3", "train.batch_size=50",
                                "train.epochs=2", "train.lr=0.01", "train.momentum=0", "model.embed_dim=4", "model.bottom_hidden=[8]",
                                "model.head_hidden=[8]", f"auth={auth}", f"data.data_dir={tmp_path}"])
    data = ConfigDataSource.from_config(cfg)
    _, bottoms, head = floors.split_run(cfg, data, 2)
    transport = InProcessTransport()
    Engine(cfg, transport, data, progress=False).run()
    nodes = {nid: n for h in transport.hosts.values() for nid, n in h.nodes.items()}
    try:
        ran = [nodes[i].bottom for i in sorted(nodes) if i != floors.SERVER_ID] + [nodes[floors.SERVER_ID].head]
    finally:
        transport.shutdown()
    initial = [p.detach().clone() for m in [*floors.initial_models(cfg, data)[0]] for p in m.parameters()]
    got = [p.detach() for m in ran for p in m.parameters()]
    want = [p.detach() for m in [*bottoms, head] for p in m.parameters()]
    assert any(not torch.equal(a, b) for a, b in zip(got, initial, strict=False))  # it trained
    assert len(got) == len(want) and all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
