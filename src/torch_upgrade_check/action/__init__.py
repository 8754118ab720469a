"""The action's step in parts: its inputs, the CLI command they ask for, the steps beside it, the bisection."""
