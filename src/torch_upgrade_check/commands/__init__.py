"""The subcommands, one module each (run, compare, bisect, report, init, merge): settings in, exit code out (no torch).

settings.py builds each command's frozen settings from its parsed flags, argv.py turns settings back into a command
line, common.py ends a command (report, exit code); cli.py parses, builds the settings and dispatches.
"""
