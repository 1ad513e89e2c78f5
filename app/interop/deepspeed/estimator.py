"""DeepSpeed's own memory estimators, beside the lab's ledgers, with every difference named.

``estimate_zero3_model_states_mem_needs`` and ``estimate_zero2_model_states_mem_needs`` (DeepSpeed
0.19.8, ``runtime/zero/stage3.py`` and ``stage_1_and_2.py``) are written out here as DeepSpeed
writes them, floats included, because their point is to be compared: they model the same thing as
the lab only for DeepSpeed's mixed-precision Adam layout (16-bit parameters and gradients, FP32
master, two FP32 states: 18 B per parameter in their comments), offload to the CPU or none, and D
filling whole nodes. :func:`compare` answers None where they do not, with the reason.

The differences, each a line of :class:`Comparison`: the estimators multiply every host figure by
``additional_buffer_factor`` (1.5) where the lab counts the buffers it names; ZeRO-3's device
figure adds ``4 × largest_layer_params`` (the largest module's own parameters in FP32) where the
lab's peak counts the gathered unit in the all-gather width, apart from the persistent state; they
count a device FP32 gradient partition the lab's persistent ledger does not (18 B per parameter
against its 16); and they print bytes ÷ 2³⁰ labelled "GB", which are GiB.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import ceil_div, n
from app.ledger.ledger import Ledger
from app.ledger.scenario import Scenario
from app.ledger.state.host import HostLedger, largest_tensor

__all__ = ["Comparison", "compare", "not_comparable"]

FACTOR_TENTHS = 15  # additional_buffer_factor = 1.5, kept exact: × 15 ÷ 10
GIB = 2**30


@dataclass(frozen=True, slots=True)
class Comparison:
    stage: int
    options: str  # DeepSpeed's own words for the row: offload_param=…, offload_optimizer=…, zero_init=…
    gpu: int  # DeepSpeed's per-GPU bytes (int() of its float, as it returns them)
    cpu: int  # DeepSpeed's per-CPU (per-node) bytes
    printed: str  # the row as DeepSpeed prints it
    lab_gpu: int  # the lab's persistent state on the device at that stage
    lab_cpu: int  # the lab's host RAM per node at that stage (the larger of training and loading)
    differences: tuple[str, ...]


def not_comparable(s: Scenario) -> str | None:
    """Why DeepSpeed's estimators do not model this scenario (None: they do)."""
    if (s.param_bytes, s.grad_bytes, s.master_bytes, s.opt_states, s.opt_bytes) != (2, 2, 4, 2, 4):
        return (
            "DeepSpeed's estimators assume 16-bit parameters and gradients, an FP32 master and Adam's two FP32 states"
        )
    if "nvme" in (s.offload_optimizer, s.offload_param):
        return "DeepSpeed's estimators cover offload to the CPU only, not NVMe"
    if (s.tp, s.pp, s.ep, s.hpz) != (1, 1, 1, 1) or s.shard_group != s.dp:
        return "DeepSpeed's estimators take one data-parallel model: no tp, pp, ep, shard group or hpZ"
    if s.dp > s.ranks_per_node and s.dp % s.ranks_per_node:
        return f"D = {n(s.dp)} does not fill whole nodes of {n(s.ranks_per_node)} ranks"
    if s.stage not in (2, 3):
        return f"DeepSpeed has estimators for stages 2 and 3; the run uses stage {s.stage}"
    if s.stage == 2 and s.offload_param != "none":
        return "parameter offload is stage 3's"
    if s.offload_param != "none" and s.offload_optimizer == "none":
        return "DeepSpeed's estimator has no row for parameter offload without optimizer offload"
    return None


def _zero3(total: int, largest: int, per_node: int, nodes: int, cpu_offload: bool, params: bool, zero_init: bool
           ) -> tuple[int, int]:  # fmt: skip
    """estimate_zero3_model_states_mem_needs, term for term, as exact fractions floored once (DeepSpeed's
    floats, gpus_factor = 1 / nodes and the 1.5 factor, can differ from them in the last byte)."""
    total_gpus = per_node * nodes
    largest_layer_memory = 4 * largest
    if cpu_offload:
        states = 18 if params else 16  # bytes per parameter on the host: 16-bit parameters too when offloaded
        gpu = largest_layer_memory + (0 if params else 2 * total // total_gpus)
        # zero_init: states × total × gpus_factor; else max(4 × GPUs per node, states × gpus_factor) × total
        per_param_times_nodes = states if zero_init else max(4 * per_node * nodes, states)
        cpu = total * per_param_times_nodes * FACTOR_TENTHS // (nodes * 10)
    else:
        gpu = largest_layer_memory + 18 * total // total_gpus
        cpu = (largest if zero_init else total) * 4 * per_node * FACTOR_TENTHS // 10
    return cpu, gpu


def _zero2(total: int, per_node: int, nodes: int, cpu_offload: bool) -> tuple[int, int]:
    """estimate_zero2_model_states_mem_needs, term for term."""
    total_gpus = per_node * nodes
    if cpu_offload:
        gpu = 2 * total
        cpu = total * max(4 * total_gpus, 16) * FACTOR_TENTHS // 10
    else:
        gpu = 2 * total + 18 * total // total_gpus
        cpu = total * 4 * per_node * FACTOR_TENTHS // 10
    return cpu, gpu


def _gib(value: int) -> str:
    """bytes ÷ 2³⁰ to two places, as DeepSpeed's f"{x:.2f}" prints it (rounded half up here, exactly)."""
    hundredths = (value * 100 + GIB // 2) // GIB
    return f"{hundredths // 100}.{hundredths % 100:02d}"


def _gb(value: int) -> str:
    hundredths = (value * 100 + 500_000_000) // 1_000_000_000
    return f"{hundredths // 100}.{hundredths % 100:02d}"


def compare(ledger: Ledger, host: HostLedger) -> Comparison | None:
    """DeepSpeed's estimator row for the scenario's stage and offload, beside the lab's figures."""
    s = ledger.scenario
    if not_comparable(s) is not None:
        return None
    per_node = min(s.dp, s.ranks_per_node)
    nodes = ceil_div(s.dp, s.ranks_per_node)
    cpu_offload = s.offload_optimizer == "cpu"
    params = s.offload_param == "cpu"
    largest = largest_tensor(s)
    if s.stage == 3:
        zero_init = s.load_path == "partitioned"  # its only other case: every GPU builds the model
        cpu, gpu = _zero3(s.params, largest, per_node, nodes, cpu_offload, params, zero_init)
        options = (f"offload_param={'cpu' if params else 'none'}, offload_optimizer={'cpu' if cpu_offload else 'none'}"
                   f", zero_init={int(zero_init)}")  # fmt: skip
    else:
        cpu, gpu = _zero2(s.params, per_node, nodes, cpu_offload)
        options = f"offload_optimizer={'cpu' if cpu_offload else 'none'}"
    # As DeepSpeed prints it on Python 3.11+, where f"{OffloadDeviceEnum.cpu:4}" formats the member's name
    printed = f" {_gib(cpu):>7}GB | {_gib(gpu):>6}GB | " + options.replace("=cpu", "=OffloadDeviceEnum.cpu")
    stage = ledger.stages[s.stage]
    lab_gpu = stage.persistent
    lab_cpu = host.stages[s.stage].peak
    differences = [
        f'DeepSpeed prints bytes ÷ 2³⁰ labelled GB: its {_gib(cpu)} "GB" per CPU is {n(cpu)} B = {_gb(cpu)} GB '
        f'(10⁹ B); its {_gib(gpu)} "GB" per GPU is {n(gpu)} B = {_gb(gpu)} GB',
        "its host figures are × additional_buffer_factor 1.5 (a fixed allowance); the lab's host ledger "
        f"counts the buffers it names instead: {n(lab_cpu)} B per node",
    ]
    before = cpu * 10 // FACTOR_TENTHS
    pinned = sum(x.bytes for x in host.stages[s.stage].lines if x.where == "host" and x.what.startswith("pinned"))
    ranks = host.ranks_per_node
    if pinned:
        differences.append(
            f"before its factor its host figure is {n(before)} B; the lab's pinned buffers ({n(pinned)} B per rank, "
            f"{n(pinned * ranks)} B per node) are terms it does not have"
        )
    differences += _model_differences(s, largest, lab_gpu, per_node, nodes)
    return Comparison(s.stage, options, gpu, cpu, printed, lab_gpu, lab_cpu, tuple(differences))


def _model_differences(s: Scenario, largest: int, lab_gpu: int, per_node: int, nodes: int) -> list[str]:
    """Where DeepSpeed's model of the stage differs from the ledger's: its extra terms, each with its bytes."""
    cpu_offload = s.offload_optimizer == "cpu"
    differences: list[str] = []
    if s.stage == 3:
        differences.append(
            f"its GPU figure adds 4 B × largest_layer_params ({n(largest)}, the largest module's own parameters) = "
            f"{n(4 * largest)} B; the lab's peak counts the gathered unit in the all-gather width apart from the "
            f"persistent state ({n(lab_gpu)} B)"
        )
    if not cpu_offload and s.stage == 3:
        differences.append(
            "its device model states are 18 B per parameter ÷ D against the ledger's 2 + 2 + 4 + 2 × 4 = 16 B: "
            f"2 B per parameter more ({n(2 * s.params // s.dp)} B)"
        )
    if not cpu_offload and s.stage == 2:
        differences.append(
            "its device model states are 2 B × N of 16-bit parameters + 18 B per parameter ÷ D (16-bit and FP32 "
            "gradients, FP32 master, Adam) against the ledger's 2 B × N + 2 + 4 + 2 × 4 = 14 B ÷ D: its FP32 gradient "
            f"partition, 4 B per parameter ÷ D more ({n(4 * s.params // s.dp)} B)"
        )
    if s.load_path == "rank0":
        differences.append(
            "its host figure, without zero_init, has every GPU build the model in FP32; the lab's load_path rank0 "
            "loads one copy per node and broadcasts it"
        )
    if s.stage == 3 and s.load_path == "partitioned" and not cpu_offload:
        differences.append(
            f"its host figure counts the largest layer in FP32 per GPU ({n(largest)} × 4 B × {per_node}); zero.Init "
            "creates each module's parameters on the device and partitions them as they are built: the lab counts "
            "0 B for loading"
        )
    if s.stage == 2 and cpu_offload and nodes > 1:
        differences.append(
            f"its ZeRO-2 offload host figure is N × max(4 × every GPU of all {nodes} nodes, 16) B: the whole FP32 "
            "model for each GPU of the cluster on one CPU (without offload it counts one node's GPUs); the lab "
            f"counts one node's {per_node} ranks"
        )
    if s.params % s.dp:
        differences.append(
            "it divides N by D and floors; the ledger counts the busiest rank's "
            f"⌈N ÷ D⌉ = {n(ceil_div(s.params, s.dp))}"
        )
    return differences
