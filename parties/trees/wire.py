"""Wire vocabulary of the vertical gradient-boosted trees (``secureboost``): kinds, records, keys.

Node ids: the label holder (key holder, labels, optionally its own columns) is ``LABEL_HOLDER_ID``
(0, the vertical layout's server); passive party k is ``parties.vertical.wire.party_node_id(k)``.

  Kind.SETUP        driver -> label holder   control: start the set-up
  Kind.KEY          label holder -> parties  Record.KEY (public key, scheme; nothing with ``he: none``)
  Kind.LAYOUT       party -> label holder    Record.LAYOUT: bins per feature, the implicit bin, missing flags
  Kind.TREE         driver -> label holder   control: grow one tree (Key.TREE, Key.OUTPUT)
  Kind.GRADIENTS    label holder -> parties  Record.ROWS: every training row's packed (g, h), encrypted
                                             (Array.CIPHER) or, with ``he: none``, plain (Array.G, Array.H);
                                             Record.CODEC (field widths, fixed-point bits); Record.LEVEL
                                             (the nodes whose histograms to build: the root)
  Kind.HISTOGRAMS   party -> label holder    Record.ROWS: the requested nodes' bin sums, packed
  Kind.SPLIT        label holder -> owner    Record.SPLIT: node, feature, bin, default direction of a split
                                             the owner's column won
  Kind.PARTITION    owner -> label holder    Record.SPLIT (node, record id) + Array.MASK: which of the node's
                                             rows go left (instance space)
  Kind.LEVEL        label holder -> parties  Record.LEVEL: the last level's partitions (Array.MASK per split
                                             node) and the nodes whose histograms to build next; with
                                             ``hide_instance_space`` no partition, but Record.ROWS again: each
                                             row's (g, h) encrypted in the slot of its node (Key.HIDDEN)
  Kind.PREDICT      driver -> label holder   control: route the test rows through the trees not yet applied
  Kind.ASK          label holder -> owner    Record.SPLIT: record ids whose decisions it needs on test rows
  Kind.DECISIONS    owner -> label holder    Array.MASK per record: test rows with value < threshold (or
                                             missing routed left)
  Kind.METRICS      driver -> label holder   the round's metrics (``vfl.runtime.message.METRICS``)
  Kind.MODEL        driver -> node           control: the node's part of the model for the report
"""

from __future__ import annotations

from vfl.runtime.message import METRICS, METRICS_RECORD

LABEL_HOLDER_ID = 0


class Kind:
    """Message kinds (``metadata.message_type``)."""

    SETUP = "query.tree_setup"
    KEY = "query.tree_key"
    LAYOUT = "query.tree_layout"
    TREE = "train.tree"
    GRADIENTS = "train.tree_gradients"
    HISTOGRAMS = "train.tree_histograms"
    SPLIT = "train.tree_split"
    PARTITION = "train.tree_partition"
    LEVEL = "train.tree_level"
    PREDICT = "evaluate.tree_predict"
    ASK = "evaluate.tree_ask"
    DECISIONS = "evaluate.tree_decisions"
    METRICS = METRICS
    MODEL = "query.tree_model"


KINDS = tuple(v for k, v in vars(Kind).items() if k.isupper())


class Record:
    """Record names inside a message's content."""

    KEY = "key"
    LAYOUT = "layout"
    TASK = "task"
    ROWS = "rows"
    CODEC = "codec"
    LEVEL = "level"
    SPLIT = "split"
    MASKS = "masks"
    METRICS = METRICS_RECORD
    MODEL = "model"


class Array:
    """Array names inside an array record."""

    CIPHER = "c"  # (k, ciphertext bytes) uint8: fixed-width ciphertexts
    G, H = "g", "h"  # plain fixed-point integers (he: none)
    MASK = "m"  # packed bits (numpy.packbits, little bit order)
    BINS, IMPLICIT, MISSING = "bins", "implicit", "missing"  # a party's layout
    NODES, LEFT, RIGHT = "nodes", "left", "right"  # node ids of a level
    BUILD = "build"  # the nodes whose histograms to build (in this order)
    RECORDS = "records"  # record ids at an owner


class Key:
    """Keys inside config records."""

    SCHEME, N, HS, BITS = "scheme", "n", "hs", "bits"
    TREE, OUTPUT = "tree", "output"
    FRAC, WIDTH_G, WIDTH_H, SLOTS = "frac", "wg", "wh", "slots"
    NODE, FEATURE, BIN, DEFAULT_LEFT, RECORD = "node", "feature", "bin", "default_left", "record"
    RECORDS, BUILD = "records", "build"
    HIDDEN = "hidden"  # params.hide_instance_space: rows encrypted per node slot, sums over every row
