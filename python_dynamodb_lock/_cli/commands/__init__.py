"""The commands of ``dynamodb-lock``, one module each: its subparser (``register``) and its action (``cmd_*``).
They may import the shared modules of ``python_dynamodb_lock._cli`` and the library; no command imports another.
"""
from __future__ import annotations

from . import create_table, demo, list, release, run, show

#: In the order ``dynamodb-lock --help`` lists them.
COMMANDS = (create_table, list, show, release, run, demo)
