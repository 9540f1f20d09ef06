"""The per-epoch log line: its fields, when it is printed, and a log stream that cannot encode ε."""

from __future__ import annotations

import io
import os
from types import SimpleNamespace

from simulations.cli.epoch_log import EpochLog, epoch_line, wants_epoch_lines

ROW = {"epoch": 3, "train_loss": 0.41234, "test_acc": 0.90312, "epsilon": 1.2549, "bytes_up": 300_000,
       "bytes_down": 112_000, "epoch_s": 3.14}


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_line_fields() -> None:
    assert epoch_line(ROW, total=20) == "epoch 4/20 loss 0.4123 acc 0.9031 ε 1.255 MB 0.412 3.1s"
    no_eval = {**ROW, "test_acc": None, "epsilon": None}
    assert epoch_line(no_eval, total=20) == "epoch 4/20 loss 0.4123 acc - MB 0.412 3.1s"


def test_lines_off_a_terminal_only_unless_bars_are_off() -> None:
    assert wants_epoch_lines(no_progress=False, stream=io.StringIO())  # a log file / pipe
    assert not wants_epoch_lines(no_progress=False, stream=_Tty())  # the bar shows instead
    assert wants_epoch_lines(no_progress=True, stream=_Tty())


def test_epoch_log_prints_with_the_engines_epoch_count_and_an_ascii_fallback() -> None:
    engine = SimpleNamespace(cfg=SimpleNamespace(train=SimpleNamespace(epochs=7)))
    out = io.StringIO()
    EpochLog(prefix="  ", stream=out)(3, ROW, engine)
    assert out.getvalue() == "  epoch 4/7 loss 0.4123 acc 0.9031 ε 1.255 MB 0.412 3.1s\n"
    ascii_log = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    EpochLog(total=20, stream=ascii_log)(3, ROW, engine)  # must not raise UnicodeEncodeError
    ascii_log.seek(0)
    assert ascii_log.read().startswith("epoch 4/20 loss 0.4123 acc 0.9031 eps 1.255")


def test_plots_have_integer_0_based_epochs_a_loss_panel_delta_and_pdfs(tmp_path):
    import vfl
    from simulations.report.plots import plot_run, run_title

    rows = [{"epoch": e, "train_loss": 1.0 / (e + 1), "train_acc": 0.5, "test_acc": 0.6, "cum_bytes_up": 1e6 * e,
             "cum_bytes_down": 5e5 * e, "epsilon": 2.0 * (e + 1), "delta": 1e-5} for e in range(3)]
    written = plot_run(rows, tmp_path, title="t")
    names = sorted(p.name for p in written)
    assert names == sorted(f"{n}.{ext}" for n in ("accuracy", "loss", "bytes", "epsilon") for ext in ("png", "pdf"))
    assert all(p.stat().st_size > 1000 for p in written)
    assert (tmp_path / "epsilon.pdf").read_bytes().startswith(b"%PDF")
    title = run_title(vfl.resolve("demo"))
    assert title == "demo (pbm) M=4 seed=0 20 epochs b=16 β=0.25"  # threshold 0 (automatic) is not shown
    assert run_title(vfl.resolve("demo", overrides=["params.threshold=3"])).endswith("β=0.25 threshold=3")


def test_epoch_lines_turn_the_hugging_face_bars_off(monkeypatch) -> None:
    """transformers' "Loading weights" bar (stderr) interleaved with the epoch lines of a log; with lines on,
    `vfl run` turns it off here and, through the environment, in its Ray actors (the control: before)."""
    import transformers.utils.logging as hf_logging

    from simulations.cli.main import main

    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    monkeypatch.setattr(hf_logging, "_tqdm_active", True)
    assert hf_logging.is_progress_bar_enabled()
    assert main(["run", "demo", "--transport", "inprocess", "--no-progress", "--dry-run"]) == 0
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1" and not hf_logging.is_progress_bar_enabled()
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")  # the user's choice stands
    monkeypatch.setattr(hf_logging, "_tqdm_active", True)
    assert main(["run", "demo", "--transport", "inprocess", "--no-progress", "--dry-run"]) == 0
    assert hf_logging.is_progress_bar_enabled()


def test_a_partial_leak_says_so_in_the_epoch_line():
    """params.leak_theta_steps: 0 switches the θ-difference attack off: the line says the leak is partial."""
    from simulations.cli.epoch_log import epoch_line

    row = {"epoch": 0, "train_loss": 0.68, "test_acc": 0.6, "leak": 0.596, "leak_partial": "no leak_theta"}
    line = epoch_line(row, total=1, headline=("leak", "leak_partial"))
    assert "leak 0.596 leak_partial no leak_theta" in line
    assert "leak_partial" not in epoch_line({**row, "leak_partial": None}, total=1, headline=("leak", "leak_partial"))
