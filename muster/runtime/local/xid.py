"""XID errors: which ones mean the GPU is broken, and what they say.

The NVIDIA driver reports hardware and driver faults as XID events (NVML's
``nvmlEventTypeXidCriticalError``). Some are application errors that leave the device
usable (a bad kernel, a page fault in a program: the program fails, the GPU is fine); the
NVIDIA device plugin ignores those five when judging health, and so does Muster. Every
other XID marks the GPU unhealthy until it is cleared (on real hardware, by a reset or a
reboot; the driver's list is at docs.nvidia.com/deploy/xid-errors).
"""

from __future__ import annotations

__all__ = ["APPLICATION_XIDS", "GPU_LOST_REASON", "describe_xid", "xid_fault"]

# Application errors: the program fails, the GPU stays healthy.
APPLICATION_XIDS: dict[int, str] = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup, due to previous errors",
    68: "video processor exception",
}
# Frequent XIDs that make a GPU unhealthy, worded for operators.
_KNOWN: dict[int, str] = {
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}
GPU_LOST_REASON = "GPU is lost (NVML_ERROR_GPU_IS_LOST): it fell off the bus or stopped answering"


def describe_xid(xid: int) -> str:
    """``XID 79 (GPU has fallen off the bus)``."""
    text = APPLICATION_XIDS.get(xid) or _KNOWN.get(xid)
    return f"XID {xid} ({text})" if text else f"XID {xid}"


def xid_fault(xid: int) -> str | None:
    """The health reason a critical XID gives its GPU; None for an application error."""
    if xid in APPLICATION_XIDS:
        return None
    return f"{describe_xid(xid)}: a critical error; the GPU needs a reset or a reboot of the node"
