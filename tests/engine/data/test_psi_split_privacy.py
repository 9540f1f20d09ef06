"""The train/test split of PSI-aligned rows leaks no label: the attack played as a passive party.

A party holds the run seed, the config (``test_fraction``) and the two ID lists the label holder
broadcasts (``query.psi_align``). Under the old split (seeded, stratified by label: kept here as
the control) that is enough to rebuild the class sizes exactly and a fifth of the labels with
certainty before any training. The split is now a uniform subset of fixed size from the label
holder's own randomness: the same attack finds no labelling at all, and the class make-up of the
test set is what a label-blind draw gives (a statistical test with bounds that the control fails).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import strategies  # noqa: F401
from parties.vertical.psi import PartyAlignment, ServerAlignment
from simulations.data.split_parties import ID, LABEL
from simulations.data.split_parties import main as split_parties
from tests.support.party_data import source
from vfl.core.errors import DataError
from vfl.core.rng import NoiseSource, seeded_numpy
from vfl.data import psi_wire as pw
from vfl.data.psi import num_test_rows, uniform_test_mask, unpack_ids
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime import message as wire
from vfl.runtime.transport.inprocess import InProcessTransport

M, SEED, FRACTION = 2, 0, 0.25


def old_stratified_mask(y: np.ndarray, *, test_fraction: float, seed: int) -> np.ndarray:
    """The old split (control): seeded, stratified by label, >= 1 training row per class."""
    rng = seeded_numpy("split", "aligned", seed)
    mask = np.zeros(len(y), dtype=bool)
    for c in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == c))
        n_test = min(int(round(test_fraction * len(rows))), len(rows) - 1)
        mask[rows[:max(n_test, 0)]] = True
    return mask


def party_attack(is_test: np.ndarray, *, test_fraction: float, seed: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """The party's attack on a seeded stratified binary split. For each class-0 size n0, the seed
    fixes which ranks within each class are test; walking the sorted common IDs, a row of class c
    has rank = number of class-c rows before it, so its test bit constrains its label. Returns, for
    every n0 with a consistent labelling, which labels each row can take (``can0``, ``can1``)."""
    n, out = len(is_test), {}
    for n0 in range(1, n):
        n1, rng, ranks = n - n0, seeded_numpy("split", "aligned", seed), []
        for nc in (n0, n1):
            perm = rng.permutation(nc)  # consumes the generator exactly as permuting nc row indices
            r = np.zeros(nc + 1, dtype=bool)
            r[perm[:max(min(int(round(test_fraction * nc)), nc - 1), 0)]] = True
            ranks.append(r)
        r0, r1 = ranks
        if r0.sum() + r1.sum() != is_test.sum():
            continue
        k = np.arange(n0 + 1)
        fwd = np.zeros((n + 1, n0 + 1), dtype=bool)
        fwd[0, 0] = True
        for i in range(n):  # fwd[i, k0]: a consistent labelling of rows < i has k0 zeros
            k1 = i - k
            ok1 = fwd[i] & (k1 >= 0) & (k1 < n1) & (r1[np.clip(k1, 0, n1)] == is_test[i])
            fwd[i + 1] = ok1
            fwd[i + 1, 1:] |= fwd[i, :-1] & (r0[k[:-1]] == is_test[i])
        if not fwd[n, n0]:
            continue
        back = np.zeros(n0 + 1, dtype=bool)
        back[n0] = True
        can0, can1 = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        for i in range(n - 1, -1, -1):
            k1 = i - k
            ok0 = fwd[i] & (k < n0) & (r0[k] == is_test[i]) & np.append(back[1:], False)
            ok1 = fwd[i] & (k1 >= 0) & (k1 < n1) & (r1[np.clip(k1, 0, n1)] == is_test[i]) & back
            back = ok0 | ok1
            can0[i], can1[i] = ok0.any(), ok1.any()
        out[n0] = (can0, can1)
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """breast-cancer as per-party files (2 parties, 80 % overlap); the label file's split column unused."""
    out = tmp_path_factory.mktemp("bc") / "files"
    assert split_parties(["breast-cancer", str(out), "--parties", str(M)]) == 0
    return out


def _align(files: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """Run the real set-up (PSI, split, broadcast) and return the ID lists party0 received."""
    got: list[tuple[list[str], list[str]]] = []
    on_align = PartyAlignment.on_align

    def spy(self, messages):
        if self.index == 0:
            (m,) = messages
            got.append(tuple(unpack_ids(wire.get_array(m, pw.Record.PSI, p), wire.get_array(m, pw.Record.PSI, f"{p}_len"))
                             for p in (pw.Array.TRAIN, pw.Array.TEST)))
        return on_align(self, messages)

    spy.__vfl_handles__ = pw.Kind.ALIGN  # type: ignore[attr-defined]
    monkeypatch.setattr(PartyAlignment, "on_align", spy)
    cfg = load_run_config({"strategy": "npq", "num_parties": M, "seed": SEED, "train": {"epochs": 1},
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]}})
    engine = Engine(cfg, InProcessTransport(), source(files, M, split=None), progress=False)
    try:
        engine.start()
    finally:
        engine.transport.shutdown()
    (ids,) = got
    return ids


def _truth(files: Path, common: list[str]) -> np.ndarray:
    lab = pd.read_csv(files / "labels.csv", dtype={ID: str}).set_index(ID)
    return lab.loc[common, LABEL].to_numpy(dtype=np.int64)


def _old_split(self: ServerAlignment, n: int) -> np.ndarray:
    index = {str(k): i for i, k in enumerate(self.labels.ids)}
    y = self.labels.y[[index[k] for k in self._common]]
    return old_stratified_mask(y, test_fraction=self.labels.test_fraction, seed=self.seed)


@pytest.mark.parametrize("old", [True, False], ids=["control-stratified-seeded", "uniform-own-randomness"])
def test_a_party_with_the_seed_and_the_id_lists_learns_labels_only_from_the_old_split(files, monkeypatch, old):
    if old:
        monkeypatch.setattr(ServerAlignment, "_test_mask", _old_split)
    train, test = _align(files, monkeypatch)
    common = sorted(train + test)
    is_test = np.isin(np.asarray(common, dtype=object), np.asarray(test, dtype=object))
    y = _truth(files, common)
    found = party_attack(is_test, test_fraction=FRACTION, seed=SEED)
    if old:  # the attack works: exact class sizes, a fifth of the labels with certainty, all right
        assert list(found) == [int((y == 0).sum())]
        can0, can1 = found[int((y == 0).sum())]
        certain = can0 ^ can1
        assert certain.mean() > 0.10
        assert np.array_equal(np.where(can0, 0, 1)[certain], y[certain])
    else:  # the same party, the same holdings: no class size, no labelling is consistent
        assert found == {}
        assert len(test) == num_test_rows(len(common), test_fraction=FRACTION)


def _label_blind(masks: list[np.ndarray], y: np.ndarray) -> tuple[float, float]:
    """(z of the mean, ratio of the variance) of the class-1 count among test rows over the draws,
    against the hypergeometric law of a label-blind subset of the same size."""
    n, n1, k = len(y), int(y.sum()), int(masks[0].sum())
    counts = np.asarray([int(y[m].sum()) for m in masks], dtype=np.float64)
    mean = k * n1 / n
    var = k * (n1 / n) * (1 - n1 / n) * (n - k) / (n - 1)
    return abs(counts.mean() - mean) / np.sqrt(var / len(counts)), counts.var(ddof=1) / var


def test_the_test_set_has_the_class_make_up_of_a_label_blind_draw():
    """K draws on one labelling: the class-1 count of the test set follows the hypergeometric law
    (mean within 5 sigma, variance within 0.6-1.5x); the old split's count never varies."""
    y = (seeded_numpy("psi-split-test", "labels").random(200) < 0.3).astype(np.int64)
    draws = 400
    new = [uniform_test_mask(len(y), test_fraction=FRACTION, noise=NoiseSource.fresh()) for _ in range(draws)]
    z, ratio = _label_blind(new, y)
    assert z < 5 and 0.6 < ratio < 1.5
    assert len({m.tobytes() for m in new}) == draws  # fresh randomness: the seed rebuilds nothing
    old = [old_stratified_mask(y, test_fraction=FRACTION, seed=s) for s in range(draws)]
    _, old_ratio = _label_blind(old, y)
    assert old_ratio == 0.0  # control: a stratified split fixes the count, i.e. reveals the class size


def test_seeded_noise_rng_reproduces_the_split_and_crypto_does_not():
    seeded = [uniform_test_mask(300, test_fraction=FRACTION, noise=NoiseSource.seeded("x", 1)) for _ in range(2)]
    assert np.array_equal(*seeded) and seeded[0].sum() == 75
    fresh = [uniform_test_mask(300, test_fraction=FRACTION, noise=NoiseSource.fresh()) for _ in range(2)]
    assert not np.array_equal(*fresh)


def _bound(engine: Engine) -> dict[str, np.ndarray]:
    """What the label holder and party0 train and test on (their bound rows)."""
    hosts = engine.transport.hosts  # type: ignore[attr-defined]
    server, party0 = hosts["server"].nodes[0], hosts["parties-0"].nodes[1]
    return {"y_test": server.labels.y_test.copy(), "x_test": party0.shard.x_test.copy(),
            "x_train": party0.shard.x_train.copy()}


@pytest.mark.parametrize("kept", [True, False], ids=["split-in-checkpoint", "control-not-kept"])
def test_a_resumed_run_trains_on_the_split_it_started_with(tmp_path, monkeypatch, kept):
    """noise_rng: crypto draws a new split each time the alignment runs; the split travels in the
    nodes' checkpoint state, so a resume binds the rows it trained on (control: without it, not)."""
    import strategies.base.psi as sp
    from tests.support.party_data import write_blob_parties
    from vfl.engine.rundir import RunDir

    if not kept:
        monkeypatch.setattr(sp, "_keeps_state", lambda node, alignment: node)
    write_blob_parties(tmp_path / "files", num_parties=3, overlap=0.7)
    data = source(tmp_path / "files", 3, split=None)
    cfg = load_run_config({"strategy": "npq", "num_parties": 3, "seed": 5, "train": {"epochs": 2, "batch_size": 40},
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "transport": {"parties_per_actor": 1}})
    seen: dict[str, dict[str, np.ndarray]] = {}

    class Killed(Exception):
        pass

    def kill(epoch, record, engine):
        seen["before"] = _bound(engine)
        raise Killed()

    run_dir = RunDir(tmp_path / "run")
    run_dir.write_config(cfg.to_dict())
    with pytest.raises(Killed):
        Engine(cfg, InProcessTransport(), data, run_dir=run_dir, progress=False, on_epoch_end=kill).run()
    resumed = Engine(cfg, InProcessTransport(), data, run_dir=run_dir, progress=False)
    try:
        resumed.run(resume=True)
    except DataError as exc:  # control: a node that checks its data refuses the other split
        assert not kept and "changed since the checkpoint" in str(exc)
        return
    after = _bound(resumed)
    same = {k: np.array_equal(seen["before"][k], after[k]) for k in after}
    assert same == dict.fromkeys(after, kept)


@pytest.mark.parametrize("kept", [True, False], ids=["split-in-checkpoint", "control-not-kept"])
def test_a_restart_aligns_again_on_the_same_split(tmp_path, monkeypatch, kept):
    """What ``Recovery.restore`` does after a host died: every node rebuilt from the snapshot, then
    PSI again; the label holder broadcasts the split it holds, not a new one (control: a new one)."""
    import strategies.base.psi as sp
    from tests.support.party_data import write_blob_parties

    if not kept:
        monkeypatch.setattr(sp, "_keeps_state", lambda node, alignment: node)
    write_blob_parties(tmp_path / "files", num_parties=3, overlap=0.7)
    cfg = load_run_config({"strategy": "npq", "num_parties": 3, "seed": 5, "transport": {"parties_per_actor": 1},
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]}})
    engine = Engine(cfg, InProcessTransport(), source(tmp_path / "files", 3, split=None), progress=False)
    try:
        grid = engine.start()
        before = _bound(engine)
        engine.transport.restart(engine.transport.get_state())  # fresh nodes, snapshot states loaded
        engine.protocol_setup(grid)  # signing keys and PSI again, as after a failure
        after = _bound(engine)
    finally:
        engine.transport.shutdown()
    assert {k: np.array_equal(before[k], after[k]) for k in after} == dict.fromkeys(after, kept)
