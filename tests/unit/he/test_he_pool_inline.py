"""The randomizer pool without worker processes (the worker lane: tests/e2e/test_he_pool.py)."""

from __future__ import annotations

from vfl.he import RandomizerPool, generate_keypair


def test_an_inline_pool_serves_encryption_and_closes_with_its_key() -> None:
    pk, sk = generate_keypair(512, test_only_small_key=True)
    pool = RandomizerPool(sk, workers=0)
    assert pool.workers == 0 and pool.ready() == 0 and sk._pool is pool
    rs = pool.take(5)
    assert len(rs) == 5 and len(set(rs)) == 5
    assert sk.decrypt(rs, bound=0) == [0] * 5  # randomizers are n-th residues: E(0)
    pool.prefill(10)  # no worker: nothing to ask, nothing buffered
    assert pool.wait(10, timeout=0.01) == 0
    ms = [3, -4, 1 << 200]
    assert sk.decrypt(sk.encrypt(ms), bound=1 << 200) == ms  # drawn through the pool
    other = RandomizerPool(sk, workers=0)  # attaching another replaces the first
    assert sk._pool is other
    sk.close()
    assert sk._pool is None and sk.decrypt(sk.encrypt([7]), bound=7) == [7]
