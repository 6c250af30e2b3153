"""Tools for testing recharness and the servers it talks to (fake endpoints with injected faults)."""
