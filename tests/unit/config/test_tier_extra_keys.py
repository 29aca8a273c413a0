"""A secondary tier's ``extra`` is passed to vLLM verbatim, but may not set the keys the harness writes itself.

``connector_config`` spreads ``extra`` after ``type``, ``root_dir`` and the thread counts, so such a key would win
over the tier's own field (a ``root_dir`` the harness never mounts, checks or cleans); ``module_path`` would load
another tier class. Each is refused at load, naming the key and the field to set instead.
"""

from __future__ import annotations

from typing import Any

import pytest
from config_scenarios import load_with, refused

from harness.config.arms import FS_TIER_MANAGED_KEYS, FsTier
from harness.engines.vllm import connector_config

TIER_PATH = "arms[1].offload.secondary_tiers[0]"


def tiered_arms(extra: dict[str, Any], *, second: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    tiers: list[dict[str, Any]] = [{"root_dir": "/tmp/kv-a", "extra": extra}]
    if second is not None:
        tiers.append({"root_dir": "/tmp/kv-b", "extra": second})
    return [{"name": "baseline", "tier": "gpu-only"},
            {"name": "tiered", "tier": "tiered", "offload": {"kind": "vllm-connector",
                                                             "spec_name": "TieringOffloadingSpec",
                                                             "cpu_bytes_to_use": 1 << 30, "secondary_tiers": tiers}}]


@pytest.mark.parametrize("key", ["root_dir", "type", "n_read_threads", "n_write_threads", "size_gib"])
def test_a_managed_key_in_extra_names_the_field_to_use(key: str) -> None:
    text = refused(f"{TIER_PATH}.extra: {key!r}", arms=tiered_arms({key: "x"}))
    assert f"set {TIER_PATH}.{key} instead" in text


def test_root_dir_message_in_full() -> None:
    text = refused("root_dir", arms=tiered_arms({"root_dir": "/elsewhere"}))
    assert text == (f"s.yaml: {TIER_PATH}.extra: 'root_dir' is the directory the harness writes from the tier's "
                    "root_dir field (and mounts, checks for free space and cleans); set "
                    f"{TIER_PATH}.root_dir instead")
    assert "/elsewhere" not in text


def test_module_path_is_refused_with_the_reason() -> None:
    text = refused("'module_path'", arms=tiered_arms({"module_path": "my.tiers"}))
    assert "load another tier class" in text and text.endswith("remove it")


def test_every_managed_key_is_listed_and_the_second_tier_is_named() -> None:
    text = refused("secondary_tiers[1].extra", arms=tiered_arms({"locality": "node"},
                                                                second={"n_read_threads": 2, "root_dir": "/x"}))
    assert "set arms[1].offload.secondary_tiers[1].n_read_threads instead" in text
    assert "set arms[1].offload.secondary_tiers[1].root_dir instead" in text


def test_free_form_keys_still_pass_through() -> None:
    scenario = load_with(arms=tiered_arms({"locality": "node", "enable_kv_events": True}))
    offload = scenario.arms[1].offload
    assert offload.kind == "vllm-connector"
    [tier] = connector_config(offload)["kv_connector_extra_config"]["secondary_tiers"]
    assert tier == {"type": "fs", "root_dir": "/tmp/kv-a", "n_read_threads": 16, "n_write_threads": 16,
                    "locality": "node", "enable_kv_events": True}


def test_the_model_refuses_without_the_loader_too() -> None:
    with pytest.raises(ValueError, match="'root_dir' is the directory the harness writes"):
        FsTier.model_validate({"root_dir": "/a", "extra": {"root_dir": "/b"}})
    assert set(FS_TIER_MANAGED_KEYS) >= {"type", "root_dir", "n_read_threads", "n_write_threads", "module_path"}


def test_the_connector_has_no_other_passthrough_mapping() -> None:
    from harness.config.arms import VllmConnectorOffload
    mappings = [name for name, field in VllmConnectorOffload.model_fields.items()
                if "dict" in str(field.annotation)]
    assert mappings == []  # only FsTier.extra passes keys through verbatim
