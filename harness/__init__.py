"""KV-cache offload rollout harness: plan, run, analyse and report offload-tier rollouts for vLLM and TensorRT-LLM."""

__version__ = "0.1.0"
