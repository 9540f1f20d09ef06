"""Mods that re-encode a party's embedding message, and the server-side reader of what they send.

A message's ``EMB`` record holds exactly one of: ``FLOAT`` (float embedding), ``INTS`` (integers:
PBM counts or fixed-point codes), or ``PACKED`` (integers bit-packed to ``k`` bits, possibly masked
by secure aggregation, with shape and ``k`` in the ``ENC`` config record); names in
``parties.vertical.wire``. Mods compose left to
right: ``pbm_mod`` (e -> q), ``secagg_mod`` (q -> masked p) or ``pack_counts_mod`` (q -> p).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from flwr.common import ArrayRecord, Message

from parties.vertical import wire as vw
from vfl.core.errors import ProtocolError
from vfl.runtime import message as wire
from vfl.runtime.mods import Mod, ModContext
from vfl.secagg import encode_fixed, pack_bits, unpack_bits

ROWS = "secagg_rows"  # mod-state key: the samples of the rows the party masks next (SecAgg mode announced)


def _set(message: Message, **arrays: np.ndarray) -> None:
    message.content.array_records[vw.Record.EMB] = wire.arrays(**arrays)


def _packed(message: Message, values: np.ndarray, k: int, masked: bool) -> Message:
    _set(message, **{vw.Array.PACKED: np.frombuffer(pack_bits(values.ravel(), k), dtype=np.uint8)})
    rows, cols = values.shape
    message.content.config_records[vw.Record.ENC] = wire.config(**{vw.Key.BITS: k, vw.Key.ROWS: int(rows), vw.Key.COLS: int(cols),
                                                        vw.Key.MASKED: masked})
    return message


def pbm_mod(*, b: int, beta: float, c: float) -> Mod:
    """Float embedding (clamped to [-c, c]) -> Binomial(b, 1/2 + (beta/c) x) counts (PBM-VFL, Algorithm 1)."""
    from vfl.privacy.mechanisms.pbm import pbm_encode

    def mod(message: Message, ctx: ModContext) -> Message:
        e = wire.get_array(message, vw.Record.EMB, vw.Array.FLOAT)
        q = pbm_encode(torch.from_numpy(np.array(e, dtype=np.float32)), b=b, beta=beta, c=c,
                       noise=ctx.noise("pbm"))
        _set(message, **{vw.Array.INTS: q.numpy().astype(np.uint32)})
        return message

    return mod


def gaussian_mod(*, sigma: float) -> Mod:
    """LDP baseline: add N(0, sigma^2) to every embedding coordinate before it leaves the party."""
    from vfl.privacy.mechanisms.gaussian import gaussian_perturb

    def mod(message: Message, ctx: ModContext) -> Message:
        e = torch.from_numpy(np.array(wire.get_array(message, vw.Record.EMB, vw.Array.FLOAT), dtype=np.float32))
        _set(message, **{vw.Array.FLOAT: gaussian_perturb(e, sigma=sigma, noise=ctx.noise("ldp")).numpy()})
        return message

    return mod


def fixed_point_mod(*, scale: float, clip: float, k: int) -> Mod:
    """Float embedding -> fixed-point codes in Z_{2^k} (round(x*scale), clipped to [-clip, clip])."""

    def mod(message: Message, ctx: ModContext) -> Message:
        e = wire.get_array(message, vw.Record.EMB, vw.Array.FLOAT)
        _set(message, **{vw.Array.INTS: encode_fixed(e, scale=scale, clip=clip, k=k).reshape(e.shape)})
        return message

    return mod


def pack_counts_mod(*, k: int) -> Mod:
    """Without SecAgg: bit-pack the integers to ``k`` bits (no masking)."""

    def mod(message: Message, ctx: ModContext) -> Message:
        return _packed(message, wire.get_array(message, vw.Record.EMB, vw.Array.INTS), k, masked=False)

    return mod


def secagg_mod(*, k: int, name: str = vw.Record.EMB) -> Mod:
    """Double-mask the integers mod 2^k and bit-pack them; the round tag and tensor name make every
    mask key fresh. The party's key material is ``ctx.secagg``, which only a party that ran the
    key set-up provides (``parties.secagg.party.SecAggParty.ctx``); any other party is refused."""

    def mod(message: Message, ctx: ModContext) -> Message:
        client = ctx.secagg
        if client is None:
            raise ProtocolError(f"party {ctx.party}: secure aggregation used before key set-up")
        q = wire.get_array(message, vw.Record.EMB, vw.Array.INTS)
        rnd = wire.round_of(message)
        masked = client.mask(q.ravel(), round_id=rnd, name=name, k=k, rows=ctx.state.pop(ROWS, None))
        return _packed(message, np.asarray(masked).reshape(q.shape), k, masked=True)

    return mod


@dataclass(frozen=True)
class Encoded:
    """What the server reads from one party's message."""

    kind: str  # "float" | "int" | "packed"
    values: np.ndarray  # float32 or integer array of shape (rows, cols)
    k: int = 0
    masked: bool = False


def read_encoded(message: Message) -> Encoded:
    """The embedding a party sent, whichever encoding its mods chose (ProtocolError if none)."""
    rec = wire.record_of(message, vw.Record.EMB, ArrayRecord)
    if rec is None:
        raise ProtocolError(f"message from node {message.metadata.src_node_id} has no embedding record")
    if vw.Array.FLOAT in rec:
        return Encoded("float", wire.from_array(rec[vw.Array.FLOAT]))
    if vw.Array.INTS in rec:
        return Encoded("int", wire.from_array(rec[vw.Array.INTS]))
    if vw.Array.PACKED in rec:
        enc = wire.config_of(message, vw.Record.ENC)
        rows, cols, k = int(enc[vw.Key.ROWS]), int(enc[vw.Key.COLS]), int(enc[vw.Key.BITS])  # type: ignore[arg-type]
        values = unpack_bits(wire.from_array(rec[vw.Array.PACKED]).tobytes(), k, rows * cols).reshape(rows, cols)
        return Encoded("packed", values, k=k, masked=bool(enc[vw.Key.MASKED]))
    raise ProtocolError(f"embedding record from node {message.metadata.src_node_id} has no e/q/p array")
