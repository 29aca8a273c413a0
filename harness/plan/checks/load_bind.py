"""``master-bind``: the locust master's ``load.master_bind_host`` (and ``master_port``) can be listened on here.

Each step with more than one load process binds a locust master on the machine that runs the harness. A name that
does not resolve, or an address that is not this machine's, would fail the first step (after the servers started),
so it is an error in ``plan`` and ``run`` alike; ``::`` (every interface, IPv6) and IPv6 addresses are bound as
such (:mod:`harness.core.net.bind`). A fixed ``master_port`` already taken now is a warning in ``plan`` (the run may
come later) and an error in ``run``. Nothing is reported when no step starts a master.
"""

from __future__ import annotations

from typing import Literal

from harness.config.scenario import Scenario
from harness.core.net.bind import bind_problem
from harness.schema.summary import CheckItem

NAME = "master-bind"


def check_master_bind(scenario: Scenario, mode: Literal["plan", "run"]) -> list[CheckItem]:
    """Whether every step's locust master can listen at ``load.master_bind_host[:master_port]`` here."""
    load = scenario.load
    if load.processes == 1 and not load.remote_workers:
        return []  # one local process: no master, nothing binds
    host, port = load.master_bind_host, load.master_port
    problem = bind_problem(host)
    if problem is not None:
        return [CheckItem(name=NAME, level="error", message=f"load.master_bind_host: {problem}: each step's locust "
                          "master listens there on this machine; give one of its addresses, 0.0.0.0 or :: (every "
                          "interface) or 127.0.0.1")]
    if port is not None and (busy := bind_problem(host, port)) is not None:
        return [CheckItem(name=NAME, level="error" if mode == "run" else "warn",
                          message=f"load.master_port: {busy}: free the port or choose another one (the remote "
                          "workers' --master HOST:PORT with it)")]
    where = f"{host}:{port}" if port is not None else f"{host} (a free port per step)"
    return [CheckItem(name=NAME, level="ok", message=f"the load master can listen at {where}")]
