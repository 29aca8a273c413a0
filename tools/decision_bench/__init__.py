"""The decision benchmark: error rates of the verdict over many simulated known-answer rollouts."""
