"""Gates over a target checkout (`--repo`), static scans that never import its code (torch)."""
