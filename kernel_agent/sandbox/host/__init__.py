"""The trusted side of the sandbox: starting a worker in its walls, speaking to it, watching and stopping it.

Nothing here imports from `inside/`: the two sides meet only in `sandbox.protocol`, `channel` and `tensors`
(and the device path's transport): the host never imports code written to run beside the candidate.
"""
