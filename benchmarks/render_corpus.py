"""Render cost of upload-pipeline over the corpus matrix, against a YAML floor.

Renders every case of the corpus matrix (each CUDA and NPU test YAML under
--scope all, a docs-only diff, one model's code diff, a tests/helpers/ diff, a
diff of the file itself, and MIRROR_HW=b200) afresh: new registries, file
loads, filtering, expansion and the YAML dump. In the same run it measures the
floor: loading the same YAML files (pipeline and both registries) with
`yaml.CSafeLoader` and dumping the pipeline with `yaml.CSafeDumper`. Schema
validation is timed on its own line. Goal: render at most 1.5x the floor.

    python benchmarks/render_corpus.py [--rounds 7]

Uses a temporary copy of ../shared/vllm-omni/.buildkite/ with the generated
pyproject.toml (tests/corpus.py); nothing is written into the repository.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ci import yamlio  # noqa: E402
from ci.pipeline.registries import PRESET_REGISTRY, SOURCE_REGISTRY, Registries  # noqa: E402
from ci.pipeline.render import Scope  # noqa: E402
from ci.pipeline.upload import render_file  # noqa: E402
from ci.schema import schema_problems  # noqa: E402
from tests.corpus import make_corpus, uploader_yamls  # noqa: E402

# One render: the test YAML, its scope, the changed files, MIRROR_HW.
Case = tuple[Path, Scope, list[str] | None, str | None]
CASES: dict[str, tuple[Scope, list[str] | None, str | None]] = {
    "all": ("all", None, None),
    "docs-only": ("diff", ["docs/index.md", "README.md"], None),
    "model-code": ("diff", ["vllm_omni/diffusion/models/qwen_image/transformer.py"], None),
    "tests-helpers": ("diff", ["tests/helpers/mark.py"], None),
    "pipeline-itself": ("diff", [], None),
    "mirror-b200": ("all", None, "b200"),
}


def matrix(repo: Path) -> list[Case]:
    cases = []
    for name in uploader_yamls():
        for case, (scope, changed, mirror_hw) in CASES.items():
            diff = [name] if case == "pipeline-itself" else changed
            cases.append((repo / name, scope, diff, mirror_hw))
    return cases


def render_round(repo: Path, cases: list[Case]) -> tuple[float, float, int]:
    rendered = []
    started = time.perf_counter()
    for path, scope, changed, mirror_hw in cases:
        out = render_file(
            repo,
            path,
            scope=scope,
            changed=tuple(changed) if changed is not None else None,
            mirror_hw=mirror_hw,
            registries=Registries.for_repo(repo),
        )
        assert not out.problems, out.problems
        rendered.append(out.pipeline)
        yamlio.dumps(out.pipeline)
    render = time.perf_counter() - started
    started = time.perf_counter()
    steps = 0
    for pipeline in rendered:
        assert schema_problems(pipeline) == []
        steps += len(pipeline["steps"])
    return render, time.perf_counter() - started, steps


def floor_round(repo: Path, cases: list[Case]) -> float:
    import yaml

    started = time.perf_counter()
    for path, _scope, _changed, _mirror_hw in cases:
        document = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
        for registry in (SOURCE_REGISTRY, PRESET_REGISTRY):
            yaml.load((repo / registry).read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
        yaml.dump(document, Dumper=yaml.CSafeDumper, sort_keys=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_corpus(Path(tmp) / "repo")
        cases = matrix(repo)
        render_round(repo, cases)  # warm imports and the schema validator
        floor_round(repo, cases)
        renders, validations, floors = [], [], []
        for _ in range(args.rounds):
            render, validate, _steps = render_round(repo, cases)
            renders.append(render)
            validations.append(validate)
            floors.append(floor_round(repo, cases))
    render, validate, floor = (statistics.median(x) for x in (renders, validations, floors))
    print(f"cases: {len(cases)} ({len(uploader_yamls())} files x {len(CASES)} situations)")
    print(
        f"render (load, filter, expand, dump): {render * 1000:8.1f} ms  (median of {args.rounds})"
    )
    print(f"schema validation:                   {validate * 1000:8.1f} ms")
    print(f"floor (CSafeLoader + CSafeDumper):   {floor * 1000:8.1f} ms")
    print(f"render / floor: {render / floor:.2f}x (goal <= 1.5x)")


if __name__ == "__main__":
    main()
