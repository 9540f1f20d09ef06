"""The Paillier randomizer pool's worker processes: they fill the buffer off the caller's thread, their
randomizers are valid, a dead worker falls back to inline with one warning, close() stops them.
(A subprocess lane test: the unit lane covers the pool without workers.)"""

from __future__ import annotations

import logging
import sys

import pytest

from vfl.he import RandomizerPool, generate_keypair


def test_workers_prefill_and_a_dead_worker_falls_back_inline(caplog: pytest.LogCaptureFixture) -> None:
    pk, sk = generate_keypair(512, test_only_small_key=True)
    main = sys.modules["__main__"]
    pool = RandomizerPool(sk, workers=2)
    assert sys.modules["__main__"] is main and pool.workers == 2
    try:
        pool.prefill(300)
        assert pool.wait(300, timeout=60) >= 300
        rs = pool.take(300)
        assert len(set(rs)) == 300 and sk.decrypt(rs, bound=0) == [0] * 300  # n-th residues: E(0)
        pool.prefill(100)
        assert pool.wait(100, timeout=60) >= 100
        ms = list(range(-50, 50))
        assert sk.decrypt(sk.encrypt(ms), bound=50) == ms and pool.ready() == 0  # encrypt drew from the pool

        procs = [w.proc for w in pool._workers]
        for p in procs:
            p.kill()
            p.join(5)
        pool.prefill(50)
        with caplog.at_level(logging.WARNING, logger="vfl.he.randomness"):
            out = pool.take(20)
            pool.take(5)
        assert len(out) == 20 and sk.decrypt(out, bound=0) == [0] * 20
        warned = [r for r in caplog.records if "randomizer worker" in r.getMessage()]
        assert len(warned) == 1 and pool.workers == 0
    finally:
        sk.close()
    assert all(not w.proc.is_alive() for w in pool._workers)


def test_close_stops_the_workers() -> None:
    _, sk = generate_keypair(512, test_only_small_key=True)
    pool = RandomizerPool(sk, workers=1, target=64)
    pool.take(1)  # asks the worker to refill to the target
    assert pool.wait(64, timeout=60) >= 64
    proc = pool._workers[0].proc
    sk.close()
    assert not proc.is_alive() and pool.workers == 0
    assert len(pool.take(70)) == 70  # what was buffered, then inline


def test_a_pool_dropped_with_its_key_stops_its_worker() -> None:
    import gc

    _, sk = generate_keypair(512, test_only_small_key=True)
    pool = RandomizerPool(sk, workers=1)
    proc = pool._workers[0].proc
    assert proc.is_alive()
    del sk, pool
    gc.collect()
    proc.join(5)
    assert not proc.is_alive()
