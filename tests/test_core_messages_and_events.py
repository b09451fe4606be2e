"""test_core_messages_and_events (mutation-testing tests; filled in below)."""
