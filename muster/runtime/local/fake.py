"""Fake GPUs: ``muster up --fake-gpus N[:MODEL[:MEMORY]]`` declares virtual devices.

They are how CI, laptops and the test suite get GPUs (Determined calls the same idea
``artificial_slots``). A fake GPU is a complete device to the rest of Muster: it has an
index, a stable UUID, a model and memory, is counted in the node's capacity, is placed and
bound like a real one, and appears in ``CUDA_VISIBLE_DEVICES`` (by index: nothing real is
behind it). All fake GPUs of a node form one NVLink island, like an 8-GPU server board.

Utilisation, memory use, temperature, power and health are plain attributes that tests and
fault injection set; metrics read them as they would read NVML.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from muster.api.quantity import Quantity, QuantityError, parse_quantity
from muster.runtime.base import GpuDevice, GpuFault, GpuSample, MigDevice
from muster.runtime.local.xid import GPU_LOST_REASON, describe_xid, xid_fault

__all__ = [
    "DEFAULT_FAKE_MEMORY",
    "DEFAULT_FAKE_MODEL",
    "FakeGpu",
    "FakeGpuSpecError",
    "FakeGpus",
    "parse_fake_gpus",
]

DEFAULT_FAKE_MODEL = "FAKE-GPU"
DEFAULT_FAKE_MEMORY = "16Gi"
FAKE_DOMAIN = "nvlink-0"
_MAX_FAKE_GPUS = 1024
_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]*$")
_UUID_NS = uuid.UUID("6d7c6b7e-4a8f-4f0e-9a57-6d7573746572")  # fixed: fake UUIDs are stable across runs
_FORM = "N[:MODEL[:MEMORY]], e.g. 4, 4:A100 or 4:A100:80Gi"


class FakeGpuSpecError(ValueError):
    """A ``--fake-gpus`` value that does not parse; the message names the part and the fix."""


@dataclass
class FakeGpu:
    """One virtual GPU. The reading attributes are meant to be set (by tests, fault injection)."""

    index: int
    uuid: str
    model: str
    memory_bytes: int
    utilization_pct: float = 0.0
    memory_used_bytes: int = 0
    temperature_c: float = 35.0
    power_w: float = 60.0
    healthy: bool = True
    health_reason: str = ""
    lost: bool = False  # fell off the bus: unhealthy, and no readings
    # MIG: the GPU is cut into this many slices of this profile (e.g. 7 x 1g.10gb); 0: whole.
    mig_profile: str = ""
    mig_slices: int = 0
    # What an operator should know that does not change health (application XIDs).
    notices: list[str] = field(default_factory=list)

    def sample(self) -> GpuSample:
        if self.lost:  # NVML answers GPU_IS_LOST to every query
            return GpuSample(self.index, self.uuid, None, None, self.memory_bytes, None, None)
        return GpuSample(
            index=self.index,
            uuid=self.uuid,
            utilization_pct=self.utilization_pct,
            memory_used_bytes=self.memory_used_bytes,
            memory_total_bytes=self.memory_bytes,
            temperature_c=self.temperature_c,
            power_w=self.power_w,
        )

    def apply(self, fault: GpuFault) -> None:
        """Take an injected fault or new readings (see :class:`muster.runtime.base.GpuFault`)."""
        if fault.clear:
            self.healthy, self.health_reason, self.lost = True, "", False
            self.notices.clear()
        if fault.xid is not None:
            reason = xid_fault(fault.xid)
            if reason is None:
                self.notices.append(
                    f"GPU {self.index} reported {describe_xid(fault.xid)}: an application error, "
                    "the GPU stays healthy"
                )
            else:
                self.healthy, self.health_reason = False, reason
        if fault.lost:
            self.healthy, self.health_reason, self.lost = False, GPU_LOST_REASON, True
        for name in ("utilization_pct", "memory_used_bytes", "temperature_c", "power_w"):
            value = getattr(fault, name)
            if value is not None:
                setattr(self, name, value)


def parse_fake_gpus(spec: str, node_name: str = "local") -> list[FakeGpu]:
    """Parse ``N[:MODEL[:MEMORY]]`` into N fake GPUs (model ``FAKE-GPU`` and 16Gi by default).

    MEMORY is a Kubernetes quantity of at least 1Mi (``80Gi``, ``40960Mi``). UUIDs derive from
    ``node_name``, the index, the model and the memory, so they are stable across restarts.
    Raises :class:`FakeGpuSpecError` naming the bad part, e.g. for ``4:A100:80GG``.
    """
    text = spec.strip() if isinstance(spec, str) else ""
    parts = text.split(":")
    if not text or len(parts) > 3:
        raise FakeGpuSpecError(f"--fake-gpus {spec!r}: expected {_FORM}")
    count_text = parts[0].strip()
    if not count_text.isdigit():
        raise FakeGpuSpecError(
            f"--fake-gpus {spec!r}: count {count_text!r} is not a whole number; expected {_FORM}"
        )
    count = int(count_text)
    if not 1 <= count <= _MAX_FAKE_GPUS:
        raise FakeGpuSpecError(
            f"--fake-gpus {spec!r}: count must be between 1 and {_MAX_FAKE_GPUS}, got {count}"
        )
    model = parts[1].strip() if len(parts) > 1 else DEFAULT_FAKE_MODEL
    if not _MODEL_RE.match(model):
        raise FakeGpuSpecError(
            f"--fake-gpus {spec!r}: model {model!r} must start with a letter or digit and use only "
            "letters, digits, spaces, '.', '_' and '-', e.g. A100-SXM4-80GB"
        )
    memory_bytes = _parse_memory(spec, parts[2].strip() if len(parts) > 2 else DEFAULT_FAKE_MEMORY)
    return [
        FakeGpu(
            index=i,
            uuid="GPU-" + str(uuid.uuid5(_UUID_NS, f"{node_name}/{i}/{model}/{memory_bytes}")),
            model=model,
            memory_bytes=memory_bytes,
        )
        for i in range(count)
    ]


class FakeGpus:
    """The GPU source of a node with fake GPUs (see :class:`muster.runtime.local.gpus.GpuSource`)."""

    kind = "fake"

    def __init__(self, gpus: Sequence[FakeGpu]) -> None:
        self.gpus = list(gpus)

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(n for g in self.gpus for n in g.notices)

    def gpu(self, index: int) -> FakeGpu:
        """The fake GPU ``index``; KeyError naming the known ones."""
        for g in self.gpus:
            if g.index == index:
                return g
        raise KeyError(f"no GPU {index} (GPUs: {[g.index for g in self.gpus]})")

    def devices(self) -> list[GpuDevice]:
        indices = [g.index for g in self.gpus]
        return [
            GpuDevice(
                index=g.index,
                uuid=g.uuid,
                model=g.model,
                memory_bytes=g.memory_bytes,
                mig_mode=g.mig_slices > 0,
                mig_devices=tuple(
                    MigDevice(j, f"MIG-{g.uuid[4:]}-{j}", g.mig_profile, g.memory_bytes // g.mig_slices)
                    for j in range(g.mig_slices)
                ),
                nvlink_peers=tuple(i for i in indices if i != g.index),
                domain=FAKE_DOMAIN,
                health="Healthy" if g.healthy else "Unhealthy",
                health_reason=g.health_reason,
            )
            for g in self.gpus
        ]

    def samples(self) -> list[GpuSample]:
        return [g.sample() for g in self.gpus]

    def visible_devices(self, indices: Sequence[int]) -> str:
        # Nothing real stands behind a fake GPU, so the indices are the most useful value.
        return ",".join(str(i) for i in indices)

    def close(self) -> None:
        """Nothing to release."""


def _parse_memory(spec: str, text: str) -> int:
    try:
        q = parse_quantity(text)
    except QuantityError:
        raise FakeGpuSpecError(
            f"--fake-gpus {spec!r}: memory {text!r} is not a quantity; write it like 80Gi or 40960Mi"
        ) from None
    if q < Quantity(1024 * 1024):
        hint = f"; a bare number counts bytes: did you mean {text}Gi?" if text.isdigit() else ", e.g. 16Gi"
        raise FakeGpuSpecError(f"--fake-gpus {spec!r}: memory {text!r} must be at least 1Mi{hint}")
    if q.value.denominator != 1:
        raise FakeGpuSpecError(f"--fake-gpus {spec!r}: memory {text!r} must be a whole number of bytes")
    return q.as_int()
