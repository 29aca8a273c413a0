"""Scripts sent as text to vLLM's own interpreter (``python -c``) by :mod:`tools.sim_oracle.vllm_run`.

They import only the standard library and vLLM: they never import the harness.
"""
