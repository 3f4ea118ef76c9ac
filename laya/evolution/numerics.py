"""The numeric profile both arms must share, and the thread pinning that makes it hold.

Bitwise equality between processes only holds when every process runs the same
kernels with the same thread counts, so the pinning happens before any torch work
and the profile that results is bound into every feature packet.
"""

from __future__ import annotations

import torch


def pin_threads() -> None:
    """One intra-op and one inter-op thread; call first thing in every process."""
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)


def numeric_profile() -> dict:
    """What decides the bits of a forward pass here, read from the live process."""
    return {
        "dtype": "float32",
        "device": "cpu",
        "intra_op_threads": torch.get_num_threads(),
        "inter_op_threads": torch.get_num_interop_threads(),
        "torch": torch.__version__,
        "attention": "math",
    }
