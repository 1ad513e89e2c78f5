"""The hardware catalogue: each device's capacity is the total its driver reports, as published (nvidia-smi's
"Memory-Usage" total in MiB, NVML's bytes, rocm-smi's bytes), and the capacity field reads each suggestion back
to exactly that figure."""

from __future__ import annotations

import pytest

from app.ledger.scenario import parse_scenario
from app.ledger.scenario.presets import DEVICES, PRESETS, Device

# The published figures, as their sources print them (see each Device's ``source``).
PUBLISHED_MIB = {
    "a100-40gb": 40_960,  # Modal's NVML table
    "a100-80gb": 81_920,
    "h100-80gb": 81_559,  # Modal's table; NVIDIA/nccl#1264's nvidia-smi
    "h200": 143_771,
    "l40s": 46_068,
    "b200": 183_359,  # AWS DLAMI guide, P6-B200 nvidia-smi
    "rtx4090": 24_564,
}
PUBLISHED_BYTES = {
    "h100-nvl": 99_961_274_368,  # NVML dedicated total, fastfetch-cli/fastfetch#1658
    "mi300x": 205_822_885_888,  # rocm-smi VRAM Total Memory
}


@pytest.mark.parametrize("device", [d for d in DEVICES if d.reported], ids=lambda d: d.id)
def test_each_device_reports_its_published_total(device: Device) -> None:
    want = PUBLISHED_BYTES.get(device.id) or PUBLISHED_MIB[device.id] * 2**20
    assert device.capacity_bytes == want
    # the suggestion typed into the field is read back to exactly the reported bytes
    assert parse_scenario({"capacity_bytes": device.typed}).capacity_bytes == want


def test_the_catalogue_covers_the_cards_people_train_on() -> None:
    assert {d.id for d in DEVICES if d.reported} == set(PUBLISHED_MIB) | set(PUBLISHED_BYTES)


def test_no_device_reports_its_datasheet_gb_or_gib_exactly_except_the_a100s() -> None:
    """What makes a catalogue worth having: an "80GB" H100 is neither 80 GB nor 80 GiB to the driver."""
    for d in DEVICES:
        if not d.reported:
            continue
        nominal = int(d.nominal.split("GB")[0])
        exact = d.capacity_bytes in (nominal * 10**9, nominal * 2**30)
        assert exact == d.id.startswith("a100"), d.id


def test_the_h100_presets_use_what_an_h100_reports() -> None:
    h100 = next(d for d in DEVICES if d.id == "h100-80gb").capacity_bytes
    named = [p for p in PRESETS if "H100" in p.title]
    assert named and all(p.scenario.capacity_bytes == h100 for p in named)


def test_every_real_device_has_link_figures_with_a_source() -> None:
    """The layout search's lower-bound time reads them: per GPU, each direction, in bytes per second (integers)."""
    for d in DEVICES:
        if not d.reported:
            assert d.links is None  # the seed's decimal 80 GB is no device's
            continue
        assert d.links is not None, d.id
        assert isinstance(d.links.intra_node, int) and isinstance(d.links.inter_node, int)
        assert d.links.intra_node > 0 and d.links.inter_node > 0 and "each way" in d.links.source


def test_nvlink_figures_are_per_direction() -> None:
    """A datasheet's NVLink figure sums both directions: H100 SXM5's 900 GB/s is 450 GB/s each way; its network
    400 Gb/s (NDR) is 50 GB/s."""
    from app.ledger.scenario.presets import DEVICE_BY_ID

    h100 = DEVICE_BY_ID["h100-80gb"].links
    assert h100 is not None and (h100.intra_node, h100.inter_node) == (450 * 10**9, 50 * 10**9)
