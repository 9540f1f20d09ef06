"""The SecAgg server's round, as an explicit state: which step it belongs to, what the server
asked the parties last, and (once unmasked) the decoded sum the head steps on.

States: ``IDLE`` (no round) -> ``AWAITING`` (masked vectors taken; a CONSISTENCY, UNMASK or
REVEAL_SHARES request is out) -> ``UNMASKED`` (the sum is known; the head's train/eval step runs
on it) -> ``IDLE``. A fault-free round asks exactly the plan's exchanges (``RoundPlan.exchanges``),
the hops the driver and the socket chain submit; a recovery round (a party dropped) may ask more.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from flwr.common import Message

from vfl.core.errors import ProtocolError

IDLE, AWAITING, UNMASKED = "idle", "awaiting", "unmasked"


@dataclass
class ServerRound:
    """One secure-aggregation round on the server, from the masked vectors to the head's step."""

    exchanges: tuple[str, ...]  # the plan's SecAgg kinds of a fault-free round, in order
    state: str = IDLE
    phase: str = ""  # "train" or "eval": which head step the unmasked sum feeds
    epoch: int = 0
    step: int = 0
    messages: dict[int, Message] = field(default_factory=dict)  # the parties' embedding messages
    asked: list[str] = field(default_factory=list)  # kinds requested so far in this round
    recovering: bool = False  # a request of this round was a recovery (a party dropped)
    fused: torch.Tensor | None = None  # the decoded sum, only while UNMASKED

    def open(self, *, phase: str, epoch: int, step: int, messages: list[Message]) -> None:
        """Masked vectors of (phase, epoch, step) arrived (a round left open by a failure is replaced)."""
        self.state, self.phase, self.epoch, self.step = AWAITING, phase, epoch, step
        self.messages = {int(m.metadata.src_node_id): m for m in messages}
        self.asked, self.recovering, self.fused = [], False, None

    def require_open(self) -> None:
        """Replies arrived: a round must be waiting for them."""
        if self.state != AWAITING:
            raise ProtocolError("no secure-aggregation round is open")

    def ask(self, kind: str, *, recovering: bool) -> None:
        """The server sends request ``kind`` to the parties."""
        self.asked.append(kind)
        self.recovering = self.recovering or recovering

    def unmasked(self, fused: torch.Tensor, summed: list[int]) -> list[Message]:
        """The sum is known: hold it for the head's step; returns the summed parties' messages."""
        if not self.recovering and tuple(self.asked) != self.exchanges:
            raise ProtocolError(f"the secure-aggregation round asked {self.asked}; its plan declares "
                                f"{list(self.exchanges)}")
        self.state, self.fused = UNMASKED, fused
        return [self.messages[p] for p in summed]

    def sum(self) -> torch.Tensor:
        """The decoded sum of the round being stepped on (the server's ``aggregate``)."""
        if self.state != UNMASKED or self.fused is None:
            raise ProtocolError("the server fused embeddings outside an unmasked round")
        return self.fused

    def close(self) -> None:
        """The head's step is over (or failed): back to no round."""
        self.state, self.messages, self.fused = IDLE, {}, None


__all__ = ["AWAITING", "IDLE", "UNMASKED", "ServerRound"]
