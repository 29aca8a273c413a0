"""The Docker launcher against a fake Docker client (no daemon): options, labels, logs, stop, failures, cleanup."""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any, cast

import pytest
from docker import DockerClient
from docker.errors import DockerException
from fake_docker import FakeClient, FakeContainer
from typer import Typer
from typer.testing import CliRunner

from harness.engines.spec import ConfigFile, LaunchSpec, Volume
from harness.host import docker_host
from harness.host.docker_host import device_requests, gpu_runtime_available, is_pinned
from harness.host.labels import ARM_LABEL, DISK_TIER_MARKER, HOST_LABEL, OWNER_LABEL, PID_LABEL, RUN_LABEL, UID_LABEL
from harness.launch import containers as cleanup_mod
from harness.launch.base import (
    LaunchContext,
    LaunchError,
)
from harness.launch.docker import DockerLauncher, container_name, publish_host
from harness.run import cleanup as cleanup_cmd

IMAGE = "kvoffload-harness-sim:0.1.0"
DIGEST = "sha256:" + "b" * 64
GPU_ERROR = 'could not select device driver "" with capabilities: [[gpu]]'


def make_spec(**overrides: Any) -> LaunchSpec:
    data: dict[str, Any] = {
        "engine": "sim", "arm": "baseline", "image": IMAGE, "entrypoint": ["python3", "-m", "harness.sim", "serve"],
        "args": ["--host", "0.0.0.0", "--port", "8000"], "env": {"HF_TOKEN": "hf_supersecret", "MODE": "x"},
        "container_port": 8000, "host_port": 18000, "served_model_name": "demo",
    }
    data.update(overrides)
    return LaunchSpec.model_validate(data)


@pytest.fixture
def fake() -> FakeClient:
    client = FakeClient()
    client.add_image(IMAGE, repo_digests=[f"kvoffload-harness-sim@{DIGEST}"])
    return client


@pytest.fixture
def ctx(tmp_path: Path) -> LaunchContext:
    return LaunchContext(run_id="run-1", log_path=tmp_path / "logs" / "baseline.log", work_dir=tmp_path / "work",
                         secrets=["hf_supersecret"])


def launcher(fake: FakeClient, **kw: Any) -> DockerLauncher:
    return DockerLauncher(cast(DockerClient, fake), **kw)


def only_container(fake: FakeClient) -> FakeContainer:
    assert len(fake.created) == 1
    return fake.created[0]


def test_start_creates_a_labelled_loopback_container(fake: FakeClient, ctx: LaunchContext) -> None:
    server = launcher(fake).start(make_spec(), ctx)
    c = only_container(fake)
    opts = c.options
    assert c.status == "running"
    assert opts["ports"] == {"8000/tcp": ("127.0.0.1", 18000)}
    assert opts["labels"][RUN_LABEL] == "run-1"
    assert opts["labels"][ARM_LABEL] == "baseline"
    assert opts["labels"][OWNER_LABEL] == "harness"
    assert opts["init"] is True
    assert opts["entrypoint"] == ["python3", "-m", "harness.sim", "serve"]
    assert opts["command"] == ["--host", "0.0.0.0", "--port", "8000"]
    assert opts["environment"] == {"HF_TOKEN": "hf_supersecret", "MODE": "x"}
    assert opts["device_requests"] is None
    assert server.base_url == "http://127.0.0.1:18000"
    server.stop()


def test_identity_records_digest_and_ids_but_no_env(fake: FakeClient, ctx: LaunchContext) -> None:
    server = launcher(fake).start(make_spec(), ctx)
    ident = server.identity()
    assert ident["image_digest"] == DIGEST
    assert ident["image_id"] == "sha256:" + "a" * 64
    assert ident["container_id"] == only_container(fake).id
    assert "hf_supersecret" not in repr(ident)
    server.stop()


def test_identity_falls_back_to_image_id_without_repo_digest(fake: FakeClient, ctx: LaunchContext) -> None:
    fake.add_image(IMAGE, image_id="sha256:" + "c" * 64, repo_digests=[])
    server = launcher(fake).start(make_spec(), ctx)
    assert server.identity()["image_digest"] == "sha256:" + "c" * 64
    server.stop()


def test_logs_are_copied_with_secrets_redacted(fake: FakeClient, ctx: LaunchContext) -> None:
    fake.log_chunks = [b"INFO starting\nINFO token=hf_super", b"secret loaded\npartial-last-line"]
    server = launcher(fake).start(make_spec(), ctx)
    server.stop()
    text = ctx.log_path.read_text()
    assert "hf_supersecret" not in text
    assert "INFO token=***" in text
    assert text.splitlines() == ["INFO starting", "INFO token=*** loaded", "partial-last-line"]
    assert server.log_tail(2) == ["INFO token=*** loaded", "partial-last-line"]


def test_stop_stops_then_removes_and_is_idempotent(fake: FakeClient, ctx: LaunchContext) -> None:
    server = launcher(fake).start(make_spec(), ctx)
    c = only_container(fake)
    server.stop(timeout_s=7)
    assert c.calls == ["start", "stop:7", "remove:force=True"]
    assert fake.created == []
    server.stop()
    assert c.calls == ["start", "stop:7", "remove:force=True"]
    assert server.alive() is False
    assert server.exit_description() is not None


def test_stop_of_an_already_removed_container_is_quiet(fake: FakeClient, ctx: LaunchContext) -> None:
    server = launcher(fake).start(make_spec(), ctx)
    c = only_container(fake)
    c.remove(force=True)
    server.stop()
    assert fake.created == []


def test_exit_description_names_exit_code_and_oom(fake: FakeClient, ctx: LaunchContext) -> None:
    server = launcher(fake).start(make_spec(), ctx)
    c = only_container(fake)
    assert server.alive() and server.exit_description() is None
    c.status, c.exit_code, c.oom = "exited", 137, True
    desc = server.exit_description()
    assert desc is not None and "exit code 137" in desc and "OOM" in desc
    server.stop()


def test_gpu_request_without_nvidia_runtime_is_a_clear_error_and_removes_the_container(
        fake: FakeClient, ctx: LaunchContext) -> None:
    fake.start_error = GPU_ERROR
    with pytest.raises(LaunchError) as err:
        launcher(fake).start(make_spec(gpus="all"), ctx)
    message = str(err.value)
    assert "no NVIDIA container runtime on this host" in message
    assert "NVIDIA Container Toolkit" in message
    assert "could not select device driver" in message
    assert fake.created == [] and len(fake.removed) == 1
    assert fake.removed[0].options["device_requests"][0]["Count"] == -1


def test_other_start_failures_remove_the_container_too(fake: FakeClient, ctx: LaunchContext) -> None:
    fake.start_error = "Bind for 127.0.0.1:18000 failed: port is already allocated"
    with pytest.raises(LaunchError, match="port is already allocated"):
        launcher(fake).start(make_spec(), ctx)
    assert fake.created == []


@pytest.mark.parametrize("ref", ["vllm/vllm-openai:latest", "vllm/vllm-openai", "localhost:5000/x"])
def test_unpinned_images_are_refused(fake: FakeClient, ctx: LaunchContext, ref: str) -> None:
    fake.add_image(ref)
    with pytest.raises(LaunchError, match="not pinned"):
        launcher(fake).start(make_spec(image=ref), ctx)
    assert fake.created == []


def test_unpinned_image_allowed_when_asked(fake: FakeClient, ctx: LaunchContext) -> None:
    fake.add_image("vllm/vllm-openai:latest")
    launcher(fake, allow_unpinned=True).start(make_spec(image="vllm/vllm-openai:latest"), ctx).stop()
    assert len(fake.removed) == 1


def test_missing_image_is_pulled_and_pull_failure_is_clear(fake: FakeClient, ctx: LaunchContext) -> None:
    from fake_docker import FakeImage

    fake.images.pullable["vllm/vllm-openai:v0.32.0"] = FakeImage("sha256:" + "d" * 64,
                                                                 [f"vllm/vllm-openai@{DIGEST}"])
    server = launcher(fake).start(make_spec(image="vllm/vllm-openai:v0.32.0"), ctx)
    assert fake.images.pulls == [("vllm/vllm-openai", "v0.32.0")]
    server.stop()
    with pytest.raises(LaunchError, match=r"pulling it failed: .*pull access denied"):
        launcher(fake).start(make_spec(image="nvcr.io/nvidia/tensorrt-llm/release:1.0.0"), ctx)


def test_expected_digest_mismatch_is_refused(fake: FakeClient, ctx: LaunchContext) -> None:
    with pytest.raises(LaunchError, match="not the expected"):
        launcher(fake).start(make_spec(image_digest="sha256:" + "e" * 64), ctx)
    launcher(fake).start(make_spec(image_digest=DIGEST), ctx).stop()


def test_volumes_config_files_and_disk_tier(fake: FakeClient, ctx: LaunchContext, tmp_path: Path) -> None:
    tier = tmp_path / "tier0"
    cache = tmp_path / "hf"
    cache.mkdir()
    spec = make_spec(
        volumes=[Volume(host_path=str(tier), container_path="/kv-tier/0", purpose="disk-tier"),
                 Volume(host_path=str(cache), container_path="/root/.cache/huggingface", read_only=True,
                        purpose="model-cache")],
        config_files=[ConfigFile(name="extra.yaml", container_path="/etc/trtllm/extra.yaml", content="a: 1\n")],
        gpus="0,1", shm_size="16g")
    server = launcher(fake).start(spec, ctx)
    opts = only_container(fake).options
    assert opts["volumes"][str(tier)] == {"bind": "/kv-tier/0", "mode": "rw"}
    assert opts["volumes"][str(cache)] == {"bind": "/root/.cache/huggingface", "mode": "ro"}
    rendered = (ctx.work_dir / "extra.yaml").resolve()
    assert rendered.read_text() == "a: 1\n"
    assert opts["volumes"][str(rendered)] == {"bind": "/etc/trtllm/extra.yaml", "mode": "ro"}
    assert (tier / DISK_TIER_MARKER).exists()
    assert opts["device_requests"][0]["DeviceIDs"] == ["0", "1"]
    assert opts["shm_size"] == "16g"
    server.stop()


def test_existing_disk_tier_dir_gets_no_marker(fake: FakeClient, ctx: LaunchContext, tmp_path: Path) -> None:
    tier = tmp_path / "mine"
    tier.mkdir()
    spec = make_spec(volumes=[Volume(host_path=str(tier), container_path="/kv", purpose="disk-tier")])
    launcher(fake).start(spec, ctx).stop()
    assert not (tier / DISK_TIER_MARKER).exists()


def test_missing_config_volume_and_relative_paths_are_refused(fake: FakeClient, ctx: LaunchContext,
                                                             tmp_path: Path) -> None:
    spec = make_spec(volumes=[Volume(host_path=str(tmp_path / "nope"), container_path="/c", purpose="config")])
    with pytest.raises(LaunchError, match="does not exist"):
        launcher(fake).start(spec, ctx)
    spec = make_spec(volumes=[Volume(host_path="rel/dir", container_path="/c", purpose="model-cache")])
    with pytest.raises(LaunchError, match="absolute"):
        launcher(fake).start(spec, ctx)
    assert fake.created == []


def test_non_loopback_host_is_refused(fake: FakeClient, ctx: LaunchContext) -> None:
    with pytest.raises(LaunchError, match="not loopback"):
        launcher(fake).start(make_spec(host="0.0.0.0"), ctx)
    assert publish_host("localhost") == "127.0.0.1"
    assert publish_host("::1") == "::1"
    with pytest.raises(ValueError, match="loopback"):
        publish_host("my-host")


def test_port_zero_reads_the_published_port(fake: FakeClient, ctx: LaunchContext) -> None:
    server = launcher(fake).start(make_spec(host_port=0), ctx)
    assert only_container(fake).options["ports"] == {"8000/tcp": ("127.0.0.1", None)}
    assert server.base_url == "http://127.0.0.1:49153"
    server.stop()


def test_missing_image_in_spec(fake: FakeClient, ctx: LaunchContext) -> None:
    with pytest.raises(LaunchError, match=r"needs engine\.image"):
        launcher(fake).start(make_spec(image=None), ctx)


def test_container_names_are_valid_and_unique() -> None:
    a, b = container_name("run 1/x", "cpu"), container_name("run 1/x", "cpu")
    assert a != b
    assert a.startswith("kvoffload-run-1-x-cpu-")


@pytest.mark.parametrize(("value", "expected"), [
    (None, None), ("0", None), ("all", {"Count": -1}), ("2", {"Count": 2}), ("0,1", {"DeviceIDs": ["0", "1"]}),
    ("device=3", {"DeviceIDs": ["3"]}), ("GPU-abc-123", {"DeviceIDs": ["GPU-abc-123"]}),
])
def test_device_requests(value: str | None, expected: dict[str, Any] | None) -> None:
    got = device_requests(value)
    if expected is None:
        assert got is None
    else:
        assert got is not None and len(got) == 1
        assert got[0]["Capabilities"] == [["gpu"]]
        for key, val in expected.items():
            assert got[0][key] == val


@pytest.mark.parametrize("value", ["some", "0;1", "-1", ""])
def test_bad_gpus_values(value: str) -> None:
    with pytest.raises(ValueError, match="gpus"):
        device_requests(value)


@pytest.mark.parametrize(("ref", "pinned"), [
    ("vllm/vllm-openai:v0.32.0", True), ("vllm/vllm-openai:latest", False), ("vllm/vllm-openai", False),
    (f"vllm/vllm-openai@{DIGEST}", True), (f"vllm/vllm-openai:latest@{DIGEST}", True),
    ("localhost:5000/img", False), ("localhost:5000/img:1.2", True),
])
def test_is_pinned(ref: str, pinned: bool) -> None:
    assert is_pinned(ref) is pinned


def _dead_owner() -> dict[str, str]:
    """Owner labels of a harness process on this host that is gone (a pid that cannot exist)."""
    return {**cleanup_mod.owner_labels(), PID_LABEL: "999999999:1000.000"}


def test_cleanup_removes_only_labelled_containers_of_the_run(fake: FakeClient, ctx: LaunchContext) -> None:
    fake.containers.create(IMAGE, name="ours-1", labels={OWNER_LABEL: "harness", RUN_LABEL: "run-1"})
    fake.containers.create(IMAGE, name="ours-2", labels={OWNER_LABEL: "harness", RUN_LABEL: "run-2",
                                                         **_dead_owner()})
    fake.containers.create(IMAGE, name="live", labels={OWNER_LABEL: "harness", RUN_LABEL: "run-3",
                                                       **cleanup_mod.owner_labels()})
    fake.containers.create(IMAGE, name="theirs", labels={"other": "x"})
    removed = launcher(fake).cleanup("run-1")  # named: removed although it has no owner labels
    assert len(removed) == 1 and "ours-1" in removed[0]
    assert sorted(str(c.name) for c in fake.created) == ["live", "ours-2", "theirs"]
    stale = launcher(fake).cleanup()  # unnamed: only those whose harness process is gone
    assert len(stale) == 1 and "ours-2" in stale[0]
    assert sorted(str(c.name) for c in fake.created) == ["live", "theirs"]
    assert launcher(fake).cleanup() == []


def test_cleanup_dry_run_removes_nothing(fake: FakeClient) -> None:
    fake.containers.create(IMAGE, name="ours", labels={OWNER_LABEL: "harness", RUN_LABEL: "r", **_dead_owner()})
    found = cleanup_mod.remove_labelled_containers(cast(DockerClient, fake), dry_run=True)
    assert len(found) == 1 and "run r" in found[0]
    assert len(fake.created) == 1


def test_containers_get_owner_labels(fake: FakeClient, ctx: LaunchContext) -> None:
    server = launcher(fake).start(make_spec(), ctx)
    labels = only_container(fake).options["labels"]
    server.stop()
    assert labels[HOST_LABEL] == socket.gethostname() and labels[UID_LABEL] == str(os.getuid())
    assert labels[PID_LABEL].startswith(f"{os.getpid()}:")


def _cli() -> Typer:
    app = Typer()
    app.command("cleanup")(cleanup_cmd.cleanup_command)
    app.command("noop")(lambda: None)
    return app


def test_cleanup_command(fake: FakeClient, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.containers.create(IMAGE, name="ours", labels={OWNER_LABEL: "harness", RUN_LABEL: "r9", **_dead_owner()})
    fake.containers.create(IMAGE, name="live", labels={OWNER_LABEL: "harness", RUN_LABEL: "r10",
                                                       **cleanup_mod.owner_labels()})
    monkeypatch.setattr(docker_host, "connect", lambda: fake)
    runner = CliRunner()
    out = runner.invoke(_cli(), ["cleanup"])  # lists, removes nothing
    assert out.exit_code == 0 and "run r9: stale" in out.output and "run r10: live" in out.output, out.output
    assert "Nothing was removed" in out.output and len(fake.created) == 2
    out = runner.invoke(_cli(), ["cleanup", "--run-id", "r9", "--dry-run"])
    assert out.exit_code == 0 and "Would remove container ours" in out.output
    assert len(fake.created) == 2
    out = runner.invoke(_cli(), ["cleanup", "--all-stale"])
    assert out.exit_code == 0 and "Removed container ours" in out.output
    assert [c.name for c in fake.created] == ["live"]
    out = runner.invoke(_cli(), ["cleanup", "--run-id", "r10"])
    assert out.exit_code == 2 and "still running" in out.output and "--force" in out.output
    assert [c.name for c in fake.created] == ["live"]
    out = runner.invoke(_cli(), ["cleanup", "--run-id", "r10", "--force"])
    assert out.exit_code == 0 and fake.created == []
    out = runner.invoke(_cli(), ["cleanup", "--all-stale"])
    assert "Nothing to remove" in out.output


def test_cleanup_command_without_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    def down() -> None:
        raise docker_host.DockerUnavailable("cannot reach the Docker daemon: no socket")

    monkeypatch.setattr(docker_host, "connect", down)
    out = CliRunner().invoke(_cli(), ["cleanup"])
    assert out.exit_code == 0 and "no containers checked" in out.output


def test_gpu_runtime_checks(fake: FakeClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    ok, why = gpu_runtime_available(cast(DockerClient, fake))
    assert not ok and "NVIDIA Container Toolkit" in why and "runc" in why
    fake.runtimes["nvidia"] = {}
    ok, why = gpu_runtime_available(cast(DockerClient, fake))
    assert not ok and "nvidia-smi" in why


def test_docker_available_reports_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def version(self) -> dict[str, str]:
            raise DockerException("Error while fetching server API version: connection refused")

    ok, why = docker_host.docker_available(cast(DockerClient, Broken()))
    assert not ok and "connection refused" in why
    ok, why = docker_host.docker_available(cast(DockerClient, FakeClient()))
    assert ok and "20.10.24" in why


def test_log_tail_waits_for_the_end_of_a_finished_stream(fake: FakeClient, ctx: LaunchContext) -> None:
    fake.log_chunks = [b"Exception: CPU Offloading is currently only supported on CUDA-alike and XPU GPUs\n"]
    server = launcher(fake).start(make_spec(), ctx)
    only_container(fake).status = "exited"
    deadline = time.monotonic() + 5
    while not server.log_tail() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "CPU Offloading" in server.log_tail()[-1]
    server.stop()


def test_secret_env_values_are_redacted_even_when_not_listed(fake: FakeClient, tmp_path: Path) -> None:
    ctx = LaunchContext(run_id="r", log_path=tmp_path / "a.log", work_dir=tmp_path / "w")  # no secrets listed
    fake.log_chunks = [b"using hf_supersecret and MODE=x\n"]
    launcher(fake).start(make_spec(), ctx).stop()
    assert ctx.log_path.read_text() == "using *** and MODE=x\n"


def test_a_container_whose_port_cannot_be_read_is_removed(fake: FakeClient, ctx: LaunchContext) -> None:
    fake.hide_ports = True
    with pytest.raises(LaunchError, match="published port"):
        launcher(fake).start(make_spec(host_port=0), ctx)
    assert fake.created == [] and len(fake.removed) == 1


def test_exit_description_names_the_engine_error(fake: FakeClient, ctx: LaunchContext) -> None:
    fake.log_chunks = [b"INFO loading\nW ERROR [x.py:1] Exception: CPU Offloading is currently only supported on "
                       b"CUDA-alike and XPU GPUs\nRuntimeError: Engine core initialization failed. See root cause "
                       b"above.\n"]
    server = launcher(fake).start(make_spec(), ctx)
    c = only_container(fake)
    c.status, c.exit_code = "exited", 1
    desc = server.exit_description()
    assert desc == ("container exited, exit code 1 (Exception: CPU Offloading is currently only supported on "
                    "CUDA-alike and XPU GPUs)")
    server.stop()
