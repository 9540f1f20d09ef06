"""Figures a paper can use: a one-epoch run has one tick at epoch 1 (not -0.045..0.045), split-LLM runs
draw their loss per logged window of steps, titles fit in two lines, the report's attack panels are a
grid, a narrow ε range has a linear axis, bytes up stay visible beside bytes down, a sweep draws its table."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from simulations.report import figures, plots
from simulations.report.results import AttackResult
from strategies.base.llm import step_windows

LONG = "split-lora-fig (split-lora) M=1 seed=1 lora_rank=2 lora_alpha=16 max_len=16 leak_window=16 dropout=0.1 x=1"


def _row(e: int, **extra) -> dict:
    return {"epoch": e, "train_loss": 0.7, "test_loss": 0.71, "train_acc": 0.5, "test_acc": 0.5,
            "cum_bytes_up": 90584.0 * (e + 1), "cum_bytes_down": 90989.0 * (e + 1), **extra}


def test_one_epoch_has_one_integer_tick_at_1_with_margin():
    fig = plots.curves_figure([_row(0)], (("train_acc", "train", {}),), ylabel="acc", title="t")
    ax = fig.axes[0]
    assert ax.get_xlim() == (0.5, 1.5)
    assert [t for t in ax.get_xticks() if 0.5 <= t <= 1.5] == [1.0]  # old: -0.045 .. 0.045 around 0
    plt.close(fig)


def test_step_windows_average_every_n_steps_and_close_a_short_last_window():
    assert step_windows([1.0, 3.0, 2.0, 4.0, 6.0], every=2, first_step=10) == [[12, 2.0], [14, 3.0], [15, 6.0]]
    assert step_windows([], every=10, first_step=0) == []
    assert step_windows([0.5, 0.7], every=10, first_step=0) == [[2, pytest.approx(0.6)]]  # fewer steps than N


def test_an_llm_run_plots_its_loss_per_step_with_epoch_ends(tmp_path):
    rows = [_row(0, step_loss=[[3, 0.68], [6, 0.69], [9, 0.71], [12, 0.66]]),
            _row(1, step_loss=[[15, 0.67], [18, 0.69], [21, 0.68], [24, 0.68]])]
    fig = plots.loss_figure(rows, title=LONG)
    ax = fig.axes[0]
    train, test = ax.lines[0], ax.lines[1]
    assert list(train.get_xdata()) == [3, 6, 9, 12, 15, 18, 21, 24] and "every 3 steps" in train.get_label()
    assert list(test.get_xdata()) == [12, 24]  # each epoch's test loss at its last step
    assert "training step" in ax.get_xlabel()
    plt.close(fig)
    written = plots.plot_run(rows, tmp_path, title=LONG)
    assert (tmp_path / "loss.png") in written and (tmp_path / "loss.pdf").read_bytes().startswith(b"%PDF")


def test_a_run_without_step_loss_keeps_its_loss_per_epoch():
    fig = plots.loss_figure([_row(0), _row(1)], title="t")
    assert [list(line.get_xdata()) for line in fig.axes[0].lines] == [[1, 2], [1, 2]]
    plt.close(fig)


def test_titles_take_at_most_two_lines():
    assert plots.short_title("short") == "short"
    title = plots.short_title(LONG * 3)
    assert title.count("\n") == 1 and title.endswith("…") and all(len(x) <= 58 for x in title.splitlines())


def test_the_report_attack_panels_are_a_grid_of_4_columns(tmp_path, monkeypatch):
    shapes = []
    real = figures._save
    monkeypatch.setattr(figures, "_save", lambda fig, path: (shapes.append(
        (fig.get_size_inches().tolist(), sum(ax.get_visible() for ax in fig.axes), len(fig.axes))), real(fig, path))[1])
    results = [AttackResult(f"attack_number_{i}", "m", 0.6, 0.5) for i in range(12)]
    figures.attacks(results, tmp_path)
    (size, visible, axes), = shapes
    assert visible == axes == 12 and size[0] <= 2.4 * 4 + 1e-9 and size[1] == pytest.approx(2.7 * 3 + 0.5)  # old: 23.8 in wide
    shapes.clear()
    figures.attacks(results[:5], tmp_path)
    assert shapes[0][1:] == (5, 8)  # 2 rows of 4, the 3 spare panels hidden


def test_log_axes_only_where_values_span_a_decade():
    fig, ax = plt.subplots()
    plots.log_or_linear(ax, [66.0, 95.0, 124.0])  # the ε(δ) of a 1-epoch demo run
    assert ax.get_yscale() == "linear"
    plots.log_or_linear(ax, [0.5, 80.0])
    assert ax.get_yscale() == "log"
    plots.log_or_linear(ax, [0.0, 80.0])  # a zero has no log
    assert ax.get_yscale() == "linear"
    plt.close(fig)


def test_bytes_up_stays_visible_beside_equal_bytes_down_and_starts_at_zero():
    fig = plots.curves_figure([_row(0)], plots.UP_DOWN, ylabel="MB", title="t", scale=1e-6, from_zero=True)
    ax = fig.axes[0]
    up, down = ax.lines
    assert up.get_label().startswith("up") and up.get_zorder() > down.get_zorder()  # up drawn over down
    assert (up.get_marker(), up.get_linestyle()) != (down.get_marker(), down.get_linestyle())
    assert down.get_markerfacecolor() == "none"  # hollow: the dot of up shows through
    assert ax.get_ylim()[0] == 0
    plt.close(fig)


def test_a_sweep_draws_mean_and_std_of_each_metric(tmp_path):
    rows = [{"params.b": b, "n": 3, "final_test_acc_mean": a, "final_test_acc_std": s, "wall_s_mean": None,
             "wall_s_std": None} for b, a, s in ((8, 0.90, 0.01), (64, 0.95, None))]
    png = plots.sweep_figure(rows, ["params.b"], ["final_test_acc", "wall_s"], tmp_path / "sweep.png")
    assert png == tmp_path / "sweep.png" and (tmp_path / "sweep.pdf").read_bytes().startswith(b"%PDF")
    assert plots.sweep_figure([{"n": 1, "x_mean": None}], [], ["x"], tmp_path / "none.png") is None


def test_epsilon_delta_title_is_the_short_scope(tmp_path, monkeypatch):
    class Acc:  # what figures.privacy reads of an accountant: its orders and composed RDP
        orders = [1.5, 2.0, 4.0, 8.0, 16.0, 32.0]

        def rdp(self):
            return [0.5 * a for a in self.orders]

    titles = []
    real = figures._save
    monkeypatch.setattr(figures, "_save", lambda fig, path: (titles.append(fig.axes[0].get_title()), real(fig, path))[1])
    figures.privacy(Acc(), 1e-5, "per-release feature privacy (PBM-VFL Thm 6.1)", tmp_path)
    assert titles[0] == "the run\nε(δ): per-release feature privacy (PBM-VFL Thm 6.1)"  # old: the whole scope, 5 lines
    assert titles[1] == "RDP curve of the run"


def test_a_sweep_axis_names_only_the_swept_key_and_the_title_the_fixed_ones(tmp_path, monkeypatch):
    seen = {}

    def keep(fig, path, **kw):
        ax = fig.axes[0]
        seen.update(ticks=[t.get_text() for t in ax.get_xticklabels()], xlabel=ax.get_xlabel(), title=fig._suptitle.get_text())
        plt.close(fig)
        return path

    monkeypatch.setattr(plots, "save", keep)
    rows = [{"params.b": b, "train.epochs": 3, "n": 2, "final_test_acc_mean": 0.9, "final_test_acc_std": 0.01} for b in (8, 64)]
    plots.sweep_figure(rows, ["params.b", "train.epochs"], ["final_test_acc"], tmp_path / "sweep.png")
    assert seen["ticks"] == ["8", "64"] and seen["xlabel"] == "params.b"  # old-style labels: "params.b=8 train.epochs=3"
    assert seen["title"] == "fixed: train.epochs=3\nmean ± std over 2 seed(s) per setting"


def test_a_causal_lm_run_draws_perplexity_and_rouge_and_no_empty_accuracy_panel(tmp_path):
    """ushape-lora's rows have no accuracy: the plots are its loss per step, perplexity and ROUGE-L."""
    rows = [{"epoch": e, "train_loss": 5.0 - e, "train_ppl": 150.0 / (e + 1), "test_loss": 5.1 - e,
             "test_ppl": 160.0 / (e + 1), "rouge_l": 0.1 * e, "train_acc": None, "test_acc": None,
             "step_loss": [[4 * e + 2, 5.2 - e], [4 * e + 4, 5.0 - e]], "cum_bytes_up": 1e5 * e,
             "cum_bytes_down": 1e5 * e} for e in range(3)]
    written = {p.name for p in plots.plot_run(rows, tmp_path, title="u")}
    assert written == {f"{n}.{ext}" for n in ("loss", "perplexity", "rouge_l", "bytes") for ext in ("png", "pdf")}
