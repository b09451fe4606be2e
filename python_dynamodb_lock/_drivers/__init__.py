"""The drivers: they run the core's protocols by performing their effects, with threads
(:mod:`.threads`) or asyncio tasks (:mod:`.tasks`), and the transports that send the requests.

May import the protocol core (``_core``) and the leaf helpers (``_requests``, ``_wire``,
``_registry``, ``_clock``, ``_errors``); never the orchestration (``_client``) nor the faces.
"""
