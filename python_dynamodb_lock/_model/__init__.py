"""The foundation, no I/O: the lock item's layout (schema), the one exception type (errors), argument checks.
May import nothing of the package outside this folder (of boto3, only its value types)."""
