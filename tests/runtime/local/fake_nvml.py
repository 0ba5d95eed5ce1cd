"""A fake NVML: installs functions on the real ``pynvml`` module (its errors and constants stay real).

Each fake device answers the queries :mod:`muster.runtime.local.gpus` makes, the way NVML
does: NotSupported where a device lacks a feature, InvalidArgument past its last NVLink,
NotFound for an empty MIG slot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pynvml
import pytest

SWITCH_BUS = "0000:ff:00.0"


@dataclass
class FakeMig:
    uuid: str
    name: str
    total: int
    slices: int = 1


@dataclass
class FakeDevice:
    name: str | bytes
    uuid: str | bytes
    bus: str
    total: int
    used: int = 0
    util: int = 0
    temp: int = 40
    power_mw: int | None = 300_000
    links: list[str | None] | None = None  # remote bus per link (None: inactive); None: no NVLink
    mig: list[FakeMig | None] | None = None  # MIG slots (None: empty); None: MIG not supported
    mig_enabled: bool = False
    lost: set[str] = field(default_factory=set)  # queries that fail with GPU is lost


def _err(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


class FakeNvml:
    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, devices: list[FakeDevice], init_error: int | None = None
    ):
        self.devices = devices
        self.init_error = init_error
        self.shutdowns = 0
        # XID events waiting to be read: (device or None for "every device", xid)
        self.events: list[tuple[FakeDevice | None, int]] = []
        self.registered: list[FakeDevice] = []
        self.freed = 0
        for name in dir(self):
            if name.startswith("nvml"):
                monkeypatch.setattr(pynvml, name, getattr(self, name))

    def _dev(self, h: object, query: str) -> FakeDevice:
        dev = h if isinstance(h, FakeDevice) else h.parent  # type: ignore[attr-defined]
        if query in dev.lost:
            raise _err(pynvml.NVML_ERROR_GPU_IS_LOST)
        return dev

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise _err(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> object:
        dev = self.devices[i]
        if "handle" in dev.lost:
            raise _err(pynvml.NVML_ERROR_GPU_IS_LOST)
        return dev

    def nvmlDeviceGetUUID(self, h: object) -> str | bytes:
        if h is None:
            raise _err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if isinstance(h, SimpleNamespace):
            return h.mig.uuid
        return self._dev(h, "uuid").uuid

    def nvmlDeviceGetName(self, h: object) -> str | bytes:
        if isinstance(h, SimpleNamespace):
            return h.mig.name
        return self._dev(h, "name").name

    def nvmlDeviceGetMemoryInfo(self, h: object) -> SimpleNamespace:
        if isinstance(h, SimpleNamespace):
            return SimpleNamespace(total=h.mig.total, used=0, free=h.mig.total)
        dev = self._dev(h, "memory")
        return SimpleNamespace(total=dev.total, used=dev.used, free=dev.total - dev.used)

    def nvmlDeviceGetPciInfo(self, h: object) -> SimpleNamespace:
        return SimpleNamespace(busId=self._dev(h, "pci").bus.encode())

    def nvmlDeviceGetNvLinkState(self, h: object, link: int) -> int:
        dev = self._dev(h, "nvlink")
        if dev.links is None:
            raise _err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if link >= len(dev.links):
            raise _err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return pynvml.NVML_FEATURE_ENABLED if dev.links[link] is not None else pynvml.NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: object, link: int) -> SimpleNamespace:
        dev = self._dev(h, "nvlink")
        assert dev.links is not None and dev.links[link] is not None
        return SimpleNamespace(busId=dev.links[link].encode())  # type: ignore[union-attr]

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: object, link: int) -> int:
        dev = self._dev(h, "nvlink")
        assert dev.links is not None
        if dev.links[link] == SWITCH_BUS:
            return pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH
        return pynvml.NVML_NVLINK_DEVICE_TYPE_GPU

    def nvmlDeviceGetMigMode(self, h: object) -> list[int]:
        dev = self._dev(h, "mig")
        if dev.mig is None:
            raise _err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if dev.mig_enabled else pynvml.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, h: object) -> int:
        dev = self._dev(h, "mig")
        return len(dev.mig or [])

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: object, j: int) -> SimpleNamespace:
        dev = self._dev(h, "mig")
        assert dev.mig is not None
        if dev.mig[j] is None:
            raise _err(pynvml.NVML_ERROR_NOT_FOUND)
        return SimpleNamespace(parent=dev, mig=dev.mig[j])

    def nvmlDeviceGetAttributes(self, h: SimpleNamespace) -> SimpleNamespace:
        return SimpleNamespace(gpuInstanceSliceCount=h.mig.slices, memorySizeMB=h.mig.total // 2**20)

    def nvmlDeviceGetUtilizationRates(self, h: object) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._dev(h, "util").util, memory=0)

    def nvmlDeviceGetTemperature(self, h: object, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._dev(h, "temp").temp

    def nvmlDeviceGetPowerUsage(self, h: object) -> int:
        dev = self._dev(h, "power")
        if dev.power_mw is None:
            raise _err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return dev.power_mw

    # -- events: XID errors as NVML queues them ---------------------------------------------

    def xid(self, index: int | None, xid: int) -> None:
        """The driver reports ``xid`` on device ``index`` (None: an event without a device)."""
        self.events.append((None if index is None else self.devices[index], xid))

    def nvmlEventSetCreate(self) -> object:
        return object()

    def nvmlDeviceGetSupportedEventTypes(self, h: object) -> int:
        return pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypeSingleBitEccError

    def nvmlDeviceRegisterEvents(self, h: object, types: int, event_set: object) -> None:
        assert types == pynvml.nvmlEventTypeXidCriticalError
        self.registered.append(self._dev(h, "events"))

    def nvmlEventSetWait_v2(self, event_set: object, timeout_ms: int) -> SimpleNamespace:
        assert timeout_ms == 0, "health checks must never block the control plane"
        if not self.events:
            raise _err(pynvml.NVML_ERROR_TIMEOUT)
        device, xid = self.events.pop(0)
        return SimpleNamespace(
            device=device, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=xid, gpuInstanceId=0
        )

    def nvmlEventSetFree(self, event_set: object) -> None:
        self.freed += 1
