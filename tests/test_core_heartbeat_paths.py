"""test_core_heartbeat_paths (mutation-testing tests; filled in below)."""
