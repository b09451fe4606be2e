"""test_core_release_paths (mutation-testing tests; filled in below)."""
