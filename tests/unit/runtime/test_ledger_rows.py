"""``CommLedger.record_rows`` (the grid's drain hands the hosts' rows in one call) counts exactly what
the per-row ``record`` counted before it (kept below as the reference): every reader's view (totals,
per party, per kind and direction, this epoch's rows and per-round bytes, the checkpoint state) is the same."""

from __future__ import annotations

import random

from vfl.runtime.ledger import CONTROL, DOWN, MIXED, UP, CommLedger


def _reference_record(ledger: CommLedger, *, phase: str, direction: str, party: str, round: str, nbytes: int,
                      payload: int, kind: str = "") -> None:
    """``CommLedger.record`` as it was before ``record_rows`` (one row, Counter.add)."""
    ledger.by_key[(phase, direction, party)].add(nbytes, payload)
    if kind:
        row = ledger.by_kind.get(kind)
        if row is None:
            row = ledger.by_kind[kind] = {"direction": direction, "messages": 0, "bytes": 0, "payload": 0}
        elif row["direction"] != direction:
            row["direction"] = MIXED
        split = ledger.by_kind_direction.setdefault(kind, {}).setdefault(
            direction, {"messages": 0, "bytes": 0, "payload": 0})
        for r in (row, split):
            r["messages"] += 1
            r["bytes"] += nbytes
            r["payload"] += payload
    ledger._epoch[(phase, direction)].add(nbytes, payload)
    if ledger.keep_rounds and direction != CONTROL:
        ledger.by_round.setdefault(round, {UP: 0, DOWN: 0})[direction] += nbytes


def _rows(seed: int) -> list[tuple[str, str, str, str, int, int, str]]:
    rnd = random.Random(seed)
    out = []
    for i in range(400):
        direction = rnd.choice([UP, DOWN, CONTROL])
        kind = rnd.choice(["train.fwd", "train.fwd", "eval.fwd", "query.metrics", ""])  # "": not kept per kind
        nbytes = rnd.randrange(50, 5000)
        out.append((rnd.choice(["train", "eval", "setup"]), direction, rnd.choice(["party0", "party1", "*"]),
                    f"train:0:{i // 6}", nbytes, rnd.randrange(0, nbytes), kind))
    return out


def _view(ledger: CommLedger) -> dict[str, object]:
    return {"state": ledger.state(), "by_round": ledger.by_round, "epoch": ledger.epoch_totals(),
            "epoch_eval": ledger.epoch_totals("eval"), "totals": ledger.totals(), "per_party": ledger.per_party(),
            "kinds": ledger.by_kind, "kinds_direction": ledger.by_kind_direction}


def test_record_rows_counts_what_record_counts_row_by_row():
    for seed in range(3):
        rows = _rows(seed)
        one, batch = CommLedger(), CommLedger()
        for phase, direction, party, rnd, nbytes, payload, kind in rows:
            _reference_record(one, phase=phase, direction=direction, party=party, round=rnd, nbytes=nbytes,
                              payload=payload, kind=kind)
        batch.record_rows(rows[:150])
        batch.record_rows(iter(rows[150:]))  # any iterable, e.g. the grid's generator
        assert _view(batch) == _view(one)
        assert one.totals()["messages_up"] > 0 and any(v["direction"] == "mixed" for v in one.by_kind.values())


def test_record_is_one_row_of_record_rows():
    rows = _rows(3)
    one, ref = CommLedger(), CommLedger()
    for phase, direction, party, rnd, nbytes, payload, kind in rows:
        one.record(phase=phase, direction=direction, party=party, round=rnd, nbytes=nbytes, payload=payload, kind=kind)
        _reference_record(ref, phase=phase, direction=direction, party=party, round=rnd, nbytes=nbytes,
                          payload=payload, kind=kind)
    assert _view(one) == _view(ref)


def test_record_rows_without_rounds_kept():
    rows = _rows(7)
    one, batch = CommLedger(keep_rounds=False), CommLedger(keep_rounds=False)
    for phase, direction, party, rnd, nbytes, payload, kind in rows:
        _reference_record(one, phase=phase, direction=direction, party=party, round=rnd, nbytes=nbytes,
                          payload=payload, kind=kind)
    batch.record_rows(rows)
    assert _view(batch) == _view(one) and batch.by_round == {}


def test_record_rows_keeps_first_seen_order():
    """Rows are gathered before they are counted: every dict still lists its keys in the order first seen
    (the checkpoint's JSON, ``bytes_by_kind``), as the row-by-row reference does."""
    def order(ledger: CommLedger) -> tuple[object, ...]:
        return (list(ledger.state()["keys"]), list(ledger.by_kind), [list(v) for v in ledger.by_kind_direction.values()],
                list(ledger.by_round), [list(v) for v in ledger.by_round.values()], list(ledger._epoch))

    for seed in range(4):
        rows = _rows(seed)
        one, batch = CommLedger(), CommLedger()
        for phase, direction, party, rnd, nbytes, payload, kind in rows:
            _reference_record(one, phase=phase, direction=direction, party=party, round=rnd, nbytes=nbytes,
                              payload=payload, kind=kind)
        batch.record_rows(rows)
        assert order(batch) == order(one)
