"""Pipeline rendering shared by `upload-pipeline`, `lint-pipelines`, the bootstraps and `plan`.

`render` and `bootstrap_mode` are the uploader's pure rules; `upload` is the task
layer, whose `emit` is the one way out for every pipeline.
"""
