"""What the demo prints: progress lines (left out with ``--quiet``) and lines always printed."""
from __future__ import annotations

from typing import TextIO

__all__ = ['Printer']


class Printer:
    def __init__(self, out: TextIO, quiet: bool) -> None:
        self._out = out
        self._quiet = quiet

    def progress(self, text: str) -> None:
        if not self._quiet:
            self.always(text)

    def always(self, text: str) -> None:
        self._out.write(text + '\n')
        self._out.flush()

