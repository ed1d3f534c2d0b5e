"""Pipeline rendering shared by `upload-pipeline`, `lint-pipelines`, the bootstrap and `plan`.

Public API (pure functions unless noted; import the submodule you need):

* `ci.pipeline.ifexpr` — Buildkite `if` strings: `parse`, `render`, `evaluate`,
  `check`, `is_evaluable`, `Context.of(branch, labels, env)`, and builders
  (`env_eq`, `env_ne`, `branch_eq`, `branch_ne`, `label`, `all_of`, `any_of`,
  `paren`). Nothing else parses `if` strings.
* `ci.pipeline.render.render_test_pipeline(document, scope=, changed=,
  registries=, mirror_hw=, pipeline_path=)` — test mode of the uploader;
  returns `Rendered` (`pipeline`, `kept`, `dropped` with reasons, `log`,
  `problems`, `bypassed_by`; `raise_problems()` exits 1 with every problem).
* `ci.pipeline.registries.Registries.for_repo(repo)` / `.from_data(...)` — the
  source-dependency, preset and pytest-marker registries, each read once,
  lazily (I/O on first use).
* `ci.pipeline.sourcefilter` — `prefixes_of`, `path_matches`, `matches`,
  `bypass`, `step_label`.
* `ci.pipeline.mirror` — `parse_mirror_hw`, `m_expressions`, `read_marks`,
  `mirror_chips`, `compose_preset`, `expand`, `apply_preset`, `HF_EXPORT`.
* `ci.pipeline.markers` — `load_markers(repo)`, `parse_pyproject`, `MarkerRegistry`.
* `ci.schema.schema_problems(pipeline)` — schema errors at the field.
* `ci.pipeline.upload` — the task layer (`upload_pipeline`, `render_file`, and
  `emit`: schema check, then upload or print, for every pipeline we produce);
  `ci.pipeline.scope` — `choose` and `auto_scope`; `ci.pipeline.lint`.
* `ci.pipeline.commands` — `step_commands(step, source)` / `problems`: a step's
  `command`/`commands` is a string or a list of strings (every consumer asks).
* `ci.pipeline.judge.file_problems(rel, path, documents)` — what the task that
  consumes a `.buildkite/` file says about it (the gates ask).
* `ci.pipeline.files` — `read_text`, `check_readable`, `walk`, `given`,
  `realpath`: reading and walking a checkout without hangs or tracebacks
  (YAML itself: `ci.yamlio`, which bounds aliases and refuses duplicate keys).
* `ci.pipeline.bootstrap_mode` — bootstrap-upload-steps.yml: `gates(decision,
  platform)` (the original's `if` strings as ifexpr trees), `render_bootstrap`.
"""
