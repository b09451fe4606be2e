"""What the user holds (lock objects, multi-locks) and what runs a public call (ThreadCalls, TaskCalls).
May import the orchestration (_client), the drivers (_drivers) and all below them; never a face (aio, ...)."""
