"""The compile-time aspect: cold compiles timed, each in a fresh Inductor cache (run.py), recorded (judge.py); in
compare measured A/B against the compile-time threshold."""
