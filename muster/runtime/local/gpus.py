"""GPU discovery on this machine through NVML (``nvidia-ml-py``, imported as ``pynvml``).

:class:`NvmlGpus` reads each GPU's index, UUID, model, memory, MIG mode and MIG devices,
and NVLink peers (from the PCI bus id at the far end of each active link; a link ending at
an NVSwitch makes every switch-attached GPU a peer), and samples utilisation, memory use,
temperature and power for metrics. GPUs joined by NVLink form one topology domain
(``nvlink-<lowest index>``); the others share the domain ``pcie``.

Without a driver, :func:`open_gpu_source` returns :class:`NoGpus` whose warning tells the
operator how to declare fake GPUs instead. Every GPU source offers ``devices()``,
``samples()``, ``visible_devices(indices)`` (the ``CUDA_VISIBLE_DEVICES`` value: UUIDs for
real GPUs, which stay right whatever the enumeration order) and ``close()``.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import re
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Protocol, TypeVar

from muster.runtime.base import GpuDevice, GpuSample, MigDevice
from muster.runtime.local.fake import FakeGpu, FakeGpus
from muster.runtime.local.xid import GPU_LOST_REASON, describe_xid, xid_fault

__all__ = ["NO_DRIVER_MESSAGE", "GpuSource", "NoGpuDriver", "NoGpus", "NvmlGpus", "open_gpu_source"]

NO_DRIVER_MESSAGE = (
    "no NVIDIA driver found (NVML library missing); declare fake GPUs with --fake-gpus N[:MODEL[:MEMORY]]"
)
PCIE_DOMAIN = "pcie"
_LOST = GPU_LOST_REASON
_MIG_PROFILE_RE = re.compile(r"(\d+g\.\d+gb(?:\+\w+)?)", re.IGNORECASE)

T = TypeVar("T")


class GpuSource(Protocol):
    kind: str
    warnings: tuple[str, ...]

    def devices(self) -> list[GpuDevice]: ...

    def samples(self) -> list[GpuSample]: ...

    def visible_devices(self, indices: Sequence[int]) -> str: ...

    def close(self) -> None: ...


class NoGpuDriver(Exception):
    """NVML cannot be used on this machine; the message says what to do instead."""


class NoGpus:
    """The GPU source of a machine without GPUs (or without a driver: ``warnings`` says so)."""

    kind = "none"

    def __init__(self, warnings: tuple[str, ...] = ()) -> None:
        self.warnings = warnings

    def devices(self) -> list[GpuDevice]:
        return []

    def samples(self) -> list[GpuSample]:
        return []

    def visible_devices(self, indices: Sequence[int]) -> str:
        return ""

    def close(self) -> None:
        """Nothing to release."""


def open_gpu_source(fake: Sequence[FakeGpu] | None = None, nvml: ModuleType | None = None) -> GpuSource:
    """Fake GPUs when declared, else the machine's GPUs through NVML, else none with a warning."""
    if fake:
        return FakeGpus(fake)
    try:
        return NvmlGpus(nvml)
    except NoGpuDriver as exc:
        return NoGpus((str(exc),))


class NvmlGpus:
    """The GPUs NVML reports. Raises :class:`NoGpuDriver` when the library or driver is missing.

    Health: a device that cannot be opened or queried is Unhealthy with the error; so is one
    that reported a critical XID (an NVML XidCriticalError event, read without blocking on
    every ``devices()``/``samples()``) or answered NVML_ERROR_GPU_IS_LOST. Such a fault stays
    until the runtime restarts (the GPU needs a reset or a reboot anyway, as the NVIDIA
    device plugin assumes too); application XIDs (13, 31, 43, 45, 68) only add a warning.
    """

    kind = "nvml"

    def __init__(self, nvml: ModuleType | None = None) -> None:
        self.nvml: Any = nvml if nvml is not None else importlib.import_module("pynvml")
        try:
            self.nvml.nvmlInit()
        except self.nvml.NVMLError_LibraryNotFound:
            raise NoGpuDriver(NO_DRIVER_MESSAGE) from None
        except self.nvml.NVMLError_DriverNotLoaded:
            raise NoGpuDriver(
                "the NVIDIA driver is not loaded (NVML found, no kernel module); load it (nvidia-smi "
                "shows why) or declare fake GPUs with --fake-gpus N[:MODEL[:MEMORY]]"
            ) from None
        except self.nvml.NVMLError as exc:
            raise NoGpuDriver(f"NVML failed to start ({exc}); {NO_DRIVER_MESSAGE.split('; ')[1]}") from None
        self._handles: list[object] = []
        self._uuids: list[str] = []
        # Why a device cannot even be opened; such a device stays listed, as Unhealthy.
        self._broken: dict[int, str] = {}
        for i in range(self.nvml.nvmlDeviceGetCount()):
            try:
                handle = self.nvml.nvmlDeviceGetHandleByIndex(i)
                uuid = self._uuid(handle)
            except self.nvml.NVMLError as exc:
                handle, uuid = None, ""
                self._broken[i] = f"cannot open GPU {i}: {exc}"
            self._handles.append(handle)
            self._uuids.append(uuid)
        # index -> why the driver says the GPU is broken (a critical XID, lost)
        self._faults: dict[int, str] = {}
        self._notices: list[str] = []
        self._events = self._watch_xids()

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(self._notices)

    def devices(self) -> list[GpuDevice]:
        nv = self.nvml
        self._read_events()
        bus_ids = [
            self._call(lambda h=h: _bus_id(nv.nvmlDeviceGetPciInfo(h).busId), "") if h is not None else ""
            for h in self._handles
        ]
        peers, switched = self._nvlink(bus_ids)
        on_switch = [i for i, s in enumerate(switched) if s]
        for i in on_switch:
            peers[i] |= {j for j in on_switch if j != i}
        domains = _domains(peers)
        out = []
        for i, h in enumerate(self._handles):
            if i in self._broken:
                out.append(
                    GpuDevice(
                        i, "", "", 0, domain=PCIE_DOMAIN, health="Unhealthy", health_reason=self._broken[i]
                    )
                )
                continue
            problems: list[str] = [self._faults[i]] if i in self._faults else []
            mig_mode, mig_devices = self._mig(h, problems)
            out.append(
                GpuDevice(
                    index=i,
                    uuid=self._uuids[i],
                    model=self._call(lambda h=h: _text(nv.nvmlDeviceGetName(h)), "", problems),
                    memory_bytes=self._call(
                        lambda h=h: int(nv.nvmlDeviceGetMemoryInfo(h).total), 0, problems
                    ),
                    mig_mode=mig_mode,
                    mig_devices=mig_devices,
                    nvlink_peers=tuple(sorted(peers[i])),
                    domain=domains[i],
                    health="Unhealthy" if problems else "Healthy",
                    health_reason="; ".join(dict.fromkeys(problems)),
                )
            )
        return out

    def samples(self) -> list[GpuSample]:
        nv = self.nvml
        self._read_events()
        out = []
        for i, h in enumerate(self._handles):
            if h is None:
                continue
            problems: list[str] = []
            mem = self._call(lambda h=h: nv.nvmlDeviceGetMemoryInfo(h), None, problems)
            power_mw = self._call(lambda h=h: nv.nvmlDeviceGetPowerUsage(h), None, problems)
            util = self._call(lambda h=h: float(nv.nvmlDeviceGetUtilizationRates(h).gpu), None, problems)
            temp = self._call(
                lambda h=h: float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)), None, problems
            )
            if any(p == _LOST for p in problems):
                self._faults.setdefault(i, GPU_LOST_REASON)
            out.append(
                GpuSample(
                    index=i,
                    uuid=self._uuids[i],
                    utilization_pct=util,
                    memory_used_bytes=int(mem.used) if mem is not None else None,
                    memory_total_bytes=int(mem.total) if mem is not None else 0,
                    temperature_c=temp,
                    power_w=power_mw / 1000.0 if power_mw is not None else None,
                )
            )
        return out

    def visible_devices(self, indices: Sequence[int]) -> str:
        return ",".join(self._uuids[i] for i in indices)

    def close(self) -> None:
        nv = self.nvml
        if self._events is not None:
            with contextlib.suppress(nv.NVMLError):
                nv.nvmlEventSetFree(self._events)
            self._events = None
        with contextlib.suppress(nv.NVMLError):
            nv.nvmlShutdown()

    # -- XID events -------------------------------------------------------------------------

    def _watch_xids(self) -> object | None:
        """An event set with every device that can report XID errors (None: none can)."""
        nv = self.nvml
        try:
            events = nv.nvmlEventSetCreate()
        except nv.NVMLError:
            return None
        for h in self._handles:
            if h is None:
                continue
            with contextlib.suppress(nv.NVMLError):  # a device without events: health by queries only
                if nv.nvmlDeviceGetSupportedEventTypes(h) & nv.nvmlEventTypeXidCriticalError:
                    nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, events)
        return events

    def _read_events(self) -> None:
        """Take every XID event that arrived since the last look, without waiting."""
        nv = self.nvml
        if self._events is None:
            return
        while True:
            try:
                data = nv.nvmlEventSetWait_v2(self._events, 0)
            except nv.NVMLError:  # Timeout: nothing more; anything else: look again next time
                return
            if not data.eventType & nv.nvmlEventTypeXidCriticalError:
                continue
            xid = int(data.eventData)
            uuid = self._call(lambda d=data: _text(nv.nvmlDeviceGetUUID(d.device)), "")
            indices = [i for i, u in enumerate(self._uuids) if u and u == uuid]
            reason = xid_fault(xid)
            if reason is None:
                where = f"GPU {indices[0]}" if indices else "a GPU"
                self._notices.append(
                    f"{where} reported {describe_xid(xid)}: an application error, the GPU stays healthy"
                )
                continue
            # An event without a device concerns them all (as the device plugin reads it).
            for i in indices or range(len(self._handles)):
                self._faults.setdefault(i, reason)

    # -- helpers ----------------------------------------------------------------------------

    def _call(self, fn: Callable[[], T], default: T, problems: list[str] | None = None) -> T:
        """``fn()``, or ``default`` where the device does not support the query. A lost GPU or
        any other NVML failure is recorded in ``problems``, which makes the device unhealthy."""
        try:
            return fn()
        except self.nvml.NVMLError_NotSupported:
            return default
        except self.nvml.NVMLError_GpuIsLost:
            if problems is not None:
                problems.append(_LOST)
            return default
        except self.nvml.NVMLError as exc:
            if problems is not None:
                problems.append(str(exc))
            return default

    def _uuid(self, handle: object) -> str:
        return _text(self.nvml.nvmlDeviceGetUUID(handle))

    def _mig(self, h: object, problems: list[str]) -> tuple[bool, tuple[MigDevice, ...]]:
        nv = self.nvml
        mode = self._call(lambda: nv.nvmlDeviceGetMigMode(h), None, problems)
        if mode is None or mode[0] != nv.NVML_DEVICE_MIG_ENABLE:
            return False, ()
        found = []
        for j in range(self._call(lambda: nv.nvmlDeviceGetMaxMigDeviceCount(h), 0, problems)):
            try:
                mh = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
            except nv.NVMLError_NotFound:
                continue  # an empty MIG slot
            memory = int(nv.nvmlDeviceGetMemoryInfo(mh).total)
            found.append(
                MigDevice(
                    index=j, uuid=self._uuid(mh), profile=self._mig_profile(mh, memory), memory_bytes=memory
                )
            )
        return True, tuple(found)

    def _mig_profile(self, mh: object, memory: int) -> str:
        # The device name ends with the profile ("NVIDIA A100-SXM4-40GB MIG 1g.5gb"); older
        # drivers omit it, then it is rebuilt from the slice count and memory as GFD does.
        m = _MIG_PROFILE_RE.search(self._call(lambda: _text(self.nvml.nvmlDeviceGetName(mh)), ""))
        if m:
            return m.group(1).lower()
        slices = self._call(lambda: int(self.nvml.nvmlDeviceGetAttributes(mh).gpuInstanceSliceCount), 0)
        return f"{slices}g.{math.ceil(memory / 1024**3)}gb"

    def _nvlink(self, bus_ids: list[str]) -> tuple[list[set[int]], list[bool]]:
        nv = self.nvml
        index_of = {b: i for i, b in enumerate(bus_ids) if b}
        peers: list[set[int]] = [set() for _ in self._handles]
        switched = [False] * len(self._handles)
        for i, h in enumerate(self._handles):
            if h is None:
                continue
            for link in range(nv.NVML_NVLINK_MAX_LINKS):
                try:
                    if nv.nvmlDeviceGetNvLinkState(h, link) != nv.NVML_FEATURE_ENABLED:
                        continue
                    remote = _bus_id(nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId)
                except (nv.NVMLError_NotSupported, nv.NVMLError_InvalidArgument):
                    break  # no NVLink, or no more links on this device
                except nv.NVMLError:
                    continue
                if remote in index_of:
                    if index_of[remote] != i:
                        peers[i].add(index_of[remote])
                elif self._is_switch(h, link):
                    switched[i] = True
        return peers, switched

    def _is_switch(self, h: object, link: int) -> bool:
        nv = self.nvml
        try:
            return nv.nvmlDeviceGetNvLinkRemoteDeviceType(h, link) == nv.NVML_NVLINK_DEVICE_TYPE_SWITCH
        except nv.NVMLError:
            return True  # an unknown far end that is not one of our GPUs: an NVSwitch on every real system


def _domains(peers: list[set[int]]) -> list[str]:
    """Connected components of the NVLink graph, named by their lowest index."""
    out = [PCIE_DOMAIN] * len(peers)
    seen: set[int] = set()
    for start in range(len(peers)):
        if start in seen or not peers[start]:
            continue
        stack, component = [start], []
        seen.add(start)
        while stack:
            i = stack.pop()
            component.append(i)
            for j in peers[i]:
                if j not in seen:
                    seen.add(j)
                    stack.append(j)
        for i in component:
            out[i] = f"nvlink-{min(component)}"
    return out


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _bus_id(value: str | bytes) -> str:
    """A PCI bus id in one form whatever NVML returned (``00000000:07:00.0`` or ``0000:07:00.0``)."""
    text = _text(value).strip().lower()
    parts = text.split(":")
    if len(parts) == 3:
        try:
            return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
        except ValueError:
            return text
    return text
