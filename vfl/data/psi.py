"""Private set intersection as pure steps on bytes (OpenMined's ``openmined-psi``: ECDH-PSI).

Roles: the label holder is the PSI *client* — it learns which of its own IDs the other side holds
(``reveal_intersection=True``); a passive party is the PSI *server* — it learns only how many IDs
the client sent. Client: ``H(x)^c`` for its IDs (request). Server: ``H(y)^s`` for its own IDs,
compressed in a Golomb-compressed set (setup), and ``H(x)^{cs}`` (response). The client removes
``c`` and tests membership; a false positive has probability ``FPR`` for the whole query.

``hashed_ids`` is the naive exchange PSI replaces (each party sends SHA-256 of its IDs): kept for
the benchmark and for the test that shows its digests give the IDs away to a dictionary attack.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from vfl.core.errors import ConfigError, DataError, ProtocolError, install_hint

if TYPE_CHECKING:
    from vfl.core.rng import NoiseSource

FPR = 1e-9  # false-positive probability of one whole intersection query


def _lib():  # type: ignore[no-untyped-def]
    try:
        import private_set_intersection.python as psi
    except ImportError:  # the optional 'psi' extra is not installed: one clear line naming it
        raise ConfigError("data.parties", "per-party files are aligned by private set intersection, which "
                          f"needs the optional 'psi' extra (openmined-psi): {install_hint('psi')}") from None
    return psi


def require() -> None:
    """The one-line ``ConfigError`` naming the ``psi`` extra when openmined-psi is missing: the
    driver calls it before any actor starts, so a run with per-party files fails at once."""
    _lib()


def _parse(cls: type, data: bytes, what: str):  # type: ignore[no-untyped-def]
    msg = cls()
    try:
        msg.ParseFromString(bytes(data))
    except Exception as exc:  # protobuf DecodeError
        raise ProtocolError(f"malformed PSI {what} ({len(data)} bytes): {exc}") from None
    return msg


class PsiClient:
    """The label holder's side of one PSI run over an ordered list of its IDs (fresh key per run)."""

    def __init__(self, ids: Sequence[str]) -> None:
        psi = _lib()
        self.ids = list(ids)
        self._client = psi.client.CreateWithNewKey(True)

    def request(self) -> bytes:
        return self._client.CreateRequest(self.ids).SerializeToString()  # type: ignore[no-any-return]

    def intersect(self, setup: bytes, response: bytes) -> list[str]:
        """The client's IDs (in its order) that the server holds."""
        psi = _lib()
        s = _parse(psi.ServerSetup, setup, "setup")
        r = _parse(psi.Response, response, "response")
        try:
            idx = self._client.GetIntersection(s, r)
        except Exception as exc:  # the C++ layer reports size mismatches etc. as RuntimeError
            raise ProtocolError(f"PSI response does not match the request: {exc}") from None
        return [self.ids[i] for i in sorted(idx)]


def respond(request: bytes, own_ids: Sequence[str], *, fpr: float = FPR) -> tuple[bytes, bytes]:
    """The party's side: (setup, response) for a client's request, with a fresh key."""
    psi = _lib()
    req = _parse(psi.Request, request, "request")
    server = psi.server.CreateWithNewKey(True)
    n_client = max(1, len(req.encrypted_elements))
    setup = server.CreateSetupMessage(fpr, n_client, list(own_ids), psi.DataStructure.GCS)
    try:
        response = server.ProcessRequest(req)
    except Exception as exc:
        raise ProtocolError(f"cannot process the PSI request: {exc}") from None
    return setup.SerializeToString(), response.SerializeToString()


def request_size(request: bytes) -> int:
    """How many IDs a request carries (all the server learns about the client's set)."""
    return len(_parse(_lib().Request, request, "request").encrypted_elements)


def hashed_ids(ids: Sequence[str]) -> bytes:
    """The naive alternative: SHA-256 of every ID, concatenated (32 bytes per ID). Insecure: any
    ID drawn from a guessable space (customer numbers, e-mail addresses) is found by hashing guesses."""
    return b"".join(hashlib.sha256(i.encode()).digest() for i in ids)


def pack_ids(ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """An ordered ID list as two raw arrays: UTF-8 bytes (uint8) and lengths (int32)."""
    enc = [i.encode() for i in ids]
    blob = np.frombuffer(b"".join(enc), dtype=np.uint8) if enc else np.zeros(0, np.uint8)
    return blob, np.asarray([len(e) for e in enc], dtype=np.int32)


def unpack_ids(blob: np.ndarray, lengths: np.ndarray) -> list[str]:
    data = np.asarray(blob, dtype=np.uint8).tobytes()
    ends = np.cumsum(np.asarray(lengths, dtype=np.int64))
    if len(ends) and ends[-1] != len(data):
        raise ProtocolError(f"ID list: lengths sum to {int(ends[-1])} but {len(data)} bytes came")
    starts = np.concatenate([[0], ends[:-1]]) if len(ends) else ends
    return [data[a:b].decode() for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def num_test_rows(n: int, *, test_fraction: float) -> int:
    """How many of ``n`` aligned samples go to test: ``round(test_fraction * n)`` kept in [1, n - 1]
    (a function of ``n`` and the configured fraction only, so the broadcast sizes reveal no label)."""
    if n < 2:
        raise DataError(f"PSI: {n} common sample(s) cannot be split into training and test rows")
    return min(max(int(round(test_fraction * n)), 1), n - 1)


def uniform_test_mask(n: int, *, test_fraction: float, noise: NoiseSource) -> np.ndarray:
    """The label holder's train/test split of the ``n`` aligned samples: a uniformly random subset
    of ``num_test_rows`` rows, drawn from the label holder's own ``noise`` source and blind to labels.

    Not stratified: per-class test counts would reveal the class sizes to every party that
    receives the ID lists (and, with a seed they hold, labels). Rows are ranked by 64-bit keystream
    keys (a tie, probability < n^2 / 2^65, falls back to the row order)."""
    k = num_test_rows(n, test_fraction=test_fraction)
    keys = noise.words(2 * n).astype(np.uint64).reshape(n, 2)
    rank = np.argsort((keys[:, 0] << np.uint64(32)) | keys[:, 1], kind="stable")
    mask = np.zeros(n, dtype=bool)
    mask[rank[:k]] = True
    return mask
