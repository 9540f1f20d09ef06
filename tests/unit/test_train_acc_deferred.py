"""The server counts train_acc for many steps at once when no label defense decodes its logits
(#29.1: ~12 us a step); the count is the one step by step: argmax(softmax(logits)) == y, ties included."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from parties.defenses.server_labels import ServerLabels
from parties.vertical import ActiveServer


def _server() -> SimpleNamespace:
    s = SimpleNamespace(defenses=[], server_labels=ServerLabels([], noise=lambda: None),
                        ACC_STEPS=ActiveServer.ACC_STEPS, ACC_ELEMENTS=ActiveServer.ACC_ELEMENTS)
    ActiveServer.reset_metrics(s)  # type: ignore[arg-type]
    s._count_correct = lambda logits, y: ActiveServer._count_correct(s, logits, y)  # type: ignore[arg-type]
    s._flush_correct = lambda: ActiveServer._flush_correct(s)  # type: ignore[arg-type]
    return s


def test_deferred_count_equals_the_step_by_step_count():
    gen = torch.Generator().manual_seed(0)
    s = _server()
    want = 0
    for step in range(ActiveServer.ACC_STEPS * 2 + 7):  # flushes on the way, rows left for the read
        logits = torch.randn(50, 6, generator=gen) * (10.0 if step % 3 else 1e-3)
        logits[:10, 1] = logits[:10, 0]  # exact ties: argmax takes the first
        logits[10:20] = 88.0 + torch.randn(10, 6, generator=gen) * 1e-6  # softmax rounding ties
        y = torch.randint(0, 6, (50,), generator=gen)
        want += int((torch.softmax(logits, 1).argmax(1) == y).sum())
        s._count_correct(logits, y)
    assert len(s._acc_rows) == 7 and s.train_stats["correct"] < want  # some steps not counted yet
    s._flush_correct()
    assert s.train_stats["correct"] == want and not s._acc_rows


def test_rows_are_flushed_by_size():
    s = _server()
    s._count_correct(torch.zeros(ActiveServer.ACC_ELEMENTS // 4, 4), torch.zeros(ActiveServer.ACC_ELEMENTS // 4, dtype=torch.long))
    assert not s._acc_rows and s.train_stats["correct"] == ActiveServer.ACC_ELEMENTS // 4
