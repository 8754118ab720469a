"""The orchestrator's process side: interpreters, worker processes, timeouts (never imports torch)."""
