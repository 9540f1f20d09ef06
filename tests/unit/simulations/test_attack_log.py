"""``vfl report`` talks while it works: one line per finished attack in a log, as runs print one per epoch."""

from __future__ import annotations

import io

from simulations.cli.epoch_log import AttackLog
from simulations.report.render import AttackStep


def test_a_log_gets_one_flushed_line_per_finished_attack_and_nothing_when_one_starts():
    out = io.StringIO()
    log = AttackLog(lines=True, stream=out)
    log(AttackStep(1, 3, "label_inference"))
    assert out.getvalue() == ""
    log(AttackStep(1, 3, "label_inference", 12.34, results=1))
    log(AttackStep(2, 3, "backdoor"))
    log(AttackStep(2, 3, "backdoor", 0.01, skipped="needs attack.backdoor_party"))
    log.close()
    assert out.getvalue().splitlines() == ["attack 1/3 label_inference 12.3s", "attack 2/3 backdoor skipped"]


def test_on_a_terminal_the_bar_counts_attacks_and_closes_after_the_last(monkeypatch):
    import tqdm.auto

    made = []

    class Bar:
        def __init__(self, **kw):
            self.kw, self.n, self.post, self.closed = kw, 0, [], False
            made.append(self)

        def set_postfix_str(self, s):
            self.post.append(s)

        def update(self, k):
            self.n += k

        def close(self):
            self.closed = True

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    log = AttackLog(lines=False)
    for i, name in enumerate(("a", "b"), 1):
        log(AttackStep(i, 2, name))
        log(AttackStep(i, 2, name, 1.0))
    (bar,) = made
    assert bar.kw["total"] == 2 and bar.n == 2 and bar.post == ["a", "b"] and bar.closed
