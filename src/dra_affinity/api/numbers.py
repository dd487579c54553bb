"""Go's 64-bit integer ranges: what a JSON number, a Quantity's scaled value and a CEL
``int`` or ``uint`` may hold, as the API server and cel-go bound them."""

from __future__ import annotations

from typing import Final

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
UINT64_MAX: Final = 2**64 - 1
