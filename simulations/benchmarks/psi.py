"""Cost of sample alignment and of authentication.

    python -m simulations.benchmarks.psi --out bench-out            # 10^4 and 10^5 IDs per party
    python -m simulations.benchmarks.psi --out bench-out --full     # adds 10^6 (minutes on 2 cores)

PSI: one label holder and one party, each with ``n`` IDs of which ``--overlap`` are common, run
the exact steps and messages of the setup phase (``query.psi_request`` / ``query.psi_response``:
ECDH-PSI with a GCS setup, openmined-psi) — time of each step on one core and the wire bytes of
the flwr messages — beside the naive exchange it replaces (the party sends SHA-256 of every ID in
one message, the label holder intersects: fast, small, and open to a dictionary attack).

Authentication: sign and verify time per message by size — a unicast (HMAC-SHA512 under the pair
key; ``sign_us``/``verify_us``) and a broadcast (Ed25519; ``broadcast_sign_us``/``broadcast_verify_us``)
— and the cost per training step
of the demo (PBM, 4 parties), measured inside the hosts during a real in-process run (time spent
in signing and verification / steps), beside the step time with ``auth: false``.
Writes ``DIR/psi.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from flwr.common import ArrayRecord, ConfigRecord

from parties.vertical import wire as vw
from vfl.core.rng import seeded_numpy
from vfl.data import psi_wire as pw
from vfl.data.psi import FPR, PsiClient, hashed_ids, respond
from vfl.runtime import message as wire
from vfl.runtime.auth import MAC_RECORD_BYTES, SIGNATURE_RECORD_BYTES, HostAuth
from vfl.runtime.message import Wire

DEFAULT_SIZES = [10_000, 100_000]
FULL_SIZES = [10_000, 100_000, 1_000_000]
AUTH_SIZES = [1_000, 16_000, 256_000, 4_000_000]


def _ids(n: int, overlap: float, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = seeded_numpy("bench-psi", n, seed)
    nums = rng.choice(10**9, size=2 * n, replace=False)
    common = int(round(overlap * n))
    label = [f"cust-{v:09d}" for v in nums[:n]]
    party = label[:common] + [f"cust-{v:09d}" for v in nums[n:2 * n - common]]
    rng.shuffle(party)
    return label, party


def _u8(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.uint8)


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def psi_row(n: int, overlap: float) -> dict[str, Any]:
    label, party = _ids(n, overlap)
    tag = wire.round_tag(0, 0, "setup")
    client = PsiClient(sorted(label))
    request, t_req = _timed(client.request)
    (setup, response), t_resp = _timed(lambda: respond(request, party))
    common, t_int = _timed(lambda: client.intersect(setup, response))
    req_msg = wire.make(pw.Kind.REQUEST, src=0, dst=1, round=tag, content=wire.records(**{pw.Record.PSI: wire.arrays(request=_u8(request))}))
    named: dict[str, ArrayRecord | ConfigRecord] = {pw.Record.PSI: wire.arrays(setup=_u8(setup), response=_u8(response)),
                                                    "n": wire.config(n=len(party))}
    resp_msg = wire.make(pw.Kind.RESPONSE, src=1, dst=0, round=tag, content=wire.records(**named))
    psi_bytes = len(wire.encode(req_msg)) + len(wire.encode(resp_msg))
    if len(common) != int(round(overlap * n)):
        raise RuntimeError(f"PSI found {len(common)} common IDs, expected {int(round(overlap * n))}")
    # the naive exchange: SHA-256 of every party ID, intersected by the label holder
    t0 = time.perf_counter()
    digests = hashed_ids(party)
    naive_msg = wire.make(pw.Kind.RESPONSE, src=1, dst=0, round=tag, content=wire.records(h=wire.arrays(h=_u8(digests))))
    naive_wire = wire.encode(naive_msg)
    theirs = {digests[i:i + 32] for i in range(0, len(digests), 32)}
    mine = hashed_ids(label)
    naive_common = [k for i, k in enumerate(label) if mine[32 * i:32 * i + 32] in theirs]
    t_naive = time.perf_counter() - t0
    if len(naive_common) != len(common):
        raise RuntimeError("the naive exchange found another intersection")
    total = t_req + t_resp + t_int
    return {
        "ids_per_party": n, "intersection": len(common),
        "psi": {"request_s": t_req, "respond_s": t_resp, "intersect_s": t_int, "total_s": total,
                "request_bytes": len(wire.encode(req_msg)), "response_bytes": len(wire.encode(resp_msg)),
                "setup_part_bytes": len(setup), "bytes": psi_bytes, "bytes_per_id": psi_bytes / n},
        "naive": {"total_s": t_naive, "bytes": len(naive_wire), "bytes_per_id": len(naive_wire) / n},
        "bytes_ratio": psi_bytes / len(naive_wire), "time_ratio": total / t_naive,
    }


def _sign_verify_us(host: HostAuth, peer: HostAuth, w: wire.Wire, repeats: int) -> tuple[float, float]:
    """Median microseconds of ``host`` authenticating ``w`` (from its node 1) and ``peer`` checking it."""
    signs, verifies = [], []
    for _ in range(repeats):
        signed, t_s = _timed(lambda: host.sign(1, w))
        decoded = wire.decode(signed.data)
        _, t_v = _timed(lambda: peer.verify(signed.data, decoded))  # noqa: B023 - called at once
        signs.append(t_s)
        verifies.append(t_v)
    return 1e6 * statistics.median(signs), 1e6 * statistics.median(verifies)


def auth_rows(repeats: int) -> dict[str, dict[str, float]]:
    """Median sign / verify microseconds per message of each size: unicast (MAC) and broadcast (Ed25519)."""
    host = HostAuth({1: "a"}, "bench")
    peer = HostAuth({0: "b"}, "bench peer")
    roster = {n: (str(n), *k) for h in (host, peer) for n, k in h.public_keys().items()}
    host.install(roster)
    peer.install(roster)
    out: dict[str, dict[str, float]] = {}
    for size in AUTH_SIZES:
        content = wire.records(**{vw.Record.EMB: wire.arrays(**{vw.Array.FLOAT: np.zeros(size // 4, np.float32)})})
        uni = wire.Wire.of(wire.make(vw.Kind.TRAIN_FORWARD, src=1, dst=0, round=wire.round_tag(0, 0), content=content))
        bcast = wire.Wire.of(wire.make(vw.Kind.TRAIN_FORWARD, src=1, dst=wire.BROADCAST, round=wire.round_tag(0, 0),
                                       content=content))
        sign_us, verify_us = _sign_verify_us(host, peer, uni, repeats)
        b_sign_us, b_verify_us = _sign_verify_us(host, peer, bcast, repeats)
        out[str(size)] = {"sign_us": sign_us, "verify_us": verify_us,
                          "broadcast_sign_us": b_sign_us, "broadcast_verify_us": b_verify_us}
    return out


def demo_step_cost(epochs: int) -> dict[str, float]:
    """Time inside HostAuth.sign/verify per training step of the demo (in process), and step times."""
    from simulations.cli.runner import execute, resolve_config

    spent = {"sign": 0.0, "verify": 0.0, "n_sign": 0, "n_verify": 0}
    real_sign, real_verify = HostAuth.sign, HostAuth.verify

    def sign(self: HostAuth, node_id: int, wire: Wire) -> Wire:  # HostAuth.sign's parameter names
        out, t = _timed(lambda: real_sign(self, node_id, wire))
        spent["sign"] += t
        spent["n_sign"] += 1
        return out

    def verify(self: HostAuth, data: bytes, message: Any) -> Any:
        out, t = _timed(lambda: real_verify(self, data, message))
        spent["verify"] += t
        spent["n_verify"] += 1
        return out

    from simulations.data.source import ConfigDataSource
    from vfl.data.sampling import num_batches

    step_s = {}
    for auth in (False, True):
        cfg = resolve_config("demo", [f"train.epochs={epochs}", f"auth={str(auth).lower()}"], transport="inprocess")
        n_train = len(ConfigDataSource.from_config(cfg).partition()[1].y_train)
        n_steps = epochs * num_batches(num_samples=n_train, batch_size=cfg.train.batch_size)
        HostAuth.sign, HostAuth.verify = sign, verify  # type: ignore[method-assign]
        try:
            res = execute(cfg, out_dir=None, progress=False)
        finally:
            HostAuth.sign, HostAuth.verify = real_sign, real_verify  # type: ignore[method-assign]
        step_s[auth] = sum(h["train_s"] for h in res.history) / n_steps
    # all signing/verification of the run (setup and evaluation included) over its training steps
    return {"steps": n_steps, "signatures_per_step": spent["n_sign"] / n_steps,
            "verifications_per_step": spent["n_verify"] / n_steps,
            "sign_verify_us_per_step": 1e6 * (spent["sign"] + spent["verify"]) / n_steps,
            "step_ms_auth_off": 1e3 * step_s[False], "step_ms_auth_on": 1e3 * step_s[True]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m simulations.benchmarks.psi", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="directory for psi.json")
    p.add_argument("--full", action="store_true", help="also 10^6 IDs per party (slow on small machines)")
    p.add_argument("--sizes", type=int, nargs="+", help="IDs per party (overrides the defaults)")
    p.add_argument("--overlap", type=float, default=0.8)
    p.add_argument("--repeats", type=int, default=50, help="repeats of each sign/verify timing")
    p.add_argument("--demo-epochs", type=int, default=2, help="epochs of the demo for the per-step auth cost")
    args = p.parse_args(argv)
    sizes = args.sizes or (FULL_SIZES if args.full else DEFAULT_SIZES)
    rows = []
    print(f"{'IDs/party':>10} {'common':>8} {'PSI s':>8} {'PSI MB':>8} {'B/ID':>6} {'naive s':>8} {'naive MB':>9} "
          f"{'bytes x':>8}")
    for n in sizes:
        r = psi_row(n, args.overlap)
        rows.append(r)
        print(f"{n:>10} {r['intersection']:>8} {r['psi']['total_s']:>8.2f} {r['psi']['bytes'] / 1e6:>8.2f} "
              f"{r['psi']['bytes_per_id']:>6.1f} {r['naive']['total_s']:>8.3f} {r['naive']['bytes'] / 1e6:>9.2f} "
              f"{r['bytes_ratio']:>8.2f}", flush=True)
    per_msg = auth_rows(args.repeats)
    for size, v in per_msg.items():
        print(f"auth {int(size):>9} B message: unicast (MAC) sign {v['sign_us']:8.1f} us, verify "
              f"{v['verify_us']:8.1f} us; broadcast (Ed25519) sign {v['broadcast_sign_us']:8.1f} us, verify "
              f"{v['broadcast_verify_us']:8.1f} us")
    step = demo_step_cost(args.demo_epochs)
    print(f"auth per demo step: {step['sign_verify_us_per_step']:.0f} us sign+verify "
          f"({step['signatures_per_step']:.1f} signatures, {step['verifications_per_step']:.1f} verifications); "
          f"step {step['step_ms_auth_off']:.1f} ms without auth, {step['step_ms_auth_on']:.1f} ms with")
    result = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_1min": os.getloadavg()[0]},
        "overlap": args.overlap, "fpr": FPR, "protocol": "ECDH-PSI (openmined-psi 2.0, GCS setup), label holder = client",
        "rows": rows,
        "auth": {"signature_bytes": SIGNATURE_RECORD_BYTES, "mac_record_bytes": MAC_RECORD_BYTES, "per_message": per_msg, "demo_step": step},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "psi.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out / 'psi.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
