"""The mask stream: uniform on Z_{2^k}, fresh per (round, name), deterministic per seed."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from scipy.stats import chisquare

from vfl.core.errors import ConfigError
from vfl.secagg import apply_pairwise_masks, mask_stream, prg_nonce
from vfl.secagg.prg import CHUNK_WORDS


def fixed_seeds(own: int, peers: list[int]) -> dict[int, bytes]:
    """Deterministic 32-byte pair seeds (fixed, so the statistical test is reproducible)."""
    return {p: hashlib.sha256(f"seed|{min(own, p)}|{max(own, p)}".encode()).digest() for p in peers}


@pytest.mark.parametrize(("k", "bins"), [(8, 256), (13, 128)])
def test_single_masked_vector_is_uniform(k: int, bins: int) -> None:
    x = np.full(100_000, 3, dtype=np.uint32)  # a constant input: all structure must vanish
    y = apply_pairwise_masks(x, own_id=1, seeds=fixed_seeds(1, [0, 2]), round_id=0, name="e", k=k)
    assert int(y.max()) < 1 << k
    counts = np.bincount(y >> (k - int(np.log2(bins))), minlength=bins)
    assert counts.size == bins
    assert chisquare(counts).pvalue > 0.001


def test_high_and_low_bits_of_k32_are_uniform() -> None:
    y = mask_stream(seed=bytes(range(32)), round_id=1, name="w", n=100_000, k=32)
    assert chisquare(np.bincount(y >> 24, minlength=256)).pvalue > 0.001
    assert chisquare(np.bincount(y & 0xFF, minlength=256)).pvalue > 0.001


def test_fresh_mask_per_round_and_name() -> None:
    x = np.arange(1000, dtype=np.uint32) % 256
    seeds = fixed_seeds(0, [1, 2])
    y1 = apply_pairwise_masks(x, own_id=0, seeds=seeds, round_id=1, name="e", k=16)
    y2 = apply_pairwise_masks(x, own_id=0, seeds=seeds, round_id=2, name="e", k=16)
    y3 = apply_pairwise_masks(x, own_id=0, seeds=seeds, round_id=1, name="g", k=16)
    again = apply_pairwise_masks(x, own_id=0, seeds=seeds, round_id=1, name="e", k=16)
    np.testing.assert_array_equal(y1, again)
    assert np.mean(y1 == y2) < 0.01 and np.mean(y1 == y3) < 0.01


def test_nonce_is_unambiguous_and_seed_matters() -> None:
    assert prg_nonce(round_id=1, name="2x") != prg_nonce(round_id=12, name="x")
    assert len(prg_nonce(round_id=0, name="")) == 16
    a = mask_stream(seed=b"a" * 32, round_id=0, name="e", n=64, k=32)
    b = mask_stream(seed=b"b" * 32, round_id=0, name="e", n=64, k=32)
    assert not np.array_equal(a, b)


def test_low_k_keeps_only_low_bits() -> None:
    full = mask_stream(seed=b"s" * 32, round_id=0, name="e", n=500, k=32)
    low = mask_stream(seed=b"s" * 32, round_id=0, name="e", n=500, k=5)
    np.testing.assert_array_equal(low, full & 31)


def test_stream_rejects_bad_parameters() -> None:
    with pytest.raises(ConfigError):
        mask_stream(seed=b"short", round_id=0, name="e", n=4, k=8)
    for k in (0, 33):
        with pytest.raises(ConfigError):
            mask_stream(seed=b"s" * 32, round_id=0, name="e", n=4, k=k)


@pytest.mark.parametrize(
    "n", [1, 5, CHUNK_WORDS - 1, CHUNK_WORDS, CHUNK_WORDS + 3, 2 * CHUNK_WORDS + 17]
)
def test_stream_is_plain_aes256_ctr_across_chunks(n: int) -> None:
    seed = hashlib.sha256(b"kat").digest()
    nonce = prg_nonce(round_id=4, name="z")
    assert (
        nonce
        == hashlib.sha256(
            b"".join(len(p).to_bytes(4, "big") + p for p in (b"vfl-secagg-prg", b"4", b"z"))
        ).digest()[:16]
    )
    raw = Cipher(algorithms.AES(seed), modes.CTR(nonce)).encryptor().update(bytes(4 * n))
    expected = np.frombuffer(raw, dtype="<u4")
    np.testing.assert_array_equal(mask_stream(seed=seed, round_id=4, name="z", n=n, k=32), expected)
