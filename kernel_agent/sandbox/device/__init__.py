"""The device-resident data path (`--gpu-data device`, DESIGN.md section 18): trusted device buffers shared with
the worker through CUDA IPC, outputs opened and compared on the device, and the rules that keep the time of
record trustworthy on a GPU (a quiet device after each reply, no foreign load, no throttling unseen).

Every module here imports without CUDA; only `cuda_ipc.CudaIpcTransport` and `probe.py` touch a device.
"""
