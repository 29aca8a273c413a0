"""What counts as a secret and how it is masked: secret-looking variable names and the mask (:mod:`.names`),
secret-looking flags on command lines (:mod:`.flags`), the secrets a value holds (URLs, JSON, headers:
:mod:`.forms`) and those on shell commands (:mod:`.shell`), and the redactor for text, environments and logs
(:mod:`.redact`).
"""
