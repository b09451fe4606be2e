"""What orchestration, drivers and faces share: the lock base, defaults, registry, clocks, settings, logs, tables.
May import the protocol core (_core), the requests (_wire) and the foundation (_model); never a layer above."""
