"""Randomness, in two kinds that never mix.

*Seeded streams* make runs reproducible: model initialisation, data shuffling, batch order,
dropout, attack restarts. They are pure functions of the run seed and named parts
(:func:`derive_seed`, :func:`seeded_torch`, :func:`seeded_numpy`), so every node can rebuild
them — which is exactly why they must never protect privacy.

*Privacy noise* (PBM binomials, Gaussian LDP and DP-SGD noise, dχ magnitudes and directions,
P3EFT noise pieces and mixing weights, randomized response) comes from a :class:`NoiseSource`:
an AES-256-CTR keystream whose 256-bit key is drawn from the OS CSPRNG inside the node that adds
the noise (:meth:`NoiseSource.fresh`). The key is never sent, logged or checkpointed, so no other
node — and not the driver — can regenerate the noise, whatever seeds it holds. Uniforms,
Gaussians, exponentials and binomials are derived from the keystream words here, never from
torch's or numpy's generators (torch keeps only 64 bits of seed state and is predictable from
its outputs; PCG64 is not a cryptographic generator). :meth:`NoiseSource.seeded` gives the same
sampler keyed from the run seed, for reproducible debugging only (``privacy.noise_rng:
seeded``): then the reported ε is not a guarantee against anyone who knows the seed.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import torch
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from vfl.core.errors import ConfigError

KEY_BYTES = 32
_CHUNK_WORDS = 1 << 16  # keystream words produced per AES call (256 KiB)
_TWO32 = float(1 << 32)
_TWO53 = float(1 << 53)
NOISE_RNG = ("crypto", "seeded")
"""Allowed values of ``privacy.noise_rng``."""

Shape = int | Sequence[int]


# ---- seeded (reproducible) streams ---------------------------------------------------------
def derive_seed(*parts: int | str) -> int:
    """A 64-bit seed derived from named parts (stable across processes, unlike ``hash``)."""
    h = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "little")


def seeded_torch(*parts: int | str, device: torch.device | str = "cpu") -> torch.Generator:
    """A torch generator seeded from ``parts`` (reproducibility only: never for privacy noise)."""
    return torch.Generator(device=device).manual_seed(derive_seed(*parts) >> 1)


def seeded_numpy(*parts: int | str) -> np.random.Generator:
    """A numpy generator seeded from ``parts`` (reproducibility only: never for privacy noise)."""
    return np.random.default_rng(derive_seed(*parts))


# ---- privacy noise --------------------------------------------------------------------------
def _numel(shape: Shape) -> tuple[tuple[int, ...], int]:
    dims = (int(shape),) if isinstance(shape, int | np.integer) else tuple(int(s) for s in shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"negative dimension in shape {dims}")
    return dims, math.prod(dims)


class NoiseSource:
    """Random variables for privacy noise, from an AES-256-CTR keystream under a secret key.

    Create it inside the node that adds the noise with :meth:`fresh` (OS entropy). One source
    is one stream: every draw consumes fresh keystream words, so no two draws share randomness.
    """

    __slots__ = ("_encryptor", "_zeros", "reproducible")

    def __init__(self, key: bytes, *, reproducible: bool) -> None:
        if not isinstance(key, bytes) or len(key) != KEY_BYTES:
            raise ValueError(f"a noise key must be {KEY_BYTES} bytes")
        self._encryptor = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
        self._zeros = bytes(4 * _CHUNK_WORDS)
        self.reproducible = reproducible

    @classmethod
    def fresh(cls) -> NoiseSource:
        """A source keyed with 256 bits of OS entropy: nobody else can regenerate its output."""
        return cls(os.urandom(KEY_BYTES), reproducible=False)

    @classmethod
    def seeded(cls, *parts: int | str) -> NoiseSource:
        """A reproducible source keyed by SHA-256 of ``parts`` (debugging; NOT private)."""
        key = hashlib.sha256(b"vfl-noise|" + "|".join(str(p) for p in parts).encode()).digest()
        return cls(key, reproducible=True)

    @classmethod
    def for_mode(cls, mode: str, *parts: int | str) -> NoiseSource:
        """``crypto`` -> :meth:`fresh`; ``seeded`` -> :meth:`seeded` of ``parts``."""
        if mode == "crypto":
            return cls.fresh()
        if mode == "seeded":
            return cls.seeded(*parts)
        raise ValueError(f"noise_rng must be one of {NOISE_RNG}, got {mode!r}")

    @classmethod
    def for_round(cls, mode: str, *, seed: int, purpose: str, node: int, phase: str, epoch: int,
                  step: int, fresh: NoiseSource | None = None) -> NoiseSource:
        """The noise a node uses for one (purpose, round): in ``seeded`` mode a stream that is a pure
        function of these names (so a resumed run replays it, and anyone holding the seed can
        rebuild it); in ``crypto`` mode the node's own ``fresh`` source (or a new one)."""
        if mode == "seeded":
            return cls.seeded("noise", seed, purpose, node, phase, epoch, step)
        if mode == "crypto":
            return fresh if fresh is not None else cls.fresh()
        raise ValueError(f"noise_rng must be one of {NOISE_RNG}, got {mode!r}")

    def __getstate__(self) -> None:
        raise TypeError("a NoiseSource holds a secret key and must not be pickled or sent")

    def __repr__(self) -> str:
        return f"NoiseSource({'seeded' if self.reproducible else 'crypto'})"

    # ---- raw material ------------------------------------------------------------------------
    def _stream(self, nbytes: int) -> npt.NDArray[np.uint8]:
        """The next ``nbytes`` keystream bytes."""
        out = np.empty(nbytes, dtype=np.uint8)
        for start in range(0, nbytes, 4 * _CHUNK_WORDS):
            stop = min(nbytes, start + 4 * _CHUNK_WORDS)
            out[start:stop] = np.frombuffer(self._encryptor.update(self._zeros[: stop - start]), dtype=np.uint8)
        return out

    def words(self, n: int) -> npt.NDArray[np.uint32]:
        """``n`` independent uniform 32-bit words (little-endian keystream)."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        return self._stream(4 * n).view("<u4").astype(np.uint32, copy=False)

    def bytes(self, n: int) -> npt.NDArray[np.uint8]:
        """``n`` independent uniform bytes."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        return self._stream(n)

    def _unit53(self, n: int) -> npt.NDArray[np.float64]:
        """``n`` uniforms k/2^53 on [0, 1) with 53 random bits each (two words per value)."""
        w = self.words(2 * n).astype(np.uint64).reshape(n, 2)
        return ((w[:, 0] >> np.uint64(5)) * np.uint64(1 << 26) + (w[:, 1] >> np.uint64(6))).astype(np.float64) / _TWO53

    # ---- continuous --------------------------------------------------------------------------
    def uniform(self, shape: Shape, *, dtype: torch.dtype = torch.float64,
                device: torch.device | str = "cpu") -> torch.Tensor:
        """Uniforms on [0, 1) with 53 random bits (then cast to ``dtype``)."""
        dims, n = _numel(shape)
        return torch.from_numpy(self._unit53(n).reshape(dims)).to(dtype=dtype, device=device)

    def uniform_open(self, shape: Shape, *, dtype: torch.dtype = torch.float64,
                     device: torch.device | str = "cpu") -> torch.Tensor:
        """Uniforms on (0, 1): (k + 1/2)/2^53, safe under ``log``."""
        dims, n = _numel(shape)
        u = self._unit53(n) + 0.5 / _TWO53
        return torch.from_numpy(u.reshape(dims)).to(dtype=dtype, device=device)

    def normal(self, shape: Shape, *, dtype: torch.dtype = torch.float32,
               device: torch.device | str = "cpu") -> torch.Tensor:
        """Standard Gaussians by the Box-Muller transform of keystream uniforms (float64 math)."""
        dims, n = _numel(shape)
        half = (n + 1) // 2
        u = self._unit53(2 * half).reshape(2, half)
        r = np.sqrt(-2.0 * np.log(u[0] + 0.5 / _TWO53))
        theta = 2.0 * math.pi * u[1]
        z = np.concatenate([r * np.cos(theta), r * np.sin(theta)])[:n]
        return torch.from_numpy(z.reshape(dims)).to(dtype=dtype, device=device)

    def exponential(self, shape: Shape, *, dtype: torch.dtype = torch.float64,
                    device: torch.device | str = "cpu") -> torch.Tensor:
        """Exp(1) variables: −log U with U uniform on (0, 1)."""
        return -torch.log(self.uniform_open(shape, dtype=torch.float64)).to(dtype=dtype, device=device)

    # ---- discrete ----------------------------------------------------------------------------
    def binomial(self, trials: int, p: torch.Tensor) -> torch.Tensor:
        """Exact Binomial(trials, p̃) counts (int64, shape of ``p``) as sums of Bernoulli coins.

        Each coin is [U < T] for a uniform 32-bit U and an integer threshold T, so it is exactly
        Bernoulli(T/2^32); T rounds p·2^32 towards 1/2, hence p̃ = T/2^32 lies between 1/2 and p.
        For PBM (p in [1/2−β, 1/2+β]) the accounted worst case therefore still holds exactly.
        U is drawn lazily, most significant byte first: a coin whose top byte differs from T's is
        decided by that byte; only on a tie (probability 1/256) are U's other 24 bits drawn.
        """
        if isinstance(trials, bool) or not isinstance(trials, int | np.integer) or trials < 0:
            raise ValueError(f"trials must be an int >= 0, got {trials!r}")
        p64 = p.detach().to("cpu", torch.float64).numpy()
        if p64.size and not (p64.min() >= 0.0 and p64.max() <= 1.0):  # NaN fails both comparisons
            raise ValueError("binomial probabilities must lie in [0, 1]")
        scaled = p64.reshape(-1) * _TWO32
        # T rounds towards 1/2: floor above it, ceil below it (exact integers in float64)
        thr = np.where(scaled >= _TWO32 / 2, np.floor(scaled), np.ceil(scaled)).astype(np.int64)
        sure = thr == 1 << 32  # T = 2^32: every coin succeeds (p = 1)
        t = np.where(sure, 0, thr)
        top, rest = (t >> 24).astype(np.uint8), (t & 0xFFFFFF).astype(np.uint32)
        n, k = t.size, int(trials)
        counts = np.where(sure, k, 0).astype(np.int64)
        acc = np.uint16 if k < 1 << 16 else np.int64
        cols = max(1, _CHUNK_WORDS * 4 // max(1, k))  # bound the bytes held at once
        for start in range(0, n, cols):
            stop = min(n, start + cols)
            m = stop - start
            hi = self.bytes(k * m).reshape(k, m)  # coin-major: the count is a fast sum over axis 0
            t_hi = top[start:stop]
            won = (hi < t_hi).sum(axis=0, dtype=acc).astype(np.int64)
            tied = np.flatnonzero(hi == t_hi) % m  # the sample of every tied coin
            if tied.size:
                low = self.words(tied.size) >> np.uint32(8)  # the other 24 bits of the tied U
                won += np.bincount(tied[low < rest[start:stop][tied]], minlength=m)
            counts[start:stop] += np.where(sure[start:stop], 0, won)
        return torch.from_numpy(counts.reshape(p64.shape)).to(p.device)

    def integers(self, high: int, shape: Shape) -> npt.NDArray[np.int64]:
        """Uniform integers in [0, high) by rejection sampling on 32-bit words (no modulo bias)."""
        if not 1 <= high <= 1 << 32:
            raise ValueError(f"high must be in [1, 2^32], got {high}")
        dims, n = _numel(shape)
        limit = (1 << 32) - ((1 << 32) % high)  # accept words below the largest multiple of high
        out = np.empty(0, dtype=np.int64)
        while out.size < n:
            w = self.words(max(16, 2 * (n - out.size))).astype(np.int64)
            out = np.concatenate([out, w[w < limit] % high])
        return out[:n].reshape(dims)

    def signs(self, shape: Shape, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """Uniform ±1 values."""
        dims, n = _numel(shape)
        bits = (self.words(n) & 1).astype(np.float64)
        return torch.from_numpy((2.0 * bits - 1.0).reshape(dims)).to(dtype)


class NodeNoise:
    """The privacy noise of one node: ``round(purpose, ...)`` gives the source for one round.

    Build it inside the node that adds the noise. ``crypto``: one :meth:`NoiseSource.fresh` source
    for the node's lifetime (``fresh``), never sent, logged or checkpointed. ``seeded``: the
    per-round recipe :meth:`NoiseSource.for_round` of (seed, purpose, node, phase, epoch, step), so
    a resumed run replays the same noise (and anyone holding the seed can too).
    """

    __slots__ = ("fresh", "mode", "node", "seed")

    def __init__(self, mode: str, *, seed: int, node: int) -> None:
        if mode not in NOISE_RNG:
            raise ConfigError("privacy.noise_rng", f"got {mode!r}; allowed: one of {', '.join(NOISE_RNG)}")
        self.mode, self.seed, self.node = mode, int(seed), int(node)
        self.fresh: NoiseSource | None = NoiseSource.fresh() if mode == "crypto" else None

    def round(self, purpose: str, *, phase: str, epoch: int, step: int) -> NoiseSource:
        """The noise for ``purpose`` in one round (crypto: the node's own stream, continued)."""
        return NoiseSource.for_round(self.mode, seed=self.seed, purpose=purpose, node=self.node, phase=phase,
                                     epoch=epoch, step=step, fresh=self.fresh)

    def __getstate__(self) -> None:
        raise TypeError("a NodeNoise holds a secret key and must not be pickled or sent")

    def __repr__(self) -> str:
        return f"NodeNoise({self.mode}, node={self.node})"
