"""What to send to DynamoDB: the request builders (exclusive and shared locks) and the typed-JSON wire format.
May import the foundation (_model) only: never the core, the shared state, a client, a driver or a transport."""
