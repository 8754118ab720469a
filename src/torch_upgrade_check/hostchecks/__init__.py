"""The checks the orchestrator runs on the host, beside the workers: the team's stack (resolve, imports, abi, api)
and the team's own pytest, each with the torch under test (never imports torch)."""
