"""NPQ: no privacy, no quantization — parties send float embeddings, the server sums them
(the no-privacy baseline of PBM-VFL, Tran et al., arXiv:2501.13916)."""

from __future__ import annotations

from strategies.base.vertical import VerticalStrategy
from vfl.engine.strategy import register


@register
class NPQ(VerticalStrategy):
    """Plain vertical FL: float embeddings, sum (or concat) fusion, one gradient broadcast."""

    name = "npq"
    summary = "no privacy, no quantization: float embeddings summed (or concatenated) at the server"
