"""Candidate regions of one capture, each an *instance*: a set of ops with a key that names the same place in
every shape label's capture.

Four kinds, as Inductor and the hand-made layer lists see a model:
- module: every op that ran inside one module instance (setup and host syncs left out);
- chain: a connected span of fusible ops between anchors, with at least two ops that are not views (Inductor's
  `build_fusion_regions` rule: contiguous in execution order, so a chain never reaches across an anchor);
- epilogue: an anchor and the fusible ops after it that read only its output, parameters and setup values;
- horizontal: anchors of one kind and output shape that read the same input (Q/K/V, gate/up) or feed the same
  consumer (per-table embedding bags into one `stack`): one batched problem;
- op: one anchor alone (and, at `--granularity op`, every fusible op alone).
"""

from __future__ import annotations

from dataclasses import dataclass

from kernel_agent.regions.graph import name
from kernel_agent.regions.records import Capture, Op


@dataclass(frozen=True)
class Instance:
    """One candidate in one capture: its kind, a key stable across labels, its ops in order, and the module it
    sits in (the deepest module holding all its ops) with that module's class."""

    kind: str
    key: str
    ops: tuple[int, ...]
    path: str
    cls: str


def _common(ops: list[Op]) -> tuple[str, str]:
    paths = [list(zip(op.modules, op.classes)) for op in ops]
    common = paths[0]
    for p in paths[1:]:
        n = 0
        while n < min(len(common), len(p)) and common[n][0] == p[n][0]:
            n += 1
        common = common[:n]
    return common[-1] if common else ("", "")


def called_modules(cap: Capture) -> dict[str, str]:
    found: dict[str, str] = {}
    for op in cap.ops:
        for path, cls in zip(op.modules, op.classes):
            found.setdefault(path, cls)
    return found


def module_depths(cap: Capture) -> dict[str, int]:
    """path -> how many levels of called modules lie below it (0: a leaf)."""
    paths = set(called_modules(cap))
    depth: dict[str, int] = {}
    for path in sorted(paths, key=lambda p: -p.count(".") if p else 1):
        below = [q for q in paths if q != path and (not path or q.startswith(path + "."))]
        depth[path] = 0 if not below else 1 + max(depth.get(q, 0) for q in below)
    return depth


def find_instances(cap: Capture, cats: dict[int, str], granularity: str) -> list[Instance]:
    ops = cap.ops
    readers = cap.consumers()
    producer = {v.id: v.producer for v in cap.values.values()}
    regionable = {i for i, c in cats.items() if c in ("anchor", "view", "fusible", "mutating")}
    found: list[Instance] = []
    ordinal: dict[str, int] = {}

    def add(kind: str, members: set[int], key_base: str) -> None:
        members = _with_param_views(members, ops, cats, producer)
        chosen = sorted(members)
        path, cls = _common([ops[i] for i in chosen if cats[i] != "param-view"] or [ops[i] for i in chosen])
        base = f"{kind}:{key_base or path}"
        ordinal[base] = ordinal.get(base, -1) + 1
        found.append(Instance(kind, f"{base}#{ordinal[base]}", tuple(chosen), path, cls))

    if granularity in ("auto", "module"):
        for path in called_modules(cap):
            if not path:
                continue
            members = {op.index for op in ops if path in op.modules and op.index in regionable}
            if any(cats[i] in ("anchor", "fusible") for i in members):
                add("module", members, path)
    if granularity in ("auto", "chain"):
        for members in _chains(ops, cats, readers):
            add("chain", members, "")
        for anchor in (op for op in ops if cats[op.index] == "anchor"):
            members = _epilogue(anchor, ops, cats)
            if len(members) > 1:
                add("epilogue", members, "")
    if granularity in ("auto", "chain", "module"):
        for members in _horizontal(ops, cats, cap):
            add("horizontal", members, "")
    for op in ops:
        if cats[op.index] == "anchor" or (granularity == "op" and cats[op.index] == "fusible"):
            add("op", {op.index}, "")
    return found


def _with_param_views(members: set[int], ops: list[Op], cats: dict[int, str], producer: dict) -> set[int]:
    """The views of parameters a member reads (`t(weight)` in a trace) belong to the region, not to setup."""
    todo, result = list(members), set(members)
    while todo:
        for v in ops[todo.pop()].reads():
            p = producer.get(v)
            if p is not None and cats[p] == "param-view" and p not in result:
                result.add(p)
                todo.append(p)
    return result


def _chains(ops: list[Op], cats: dict[int, str], readers: dict[int, list[int]]) -> list[set[int]]:
    spans: list[list[int]] = [[]]
    for op in ops:
        c = cats[op.index]
        if c in ("anchor", "sync"):
            spans.append([])
        elif c in ("view", "fusible", "mutating"):
            spans[-1].append(op.index)
    found = []
    for span in spans:
        members = set(span)
        parent = {i: i for i in span}

        for i in span:
            for out in ops[i].outputs:
                for j in readers.get(out, []) if out is not None else []:
                    if j in members:
                        parent[_root(parent, j)] = _root(parent, i)
        groups: dict[int, set[int]] = {}
        for i in span:
            groups.setdefault(_root(parent, i), set()).add(i)
        for group in groups.values():
            group = _without_foreign_views(group, ops, cats, readers)
            if sum(cats[i] != "view" for i in group) >= 2:
                found.append(group)
    return sorted(found, key=min)


def _without_foreign_views(group: set[int], ops: list[Op], cats: dict[int, str], readers: dict) -> set[int]:
    """Leave out the views at a chain's ends made inside another module (in a trace, the `_unsafe_view` closing
    a Linear's `mm`, or the `view` opening the next one): they belong to that module, and keeping them would
    make the chain overlap it."""
    kept = set(group)
    changed = True
    while changed:
        changed = False
        made = {o: i for i in kept for o in ops[i].outputs if o is not None}
        for i in sorted(kept):
            op = ops[i]
            if cats[i] != "view":
                continue
            producers = [made[v] for v in op.reads() if v in made]
            users = [j for o in op.outputs if o is not None for j in readers.get(o, []) if j in kept]
            here = op.modules[-1]
            leading = not producers and users and all(ops[j].modules[-1] != here for j in users)
            trailing = not users and producers and all(ops[j].modules[-1] != here for j in producers)
            if leading or trailing:
                kept.discard(i)
                changed = True
    return kept


def _root(parent: dict[int, int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def _epilogue(anchor: Op, ops: list[Op], cats: dict[int, str]) -> set[int]:
    members = {anchor.index}
    made = {o for o in anchor.outputs if o is not None}
    for op in ops[anchor.index + 1 :]:
        c = cats[op.index]
        if c == "anchor" or c == "sync":
            break
        if c not in ("view", "fusible"):
            continue
        reads = op.reads()
        if any(v in made for v in reads) and all(v in made or not _from_op(v, ops, cats) for v in reads):
            members.add(op.index)
            made.update(o for o in op.outputs if o is not None)
    return members if any(cats[i] == "fusible" for i in members) else {anchor.index}


def _from_op(v: int, ops: list[Op], cats: dict[int, str]) -> bool:
    """Whether a value comes from model work (not a parameter, its view, or setup)."""
    for op in ops:
        if v in op.outputs:
            return cats[op.index] not in ("setup", "param-view")
    return False


def _horizontal(ops: list[Op], cats: dict[int, str], cap: Capture) -> list[set[int]]:
    """Anchors of one op and output shape sharing their first tensor input, or feeding one consumer."""
    readers = cap.consumers()
    anchors = [op for op in ops if cats[op.index] == "anchor"]
    groups: dict[tuple, list[Op]] = {}
    for op in anchors:
        first = cap.values[op.outputs[0]].shape if op.outputs and op.outputs[0] is not None else ()
        kind = (name(op), first)
        data = _data_input(op, cap)
        if data is not None:
            groups.setdefault(("input", kind, data), []).append(op)
        consumer, _ = _consumer(op, ops, cats, readers)
        if consumer is not None:
            groups.setdefault(("consumer", kind, consumer), []).append(op)
    found: list[set[int]] = []
    for (how, _kind, where), members in groups.items():
        if len(members) < 2:
            continue
        chosen = {m.index for m in members}
        if how == "consumer":
            for m in members:
                chosen |= _consumer(m, ops, cats, readers)[1]
            if name(ops[where]) in ("cat", "stack") and all(
                _from_op(v, ops, cats) is False or _producer_in(v, ops, chosen) for v in ops[where].reads()
            ):
                chosen.add(where)
        found.append(chosen)
    unique = {tuple(sorted(s)): s for s in found}
    return [unique[k] for k in sorted(unique)]


def _producer_in(v: int, ops: list[Op], chosen: set[int]) -> bool:
    return any(v in ops[i].outputs for i in chosen)


def _data_input(op: Op, cap: Capture) -> int | None:
    """The first read that is not a parameter: the activation the anchor works on."""
    for v in op.reads():
        if cap.values[v].source not in ("param", "buffer"):
            return v
    return None


def _consumer(op: Op, ops: list[Op], cats: dict[int, str], readers: dict[int, list[int]]) -> tuple[int | None, set]:
    """The first op past views that reads the anchor's first output, and the views on the way."""
    path: set[int] = set()
    value = op.outputs[0] if op.outputs else None
    while value is not None:
        users = readers.get(value, [])
        if len(users) != 1:
            return None, set()
        user = users[0]
        if cats[user] == "view" and len(ops[user].outputs) == 1:
            path.add(user)
            value = ops[user].outputs[0]
            continue
        return user, path
    return None, set()


def trimmed(inst: Instance, taken: set[int], cap: Capture, cats: dict[int, str]) -> list[Instance]:
    """What is left of a candidate once the ops of already-selected regions are taken out: its free ops, split
    into connected parts, each part that still does work (an anchor or a fusible op) as an instance of its own.

    Why: a region partly overlapped by a selected one would otherwise be dropped whole, and its free ops (a
    model's `unsqueeze + cat` between two selected MLPs) would be in no region and no coverage."""
    free = {i for i in inst.ops if i not in taken and cats[i] != "param-view"}
    if not free or len(free) == len([i for i in inst.ops if cats[i] != "param-view"]):
        return []
    parent = {i: i for i in free}
    readers = cap.consumers()
    for i in sorted(free):
        for out in cap.ops[i].outputs:
            for j in readers.get(out, []) if out is not None else []:
                if j in free:
                    parent[_root(parent, j)] = _root(parent, i)
    parts: dict[int, set[int]] = {}
    for i in sorted(free):
        parts.setdefault(_root(parent, i), set()).add(i)
    producer = {v.id: v.producer for v in cap.values.values()}
    found = []
    for k, part in enumerate(sorted(parts.values(), key=min)):
        if not any(cats[i] in ("anchor", "fusible", "mutating") for i in part):
            continue
        members = sorted(_with_param_views(part, cap.ops, cats, producer))
        path, cls = _common([cap.ops[i] for i in sorted(part)])
        found.append(Instance("trimmed", f"{inst.key}/free{k}", tuple(members), path, cls))
    return found
