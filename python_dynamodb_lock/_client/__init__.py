"""The orchestration, written once for both clients: from a checked call to the core's protocols
and back to lock objects (acquiring, several keys, releasing, renewing, sessions, listing).

May import the protocol core (``_core``), the leaf helpers and ``_locks``; never a driver
(``_drivers``), ``threading``'s or ``asyncio``'s waiting, nor the public faces.
"""
