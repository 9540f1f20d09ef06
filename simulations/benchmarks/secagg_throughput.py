"""Secure-aggregation cost: masking throughput of our AES-CTR double masks (round keys derived
with HKDF, one self stream + one stream per peer) vs pairwise masks alone (the previous protocol)
and a Flower-SecAgg+-style RandomState baseline, and key-agreement (X25519 + HKDF) cost per pair
as the party count grows.

    python -m simulations.benchmarks.secagg_throughput --out bench-out [--sizes 1600 262144 ...]

Throughput is MB/s (1 MB = 1e6 bytes) of masked payload, i.e. the packed wire size ceil(n*k/8),
produced by ONE party masking against ``--peers`` peers on one thread (per core). Both sides do
the same job: one mask stream per peer, add or subtract, reduce mod 2^k; ours adds the self-mask
stream and derives every key of the round (HKDF-Expand) inside the timed call. Times are medians
over ``--repeats`` runs after a warm-up. Writes ``DIR/secagg_throughput.json`` with ``ours_mb_s``,
``pairwise_only_mb_s``, ``baseline_mb_s`` and ``ratio`` (ours / baseline) at ``--default-size``,
plus per-size rows.

Against the AES-CTR stream of one core, measured in the same run (``aes_stream``): the same
(peers + 1) raw AES-256-CTR keystreams of 4n bytes our masking expands (``cryptography``/OpenSSL,
one thread), timed alternately with our masking so both see the same load. ``stream_ratio`` =
(keystream bytes our masking expands per second) / (raw keystream bytes per second), i.e. how
close masking runs to the PRG alone; ``payload_ratio`` = ``ours_mb_s`` / the raw stream's
MB/s (bounded by k/32/(peers + 1)). Each from medians, and ``_best`` from minima.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import cryptography
import numpy as np

from vfl.secagg import apply_pairwise_masks, derive_pair_keys, packed_size, round_key, split_secret
from vfl.secagg.keys import PAIR_LABEL, SELF_LABEL, generate_private_key, new_seed

DEFAULT_SIZES = [1_600, 16_384, 262_144, 1_048_576]  # B*P of HAR (100x16) ... ModelNet (64x4096)x4
DEFAULT_PARTIES = [2, 5, 10, 20, 50]


def _median_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up (page faults, lazy imports, OpenSSL init)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def flower_style_masks(
    values: np.ndarray, *, own_id: int, seeds: dict[int, bytes], k: int
) -> np.ndarray:
    """Baseline modelled on Flower SecAgg+ ``pseudo_rand_gen``: 32-byte seed XOR-folded to 32 bits,
    ``numpy.random.RandomState(seed32).randint(0, 2**k)``, int64 add/sub, ``np.mod``.

    numpy's RandomState is used ONLY here, as the baseline being measured; it is not a
    cryptographic PRG (2^32 seeds, Mersenne Twister state recoverable from outputs).
    """
    acc = values.astype(np.int64)
    for peer, seed in seeds.items():
        seed32 = 0
        for i in range(0, len(seed), 4):
            seed32 ^= int.from_bytes(seed[i : i + 4], "little")
        mask = np.random.RandomState(seed32).randint(0, 2**k, size=values.size)
        acc = acc + mask if peer > own_id else acc - mask
    return np.mod(acc, 2**k)


def double_masks(values: np.ndarray, *, secrets: dict[int, bytes], seed: bytes, k: int) -> np.ndarray:
    """What ``SecAggClient.mask`` does: derive the round's self key and pair keys, then mask."""
    session, rnd = b"bench-session", "train:0:1"
    pair = {p: round_key(s, label=PAIR_LABEL, session=session, round_id=rnd, name="e") for p, s in secrets.items()}
    own = round_key(seed, label=SELF_LABEL, session=session, round_id=rnd, name="e")
    return apply_pairwise_masks(values, own_id=0, seeds=pair, self_key=own, round_id=rnd, name="e", k=k)


def masking_rows(*, sizes: list[int], peers: int, k: int, repeats: int) -> list[dict[str, Any]]:
    """One row per vector size: median ms and MB/s for ours, pairwise-only and the baseline."""
    seeds = {p: hashlib.sha256(b"bench-seed|%d" % p).digest() for p in range(1, peers + 1)}
    self_seed = new_seed()
    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        x = rng.integers(0, 1 << k, size=n, dtype=np.uint64)
        ours = _median_seconds(partial(double_masks, x, secrets=seeds, seed=self_seed, k=k), repeats)
        pairwise = _median_seconds(
            partial(apply_pairwise_masks, x, own_id=0, seeds=seeds, round_id=1, name="e", k=k), repeats)
        base = _median_seconds(partial(flower_style_masks, x, own_id=0, seeds=seeds, k=k), repeats)
        payload = packed_size(n, k)
        rows.append(
            {
                "size": n,
                "payload_bytes": payload,
                "ours_ms": 1e3 * ours,
                "pairwise_only_ms": 1e3 * pairwise,
                "baseline_ms": 1e3 * base,
                "ours_mb_s": payload / ours / 1e6,
                "pairwise_only_mb_s": payload / pairwise / 1e6,
                "baseline_mb_s": payload / base / 1e6,
                "ratio": base / ours,
            }
        )
    return rows


def aes_stream(*, n: int, peers: int, k: int, repeats: int) -> dict[str, float]:
    """Raw AES-256-CTR keystream of 4n bytes on one core vs our masking of n values, alternated."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    key, plain, out = new_seed(), bytes(4 * n), bytearray(4 * n + 16)
    seeds = {p: hashlib.sha256(b"bench-seed|%d" % p).digest() for p in range(1, peers + 1)}
    x = np.random.default_rng(0).integers(0, 1 << k, size=n, dtype=np.uint64)
    streams = peers + 1

    def stream() -> None:
        for _ in range(streams):
            Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor().update_into(plain, out)

    ours = partial(double_masks, x, secrets=seeds, seed=new_seed(), k=k)
    stream()
    ours()
    raw_s: list[float] = []
    ours_s: list[float] = []
    for _ in range(repeats):
        for fn, acc in ((stream, raw_s), (ours, ours_s)):
            t0 = time.perf_counter()
            fn()
            acc.append(time.perf_counter() - t0)
    raw, mine = statistics.median(raw_s), statistics.median(ours_s)
    return {
        "aes_ctr_mb_s": streams * 4 * n / raw / 1e6,
        "aes_ctr_mb_s_best": streams * 4 * n / min(raw_s) / 1e6,
        "mask_stream_mb_s": streams * 4 * n / mine / 1e6,
        "stream_ratio": raw / mine,
        "stream_ratio_best": min(raw_s) / min(ours_s),
        "payload_ratio": (packed_size(n, k) / mine) / (streams * 4 * n / raw),
    }


def key_agreement_rows(*, parties: list[int], repeats: int) -> list[dict[str, Any]]:
    """Per party count M: X25519+HKDF cost per pair, one party's setup with its M-1 peers, and
    the Shamir split of its self-mask seed (threshold ceil(2(M-1)/3)) that dropout recovery adds."""
    rows = []
    own = generate_private_key()
    secret = new_seed()
    for m in parties:
        peers = [generate_private_key().public_key() for _ in range(m - 1)]

        def agree(peers: list[Any] = peers) -> None:
            for j, pub in enumerate(peers, start=1):
                derive_pair_keys(own_key=own, peer_public=pub, own_id=0, peer_id=j, session=b"b")

        threshold = max(1, -(-2 * (m - 1) // 3))
        party_s = _median_seconds(agree, repeats)
        split_s = _median_seconds(
            partial(split_secret, secret, threshold=threshold, count=m - 1), repeats
        )
        rows.append(
            {
                "parties": m,
                "pairs_per_party": m - 1,
                "pair_us": 1e6 * party_s / (m - 1),
                "party_setup_ms": 1e3 * party_s,
                "threshold": threshold,
                "shamir_split_ms": 1e3 * split_s,
            }
        )
    return rows


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default="bench-out/", help="output directory (default bench-out/)")
    p.add_argument("--sizes", type=int, nargs="+", default=DEFAULT_SIZES, help="vector lengths")
    p.add_argument("--default-size", type=int, default=262_144, help="size of the headline numbers")
    p.add_argument("--peers", type=int, default=9, help="peers each party masks with (M-1)")
    p.add_argument("--k", type=int, default=32, help="modulus bits (1..32)")
    p.add_argument("--parties", type=int, nargs="+", default=DEFAULT_PARTIES, help="M values")
    p.add_argument("--repeats", type=int, default=7, help="timed repeats per point (median)")
    return p


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = _parser().parse_args(argv)
    sizes = sorted(set(args.sizes) | {args.default_size})
    rows = masking_rows(sizes=sizes, peers=args.peers, k=args.k, repeats=args.repeats)
    head = next(r for r in rows if r["size"] == args.default_size)
    keys = key_agreement_rows(parties=args.parties, repeats=args.repeats)
    aes = aes_stream(n=args.default_size, peers=args.peers, k=args.k, repeats=max(args.repeats, 15))
    result = {
        **aes,
        "ours_mb_s": head["ours_mb_s"],
        "pairwise_only_mb_s": head["pairwise_only_mb_s"],
        "baseline_mb_s": head["baseline_mb_s"],
        "ratio": head["ratio"],
        "default_size": args.default_size,
        "peers": args.peers,
        "k": args.k,
        "units": "MB/s = 1e6 bytes of packed masked payload (ceil(n*k/8)) per second, one thread",
        "rows": rows,
        "key_agreement": keys,
        "environment": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "cryptography": cryptography.__version__,
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
        },
    }
    print(f"masking: one party, {args.peers} peers, k={args.k}, median of {args.repeats}")
    print(
        f"{'size':>10} {'payload B':>11} {'ours ms':>9} {'pair ms':>9} {'base ms':>9} {'ours MB/s':>10} "
        f"{'pair MB/s':>10} {'base MB/s':>10} {'ratio':>6}"
    )
    for r in rows:
        print(
            f"{r['size']:>10} {r['payload_bytes']:>11} {r['ours_ms']:>9.3f} {r['pairwise_only_ms']:>9.3f} "
            f"{r['baseline_ms']:>9.3f} {r['ours_mb_s']:>10.1f} {r['pairwise_only_mb_s']:>10.1f} "
            f"{r['baseline_mb_s']:>10.1f} {r['ratio']:>6.2f}"
        )
    print(f"\nvs the AES-256-CTR stream of one core ({args.default_size} values, same run): raw "
          f"{aes['aes_ctr_mb_s']:.0f} MB/s; masking expands {aes['mask_stream_mb_s']:.0f} MB/s of keystream "
          f"({args.peers + 1} streams): stream_ratio {aes['stream_ratio']:.2f} (best {aes['stream_ratio_best']:.2f}), "
          f"payload_ratio {aes['payload_ratio']:.3f}")
    print("\nkey agreement (X25519 + HKDF-SHA256 x2) and Shamir split, per party")
    print(f"{'M':>4} {'pair us':>9} {'setup ms':>9} {'t':>4} {'split ms':>9}")
    for r in keys:
        print(
            f"{r['parties']:>4} {r['pair_us']:>9.1f} {r['party_setup_ms']:>9.3f} "
            f"{r['threshold']:>4} {r['shamir_split_ms']:>9.3f}"
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "secagg_throughput.json").write_text(json.dumps(result, indent=2))
    print(f"\nwrote {out / 'secagg_throughput.json'}")
    return result


if __name__ == "__main__":
    main()
