"""Speed of the Paillier (DJN) operations the trees strategy runs, per core (``vfl/he``, docs/he.md).

    python -m simulations.benchmarks.paillier --out bench-out              # 2048-bit key
    python -m simulations.benchmarks.paillier --out bench-out --bits 3072

The key holder's encryption (CRT path, randomizers computed inline), the public-key encryption, the
randomizers alone, encryption with a prefilled :class:`~vfl.he.randomness.RandomizerPool` (the critical
path), ciphertext additions, CRT decryption, packing sums into one ciphertext, the histogram kernel
(``grouped_sum``, beside the variants it was chosen over) and the wire conversion. Per-core rates are
counts over the thread's CPU time (robust to a shared machine); the pool's rates are wall-clock. The
pool's design is measured against threads (``background``): how fast a background producer makes
randomizers, and how much it slows a histogram kernel running meanwhile in the main thread.
``published`` holds reference figures that were not measured here. Writes ``DIR/paillier.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gmpy2
import numpy as np
from gmpy2 import mpz

from vfl.core.rng import seeded_numpy
from vfl.he import (
    CrtRandomizers,
    PrivateKey,
    PublicKey,
    RandomizerPool,
    from_wire,
    generate_keypair,
    grouped_sum,
    pack_ciphertexts,
    slots_per_plaintext,
    to_wire,
)
from vfl.he.fixedbase import draw_exponents

PUBLISHED = {
    "heu_zpaillier": {"encrypt_per_s_per_core": 1228, "key_bits": 2048, "source": "SecretFlow HEU documentation",
                      "measured_here": False},
}


def _cpu_rate(fn: Callable[[], Any], count: int, repeats: int) -> dict[str, float]:
    """``count`` operations per thread-CPU second of ``fn`` (median, min, max over ``repeats``), and per wall second."""
    cpu, wall = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.thread_time()
        fn()
        c1, t1 = time.thread_time(), time.perf_counter()
        cpu.append(count / max(c1 - c0, 1e-9))
        wall.append(count / max(t1 - t0, 1e-9))
    return {"median": statistics.median(cpu), "min": min(cpu), "max": max(cpu), "wall_median": statistics.median(wall)}


def _grouped_sorted(pk: PublicKey, cs: list[mpz], groups: np.ndarray, n_groups: int) -> list[mpz | None]:
    """Variant: rows sorted by group once (numpy), then each group's run multiplied."""
    order = np.argsort(groups, kind="stable").tolist()
    n2, pos = pk.n2, 0
    out: list[mpz | None] = []
    for cnt in np.bincount(groups, minlength=n_groups).tolist():
        run = order[pos:pos + cnt]
        pos += cnt
        if not run:
            out.append(None)
            continue
        acc = cs[run[0]]
        for i in run[1:]:
            acc = acc * cs[i] % n2
        out.append(acc)
    return out


def _grouped_lazy(pk: PublicKey, cs: list[mpz], groups: np.ndarray, n_groups: int, width: int) -> list[mpz | None]:
    """Variant: sorted runs, products of ``width`` ciphertexts multiplied unreduced, then reduced once."""
    order = np.argsort(groups, kind="stable").tolist()
    counts = np.bincount(groups, minlength=n_groups).tolist()
    n2, pos = pk.n2, 0
    out: list[mpz | None] = []
    for cnt in counts:
        run = [cs[i] for i in order[pos:pos + cnt]]
        pos += cnt
        if not run:
            out.append(None)
            continue
        acc = mpz(1)
        for j in range(0, len(run), width):
            block = run[j:j + width]
            prod = block[0]
            for c in block[1:]:
                prod = prod * c
            acc = acc * prod % n2
        out.append(acc)
    return out


def _thread_producer(crt: CrtRandomizers, parts: tuple[mpz, mpz, mpz], count: int, mode: str, out: list[mpz],
                     stop: threading.Event) -> threading.Thread:
    """A background thread making randomizers: ``powmod`` (gmpy2.powmod_exp_list mod p² and q², releasing the
    GIL) or ``table`` (the pool's table method, ``crt``, with ``allow_release_gil``)."""
    p, q, hs = parts
    alpha_bits = crt.alpha_bits

    def run() -> None:
        gmpy2.get_context().allow_release_gil = True
        p2, q2 = p * p, q * q
        hp, hq = hs % p2, hs % q2
        while len(out) < count and not stop.is_set():
            if mode == "table":
                out.extend(crt.make(4))
            else:
                raw = draw_exponents(4, alpha_bits)
                w = len(raw) // 4
                alphas = [mpz.from_bytes(raw[i:i + w], "little") for i in range(0, len(raw), w)]
                rps = gmpy2.powmod_exp_list(hp, alphas, p2)
                rqs = gmpy2.powmod_exp_list(hq, alphas, q2)
                out.extend(crt.join(a, b) for a, b in zip(rps, rqs, strict=True))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def background(pk: PublicKey, sk: PrivateKey, count: int, workload: Callable[[], Any], rows: int) -> dict[str, Any]:
    """Each background producer (the process pool; a thread with the table method; a thread with GMP's powmod,
    which releases the GIL): randomizers per wall second when the main thread is idle (``randomizers_per_s``),
    and while it runs a histogram kernel (``randomizers_per_s_while_main_busy``), with the kernel's rows per
    wall second meanwhile (``main_rows_per_s``, best of 5 runs; ``alone``: no producer)."""
    def busy(produced: Callable[[], int]) -> dict[str, float]:
        best, made = float("inf"), []
        for _ in range(5):
            c0, t0 = produced(), time.perf_counter()
            workload()
            dt = time.perf_counter() - t0
            best = min(best, dt)
            made.append((produced() - c0) / dt)
        return {"main_rows_per_s": rows / best, "randomizers_per_s_while_main_busy": statistics.median(made)}

    before = busy(lambda: 0)["main_rows_per_s"]
    out: dict[str, Any] = {}
    # the process pool: started and warmed first (spawn, import, tables), then measured
    t0 = time.perf_counter()
    pool = RandomizerPool(sk, workers=1)
    pool.prefill(64)
    pool.wait(64, timeout=120)
    startup = time.perf_counter() - t0
    pool.take(pool.ready())
    t0 = time.perf_counter()
    pool.prefill(count)
    pool.wait(count, timeout=600)
    rate = pool.ready() / (time.perf_counter() - t0)
    pool.take(pool.ready())
    pool.prefill(100 * count)  # keeps the worker busy while the main thread works
    out["process"] = {"randomizers_per_s": rate, "startup_s": startup, **busy(pool.ready)}
    sk.close()
    p_b, q_b, hs_b, alpha_bits = sk.secret_parts()
    parts = (mpz.from_bytes(p_b, "big"), mpz.from_bytes(q_b, "big"), mpz.from_bytes(hs_b, "big"))
    crt = CrtRandomizers(*parts, alpha_bits)  # built before the clock starts, as the pool's worker does
    for mode in ("table", "powmod"):
        made: list[mpz] = []
        stop = threading.Event()
        t0 = time.perf_counter()
        _thread_producer(crt, parts, count, mode, made, stop).join()
        rate = len(made) / (time.perf_counter() - t0)
        made.clear()
        th = _thread_producer(crt, parts, 100 * count, mode, made, stop)
        out[f"thread_{mode}"] = {"randomizers_per_s": rate, **busy(lambda: len(made))}  # noqa: B023 - used at once
        stop.set()
        th.join()
    out["alone"] = {"main_rows_per_s": (before + busy(lambda: 0)["main_rows_per_s"]) / 2}  # before and after
    return out


def measure(bits: int, n: int, repeats: int, workers: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    pk, sk = generate_keypair(bits, test_only_small_key=bits < 2048)
    keygen_s = time.perf_counter() - t0
    rng = seeded_numpy("bench-paillier", bits)
    ms = [int(v) for v in rng.integers(-(1 << 60), 1 << 60, size=n)]
    t0 = time.perf_counter()
    sk.randomizers(1)
    tables_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    pk.encrypt([0])
    public_table_s = time.perf_counter() - t0
    r: dict[str, Any] = {}
    r["encrypt"] = _cpu_rate(lambda: sk.encrypt(ms), n, repeats)
    r["public_encrypt"] = _cpu_rate(lambda: pk.encrypt(ms[: max(1, n // 3)]), max(1, n // 3), repeats)
    r["randomizer"] = _cpu_rate(lambda: sk.randomizers(n), n, repeats)
    cs = sk.encrypt(ms)
    add_n = 20 * n
    r["add"] = _cpu_rate(lambda: [pk.add(cs[i % n], cs[(i + 1) % n]) for i in range(add_n)], add_n, repeats)
    dec_n = max(1, n // 10)
    r["decrypt"] = _cpu_rate(lambda: sk.decrypt(cs[:dec_n], bound=1 << 61), dec_n, repeats)
    shift = 128
    slots = slots_per_plaintext(shift, pk.max_plaintext_bits)
    r["pack"] = _cpu_rate(lambda: pack_ciphertexts(pk, cs[:slots], shift), slots, repeats)
    # the histogram kernel: 20 n rows (ciphertexts reused) into 32 bins
    rows = 20 * n
    big = [cs[i % n] for i in range(rows)]
    groups = rng.integers(0, 32, size=rows)
    want = grouped_sum(pk, big, groups, 32)
    variants = {"one_pass": lambda: grouped_sum(pk, big, groups, 32),
                "sorted_runs": lambda: _grouped_sorted(pk, big, groups, 32),
                "lazy_reduce_2": lambda: _grouped_lazy(pk, big, groups, 32, 2),
                "lazy_reduce_4": lambda: _grouped_lazy(pk, big, groups, 32, 4)}
    for name, fn in variants.items():
        if fn() != want:
            raise RuntimeError(f"grouped_sum variant {name} disagrees with grouped_sum")
    gv = {name: _cpu_rate(fn, rows, repeats) for name, fn in variants.items()}
    r["grouped_sum"] = gv["one_pass"]
    r["to_wire"] = _cpu_rate(lambda: to_wire(pk, cs), n, repeats)
    arr = to_wire(pk, cs)
    r["from_wire"] = _cpu_rate(lambda: from_wire(pk, arr), n, repeats)
    if from_wire(pk, arr) != cs or sk.decrypt(cs, bound=1 << 61) != ms:
        raise RuntimeError("wire or decryption round trip failed")
    result: dict[str, Any] = {
        "key_bits": bits, "ciphertext_bytes": pk.ciphertext_bytes, "alpha_bits": pk.alpha_bits,
        "keygen_s": keygen_s, "crt_tables_s": tables_s, "public_table_s": public_table_s,
        "encrypt_per_s_per_core": r["encrypt"]["median"],
        "public_encrypt_per_s_per_core": r["public_encrypt"]["median"],
        "randomizer_per_s_per_core": r["randomizer"]["median"],
        "add_per_s_per_core": r["add"]["median"],
        "decrypt_per_s_per_core": r["decrypt"]["median"],
        "pack_per_s": r["pack"]["median"], "pack_shift_bits": shift, "pack_slots": slots,
        "grouped_sum_rows_per_s": r["grouped_sum"]["median"], "grouped_sum_groups": 32,
        "grouped_sum_variants": {k: v["median"] for k, v in gv.items()},
        "to_wire_us": 1e6 / r["to_wire"]["median"], "from_wire_us": 1e6 / r["from_wire"]["median"],
        "samples": r,
    }
    if workers:
        pool = RandomizerPool(sk, workers=workers)
        pool.prefill(n)
        ready = pool.wait(n, timeout=600)
        t0 = time.perf_counter()
        out = sk.encrypt(ms)
        result["encrypt_with_pool_per_s"] = n / (time.perf_counter() - t0)
        result["encrypt_with_pool_prefilled"] = ready
        sk.close()
        if sk.decrypt(out, bound=1 << 61) != ms:
            raise RuntimeError("encryption with the pool decrypts wrong")
        result["background"] = background(pk, sk, n, lambda: grouped_sum(pk, big, groups, 32), rows)
    return result


def _phe(bits: int) -> dict[str, Any]:
    try:
        import phe  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return {"skipped": "python-paillier (phe) is not installed in this environment (not installed for the "
                           "benchmark: the shared venv gets no extra packages)"}
    from phe import paillier
    pub, _ = paillier.generate_paillier_keypair(n_length=bits)
    count = 50
    rate = _cpu_rate(lambda: [pub.encrypt(i) for i in range(count)], count, 1)
    return {"encrypt_per_s_per_core": rate["median"], "version": getattr(phe, "__version__", "?")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m simulations.benchmarks.paillier", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="directory for paillier.json")
    p.add_argument("--bits", type=int, default=2048, help="modulus bits (below 2048: a test-size key, flagged)")
    p.add_argument("--n", type=int, default=1000, help="encryptions per timing (other counts scale with it)")
    p.add_argument("--repeats", type=int, default=3, help="repeats of each timing (the median is reported)")
    p.add_argument("--workers", type=int, default=1, help="pool workers for the pool rows (0: skip them)")
    args = p.parse_args(argv)
    if args.bits < 2048:
        print(f"note: a {args.bits}-bit key is below the 2048-bit minimum: for comparison only, not a secure size")
    res = measure(args.bits, args.n, args.repeats, args.workers)
    res["phe"] = _phe(args.bits)
    res["published"] = PUBLISHED
    res["machine"] = {"platform": f"{platform.system()}-{platform.release()}-{platform.machine()}",
                      "cpus": os.cpu_count(), "load_1min": os.getloadavg()[0],
                      "gmpy2": gmpy2.version(), "gmp": gmpy2.mp_version()}
    rows = [("key holder encrypt (CRT, inline randomizers)", res["encrypt_per_s_per_core"], "/s/core"),
            ("public-key encrypt", res["public_encrypt_per_s_per_core"], "/s/core"),
            ("randomizers h_s^a (CRT)", res["randomizer_per_s_per_core"], "/s/core"),
            ("encrypt with a prefilled pool", res.get("encrypt_with_pool_per_s", float("nan")), "/s (wall)"),
            ("add (ciphertext product)", res["add_per_s_per_core"], "/s/core"),
            ("decrypt (CRT)", res["decrypt_per_s_per_core"], "/s/core"),
            (f"pack ({res['pack_slots']} slots of {res['pack_shift_bits']} bits)", res["pack_per_s"], "slots/s/core"),
            ("grouped_sum (32 bins)", res["grouped_sum_rows_per_s"], "rows/s/core"),
            ("to_wire / from_wire", f"{res['to_wire_us']:.2f} / {res['from_wire_us']:.2f}", "us/ciphertext")]
    print(f"Paillier (DJN), {res['key_bits']}-bit n, {res['ciphertext_bytes']}-byte ciphertexts, "
          f"gmpy2 {gmpy2.version()}; load {res['machine']['load_1min']:.2f} on {os.cpu_count()} cpus")
    for name, value, unit in rows:
        shown = f"{value:>12,.0f}" if isinstance(value, float) else f"{value:>12}"
        print(f"  {name:<48} {shown} {unit}")
    for name, v in res["grouped_sum_variants"].items():
        print(f"    grouped_sum variant {name:<27} {v:>12,.0f} rows/s/core")
    for mode, v in res.get("background", {}).items():
        made = (f"{v['randomizers_per_s']:>6,.0f} randomizers/s alone, {v['randomizers_per_s_while_main_busy']:>6,.0f} "
                "beside main" if "randomizers_per_s" in v else " " * 44)
        print(f"    background {mode:<14} {made}; main grouped_sum {v['main_rows_per_s']:>8,.0f} rows/s")
    phe = res["phe"]
    print(f"  phe (python-paillier): {phe.get('skipped') or format(phe['encrypt_per_s_per_core'], ',.0f') + ' enc/s/core'}")
    for name, v in PUBLISHED.items():
        print(f"  published, not measured here: {name} {v['encrypt_per_s_per_core']:,} enc/s/core at {v['key_bits']} bits "
              f"({v['source']})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "paillier.json").write_text(json.dumps(res, indent=2, default=float) + "\n")
    print(f"wrote {out / 'paillier.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
