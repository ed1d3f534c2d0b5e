"""The device inventory (`ci.devices`) through `doctor`, with stand-ins for the vendors' tools.

Each stand-in checks its exact argv and prints what the real tool prints, in the
format its documentation shows: `nvidia-smi --query-gpu … --format=csv,noheader,nounits`,
`rocm-smi --json` (ROCm 6 key names), `rocminfo`'s agent list, `npu-smi info`'s and
`xpu-smi discovery`'s tables.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ci.devices import VISIBLE_ENV, Device, Inventory, assigned, hidden, narrowed
from ci.errors import UserError
from ci.platforms import Platform
from tests.conftest import StandIns, run_cli

NVIDIA_ARGV = "--query-gpu=index,name,memory.total --format=csv,noheader,nounits"
NVIDIA = """\
0, NVIDIA H200, 143771
1, NVIDIA H100 80GB HBM3, 81559
"""
ROCM_SMI_ARGV = "--showproductname --showmeminfo vram --json"
ROCM_SMI = json.dumps(
    {
        f"card{i}": {
            "Card Series": "AMD Instinct MI300X",
            "Card Model": "0x74a1",
            "Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]",
            "Card SKU": "M3000100",
            "Subsystem ID": "0x74a1",
            "Device Rev": "0x00",
            "Node ID": str(i + 2),
            "GUID": "28851",
            "GFX Version": "gfx942",
            "VRAM Total Memory (B)": "205822885888",
            "VRAM Total Used Memory (B)": "297488384",
        }
        for i in range(2)
    }
)
ROCMINFO = """\
ROCk module is loaded
=====================
HSA System Attributes
=====================
Runtime Version:         1.14
==========
HSA Agents
==========
*******
Agent 1
*******
  Name:                    AMD EPYC 9654 96-Core Processor
  Uuid:                    CPU-XX
  Marketing Name:          AMD EPYC 9654 96-Core Processor
  Vendor Name:             CPU
  Device Type:             CPU
*******
Agent 2
*******
  Name:                    gfx942
  Uuid:                    GPU-4e2a1c5d3b7f9a01
  Marketing Name:          AMD Instinct MI300X
  Vendor Name:             AMD
  Feature:                 KERNEL_DISPATCH
  Device Type:             GPU
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-
*** Done ***
"""
NPU_SMI = """\
+------------------------------------------------------------------------------------------------+
| npu-smi 24.1.rc2                 Version: 24.1.rc2                                             |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 93.4        40                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3161 / 65536         |
+===========================+===============+====================================================+
| 1     910B3               | OK            | 92.0        39                0    / 0             |
| 0                         | 0000:C2:00.0  | 0           0    / 0          59351/ 65536         |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| No running processes found in NPU 0                                                            |
+===========================+===============+====================================================+
"""
XPU_SMI = """\
+-----------+--------------------------------------------------------------------------------------+
| Device ID | Device Information                                                                   |
+-----------+--------------------------------------------------------------------------------------+
| 0         | Device Name: Intel(R) Data Center GPU Max 1550                                       |
|           | Vendor Name: Intel(R) Corporation                                                    |
|           | SOC UUID: 00000000-0000-0029-0000-002f0bd58086                                       |
|           | PCI BDF Address: 0000:29:00.0                                                        |
|           | DRM Device: /dev/dri/card1                                                           |
|           | Function Type: physical                                                              |
+-----------+--------------------------------------------------------------------------------------+
"""


def tool(standins: StandIns, name: str, argv: str, out: str) -> None:
    """A stand-in that prints `out` for exactly `argv`, and fails on anything else."""
    standins.add(
        name,
        f'[[ "$*" == "{argv}" ]] || {{ echo "unexpected argv: $*" >&2; exit 2; }}\n'
        f"cat <<'OUT'\n{out}OUT",
    )


def doctor_devices(standins: StandIns) -> tuple[list[dict[str, Any]], str]:
    """`doctor --json`'s devices, and the text form's device lines."""
    as_json = run_cli("doctor", "--json", env=standins.env())
    assert as_json.returncode in (0, 1), as_json.stderr  # 1: a missing engine or registry
    text = run_cli("doctor", env=standins.env()).stdout
    return json.loads(as_json.stdout)["devices"], "".join(
        line + "\n" for line in text.splitlines() if line.startswith("devices:")
    )


def test_doctor_reports_every_platform_the_tools_report(standins: StandIns) -> None:
    tool(standins, "nvidia-smi", NVIDIA_ARGV, NVIDIA)
    tool(standins, "rocm-smi", ROCM_SMI_ARGV, ROCM_SMI + "\n")
    tool(standins, "npu-smi", "info", NPU_SMI)
    tool(standins, "xpu-smi", "discovery", XPU_SMI)
    devices, lines = doctor_devices(standins)
    assert devices == [
        *(
            {
                "platform": "rocm",
                "index": i,
                "name": "AMD Instinct MI300X",
                "memory_mib": 196288,
                "target": "gfx942",
            }
            for i in range(2)
        ),
        {"platform": "cuda", "index": 0, "name": "NVIDIA H200", "memory_mib": 143771, "target": ""},
        {
            "platform": "cuda",
            "index": 1,
            "name": "NVIDIA H100 80GB HBM3",
            "memory_mib": 81559,
            "target": "",
        },
        *(
            {"platform": "npu", "index": i, "name": "910B3", "memory_mib": 65536, "target": ""}
            for i in range(2)
        ),
        {
            "platform": "xpu",
            "index": 0,
            "name": "Intel(R) Data Center GPU Max 1550",
            "memory_mib": None,
            "target": "",
        },
    ]
    assert lines == (
        "devices: rocm: 2 x AMD Instinct MI300X, 196288 MiB\n"
        "devices: cuda: 1 x NVIDIA H200, 143771 MiB, 1 x NVIDIA H100 80GB HBM3, 81559 MiB\n"
        "devices: npu: 2 x 910B3, 65536 MiB\n"
        "devices: xpu: 1 x Intel(R) Data Center GPU Max 1550\n"
    )
    assert standins.argvs("nvidia-smi")[0] == NVIDIA_ARGV.split()
    assert standins.argvs("rocminfo") == []  # rocm-smi answered


def test_rocminfo_is_asked_when_rocm_smi_fails(standins: StandIns) -> None:
    standins.add("rocm-smi", 'echo "ERROR:root:Driver not initialized (amdgpu not found)"; exit 2')
    tool(standins, "rocminfo", "", ROCMINFO)
    devices, lines = doctor_devices(standins)
    assert devices == [
        {
            "platform": "rocm",
            "index": 0,
            "name": "AMD Instinct MI300X",
            "memory_mib": None,
            "target": "gfx942",
        }
    ]
    assert lines == "devices: rocm: 1 x AMD Instinct MI300X\n"


def test_a_failing_or_garbled_tool_is_no_devices_not_an_error(standins: StandIns) -> None:
    standins.add(
        "nvidia-smi",
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\n'
        "exit 9",
    )
    standins.add("xpu-smi", "echo 'Level Zero init failed'")  # exit 0, no table
    standins.add("npu-smi", "echo '0, not a table, 1'")
    devices, lines = doctor_devices(standins)
    assert devices == []
    assert lines == "devices: none found (nvidia-smi, rocm-smi, npu-smi, xpu-smi)\n"
    assert len(standins.argvs("nvidia-smi")) == 2  # asked, and its failure was no error


def test_assigned_gives_a_job_exactly_its_devices(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("davinci0", "davinci1", "davinci2", "davinci_manager"):
        (dev / name).touch()
    assert assigned(Platform.CUDA, (0, 1), dev) == (
        {"CUDA_VISIBLE_DEVICES": "0,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
        ("--gpus", '"device=0,1"'),
    )
    assert assigned(Platform.ROCM, (2, 3), dev) == (
        {"HIP_VISIBLE_DEVICES": "2,3"},
        (
            *("--device", str(dev / "kfd"), "--device", str(dev / "dri")),
            *("--group-add", "video", "-e", "HIP_VISIBLE_DEVICES=2,3"),
        ),
    )
    assert assigned(Platform.NPU, (1, 2), dev) == (
        {"ASCEND_RT_VISIBLE_DEVICES": "1,2"},
        (
            *("--device", str(dev / "davinci1"), "--device", str(dev / "davinci2")),
            *("--device", str(dev / "davinci_manager")),
        ),
    )
    assert assigned(Platform.XPU, (0,), dev) == (
        {"ZE_AFFINITY_MASK": "0"},
        ("--device", str(dev / "dri"), "-e", "ZE_AFFINITY_MASK=0"),
    )
    assert set(VISIBLE_ENV) == set(Platform)


@pytest.mark.docker
def test_docker_reads_the_gpus_argument_as_both_devices(docker_cli: str) -> None:
    """Unquoted, `--gpus device=0,1` is split at the comma and asks for device 0 alone."""
    from tests.conftest import BASE_IMAGE, TEST_LABEL

    _env, args = assigned(Platform.CUDA, (0, 1))
    create = [docker_cli, "create", "--label", TEST_LABEL, *args, BASE_IMAGE, "true"]
    made = subprocess.run(create, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    container = made.stdout.strip().splitlines()[-1]
    try:
        inspect = [docker_cli, "inspect", "--format", "{{json .HostConfig.DeviceRequests}}"]
        shown = subprocess.run([*inspect, container], capture_output=True, text=True, check=True)
        (request,) = json.loads(shown.stdout)
        assert request["DeviceIDs"] == ["0", "1"] and request["Capabilities"] == [["gpu"]]
    finally:
        subprocess.run([docker_cli, "rm", "-f", container], capture_output=True)


def test_a_callers_visibility_variable_narrows_the_inventory() -> None:
    """Indices in the tool's numbering pick devices; empty or a leading negative: none; the
    first negative ends the list (CUDA's rule); other forms are refused, one line each."""
    cuda = tuple(Device(Platform.CUDA, i, "NVIDIA H100 80GB HBM3") for i in range(3))
    host = Inventory((*cuda, Device(Platform.ROCM, 0, "AMD Instinct MI300X")))

    def kept(value: str) -> list[int]:
        environ = {"CUDA_VISIBLE_DEVICES": value}
        return [d.index for d in narrowed(host, environ, [Platform.CUDA]).of(Platform.CUDA)]

    assert narrowed(host, {}, Platform) == host
    assert (kept("1"), kept(" 2 , 0"), kept("0,-1,2"), kept("7,1")) == ([1], [0, 2], [0], [1])
    assert kept("") == kept("-1") == kept(" ") == []
    only = narrowed(host, {"CUDA_VISIBLE_DEVICES": "1"}, [Platform.CUDA])
    assert only.of(Platform.ROCM) == host.of(Platform.ROCM)  # another platform's devices stay
    assert only.narrowed_by == {Platform.CUDA: "CUDA_VISIBLE_DEVICES=1"}
    # A platform not in the run: its variable is not read.
    assert narrowed(host, {"HIP_VISIBLE_DEVICES": "GPU-x"}, [Platform.CUDA]).devices == host.devices
    environ = {"CUDA_VISIBLE_DEVICES": "GPU-8932f937", "ZE_AFFINITY_MASK": "0.1"}
    with pytest.raises(UserError) as refused:
        narrowed(host, environ, Platform)
    assert refused.value.code == 2
    assert [p.split(" is not")[0] for p in refused.value.problems] == [
        "CUDA_VISIBLE_DEVICES: 'GPU-8932f937'",
        "ZE_AFFINITY_MASK: '0.1'",
    ]


def test_a_job_without_devices_is_shown_none_of_any_platform() -> None:
    """Every platform's variable, each once; Level Zero reads empty as every device."""
    assert hidden() == {
        "CUDA_VISIBLE_DEVICES": "",
        "HIP_VISIBLE_DEVICES": "",
        "ASCEND_RT_VISIBLE_DEVICES": "",
        "ZE_AFFINITY_MASK": "-1",
    }
