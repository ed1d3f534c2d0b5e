"""Pipeline rendering shared by `upload-pipeline`, `lint-pipelines`, the bootstraps and `plan`.

`model` types pipelines, `ifexpr` reads and writes `if` strings, `render` and
`bootstrap_mode` are the uploader's pure rules, `upload` the task layer;
`registries`, `markers`, `sourcefilter` and `mirror` hold the registries, diff
filter and hardware expansion; `files` reads a checkout without hangs.
"""
