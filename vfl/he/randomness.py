"""DJN randomizers h_s^α precomputed off the critical path, in worker processes of the key holder.

A randomizer does not depend on the plaintext, so the label holder can compute next tree's while the
passive parties build histograms: :meth:`RandomizerPool.prefill` asks the workers for k, and
:meth:`RandomizerPool.take` hands out what they made, computing any shortfall inline (and taking what
arrives meanwhile), so encryption never waits on a worker. Attached to its key, the pool is what
:meth:`~vfl.he.keys.PrivateKey.encrypt` draws from; the critical path is then one product per row.

Each worker is a ``multiprocessing`` process (spawn context: no fork of a threaded Ray actor) that
rebuilds its own tables from p, q and h_s, which it receives as bytes over its pipe, and draws α from
``secrets`` itself. Threads would be simpler but are not as fast (``python -m simulations.benchmarks.paillier``,
``background``; docs/he.md): a thread running the table method needs the GIL between GMP calls and made
~half the randomizers the process made while the main thread worked, and a thread on GMP's ``powmod``
(which releases the GIL) is 4-5x slower per randomizer than the table. A worker that dies is
dropped with one warning and the pool computes inline; :meth:`close` (or the key's ``close()``, or
garbage collection) stops the workers. ``workers=0`` starts no process at all.
"""

from __future__ import annotations

import logging
import multiprocessing
import sys
import threading
import time
import types
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from typing import Any

from gmpy2 import mpz

from vfl.he.fixedbase import CrtRandomizers
from vfl.he.keys import PrivateKey

log = logging.getLogger(__name__)

CHUNK = 64
"""Randomizers per message from a worker (~30 ms of its work at 2048 bits)."""
_INLINE_CHUNK = 8  # a shortfall is computed in steps this size, taking what workers sent in between
_SPAWN_LOCK = threading.Lock()


def _worker_main(conn: Connection, p: bytes, q: bytes, hs: bytes, alpha_bits: int, width: int) -> None:
    """The worker process: make what the parent asks for, in chunks, until told to stop or orphaned."""
    crt = CrtRandomizers(mpz.from_bytes(p, "big"), mpz.from_bytes(q, "big"), mpz.from_bytes(hs, "big"), alpha_bits)
    del p, q
    pending = 0
    try:
        while True:
            if pending == 0 or conn.poll():
                msg = conn.recv()  # blocks while there is nothing to make
                if msg is None:
                    return
                pending += int(msg)
                continue
            k = min(CHUNK, pending)
            conn.send_bytes(b"".join(r.to_bytes(width, "big") for r in crt.make(k)))
            pending -= k
    except (EOFError, OSError, KeyboardInterrupt):  # the parent went away
        return


@contextmanager
def _bare_main() -> Iterator[None]:
    """Spawn re-runs the parent's ``__main__`` in the child (a Ray worker's would import Ray, the ``vfl``
    script the CLI); the worker needs none of it, so the child is started while ``__main__`` is bare."""
    with _SPAWN_LOCK:
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            sys.modules["__main__"] = main


class _Worker:
    __slots__ = ("proc", "conn", "inflight", "alive")

    def __init__(self, proc: Any, conn: Connection) -> None:
        self.proc, self.conn, self.inflight, self.alive = proc, conn, 0, True


def _stop(workers: list[_Worker]) -> None:
    """Stop the workers at once (they hold nothing worth finishing; one may be blocked sending a chunk)."""
    for w in workers:
        w.alive = False
        if w.proc.is_alive():
            w.proc.terminate()
    for w in workers:
        w.proc.join(2.0)
        w.conn.close()


class RandomizerPool:
    """Randomizers of ``private_key`` from ``workers`` background processes (0: inline only); attaches
    itself to the key. ``target``: the level the workers refill the buffer to after every :meth:`take`."""

    def __init__(self, private_key: PrivateKey, *, workers: int = 1, target: int = 0) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            raise ValueError(f"workers must be an int >= 0, got {workers!r}")
        self._key = private_key
        self._width = private_key.public.ciphertext_bytes
        self._buffer: list[mpz] = []
        self._lock = threading.RLock()
        self._warned = False
        self.target = target
        self._workers: list[_Worker] = []
        if workers:
            ctx = multiprocessing.get_context("spawn")
            parts = private_key.secret_parts()
            for _ in range(workers):
                parent, child = ctx.Pipe(duplex=True)
                proc = ctx.Process(target=_worker_main, args=(child, *parts, self._width), daemon=True,
                                   name="vfl-he-randomizers")
                with _bare_main():
                    proc.start()
                child.close()
                self._workers.append(_Worker(proc, parent))
        self._finalizer = weakref.finalize(self, _stop, self._workers)
        private_key.attach(self)

    @property
    def workers(self) -> int:
        """Workers still running."""
        return sum(w.alive for w in self._workers)

    def _lost(self, w: _Worker) -> None:
        w.alive, w.inflight = False, 0
        if not self._warned:
            self._warned = True
            log.warning("a Paillier randomizer worker (pid %s) stopped (exit code %s); randomizers are computed "
                        "inline from now on", w.proc.pid, w.proc.exitcode)

    def _drain(self) -> None:
        """Move what the workers sent into the buffer (never blocks)."""
        width = self._width
        for w in self._workers:
            if not w.alive:
                continue
            try:
                while w.conn.poll():
                    blob = w.conn.recv_bytes()
                    self._buffer.extend(mpz.from_bytes(blob[i:i + width], "big") for i in range(0, len(blob), width))
                    w.inflight -= len(blob) // width
            except (EOFError, OSError):
                self._lost(w)

    def _pop(self, k: int) -> list[mpz]:
        if k <= 0:
            return []
        out = self._buffer[-k:]
        del self._buffer[-k:]
        return out

    def ready(self) -> int:
        """Randomizers buffered now."""
        with self._lock:
            self._drain()
            return len(self._buffer)

    def prefill(self, k: int) -> None:
        """Ask the workers to bring the buffer to ``k`` (counting what they are making); returns at once."""
        with self._lock:
            self._drain()
            live = [w for w in self._workers if w.alive]
            need = k - len(self._buffer) - sum(w.inflight for w in live)
            if not live or need <= 0:
                return
            share, extra = divmod(need, len(live))
            for i, w in enumerate(live):
                ask = share + (i < extra)
                if not ask:
                    continue
                try:
                    w.conn.send(ask)
                    w.inflight += ask
                except OSError:
                    self._lost(w)

    def wait(self, k: int, timeout: float | None = None) -> int:
        """Block until ``k`` are buffered, no worker is making any, or ``timeout`` seconds passed; the count buffered."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                self._drain()
                busy = [w.conn for w in self._workers if w.alive and w.inflight > 0]
                if len(self._buffer) >= k or not busy:
                    return len(self._buffer)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return self.ready()
            wait(busy, left)

    def take(self, k: int) -> list[mpz]:
        """``k`` randomizers: buffered ones first, the shortfall computed here."""
        with self._lock:
            self._drain()
            out = self._pop(k)
            while len(out) < k:
                out += self._key.randomizers(min(k - len(out), _INLINE_CHUNK))
                self._drain()
                out += self._pop(k - len(out))
        if self.target:
            self.prefill(self.target)
        return out

    def close(self) -> None:
        """Stop the workers (idempotent); what is buffered stays usable, the rest is computed inline."""
        self._finalizer()
