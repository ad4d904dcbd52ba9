"""An analytical latency model in the spirit of AMD's Origami (rocm-libraries shared/origami): per config, the
tile arithmetic of the shape (work per tile, tiles per wave, wave quantization, bytes per tile against the
cache that holds them) against the device's measured ceilings; the config with the lowest predicted time wins.

The problem names which tunable plays which part (`COST_MODEL` in problem.py): `matmul` (tile_m, tile_n,
tile_k, optional order, group_m, warps, stages) or `rows` (row_block, optional vector, threads, store).
Constants that are not ceilings (cycle costs, overheads) are rough and named below; nothing here is fitted.
"""

from __future__ import annotations

import math

from kernel_agent.core.tuning import Shape, parse_config
from kernel_agent.select.base import Selector
from kernel_agent.select.device import DeviceFacts

CPU_VECTOR = 8  # float32 lanes of one AVX2 register
CPU_GHZ = 3.0
LOOP_START = 8  # elements' worth of overhead per inner loop
TILE_OVERHEAD_S = 0.3e-6  # scheduling one tile or chunk
FORK_S = 4e-6  # entering a parallel region with more than one thread
REDUCE_LATENCY = 4  # cycles of one dependent add or max
EXP_CYCLES = 12  # one scalar expf
ROW_OVERHEAD_S = 20e-9
CACHE_SPEEDUP = {1: 8.0, 2: 4.0, 3: 2.0}  # bandwidth of a cache level over DRAM's, roughly


class Analytical(Selector):
    name = "analytical"

    def rank(self, shape: Shape) -> list[tuple[str, float]]:
        model = self.context.cost_model
        predict = {"matmul": self.matmul, "rows": self.rows}.get(model.get("kind", ""))
        if predict is None:
            raise ValueError(
                "the analytical selector needs COST_MODEL = {'kind': 'matmul' | 'rows', ...} in problem.py"
            )
        scored = [(key, predict(shape, parse_config(key))) for key in self.train.pool]
        return sorted(scored, key=lambda item: item[1])

    def _value(self, config: dict, role: str, default: float) -> float:
        name = self.context.cost_model.get(role)
        return float(config[name]) if name and name in config else default

    # ---- matmul -----------------------------------------------------------------------------------
    def matmul(self, shape: Shape, config: dict) -> float:
        m, n, k = shape
        tm, tn, tk = (
            min(self._value(config, r, d), s) for r, d, s in (("tile_m", m, m), ("tile_n", n, n), ("tile_k", k, k))
        )
        device = self.context.device
        tiles = math.ceil(m / tm) * math.ceil(n / tn)
        if device.kind == "cuda":
            return self._gpu_matmul(shape, config, tiles, tm, tn, tk)
        waves = math.ceil(tiles / device.units)
        busy = tiles / (waves * device.units)  # wave quantization: the last wave's idle cores
        simd = tn / (math.ceil(tn / CPU_VECTOR) * CPU_VECTOR) * tn / (tn + LOOP_START)
        compute = 2 * m * n * k / (device.gflops * 1e9 * busy * simd)
        size = self.context.dtype_bytes
        order = self._value(config, "order", 0)
        working = (tm * tk + tk * tn + tm * tn) * size if order == 0 else (tk + tk * tn + tn) * size
        bandwidth = device.memory_gbps * 1e9 * _cache_speedup(working, device)
        traffic = size * (m * k * math.ceil(n / tn) + k * n * math.ceil(m / tm) + 2 * m * n * math.ceil(k / tk))
        memory = traffic / (bandwidth * busy)
        return max(compute, memory) + tiles * TILE_OVERHEAD_S / device.units + FORK_S

    def _gpu_matmul(self, shape: Shape, config: dict, tiles: int, tm: float, tn: float, tk: float) -> float:
        m, n, k = shape
        device = self.context.device
        warps = self._value(config, "warps", 4)
        stages = self._value(config, "stages", 2)
        group = self._value(config, "group_m", 1)
        per_unit = max(1, int(16 // warps))  # resident blocks per SM, roughly
        waves = math.ceil(tiles / (device.units * per_unit))
        busy = tiles / (waves * device.units * per_unit)
        padded = math.ceil(m / tm) * tm * math.ceil(n / tn) * tn * math.ceil(k / tk) * tk
        compute = 2 * padded / (device.gflops * 1e9 * busy)
        size = self.context.dtype_bytes
        reuse = min(group, math.ceil(m / tm))  # a group of GROUP_M tile rows shares each B tile in L2
        traffic = size * (m * k * math.ceil(n / tn) / reuse + k * n * math.ceil(m / tm) / reuse + m * n)
        memory = traffic / (device.memory_gbps * 1e9)
        return max(compute, memory) + min(compute, memory) / stages

    # ---- row reductions ---------------------------------------------------------------------------
    def rows(self, shape: Shape, config: dict) -> float:
        rows, cols = shape
        device = self.context.device
        threads = min(self._value(config, "threads", device.units), device.units)
        block = self._value(config, "row_block", 1)
        vector = self._value(config, "vector", 1)
        store = self._value(config, "store", 1)
        chunks = math.ceil(rows / block)
        active = max(1, min(threads, chunks))
        busiest = math.ceil(chunks / active) * min(block, rows)  # rows of the busiest thread
        lanes = min(vector, CPU_VECTOR)
        reduce_cycles = cols * REDUCE_LATENCY / lanes * 2  # the max pass and the sum pass, latency-bound
        exp_cycles = cols * EXP_CYCLES / math.sqrt(lanes) * (1 if store else 2)
        size = self.context.dtype_bytes
        extra = cols * 2 * size * store  # store=1 reads and writes y once more
        bandwidth = device.memory_gbps * 1e9 * _cache_speedup(2 * cols * size, device) / device.units
        row_s = (reduce_cycles + exp_cycles) / (CPU_GHZ * 1e9) + extra / bandwidth + ROW_OVERHEAD_S
        floor = rows * cols * 2 * size / (device.memory_gbps * 1e9)
        return max(busiest * row_s, floor) + (FORK_S if threads > 1 else 0.0) + chunks * TILE_OVERHEAD_S / active


def _cache_speedup(working_bytes: float, device: DeviceFacts) -> float:
    for level, capacity in ((1, device.l1_bytes), (2, device.l2_bytes), (3, device.l3_bytes)):
        if capacity and working_bytes <= capacity:
            return CACHE_SPEEDUP[level]
    return 1.0
