"""Workshop presets: scenarios and device capacities, each with where its figures come from.

Parameter counts are exact sums of the models' tensors (Llama 2: Touvron et al. 2023 and the
published config.json files; hidden size, intermediate size, layers, vocabulary 32,000).
Activation figures in presets are declared placeholders until replaced by a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.scenario.scenario import Scenario, parse_scenario

GIB = 2**30
MIB = 2**20
GB = 10**9
# An H100 SXM5 80GB as nvidia-smi reports it (DEVICES below): the H100 presets' capacity
H100_80GB = 81_559 * MIB


@dataclass(frozen=True, slots=True)
class Preset:
    id: str
    title: str
    source: str
    scenario: Scenario


@dataclass(frozen=True, slots=True)
class Links:
    """A device's link bandwidths, in bytes per second **per direction per GPU** (what one rank can send while it
    receives as much): the intra-node fabric (NVLink, Infinity Fabric, or PCIe without one) and the inter-node
    network (the NIC bandwidth per GPU of the platform named in ``source``). A datasheet's NVLink figure is the
    sum of both directions: half of it is used here."""

    intra_node: int
    inter_node: int
    source: str


@dataclass(frozen=True, slots=True)
class Device:
    id: str
    title: str
    nominal: str  # as the datasheet prints it
    capacity_bytes: int  # the total the driver reports (NVML's, as nvidia-smi and torch.cuda.mem_get_info give it)
    source: str
    reported: bool = True  # False: the seed's decimal 80 GB, a scenario's figure rather than a device's
    links: Links | None = None  # None: no link figures (the seed's capacity is no device's)

    @property
    def typed(self) -> str:
        """The capacity as the capacity field reads it exactly: in MiB, the unit nvidia-smi reports, where whole."""
        mib, rest = divmod(self.capacity_bytes, MIB)
        return f"{mib}MiB" if not rest else f"{self.capacity_bytes}"


# Llama 2 decoder layer: attention q,k,v,o + SwiGLU MLP (3 × h × i) + 2 RMSNorm weights.
LLAMA2_7B_LAYER = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096  # 202,383,360
LLAMA2_7B = 32 * LLAMA2_7B_LAYER + 2 * 32000 * 4096 + 4096  # 6,738,415,616 (untied head)
LLAMA2_13B_LAYER = 4 * 5120 * 5120 + 3 * 5120 * 13824 + 2 * 5120  # 317,204,480
LLAMA2_13B = 40 * LLAMA2_13B_LAYER + 2 * 32000 * 5120 + 5120  # 13,015,864,320
# 70B uses grouped-query attention: 8 key/value heads of 128 → k and v are 8192 × 1024.
LLAMA2_70B_LAYER = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192  # 855,654,400
LLAMA2_70B = 80 * LLAMA2_70B_LAYER + 2 * 32000 * 8192 + 8192  # 68,976,648,192

_SEED = Scenario()
# Llama-2-70B on H100s: one decoder layer wrapped, one unit prefetched, declared buffers and overhead.
_LLAMA2_70B_RUN: dict[str, int | str] = {
    "params": LLAMA2_70B, "unit_params": LLAMA2_70B_LAYER, "prefetch": 1, "bucket_bytes": 1 * GB,
    "activation_bytes": 30 * GB, "overhead_bytes": 4 * GIB, "contingency_pct": 5, "capacity_bytes": H100_80GB,
}  # fmt: skip
_FSDP2 = {"param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "gather_bytes": 2}

PRESETS: tuple[Preset, ...] = (
    Preset(
        "seed",
        "Seed example: 7B, DeepSpeed-style mixed precision, D = 8, 80 GB",
        "the article's scenario (spec worked example); 20 GB of activations declared as a placeholder",
        _SEED,
    ),
    Preset(
        "seed-fsdp2",
        "Same model, PyTorch FSDP2 layout (FP32 shards, BF16 all-gather)",
        "FSDP2 MixedPrecisionPolicy(param_dtype=bf16): sharded FP32 parameters updated in place",
        _SEED.with_(**_FSDP2, name="seed model, FSDP2 layout"),
    ),
    Preset(
        "llama2-7b-dp8",
        "Llama-2-7B, ZeRO mixed precision, 8 × H100 80GB",
        "6,738,415,616 parameters (config.json: h 4096, i 11008, 32 layers); U = one decoder layer",
        _SEED.with_(
            params=LLAMA2_7B,
            unit_params=LLAMA2_7B_LAYER,
            prefetch=1,
            bucket_bytes=500_000_000,
            overhead_bytes=3 * GIB,
            contingency_pct=5,
            capacity_bytes=H100_80GB,
            name="Llama-2-7B, 8 x H100",
        ),
    ),
    Preset(
        "llama2-13b-fsdp2-dp8",
        "Llama-2-13B, FSDP2, 8 × A100 40GB",
        "13,015,864,320 parameters (h 5120, i 13824, 40 layers); U = one decoder layer",
        _SEED.with_(
            params=LLAMA2_13B,
            unit_params=LLAMA2_13B_LAYER,
            **_FSDP2,
            prefetch=1,
            activation_bytes=12 * GB,
            overhead_bytes=3 * GIB,
            contingency_pct=5,
            capacity_bytes=40 * GIB,
            name="Llama-2-13B, FSDP2, 8 x A100-40GB",
        ),
    ),
    Preset(
        "llama2-70b-dp64",
        "Llama-2-70B, ZeRO-3, 64 × H100 80GB",
        "68,976,648,192 parameters (h 8192, i 28672, 80 layers, 8 KV heads); U = one decoder layer",
        _SEED.with_(**_LLAMA2_70B_RUN, dp=64, name="Llama-2-70B, 64 x H100"),
    ),
    Preset(
        "llama2-70b-dp8",
        "Llama-2-70B on only 8 × H100 80GB (does not fit)",
        "the same model squeezed onto one node: the verdict shows why 64 ranks are needed",
        _SEED.with_(**_LLAMA2_70B_RUN, dp=8, name="Llama-2-70B, 8 x H100"),
    ),
    # From a model's config: params, the largest unit and the activation peak are filled in.
    Preset(
        "model-llama2-7b-selective",
        "Llama-2-7B from its config.json, selective recompute, s = 4,096, b = 2, 8 × H100",
        "the built-in Llama-2-7B config; activations modelled (SwiGLU / GQA count, FlashAttention-style)",
        parse_scenario(
            {
                "model": "llama-2-7b",
                "act_policy": "selective",
                "micro_batch": 2,
                "prefetch": 1,
                "overhead_bytes": 3 * GIB,
                "contingency_pct": 5,
                "capacity_bytes": H100_80GB,
            }
        ),
    ),
    Preset(
        "model-mixtral-full-dp64",
        "Mixtral-8x7B from its config.json, full recompute, 64 × H100",
        "the built-in Mixtral-8x7B-v0.1 config (MoE: 8 experts, top-2, fused as transformers holds them: at D = 64 "
        "FSDP2 pads them to a whole expert per rank; try ep = 8); activations modelled",
        parse_scenario(
            {
                "model": "mixtral-8x7b-v0.1",
                "act_policy": "full",
                "dp": 64,
                "prefetch": 1,
                "bucket_bytes": 1 * GB,
                "overhead_bytes": 4 * GIB,
                "contingency_pct": 5,
                "capacity_bytes": H100_80GB,
            }
        ),
    ),
)
PRESET_BY_ID: dict[str, Preset] = {p.id: p for p in PRESETS}

# What each device reports as its total memory (nvidia-smi's "Memory-Usage" total, NVML's, which is
# torch.cuda.mem_get_info()'s too; rocm-smi's for AMD): the datasheet's "80GB" is neither 80 GB nor 80 GiB
# usable. Less still is left to PyTorch: the CUDA context's few hundred MiB (the overhead input) and the
# caching allocator's reserve.
# Link figures (the layout search's lower-bound time). Inter-node: the platform's compute NICs per GPU, 8 of them in
# an 8-GPU node: 400 Gb/s = 50 GB/s (InfiniBand NDR / ConnectX-7), 200 Gb/s = 25 GB/s (HDR / ConnectX-6).
GBPS = 10**9  # a decimal gigabyte per second
_NDR = "400 Gb/s InfiniBand NDR (ConnectX-7) per GPU = 50 GB/s each way"
_NVLINK4 = Links(
    450 * GBPS,
    50 * GBPS,
    f"NVLink 4 via NVSwitch: 900 GB/s per GPU, both directions summed, so 450 GB/s each way (NVIDIA H100 datasheet); "
    f"inter-node {_NDR}, one NIC per GPU as in a DGX H100 / H200",
)
_A100 = Links(
    300 * GBPS,
    25 * GBPS,
    "NVLink 3 via NVSwitch: 600 GB/s per GPU, both directions summed, so 300 GB/s each way (NVIDIA A100 datasheet); "
    "inter-node 200 Gb/s InfiniBand HDR (ConnectX-6) per GPU = 25 GB/s each way, as in a DGX A100",
)
_PCIE4 = "PCIe Gen4 x16: 64 GB/s both directions summed, 32 GB/s each way (no NVLink)"
_MODAL = "Modal's table of NVML totals (thundergolfer.com/blog/nvidia-gpu-memory-capacity, 2025-01)"
DEVICES: tuple[Device, ...] = (
    Device(
        "seed-80gb",
        "Seed example capacity",
        "80 GB",
        80 * GB,
        "the article's decimal 80 GB (10^9 bytes), kept as the frozen scenario's capacity: more than an H100 "
        "reports (81,559 MiB = 79.65 GiB), so a verdict against it is optimistic",
        reported=False,
    ),
    Device(
        "a100-40gb",
        "NVIDIA A100 40GB",
        "40GB HBM2",
        40_960 * MIB,
        f"nvidia-smi total 40,960 MiB: {_MODAL}",
        links=_A100,
    ),
    Device(
        "a100-80gb",
        "NVIDIA A100 80GB",
        "80GB HBM2e",
        81_920 * MIB,
        f"nvidia-smi total 81,920 MiB: {_MODAL}",
        links=_A100,
    ),
    Device(
        "h100-80gb",
        "NVIDIA H100 SXM5 80GB",
        "80GB HBM3",
        H100_80GB,
        f"nvidia-smi total 81,559 MiB: {_MODAL}; the same in NVIDIA/nccl#1264's nvidia-smi (driver 550.54.15)",
        links=_NVLINK4,
    ),
    Device(
        "h100-nvl",
        "NVIDIA H100 NVL",
        "94GB HBM3",
        99_961_274_368,
        "NVML dedicated total 99,961,274,368 B (driver 570.86.15), in fastfetch-cli/fastfetch#1658",
        links=Links(
            64 * GBPS,
            50 * GBPS,
            "PCIe Gen5 x16: 128 GB/s both directions summed, 64 GB/s each way (NVIDIA H100 NVL datasheet; its NVLink "
            f"bridge joins pairs of cards only, so a group of more than two crosses PCIe); inter-node assumed {_NDR}",
        ),
    ),
    Device(
        "h200",
        "NVIDIA H200 SXM 141GB",
        "141GB HBM3e",
        143_771 * MIB,
        f"nvidia-smi total 143,771 MiB: {_MODAL}",
        links=_NVLINK4,
    ),
    Device(
        "b200",
        "NVIDIA B200",
        "180GB HBM3e",
        183_359 * MIB,
        "nvidia-smi total 183,359 MiB (driver 570.133.20): AWS Deep Learning AMI guide, P6-B200 instances",
        links=Links(
            900 * GBPS,
            50 * GBPS,
            "NVLink 5 via NVSwitch: 1.8 TB/s per GPU, both directions summed, so 900 GB/s each way (NVIDIA DGX B200 "
            f"datasheet); inter-node {_NDR}, as in a DGX B200",
        ),
    ),
    Device(
        "l40s",
        "NVIDIA L40S",
        "48GB GDDR6 (ECC on)",
        46_068 * MIB,
        f"nvidia-smi total 46,068 MiB: {_MODAL}",
        links=Links(
            32 * GBPS,
            25 * GBPS,
            f"{_PCIE4} (NVIDIA L40S datasheet); inter-node assumed 200 Gb/s per "
            "GPU = 25 GB/s each way (no reference platform: set by the lab)",
        ),
    ),
    Device(
        "mi300x",
        "AMD Instinct MI300X",
        "192GB HBM3",
        205_822_885_888,
        "rocm-smi --showmeminfo vram: VRAM Total Memory 205,822,885,888 B (HIP's totalGlobalMem, the same)",
        links=Links(
            448 * GBPS,
            50 * GBPS,
            "Infinity Fabric: 7 links of 128 GB/s both directions summed, 896 GB/s aggregate (AMD Instinct MI300X "
            "datasheet), so 448 GB/s each way to all peers together (64 GB/s to any one: the bound takes the "
            f"aggregate, as RCCL's rings over the full mesh approach it); inter-node assumed {_NDR}",
        ),
    ),
    Device(
        "rtx4090",
        "NVIDIA GeForce RTX 4090",
        "24GB GDDR6X",
        24_564 * MIB,
        "nvidia-smi total 24,564 MiB (published nvidia-smi outputs of RTX 4090 hosts)",
        links=Links(
            32 * GBPS,
            12_500_000_000,
            f"{_PCIE4}; inter-node assumed 100 Gb/s Ethernet per GPU = 12.5 GB/s "
            "each way (no reference platform: set by the lab)",
        ),
    ),
)
DEVICE_BY_ID: dict[str, Device] = {d.id: d for d in DEVICES}
