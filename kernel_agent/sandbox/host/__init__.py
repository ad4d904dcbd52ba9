"""The trusted side of the sandbox: starting a worker in its walls, speaking to it, watching and stopping it.

Nothing here imports from `inside/` but through `sandbox.protocol`: the host only trusts what it wrote.
"""
