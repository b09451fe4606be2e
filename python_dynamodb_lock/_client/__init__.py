"""The orchestration, written once for both clients: from a checked call to the core's protocols
and back to lock objects (acquiring, several keys, releasing, renewing, sessions, listing).

May import the protocol core (``_core``), the shared state (``_common``), the requests (``_wire``)
and the foundation (``_model``); never a driver (``_drivers``), ``threading``'s or ``asyncio``'s
waiting, nor the public faces.
"""
