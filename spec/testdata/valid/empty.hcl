# An empty configuration is valid: it has the default stack, the local
# backend and default_pool with 16 slots.
