"""What counts as a secret and how it is masked: secret-looking variable names and the mask (:mod:`.names`),
secret-looking flags on command lines (:mod:`.flags`) and the redactor for text, environments and logs
(:mod:`.redact`).
"""
