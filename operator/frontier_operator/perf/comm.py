"""Collective communication time: a latency per call plus bytes over the link the group spans.

A group that fits in one node, or in an NVLink domain wider than a node (GB200/GB300 NVL72), talks over
NVLink; a group that spans nodes of an 8-GPU HGX system crosses the network, whose per-GPU NIC bandwidth is
an order of magnitude lower and whose latency adds to NVLink's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from frontier_operator.catalog.types import GpuSpec
from frontier_operator.perf.calibration import Coefficients
from frontier_operator.perf.kernels import CollectiveKind, CollectiveWork

# Extra latency of one hop across the scale-out network. AIConfigurator's system files use 10 µs for a
# point-to-point transfer (published-figures.md §7a, "p2p_latency").
NETWORK_HOP_LATENCY_S = 10e-6
# Group sizes SGLang's custom all-reduce takes (`_SUPPORTED_WORLD_SIZES` in
# sglang/srt/distributed/device_communicators/custom_all_reduce.py), on one node: every other all-reduce goes
# through NCCL, whose fixed latency per call is the `nccl_latency_us` coefficient. 0.5.23's v2 kernel also
# admits a multi-node group that is one NVLink clique on a VMM-backed allocator; the model does not credit it,
# since the runs we fit on show no sign of it (GB200 decode at TP 8 over two 4-GPU trays is no faster per token
# than at TP 4, where the weights alone would make it faster).
CUSTOM_ALL_REDUCE_SIZES = frozenset({2, 4, 6, 8})


@dataclass(frozen=True)
class Link:
    bandwidth_bytes_per_s: float
    latency_s: float
    crosses_network: bool


def link_for_group(
    gpu: GpuSpec, group_size: int, gpus_per_node: int, coefficients: Coefficients, *, nccl: bool = False
) -> Link:
    """The link a group of `group_size` GPUs talks over; `nccl`: the call's fixed latency is NCCL's."""
    base_latency = (coefficients.nccl_latency_us if nccl else coefficients.collective_latency_us) * 1e-6
    inside_scale_up = group_size <= max(gpus_per_node, gpu.scale_up_domain)
    if inside_scale_up:
        return Link(gpu.scale_up_bandwidth_gbs * 1e9, base_latency, crosses_network=False)
    nodes = math.ceil(group_size / max(1, gpus_per_node))
    # A hierarchical (ring or tree) collective crosses log2(nodes) network stages.
    hops = max(1.0, math.log2(nodes))
    return Link(gpu.scale_out_bandwidth_gbs * 1e9, base_latency + hops * NETWORK_HOP_LATENCY_S, crosses_network=True)


def collective_time(work: CollectiveWork, gpu: GpuSpec, gpus_per_node: int, coefficients: Coefficients) -> float:
    """Seconds for `work.count` collectives of `work.buffer_bytes` each."""
    n = work.group_size
    if n <= 1 or work.count <= 0:
        return 0.0
    custom = n in CUSTOM_ALL_REDUCE_SIZES and n <= gpus_per_node
    nccl = work.kind is CollectiveKind.ALL_REDUCE and not custom
    link = link_for_group(gpu, n, gpus_per_node, coefficients, nccl=nccl)
    # DeepEP's dispatch and combine over NVLink run at their own pace, set by the per-token routing work (the rows
    # measure a quarter of the link); across a network the NIC is the bottleneck, which DeepEP fills about as well
    # as any collective (43–58 GB/s of a 50 GB/s NIC in DeepEP's published runs), and no row measures otherwise.
    nvlink_all_to_all = work.kind is CollectiveKind.ALL_TO_ALL and not link.crosses_network
    efficiency = coefficients.all_to_all_efficiency if nvlink_all_to_all else coefficients.link_efficiency
    nvlink = gpu.scale_up_bandwidth_gbs * 1e9 * efficiency
    if work.kind is CollectiveKind.ALL_REDUCE:
        if not link.crosses_network:
            # Ring all-reduce: every GPU sends and receives 2(n−1)/n of the buffer.
            seconds = 2.0 * (n - 1) / n * work.buffer_bytes / nvlink
        else:
            # Hierarchical (NCCL tree/ring over rails): reduce inside the node over NVLink, then each of the
            # node's GPUs all-reduces its 1/g slice across nodes over its own NIC.
            g = max(1, min(gpus_per_node, n))
            nodes = math.ceil(n / g)
            inside = 2.0 * (g - 1) / g * work.buffer_bytes / nvlink
            across = 2.0 * (nodes - 1) / nodes * work.buffer_bytes / g / (link.bandwidth_bytes_per_s * efficiency)
            seconds = inside + across
    elif work.kind in (CollectiveKind.ALL_TO_ALL, CollectiveKind.ALL_GATHER):
        # All-to-all: tokens routed to experts on other GPUs leave, (n−1)/n of them under uniform routing.
        # All-gather (ring): every GPU receives the (n−1)/n of the buffer it does not hold.
        seconds = (n - 1) / n * work.buffer_bytes / (link.bandwidth_bytes_per_s * efficiency)
    else:
        seconds = work.buffer_bytes / (link.bandwidth_bytes_per_s * efficiency)
    return work.count * (link.latency_s + seconds)
