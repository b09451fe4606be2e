"""The protocol core: decisions about DynamoDB's answers, with no I/O (private)."""
