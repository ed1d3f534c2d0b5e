"""The accelerators this host has, per platform, and how a job is given some of them.

Each platform's own tool says what is here: cuda `nvidia-smi --query-gpu`, rocm
`rocm-smi --json` (else `rocminfo`), npu `npu-smi info`, xpu `xpu-smi discovery`.
A tool that is missing, fails, times out or prints something else means no
devices of that platform, never an error. A device's index is the one its tool
prints, which the platform's visibility variable (`VISIBLE_ENV`) takes.

A caller's visibility variable narrows what a tier may use (`narrowed`): its
comma-separated indices, in the tool's numbering, pick the devices (empty: none).
Every job is told its devices through the same variables (`assigned`); a job that
holds none is shown none of any platform (`hidden`), so a CPU job never sees a GPU.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ci import door
from ci.errors import UserError
from ci.platforms import Platform

PROBE_TIMEOUT = 30.0  # nvidia-smi takes seconds on a GPU that sleeps without persistence mode
VISIBLE_ENV = {
    Platform.CUDA: "CUDA_VISIBLE_DEVICES",
    Platform.ROCM: "HIP_VISIBLE_DEVICES",
    Platform.NPU: "ASCEND_RT_VISIBLE_DEVICES",
    Platform.XPU: "ZE_AFFINITY_MASK",
}
# The value that shows a job none of a platform's devices: the empty list (NVIDIA
# documents it; PyTorch reads an empty HIP list alike), except Level Zero, which takes an
# empty ZE_AFFINITY_MASK for "every device" and skips an index that no device has.
NO_DEVICE = {Platform.XPU: "-1"}


@dataclass(frozen=True)
class Device:
    platform: Platform
    index: int
    name: str  # the product name as the tool prints it (`NVIDIA H200`, `AMD Instinct MI300X`)
    memory_mib: int | None = None
    target: str = ""  # rocm: the gfx target (`gfx942`)


@dataclass(frozen=True)
class Inventory:
    devices: tuple[Device, ...] = ()
    # The caller's visibility variable that narrowed a platform (`CUDA_VISIBLE_DEVICES=1`).
    narrowed_by: Mapping[Platform, str] = field(default_factory=dict)

    def of(self, platform: Platform) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.platform is platform)

    def summary(self, platform: Platform, *, memory: bool = False) -> str:
        """`1 x NVIDIA H200` (`, 143771 MiB` with memory); kinds in order of first appearance."""
        kinds: dict[tuple[str, int | None], int] = {}
        for device in self.of(platform):
            key = (device.name, device.memory_mib if memory else None)
            kinds[key] = kinds.get(key, 0) + 1
        return ", ".join(
            f"{count} x {name}" + (f", {mib} MiB" if mib is not None else "")
            for (name, mib), count in kinds.items()
        )


def _number(text: str) -> int | None:
    return int(text) if text.strip().isdigit() else None


def _nvidia(out: str) -> list[Device]:
    """`0, NVIDIA H200, 143771` per GPU (csv,noheader,nounits)."""
    found = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit() and parts[1]:
            found.append(Device(Platform.CUDA, int(parts[0]), parts[1], _number(parts[2])))
    return found


def _rocm_smi(out: str) -> list[Device]:
    """`{"card0": {"Card Series": …, "GFX Version": …, "VRAM Total Memory (B)": …}, …}`."""
    try:
        data = json.loads(out[out.find("{") :])
    except ValueError:
        return []
    found = []
    for key, fields in data.items() if isinstance(data, dict) else ():
        if not (match := re.fullmatch(r"card(\d+)", key)) or not isinstance(fields, dict):
            continue
        lower = {str(k).lower(): str(v).strip() for k, v in fields.items()}
        name = lower.get("card series") or lower.get("card model") or key
        vram = _number(lower.get("vram total memory (b)", ""))
        mib = None if vram is None else vram // 2**20
        found.append(Device(Platform.ROCM, int(match[1]), name, mib, lower.get("gfx version", "")))
    return found


def _rocminfo(out: str) -> list[Device]:
    """The `Device Type: GPU` agents, in order (HIP's numbering); their first `Name:` is the
    gfx target (deeper-indented names belong to ISAs and pools)."""
    found: list[Device] = []
    for block in re.split(r"^Agent \d+\s*$", out, flags=re.M)[1:]:
        fields: dict[str, str] = {}
        for key, value in re.findall(r"^  ([A-Za-z][A-Za-z ]*):[ \t]*(.*?)\s*$", block, re.M):
            fields.setdefault(key, value)
        if fields.get("Device Type") == "GPU":
            target = fields.get("Name", "")
            name = fields.get("Marketing Name") or target
            found.append(Device(Platform.ROCM, len(found), name, None, target))
    return found


def _npu(out: str) -> list[Device]:
    """The table's `| 0     910B3 | OK | …` rows; the next row's last `used / total` is HBM."""
    lines = out.splitlines()
    found = []
    for i, line in enumerate(lines):
        row = re.match(r"\|\s*(\d+)\s+(\S+)\s*\|\s*[A-Za-z]+\s*\|", line)
        if row:
            after = lines[i + 1] if i + 1 < len(lines) else ""
            totals = re.findall(r"\d+\s*/\s*(\d+)", after)
            mib = int(totals[-1]) if totals else None
            found.append(Device(Platform.NPU, int(row[1]), row[2], mib))
    return found


def _xpu(out: str) -> list[Device]:
    """The table's `| 0 | Device Name: Intel(R) Data Center GPU Max 1550 |` rows."""
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*Device Name:\s*(.*?)\s*\|\s*$", out, re.M)
    return [Device(Platform.XPU, int(index), name) for index, name in rows]


Parser = Callable[[str], list[Device]]
NVIDIA_SMI = ("nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits")
PROBES: dict[Platform, tuple[tuple[tuple[str, ...], Parser], ...]] = {
    Platform.CUDA: ((NVIDIA_SMI, _nvidia),),
    Platform.ROCM: (
        (("rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json"), _rocm_smi),
        (("rocminfo",), _rocminfo),  # when rocm-smi is absent or says nothing
    ),
    Platform.NPU: ((("npu-smi", "info"), _npu),),
    Platform.XPU: ((("xpu-smi", "discovery"), _xpu),),
}


def probe(
    environ: Mapping[str, str] | None = None, platforms: Iterable[Platform] = tuple(Platform)
) -> Inventory:
    """Ask each platform's tool, found on `environ`'s PATH (default: this process's)."""
    found: list[Device] = []
    for platform in platforms:
        for argv, parse in PROBES[platform]:
            result = door.capture(argv, env=environ, timeout=PROBE_TIMEOUT)
            if devices := parse(result.stdout) if result.ok else []:
                found.extend(devices)
                break
    return Inventory(tuple(found))


def assigned(
    platform: Platform, indices: Sequence[int], dev: Path = Path("/dev")
) -> tuple[dict[str, str], tuple[str, ...]]:
    """(the env of a native job, the docker run arguments of a container job) that give a
    job the devices `indices` and no other.

    cuda: `--gpus "device=0,1"` (quoted: docker splits the value at commas); the native
    env also sets CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi's numbering. npu: the
    `davinci<i>` nodes and the manager nodes. rocm and xpu: a render node's number is
    not the device's index, so the container gets all of /dev/dri (rocm: and /dev/kfd)
    and the visibility variable narrows it, inside as well.
    """
    listed = ",".join(str(i) for i in indices)
    env = {VISIBLE_ENV[platform]: listed}
    if platform is Platform.CUDA:
        return {**env, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, ("--gpus", f'"device={listed}"')
    if platform is Platform.NPU:
        managers = sorted(p for p in dev.glob("davinci*") if not p.name[7:].isdigit())
        nodes = [*(dev / f"davinci{i}" for i in indices), *managers]
        return env, tuple(word for node in nodes for word in ("--device", str(node)))
    rocm = platform is Platform.ROCM
    nodes = [*([dev / "kfd"] if rocm else []), dev / "dri"]
    args = (
        *(word for node in nodes for word in ("--device", str(node))),
        *(("--group-add", "video") if rocm else ()),
        *("-e", f"{VISIBLE_ENV[platform]}={listed}"),
    )
    return env, args


def hidden() -> dict[str, str]:
    """The env of a job that holds no device: every platform's variable lists none."""
    return {name: NO_DEVICE.get(platform, "") for platform, name in VISIBLE_ENV.items()}


def listed(name: str, value: str) -> frozenset[int]:
    """The device indices a visibility variable's value lists (`UserError` for another form).

    Comma-separated integers, as CUDA and HIP read them: a non-negative one lists that
    index, the first negative one ends the list (their rule for an invalid index, so
    `-1` lists none); empty lists none. The inventory has indices only (no UUIDs), so
    a UUID (`GPU-…`, `MIG-…`) or a sub-device (`0.1`) is refused, not guessed at.
    """
    found: set[int] = set()
    for entry in value.split(",") if value.strip() else ():
        text = entry.strip()
        if not re.fullmatch(r"-?[0-9]+", text):
            raise UserError(
                f"{name}: {text!r} is not a device index; tier narrows its devices by "
                "comma-separated indices only (as the platform's tool numbers them; "
                "empty: none; unset: all)"
            )
        if text.startswith("-"):
            break
        found.add(int(text))
    return frozenset(found)


def narrowed(
    inventory: Inventory, environ: Mapping[str, str], platforms: Iterable[Platform]
) -> Inventory:
    """Only the devices of `platforms` that the caller's visibility variable lists (all of
    them where it is unset). The tool lists every device whatever that variable says."""
    allowed: dict[Platform, frozenset[int]] = {}
    problems: list[str] = []
    for platform in platforms:
        name = VISIBLE_ENV[platform]
        if name in environ:
            try:
                allowed[platform] = listed(name, environ[name])
            except UserError as exc:
                problems.extend(exc.problems)
    UserError.collect(problems)
    kept = tuple(
        d for d in inventory.devices if d.platform not in allowed or d.index in allowed[d.platform]
    )
    said = {p: f"{VISIBLE_ENV[p]}={environ[VISIBLE_ENV[p]]}" for p in allowed}
    return replace(inventory, devices=kept, narrowed_by={**inventory.narrowed_by, **said})
