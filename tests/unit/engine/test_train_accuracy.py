"""The server scores its train predictions in batches (``ActiveServer._score``): the same count of correct
predictions as scoring each step on its own (argmax of that step's softmax), near-ties included."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from parties.vertical import server as active_server
from parties.vertical.party import ActiveServer
from tests.support.defense_server import defended_server, forward_messages


def _near_ties(rows: int, classes: int, seed: int) -> torch.Tensor:
    """Logits whose top two entries are one float apart: softmax can round them equal (then its argmax
    is the first), while the argmax of the logits picks the larger one."""
    x = torch.randn(rows, classes, generator=torch.Generator().manual_seed(seed))
    x[::2] -= x[::2].max(1, keepdim=True).values  # every other row's top entry at 0 (exp rounds its neighbour to 1)
    x[:, 0] = x.max(1).values
    x[:, classes - 1] = torch.from_numpy(np.nextafter(x[:, 0].numpy(), np.float32(np.inf)))
    return x


def _per_step(batches: list[tuple[torch.Tensor, torch.Tensor]]) -> int:
    return sum(int((torch.softmax(lg, 1).argmax(1) == y).sum()) for lg, y in batches)


@pytest.mark.parametrize("classes", [2, 6, 10, 100])
@pytest.mark.parametrize("limit", [active_server.UNSCORED_ROWS, 150])
def test_batched_scoring_counts_what_each_step_would(classes, limit, monkeypatch):
    monkeypatch.setattr(active_server, "UNSCORED_ROWS", limit)
    x = _near_ties(1234, classes, seed=classes)
    y = torch.randint(0, classes, (1234,), generator=torch.Generator().manual_seed(1))
    y[::3] = classes - 1  # many rows labelled with the near-tied larger entry
    batches = list(zip(x.split(100), y.split(100), strict=True))  # the last batch is smaller
    server = object.__new__(ActiveServer)
    server.reset_metrics()
    for lg, lab in batches:  # as train_step holds them (and scores every `limit` rows)
        server._unscored.append((lg, lab))
        server._unscored_rows += len(lab)
        if server._unscored_rows >= active_server.UNSCORED_ROWS:
            server._score()
    assert server.train_stats["correct"] == _per_step(batches)
    assert not server._unscored
    # control: the ties matter (the logits' own argmax counts differently), so the test can tell
    assert int((x.argmax(1) == y).sum()) != _per_step(batches)


def test_a_server_reports_the_accuracy_of_its_steps_softmax():
    server = defended_server([])  # no defense: the batched path
    logits: list[torch.Tensor] = []
    server.head.register_forward_hook(lambda _m, _i, out: logits.append(out.detach().clone()))
    labels = []
    for step in range(3):
        server.train_step(forward_messages(), 0, step)
        labels.append(torch.as_tensor(server.train_labels()[server.schedule.train_ids(0, step)]))
    assert server._unscored  # held until read
    expected = _per_step(list(zip(logits, labels, strict=True)))
    stats = dict(server.train_stats)
    assert stats["correct"] == expected and stats["count"] == sum(len(y) for y in labels)
    (reply,) = server.on_metrics(forward_messages()[:1])
    assert server.train_stats == {"loss": 0.0, "correct": 0, "count": 0} and not server._unscored
