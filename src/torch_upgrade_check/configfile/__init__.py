"""torch-upgrade-check.yml read into a frozen Config (config.py): nodes with line numbers, then each section."""
