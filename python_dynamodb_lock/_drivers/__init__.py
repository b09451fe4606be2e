"""The drivers: they run the core's protocols by performing their effects, with threads
(:mod:`.threads`) or asyncio tasks (:mod:`.tasks`), and the transports that send the requests.

May import the protocol core (``_core``), the shared state (``_common``), the requests (``_wire``)
and the foundation (``_model``); never the orchestration (``_client``) nor the faces.
"""
