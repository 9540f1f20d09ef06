"""`vfl report`'s figures are usable in a paper like the run's plots: a PDF beside every PNG, and the
curves' x axis is the epoch 1..N as the run prints it (``epoch 1/3``), with integer ticks."""

from __future__ import annotations

from simulations.report import figures
from simulations.report.results import AttackResult

ROWS = [{"epoch": e, "train_acc": 0.5 + e / 10, "test_acc": 0.4 + e / 10, "cum_bytes_up": 1e6 * (e + 1),
         "cum_bytes_down": 5e5 * (e + 1)} for e in range(3)]


def test_curves_count_epochs_from_1_as_printed_and_write_a_pdf_beside_each_png(tmp_path, monkeypatch):
    drawn = {}
    real_save = figures._save

    def keep(fig, path):
        drawn[path.name] = [list(line.get_xdata()) for line in fig.axes[0].lines]
        ticks = fig.axes[0].get_xticks()
        assert all(float(t).is_integer() for t in ticks), ticks  # no 0.5 epochs on the axis
        return real_save(fig, path)

    monkeypatch.setattr(figures, "_save", keep)
    written = figures.curves(ROWS, tmp_path, "demo (pbm) M=4 seed=0 b=16 β=0.25")
    assert drawn["accuracy.png"] == [[1, 2, 3], [1, 2, 3]]  # as printed: epoch 1/3 .. 3/3 (metrics.jsonl: 0..2)
    assert drawn["communication.png"] == [[1, 2, 3], [1, 2, 3]]
    assert [p.rsplit("/", 1)[-1] for p in written] == ["accuracy.png", "communication.png"]  # what report.md embeds
    for name in ("accuracy", "communication"):
        assert (tmp_path / f"{name}.pdf").read_bytes().startswith(b"%PDF")


def test_the_attack_figure_has_its_pdf_too(tmp_path):
    results = [AttackResult("label_inference", "accuracy", 0.93, 0.5)]
    png = figures.attacks(results, tmp_path)
    assert png is not None and png.endswith("attacks.png")
    assert (tmp_path / "attacks.pdf").read_bytes().startswith(b"%PDF")
