"""``vfl verify``'s checks of a run directory's files: every printed ε recomputed from the ledger and the
resolved config, the hash chain, the config digest and the checkpoints' digests.

Input: the files by their path in the run directory (a directory or a bundle read into bytes), and what
the config gives (``Expected``: the events one epoch attempt releases and a party's own bound, worked
out by the layer above from the strategy the config names). Output: a ``Verdict``, one row per printed
number (printed, recomputed) and per digest, and one line per problem naming what differs.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vfl.config.digest import config_digest, split_config
from vfl.privacy.verify.labels import label_dp
from vfl.privacy.verify.ledger import Ledger, read_ledger
from vfl.privacy.verify.mechanisms import MECHANISMS, epsilon

CONFIG, LEDGER, SUMMARY, METRICS = "config.resolved.yaml", "privacy_ledger.jsonl", "summary.json", "metrics.jsonl"
CKPT = "checkpoints/"
PRINTED = ("epsilon", "epsilon_label", "party_epsilon_worst_case")  # the ε keys summary.json can print
REL_TOL = 1e-6  # the two paths differ in float rounding only (1e-12 measured); a real difference is larger


@dataclass(frozen=True)
class Digest:
    """A checkpoint file stood for by its size and SHA-256 (weights are read once, never kept)."""

    size: int
    sha256: str


Files = Mapping[str, "bytes | Digest"]


@dataclass(frozen=True)
class Expected:
    """What the resolved config gives, from the strategy it names (None: not known, ``why_not`` says why)."""

    events: Callable[[int], list[dict[str, Any]]] | None = None  # one attempt of an epoch, as the config gives it
    party_events: list[dict[str, Any]] | None = None  # one release of a sample, at a party's worst accepted noise
    party_cap: int | None = None  # the releases of one sample a party allows
    why_not: str | None = None


@dataclass(frozen=True)
class Row:
    key: str
    printed: Any
    recomputed: Any
    ok: bool


@dataclass
class Verdict:
    rows: list[Row] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # each one line naming what differs
    notes: list[str] = field(default_factory=list)  # said, not failures (weights not in a bundle ...)
    legacy: str | None = None  # the one line for a run without a hash chain

    @property
    def ok(self) -> bool:
        return self.legacy is None and not self.problems and all(r.ok for r in self.rows)


def _close(printed: Any, recomputed: float) -> bool:
    if printed is None:  # summary.json writes a non-finite number as null
        return not math.isfinite(recomputed)
    if isinstance(printed, bool) or not isinstance(printed, (int, float)):
        return False
    return math.isclose(float(printed), recomputed, rel_tol=REL_TOL, abs_tol=1e-9)


def _get(data: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    cur: Any = data
    for part in dotted.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return default
        cur = cur[part]
    return cur


def _merged(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Events equal but for ``count`` as one event (composition commutes; one dp_accounting event each)."""
    out: dict[str, dict[str, Any]] = {}
    for e in events:
        key = json.dumps({k: v for k, v in e.items() if k != "count"}, sort_keys=True)
        if key in out:
            out[key]["count"] += int(e.get("count", 1))
        else:
            out[key] = {**e, "count": int(e.get("count", 1))}
    return list(out.values())


class _Run:
    """One verification: the parsed files and the verdict being filled."""

    def __init__(self, files: Files, expected: Expected) -> None:
        self.files, self.expected, self.v = files, expected, Verdict()
        self.config: dict[str, Any] = {}
        self.summary: dict[str, Any] = {}
        self.rows: list[dict[str, Any]] = []
        self.ledger = Ledger()
        self.no_ledger = False

    def _bytes(self, name: str) -> bytes:
        data = self.files.get(name, b"")
        if isinstance(data, Digest):
            raise KeyError(name)
        return data

    def row(self, key: str, printed: Any, recomputed: Any, ok: bool | None = None) -> None:
        ok = _close(printed, recomputed) if ok is None else ok
        self.v.rows.append(Row(key, printed, recomputed, ok))

    # ---- the files --------------------------------------------------------------------------------
    def read(self) -> bool:
        from vfl.config.fields import load_yaml

        missing = [n for n in (CONFIG, SUMMARY) if n not in self.files]
        if missing:
            self.v.problems.append(f"{', '.join(missing)} missing: a finished run directory holds {CONFIG} and "
                                   f"{SUMMARY} (and {LEDGER} when it released anything accounted)")
            return False
        text = self._bytes(CONFIG).decode(errors="replace")
        _, body, stated = split_config(text)
        ok = stated is not None and config_digest(body) == stated
        self.row("config digest", (stated or "none")[:16], config_digest(body)[:16], ok)
        if stated is None:
            self.v.problems.append(f"{CONFIG} states no digest (written before config digests)")
        elif not ok:
            self.v.problems.append(f"{CONFIG}: its settings differ from the digest it was written with (edited "
                                   "or truncated); the keys that differ from the ledger are named below")
        try:
            self.config = load_yaml(body) or {}
            self.summary = json.loads(self._bytes(SUMMARY))
            self.rows = [json.loads(x) for x in self._bytes(METRICS).splitlines() if x.strip()]
        except Exception as exc:  # noqa: BLE001 - any unreadable file is one line naming it
            self.v.problems.append(f"cannot read the run's files: {str(exc).splitlines()[0]}")
            return False
        if not isinstance(self.config, dict) or not isinstance(self.summary, dict):
            self.v.problems.append(f"{CONFIG} or {SUMMARY} does not hold a mapping")
            return False
        if stated is not None and self.summary.get("config_sha256") not in (None, stated):
            self.v.problems.append(f"{SUMMARY} was written for the config of digest {self.summary['config_sha256'][:12]}"
                                   f"..., {CONFIG} states {stated[:12]}...: the config changed after the run wrote "
                                   "its summary (a resume that has not finished, or an edit)")
        if LEDGER not in self.files:
            printed = [k for k in PRINTED if self.summary.get(k) is not None]
            if printed:
                self.v.problems.append(f"{LEDGER} is missing but {SUMMARY} prints {', '.join(printed)}")
            else:
                self.v.notes.append(f"no {LEDGER}: the run released nothing an ε accounts for and printed none; "
                                    "its config and checkpoints are checked")
            self.no_ledger = True
            return True
        self.ledger = read_ledger(self._bytes(LEDGER), LEDGER)
        if not self.ledger.chained:
            self.v.legacy = (f"{LEDGER} has no hash chain (written by a vfl version before it): this run cannot be "
                             "verified; a run made now can")
            return False
        self.v.problems += self.ledger.problems
        self.v.notes += self.ledger.notes
        head = self.summary.get("privacy_ledger_head")
        self.row("hash chain head", (head or "none")[:16], (self.ledger.head or "none")[:16],
                 head == self.ledger.head and not self.ledger.problems)
        if head != self.ledger.head:
            self.v.problems.append(f"{SUMMARY} privacy_ledger_head {str(head)[:12]}... is not the digest of the "
                                   f"ledger's last line ({str(self.ledger.head)[:12]}...): records were added, "
                                   "removed or changed after the run finished")
        return True

    # ---- the config against the ledger ---------------------------------------------------------------
    def check_events(self) -> None:
        if self.expected.events is None:
            self.v.problems.append(f"cannot say what the config releases: {self.expected.why_not}")
            return
        for r in self.ledger.ordered():
            want = self.expected.events(r.epoch)
            where = f"{LEDGER} release {r.seq} (epoch {r.epoch})"
            if [e.get("kind") for e in r.events] != [e.get("kind") for e in want]:
                self.v.problems.append(f"{where} records events {[e.get('kind') for e in r.events]}; the config "
                                       f"gives {[e.get('kind') for e in want]}")
                continue
            for got, exp in zip(r.events, want, strict=True):
                mech = MECHANISMS.get(str(got.get("kind")))
                lower = mech.may_lower if mech is not None else ()
                for name in sorted((set(got) | set(exp)) - {"count", "kind"}):
                    g, x = got.get(name), exp.get(name)
                    if g == x or (name in lower and isinstance(g, (int, float)) and isinstance(x, (int, float))
                                  and g <= x):
                        continue
                    key = mech.keys.get(name, name) if mech is not None else name
                    self.v.problems.append(f"{where}: {got.get('kind')} {name} is {g!r} in the ledger but {x!r} by "
                                           f"the config ({key})")

    # ---- the numbers ------------------------------------------------------------------------------
    def eps(self, upto: int) -> float:
        events = [e for r in self.ledger.charged(upto) for e in r.events]
        return epsilon(_merged(events), orders=np.asarray(self.ledger.orders), delta=float(self.delta))

    @property
    def delta(self) -> float:
        return float(_get(self.config, "privacy.delta", 1e-5))

    def check_feature_epsilon(self) -> None:
        accounted = any(r.events for r in self.ledger.ordered())
        if not accounted:
            if self.summary.get("epsilon") is not None:
                self.v.problems.append(f"{SUMMARY} prints epsilon {self.summary['epsilon']!r} but the ledger holds "
                                       "no release with privacy events")
            return
        last = max((r.seq for r in self.ledger.ordered() if r.events), default=0)
        total = self.eps(last)
        if "epsilon" not in self.summary:
            self.v.problems.append(f"{SUMMARY} prints no epsilon; the ledger's releases compose to {total:.6g}")
        else:
            self.row("epsilon", self.summary["epsilon"], total)
        scope = self.summary.get("epsilon_by_scope")
        if isinstance(scope, Mapping) and "feature" in scope:
            self.row("epsilon_by_scope.feature", scope["feature"], total)
        for row in self.rows:
            release = self.ledger.newest_of(int(row.get("epoch", -1)))
            if release is None or "epsilon" not in row:
                if release is not None and release.events:
                    self.v.problems.append(f"{METRICS} row of epoch {row.get('epoch')} prints no epsilon")
                continue
            self.row(f"metrics[{row['epoch']}].epsilon", row["epsilon"], self.eps(release.seq))

    def check_label_epsilon(self) -> None:
        defenses = self.config.get("defenses") or []
        orders, delta = self.ledger.orders, self.delta
        fresh = [r.epoch for r in self.ledger.ordered() if r.fresh]
        restores = self.ledger.restores
        redone = max(len([r for r in restores if r.get("reason") in ("restart", "resume")]),
                     len(fresh) - len(set(fresh)))
        redrawn = sum(r.get("checkpoint_epoch") is None and r.get("epoch") != -1 for r in restores)
        epochs = int(_get(self.config, "train.epochs", 0))
        whole = label_dp(defenses, attempts=epochs + redone, draws=1 + redrawn, orders=orders, delta=delta)
        if whole is None:
            if self._labels_only():  # the strategy's own label mechanism (trees): its ε is the ledger's
                self.check_ledger_label_epsilon()
            elif self.summary.get("epsilon_label") is not None:
                self.v.problems.append(f"{SUMMARY} prints epsilon_label but the config's defenses have no label DP")
            return
        self.row("epsilon_label", self.summary.get("epsilon_label"), whole[0])
        if "delta_label" in self.summary:
            self.row("delta_label", self.summary["delta_label"], whole[1])
        scope = self.summary.get("epsilon_by_scope")
        if isinstance(scope, Mapping) and "label" in scope:
            self.row("epsilon_by_scope.label", scope["label"], whole[0])
        for row in self.rows:
            if "epsilon_label" in row:
                per = label_dp(defenses, attempts=int(row["epoch"]) + 1, draws=1, orders=orders, delta=delta)
                self.row(f"metrics[{row['epoch']}].epsilon_label", row["epsilon_label"], per[0] if per else math.nan)

    def _labels_only(self) -> bool:
        kinds = {str(e.get("kind")) for r in self.ledger.ordered() for e in r.events}
        return bool(kinds) and all(k in MECHANISMS and MECHANISMS[k].labels for k in kinds)

    def check_ledger_label_epsilon(self) -> None:
        """A label ε the ledger's own events give (``epsilon_label`` = ``epsilon``), whole and per row."""
        last = max((r.seq for r in self.ledger.ordered() if r.events), default=0)
        self.row("epsilon_label", self.summary.get("epsilon_label"), self.eps(last))
        for row in self.rows:
            release = self.ledger.newest_of(int(row.get("epoch", -1)))
            if release is not None and "epsilon_label" in row:
                self.row(f"metrics[{row['epoch']}].epsilon_label", row["epsilon_label"], self.eps(release.seq))

    def check_party_epsilon(self) -> None:
        if "party_epsilon_worst_case" not in self.summary:
            return
        exp = self.expected
        if exp.party_events is None or exp.party_cap is None:
            self.v.problems.append(f"{SUMMARY} prints party_epsilon_worst_case but the config gives no party bound"
                                   f"{': ' + exp.why_not if exp.why_not else ''}")
            return
        self.row("party_release_cap", self.summary.get("party_release_cap"), float(exp.party_cap))
        events = [{**e, "count": exp.party_cap} for e in exp.party_events]
        worst = epsilon(_merged(events), orders=np.asarray(self.ledger.orders), delta=self.delta)
        self.row("party_epsilon_worst_case", self.summary["party_epsilon_worst_case"], worst)

    def check_rows(self) -> None:
        epochs = self.summary.get("epochs")
        have = sorted(int(r.get("epoch", -1)) for r in self.rows)
        if isinstance(epochs, int) and have != list(range(epochs)):
            self.v.problems.append(f"{METRICS} holds the rows of epochs {have}; {SUMMARY} reports {epochs} epoch(s)")

    # ---- checkpoints --------------------------------------------------------------------------------
    def check_checkpoints(self) -> None:
        folders = sorted({name.split("/")[1] for name in self.files if name.startswith(CKPT) and name.count("/") == 2})
        for folder in folders:
            base = f"{CKPT}{folder}/"
            try:
                listed = json.loads(self._bytes(base + "manifest.json"))["files"]
            except (KeyError, ValueError, TypeError):
                self.v.problems.append(f"{base}manifest.json is missing or unreadable")
                continue
            checked, absent = 0, []
            for fname, want in listed.items():
                data = self.files.get(base + fname)
                if data is None:
                    absent.append(fname)
                    continue
                checked += 1
                got = data if isinstance(data, Digest) else Digest(len(data), hashlib.sha256(data).hexdigest())
                if got.size != want.get("bytes") or got.sha256 != want.get("sha256"):
                    self.v.problems.append(f"{base}{fname} differs from its manifest (size or SHA-256)")
            self.row(f"checkpoint {folder}", f"{len(listed)} files", f"{checked} checked",
                     not any(p.startswith(base) for p in self.v.problems))
            if absent:
                self.v.notes.append(f"{base}: {', '.join(sorted(absent))} not here (a bundle holds no weights): "
                                    "their digests are listed, not checked")
            self.bind_checkpoint(base)

    def bind_checkpoint(self, base: str) -> None:
        """The checkpoint's accountant covers the release of its own epoch that committed it."""
        try:
            engine = json.loads(self._bytes(base + "engine.json"))
            seq, epoch = int(engine["privacy_ledger_seq"]), int(engine["epoch"])
        except (KeyError, ValueError, TypeError):
            return
        release = self.ledger.releases.get(seq)
        if seq and (release is None or release.epoch != epoch):
            self.v.problems.append(f"{base}engine.json covers ledger release {seq}, which is not a release of its "
                                   f"epoch {epoch} in {LEDGER}")


def verify_files(files: Files, *, expected: Expected) -> Verdict:
    """Every check of ``vfl verify`` on a run's files (paths relative to the run directory)."""
    run = _Run(files, expected)
    if not run.read():
        return run.v
    if run.no_ledger:
        run.check_rows()
        run.check_checkpoints()
        return run.v
    run.check_events()
    try:
        run.check_feature_epsilon()
        run.check_label_epsilon()
        run.check_party_epsilon()
    except KeyError as exc:  # an event kind without a verifier
        run.v.problems.append(str(exc.args[0]))
    run.check_rows()
    run.check_checkpoints()
    return run.v
