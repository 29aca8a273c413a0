"""Cache tiers of the simulated engine: GPU block pool, CPU tier (LRU/ARC, as vLLM 0.32), the fs (disk) tier and its
asynchronous existence check."""
