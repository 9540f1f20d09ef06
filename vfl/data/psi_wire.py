"""Message kinds and record names of the sample-alignment (PSI) protocol, in one place: a class of
string constants per sort of name (``Kind``, ``Record``, ``Array``, ``Key``), the shape of Flower's
``secaggplus_constants``.

Kinds are ``query.psi_*`` (flwr accepts only the train/evaluate/query categories); the ledger
splits ``setup_bytes`` into ``psi_bytes`` by this prefix. Sequence (ledger phase ``setup``), see
``docs/protocols.md``:

  Kind.START     driver -> server (control)   start the chain
  Kind.REQUEST   server -> party k            Record.PSI: ``request`` (blinded IDs still common)
  Kind.RESPONSE  party k -> server            Record.PSI: ``setup``, ``response``; Record.SIZE: ``n``
  Kind.ALIGN     server -> parties            Record.PSI: ``train``, ``train_len``, ``test``, ``test_len``
  Kind.CONFIRM   party k -> parties           Record.PSI: ``digest`` (SHA-256 of the lists it received;
                                              signed by party k: each party binds only if all agree)
  Kind.SIZES     driver -> server (control)   reply: Record.PSI ``intersection``, ``num_train``,
                                              ``num_test``, ``names``, ``sizes`` (never an ID)
"""

from __future__ import annotations

KIND_PREFIX = "query.psi_"  # every PSI message kind


class Kind:
    """Message kinds (``metadata.message_type``)."""

    START = "query.psi_start"
    REQUEST = "query.psi_request"
    RESPONSE = "query.psi_response"
    ALIGN = "query.psi_align"
    CONFIRM = "query.psi_confirm"
    SIZES = "query.psi_sizes"


class Record:
    """Record names inside a message's content."""

    PSI = "psi"  # array record of the PSI blobs; also the config record of the SIZES reply
    SIZE = "n"  # config record of a RESPONSE: the party's set size (Key.SET_SIZE)


class Array:
    """Array names inside ``Record.PSI``."""

    REQUEST, SETUP, RESPONSE = "request", "setup", "response"
    TRAIN, TRAIN_LEN, TEST, TEST_LEN = "train", "train_len", "test", "test_len"
    DIGEST = "digest"


class Key:
    """Keys inside a config record (``Record.SIZE``; ``Record.PSI`` of the SIZES reply)."""

    SET_SIZE = "n"
    INTERSECTION, NUM_TRAIN, NUM_TEST, NAMES, SIZES = "intersection", "num_train", "num_test", "names", "sizes"
    CHAIN, WARNINGS = "chain", "warnings"  # |I_k| after each party (aligned with NAMES[1:]); shrink warnings


KINDS = (Kind.START, Kind.REQUEST, Kind.RESPONSE, Kind.ALIGN, Kind.CONFIRM, Kind.SIZES)

__all__ = ["KINDS", "KIND_PREFIX", "Array", "Key", "Kind", "Record"]
