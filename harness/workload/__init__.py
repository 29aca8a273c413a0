"""Request plans: synthetic text and shared prefixes, planned requests, class synthesis, Mooncake trace replay and token
calibration against the server's tokenizer.
"""
