"""``python -m harness.sim serve ...``: the simulated engine's command line."""

from harness.sim.cli import sim_app

if __name__ == "__main__":
    sim_app(prog_name="python -m harness.sim")
