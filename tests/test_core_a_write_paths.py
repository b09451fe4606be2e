"""test_core_a_write_paths (mutation-testing tests; filled in below)."""
