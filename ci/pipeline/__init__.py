"""Pipeline rendering shared by `upload-pipeline`, `lint-pipelines`, the bootstraps and `plan`.

`render` (test mode) and `bootstrap_mode` are the uploader's pure rules, fed by
`upload`, whose `emit` is the way out for every pipeline we produce.
"""
