"""``python -m python_dynamodb_lock`` and the ``dynamodb-lock`` console script.

The commands live in :mod:`python_dynamodb_lock._cli`; this module only exposes ``main``.
"""
from __future__ import annotations

import sys
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``dynamodb-lock`` command line with ``argv`` (default: ``sys.argv[1:]``).

    Returns the exit code: 0 success, 1 operational failure, 2 usage error, 130 interrupted,
    141 standard output closed early, and for ``run`` 75, 76, 126, 127 or the command's own
    (``dynamodb-lock --help`` lists them). Expected failures are printed as one line on stderr,
    not raised.
    """
    from ._cli import run

    return run(argv)


if __name__ == '__main__':  # not when re-imported as __mp_main__ by a spawned demo worker
    sys.exit(main())
