"""Pipeline rendering shared by `upload-pipeline`, `lint-pipelines`, the bootstraps and `plan`.

`model` types pipelines and `ifexpr` is the one reader and writer of `if`
strings; `render` (test mode) and `bootstrap_mode` are the uploader's pure
rules, fed by `upload`, the task layer whose `emit` is the way out for every
pipeline; `registries`, `markers`, `sourcefilter` and `mirror` hold the
registries, the diff filter and the hardware expansion; `files` reads a
checkout without hangs or tracebacks.
"""
