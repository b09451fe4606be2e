"""The ``dynamodb-lock`` command line: one module per command (``commands/``), their shared parts, ``run``'s supervisor.
May import the public lock client, the library's checks, tables and errors, and the demo; the library never imports it.
"""
from __future__ import annotations

from .main import run

__all__ = ['run']
