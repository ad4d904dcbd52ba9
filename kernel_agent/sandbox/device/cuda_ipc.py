"""The real transport: CUDA IPC through the driver API (cuIpcGetMemHandle / cuIpcOpenMemHandle), with the opened
memory wrapped as a torch tensor through `__cuda_array_interface__`. Not torch's own CUDA tensor sharing: that
keeps a reference counter in a /dev/shm file the receiver must open, and each sandbox has its own /dev/shm.
Never run here: this machine has no GPU (DESIGN.md section 18 says what `scripts/gpu-check` proves with it)."""

from __future__ import annotations

import ctypes
from typing import Any

from kernel_agent.sandbox.device.transport import ITEM_BYTES, Handle, HandleError, TensorSpec

TYPESTR = {"float64": "<f8", "float32": "<f4", "float16": "<f2", "int64": "<i8", "int32": "<i4", "int16": "<i2"}
TYPESTR |= {"int8": "|i1", "uint8": "|u1", "bool": "|b1", "bfloat16": "<i2"}  # bfloat16: int16, then a view
IPC_LAZY_PEER = 1  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


class _DeviceArray:
    """Just enough of `__cuda_array_interface__` (v3) for torch.as_tensor to wrap device memory without a copy."""

    def __init__(self, pointer: int, handle: Handle) -> None:
        item = ITEM_BYTES[handle.dtype]
        self.__cuda_array_interface__ = {
            "shape": handle.shape,
            "strides": tuple(s * item for s in handle.strides),
            "typestr": TYPESTR[handle.dtype],
            "data": (pointer, False),
            "version": 3,
        }


class CudaIpcTransport:
    def __init__(self, device: int = 0) -> None:
        import torch

        self.torch = torch
        self.device = device
        torch.empty(1, device=f"cuda:{device}")  # the primary context, current on this thread for the driver API
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.opened: dict[str, tuple[int, int]] = {}  # handle -> (mapped base, allocation size)

    def allocate(self, spec: TensorSpec) -> Any:
        return self.torch.empty(spec.shape, dtype=getattr(self.torch, spec.dtype), device=f"cuda:{self.device}")

    def export(self, tensor: Any) -> Handle:
        storage = tensor.untyped_storage()
        base, _size = self._range(storage.data_ptr())
        handle = IpcHandle()
        self._check(self.cuda.cuIpcGetMemHandle(ctypes.byref(handle), ctypes.c_uint64(base)), "cuIpcGetMemHandle")
        dtype = str(tensor.dtype).removeprefix("torch.")
        shape, strides = tuple(tensor.shape), tuple(tensor.stride())
        return Handle(
            bytes(handle.reserved).hex(), storage.data_ptr() - base, storage.nbytes(), dtype, shape, strides,
            tensor.storage_offset(),
        )  # fmt: skip

    def open(self, handle: Handle) -> Any:
        if handle.ipc not in self.opened:
            raw = IpcHandle()
            try:
                raw.reserved = bytes.fromhex(handle.ipc)
            except ValueError:
                raise HandleError("a device handle's ipc field is not 64 bytes of hex") from None
            base = ctypes.c_uint64()
            status = self.cuda.cuIpcOpenMemHandle_v2(ctypes.byref(base), raw, ctypes.c_uint(IPC_LAZY_PEER))
            self._check(status, "cuIpcOpenMemHandle")
            self.opened[handle.ipc] = (base.value, self._range(base.value)[1])
        base, size = self.opened[handle.ipc]
        if handle.storage_offset_bytes + handle.storage_bytes > size:
            raise HandleError("a device handle claims more bytes than its allocation maps")
        pointer = base + handle.storage_offset_bytes + handle.offset * ITEM_BYTES[handle.dtype]
        tensor = self.torch.as_tensor(_DeviceArray(pointer, handle), device=f"cuda:{self.device}")
        return tensor.view(self.torch.bfloat16) if handle.dtype == "bfloat16" else tensor

    def mapped_bytes(self, tensor: Any) -> int | None:
        """Bytes from the tensor's first element to the end of its allocation, from the driver."""
        base, size = self._range(tensor.data_ptr())
        return base + size - tensor.data_ptr()

    def synchronize(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def close(self) -> None:
        """Unmap every opened handle: a dead worker's memory is freed only once no importer maps it."""
        for base, _size in self.opened.values():
            self.cuda.cuIpcCloseMemHandle(ctypes.c_uint64(base))
        self.opened.clear()

    def _range(self, pointer: int) -> tuple[int, int]:
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        status = self.cuda.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(pointer))
        self._check(status, "cuMemGetAddressRange")
        return base.value, size.value

    @staticmethod
    def _check(status: int, call: str) -> None:
        if status != 0:
            raise HandleError(f"{call} failed (CUresult {status})")
