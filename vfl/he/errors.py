"""The typed errors of ``vfl.he`` (each one line, derived from ``vfl.core.errors``)."""

from __future__ import annotations

from vfl.core.errors import ProtocolError


class HEOutOfRange(ProtocolError):
    """Decrypted values outside the range honest inputs can reach (|m| > bound): the sums were
    refused, none of them is used. Names how many values of how many and the bound, never a value."""

    def __init__(self, count: int, total: int, bound: int, what: str = "decrypted values") -> None:
        self.count, self.total, self.bound, self.what = count, total, bound, what
        super().__init__(f"{count} of {total} {what} exceed the bound |m| <= {_show(bound)} that honest "
                         "inputs can reach; refused (a party added what it should not have)")

    def __reduce__(self) -> tuple[type, tuple[int, int, int, str]]:  # survives Ray's pickling
        return (type(self), (self.count, self.total, self.bound, self.what))


def _show(bound: int) -> str:
    """``bound`` as a short number: exact when small, else as a power of two."""
    if bound < 10**12:
        return str(bound)
    bits = bound.bit_length()
    return f"2^{bits}-1" if bound == (1 << bits) - 1 else f"~2^{bits - 1} ({bits} bits)"
