"""test_core_requests_shapes (mutation-testing tests; filled in below)."""
