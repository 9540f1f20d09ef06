"""The label holder's ID lists, checked by every party: the attacks played as the label holder.

The label holder (server node) holds its labels, every PSI message it received, the intersections
``I_1 ⊇ ... ⊇ I_M`` it computed, and writes the lists it broadcasts (``query.psi_align``). Lying in them:

- one ID listed several times: its row sits at several indices; each index is released once per epoch
  and counted apart, so the sample goes out (copies × epochs) times while the party reports ``epochs``;
- a training ID in the test list too: evaluation forwards release the training row again;
- at party 0 only, IDs it holds outside the intersection (``I_1 \\ I_M``, which the label holder knows
  from the chain) in place of common ones, the other parties get the honest lists: party 0 releases
  samples the intersection does not contain.

Control: the old check (each ID one the party holds, nothing else; bound at once, no digests between
the parties): every attack is bound and released. Now each party refuses with one ``AlignmentRefused``
naming the run, before anything is released -- the same message for an ID it does not hold."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from parties.vertical.psi import PartyAlignment, ServerAlignment
from tests.support.party_data import source, write_blob_parties
from vfl.core.errors import AlignmentRefused
from vfl.data import psi_wire as pw
from vfl.data.psi import PsiClient, pack_ids, unpack_ids
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime import message as wire
from vfl.runtime.transport.inprocess import InProcessTransport

M, EPOCHS, COPIES, OUTSIDE = 3, 2, 8, 12


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    out = tmp_path_factory.mktemp("psi-lists") / "files"
    write_blob_parties(out, num_parties=M, overlap=0.7)
    return out


def _cfg():
    return load_run_config({"name": "lists-attack", "strategy": "pbm", "num_parties": M, "seed": 3,
                            "params": {"b": 8}, "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                            "train": {"epochs": EPOCHS, "batch_size": 24, "lr": 0.05},
                            "transport": {"parties_per_actor": 1}})


def old_check(self, train_ids, test_ids, *, asked):
    """Before: each broadcast ID one the party holds; nothing else."""
    return set(train_ids) | set(test_ids) <= set(self.ids)


def old_on_align(self, messages):
    """Before: bound at once (no digest exchanged with the other parties)."""
    (m,) = messages
    lists = [unpack_ids(wire.get_array(m, pw.Record.PSI, p), wire.get_array(m, pw.Record.PSI, f"{p}_len"))
             for p in (pw.Array.TRAIN, pw.Array.TEST)]
    if not old_check(self, *lists, asked=None):
        raise AlignmentRefused(self.node.spec.name, self.run)
    self._bind(*lists)
    return []


old_on_align.__vfl_handles__ = pw.Kind.ALIGN  # type: ignore[attr-defined]


def _lists(m):
    return [unpack_ids(wire.get_array(m, pw.Record.PSI, p), wire.get_array(m, pw.Record.PSI, f"{p}_len"))
            for p in (pw.Array.TRAIN, pw.Array.TEST)]


def _with_lists(m, train, test, *, dst=None):
    (tr, tr_len), (te, te_len) = pack_ids(train), pack_ids(test)
    return wire.make(pw.Kind.ALIGN, src=m.metadata.src_node_id, dst=m.metadata.dst_node_id if dst is None else dst,
                     round=wire.round_of(m), content=wire.records(**{pw.Record.PSI: wire.arrays(**{
                         pw.Array.TRAIN: tr, pw.Array.TRAIN_LEN: tr_len, pw.Array.TEST: te,
                         pw.Array.TEST_LEN: te_len})}))


def lying_label_holder(mp, attack):
    """The server node rewrites the ALIGN it sends (``attack``: lists -> {party node id or None: lists})."""
    chain: list[list[str]] = []
    real_intersect, real_on_response = PsiClient.intersect, ServerAlignment.on_response

    def intersect(self, setup, response):
        out = real_intersect(self, setup, response)
        chain.append(out)  # I_1, I_2, ... as the label holder computes them
        return out

    def on_response(self, messages):
        out = real_on_response(self, messages)
        if out and out[0].metadata.message_type == pw.Kind.ALIGN:
            per_party = attack(*_lists(out[0]), chain)
            return [_with_lists(out[0], tr, te, **({} if dst is None else {"dst": dst}))
                    for dst, (tr, te) in per_party.items()]
        return out

    on_response.__vfl_handles__ = pw.Kind.RESPONSE  # type: ignore[attr-defined]
    mp.setattr(PsiClient, "intersect", intersect)
    mp.setattr(ServerAlignment, "on_response", on_response)


def repeat_one(train, test, chain):
    """One training ID listed COPIES times (in place of COPIES - 1 others)."""
    return {None: ([train[0]] * COPIES + train[COPIES:], test)}


def train_in_test(train, test, chain):
    """The first training ID in the test list too (in place of a test ID)."""
    return {None: (train, [train[0], *test[1:]])}


def outside_at_party0(train, test, chain):
    """Party 0 gets OUTSIDE IDs it holds outside the intersection (I_1 minus I_M) in place of common ones."""
    outside = sorted(set(chain[0]) - set(chain[-1]))[:OUTSIDE]
    assert len(outside) == OUTSIDE
    return {1: (outside + train[OUTSIDE:], test), **{p: (train, test) for p in range(2, M + 1)}}


def not_held(train, test, chain):
    """An ID party 0 does not hold (the membership probe)."""
    return {None: ([*train[:-1], "no-such-customer"], test)}


ATTACKS = {"repeated-id": repeat_one, "train-id-in-test": train_in_test, "outside-intersection": outside_at_party0}


def _party0(mp):
    bound: list[PartyAlignment] = []
    real_bind = PartyAlignment._bind

    def bind(self, train_ids, test_ids):
        real_bind(self, train_ids, test_ids)
        if self.index == 0:
            bound.append(self)

    mp.setattr(PartyAlignment, "_bind", bind)
    return bound


def _releases(alignment, node, ids):
    """Releases of each sample in ``ids`` by party 0: its guard's counts at every index the sample was bound to."""
    train, test = alignment.split
    guard = node.release_guard
    out = {}
    for k in ids:
        tr = [i for i, x in enumerate(train) if x == k]
        te = [i for i, x in enumerate(test) if x == k]
        out[k] = int(guard.counts[tr].sum()) + int(guard.eval_counts[te].sum() if guard.eval_counts.size else 0)
    return out


@pytest.mark.parametrize("control", [False, True], ids=["checked", "control-old-check"])
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_the_label_holders_lists_are_refused_before_any_release(files, monkeypatch, attack, control):
    if control:
        monkeypatch.setattr(PartyAlignment, "on_align", old_on_align)
    lying_label_holder(monkeypatch, ATTACKS[attack])
    bound = _party0(monkeypatch)
    engine = Engine(_cfg(), InProcessTransport(), source(files, M, split=None), progress=False)
    try:
        if not control:
            with pytest.raises(AlignmentRefused, match=r"party party0 refused .* of run 'lists-attack'"):
                engine.start()
            assert not bound  # nothing bound, so nothing can be released
            return
        result = engine.run()  # the old check binds the lists and trains on them
        (alignment,) = bound
        node = alignment.node
        train, test = alignment.split
        cap = node.release_guard.cap
        if attack == "repeated-id":
            (got,) = _releases(alignment, node, [train[0]]).values()
            assert got == COPIES * EPOCHS > cap  # one sample, COPIES indices, each released every epoch
            assert result.summary["party_releases_max"] == EPOCHS  # while the party reports EPOCHS
        elif attack == "train-id-in-test":
            (got,) = _releases(alignment, node, [test[0]]).values()
            assert test[0] in train and got == 2 * EPOCHS  # trained each epoch, and evaluated with the test rows
            assert result.summary["party_releases_max"] == EPOCHS  # counted apart: no index holds both
        else:
            outside = train[:OUTSIDE]
            got = _releases(alignment, node, outside)
            assert set(got.values()) == {EPOCHS}  # OUTSIDE samples outside the intersection, each released
    finally:
        engine.transport.shutdown()


def test_an_id_the_party_lacks_gets_the_same_refusal(files, monkeypatch):
    """The membership probe: the refusal reads the same as for lists that are malformed (it names no ID and
    no check). What is left to the label holder is docs/trust.md's: that a list it built is refused."""
    messages = []
    for attack in (not_held, repeat_one):
        with monkeypatch.context() as mp:
            lying_label_holder(mp, attack)
            engine = Engine(_cfg(), InProcessTransport(), source(files, M, split=None), progress=False)
            try:
                with pytest.raises(AlignmentRefused) as err:
                    engine.start()
                messages.append(str(err.value))
            finally:
                engine.transport.shutdown()
    assert messages[0] == messages[1]
    assert "no-such-customer" not in messages[0]
