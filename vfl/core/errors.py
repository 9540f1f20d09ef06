"""Typed errors of the framework: every failure a user can meet has one of these types."""

from __future__ import annotations


class VFLError(Exception):
    """Base class of every error the framework raises on purpose."""


class ConfigError(VFLError, ValueError):
    """An invalid configuration value; the message names the key and what is allowed."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}" if key else message)

    def __reduce__(self) -> tuple[type, tuple[str, str]]:  # picklable: errors cross Ray actors
        return (type(self), (self.key, self.message))


class DataError(VFLError):
    """Missing or malformed data; the message names the expected files and their source."""


class ProtocolError(VFLError):
    """A message or protocol step that violates the expected exchange (wrong kind, bad tag...)."""


class PartyFailure(VFLError):
    """A party (or the actor hosting it) failed; names the party and the round."""

    def __init__(self, party: str, round_: str, cause: str = "") -> None:
        self.party = party
        self.round = round_
        self.cause = cause
        detail = f": {cause}" if cause else ""
        super().__init__(f"party {party} failed in round {round_}{detail}")

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:
        return (type(self), (self.party, self.round, self.cause))


class RevealRefused(ProtocolError):
    """An honest secure-aggregation client refused a request that would expose a protected input:
    keys of a past round, both masks of one peer, its own seed, or masking after leaving a session."""


class ReleaseRefused(ProtocolError):
    """A party refused a training or evaluation forward that would release one of its samples more often than
    its own cap (``privacy.max_epoch_attempts``; ``parties/vertical/release_guard.py``); names the party, the
    round, the sample (an index of the training or test split: ``phase``) and its count. Nothing was released."""

    def __init__(self, party: str, round_: str, sample: int, count: int, cap: int, phase: str = "train") -> None:
        self.party, self.round, self.sample, self.count, self.cap = party, round_, sample, count, cap
        self.phase = phase
        which, split = ("training", "training") if phase == "train" else ("evaluation", "test")
        super().__init__(f"party {party} refused the {which} forward of round {round_}: its {split} sample "
                         f"{sample} was already released {count} time(s), its cap is {cap} "
                         f"(privacy.max_epoch_attempts; a server asking for more forwards than the run's epochs "
                         f"and redos)")

    def __reduce__(self) -> tuple[type, tuple[str, str, int, int, int, str]]:  # survives Ray's pickling
        return (type(self), (self.party, self.round, self.sample, self.count, self.cap, self.phase))


class AlignmentRefused(ProtocolError):
    """A party refused the label holder's sample ID lists (``query.psi_align``) before binding or releasing
    anything. One message whatever was wrong (an ID it does not hold, one listed twice or in both splits, more
    IDs than the label holder asked about in PSI, lists other than its peers received): it names the party and
    the run, never the ID or the check (``parties/vertical/psi.py``)."""

    def __init__(self, party: str, run: str) -> None:
        self.party, self.run = party, run
        super().__init__(f"party {party} refused the label holder's sample ID lists of run {run!r}: each ID must "
                         "be one it holds, asked about in PSI, listed once in training or test, and every party "
                         "must have received the same lists; nothing was bound or released")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:  # survives Ray's pickling
        return (type(self), (self.party, self.run))


class RunDirError(VFLError):
    """A run directory that cannot be written or read back (disk full, corrupt checkpoint or
    metrics); the message names the file."""


class RunFileError(RunDirError):
    """A file of a run directory that fails its check when read (truncated, edited, of the wrong shape, a
    broken hash chain); the message names the file and what is wrong. A resume would read it again, so no
    resume is suggested."""


class TransportError(VFLError):
    """The transport cannot start, e.g. no Ray cluster answers at ``transport.address``."""


class AuthenticationError(ProtocolError):
    """A message failed authentication (bad signature, ``src`` not matching the signing key, replayed
    or out-of-order sequence number); names the claimed sender, the receiving host and the round."""

    def __init__(self, node: str, round_: str, reason: str, receiver: str = "") -> None:
        self.node = node
        self.round = round_
        self.reason = reason
        self.receiver = receiver
        at = f" at {receiver}" if receiver else ""
        super().__init__(f"message from node {node} in round {round_} rejected{at}: {reason}")

    def __reduce__(self) -> tuple[type, tuple[str, str, str, str]]:  # survives Ray's pickling
        return (type(self), (self.node, self.round, self.reason, self.receiver))


class NonFiniteError(VFLError):
    """Training produced NaN or inf; names the epoch, the step and the first non-finite quantity
    (a party's embedding, the fused input, the head's weights, its logits, the loss). The run stops
    with the last checkpoint kept (``vfl run`` exits 3)."""


def install_hint(extra: str) -> str:
    """The command that installs one of pyproject's optional extras, as an error message names it:
    run in the repository's folder (the package is installed from a clone, not from an index)."""
    return f"pip install -e '.[{extra}]' (in the repository's folder)"
