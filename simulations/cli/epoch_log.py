"""One plain line per epoch for logs (nohup, SLURM, CI): what the progress bar shows on a terminal
(on stdout, before the summary JSON line: stderr keeps its contract of one line per failure).

    epoch 4/20 loss 0.4123 acc 0.9031 ε 1.25 MB 0.412 3.1s

``epoch k/N`` counts from 1 (metrics.jsonl's ``epoch`` is k-1); ``acc`` is the test accuracy of
that epoch (``-`` when it was not evaluated, see ``train.eval_every``); ``ε`` the accountant's
epsilon so far (absent without a privacy mechanism); then the strategy's and the active defenses'
headline keys present in the row (``headline_keys``: e.g. ``epsilon_label 1``, ``leak 0.52``);
``MB`` the epoch's training bytes up + down (10^6 bytes); the last figure the epoch's seconds.
Every line is flushed, so ``tail -f`` sees it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, TextIO


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def wants_epoch_lines(*, no_progress: bool, stream: Any = None) -> bool:
    """Lines instead of bars: when stdout is not a terminal (a log file, a pipe) or bars are off."""
    return no_progress or not _isatty(sys.stdout if stream is None else stream)


def quiet_library_bars() -> None:
    """With epoch lines, no Hugging Face bars (transformers' "Loading weights", hub transfers) on stderr
    to interleave with them: off in this process and in the Ray actors it starts (they inherit the
    environment). ``HF_HUB_DISABLE_PROGRESS_BARS=0`` set by the user keeps them."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1" and "transformers" in sys.modules:  # read at its import
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


def _epsilon_mark(stream: Any) -> str:
    """``ε`` where the stream can encode it, else ``eps`` (a latin-1 or ASCII log must not fail)."""
    encoding = getattr(stream, "encoding", None)
    if encoding is None:  # a text buffer (StringIO): no bytes involved
        return "ε"
    try:
        "ε".encode(encoding)
        return "ε"
    except (LookupError, UnicodeEncodeError):
        return "eps"


def _num(value: Any, spec: str) -> str:
    return "-" if not isinstance(value, (int, float)) or isinstance(value, bool) else format(value, spec)


def headline_keys(cfg: Any) -> tuple[str, ...]:
    """The headline keys of ``cfg``'s strategy, then of each of its defenses, each once (the classes'
    ``headline``): what ``vfl run`` shows of the privacy result beside the common keys."""
    from vfl.engine.strategy import STRATEGIES
    from vfl.privacy.defenses import DEFENSES

    name = str(getattr(cfg, "strategy", ""))
    keys = list(STRATEGIES.get(name).headline) if name in STRATEGIES else []
    for entry in getattr(cfg, "defenses", ()):
        if entry.get("kind") in DEFENSES:
            keys += DEFENSES.get(entry["kind"]).headline
    return tuple(dict.fromkeys(keys))


def final_keys(cfg: Any) -> tuple[str, ...]:
    """Summary keys of ``cfg``'s strategy that ``vfl run``'s final line adds (its ``final_keys``)."""
    from vfl.engine.strategy import STRATEGIES

    name = str(getattr(cfg, "strategy", ""))
    return tuple(STRATEGIES.get(name).final_keys) if name in STRATEGIES else ()


def round_name(cfg: Any) -> str:
    """What one engine epoch is for ``cfg``'s strategy (its ``round_name``: ``tree`` for boosting)."""
    from vfl.engine.strategy import STRATEGIES

    name = str(getattr(cfg, "strategy", ""))
    return str(STRATEGIES.get(name).round_unit(cfg)) if name in STRATEGIES else "epoch"


def epoch_line(record: dict[str, Any], *, total: int, eps_mark: str = "ε", headline: tuple[str, ...] = (),
               unit: str = "epoch") -> str:
    """The log line of one metrics row (see the module docstring for the fields; ``unit``: what a row
    is, ``tree`` for a boosting round)."""
    parts = [f"{unit} {int(record['epoch']) + 1}/{total}", f"loss {_num(record.get('train_loss'), '.4f')}",
             f"acc {_num(record.get('test_acc'), '.4f')}"]
    label_only = record.get("epsilon") is not None and record.get("epsilon_label") == record.get("epsilon")
    if record.get("epsilon") is not None:  # a label-only ε (trees' label DP) is named so
        parts.append(f"{eps_mark}{'_label' if label_only else ''} {_num(record['epsilon'], '.4g')}")
    skip = {"epsilon", "epsilon_label"} if label_only else {"epsilon"}
    parts += [f"{k} {record[k] if isinstance(record[k], str) else _num(record[k], '.4g')}"  # a note: as it is
              for k in headline if k not in skip and record.get(k) is not None]
    mb = (record.get("bytes_up") or 0) + (record.get("bytes_down") or 0)
    parts.append(f"MB {mb / 1e6:.3f}")
    if isinstance(record.get("epoch_s"), (int, float)):
        parts.append(f"{record['epoch_s']:.1f}s")
    return " ".join(parts)


@dataclass
class EpochLog:
    """An ``on_epoch_end`` callback that prints ``epoch_line`` (with ``prefix``) to ``stream``;
    ``total`` defaults to the engine's ``train.epochs``, ``headline`` to ``headline_keys`` of its config."""

    total: int | None = None
    prefix: str = ""
    stream: TextIO | None = None
    headline: tuple[str, ...] | None = None

    def __call__(self, epoch: int, record: dict[str, Any], engine: Any = None) -> None:
        out = self.stream if self.stream is not None else sys.stdout
        total = self.total if self.total is not None else engine.cfg.train.epochs
        keys = self.headline if self.headline is not None else headline_keys(engine.cfg) if engine is not None else ()
        unit = round_name(engine.cfg) if engine is not None else "epoch"
        line = self.prefix + epoch_line(record, total=total, eps_mark=_epsilon_mark(out), headline=keys, unit=unit)
        print(line, file=out, flush=True)


@dataclass
class PhaseLog:
    """A ``vfl.engine.progress`` listener: the run's long phases (starting the nodes, evaluation, the leak
    scoring, generation: each once it has run a few seconds, then with its seconds) and, with ``lines``, an
    epoch's step progress every 20 s, flushed on ``stream`` (stdout) between the epoch lines; on a terminal
    (``lines`` false) the phases only, above the bar (the bar shows the steps)."""

    lines: bool
    stream: TextIO | None = None

    def __call__(self, text: str, kind: str = "phase") -> None:
        if kind == "step" and not self.lines:
            return
        out = self.stream if self.stream is not None else sys.stdout
        if self.lines:
            print(f"  {text}", file=out, flush=True)
        else:
            from tqdm.auto import tqdm

            tqdm.write(f"  {text}", file=out)


class AttackLog:
    """``vfl report``'s progress: an ``on_attack`` callback (``simulations.report.render.AttackStep``).
    As a run's epochs: one flushed line per finished attack on ``stream`` (stdout) in a log, a bar
    on stderr on a terminal (its description the attack now running)."""

    def __init__(self, *, lines: bool, stream: TextIO | None = None) -> None:
        self.lines, self.stream = lines, stream
        self._bar: Any = None

    def __call__(self, step: Any) -> None:
        if self.lines:
            if step.seconds is not None:
                print(step.line(), file=self.stream if self.stream is not None else sys.stdout, flush=True)
            return
        if self._bar is None:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=step.total, desc="report", unit="attack", leave=False)
        if step.seconds is None:
            self._bar.set_postfix_str(step.name)
        else:
            self._bar.update(1)
            if step.index == step.total:
                self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
