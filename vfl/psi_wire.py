"""Message kinds and record names of the sample-alignment (PSI) protocol, in one place.

Kinds are ``query.psi_*`` (flwr accepts only the train/evaluate/query categories); the ledger
splits ``setup_bytes`` into ``psi_bytes`` by this prefix. Sequence (ledger phase ``setup``), see
``docs/protocols.md``:

  START     driver -> server (control)   start the chain
  REQUEST   server -> party k            PSI record: ``request`` (blinded IDs still common)
  RESPONSE  party k -> server            PSI record: ``setup``, ``response``; SIZE record: ``n``
  ALIGN     server -> parties            PSI record: ``train``, ``train_len``, ``test``, ``test_len``
  SIZES     driver -> server (control)   reply: SIZES_RECORD ``intersection``, ``num_train``,
                                         ``num_test``, ``names``, ``sizes`` (never an ID)
"""

from __future__ import annotations

KIND_PREFIX = "query.psi_"  # every PSI message kind

START = "query.psi_start"
REQUEST = "query.psi_request"
RESPONSE = "query.psi_response"
ALIGN = "query.psi_align"
SIZES = "query.psi_sizes"

KINDS = (START, REQUEST, RESPONSE, ALIGN, SIZES)

# record names
RECORD = "psi"  # array record of the PSI blobs; also the config record of the SIZES reply
SIZE_RECORD = "n"  # config record of a RESPONSE: the party's set size

# array names (RECORD)
REQUEST_BLOB, SETUP_BLOB, RESPONSE_BLOB = "request", "setup", "response"
TRAIN_IDS, TRAIN_LEN, TEST_IDS, TEST_LEN = "train", "train_len", "test", "test_len"

# config keys
SET_SIZE = "n"
INTERSECTION, NUM_TRAIN, NUM_TEST, NAMES, SIZES_KEY = "intersection", "num_train", "num_test", "names", "sizes"
CHAIN_KEY, WARNINGS = "chain", "warnings"  # |I_k| after each party (aligned with NAMES[1:]); shrink warnings
