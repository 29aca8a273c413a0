"""Cache tiers of the simulated engine: GPU block pool, CPU tier (LRU/ARC) and the fs (disk) tier."""
